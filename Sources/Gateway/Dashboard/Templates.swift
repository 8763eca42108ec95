import Mustache

/// The dashboard's pages as Mustache templates, compiled into the binary (see
/// docs/architecture.md, "The dashboard": one static executable to install, nothing to
/// find on disk at run time). `{{x}}` escapes HTML; `{{{x}}}` is only used for markup
/// the gateway made itself (a page's body, the QR code's SVG, a chart).
enum Templates {
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        for (name, text) in Self.all {
            do { try library.register(text, named: name) } catch { fatalError("dashboard template \(name) does not parse: \(error)") }
        }
        return library
    }()

    static func render(_ name: String, _ data: [String: Any]) -> String {
        Self.library.render(data, withTemplate: name) ?? ""
    }

    static let all: [String: String] = [
        "layout": layout, "signin": signIn, "overview": overview, "overviewLive": overviewLive,
        "devices": devices, "devicesLive": devicesLive, "pair": pair, "pairLive": pairLive, "apps": apps, "appsLive": appsLive,
        "reports": reports, "digest": digest, "message": message, "activity": activity, "activityLive": activityLive, "settings": settings,
        "child": child, "childLive": childLive, "request": request, "choreWaiting": choreWaiting,
    ]

    static let layout = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="color-scheme" content="light dark">
        <title>{{title}} · ScreenTime Rewards</title>
        <link rel="stylesheet" href="/assets/dashboard.css">
        <link rel="icon" href="/assets/icon.svg" type="image/svg+xml">
        <script src="/assets/dashboard.js" defer></script>
        </head>
        <body>
        <a class="skip" href="#main">Skip to content</a>
        <header class="top">
          <span class="brand">ScreenTime Rewards</span>
          {{#signedIn}}
          <nav aria-label="Main">
            <a href="/" {{#navOverview}}aria-current="page"{{/navOverview}}>Overview</a>
            <a href="/apps" {{#navApps}}aria-current="page"{{/navApps}}>Apps</a>
            <a href="/reports" {{#navReports}}aria-current="page"{{/navReports}}>Reports</a>
            <a href="/devices" {{#navDevices}}aria-current="page"{{/navDevices}}>Devices</a>
            <a href="/activity" {{#navActivity}}aria-current="page"{{/navActivity}}>Activity</a>
            <a href="/settings" {{#navSettings}}aria-current="page"{{/navSettings}}>Settings</a>
          </nav>
          <form method="post" action="/signout" class="signout">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <button type="submit" class="link">Sign out</button>
          </form>
          {{/signedIn}}
        </header>
        <main id="main" tabindex="-1">
        {{{body}}}
        </main>
        <footer>
          {{#timeZone}}<p>Times in {{timeZone}}.</p>{{/timeZone}}
          <p id="live-status" class="live-status" role="status" aria-live="polite"></p>
        </footer>
        </body>
        </html>
        """#

    static let signIn = #"""
        <h1>Sign in</h1>
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        <p>This browser becomes one of your family's parent devices. Use the enrollment code a parent
        made with <code>screentimectl parent invite</code> (or from the Devices page); it works once.</p>
        <form method="post" action="/signin" class="stack">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <label for="family">Family</label>
          <input id="family" name="family" value="{{family}}" required autocomplete="off" autocapitalize="none" spellcheck="false">
          <label for="code">Enrollment code</label>
          <input id="code" name="code" value="{{code}}" required autocomplete="off" autocapitalize="none" spellcheck="false">
          <label for="deviceName">Name for this browser</label>
          <input id="deviceName" name="deviceName" value="{{deviceName}}" required maxlength="64">
          <label for="displayName">Your name <span class="hint">(optional)</span></label>
          <input id="displayName" name="displayName" value="{{displayName}}" maxlength="64">
          <button type="submit" id="signin">Sign in</button>
        </form>
        """#

    static let overview = #"""
        <h1>Overview</h1>
        {{#notice}}<p class="notice" role="status" id="notice">{{notice}}</p>{{/notice}}
        <p class="hint">Today, {{today}}. Updates by itself as the children's devices report.</p>
        <div id="live" data-live="/?fragment=1" aria-live="polite">{{{live}}}</div>
        """#

    static let overviewLive = #"""
        {{^children}}
        <section class="empty">
          <h2>No children yet</h2>
          <p>Pair a child's device on the <a href="/devices">Devices</a> page; its day will show here.</p>
        </section>
        {{/children}}
        {{#hasRequests}}
        <section class="card requests" aria-labelledby="requests-heading">
          <h2 id="requests-heading">Asking for more time</h2>
          <ul class="requests">{{#requests}}{{> request}}{{/requests}}</ul>
        </section>
        {{/hasRequests}}
        {{#hasWaitingChores}}
        <section class="card requests" aria-labelledby="chores-waiting-heading">
          <h2 id="chores-waiting-heading">Chores to approve</h2>
          <ul class="requests" id="overview-chores">{{#waitingChores}}{{> choreWaiting}}{{/waitingChores}}
          </ul>
        </section>
        {{/hasWaitingChores}}
        <div class="cards">
        {{#children}}
        <section class="card child" aria-labelledby="child-{{id}}" data-child="{{id}}">
          <h2 id="child-{{id}}">{{name}}</h2>
          <dl class="figures">
            <div><dt>Learning today</dt><dd class="learning" data-field="learning">{{learning}}</dd></div>
            <div><dt>Reward today</dt><dd data-field="reward">{{reward}}</dd></div>
            <div><dt>Points earned today</dt><dd data-field="pointsToday">{{pointsToday}}</dd></div>
            <div><dt>Points</dt><dd><span data-field="points">{{points}}</span> <span class="hint">worth <span data-field="worth">{{worth}}</span></span></dd></div>
            <div><dt>Reward time used</dt><dd data-field="used">{{used}}</dd></div>
            <div><dt>Earned time left</dt><dd data-field="balance">{{balance}}</dd></div>
            <div><dt>Reward apps</dt><dd data-field="shield">{{#shielded}}<span class="badge warn">{{shieldWords}}</span>{{/shielded}}{{^shielded}}<span class="badge ok">Open</span>{{/shielded}}</dd></div>
          </dl>
          <p><a href="/children/{{id}}" class="manage" id="manage-{{id}}">Give time, pause, limits and history for {{name}}</a></p>
          <p class="sync">Last sync: {{#lastSync}}<time datetime="{{lastSyncISO}}" title="{{lastSyncTime}}" data-field="lastSync">{{lastSync}}</time>{{/lastSync}}{{^lastSync}}<span data-field="lastSync">never</span>{{/lastSync}}
          {{^hasDevices}} · no device paired{{/hasDevices}}</p>
        </section>
        {{/children}}
        </div>
        """#

    /// One request for more time; open ones with the Approve and Deny form (`back`: the
    /// page to return to).
    /// A chore done and waiting for a parent, with Approve and Send back (the Overview's, a child's page's).
    static let choreWaiting = #"""
        <li class="request" data-completion="{{id}}">
          <p><strong>{{sentence}}</strong> <span class="hint" title="{{when}}">{{ago}}</span></p>
          <form method="post" action="/children/{{child}}/chore-answer" class="answer">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="completion" value="{{id}}">
            <label>Reason <input name="reason" maxlength="200" placeholder="only to send back"></label>
            <span class="buttons">
              <button type="submit" name="decision" value="approve" class="approve">Approve</button>
              <button type="submit" name="decision" value="reject" class="secondary reject">Send back</button>
            </span>
          </form>
        </li>
        """#

    static let request = #"""
        <li class="request" data-request="{{id}}" data-status="{{status}}">
          <p><strong>{{sentence}}</strong> <span class="hint"><span title="{{when}}">{{ago}}</span>{{#device}} · from {{device}}{{/device}}{{#whilePaused}} · while paused{{/whilePaused}}</span></p>
          {{#open}}
          <form method="post" action="/requests/answer" class="answer">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="request" value="{{id}}">
            <input type="hidden" name="back" value="{{back}}">
            <label>Minutes <input name="minutes" type="number" min="1" max="1440" value="{{minutes}}" inputmode="numeric" required></label>
            <label>Reply <input name="reply" maxlength="200" placeholder="optional"></label>
            <span class="buttons">
              <button type="submit" name="decision" value="approve" class="approve">Approve</button>
              <button type="submit" name="decision" value="deny" class="secondary deny">Deny</button>
            </span>
          </form>
          <p class="hint">Expires {{expires}} if nobody answers.</p>
          {{/open}}
        </li>
        """#

    static let child = #"""
        <p class="back"><a href="/">← Overview</a></p>
        <h1>{{name}}</h1>
        {{#notice}}<p class="notice" role="status" id="notice">{{notice}}</p>{{/notice}}
        <div id="live" data-live="/children/{{id}}?fragment=1" aria-live="polite">{{{live}}}</div>
        <div class="cards">
        <section class="card" aria-labelledby="time-heading">
          <h2 id="time-heading">Give or take away time</h2>
          <form method="post" action="/children/{{id}}/time" class="stack" id="time-form">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <label for="time-minutes">Minutes of reward time</label>
            <input id="time-minutes" name="minutes" type="number" min="1" max="1440" value="15" inputmode="numeric" required>
            <label for="time-reason">Reason <span class="hint">(optional; {{name}} sees it)</span></label>
            <input id="time-reason" name="reason" maxlength="200" placeholder="bonus for the dishes">
            <span class="buttons">
              <button type="submit" name="direction" value="add" id="add-time">Add</button>
              <button type="submit" name="direction" value="take" class="secondary" id="take-time">Take away</button>
            </span>
            <p class="hint">Taking away never goes below zero.</p>
          </form>
        </section>
        <section class="card" aria-labelledby="pause-heading">
          <h2 id="pause-heading">Pause reward apps</h2>
          <form method="post" action="/children/{{id}}/pause" class="stack" id="pause-form">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <label for="pause-minutes">For</label>
            <select id="pause-minutes" name="minutes">
              <option value="15">15 minutes</option><option value="30">30 minutes</option><option value="60" selected>1 hour</option>
              <option value="120">2 hours</option><option value="">Until I resume them</option>
            </select>
            <label for="pause-reason">Reason <span class="hint">(optional)</span></label>
            <input id="pause-reason" name="reason" maxlength="200" placeholder="dinner">
            <button type="submit" id="pause">Pause now</button>
            <p class="hint">Shields {{name}}'s reward apps at once, whatever time is left.</p>
          </form>
        </section>
        <section class="card downtime" aria-labelledby="downtime-heading">
          <h2 id="downtime-heading">Downtime</h2>
          <p id="downtime-state">{{downtimeSentence}}</p>
          {{#hasDowntime}}<ul class="windows" id="downtime-windows">{{#downtimeWindows}}<li>{{.}}</li>{{/downtimeWindows}}</ul>
          {{#downtimeAllowed}}<p id="downtime-allowed">Always allowed: {{downtimeAllowed}}</p>{{/downtimeAllowed}}{{/hasDowntime}}
          <details{{^hasDowntime}} open{{/hasDowntime}}>
            <summary>{{#hasDowntime}}Change the schedule{{/hasDowntime}}{{^hasDowntime}}Set a schedule{{/hasDowntime}}</summary>
            <form method="post" action="/children/{{id}}/downtime" class="stack" id="downtime-form">
              <input type="hidden" name="csrf" value="{{csrf}}">
              <p class="hint">During downtime {{name}}'s reward apps are shielded whatever time is left. Times are the family's; an end before the start is the next morning.</p>
              {{#windowRows}}
              <fieldset class="window" id="window-{{index}}">
                <legend>Window {{number}}</legend>
                <span class="days">{{#days}}<label class="day"><input type="checkbox" name="w{{index}}-{{day}}" value="on" aria-label="{{name}}" {{#checked}}checked{{/checked}}> {{short}}</label>{{/days}}</span>
                <span class="times">
                  <label>From <input type="time" name="w{{index}}-start" value="{{start}}"></label>
                  <label>to <input type="time" name="w{{index}}-end" value="{{end}}"></label>
                </span>
              </fieldset>
              {{/windowRows}}
              {{#hasAllowApps}}
              <fieldset class="allow">
                <legend>Always allowed</legend>
                {{#allowApps}}<label class="check"><input type="checkbox" name="allow-{{index}}" value="{{app}}" {{#checked}}checked{{/checked}}> {{name}}</label>{{/allowApps}}
              </fieldset>
              {{/hasAllowApps}}
              <label class="check"><input type="checkbox" name="liftOnApproval" value="true" {{#liftOnApproval}}checked{{/liftOnApproval}}> Approving a request for more time lifts downtime for that time</label>
              <span class="buttons">
                <button type="submit" id="save-downtime">Save downtime</button>
                {{#hasDowntime}}<button type="submit" name="off" value="1" class="secondary" id="downtime-off">Turn off</button>{{/hasDowntime}}
              </span>
            </form>
          </details>
        </section>
        <section class="card chores" aria-labelledby="chores-heading">
          <h2 id="chores-heading">Chores</h2>
          {{#hasWaitingChores}}
          <ul class="requests" id="chores-waiting">{{#waitingChores}}{{> choreWaiting}}{{/waitingChores}}
          </ul>
          {{/hasWaitingChores}}
          {{^hasChores}}<p class="empty">No chores yet.</p>{{/hasChores}}
          {{#hasChores}}
          <ul class="chore-list" id="chore-list">{{#chores}}
            <li><span><strong>{{title}}</strong> <span class="hint">{{points}} points · {{when}}</span></span>
              <span class="badge {{todayClass}}">{{today}}</span>
              <form method="post" action="/children/{{childId}}/chore-remove" class="inline">
                <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="chore" value="{{id}}">
                <button type="submit" class="link" aria-label="Remove {{title}}">Remove</button>
              </form>
            </li>{{/chores}}
          </ul>
          {{/hasChores}}
          {{#hasAnsweredChores}}<p class="hint">Lately:</p><ul class="windows">{{#answeredChores}}<li>{{sentence}} <span class="hint">{{when}}</span></li>{{/answeredChores}}</ul>{{/hasAnsweredChores}}
          <details>
            <summary>Add a chore</summary>
            <form method="post" action="/children/{{id}}/chores" class="stack" id="chore-form">
              <input type="hidden" name="csrf" value="{{csrf}}">
              <label for="chore-title">Chore</label>
              <input id="chore-title" name="title" maxlength="80" placeholder="Tidy your room" required>
              <label for="chore-points">Points</label>
              <input id="chore-points" name="points" type="number" min="1" max="10000" value="10" inputmode="numeric" required>
              <label for="chore-repeat">How often</label>
              <select id="chore-repeat" name="repeat">
                <option value="daily">Every day</option><option value="weekly">On the days ticked</option><option value="once">Once</option>
              </select>
              <span class="days">{{#choreDays}}<label class="day"><input type="checkbox" name="day-{{day}}" value="on" aria-label="{{name}}"> {{short}}</label>{{/choreDays}}</span>
              <button type="submit" id="add-chore">Add chore</button>
            </form>
          </details>
        </section>
        <section class="card own-rules" aria-labelledby="rules-heading">
          <h2 id="rules-heading">{{name}}'s own rules</h2>
          {{^hasOwnRules}}<p class="empty" id="no-own-rules">{{name}} follows the family's rules for every app.</p>{{/hasOwnRules}}
          {{#hasOwnRules}}
          <ul class="chore-list" id="own-rules">{{#ownRules}}
            <li><span><strong>{{name}}</strong>: {{words}} <span class="hint">(the family's: {{familyWords}})</span></span>
              <form method="post" action="/children/{{childId}}/rule-reset" class="inline">
                <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="bundleId" value="{{bundleId}}">
                <button type="submit" class="link" aria-label="Use the family's rule for {{name}}">Use the family's</button>
              </form>
            </li>{{/ownRules}}
          </ul>
          {{/hasOwnRules}}
          {{#hasRuleApps}}
          <details>
            <summary>Set a rule for {{name}} only</summary>
            <form method="post" action="/children/{{id}}/rules" class="stack" id="own-rule-form">
              <input type="hidden" name="csrf" value="{{csrf}}">
              <label for="rule-app">App</label>
              <select id="rule-app" name="bundleId">{{#ruleApps}}<option value="{{bundleId}}">{{name}}</option>{{/ruleApps}}</select>
              <label for="rule-category">Category</label>
              <select id="rule-category" name="category"><option value="reward">Reward</option><option value="learning">Learning</option></select>
              <label for="rule-points">Points per minute <span class="hint">(learning apps)</span></label>
              <input id="rule-points" name="pointsPerMinute" type="number" min="0" max="1000" inputmode="numeric">
              <label class="check"><input id="rule-blocked" name="blocked" type="checkbox" value="true"> Blocked on {{name}}'s devices</label>
              <button type="submit" id="save-own-rule">Save rule</button>
            </form>
          </details>
          {{/hasRuleApps}}
        </section>
        <section class="card" aria-labelledby="limits-heading">
          <h2 id="limits-heading">Limits</h2>
          <form method="post" action="/children/{{id}}/limits" class="stack" id="limits-form">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <label for="cap">Most reward time in a day <span class="hint">(minutes; empty: no limit)</span></label>
            <input id="cap" name="cap" type="number" min="1" max="1440" value="{{cap}}" inputmode="numeric">
            <label class="check"><input id="weekly" name="weeklyExpiry" type="checkbox" value="true" {{#weeklyExpiry}}checked{{/weeklyExpiry}}> Time not spent by Sunday night expires</label>
            <button type="submit" id="save-limits">Save</button>
          </form>
        </section>
        <section class="card" aria-labelledby="redeem-heading">
          <h2 id="redeem-heading">Redeem points</h2>
          <form method="post" action="/children/{{id}}/redeem" class="stack" id="redeem-form">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="key" value="{{redeemKey}}">
            <label for="redeem-points">Points</label>
            <input id="redeem-points" name="points" type="number" min="1" max="100000" inputmode="numeric" required>
            <label for="redeem-reason">For</label>
            <input id="redeem-reason" name="reason" maxlength="200" placeholder="movie night" required>
            <button type="submit" id="redeem">Redeem</button>
          </form>
        </section>
        <section class="card danger-zone" aria-labelledby="remove-heading">
          <h2 id="remove-heading">Remove {{name}}</h2>
          {{#admin}}
          <p>{{removeWarning}}</p>
          <form method="post" action="/children/{{id}}/remove" data-confirm="{{removeWarning}}">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <button type="submit" class="danger" id="remove-child">Remove {{name}}</button>
          </form>
          {{/admin}}
          {{^admin}}<p class="hint" id="remove-admins-only">Only an admin parent can remove a child.</p>{{/admin}}
        </section>
        </div>
        """#

    static let childLive = #"""
        <section class="card" aria-labelledby="now-heading">
          <h2 id="now-heading">Now</h2>
          <dl class="figures">
            <div><dt>Earned time left</dt><dd data-field="balance">{{balance}}</dd></div>
            <div><dt>Points</dt><dd data-field="points">{{points}}</dd></div>
            <div><dt>Learning today</dt><dd data-field="learningToday">{{learningToday}}</dd></div>
            <div><dt>Reward time today</dt><dd data-field="usedToday">{{usedToday}}</dd></div>
            <div><dt>Reward apps</dt><dd data-field="shield">{{#shielded}}<span class="badge warn">{{shield}}</span>{{/shielded}}{{^shielded}}<span class="badge ok">Open</span>{{/shielded}}</dd></div>
          </dl>
          {{#paused}}
          <form method="post" action="/children/{{id}}/resume" id="resume-form">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <button type="submit" id="resume">Resume now</button>
          </form>
          {{/paused}}
          {{#hasTodayApps}}
          <h3>Apps today</h3>
          <ul class="today-apps">{{#todayApps}}<li>{{name}} <span class="hint">{{category}}</span>: {{time}}</li>{{/todayApps}}</ul>
          {{/hasTodayApps}}
        </section>
        <section class="card" aria-labelledby="requests-heading">
          <h2 id="requests-heading">Requests</h2>
          {{^requests}}<p class="empty">{{name}} has not asked for more time.</p>{{/requests}}
          <ul class="requests">{{#requests}}{{> request}}{{/requests}}</ul>
        </section>
        <section class="card" aria-labelledby="ledger-heading">
          <h2 id="ledger-heading">Points</h2>
          {{^ledger}}<p class="empty">Nothing yet.</p>{{/ledger}}
          {{#hasLedger}}
          <div class="table-wrap"><table class="stack">
            <thead><tr><th scope="col">When</th><th scope="col">What</th><th scope="col">Points</th><th scope="col">Why</th></tr></thead>
            <tbody>{{#ledger}}<tr><td data-label="When">{{when}}</td><td data-label="What">{{what}}</td><td data-label="Points">{{points}}</td><td data-label="Why">{{reason}}</td></tr>{{/ledger}}</tbody>
          </table></div>
          {{/hasLedger}}
        </section>
        <section class="card" aria-labelledby="devices-heading">
          <h2 id="devices-heading">Devices</h2>
          {{^devices}}<p class="empty">No device paired: pair one on the <a href="/devices">Devices</a> page.</p>{{/devices}}
          <ul class="child-devices">{{#devices}}<li data-device="{{deviceId}}">{{name}} <span class="hint">{{state}}</span>
            {{#active}}<form method="post" action="/children/{{id}}/resync" class="inline">
              <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="deviceId" value="{{deviceId}}">
              <button type="submit" class="secondary resync">Send the rules again</button>
            </form>{{/active}}</li>{{/devices}}</ul>
        </section>
        """#

    static let devices = #"""
        <h1>Devices</h1>
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        <div id="live" data-live="/devices?fragment=1{{#all}}&amp;all=1{{/all}}">{{{live}}}</div>
        <section class="card">
          <h2>Pair a child's device</h2>
          <form method="post" action="/devices/pair" class="stack">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <label for="childId">Child's id <span class="hint">(letters, digits, - or _; e.g. emma)</span></label>
            <input id="childId" name="childId" required pattern="[A-Za-z0-9_\-]{1,64}" autocapitalize="none" spellcheck="false">
            <label for="childName">Child's name <span class="hint">(optional)</span></label>
            <input id="childName" name="childName" maxlength="64">
            <button type="submit" id="pair-child">Show the pairing code</button>
          </form>
        </section>
        <section class="card">
          <h2>Invite a parent</h2>
          {{#admin}}
          <p>Another parent (or another browser) signs in with a one-time code.</p>
          <form method="post" action="/devices/invite-parent">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <button type="submit" id="invite-parent">Make a code</button>
          </form>
          {{/admin}}
          {{^admin}}<p id="invite-admin-only">Another parent signs in with a one-time code, which only an admin parent of the family can make.</p>{{/admin}}
          {{#parentCode}}
          <p>Code for family <code>{{family}}</code>, valid until {{expires}}: <code id="parent-code">{{code}}</code></p>
          <p>Or open: <a href="{{link}}" id="parent-link">{{link}}</a></p>
          {{/parentCode}}
        </section>
        """#

    static let devicesLive = #"""
        <section class="card">
        <h2>The family's devices</h2>
        {{^devices}}<p class="empty">No devices.</p>{{/devices}}
        {{#hasDevices}}
        <div class="table-wrap">
        <table class="stack">
          <caption class="visually-hidden">Devices, their state, whether each has the family's rules, and when each was last seen</caption>
          <thead><tr><th scope="col">Device</th><th scope="col">Role</th><th scope="col">Child</th><th scope="col">State</th><th scope="col">Rules</th><th scope="col">Last seen</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
          <tbody>
          {{#devices}}
          <tr data-device="{{deviceId}}">
            <th scope="row">{{name}}{{#me}} <span class="badge">this browser</span>{{/me}}{{^me}}{{#browser}} <span class="badge">browser</span>{{/browser}}{{/me}}<br><span class="hint">{{deviceId}}{{#appVersion}} · <span data-field="app-version">{{appVersion}}</span>{{/appVersion}}</span></th>
            <td data-label="Role">{{role}}</td><td data-label="Child">{{child}}</td>
            <td data-label="State" data-field="status">{{#active}}<span class="badge ok">active</span>{{/active}}{{#clockOff}} <span class="badge warn" data-field="clock" title="Its usage is placed by the server's time; setting the date and time to automatic fixes it">clock {{clockOff}}</span>{{/clockOff}}{{#revoked}}<span class="badge off">revoked</span>{{/revoked}}{{^active}}{{^revoked}}<span class="badge warn">{{status}}</span>{{/revoked}}{{/active}}</td>
            <td data-label="Rules" data-field="rules">{{rules}}</td>
            <td data-label="Last seen" data-field="seen">{{#connected}}<span class="badge ok">connected now</span>{{/connected}}{{^connected}}{{#lastSeen}}<span title="{{lastSeenTime}}">{{lastSeen}}</span>{{/lastSeen}}{{^lastSeen}}—{{/lastSeen}}{{/connected}}</td>
            <td>{{#revocable}}
              <form method="post" action="/devices/revoke" data-confirm="Revoke {{name}}? It is cut off at once.">
                <input type="hidden" name="csrf" value="{{csrf}}">
                <input type="hidden" name="deviceId" value="{{deviceId}}">
                <button type="submit" class="danger" aria-label="Revoke {{name}}">Revoke</button>
              </form>{{/revocable}}</td>
          </tr>
          {{/devices}}
          </tbody>
        </table>
        </div>
        {{/hasDevices}}
        {{#hasHiddenBrowsers}}<p class="hint"><a href="/devices?all=1" id="show-signed-out">Show {{hiddenBrowsers}} signed-out browser{{hiddenPlural}}</a></p>{{/hasHiddenBrowsers}}
        </section>
        """#

    static let pair = #"""
        <h1>Pair {{childName}}'s device</h1>
        <div id="live" data-live="/devices/pair/{{invitationId}}?fragment=1" data-poll="2000">{{{live}}}</div>
        <p><a href="/devices">Back to devices</a></p>
        """#

    static let pairLive = #"""
        {{#open}}
        <section class="card pair">
          <h2>1. Scan this code with the child's device</h2>
          <figure class="qr">{{{qr}}}<figcaption>Valid until {{expires}}.</figcaption></figure>
          <p>Can't scan? Give the device this link:</p>
          <p><code id="pair-uri" class="wrap">{{uri}}</code></p>
          <p class="waiting" role="status">Waiting for the child's device to accept…</p>
        </section>
        {{/open}}
        {{#accepted}}
        <section class="card pair">
          <h2>2. Compare the code</h2>
          <p>{{deviceName}} accepted. Its screen shows a row of pictures: they must be the same as these, in the same order.</p>
          {{#shortCode}}
          <p class="emoji" id="short-code" aria-label="{{names}}">{{emoji}}</p>
          <p class="hint" id="short-code-names">{{names}}</p>
          {{/shortCode}}
          {{^shortCode}}<p class="error" role="alert">This browser no longer knows the invitation's secret (the server restarted), so it cannot show the code. Reject and pair again.</p>{{/shortCode}}
          <div class="actions">
            <form method="post" action="/devices/pair/{{invitationId}}/confirm"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" id="confirm">They match: confirm</button></form>
            <form method="post" action="/devices/pair/{{invitationId}}/reject"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" id="reject" class="danger">They differ: reject</button></form>
          </div>
        </section>
        {{/accepted}}
        {{#confirmed}}<p class="notice" role="status" id="pair-done">{{deviceName}} is paired with {{childName}}.</p>{{/confirmed}}
        {{#rejected}}<p class="error" role="alert" id="pair-done">{{deviceName}} was rejected; it cannot use the server.</p>{{/rejected}}
        {{#ended}}<p class="error" role="alert" id="pair-done">This invitation is {{status}}. <a href="/devices">Pair again</a>.</p>{{/ended}}
        """#

    static let apps = #"""
        <h1>Apps</h1>
        {{#notice}}<p class="notice" role="status" id="notice">{{notice}}</p>{{/notice}}
        <form method="get" action="/apps" class="filters" role="search">
          <label for="q">Search</label>
          <input id="q" name="q" value="{{q}}" type="search">
          <label for="category-filter">Category</label>
          <select id="category-filter" name="category">
            <option value="" {{#allCategories}}selected{{/allCategories}}>All</option>
            <option value="learning" {{#filterLearning}}selected{{/filterLearning}}>Learning</option>
            <option value="reward" {{#filterReward}}selected{{/filterReward}}>Reward</option>
          </select>
          <button type="submit">Filter</button>
        </form>
        <section class="card">
          <h2>Rules</h2>
          {{^rules}}<p class="empty">No app rules{{#filtered}} match{{/filtered}} yet. Add one below.</p>{{/rules}}
          {{#rules}}
          <form method="post" action="/apps" class="rule" data-app="{{bundleId}}" aria-label="Rule for {{name}}">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="bundleId" value="{{bundleId}}">
            <input type="hidden" name="displayName" value="{{name}}">
            <p class="rule-name"><strong>{{name}}</strong> <span class="hint">{{bundleId}}</span></p>
            <label>Category
              <select name="category"><option value="learning" {{#learning}}selected{{/learning}}>Learning</option><option value="reward" {{#reward}}selected{{/reward}}>Reward</option></select>
            </label>
            <label class="slider">Points per minute <input name="pointsPerMinute" type="range" min="0" max="{{pointsMax}}" step="1" value="{{pointsPerMinute}}" data-shows="ppm-{{key}}">
              <output id="ppm-{{key}}" class="slider-value">{{pointsPerMinute}}</output></label>
            <label class="check"><input name="enabled" type="checkbox" value="true" {{#enabled}}checked{{/enabled}}> Counts</label>
            <label class="check"><input name="blocked" type="checkbox" value="true" {{#blocked}}checked{{/blocked}}> Blocked</label>
            <button type="submit">Save</button>
            {{#hasOverrides}}<p class="overrides hint">Own rules: {{#overrides}}<a href="/children/{{child}}#rules-heading">{{childName}}</a>: {{words}}. {{/overrides}}The rest of the family follows this one.</p>{{/hasOverrides}}
          </form>
          {{/rules}}
        </section>
        <section class="card">
          <h2>Add an app</h2>
          <form method="post" action="/apps" class="stack" id="add-app">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <label for="new-bundle">Bundle id</label>
            <input id="new-bundle" name="bundleId" required pattern="[A-Za-z0-9._\-]{1,200}" autocapitalize="none" spellcheck="false" placeholder="org.khanacademy">
            <label for="new-name">Name <span class="hint">(optional)</span></label>
            <input id="new-name" name="displayName" maxlength="64">
            <label for="new-category">Category</label>
            <select id="new-category" name="category"><option value="learning">Learning</option><option value="reward">Reward</option></select>
            <label for="new-points">Points per minute <output id="new-points-value" class="slider-value">1</output></label>
            <input id="new-points" name="pointsPerMinute" type="range" min="0" max="20" step="1" value="1" data-shows="new-points-value">
            <label class="check"><input name="enabled" type="checkbox" value="true" checked> Counts</label>
            <label class="check"><input name="blocked" type="checkbox" value="true" id="new-blocked"> Blocked</label>
            <button type="submit" id="add-app-save">Save</button>
          </form>
        </section>
        <div id="live" data-live="/apps?fragment=1">{{{live}}}</div>
        """#

    static let appsLive = #"""
        <section class="card">
          <h2>Sent to the children's devices</h2>
          {{^commands}}<p class="empty">Nothing sent yet. Saving a rule sends it to every paired device.</p>{{/commands}}
          {{#hasCommands}}
          <ul class="commands">
          {{#commands}}
            <li data-command="{{id}}">{{what}} → {{device}}: {{#executed}}<span class="badge ok" data-status="executed">executed</span> <span class="hint">{{executedAt}}</span>{{/executed}}{{#pending}}<span class="badge warn" data-status="pending">pending</span>{{/pending}}{{#failed}}<span class="badge off" data-status="failed">failed</span> {{error}}{{/failed}} <span class="hint">sent {{created}}</span></li>
          {{/commands}}
          </ul>
          {{/hasCommands}}
        </section>
        """#

    static let digest = #"""
        <p class="back"><a href="/reports">← Reports</a></p>
        <h1>{{title}}</h1>
        <p class="hint">What each parent gets once a week, with the week before beside it. <a href="/settings">When it is sent</a></p>
        <p class="actions"><a href="/digest?through={{previous}}" id="previous-week">← The week before</a>{{#hasNext}} <a href="/digest?through={{next}}" id="next-week">The week after →</a>{{/hasNext}}</p>
        {{^hasChildren}}<p class="empty">No children yet: pair a device on the <a href="/devices">Devices</a> page.</p>{{/hasChildren}}
        <div class="cards">
        {{#children}}
        <section class="card digest" aria-labelledby="week-{{child}}" data-child="{{child}}">
          <h2 id="week-{{child}}"><a href="/children/{{child}}">{{name}}</a></h2>
          <dl class="figures">
            <div><dt>Learning</dt><dd>{{learning}}</dd><dd class="hint">{{learningChange}}</dd></div>
            <div><dt>Reward time</dt><dd>{{reward}}</dd><dd class="hint">{{rewardChange}}</dd></div>
            <div><dt>Points earned</dt><dd>{{earned}}</dd><dd class="hint">{{earnedChange}}</dd></div>
            <div><dt>Points spent</dt><dd>{{spent}}</dd></div>
            <div><dt>Chores done</dt><dd>{{chores}}</dd></div>
            <div><dt>Requests</dt><dd class="small">{{requests}}</dd></div>
          </dl>
          {{#hasTopApps}}<h3>Most used</h3><ul class="today-apps">{{#topApps}}<li>{{name}}: {{time}}</li>{{/topApps}}</ul>{{/hasTopApps}}
        </section>
        {{/children}}
        </div>
        """#

    static let reports = #"""
        <h1>Reports</h1>
        <p><a href="/digest" id="digest-link">The week's digest</a></p>
        {{^children}}<p class="empty">No children yet: pair a device on the <a href="/devices">Devices</a> page.</p>{{/children}}
        {{#hasChildren}}
        <form method="get" action="/reports" class="filters">
          <label for="child">Child</label>
          <select id="child" name="child">{{#children}}<option value="{{id}}" {{#selected}}selected{{/selected}}>{{name}}</option>{{/children}}</select>
          <label for="from">From</label><input id="from" name="from" type="date" value="{{from}}" required>
          <label for="to">To</label><input id="to" name="to" type="date" value="{{to}}" required>
          <label for="by">By</label>
          <select id="by" name="by"><option value="day" {{#byDay}}selected{{/byDay}}>Day</option><option value="week" {{#byWeek}}selected{{/byWeek}}>Week</option></select>
          <button type="submit">Show</button>
        </form>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        {{#report}}
        <section class="card">
          <h2>{{childName}}, {{from}} to {{to}}</h2>
          <p>Learning {{learning}} · Reward {{reward}} · {{points}} points</p>
          <figure class="chart">{{{chart}}}<figcaption>Learning (green) and reward (orange) time per {{period}}.</figcaption></figure>
          <p><a href="{{csvLink}}" id="csv-link" download="{{csvName}}">Download CSV</a></p>
          <div class="table-wrap"><table>
            <thead><tr><th scope="col">{{period}}</th><th scope="col">Learning</th><th scope="col">Reward</th><th scope="col">Points</th></tr></thead>
            <tbody>{{#rows}}<tr><th scope="row">{{period}}</th><td>{{learning}}</td><td>{{reward}}</td><td>{{points}}</td></tr>{{/rows}}</tbody>
          </table></div>
          <h3>Top apps</h3>
          {{^topApps}}<p class="empty">No usage in this range.</p>{{/topApps}}
          <ol>{{#topApps}}<li>{{app}} ({{category}}): {{time}}, {{points}} points</li>{{/topApps}}</ol>
        </section>
        {{/report}}
        {{/hasChildren}}
        """#

    static let activity = #"""
        <h1>Activity</h1>
        <p class="hint">The alerts sent to the family's parents (a reward limit reached, earned time used up, a device
        gone quiet: set those in <a href="/settings">Settings</a>; and always, a blocked app used anyway) and what the parents, the children (asking for
        more time) and the server did, newest first. New ones appear here as they come.</p>
        <div id="live" data-live="/activity?fragment=1">{{{live}}}</div>
        """#

    static let activityLive = #"""
        <section class="card" id="alerts" aria-labelledby="alerts-heading">
          <h2 id="alerts-heading">Alerts</h2>
          {{^hasAlerts}}<p class="empty" id="no-alerts">No alerts yet. They come when a threshold set in <a href="/settings">Settings</a> is crossed.</p>{{/hasAlerts}}
          {{#hasAlerts}}
          <ul class="alerts">{{#alerts}}<li data-alert="{{kind}}" id="{{id}}"><strong>{{title}}</strong> <span class="hint"><span title="{{when}}">{{ago}}</span>, {{when}}</span>{{#body}}<br>{{body}}{{/body}}</li>{{/alerts}}</ul>
          {{/hasAlerts}}
        </section>
        <section class="card">
          <h2>Audit log</h2>
          {{^entries}}<p class="empty">Nothing yet.</p>{{/entries}}
          {{#hasEntries}}
          <div class="table-wrap"><table class="stack">
            <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">What</th></tr></thead>
            <tbody>{{#entries}}<tr data-action="{{action}}"><td data-label="When"><span title="{{when}}">{{ago}}</span></td><td data-label="Who">{{actor}}</td><td data-label="What">{{what}}</td></tr>{{/entries}}</tbody>
          </table></div>
          {{/hasEntries}}
        </section>
        """#

    static let settings = #"""
        <h1>Settings</h1>
        {{#notice}}<p class="notice" role="status" id="notice">{{notice}}</p>{{/notice}}
        <form method="post" action="/settings" class="stack card">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <label for="timeZone">The family's time zone <span class="hint">(IANA name; days are counted in it)</span></label>
          <input id="timeZone" name="timeZone" value="{{timeZone}}" required list="zones" autocapitalize="none" spellcheck="false">
          <datalist id="zones">{{#zones}}<option value="{{.}}">{{/zones}}</datalist>
          <label for="rewardMinutes">Alert when a child's reward time in a day passes (minutes; empty: never)</label>
          <input id="rewardMinutes" name="rewardMinutes" type="number" min="1" max="1440" value="{{rewardMinutes}}" inputmode="numeric">
          <label for="noDataHours">Alert when a device sends no usage for (hours; empty: never)</label>
          <input id="noDataHours" name="noDataHours" type="number" min="1" max="720" value="{{noDataHours}}" inputmode="numeric">
          <label class="check"><input name="balanceExhausted" type="checkbox" value="true" {{#balanceExhausted}}checked{{/balanceExhausted}}> Alert when a child's earned time runs out</label>
          <label for="requestExpiryMinutes">A child's request for more time waits for an answer (minutes)</label>
          <input id="requestExpiryMinutes" name="requestExpiryMinutes" type="number" min="5" max="1440" value="{{requestExpiryMinutes}}" inputmode="numeric">
          <label for="maxOpenRequests">Requests a child may have waiting at once</label>
          <input id="maxOpenRequests" name="maxOpenRequests" type="number" min="1" max="20" value="{{maxOpenRequests}}" inputmode="numeric">
          <label class="check"><input id="digestEnabled" name="digestEnabled" type="checkbox" value="true" {{#digestEnabled}}checked{{/digestEnabled}}> Send each parent the week's digest (<a href="/digest">this week's</a>)</label>
          <label for="digestDay">On</label>
          <select id="digestDay" name="digestDay">{{#digestDays}}<option value="{{day}}" {{#selected}}selected{{/selected}}>{{name}}</option>{{/digestDays}}</select>
          <label for="digestTime">At <span class="hint">(the family's time)</span></label>
          <input id="digestTime" name="digestTime" type="time" value="{{digestTime}}" required>
          <button type="submit" id="save-settings">Save</button>
        </form>
        {{#backups}}
        <section class="card stack" id="backups" aria-labelledby="backups-heading">
          <h2 id="backups-heading">The server's backups</h2>
          {{#failing}}<p class="error" role="alert" id="backup-failing">{{failing}}</p>{{/failing}}
          {{#last}}<p id="backup-last">{{last}}</p>{{/last}}
          {{#never}}<p class="hint" id="backup-never">{{never}}</p>{{/never}}
          <p class="hint">Each archive holds the whole server, so that a new disk can take its place with every phone and tablet still paired.</p>
        </section>
        {{/backups}}
        {{#server}}
        <section class="card stack" id="server" aria-labelledby="server-heading">
          <h2 id="server-heading">The server</h2>
          <p id="server-health" class="{{#healthy}}notice{{/healthy}}{{^healthy}}error{{/healthy}}" role="status">{{health}}</p>
          <dl class="status-list">
            {{#services}}<dt>{{name}}</dt><dd id="{{id}}" {{#failed}}class="error"{{/failed}}>{{sentence}}</dd>{{/services}}
          </dl>
          <p id="server-devices">{{devices}}</p>
          {{#disk}}<p id="server-disk" {{#diskLow}}class="error"{{/diskLow}}>{{disk}}</p>{{/disk}}
          {{#certificate}}<p id="server-certificate">{{certificate}}</p>{{/certificate}}
          <p class="hint" id="server-version">{{version}} Whoever runs the server sees the same with <code>screentimectl status</code>.</p>
        </section>
        {{/server}}
        """#

    static let message = #"""
        <h1>{{heading}}</h1>
        <p class="{{kind}}" role="alert">{{text}}</p>
        <p><a href="{{back}}">{{backLabel}}</a></p>
        """#
}

/// The dashboard's stylesheet, script and icon, compiled into the binary with the
/// templates. Plain CSS and plain JavaScript: nothing to build, nothing fetched from
/// elsewhere (the home server may be offline).
enum Assets {
    static let files: [String: (type: String, body: String)] = [
        "/assets/dashboard.css": ("text/css; charset=utf-8", css),
        "/assets/dashboard.js": ("text/javascript; charset=utf-8", javaScript),
        "/assets/icon.svg": ("image/svg+xml", icon),
    ]

    static let icon = #"""
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1f5fbf"/><path d="M9 17l5 5 9-11" stroke="#fff" stroke-width="3" fill="none"/></svg>
        """#

    // Colours keep at least 4.5:1 against their background (WCAG AA), in both schemes.
    static let css = #"""
        :root { --bg: #f6f7f9; --fg: #15171a; --muted: #4a5260; --card: #fff; --line: #d5d9e0; --accent: #1f5fbf;
          --ok-bg: #e3f4e8; --ok: #17602f; --warn-bg: #fff1d6; --warn: #7a4a00; --off-bg: #fde4e4; --off: #9b1c1c; --focus: #ffbf47; }
        @media (prefers-color-scheme: dark) {
          :root { --bg: #121417; --fg: #eef0f3; --muted: #b4bcc8; --card: #1c1f24; --line: #353b45; --accent: #8cb8ff;
            --ok-bg: #173a23; --ok: #9be0b0; --warn-bg: #3d2e0f; --warn: #ffd58a; --off-bg: #431b1b; --off: #ffb4b4; }
        }
        * { box-sizing: border-box; }
        body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--fg); }
        a { color: var(--accent); }
        :focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
        .skip { position: absolute; left: -999px; top: 0; background: var(--card); padding: .5rem 1rem; }
        .skip:focus { left: .5rem; }
        .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
        header.top { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1rem; padding: .75rem 1rem; background: var(--card); border-bottom: 1px solid var(--line); }
        .brand { font-weight: 700; margin-right: auto; }
        nav { display: flex; flex-wrap: wrap; gap: .25rem; order: 3; width: 100%; }
        nav a { padding: .5rem .75rem; border-radius: .5rem; text-decoration: none; min-height: 44px; display: inline-flex; align-items: center; }
        nav a[aria-current="page"] { background: var(--accent); color: var(--card); }
        @media (min-width: 720px) { nav { order: 0; width: auto; } .brand { margin-right: 1rem; } .signout { margin-left: auto; } }
        main { max-width: 1100px; margin: 0 auto; padding: 1rem; }
        main:focus { outline: none; }
        h1 { font-size: 1.6rem; margin: .5rem 0 1rem; }
        h2 { font-size: 1.2rem; margin: 0 0 .75rem; }
        footer { max-width: 1100px; margin: 0 auto; padding: 0 1rem 2rem; color: var(--muted); font-size: .9rem; }
        .card { background: var(--card); border: 1px solid var(--line); border-radius: .75rem; padding: 1rem; margin-bottom: 1rem; }
        .cards { display: grid; gap: 1rem; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); }
        .figures { display: grid; grid-template-columns: 1fr 1fr; gap: .75rem; margin: 0; }
        .figures dt { color: var(--muted); font-size: .85rem; }
        .figures dd { margin: 0; font-size: 1.3rem; font-weight: 600; }
        .sync { color: var(--muted); margin: .75rem 0 0; }
        .hint { color: var(--muted); font-size: .9rem; font-weight: normal; }
        .badge { display: inline-block; padding: .1rem .5rem; border-radius: 1rem; font-size: .85rem; font-weight: 600; background: var(--line); color: var(--fg); }
        .badge.ok { background: var(--ok-bg); color: var(--ok); }
        .badge.warn { background: var(--warn-bg); color: var(--warn); }
        .badge.off { background: var(--off-bg); color: var(--off); }
        .notice { background: var(--ok-bg); color: var(--ok); padding: .75rem 1rem; border-radius: .5rem; }
        .error { background: var(--off-bg); color: var(--off); padding: .75rem 1rem; border-radius: .5rem; }
        .status-list { display: grid; grid-template-columns: minmax(10rem, max-content) 1fr; gap: .5rem 1rem; margin: 0; }
        .status-list dt { font-weight: 600; }
        .status-list dd { margin: 0; }
        .status-list dd.error { padding: .25rem .5rem; }
        @media (max-width: 600px) { .status-list { grid-template-columns: 1fr; gap: .15rem; } .status-list dd { margin-bottom: .5rem; } }
        .empty { color: var(--muted); }
        form.stack { display: grid; gap: .4rem; max-width: 28rem; }
        form.stack button { margin-top: .6rem; justify-self: start; }
        label { font-weight: 600; }
        label.check { font-weight: normal; display: inline-flex; gap: .4rem; align-items: center; }
        input, select, button { font: inherit; min-height: 44px; }
        input, select { padding: .4rem .6rem; border: 1px solid var(--muted); border-radius: .4rem; background: var(--card); color: var(--fg); }
        input[type="checkbox"] { min-height: auto; width: 1.2rem; height: 1.2rem; }
        button { padding: .4rem 1rem; border-radius: .4rem; border: 1px solid var(--accent); background: var(--accent); color: var(--card); cursor: pointer; }
        button.danger { background: var(--off); border-color: var(--off); color: var(--card); }
        button.link { background: none; border: none; color: var(--accent); text-decoration: underline; padding: .4rem; }
        .filters { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin-bottom: 1rem; }
        .rule { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; padding: .75rem 0; border-top: 1px solid var(--line); }
        .rule-name { width: 100%; margin: 0; }
        .rule label { font-weight: normal; display: inline-flex; gap: .4rem; align-items: center; }
        .rule input[type="number"] { width: 5.5rem; }
        .table-wrap { overflow-x: auto; }
        /* On a phone a wide table becomes one card a row, each cell under its column's name:
           nothing off-screen, every button reachable. */
        @media (max-width: 599px) {
          table.stack thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
          table.stack tr { display: block; border-bottom: 1px solid var(--line); padding: .5rem 0; }
          table.stack th, table.stack td { display: block; border: 0; padding: .2rem .25rem; }
          table.stack td[data-label]::before { content: attr(data-label) ": "; font-weight: 600; }
          table.stack td:empty { display: none; }
        }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        .commands { padding-left: 1.2rem; }
        .commands li { margin-bottom: .4rem; }
        .alerts { padding-left: 1.2rem; margin: 0; } .alerts li { margin-bottom: .6rem; }
        .qr svg { width: min(280px, 80vw); height: auto; background: #fff; }
        .qr { margin: 0 0 1rem; }
        .wrap { word-break: break-all; }
        .emoji { font-size: 2.4rem; letter-spacing: .3rem; margin: .5rem 0; }
        .actions { display: flex; flex-wrap: wrap; gap: .75rem; }
        .chart svg { width: 100%; height: auto; max-height: 320px; }
        .chart .learning { fill: #1f5fbf; } .chart .reward { fill: #c75a00; } .chart text { fill: var(--fg); font-size: 11px; }
        .chart .axis { stroke: var(--line); }
        .live-status:empty { display: none; }
        ul.requests { list-style: none; padding: 0; margin: 0; }
        .request { border-top: 1px solid var(--line); padding: .6rem 0; }
        .request:first-child { border-top: none; }
        .request form.answer { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; }
        .request form.answer input[type=number] { width: 5.5rem; }
        .buttons { display: inline-flex; gap: .5rem; flex-wrap: wrap; }
        .back { margin: 0 0 .25rem; }
        form.inline { display: inline; margin-left: .5rem; }
        .slider input[type=range] { vertical-align: middle; width: 9rem; }
        .slider-value { display: inline-block; min-width: 2ch; font-weight: 600; text-align: right; }
        .child-devices li { margin: .35rem 0; }
        .downtime fieldset { border: 1px solid var(--line); border-radius: .5rem; padding: .5rem .75rem; margin: 0; display: grid; gap: .4rem; }
        .downtime legend { font-weight: 600; padding: 0 .25rem; }
        .downtime .day { font-weight: normal; display: inline-flex; gap: .25rem; align-items: center; min-height: 44px; }
        .downtime .times { display: flex; flex-wrap: wrap; gap: .5rem 1rem; }
        .downtime .times label { font-weight: normal; display: inline-flex; gap: .4rem; align-items: center; }
        .card summary { cursor: pointer; min-height: 44px; display: flex; align-items: center; color: var(--accent); }
        .windows { padding-left: 1.2rem; margin: .25rem 0 .5rem; }
        .digest .figures dd.hint { font-size: .85rem; font-weight: normal; }
        .digest .figures dd.small { font-size: 1rem; }
        .chores .days, .downtime .days { display: flex; flex-wrap: wrap; gap: .2rem .6rem; }
        .chores .day { font-weight: normal; display: inline-flex; gap: .25rem; align-items: center; min-height: 44px; }
        .chore-list { list-style: none; padding: 0; margin: 0 0 .5rem; }
        .chore-list li { display: flex; flex-wrap: wrap; gap: .25rem .75rem; align-items: center; padding: .4rem 0; border-top: 1px solid var(--line); }
        .chore-list li:first-child { border-top: none; }
        .chore-list form.inline { margin-left: auto; }
        /* Printed (the browser's "Save as PDF"): the report on one page, no navigation or forms. */
        @page { size: A4; margin: 12mm; }
        @media print {
          header.top nav, header.top .signout, .skip, form, .buttons, #live-status, .back, #csv-link { display: none !important; }
          body { background: #fff; color: #000; font-size: 10pt; }
          header.top { padding: 0 0 .25rem; border: none; }
          h1 { font-size: 1.3rem; margin: .25rem 0; }
          .card { box-shadow: none; border: 1px solid #999; padding: .5rem .75rem; margin: .5rem 0; }
          .chart svg { max-height: 180px; }
          th, td { padding: .15rem .4rem; }
          main { max-width: none; padding: 0; }
        }
        """#

    /// Live updates: the page's `data-live` part is fetched again (rendered by the server,
    /// as the first time) whenever the family's records change, which the gateway's
    /// WebSocket tells through the browser's own push subscription; `data-poll` also
    /// refreshes on a timer (the pairing page, waiting for a device). Without the
    /// WebSocket, a refresh every 30 s still keeps "2 minutes ago" true.
    static let javaScript = #"""
        "use strict";
        (function () {
          var pending = null, socket = null, nextId = 10, backoff = 1000, stopped = false, inFlight = null;
          // On the document: forms inside the live part are replaced as it updates. A form
          // sent means the page is being left: live updates stop (signing out revokes the
          // credential the socket uses, which must not read as "signed out elsewhere").
          document.addEventListener("submit", function (event) {
            var form = event.target;
            if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) { event.preventDefault(); return; }
            stopped = true;
            if (socket) socket.close();
            // A refresh still on its way would meet the credential this form may revoke.
            if (inFlight) inFlight.abort();
          });
          // A slider shows its value beside it as it moves (points per minute).
          document.addEventListener("input", function (event) {
            var shows = event.target.dataset && event.target.dataset.shows;
            var output = shows && document.getElementById(shows);
            if (output) output.textContent = event.target.value;
          });
          var live = document.getElementById("live");
          if (!live || !live.dataset.live) return;
          var status = document.getElementById("live-status");

          function say(text) { if (status) status.textContent = text; }

          // A parent busy with a form of the live part keeps it as it is: the update waits
          // while they are in a field, have changed one (a reply, an amount, a choice) and
          // not sent it, or are pressing a button (replaced under the pointer, the button
          // would never get its click).
          var pressing = false;
          live.addEventListener("pointerdown", function () { pressing = true; });
          document.addEventListener("pointerup", function () { setTimeout(function () { pressing = false; }, 0); });
          document.addEventListener("pointercancel", function () { pressing = false; });
          // A press that ends outside the window never tells its end here.
          window.addEventListener("blur", function () { pressing = false; });
          function changed(field) {
            if (field.type === "hidden" || field.type === "submit" || field.type === "button") return false;
            if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
            if (field.tagName === "SELECT") {
              // With no option marked selected, the first is the one shown at first.
              var first = 0;
              for (var i = 0; i < field.options.length; i++) if (field.options[i].defaultSelected) { first = i; break; }
              return field.selectedIndex !== first;
            }
            return field.value !== field.defaultValue;
          }
          function typing() {
            if (pressing) return true;
            var active = document.activeElement;
            if (active && live.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) return true;
            var fields = live.querySelectorAll("input, textarea, select");
            for (var i = 0; i < fields.length; i++) if (changed(fields[i])) return true;
            return false;
          }

          // Says so while an update waits for the parent's form.
          var holding = "Live: the page updates once you send or clear the form";
          function hold(on) {
            live.dataset.held = on ? "1" : "";
            if (on) say(holding);
            else if (status && status.textContent === holding) say("Live");
          }

          function refresh() {
            if (pending) return;
            pending = setTimeout(function () {
              pending = null;
              if (stopped) return;
              if (typing()) { hold(true); setTimeout(refresh, 1000); return; }
              inFlight = new AbortController();
              fetch(live.dataset.live, { credentials: "same-origin", headers: { "Accept": "text/html" }, cache: "no-store", signal: inFlight.signal })
                .then(function (response) {
                  if (stopped) return null;
                  if (response.status === 401) { stopped = true; window.location.assign("/signin?expired=1"); return null; }
                  if (!response.ok) { say("Could not update (" + response.status + "); retrying."); return null; }
                  return response.text();
                })
                .then(function (html) {
                  if (html === null || html === undefined) return;
                  // Begun while the parent was not busy with a form, arrived while they are.
                  if (typing()) { hold(true); setTimeout(refresh, 1000); return; }
                  hold(false);
                  live.innerHTML = html;
                  live.dataset.refreshed = String(Date.now());
                })
                .catch(function (error) { if (!stopped) say("Offline: showing what was last received."); })
                .finally(function () { inFlight = null; });
            }, 150);
          }

          function send(id, method, params) {
            if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ id: id, method: method, params: params }));
          }

          function connect() {
            if (stopped) return;
            socket = new WebSocket("wss://" + window.location.host + "/v1/ws");
            socket.addEventListener("open", function () {
              backoff = 1000;
              send(1, "push.subscribe", { subscriptionId: "dashboard", kind: "family" });
              send(2, "push.listen", {});
              say("Live");
              live.dataset.socket = "open";
              refresh();
            });
            socket.addEventListener("message", function (event) {
              var message;
              try { message = JSON.parse(event.data); } catch (e) { return; }
              if (message.id === 2 && message.result && message.continues) {
                if (typeof message.result.seq === "number") send(nextId++, "push.ack", { upTo: message.result.seq });
                refresh();
              } else if (message.error && (message.error.code === "unauthorized" || message.error.code === "device_revoked") && !stopped) {
                stopped = true;
                window.location.assign("/signin?expired=1");
              }
            });
            socket.addEventListener("close", function () {
              live.dataset.socket = "closed";
              if (stopped) return;
              say("Reconnecting…");
              setTimeout(connect, backoff);
              backoff = Math.min(backoff * 2, 30000);
            });
          }

          window.addEventListener("pagehide", function () { stopped = true; if (socket) socket.close(); });
          connect();
          setInterval(refresh, Number(live.dataset.poll || 30000));
        })();
        """#
}

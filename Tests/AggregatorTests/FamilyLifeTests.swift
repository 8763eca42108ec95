import AggregatorAPI
import Foundation
import PairingAPI
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Synchronization
import Testing
import TestSupport

/// A family's life over weeks, simulated in seconds: the store's clock is the test's, so
/// rules change at moments of the simulated days; devices are paired, replaced and revoked,
/// go offline for a week, or have their clock set hours wrong; usage is uploaded late and
/// twice; the store, pairing and the aggregator are restarted in the middle of days; the
/// days include both daylight-saving changes. After every day the server's numbers are
/// checked against the test's own model of what happened, and the ledger's entries
/// against every entry seen before (none may change).
///
/// It runs with a fixed seed (printed, so a failure can be replayed); a longer randomized
/// run: `SCREENTIME_LIFE_SEED=$RANDOM SCREENTIME_LIFE_DAYS=365 swift test --filter FamilyLifeTests`.
@Suite("A family's months, simulated", .serialized)
struct FamilyLifeTests {
    @Test("a family of three children lives for weeks across both daylight-saving changes, with engines restarted mid-day, devices offline for a week or with clocks set wrong: each day's points are the rates in force when the apps were used (by the server's time), every view agrees (ledger, daily summaries, report, balance), no ledger entry ever changes, each active device holds the family's rules, nothing counts twice")
    func life() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["SCREENTIME_LIFE_SEED"].flatMap(UInt64.init) ?? 20_261_127
        let days = environment["SCREENTIME_LIFE_DAYS"].flatMap(Int.init) ?? 60
        print("family life: seed \(seed), \(days) days (replay: SCREENTIME_LIFE_SEED=\(seed) SCREENTIME_LIFE_DAYS=\(days) swift test --filter FamilyLifeTests)")
        let calendar = { () -> Calendar in
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "Europe/Paris")!
            return calendar
        }()
        let dayStarts = Self.dayStarts(days, calendar)
        let firstDay = dayStarts[0]
        let hours = Set(dayStarts.map { Int(calendar.date(byAdding: .day, value: 1, to: $0)!.timeIntervalSince($0) / 3600) })
        // Both changes: in the default layout, and in a year or more lived in a row.
        let bothChanges = days <= 120 || days >= 366
        #expect(days < 30 || (bothChanges ? hours == [23, 24, 25] : hours.count > 1 || days < 183),
                "the days lived have \(hours.sorted()) hours: the daylight-saving changes must be among them")
        let clock = SimulatedClock(firstDay)

        try await AggregatorStack.inProcess(withPush: true, configure: { $0.retentionDays = 3650 }, storeClock: { clock.now }) { stack in
            var random = SeededRandom(seed)
            var model = LifeModel()
            let learning = ["org.khan", "com.duolingo"], reward = "com.game"
            for app in learning { try await stack.rule(bundleId: app, "learning", pointsPerMinute: 1) ; model.setRate(app, 1, at: firstDay) }
            try await stack.rule(bundleId: reward, "reward", pointsPerMinute: 0)
            model.devices[stack.child.deviceId] = .init(child: "emma", paired: stack.child, active: true)
            for child in ["leo", "mia"] {
                let device = try await stack.family.pairChild(stack.harness, child: child, device: "\(child)-1")
                model.devices[device.deviceId] = .init(child: child, paired: device, active: true)
            }
            // Two parents, each following the whole family as the parents' app does.
            let code = try await stack.family.parent.call(PairingMethods.inviteParent, InviteParentParams())
            let dad = try await stack.harness.pairingClient().call(PairingMethods.enrollParent, EnrollParentParams(
                family: stack.family.family, code: code.code, deviceId: "dad-phone", deviceName: "Dad's phone"))
            var parents: [Listening] = []
            for token in [stack.family.parentCredential.token, dad.token] {
                let push = RPCClient(configuration: ClientConfiguration(socketPath: stack.harness.socketPath(for: "push"), connectTimeout: .seconds(20), auth: Auth(token: token)))
                _ = try await push.call(PushMethods.subscribe, SubscribeParams(subscriptionId: "family", kind: .family))
                parents.append(Listening(push, reconnecting: true, only: .zoneChanged))
            }
            var held: [LifeModel.Session] = []
            var uploaded = Set<String>()
            var ledgerSeen: [String: StoreAPI.Record] = [:]
            // A device offline until that day (its sessions wait on it), and by how much a
            // device's clock is wrong (seconds ahead).
            var offlineUntil: [String: Int] = [:]
            var offlineHeld: [String: [LifeModel.Session]] = [:]
            var skew: [String: Int] = [:]
            var restarts: [String: Int] = [:]

            for (day, dayStart) in dayStarts.enumerated() {
                let dayName = stack.days.day(containing: dayStart.addingTimeInterval(3600))

                // 06:00: sometimes a tablet replaced.
                clock.set(dayStart.addingTimeInterval(6 * 3600))
                if random.chance(0.1), let old = model.activeDevices.randomElement(using: &random) {
                    _ = try await stack.family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: old.key))
                    model.devices[old.key]?.active = false
                    let replacement = try await stack.family.pairChild(stack.harness, child: old.value.child, device: "\(old.value.child)-\(day)")
                    model.devices[replacement.deviceId] = .init(child: old.value.child, paired: replacement, active: true)
                }
                // Sometimes a device goes offline for a week, or its clock is set hours wrong
                // (or right again).
                for deviceId in model.activeDevices.keys.sorted() {
                    if offlineUntil[deviceId] == nil && random.chance(0.03) { offlineUntil[deviceId] = day + 7 }
                    if random.chance(0.05) { skew[deviceId] = [0, 0, 3 * 3600, -2 * 3600, 45 * 60][random.below(5)] }
                }

                // The day's usage, on each active device: sessions between 08:00 and 21:00.
                var today: [LifeModel.Session] = []
                for (deviceId, device) in model.activeDevices.sorted(by: { $0.key < $1.key }) {
                    var at = dayStart.addingTimeInterval(8 * 3600 + Double(random.below(60)) * 60)
                    for index in 0..<(1 + random.below(3)) {
                        let seconds = 5 * 60 + random.below(35 * 60)
                        let apps = learning + [reward]
                        let session = LifeModel.Session(name: "\(deviceId)-\(day)-\(index)", device: deviceId, child: device.child, app: apps[random.below(apps.count)],
                                                        start: at, end: at.addingTimeInterval(Double(seconds)))
                        today.append(session)
                        at = session.end.addingTimeInterval(Double(10 + random.below(90)) * 60)
                        if at > dayStart.addingTimeInterval(21 * 3600) { break }
                    }
                }
                // Sometimes a new rate, at any second of the day: often inside a session, which
                // then counts its two parts at their own rates.
                if random.chance(0.3) {
                    let app = learning[random.below(learning.count)], rate = 1 + random.below(5)
                    let using = today.filter { $0.app == app }
                    if !using.isEmpty && random.chance(0.7) {
                        // While the app is in use: a second inside one of its sessions.
                        let session = using[random.below(using.count)]
                        clock.set(session.start.addingTimeInterval(Double(1 + random.below(max(1, Int(session.end.timeIntervalSince(session.start)) - 2)))))
                    } else {
                        clock.set(dayStart.addingTimeInterval(Double(7 * 3600 + random.below(14 * 3600))))
                    }
                    try await stack.rule(bundleId: app, "learning", pointsPerMinute: Int64(rate))
                    model.setRate(app, rate, at: clock.now)
                }
                // 22:00: uploaded, some only tomorrow (late), some twice; a device offline
                // keeps its sessions until it is back.
                clock.set(dayStart.addingTimeInterval(22 * 3600))
                var sending = held
                held = []
                for session in today {
                    if offlineUntil[session.device] != nil {
                        offlineHeld[session.device, default: []].append(session)
                    } else if random.chance(0.15) {
                        held.append(session)
                    } else {
                        sending.append(session)
                    }
                }
                for (deviceId, until) in offlineUntil where until <= day {
                    sending += offlineHeld.removeValue(forKey: deviceId) ?? []
                    offlineUntil[deviceId] = nil
                }
                // Sometimes an engine restarts in the middle of it (gracefully, as systemd
                // restarts a service), the uploads going on around it.
                let restartAt = random.chance(0.2) ? random.below(sending.count + 1) : -1
                for (index, session) in sending.enumerated() {
                    if index == restartAt { try await Self.restartOne(stack, &random, &restarts) }
                    var sent = false
                    for _ in 0..<(random.chance(0.1) ? 2 : 1) {
                        sent = try await Self.upload(session, model, stack, clockAhead: skew[session.device] ?? 0, now: clock.now) || sent
                    }
                    // A device revoked since it recorded the session could not send it.
                    guard sent else { continue }
                    uploaded.insert(session.name)
                    model.sessions[session.name] = session
                }
                if restartAt == sending.count { try await Self.restartOne(stack, &random, &restarts) }

                try await stack.settle(sessions: uploaded.count, timeout: .seconds(60))
                try await Self.check(model, stack, through: dayName, first: stack.days.day(containing: firstDay.addingTimeInterval(3600)), day: day, seed: seed,
                                     ledgerSeen: &ledgerSeen)
                try await Self.checkNotified(parents, stack, context: "day \(day) (\(dayName)), seed \(seed)")
            }
            print("family life: \(model.sessions.count) sessions, \(model.crossings) of them across a rate change, \(model.devices.count) devices (\(model.activeDevices.count) active), restarts \(restarts.sorted { $0.key < $1.key })")
            #expect(days < 30 || model.crossings > 0, "no session crossed a rate change: the splitting was not tried")
            #expect(days < 30 || restarts.values.reduce(0, +) > 0, "no engine was restarted")
        }
    }

    /// Each parent heard of the family's changes: never of one change twice, and of the
    /// newest (the children's balances, as the aggregator last wrote them).
    static func checkNotified(_ parents: [Listening], _ stack: AggregatorStack, context: String) async throws {
        let balances = try await stack.parentStore.call(StoreMethods.query, QueryParams(family: stack.family.family, zone: StoreNames.defaultZone, recordType: "EarnedTimeBalance")).records
        let newest = balances.compactMap { Int64($0.changeTag, radix: 36) }.max() ?? 0
        for (index, listening) in parents.enumerated() {
            _ = try await eventually("parent \(index + 1) hearing of change \(newest); \(context)", timeout: .seconds(30)) { seen in
                let heard = listening.notifications.compactMap(\.changeSeq)
                seen = "up to \(heard.max() ?? 0)"
                return (heard.max() ?? 0) >= newest ? () : nil
            }
            let heard = listening.notifications.compactMap(\.changeSeq)
            #expect(Set(heard).count == heard.count, "parent \(index + 1) heard of a change twice; \(context)")
        }
    }

    /// The simulated days, each a local midnight: by default half of them around the
    /// spring daylight-saving change and half around the autumn one of the last year (the
    /// months between pass with nothing), so a short run has a 23-hour and a 25-hour day;
    /// a longer run lives its days one after another, ending yesterday. Nothing is in the
    /// future of the server's own clock.
    static func dayStarts(_ days: Int, _ calendar: Calendar) -> [Date] {
        let yesterday = calendar.startOfDay(for: calendar.date(byAdding: .day, value: -1, to: Date())!)
        var transitions: [Date] = []
        var after = calendar.date(byAdding: .day, value: -420, to: yesterday)!
        while let next = calendar.timeZone.nextDaylightSavingTimeTransition(after: after), next < calendar.date(byAdding: .day, value: -(days / 2 + 2), to: yesterday)! {
            transitions.append(next)
            after = next
        }
        guard days <= 120, transitions.count >= 2 else {
            return (0..<days).map { calendar.date(byAdding: .day, value: $0 - days + 1, to: yesterday)! }
        }
        let half = days / 2
        return transitions.suffix(2).enumerated().flatMap { index, transition in
            let first = calendar.date(byAdding: .day, value: -(half / 2), to: calendar.startOfDay(for: transition))!
            return (0..<(index == 0 ? half : days - half)).map { calendar.date(byAdding: .day, value: $0, to: first)! }
        }
    }

    /// Restarts the store, pairing or the aggregator, gracefully.
    static func restartOne(_ stack: AggregatorStack, _ random: inout SeededRandom, _ counts: inout [String: Int]) async throws {
        let engine = ["store", "pairing", "aggregator"][random.below(3)]
        switch engine {
        case "store": try await stack.harness.restartStoreEngine()
        case "pairing": try await stack.harness.restartPairingEngine()
        default: try await stack.restartEngine()
        }
        counts[engine, default: 0] += 1
    }

    /// A child device's save of one session (the same record name each time), as the
    /// device sees it: its clock `clockAhead` seconds ahead, the session's times by that
    /// clock; false when the device was removed from the family meanwhile.
    static func upload(_ session: LifeModel.Session, _ model: LifeModel, _ stack: AggregatorStack, clockAhead: Int, now: Date) async throws -> Bool {
        guard let device = model.devices[session.device] else { return false }
        let result: ModifyResult
        let ahead = Double(clockAhead)
        do {
            result = try await device.paired.store.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: device.paired.zone, saves: [
                RecordSave(recordType: "UsageRecord", recordName: session.name, fields: [
                    "logicalID": .string(session.app), "deviceID": .string(session.device),
                    "sessionStart": .date(session.start.addingTimeInterval(ahead)), "sessionEnd": .date(session.end.addingTimeInterval(ahead)),
                    "totalSeconds": .int(Int64(session.end.timeIntervalSince(session.start))),
                ]),
            ], savePolicy: .allKeys, atomic: true, deviceClock: now.addingTimeInterval(ahead)))
        } catch {
            if error.code == .deviceRevoked && !device.active { return false }
            throw error
        }
        #expect(result.allSucceeded, "\(session.name)")
        return true
    }

    /// Every record of a type in a zone, page after page.
    static func all(_ stack: AggregatorStack, zone: String, type: String) async throws -> [StoreAPI.Record] {
        var records: [StoreAPI.Record] = []
        var cursor: String?
        repeat {
            let page = try await stack.parentStore.call(StoreMethods.query, QueryParams(family: stack.family.family, zone: zone, recordType: type, limit: 400, cursor: cursor))
            records += page.records
            cursor = page.cursor
        } while cursor != nil
        return records
    }

    /// The server against the model, through `through`.
    static func check(_ model: LifeModel, _ stack: AggregatorStack, through last: String, first: String, day: Int, seed: UInt64,
                      ledgerSeen: inout [String: StoreAPI.Record]) async throws {
        let context = "day \(day) (\(last)), seed \(seed)"
        // The ledger is a record of what happened: an entry once written never changes and
        // never goes away (retention is off here).
        let ledger = try await Self.all(stack, zone: StoreNames.defaultZone, type: "PointsLedgerEntry")
        let now = Dictionary(uniqueKeysWithValues: ledger.map { ($0.recordName, $0) })
        for (name, entry) in ledgerSeen {
            #expect(now[name]?.changeTag == entry.changeTag && now[name]?.fields == entry.fields,
                    "ledger entry \(name) changed: \(entry.fields) → \(String(describing: now[name]?.fields)); \(context)")
        }
        ledgerSeen = now
        for child in ["emma", "leo", "mia"] {
            let expected = model.days(of: child)
            // Each day's accrual, and the summaries of the child's devices that day, are what
            // the rates in force make of the sessions.
            let accruals = ledger.filter { $0.recordName.hasPrefix("accrual-child-\(child)-") }
            var byDay: [String: Int64] = [:]
            for entry in accruals {
                // accrual-child-<name>-<YYYY-MM-DD>-<n>
                let dayName = String(entry.recordName.dropFirst("accrual-child-\(child)-".count).prefix(10))
                let amount = entry.fields["amount"]?.intValue ?? 0
                byDay[dayName, default: 0] += entry.fields["type"] == "reversal" ? -amount : amount
            }
            for (dayName, totals) in expected where totals.points > 0 {
                #expect(byDay[dayName] == totals.points, "\(child) on \(dayName): accrual \(byDay[dayName] ?? 0), expected \(totals.points); \(context)")
            }
            #expect(byDay.allSatisfy { $0.value == 0 || (expected[$0.key]?.points ?? 0) > 0 }, "\(child): accruals for days without points; \(context)")
            // The DailySummary records of the child's devices (removed ones too) add up to it.
            var summed: [String: Int64] = [:]
            for device in model.devices.values where device.child == child {
                for summary in try await Self.all(stack, zone: device.paired.zone, type: "DailySummary") {
                    let dayName = String(summary.recordName.dropFirst(device.paired.deviceId.count + 1))
                    summed[dayName, default: 0] += summary.fields["totalPointsEarned"]?.intValue ?? 0
                }
            }
            for (dayName, totals) in expected {
                #expect((summed[dayName] ?? 0) == totals.points, "\(child) on \(dayName): daily summaries say \(summed[dayName] ?? 0) points, expected \(totals.points); \(context)")
            }

            // The report over every day so far says the same.
            let report = try await stack.local.call(AggregatorMethods.report, ReportParams(family: stack.family.family, child: child, from: first, to: last, by: .day))
            let learning = expected.values.reduce(0) { $0 + $1.learning }, reward = expected.values.reduce(0) { $0 + $1.reward }
            let points = expected.values.reduce(0) { $0 + $1.points }
            #expect(report.learningSeconds == learning && report.rewardSeconds == reward && report.points == points,
                    "\(child): report \(report.learningSeconds) s / \(report.rewardSeconds) s / \(report.points) pts, expected \(learning) / \(reward) / \(points); \(context)")

            // The balance: every point earned, reward time taken off.
            let balance = try await stack.parentStore.call(StoreMethods.fetch, FetchParams(
                family: stack.family.family, zone: StoreNames.defaultZone, recordNames: ["balance-child-\(child)"])).records.first
            // (No balance yet when nothing was counted yet.)
            #expect((balance?.fields["pointsBalance"]?.intValue ?? 0) == points && (balance?.fields["balanceSeconds"]?.intValue ?? 0) == points * 60 - reward,
                    "\(child): balance \(String(describing: balance?.fields)), expected \(points) points, \(points * 60 - reward) s; \(context)")
        }
        // Each active device holds the family's rules as they are now.
        for (deviceId, device) in model.activeDevices {
            let rates = model.currentRates
            _ = try await eventually("\(deviceId)'s configuration with the current rates; \(context)") { seen in
                let record = try await stack.parentStore.call(StoreMethods.fetch, FetchParams(
                    family: stack.family.family, zone: device.paired.zone, recordNames: [ConfigurationSnapshot.recordName])).records.first
                let snapshot = record.flatMap { ConfigurationSnapshot(commandType: $0.fields["commandType"]?.stringValue, payloadJSON: $0.fields["payloadJSON"]?.stringValue) }
                let held = Dictionary((snapshot?.rules ?? []).filter { $0.classification == "learning" }.map { ($0.bundleId, Int($0.pointsPerMinute ?? -1)) },
                                      uniquingKeysWith: { first, _ in first })
                seen = "\(held) vs \(rates)"
                return held == rates ? () : nil
            }
        }
    }
}

/// What the test knows happened.
struct LifeModel {
    struct Device {
        var child: String
        var paired: PairedChild
        var active: Bool
    }

    struct Session {
        var name: String
        var device: String
        var child: String
        var app: String
        var start: Date
        var end: Date
    }

    struct Totals {
        var learning: Int64 = 0
        var reward: Int64 = 0
        var points: Int64 = 0
    }

    var devices: [String: Device] = [:]
    var sessions: [String: Session] = [:]
    /// Each learning app's rate from each moment on.
    var rates: [String: [(from: Date, rate: Int)]] = [:]

    var activeDevices: [String: Device] { self.devices.filter(\.value.active) }
    var currentRates: [String: Int] { self.rates.mapValues { $0.last!.rate } }

    /// A rate saved: the same rate again is no change (no new period).
    mutating func setRate(_ app: String, _ rate: Int, at: Date) {
        if self.rates[app]?.last?.rate == rate { return }
        self.rates[app, default: []].append((at, rate))
    }

    /// Sessions a rate change fell inside of (their parts count at two rates).
    var crossings: Int {
        self.sessions.values.filter { session in
            (self.rates[session.app] ?? []).dropFirst().contains { $0.from > session.start && $0.from < session.end }
        }.count
    }

    /// A child's days, as docs/protocol.md counts them: each session cut where its app's rate
    /// changed; for each device, day, app and rate period, the whole seconds of its parts
    /// (sessions never overlap on one device), rounded down, and the points at that rate,
    /// rounded down.
    func days(of child: String) -> [String: Totals] {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "Europe/Paris")!
        let formatter = { (date: Date) -> String in
            let parts = calendar.dateComponents([.year, .month, .day], from: date)
            return String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
        }
        struct Key: Hashable { var device: String; var day: String; var app: String; var period: Date? }
        var milliseconds: [Key: Int64] = [:]
        var rateOf: [Key: Int] = [:]
        let millis = { (date: Date) in Int64((date.timeIntervalSince1970 * 1000).rounded()) }
        for session in self.sessions.values where session.child == child {
            let periods = self.rates[session.app] ?? []
            // The first rate reaches back; later ones cut the session.
            let cuts = periods.dropFirst().map(\.from).filter { $0 > session.start && $0 < session.end }
            for (from, to) in zip([session.start] + cuts, cuts + [session.end]) {
                let period = periods.last { $0.from <= from } ?? periods.first
                let key = Key(device: session.device, day: formatter(from), app: session.app, period: period?.from)
                milliseconds[key, default: 0] += millis(to) - millis(from)
                if let period { rateOf[key] = period.rate }
            }
        }
        var days: [String: Totals] = [:]
        for (key, total) in milliseconds {
            let seconds = total / 1000
            if let rate = rateOf[key] {
                days[key.day, default: Totals()].learning += seconds
                days[key.day, default: Totals()].points += seconds * Int64(rate) / 60
            } else {
                days[key.day, default: Totals()].reward += seconds
            }
        }
        return days
    }
}

/// The store's clock in the simulation.
final class SimulatedClock: Sendable {
    private let instant: Mutex<Date>
    init(_ start: Date) { self.instant = Mutex(start) }
    var now: Date { self.instant.withLock { $0 } }
    func set(_ date: Date) { self.instant.withLock { $0 = date } }
}

/// A small, fixed pseudo-random sequence (SplitMix64): the same seed, the same life.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(_ seed: UInt64) { self.state = seed }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func below(_ bound: Int) -> Int { Int(self.next() % UInt64(bound)) }
    mutating func chance(_ probability: Double) -> Bool { Double(self.next() % 1_000_000) / 1_000_000 < probability }
}

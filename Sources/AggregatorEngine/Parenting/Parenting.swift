import AggregatorAPI
import ChangeFeed
import DurableSQLite
import Foundation
import GRDB
import Logging
import RPCClient
import RPCCore
import ServiceKit
import StoreAPI
import UsageModel

/// The everyday parenting methods: who calls, what the parameters may be, and one
/// transaction of the aggregator's database for each action (TimeRequests, Grants, Pauses),
/// whose records and notifications the write-back then sends.
struct Parenting: Sendable {
    let database: AggregatorDatabase
    let store: RPCClient
    let credentials: CredentialTable
    let clock: @Sendable () -> Date
    /// The write-back (records, balances, shield commands, notifications).
    let writeback: Wakeup
    /// The deadlines (a new request's expiry, a pause's end).
    let deadlines: Wakeup
    let logger: Logger

    func askForTime(_ params: AskForTimeParams, auth: Auth?) async throws -> TimeRequestInfo {
        let device = try await CallerIdentity.childDevice(auth, credentials: self.credentials, for: "aggregator.askForTime")
        switch (params.minutes, params.restOfDay) {
        case (let minutes?, nil), (let minutes?, false?): try Self.check(minutes: minutes, "params.minutes")
        case (nil, true?): break
        default: throw RPCError(.invalidParams, "params: give minutes (1 to \(ParentingLimits.minutes.upperBound)), or restOfDay true, not both")
        }
        try Self.check(text: params.note, "params.note")
        try Self.check(text: params.app, "params.app", empty: false)
        try Self.check(text: params.appName, "params.appName", empty: false)
        let now = Millis.of(self.clock())
        let info = try await self.database.pool.write { db in
            let child = try ChildLookup.child(ofDevice: device.deviceId, family: device.family, db)
            let name = try Alerts.name(child, db)
            return try TimeRequests.ask(params, child: child, device: Actor(kind: .child, deviceId: device.deviceId, name: name), now: now, db)
        }
        self.changed()
        self.logger.notice("more time asked for", metadata: [
            "family": "\(device.family)", "child": "\(info.child)", "device_id": "\(device.deviceId)", "minutes": "\(info.minutes)", "request": "\(info.id)",
        ])
        return info
    }

    func answerRequest(_ params: AnswerRequestParams, auth: Auth?) async throws -> TimeRequestInfo {
        let parent = try await self.parent(auth, for: "aggregator.answerRequest")
        guard !params.request.isEmpty, params.request.count <= 200 else { throw RPCError(.invalidParams, "params.request: a request's id, as aggregator.listRequests gives it") }
        if let minutes = params.minutes {
            guard params.approve else { throw RPCError(.invalidParams, "params.minutes: only an approval gives minutes; leave it out to deny") }
            try Self.check(minutes: minutes, "params.minutes")
        }
        try Self.check(text: params.reply, "params.reply")
        let now = Millis.of(self.clock())
        let info = try await self.database.pool.write { db in try TimeRequests.answer(params, family: parent.family, parent: parent.actor, now: now, db) }
        self.changed()
        self.logger.notice("request for more time answered", metadata: [
            "family": "\(parent.family)", "child": "\(info.child)", "device_id": "\(parent.actor.deviceId)", "status": "\(info.status.rawValue)",
            "minutes": "\(info.grantedMinutes ?? 0)", "request": "\(info.id)",
        ])
        return info
    }

    func listRequests(_ params: ListRequestsParams, auth: Auth?) async throws -> TimeRequestList {
        let limit = params.limit ?? ParentingLimits.listLength
        guard (1...ParentingLimits.listLength).contains(limit) else { throw RPCError(.invalidParams, "params.limit: 1 to \(ParentingLimits.listLength)") }
        let (family, child) = try await self.reader(auth, child: params.child, for: "aggregator.listRequests")
        let now = Millis.of(self.clock())
        // Expired ones are listed as expired, whether or not the deadline check came by yet.
        let requests = try await self.database.pool.write { db -> [TimeRequestInfo] in
            try TimeRequests.expireDue(family: family, now: now, db)
            return try TimeRequests.list(family: family, child: try child(db)?.child, status: params.status, limit: limit, db)
        }
        self.writeback.signal()
        return TimeRequestList(requests: requests)
    }

    func grant(_ params: GrantParams, auth: Auth?) async throws -> GrantResult {
        let parent = try await self.parent(auth, for: "aggregator.grant")
        try Self.check(text: params.child, "params.child", empty: false)
        switch (params.points, params.minutes) {
        case (let points?, nil):
            guard points != 0, ParentingLimits.points.contains(abs(points)) else {
                throw RPCError(.invalidParams, "params.points: 1 to \(ParentingLimits.points.upperBound) to add, or −1 to −\(ParentingLimits.points.upperBound) to take away")
            }
        case (nil, let minutes?):
            guard minutes != 0, ParentingLimits.minutes.contains(abs(minutes)) else {
                throw RPCError(.invalidParams, "params.minutes: 1 to \(ParentingLimits.minutes.upperBound) to add, or −1 to −\(ParentingLimits.minutes.upperBound) to take away")
            }
        default: throw RPCError(.invalidParams, "params: give points or minutes (negative to take away), not both")
        }
        try Self.check(text: params.reason, "params.reason")
        let now = Millis.of(self.clock())
        let result = try await self.database.pool.write { db in try Grants.grant(params, family: parent.family, parent: parent.actor, now: now, db) }
        self.writeback.signal()
        self.logger.notice(result.points >= 0 ? "earned time granted" : "earned time taken away", metadata: [
            "family": "\(parent.family)", "child": "\(result.time.child)", "device_id": "\(parent.actor.deviceId)", "points": "\(result.points)",
            "asked_points": "\(result.askedPoints)",
        ])
        return result
    }

    func pause(_ params: PauseParams, auth: Auth?) async throws -> ChildTime {
        let parent = try await self.parent(auth, for: "aggregator.pause")
        try Self.check(text: params.child, "params.child", empty: false)
        if let minutes = params.minutes, !ParentingLimits.pauseMinutes.contains(minutes) {
            throw RPCError(.invalidParams, "params.minutes: 1 to \(ParentingLimits.pauseMinutes.upperBound) (a week), or leave it out to pause until resumed")
        }
        try Self.check(text: params.reason, "params.reason")
        let now = Millis.of(self.clock())
        let time = try await self.database.pool.write { db in try Pauses.pause(params, family: parent.family, parent: parent.actor, now: now, db) }
        self.changed()
        self.logger.notice("reward apps paused", metadata: [
            "family": "\(parent.family)", "child": "\(time.child)", "device_id": "\(parent.actor.deviceId)", "minutes": "\(params.minutes.map(String.init) ?? "until resumed")",
        ])
        return time
    }

    func resume(_ params: ResumeParams, auth: Auth?) async throws -> ChildTime {
        let parent = try await self.parent(auth, for: "aggregator.resume")
        try Self.check(text: params.child, "params.child", empty: false)
        let now = Millis.of(self.clock())
        let time = try await self.database.pool.write { db in try Pauses.resume(params, family: parent.family, parent: parent.actor, now: now, db) }
        self.changed()
        self.logger.notice("reward apps resumed", metadata: ["family": "\(parent.family)", "child": "\(time.child)", "device_id": "\(parent.actor.deviceId)"])
        return time
    }

    func setSchedule(_ params: SetScheduleParams, auth: Auth?) async throws -> DowntimeSchedule {
        let parent = try await self.parent(auth, for: "aggregator.setSchedule")
        try Self.check(text: params.child, "params.child", empty: false)
        try Downtime.check(params)
        let now = Millis.of(self.clock())
        let schedule = try await self.database.pool.write { db in try Downtime.set(params, family: parent.family, parent: parent.actor, now: now, db) }
        self.changed()
        self.logger.notice("downtime set", metadata: [
            "family": "\(parent.family)", "child": "\(schedule.child)", "device_id": "\(parent.actor.deviceId)", "windows": "\(schedule.windows.count)",
            "active": "\(schedule.active)",
        ])
        return schedule
    }

    func listSchedules(_ params: ListSchedulesParams, auth: Auth?) async throws -> ScheduleList {
        let (family, child) = try await self.reader(auth, child: params.child, for: "aggregator.listSchedules")
        let now = Millis.of(self.clock())
        return ScheduleList(schedules: try await self.database.pool.read { db in
            try Downtime.list(family: family, child: child(db), now: now, db)
        })
    }

    func setChore(_ params: SetChoreParams, auth: Auth?) async throws -> ChoreInfo {
        let parent = try await self.parent(auth, for: "aggregator.setChore")
        try Self.check(text: params.id, "params.id", empty: false)
        try Self.check(text: params.child, "params.child", empty: false)
        if let title = params.title {
            try Self.check(text: title, "params.title", empty: false)
            guard title.count <= ChoreLimits.titleLength, !title.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw RPCError(.invalidParams, "params.title: 1 to \(ChoreLimits.titleLength) characters, not only spaces")
            }
        }
        if let points = params.points, !ChoreLimits.points.contains(points) {
            throw RPCError(.invalidParams, "params.points: \(ChoreLimits.points.lowerBound) to \(ChoreLimits.points.upperBound), not \(points)")
        }
        if let days = params.days, let twice = days.first(where: { day in days.filter { $0 == day }.count > 1 }) {
            throw RPCError(.invalidParams, "params.days: \(twice.rawValue) is listed twice")
        }
        let now = Millis.of(self.clock())
        let chore = try await self.database.pool.write { db in try Chores.set(params, family: parent.family, parent: parent.actor, now: now, db) }
        self.writeback.signal()
        self.logger.notice(params.remove == true ? "chore removed" : "chore set", metadata: [
            "family": "\(parent.family)", "child": "\(chore.child)", "device_id": "\(parent.actor.deviceId)", "chore": "\(chore.id)",
        ])
        return chore
    }

    func listChores(_ params: ListChoresParams, auth: Auth?) async throws -> ChoreList {
        let (family, child) = try await self.reader(auth, child: params.child, for: "aggregator.listChores")
        let now = Millis.of(self.clock())
        return try await self.database.pool.read { db in try Chores.list(family: family, child: try child(db), now: now, db) }
    }

    func choreDone(_ params: ChoreDoneParams, auth: Auth?) async throws -> ChoreCompletion {
        let device = try await CallerIdentity.childDevice(auth, credentials: self.credentials, for: "aggregator.choreDone")
        try Self.check(text: params.chore, "params.chore", empty: false)
        try Self.check(text: params.note, "params.note")
        let now = Millis.of(self.clock())
        let completion = try await self.database.pool.write { db in
            let child = try ChildLookup.child(ofDevice: device.deviceId, family: device.family, db)
            let name = try Alerts.name(child, db)
            return try Chores.done(params, child: child, device: Actor(kind: .child, deviceId: device.deviceId, name: name), now: now, db)
        }
        self.writeback.signal()
        self.logger.notice("chore marked done", metadata: [
            "family": "\(device.family)", "child": "\(completion.child)", "device_id": "\(device.deviceId)", "chore": "\(completion.chore)",
            "completion": "\(completion.id)",
        ])
        return completion
    }

    func answerChore(_ params: AnswerChoreParams, auth: Auth?) async throws -> ChoreCompletion {
        let parent = try await self.parent(auth, for: "aggregator.answerChore")
        try Self.check(text: params.completion, "params.completion", empty: false)
        try Self.check(text: params.reason, "params.reason")
        let now = Millis.of(self.clock())
        let completion = try await self.database.pool.write { db in try Chores.answer(params, family: parent.family, parent: parent.actor, now: now, db) }
        self.writeback.signal()
        self.logger.notice("chore answered", metadata: [
            "family": "\(parent.family)", "child": "\(completion.child)", "device_id": "\(parent.actor.deviceId)", "status": "\(completion.status.rawValue)",
            "completion": "\(completion.id)", "points": "\(completion.status == .approved ? completion.points : 0)",
        ])
        return completion
    }

    func digest(_ params: DigestParams, auth: Auth?) async throws -> WeeklyDigest {
        let family: String
        if let auth {
            family = try await CallerIdentity.parentFamily(auth, credentials: self.credentials, for: "aggregator.digest")
            guard params.family == nil || params.family == family else { throw RPCError(.forbidden, "a parent reads their own family's digest only") }
        } else {
            guard let given = params.family else { throw RPCError.invalidParams("params.family", "is required for a local caller") }
            family = given
        }
        if let through = params.through, LocalDays.parse(through) == nil {
            throw RPCError.invalidParams("params.through", "must be a date written YYYY-MM-DD, such as 2026-11-29")
        }
        let now = Millis.of(self.clock())
        return try await self.database.pool.read { db in
            guard let settings = try Digests.Settings.all(db).first(where: { $0.family == family }) else {
                throw RPCError(.notFound, "the aggregator knows no family \(family)")
            }
            let today = settings.days.day(containing: Millis.date(now))
            guard let through = params.through ?? settings.digestDay(onOrAfter: today) else {
                throw RPCError.invalidParams("params.through", "must be a date written YYYY-MM-DD, such as 2026-11-29")
            }
            return try Digests.build(family: family, through: through, settings.days, db)
        }
    }

    // MARK: Callers and checks

    /// A parent (the family, or the child it names) or a child's device (its own child,
    /// naming none): the family, and the child to read of (nil: every child).
    private func reader(_ auth: Auth?, child: String?, for what: String) async throws
        -> (family: String, child: @Sendable (Database) throws -> EarnedTime.Child?) {
        guard let auth else { throw RPCError(.forbidden, "\(what): for a parent's or a child's device; send its credential as auth.token") }
        let who = try await self.credentials.whoami(auth)
        guard let family = who.family, let deviceId = who.deviceId, let role = who.role else {
            throw RPCError(.unauthorized, "this credential is not a device's: send a device's credential as auth.token")
        }
        if let child { try Self.check(text: child, "params.child", empty: false) }
        if role.isParent {
            return (family, { db in try child.map { try ChildLookup.child($0, family: family, db) } })
        }
        guard child == nil else { throw RPCError(.forbidden, "params.child: a child's device reads its own child's only; leave it out") }
        return (family, { db in try ChildLookup.child(ofDevice: deviceId, family: family, db) })
    }

    private func changed() {
        self.writeback.signal()
        self.deadlines.signal()
    }

    /// The calling parent, with its name as the family knows it (its ParentProfile's, else its device's).
    private func parent(_ auth: Auth?, for what: String) async throws -> (family: String, actor: Actor) {
        guard let auth else { throw RPCError(.forbidden, "\(what): for a parent's device; send its credential as auth.token") }
        let (family, deviceId) = try await CallerIdentity.parentDevice(auth, credentials: self.credentials, for: what)
        return (family, Actor(kind: .parent, deviceId: deviceId, name: await self.parentName(family: family, deviceId: deviceId)))
    }

    /// As the audit of store changes names parents (`ParentNames`, from the change feed); a
    /// parent it has not seen yet (a family older than that table) is read from the store.
    private func parentName(family: String, deviceId: String) async -> String {
        if let known = try? await self.database.pool.read({ db in try ParentNames.name(family: family, deviceId: deviceId, db) }) { return known }
        let names = [ParentingNames.parentRecord(deviceId), "device-\(deviceId)"]
        guard let records = try? await self.store.call(StoreMethods.fetch, FetchParams(family: family, zone: StoreNames.defaultZone, recordNames: names)).records else {
            return "A parent"
        }
        let profile = records.first { $0.recordType == RecordTypes.parentProfile }.flatMap { try? TypedRecord<ParentProfile>($0).fields.displayName }
        let device = records.first { $0.recordType == RecordTypes.registeredDevice }.flatMap { try? TypedRecord<RegisteredDevice>($0).fields.deviceName }
        return [profile, device].compactMap { $0?.trimmingCharacters(in: .whitespaces) }.first { !$0.isEmpty } ?? "A parent"
    }

    static func check(minutes: Int64, _ name: String) throws(RPCError) {
        guard ParentingLimits.minutes.contains(minutes) else {
            throw RPCError(.invalidParams, "\(name): \(ParentingLimits.minutes.lowerBound) to \(ParentingLimits.minutes.upperBound) minutes, not \(minutes)")
        }
    }

    /// Text a person wrote: at most `ParentingLimits.textLength` characters, no control characters.
    static func check(text: String?, _ name: String, empty: Bool = true) throws(RPCError) {
        guard let text else { return }
        guard empty || !text.isEmpty else { throw RPCError(.invalidParams, "\(name): may not be empty") }
        guard text.count <= ParentingLimits.textLength else {
            throw RPCError(.invalidParams, "\(name): at most \(ParentingLimits.textLength) characters (this one has \(text.count))")
        }
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw RPCError(.invalidParams, "\(name): no control characters (line breaks included)")
        }
    }
}

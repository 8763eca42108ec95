import Foundation
import PairingAPI
import RPCCore
import StoreAPI

/// What a parent's device does: enrol, invite and confirm children, set app rules, read
/// what the children did. The commands print these; `demo` runs them in a row.
extension Device {
    /// Enrols a parent device with an enrollment code and saves its profile (with the
    /// gateway, when enrolled through one with `--server`).
    static func enrollParent(_ options: DeviceOptions, family: String, code: String, deviceName: String?, displayName: String?) async throws -> Device {
        let name = try options.requireProfileName()
        if options.profiles.exists(name) {
            throw CLIError(.profileExists, "a profile named \(name) exists already (\(options.profiles.path(name))); pick another name or delete that file")
        }
        let deviceId = newDeviceId(for: name)
        let target = try GatewayTarget.resolve(options.remote, profile: nil)
        let credential = try await options.anonymous(target).call(PairingMethods.enrollParent, EnrollParentParams(
            family: family, code: code, deviceId: deviceId, deviceName: deviceName ?? name, displayName: displayName ?? name))
        var profile = Profile(name: name, role: .parent, family: credential.family, deviceId: deviceId, deviceName: deviceName ?? name, token: credential.token)
        if let target {
            profile.gatewayURLs = target.urls
            profile.gatewayPin = target.pin.description
        }
        let device = try Device(profile: profile, options: options, target: target)
        try device.save()
        return device
    }

    /// Asks for a child-device invitation; keeps its secret to show the short code later.
    mutating func invite(child: String, childName: String?, expiresInSeconds: Double?) async throws -> Invitation {
        let invitation = try await self.pairing.call(PairingMethods.createInvitation, CreateInvitationParams(childId: child, childName: childName, expiresInSeconds: expiresInSeconds))
        self.profile.invitations[invitation.invitationId] = invitation.secret
        try self.save()
        return invitation
    }

    /// Waits (polling) until a device accepts the invitation, or it ends otherwise.
    func waitForAcceptance(_ invitationId: String, timeout: Duration) async throws -> InvitationInfo {
        let deadline = ContinuousClock.now + timeout
        while true {
            let info = try await self.pairing.call(PairingMethods.invitationStatus, InvitationParams(invitationId: invitationId))
            if info.status != .open { return info }
            guard ContinuousClock.now < deadline else {
                throw CLIError(.timeout, "no device accepted invitation \(invitationId) within \(timeout); it stays open until \(info.expiresAt.formatted(date: .omitted, time: .standard))")
            }
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    /// The short code both screens show, computed here from the invitation's secret.
    func shortCode(_ info: InvitationInfo) -> ShortCode? {
        guard let secret = self.profile.invitations[info.invitationId], let child = info.deviceId else { return nil }
        return ShortCode(secret: secret, invitationId: info.invitationId, parentDeviceId: info.parentDeviceId, childDeviceId: child)
    }

    mutating func decide(_ invitationId: String, confirm: Bool) async throws -> InvitationInfo {
        let params = InvitationParams(invitationId: invitationId)
        let info = try await self.pairing.call(confirm ? PairingMethods.confirm : PairingMethods.reject, params)
        self.profile.invitations[invitationId] = nil
        try self.save()
        return info
    }

    /// Saves the family's rule for an app. The server sends every child device the family's
    /// rules (its `configuration` command) from there. Returns the devices that get it.
    func setAppRule(_ bundleId: String, category: String?, pointsPerMinute: Int?, enabled: Bool?, blocked: Bool?, displayName: String?) async throws -> [DeviceInfo] {
        let existing = try await self.store.call(StoreMethods.fetch, FetchParams(family: self.family, zone: StoreNames.defaultZone, recordNames: [Self.ruleName(bundleId)]))
        guard let category = category ?? existing.records.first?.fields(as: AppRule.self)?.classification else {
            throw CLIError(.invalidInput, "\(bundleId) has no rule yet: give its --category (learning or reward)")
        }
        // What is not given stays as it was (a `changedKeys` save of the rest).
        let rule = AppRule(familyRef: .inDefaultZone(self.family), bundleId: bundleId, classification: category, source: "override",
                           pointsPerMinute: pointsPerMinute.map(Int64.init), isEnabled: enabled, blockingEnabled: blocked, displayName: displayName)
        let saved = try await self.store.call(StoreMethods.modify, ModifyParams(
            family: self.family, zone: StoreNames.defaultZone, saves: [try .record(rule, named: Self.ruleName(bundleId))], savePolicy: .changedKeys, atomic: true))
        guard saved.saved.first?.record != nil else { throw CLIError(.refused, "the rule was not saved") }
        return try await self.childDevices()
    }

    static func ruleName(_ bundleId: String) -> String { "app-\(bundleId)" }

    /// Saves one child's own rule for an app (what is not given: as the child's rule had it,
    /// else as the family's); its devices get it in place of the family's.
    func setChildAppRule(child: String, _ bundleId: String, category: String?, pointsPerMinute: Int?, enabled: Bool?, blocked: Bool?) async throws {
        let name = ChildAppRule.recordName(child: child, bundleId: bundleId)
        let found = try await self.store.call(StoreMethods.fetch, FetchParams(family: self.family, zone: StoreNames.defaultZone, recordNames: [name, Self.ruleName(bundleId)])).records
        let own = found.first { $0.recordName == name }?.fields(as: ChildAppRule.self)
        let family = found.first { $0.recordName == Self.ruleName(bundleId) }?.fields(as: AppRule.self)
        guard let category = category ?? own?.classification ?? family?.classification else {
            throw CLIError(.invalidInput, "\(bundleId) has no rule yet: give its --category (learning or reward)")
        }
        let rule = ChildAppRule(familyRef: .inDefaultZone(self.family), childRef: .inDefaultZone("child-\(child)"), bundleId: bundleId, classification: category,
                                pointsPerMinute: (pointsPerMinute.map(Int64.init)) ?? own?.pointsPerMinute ?? family?.pointsPerMinute,
                                isEnabled: enabled ?? own?.isEnabled ?? family?.isEnabled, blockingEnabled: blocked ?? own?.blockingEnabled ?? family?.blockingEnabled)
        let saved = try await self.store.call(StoreMethods.modify, ModifyParams(
            family: self.family, zone: StoreNames.defaultZone, saves: [try .record(rule, named: name)], savePolicy: .allKeys, atomic: true))
        if let error = saved.saved.first?.error {
            throw CLIError(.refused, error.code == .invalidParams && error.message.contains("childRef") ? "there is no child \(child) in this family" : error.message)
        }
    }

    /// Removes one child's own rule for an app: the family's applies again. False when it had none.
    func resetChildAppRule(child: String, _ bundleId: String) async throws -> Bool {
        let result = try await self.store.call(StoreMethods.modify, ModifyParams(
            family: self.family, zone: StoreNames.defaultZone, deletes: [RecordDelete(recordName: ChildAppRule.recordName(child: child, bundleId: bundleId))]))
        if let error = result.deleted.first?.error, error.code != .notFound { throw CLIError(.refused, error.message) }
        return result.deleted.first?.deleted == true
    }

    /// Every child's own rules.
    func childAppRules() async throws -> [TypedRecord<ChildAppRule>] {
        try await self.all(ChildAppRule.self, zone: StoreNames.defaultZone).sorted { $0.recordName < $1.recordName }
    }

    /// The family's app rules.
    func appRules() async throws -> [TypedRecord<AppRule>] {
        try await self.all(AppRule.self, zone: StoreNames.defaultZone).sorted { $0.recordName < $1.recordName }
    }

    /// A child's DailySummary records for one local day, one per device, as the store holds them.
    func summaries(child: String, day: String) async throws -> [(device: DeviceInfo, summary: DailySummary?)] {
        var found: [(DeviceInfo, DailySummary?)] = []
        // Every device the child used, removed ones too: a child's day is what happened on
        // any of them.
        for device in try await self.childDevices(of: child, includingRevoked: true) {
            guard let zone = device.zone else { continue }
            let fetched = try await self.store.call(StoreMethods.fetch, FetchParams(family: self.family, zone: zone, recordNames: ["\(device.deviceId)_\(day)"]))
            found.append((device, fetched.records.first?.fields(as: DailySummary.self)))
        }
        return found
    }

    /// The children's EarnedTimeBalance records (one child, or all).
    func balances(child: String?) async throws -> [TypedRecord<EarnedTimeBalance>] {
        if let child {
            return try await self.store.call(StoreMethods.fetch, FetchParams(family: self.family, zone: StoreNames.defaultZone, recordNames: ["balance-child-\(child)"]))
                .records.map { record throws(RPCError) in try TypedRecord<EarnedTimeBalance>(record) }
        }
        return try await self.all(EarnedTimeBalance.self, zone: StoreNames.defaultZone).sorted { $0.recordName < $1.recordName }
    }

    /// A child's points ledger, newest first.
    func ledger(child: String) async throws -> [TypedRecord<PointsLedgerEntry>] {
        let childRef = "child-\(child)"
        return try await self.all(PointsLedgerEntry.self, zone: StoreNames.defaultZone, sort: QuerySort(PointsLedgerEntry.Field.timestamp, descending: true))
            .filter { $0.fields.childRef.recordName == childRef }
    }

    /// Posts a redemption or an adjustment to a child's ledger (idempotent by `key`).
    func postLedgerEntry(child: String, type: String, points: Int, reason: String?, key: String) async throws -> Record {
        let result = try await self.store.call(StoreMethods.modify, ModifyParams(family: self.family, zone: StoreNames.defaultZone, saves: [
            .record(PointsLedgerEntry(familyRef: RecordReference(self.family), childRef: RecordReference("child-\(child)"), type: type, amount: Int64(points),
                                      timestamp: Date(), reason: reason, actorParentRef: RecordReference("parent-\(self.profile.deviceId)"), idempotencyKey: key),
                    named: "entry-\(key)"),
        ], atomic: true))
        guard let record = result.saved.first?.record else { throw CLIError(.refused, "the ledger entry was not saved") }
        return record
    }
}

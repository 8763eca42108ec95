import Foundation
import Logging
import ServiceMetrics
import PairingAPI
import RPCCore
import StoreAPI

/// The pairing flows: bootstrap, enrollment, invitations, verification, revocation.
/// State lives in the store: invitations in the family's `_pairing` zone, the rest as the
/// app's own record types.
struct PairingFlows: Sendable {
    struct Settings: Sendable {
        /// What devices use to reach this server, carried in pairing URIs.
        var serverAddress: String
        var invitationLifetime: Duration
        var enrollmentLifetime: Duration
        /// After expiry, how long an accepted invitation may still be confirmed or rejected
        /// before it is purged.
        var confirmationGrace: Duration = .seconds(3600)
        /// Where the gateway is and its pin, for invitations and enrollment codes: read
        /// each time (the gateway may start, or change its certificate, at any moment).
        var gateway: @Sendable () -> GatewayEndpoint? = { nil }
    }

    /// Wrong secrets an invitation takes before it is locked for good.
    static let maximumWrongSecrets = 5

    let store: PairingStore
    let settings: Settings
    let limiter: AttemptLimiter
    /// One secret check (and what follows it) at a time per invitation; one parent's
    /// revocation at a time per family.
    let serializer: KeyedSerializer
    let logger: Logger
    var metrics = PairingMetrics.none

    // MARK: Bootstrap

    func createFamily(_ params: NewFamilyParams, auth: Auth?) async throws -> EnrollmentCode {
        guard auth == nil else { throw RPCError(.forbidden, "pairing.createFamily is for the server's administrator (a local call without a device credential)") }
        try Identifiers.check("params.family", params.family)
        if let zone = params.timeZone, TimeZone(identifier: zone) == nil {
            throw RPCError.invalidParams("params.timeZone", "is not an IANA time zone (e.g. Europe/Paris)")
        }
        _ = try await self.store.client.call(StoreMethods.createFamily, StoreAPI.CreateFamilyParams(family: params.family))
        _ = try await self.store.client.call(StoreMethods.createZone, ZoneParams(family: params.family, zone: PairingStore.zone))
        let family = Family(settingsVersion: 1, displayName: params.displayName, timeZone: params.timeZone ?? "UTC")
        try await self.store.save(params.family, zone: "default", [.record(family, named: params.family)])
        let code = try await self.enrollmentCode(params.family, role: .admin, createdBy: "server")
        try await self.store.audit(params.family, actor: "server", parentDeviceId: nil, action: "family.create", target: params.family)
        self.logger.notice("family created", metadata: ["family": "\(params.family)"])
        return code
    }

    func inviteParent(_ params: InviteParentParams, auth: Auth?) async throws -> EnrollmentCode {
        let admin = try await self.store.parent(auth, admin: true)
        let role = params.role ?? .coParent
        guard role.isParent else { throw RPCError.invalidParams("params.role", "must be admin or co_parent") }
        let code = try await self.enrollmentCode(admin.family, role: role, createdBy: admin.deviceId)
        try await self.store.audit(admin.family, actor: "device:\(admin.deviceId)", parentDeviceId: admin.deviceId, action: "parent.invite", target: role.rawValue)
        return code
    }

    private func enrollmentCode(_ family: String, role: DeviceRole, createdBy: String) async throws -> EnrollmentCode {
        let id = Secrets.identifier()
        let secret = Secrets.random(bytes: 16)
        let expires = Date().addingTimeInterval(self.settings.enrollmentLifetime.seconds)
        let code = PairingInvitation(kind: "parent", secretSHA256: SHA256Hex.of(secret), role: role.rawValue, status: "open", expiresAt: expires,
                                     failedAttempts: 0, createdBy: createdBy)
        try await self.store.save(family, zone: PairingStore.zone, [.record(code, named: id)])
        let gateway = self.settings.gateway()
        return EnrollmentCode(family: family, code: "\(id).\(secret)", role: role, expiresAt: expires, urls: gateway?.urls, pin: gateway?.pin)
    }

    /// `from`: the address the gateway received it from (nil: a caller on this machine).
    func enrollParent(_ params: EnrollParentParams, auth: Auth?, from: String?) async throws -> DeviceCredential {
        try Identifiers.check("params.deviceId", params.deviceId)
        try Identifiers.checkName("params.deviceName", params.deviceName)
        let parts = params.code.split(separator: ".", maxSplits: 1).map(String.init)
        let invitation = try await self.take(
            family: params.family, from: from, id: parts.first ?? "", secret: parts.count == 2 ? parts[1] : "", kind: "parent",
            status: "used", device: params.deviceId, deviceName: params.deviceName
        ) { invitation in
            guard invitation.fields.role.flatMap(DeviceRole.init(rawValue:))?.isParent == true else { throw Self.invalid }
        }
        guard let role = invitation.fields.role.flatMap(DeviceRole.init(rawValue:)) else { throw Self.invalid }

        let credential = try await self.store.issueCredential(params.family, deviceId: params.deviceId, role: role, status: .active)
        let profile = ParentProfile(familyRef: .inDefaultZone(params.family), role: role.rawValue, deviceIds: [params.deviceId], displayName: params.displayName)
        let device = RegisteredDevice(deviceID: params.deviceId, deviceName: params.deviceName, deviceType: "parent", registrationDate: Date(), isActive: true)
        try await self.store.save(params.family, zone: "default", [
            .record(profile, named: Names.parent(params.deviceId)), .record(device, named: Names.device(params.deviceId)),
        ], policy: .allKeys)
        try await self.store.audit(params.family, actor: "device:\(params.deviceId)", parentDeviceId: params.deviceId, action: "parent.enroll", target: params.deviceId)
        self.logger.notice("parent enrolled", metadata: ["family": "\(params.family)", "device_id": "\(params.deviceId)", "role": "\(role.rawValue)"])
        return credential
    }

    // MARK: Invitations

    func createInvitation(_ params: CreateInvitationParams, auth: Auth?) async throws -> Invitation {
        let parent = try await self.store.parent(auth)
        try Identifiers.check("params.childId", params.childId)
        if let name = params.childName { try Identifiers.checkName("params.childName", name) }
        var lifetime = self.settings.invitationLifetime.seconds
        if let seconds = params.expiresInSeconds {
            guard (1...7 * 86_400).contains(seconds) else { throw RPCError.invalidParams("params.expiresInSeconds", "must be between 1 and 604800 (7 days)") }
            lifetime = seconds
        }
        let id = Secrets.identifier()
        let secret = Secrets.random(bytes: 16)
        let zone = Names.childZonePrefix + Secrets.identifier()
        let expires = Date().addingTimeInterval(lifetime)

        _ = try await self.store.client.call(StoreMethods.createZone, ZoneParams(family: parent.family, zone: zone))
        let session = MonitoringSession(childRef: .inDefaultZone(Names.child(params.childId)), parentDeviceID: parent.deviceId, status: "pending", title: params.childName)
        try await self.store.save(parent.family, zone: zone, [.record(session, named: Names.session)])
        let invitation = PairingInvitation(kind: "child", secretSHA256: SHA256Hex.of(secret), status: "open", expiresAt: expires, failedAttempts: 0,
                                           createdBy: parent.deviceId, zone: zone, childOpaqueId: params.childId, childName: params.childName)
        try await self.store.save(parent.family, zone: PairingStore.zone, [.record(invitation, named: id)])
        try await self.store.audit(parent.family, actor: "device:\(parent.deviceId)", parentDeviceId: parent.deviceId, action: "invitation.create",
                                   target: zone, metadata: ["invitationId": .string(id), "childId": .string(params.childId)])
        self.logger.notice("invitation created", metadata: ["family": "\(parent.family)", "invitation_id": "\(id)", "zone": "\(zone)"])
        let gateway = self.settings.gateway()
        let uri = PairingURI(server: self.settings.serverAddress, family: parent.family, invitationId: id, secret: secret,
                             urls: gateway?.urls ?? [], pin: gateway?.pin)
        return Invitation(family: parent.family, invitationId: id, secret: secret, uri: uri.string, zone: zone, childId: params.childId,
                          parentDeviceId: parent.deviceId, expiresAt: expires)
    }

    func acceptInvitation(_ params: AcceptInvitationParams, auth: Auth?, from: String?) async throws -> AcceptedInvitation {
        try Identifiers.check("params.deviceId", params.deviceId)
        try Identifiers.checkName("params.deviceName", params.deviceName)
        let invitation = try await self.take(
            family: params.family, from: from, id: params.invitationId, secret: params.secret, kind: "child",
            status: "accepted", device: params.deviceId, deviceName: params.deviceName
        ) { invitation in
            guard invitation.fields.zone != nil, invitation.fields.childOpaqueId != nil, invitation.fields.createdBy != nil else { throw Self.invalid }
        }
        guard let zone = invitation.fields.zone, let childId = invitation.fields.childOpaqueId, let parentDeviceId = invitation.fields.createdBy else {
            throw Self.invalid
        }

        let child = ChildContext(familyRef: .inDefaultZone(params.family), childOpaqueId: childId, displayName: invitation.fields.childName,
                                 pairedDeviceIds: [params.deviceId])
        try await self.store.save(params.family, zone: "default", [.record(child, named: Names.child(childId))], policy: .changedKeys)
        let device = RegisteredDevice(deviceID: params.deviceId, deviceName: params.deviceName, deviceType: "child", childName: invitation.fields.childName,
                                      parentDeviceID: parentDeviceId, childRef: .inDefaultZone(Names.child(childId)), registrationDate: Date(), isActive: false)
        try await self.store.save(params.family, zone: zone, [
            .record(device, named: Names.device(params.deviceId)),
            .changes(MonitoringSession.self, named: Names.session, [.deviceID: .string(params.deviceId)]),
        ], policy: .changedKeys)
        // The credential first: the store shares a zone only with a device of the family.
        let credential = try await self.store.issueCredential(params.family, deviceId: params.deviceId, role: .child, status: .pending)
        _ = try await self.store.client.call(StoreMethods.share, ShareParams(
            family: params.family, zone: zone, participants: [ShareParticipant(deviceId: params.deviceId, permission: .readWrite)]))
        try await self.store.audit(params.family, actor: "device:\(params.deviceId)", parentDeviceId: nil, action: "invitation.accept", target: zone,
                                   metadata: ["invitationId": .string(params.invitationId)])
        self.logger.notice("invitation accepted", metadata: [
            "family": "\(params.family)", "invitation_id": "\(params.invitationId)", "device_id": "\(params.deviceId)", "zone": "\(zone)",
        ])
        let code = ShortCode(secret: params.secret, invitationId: params.invitationId, parentDeviceId: parentDeviceId, childDeviceId: params.deviceId)
        return AcceptedInvitation(credential: credential, zone: zone, childId: childId, parentDeviceId: parentDeviceId, shortCode: code)
    }

    func invitationStatus(_ params: InvitationParams, auth: Auth?) async throws -> InvitationInfo {
        let parent = try await self.store.parent(auth)
        return Self.info(try await self.childInvitation(parent.family, params.invitationId))
    }

    func confirm(_ params: InvitationParams, auth: Auth?) async throws -> InvitationInfo {
        let parent = try await self.store.parent(auth)
        let invitation = try await self.childInvitation(parent.family, params.invitationId)
        let info = Self.info(invitation)
        guard info.status == .accepted, let deviceId = info.deviceId else {
            throw RPCError(.conflict, "invitation \(params.invitationId) is \(info.status.rawValue); only an accepted invitation can be confirmed")
        }
        guard Date() < info.expiresAt.addingTimeInterval(self.settings.confirmationGrace.seconds) else {
            throw RPCError(.conflict, "invitation \(params.invitationId) was accepted too long ago to confirm; reject it and invite again")
        }
        // Decide first: of a confirm and a reject racing (two parents), exactly one wins.
        try await self.decide(parent.family, invitation, "confirmed")
        do {
            // A parent may have revoked the device meanwhile: confirming must not bring it back.
            try await self.store.setCredential(parent.family, deviceId: deviceId, .active, ifStatus: .pending)
        } catch let error as RPCError where error.code == .conflict {
            throw RPCError(.conflict, "device \(deviceId) is no longer waiting for confirmation (it was revoked); invite it again")
        }
        try await self.store.save(parent.family, zone: info.zone, [
            .changes(MonitoringSession.self, named: Names.session, [.status: "active"]),
            .changes(RegisteredDevice.self, named: Names.device(deviceId), [.isActive: true]),
        ], policy: .changedKeys)
        try await self.store.audit(parent.family, actor: "device:\(parent.deviceId)", parentDeviceId: parent.deviceId, action: "device.confirm", target: deviceId)
        self.logger.notice("pairing confirmed", metadata: ["family": "\(parent.family)", "invitation_id": "\(params.invitationId)", "device_id": "\(deviceId)"])
        var confirmed = info
        confirmed.status = .confirmed
        return confirmed
    }

    func reject(_ params: InvitationParams, auth: Auth?) async throws -> InvitationInfo {
        let parent = try await self.store.parent(auth)
        let invitation = try await self.childInvitation(parent.family, params.invitationId)
        let info = Self.info(invitation)
        guard [.open, .accepted, .expired].contains(info.status) else {
            throw RPCError(.conflict, "invitation \(params.invitationId) is \(info.status.rawValue) already")
        }
        try await self.decide(parent.family, invitation, "rejected")
        if let deviceId = info.deviceId, try await self.store.credential(parent.family, deviceId: deviceId)?.role == .child {
            try await self.cutOff(parent.family, deviceId: deviceId, zone: info.zone)
        } else {
            try await self.store.save(parent.family, zone: info.zone, [
                .changes(MonitoringSession.self, named: Names.session, [.status: "revoked"]),
            ], policy: .changedKeys)
        }
        try await self.store.audit(parent.family, actor: "device:\(parent.deviceId)", parentDeviceId: parent.deviceId, action: "invitation.reject",
                                   target: info.deviceId ?? params.invitationId)
        self.logger.notice("pairing rejected", metadata: ["family": "\(parent.family)", "invitation_id": "\(params.invitationId)", "device_id": "\(info.deviceId ?? "")"])
        var rejected = info
        rejected.status = .rejected
        return rejected
    }

    // MARK: Devices

    func revokeDevice(_ params: DeviceParams, auth: Auth?) async throws -> DeviceInfo {
        let parent = try await self.store.parent(auth)
        try Identifiers.check("params.deviceId", params.deviceId)
        guard params.deviceId != parent.deviceId else {
            throw RPCError.invalidParams("params.deviceId", "is this device; a device cannot revoke itself (use pairing.rotateCredential to replace its token)")
        }
        guard let target = try await self.store.credential(parent.family, deviceId: params.deviceId) else {
            throw RPCError(.notFound, "device \(params.deviceId) is not in this family", data: ["deviceId": .string(params.deviceId)])
        }
        guard target.role.isParent else { return try await self.revoke(params.deviceId, by: parent) }
        // A parent: decided one at a time per family, with the caller's rights read again
        // inside, so that two admins revoking each other cannot both win.
        return try await self.serializer.run("parents/\(parent.family)") {
            let caller = try await self.store.parent(auth)
            guard caller.role == .admin else {
                throw RPCError(.forbidden, "only an admin parent may revoke a parent's device; \(params.deviceId) is a \(target.role.rawValue)",
                               data: ["deviceId": .string(params.deviceId)])
            }
            let credentials = try await self.store.client.call(StoreMethods.listCredentials, ListCredentialsParams(family: caller.family)).credentials
            guard credentials.contains(where: { $0.role == .admin && $0.status == .active && $0.deviceId != params.deviceId }) else {
                throw RPCError(.forbidden, "\(params.deviceId) is the family's last admin and cannot be revoked", data: ["deviceId": .string(params.deviceId)])
            }
            return try await self.revoke(params.deviceId, by: caller)
        }
    }

    /// A parent's device revokes its own credential (the dashboard's sign-out). Decided
    /// with the family's other parent revocations, one at a time, so that the last admin
    /// can neither sign out nor be revoked at the same moment by another admin.
    func signOut(auth: Auth?) async throws -> DeviceInfo {
        let parent = try await self.store.parent(auth)
        return try await self.serializer.run("parents/\(parent.family)") {
            let caller = try await self.store.parent(auth)
            if caller.role == .admin {
                let credentials = try await self.store.client.call(StoreMethods.listCredentials, ListCredentialsParams(family: caller.family)).credentials
                guard credentials.contains(where: { $0.role == .admin && $0.status == .active && $0.deviceId != caller.deviceId }) else {
                    throw RPCError(.forbidden, "this device is the family's last admin and cannot sign out; enroll another admin parent first (pairing.inviteParent with role admin)",
                                   data: ["deviceId": .string(caller.deviceId)])
                }
            }
            return try await self.revoke(caller.deviceId, by: caller)
        }
    }

    /// Revokes a device the caller may revoke: its credential, its shares, its registrations.
    private func revoke(_ deviceId: String, by parent: PairingStore.Device) async throws -> DeviceInfo {
        let registrations = try await self.store.all(parent.family, type: RecordTypes.registeredDevice, filters: [QueryFilter(RegisteredDevice.Field.deviceID, .equal, .string(deviceId))])
        if registrations.isEmpty {
            try await self.store.setCredential(parent.family, deviceId: deviceId, .revoked)
        }
        for registration in registrations {
            try await self.cutOff(parent.family, deviceId: deviceId, zone: registration.zone)
        }
        try await self.store.audit(parent.family, actor: "device:\(parent.deviceId)", parentDeviceId: parent.deviceId, action: "device.revoke", target: deviceId)
        self.logger.notice("device revoked", metadata: ["family": "\(parent.family)", "device_id": "\(deviceId)"])
        guard let device = try await self.devices(parent.family).first(where: { $0.deviceId == deviceId }) else {
            throw RPCError(.notFound, "device \(deviceId) is not in this family")
        }
        return device
    }

    func removeChild(_ params: RemoveChildParams, auth: Auth?) async throws -> RemoveChildResult {
        let admin = try await self.store.parent(auth, admin: true)
        try Identifiers.check("params.childId", params.childId)
        guard let child = try await self.store.fetch(admin.family, zone: "default", Names.child(params.childId)) else {
            throw RPCError(.notFound, "child \(params.childId) is not in this family", data: ["childId": .string(params.childId)])
        }
        // Only the child's own devices: a parent's device named in the record (parents may
        // write it) keeps its credential.
        var devices: [String] = []
        for deviceId in child.fields(as: ChildContext.self)?.pairedDeviceIds ?? []
        where try await self.store.credential(admin.family, deviceId: deviceId)?.role == .child {
            try await self.store.setCredential(admin.family, deviceId: deviceId, .revoked)
            devices.append(deviceId)
        }
        // The child's zones: every monitoring zone whose session points at this child.
        var zones: [String] = []
        let all = try await self.store.client.call(StoreMethods.listZones, FamilyParams(family: admin.family)).zones
        for zone in all where zone.name.hasPrefix(Names.childZonePrefix) {
            let session = try await self.store.fetch(admin.family, zone: zone.name, Names.session)
            if session?.fields(as: MonitoringSession.self)?.childRef?.recordName == Names.child(params.childId) {
                _ = try await self.store.client.call(StoreMethods.deleteZone, ZoneParams(family: admin.family, zone: zone.name))
                zones.append(zone.name)
            }
        }
        try await self.store.delete(admin.family, zone: "default", [Names.child(params.childId)])
        try await self.store.audit(admin.family, actor: "device:\(admin.deviceId)", parentDeviceId: admin.deviceId, action: "child.remove",
                                   target: params.childId, metadata: ["zones": .array(zones.map { .string($0) })])
        self.logger.notice("child removed", metadata: ["family": "\(admin.family)", "child_id": "\(params.childId)", "zones": "\(zones)"])
        return RemoveChildResult(zones: zones, revokedDevices: devices)
    }

    func rotateCredential(auth: Auth?) async throws -> DeviceCredential {
        let who = try await self.store.caller(auth)
        guard let family = who.family, let deviceId = who.deviceId, let role = who.role, let status = who.status else {
            throw RPCError(.unauthorized, "this method acts for a device: send its credential as auth.token")
        }
        let credential = try await self.store.issueCredential(family, deviceId: deviceId, role: role, status: status)
        try await self.store.audit(family, actor: "device:\(deviceId)", parentDeviceId: role.isParent ? deviceId : nil, action: "credential.rotate", target: deviceId)
        self.logger.notice("credential rotated", metadata: ["family": "\(family)", "device_id": "\(deviceId)"])
        return credential
    }

    func listDevices(auth: Auth?) async throws -> ListDevicesResult {
        let parent = try await self.store.parent(auth)
        return ListDevicesResult(family: parent.family, devices: try await self.devices(parent.family))
    }

    // MARK: Helpers

    static let invalid = RPCError(.invitationInvalid, "this invitation or code cannot be used: it does not exist, has expired or been used, or the secret is wrong")

    /// A wrong guess: an unknown invitation, or a wrong secret. Counted by the limits when
    /// it was a guess at a family that exists: guesses at families that do not are refused
    /// alike, but kept nowhere (there is nobody to protect, and counting them would let
    /// anyone grow the limiter's state without bound).
    private struct WrongGuess: Error {
        /// Its family exists: the guess is kept on disk too.
        var familyExists = true
    }

    /// Checks the secret and takes the invitation for `device` (`status`: `accepted`,
    /// `used`) as one step per invitation: a concurrent attempt waits for this one's outcome,
    /// so each wrong secret is counted before the next is checked. `check` refuses an
    /// invitation that is not of the kind asked for. Every refusal looks the same to the
    /// caller; wrong guesses count towards the limits and the invitation's lock.
    private func take(family: String, from: String?, id: String, secret: String, kind: String, status: String, device: String, deviceName: String,
                      check: @escaping @Sendable (TypedRecord<PairingInvitation>) throws -> Void) async throws -> TypedRecord<PairingInvitation> {
        guard Identifiers.isValid(family) else { throw Self.invalid }
        let attempt: AttemptLimiter.Attempt
        do {
            attempt = try self.limiter.begin(family: family, from: from)
        } catch {
            self.metrics.attempts("locked_out").increment()
            throw error
        }
        do {
            let invitation = try await self.serializer.run("invitation/\(family)/\(id)") {
                let invitation = try await self.verify(family: family, id: id, secret: secret, kind: kind)
                try check(invitation)
                try await self.requireUnpaired(family, device)
                try await self.claim(family, invitation, status: status, device: device, deviceName: deviceName)
                return invitation
            }
            self.limiter.withdraw(attempt)
            self.metrics.attempts("paired").increment()
            return invitation
        } catch let guess as WrongGuess {
            // Counted alike whether the family exists or not (the answers tell nothing of
            // which do); kept on disk only for one that does.
            if self.limiter.failed(attempt, kept: guess.familyExists) {
                self.metrics.lockouts.increment()
            }
            self.metrics.attempts("wrong_secret").increment()
            throw Self.invalid
        } catch {
            self.limiter.withdraw(attempt)
            self.metrics.attempts("error").increment()
            throw error
        }
    }

    /// The invitation, if `secret` is its secret and it is still open; `WrongGuess` for an
    /// unknown invitation or a wrong secret (counted on the invitation first).
    private func verify(family: String, id: String, secret: String, kind: String) async throws -> TypedRecord<PairingInvitation> {
        var found: TypedRecord<PairingInvitation>?
        // An id that cannot be an invitation's, or a family with no pairing zone (none by
        // that name): the same answer as a wrong id, counted in memory only.
        var familyExists = false
        if Identifiers.isValid(id) {
            do {
                found = try await self.store.fetch(family, zone: PairingStore.zone, id).flatMap { try? TypedRecord<PairingInvitation>($0) }
                familyExists = true
            } catch let error as RPCError where error.code == .notFound {
                found = nil
            }
        }
        guard let invitation = found, invitation.fields.kind == kind else {
            self.logger.notice("pairing attempt with an unknown invitation", metadata: ["family": "\(family)", "invitation_id": "\(id)"])
            throw WrongGuess(familyExists: familyExists)
        }
        guard Secrets.matches(secret, sha256Hex: invitation.fields.secretSHA256) else {
            do {
                try await self.countWrongSecret(family, invitation)
            } catch {
                // Refused either way, and counted by the limits; only the invitation's own count is missed.
                self.logger.error("cannot count a wrong pairing secret on its invitation", metadata: [
                    "family": "\(family)", "invitation_id": "\(invitation.recordName)", "error": "\(error)",
                ])
            }
            throw WrongGuess()
        }
        guard invitation.fields.status == "open", Date() < invitation.fields.expiresAt else {
            self.logger.notice("pairing attempt with a closed invitation", metadata: [
                "family": "\(family)", "invitation_id": "\(id)", "status": "\(invitation.fields.status)",
            ])
            throw Self.invalid
        }
        return invitation
    }

    /// One more wrong secret on an open invitation; the fifth locks it. The write is
    /// conditional on the change tag: if the invitation changed meanwhile (a parent rejected
    /// it, say), it is read again and counted on what it is now.
    private func countWrongSecret(_ family: String, _ invitation: TypedRecord<PairingInvitation>) async throws {
        var current = invitation
        while current.fields.status == "open" {
            let failures = (current.fields.failedAttempts ?? 0) + 1
            var counted = current
            counted.fields.failedAttempts = failures
            if failures >= Int64(Self.maximumWrongSecrets) { counted.fields.status = "locked" }
            do {
                try await self.store.save(family, zone: PairingStore.zone, [try counted.save()])
                self.logger.warning("wrong pairing secret", metadata: [
                    "family": "\(family)", "invitation_id": "\(current.recordName)", "failed_attempts": "\(failures)",
                ])
                return
            } catch let error as RPCError where error.code == .conflict {
                guard let fresh = try await self.store.fetch(family, zone: PairingStore.zone, current.recordName) else { return }
                current = try TypedRecord(fresh)
            }
        }
        self.logger.notice("wrong pairing secret for a closed invitation", metadata: [
            "family": "\(family)", "invitation_id": "\(current.recordName)", "status": "\(current.fields.status)",
        ])
    }

    /// Marks the invitation taken, only if nobody else took it first (its change tag).
    private func claim(_ family: String, _ invitation: TypedRecord<PairingInvitation>, status: String, device: String, deviceName: String) async throws {
        var claimed = invitation
        claimed.fields.status = status
        claimed.fields.deviceID = device
        claimed.fields.deviceName = deviceName
        claimed.fields.acceptedAt = Date()
        do {
            // Saved only if nobody changed it since it was read: the store's default policy
            // checks the change tag (`changedKeys` would not).
            try await self.store.save(family, zone: PairingStore.zone, [try claimed.save()])
        } catch let error as RPCError where error.code == .conflict {
            throw Self.invalid  // another device got there first
        }
    }

    /// Sets a confirmed or rejected invitation's status, only if nobody decided it since it
    /// was read; the loser of a race gets `conflict`.
    private func decide(_ family: String, _ invitation: TypedRecord<PairingInvitation>, _ status: String) async throws {
        var decided = invitation
        decided.fields.status = status
        do {
            try await self.store.save(family, zone: PairingStore.zone, [try decided.save()])
        } catch let error as RPCError where error.code == .conflict {
            throw RPCError(.conflict, "invitation \(invitation.recordName) was confirmed or rejected meanwhile; see pairing.invitationStatus",
                           data: ["invitationId": .string(invitation.recordName)])
        }
    }

    /// A device may hold one live credential per family: re-pairing needs a revocation first.
    private func requireUnpaired(_ family: String, _ deviceId: String) async throws {
        if let existing = try await self.store.credential(family, deviceId: deviceId), existing.status != .revoked {
            throw RPCError(.conflict, "device \(deviceId) is already paired in this family (\(existing.status.rawValue)); a parent must revoke it first",
                           data: ["deviceId": .string(deviceId)])
        }
    }

    private func childInvitation(_ family: String, _ id: String) async throws -> TypedRecord<PairingInvitation> {
        guard Identifiers.isValid(id), let record = try await self.store.fetch(family, zone: PairingStore.zone, id),
              let invitation = try? TypedRecord<PairingInvitation>(record), invitation.fields.kind == "child" else {
            throw RPCError(.notFound, "no invitation \(id) in this family", data: ["invitationId": .string(id)])
        }
        return invitation
    }

    /// Revokes the device's credential, takes it out of the zone's share and marks it inactive.
    private func cutOff(_ family: String, deviceId: String, zone: String) async throws {
        try await self.store.setCredential(family, deviceId: deviceId, .revoked)
        if zone != "default" {
            _ = try await self.store.client.call(StoreMethods.unshare, UnshareParams(family: family, zone: zone, deviceIds: [deviceId]))
        }
        var saves: [RecordSave] = [.changes(RegisteredDevice.self, named: Names.device(deviceId), [.isActive: false])]
        if zone.hasPrefix(Names.childZonePrefix) {
            saves.append(.changes(MonitoringSession.self, named: Names.session, [.status: "revoked"]))
        }
        try await self.store.save(family, zone: zone, saves, policy: .changedKeys)
    }

    static func info(_ invitation: TypedRecord<PairingInvitation>) -> InvitationInfo {
        let fields = invitation.fields
        var status = InvitationStatus(rawValue: fields.status) ?? .expired
        if status == .open, Date() >= fields.expiresAt { status = .expired }
        return InvitationInfo(
            invitationId: invitation.recordName, status: status, zone: fields.zone ?? "", childId: fields.childOpaqueId ?? "",
            parentDeviceId: fields.createdBy ?? "", deviceId: fields.deviceID, deviceName: fields.deviceName, expiresAt: fields.expiresAt)
    }

    private func devices(_ family: String) async throws -> [DeviceInfo] {
        let credentials = try await self.store.client.call(StoreMethods.listCredentials, ListCredentialsParams(family: family)).credentials
        let registrations = try await self.store.all(family, type: RecordTypes.registeredDevice).compactMap { try? TypedRecord<RegisteredDevice>($0) }
        return credentials.map { credential in
            let registration = registrations.first { $0.fields.deviceID == credential.deviceId && $0.zone != "default" }
                ?? registrations.first { $0.fields.deviceID == credential.deviceId }
            let childRecord = registration?.fields.childRef?.recordName
            return DeviceInfo(
                deviceId: credential.deviceId, deviceName: registration?.fields.deviceName, role: credential.role,
                status: credential.status, childId: childRecord.flatMap(Names.childId),
                zone: credential.role == .child ? registration?.zone : nil, pairedAt: credential.createdAt, lastSeenAt: credential.lastSeenAt)
        }
    }
}

/// Ids the pairing service accepts for families, devices, children and invitations.
enum Identifiers {
    static func isValid(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 64 && value.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0)) }
    }

    static func check(_ path: String, _ value: String) throws(RPCError) {
        guard Self.isValid(value) else { throw RPCError.invalidParams(path, "must be 1 to 64 letters, digits, '-', '_' or '.'") }
    }

    /// A display name: any text, 1 to 100 characters, no control characters.
    static func checkName(_ path: String, _ value: String) throws(RPCError) {
        guard !value.isEmpty, value.count <= 100, !value.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) }) else {
            throw RPCError.invalidParams(path, "must be 1 to 100 characters without control characters")
        }
    }
}

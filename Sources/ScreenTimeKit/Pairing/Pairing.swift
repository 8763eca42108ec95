import Foundation
import PairingAPI
import RPCCore
import StoreAPI

/// Pairing, from either side. A child device accepts an
/// invitation, shows the verification code, and waits for the parent's confirmation; a
/// parent enrolls, invites children and co-parents, confirms, rejects and revokes.
public struct Pairing: Sendable {
    let session: Session
    let credentials: any CredentialStore

    // MARK: Child

    /// A child device accepts the invitation in `uri` (the QR code's text): it is
    /// registered in its zone and given a credential, kept (pending) in the credential store
    /// at once. Show ``PendingPairing/shortCode`` and call
    /// ``PendingPairing/waitForConfirmation(timeout:)``.
    public func accept(uri text: String, deviceId: String, deviceName: String) async throws(RPCError) -> PendingPairing {
        guard let link = PairingURI(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw RPCError(.invalidParams, "this is not a ScreenTime pairing code (screentime://pair?v=…); scan the parent's QR code again")
        }
        let accepted = try await self.session.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
            family: link.family, invitationId: link.invitationId, secret: link.secret, deviceId: deviceId, deviceName: deviceName),
            anonymous: true)
        let identity = DeviceIdentity(
            family: accepted.credential.family, deviceId: accepted.credential.deviceId, role: accepted.credential.role,
            status: accepted.credential.status, token: accepted.credential.token, zone: accepted.zone, childId: accepted.childId,
            urls: link.urls, pin: link.pin)
        try await self.keep(identity)
        return PendingPairing(pairing: self, identity: identity, shortCode: accepted.shortCode, invitationId: link.invitationId)
    }

    // MARK: Parent

    /// Turns an enrollment code (from `screentimectl family create` or an admin parent's
    /// ``inviteParent(role:)``) into this parent device's credential, kept in the store.
    @discardableResult
    public func enroll(family: String, code: String, deviceId: String, deviceName: String, displayName: String? = nil,
                       urls: [String] = [], pin: String? = nil) async throws(RPCError) -> DeviceIdentity {
        let credential = try await self.session.call(PairingMethods.enrollParent, EnrollParentParams(
            family: family, code: code, deviceId: deviceId, deviceName: deviceName, displayName: displayName), anonymous: true)
        let identity = DeviceIdentity(family: credential.family, deviceId: credential.deviceId, role: credential.role, status: credential.status,
                                      token: credential.token, urls: urls, pin: pin)
        try await self.keep(identity)
        return identity
    }

    /// Invites a child device: the child's zone, its root record and the share are created,
    /// and the invitation's URI is returned for a QR code (``ChildInvitation/uri``).
    public func inviteChild(childId: String, childName: String? = nil, expiresIn: Duration? = nil) async throws(RPCError) -> ChildInvitation {
        let invitation = try await self.session.call(PairingMethods.createInvitation, CreateInvitationParams(
            childId: childId, childName: childName, expiresInSeconds: expiresIn?.seconds))
        return ChildInvitation(invitation: invitation)
    }

    /// Where an invitation stands; once accepted, the code the child shows.
    public func status(of invitation: ChildInvitation) async throws(RPCError) -> (info: InvitationInfo, shortCode: ShortCode?) {
        let info = try await self.session.call(PairingMethods.invitationStatus, InvitationParams(invitationId: invitation.invitation.invitationId))
        let code = info.deviceId.map {
            ShortCode(secret: invitation.invitation.secret, invitationId: info.invitationId, parentDeviceId: info.parentDeviceId, childDeviceId: $0)
        }
        return (info, code)
    }

    /// Waits until a child device accepts the invitation, then returns the code to compare
    /// with the child's screen (the same emoji and words, derived on both sides).
    public func waitForAcceptance(of invitation: ChildInvitation, poll: Duration = .milliseconds(250), timeout: Duration = .seconds(600)) async throws(RPCError) -> ShortCode {
        let giveUp = ContinuousClock.now + timeout
        while ContinuousClock.now < giveUp {
            let (info, code) = try await self.status(of: invitation)
            if let code, info.status == .accepted || info.status == .confirmed { return code }
            if [.rejected, .locked, .expired, .used].contains(info.status) {
                throw RPCError(.invitationInvalid, "invitation \(info.invitationId) is \(info.status.rawValue); create a new one")
            }
            try? await Task.sleep(for: poll)
            if Task.isCancelled { throw RPCError(.cancelled, "stopped waiting for the child device") }
        }
        throw RPCError(.timeout, "no child device accepted invitation \(invitation.invitation.invitationId) within \(timeout)")
    }

    /// The codes match: the child's credential becomes active.
    @discardableResult
    public func confirm(_ invitation: ChildInvitation) async throws(RPCError) -> InvitationInfo {
        try await self.session.call(PairingMethods.confirm, InvitationParams(invitationId: invitation.invitation.invitationId))
    }

    /// The codes differ: the invitation is burned and the device cut off.
    @discardableResult
    public func reject(_ invitation: ChildInvitation) async throws(RPCError) -> InvitationInfo {
        try await self.session.call(PairingMethods.reject, InvitationParams(invitationId: invitation.invitation.invitationId))
    }

    /// Cuts a device off at once.
    @discardableResult
    public func revoke(deviceId: String) async throws(RPCError) -> DeviceInfo {
        try await self.session.call(PairingMethods.revokeDevice, DeviceParams(deviceId: deviceId))
    }

    /// An enrollment code for a co-parent (admin parents only).
    public func inviteParent(role: DeviceRole = .coParent) async throws(RPCError) -> EnrollmentCode {
        try await self.session.call(PairingMethods.inviteParent, InviteParentParams(role: role))
    }

    /// Every device of the family (parents only).
    public func devices() async throws(RPCError) -> [DeviceInfo] {
        try await self.session.call(PairingMethods.listDevices, Empty()).devices
    }

    func keep(_ identity: DeviceIdentity) async throws(RPCError) {
        do { try self.credentials.save(identity) } catch {
            throw RPCError(.internal, "the credential could not be stored: \(error)")
        }
        let changed = self.session.identity?.token != identity.token
        self.session.setIdentity(identity)
        if changed { await self.session.transport.credentialsChanged() }
    }
}

/// An invitation for a child device, from the parent's side.
public struct ChildInvitation: Sendable, Hashable {
    public var invitation: Invitation
    /// The text of the QR code (`screentime://pair?…`). Render it with the platform's QR
    /// generator (CoreImage's `CIFilter.qrCodeGenerator()` on iOS; `screentimectl` prints
    /// it in the terminal).
    public var uri: String { self.invitation.uri }
    public var zone: String { self.invitation.zone }
}

/// A child device that accepted an invitation and waits for the parent's confirmation.
public struct PendingPairing: Sendable {
    let pairing: Pairing
    public let identity: DeviceIdentity
    /// What both screens show: ``ShortCode/emojiLine`` and ``ShortCode/namesLine``.
    public let shortCode: ShortCode
    public let invitationId: String

    /// Waits until a parent confirms (the credential becomes active and is stored so), or
    /// throws `unauthorized` when the parent rejected the pairing or revoked the device.
    @discardableResult
    public func waitForConfirmation(poll: Duration = .milliseconds(250), timeout: Duration = .seconds(600)) async throws(RPCError) -> DeviceIdentity {
        let giveUp = ContinuousClock.now + timeout
        while ContinuousClock.now < giveUp {
            let me: WhoAmIResult
            do {
                me = try await self.pairing.session.call(StoreMethods.whoami, Empty())
            } catch {
                guard error.code == .unauthorized || error.code == .deviceRevoked else { throw error }
                throw RPCError(.unauthorized, "the parent rejected this pairing (or revoked the device); ask for a new invitation")
            }
            if me.status == .active {
                var active = self.identity
                active.status = .active
                try await self.pairing.keep(active)
                return active
            }
            try? await Task.sleep(for: poll)
            if Task.isCancelled { throw RPCError(.cancelled, "stopped waiting for the parent's confirmation") }
        }
        throw RPCError(.timeout, "the parent did not confirm within \(timeout)")
    }
}

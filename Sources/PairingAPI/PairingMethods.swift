import RPCCore
import StoreAPI

/// The pairing service's methods (`screentime-pairingd`, socket `pairing.sock`).
///
/// Three kinds of caller: local (no `auth`: the server's administrator), a device with a
/// credential (`auth.token`), and a device with nothing yet, whose proof is an
/// enrollment code or an invitation secret.
public enum PairingMethods {
    // Bootstrap
    public static let createFamily = MethodSpec<NewFamilyParams, EnrollmentCode>(
        "pairing.createFamily", summary: "Creates a family and a one-time enrollment code for its first (admin) parent. Local only.",
        callers: .local,
        errors: [.forbidden, .conflict])
    public static let enrollParent = MethodSpec<EnrollParentParams, DeviceCredential>(
        "pairing.enrollParent", summary: "Turns an enrollment code into a parent profile and the parent device's credential.",
        callers: [.local, .unauthenticated],
        errors: [.invitationInvalid, .conflict, .limitExceeded])
    public static let inviteParent = MethodSpec<InviteParentParams, EnrollmentCode>(
        "pairing.inviteParent", summary: "An admin parent's enrollment code for another parent (role co_parent by default).",
        callers: .parent,
        errors: [.unauthorized, .forbidden])

    // Child devices
    public static let createInvitation = MethodSpec<CreateInvitationParams, Invitation>(
        "pairing.createInvitation", summary: "Creates the child's zone, its MonitoringSession and an expiring single-use invitation (a pairing URI for a QR code).",
        callers: .parent,
        errors: [.unauthorized, .forbidden])
    public static let acceptInvitation = MethodSpec<AcceptInvitationParams, AcceptedInvitation>(
        "pairing.acceptInvitation", summary: "A child device accepts an invitation: registered, shared into the zone, given a pending credential and the short code.",
        callers: [.local, .unauthenticated],
        errors: [.invitationInvalid, .conflict, .limitExceeded])
    public static let invitationStatus = MethodSpec<InvitationParams, InvitationInfo>(
        "pairing.invitationStatus", summary: "Where an invitation stands, and which device accepted it (to derive the short code).",
        callers: .parent,
        errors: [.unauthorized, .forbidden, .notFound])
    public static let confirm = MethodSpec<InvitationParams, InvitationInfo>(
        "pairing.confirm", summary: "The codes match: the child's credential becomes active.",
        callers: .parent,
        errors: [.unauthorized, .forbidden, .notFound, .conflict])
    public static let reject = MethodSpec<InvitationParams, InvitationInfo>(
        "pairing.reject", summary: "The codes differ: the invitation is burned and the device's credential revoked.",
        callers: .parent,
        errors: [.unauthorized, .forbidden, .notFound, .conflict])

    // Devices
    public static let revokeDevice = MethodSpec<DeviceParams, DeviceInfo>(
        "pairing.revokeDevice", summary: "Cuts a device off at once: credential revoked, removed from shares, marked inactive; data stays. A parent's device only by an admin, never the family's last admin.",
        callers: .parent,
        errors: [.unauthorized, .forbidden, .notFound])
    public static let removeChild = MethodSpec<RemoveChildParams, RemoveChildResult>(
        "pairing.removeChild", summary: "Deletes a child: its devices are revoked and its zones deleted with their data. Admin parents only.",
        callers: .parent,
        errors: [.unauthorized, .forbidden, .notFound])
    public static let rotateCredential = MethodSpec<Empty, DeviceCredential>(
        "pairing.rotateCredential", summary: "The calling device replaces its own token; the old one stops working.",
        callers: .devices,
        errors: [.unauthorized])
    public static let signOut = MethodSpec<Empty, DeviceInfo>(
        "pairing.signOut", summary: "A parent's device gives up its own credential (a browser's sign-out): revoked at once, marked inactive. Not the family's last admin.",
        callers: .parent,
        errors: [.unauthorized, .forbidden])
    public static let listDevices = MethodSpec<Empty, ListDevicesResult>(
        "pairing.listDevices", summary: "Every device of the caller's family: role, state, child, last seen. Parents only.",
        callers: .parent,
        errors: [.unauthorized, .forbidden])
}

extension PairingMethods {
    /// Every method of the pairing service, in the order `rpc.describe` lists them. The service's
    /// method table is built against this list, and the gateway allows devices what it says.
    public static let list = MethodList(service: "pairing", [
        createFamily,
        enrollParent,
        inviteParent,
        createInvitation,
        acceptInvitation,
        invitationStatus,
        confirm,
        reject,
        revokeDevice,
        removeChild,
        rotateCredential,
        signOut,
        listDevices,
    ])
}

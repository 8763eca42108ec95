import RPCCore

extension ErrorCode {
    /// The invitation or enrollment code cannot be used: it does not exist, has expired,
    /// was used, was locked after wrong secrets, or the secret is wrong. One code for all,
    /// so a caller without the secret learns nothing about which invitations exist.
    public static let invitationInvalid = ErrorCode("invitation_invalid")

    /// The codes the pairing service adds to the protocol's own.
    public static let pairingCodes: [ErrorCode] = [.invitationInvalid]
}

import RPCCore

extension ErrorCode {
    /// A change token (or a watch position) is older than the tombstone horizon: the
    /// changes it would need were purged. Fetch everything again and start from the new token.
    public static let changeTokenExpired = ErrorCode("change_token_expired")
    /// The device's pairing was not confirmed by a parent yet; it may read, not write.
    public static let pairingUnconfirmed = ErrorCode("pairing_unconfirmed")

    /// The codes the store adds to the protocol's own.
    public static let storeCodes: [ErrorCode] = [.changeTokenExpired, .pairingUnconfirmed]
}

/// Why one item of a `store.modify` batch failed.
public struct ItemError: Codable, Sendable, Hashable, Error {
    public var code: ErrorCode
    public var message: String
    /// The field at fault, for schema and uniqueness errors.
    public var field: String?
    /// For `conflict`: the record as the server has it now, to rebase onto. Absent when
    /// the server has no such record (it was deleted, or never existed).
    public var serverRecord: Record?

    public init(code: ErrorCode, message: String, field: String? = nil, serverRecord: Record? = nil) {
        self.code = code
        self.message = message
        self.field = field
        self.serverRecord = serverRecord
    }
}

import ChangeFeed
import RPCCore
import StoreAPI

/// Who a device caller is, as the store says (through the credentials the aggregator keeps):
/// what parents may ask of the aggregator.
enum CallerIdentity {
    /// The family of the parent whose credential `auth` is; `unauthorized` for a token that
    /// is no device's, `forbidden` for a child's.
    static func parentFamily(_ auth: Auth, credentials: CredentialTable, for what: String) async throws -> String {
        try await Self.parentDevice(auth, credentials: credentials, for: what).family
    }

    /// The parent's device whose credential `auth` is, with its family.
    static func parentDevice(_ auth: Auth, credentials: CredentialTable, for what: String) async throws -> (family: String, deviceId: String) {
        let who = try await credentials.whoami(auth)
        guard let family = who.family, let deviceId = who.deviceId, let role = who.role else {
            throw RPCError(.unauthorized, "this credential is not a device's: send a parent's credential as auth.token")
        }
        guard role.isParent else { throw RPCError(.forbidden, "\(what): for parents; a child's device may not ask") }
        return (family, deviceId)
    }

    /// The child device whose credential `auth` is; `unauthorized` for a token that is no
    /// device's, `forbidden` for a parent's or a local caller.
    static func childDevice(_ auth: Auth?, credentials: CredentialTable, for what: String) async throws -> (family: String, deviceId: String) {
        guard let auth else { throw RPCError(.forbidden, "\(what): for a child's device; send its credential as auth.token") }
        let who = try await credentials.whoami(auth)
        guard let family = who.family, let deviceId = who.deviceId, let role = who.role else {
            throw RPCError(.unauthorized, "this credential is not a device's: send a child's credential as auth.token")
        }
        guard !role.isParent else { throw RPCError(.forbidden, "\(what): for a child's device; a parent's may not ask") }
        return (family, deviceId)
    }
}

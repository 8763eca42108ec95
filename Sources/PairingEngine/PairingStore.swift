import Foundation
import PairingAPI
import RPCClient
import RPCCore
import StoreAPI

/// The pairing service's view of the store: it calls as a local service, and as its
/// caller (`actingFor`) when the store must decide who that caller is.
struct PairingStore: Sendable {
    let client: RPCClient

    /// The internal zone holding invitations and enrollment codes; devices never see it.
    static let zone = "_pairing"

    /// Who the token belongs to; `unauthorized` for an unknown or revoked one.
    func caller(_ auth: Auth?) async throws -> WhoAmIResult {
        guard let auth else {
            throw RPCError(.unauthorized, "this method acts for a device: send its credential as auth.token")
        }
        let who = try await self.client.call(StoreMethods.whoami, Empty(), actingFor: auth)
        guard who.family != nil, who.deviceId != nil, who.role != nil else {
            throw RPCError(.unauthorized, "this method acts for a device: send its credential as auth.token")
        }
        return who
    }

    /// The caller, who must be an active parent (an admin when `admin`).
    func parent(_ auth: Auth?, admin: Bool = false) async throws -> Device {
        let who = try await self.caller(auth)
        guard let family = who.family, let deviceId = who.deviceId, let role = who.role, role.isParent else {
            throw RPCError(.forbidden, "only a parent's device may do this")
        }
        guard who.status == .active else { throw RPCError(.forbidden, "this parent device's credential is not active") }
        if admin, role != .admin { throw RPCError(.forbidden, "only an admin parent may do this") }
        return Device(family: family, deviceId: deviceId, role: role)
    }

    struct Device: Sendable {
        var family: String
        var deviceId: String
        var role: DeviceRole
    }

    func fetch(_ family: String, zone: String, _ name: String) async throws -> Record? {
        try await self.client.call(StoreMethods.fetch, FetchParams(family: family, zone: zone, recordNames: [name])).records.first
    }

    /// Saves atomically; a failed item becomes the call's error.
    @discardableResult
    func save(_ family: String, zone: String, _ saves: [RecordSave], policy: SavePolicy? = nil) async throws -> [Record] {
        let result = try await self.client.call(StoreMethods.modify, ModifyParams(family: family, zone: zone, saves: saves, savePolicy: policy, atomic: true))
        return result.saved.compactMap(\.record)
    }

    func delete(_ family: String, zone: String, _ names: [String]) async throws {
        _ = try await self.client.call(StoreMethods.modify, ModifyParams(family: family, zone: zone, deletes: names.map { RecordDelete(recordName: $0) }))
    }

    /// Every record of a type in the family (all pages).
    func all(_ family: String, zone: String? = nil, type: String, filters: [QueryFilter] = []) async throws -> [Record] {
        try await QueryParams(family: family, zone: zone, recordType: type, filters: filters, limit: QueryParams.maximumLimit)
            .allRecords { params in try await self.client.call(StoreMethods.query, params) }
    }

    func credential(_ family: String, deviceId: String) async throws -> CredentialInfo? {
        try await self.client.call(StoreMethods.listCredentials, ListCredentialsParams(family: family, deviceId: deviceId)).credentials.first
    }

    /// A new token for the device; the store keeps its hash.
    func issueCredential(_ family: String, deviceId: String, role: DeviceRole, status: CredentialStatus) async throws -> DeviceCredential {
        let token = Secrets.random(bytes: 32)
        let info = try await self.client.call(StoreMethods.putCredential, PutCredentialParams(
            family: family, deviceId: deviceId, role: role, tokenSHA256: SHA256Hex.of(token), status: status))
        return DeviceCredential(family: family, deviceId: deviceId, role: role, status: info.status, token: token)
    }

    func setCredential(_ family: String, deviceId: String, _ status: CredentialStatus, ifStatus: CredentialStatus? = nil) async throws {
        _ = try await self.client.call(StoreMethods.updateCredential, UpdateCredentialParams(family: family, deviceId: deviceId, status: status, ifStatus: ifStatus))
    }

    /// An AuditEntry in the family's default zone: who did what to what, when.
    func audit(_ family: String, actor: String, parentDeviceId: String?, action: String, target: String, metadata: JSONValue? = nil) async throws {
        let entry = AuditEntry(
            familyRef: .inDefaultZone(family), actorParentRef: .inDefaultZone(parentDeviceId.map(Names.parent) ?? family), action: action, target: target,
            timestamp: Date(), metadata: try metadata.map { try RPCJSON.encodeText($0) }, actor: actor)
        try await self.save(family, zone: "default", [.record(entry, named: "audit-\(Secrets.identifier())")])
    }
}

/// Record names the pairing service gives, so each thing has one deterministic id.
enum Names {
    static func parent(_ deviceId: String) -> String { "parent-\(deviceId)" }
    static func device(_ deviceId: String) -> String { "device-\(deviceId)" }
    static func child(_ childId: String) -> String { "child-\(childId)" }
    /// The child id in a ChildContext's record name.
    static func childId(_ recordName: String) -> String? {
        recordName.hasPrefix("child-") ? String(recordName.dropFirst("child-".count)) : nil
    }
    static let session = "session"
    static let childZonePrefix = "ChildMonitoring-"
}

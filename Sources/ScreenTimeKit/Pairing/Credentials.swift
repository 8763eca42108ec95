import Foundation
import RPCCore
import StoreAPI

/// Who this device is to the server: what pairing or enrollment gave it. Kept by a
/// ``CredentialStore`` (the Keychain on iOS, a file with mode 0600 in the CLI).
public struct DeviceIdentity: Codable, Sendable, Hashable {
    public var family: String
    public var deviceId: String
    public var role: DeviceRole
    /// `pending` until a parent confirms a child's pairing; `active` after.
    public var status: CredentialStatus
    /// The bearer token. A secret: store it as one.
    public var token: String
    /// A child device's own zone (`ChildMonitoring-…`); nil for a parent.
    public var zone: String?
    /// A child device's child id (`emma`), as the parent named it.
    public var childId: String?
    /// How to reach the gateway from outside (from the pairing URI); empty on the server.
    public var urls: [String]
    public var pin: String?

    public init(family: String, deviceId: String, role: DeviceRole, status: CredentialStatus, token: String, zone: String? = nil,
                childId: String? = nil, urls: [String] = [], pin: String? = nil) {
        self.family = family
        self.deviceId = deviceId
        self.role = role
        self.status = status
        self.token = token
        self.zone = zone
        self.childId = childId
        self.urls = urls
        self.pin = pin
    }
}

/// Where the device's credential lives. The app implements it with the Keychain
/// (`kSecClassGenericPassword`, `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`, so
/// background refresh can read it); ``FileCredentialStore`` is the CLI's.
public protocol CredentialStore: Sendable {
    func load() throws -> DeviceIdentity?
    func save(_ identity: DeviceIdentity) throws
    func delete() throws
}

/// A credential in a JSON file readable by its owner only (mode 0600, written atomically:
/// a temporary file created 0600 in the same directory, then renamed over the old one).
public struct FileCredentialStore: CredentialStore {
    public let path: String

    public init(path: String) { self.path = path }

    public func load() throws -> DeviceIdentity? {
        guard let data = FileManager.default.contents(atPath: self.path) else { return nil }
        return try RPCJSON.makeDecoder().decode(DeviceIdentity.self, from: data)
    }

    public func save(_ identity: DeviceIdentity) throws {
        let data = try RPCJSON.makeEncoder(pretty: true).encode(identity)
        let directory = (self.path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory.isEmpty ? "." : directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let temporary = self.path + ".tmp-\(UUID().uuidString)"
        guard FileManager.default.createFile(atPath: temporary, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw RPCError(.internal, "cannot create \(temporary): check that the directory is writable")
        }
        do {
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
            try handle.write(contentsOf: data)
            try handle.synchronize()
            try handle.close()
            // rename(2): atomic, and replaces the old file in one step.
            guard rename(temporary, self.path) == 0 else {
                throw RPCError(.internal, "cannot move the credential into \(self.path): \(String(cString: strerror(errno)))")
            }
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
    }

    public func delete() throws {
        if FileManager.default.fileExists(atPath: self.path) { try FileManager.default.removeItem(atPath: self.path) }
    }
}

/// A credential kept in memory only (tests, previews).
public final class MemoryCredentialStore: CredentialStore {
    private let value = Mutex<DeviceIdentity?>(nil)
    public init(_ identity: DeviceIdentity? = nil) { self.value.withLock { $0 = identity } }
    public func load() throws -> DeviceIdentity? { self.value.withLock { $0 } }
    public func save(_ identity: DeviceIdentity) throws { self.value.withLock { $0 = identity } }
    public func delete() throws { self.value.withLock { $0 = nil } }
}

import Synchronization

import Foundation
import PairingAPI
import ScreenTimeKit
import StoreAPI
import Synchronization

/// What docs/kit.md's code takes from the app around it: the kit, the scanned code, the
/// app's screens (`show`), its credential store. Tests set `kit` before running a snippet.
enum KitDocs {
    private static let current = Mutex<ScreenTimeClient?>(nil)

    static var kit: ScreenTimeClient {
        get {
            guard let kit = current.withLock({ $0 }) else { fatalError("KitDocs.kit was not set") }
            return kit
        }
        set { current.withLock { $0 = newValue } }
    }

    static let scannedText = "screentime://pair?v=2&server=home.example&family=smith&invitation=i&secret=s"
    static let deviceId = "emma-ipad"
    static let zone = "child-emma"
    static let codeFromAdmin = "ABCD-1234"
    static let home = NSTemporaryDirectory()
    static let cache = ChangeCache()

    static func show(_ text: String, _ detail: String) {}
    static func showQR(_ uri: String) {}
    static func userSaysCodesMatch(_ code: ShortCode) -> Bool { true }
}

/// The app's Application Support directory and app group container.
let appSupport = NSTemporaryDirectory()
let appGroup = NSTemporaryDirectory()

/// What the app does with a command: ManagedSettings on a phone.
@Sendable func enforce(_ command: TypedRecord<ConfigurationCommand>) async throws {}

/// The app's local copy of a zone, brought up to date by `fetchChanges`.
final class ChangeCache: Sendable {
    private let records = Mutex<[String: Record]>([:])
    func apply(_ page: ZoneChanges) {
        self.records.withLock { records in
            for record in page.records { records[record.recordName] = record }
            for deleted in page.deletions { records[deleted.recordName] = nil }
        }
    }
}

/// The app's credential store (the Keychain on a phone; a file here).
struct KeychainCredentialStore: CredentialStore {
    private let file = FileCredentialStore(path: NSTemporaryDirectory() + "/kit-docs-credential.json")
    func load() throws -> DeviceIdentity? { try self.file.load() }
    func save(_ identity: DeviceIdentity) throws { try self.file.save(identity) }
    func delete() throws { try self.file.delete() }
}

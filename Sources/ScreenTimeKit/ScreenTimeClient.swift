import Foundation
import Logging
import RPCCore
import PairingAPI
import StoreAPI

/// ScreenTimeKit's entry point: what an app links instead of CloudKit (`CKContainer`).
///
/// ```swift
/// let kit = try ScreenTimeClient.remote(credentials: KeychainStore(), databasePath: supportDir + "/screentime.sqlite")
/// let summary = try await kit.parent.todaySummary(for: "emma")
/// try kit.child.uploadUsage(sessions)               // queued, sent exactly once
/// for try await note in kit.notifications.stream() { … }   // acknowledged after each
/// ```
///
/// One client per device and database file. Everything is `Sendable`; calls from many
/// tasks share one connection.
public final class ScreenTimeClient: Sendable {
    public let transport: any Transport
    /// The family's records (`CKDatabase`).
    public let records: RecordDatabase
    /// The offline queue: writes persisted, then sent exactly once.
    public let queue: SyncQueue
    /// Subscriptions and the notification stream.
    public let notifications: Notifications
    /// Pairing, child and parent side.
    public let pairing: Pairing
    /// The child device's flows.
    public let child: ChildFlows
    /// The parent device's flows.
    public let parent: ParentFlows
    let session: Session
    let credentials: any CredentialStore

    /// Opens the kit on a transport: the credential (if the device has one) from
    /// `credentials`, the kit's own database at `databasePath` (created if needed), and the
    /// offline queue's replay started.
    /// With `startReplay` false the queue waits for ``SyncQueue/start()`` (to listen to its
    /// events from the first one). `clock` is the device's wall clock (tests and simulations
    /// set their own).
    public init(transport: any Transport, credentials: any CredentialStore, databasePath: String, backoff: Backoff = Backoff(),
                startReplay: Bool = true, clock: @escaping @Sendable () -> Date = { Date() },
                logger: Logger = Logger(label: "screentimekit")) throws(RPCError) {
        let identity: DeviceIdentity?
        do { identity = try credentials.load() } catch {
            throw RPCError(.internal, "the stored credential could not be read: \(error)")
        }
        let store = try LocalStore(path: databasePath)
        let session = Session(transport: transport, identity: identity)
        self.transport = transport
        self.session = session
        self.credentials = credentials
        let records = RecordDatabase(session: session, store: store)
        let queue = SyncQueue(store: store, session: session, backoff: backoff, clock: clock, logger: logger)
        self.records = records
        self.queue = queue
        self.notifications = Notifications(session: session, store: store, backoff: backoff, logger: logger)
        self.pairing = Pairing(session: session, credentials: credentials)
        self.child = ChildFlows(session: session, records: records, queue: queue)
        self.parent = ParentFlows(session: session, records: records, queue: queue)
        if startReplay { queue.start() }
    }

    /// On the server itself: the services' Unix sockets in `runtimeDirectory`
    /// (`/run/screentime`).
    public static func local(runtimeDirectory: String, credentials: any CredentialStore, databasePath: String,
                             backoff: Backoff = Backoff(initial: .milliseconds(50), maximum: .seconds(2))) throws(RPCError) -> ScreenTimeClient {
        try ScreenTimeClient(transport: UnixSocketTransport(runtimeDirectory: runtimeDirectory, backoff: backoff), credentials: credentials,
                             databasePath: databasePath, backoff: backoff)
    }

    /// From anywhere: the gateway over TLS, at the URLs and with the pin the credential
    /// (or, before pairing, the pairing URI in `link`) carries.
    public static func remote(credentials: any CredentialStore, databasePath: String, link: PairingURI? = nil,
                              backoff: Backoff = Backoff()) throws(RPCError) -> ScreenTimeClient {
        let stored: DeviceIdentity?
        do { stored = try credentials.load() } catch { throw RPCError(.internal, "the stored credential could not be read: \(error)") }
        let urls = stored?.urls.isEmpty == false ? stored!.urls : (link?.urls ?? [])
        guard !urls.isEmpty, let pinText = stored?.pin ?? link?.pin, let pin = KeyPin(pinText) else {
            throw RPCError(.invalidParams, "no gateway URL and pin: pair with a version 2 pairing code (screentime://pair?v=2&…&url=…&pin=…)")
        }
        let box = TokenBox()
        box.set(stored?.token)
        let transport = WebSocketTransport(configuration: .init(urls: urls, pin: pin, token: { box.get() }, backoff: backoff))
        let kit = try ScreenTimeClient(transport: transport, credentials: TokenTrackingStore(credentials, box: box), databasePath: databasePath, backoff: backoff)
        return kit
    }

    /// Who this device is (nil before pairing).
    public var identity: DeviceIdentity? { self.session.identity }

    /// The app is going to the background (`scenePhase` becomes `.background`): sends what
    /// the offline queue holds for at most `within`, stops its replay (the rest stays on
    /// disk), and closes the connection cleanly, so the server knows at once that the device
    /// is asleep and wakes it (docs/kit.md, "Wakes") instead of writing to a socket iOS has
    /// frozen. Calls fail at once with `unavailable` until ``resume()``.
    public func suspend(within limit: Duration = .seconds(5)) async {
        let queue = self.queue
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await queue.waitUntilDrained() }
            group.addTask { try? await Task.sleep(for: limit) }
            await group.next()
            group.cancelAll()
        }
        await queue.stop()
        await self.transport.suspend()
    }

    /// The app is back in the foreground (or woken): connects again and restarts the offline
    /// queue's replay. A notification stream the app keeps running listens again after the
    /// last notification handled; the app's `records.fetchChanges(in:)` continues from the
    /// change token the kit keeps.
    public func resume() async {
        await self.transport.resume()
        self.queue.start()
    }

    /// Stops the queue's replay (what is queued stays on disk) and closes the connection.
    public func close() async {
        await self.queue.stop()
        await self.transport.close()
    }
}

/// Hands the WebSocket transport the token the credential store holds now.
final class TokenBox: Sendable {
    private let token = Mutex<String?>(nil)
    func get() -> String? { self.token.withLock { $0 } }
    func set(_ value: String?) { self.token.withLock { $0 = value } }
}

/// A credential store that also tells the transport's token box.
struct TokenTrackingStore: CredentialStore {
    let inner: any CredentialStore
    let box: TokenBox
    init(_ inner: any CredentialStore, box: TokenBox) {
        self.inner = inner
        self.box = box
    }
    func load() throws -> DeviceIdentity? { try self.inner.load() }
    func save(_ identity: DeviceIdentity) throws {
        try self.inner.save(identity)
        self.box.set(identity.token)
    }
    func delete() throws {
        try self.inner.delete()
        self.box.set(nil)
    }
}

import Synchronization

import ArgumentParser
import Foundation
import Logging
import RPCClient
import RPCCore
import ScreenTimeKit
import StoreAPI
import Synchronization

/// Where a device-mode command reaches the server: the gateway over TLS (`--server URL`,
/// or the URL and pin its profile keeps), else the services' local sockets.
struct RemoteOptions: ParsableArguments {
    @Option(name: .customLong("server"), help: ArgumentHelp(
        "Act as the device from anywhere: through the gateway at this URL (https://host:8443).",
        discussion: "Default: $SCREENTIME_SERVER, else the URL kept in the profile by `parent enroll --server` or `child accept --server`; without one, device mode uses the local sockets.",
        valueName: "url"))
    var server: String?

    @Option(name: .customLong("pin"), help: ArgumentHelp(
        "The gateway's key pin (base64 SHA-256 of its public key; `screentimectl gateway pin` on the server prints it).",
        discussion: "Default: $SCREENTIME_PIN, else the pin in the pairing link (child accept) or kept in the profile. A server whose key does not match is refused (pin_mismatch), never used.",
        valueName: "pin"))
    var pin: String?

    var serverURL: String? {
        self.server ?? ProcessInfo.processInfo.environment["SCREENTIME_SERVER"].flatMap { $0.isEmpty ? nil : $0 }
    }

    var pinText: String? {
        self.pin ?? ProcessInfo.processInfo.environment["SCREENTIME_PIN"].flatMap { $0.isEmpty ? nil : $0 }
    }

    func validate() throws {
        if let url = self.serverURL {
            guard let components = URLComponents(string: url), components.scheme == "https", components.host?.isEmpty == false else {
                throw ValidationError("--server takes the gateway's https URL (https://host:8443): \(url)")
            }
        }
        if let pin = self.pinText, KeyPin(pin) == nil {
            throw ValidationError("--pin is the base64 SHA-256 of the gateway's key (44 characters, as `screentimectl gateway pin` prints it): \(pin)")
        }
    }
}

/// The gateway a device talks to: its URLs, most preferred first, and its key's pin.
struct GatewayTarget: Hashable, Sendable {
    var urls: [String]
    var pin: KeyPin

    /// `--server` (its pin from `--pin`, else the pairing link's, else the profile's); else
    /// the gateway the profile keeps (`--pin` may replace its pin); nil: the local sockets.
    static func resolve(_ remote: RemoteOptions, profile: Profile?, linkPin: String? = nil) throws(CLIError) -> GatewayTarget? {
        if let server = remote.serverURL {
            guard let pin = remote.pinText ?? linkPin ?? profile?.gatewayPin else {
                throw CLIError(.invalidInput, "--server needs the gateway's key pin: give --pin (on the server, `screentimectl gateway pin` prints it), or a version 2 pairing link, which carries it")
            }
            return GatewayTarget(urls: [server], pin: try Self.pin(pin))
        }
        if let profile, let urls = profile.gatewayURLs, !urls.isEmpty, let pin = profile.gatewayPin {
            return GatewayTarget(urls: urls, pin: try Self.pin(remote.pinText ?? pin))
        }
        if remote.pin != nil {
            throw CLIError(.invalidInput, "--pin goes with a gateway: give --server URL too (this device uses the local sockets)")
        }
        return nil
    }

    static func pin(_ text: String) throws(CLIError) -> KeyPin {
        guard let pin = KeyPin(text) else { throw CLIError(.invalidInput, "the gateway's pin is not the base64 SHA-256 of a key: \(text)") }
        return pin
    }
}

/// A device's calls through ScreenTimeKit's transport: the gateway's pinned TLS WebSocket
/// (``WebSocketTransport``, the connection authenticated with the device's token) or the
/// local sockets (``UnixSocketTransport``, the token in each request). The same typed
/// calls as an `RPCClient`, so each command reads the same either way.
struct DeviceLink: Sendable {
    let transport: any Transport
    let auth: Auth?

    func call<P, R>(_ spec: MethodSpec<P, R>, _ params: P) async throws(RPCError) -> R {
        try await self.transport.call(spec, params, auth: self.auth)
    }

    func stream<P, I, E>(_ spec: StreamSpec<P, I, E>, _ params: P) -> AsyncThrowingStream<StreamEvent<I, E>, any Error> {
        self.transport.stream(spec, params, auth: self.auth)
    }

    /// The kit's own log: quiet in a terminal (each failed attempt would be a line); what
    /// went wrong reaches the user in the command's error.
    static var logger: Logger {
        var logger = Logger(label: "screentimectl.kit")
        logger.logLevel = ProcessInfo.processInfo.environment["SCREENTIME_KIT_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .error
        return logger
    }

    /// Why the gateway cannot be reached, when the transport knows.
    static func reason(_ transport: any Transport) -> String {
        guard let error = (transport as? WebSocketTransport)?.lastError else { return "" }
        return ": \(error.message)"
    }

    /// One transport per place and credential for the whole process (a WebSocket is
    /// authenticated once, at its upgrade, so each token has its own).
    private static let transports = Mutex<[String: any Transport]>([:])

    static func open(_ connection: ConnectionOptions, target: GatewayTarget?, token: String?) -> DeviceLink {
        let timeout = Duration.milliseconds(Int64(connection.timeout * 1000))
        guard let target else {
            let directory = (connection.socketPath(for: "store") as NSString).deletingLastPathComponent
            let transport = self.transports.withLock { transports in
                let key = "local|\(directory)"
                if let existing = transports[key] { return existing }
                let transport = UnixSocketTransport(runtimeDirectory: directory, callTimeout: timeout, connectTimeout: .milliseconds(500))
                transports[key] = transport
                return transport
            }
            return DeviceLink(transport: transport, auth: token.map(Auth.init(token:)))
        }
        let transport = self.transports.withLock { transports in
            let key = "gateway|\(target.urls.joined(separator: " "))|\(target.pin)|\(token ?? "")"
            if let existing = transports[key] { return existing }
            // A terminal's command gives up on an unreachable gateway after a few quick tries.
            let transport = WebSocketTransport(configuration: .init(
                urls: target.urls, pin: target.pin, token: { token }, callTimeout: timeout,
                backoff: Backoff(initial: .milliseconds(100), maximum: .seconds(2), attemptsBeforeOffline: 3)), logger: Self.logger)
            transports[key] = transport
            return transport
        }
        return DeviceLink(transport: transport, auth: token.map(Auth.init(token:)))
    }
}

/// The profile as ScreenTimeKit's credential store: the kit reads who the device is from
/// it; the profile file stays the CLI's one record of the device (saved by its commands).
struct ProfileCredentials: CredentialStore {
    let profile: Profile
    let target: GatewayTarget?

    func load() throws -> DeviceIdentity? {
        DeviceIdentity(family: self.profile.family, deviceId: self.profile.deviceId, role: self.profile.role == .parent ? .coParent : .child,
                       status: .active, token: self.profile.token, zone: self.profile.zone, childId: self.profile.childId,
                       urls: self.target?.urls ?? [], pin: self.target?.pin.description)
    }

    func save(_ identity: DeviceIdentity) throws {}
    func delete() throws {}
}

extension Device {
    /// The kit's database for this profile (its offline queue): beside the profile file.
    var kitDatabasePath: String { self.options.profiles.directory + "/\(self.profile.name).kit.sqlite" }

    /// ScreenTimeKit on this device's link, its offline queue in ``kitDatabasePath``, not
    /// replaying until ``sync(_:report:)`` starts it.
    func kit() throws -> ScreenTimeClient {
        try FileManager.default.createDirectory(atPath: self.options.profiles.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return try ScreenTimeClient(transport: self.link.transport, credentials: ProfileCredentials(profile: self.profile, target: self.target),
                                    databasePath: self.kitDatabasePath, backoff: Backoff(initial: .milliseconds(100), maximum: .seconds(2), attemptsBeforeOffline: 3),
                                    startReplay: false, logger: DeviceLink.logger)
    }

    /// What a replay of the offline queue came to.
    struct SyncOutcome {
        var applied = 0
        var alreadyApplied = 0
        var failed: [(QueuedBatch, RPCError)] = []
        /// Batches still queued because the gateway is unreachable.
        var waiting = 0
        /// The server answered "not now" for a reason other than the connection (a child
        /// not confirmed yet, a limit): the batch stays queued, the sync ends.
        var notNow: RPCError?
    }

    /// Replays the kit's offline queue, oldest first, each batch with its own request id (so
    /// one the server applied before, whose reply was lost, is not applied again), until it
    /// is empty or the gateway is unreachable (the transport is offline: then the rest
    /// waits for the next sync). `report` hears each batch's fate.
    func sync(_ kit: ScreenTimeClient, report: @escaping @Sendable (QueueEvent) -> Void = { _ in }) async throws -> SyncOutcome {
        let outcome = Mutex(SyncOutcome())
        let events = kit.queue.events()
        let (refusals, refused) = AsyncStream<Void>.makeStream()
        let listener = Task {
            for await event in events {
                switch event {
                case .applied(_, let result): outcome.withLock { if result.replayed { $0.alreadyApplied += 1 } else { $0.applied += 1 } }
                case .failed(let batch, let error): outcome.withLock { $0.failed.append((batch, error)) }
                case .willRetry(_, let error, _) where ![.unavailable, .timeout, .cancelled].contains(error.code):
                    outcome.withLock { $0.notNow = $0.notNow ?? error }
                    refused.yield()
                case .held(_, let error):
                    outcome.withLock { $0.notNow = $0.notNow ?? error }
                    refused.yield()
                case .sending, .willRetry: break
                }
                report(event)
            }
        }
        defer { listener.cancel() }
        kit.queue.start()
        // Drained, offline, or a "not now" from the server: whichever comes first (all
        // events, no timer).
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await kit.queue.waitUntilDrained() }
            group.addTask {
                for await state in kit.transport.states() where state == .offline || state == .revoked { return }
            }
            group.addTask { for await _ in refusals { return } }
            await group.next()
            group.cancelAll()
        }
        refused.finish()
        // Stopping ends the events stream after what was published: the listener sees it all.
        await kit.queue.stop()
        _ = await listener.value
        var result = outcome.withLock { $0 }
        result.waiting = (try? kit.queue.pending().count) ?? 0
        if kit.transport.state == .revoked, result.notNow?.code != .deviceRevoked {
            result.notNow = (kit.transport as? WebSocketTransport)?.lastError.flatMap { $0.code == .deviceRevoked ? $0 : nil }
                ?? RPCError(.deviceRevoked, "this device was removed from the family: its credential was revoked")
        }
        return result
    }
}

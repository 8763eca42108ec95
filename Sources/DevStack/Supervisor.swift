import Dispatch
import Foundation
import Glibc
import ProcessSpawn

/// Runs the stack as systemd would, without systemd: holds each service's socket, starts
/// the service on its first connection with the socket passed on, restarts it when it
/// crashes, prints its log lines under its name and a status line on every change, and
/// stops everything on SIGINT or SIGTERM.
public final class Supervisor {
    public struct ServiceDefinition: Sendable {
        public var name: String
        public var binary: String
        public var arguments: [String]
        /// A TCP socket on this address instead of `<runtime-dir>/<name>.sock` (the gateway).
        public var tcp: (host: String, port: Int)?

        public init(name: String, binary: String, arguments: [String], tcp: (host: String, port: Int)? = nil) {
            self.name = name
            self.binary = binary
            self.arguments = arguments
            self.tcp = tcp
        }
    }

    private let services: [ManagedService]
    private let console: Console
    private let statusFile: String
    private let runtimeDirectory: String
    private let stopTimeout: Duration
    private var signalPipe: (read: Int32, write: Int32) = (-1, -1)

    /// Binds every socket in `runtimeDirectory` (`<name>.sock`, and `notify/<name>` for
    /// `sd_notify`); fails without starting anything if one cannot be bound.
    public init(services definitions: [ServiceDefinition], runtimeDirectory: String, console: Console, stopTimeout: Duration = .seconds(15)) throws {
        try FileManager.default.createDirectory(atPath: runtimeDirectory + "/notify", withIntermediateDirectories: true)
        var services: [ManagedService] = []
        do {
            for definition in definitions {
                let socket: ListeningSocket
                if let tcp = definition.tcp {
                    socket = try ListeningSocket(tcpHost: tcp.host, port: tcp.port)
                } else {
                    let socketPath = "\(runtimeDirectory)/\(definition.name).sock"
                    guard socketPath.utf8.count <= UnixAddress.maximumPathLength else {
                        throw DevError("\(socketPath) is longer than a Unix socket path may be (\(UnixAddress.maximumPathLength) bytes): use a shorter --dir")
                    }
                    socket = try ListeningSocket(path: socketPath)
                }
                let notify: NotifySocket
                do { notify = try NotifySocket(path: "\(runtimeDirectory)/notify/\(definition.name)") } catch {
                    socket.close()
                    throw error
                }
                services.append(ManagedService(name: definition.name, binary: definition.binary, arguments: definition.arguments, socket: socket, notify: notify))
            }
        } catch {
            for service in services { service.close() }
            throw error
        }
        self.services = services
        self.console = console
        self.statusFile = runtimeDirectory + "/dev-status.json"
        self.runtimeDirectory = runtimeDirectory
        self.stopTimeout = stopTimeout
    }

    /// The TCP port a service listens on (the gateway), once bound.
    public func tcpPort(of name: String) -> Int? {
        self.services.first { $0.name == name }?.socket.port
    }

    /// Runs until SIGINT or SIGTERM; returns once every service has stopped.
    public func run() throws {
        try self.catchSignals()
        self.writeStatus()
        self.console.status(self.services.map { ($0.name, $0.summary) })
        var stopping = false
        while !stopping {
            let now = ContinuousClock.now
            var fds = [pollfd(fd: self.signalPipe.read, events: Int16(POLLIN), revents: 0)]
            var owners: [ManagedService?] = [nil]
            for service in self.services {
                for fd in service.watchedDescriptors(now: now) {
                    fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0))
                    owners.append(service)
                }
            }
            let timeout = self.services.contains { if case .restarting = $0.state { true } else { false } } ? 50 : 500
            let ready = poll(&fds, nfds_t(fds.count), Int32(timeout))
            guard ready >= 0 || errno == EINTR else { throw DevError("poll: \(String(cString: strerror(errno)))") }
            if fds[0].revents != 0 { stopping = true }
            var changed = false
            for service in self.services {
                self.printLog(of: service)
                if service.readNotifications() { changed = true }
            }
            changed = self.reap() || changed
            let after = ContinuousClock.now
            for service in self.services {
                let waiting = zip(fds, owners).contains { $0.0.fd == service.socket.fd && $0.1 === service && $0.0.revents & Int16(POLLIN) != 0 }
                guard !stopping, service.due(now: after, connectionWaiting: waiting) else { continue }
                do {
                    try service.start()
                    self.console.event("starting \(service.name)\(service.starts > 1 ? " (start \(service.starts))" : "")")
                } catch {
                    self.console.event("cannot start \(service.name): \(error)")
                    _ = service.exited(status: 127, now: after)
                }
                changed = true
            }
            if changed {
                self.writeStatus()
                self.console.status(self.services.map { ($0.name, $0.summary) })
            }
        }
        self.stopAll()
    }

    /// Notes every service that exited; returns whether any did.
    private func reap(stopping: Bool = false) -> Bool {
        var any = false
        while true {
            var raw: Int32 = 0
            let pid = waitpid(-1, &raw, WNOHANG)
            guard pid > 0 else { break }
            guard let service = self.services.first(where: { $0.state.pid == pid }) else { continue }
            self.printLog(of: service)
            let status = ChildExit.decode(raw)
            let exit = service.exited(status: status, now: .now)
            if stopping {
                self.console.event(status == 0 ? "\(service.name) stopped" : "\(service.name) stopped (exit status \(status))")
                any = true
                continue
            }
            switch exit {
            case .clean:
                self.console.event("\(service.name) exited; it starts again on the next connection")
            case .crashed(let status, let restarting):
                let how = status > 128 ? "killed by signal \(status - 128)" : "exit status \(status)"
                self.console.event(restarting ? "\(service.name) crashed (\(how)); restarting"
                    : "\(service.name) crashed (\(how)) \(ManagedService.crashLimit) times within \(ManagedService.crashWindow); giving up until a connection comes in \(ManagedService.crashWindow)")
            }
            any = true
        }
        return any
    }

    private func printLog(of service: ManagedService) {
        for line in service.readLog() where !line.isEmpty { self.console.log(service.name, line) }
    }

    /// SIGTERM to every service, SIGKILL to those still running after the timeout.
    private func stopAll() {
        self.console.event("stopping")
        for service in self.services { if let pid = service.state.pid { kill(pid, SIGTERM) } }
        let deadline = ContinuousClock.now + self.stopTimeout
        while self.services.contains(where: { $0.state.pid != nil }) {
            if ContinuousClock.now >= deadline {
                for service in self.services {
                    guard let pid = service.state.pid else { continue }
                    self.console.event("\(service.name) did not stop within \(self.stopTimeout); killing it")
                    kill(pid, SIGKILL)
                }
            }
            usleep(20_000)
            for service in self.services { self.printLog(of: service) }
            _ = self.reap(stopping: true)
        }
        for service in self.services {
            self.printLog(of: service)
            service.close()
        }
        unlink(self.statusFile)
        rmdir(self.runtimeDirectory + "/notify")
        // The services' state files (run/status): the stack they described is gone.
        try? FileManager.default.removeItem(atPath: self.runtimeDirectory + "/status")
        self.console.event("stopped")
    }

    private func catchSignals() throws {
        self.signalPipe = try makePipe(nonblocking: true)
        let writeEnd = self.signalPipe.write
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                var byte: UInt8 = 1
                _ = write(writeEnd, &byte, 1)
            }
            source.resume()
            Self.signalSources.append(source)
        }
    }

    nonisolated(unsafe) private static var signalSources: [any DispatchSourceSignal] = []

    /// `<runtime-dir>/dev-status.json`: each service's state and pid, for `screentime-dev
    /// status` and the tests.
    private func writeStatus() {
        let entries = self.services.map { service -> [String: Any] in
            var entry: [String: Any] = ["name": service.name, "state": service.summary, "starts": service.starts]
            if let pid = service.state.pid { entry["pid"] = Int(pid) }
            if !service.status.isEmpty { entry["status"] = service.status }
            return entry
        }
        guard let data = try? JSONSerialization.data(withJSONObject: ["services": entries], options: [.sortedKeys]) else { return }
        let temporary = self.statusFile + ".tmp"
        if FileManager.default.createFile(atPath: temporary, contents: data) { rename(temporary, self.statusFile) }
    }
}

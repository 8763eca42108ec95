import Foundation
import RPCClient
import RPCCore
import ServerVersion

/// The whole server's metrics in one Prometheus text: each running service's own (asked
/// over its socket with `rpc.metrics`), the gateway's, and for every service whether it was
/// up. A service that is not running is reported as such and never asked: connecting to its
/// socket would start it, and a scrape every 15 s would keep every service awake.
public enum ServerMetrics {
    /// How long a running service has to answer before it counts as down for this scrape.
    public static let timeout: Duration = .seconds(3)

    /// `own`: the text of the process that asks (the gateway's), if any.
    public static func scrape(runtimeDirectory: String, socketPath: @Sendable (String) -> String, own: String? = nil) async -> String {
        let states = ServerStatus.services(runtimeDirectory: runtimeDirectory)
        let texts = await withTaskGroup(of: (String, String?).self) { group in
            for status in states where status.state == .running && status.service != "gateway" {
                let path = socketPath(status.service)
                group.addTask { (status.service, await self.ask(path)) }
            }
            var texts: [String: String] = [:]
            for await (service, text) in group { if let text { texts[service] = text } }
            return texts
        }
        var out = """
            # HELP screentime_up Whether the service was running and answered this scrape (1), or not (0): a scrape never starts a service.
            # TYPE screentime_up gauge

            """
        for status in states {
            let up = status.service == "gateway" ? (own != nil && status.state == .running) : texts[status.service] != nil
            out += "screentime_up{service=\"\(status.service)\"} \(up ? 1 : 0)\n"
        }
        out += """
            # HELP screentime_service_state The service's state: running, idle-exited (waiting for its socket), stopped, failed or not-started (1 for the one it is in).
            # TYPE screentime_service_state gauge

            """
        let allStates: [ServiceStatus.State] = [.running, .idleExited, .stopped, .failed, .notStarted]
        for status in states {
            for state in allStates {
                out += "screentime_service_state{service=\"\(status.service)\",state=\"\(state.rawValue)\"} \(state == status.state ? 1 : 0)\n"
            }
        }
        out += """
            # HELP screentime_service_restarts_total Starts of the service that followed a failure, since the server booted.
            # TYPE screentime_service_restarts_total counter

            """
        for status in states { out += "screentime_service_restarts_total{service=\"\(status.service)\"} \(status.restarts)\n" }
        out += """
            # HELP screentime_build_info The server's version.
            # TYPE screentime_build_info gauge
            screentime_build_info{version="\(ServerVersion.current)"} 1

            """
        for service in ServerStatus.services {
            if service == "gateway", let own { out += own } else if let text = texts[service] { out += text }
        }
        return out
    }

    private static func ask(_ socketPath: String) async -> String? {
        let client = RPCClient(configuration: ClientConfiguration(socketPath: socketPath, callTimeout: self.timeout, connectTimeout: self.timeout))
        let text = try? await client.call(Builtin.metrics, Empty()).text
        await client.close()
        return text
    }
}

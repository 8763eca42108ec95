import Foundation
import NIOCore
import NIOPosix

/// Why a connection could not be made, as a person reads it ("nothing listens at
/// home.example:8443 (connection refused)"), in place of SwiftNIO's error values.
enum ConnectionFailure {
    static func sentence(_ error: any Error, host: String, port: Int) -> String {
        switch error {
        case let error as NIOConnectionError:
            if error.connectionErrors.isEmpty {
                return "the name \(error.host) does not resolve to an address (check the server's name, or this device's network)"
            }
            let reasons = Set(error.connectionErrors.map { Self.reason($0.error) }).sorted()
            return "nothing answered at \(host):\(port) (\(reasons.joined(separator: "; ")))"
        case ChannelError.connectTimeout:
            return "nothing answered at \(host):\(port) (the connection timed out)"
        default:
            let reason = Self.reason(error)
            return reason == "\(error)" ? "cannot reach \(host):\(port): \(error)" : "nothing answered at \(host):\(port) (\(reason))"
        }
    }

    private static func reason(_ error: any Error) -> String {
        if case ChannelError.connectTimeout = error { return "the connection timed out" }
        guard let error = error as? IOError else { return "\(error)" }
        switch error.errnoCode {
        case ECONNREFUSED: return "connection refused: is the server running, and is this its port?"
        case ETIMEDOUT: return "the connection timed out"
        case EHOSTUNREACH, ENETUNREACH: return "no route to that address from this network"
        default: return String(cString: strerror(error.errnoCode))
        }
    }
}

import CSystemd
import Glibc

/// A listening socket handed over by systemd socket activation.
public struct ListenFD: Sendable, Hashable {
    /// The file descriptor (3, 4, … as systemd passes them).
    public var fd: Int32
    /// The socket unit's `FileDescriptorName=`, or `unknown` when none was given.
    public var name: String
}

public enum SocketActivation {
    /// The sockets passed by systemd (`LISTEN_PID`, `LISTEN_FDS`, `LISTEN_FDNAMES`), read
    /// once through `sd_listen_fds_with_names`. The variables are then unset so child
    /// processes do not inherit them. Empty when the process was not socket-activated.
    public static func takeListenFDs() throws(SystemdError) -> [ListenFD] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = nil
        let count = sd_listen_fds_with_names(1, &names)
        guard count >= 0 else { throw SystemdError("sd_listen_fds_with_names", errno: -count) }
        defer {
            if let names {
                for index in 0..<Int(count) { free(names[index]) }
                free(names)
            }
        }
        return (0..<Int(count)).map { index in
            let name = names?[index].map { String(cString: $0) } ?? "unknown"
            return ListenFD(fd: SD_LISTEN_FDS_START + Int32(index), name: name)
        }
    }

    /// Whether `fd` is a listening `AF_UNIX` stream socket, the only kind these services serve.
    public static func isListeningUnixStream(_ fd: Int32) -> Bool {
        sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0
    }

    /// Whether a connection waits in the listening socket's queue, not yet accepted.
    public static func hasPendingConnection(_ fd: Int32) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, 0) > 0 && (poller.revents & Int16(POLLIN)) != 0
    }
}

/// A libsystemd call failed.
public struct SystemdError: Error, CustomStringConvertible, Sendable {
    public var call: String
    public var errno: Int32
    public init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }
    public var description: String { "\(self.call) failed: \(String(cString: strerror(self.errno)))" }
}

extension SocketActivation {
    /// Whether `fd` is a listening stream socket of any family (the gateway's TCP socket).
    public static func isListeningStream(_ fd: Int32) -> Bool {
        sd_is_socket(fd, AF_UNSPEC, Int32(SOCK_STREAM.rawValue), 1) > 0
    }
}

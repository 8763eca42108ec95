import Foundation

/// The soft limit on open files (RLIMIT_NOFILE) raised to the hard one. Every connection
/// is a file descriptor; the soft limit is often 1024 (systemd's default, for the sake of
/// select(2)), which NIO, using epoll, does not need.
public enum OpenFileLimit {
    /// Raises the soft limit as far as the hard one allows; returns the limit now in force.
    @discardableResult
    public static func raiseToHard() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return -1 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return Int(clamping: raised.rlim_cur) }
        }
        return Int(clamping: limit.rlim_cur)
    }
}

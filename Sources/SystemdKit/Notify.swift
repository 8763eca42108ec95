import CSystemd
import Glibc

/// `sd_notify`: tells the service manager what the service is doing (`Type=notify`).
///
/// Every call is a no-op when `$NOTIFY_SOCKET` is unset (started by hand, or in tests),
/// so callers never need to check.
public enum ServiceNotifier {
    /// `READY=1`: the service accepts requests.
    public static func ready(status: String) {
        self.send(["READY=1", "STATUS=\(status)", "MAINPID=\(getpid())"])
    }

    /// `STATUS=…`: one line shown by `systemctl status`.
    public static func status(_ text: String) {
        self.send(["STATUS=\(text)"])
    }

    /// `STOPPING=1`: shutdown has begun.
    public static func stopping(status: String) {
        self.send(["STOPPING=1", "STATUS=\(status)"])
    }

    /// `WATCHDOG=1`: the serving loop is alive.
    public static func watchdog() {
        self.send(["WATCHDOG=1"])
    }

    /// Whether a service manager listens (`$NOTIFY_SOCKET` is set).
    public static var isSupervised: Bool { getenv("NOTIFY_SOCKET") != nil }

    /// The watchdog interval systemd expects (`$WATCHDOG_USEC`, for this process), or nil
    /// when the unit has no `WatchdogSec=`. Keep-alives go out at half of it.
    public static func watchdogInterval() -> Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(clamping: usec))
    }

    private static func send(_ assignments: [String]) {
        // Status text is one line; a newline would start a new assignment.
        let text = assignments.map { $0.replacingNewlines() }.joined(separator: "\n")
        _ = sd_notify(0, text)
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        String(self.map { $0 == "\n" ? " " : $0 })
    }
}

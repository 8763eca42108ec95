import Foundation

/// The server's state in words, the same for the dashboard and `screentimectl status`.
extension ServiceStatus {
    /// What the service does, as a parent names it.
    public var displayName: String {
        switch self.service {
        case "store": "Record store"
        case "pairing": "Pairing"
        case "push": "Notifications"
        case "aggregator": "Usage, points and rules"
        case "gateway": "Gateway (phones, tablets and this page)"
        default: self.service
        }
    }

    /// `Running since 29 Nov 2026, 10:42.`, `Idle: starts again when needed.`, …; `time`
    /// formats a moment; `pid`: the process's id too (for the administrator).
    public func sentence(time: (Date) -> String, pid: Bool = false) -> String {
        let since = self.since.map { Date(timeIntervalSince1970: $0) }
        var words: String
        switch self.state {
        case .running: words = "Running" + (since.map { " since \(time($0))" } ?? "") + (pid ? self.pid.map { " (pid \($0))" } ?? "" : "") + "."
        case .idleExited: words = "Idle: starts again when needed" + (since.map { " (resting since \(time($0)))" } ?? "") + "."
        case .stopped: words = "Stopped" + (since.map { " at \(time($0))" } ?? "") + "."
        case .failed: words = "Failed" + (since.map { " at \(time($0))" } ?? "") + (self.error.map { ": \($0)" } ?? "") + "."
        case .notStarted: words = "Not started yet: starts when first needed."
        }
        if self.restarts > 0 {
            words += " Restarted \(self.restarts == 1 ? "once" : "\(self.restarts) times") after a failure since the server started."
        }
        return words
    }
}

extension DiskSpace {
    /// `53.2 GB free of 252 GB (21%).`
    public var sentence: String {
        let free = ByteCountFormatter.string(fromByteCount: self.availableBytes, countStyle: .file)
        let total = ByteCountFormatter.string(fromByteCount: self.totalBytes, countStyle: .file)
        let percent = self.totalBytes > 0 ? Int((Double(self.availableBytes) / Double(self.totalBytes) * 100).rounded()) : 0
        return "\(free) free of \(total) (\(percent)%)."
    }

    /// Under 1 GB, or under 5% of the disk: time to make room.
    public var isLow: Bool {
        self.availableBytes < 1_000_000_000 || (self.totalBytes > 0 && Double(self.availableBytes) / Double(self.totalBytes) < 0.05)
    }
}

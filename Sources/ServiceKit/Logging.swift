import Foundation
import Logging
import SystemdKit

/// Sends every logger of the process to the journal or to stderr, once, at start.
public enum ServiceLogging {
    public static func bootstrap(identifier: String, level: Logger.Level, target: LogTarget) {
        let useJournal: Bool
        switch target {
        case .journal: useJournal = true
        case .stderr: useJournal = false
        case .auto: useJournal = Journal.isStderrConnected
        }
        LoggingSystem.bootstrap { label in
            if useJournal {
                return JournalLogHandler(label: label, identifier: identifier, logLevel: level)
            }
            var handler = StderrLogHandler(label: label, identifier: identifier)
            handler.logLevel = level
            return handler
        }
    }
}

/// Readable lines on stderr for a terminal or a test log:
/// `2026-11-22T08:30:00.123Z notice screentime-stored: ready socket=/run/screentime/store.sock`.
public struct StderrLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let identifier: String

    public init(label: String, identifier: String) {
        self.identifier = identifier
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = self.metadata
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        if let error = event.error { merged["error"] = "\(error)" }
        var line = "\(Date().formatted(Self.timestamp)) \(event.level) \(self.identifier): \(event.message)"
        for key in merged.keys.sorted() where key != "message_id" {
            let value = "\(merged[key]!)"
            line += value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" }) ? " \(key)=\(Self.quoted(value))" : " \(key)=\(value)"
        }
        StandardError.write(line + "\n")
    }

    private static let timestamp = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    private static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

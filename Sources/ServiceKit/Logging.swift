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
        // Request text is escaped (LogText): one entry, one line.
        var line = "\(Date().formatted(Self.timestamp)) \(event.level) \(self.identifier): \(LogText.escaped(event.message.description))"
        for key in merged.keys.sorted() where key != "message_id" {
            let value: String = LogText.escaped("\(merged[key]!)")
            let needsQuotes = value.contains { (character: Character) in character == " " || character == "\"" || character == "=" || character == "\\" }
            line += " " + LogText.escaped(key) + "=" + (needsQuotes ? Self.quoted(value) : value)
        }
        StandardError.write(line + "\n")
    }

    private static let timestamp = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// In quotes, with quotes escaped (backslashes are escaped already).
    private static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

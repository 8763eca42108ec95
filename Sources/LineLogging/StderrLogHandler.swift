import Foundation
import Glibc
import Logging

/// Readable lines on stderr for a terminal, a test log or a journal that reads stderr
/// (the wake relay's), every request-borne text escaped (``LogText``):
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

/// Unbuffered writes to file descriptor 2, safe from any thread.
public enum StandardError {
    public static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                if written <= 0 { if errno == EINTR { continue } else { return } }
                offset += written
            }
        }
    }
}

import Foundation
import Logging
import Synchronization

/// What an in-process service logged, kept in memory a line per entry (level, message,
/// metadata as `key=value`, the error if any), so that a test can wait for a line as it
/// would in a process's log file (the words are the same; the layout is simpler). With `SCREENTIME_TEST_LOG` set,
/// each line also goes to standard error.
public final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])
    private let echo = ProcessInfo.processInfo.environment["SCREENTIME_TEST_LOG"] != nil

    public init() {}

    /// Every line so far, joined by newlines.
    public var text: String { self.lines.withLock { $0.joined(separator: "\n") } }

    func append(_ line: String) {
        self.lines.withLock { $0.append(line) }
        if self.echo { FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }

    /// A logger for `label` whose lines (debug and above) come here.
    func logger(label: String) -> Logger {
        var logger = Logger(label: label) { label in Handler(label: label, sink: self) }
        logger.logLevel = .debug
        return logger
    }

    private struct Handler: LogHandler {
        let label: String
        let sink: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { self.metadata[key] }
            set { self.metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = self.metadata.merging(event.metadata ?? [:]) { _, new in new }
                .sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            self.sink.append("\(event.level) \(event.message)" + (fields.isEmpty ? "" : " \(fields)") + (event.error.map { " error=\($0)" } ?? ""))
        }
    }
}

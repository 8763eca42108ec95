import Foundation
import LineLogging
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

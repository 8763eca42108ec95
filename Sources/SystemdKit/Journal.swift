import CSystemd
import Glibc
import LineLogging
import Logging

/// Native journal logging through `sd_journal_sendv`.
public enum Journal {
    /// Whether stderr is connected to the journal: `$JOURNAL_STREAM` names the device and
    /// inode of the stream systemd connected, and stderr must still be that stream.
    public static var isStderrConnected: Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(STDERR_FILENO, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// Sends one entry; each element is `FIELD=value` (values may hold any bytes).
    /// Returns false when the journal could not be reached.
    @discardableResult
    public static func send(_ fields: [(name: String, value: String)]) -> Bool {
        var storage: [UInt8] = []
        var ranges: [(start: Int, count: Int)] = []
        storage.reserveCapacity(fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 1 })
        for field in fields {
            let start = storage.count
            storage.append(contentsOf: field.name.utf8)
            storage.append(UInt8(ascii: "="))
            storage.append(contentsOf: field.value.utf8)
            ranges.append((start, storage.count - start))
        }
        return storage.withUnsafeMutableBytes { raw in
            var vectors = ranges.map { iovec(iov_base: raw.baseAddress! + $0.start, iov_len: $0.count) }
            return sd_journal_sendv(&vectors, Int32(vectors.count)) >= 0
        }
    }

    /// A journal field name for a metadata key: uppercase ASCII letters, digits and `_`,
    /// starting with a letter, at most 64 characters. `requestId` becomes `REQUEST_ID`,
    /// `peer.uid` becomes `PEER_UID`, `1st` becomes `F_1ST`; nothing is dropped.
    public static func fieldName(for key: String) -> String {
        var name = ""
        var previous: Character?
        for character in key {
            if character.isASCII, character.isLetter {
                if character.isUppercase, let previous, previous.isLowercase || previous.isNumber {
                    name.append("_")
                }
                name.append(character.uppercased())
            } else if character.isASCII, character.isNumber {
                name.append(character)
            } else {
                name.append("_")
            }
            previous = character
        }
        if let first = name.first, first.isLetter {
            // Starts well.
        } else {
            name = "F_" + name
        }
        if reservedNames.contains(name) { name = "META_" + name }
        return String(name.prefix(64))
    }

    /// Fields the handler itself sets; metadata cannot overwrite them.
    static let reservedNames: Set<String> = [
        "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "CODE_FILE", "CODE_LINE", "CODE_FUNC", "LOGGER",
    ]

    /// The syslog priority of a log level.
    public static func priority(of level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}

/// A swift-log handler that writes each entry to the journal with structured fields:
/// `MESSAGE`, `PRIORITY`, `SYSLOG_IDENTIFIER`, `CODE_FILE`/`CODE_LINE`/`CODE_FUNC`,
/// `LOGGER`, and one field per metadata key (see ``Journal/fieldName(for:)``). A
/// `message_id` metadata value becomes `MESSAGE_ID`, so notable events can be found with
/// `journalctl MESSAGE_ID=…`.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level
    private let label: String
    private let identifier: String

    public init(label: String, identifier: String, logLevel: Logger.Level = .info, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.identifier = identifier
        self.logLevel = logLevel
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields: [(name: String, value: String)] = [
            ("MESSAGE", LogText.escaped(event.message.description)),
            ("PRIORITY", String(Journal.priority(of: event.level))),
            ("SYSLOG_IDENTIFIER", self.identifier),
            ("CODE_FILE", event.file),
            ("CODE_LINE", String(event.line)),
            ("CODE_FUNC", event.function),
            ("LOGGER", self.label),
        ]
        var merged = self.metadata
        if let provided = self.metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        if let error = event.error { merged["error"] = "\(error)" }
        for (key, value) in merged {
            Self.append(key: Journal.fieldName(for: key), value: value, to: &fields)
        }
        if !Journal.send(fields) {
            // No journal to reach: never lose the line.
            StandardError.write("\(self.identifier): \(LogText.escaped(event.message.description))\n")
        }
    }

    /// Nested dictionaries become `KEY_SUBKEY` fields; arrays and other values their text.
    private static func append(key: String, value: Logger.Metadata.Value, to fields: inout [(name: String, value: String)]) {
        switch value {
        case .string(let text): fields.append((key, LogText.escaped(text)))
        case .stringConvertible(let convertible): fields.append((key, LogText.escaped(convertible.description)))
        case .array(let values): fields.append((key, LogText.escaped("[" + values.map(\.description).joined(separator: ", ") + "]")))
        case .dictionary(let members):
            for (subkey, subvalue) in members {
                self.append(key: String((key + "_" + Journal.fieldName(for: subkey)).prefix(64)), value: subvalue, to: &fields)
            }
        }
    }
}


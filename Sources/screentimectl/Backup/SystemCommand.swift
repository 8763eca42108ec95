import Foundation

/// One of the system's own programs (`tar`, `systemctl`), run to its end.
enum SystemCommand {
    struct Outcome {
        var status: Int32
        var errors: String

        /// The first line it said on stderr, without the program's own name before it.
        var firstError: String {
            String(self.errors.split(separator: "\n").first ?? "")
        }
    }

    /// `output`: where its stdout goes (by default nowhere); its stderr is kept.
    static func run(_ executable: String, _ arguments: [String], output: FileHandle = .nullDevice) throws -> Outcome {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let complaints = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Outcome(status: process.terminationStatus, errors: String(decoding: complaints, as: UTF8.self))
    }
}

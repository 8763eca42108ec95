import Foundation

/// One of the system's own programs (`tar`, `systemctl`), run to its end.
enum SystemCommand {
    struct Outcome {
        var status: Int32
        var output: String
        var errors: String

        /// The first line it said on stderr, without the program's own name before it.
        var firstError: String {
            String(self.errors.split(separator: "\n").first ?? "")
        }
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> Outcome {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read one after the other: the programs run here (tar, systemctl) say a few lines
        // at most, far from what would fill a pipe.
        let said = output.fileHandleForReading.readDataToEndOfFile()
        let complaints = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Outcome(status: process.terminationStatus, output: String(decoding: said, as: UTF8.self),
                       errors: String(decoding: complaints, as: UTF8.self))
    }
}

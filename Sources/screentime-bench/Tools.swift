import Foundation

/// The programs the benchmarks run for their output (perf, redis-benchmark, git, the C
/// floor's client): found, run to the end, their standard output read.
enum Tools {
    /// `name` on PATH, or in /usr/sbin, /usr/bin or /usr/local/bin (a user's PATH may lack sbin).
    static func path(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/bin", "/usr/local/bin"]
        return directories.map { $0 + "/" + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs `executable` (a path) to its end; its exit status and standard output. `input`
    /// goes to its standard input; its standard error is dropped unless `keepErrors`.
    static func output(_ executable: String, _ arguments: [String], input: String? = nil, keepErrors: Bool = false) throws -> (status: Int32, text: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        if !keepErrors { process.standardError = FileHandle.nullDevice }
        let stdin = input.map { _ in Pipe() }
        if let stdin { process.standardInput = stdin }
        try process.run()
        if let stdin, let input {
            // Written beside the read: a large input and output would otherwise fill both pipes.
            let writer = Thread { stdin.fileHandleForWriting.write(Data(input.utf8)); try? stdin.fileHandleForWriting.close() }
            writer.start()
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

import Foundation
import Glibc
import ProcessSpawn

/// One of the system's own programs (`tar`, `systemctl`), run to its end.
///
/// Through `posix_spawn` (ProcessSpawn), not Foundation's `Process`, which waits for its
/// child through a CFSocket pair: in the nightly backup's sandbox that pair cannot be made
/// and `Process` never returns.
enum SystemCommand {
    struct Outcome {
        var status: Int32
        var errors: String

        /// The first line it said on stderr.
        var firstError: String {
            String(self.errors.split(separator: "\n").first ?? "")
        }
    }

    /// `output`: where its stdout goes (by default nowhere); its stderr is kept.
    static func run(_ executable: String, _ arguments: [String], output: FileHandle? = nil) throws -> Outcome {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw SpawnError("cannot make a pipe: \(String(cString: strerror(errno)))") }
        let pid: pid_t
        do {
            pid = try Spawn(executable: executable, arguments: arguments, environment: ProcessInfo.processInfo.environment,
                            stdin: .null, stdout: output.map { .descriptor($0.fileDescriptor) } ?? .null, stderr: .descriptor(ends[1])).start()
        } catch {
            close(ends[0])
            close(ends[1])
            throw error
        }
        close(ends[1])
        let complaints = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true).readDataToEndOfFile()
        return Outcome(status: ChildExit.block(pid), errors: String(decoding: complaints, as: UTF8.self))
    }

    /// Runs it and returns what it printed on stdout too: a few lines (they must fit in a
    /// pipe's buffer, since it is read once the program has ended).
    static func capture(_ executable: String, _ arguments: [String]) throws -> (outcome: Outcome, output: String) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw SpawnError("cannot make a pipe: \(String(cString: strerror(errno)))") }
        let reader = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
        let writer = FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
        let outcome = try self.run(executable, arguments, output: writer)
        try writer.close()
        return (outcome, String(decoding: reader.readDataToEndOfFile(), as: UTF8.self))
    }
}

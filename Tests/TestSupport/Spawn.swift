import Foundation
import Glibc

@_exported import ProcessSpawn

/// A child's exit, awaited without blocking a thread (tests share the cooperative pool).
extension ChildExit {
    /// Waits for `pid` to exit; fails after `timeout`, killing it.
    public static func wait(_ pid: pid_t, timeout: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = self.poll(pid) { return status }
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(pid, SIGKILL)
        _ = try? await self.wait(pid, timeout: .seconds(5))
        throw TestFailure("process \(pid) did not exit within \(timeout)")
    }
}

/// Runs a command to completion (at most `timeout`); returns its exit status, stdout and
/// stderr. Output goes through files, not pipes, so nothing hangs on a descriptor held elsewhere.
public func runCommand(
    _ executable: String,
    _ arguments: [String],
    environment: [String: String] = [:],
    stdin: String? = nil,
    timeout: Duration = .seconds(30)
) async throws -> (status: Int32, stdout: String, stderr: String) {
    let scratch = TemporaryDirectory()
    let token = UUID().uuidString.prefix(8)
    let outPath = scratch.file("out-\(token)")
    let errPath = scratch.file("err-\(token)")
    var inPath: String?
    if let stdin {
        inPath = scratch.file("in-\(token)")
        try Data(stdin.utf8).write(to: URL(fileURLWithPath: inPath!))
    }
    let pid = try Spawn(
        executable: executable,
        arguments: arguments,
        environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
        stdin: inPath,
        stdout: outPath,
        stderr: errPath
    ).start()
    let status = try await ChildExit.wait(pid, timeout: timeout)
    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return (status, out, err)
}

import Foundation
import Glibc

extension ChildExit {
    /// Waits for `pid` to exit without blocking a thread (callers share the cooperative
    /// pool); after `timeout` kills it and throws.
    public static func wait(_ pid: pid_t, timeout: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = self.poll(pid) { return status }
            try await Task.sleep(for: .milliseconds(10))
        }
        // A task kept from running past the deadline (other work holding the pool) looks
        // once more before calling the process hung.
        if let status = self.poll(pid) { return status }
        kill(pid, SIGKILL)
        _ = try? await self.wait(pid, timeout: .seconds(5))
        throw SpawnError("process \(pid) did not exit within \(timeout)")
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
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("run-\(UUID().uuidString.prefix(8))").path
    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    var inPath: String?
    if let stdin {
        inPath = scratch + "/in"
        try Data(stdin.utf8).write(to: URL(fileURLWithPath: scratch + "/in"))
    }
    let pid = try Spawn(
        executable: executable,
        arguments: arguments,
        environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
        stdin: inPath,
        stdout: scratch + "/out",
        stderr: scratch + "/err"
    ).start()
    let status = try await ChildExit.wait(pid, timeout: timeout)
    let out = (try? String(contentsOfFile: scratch + "/out", encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: scratch + "/err", encoding: .utf8)) ?? ""
    return (status, out, err)
}

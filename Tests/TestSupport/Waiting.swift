import Foundation

/// Checks `condition` every 20 ms until it holds; after `timeout` (a ``WaitDeadline``:
/// counted in the machine's share of a core, so a loaded machine stretches it), fails naming
/// `what`, followed by `detail` (a service's log, say) when there is one. It checks once
/// more after the deadline has passed: on a loaded machine the waiting task itself may not
/// run for seconds, and what it waits for may well have happened meanwhile.
public func waitUntil(_ what: String, timeout: Duration = .seconds(10), detail: @autoclosure () -> String = "",
                      _ condition: () throws -> Bool) async throws {
    var deadline = WaitDeadline(timeout)
    var lastError: (any Error)?
    while true {
        do {
            if try condition() {
                deadline.noteIfSlow(what)
                return
            }
            lastError = nil
        } catch {
            lastError = error
        }
        guard !deadline.expired() else { break }
        try await Task.sleep(for: .milliseconds(20))
    }
    deadline.noteIfSlow(what, outcome: "failed")
    let more = detail()
    throw TestFailure("\(what) did not happen within \(timeout)" + (lastError.map { "; the last check failed: \($0)" } ?? "")
                      + (more.isEmpty ? "" : ":\n\(more)"))
}

/// Asks `probe` every 20 ms until it returns a value, and returns it (once more after the
/// deadline, a ``WaitDeadline`` as ``waitUntil``'s); after `timeout`, fails naming `what`, the last thing `probe` said it saw (`lastSeen`), then `detail`.
public func eventually<T>(_ what: String, timeout: Duration = .seconds(10), detail: @autoclosure () -> String = "",
                          _ probe: (_ lastSeen: inout String) async throws -> T?) async throws -> T {
    var deadline = WaitDeadline(timeout)
    var lastSeen = ""
    while true {
        do {
            if let value = try await probe(&lastSeen) {
                deadline.noteIfSlow(what)
                return value
            }
        } catch {
            lastSeen = "\(error)"
        }
        guard !deadline.expired() else { break }
        try await Task.sleep(for: .milliseconds(20))
    }
    deadline.noteIfSlow(what, outcome: "failed")
    let more = detail()
    throw TestFailure("\(what) did not happen within \(timeout)" + (lastSeen.isEmpty ? "" : "; last seen: \(lastSeen)")
                      + (more.isEmpty ? "" : ":\n\(more)"))
}

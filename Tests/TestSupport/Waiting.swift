import Foundation

/// Checks `condition` every 20 ms until it holds; after `timeout`, fails naming `what`,
/// followed by `detail` (a service's log, say) when there is one.
public func waitUntil(_ what: String, timeout: Duration = .seconds(10), detail: @autoclosure () -> String = "",
                      _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if (try? condition()) == true { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    let more = detail()
    throw TestFailure("\(what) did not happen within \(timeout)" + (more.isEmpty ? "" : ":\n\(more)"))
}

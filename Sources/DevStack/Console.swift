import Foundation
import Glibc

/// What `screentime-dev up` prints: each service's log lines under its name, its own
/// events, and a status line of every service; in colour on a terminal.
public struct Console: Sendable {
    let colour: Bool
    let width: Int

    public init(names: [String], colour: Bool = isatty(STDOUT_FILENO) == 1) {
        self.colour = colour
        self.width = max(names.map(\.count).max() ?? 0, 3)
    }

    private static let colours = ["store": "34", "pairing": "35", "push": "36", "aggregator": "33"]

    func log(_ service: String, _ line: String) {
        let name = service.padding(toLength: self.width, withPad: " ", startingAt: 0)
        self.write(self.colour ? "\u{1B}[\(Self.colours[service] ?? "32")m\(name) |\u{1B}[0m \(line)" : "\(name) | \(line)")
    }

    func event(_ text: String) {
        let name = "dev".padding(toLength: self.width, withPad: " ", startingAt: 0)
        self.write(self.colour ? "\u{1B}[1m\(name) | \(text)\u{1B}[0m" : "\(name) | \(text)")
    }

    func status(_ services: [(name: String, summary: String)]) {
        self.event("status: " + services.map { "\($0.name) \($0.summary)" }.joined(separator: " · "))
    }

    public func message(_ text: String) { self.write(text) }

    private func write(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

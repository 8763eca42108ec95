import Foundation

/// The C listener harness (Benchmarks/floor/listeners.c): many `push.listen` streams in
/// one thread of its own process, each arrival reported on its standard output and read
/// here into ``Arrivals``.
final class ListenerHarness: Sendable {
    private let process: Process
    private let commands: FileHandle

    init(workDirectory: String, socket: String, arrivals: Arrivals) throws {
        let binary = try CFloor.compile("listeners", into: workDirectory)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = [socket]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        self.process = process
        self.commands = input.fileHandleForWriting
        let events = output.fileHandleForReading.fileDescriptor
        Thread.detachNewThread { Self.read(events, into: arrivals) }
    }

    /// One more listener, acting for the device with this credential.
    func listen(token: String) {
        self.commands.write(Data("listen \(token)\n".utf8))
    }

    func stop() {
        try? self.commands.close()
        self.process.waitUntilExit()
    }

    /// Lines "N ROUND NANOS" (an arrival) and "E N TEXT" (a listener ended), until the
    /// harness exits.
    private static func read(_ fd: Int32, into arrivals: Arrivals) {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var pending: [UInt8] = []
        while true {
            let got = buffer.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { return }
            pending += buffer[0..<got]
            var start = 0
            while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let fields = pending[start..<end].split(separator: UInt8(ascii: " "), maxSplits: 2)
                if fields.first == Array("E".utf8)[...] {
                    say("  a listener ended: \(String(decoding: pending[start..<end], as: UTF8.self))")
                } else if fields.count == 3, let round = Int64(String(decoding: fields[1], as: UTF8.self)),
                          let time = UInt64(String(decoding: fields[2], as: UTF8.self)) {
                    arrivals.arrived(round: round, at: time)
                }
                start = end + 1
            }
            pending.removeFirst(start)
        }
    }
}

/// CLOCK_MONOTONIC, in nanoseconds: the clock of the C harness's arrival times.
enum Monotonic {
    static func nanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}

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
    /// harness exits. Parsed from the bytes and handed over a read at a time: with ten
    /// thousand listeners this thread shares the cores with the service it measures.
    private static func read(_ fd: Int32, into arrivals: Arrivals) {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var pending: [UInt8] = []
        var batch: [(round: Int64, time: UInt64)] = []
        while true {
            let got = buffer.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { return }
            pending += buffer[0..<got]
            var start = 0
            batch.removeAll(keepingCapacity: true)
            while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = pending[start..<end]
                if line.first == UInt8(ascii: "E") {
                    say("  a listener ended: \(String(decoding: line, as: UTF8.self))")
                } else if let arrival = Self.arrival(line) {
                    batch.append(arrival)
                }
                start = end + 1
            }
            pending.removeFirst(start)
            arrivals.arrived(batch)
        }
    }

    /// "N ROUND NANOS": the round and the time.
    private static func arrival(_ line: ArraySlice<UInt8>) -> (round: Int64, time: UInt64)? {
        let fields = line.split(separator: UInt8(ascii: " "))
        guard fields.count == 3, let round = Self.number(fields[1]), let time = Self.number(fields[2]) else { return nil }
        return (Int64(round), time)
    }

    /// Decimal digits, without a String in between.
    private static func number(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value &* 10 &+ UInt64(byte - UInt8(ascii: "0"))
        }
        return value
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

import Foundation

/// Columns for a terminal: each as wide as its widest cell, numbers right-aligned, the
/// last column unpadded.
enum Table {
    static func render(_ header: [String], _ rows: [[String]], rightAligned: Set<Int> = [], totals: [String]? = nil) -> String {
        let all = [header] + rows + (totals.map { [$0] } ?? [])
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        let format = { (cells: [String]) -> String in
            cells.enumerated().map { index, cell in
                if index == cells.count - 1 && !rightAligned.contains(index) { return cell }
                let pad = String(repeating: " ", count: widths[index] - cell.count)
                return rightAligned.contains(index) ? pad + cell : cell + pad
            }.joined(separator: "  ").replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
        var lines = [format(header)] + rows.map(format)
        if let totals {
            lines.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
            lines.append(format(totals))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `1h 05m`, `12m`, `45s`, `0`.
    static func time(_ seconds: Int64) -> String {
        if seconds == 0 { return "0" }
        let sign = seconds < 0 ? "-" : ""
        let seconds = abs(seconds)
        if seconds < 60 { return "\(sign)\(seconds)s" }
        let minutes = seconds / 60
        return sign + (minutes < 60 ? "\(minutes)m" : String(format: "%dh %02dm", minutes / 60, minutes % 60))
    }
}

/// Progress and waiting notes on standard error, so standard output stays the result.
enum Progress {
    static func note(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// Runs a long call; on a terminal, shows the seconds it has taken so far meanwhile.
    static func whileWaiting<T: Sendable>(_ label: String, _ body: @Sendable () async throws -> T) async throws -> T {
        guard isatty(STDERR_FILENO) == 1 else { return try await body() }
        let started = ContinuousClock.now
        let ticker = Task {
            while !Task.isCancelled {
                try await Task.sleep(for: .milliseconds(200))
                let seconds = Double((ContinuousClock.now - started).components.seconds)
                FileHandle.standardError.write(Data("\r\(label)… \(Int(seconds)) s".utf8))
            }
        }
        defer {
            ticker.cancel()
            FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        }
        return try await body()
    }

    /// `label: done/total`, rewritten in place on a terminal, one line per call otherwise.
    static func count(_ label: String, _ done: Int, of total: Int) {
        if isatty(STDERR_FILENO) == 1 {
            FileHandle.standardError.write(Data("\r\(label): \(done)/\(total)\(done == total ? "\n" : "")".utf8))
        } else {
            note("\(label): \(done)/\(total)")
        }
    }
}

/// Local calendar days as the services name them, `YYYY-MM-DD`, on this machine's clock.
enum LocalDay {
    static func today() -> String { self.format(Date()) }

    static func format(_ date: Date) -> String {
        let parts = Calendar.current.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
    }

    static func adding(_ days: Int, to day: String) throws(CLIError) -> String {
        let parts = day.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3, let date = Calendar.current.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2], hour: 12)),
              let moved = Calendar.current.date(byAdding: .day, value: days, to: date)
        else { throw CLIError(.invalidInput, "not a day (YYYY-MM-DD): \(day)") }
        return self.format(moved)
    }
}

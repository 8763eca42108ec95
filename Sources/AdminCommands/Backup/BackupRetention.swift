import Foundation

/// Which archives to keep: the newest of each of the last N days, ISO weeks and months
/// that have one (as Home Assistant and restic keep snapshots), among the archives
/// `screentimectl backup` named itself (`screentime-<UTC time>.tar`, or `.tar.enc`); an
/// archive named by hand is never pruned.
enum BackupRetention {
    struct Archive: Equatable {
        var name: String
        var made: Date
    }

    /// The archives in `directory` that `backup` named itself, newest first.
    static func archives(in directory: String) -> [Archive] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name -> Archive? in
            guard name.hasPrefix("screentime-"), name.hasSuffix(".tar") || name.hasSuffix(".tar.enc") else { return nil }
            let stamp = name.dropFirst("screentime-".count).prefix { $0 != "." }
            return Self.date(String(stamp)).map { Archive(name: name, made: $0) }
        }.sorted { $0.made > $1.made }
    }

    /// Deletes what ``keep(_:daily:weekly:monthly:)`` does not keep in `directory` (nothing
    /// when `dryRun`); returns the names deleted, and how many were kept of how many.
    static func prune(_ directory: String, daily: Int, weekly: Int, monthly: Int, dryRun: Bool = false) throws -> (deleted: [String], kept: Int, of: Int) {
        let archives = Self.archives(in: directory)
        let kept = Self.keep(archives, daily: daily, weekly: weekly, monthly: monthly)
        let doomed = archives.filter { !kept.contains($0.name) }.map(\.name)
        if !dryRun {
            for name in doomed {
                do {
                    try FileManager.default.removeItem(atPath: (directory as NSString).appendingPathComponent(name))
                } catch {
                    throw CLIError(.cannotWrite, "cannot delete \(name) from \(directory): \(ServerBackup.reason(error))")
                }
            }
        }
        return (doomed, kept.count, archives.count)
    }

    /// `20261128T201500` (UTC), as `backup` names them.
    static func date(_ stamp: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss"
        return formatter.date(from: stamp)
    }

    /// The names to keep: the newest archive of each of the newest `daily` days, `weekly`
    /// ISO weeks and `monthly` months (UTC) that have one; the newest archive always.
    static func keep(_ archives: [Archive], daily: Int, weekly: Int, monthly: Int) -> Set<String> {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var kept = Set(archives.prefix(1).map(\.name))
        func newestPer(_ period: (Date) -> String, count: Int) {
            var seen: [String] = []
            for archive in archives {
                let key = period(archive.made)
                guard !seen.contains(key) else { continue }
                guard seen.count < count else { break }
                seen.append(key)
                kept.insert(archive.name)
            }
        }
        newestPer({ let d = calendar.dateComponents([.year, .month, .day], from: $0); return "\(d.year!)-\(d.month!)-\(d.day!)" }, count: daily)
        newestPer({ let d = calendar.dateComponents([.yearForWeekOfYear, .weekOfYear], from: $0); return "\(d.yearForWeekOfYear!)-W\(d.weekOfYear!)" }, count: weekly)
        newestPer({ let d = calendar.dateComponents([.year, .month], from: $0); return "\(d.year!)-\(d.month!)" }, count: monthly)
        return kept
    }
}

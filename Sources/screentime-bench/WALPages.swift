import Foundation
import GRDB

/// What a save writes to SQLite's write-ahead log: every page a transaction changes is one
/// frame (a 24-byte header and the page) appended to `<database>-wal` and fsynced at the
/// commit, so frames per save are what a durable save costs the disk.
///
/// Read from the file as SQLite lays it out (https://www.sqlite.org/fileformat.html#the_write_ahead_log):
/// a 32-byte header whose salts every valid frame repeats; a checkpoint that restarts the
/// log changes the salts, and the frames of the log before it are no longer counted.
struct WALFile {
    let database: String
    var path: String { self.database + "-wal" }

    struct Frames: Equatable {
        /// The log's salts: another value, another log (restarted after a checkpoint).
        var salt: UInt64
        var pageSize: Int
        /// The page number of each valid frame, in order.
        var pages: [UInt32]
    }

    func frames() throws -> Frames {
        let data = try Data(contentsOf: URL(fileURLWithPath: self.path))
        guard data.count >= 32 else { return Frames(salt: 0, pageSize: 0, pages: []) }
        func word(_ offset: Int) -> UInt32 {
            data[data.startIndex + offset..<data.startIndex + offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        let pageSize = Int(word(8) == 1 ? 65536 : word(8))
        let salt = UInt64(word(16)) << 32 | UInt64(word(20))
        var pages: [UInt32] = []
        var offset = 32
        while offset + 24 + pageSize <= data.count, UInt64(word(offset + 8)) << 32 | UInt64(word(offset + 12)) == salt {
            pages.append(word(offset))
            offset += 24 + pageSize
        }
        return Frames(salt: salt, pageSize: pageSize, pages: pages)
    }

    /// The frames `body` appended, or nil when the log restarted meanwhile (tried again by
    /// the caller).
    func appended(by body: () async throws -> Void) async throws -> [UInt32]? {
        let before = try self.frames()
        try await body()
        let after = try self.frames()
        guard after.salt == before.salt, after.pages.count >= before.pages.count else { return nil }
        return Array(after.pages[before.pages.count...])
    }

    /// Which table or index each page belongs to (SQLite's dbstat), read from the database
    /// as it stands with its log.
    func owners(of pages: [UInt32]) throws -> [String: Int] {
        var configuration = Configuration()
        configuration.readonly = true
        let names = try DatabaseQueue(path: self.database, configuration: configuration).read { db in
            try Dictionary(Row.fetchAll(db, sql: "SELECT pageno, name FROM dbstat").map { (UInt32($0["pageno"] as Int64), $0["name"] as String) }) { first, _ in first }
        }
        var counts: [String: Int] = [:]
        for page in pages { counts[names[page] ?? "page \(page) (free list)", default: 0] += 1 }
        return counts
    }
}

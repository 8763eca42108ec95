import GRDB
import NIOPosix
import Synchronization

/// Read-only connections to a WAL database, one per NIO event loop, each used only on its
/// own loop: a short read (one record by name) runs right where its request runs, with no
/// hop to ``DatabaseThreads`` and back (two thread wake-ups, a third of a point fetch)
/// and none of a pool's bookkeeping.
///
/// This is safe on a loop only because nothing here waits: the connection is the loop's
/// own, so it is never busy with another read, and a WAL reader does not wait for the
/// writer. A read that can take long (a query, a page of changes) still belongs on
/// ``DatabaseThreads``: it would hold every connection of the loop for as long.
public final class LoopReaders: Sendable {
    private let path: String
    private let configuration: Configuration
    private let connections = Mutex<[ObjectIdentifier: DatabaseQueue]>([:])

    /// The most of the file each connection maps (address space, not memory: the pages are
    /// the kernel's page cache, shared by every connection).
    static let mapSize = 1 << 30

    /// `path`: a database in WAL mode, opened (and migrated) already by its writer.
    public init(path: String, label: String) {
        self.path = path
        var configuration = Configuration()
        configuration.label = label
        configuration.readonly = true
        // A WAL reader waits only while another connection recovers the WAL after a crash.
        configuration.busyMode = .timeout(10)
        // The database file's pages read through a memory map, not a pread (a system call
        // and a copy) for every page a point read's B-tree walk misses in the connection's
        // small cache. Pages in the WAL are still read from it. Nothing truncates the
        // store's file while it is open (no VACUUM, no auto-vacuum; a restore renames a
        // new file into place), the case where a map would fault.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA mmap_size = \(Self.mapSize)") }
        self.configuration = configuration
    }

    /// Runs `body` inside one read transaction (a snapshot) on the current event loop's
    /// connection; nil, without running it, when the caller is not on an event loop.
    public func read<T>(_ body: (Database) throws -> T) throws -> T? {
        guard let loop = MultiThreadedEventLoopGroup.currentEventLoop else { return nil }
        let key = ObjectIdentifier(loop as AnyObject)
        let queue = try self.connections.withLock { connections in
            if let queue = connections[key] { return queue }
            let queue = try DatabaseQueue(path: self.path, configuration: self.configuration)
            connections[key] = queue
            return queue
        }
        return try queue.inDatabase { db in
            try db.execute(cached: "BEGIN DEFERRED")
            do {
                let value = try body(db)
                try db.execute(cached: "COMMIT")
                return value
            } catch {
                try? db.execute(cached: "ROLLBACK")
                throw error
            }
        }
    }
}

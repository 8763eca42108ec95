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
    private let connections = Mutex<[ObjectIdentifier: LoopConnection]>([:])

    /// One loop's connection and its read transaction.
    private final class LoopConnection: @unchecked Sendable {  // touched only on its own loop
        let queue: DatabaseQueue
        /// A read transaction is open (only inside a batch, between reads).
        var holdingSnapshot = false
        /// The connection, inside ``LoopReaders/batch(_:)`` only: the batch runs within one
        /// access to the queue, so its reads need no access of their own (each a
        /// `DispatchQueue.sync`), and a read transaction, once begun, is held until the
        /// batch ends.
        var database: Database?
        var inBatch: Bool { self.database != nil }

        init(_ queue: DatabaseQueue) { self.queue = queue }
    }

    /// The most of the file each connection maps (address space, not memory: the pages are
    /// the kernel's page cache, shared by every connection).
    static let mapSize = 1 << 30

    /// `path`: a database in WAL mode, opened (and migrated) already by its writer.
    public init(path: String, label: String) {
        SQLiteMemoryStatistics.turnOff()
        self.path = path
        var configuration = Configuration()
        configuration.label = label
        configuration.readonly = true
        // A WAL reader waits only while another connection recovers the WAL after a crash.
        configuration.busyMode = .timeout(10)
        // A batch's snapshot spans several accesses (``batch(_:)`` ends it, always).
        configuration.allowsUnsafeTransactions = true
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
    /// Inside ``batch(_:)`` the snapshot is the batch's.
    public func read<T>(_ body: (Database) throws -> T) throws -> T? {
        guard let connection = try self.connection() else { return nil }
        if let db = connection.database { return try Self.read(body, on: connection, db) }
        return try connection.queue.inDatabase { db in try Self.read(body, on: connection, db) }
    }

    private static func read<T>(_ body: (Database) throws -> T, on connection: LoopConnection, _ db: Database) throws -> T {
        if !connection.holdingSnapshot {
            try db.execute(cached: "BEGIN DEFERRED")
        }
        do {
            let value = try body(db)
            if connection.inBatch {
                connection.holdingSnapshot = true
            } else {
                try db.execute(cached: "COMMIT")
            }
            return value
        } catch {
            connection.holdingSnapshot = false
            try? db.execute(cached: "ROLLBACK")
            throw error
        }
    }

    /// Runs `body` (on an event loop), in which the reads on this loop share one snapshot,
    /// begun by the first of them: two file locks (taking the WAL's read mark and giving it
    /// back, the `fcntl` calls a read transaction costs) for all of them instead of two
    /// each. Only for reads that may see the database as of the batch's start: the frames
    /// of one read from a socket, all sent before it began.
    ///
    /// The batch is one access to the connection's queue, whose connection its reads use
    /// as they come. Nothing in `body` may wait for that queue (only these reads use it).
    public func batch(_ body: () -> Void) {
        guard let connection = try? self.connection(), connection.database == nil else { return body() }
        connection.queue.inDatabase { db in
            connection.database = db
            body()
            connection.database = nil
            guard connection.holdingSnapshot else { return }
            connection.holdingSnapshot = false
            if (try? db.execute(cached: "COMMIT")) == nil { try? db.execute(cached: "ROLLBACK") }
        }
    }

    /// The current event loop's connection, made on first use; nil off a loop.
    private func connection() throws -> LoopConnection? {
        guard let loop = MultiThreadedEventLoopGroup.currentEventLoop else { return nil }
        let key = ObjectIdentifier(loop as AnyObject)
        return try self.connections.withLock { connections in
            if let connection = connections[key] { return connection }
            let connection = LoopConnection(try DatabaseQueue(path: self.path, configuration: self.configuration))
            connections[key] = connection
            return connection
        }
    }
}

import NIOPosix

/// Threads for database work that may wait: a synchronous GRDB read (which waits for a free
/// reader), a write that waits for the writer, a critical section that does either.
///
/// Such a wait must never run on an event loop (the RPC runtime runs request tasks on the
/// loop that serves their connection): every connection of that loop stalls with it, and
/// when what it waits for can only be given back on that loop (an asynchronous GRDB read
/// resumes its task there before it releases its reader) it waits for ever. Nor on Swift's
/// cooperative pool, which has one thread per core. A request hops here and back: two
/// thread wake-ups, where GRDB's asynchronous read costs four.
public enum DatabaseThreads {
    /// Four threads: more than the cores of a home server, fewer than GRDB's five readers,
    /// so reads from here never wait for one another's readers.
    private static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 4)
        pool.start()
        return pool
    }()

    /// Runs `body` on one of the database threads and returns its result.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await self.pool.runIfActive(body)
    }

    /// Starts `body` on one of the database threads without waiting for it.
    public static func execute(_ body: @escaping @Sendable () -> Void) {
        self.pool.submit { _ in body() }
    }
}

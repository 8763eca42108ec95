import CSQLiteThreading

/// SQLite's threading mode for the whole process: multi-thread, not serialized.
///
/// Debian's SQLite is built serialized: every call on a connection (each bind, step,
/// column read, reset) takes and gives back the connection's mutex, and every allocation
/// a global one for its memory statistics (off too): together a tenth of a point read's CPU. GRDB already serializes each connection's use (every access goes through
/// its queue or pool, the mode GRDB documents it is written for), so the mutexes guard
/// nothing here. The mode can only be set before SQLite's first connection, so each way
/// this module opens a database sets it first; if something opened one before, SQLite
/// keeps serialized, which is safe, only slower.
public enum SQLiteThreading {
    /// Sets the mode, once, before the first connection; true when it was set.
    @discardableResult
    public static func useMultiThreadMode() -> Bool { self.set }

    private static let set: Bool = screentime_sqlite_use_multithread_mode() == SQLITE_OK

    /// Whether connections opened now have no mutex of their own (the mode in effect).
    public static var connectionsAreUnlocked: Bool { screentime_sqlite_connections_have_mutex() == 0 }

    /// The mode in effect, for a log line.
    public static var mode: String { self.connectionsAreUnlocked ? "multi-thread" : "serialized" }
}

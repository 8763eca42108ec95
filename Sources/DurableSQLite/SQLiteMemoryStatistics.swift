import CSQLiteConfig

/// SQLite's memory statistics, off for the whole process.
///
/// With them on (SQLite's default), every allocation SQLite makes takes and gives back a
/// global mutex to count it: in the store's point reads that was 3.6% of the CPU, in
/// `pthread_mutex_lock`/`unlock`. Nothing here reads the statistics. They can only be
/// turned off before SQLite's first connection, so each way this module opens a database
/// does it first (`sqlite3_config` must not run beside another SQLite call: in a service
/// the first opening is the first SQLite call); if something opened one before, they
/// stay on, which is only slower. (The connections' own mutexes are off already: GRDB
/// opens every connection with `SQLITE_OPEN_NOMUTEX`, as it serializes each one's use.)
public enum SQLiteMemoryStatistics {
    /// Turns them off, once, before the first connection; true when that took.
    @discardableResult
    public static func turnOff() -> Bool { self.turnedOff }

    private static let turnedOff: Bool = screentime_sqlite_memory_statistics_off() == SQLITE_OK

    /// Whether they are off (SQLite counts no memory in use), for a log line.
    public static var areOff: Bool { screentime_sqlite_memory_counted() == 0 }
}

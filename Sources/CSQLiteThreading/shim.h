#ifndef SCREENTIME_CSQLITETHREADING_SHIM_H
#define SCREENTIME_CSQLITETHREADING_SHIM_H

#include <sqlite3.h>

/// sqlite3_config(SQLITE_CONFIG_MULTITHREAD) and no memory statistics (which take a
/// global mutex on every allocation): sqlite3_config is variadic, which Swift cannot call.
/// Returns SQLITE_MISUSE once SQLite has been initialised (a connection opened): it must
/// come first.
static inline int screentime_sqlite_use_multithread_mode(void) {
    int code = sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
    if (code != SQLITE_OK) return code;
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/// Whether connections are opened without their own mutex (sqlite3_threadsafe() says how
/// the library was built, not the mode set at run time, so the mode is read back from a
/// probe connection's mutex: none in multi-thread mode).
static inline int screentime_sqlite_connections_have_mutex(void) {
    sqlite3 *db = 0;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, 0) != SQLITE_OK) {
        sqlite3_close(db);
        return -1;
    }
    int has = sqlite3_db_mutex(db) != 0;
    sqlite3_close(db);
    return has;
}

#endif

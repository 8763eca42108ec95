#ifndef SCREENTIME_CSQLITECONFIG_SHIM_H
#define SCREENTIME_CSQLITECONFIG_SHIM_H

#include <sqlite3.h>

/// sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0): sqlite3_config is variadic, which Swift
/// cannot call. Returns SQLITE_MISUSE once SQLite has been initialised (a connection
/// opened): it must come first.
static inline int screentime_sqlite_memory_statistics_off(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/// The memory SQLite counts as in use: 0 while its memory statistics are off.
static inline long long screentime_sqlite_memory_counted(void) {
    sqlite3_int64 current = 0, highwater = 0;
    sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &current, &highwater, 0);
    return current;
}

#endif

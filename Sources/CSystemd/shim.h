#ifndef SCREENTIME_CSYSTEMD_SHIM_H
#define SCREENTIME_CSYSTEMD_SHIM_H

#include <sys/types.h>
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

/* glibc declares `struct ucred` (SO_PEERCRED's value) only under _GNU_SOURCE, which
   Swift's Glibc module is not built with; this is the same layout. */
struct screentime_ucred {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};

#endif

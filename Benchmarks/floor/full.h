/* Reading or writing exactly n bytes, shared by the C floors. */
#ifndef SCREENTIME_FLOOR_FULL_H
#define SCREENTIME_FLOOR_FULL_H
#include <errno.h>
#include <stddef.h>
#include <unistd.h>

/* Reads (writing == 0) or writes exactly n bytes; -1 on error or end of file. */
static int full(int fd, void *buf, size_t n, int writing) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}
#endif

/*
 * Many push.listen streams in one thread: what the push benchmark listens with. In real
 * life the listeners are phones elsewhere; on the benchmark's machine they share the CPU
 * with the service, so they should cost it as little as possible (a Swift client per
 * listener costs about as much CPU as the service itself).
 *
 *   listeners PATH
 *
 * Reads commands from stdin, one per line:
 *   listen TOKEN     connect to PATH and send push.listen with this device credential
 * Writes to stdout, one line per event:
 *   N ROUND NANOS    listener N got a notification whose fields hold "totalSeconds":
 *                    ROUND, at NANOS on CLOCK_MONOTONIC
 *   E N TEXT         listener N ended (an error reply, or the connection closed)
 *
 * A frame: 4-byte big-endian length N, then N bytes of JSON.
 */
#define _GNU_SOURCE  /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "full.h"

struct listener {
    int fd;
    int id;
    char *buffer;
    size_t used, size;
};

static const char *socket_path;
static int listeners_made;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void ended(struct listener *l, const char *why, size_t n) {
    printf("E %d %.*s\n", l->id, (int)(n > 300 ? 300 : n), why);
    close(l->fd);
    l->fd = -1;
}

/* Connects and sends the push.listen request; NULL when the service refuses. */
static struct listener *listen_as(const char *token) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, socket_path, sizeof addr.sun_path - 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        printf("E %d cannot connect: %s\n", listeners_made, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    char body[1024];
    int n = snprintf(body, sizeof body, "{\"id\":1,\"method\":\"push.listen\",\"params\":{},\"auth\":{\"token\":\"%s\"}}", token);
    if (n < 0 || (size_t)n >= sizeof body) {
        printf("E %d token too long\n", listeners_made);
        close(fd);
        return NULL;
    }
    char request[1028];
    uint32_t be = htonl((uint32_t)n);
    memcpy(request, &be, 4);
    memcpy(request + 4, body, (size_t)n);
    if (full(fd, request, (size_t)n + 4, 1) != 0) {
        printf("E %d cannot send push.listen\n", listeners_made);
        close(fd);
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct listener *l = calloc(1, sizeof *l);
    l->fd = fd;
    l->id = listeners_made++;
    l->size = 1 << 16;
    l->buffer = malloc(l->size);
    return l;
}

/* Reads what is there; reports every whole frame. */
static void readable(struct listener *l) {
    for (;;) {
        if (l->size - l->used < 4096) {
            l->size *= 2;
            l->buffer = realloc(l->buffer, l->size);
        }
        ssize_t got = read(l->fd, l->buffer + l->used, l->size - l->used);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno == EAGAIN) break;
        if (got <= 0) {
            ended(l, "connection closed", 17);
            return;
        }
        l->used += (size_t)got;
        if ((size_t)got < l->size - l->used) break;
    }
    uint64_t at = now_ns();
    size_t offset = 0;
    while (l->used - offset >= 4) {
        uint32_t be;
        memcpy(&be, l->buffer + offset, 4);
        size_t length = ntohl(be);
        if (l->used - offset - 4 < length) break;
        const char *frame = l->buffer + offset + 4;
        static const char key[] = "\"totalSeconds\":";
        const char *found = memmem(frame, length, key, sizeof key - 1);
        if (found) {
            printf("%d %lld %llu\n", l->id, strtoll(found + sizeof key - 1, NULL, 10), (unsigned long long)at);
        } else if (memmem(frame, length, "\"error\"", 7)) {
            ended(l, frame, length);
            return;
        }
        offset += 4 + length;
    }
    memmove(l->buffer, l->buffer + offset, l->used - offset);
    l->used -= offset;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: listeners PATH (commands on stdin: listen TOKEN)\n");
        return 2;
    }
    socket_path = argv[1];
    static char out[1 << 20];
    setvbuf(stdout, out, _IOFBF, sizeof out);
    int poll = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(poll, EPOLL_CTL_ADD, 0, &event);
    char line[2048];
    size_t pending = 0;
    struct epoll_event ready[256];
    for (;;) {
        int n = epoll_wait(poll, ready, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return 1;
        for (int i = 0; i < n; i++) {
            struct listener *l = ready[i].data.ptr;
            if (l) {
                if (l->fd >= 0) readable(l);
                continue;
            }
            /* stdin: commands */
            ssize_t got = read(0, line + pending, sizeof line - 1 - pending);
            if (got <= 0) return 0;  /* the benchmark is done */
            pending += (size_t)got;
            char *start = line, *end;
            while ((end = memchr(start, '\n', pending - (size_t)(start - line)))) {
                *end = 0;
                if (strncmp(start, "listen ", 7) == 0) {
                    struct listener *made = listen_as(start + 7);
                    if (made) {
                        struct epoll_event e = {.events = EPOLLIN, .data.ptr = made};
                        epoll_ctl(poll, EPOLL_CTL_ADD, made->fd, &e);
                    }
                }
                start = end + 1;
            }
            pending -= (size_t)(start - line);
            memmove(line, start, pending);
        }
        fflush(stdout);
    }
}

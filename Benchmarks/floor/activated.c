/*
 * The cold-start floor: a minimal socket-activated service in C. systemd hands it the
 * listening socket (sd_listen_fds); it tells systemd it is ready (sd_notify READY=1), then
 * answers every length-prefixed frame on every connection with a small JSON reply, one
 * connection at a time. What the cold-start benchmark compares the services' first reply
 * on an idle socket with, under the same unit settings.
 *
 *   cc -O2 -o activated activated.c -lsystemd
 *
 * A frame: 4-byte big-endian length N, then N bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "full.h"

int main(void) {
    if (sd_listen_fds(1) != 1) {
        fprintf(stderr, "activated: expected exactly one socket from systemd\n");
        return 1;
    }
    int listener = SD_LISTEN_FDS_START;
    sd_notify(0, "READY=1\nSTATUS=Serving");
    static char request[1 << 20];
    const char reply[] = "{\"id\":1,\"result\":{\"service\":\"c-floor\"}}";
    for (;;) {
        int connection = accept(listener, NULL, NULL);
        if (connection < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        for (;;) {
            uint32_t length;
            if (full(connection, &length, 4, 0) < 0) break;
            length = ntohl(length);
            if (length > sizeof request || full(connection, request, length, 0) < 0) break;
            uint32_t out = htonl((uint32_t)(sizeof reply - 1));
            if (full(connection, &out, 4, 1) < 0 || full(connection, (void *)reply, sizeof reply - 1, 1) < 0) break;
        }
        close(connection);
    }
}

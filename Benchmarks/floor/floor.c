/*
 * The floor: the same length-prefixed request/reply as the services, over the same kind
 * of socket, with nothing in between (no JSON, no runtime). What the benchmarks compare
 * round-trip latency against.
 *
 *   floor server PATH REPLY_BYTES       answer every frame with a frame of REPLY_BYTES
 *   floor client PATH COUNT REQ_BYTES   send COUNT frames one at a time; print the
 *                                       round-trip p50 and p99 in microseconds as JSON
 *   floor replay PATH COUNT FILE        the same with real requests, one JSON request per
 *                                       line of FILE, cycled: a service's cost measured
 *                                       by this client, without a runtime on the client side
 *   floor client|replay … DEPTH         pipelined: keep DEPTH requests in flight on the one
 *                                       connection; print the requests per second as JSON
 *   floor clients PATH CLIENTS SECONDS FILE
 *                                       CLIENTS processes, a connection each, send the one
 *                                       request in FILE one at a time for SECONDS, its
 *                                       "@NAME@" replaced by a name no other request has (a
 *                                       new record each time); print the requests per second
 *                                       of them all and the round-trip p50 and p99 as JSON
 *
 * A frame: 4-byte big-endian length N, then N bytes.
 */
#define _GNU_SOURCE  /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "full.h"

static int address(const char *path, struct sockaddr_un *addr) {
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr->sun_path) return -1;
    strcpy(addr->sun_path, path);
    return 0;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A frame: the 4-byte big-endian length, then the bytes. */
static char *frame(const char *body, size_t n) {
    char *out = malloc(n + 4);
    uint32_t be = htonl((uint32_t)n);
    memcpy(out, &be, 4);
    memcpy(out + 4, body, n);
    return out;
}

/* Sends COUNT frames one at a time (cycling through FRAMES), each after the previous
 * reply; prints the round-trip p50 and p99 in microseconds as JSON. With CHECK, a reply
 * holding "error" stops the run: a replay must measure successful requests. */
static int round_trips(const char *path, char **frames, size_t *lengths, int n, long count, int check) {
    struct sockaddr_un addr;
    char *in = malloc(1 << 24);
    double *rtt = malloc(sizeof(double) * (size_t)count);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (address(path, &addr) || connect(s, (void *)&addr, sizeof addr)) { perror("connect"); return 1; }
    for (long i = 0; i < count; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        uint32_t len;
        if (full(s, frames[i % n], lengths[i % n], 1) || full(s, &len, 4, 0) || ntohl(len) > (1 << 24) || full(s, in, ntohl(len), 0)) { perror("round trip"); return 1; }
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (check && memmem(in, ntohl(len), "\"error\"", 7)) { fprintf(stderr, "error reply: %.*s\n", (int)ntohl(len), in); return 1; }
        rtt[i] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    }
    qsort(rtt, (size_t)count, sizeof(double), cmp);
    printf("{\"p50\": %.2f, \"p99\": %.2f}\n", rtt[count / 2], rtt[(count * 99) / 100]);
    return 0;
}

/* Sends COUNT frames keeping DEPTH in flight (each reply lets the next request go);
 * prints requests per second as JSON. */
static int pipelined(const char *path, char **frames, size_t *lengths, int n, long count, long depth, int check) {
    struct sockaddr_un addr;
    char *in = malloc(1 << 24);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (address(path, &addr) || connect(s, (void *)&addr, sizeof addr)) { perror("connect"); return 1; }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    long sent = 0, received = 0;
    while (received < count) {
        while (sent < count && sent - received < depth) {
            if (full(s, frames[sent % n], lengths[sent % n], 1)) { perror("send"); return 1; }
            sent++;
        }
        uint32_t len;
        if (full(s, &len, 4, 0) || ntohl(len) > (1 << 24) || full(s, in, ntohl(len), 0)) { perror("receive"); return 1; }
        if (check && memmem(in, ntohl(len), "\"error\"", 7)) { fprintf(stderr, "error reply: %.*s\n", (int)ntohl(len), in); return 1; }
        received++;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double seconds = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    printf("{\"rps\": %.1f}\n", (double)count / seconds);
    return 0;
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One of `clients`: sends the template's request with a new name each time until `until`,
 * then writes to `out` how many it sent, when its last reply came, and each round trip. */
static int client_process(const char *path, int clients, int index, const char *template, double until, int out) {
    struct sockaddr_un addr;
    const char *mark = strstr(template, "@NAME@");
    size_t before = (size_t)(mark - template), after = strlen(mark + 6);
    char *body = malloc(before + after + 64), *in = malloc(1 << 24);
    long capacity = 1 << 16, sent = 0;
    double *rtt = malloc(sizeof(double) * (size_t)capacity), last = now_seconds();
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (address(path, &addr) || connect(s, (void *)&addr, sizeof addr)) { perror("connect"); return 1; }
    memcpy(body, template, before);
    while ((last = now_seconds()) < until) {
        int name = snprintf(body + before, 48, "c%d-%d-%ld", clients, index, sent);
        memcpy(body + before + name, mark + 6, after);
        size_t n = before + (size_t)name + after;
        char *request = frame(body, n);
        uint32_t len;
        int failed = full(s, request, n + 4, 1) || full(s, &len, 4, 0) || ntohl(len) > (1 << 24) || full(s, in, ntohl(len), 0);
        free(request);
        if (failed) { perror("round trip"); return 1; }
        if (memmem(in, ntohl(len), "\"error\"", 7)) { fprintf(stderr, "error reply: %.*s\n", (int)ntohl(len), in); return 1; }
        if (sent == capacity) rtt = realloc(rtt, sizeof(double) * (size_t)(capacity *= 2));
        rtt[sent++] = (now_seconds() - last) * 1e6;
    }
    if (full(out, &sent, sizeof sent, 1) || full(out, &last, sizeof last, 1) || full(out, rtt, sizeof(double) * (size_t)sent, 1)) return 1;
    return 0;
}

/* CLIENTS processes at once (see client_process); prints the requests per second of them
 * all, from the start to the last reply, and the p50 and p99 of every round trip. */
static int clients_run(const char *path, int clients, double seconds, const char *file) {
    FILE *f = fopen(file, "r");
    char *template = NULL;
    size_t cap = 0;
    ssize_t got;
    if (!f || (got = getline(&template, &cap, f)) <= 0) { perror("request"); return 1; }
    if (template[got - 1] == '\n') template[got - 1] = 0;
    if (!strstr(template, "@NAME@")) { fprintf(stderr, "no @NAME@ in the request of %s\n", file); return 1; }
    int (*pipes)[2] = calloc((size_t)clients, sizeof *pipes);
    pid_t *pids = calloc((size_t)clients, sizeof *pids);
    double start = now_seconds(), end = start;
    for (int c = 0; c < clients; c++) {
        if (pipe(pipes[c])) { perror("pipe"); return 1; }
        if ((pids[c] = fork()) == 0) _exit(client_process(path, clients, c, template, start + seconds, pipes[c][1]));
        close(pipes[c][1]);
    }
    long total = 0, capacity = 1 << 16;
    double *all = malloc(sizeof(double) * (size_t)capacity);
    int failed = 0;
    for (int c = 0; c < clients; c++) {
        long sent;
        double last;
        if (full(pipes[c][0], &sent, sizeof sent, 0) || full(pipes[c][0], &last, sizeof last, 0)) { failed = 1; continue; }
        while (total + sent > capacity) all = realloc(all, sizeof(double) * (size_t)(capacity *= 2));
        if (full(pipes[c][0], all + total, sizeof(double) * (size_t)sent, 0)) { failed = 1; continue; }
        total += sent;
        if (last > end) end = last;
    }
    for (int c = 0; c < clients; c++) {
        int status;
        if (waitpid(pids[c], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    }
    if (failed || total == 0) { fprintf(stderr, "a client failed\n"); return 1; }
    qsort(all, (size_t)total, sizeof(double), cmp);
    printf("{\"rps\": %.1f, \"p50\": %.2f, \"p99\": %.2f}\n", (double)total / (end - start), all[total / 2], all[(total * 99) / 100]);
    return 0;
}

int main(int argc, char **argv) {
    struct sockaddr_un addr;
    /* The parent may have blocked signals; the server must die on SIGTERM. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (argc == 4 && strcmp(argv[1], "server") == 0) {
        size_t reply = (size_t)atol(argv[3]);
        char *out = calloc(1, reply + 4), *in = malloc(1 << 20);
        uint32_t be = htonl((uint32_t)reply);
        memcpy(out, &be, 4);
        memset(out + 4, 'x', reply);
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        unlink(argv[2]);
        if (address(argv[2], &addr) || bind(s, (void *)&addr, sizeof addr) || listen(s, 16)) { perror("listen"); return 1; }
        printf("ready\n");
        fflush(stdout);
        for (;;) {
            int c = accept(s, NULL, NULL);
            if (c < 0) continue;
            uint32_t len;
            while (full(c, &len, 4, 0) == 0) {
                len = ntohl(len);
                if (len > (1 << 20) || full(c, in, len, 0)) break;
                if (full(c, out, reply + 4, 1)) break;
            }
            close(c);
        }
    }
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "replay") == 0) {
        FILE *f = fopen(argv[4], "r");
        if (!f) { perror("requests"); return 1; }
        static char *frames[4096];
        static size_t lengths[4096];
        int n = 0;
        char *line = NULL;
        size_t cap = 0;
        ssize_t got;
        while (n < 4096 && (got = getline(&line, &cap, f)) > 0) {
            if (line[got - 1] == '\n') got--;
            if (got == 0) continue;
            frames[n] = frame(line, (size_t)got);
            lengths[n++] = (size_t)got + 4;
        }
        if (n == 0) { fprintf(stderr, "no requests in %s\n", argv[4]); return 1; }
        if (argc == 6) return pipelined(argv[2], frames, lengths, n, atol(argv[3]), atol(argv[5]), 1);
        return round_trips(argv[2], frames, lengths, n, atol(argv[3]), 1);
    }
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "client") == 0) {
        size_t req = (size_t)atol(argv[4]);
        char *body = malloc(req + 1);
        memset(body, 'x', req);
        char *frames[1] = {frame(body, req)};
        size_t lengths[1] = {req + 4};
        if (argc == 6) return pipelined(argv[2], frames, lengths, 1, atol(argv[3]), atol(argv[5]), 0);
        return round_trips(argv[2], frames, lengths, 1, atol(argv[3]), 0);
    }
    if (argc == 6 && strcmp(argv[1], "clients") == 0 && atoi(argv[3]) > 0 && atof(argv[4]) > 0) {
        return clients_run(argv[2], atoi(argv[3]), atof(argv[4]), argv[5]);
    }
    fprintf(stderr, "usage: floor server PATH REPLY_BYTES | floor client PATH COUNT REQ_BYTES [DEPTH] | floor replay PATH COUNT FILE [DEPTH] | floor clients PATH CLIENTS SECONDS FILE\n");
    return 64;
}

/*
 * Devices for the gateway benchmark's notification figures: COUNT TLS WebSocket clients
 * in one thread (OpenSSL, epoll), as cheap as a client gets, because on the benchmark's
 * machine the devices share the cores with the server they measure, and a phone spends
 * its own CPU, not the server's.
 *
 *   wsclients PORT PATH TOKENS COUNT [CALL [SEND]]
 *
 * Each client connects to 127.0.0.1:PORT, completes TLS (no verification: the benchmark
 * measures the server) and the WebSocket upgrade on PATH, with "Authorization: Bearer T"
 * for the next line T of the file TOKENS ("-": no header). Once all have, each sends the
 * text message CALL (if given) and waits for its reply, which must hold "result", then
 * sends SEND (if given). Then it prints "ready" and reads commands on its standard input:
 *
 *   expect R     from now on, time the arrival of the first message with the number R
 *                after "totalSeconds": at each client (CLOCK_MONOTONIC, the clock the
 *                benchmark times its changes with)
 *
 * and prints "round R T1 … TCOUNT" (nanoseconds) once every client has received round R.
 * Pings are answered with pongs. A message is expected in one frame, as the servers it
 * measures send them (a continued one is not timed). Ends at the end of its input; any
 * failure goes to standard error with exit status 1.
 */
#define _GNU_SOURCE  /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct client {
    int fd;
    SSL *ssl;
    unsigned char *buf;  /* received, not yet a whole frame */
    size_t len, cap;
    long round;          /* the last round timed here */
};

static struct client *clients;
static long count;
static long expected = -1;
static long arrived;
static uint64_t *times;

static void fail(const char *what) {
    fprintf(stderr, "wsclients: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void append(struct client *c, const unsigned char *bytes, size_t n) {
    if (c->len + n > c->cap) {
        c->cap = (c->len + n) * 2 < 1024 ? 1024 : (c->len + n) * 2;
        c->buf = realloc(c->buf, c->cap);
        if (!c->buf) fail("out of memory");
    }
    memcpy(c->buf + c->len, bytes, n);
    c->len += n;
}

/* Writes all of `n` bytes (blocking, or retried while a non-blocking socket is full). */
static void send_all(struct client *c, const void *bytes, int n) {
    const char *p = bytes;
    while (n > 0) {
        int w = SSL_write(c->ssl, p, n);
        if (w > 0) { p += w; n -= w; continue; }
        int e = SSL_get_error(c->ssl, w);
        if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) fail("a write failed");
    }
}

/* A client's frame: FIN, the opcode, masked (RFC 6455 requires it of a client). */
static void send_frame(struct client *c, int opcode, const unsigned char *payload, size_t n) {
    unsigned char out[14 + 65536];
    if (n > 65535) fail("a message over 64 KiB");
    size_t h = 0;
    out[h++] = 0x80 | (unsigned char)opcode;
    if (n < 126) {
        out[h++] = 0x80 | (unsigned char)n;
    } else {
        out[h++] = 0x80 | 126;
        out[h++] = (unsigned char)(n >> 8);
        out[h++] = (unsigned char)n;
    }
    uint32_t key = (uint32_t)rand();
    unsigned char mask[4];
    memcpy(mask, &key, 4);
    memcpy(out + h, mask, 4);
    h += 4;
    for (size_t i = 0; i < n; i++) out[h + i] = payload[i] ^ mask[i % 4];
    send_all(c, out, (int)(h + n));
}

/* The next whole frame in the client's buffer: its opcode, payload and length, or 0. */
static int next_frame(struct client *c, int *opcode, unsigned char **payload, size_t *n, size_t *size) {
    if (c->len < 2) return 0;
    size_t h = 2, length = c->buf[1] & 0x7f;
    if (length == 126) {
        if (c->len < 4) return 0;
        length = (size_t)c->buf[2] << 8 | c->buf[3];
        h = 4;
    } else if (length == 127) {
        if (c->len < 10) return 0;
        length = 0;
        for (int i = 0; i < 8; i++) length = length << 8 | c->buf[2 + i];
        h = 10;
    }
    if (c->buf[1] & 0x80) fail("a masked frame from the server");
    if (c->len < h + length) return 0;
    *opcode = c->buf[0] & 0x0f;
    *payload = c->buf + h;
    *n = length;
    *size = h + length;
    return 1;
}

static void consume(struct client *c, size_t size) {
    memmove(c->buf, c->buf + size, c->len - size);
    c->len -= size;
}

/* The number after "totalSeconds": in a message, or -1. */
static long round_in(const unsigned char *payload, size_t n) {
    static const char key[] = "\"totalSeconds\":";
    const unsigned char *at = memmem(payload, n, key, sizeof key - 1);
    if (!at) return -1;
    const unsigned char *p = at + sizeof key - 1, *end = payload + n;
    long value = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') { value = value * 10 + (*p++ - '0'); digits++; }
    return digits ? value : -1;
}

static void report(void) {
    printf("round %ld", expected);
    for (long i = 0; i < count; i++) printf(" %llu", (unsigned long long)times[i]);
    printf("\n");
    fflush(stdout);
}

/* Handles the whole frames received: times rounds, answers pings. */
static void frames(struct client *c) {
    int opcode;
    unsigned char *payload;
    size_t n, size;
    while (next_frame(c, &opcode, &payload, &n, &size)) {
        if (opcode == 1) {
            long round = round_in(payload, n);
            if (round >= 0 && round == expected && c->round != round) {
                c->round = round;
                times[arrived++] = now_ns();
                if (arrived == count) report();
            }
        } else if (opcode == 9) {
            send_frame(c, 10, payload, n);
        } else if (opcode == 8) {
            fail("the server closed a WebSocket");
        }
        consume(c, size);
    }
}

/* Reads what a (blocking) client has, at least one byte. */
static void read_blocking(struct client *c) {
    unsigned char scratch[16384];
    int r = SSL_read(c->ssl, scratch, sizeof scratch);
    if (r <= 0) fail("the server closed a connection while it was set up");
    append(c, scratch, (size_t)r);
}

static void connect_client(struct client *c, SSL_CTX *tls, int port, const char *path, const char *token) {
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&address, sizeof address) != 0) {
        perror("wsclients: connect");
        exit(1);
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->ssl = SSL_new(tls);
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_tlsext_host_name(c->ssl, "localhost");
    if (SSL_connect(c->ssl) != 1) fail("a TLS handshake failed");
    char request[1024];
    int n = snprintf(request, sizeof request,
                     "GET %s HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s%s%s\r\n",
                     path, token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
    if (n < 0 || n >= (int)sizeof request) fail("the upgrade request is too long (a token over 900 bytes?)");
    send_all(c, request, n);
    unsigned char *end;
    while (!(end = memmem(c->buf ? c->buf : (unsigned char *)"", c->len, "\r\n\r\n", 4))) read_blocking(c);
    if (c->len < 12 || memcmp(c->buf, "HTTP/1.1 101", 12) != 0) {
        fprintf(stderr, "wsclients: the upgrade on %s was refused: %.*s\n", path, (int)(end - c->buf), c->buf);
        exit(1);
    }
    consume(c, (size_t)(end + 4 - c->buf));
    c->round = -1;
}

int main(int argc, char **argv) {
    if (argc < 5 || argc > 7 || atoi(argv[1]) <= 0 || atol(argv[4]) <= 0) {
        fprintf(stderr, "usage: wsclients PORT PATH TOKENS COUNT [CALL [SEND]]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    const char *path = argv[2], *call = argc > 5 ? argv[5] : NULL, *send = argc > 6 ? argv[6] : NULL;
    count = atol(argv[4]);
    FILE *tokens = strcmp(argv[3], "-") == 0 ? NULL : fopen(argv[3], "r");
    if (strcmp(argv[3], "-") != 0 && !tokens) { perror("wsclients: TOKENS"); return 1; }
    clients = calloc((size_t)count, sizeof *clients);
    times = calloc((size_t)count, sizeof *times);
    srand((unsigned)getpid());
    /* A closed connection is reported as such, not a silent death. */
    signal(SIGPIPE, SIG_IGN);

    SSL_CTX *tls = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(tls, TLS1_2_VERSION);
    SSL_CTX_set_verify(tls, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_mode(tls, SSL_MODE_RELEASE_BUFFERS);

    char line[512];
    for (long i = 0; i < count; i++) {
        const char *token = NULL;
        if (tokens) {
            if (!fgets(line, sizeof line, tokens)) fail("fewer tokens than clients");
            line[strcspn(line, "\r\n")] = 0;
            token = line;
        }
        connect_client(&clients[i], tls, port, path, token);
    }
    if (call) {
        /* Sent on every connection first, then the replies read: the calls overlap. */
        for (long i = 0; i < count; i++) send_frame(&clients[i], 1, (const unsigned char *)call, strlen(call));
        for (long i = 0; i < count; i++) {
            struct client *c = &clients[i];
            int opcode;
            unsigned char *payload;
            size_t n, size;
            while (!next_frame(c, &opcode, &payload, &n, &size)) read_blocking(c);
            if (opcode != 1 || !memmem(payload, n, "\"result\"", 8)) {
                fprintf(stderr, "wsclients: the call failed: %.*s\n", (int)n, payload);
                return 1;
            }
            consume(c, size);
        }
    }
    int poll = epoll_create1(0);
    struct epoll_event event = { .events = EPOLLIN };
    for (long i = 0; i < count; i++) {
        struct client *c = &clients[i];
        if (send) send_frame(c, 1, (const unsigned char *)send, strlen(send));
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        event.data.u64 = (uint64_t)i;
        if (epoll_ctl(poll, EPOLL_CTL_ADD, c->fd, &event) != 0) fail("epoll_ctl");
    }
    event.data.u64 = UINT64_MAX;
    if (epoll_ctl(poll, EPOLL_CTL_ADD, 0, &event) != 0) fail("standard input must be a pipe (the benchmark's commands)");
    printf("ready\n");
    fflush(stdout);

    char commands[4096];
    size_t pending = 0;
    struct epoll_event ready[256];
    unsigned char scratch[65536];
    for (;;) {
        int n = epoll_wait(poll, ready, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("epoll_wait");
        for (int k = 0; k < n; k++) {
            if (ready[k].data.u64 == UINT64_MAX) {
                if (pending == sizeof commands - 1) fail("a command line over 4 KiB");
                ssize_t r = read(0, commands + pending, sizeof commands - 1 - pending);
                if (r <= 0) return 0;
                pending += (size_t)r;
                char *newline;
                while ((newline = memchr(commands, '\n', pending))) {
                    *newline = 0;
                    long round;
                    if (sscanf(commands, "expect %ld", &round) == 1) {
                        expected = round;
                        arrived = 0;
                    }
                    pending -= (size_t)(newline + 1 - commands);
                    memmove(commands, newline + 1, pending);
                }
                continue;
            }
            struct client *c = &clients[ready[k].data.u64];
            for (;;) {
                int r = SSL_read(c->ssl, scratch, sizeof scratch);
                if (r > 0) {
                    append(c, scratch, (size_t)r);
                    continue;
                }
                int e = SSL_get_error(c->ssl, r);
                if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) break;
                fail("the server closed a connection");
            }
            frames(c);
        }
    }
}

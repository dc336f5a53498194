/* Round trips of Mooncake's coro_rpc framing against any master, and the
 * ceiling of the machine: a bare coro_rpc-shaped echo served the same way.
 *
 *   coro_rtt client HOST:PORT SECONDS CONNS [FID BODYHEX]
 *       CONNS threads, each one connection doing one call at a time (as
 *       Mooncake's synchronous client does): a 20-byte coro_rpc request
 *       header with function id FID (default ServiceReady, 0x7b81bb56, body
 *       empty; BODYHEX: the struct_pack arguments, e.g. an ExistKey captured
 *       in tests/fixtures/mooncake/frames.jsonl) and waits for the reply's
 *       16-byte header and body.  Prints calls/s and p50/p99/p999.
 *   coro_rtt echo HOST:PORT
 *       Serves coro_rpc on one thread (epoll, non-blocking, TCP_NODELAY):
 *       every request is answered with errc 0 and ServiceReady's result
 *       ("2.0.0").  No store, no translation: what a master on this machine
 *       could do at best with one thread reading, answering and writing per
 *       wake-up.  Runs until killed.
 *
 * The client is C so that its own cost per call is small beside the
 * server's (Mooncake's Python client adds tens of microseconds per call,
 * the same against every master).  bench/RESULTS.md, "Mooncake's endpoint
 * at one client". */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define HEADER_REQ 20u
#define HEADER_RESP 16u
#define BODY_MAX 4096u
#define SAMPLES_MAX (1u << 22)

/* ServiceReady's result as mooncake_master sends it (frames.jsonl). */
static const uint8_t READY_BODY[] = {0x35, 0xcc, 0xb3, 0x1c, 0x04, 0x87, 0x80, 0x0c, 0x01,
                                     0x00, 0x01, 0x05, 0x32, 0x2e, 0x30, 0x2e, 0x30};

struct client_arg {
    struct sockaddr_in addr;
    uint64_t seconds_ns;
    uint32_t fid;
    uint8_t body[BODY_MAX];
    size_t body_len;
    uint64_t calls;
    struct bench_latency lat;
};

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool read_full(int fd, uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r, n -= (size_t)r;
    }
    return true;
}

static bool parse_address(const char *text, struct sockaddr_in *out) {
    char host[64];
    const char *colon = strrchr(text, ':');
    if (colon == NULL || (size_t)(colon - text) >= sizeof(host)) return false;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    *out = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    return inet_pton(AF_INET, host, &out->sin_addr) == 1;
}

static void *client_thread(void *p) {
    struct client_arg *a = p;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&a->addr, sizeof(a->addr)) != 0) {
        perror("coro_rtt: connect");
        exit(1);
    }
    uint8_t req[HEADER_REQ + BODY_MAX], resp[HEADER_RESP + (64u << 10)];
    memset(req, 0, HEADER_REQ);
    req[0] = 21;
    put32(req + 8, a->fid);
    put32(req + 12, (uint32_t)a->body_len);
    memcpy(req + HEADER_REQ, a->body, a->body_len);
    uint64_t start = bench_now_ns();
    for (uint32_t seq = 1;; seq++) {
        put32(req + 4, seq);
        uint64_t t0 = bench_now_ns();
        if (t0 - start >= a->seconds_ns) break;
        if (write(fd, req, HEADER_REQ + a->body_len) != (ssize_t)(HEADER_REQ + a->body_len) ||
            !read_full(fd, resp, HEADER_RESP)) {
            fprintf(stderr, "coro_rtt: the server closed the connection\n");
            exit(1);
        }
        uint32_t len = get32(resp + 8);
        if (resp[0] != 21 || get32(resp + 4) != seq || len > sizeof(resp) - HEADER_RESP ||
            !read_full(fd, resp + HEADER_RESP, len)) {
            fprintf(stderr, "coro_rtt: not the reply to call %u\n", seq);
            exit(1);
        }
        bench_latency_add(&a->lat, bench_now_ns() - t0);
        a->calls++;
    }
    close(fd);
    return NULL;
}

static int run_client(int argc, char **argv) {
    struct sockaddr_in addr;
    if (argc < 5 || !parse_address(argv[2], &addr)) {
        fprintf(stderr, "usage: coro_rtt client IP:PORT SECONDS CONNS [FID BODYHEX]\n");
        return 2;
    }
    uint32_t conns = (uint32_t)atoi(argv[4]);
    if (conns == 0 || conns > 1024) return 2;
    struct client_arg *args = calloc(conns, sizeof(*args));
    pthread_t *threads = calloc(conns, sizeof(*threads));
    assert(args != NULL && threads != NULL);
    for (uint32_t i = 0; i < conns; i++) {
        struct client_arg *a = &args[i];
        a->addr = addr;
        a->seconds_ns = (uint64_t)(atof(argv[3]) * 1e9);
        a->fid = argc > 5 ? (uint32_t)strtoul(argv[5], NULL, 16) : 0x7b81bb56u;
        const char *hex = argc > 6 ? argv[6] : "";
        for (; hex[0] != '\0' && hex[1] != '\0' && a->body_len < BODY_MAX; hex += 2) {
            unsigned v;
            if (sscanf(hex, "%2x", &v) != 1) return 2;
            a->body[a->body_len++] = (uint8_t)v;
        }
        bench_latency_init(&a->lat, SAMPLES_MAX / conns);
    }
    uint64_t t0 = bench_now_ns();
    for (uint32_t i = 0; i < conns; i++) pthread_create(&threads[i], NULL, client_thread, &args[i]);
    for (uint32_t i = 0; i < conns; i++) pthread_join(threads[i], NULL);
    uint64_t elapsed = bench_now_ns() - t0, calls = 0;
    struct bench_latency all;
    bench_latency_init(&all, SAMPLES_MAX);
    for (uint32_t i = 0; i < conns; i++) {
        calls += args[i].calls;
        for (size_t s = 0; s < args[i].lat.count; s++) bench_latency_add(&all, args[i].lat.samples_ns[s]);
        bench_latency_free(&args[i].lat);
    }
    char name[128];
    snprintf(name, sizeof(name), "coro_rtt %s conns=%u fid=%08x", argv[2], conns, args[0].fid);
    bench_report(name, calls, elapsed, &all);
    bench_latency_free(&all);
    free(args);
    free(threads);
    return 0;
}

/* The echo: one thread, level-triggered epoll, a read buffer per fd. */
struct echo_conn {
    int fd;
    uint8_t in[HEADER_REQ + BODY_MAX * 4];
    size_t len;
};

static void echo_serve(struct echo_conn *c) {
    int fd = c->fd;
    ssize_t n = read(fd, c->in + c->len, sizeof(c->in) - c->len);
    if (n <= 0) {
        close(fd);
        free(c);
        return;
    }
    c->len += (size_t)n;
    uint8_t out[64 * (HEADER_RESP + sizeof(READY_BODY))];
    size_t pos = 0, olen = 0;
    while (c->len - pos >= HEADER_REQ && olen + HEADER_RESP + sizeof(READY_BODY) <= sizeof(out)) {
        size_t frame = HEADER_REQ + get32(c->in + pos + 12);
        if (frame > sizeof(c->in)) {
            close(fd);
            free(c);
            return;
        }
        if (c->len - pos < frame) break;
        uint8_t *h = out + olen;
        memset(h, 0, HEADER_RESP);
        h[0] = 21;
        put32(h + 4, get32(c->in + pos + 4));
        put32(h + 8, sizeof(READY_BODY));
        memcpy(h + HEADER_RESP, READY_BODY, sizeof(READY_BODY));
        olen += HEADER_RESP + sizeof(READY_BODY);
        pos += frame;
    }
    memmove(c->in, c->in + pos, c->len - pos);
    c->len -= pos;
    if (olen > 0 && write(fd, out, olen) != (ssize_t)olen) fprintf(stderr, "coro_rtt: short write\n");
}

static int run_echo(int argc, char **argv) {
    struct sockaddr_in addr;
    if (argc < 3 || !parse_address(argv[2], &addr)) {
        fprintf(stderr, "usage: coro_rtt echo IP:PORT\n");
        return 2;
    }
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(lfd, 1024) != 0) {
        perror("coro_rtt: bind");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    for (;;) {
        struct epoll_event found[64];
        int n = epoll_wait(ep, found, 64, -1);
        for (int i = 0; i < n; i++) {
            if (found[i].data.ptr == NULL) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
                if (fd < 0) continue;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                struct echo_conn *c = calloc(1, sizeof(*c));
                if (c == NULL) {
                    close(fd);
                    continue;
                }
                c->fd = fd;
                ev.events = EPOLLIN;
                ev.data.ptr = c;
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                continue;
            }
            echo_serve(found[i].data.ptr);
        }
    }
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "client") == 0) return run_client(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "echo") == 0) return run_echo(argc, argv);
    fprintf(stderr, "usage: coro_rtt client IP:PORT SECONDS CONNS [FID BODYHEX] | echo IP:PORT\n");
    return 2;
}

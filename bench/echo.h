/* The two ceilings of bench/master_sync: a bare ZMQ ROUTER echo server and a
 * bare one-thread epoll TCP echo server, each run in a child process (so its
 * CPU can be read from /proc/PID/stat like crescentd's), and the raw client
 * side of each, which the driver calls through the same interface as
 * libcrescent.
 *
 * Header-only: each benchmark is one executable built from one bench/<name>.c
 * file (see harness.h).
 *
 * Wire forms, chosen to cost what a crescent request costs the transport:
 *   ZMQ: the client's DEALER sends one frame of the request's size (crescent's
 *        request is one frame [method][id][body]); the ROUTER answers with the
 *        same frame.  Client sockets share one context with one I/O thread,
 *        as libcrescent's process context does.
 *   TCP: [u32 little-endian length][payload], answered with the same bytes;
 *        TCP_NODELAY on both sides; the server is one thread, one epoll. */
#ifndef CRESCENT_BENCH_ECHO_H
#define CRESCENT_BENCH_ECHO_H

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define ECHO_FRAME_MAX (1u << 20) /* far above any request the driver sends */
#define ECHO_ENDPOINT_MAX 128u

/* A running echo server: its process (for CPU readings) and where to reach it. */
struct echo_server {
    pid_t pid;
    char endpoint[ECHO_ENDPOINT_MAX]; /* "tcp://127.0.0.1:P" or "127.0.0.1:P" */
};

/* ---- servers (run in the child) ----------------------------------------- */

static void echo_die(const char *what) {
    fprintf(stderr, "echo server: %s: %s\n", what, strerror(errno));
    _exit(1);
}

/* ROUTER echo: [identity][frame...] back as received, one I/O thread. */
static void echo_zmq_serve(int report_fd) {
    void *ctx = zmq_ctx_new();
    void *router = ctx != NULL ? zmq_socket(ctx, ZMQ_ROUTER) : NULL;
    if (router == NULL || zmq_bind(router, "tcp://127.0.0.1:*") != 0) echo_die("zmq bind");
    char endpoint[ECHO_ENDPOINT_MAX];
    size_t len = sizeof(endpoint);
    if (zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, endpoint, &len) != 0) echo_die("zmq endpoint");
    if (write(report_fd, endpoint, strlen(endpoint) + 1) < 0) echo_die("report");
    close(report_fd);
    zmq_msg_t part;
    zmq_msg_init(&part);
    for (;;) {
        if (zmq_msg_recv(&part, router, 0) < 0) {
            if (errno == EINTR) continue;
            echo_die("zmq_msg_recv");
        }
        int more = zmq_msg_more(&part);
        if (zmq_msg_send(&part, router, more ? ZMQ_SNDMORE : 0) < 0) echo_die("zmq_msg_send");
    }
}

struct echo_conn {
    int fd;
    size_t have;       /* bytes of `buf` read and not yet answered */
    uint8_t buf[8 + ECHO_FRAME_MAX];
};

static bool echo_write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) { /* the client reads slowly: wait for room */
            struct epoll_event ev;
            int ep = epoll_create1(0);
            ev.events = EPOLLOUT;
            epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
            epoll_wait(ep, &ev, 1, 1000);
            close(ep);
            continue;
        }
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads what is there and answers every complete frame; false: close it. */
static bool echo_conn_serve(struct echo_conn *c) {
    for (;;) {
        ssize_t n = read(c->fd, c->buf + c->have, sizeof(c->buf) - c->have);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return true;
        if (n <= 0) return false;
        c->have += (size_t)n;
        size_t done = 0;
        while (c->have - done >= 4) {
            uint32_t len;
            memcpy(&len, c->buf + done, 4);
            if (len > ECHO_FRAME_MAX) return false;
            if (c->have - done < 4 + (size_t)len) break;
            done += 4 + (size_t)len;
        }
        if (done > 0 && !echo_write_all(c->fd, c->buf, done)) return false;
        memmove(c->buf, c->buf + done, c->have - done);
        c->have -= done;
    }
}

/* One thread, one epoll, level-triggered: the simplest fast TCP server. */
static void echo_tcp_serve(int listener) {
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) != 0) echo_die("epoll");
    struct epoll_event events[64];
    for (;;) {
        int n = epoll_wait(ep, events, 64, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) echo_die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct echo_conn *c = events[i].data.ptr;
            if (c == NULL) {
                int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) continue;
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                c = malloc(sizeof(*c));
                if (c == NULL) echo_die("malloc");
                c->fd = fd;
                c->have = 0;
                struct epoll_event add = {.events = EPOLLIN, .data.ptr = c};
                if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &add) != 0) echo_die("epoll_ctl");
            } else if (!echo_conn_serve(c)) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                free(c);
            }
        }
    }
}

/* Starts the server in a child that dies with this process.  Call before
 * any thread exists (fork copies only the calling thread).  Returns false
 * (with a message on stderr) when it could not start. */
static bool echo_server_start(bool zmq, struct echo_server *out) {
    int pipe_fds[2] = {-1, -1};
    int listener = -1;
    if (zmq) {
        if (pipe(pipe_fds) != 0) return false;
    } else {
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(addr);
        listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
            listen(listener, 1024) != 0 ||
            getsockname(listener, (struct sockaddr *)&addr, &len) != 0) {
            fprintf(stderr, "echo server: tcp listen on 127.0.0.1: %s\n", strerror(errno));
            return false;
        }
        snprintf(out->endpoint, sizeof(out->endpoint), "127.0.0.1:%u", ntohs(addr.sin_port));
    }
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (zmq) {
            close(pipe_fds[0]);
            echo_zmq_serve(pipe_fds[1]);
        } else {
            echo_tcp_serve(listener);
        }
        _exit(0);
    }
    out->pid = pid;
    if (!zmq) {
        close(listener);
        return true;
    }
    close(pipe_fds[1]);
    ssize_t n = read(pipe_fds[0], out->endpoint, sizeof(out->endpoint) - 1);
    close(pipe_fds[0]);
    if (n <= 0) {
        fprintf(stderr, "echo server: the ZMQ echo did not start\n");
        return false;
    }
    out->endpoint[n] = '\0';
    return true;
}

static void echo_server_stop(struct echo_server *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

/* ---- clients (the driver's side) ---------------------------------------- */

/* One connection to an echo server; `frame` holds the bytes sent each call. */
struct echo_client {
    void *socket; /* ZMQ DEALER, or NULL for TCP */
    int fd;       /* TCP, or -1 */
    uint8_t *frame;
    uint8_t *reply;
};

static int echo_client_open_zmq(void *ctx, const char *endpoint, struct echo_client *c) {
    memset(c, 0, sizeof(*c));
    c->fd = -1;
    c->socket = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    if (c->socket == NULL || zmq_setsockopt(c->socket, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
        zmq_connect(c->socket, endpoint) != 0)
        return -1;
    c->frame = calloc(1, 4 + ECHO_FRAME_MAX);
    c->reply = calloc(1, 4 + ECHO_FRAME_MAX);
    return c->frame != NULL && c->reply != NULL ? 0 : -1;
}

static int echo_client_open_tcp(const char *host_port, struct echo_client *c) {
    memset(c, 0, sizeof(*c));
    c->fd = -1;
    const char *colon = strrchr(host_port, ':');
    if (colon == NULL) return -1;
    char host[64];
    snprintf(host, sizeof(host), "%.*s", (int)(colon - host_port), host_port);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) return -1;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
        return -1;
    c->frame = calloc(1, 4 + ECHO_FRAME_MAX);
    c->reply = calloc(1, 4 + ECHO_FRAME_MAX);
    return c->frame != NULL && c->reply != NULL ? 0 : -1;
}

static bool echo_read_full(int fd, uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* One synchronous round trip of a `bytes`-long frame; 0 or -1. */
static int echo_client_call(struct echo_client *c, size_t bytes) {
    assert(bytes <= ECHO_FRAME_MAX);
    if (c->socket != NULL) {
        if (zmq_send(c->socket, c->frame, bytes, 0) < 0) return -1;
        int n = zmq_recv(c->socket, c->reply, ECHO_FRAME_MAX, 0);
        return n == (int)bytes ? 0 : -1;
    }
    uint32_t len = (uint32_t)bytes;
    memcpy(c->frame, &len, 4);
    if (!echo_write_all(c->fd, c->frame, 4 + bytes)) return -1;
    uint32_t got;
    if (!echo_read_full(c->fd, (uint8_t *)&got, 4) || got != len) return -1;
    return echo_read_full(c->fd, c->reply, got) ? 0 : -1;
}

static void echo_client_close(struct echo_client *c) {
    if (c->socket != NULL) zmq_close(c->socket);
    if (c->fd >= 0) close(c->fd);
    free(c->frame);
    free(c->reply);
    memset(c, 0, sizeof(*c));
    c->fd = -1;
}

#endif

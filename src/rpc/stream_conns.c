/* The connections of a stream edge: see stream_conns.h. */
#include "rpc/stream_conns.h"

#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rpc/edge.h"

#define ACCEPT_BATCH 64u
#define LOG_EVERY_NS (10ull * 1000000000u)

int cr_stream_conns_init(struct cr_stream_conns *t, uint32_t max) {
    assert(t != NULL && t->edge != NULL && t->log_tag != NULL && max > 0);
    assert(t->conn_size >= sizeof(struct cr_stream_conn));
    t->conns = calloc(max, sizeof(*t->conns));
    t->generation = calloc(max, sizeof(*t->generation));
    t->free_slots = calloc(max, sizeof(*t->free_slots));
    if (t->conns == NULL || t->generation == NULL || t->free_slots == NULL) {
        free(t->conns), free(t->generation), free(t->free_slots);
        t->conns = NULL, t->generation = NULL, t->free_slots = NULL;
        return CR_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < max; i++) t->free_slots[i] = max - 1 - i;
    t->max = t->free_count = max;
    return CR_OK;
}

static void conn_free(struct cr_stream_conns *t, struct cr_stream_conn *c) {
    free(c->in);
    c->in = NULL;
    if (t->release != NULL) t->release(c);
}

void cr_stream_conns_free(struct cr_stream_conns *t) {
    if (t == NULL) return;
    for (struct cr_stream_conn *c = t->dirty; c != NULL;) { /* closed ones still listed */
        struct cr_stream_conn *next = c->next_dirty;
        if (c->fd < 0) free(c);
        c = next;
    }
    t->dirty = NULL;
    for (uint32_t i = 0; t->conns != NULL && i < t->max; i++) {
        struct cr_stream_conn *c = t->conns[i];
        if (c == NULL) continue;
        close(c->fd);
        conn_free(t, c);
        free(c);
    }
    free(t->conns), free(t->generation), free(t->free_slots);
    t->conns = NULL, t->generation = NULL, t->free_slots = NULL;
}

static void conn_open(struct cr_stream_conns *t, int fd, const struct sockaddr_storage *addr,
                      uint64_t now_ns) {
    char host[48] = "?", port[8] = "?";
    getnameinfo((const struct sockaddr *)addr, sizeof(*addr), host, sizeof(host), port,
                sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
    if (t->free_count == 0) {
        t->refused_full++;
        if (cr_log_ratelimit(&t->last_log_ns, now_ns, LOG_EVERY_NS))
            CR_WARN(t->log_tag, "connection from %s:%s refused: %u connections are open%s", host,
                    port, t->max, t->full_hint != NULL ? t->full_hint : "");
        close(fd);
        return;
    }
    struct cr_stream_conn *c = calloc(1, t->conn_size);
    int one = 1;
    /* Replies are written whole, a round's at a time: Nagle would hold one
     * back waiting for the client's ACK of the previous one. */
    if (c == NULL || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
        CR_WARN(t->log_tag, "connection from %s:%s dropped: %s", host, port,
                c == NULL ? "out of memory" : strerror(errno));
        free(c);
        close(fd);
        return;
    }
    c->fd = fd;
    c->slot = t->free_slots[--t->free_count];
    snprintf(c->peer, sizeof(c->peer), "%s:%s", host, port);
    if (!cr_edge_watch(t->edge, fd, EPOLLIN, c->slot)) {
        CR_ERROR(t->log_tag, "connection from %s dropped", c->peer);
        t->free_slots[t->free_count++] = c->slot;
        free(c);
        close(fd);
        return;
    }
    c->events = EPOLLIN;
    t->conns[c->slot] = c;
    t->open++;
    t->accepted++;
}

void cr_stream_conns_accept(struct cr_stream_conns *t, int listen_fd, uint64_t now_ns) {
    assert(t != NULL && listen_fd >= 0);
    for (unsigned i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof(addr);
        int fd = accept4(listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            conn_open(t, fd, &addr, now_ns);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK &&
            cr_log_ratelimit(&t->last_log_ns, now_ns, LOG_EVERY_NS))
            CR_WARN(t->log_tag, "accept on %s failed: %s", t->address, strerror(errno));
        return;
    }
}

struct cr_stream_conn *cr_stream_conns_find(const struct cr_stream_conns *t, uint32_t slot,
                                            uint32_t gen) {
    assert(t != NULL);
    return slot < t->max && t->generation[slot] == gen ? t->conns[slot] : NULL;
}

void cr_stream_conn_close(struct cr_stream_conns *t, struct cr_stream_conn *c, const char *why) {
    assert(t != NULL && c != NULL && c->fd >= 0 && t->conns[c->slot] == c);
    CR_DEBUG(t->log_tag, "closing %s: %s", c->peer, why);
    cr_edge_unwatch(t->edge, c->fd);
    close(c->fd);
    t->conns[c->slot] = NULL;
    t->generation[c->slot]++; /* replies still coming for it are dropped */
    t->free_slots[t->free_count++] = c->slot;
    t->open--;
    c->fd = -1;
    conn_free(t, c);
    if (!c->dirty) free(c);
}

void cr_stream_conn_set_events(struct cr_stream_conns *t, struct cr_stream_conn *c,
                               uint32_t events) {
    assert(t != NULL && c != NULL && c->fd >= 0);
    if (c->events == events) return;
    if (!cr_edge_rewatch(t->edge, c->fd, events, c->slot))
        CR_ERROR(t->log_tag, "the events of %s were not changed", c->peer);
    c->events = events;
}

void cr_stream_conn_mark_dirty(struct cr_stream_conns *t, struct cr_stream_conn *c) {
    assert(t != NULL && c != NULL);
    if (c->dirty) return;
    c->dirty = true;
    c->next_dirty = t->dirty;
    t->dirty = c;
}

void cr_stream_conns_flush(struct cr_stream_conns *t,
                           void (*write)(struct cr_stream_conns *t, struct cr_stream_conn *c)) {
    assert(t != NULL && write != NULL);
    while (t->dirty != NULL) {
        struct cr_stream_conn *c = t->dirty;
        t->dirty = NULL;
        while (c != NULL) {
            struct cr_stream_conn *next = c->next_dirty;
            c->dirty = false;
            if (c->fd < 0)
                free(c); /* closed while listed */
            else
                write(t, c);
            c = next;
        }
    }
}

bool cr_stream_conn_send(struct cr_stream_conns *t, struct cr_stream_conn *c,
                         const uint8_t *buf, size_t len, size_t *off) {
    assert(t != NULL && c != NULL && c->fd >= 0 && off != NULL && *off <= len);
    while (*off < len) {
        ssize_t n = send(c->fd, buf + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            *off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        cr_stream_conn_close(t, c, n < 0 ? strerror(errno) : "send returned 0");
        return false;
    }
    return true;
}

ssize_t cr_stream_conn_read(struct cr_stream_conns *t, struct cr_stream_conn *c, size_t want,
                            bool *drained) {
    assert(t != NULL && c != NULL && c->fd >= 0 && drained != NULL && want > c->in_len);
    if (want > c->in_cap) {
        uint8_t *grown = realloc(c->in, want);
        if (grown == NULL) {
            cr_stream_conn_close(t, c, "out of memory for its read buffer");
            return -1;
        }
        c->in = grown;
        c->in_cap = want;
    }
    for (;;) {
        size_t room = c->in_cap - c->in_len;
        ssize_t n = recv(c->fd, c->in + c->in_len, room, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (n <= 0) {
            cr_stream_conn_close(t, c, n == 0 ? "the peer closed it" : strerror(errno));
            return -1;
        }
        c->in_len += (size_t)n;
        *drained = (size_t)n < room;
        return n;
    }
}

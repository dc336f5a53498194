/* Mooncake's master endpoint (coro_rpc over TCP, --mooncake-rpc-address,
 * Mooncake's --rpc_port/--port/--rpc_address): an edge of the segments actor
 * (rpc/edge.h), served on segments' own thread like the native endpoint
 * (rpc/rpc_tcp.c), so Mooncake's clients reach the same store, intake and
 * event plane as crescent's.
 *
 * Framing (yalantinglibs coro_rpc_protocol.hpp, docs/mooncake.md): a request
 * is a 20-byte header (magic 21, version 0, serialize type 0 = struct_pack,
 * msg type, seq, function id, body length, attachment length; integers
 * little-endian) and the struct_pack body; a reply is a 16-byte header
 * (magic, version, coro_rpc errc, msg type, seq, length, attachment length)
 * and the struct_pack result.  Replies may leave out of order (coro_rpc
 * matches them by seq).
 *
 * Each request is translated (mc_calls.c) into the protobuf request of the
 * crescent call that does the same and handed to cr_edge_submit, exactly as
 * the native endpoint hands its own: the intake decodes it again.  That
 * costs a protobuf pack and unpack per call (about a microsecond for the
 * calls here) and buys one intake, one validator, one admin gate for every
 * wire format; bench/RESULTS.md measures the endpoint against
 * mooncake_master.
 *
 * A call crescent does not serve is answered with coro_rpc's
 * function_not_registered and a message naming it, and logged (rate
 * limited); bytes that are not the call's arguments with invalid_rpc_arguments.
 * Neither closes the connection.  A header that is not coro_rpc's (wrong
 * magic, a body over 64 MiB, an attachment) closes it: the stream cannot be
 * resynchronized.
 *
 * Bounds: CR_MC_CONNS_MAX connections; 1024 calls in flight per connection
 * (past it the connection is not read until replies drain); replies queued
 * above 64 MiB close the connection (a client that does not read). */
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

#include "actors/subsystems.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "mooncake/http_meta.h"
#include "mooncake/mc_calls.h"
#include "mooncake/mc_edge.h"
#include "rpc/rpc_codec.h"
#include "rpc/stream_listen.h"
#include "rpc/edge.h"

#define MC_REQ_HEADER 20u
#define MC_RESP_HEADER 16u
#define MC_MAGIC 21u
#define MC_BODY_MAX (64u << 20)
#define MC_CONNS_MAX 4096u
#define MC_QUEUE_MAX 1024u
#define MC_OUT_MAX (64u << 20)
#define MC_READ_CHUNK (64u << 10)
#define MC_LISTEN_TAG CR_EDGE_TAG_MAX

struct conn {
    int fd;
    uint32_t slot, in_flight, events;
    uint8_t *in;
    size_t in_len, in_cap;
    struct cr_sp_writer out; /* replies: headers and bodies */
    size_t out_off;          /* bytes of `out` already sent */
    bool dirty;
    struct conn *next_dirty;
    char peer[64];
};

/* A ReMountSegment of several segments: one crescent call each, one answer. */
struct group {
    uint32_t remaining;
    int32_t code; /* Mooncake code of the first failure, or 0 */
};

/* What a call carries in its identity bytes. */
struct tag {
    uint32_t slot, gen, seq;
    uint16_t fn;
    uint32_t entries;
    struct cr_mc_uuid client;
    bool has_client;
    struct group *group;
};

struct mc_edge {
    struct cr_edge edge; /* first */
    int listen_fd;
    bool listen_added, default_busy;
    uint32_t taken, open;
    struct conn *conns[MC_CONNS_MAX];
    uint32_t generation[MC_CONNS_MAX];
    uint32_t free_slots[MC_CONNS_MAX], free_count;
    struct conn *dirty;
    struct cr_mc_state state;
    char address[CR_CONFIG_ADDRESS_MAX];
    uint64_t unsupported, bad_args, closed_malformed, last_log_ns;
    uint64_t refused_named[11]; /* refused_calls[i]'s, as Mooncake's metrics count them */
    /* Mooncake's HTTP metadata server, when an expired client's keys are
     * removed from it (--enable-metadata-cleanup-on-timeout); else NULL. */
    struct cr_mc_meta *meta;
    uint64_t clients_forgotten, meta_keys_removed;
};

static uint64_t now_ns(struct mc_edge *st) { return cr_edge_now_ns(&st->edge); }

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ------------------------------------------------------------------------ */
/* Connections */

static void set_events(struct mc_edge *st, struct conn *c) {
    size_t queued = c->out.len - c->out_off;
    uint32_t events = 0;
    if (c->in_flight < MC_QUEUE_MAX && queued < MC_OUT_MAX / 16) events |= EPOLLIN;
    if (queued > 0 && !c->dirty) events |= EPOLLOUT;
    if (events == c->events) return;
    if (!cr_edge_rewatch(&st->edge, c->fd, events, c->slot))
        CR_ERROR("mooncake", "the events of %s were not changed", c->peer);
    c->events = events;
}

static void conn_close(struct mc_edge *st, struct conn *c, const char *why) {
    CR_DEBUG("mooncake", "closing %s: %s", c->peer, why);
    cr_edge_unwatch(&st->edge, c->fd);
    close(c->fd);
    st->conns[c->slot] = NULL;
    st->generation[c->slot]++;
    st->free_slots[st->free_count++] = c->slot;
    st->open--;
    c->fd = -1;
    free(c->in);
    free(c->out.buf);
    c->in = NULL;
    c->out = (struct cr_sp_writer){0};
    if (!c->dirty) free(c);
}

static bool conn_flush(struct mc_edge *st, struct conn *c) {
    while (c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.buf + c->out_off, c->out.len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        conn_close(st, c, n < 0 ? strerror(errno) : "send returned 0");
        return false;
    }
    if (c->out_off == c->out.len) c->out_off = c->out.len = 0;
    if (c->out.len - c->out_off > MC_OUT_MAX) {
        conn_close(st, c, "its unread replies passed 64 MiB");
        return false;
    }
    set_events(st, c);
    return true;
}

static void mark_dirty(struct mc_edge *st, struct conn *c) {
    if (c->dirty) return;
    c->dirty = true;
    c->next_dirty = st->dirty;
    st->dirty = c;
}

/* Starts a reply: its header, length patched by reply_end. */
static size_t reply_begin(struct conn *c, uint32_t seq, uint8_t errc) {
    size_t at = c->out.len;
    uint8_t h[MC_RESP_HEADER] = {MC_MAGIC, 0, errc, 0};
    put32(h + 4, seq);
    cr_sp_put_raw(&c->out, h, sizeof(h));
    return at;
}

static void reply_end(struct mc_edge *st, struct conn *c, size_t at, bool ok) {
    if (!ok || c->out.nomem) {
        /* Out of memory: the reply is dropped, the client times out. */
        c->out.len = at;
        c->out.nomem = false;
        st->edge.intake.send_dropped++;
        return;
    }
    put32(c->out.buf + at + 8, (uint32_t)(c->out.len - at - MC_RESP_HEADER));
    st->edge.intake.replies++;
    mark_dirty(st, c);
}

static void reply_rpc_error(struct mc_edge *st, struct conn *c, uint32_t seq, uint8_t errc,
                            const char *msg) {
    size_t at = reply_begin(c, seq, errc);
    reply_end(st, c, at, cr_mc_error_body(msg, &c->out));
}

/* ------------------------------------------------------------------------ */
/* Requests */

static void tag_write(struct cr_master_call *call, const struct tag *t) {
    assert(sizeof(*t) <= CR_MASTER_IDENTITY_MAX);
    memcpy(call->identity, t, sizeof(*t));
    call->identity_len = sizeof(*t);
}

/* Submits one crescent call; answers it now when the intake refuses it. */
static void submit(struct mc_edge *st, struct conn *c, const struct cr_mc_fn *fn,
                   const struct tag *t, uint16_t method, const uint8_t *body, size_t len);

/* Calls of Mooncake's client this endpoint refuses (UNAVAILABLE_IN_CURRENT_MODE)
 * whose requests and failures Mooncake's master counts in its metrics
 * (master_copy_start_requests_total, ...): each one received here is a
 * request and a failure of that family (src/http/mooncake_metrics.c). */
static const struct {
    const char *call, *stat;
} refused_calls[] = {
    {"CopyStart", "refused_copy_start_total"},
    {"CopyEnd", "refused_copy_end_total"},
    {"CopyRevoke", "refused_copy_revoke_total"},
    {"MoveStart", "refused_move_start_total"},
    {"MoveEnd", "refused_move_end_total"},
    {"MoveRevoke", "refused_move_revoke_total"},
    {"EvictDiskReplica", "refused_evict_disk_replica_total"},
    {"CreateCopyTask", "refused_create_copy_task_total"},
    {"CreateMoveTask", "refused_create_move_task_total"},
    {"QueryTask", "refused_query_task_total"},
    {"MarkTaskToComplete", "refused_mark_task_to_complete_total"},
};
_Static_assert(sizeof(refused_calls) / sizeof(refused_calls[0]) ==
                   sizeof(((struct mc_edge *)0)->refused_named) / sizeof(uint64_t),
               "one counter per refused call counted");

static void count_refused(struct mc_edge *st, const char *call) {
    for (size_t i = 0; call != NULL && i < sizeof(refused_calls) / sizeof(refused_calls[0]); i++)
        if (strcmp(refused_calls[i].call, call) == 0) st->refused_named[i]++;
}

static void handle_frame(struct mc_edge *st, struct conn *c, const uint8_t *h,
                         const uint8_t *body, size_t len) {
    st->taken++;
    uint32_t seq = get32(h + 4), id = get32(h + 8);
    const char *other = NULL;
    const struct cr_mc_fn *fn = cr_mc_fn_find(id, &other);
    char msg[256];
    if (fn == NULL) {
        st->unsupported++;
        st->edge.intake.unknown_method++;
        count_refused(st, other);
        snprintf(msg, sizeof(msg), "crescentd does not serve Mooncake's %s (function id 0x%08x)",
                 other != NULL ? other : "unknown call", id);
        size_t at = reply_begin(c, seq, 0);
        bool typed = cr_mc_unavailable(id, &c->out);
        if (cr_log_ratelimit(&st->last_log_ns, now_ns(st), 10ull * 1000000000u))
            CR_WARN("mooncake", "%s: %s asked for it; answered %s", msg, c->peer,
                    typed ? "UNAVAILABLE_IN_CURRENT_MODE (-1011)" : "function_not_registered");
        if (typed || c->out.nomem) return reply_end(st, c, at, typed);
        c->out.len = at; /* no typed answer: coro_rpc's error instead */
        return reply_rpc_error(st, c, seq, CR_CORO_ERRC_FUNCTION_NOT_REGISTERED, msg);
    }
    struct cr_mc_request req;
    int rc = cr_mc_decode(fn, body, len, &st->state, &req, msg, sizeof(msg));
    if (rc != CR_OK) {
        st->bad_args++;
        st->edge.intake.decode_errors++;
        if (cr_log_ratelimit(&st->last_log_ns, now_ns(st), 10ull * 1000000000u))
            CR_WARN("mooncake", "%s (from %s)", msg, c->peer);
        return reply_rpc_error(st, c, seq, CR_CORO_ERRC_INVALID_ARGUMENTS, msg);
    }
    if (req.method == 0) {
        size_t at = reply_begin(c, seq, 0);
        reply_end(st, c, at, cr_mc_answer_local(fn, &c->out));
        cr_mc_request_free(&req);
        return;
    }
    struct tag t = {c->slot, st->generation[c->slot], seq, cr_mc_fn_index(fn), req.entries,
                    req.client, req.has_client, NULL};
    if (req.more_count > 0) {
        t.group = calloc(1, sizeof(*t.group));
        if (t.group == NULL) {
            size_t at = reply_begin(c, seq, 0);
            reply_end(st, c, at, cr_mc_answer_error(fn, CR_MC_INTERNAL_ERROR, 0, &c->out));
            cr_mc_request_free(&req);
            return;
        }
        t.group->remaining = (uint32_t)req.more_count + 1;
    }
    submit(st, c, fn, &t, req.method, req.body, req.body_len);
    for (size_t i = 0; i < req.more_count; i++)
        submit(st, c, fn, &t, req.method, req.more[i], req.more_len[i]);
    cr_mc_request_free(&req);
}

/* Takes every whole frame.  False when the stream is broken (closed). */
static bool take_frames(struct mc_edge *st, struct conn *c) {
    size_t pos = 0;
    while (c->in_flight < MC_QUEUE_MAX && c->in_len - pos >= MC_REQ_HEADER) {
        const uint8_t *h = c->in + pos;
        uint32_t len = get32(h + 12), attach = get32(h + 16);
        if (h[0] != MC_MAGIC || h[1] != 0 || h[2] != 0 || len > MC_BODY_MAX || attach != 0) {
            st->closed_malformed++;
            st->edge.intake.malformed++;
            CR_WARN("mooncake", "closing %s: not a coro_rpc request header (magic %u, version "
                    "%u, serialization %u, body %u bytes, attachment %u bytes)",
                    c->peer, h[0], h[1], h[2], len, attach);
            conn_close(st, c, "malformed header");
            return false;
        }
        if (c->in_len - pos < MC_REQ_HEADER + (size_t)len) break;
        handle_frame(st, c, h, h + MC_REQ_HEADER, len);
        if (c->fd < 0) return false;
        pos += MC_REQ_HEADER + (size_t)len;
    }
    c->in_len -= pos;
    if (pos > 0 && c->in_len > 0) memmove(c->in, c->in + pos, c->in_len);
    return true;
}

static void conn_read(struct mc_edge *st, struct conn *c) {
    for (int rounds = 0; rounds < 4 && c->in_flight < MC_QUEUE_MAX; rounds++) {
        size_t want = c->in_len + MC_READ_CHUNK;
        if (c->in_len >= MC_REQ_HEADER) { /* room for the whole frame being read */
            size_t frame = MC_REQ_HEADER + (size_t)get32(c->in + 12);
            if (frame > want && frame <= MC_REQ_HEADER + MC_BODY_MAX) want = frame;
        }
        if (want > c->in_cap) {
            uint8_t *grown = realloc(c->in, want);
            if (grown == NULL) return conn_close(st, c, "out of memory for its read buffer");
            c->in = grown;
            c->in_cap = want;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) return conn_close(st, c, n == 0 ? "the peer closed it" : strerror(errno));
        bool drained = (size_t)n < c->in_cap - c->in_len;
        c->in_len += (size_t)n;
        if (!take_frames(st, c)) return;
        if (drained) break;
    }
    set_events(st, c);
}

/* A crescent answer (status + packed response) for call `t`: queued as
 * Mooncake's result, or folded into its group. */
static void answer(struct mc_edge *st, const struct tag *t, int32_t status, const uint8_t *body,
                   size_t len) {
    const struct cr_mc_fn *fn = cr_mc_fn_at(t->fn);
    assert(fn != NULL);
    struct conn *c = t->slot < MC_CONNS_MAX && st->generation[t->slot] == t->gen
                         ? st->conns[t->slot] : NULL;
    if (t->group != NULL) {
        /* Each part's verdict, through the same translation, kept if bad. */
        struct cr_sp_writer w = {0};
        if (cr_mc_answer(fn, status, body, len, 0, t->has_client ? &t->client : NULL,
                         &st->state, &w)) {
            size_t head = 4 + 1 + 3 + 1; /* hash, metainfo, literal 87 fa 01, NUL */
            if (w.len > head && w.buf[head] == 0 && t->group->code == 0)
                t->group->code = (int32_t)get32(w.buf + head + 1);
        }
        free(w.buf);
        if (--t->group->remaining > 0) return;
    }
    if (c == NULL) {
        st->edge.intake.send_dropped++; /* its connection closed meanwhile */
    } else {
        size_t at = reply_begin(c, t->seq, 0);
        bool ok = t->group != NULL
                      ? (t->group->code != 0
                             ? cr_mc_answer_error(fn, t->group->code, 0, &c->out)
                             : cr_mc_answer(fn, status, body, len, 0, NULL, &st->state, &c->out))
                      : cr_mc_answer(fn, status, body, len, t->entries,
                                     t->has_client ? &t->client : NULL, &st->state, &c->out);
        reply_end(st, c, at, ok);
    }
    free(t->group);
}

static void submit(struct mc_edge *st, struct conn *c, const struct cr_mc_fn *fn,
                   const struct tag *t, uint16_t method, const uint8_t *body, size_t len) {
    (void)fn;
    struct cr_master_call *call = calloc(1, sizeof(*call));
    if (call == NULL) return answer(st, t, CR_ERR_NOMEM, NULL, 0);
    call->one_frame = true;
    call->method = method;
    call->request_id = t->seq;
    call->received_ns = now_ns(st);
    tag_write(call, t);
    struct cr_rpc_refusal no;
    c->in_flight++; /* first: a call segments runs inline comes back at once */
    if (cr_edge_submit(&st->edge, call, body, len, &no)) return;
    c->in_flight--;
    answer(st, t, no.status, no.body, no.len);
    cr_rpc_refusal_free(&no);
    cr_master_call_free(call);
}

/* ------------------------------------------------------------------------ */
/* Edge hooks (rpc/edge.h), on the segments thread */

static void mc_done(struct cr_edge *edge, struct cr_master_call *call) {
    struct mc_edge *st = (struct mc_edge *)edge;
    struct tag t;
    assert(call->identity_len == sizeof(t));
    memcpy(&t, call->identity, sizeof(t));
    struct conn *c = t.slot < MC_CONNS_MAX && st->generation[t.slot] == t.gen
                         ? st->conns[t.slot] : NULL;
    if (c != NULL) {
        assert(c->in_flight > 0);
        c->in_flight--;
    }
    answer(st, &t, call->status, call->reply, call->reply_len);
    cr_master_call_free(call);
}

static void mc_flush(struct cr_edge *edge) {
    struct mc_edge *st = (struct mc_edge *)edge;
    while (st->dirty != NULL) {
        struct conn *c = st->dirty;
        st->dirty = NULL;
        while (c != NULL) {
            struct conn *next = c->next_dirty;
            c->dirty = false;
            if (c->fd < 0)
                free(c);
            else if (conn_flush(st, c) && c->in_len > 0 && c->in_flight < MC_QUEUE_MAX &&
                     take_frames(st, c))
                set_events(st, c);
            c = next;
        }
    }
}

static void conn_open(struct mc_edge *st, int fd, const struct sockaddr_storage *addr) {
    char host[48] = "?", port[8] = "?";
    getnameinfo((const struct sockaddr *)addr, sizeof(*addr), host, sizeof(host), port,
                sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
    struct conn *c = st->free_count > 0 ? calloc(1, sizeof(*c)) : NULL;
    int one = 1;
    if (c == NULL || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
        if (cr_log_ratelimit(&st->last_log_ns, now_ns(st), 10ull * 1000000000u))
            CR_WARN("mooncake", "connection from %s:%s refused: %s", host, port,
                    st->free_count == 0 ? "4096 connections are open" : "out of memory");
        free(c);
        close(fd);
        return;
    }
    c->fd = fd;
    c->slot = st->free_slots[--st->free_count];
    snprintf(c->peer, sizeof(c->peer), "%s:%s", host, port);
    if (!cr_edge_watch(&st->edge, fd, EPOLLIN, c->slot)) {
        st->free_slots[st->free_count++] = c->slot;
        free(c);
        close(fd);
        return;
    }
    c->events = EPOLLIN;
    st->conns[c->slot] = c;
    st->open++;
}

static uint32_t mc_ready(struct cr_edge *edge, uint64_t tag, uint32_t events) {
    struct mc_edge *st = (struct mc_edge *)edge;
    if (tag == MC_LISTEN_TAG) {
        for (int i = 0; i < 64; i++) {
            struct sockaddr_storage addr;
            socklen_t alen = sizeof(addr);
            int fd = accept4(st->listen_fd, (struct sockaddr *)&addr, &alen,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) break;
            conn_open(st, fd, &addr);
        }
        return 0;
    }
    assert(tag < MC_CONNS_MAX);
    struct conn *c = st->conns[tag];
    if (c == NULL) return 0;
    if ((events & EPOLLOUT) && !conn_flush(st, c)) return 0;
    uint32_t before = st->taken;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) conn_read(st, c);
    return st->taken - before;
}

static void forget_segment(void *arg, const char *name) {
    struct mc_edge *st = arg;
    if (st->meta != NULL) st->meta_keys_removed += cr_mc_meta_forget_segment(st->meta, name);
}

/* The store expired a client: its secret and segments are dropped here (the
 * tables grew by one client per Mooncake client start), and with cleanup on
 * its segments' Transfer Engine keys leave the metadata server, as Mooncake's
 * master removes them. */
static void mc_client_gone(struct cr_edge *edge, const struct cr_uuid *client) {
    struct mc_edge *st = (struct mc_edge *)edge;
    Crescent__Master__UUID pb;
    cr_rpc_uuid_to_pb(client, &pb);
    struct cr_mc_uuid id = {pb.first, pb.second};
    uint64_t keys = st->meta_keys_removed;
    size_t segments = cr_mc_state_forget_client(&st->state, &id, forget_segment, st);
    st->clients_forgotten++;
    if (st->meta_keys_removed > keys)
        CR_INFO("mooncake", "client %016llx-%016llx missed its TTL: %llu metadata key(s) of its "
                "%zu segment(s) removed", (unsigned long long)id.first,
                (unsigned long long)id.second,
                (unsigned long long)(st->meta_keys_removed - keys), segments);
}

static void mc_wire(struct cr_edge *edge, const struct cr_subsystems *peers) {
    struct mc_edge *st = (struct mc_edge *)edge;
    if (peers->config->enable_metadata_cleanup_on_timeout) {
        st->meta = peers->metadata;
        if (st->meta == NULL)
            CR_WARN("mooncake", "--enable-metadata-cleanup-on-timeout: crescentd serves no HTTP "
                    "metadata server (--enable-http-metadata-server), so there is none to "
                    "clean; a metadata server elsewhere is not cleaned");
    }
    if (st->listen_fd >= 0 && !st->listen_added)
        st->listen_added = cr_edge_watch(edge, st->listen_fd, EPOLLIN, MC_LISTEN_TAG);
    if (st->listen_added)
        CR_INFO("mooncake", "Mooncake master RPC (coro_rpc) on %s", st->address);
    else if (st->default_busy)
        CR_WARN("mooncake", "the Mooncake master endpoint is off: its default address %s is "
                "in use; set --mooncake-rpc-address (or --rpc_port) to serve it elsewhere",
                st->address);
}

static void add_stat(struct cr_actor_stats *out, const char *name, uint64_t value) {
    if (out->extra_count >= CR_ACTOR_STATS_EXTRA_MAX) return;
    out->extra[out->extra_count].name = name;
    out->extra[out->extra_count].value = value;
    out->extra_count++;
}

static void mc_stats(const struct cr_edge *edge, struct cr_actor_stats *out) {
    const struct mc_edge *st = (const struct mc_edge *)edge;
    add_stat(out, "connections_open", st->open);
    add_stat(out, "unsupported_calls_total", st->unsupported);
    add_stat(out, "bad_arguments_total", st->bad_args);
    add_stat(out, "connections_closed_malformed_total", st->closed_malformed);
    add_stat(out, "clients_forgotten_total", st->clients_forgotten);
    add_stat(out, "metadata_keys_removed_total", st->meta_keys_removed);
    for (size_t i = 0; i < sizeof(refused_calls) / sizeof(refused_calls[0]); i++)
        add_stat(out, refused_calls[i].stat, st->refused_named[i]);
}

static void mc_destroy(struct cr_edge *edge) {
    struct mc_edge *st = (struct mc_edge *)edge;
    if (st == NULL) return;
    for (struct conn *c = st->dirty; c != NULL;) {
        struct conn *next = c->next_dirty;
        if (c->fd < 0) free(c);
        c = next;
    }
    for (uint32_t i = 0; i < MC_CONNS_MAX; i++) {
        struct conn *c = st->conns[i];
        if (c == NULL) continue;
        close(c->fd);
        free(c->in);
        free(c->out.buf);
        free(c);
    }
    if (st->listen_fd >= 0) close(st->listen_fd);
    cr_mc_state_free(&st->state);
    free(st);
}

static const struct cr_edge_ops mc_ops = {
    .wire = mc_wire,
    .ready = mc_ready,
    .done = mc_done,
    .flush = mc_flush,
    .stats = mc_stats,
    .destroy = mc_destroy,
    .client_gone = mc_client_gone,
};

/* Binds HOST:PORT.  The default address taken leaves the endpoint off
 * (said at wire); an address the user chose that cannot be bound fails. */
static int listen_on(struct mc_edge *st) {
    struct cr_stream_listen spec = {.address = st->address,
                                    .flag = "--mooncake-rpc-address",
                                    .what = "Mooncake master RPC",
                                    .default_address = CR_CONFIG_MOONCAKE_RPC_DEFAULT};
    return cr_stream_listen(&spec, &st->listen_fd, &st->default_busy);
}

int cr_mooncake_edge_create(const struct cr_daemon_config *config, struct cr_edge **out) {
    assert(config != NULL && out != NULL);
    struct mc_edge *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
    st->listen_fd = -1;
    st->edge.ops = &mc_ops;
    st->edge.name = "mooncake_rpc";
    for (uint32_t i = 0; i < MC_CONNS_MAX; i++) st->free_slots[i] = MC_CONNS_MAX - 1 - i;
    st->free_count = MC_CONNS_MAX;
    snprintf(st->address, sizeof(st->address), "%s", config->mooncake_rpc_address);
    char why[512];
    int rc = CR_OK;
    if (!cr_rpc_intake_init(&st->edge.intake, config->admin_token_file, why, sizeof(why))) {
        fprintf(stderr, "crescentd: %s\n", why);
        rc = CR_ERR_INVALID_PARAMS;
    } else if (st->address[0] != '\0' && strcmp(st->address, "off") != 0) {
        rc = listen_on(st);
    }
    if (rc != CR_OK) {
        mc_destroy(&st->edge);
        return rc;
    }
    *out = &st->edge;
    return CR_OK;
}

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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "actors/subsystems.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "mooncake/http_meta.h"
#include "mooncake/mc_calls.h"
#include "mooncake/mc_edge.h"
#include "rpc/rpc_codec.h"
#include "rpc/stream_conns.h"
#include "rpc/stream_listen.h"
#include "rpc/edge.h"
#include "runtime/stats_extra.h"

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
    struct cr_stream_conn s; /* first: the table's part (rpc/stream_conns.h) */
    struct cr_sp_writer out; /* replies: headers and bodies */
    size_t out_off;          /* bytes of `out` already sent */
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
    uint32_t taken;
    struct cr_stream_conns conns;
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

static struct conn *conn_of(struct cr_stream_conn *s) { return (struct conn *)s; }

/* The table frees the read buffer; this, the replies. */
static void conn_release(struct cr_stream_conn *s) {
    struct conn *c = conn_of(s);
    free(c->out.buf);
    c->out = (struct cr_sp_writer){0};
}

static void set_events(struct mc_edge *st, struct conn *c) {
    size_t queued = c->out.len - c->out_off;
    uint32_t events = 0;
    if (c->s.in_flight < MC_QUEUE_MAX && queued < MC_OUT_MAX / 16) events |= EPOLLIN;
    if (queued > 0 && !c->s.dirty) events |= EPOLLOUT;
    cr_stream_conn_set_events(&st->conns, &c->s, events);
}

static bool conn_flush(struct mc_edge *st, struct conn *c) {
    if (!cr_stream_conn_send(&st->conns, &c->s, c->out.buf, c->out.len, &c->out_off))
        return false;
    if (c->out_off == c->out.len) c->out_off = c->out.len = 0;
    if (c->out.len - c->out_off > MC_OUT_MAX) {
        cr_stream_conn_close(&st->conns, &c->s, "its unread replies passed 64 MiB");
        return false;
    }
    set_events(st, c);
    return true;
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
    cr_stream_conn_mark_dirty(&st->conns, &c->s);
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
            CR_WARN("mooncake", "%s: %s asked for it; answered %s", msg, c->s.peer,
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
            CR_WARN("mooncake", "%s (from %s)", msg, c->s.peer);
        return reply_rpc_error(st, c, seq, CR_CORO_ERRC_INVALID_ARGUMENTS, msg);
    }
    if (req.method == 0) {
        size_t at = reply_begin(c, seq, 0);
        reply_end(st, c, at, cr_mc_answer_local(fn, &c->out));
        cr_mc_request_free(&req);
        return;
    }
    struct tag t = {c->s.slot, st->conns.generation[c->s.slot], seq, cr_mc_fn_index(fn),
                    req.entries, req.client, req.has_client, NULL};
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
    struct cr_stream_conn *s = &c->s;
    size_t pos = 0;
    while (s->in_flight < MC_QUEUE_MAX && s->in_len - pos >= MC_REQ_HEADER) {
        const uint8_t *h = s->in + pos;
        uint32_t len = get32(h + 12), attach = get32(h + 16);
        if (h[0] != MC_MAGIC || h[1] != 0 || h[2] != 0 || len > MC_BODY_MAX || attach != 0) {
            st->closed_malformed++;
            st->edge.intake.malformed++;
            CR_WARN("mooncake", "closing %s: not a coro_rpc request header (magic %u, version "
                    "%u, serialization %u, body %u bytes, attachment %u bytes)",
                    s->peer, h[0], h[1], h[2], len, attach);
            cr_stream_conn_close(&st->conns, s, "malformed header");
            return false;
        }
        if (s->in_len - pos < MC_REQ_HEADER + (size_t)len) break;
        handle_frame(st, c, h, h + MC_REQ_HEADER, len);
        if (s->fd < 0) return false;
        pos += MC_REQ_HEADER + (size_t)len;
    }
    s->in_len -= pos;
    if (pos > 0 && s->in_len > 0) memmove(s->in, s->in + pos, s->in_len);
    return true;
}

static void conn_read(struct mc_edge *st, struct conn *c) {
    struct cr_stream_conn *s = &c->s;
    for (int rounds = 0; rounds < 4 && s->in_flight < MC_QUEUE_MAX; rounds++) {
        size_t want = s->in_len + MC_READ_CHUNK;
        if (s->in_len >= MC_REQ_HEADER) { /* room for the whole frame being read */
            size_t frame = MC_REQ_HEADER + (size_t)get32(s->in + 12);
            if (frame > want && frame <= MC_REQ_HEADER + MC_BODY_MAX) want = frame;
        }
        bool drained = false;
        ssize_t n = cr_stream_conn_read(&st->conns, s, want, &drained);
        if (n < 0) return; /* closed */
        if (n == 0) break;
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
    struct cr_stream_conn *s = cr_stream_conns_find(&st->conns, t->slot, t->gen);
    struct conn *c = s != NULL ? conn_of(s) : NULL;
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
    c->s.in_flight++; /* first: a call segments runs inline comes back at once */
    if (cr_edge_submit(&st->edge, call, body, len, &no)) return;
    c->s.in_flight--;
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
    struct cr_stream_conn *s = cr_stream_conns_find(&st->conns, t.slot, t.gen);
    if (s != NULL) {
        assert(s->in_flight > 0);
        s->in_flight--;
    }
    answer(st, &t, call->status, call->reply, call->reply_len);
    cr_master_call_free(call);
}

/* A connection with new replies, at the end of the round: written, then
 * it takes the frames it read while its calls in flight were at the max. */
static void flush_one(struct cr_stream_conns *conns, struct cr_stream_conn *s) {
    struct mc_edge *st = (struct mc_edge *)conns->edge;
    struct conn *c = conn_of(s);
    if (conn_flush(st, c) && s->in_len > 0 && s->in_flight < MC_QUEUE_MAX && take_frames(st, c))
        set_events(st, c);
}

static void mc_flush(struct cr_edge *edge) {
    cr_stream_conns_flush(&((struct mc_edge *)edge)->conns, flush_one);
}

static uint32_t mc_ready(struct cr_edge *edge, uint64_t tag, uint32_t events) {
    struct mc_edge *st = (struct mc_edge *)edge;
    if (tag == MC_LISTEN_TAG) {
        cr_stream_conns_accept(&st->conns, st->listen_fd, now_ns(st));
        return 0;
    }
    assert(tag < MC_CONNS_MAX);
    struct cr_stream_conn *s = st->conns.conns[tag];
    if (s == NULL) return 0;
    if ((events & EPOLLOUT) && !conn_flush(st, conn_of(s))) return 0;
    uint32_t before = st->taken;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) conn_read(st, conn_of(s));
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

static void mc_stats(const struct cr_edge *edge, struct cr_actor_stats *out) {
    const struct mc_edge *st = (const struct mc_edge *)edge;
    cr_actor_stats_add(out, "connections_open", st->conns.open);
    cr_actor_stats_add(out, "unsupported_calls_total", st->unsupported);
    cr_actor_stats_add(out, "bad_arguments_total", st->bad_args);
    cr_actor_stats_add(out, "connections_closed_malformed_total", st->closed_malformed);
    cr_actor_stats_add(out, "clients_forgotten_total", st->clients_forgotten);
    cr_actor_stats_add(out, "metadata_keys_removed_total", st->meta_keys_removed);
    for (size_t i = 0; i < sizeof(refused_calls) / sizeof(refused_calls[0]); i++)
        cr_actor_stats_add(out, refused_calls[i].stat, st->refused_named[i]);
}

static void mc_destroy(struct cr_edge *edge) {
    struct mc_edge *st = (struct mc_edge *)edge;
    if (st == NULL) return;
    cr_stream_conns_free(&st->conns);
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
    snprintf(st->address, sizeof(st->address), "%s", config->mooncake_rpc_address);
    st->conns = (struct cr_stream_conns){.edge = &st->edge,
                                         .log_tag = "mooncake",
                                         .address = st->address,
                                         .full_hint = "",
                                         .conn_size = sizeof(struct conn),
                                         .release = conn_release};
    char why[512];
    int rc = cr_stream_conns_init(&st->conns, MC_CONNS_MAX);
    if (rc != CR_OK) {
        fprintf(stderr, "crescentd: out of memory for %u Mooncake RPC connections\n",
                MC_CONNS_MAX);
    } else if (!cr_rpc_intake_init(&st->edge.intake, config->admin_token_file, why,
                                   sizeof(why))) {
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

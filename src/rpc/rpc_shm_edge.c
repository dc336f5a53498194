/* The same-host shared-memory endpoint as an edge of segments (edge.h):
 * the transport of rpc_shm.c served on the segments thread.  A request
 * frame becomes a call handed to cr_edge_submit (the same intake as every
 * endpoint: same refusals, admin token, client secrets); a call segments
 * owns runs inline and its reply is in the client's reply ring at the end
 * of the same loop round.  segments polls the rings without a syscall
 * (edge op `poll`, from the runtime's spin_poll hook) while traffic pays for
 * the spin, and arms them before it blocks in epoll (edge op `arm`).
 *
 * A call carries its client as the transport's 64-bit id (slot and
 * generation) in call->identity: a reply for a client gone meanwhile finds
 * another generation and is dropped (send_dropped_total). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "rpc/edge.h"
#include "rpc/rpc_codec.h"
#include "rpc/rpc_shm.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/rpc_frame.h"
#include "runtime/stats_extra.h"

#define SHM_SERVER_TAG 0u

struct rpc_shm_edge {
    struct cr_edge edge; /* first: the edge is the state */
    struct cr_rpc_shm_server *srv; /* NULL: off */
    char path[CR_CONFIG_ADDRESS_MAX + 32]; /* a name too long for sun_path is refused at open */
    bool default_busy;
    bool watched;
};

static bool on_frame(void *ctx, uint64_t client, const uint8_t *payload, size_t len) {
    struct rpc_shm_edge *st = ctx;
    const uint8_t *data[3] = {payload, NULL, NULL};
    const size_t size[3] = {len, 0, 0};
    struct cr_rpc_envelope env;
    bool ok = cr_rpc_read_envelope(1, data, size, &env);
    assert(ok); /* the frame is at least the header (cr_rpc_stream_next) */
    (void)ok;
    struct cr_master_call *call = calloc(1, sizeof(*call));
    if (call == NULL) {
        static const char oom[] = "out of memory";
        cr_rpc_shm_server_reply(st->srv, client, env.request_id, CR_ERR_NOMEM,
                                (const uint8_t *)oom, sizeof(oom) - 1, false);
        return false;
    }
    call->one_frame = true;
    call->method = env.method;
    call->request_id = env.request_id;
    call->received_ns = cr_edge_now_ns(&st->edge);
    call->identity_len = 8;
    cr_rpc_put_u64(call->identity, client);
    struct cr_rpc_refusal no;
    if (cr_edge_submit(&st->edge, call, env.body, env.body_len, &no)) return true;
    cr_rpc_shm_server_reply(st->srv, client, call->request_id, no.status, no.body, no.len, false);
    st->edge.intake.replies++;
    cr_rpc_refusal_free(&no);
    cr_master_call_free(call);
    return false;
}

/* ------------------------------------------------------------------------ */
/* Edge hooks (edge.h), on the segments thread */

static uint32_t shm_ready(struct cr_edge *edge, uint64_t tag, uint32_t events) {
    (void)tag, (void)events;
    return cr_rpc_shm_server_serve(((struct rpc_shm_edge *)edge)->srv);
}

static int32_t shm_poll(struct cr_edge *edge) {
    struct rpc_shm_edge *st = (struct rpc_shm_edge *)edge;
    if (st->srv == NULL || !cr_rpc_shm_server_has_clients(st->srv)) return -1;
    return (int32_t)cr_rpc_shm_server_poll(st->srv);
}

static bool shm_arm(struct cr_edge *edge) {
    struct rpc_shm_edge *st = (struct rpc_shm_edge *)edge;
    return st->srv == NULL || cr_rpc_shm_server_arm(st->srv);
}

static void shm_disarm(struct cr_edge *edge) {
    struct rpc_shm_edge *st = (struct rpc_shm_edge *)edge;
    if (st->srv != NULL) cr_rpc_shm_server_disarm(st->srv);
}

static void shm_done(struct cr_edge *edge, struct cr_master_call *call) {
    struct rpc_shm_edge *st = (struct rpc_shm_edge *)edge;
    assert(call->identity_len == 8);
    if (cr_rpc_shm_server_reply(st->srv, cr_rpc_get_u64(call->identity), call->request_id,
                                call->status, call->reply, call->reply_len, true))
        st->edge.intake.replies++;
    else
        st->edge.intake.send_dropped++; /* its client left meanwhile */
    cr_master_call_free(call);
}

static void shm_flush(struct cr_edge *edge) {
    struct rpc_shm_edge *st = (struct rpc_shm_edge *)edge;
    if (st->srv != NULL) cr_rpc_shm_server_flush(st->srv);
}

static void shm_wire(struct cr_edge *edge, const struct cr_subsystems *peers) {
    (void)peers;
    struct rpc_shm_edge *st = (struct rpc_shm_edge *)edge;
    /* Until now, clients waited in the listen backlog. */
    if (st->srv != NULL && !st->watched)
        st->watched = cr_edge_watch(edge, cr_rpc_shm_server_fd(st->srv), EPOLLIN, SHM_SERVER_TAG);
    if (st->watched)
        CR_INFO("rpc_shm", "same-host shm RPC on %s (shm://%s)", st->path, st->path);
    else if (st->default_busy)
        CR_WARN("rpc_shm", "the shm RPC endpoint is off: its default name %s is taken (another "
                "crescentd?); set --rpc-shm-path to serve it elsewhere", st->path);
}

static void shm_stats(const struct cr_edge *edge, struct cr_actor_stats *out) {
    const struct rpc_shm_edge *st = (const struct rpc_shm_edge *)edge;
    struct cr_rpc_shm_stats s = {0};
    if (st->srv != NULL) cr_rpc_shm_server_stats(st->srv, &s);
    cr_actor_stats_add(out, "clients_open", s.clients_open);
    cr_actor_stats_add(out, "clients_accepted_total", s.accepted);
    cr_actor_stats_add(out, "clients_refused_full_total", s.refused_full);
    cr_actor_stats_add(out, "clients_refused_peer_total", s.refused_peer);
    cr_actor_stats_add(out, "clients_closed_malformed_total", s.closed_malformed);
    cr_actor_stats_add(out, "clients_closed_slow_total", s.closed_slow);
    cr_actor_stats_add(out, "clients_hello_timeout_total", s.hello_timeouts);
    cr_actor_stats_add(out, "wakes_sent_total", s.wakes_sent);
}

static void shm_destroy(struct cr_edge *edge) {
    struct rpc_shm_edge *st = (struct rpc_shm_edge *)edge;
    cr_rpc_shm_server_close(st->srv);
    free(st);
}

static const struct cr_edge_ops rpc_shm_ops = {
    .wire = shm_wire,
    .ready = shm_ready,
    .done = shm_done,
    .flush = shm_flush,
    .stats = shm_stats,
    .destroy = shm_destroy,
    .poll = shm_poll,
    .arm = shm_arm,
    .disarm = shm_disarm,
};

/* The default name: "@crescent-rpc/PORT", PORT that of --rpc-address (each
 * crescentd on a host has its own), or its whole text when it has none. */
static void default_path(const struct cr_daemon_config *config, char *out, size_t size) {
    const char *colon = strrchr(config->rpc_address, ':');
    const char *port = colon != NULL && colon[1] != '\0' && colon[1] != '/' ? colon + 1
                                                                            : config->rpc_address;
    snprintf(out, size, "@crescent-rpc/%s", port);
}

int cr_rpc_shm_edge_create(const struct cr_daemon_config *config, struct cr_edge **out) {
    struct rpc_shm_edge *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
    st->edge.ops = &rpc_shm_ops;
    st->edge.name = "rpc_shm";
    bool derived = config->rpc_shm_path[0] == '\0' || strcmp(config->rpc_shm_path, "auto") == 0;
    if (derived)
        default_path(config, st->path, sizeof(st->path));
    else
        snprintf(st->path, sizeof(st->path), "%s", config->rpc_shm_path);
    char why[512];
    int rc = CR_OK;
    if (!cr_rpc_intake_init(&st->edge.intake, config->admin_token_file, why, sizeof(why))) {
        fprintf(stderr, "crescentd: %s\n", why);
        rc = CR_ERR_INVALID_PARAMS;
    } else if (strcmp(config->rpc_shm_path, "off") != 0) {
        struct cr_rpc_shm_options o = {.path = st->path,
                                       .clients_max = config->rpc_shm_clients_max,
                                       .ring_bytes = config->rpc_shm_ring_bytes,
                                       .queue_max = config->rpc_tcp_queue_max,
                                       .hello_timeout_ms = config->rpc_shm_hello_timeout_ms,
                                       .on_frame = on_frame,
                                       .ctx = st};
        rc = cr_rpc_shm_server_open(&o, &st->srv, why, sizeof(why));
        if (rc == CR_ERR_AGAIN && derived) {
            st->default_busy = true; /* best effort, as the native endpoint's default */
            rc = CR_OK;
        } else if (rc != CR_OK) {
            fprintf(stderr, "crescentd: %s (--rpc-shm-path; 'off' turns it off)\n", why);
            if (rc == CR_ERR_AGAIN) rc = CR_ERR_IO; /* a start failure, as a busy address */
        }
    }
    if (rc != CR_OK) {
        shm_destroy(&st->edge);
        return rc;
    }
    *out = &st->edge;
    return CR_OK;
}

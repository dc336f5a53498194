/* Spawning and wiring the subsystem actors, and the skeleton they run until
 * their own work lands (see subsystems.h). */
#include "actors/subsystems.h"

#include <stdlib.h>

#include "rpc/edge.h"
#include "mooncake/mc_edge.h"

#include "core/log.h"
#include "crescent/error.h"

static const struct cr_subsystem_def *const defs[CR_SUBSYSTEM_COUNT] = {
    [CR_SUBSYSTEM_DATA] = &cr_data_def,
    [CR_SUBSYSTEM_SEGMENTS] = &cr_segments_def,   [CR_SUBSYSTEM_JOURNAL] = &cr_journal_def,
    [CR_SUBSYSTEM_LEASES] = &cr_leases_def,
    [CR_SUBSYSTEM_TASKS] = &cr_tasks_def,         [CR_SUBSYSTEM_INDEXER] = &cr_indexer_def,
    [CR_SUBSYSTEM_PUBLISHER] = &cr_publisher_def, [CR_SUBSYSTEM_REPLAY] = &cr_replay_def,
};

int cr_subsystems_spawn(struct cr_runtime *rt, const struct cr_daemon_config *config,
                        struct cr_subsystems *out) {
    out->config = config;
    for (int i = 0; i < CR_SUBSYSTEM_COUNT; i++) {
        /* A failing create hook has already said why, in one line. */
        int rc = defs[i]->create(config, &out->states[i]);
        if (rc != CR_OK) return rc;
        /* Segments' edges, the store master's RPC endpoints (edge.h), bound
         * first: ZMQ, native, shared memory, then Mooncake's coro_rpc
         * (src/mooncake). */
        int (*const edges[])(const struct cr_daemon_config *, struct cr_edge **) = {
            cr_rpc_edge_create, cr_rpc_tcp_edge_create, cr_rpc_shm_edge_create,
            cr_mooncake_edge_create};
        for (size_t e = 0; i == CR_SUBSYSTEM_SEGMENTS && e < 4 && rc == CR_OK; e++) {
            struct cr_edge *edge = NULL;
            rc = edges[e](config, &edge);
            if (rc == CR_OK) rc = cr_segments_edge_add(out->states[i], edge);
        }
        if (rc != CR_OK) return rc;
        rc = cr_runtime_spawn(rt, defs[i]->name, defs[i]->ops, out->states[i], &out->actors[i]);
        if (rc != CR_OK) {
            CR_ERROR("daemon", "cannot start actor %s: %s", defs[i]->name, cr_strerror(rc));
            return rc;
        }
    }
    /* Segments (first), which serves the RPC endpoints, is wired last: its
     * edges read requests only once wired, and by then every actor a call
     * goes on to has been sent its wiring. */
    for (int i = CR_SUBSYSTEM_COUNT - 1; i >= 0; i--) {
        struct cr_msg wire = {.type = CR_MSG_WIRE};
        wire.body.ptr[0] = out;
        int rc = cr_send(out->actors[i], &wire);
        if (rc != CR_OK) return rc;
    }
    return CR_OK;
}

int cr_subsystems_register_routes(struct cr_subsystems *subsystems, struct cr_http_front *front) {
    for (int i = 0; i < CR_SUBSYSTEM_COUNT; i++) {
        if (defs[i]->register_routes == NULL) continue;
        int rc = defs[i]->register_routes(front, subsystems);
        if (rc != CR_OK) {
            CR_ERROR("daemon", "cannot add the HTTP routes of %s: %s", defs[i]->name,
                     cr_strerror(rc));
            return rc;
        }
    }
    return CR_OK;
}

void cr_subsystems_free(struct cr_subsystems *subsystems) {
    for (int i = 0; i < CR_SUBSYSTEM_COUNT; i++) {
        if (subsystems->states[i] != NULL) defs[i]->destroy(subsystems->states[i]);
        subsystems->states[i] = NULL;
    }
}

/* ------------------------------------------------------------------------ */
/* Skeleton */

struct skeleton_state {
    uint64_t unknown_messages;
    uint64_t last_log_ns;
};

int cr_skeleton_create(const struct cr_daemon_config *config, void **state_out) {
    (void)config;
    *state_out = calloc(1, sizeof(struct skeleton_state));
    return *state_out != NULL ? CR_OK : CR_ERR_NOMEM;
}

void cr_skeleton_destroy(void *state) { free(state); }

static void skeleton_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    struct skeleton_state *st = arg;
    if (msg->type == CR_MSG_WIRE) return; /* no peers to talk to yet */
    st->unknown_messages++;
    uint64_t now = cr_runtime_now_ns(cr_actor_runtime(self));
    if (cr_log_ratelimit(&st->last_log_ns, now, 60ull * 1000000000u))
        CR_WARN(cr_actor_name(self), "message type %u from sender %u is not handled here (%llu so far)",
                msg->type, msg->sender, (unsigned long long)st->unknown_messages);
    if (msg->flags & CR_MSG_ASK) cr_reply(msg, CR_ERR_INVALID_PARAMS);
}

static void skeleton_stats(struct cr_actor *self, void *arg, struct cr_actor_stats *out) {
    (void)self;
    struct skeleton_state *st = arg;
    out->extra[out->extra_count].name = "unknown_messages_total";
    out->extra[out->extra_count].value = st->unknown_messages;
    out->extra_count++;
}

const struct cr_actor_ops cr_skeleton_ops = {
    .handle = skeleton_handle,
    .stats = skeleton_stats,
};

/* Spawning the subsystem actors, and the skeleton they run until their
 * own work lands (see subsystems.h). */
#include "actors/subsystems.h"

#include <stdlib.h>

#include "core/log.h"
#include "crescent/error.h"

static const char *const names[CR_SUBSYSTEM_COUNT] = {
    [CR_SUBSYSTEM_SEGMENTS] = "segments", [CR_SUBSYSTEM_LEASES] = "leases",
    [CR_SUBSYSTEM_TASKS] = "tasks",       [CR_SUBSYSTEM_INDEXER] = "indexer",
    [CR_SUBSYSTEM_PUBLISHER] = "publisher", [CR_SUBSYSTEM_REPLAY] = "replay",
};

struct skeleton_state {
    uint64_t unknown_messages;
    uint64_t last_log_ns;
};

const char *cr_subsystem_name(enum cr_subsystem which) {
    return which < CR_SUBSYSTEM_COUNT ? names[which] : "unknown";
}

static void skeleton_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    struct skeleton_state *st = arg;
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

static const struct cr_actor_ops skeleton_ops = {
    .handle = skeleton_handle,
    .stats = skeleton_stats,
};

int cr_subsystems_spawn(struct cr_runtime *rt, struct cr_subsystems *out) {
    for (int i = 0; i < CR_SUBSYSTEM_COUNT; i++) {
        out->states[i] = calloc(1, sizeof(struct skeleton_state));
        if (out->states[i] == NULL) return CR_ERR_NOMEM;
        int rc = cr_runtime_spawn(rt, names[i], &skeleton_ops, out->states[i], &out->actors[i]);
        if (rc != CR_OK) {
            CR_ERROR("daemon", "cannot start actor %s: %s", names[i], cr_strerror(rc));
            return rc;
        }
    }
    return CR_OK;
}

void cr_subsystems_free(struct cr_subsystems *subsystems) {
    for (int i = 0; i < CR_SUBSYSTEM_COUNT; i++) {
        free(subsystems->states[i]);
        subsystems->states[i] = NULL;
    }
}

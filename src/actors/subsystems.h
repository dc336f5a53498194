/* The six subsystem actors of crescentd, in spawn (and stop) order.
 *
 * Producers come before consumers so that stopping in spawn order lets each
 * actor's last messages reach a consumer that is still running:
 * segments → leases → tasks → indexer → publisher → replay.
 *
 * Until a subsystem's own issue gives it work, its actor runs the common
 * skeleton: the runtime answers its stats, and any other message is
 * counted as unknown, logged (rate-limited) and, if an ask, answered
 * CR_ERR_INVALID_PARAMS. */
#ifndef CRESCENT_ACTORS_SUBSYSTEMS_H
#define CRESCENT_ACTORS_SUBSYSTEMS_H

#include <stdint.h>

#include "actors/runtime.h"

enum cr_subsystem {
    CR_SUBSYSTEM_SEGMENTS,
    CR_SUBSYSTEM_LEASES,
    CR_SUBSYSTEM_TASKS,
    CR_SUBSYSTEM_INDEXER,
    CR_SUBSYSTEM_PUBLISHER,
    CR_SUBSYSTEM_REPLAY,
    CR_SUBSYSTEM_COUNT,
};

struct cr_subsystems {
    struct cr_actor *actors[CR_SUBSYSTEM_COUNT];
    void *states[CR_SUBSYSTEM_COUNT];
};

const char *cr_subsystem_name(enum cr_subsystem which);

/* Spawns all six on `rt`.  On failure nothing is left running that the
 * caller must not destroy with cr_runtime_destroy + cr_subsystems_free. */
int cr_subsystems_spawn(struct cr_runtime *rt, struct cr_subsystems *out);

/* Frees the actors' states; call after cr_runtime_destroy. */
void cr_subsystems_free(struct cr_subsystems *subsystems);

#endif

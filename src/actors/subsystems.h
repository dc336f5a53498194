/* The subsystem actors of crescentd: how each is defined, spawned and
 * wired to the others.
 *
 * Spawn (and stop) order puts producers before consumers, so that stopping in
 * spawn order lets each actor's last messages reach a consumer still running:
 * segments → journal → leases → tasks → indexer → publisher → replay → data.
 * The store master's RPC endpoints (ZMQ and native) are edges of segments
 * (edge.h), created and bound with it.
 *
 * Wiring: once all are running, the daemon sends each a CR_MSG_WIRE
 * message whose body.ptr[0] is the `struct cr_subsystems` peer table.  An
 * actor keeps that pointer and sends to peers only after it has seen WIRE
 * (the ring's release/acquire orders the table's writes before its reads);
 * nothing reaches an actor from outside before that, because the daemon
 * opens intake (HTTP, RPC) only after wiring. */
#ifndef CRESCENT_ACTORS_SUBSYSTEMS_H
#define CRESCENT_ACTORS_SUBSYSTEMS_H

#include <stdint.h>

#include "runtime/runtime.h"

struct cr_daemon_config;
struct cr_http_front;

enum cr_subsystem {
    /* The store master, serving its RPC endpoints (edge.h): intake, so spawned
     * and stopped first. */
    CR_SUBSYSTEM_SEGMENTS,
    /* The store's operation log (src/durable/journal.c): right after
     * segments, which hands it each round's records, so it stops after
     * segments and writes the last of them. */
    CR_SUBSYSTEM_JOURNAL,
    CR_SUBSYSTEM_LEASES,
    CR_SUBSYSTEM_TASKS,
    CR_SUBSYSTEM_INDEXER,
    CR_SUBSYSTEM_PUBLISHER,
    CR_SUBSYSTEM_REPLAY,
    /* The local segment's store server (data.c).  Last: its create hook binds
     * and logs the data address only once every other address is bound (a
     * busy one stays the only line crescentd prints), and it stops after
     * segments (its pings then fail quietly; nothing of the store is lost). */
    CR_SUBSYSTEM_DATA,
    CR_SUBSYSTEM_COUNT,
};

/* The name of crescentd's own local segment (data.c).  Its memory dies
 * with the process, so the operation log leaves it and its replicas out
 * (src/durable/feed.h). */
#define CR_DATA_SEGMENT_NAME "crescentd-local"

/* The peer table: filled by the daemon during spawn, read-only afterwards. */
struct cr_subsystems {
    struct cr_actor *actors[CR_SUBSYSTEM_COUNT];
    void *states[CR_SUBSYSTEM_COUNT];
    const struct cr_daemon_config *config;
    uint64_t ask_timeout_ns; /* for HTTP routes that ask an actor */
    uint64_t prefix_hash_seed; /* --prefix-hash-seed: HTTP routes hash tokens with it */
    /* Mooncake's HTTP metadata server when served (set before spawn, freed
     * after the actors stop): the Mooncake edge removes an expired
     * client's keys from it (--enable-metadata-cleanup-on-timeout). */
    struct cr_mc_meta *metadata;
};

/* What one subsystem provides.  Each lives in src/actors/<name>.c. */
struct cr_subsystem_def {
    const char *name;
    const struct cr_actor_ops *ops;
    /* Builds the actor's state from the settings (on the main thread, before
     * spawn).  On failure it prints one line naming the problem to stderr
     * ("crescentd: cannot bind …") and returns CR_ERR_IO (an address that
     * cannot be used) or CR_ERR_INVALID_PARAMS (a bad setting or file), which
     * make crescentd exit 2, or another status (exit 1). */
    int (*create)(const struct cr_daemon_config *config, void **state_out);
    /* Frees the state after the actor's thread has exited. */
    void (*destroy)(void *state);
    /* Optional: adds HTTP routes; handlers ask `peers->actors[...]`. */
    int (*register_routes)(struct cr_http_front *front, struct cr_subsystems *peers);
};

extern const struct cr_subsystem_def cr_data_def;
extern const struct cr_subsystem_def cr_segments_def;
extern const struct cr_subsystem_def cr_journal_def;
extern const struct cr_subsystem_def cr_leases_def;
extern const struct cr_subsystem_def cr_tasks_def;
extern const struct cr_subsystem_def cr_indexer_def;
extern const struct cr_subsystem_def cr_publisher_def;
extern const struct cr_subsystem_def cr_replay_def;

/* Creates the states, spawns the actors in order and wires them.  On
 * failure the caller still calls cr_runtime_destroy then cr_subsystems_free. */
int cr_subsystems_spawn(struct cr_runtime *rt, const struct cr_daemon_config *config,
                        struct cr_subsystems *out);

/* The HA fence of the segments actor's state (src/ha/gate.h); NULL when
 * --ha is off.  Lives as long as that state. */
struct cr_ha_gate *cr_segments_ha_gate(void *segments_state);

/* Lets every subsystem add its HTTP routes. */
int cr_subsystems_register_routes(struct cr_subsystems *subsystems, struct cr_http_front *front);

/* Frees the actors' states; call after cr_runtime_destroy. */
void cr_subsystems_free(struct cr_subsystems *subsystems);

/* The skeleton a subsystem runs until its own work lands: the runtime
 * answers stats; any other message is counted, logged at most once a minute
 * and, if an ask, answered CR_ERR_INVALID_PARAMS.  State: cr_skeleton_create. */
extern const struct cr_actor_ops cr_skeleton_ops;
int cr_skeleton_create(const struct cr_daemon_config *config, void **state_out);
void cr_skeleton_destroy(void *state);

#endif

/* RPC edges: sources of store-master calls served on the segments actor's
 * own thread (docs/architecture.md, "The RPC edge: threads per call").
 *
 * The thread that owns the store owns the connections, as in Redis: an edge
 * (the ZMQ endpoint, rpc.c; the native TCP endpoint, rpc_tcp.c; the
 * same-host shared-memory one, rpc_shm_edge.c) registers its file descriptors in segments' epoll set, and segments'
 * loop (its wait and poll hooks, runtime.h) calls the edge's `ready` when
 * one of them has something.  The edge reads its requests and hands each
 * to cr_edge_submit, which runs the same intake as every endpoint
 * (rpc_intake.c: method lookup, pre-scan, decode, validation, admin gate,
 * key hashing) and then:
 *   - a call segments owns runs at once, inline, and its reply is handed to
 *     the edge's `done` before cr_edge_submit returns;
 *   - a call another actor owns (QueryTask → tasks; a ping that wants tasks,
 *     FetchTasks and MarkTaskToComplete after segments' secret check; the
 *     CreateCopy/MoveTask hand-over; a regex call, which runs in slices) goes
 *     on as today and its reply reaches `done` later, in a later round.
 * `done` queues the reply; the edge writes what it queued in `flush`, called
 * once at the end of every segments loop round in which anything happened:
 * one write per connection per round, however many replies it got.
 *
 * Everything here runs on the segments thread, except create (the edge's own
 * constructor, on the main thread before spawn, where it binds so that a
 * busy address fails crescentd's start) and destroy (after the thread has
 * exited).  An edge never blocks: its sockets are non-blocking, and a slow
 * client is the edge's to bound (see rpc_tcp.c).
 *
 * Ownership: the edge allocates each cr_master_call and owns it until
 * cr_edge_submit takes it (true); `done` hands it back, and the edge frees
 * it (cr_master_call_free) after queueing its reply.  A call whose client
 * went away meanwhile still comes back through `done`: the edge drops it.
 *
 * Calls go both ways between an edge (src/rpc) and segments
 * (src/actors/segments.c), by design; each step has one owner:
 *   - segments owns the loop, the store and the round: it calls the edge's
 *     ops below (wire, ready, done, flush) and implements cr_edge_watch,
 *     cr_edge_submit and the other cr_edge_* calls the edge makes;
 *   - the edge owns its sockets and framing: bytes in, whole frames out,
 *     replies queued and written;
 *   - a request then travels down src/rpc and never back up: frame (the
 *     edge) -> envelope, method lookup, decode and validate (rpc_intake.c,
 *     with rpc_codec.c and rpc_batch.c) -> the method (rpc_methods.c on the
 *     store, or a message to the actor that owns it) -> the reply packed
 *     (rpc_fast_pack.c, else rpc_codec.c) -> `done` -> the edge writes it. */
#ifndef CRESCENT_ACTORS_EDGE_H
#define CRESCENT_ACTORS_EDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/rpc_intake.h"
#include "runtime/runtime.h"
#include "msgs/master_msgs.h"

/* Edges one segments actor serves: crescentd has four (ZMQ, native, shm,
 * Mooncake's); the rest is room for the next, and adding one past it fails
 * crescentd's start saying so (cr_segments_edge_add).  Calls carry the
 * index + 1 in a byte. */
#define CR_EDGES_MAX 16u
/* An edge's tags for its fds: the top byte is segments' (which edge). */
#define CR_EDGE_TAG_MAX ((1ull << 56) - 1)

struct cr_edge;
struct cr_edge_host; /* the segments actor's side (segments.c) */
struct cr_subsystems;

struct cr_edge_ops {
    /* The peers are wired (segments got CR_MSG_WIRE): the edge starts
     * listening (cr_edge_watch) and says on which address.  Until then its
     * clients wait in the listen backlog. */
    void (*wire)(struct cr_edge *edge, const struct cr_subsystems *peers);
    /* An fd the edge watches is ready (epoll `events`, level-triggered);
     * serve it without blocking.  Returns the requests it took (work). */
    uint32_t (*ready)(struct cr_edge *edge, uint64_t tag, uint32_t events);
    /* A finished call of this edge: queue its reply (or drop it if its
     * client is gone), then free the call. */
    void (*done)(struct cr_edge *edge, struct cr_master_call *call);
    /* End of a round: write what was queued. */
    void (*flush)(struct cr_edge *edge);
    /* Optional: the edge's counters beside its intake's (added by segments). */
    void (*stats)(const struct cr_edge *edge, struct cr_actor_stats *out);
    /* Frees the edge after the segments thread has exited (sockets, buffers,
     * calls it still holds). */
    void (*destroy)(struct cr_edge *edge);
    /* Optional, for input that needs no syscall to see (the shm edge's
     * rings, rpc_shm_edge.c): take what is there, return the requests taken,
     * or -1 when there is nothing to poll (no client).  segments calls it
     * every loop round and spins on it while it pays (runtime.h spin_poll). */
    int32_t (*poll)(struct cr_edge *edge);
    /* Optional, with poll: segments is about to block in epoll; make the
     * producers wake one of the edge's fds.  False when input came meanwhile
     * (segments then does not block).  disarm follows the wait. */
    bool (*arm)(struct cr_edge *edge);
    void (*disarm)(struct cr_edge *edge);
    /* Optional: the store forgot `client` after its TTL (its segments are
     * unmounted): drop what the edge keeps for it. */
    void (*client_gone)(struct cr_edge *edge, const struct cr_uuid *client);
};

/* The common head of every edge (an edge embeds it first). */
struct cr_edge {
    const struct cr_edge_ops *ops;
    const char *name;             /* its stats view, e.g. "rpc_tcp": crescent_rpc_tcp_* */
    struct cr_rpc_intake intake;  /* its own counters, admin token, peers */
    struct cr_edge_host *host;    /* set by cr_segments_edge_add */
    uint8_t index;                /* in the host's table; calls carry index + 1 */
};

/* Segments' side, for edges. */

/* Adds fd to segments' epoll set with `events`; `tag` (≤ CR_EDGE_TAG_MAX)
 * comes back to ready.  Returns false (and logs, naming the edge) on
 * failure. */
bool cr_edge_watch(struct cr_edge *edge, int fd, uint32_t events, uint64_t tag);
/* Changes the events (and tag) of a watched fd. */
bool cr_edge_rewatch(struct cr_edge *edge, int fd, uint32_t events, uint64_t tag);
/* Removes a watched fd (before closing it). */
void cr_edge_unwatch(struct cr_edge *edge, int fd);

/* Calls ready(tag, EPOLLIN) again in the next round whether or not epoll
 * reports the fd: for an fd whose signal may already be spent (ZMQ_FD,
 * which any zmq call can consume) or input left for later (a read batch's
 * end).  One per edge at a time; a later call replaces the tag. */
void cr_edge_again(struct cr_edge *edge, uint64_t tag);

/* Hands over a request whose envelope the edge read (call->method,
 * request_id, received_ns, identity set; body/len the protobuf body): see
 * the top of this file.  True: taken; its reply comes to `done` (inline
 * calls: before this returns).  False with `out` filled: refused at intake,
 * to be answered now; the call is still the edge's. */
bool cr_edge_submit(struct cr_edge *edge, struct cr_master_call *call, const uint8_t *body,
                    size_t len, struct cr_rpc_refusal *out);

/* The runtime's clock, read once per segments loop round. */
uint64_t cr_edge_now_ns(const struct cr_edge *edge);

/* Attaches an edge to a segments actor's state (from cr_segments_def.create),
 * on the main thread before spawn.  The segments state owns the edge from
 * here on, even on failure (CR_ERR_NOMEM: CR_EDGES_MAX reached, logged
 * naming the edge). */
int cr_segments_edge_add(void *segments_state, struct cr_edge *edge);

/* The native TCP endpoint (rpc_tcp.c, --rpc-tcp-address).  Binds now (a
 * busy address the user chose fails: CR_ERR_IO, said on stderr).  *out is
 * set whenever the return is CR_OK; off (address '' or CURVE without
 * --rpc-tcp-with-curve), it serves nothing and says why at wire. */
struct cr_daemon_config;
int cr_rpc_tcp_edge_create(const struct cr_daemon_config *config, struct cr_edge **out);

/* The ZMQ endpoint (rpc.c, --rpc-address): binds the ROUTER now (with CURVE
 * when configured); a bad or busy address fails (CR_ERR_IO, said on
 * stderr). */
int cr_rpc_edge_create(const struct cr_daemon_config *config, struct cr_edge **out);

/* The same-host shared-memory endpoint (rpc_shm_edge.c, --rpc-shm-path).
 * Binds now (a name the user chose that is taken fails: CR_ERR_IO, said on
 * stderr; the default name taken leaves it off, said at wire); *out is set
 * whenever the return is CR_OK. */
int cr_rpc_shm_edge_create(const struct cr_daemon_config *config, struct cr_edge **out);

#endif

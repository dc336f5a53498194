/* The same-host shared-memory endpoint's server state, shared by the ring
 * side (rpc_shm.c: clients' rings, the owner's calls) and the set-up side
 * (rpc_shm_setup.c: the Unix socket, hellos, welcomes and refusals).
 * Single-threaded: every function runs on the owner's thread. */
#ifndef CRESCENT_RPC_SHM_INTERNAL_H
#define CRESCENT_RPC_SHM_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "msgs/rpc_stream.h"
#include "rpc/rpc_shm.h"


#define SHM_EVENTS 64u
#define SHM_READ_BUDGET (256u << 10) /* bytes taken from one ring per poll: fairness */
#define SHM_OUT_MAX (64u << 20)      /* unwritten reply bytes that close a client */
#define SHM_IN_MIN (4u << 10)
#define SHM_ACCEPT_BATCH 64u
/* epoll tags: the kind in the high half, the client's slot in the low. */
#define TAG_LISTEN 1ull
#define TAG_SOCK 2ull
#define TAG_WAKE 3ull
#define TAG_REFUSE 4ull
#define REFUSING_MAX 8u /* refusals waiting for their client's hello */
#define TAG(kind, slot) ((kind) << 32 | (uint64_t)(slot))

struct client {
    int sock;      /* the set-up socket: its EOF ends the client */
    int to_server; /* eventfd the client writes to wake us */
    int to_client; /* eventfd we write to wake it */
    bool ready;    /* the hello was answered with the rings */
    void *map;
    struct cr_rpc_shm_ring req, rep;
    uint8_t *in; /* bytes copied out of the request ring, not yet a whole frame */
    size_t in_len, in_cap;
    struct cr_rpc_stream_out out; /* reply bytes not yet in the reply ring */
    uint32_t in_flight;
    uint32_t slot;
    bool dirty;
    struct client *next_dirty;
    int pid;
};

struct cr_rpc_shm_server {
    int listen_fd, epoll_fd;
    char path[CR_RPC_SHM_PATH_MAX + 1];
    bool file; /* a path in the file system: unlinked at close */
    uint32_t ring_bytes, queue_max, clients_max;
    cr_rpc_shm_frame_fn on_frame;
    void *ctx;
    struct client **clients; /* by slot */
    uint32_t *generation;    /* by slot; bumped at every close */
    uint32_t *free_slots, free_count;
    uint32_t *ready, ready_count; /* slots of ready clients: what poll scans */
    struct client *dirty;
    struct cr_rpc_shm_stats stats;
    uint64_t last_log_ns;
    /* A refused client is answered after its hello arrived: a Unix socket
     * closed before the peer's hello makes the peer's send fail (EPIPE),
     * and one closed with the hello unread resets the peer; either way it
     * would not read why it was refused. */
    struct {
        int fd; /* -1: free */
        int32_t status;
        char text[160];
    } refusing[REFUSING_MAX];
};

static inline uint64_t client_id(const struct cr_rpc_shm_server *srv, const struct client *c) {
    return (uint64_t)srv->generation[c->slot] << 32 | c->slot;
}

static inline void wake(int fd) {
    uint64_t one = 1;
    if (write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        CR_ERROR("rpc_shm", "eventfd write failed: %s", strerror(errno));
}


/* rpc_shm.c: ends a client (its slot, fds, map and buffers); the set-up
 * side calls it for a hello that fails. */
void cr_rpc_shm_client_close(struct cr_rpc_shm_server *srv, struct client *c, const char *why);

/* rpc_shm_setup.c: the set-up socket's events, which the owner's serve
 * dispatches by epoll tag.  Each may close the client it is given. */
void cr_rpc_shm_accept_some(struct cr_rpc_shm_server *srv, uint32_t *work);
void cr_rpc_shm_refusal_ready(struct cr_rpc_shm_server *srv, uint32_t i);
void cr_rpc_shm_client_sock_event(struct cr_rpc_shm_server *srv, struct client *c);

#endif

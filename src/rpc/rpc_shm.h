/* The same-host shared-memory endpoint of the store master, server side
 * (--rpc-shm-path; the layout and rings are msgs/rpc_shm.h, users' doc
 * docs/rpc-shm.md).
 *
 * A transport only: it accepts clients on its Unix socket, gives each a
 * memfd with a request and a reply ring and two eventfds, reads whole
 * request frames out of the rings and hands each to the owner's frame
 * callback, and writes the replies the owner queues back into the rings.
 * What a frame means (intake, execution) is the owner's business, so the
 * owner can be any actor's loop; it calls, on its own thread only:
 *
 *   cr_rpc_shm_server_fd     one fd to wait on (epoll over the socket, the
 *                            clients' sockets and their wake eventfds)
 *   cr_rpc_shm_server_serve  when that fd is readable: accept, hand-shake,
 *                            close clients that left, then poll
 *   cr_rpc_shm_server_poll   no syscall: take the frames the rings hold;
 *                            cheap enough for a spin loop
 *   cr_rpc_shm_server_reply  queue a reply for a client
 *   cr_rpc_shm_server_flush  write queued replies into the rings, wake
 *                            clients that sleep (end of the owner's round)
 *   cr_rpc_shm_server_arm    before the owner sleeps in poll/epoll: tell the
 *                            clients to write the wake eventfd; false when
 *                            a request came meanwhile (do not sleep)
 *
 * Everything a client writes into the shared memory is untrusted: indices
 * are checked against the ring (cr_rpc_shm_ring_readable/room), bytes are
 * copied out before they are parsed (msgs/rpc_stream.h's bounds), and a
 * client that breaks the protocol is closed; no other client is affected.
 * A client's socket closing frees its rings; replies for calls it had in
 * flight are dropped (counted).  Bounds: --rpc-shm-clients-max clients (one
 * more is answered with an error naming the flag), a hello within
 * --rpc-shm-hello-timeout-ms of connecting (else closed: a silent connection
 * held a client slot for good), queue_max calls in flight per client (its
 * ring is not read past it), unwritten reply bytes checked at every reply
 * (4 MiB: its ring is not read; a reply past 64 MiB closes the client).
 * The memfd handed out is sealed against resizing: a client that could
 * shrink it would make crescentd's next touch of its rings a SIGBUS. */
#ifndef CRESCENT_ACTORS_RPC_SHM_H
#define CRESCENT_ACTORS_RPC_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msgs/rpc_shm.h"

struct cr_rpc_shm_server;

/* One request frame of a client: `payload` is the one-frame envelope
 * ([method u16][id u64][body], at least CR_RPC_REQUEST_HEADER_BYTES long),
 * valid during the call; `client` names the client for the reply.  Return
 * true when the call went in flight (reply with done = true, later or
 * inside the callback), false when it was answered inside the callback
 * with done = false. */
typedef bool (*cr_rpc_shm_frame_fn)(void *ctx, uint64_t client, const uint8_t *payload,
                                    size_t len);

struct cr_rpc_shm_options {
    const char *path;      /* "@name" (abstract) or a file path */
    uint32_t clients_max;  /* --rpc-shm-clients-max */
    uint32_t ring_bytes;   /* per ring; a power of two in CR_RPC_SHM_RING_MIN..MAX */
    uint32_t queue_max;    /* calls in flight per client */
    uint32_t hello_timeout_ms; /* --rpc-shm-hello-timeout-ms; 0: 2000 */
    cr_rpc_shm_frame_fn on_frame;
    void *ctx;
};

struct cr_rpc_shm_stats {
    uint64_t clients_open, accepted, refused_full, refused_peer, closed_malformed, closed_slow;
    uint64_t frames, replies, replies_dropped, wakes_sent, hello_timeouts;
};

/* Binds and listens.  CR_OK, or CR_ERR_INVALID_PARAMS / CR_ERR_IO /
 * CR_ERR_NOMEM with one line in `why` (EADDRINUSE is CR_ERR_AGAIN: the
 * caller decides whether a taken default is fatal). */
int cr_rpc_shm_server_open(const struct cr_rpc_shm_options *options,
                           struct cr_rpc_shm_server **out, char *why, size_t why_size);
void cr_rpc_shm_server_close(struct cr_rpc_shm_server *srv);

int cr_rpc_shm_server_fd(const struct cr_rpc_shm_server *srv);

/* Handles what the fd reported (never blocks), then polls.  Returns the
 * frames taken plus the clients opened or closed. */
uint32_t cr_rpc_shm_server_serve(struct cr_rpc_shm_server *srv);

/* Takes the frames the rings hold (no syscall unless a client's protocol
 * error closes it); also retries replies that waited for ring room.
 * Returns the frames taken plus replies moved. */
uint32_t cr_rpc_shm_server_poll(struct cr_rpc_shm_server *srv);

/* Queues a reply frame for `client` (written by the next flush).  done:
 * it ends a call that went in flight.  False when the client is gone or
 * memory ran out (counted in replies_dropped). */
bool cr_rpc_shm_server_reply(struct cr_rpc_shm_server *srv, uint64_t client, uint64_t request_id,
                             int32_t status, const uint8_t *body, size_t len, bool done);

void cr_rpc_shm_server_flush(struct cr_rpc_shm_server *srv);

/* Before sleeping: true when every client will wake the fd for its next
 * request; false (nothing armed) when a request or room came meanwhile.
 * After the sleep, cr_rpc_shm_server_disarm. */
bool cr_rpc_shm_server_arm(struct cr_rpc_shm_server *srv);
void cr_rpc_shm_server_disarm(struct cr_rpc_shm_server *srv);

/* Whether any client is connected (the owner need not poll otherwise). */
bool cr_rpc_shm_server_has_clients(const struct cr_rpc_shm_server *srv);

void cr_rpc_shm_server_stats(const struct cr_rpc_shm_server *srv, struct cr_rpc_shm_stats *out);

#endif

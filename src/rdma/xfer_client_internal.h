/* The transfer client's state, shared by its files: xfer_client.c (ops,
 * peers, the public calls), xfer_client_tcp.c (the tcp connections),
 * xfer_client_shm.c (same-host mappings) and xfer_client_verbs.c (RDMA). */
#ifndef CRESCENT_RDMA_XFER_CLIENT_INTERNAL_H
#define CRESCENT_RDMA_XFER_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rdma/xfer.h"
#include "rdma/xfer_frame.h"
#include "rdma/xfer_verbs.h"

#define CR_XFER_PEERS_MAX 64u
#define CR_XFER_CONNECTIONS_MAX 16u
#define CR_XFER_CONN_PARTS 512u     /* requests queued per connection (a power of two) */
#define CR_XFER_CONN_RX_BYTES 16384u
#define CR_XFER_CONN_TX_BATCH 32u   /* requests per writev */

/* One request on one connection: an op, or one stripe of a large op. */
struct xfer_part {
    uint32_t op;           /* index into cli->ops */
    uint32_t request_id;
    uint64_t remote_addr;
    uint64_t length;
    uint64_t local_offset; /* into the op's iov sequence */
};

struct xfer_peer;

struct xfer_tcp_conn {
    struct cr_xfer_client *cli;
    struct xfer_peer *peer;
    int fd;                   /* -1: not connected */
    uint32_t events;          /* epoll mask registered */
    bool dirty;               /* in cli->dirty: has unsent requests */
    bool answered;            /* a well-formed response came on this connection */
    uint32_t head, sent, tail;/* parts: [head, sent) awaiting a response, [sent, tail) unsent */
    uint64_t send_offset;     /* bytes of part `sent` already written */
    uint64_t bytes_queued;    /* payload of parts not yet answered (for balancing) */
    uint32_t next_request_id;
    uint64_t last_progress_ns;
    uint64_t payload_left;    /* of the head part's READ response */
    size_t rx_pos, rx_fill;
    struct xfer_part parts[CR_XFER_CONN_PARTS];
    uint8_t headers[CR_XFER_CONN_TX_BATCH][CR_XFER_REQUEST_MAX_BYTES];
    uint8_t rx[CR_XFER_CONN_RX_BYTES];
};

/* A segment of a same-host peer, mapped into this process. */
struct xfer_shm_map {
    bool used;
    uint8_t name_len;
    char name[CR_XFER_SEGMENT_NAME_MAX + 1];
    uint32_t slot;        /* the server's segment slot: index into its generations */
    uint64_t generation;  /* at map time; a different live value means unregistered */
    uint64_t base, size;  /* the registered (remote) range */
    uint8_t *local;       /* our mapping of the same pages */
};

#define CR_XFER_SHM_MAPS_MAX 64u
#define CR_XFER_BUFFERS_MAX 64u     /* buffers registered (cr_xfer_client_register) */
#define CR_XFER_VERBS_KEYS_MAX 64u  /* segment keys cached per verbs peer */

/* A buffer registered with cr_xfer_client_register: recorded on every
 * transport (so unregister can refuse while ops use it), and registered
 * with the RDMA device when there is one. */
struct xfer_buffer {
    bool used;
    uint8_t *addr;
    uint64_t len;
    struct cr_xfer_verbs_region region; /* on every device; count 0: no device */
};

/* A segment's key as the peer answered KEY. */
struct xfer_verbs_key {
    bool used;
    bool tcp_only;        /* the segment is not registered with the peer's device */
    uint8_t name_len;
    char name[CR_XFER_SEGMENT_NAME_MAX + 1];
    struct cr_xfer_verbs_key key;
};

/* A peer reached by verbs: the control connection (HELLO, KEY) and the QP set. */
struct xfer_verbs_peer {
    int fd;               /* blocking, with the connect timeout as deadline */
    uint32_t next_request_id;
    uint32_t next_evict;
    bool failed;          /* no new ops (a key went stale, or every QP failed); closed once drained */
    bool paths_failed;    /* every QP failed on its path (not a refusal): tcp for a while */
    uint32_t peer_devices;/* the peer's device count (its hello) */
    struct cr_xfer_verbs *qps;
    struct xfer_verbs_key keys[CR_XFER_VERBS_KEYS_MAX];
};

struct xfer_peer {
    bool used;
    int shm_fd;                    /* map requests; -1 when the peer is not same-host */
    const uint64_t *generations;   /* the server's control page, read-only */
    struct xfer_shm_map *maps;     /* CR_XFER_SHM_MAPS_MAX of them, for shm peers */
    char endpoint[CR_XFER_ENDPOINT_MAX + 1];
    struct sockaddr_storage addr;
    socklen_t addr_len;
    struct xfer_tcp_conn *conns; /* cli->connections_per_peer of them */
    struct xfer_verbs_peer *verbs; /* NULL: not (or no longer) reached by verbs */
    bool verbs_offered;  /* answered a hello once: after a failure, hello again */
    uint64_t verbs_retry_ns; /* every QP failed: tcp until then, then hello again */
};

struct xfer_op_slot {
    bool used;
    uint8_t opcode;
    uint8_t segment_len;
    bool verbs;           /* posted on the peer's QPs */
    uint32_t next_free;
    uint32_t parts_left;
    uint32_t iov_count;
    int status;
    uint64_t length;
    cr_xfer_done_fn done;
    void *arg;
    struct xfer_peer *peer;
    uint64_t remote_addr;
    bool has_cap;                     /* cap: the master's, sent with every tcp part */
    struct cr_cap cap;
    struct xfer_shm_map *map;         /* shm ops: the segment */
    struct iovec iov[CR_XFER_OP_IOV_MAX];
    char segment[CR_XFER_SEGMENT_NAME_MAX + 1];
    char message[CR_XFER_MESSAGE_MAX];
};

struct cr_xfer_client {
    struct cr_xfer_client_config cfg; /* defaults filled in */
    int epoll_fd;
    uint32_t free_op;                 /* head of the free list, max_ops: none */
    uint32_t in_flight;
    uint32_t completed;               /* ops completed in the current poll */
    uint32_t dirty_count;
    uint32_t tcp_open;                /* tcp connections open: 0 lets poll skip epoll */
    struct xfer_op_slot *ops;         /* cfg.max_ops */
    struct xfer_tcp_conn **dirty;     /* conns with unsent requests */
    uint32_t *shm_ready;              /* ring of shm ops to run at the next poll */
    uint32_t shm_head, shm_count;
    struct xfer_peer peers[CR_XFER_PEERS_MAX];
    uint32_t verbs_devices;           /* RDMA devices opened at create (0: no verbs) */
    char verbs_error[160];            /* why none */
    struct cr_xfer_verbs_device *verbs_devs[CR_XFER_VERBS_DEVICES_MAX];
    uint32_t verbs_outstanding;       /* work requests posted, not yet reaped */
    struct xfer_buffer buffers[CR_XFER_BUFFERS_MAX];
    char last_error[CR_XFER_MESSAGE_MAX];
};

/* The peer of `endpoint`, set up (transport chosen, logged) on first use;
 * NULL with cli->last_error set when it cannot be. */
struct xfer_peer *cr_xfer_client_peer(struct cr_xfer_client *cli, const char *endpoint);

/* Records a part's outcome on its op; runs the callback when it was the last. */
void cr_xfer_part_done(struct cr_xfer_client *cli, uint32_t op, int status, const char *message);

/* Takes the free op slot cli->free_op (there must be one) for op; returns its index. */
uint32_t cr_xfer_op_take(struct cr_xfer_client *cli, const struct cr_xfer_op *op, uint64_t length,
                         struct xfer_peer *peer);

/* shm (xfer_client_shm.c). */
bool cr_xfer_shm_connect(struct cr_xfer_client *cli, struct xfer_peer *peer, char *why,
                         size_t why_size);
struct xfer_shm_map *cr_xfer_shm_find_map(struct cr_xfer_client *cli, struct xfer_peer *peer,
                                          const char *segment, const struct cr_cap *cap);
void cr_xfer_shm_run(struct cr_xfer_client *cli);
void cr_xfer_shm_disconnect(struct xfer_peer *peer);

/* verbs (xfer_client_verbs.c). */
void cr_xfer_verbs_client_open(struct cr_xfer_client *cli);
void cr_xfer_verbs_client_close(struct cr_xfer_client *cli);
/* Registers b->addr, b->len with the device (nothing without one). */
int cr_xfer_verbs_buffer_register(struct cr_xfer_client *cli, struct xfer_buffer *b);
void cr_xfer_verbs_buffer_release(struct xfer_buffer *b);
/* HELLO on a new control connection, QPs connected: true, or false with why. */
bool cr_xfer_verbs_peer_connect(struct cr_xfer_client *cli, struct xfer_peer *peer, char *why,
                                size_t why_size);
/* Posts op on the peer's QPs: CR_OK, CR_ERR_AGAIN (send queues full), or
 * CR_XFER_VERBS_USE_TCP (memory not registered, no key, out of the key's
 * range, too long, the QPs failed: tcp moves it). */
#define CR_XFER_VERBS_USE_TCP 1
int cr_xfer_verbs_submit(struct cr_xfer_client *cli, struct xfer_peer *peer,
                         const struct cr_xfer_op *op, uint64_t length);
void cr_xfer_verbs_run(struct cr_xfer_client *cli);
void cr_xfer_verbs_peer_close(struct cr_xfer_client *cli, struct xfer_peer *peer);

/* tcp connections (xfer_client_tcp.c). */
int cr_xfer_tcp_connect(struct xfer_tcp_conn *c);
bool cr_xfer_tcp_has_room(const struct xfer_tcp_conn *c, uint32_t parts);
void cr_xfer_tcp_enqueue(struct xfer_tcp_conn *c, const struct xfer_part *part);
void cr_xfer_tcp_flush(struct xfer_tcp_conn *c);
void cr_xfer_tcp_event(struct xfer_tcp_conn *c, uint32_t events);
void cr_xfer_tcp_check_timeout(struct xfer_tcp_conn *c, uint64_t now_ns);
void cr_xfer_tcp_fail(struct xfer_tcp_conn *c, int status, const char *reason);

#endif

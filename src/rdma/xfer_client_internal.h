/* The transfer client's state, shared by its files: xfer_client.c (ops,
 * peers, the public calls) and xfer_client_tcp.c (the tcp connections). */
#ifndef CRESCENT_RDMA_XFER_CLIENT_INTERNAL_H
#define CRESCENT_RDMA_XFER_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rdma/xfer.h"
#include "rdma/xfer_frame.h"

#define CR_XFER_PEERS_MAX 64u
#define CR_XFER_CONNECTIONS_MAX 16u
#define CR_XFER_CONN_PARTS 512u     /* requests queued per connection (a power of two) */
#define CR_XFER_CONN_RX_BYTES 16384u
#define CR_XFER_CONN_TX_BATCH 32u   /* requests per writev */

enum xfer_transport { XFER_TRANSPORT_NONE = 0, XFER_TRANSPORT_TCP, XFER_TRANSPORT_SHM };

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

struct xfer_peer {
    bool used;
    enum xfer_transport transport;
    char endpoint[CR_XFER_ENDPOINT_MAX + 1];
    struct sockaddr_storage addr;
    socklen_t addr_len;
    uint32_t next_conn;
    struct xfer_tcp_conn *conns; /* cli->connections_per_peer of them */
};

struct xfer_op_slot {
    bool used;
    uint8_t opcode;
    uint8_t segment_len;
    uint32_t next_free;
    uint32_t parts_left;
    uint32_t iov_count;
    int status;
    uint64_t length;
    cr_xfer_done_fn done;
    void *arg;
    struct xfer_peer *peer;
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
    struct xfer_op_slot *ops;         /* cfg.max_ops */
    struct xfer_tcp_conn **dirty;     /* conns with unsent requests */
    struct xfer_peer peers[CR_XFER_PEERS_MAX];
    char last_error[CR_XFER_MESSAGE_MAX];
};

/* Records a part's outcome on its op; runs the callback when it was the last. */
void cr_xfer_part_done(struct cr_xfer_client *cli, uint32_t op, int status, const char *message);

/* tcp connections (xfer_client_tcp.c). */
int cr_xfer_tcp_connect(struct xfer_tcp_conn *c);
bool cr_xfer_tcp_has_room(const struct xfer_tcp_conn *c, uint32_t parts);
void cr_xfer_tcp_enqueue(struct xfer_tcp_conn *c, const struct xfer_part *part);
void cr_xfer_tcp_flush(struct xfer_tcp_conn *c);
void cr_xfer_tcp_event(struct xfer_tcp_conn *c, uint32_t events);
void cr_xfer_tcp_check_timeout(struct xfer_tcp_conn *c, uint64_t now_ns);
void cr_xfer_tcp_fail(struct xfer_tcp_conn *c, int status, const char *reason);

#endif

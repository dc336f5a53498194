/* The transfer server's state, shared by its tcp (xfer_server.c) and
 * lifecycle (xfer_server_setup.c) files. */
#ifndef CRESCENT_RDMA_XFER_SERVER_INTERNAL_H
#define CRESCENT_RDMA_XFER_SERVER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "rdma/xfer.h"

#define CR_XFER_SERVER_SEGMENTS_MAX 64u

struct cr_xfer_server_segment {
    bool used;
    uint8_t name_len;
    char name[CR_XFER_SEGMENT_NAME_MAX + 1];
    uint8_t *base;
    uint64_t size;
    int fd; /* our dup of the memfd, or -1: plain memory, tcp only */
};

struct xfer_conn;
struct shm_conn;

/* The first field of every connection the server's epoll set tags. */
enum { CR_XFER_CONN_TCP = 1, CR_XFER_CONN_SHM = 2 };

struct cr_xfer_server {
    struct xfer_conn *conns; /* every open connection (a list, for destroy) */
    int epoll_fd;
    int listen_fd;       /* its address is the epoll tag of the tcp listener */
    int shm_listen_fd;   /* -1 without shm; its address tags the shm listener */
    int control_fd;      /* shm: memfd of the generations, -1 without shm */
    uint64_t *generations; /* shm: mapped control_fd, one per segment slot */
    struct shm_conn *shm_conns;
    uint32_t max_connections;
    uint64_t max_request_bytes;
    uint64_t last_refusal_log_ns;
    char endpoint[CR_XFER_ENDPOINT_MAX + 1];
    struct cr_xfer_server_stats stats;
    struct cr_xfer_server_segment segments[CR_XFER_SERVER_SEGMENTS_MAX];
};

const struct cr_xfer_server_segment *cr_xfer_server_find(const struct cr_xfer_server *srv,
                                                         const char *name, size_t len);

#endif

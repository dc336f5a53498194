/* The transfer server's state, shared by its tcp (xfer_server.c) and
 * lifecycle (xfer_server_setup.c) files. */
#ifndef CRESCENT_RDMA_XFER_SERVER_INTERNAL_H
#define CRESCENT_RDMA_XFER_SERVER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "rdma/xfer.h"
#include "rdma/xfer_verbs.h"

#define CR_XFER_SERVER_SEGMENTS_MAX 64u

struct cr_xfer_server_segment {
    bool used;
    uint8_t name_len;
    char name[CR_XFER_SEGMENT_NAME_MAX + 1];
    uint8_t *base;
    uint64_t size;
    int fd; /* our dup of the memfd, or -1: plain memory, tcp only */
    /* A reader segment (cr_xfer_server_register_reader): no memory, reads
     * are answered from reader's bytes (tcp only); base and size are 0. */
    cr_xfer_reader_fn reader;
    void *reader_arg;
    cr_xfer_opener_fn opener; /* NULL: no file handed to shm clients */
    struct cr_xfer_verbs_region region; /* on every verbs device, or count 0: no verbs */
    bool has_key;                       /* capabilities are checked with key */
    uint8_t key[CR_CAP_KEY_BYTES];
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
    bool require_capability;
    uint64_t capability_skew_ms;
    uint64_t (*now_ms)(void *arg);
    void *now_arg;
    uint64_t last_cap_log_ns[CR_CAP_VERDICTS]; /* per cause: its first, then once a minute */
    struct cr_xfer_verbs_device *verbs[CR_XFER_VERBS_DEVICES_MAX];
    uint32_t verbs_count;               /* devices opened; 0: none (verbs_why says why) */
    char verbs_why[160];                /* the devices' names, or why there are none */
    uint32_t verbs_qps_open;            /* QPs of all clients' QP sets */
    char endpoint[CR_XFER_ENDPOINT_MAX + 1];
    struct cr_xfer_server_stats stats;
    struct cr_xfer_server_segment segments[CR_XFER_SERVER_SEGMENTS_MAX];
};

/* The capability check of a request on seg (xfer_server_cap.c): CR_CAP_OK
 * when it may go on; else counted and logged (per cause, rate-limited).
 * mode 0 is a verbs KEY: any valid, unexpired capability for the segment. */
enum cr_cap_verdict cr_xfer_server_cap_check(struct cr_xfer_server *srv, const char *peer,
                                             const struct cr_xfer_server_segment *seg,
                                             uint8_t mode, uint64_t addr, uint64_t length,
                                             bool has_cap, const struct cr_cap *cap);

const struct cr_xfer_server_segment *cr_xfer_server_find(const struct cr_xfer_server *srv,
                                                         const char *name, size_t len);

/* verbs (xfer_server_verbs.c). */
void cr_xfer_server_verbs_open(struct cr_xfer_server *srv, const struct cr_xfer_server_config *cfg);
void cr_xfer_server_verbs_close(struct cr_xfer_server *srv);
void cr_xfer_server_verbs_register(struct cr_xfer_server *srv, struct cr_xfer_server_segment *seg);
void cr_xfer_server_verbs_unregister(struct cr_xfer_server_segment *seg);
/* A client's HELLO: opens and connects a QP set for the connection (*qps)
 * and writes the answer (*answer_len: the server's hello, or 0 when it has
 * no device).  Returns CR_OK or the status to refuse with (logged). */
int cr_xfer_server_verbs_hello(struct cr_xfer_server *srv, const char *peer, const uint8_t *hello,
                               struct cr_xfer_verbs **qps, uint8_t *answer, uint64_t *answer_len);
/* A KEY: writes the segment's key (*answer_len: its size, or 0 when the
 * segment is not registered with the device: use tcp).  Returns CR_OK or
 * CR_ERR_SEGMENT_NOT_FOUND (an answer: the connection stays open). */
int cr_xfer_server_verbs_key(struct cr_xfer_server *srv, const char *name, size_t len,
                             uint8_t *answer, uint64_t *answer_len);
/* Closes a connection's QP set.  NULL is a no-op. */
void cr_xfer_server_verbs_hangup(struct cr_xfer_server *srv, struct cr_xfer_verbs *qps);

#endif

/* The transfer layer: moves object bytes between a caller's memory and a
 * segment that a store server hosts.
 *
 * A server (the store side) registers segments (name, base, size) and serves
 * reads and writes of [addr, addr + len) inside them, where addr is the
 * address the master hands out in BufHandle.buffer (the registered base plus
 * an offset).  A client (libcrescent, a copy/move executor) submits READ and
 * WRITE ops naming the server's endpoint ("host:port"), the segment and the
 * remote address; completions run as callbacks from cr_xfer_client_poll.
 *
 * Transports, chosen per peer when the client first talks to it and logged
 * once with the reason (see README.md in this folder):
 *   tcp   everywhere: a pipelined fixed-header frame (xfer_frame.h), payload
 *         moved with readv/writev straight into and out of segment memory.
 *   shm   same host: segments registered with their memfd
 *         (cr_xfer_server_register_segment) are mapped by the client, which
 *         copies itself (or reads in place: cr_xfer_client_map); no syscall
 *         and no server work per op.
 *   verbs when both hosts have an RDMA device (libibverbs): the client's
 *         RC QPs do one-sided RDMA READ/WRITE into the segment, for ops whose
 *         local memory was registered with cr_xfer_client_register; QPs and
 *         segment keys are exchanged over a tcp control connection (HELLO,
 *         KEY in xfer_frame.h).  Everything else goes by tcp.
 *
 * No hidden threads.  Both sides are driven by their owner: each exposes an
 * epoll fd that becomes readable when there is work, and a non-blocking step
 * function (timeout 0) that does it.  A crescentd actor puts the fd in its
 * wait hook; a store program runs a plain loop.
 *
 * Thread safety: a server is used by one thread at a time, and so is a client
 * (every cr_xfer_client_* call and every callback on the same thread).  Use one
 * client per thread.  Different servers and clients are independent.
 *
 * Statuses are crescent's (crescent/error.h).  Messages name the peer and the
 * reason ("127.0.0.1:41000: segment 'seg0' range 0x7f..+4096 out of bounds"). */
#ifndef CRESCENT_RDMA_XFER_H
#define CRESCENT_RDMA_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "core/xfer_cap.h"

#define CR_XFER_SEGMENT_NAME_MAX 255u /* bytes, without the NUL */
#define CR_XFER_ENDPOINT_MAX 63u      /* "host:port", without the NUL */
#define CR_XFER_OP_IOV_MAX 16u        /* local scatter-gather entries per op */
#define CR_XFER_MESSAGE_MAX 192u      /* bytes of an error message, with the NUL */

/* ---- segment memory ---------------------------------------------------- */

/* Memory a store server hosts: a memfd mapped MAP_SHARED, so that the shm
 * transport can pass it to same-host clients.  Reserved lazily: pages are
 * backed on first touch. */
struct cr_xfer_segment {
    void *base;
    uint64_t size;   /* bytes mapped (the size asked for, rounded up to a page) */
    int fd;          /* the memfd; owned by the segment */
    bool huge_pages; /* backed by MFD_HUGETLB pages */
};

/* Allocates `size` bytes (> 0) of memfd memory: huge pages (2 MiB) when the
 * system has enough free, else normal pages.  Returns CR_OK, CR_ERR_INVALID_PARAMS
 * (size 0) or CR_ERR_IO / CR_ERR_NOMEM (memfd_create, ftruncate or mmap failed;
 * logged with errno).  On failure *out is zeroed. */
int cr_xfer_segment_alloc(uint64_t size, struct cr_xfer_segment *out);

/* Unmaps and closes; a zeroed segment is a no-op. */
void cr_xfer_segment_free(struct cr_xfer_segment *seg);

/* Seals a memfd's size (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL): a memfd
 * handed to another process can then never be shrunk under this one's
 * mapping (which would SIGBUS it).  False (errno set) when the memfd was
 * made without MFD_ALLOW_SEALING or the kernel refuses. */
bool cr_xfer_seal_size(int fd);

/* Whether fd's size is sealed against shrinking for good (F_SEAL_SHRINK and
 * F_SEAL_SEAL): only such a memfd is handed to another process. */
bool cr_xfer_size_sealed(int fd);

/* ---- server ------------------------------------------------------------ */

struct cr_xfer_server;

struct cr_xfer_server_config {
    /* "host:port" to listen on for tcp; NULL means "127.0.0.1:0" (loopback,
     * ephemeral port).  Binding another address is the operator's choice
     * (crescentd's --data-address). */
    const char *tcp_address;
    bool shm_disabled;             /* do not listen for same-host clients */
    bool verbs_disabled;           /* do not open an RDMA device even if there is one */
    /* RDMA devices to use, comma-separated ("mlx5_0,mlx5_1", at most 4);
     * NULL or "": every device whose port is active (at most 4). */
    const char *rdma_devices;
    /* The RDMA GID table index to route by (RoCE).  Unset: picked by type,
     * the first RoCE v2 entry with an IPv4-mapped address first
     * (cr_xfer_verbs_pick_gid in xfer_verbs.h). */
    bool rdma_gid_index_set;
    uint8_t rdma_gid_index;
    uint32_t max_connections;      /* 0: 1024; more are accepted and closed at once */
    uint64_t max_request_bytes;    /* 0: 1 GiB; a longer request is malformed */
    /* Data-plane capabilities (core/xfer_cap.h): when set, a tcp READ or WRITE
     * (and a verbs KEY) without a capability the segment's key verifies is
     * refused before a byte moves; a segment with no key set is then not
     * served at all.  When clear, a capability sent is still checked on a
     * segment that has a key (a wrong one is refused), and requests without
     * one are served as before. */
    bool require_capability;
    uint32_t capability_skew_ms;   /* 0: CR_CAP_SKEW_MS_DEFAULT; how far past its
                                      expiry (by this server's clock) a capability holds */
    /* The clock capabilities are checked against, Unix ms; NULL: CLOCK_REALTIME.
     * Tests inject one. */
    uint64_t (*now_ms)(void *arg);
    void *now_arg;
};

struct cr_xfer_server_stats {
    uint64_t requests_read;        /* READ requests served */
    uint64_t requests_written;     /* WRITE requests served */
    uint64_t bytes_read;           /* payload bytes sent to clients */
    uint64_t bytes_written;        /* payload bytes received into segments */
    uint64_t refused_out_of_bounds;/* range outside the named segment */
    uint64_t refused_no_segment;   /* segment name not registered */
    uint64_t refused_malformed;    /* frame that does not decode */
    uint64_t connections_accepted;
    uint64_t connections_refused;  /* over max_connections */
    uint64_t connections_closed;   /* for any reason, including the refusals */
    uint32_t connections_open;
    uint64_t shm_clients;          /* same-host connections accepted */
    uint64_t shm_maps;             /* segments handed to them (memfd passed) */
    uint64_t shm_refused_peer;     /* same-host connections of another user, closed */
    uint64_t shm_refused_unsealed; /* map requests for a segment whose memfd size is not sealed */
    uint64_t shm_files;            /* reader segments' files handed to them (fd passed) */
    uint64_t shm_files_refused;    /* file requests refused (no opener, capability, the
                                      opener's failure): that client reads by tcp */
    uint64_t verbs_hellos;         /* verbs QP sets connected for clients */
    uint64_t verbs_hellos_refused; /* hellos answered "no verbs here" or failed */
    uint64_t verbs_keys;           /* segment keys handed out */
    uint64_t verbs_keys_missing;   /* keys asked for unknown (or unregistered) segments */
    uint64_t capability_checked;   /* requests whose capability allowed them */
    /* Requests refused by the capability check, by cause (enum cr_cap_verdict:
     * missing, no_key, bad_mac, expired, out_of_range, wrong_mode; [0] unused). */
    uint64_t refused_capability[CR_CAP_VERDICTS];
};

/* Creates a server listening on cfg->tcp_address (cfg may be NULL: all
 * defaults).  Returns CR_OK, CR_ERR_INVALID_PARAMS (address does not parse),
 * CR_ERR_IO (socket, bind, listen or epoll failed; logged) or CR_ERR_NOMEM. */
int cr_xfer_server_create(const struct cr_xfer_server_config *cfg,
                          struct cr_xfer_server **out);

/* Registers plain memory [base, base + size) under `name` (1..255 bytes).
 * Served by tcp (and verbs: with a device the range is registered with it
 * once, ibv_reg_mr, which pins its pages; when that fails the segment is
 * served by tcp only, logged).  The memory must stay valid until unregistered.
 * Returns CR_OK, CR_ERR_INVALID_PARAMS (bad name, size 0, or range wraps),
 * CR_ERR_SEGMENT_ALREADY_EXISTS or CR_ERR_NOMEM (table full: 64 segments). */
int cr_xfer_server_register(struct cr_xfer_server *srv, const char *name, void *base,
                            uint64_t size);

/* Same, for memory from cr_xfer_segment_alloc: also served by shm.  The
 * server duplicates seg->fd; the caller keeps ownership of seg. */
int cr_xfer_server_register_segment(struct cr_xfer_server *srv, const char *name,
                                    const struct cr_xfer_segment *seg);

/* Sets the key capabilities for segment `name` are verified with (the one
 * the master signs them with, agreed at MountSegment).  A later call
 * replaces it: capabilities signed with the old key are refused from then
 * on.  Returns CR_OK or CR_ERR_SEGMENT_NOT_FOUND. */
int cr_xfer_server_set_key(struct cr_xfer_server *srv, const char *name,
                           const uint8_t key[CR_CAP_KEY_BYTES]);

/* Bytes that are not in memory (a store server's SSD tier): fills dst
 * with the len bytes at addr of the reader segment (what addr means is the
 * reader's: an SSD object's id), or returns a status (CR_ERR_OBJECT_NOT_FOUND,
 * CR_ERR_CHECKSUM, ...) that the client gets as the op's failure.  Runs on
 * the server's thread; it may block (a disk read). */
typedef int (*cr_xfer_reader_fn)(void *arg, uint64_t addr, uint64_t len, void *dst);

/* Registers a reader segment under `name`: READs of it are served by tcp
 * with fn's bytes (staged in a buffer of len bytes, freed once sent: at most
 * 64 per connection); WRITEs are refused; shm and verbs clients fall back to
 * tcp for it.  Returns as cr_xfer_server_register. */
int cr_xfer_server_register_reader(struct cr_xfer_server *srv, const char *name,
                                   cr_xfer_reader_fn fn, void *arg);

/* The same bytes as a file a same-host client reads itself: opens the file
 * holding the len bytes at addr of the reader segment read-only and returns
 * CR_OK with *fd (the server closes it once passed) and *offset (where the
 * bytes start in it), or a status as cr_xfer_reader_fn's.  Runs on the
 * server's thread. */
typedef int (*cr_xfer_opener_fn)(void *arg, uint64_t addr, uint64_t len, int *fd,
                                 uint64_t *offset);

/* Lets shm clients of reader segment `name` read its files themselves
 * (cr_xfer_client_open_file): fn is called with the reader's arg after the
 * same capability check as a tcp READ of the range.  Returns CR_OK or
 * CR_ERR_SEGMENT_NOT_FOUND (no reader segment of that name). */
int cr_xfer_server_set_opener(struct cr_xfer_server *srv, const char *name,
                              cr_xfer_opener_fn fn);

/* Removes a segment: later requests naming it are refused.  Returns CR_OK or
 * CR_ERR_SEGMENT_NOT_FOUND.  Requests already being served finish first only
 * in the sense that their bytes were moved before this returns (one thread). */
int cr_xfer_server_unregister(struct cr_xfer_server *srv, const char *name);

/* "host:port" actually bound (the ephemeral port resolved): publish it as
 * MountSegmentRequest.transport_endpoint.  Valid while the server lives. */
const char *cr_xfer_server_endpoint(const struct cr_xfer_server *srv);

/* "rdma" when the server opened an RDMA device at create (clients with a
 * device then use verbs), else "tcp": MountSegment.protocol. */
const char *cr_xfer_server_protocol(const struct cr_xfer_server *srv);

/* An epoll fd that is readable when cr_xfer_server_run has work. */
int cr_xfer_server_fd(const struct cr_xfer_server *srv);

/* Accepts connections and serves requests until nothing is ready, waiting up
 * to timeout_ms (0: do not wait, -1: wait for work) for the first event.
 * Returns the number of events handled (>= 0) or CR_ERR_IO if epoll failed.
 * A bad peer never fails this call: its connection is closed and counted. */
int cr_xfer_server_run(struct cr_xfer_server *srv, int timeout_ms);

void cr_xfer_server_get_stats(const struct cr_xfer_server *srv,
                              struct cr_xfer_server_stats *out);

/* Closes every connection and the listeners.  NULL is a no-op. */
void cr_xfer_server_destroy(struct cr_xfer_server *srv);

/* ---- client ------------------------------------------------------------ */

struct cr_xfer_client;

enum cr_xfer_opcode {
    CR_XFER_READ = 1,  /* remote segment -> local iov */
    CR_XFER_WRITE = 2, /* local iov -> remote segment */
};

/* Called once per op from cr_xfer_client_poll (never from submit), with
 * CR_OK or the failure and a message naming the peer and the reason (valid
 * during the call only). */
typedef void (*cr_xfer_done_fn)(void *arg, int status, const char *message);

struct cr_xfer_op {
    enum cr_xfer_opcode opcode;
    const char *endpoint;     /* the server's "host:port" */
    const char *segment;      /* segment name as registered */
    uint64_t remote_addr;     /* inside the segment: base + offset */
    const struct cr_cap *cap; /* the master's capability for this range, copied at
                                 submit (sent with every tcp stripe, and with the
                                 verbs KEY); NULL: none */
    const struct iovec *iov;  /* local buffers; the array is copied at submit, */
    uint32_t iov_count;       /* the memory must live until completion (<= 16) */
    cr_xfer_done_fn done;
    void *arg;
};

struct cr_xfer_client_config {
    bool shm_disabled;              /* never use shm, even for a same-host server */
    bool verbs_disabled;            /* never use verbs, even with an RDMA device */
    const char *rdma_devices;       /* as in cr_xfer_server_config */
    bool rdma_gid_index_set;
    uint8_t rdma_gid_index;
    uint32_t connections_per_peer;  /* tcp connections (and verbs QPs) per server; 0: 4 */
    uint32_t max_ops;               /* ops in flight; 0: 1024 */
    uint64_t stripe_min_bytes;      /* ops at least this long are split over the
                                       peer's connections; 0: 4 MiB */
    uint32_t connect_timeout_ms;    /* 0: 5000 */
    uint32_t op_timeout_ms;         /* no progress on a connection for this long
                                       fails its ops; 0: 30000 */
};

/* Returns CR_OK, CR_ERR_NOMEM or CR_ERR_IO (epoll_create failed). */
int cr_xfer_client_create(const struct cr_xfer_client_config *cfg,
                          struct cr_xfer_client **out);

/* Declares [addr, addr + len) as a buffer used for transfers.  tcp and shm
 * need nothing (any memory works).  With an RDMA device the buffer is
 * registered with it (ibv_reg_mr: its pages are pinned), and ops whose local
 * memory lies in registered buffers go by verbs to peers that offer it.  The
 * memory must stay mapped until cr_xfer_client_unregister or destroy.
 * Buffers are recorded on every transport, so the limit and unregister's
 * checks hold with or without a device.
 * Returns CR_OK, CR_ERR_INVALID_PARAMS, CR_ERR_NOMEM (64 buffers registered
 * already) or CR_ERR_IO (ibv_reg_mr failed; cr_xfer_client_last_error says
 * why, e.g. the locked-memory limit). */
int cr_xfer_client_register(struct cr_xfer_client *cli, void *addr, size_t len);

/* Undoes cr_xfer_client_register of the buffer that starts at addr, on
 * every transport (with a device: ibv_dereg_mr, the pages are unpinned).
 * Returns CR_OK, CR_ERR_INVALID_PARAMS (not registered) or CR_ERR_AGAIN
 * (ops in flight use it: nothing changed; poll until they complete). */
int cr_xfer_client_unregister(struct cr_xfer_client *cli, void *addr);

/* Queues an op; its bytes move during cr_xfer_client_poll.  Returns CR_OK, or
 * without queueing: CR_ERR_INVALID_PARAMS (bad op: names, iov, remote range
 * wraps), CR_ERR_AGAIN (max_ops in flight: poll and retry), CR_ERR_IO (no
 * connection to the peer could be made; cr_xfer_client_last_error says why). */
int cr_xfer_submit(struct cr_xfer_client *cli, const struct cr_xfer_op *op);

/* Sends what was queued, then handles responses, waiting up to timeout_ms
 * (0: none, -1: until at least one op completes) if nothing completed yet.
 * Runs callbacks.  Returns the number of ops completed (>= 0). */
int cr_xfer_client_poll(struct cr_xfer_client *cli, int timeout_ms);

/* An epoll fd readable when cr_xfer_client_poll has tcp responses to
 * handle.  verbs completions are busy-polled (no completion channel) and do
 * not make it readable: while ops are in flight, call cr_xfer_client_poll
 * with a bounded timeout rather than only waiting on this fd. */
int cr_xfer_client_fd(const struct cr_xfer_client *cli);

/* Ops submitted and not yet completed. */
uint32_t cr_xfer_client_in_flight(const struct cr_xfer_client *cli);

/* Blocking conveniences: submit one op and poll until it completes.  Return
 * the op's status; the message is in cr_xfer_client_last_error. */
int cr_xfer_read(struct cr_xfer_client *cli, const char *endpoint, const char *segment,
                 uint64_t remote_addr, void *dst, size_t len);
int cr_xfer_write(struct cr_xfer_client *cli, const char *endpoint, const char *segment,
                  uint64_t remote_addr, const void *src, size_t len);
/* cr_xfer_read sending the master's capability for the range (NULL: none). */
int cr_xfer_read_cap(struct cr_xfer_client *cli, const char *endpoint, const char *segment,
                     uint64_t remote_addr, void *dst, size_t len, const struct cr_cap *cap);

/* The message of the latest failure (submit or completion); "" if none. */
const char *cr_xfer_client_last_error(const struct cr_xfer_client *cli);

/* "tcp", "shm" or "verbs": the transport serving `endpoint` (verbs peers
 * still move ops whose memory is not registered by tcp), NULL if not
 * connected yet. */
const char *cr_xfer_client_transport(const struct cr_xfer_client *cli, const char *endpoint);

/* Same-host only: points *out at [remote_addr, remote_addr + len) of the
 * segment as mapped in this process, to read (or write) in place with no
 * copy at all.  The pointer stays valid until the client is destroyed; the
 * bytes are the live segment's, so the caller must hold what makes them
 * stable (a lease) while it reads.  Returns CR_OK, CR_ERR_AGAIN (the peer is
 * not same-host or cannot share that segment: use cr_xfer_read),
 * CR_ERR_INVALID_PARAMS (bad endpoint or name, range out of the segment). */
int cr_xfer_client_map(struct cr_xfer_client *cli, const char *endpoint, const char *segment,
                       uint64_t remote_addr, uint64_t len, void **out);

/* The same, sending `cap` (NULL: none) with the map request when the segment
 * is not mapped yet: a server that requires capabilities hands its memfd out
 * only for one (src/rdma/README.md, "Capabilities"). */
int cr_xfer_client_map_cap(struct cr_xfer_client *cli, const char *endpoint, const char *segment,
                           uint64_t remote_addr, uint64_t len, const struct cr_cap *cap,
                           void **out);

/* Same-host only: asks the server for the file holding [addr, addr + len)
 * of reader segment `segment` (a store server's SSD tier), checked with cap
 * (NULL: none) as a READ of that range would be.  CR_OK: *fd is the file,
 * opened read-only (the caller's to close), the bytes at *offset in it: the
 * caller reads and checks them itself.  CR_ERR_AGAIN when the peer is not
 * same-host; else the server's refusal (CR_ERR_SEGMENT_NOT_FOUND: no such
 * reader or no opener; CR_ERR_ILLEGAL_CLIENT: the capability; the opener's
 * status) or CR_ERR_IO / CR_ERR_PROTOCOL, with cr_xfer_client_last_error:
 * the caller then reads by tcp (cr_xfer_read_cap).  Synchronous: one
 * request and reply on the shm socket. */
int cr_xfer_client_open_file(struct cr_xfer_client *cli, const char *endpoint,
                             const char *segment, uint64_t addr, uint64_t len,
                             const struct cr_cap *cap, int *fd, uint64_t *offset);

/* Fails ops in flight (callbacks run with CR_ERR_SHUTDOWN), closes
 * connections, frees.  NULL is a no-op. */
void cr_xfer_client_destroy(struct cr_xfer_client *cli);

#endif

/* The verbs (libibverbs) side of the transfer layer.
 *
 * Pure parts, unit-tested on any machine:
 *   - the connection-setup message each side sends over the tcp data
 *     connection (QP numbers, PSNs, LID, GID, MTU), and the segment key
 *     message (base, size, rkey), both fixed-size little-endian;
 *   - the striping plan: an object of CR_XFER_VERBS_STRIPE_MIN_BYTES or more
 *     is cut into one stripe per QP, the QPs spread over the devices;
 *   - the transport choice per peer, with the reason logged once.
 * Device parts (xfer_verbs.c), which need an RDMA device: probing, opening a
 * device (context + PD) once per server or client, registering memory once on
 * it, QP sets (a CQ and several RC QPs) connected to one peer each, posting
 * one-sided RDMA READ/WRITE stripes and polling their completions.  These
 * compile and link everywhere.  Without a device they run only against the
 * test double tests/unit/loopback_ibverbs.c (test_xfer_verbs_loopback), and
 * the real-device test reports itself skipped.
 *
 * A device and its QP sets are used by one thread at a time. */
#ifndef CRESCENT_RDMA_XFER_VERBS_H
#define CRESCENT_RDMA_XFER_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_XFER_VERBS_QPS_MAX 16u
#define CR_XFER_VERBS_DEVICES_MAX 4u /* RDMA devices one side uses (each its own PD and CQs) */
#define CR_XFER_VERBS_STRIPE_MIN_BYTES (UINT64_C(4) << 20)
#define CR_XFER_VERBS_STRIPE_ALIGN_BYTES 4096u
#define CR_XFER_VERBS_PORT_BYTES 20u
#define CR_XFER_VERBS_HELLO_BYTES \
    (8 + CR_XFER_VERBS_DEVICES_MAX * CR_XFER_VERBS_PORT_BYTES + CR_XFER_VERBS_QPS_MAX * 8)
#define CR_XFER_VERBS_KEY_BYTES (4 + 4 + 8 + 8 + CR_XFER_VERBS_DEVICES_MAX * 4)

/* How a peer reaches one of our devices. */
struct cr_xfer_verbs_port {
    uint8_t port;  /* the HCA port (>= 1) */
    uint8_t mtu;   /* enum ibv_mtu: 1 (256) .. 5 (4096) */
    uint16_t lid;  /* 0 on RoCE (the GID routes) */
    uint8_t gid[16];
};

/* What one side tells the other to connect its RC QPs: its devices, and
 * its QPs, QP i on device i % device_count.  Wire layout (216 bytes, LE):
 * magic "XVB2", qp_count, device_count, 2 zero bytes, 4 device entries of
 * 20 bytes (port, mtu, lid, gid), 16 QPNs, 16 PSNs. */
struct cr_xfer_verbs_hello {
    uint8_t qp_count;     /* 1..CR_XFER_VERBS_QPS_MAX */
    uint8_t device_count; /* 1..CR_XFER_VERBS_DEVICES_MAX, <= qp_count */
    struct cr_xfer_verbs_port devices[CR_XFER_VERBS_DEVICES_MAX];
    uint32_t qpn[CR_XFER_VERBS_QPS_MAX];
    uint32_t psn[CR_XFER_VERBS_QPS_MAX]; /* 24 bits */
};

/* A registered segment as a peer addresses it: one rkey per device of the
 * server (the segment is registered on each), for the QPs on that device. */
struct cr_xfer_verbs_key {
    uint32_t device_count; /* 1..CR_XFER_VERBS_DEVICES_MAX */
    uint32_t rkey[CR_XFER_VERBS_DEVICES_MAX];
    uint64_t base;
    uint64_t size;
};

size_t cr_xfer_verbs_hello_encode(const struct cr_xfer_verbs_hello *hello, uint8_t *out);
/* Returns CR_OK, or CR_ERR_PROTOCOL (short, bad magic, qp_count 0 or above the
 * maximum, device_count 0, above the maximum or above qp_count, a used
 * device with port 0 or mtu outside 1..5, reserved bytes set, a QPN or PSN
 * wider than 24 bits, QPN 0 for a QP in use). */
int cr_xfer_verbs_hello_decode(const uint8_t *buf, size_t len, struct cr_xfer_verbs_hello *out);

size_t cr_xfer_verbs_key_encode(const struct cr_xfer_verbs_key *key, uint8_t *out);
/* Returns CR_OK or CR_ERR_PROTOCOL (short, bad magic, device_count 0 or
 * above the maximum, reserved bytes set, size 0, range wraps). */
int cr_xfer_verbs_key_decode(const uint8_t *buf, size_t len, struct cr_xfer_verbs_key *out);

/* One stripe of an op: bytes [offset, offset + length) go on QP `qp`. */
struct cr_xfer_stripe {
    uint32_t qp;
    uint64_t offset;
    uint64_t length;
};

/* Plans an op of `length` bytes over qp_count QPs spread over device_count
 * devices (QP i is on device i % device_count).  Below the stripe minimum: one
 * stripe on QP *next_qp (then advanced, round robin).  At or above it: one
 * stripe per QP (at most max), 4 KiB aligned, consecutive stripes on
 * different devices.  Returns the stripe count; stripes cover [0, length)
 * exactly, in order. */
uint32_t cr_xfer_verbs_plan(uint64_t length, uint32_t qp_count, uint32_t device_count,
                            uint32_t *next_qp, struct cr_xfer_stripe *out, uint32_t max);

enum cr_xfer_transport { CR_XFER_TRANSPORT_TCP = 0, CR_XFER_TRANSPORT_SHM, CR_XFER_TRANSPORT_VERBS };

/* What decides a peer's transport. */
struct cr_xfer_transport_facts {
    bool shm_disabled;      /* by the client's config */
    bool shm_reachable;     /* the peer's shm socket accepted a connection */
    const char *shm_error;  /* why not, when not reachable */
    uint32_t local_devices; /* RDMA devices here (cr_xfer_verbs_probe) */
    const char *verbs_error;/* why none, when 0 */
    bool peer_offers_verbs; /* the server answered the verbs hello */
    const char *peer_verbs_error; /* why not, when it did not (NULL: not asked) */
};

/* shm when reachable (and not disabled), else verbs when both sides have a
 * device, else tcp; writes the reason into why (for the one log line). */
enum cr_xfer_transport cr_xfer_choose_transport(const struct cr_xfer_transport_facts *facts,
                                                char *why, size_t why_size);

const char *cr_xfer_transport_name(enum cr_xfer_transport transport);

/* One entry of a port's GID table, as the GID picker sees it. */
enum { CR_XFER_GID_IB = 0, CR_XFER_GID_ROCE_V1 = 1, CR_XFER_GID_ROCE_V2 = 2 }; /* = ibv_gid_type */
struct cr_xfer_verbs_gid {
    uint32_t index;
    uint32_t type; /* CR_XFER_GID_* */
    uint8_t raw[16];
};

/* The GID to route by, as an index into table (the port's live entries), or
 * -1 when it is empty.  On InfiniBand (ethernet false) the first entry (the
 * port GID).  On Ethernet (RoCE) the first RoCE v2 entry with an
 * IPv4-mapped address (::ffff:a.b.c.d: routable, what RoCE v2 fabrics are
 * configured for), else the first RoCE v2 entry that is not link-local,
 * else the first RoCE v2, else the first entry.  *why says which rule won. */
int cr_xfer_verbs_pick_gid(const struct cr_xfer_verbs_gid *table, uint32_t count, bool ethernet,
                           const char **why);

/* "RoCE v2 ::ffff:10.0.0.1", for log lines. */
void cr_xfer_verbs_gid_describe(const struct cr_xfer_verbs_gid *gid, char *out, size_t size);

/* "auto" (-1) or a GID index 0..255 (crescentd --data-rdma-gid-index,
 * crescent-store --rdma-gid-index).  False when it is neither. */
bool cr_xfer_verbs_parse_gid_index(const char *text, int *out);

/* ---- device parts (xfer_verbs.c) -------------------------------------- */

/* Counts RDMA devices.  Returns the count (0 when none: here
 * ibv_get_device_list fails with ENOSYS) and, when 0, why. */
uint32_t cr_xfer_verbs_probe(char *why, size_t why_size);

/* One opened device: its context and one protection domain.  A server or a
 * client opens one at create; every segment or buffer is registered on it
 * once, and every QP set of its peers is created on its PD. */
struct cr_xfer_verbs_device;
/* A registered memory region (an ibv_mr). */
struct ibv_mr;
/* A QP set: one completion queue and qp_count RC QPs on a device's PD,
 * connected to one peer's QP set. */
struct cr_xfer_verbs;

/* Opens device `device_index` on `port` (>= 1) and allocates its PD.  The
 * GID routed by is table index gid_index, or with -1 the one
 * cr_xfer_verbs_pick_gid picks from the port's live entries (read with
 * ibv_query_gid_ex); the choice is logged.  Returns CR_OK,
 * CR_ERR_INVALID_PARAMS (no such device or port, gid_index not a live
 * entry), or CR_ERR_IO with why set (the verbs call that failed and its
 * errno). */
int cr_xfer_verbs_device_open(uint32_t device_index, uint8_t port, int gid_index,
                              struct cr_xfer_verbs_device **out, char *why, size_t why_size);

/* The GID index the device routes by. */
uint32_t cr_xfer_verbs_device_gid_index(const struct cr_xfer_verbs_device *dev);

/* "mlx5_0 port 1": for log lines. */
const char *cr_xfer_verbs_device_name(const struct cr_xfer_verbs_device *dev);

/* Closes the device.  Every QP set and memory region on it must be closed
 * first.  NULL is a no-op. */
void cr_xfer_verbs_device_close(struct cr_xfer_verbs_device *dev);

/* Registers [addr, addr + len) on the device's PD (LOCAL_WRITE | REMOTE_READ
 * | REMOTE_WRITE; this pins the pages) and returns the region and its keys.
 * Returns CR_OK or CR_ERR_IO (ibv_reg_mr failed; why names errno and, for
 * ENOMEM, the locked-memory limit). */
int cr_xfer_verbs_register(struct cr_xfer_verbs_device *dev, void *addr, uint64_t len,
                           struct ibv_mr **out, uint32_t *lkey, uint32_t *rkey, char *why,
                           size_t why_size);

/* Deregisters: the keys stop working at once (a peer's op using the rkey
 * then fails with a remote access error).  NULL is a no-op. */
void cr_xfer_verbs_deregister(struct ibv_mr *mr);

/* Opens the devices to use, at most CR_XFER_VERBS_DEVICES_MAX, port 1 each,
 * routing by gid_index (-1: picked, see cr_xfer_verbs_device_open):
 * `names` (comma-separated, e.g. "mlx5_0,mlx5_1") opens exactly those, in
 * that order, and fails whole when one is missing or unusable; NULL or ""
 * opens every device whose port is active, skipping (and logging) the
 * others.  Returns the count opened into out[]; 0 with why set when none. */
uint32_t cr_xfer_verbs_devices_open(const char *names, int gid_index,
                                    struct cr_xfer_verbs_device **out, char *why, size_t why_size);
void cr_xfer_verbs_devices_close(struct cr_xfer_verbs_device **devs, uint32_t count);

/* A memory range registered on each of a side's devices. */
struct cr_xfer_verbs_region {
    uint32_t count;
    struct ibv_mr *mr[CR_XFER_VERBS_DEVICES_MAX];
    uint32_t lkey[CR_XFER_VERBS_DEVICES_MAX];
    uint32_t rkey[CR_XFER_VERBS_DEVICES_MAX];
};

/* Registers [addr, addr + len) on every device, all or none.  Returns CR_OK
 * or CR_ERR_IO (why names the device). */
int cr_xfer_verbs_region_register(struct cr_xfer_verbs_device *const *devs, uint32_t count,
                                  void *addr, uint64_t len, struct cr_xfer_verbs_region *out,
                                  char *why, size_t why_size);
/* Deregisters on every device and zeroes the region; a zeroed one is a no-op. */
void cr_xfer_verbs_region_deregister(struct cr_xfer_verbs_region *region);

/* Opens a QP set over devs[0..dev_count): qp_count RC QPs (1..16) in INIT,
 * QP i on devs[i % dev_count] (at most qp_count devices are used), each with
 * up to send_depth outstanding work requests, and one CQ per device.
 * Returns CR_OK, CR_ERR_INVALID_PARAMS, CR_ERR_NOMEM or CR_ERR_IO (why). */
int cr_xfer_verbs_open(struct cr_xfer_verbs_device *const *devs, uint32_t dev_count,
                       uint32_t qp_count, uint32_t send_depth, struct cr_xfer_verbs **out,
                       char *why, size_t why_size);

/* This side's hello (QPNs, random PSNs, LID/GID, MTU) to send to the peer. */
void cr_xfer_verbs_local_hello(const struct cr_xfer_verbs *v, struct cr_xfer_verbs_hello *out);

/* Moves QP i to RTR then RTS against the peer's QP i, which is on the
 * peer's device i % its device_count.  The peer must offer at least as many
 * QPs.  Returns CR_OK, CR_ERR_INVALID_PARAMS or CR_ERR_IO (why). */
int cr_xfer_verbs_connect(struct cr_xfer_verbs *v, const struct cr_xfer_verbs_hello *peer,
                          char *why, size_t why_size);

/* A local range of an op and the lkeys (one per device of the set) of the
 * region that holds it. */
struct cr_xfer_verbs_local {
    void *addr;
    uint64_t length;
    uint32_t lkey[CR_XFER_VERBS_DEVICES_MAX];
};

/* Posts an RDMA READ (remote -> local) or WRITE of `length` bytes (> 0):
 * local[0..count) (a gather list, count <= 16) against [remote_addr,
 * remote_addr + length), striped by cr_xfer_verbs_plan over the live QPs
 * (4 MiB and more: one stripe per QP, so over every device), each stripe
 * one signalled work request with wr_id under the rkey of the peer's device
 * that QP reaches (rkey[qp % the peer's device count]); *posted is the
 * stripe count.
 * Returns CR_OK; or, with nothing posted: CR_ERR_AGAIN (a send queue is full:
 * poll first), CR_ERR_INVALID_PARAMS (a stripe above the 2 GiB RC message
 * limit or more scatter-gather entries than the device takes: use tcp); or
 * CR_ERR_IO (ibv_post_send refused), with *posted stripes already on the wire
 * whose completions must still be reaped. */
int cr_xfer_verbs_post(struct cr_xfer_verbs *v, bool write, const struct cr_xfer_verbs_local *local,
                       uint32_t count, uint64_t remote_addr, const uint32_t *rkey, uint64_t length,
                       uint64_t wr_id, uint32_t *posted);

struct cr_xfer_verbs_completion {
    uint64_t wr_id;
    int status;         /* CR_OK or CR_ERR_IO */
    uint32_t qp;        /* the QP (index in the set) it completed on */
    bool remote_access; /* refused by the peer (a key or range), not a path failure */
    const char *reason; /* the work completion status in words, when not OK */
};

/* Polls up to max completions.  Returns the count (>= 0). */
int cr_xfer_verbs_poll(struct cr_xfer_verbs *v, struct cr_xfer_verbs_completion *out, int max);

/* Takes a QP out of the set's plans (it completed with an error on its path:
 * it is in the error state and flushes the rest), with every QP on the same
 * path (the same local device and the same peer device: the same two
 * ports).  Returns true the first time. */
bool cr_xfer_verbs_qp_fail(struct cr_xfer_verbs *v, uint32_t qp);
/* QPs not failed: 0 means the set can post nothing more. */
uint32_t cr_xfer_verbs_live_qps(const struct cr_xfer_verbs *v);
/* The name of the device QP qp is on ("mlx5_1 port 1"). */
const char *cr_xfer_verbs_qp_device(const struct cr_xfer_verbs *v, uint32_t qp);

/* The set's QP count and device count. */
uint32_t cr_xfer_verbs_qp_count(const struct cr_xfer_verbs *v);
uint32_t cr_xfer_verbs_device_count(const struct cr_xfer_verbs *v);

/* Work requests posted and not yet reaped by cr_xfer_verbs_poll. */
uint32_t cr_xfer_verbs_outstanding(const struct cr_xfer_verbs *v);

/* Destroys the QPs (the hardware stops touching memory for them) and the CQ.
 * NULL is a no-op. */
void cr_xfer_verbs_close(struct cr_xfer_verbs *v);

#endif

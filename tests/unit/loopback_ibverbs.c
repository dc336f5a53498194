/* loopback_ibverbs: a TEST DOUBLE of libibverbs, linked INSTEAD of
 * -libverbs into tests/unit/test_xfer_verbs_loopback.c only (build.zig), never
 * into crescentd, crescent-store or libcrescent.
 *
 * It defines the libibverbs entry points src/rdma/xfer_verbs.c calls, and the
 * two context ops that the inline ibv_post_send and ibv_poll_cq call through,
 * for up to 4 devices ("loopback0".."loopback3", 1 by default; each one
 * RoCE-style port: LID 0, routed by GID) whose QPs all live in this process
 * (the devices are on one fabric: any port reaches any other).  Each port
 * has a GID table laid out as a ConnectX's is for one IPv4 address:
 * 0 fe80:: link-local RoCE v1, 1 the same RoCE v2, 2 ::ffff:10.0.D.1 RoCE
 * v1, 3 the same RoCE v2 (a test may set another, loopback_ibverbs_set_gids).
 * An RDMA READ or WRITE is a memcpy between the requester's gather list and the responder's memory region,
 * executed when the requester polls its CQ (as a real HCA completes work
 * asynchronously: nothing moves at post time).
 *
 * What it checks, as a real HCA does, completing with the real error status:
 *   - post: the QP is in RTS (EINVAL before it; in ERR the request is taken
 *     and flushed), the opcode is RDMA READ/WRITE, num_sge <= the QP's
 *     max_send_sge (EINVAL), the send queue holds < max_send_wr (ENOMEM);
 *   - local side: every lkey is a live region of the QP's PD that contains
 *     the SGE, READ targets need LOCAL_WRITE (IBV_WC_LOC_PROT_ERR), the
 *     message is <= 2 GiB (IBV_WC_LOC_LEN_ERR);
 *   - the path: the destination QPN exists and is in RTR/RTS, points back at
 *     the requester, the address vector reaches this port (GID), and the
 *     requester's next PSN is the responder's expected PSN (both advance by
 *     the packets of each message) -- else IBV_WC_RETRY_EXC_ERR, which is what
 *     an HCA reports when nobody answers;
 *   - remote side: the rkey is a live (not deregistered) region of the
 *     responder's PD, [remote_addr, +length) lies inside it, the region and
 *     the responder QP allow REMOTE_READ / REMOTE_WRITE
 *     (IBV_WC_REM_ACCESS_ERR), READ credits on both sides (REM_INV_REQ_ERR);
 *   - after an error completion the QP is in ERR and every later request on
 *     it completes with IBV_WC_WR_FLUSH_ERR;
 *   - modify_qp walks RESET -> INIT -> RTR -> RTS with the attribute masks
 *     those transitions require, in range; reg_mr needs mapped memory
 *     (EFAULT) and LOCAL_WRITE with REMOTE_WRITE (EINVAL); keys are never
 *     reused; destroying a CQ, PD or context still in use fails with EBUSY.
 * What it cannot show: anything about a real HCA's timing, pinning, MTU
 * segmentation on the wire, or two hosts.  test_device_round_trip in
 * test_xfer_verbs.c is the real-device test and stays SKIPPED without one.
 *
 * One mutex guards everything: the tests drive a server thread and a client
 * thread through it. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "loopback_ibverbs.h"

#define MAX_QP_WR 32768
#define MAX_SGE 30
#define MAX_CQE 4194303
#define MAX_RD_ATOM 16
#define PORT_MTU IBV_MTU_1024
#define MESSAGE_MAX (UINT64_C(1) << 31)
#define PSN_MASK 0xffffffu

struct lb_mr {
    struct ibv_mr mr;
    int access;
    struct lb_mr *next;
};

struct lb_wr {
    uint64_t wr_id;
    uint64_t seq; /* post order across QPs */
    enum ibv_wr_opcode opcode;
    bool signaled;
    int num_sge;
    uint64_t remote_addr;
    uint32_t rkey;
    struct ibv_sge sge[MAX_SGE];
};

struct lb_qp {
    struct ibv_qp qp;
    uint32_t max_send_wr, max_send_sge;
    int access;
    uint32_t dest_qp_num;
    uint32_t rq_psn; /* next PSN expected as responder */
    uint32_t sq_psn; /* next PSN sent as requester */
    enum ibv_mtu path_mtu;
    uint8_t max_rd_atomic, max_dest_rd_atomic;
    struct ibv_ah_attr ah;
    struct lb_wr *ring;
    uint32_t head, count;
    struct lb_qp *next;
};

struct lb_cq {
    struct ibv_cq cq;
    uint32_t qps;
    struct lb_cq *next;
};

struct lb_pd {
    struct ibv_pd pd;
    uint32_t mrs, qps;
    struct lb_pd *next;
};

/* A device: its one port's state and GID table. */
struct lb_device {
    struct ibv_device dev;
    enum ibv_port_state state;
    bool failed; /* loopback_ibverbs_fail_device: its link is gone */
    uint32_t gid_count;
    struct ibv_gid_entry gids[LOOPBACK_IBVERBS_GIDS_MAX];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int device_count = 1;
static struct lb_device devices[LOOPBACK_IBVERBS_DEVICES_MAX];
static struct lb_mr *mrs;
static struct lb_qp *qps;
static struct lb_cq *cqs;
static struct lb_pd *pds;
static uint32_t contexts;
static uint32_t next_key = 1, next_qpn = 0x100;
static uint64_t next_seq;
static struct loopback_ibverbs_counts counts;

/* The ConnectX-style table of device `index` (see the top of this file). */
static void default_gids(struct lb_device *d, uint32_t index) {
    d->gid_count = 4;
    for (uint32_t i = 0; i < 4; i++) {
        struct ibv_gid_entry *e = &d->gids[i];
        memset(e, 0, sizeof(*e));
        e->gid_index = i;
        e->port_num = 1;
        e->gid_type = i % 2 == 0 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
        uint8_t *g = e->gid.raw;
        if (i < 2) { /* fe80::2:ff:fe00:D+1 */
            g[0] = 0xfe, g[1] = 0x80, g[8] = 0x02, g[11] = 0xff, g[12] = 0xfe;
            g[15] = (uint8_t)(index + 1);
        } else { /* ::ffff:10.0.D.1 */
            g[10] = g[11] = 0xff, g[12] = 10, g[14] = (uint8_t)index, g[15] = 1;
        }
    }
}

static void reset_devices(int count) {
    device_count = count > LOOPBACK_IBVERBS_DEVICES_MAX ? LOOPBACK_IBVERBS_DEVICES_MAX : count;
    for (uint32_t i = 0; i < LOOPBACK_IBVERBS_DEVICES_MAX; i++) {
        struct lb_device *d = &devices[i];
        d->dev = (struct ibv_device){.node_type = IBV_NODE_CA,
                                     .transport_type = IBV_TRANSPORT_IB};
        snprintf(d->dev.name, sizeof(d->dev.name), "loopback%u", i);
        snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs-loopback%u", i);
        d->state = IBV_PORT_ACTIVE;
        d->failed = false;
        default_gids(d, i);
    }
}

void loopback_ibverbs_set_devices(int count) {
    pthread_mutex_lock(&lock);
    reset_devices(count);
    pthread_mutex_unlock(&lock);
}

void loopback_ibverbs_set_gids(int device, const struct ibv_gid_entry *gids, uint32_t count) {
    pthread_mutex_lock(&lock);
    if (device >= 0 && device < LOOPBACK_IBVERBS_DEVICES_MAX && count <= LOOPBACK_IBVERBS_GIDS_MAX) {
        memcpy(devices[device].gids, gids, count * sizeof(*gids));
        devices[device].gid_count = count;
    }
    pthread_mutex_unlock(&lock);
}

void loopback_ibverbs_set_port_state(int device, enum ibv_port_state state) {
    pthread_mutex_lock(&lock);
    if (device >= 0 && device < LOOPBACK_IBVERBS_DEVICES_MAX) devices[device].state = state;
    pthread_mutex_unlock(&lock);
}

void loopback_ibverbs_fail_device(int device) {
    pthread_mutex_lock(&lock);
    if (device >= 0 && device < LOOPBACK_IBVERBS_DEVICES_MAX) devices[device].failed = true;
    pthread_mutex_unlock(&lock);
}

/* The device of a context (contexts point at devices[i].dev, its first field). */
static struct lb_device *device_of(const struct ibv_context *ctx) {
    return (struct lb_device *)(void *)ctx->device;
}

struct loopback_ibverbs_counts loopback_ibverbs_counts(void) {
    pthread_mutex_lock(&lock);
    struct loopback_ibverbs_counts c = counts;
    c.contexts = contexts;
    for (struct lb_pd *p = pds; p != NULL; p = p->next) c.pds++;
    for (struct lb_mr *m = mrs; m != NULL; m = m->next) c.mrs++;
    for (struct lb_cq *q = cqs; q != NULL; q = q->next) c.cqs++;
    for (struct lb_qp *q = qps; q != NULL; q = q->next) c.qps++;
    pthread_mutex_unlock(&lock);
    return c;
}

static int fail(int err) {
    pthread_mutex_unlock(&lock);
    errno = err;
    return err;
}

static void *fail_null(int err) {
    pthread_mutex_unlock(&lock);
    errno = err;
    return NULL;
}

/* ---- devices and contexts ---------------------------------------------- */

struct ibv_device **ibv_get_device_list(int *num_devices) {
    pthread_mutex_lock(&lock);
    if (device_count <= 0) return fail_null(ENOSYS); /* as on a host without RDMA */
    if (devices[0].dev.name[0] == '\0') reset_devices(device_count); /* first use */
    struct ibv_device **list = calloc((size_t)device_count + 1, sizeof(*list));
    if (list == NULL) return fail_null(ENOMEM);
    for (int i = 0; i < device_count; i++) list[i] = &devices[i].dev;
    if (num_devices != NULL) *num_devices = device_count;
    pthread_mutex_unlock(&lock);
    return list;
}

void ibv_free_device_list(struct ibv_device **list) { free(list); }

const char *ibv_get_device_name(struct ibv_device *dev) { return dev->name; }

static int lb_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int lb_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);

struct ibv_context *ibv_open_device(struct ibv_device *dev) {
    pthread_mutex_lock(&lock);
    bool known = false;
    for (int i = 0; i < device_count; i++) known |= dev == &devices[i].dev;
    if (!known) return fail_null(ENODEV);
    struct ibv_context *ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) return fail_null(ENOMEM);
    ctx->device = dev;
    ctx->ops.post_send = lb_post_send;
    ctx->ops.poll_cq = lb_poll_cq;
    ctx->cmd_fd = ctx->async_fd = -1;
    ctx->num_comp_vectors = 1;
    ctx->abi_compat = NULL; /* not an extended context: ibv_query_port calls the compat entry */
    pthread_mutex_init(&ctx->mutex, NULL);
    contexts++;
    pthread_mutex_unlock(&lock);
    return ctx;
}

int ibv_close_device(struct ibv_context *ctx) {
    pthread_mutex_lock(&lock);
    for (struct lb_pd *p = pds; p != NULL; p = p->next)
        if (p->pd.context == ctx) return fail(EBUSY);
    for (struct lb_cq *q = cqs; q != NULL; q = q->next)
        if (q->cq.context == ctx) return fail(EBUSY);
    pthread_mutex_destroy(&ctx->mutex);
    free(ctx);
    contexts--;
    pthread_mutex_unlock(&lock);
    return 0;
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr) {
    (void)ctx;
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->fw_ver, sizeof(attr->fw_ver), "loopback");
    attr->max_mr_size = UINT64_MAX;
    attr->max_qp = 1 << 16;
    attr->max_qp_wr = MAX_QP_WR;
    attr->max_sge = MAX_SGE;
    attr->max_cq = 1 << 16;
    attr->max_cqe = MAX_CQE;
    attr->max_mr = 1 << 16;
    attr->max_pd = 1 << 16;
    attr->max_qp_rd_atom = MAX_RD_ATOM;
    attr->max_qp_init_rd_atom = MAX_RD_ATOM;
    attr->phys_port_cnt = 1;
    return 0;
}

/* The compat entry point that the inline ___ibv_query_port calls for a
 * context that is not extended (ours): the caller passes a whole, zeroed
 * struct ibv_port_attr. */
int(ibv_query_port)(struct ibv_context *ctx, uint8_t port_num, struct _compat_ibv_port_attr *out) {
    if (port_num != 1) return errno = EINVAL;
    struct ibv_port_attr *attr = (struct ibv_port_attr *)out;
    pthread_mutex_lock(&lock);
    attr->state = device_of(ctx)->state;
    attr->gid_tbl_len = (int)device_of(ctx)->gid_count;
    pthread_mutex_unlock(&lock);
    attr->max_mtu = IBV_MTU_4096;
    attr->active_mtu = PORT_MTU;
    attr->max_msg_sz = (uint32_t)MESSAGE_MAX;
    attr->pkey_tbl_len = 1;
    attr->lid = 0; /* RoCE: routed by GID */
    attr->link_layer = IBV_LINK_LAYER_ETHERNET;
    return 0;
}

static bool gid_empty(const union ibv_gid *gid) {
    static const union ibv_gid zero;
    return memcmp(gid->raw, zero.raw, 16) == 0;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port_num, int index, union ibv_gid *gid) {
    pthread_mutex_lock(&lock);
    const struct lb_device *d = device_of(ctx);
    if (port_num != 1 || index < 0 || (uint32_t)index >= d->gid_count) return fail(EINVAL), -1;
    *gid = d->gids[index].gid; /* an empty entry reads as zeros, as on a real port */
    pthread_mutex_unlock(&lock);
    return 0;
}

/* What the inline ibv_query_gid_ex calls: an empty entry is ENODATA, as in
 * rdma-core. */
int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port_num, uint32_t gid_index,
                      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size) {
    pthread_mutex_lock(&lock);
    const struct lb_device *d = device_of(ctx);
    if (port_num != 1 || flags != 0 || entry_size < sizeof(*entry) || gid_index >= d->gid_count)
        return fail(EINVAL);
    if (gid_empty(&d->gids[gid_index].gid)) return fail(ENODATA);
    *entry = d->gids[gid_index];
    pthread_mutex_unlock(&lock);
    return 0;
}

const char *ibv_port_state_str(enum ibv_port_state state) {
    switch (state) {
    case IBV_PORT_DOWN: return "PORT_DOWN";
    case IBV_PORT_INIT: return "PORT_INIT";
    case IBV_PORT_ARMED: return "PORT_ARMED";
    case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
    default: return "invalid state";
    }
}

const char *ibv_wc_status_str(enum ibv_wc_status status) {
    switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    default: return "unknown";
    }
}

/* ---- protection domains and memory regions ----------------------------- */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx) {
    pthread_mutex_lock(&lock);
    struct lb_pd *p = calloc(1, sizeof(*p));
    if (p == NULL) return fail_null(ENOMEM);
    p->pd.context = ctx;
    p->next = pds;
    pds = p;
    pthread_mutex_unlock(&lock);
    return &p->pd;
}

static struct lb_pd *find_pd(struct ibv_pd *pd) {
    for (struct lb_pd *p = pds; p != NULL; p = p->next)
        if (&p->pd == pd) return p;
    return NULL;
}

int ibv_dealloc_pd(struct ibv_pd *pd) {
    pthread_mutex_lock(&lock);
    struct lb_pd **at = &pds;
    while (*at != NULL && &(*at)->pd != pd) at = &(*at)->next;
    if (*at == NULL) return fail(EINVAL);
    if ((*at)->mrs > 0 || (*at)->qps > 0) return fail(EBUSY);
    struct lb_pd *p = *at;
    *at = p->next;
    free(p);
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Every page of [addr, addr + len) mapped, as ibv_reg_mr's pinning needs. */
static bool mapped(void *addr, size_t len) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr & ~(uintptr_t)(page - 1);
    size_t span = (uintptr_t)addr + len - start;
    unsigned char *vec = malloc(span / (size_t)page + 1);
    bool ok = vec != NULL && mincore((void *)start, span, vec) == 0;
    free(vec);
    return ok;
}

struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access) {
    pthread_mutex_lock(&lock);
    struct lb_pd *p = find_pd(pd);
    if (p == NULL || addr == NULL || length == 0) return fail_null(EINVAL);
    if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))
        return fail_null(EINVAL);
    if (!mapped(addr, length)) return fail_null(EFAULT);
    struct lb_mr *m = calloc(1, sizeof(*m));
    if (m == NULL) return fail_null(ENOMEM);
    m->mr = (struct ibv_mr){.context = pd->context, .pd = pd, .addr = addr, .length = length,
                            .handle = next_key, .lkey = 0x1000u + next_key,
                            .rkey = 0x40000000u + next_key};
    next_key++; /* never reused: a stale key stays invalid */
    m->access = access;
    m->next = mrs;
    mrs = m;
    p->mrs++;
    pthread_mutex_unlock(&lock);
    return &m->mr;
}

int ibv_dereg_mr(struct ibv_mr *mr) {
    pthread_mutex_lock(&lock);
    struct lb_mr **at = &mrs;
    while (*at != NULL && &(*at)->mr != mr) at = &(*at)->next;
    if (*at == NULL) return fail(EINVAL);
    struct lb_mr *m = *at;
    *at = m->next;
    find_pd(m->mr.pd)->mrs--;
    free(m);
    pthread_mutex_unlock(&lock);
    return 0;
}

static struct lb_mr *find_key(uint32_t key, bool remote) {
    for (struct lb_mr *m = mrs; m != NULL; m = m->next)
        if ((remote ? m->mr.rkey : m->mr.lkey) == key) return m;
    return NULL;
}

static bool inside(const struct lb_mr *m, uint64_t addr, uint64_t len) {
    uint64_t base = (uintptr_t)m->mr.addr;
    return addr >= base && addr - base <= m->mr.length && len <= m->mr.length - (addr - base);
}

/* ---- completion queues and queue pairs --------------------------------- */

struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                             struct ibv_comp_channel *channel, int comp_vector) {
    (void)comp_vector;
    pthread_mutex_lock(&lock);
    if (cqe < 1 || cqe > MAX_CQE || channel != NULL) return fail_null(EINVAL);
    struct lb_cq *q = calloc(1, sizeof(*q));
    if (q == NULL) return fail_null(ENOMEM);
    q->cq.context = ctx;
    q->cq.cq_context = cq_context;
    q->cq.cqe = cqe;
    q->next = cqs;
    cqs = q;
    pthread_mutex_unlock(&lock);
    return &q->cq;
}

static struct lb_cq *find_cq(struct ibv_cq *cq) {
    for (struct lb_cq *q = cqs; q != NULL; q = q->next)
        if (&q->cq == cq) return q;
    return NULL;
}

int ibv_destroy_cq(struct ibv_cq *cq) {
    pthread_mutex_lock(&lock);
    struct lb_cq **at = &cqs;
    while (*at != NULL && &(*at)->cq != cq) at = &(*at)->next;
    if (*at == NULL) return fail(EINVAL);
    if ((*at)->qps > 0) return fail(EBUSY);
    struct lb_cq *q = *at;
    *at = q->next;
    free(q);
    pthread_mutex_unlock(&lock);
    return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init) {
    pthread_mutex_lock(&lock);
    struct lb_pd *p = find_pd(pd);
    struct lb_cq *scq = find_cq(init->send_cq), *rcq = find_cq(init->recv_cq);
    if (p == NULL || scq == NULL || rcq == NULL || init->qp_type != IBV_QPT_RC ||
        init->srq != NULL || init->cap.max_send_wr < 1 || init->cap.max_send_wr > MAX_QP_WR ||
        init->cap.max_send_sge > MAX_SGE || init->cap.max_recv_sge > MAX_SGE)
        return fail_null(EINVAL);
    struct lb_qp *q = calloc(1, sizeof(*q));
    struct lb_wr *ring = calloc(init->cap.max_send_wr, sizeof(*ring));
    if (q == NULL || ring == NULL) {
        free(q);
        free(ring);
        return fail_null(ENOMEM);
    }
    q->ring = ring;
    q->max_send_wr = init->cap.max_send_wr;
    q->max_send_sge = init->cap.max_send_sge;
    q->qp = (struct ibv_qp){.context = pd->context, .qp_context = init->qp_context, .pd = pd,
                            .send_cq = init->send_cq, .recv_cq = init->recv_cq,
                            .qp_num = next_qpn++ & PSN_MASK, .state = IBV_QPS_RESET,
                            .qp_type = IBV_QPT_RC};
    q->next = qps;
    qps = q;
    p->qps++;
    scq->qps++;
    if (rcq != scq) rcq->qps++;
    pthread_mutex_unlock(&lock);
    return &q->qp;
}

static struct lb_qp *find_qp(struct ibv_qp *qp) {
    for (struct lb_qp *q = qps; q != NULL; q = q->next)
        if (&q->qp == qp) return q;
    return NULL;
}

static struct lb_qp *find_qpn(uint32_t qpn) {
    for (struct lb_qp *q = qps; q != NULL; q = q->next)
        if (q->qp.qp_num == qpn) return q;
    return NULL;
}

int ibv_destroy_qp(struct ibv_qp *qp) {
    pthread_mutex_lock(&lock);
    struct lb_qp **at = &qps;
    while (*at != NULL && &(*at)->qp != qp) at = &(*at)->next;
    if (*at == NULL) return fail(EINVAL);
    struct lb_qp *q = *at;
    *at = q->next; /* its queued requests vanish with it, as on an HCA */
    find_pd(q->qp.pd)->qps--;
    find_cq(q->qp.send_cq)->qps--;
    if (q->qp.recv_cq != q->qp.send_cq) find_cq(q->qp.recv_cq)->qps--;
    free(q->ring);
    free(q);
    pthread_mutex_unlock(&lock);
    return 0;
}

static bool has(int mask, int required) { return (mask & required) == required; }

static int to_init(struct lb_qp *q, const struct ibv_qp_attr *a, int mask) {
    if (!has(mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
        a->port_num != 1 || a->pkey_index != 0)
        return EINVAL;
    q->access = (int)a->qp_access_flags;
    return 0;
}

static int to_rtr(struct lb_qp *q, const struct ibv_qp_attr *a, int mask) {
    if (!has(mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return EINVAL;
    const struct lb_device *d = device_of(q->qp.context);
    uint8_t sgid = a->ah_attr.grh.sgid_index;
    if (a->path_mtu < IBV_MTU_256 || a->path_mtu > PORT_MTU || a->dest_qp_num > PSN_MASK ||
        a->rq_psn > PSN_MASK || a->max_dest_rd_atomic > MAX_RD_ATOM ||
        a->ah_attr.port_num != 1 ||
        (a->ah_attr.is_global && (sgid >= d->gid_count || gid_empty(&d->gids[sgid].gid))))
        return EINVAL; /* the source GID must be a live entry of the port */
    q->ah = a->ah_attr;
    q->path_mtu = a->path_mtu;
    q->dest_qp_num = a->dest_qp_num;
    q->rq_psn = a->rq_psn;
    q->max_dest_rd_atomic = a->max_dest_rd_atomic;
    return 0;
}

static int to_rts(struct lb_qp *q, const struct ibv_qp_attr *a, int mask) {
    if (!has(mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        return EINVAL;
    if (a->sq_psn > PSN_MASK || a->max_rd_atomic > MAX_RD_ATOM || a->retry_cnt > 7 ||
        a->rnr_retry > 7 || a->timeout > 31)
        return EINVAL;
    q->sq_psn = a->sq_psn;
    q->max_rd_atomic = a->max_rd_atomic;
    return 0;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
    pthread_mutex_lock(&lock);
    struct lb_qp *q = find_qp(qp);
    if (q == NULL || !(mask & IBV_QP_STATE)) return fail(EINVAL);
    enum ibv_qp_state from = q->qp.state, to = attr->qp_state;
    int rc = EINVAL;
    if (to == IBV_QPS_ERR || to == IBV_QPS_RESET) rc = 0;
    else if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) rc = to_init(q, attr, mask);
    else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) rc = to_rtr(q, attr, mask);
    else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) rc = to_rts(q, attr, mask);
    if (rc != 0) return fail(rc);
    q->qp.state = to;
    if (to == IBV_QPS_RESET) q->head = q->count = 0;
    pthread_mutex_unlock(&lock);
    return 0;
}

/* ---- posting and completing -------------------------------------------- */

/* Requests queued on QPs whose send CQ is cq: a real CQ would hold their
 * completions by now, so they count against its depth. */
static uint32_t pending_on(const struct ibv_cq *cq) {
    uint32_t n = 0;
    for (struct lb_qp *q = qps; q != NULL; q = q->next)
        if (q->qp.send_cq == cq) n += q->count;
    return n;
}

static int lb_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
    pthread_mutex_lock(&lock);
    struct lb_qp *q = find_qp(qp);
    for (; wr != NULL; wr = wr->next) {
        int err = 0;
        if (q == NULL || q->qp.state == IBV_QPS_RESET || q->qp.state == IBV_QPS_INIT ||
            q->qp.state == IBV_QPS_RTR)
            err = EINVAL;
        else if (wr->opcode != IBV_WR_RDMA_READ && wr->opcode != IBV_WR_RDMA_WRITE)
            err = EINVAL;
        else if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->max_send_sge)
            err = EINVAL;
        else if (q->count >= q->max_send_wr)
            err = ENOMEM;
        if (err != 0) {
            *bad = wr;
            return fail(err);
        }
        if (pending_on(qp->send_cq) + 1 > (uint32_t)qp->send_cq->cqe) {
            fprintf(stderr, "loopback_ibverbs: CQ overrun (depth %d): the QP goes to error\n",
                    qp->send_cq->cqe);
            q->qp.state = IBV_QPS_ERR;
        }
        struct lb_wr *w = &q->ring[(q->head + q->count++) % q->max_send_wr];
        *w = (struct lb_wr){.wr_id = wr->wr_id, .seq = next_seq++, .opcode = wr->opcode,
                            .signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0,
                            .num_sge = wr->num_sge, .remote_addr = wr->wr.rdma.remote_addr,
                            .rkey = wr->wr.rdma.rkey};
        memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*w->sge));
        if ((uint32_t)wr->num_sge > counts.max_sge_seen) counts.max_sge_seen = (uint32_t)wr->num_sge;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

static uint32_t mtu_bytes(enum ibv_mtu mtu) { return 128u << mtu; }

/* A packet from `from` reaches `to`: routed by GID (the ports have LID 0,
 * so a path without a GRH reaches nothing), the destination GID is a live
 * entry of to's port of the same type as the source GID, and to's own path
 * uses that type too (RoCE v1 and v2 are different encapsulations: a QP set
 * up for one does not take the other's packets), and neither link has
 * failed. */
static bool reaches(const struct lb_qp *from, const struct lb_qp *to) {
    const struct lb_device *src = device_of(from->qp.context), *dst = device_of(to->qp.context);
    if (!from->ah.is_global || !to->ah.is_global || src->failed || dst->failed) return false;
    const struct ibv_gid_entry *sgid = &src->gids[from->ah.grh.sgid_index];
    if (dst->gids[to->ah.grh.sgid_index].gid_type != sgid->gid_type) return false;
    for (uint32_t i = 0; i < dst->gid_count; i++) {
        const struct ibv_gid_entry *e = &dst->gids[i];
        if (!gid_empty(&e->gid) && e->gid_type == sgid->gid_type &&
            memcmp(e->gid.raw, from->ah.grh.dgid.raw, 16) == 0)
            return true; /* a port has the same address as v1 and as v2 entries */
    }
    return false;
}

/* Checks the local gather list; returns its length or -1 (protection error). */
static int64_t local_length(const struct lb_qp *q, const struct lb_wr *w) {
    uint64_t total = 0;
    for (int i = 0; i < w->num_sge; i++) {
        const struct lb_mr *m = find_key(w->sge[i].lkey, false);
        if (m == NULL || m->mr.pd != q->qp.pd || !inside(m, w->sge[i].addr, w->sge[i].length))
            return -1;
        if (w->opcode == IBV_WR_RDMA_READ && !(m->access & IBV_ACCESS_LOCAL_WRITE)) return -1;
        total += w->sge[i].length;
    }
    return (int64_t)total;
}

static enum ibv_wc_status execute(struct lb_qp *q, const struct lb_wr *w) {
    if (q->qp.state == IBV_QPS_ERR) {
        counts.flushed++;
        return IBV_WC_WR_FLUSH_ERR;
    }
    int64_t total = local_length(q, w);
    if (total < 0) return IBV_WC_LOC_PROT_ERR;
    if ((uint64_t)total > MESSAGE_MAX) return IBV_WC_LOC_LEN_ERR;
    struct lb_qp *r = find_qpn(q->dest_qp_num);
    if (r == NULL || (r->qp.state != IBV_QPS_RTR && r->qp.state != IBV_QPS_RTS) ||
        r->dest_qp_num != q->qp.qp_num || !reaches(q, r) || q->sq_psn != r->rq_psn)
        return IBV_WC_RETRY_EXC_ERR;
    uint32_t packets = (uint32_t)(((uint64_t)total + mtu_bytes(q->path_mtu) - 1) /
                                  mtu_bytes(q->path_mtu));
    if (packets == 0) packets = 1;
    q->sq_psn = (q->sq_psn + packets) & PSN_MASK;
    r->rq_psn = (r->rq_psn + packets) & PSN_MASK;
    bool write = w->opcode == IBV_WR_RDMA_WRITE;
    if (!write && (q->max_rd_atomic == 0 || r->max_dest_rd_atomic == 0))
        return IBV_WC_REM_INV_REQ_ERR;
    int need = write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
    const struct lb_mr *m = find_key(w->rkey, true);
    if (m == NULL || m->mr.pd != r->qp.pd || !inside(m, w->remote_addr, (uint64_t)total) ||
        !(m->access & need) || !(r->access & need))
        return IBV_WC_REM_ACCESS_ERR;
    uint8_t *remote = (uint8_t *)(uintptr_t)w->remote_addr;
    for (int i = 0; i < w->num_sge; i++) {
        void *local = (void *)(uintptr_t)w->sge[i].addr;
        if (write) memcpy(remote, local, w->sge[i].length);
        else memcpy(local, remote, w->sge[i].length);
        remote += w->sge[i].length;
    }
    if (write) counts.writes++;
    else counts.reads++;
    counts.bytes += (uint64_t)total;
    ptrdiff_t d = device_of(q->qp.context) - devices;
    counts.device_wrs[d]++;
    counts.device_bytes[d] += (uint64_t)total;
    return IBV_WC_SUCCESS;
}

/* The QP on cq with the oldest queued request. */
static struct lb_qp *oldest(const struct ibv_cq *cq) {
    struct lb_qp *best = NULL;
    for (struct lb_qp *q = qps; q != NULL; q = q->next)
        if (q->qp.send_cq == cq && q->count > 0 &&
            (best == NULL || q->ring[q->head].seq < best->ring[best->head].seq))
            best = q;
    return best;
}

static int lb_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc) {
    pthread_mutex_lock(&lock);
    if (find_cq(cq) == NULL) return fail(EINVAL), -1;
    int got = 0;
    struct lb_qp *q;
    while (got < num_entries && (q = oldest(cq)) != NULL) {
        struct lb_wr w = q->ring[q->head];
        q->head = (q->head + 1) % q->max_send_wr;
        q->count--;
        enum ibv_wc_status status = execute(q, &w);
        if (status != IBV_WC_SUCCESS) {
            counts.errors++;
            q->qp.state = IBV_QPS_ERR;
        }
        if (status == IBV_WC_SUCCESS && !w.signaled) continue;
        uint32_t len = 0;
        for (int i = 0; i < w.num_sge; i++) len += w.sge[i].length;
        wc[got++] = (struct ibv_wc){
            .wr_id = w.wr_id, .status = status, .qp_num = q->qp.qp_num,
            .opcode = w.opcode == IBV_WR_RDMA_WRITE ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ,
            .byte_len = status == IBV_WC_SUCCESS ? len : 0};
    }
    pthread_mutex_unlock(&lock);
    return got;
}

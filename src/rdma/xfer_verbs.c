/* The verbs transport's device side: libibverbs RC QPs and one-sided RDMA
 * READ/WRITE (pure parts in xfer_verbs_plan.c, design in xfer_verbs.h).
 *
 * A device is a context and one protection domain, opened once per server or
 * client; memory regions are registered on that PD once (a segment at
 * register, a client buffer at cr_xfer_client_register).  A QP set belongs
 * to one peer connection: a CQ shared by its QPs and qp_count RC QPs on the
 * device's PD, so the peer's rkeys and our lkeys work on every QP.
 * Connecting follows the RC state machine: RESET -> INIT (port, access flags)
 * -> RTR (peer's QPN, PSN, LID/GID, MTU) -> RTS (our PSN, timeouts).  Each
 * stripe of an op is one signalled work request; at most send_depth are
 * outstanding per QP.
 *
 * Not run on hardware in this repository's CI: the machines have no RDMA
 * device (ibv_get_device_list fails with ENOSYS) and no SoftRoCE.  The test
 * double tests/unit/loopback_ibverbs.c runs this file in one process. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <infiniband/verbs.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer_verbs.h"

#define MAX_RD_ATOMIC 16u /* RDMA READs in flight per QP, each way (clamped to the device) */
#define MAX_SGE CR_XFER_VERBS_QPS_MAX /* = CR_XFER_OP_IOV_MAX: an op's whole gather list */
#define MESSAGE_MAX_BYTES (UINT64_C(1) << 31) /* an RC message's limit */
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)
#define GID_SCAN_MAX 256u /* GID table entries read when picking one */

struct cr_xfer_verbs_device {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    uint8_t port;
    int gid_index;       /* asked for (-1: pick), then the one chosen */
    uint8_t rd_atomic;   /* min(MAX_RD_ATOMIC, the device's limits) */
    uint32_t max_sge;    /* send SGEs per work request, min(MAX_SGE, device) */
    enum ibv_mtu mtu;
    uint16_t lid;
    union ibv_gid gid;
    char name[96];
};

/* QP i is on devs[i % dev_count] and completes on that device's CQ. */
struct cr_xfer_verbs {
    struct cr_xfer_verbs_device *devs[CR_XFER_VERBS_DEVICES_MAX];
    struct ibv_cq *cqs[CR_XFER_VERBS_DEVICES_MAX];
    uint32_t dev_count;
    uint32_t peer_devices; /* the peer's device count (its QP i on its device i % it) */
    uint32_t qp_count;
    uint32_t send_depth;
    uint32_t next_qp;      /* round robin over the live QPs */
    uint32_t outstanding_total;
    uint32_t live;         /* QPs not failed */
    bool failed[CR_XFER_VERBS_QPS_MAX];
    struct ibv_qp *qps[CR_XFER_VERBS_QPS_MAX];
    uint32_t psn[CR_XFER_VERBS_QPS_MAX];
    uint32_t outstanding[CR_XFER_VERBS_QPS_MAX];
};

static int fail(char *why, size_t size, const char *call, int err) {
    snprintf(why, size, "%s failed: %s", call, strerror(err ? err : EIO));
    return CR_ERR_IO;
}

uint32_t cr_xfer_verbs_probe(char *why, size_t why_size) {
    int count = 0;
    errno = 0;
    struct ibv_device **list = ibv_get_device_list(&count);
    if (list == NULL) {
        snprintf(why, why_size, "no RDMA device (ibv_get_device_list: %s)",
                 strerror(errno ? errno : ENODEV));
        return 0;
    }
    ibv_free_device_list(list);
    if (count <= 0) snprintf(why, why_size, "no RDMA device (ibv_get_device_list found none)");
    return count > 0 ? (uint32_t)count : 0;
}

/* The GID the QPs route by: gid_index as asked (it must be a live entry),
 * or picked by type from the live entries (cr_xfer_verbs_pick_gid).
 * ibv_query_gid_ex answers ENODATA for an empty entry. */
static int choose_gid(struct cr_xfer_verbs_device *dev, uint32_t table_len, bool ethernet,
                      char *why, size_t size) {
    struct cr_xfer_verbs_gid table[GID_SCAN_MAX]; /* 6 KiB */
    struct cr_xfer_verbs_gid *chosen = &table[0];
    const char *rule = "asked for";
    struct ibv_gid_entry e;
    if (dev->gid_index >= 0) {
        if ((uint32_t)dev->gid_index >= table_len ||
            ibv_query_gid_ex(dev->ctx, dev->port, (uint32_t)dev->gid_index, &e, 0) != 0) {
            snprintf(why, size, "GID index %d of %s is not a live entry (its table has %u; "
                     "choose another, or let it pick: auto)", dev->gid_index, dev->name, table_len);
            return CR_ERR_INVALID_PARAMS;
        }
        *chosen = (struct cr_xfer_verbs_gid){.index = e.gid_index, .type = e.gid_type};
        memcpy(chosen->raw, e.gid.raw, 16);
    } else {
        uint32_t n = 0;
        for (uint32_t i = 0; i < table_len && i < GID_SCAN_MAX; i++) {
            if (ibv_query_gid_ex(dev->ctx, dev->port, i, &e, 0) != 0) continue;
            table[n] = (struct cr_xfer_verbs_gid){.index = i, .type = e.gid_type};
            memcpy(table[n++].raw, e.gid.raw, 16);
        }
        int k = cr_xfer_verbs_pick_gid(table, n, ethernet, &rule);
        if (k < 0) {
            snprintf(why, size, "%s has no live GID (%u table entries read)", dev->name, table_len);
            return CR_ERR_IO;
        }
        chosen = &table[k];
    }
    dev->gid_index = (int)chosen->index;
    memcpy(dev->gid.raw, chosen->raw, 16);
    char text[80];
    cr_xfer_verbs_gid_describe(chosen, text, sizeof(text));
    CR_INFO("xfer", "%s: GID index %u (%s; %s)", dev->name, chosen->index, text, rule);
    return CR_OK;
}

/* Port, GID and the device limits the QPs are sized by. */
static int query_device(struct cr_xfer_verbs_device *dev, char *why, size_t size) {
    struct ibv_device_attr attr;
    if (ibv_query_device(dev->ctx, &attr) != 0) return fail(why, size, "ibv_query_device", errno);
    if (dev->port > attr.phys_port_cnt) {
        snprintf(why, size, "%s has %u port(s), port %u asked", dev->name, attr.phys_port_cnt,
                 dev->port);
        return CR_ERR_INVALID_PARAMS;
    }
    int rd = attr.max_qp_rd_atom < attr.max_qp_init_rd_atom ? attr.max_qp_rd_atom
                                                            : attr.max_qp_init_rd_atom;
    dev->rd_atomic = (uint8_t)(rd < 1 ? 1 : rd > (int)MAX_RD_ATOMIC ? (int)MAX_RD_ATOMIC : rd);
    dev->max_sge = attr.max_sge < 1 ? 1 : attr.max_sge > (int)MAX_SGE ? MAX_SGE : (uint32_t)attr.max_sge;
    struct ibv_port_attr port;
    if (ibv_query_port(dev->ctx, dev->port, &port) != 0)
        return fail(why, size, "ibv_query_port", errno);
    if (port.state != IBV_PORT_ACTIVE) {
        snprintf(why, size, "%s is not active (%s)", dev->name, ibv_port_state_str(port.state));
        return CR_ERR_INVALID_PARAMS;
    }
    dev->lid = port.lid;
    dev->mtu = port.active_mtu;
    return choose_gid(dev, port.gid_tbl_len < 0 ? 0 : (uint32_t)port.gid_tbl_len,
                      port.link_layer == IBV_LINK_LAYER_ETHERNET, why, size);
}

int cr_xfer_verbs_device_open(uint32_t device_index, uint8_t port, int gid_index,
                              struct cr_xfer_verbs_device **out, char *why, size_t why_size) {
    assert(out != NULL);
    *out = NULL;
    if (port == 0) {
        snprintf(why, why_size, "RDMA port numbers start at 1");
        return CR_ERR_INVALID_PARAMS;
    }
    int count = 0;
    struct ibv_device **list = ibv_get_device_list(&count);
    if (list == NULL) return fail(why, why_size, "ibv_get_device_list", errno);
    if (device_index >= (uint32_t)count) {
        ibv_free_device_list(list);
        snprintf(why, why_size, "RDMA device %u does not exist (%d found)", device_index, count);
        return CR_ERR_INVALID_PARAMS;
    }
    struct cr_xfer_verbs_device *dev = calloc(1, sizeof(*dev));
    if (dev == NULL) {
        ibv_free_device_list(list);
        return CR_ERR_NOMEM;
    }
    dev->port = port;
    dev->gid_index = gid_index;
    snprintf(dev->name, sizeof(dev->name), "%s port %u", ibv_get_device_name(list[device_index]),
             port);
    dev->ctx = ibv_open_device(list[device_index]);
    ibv_free_device_list(list);
    int rc = dev->ctx == NULL ? fail(why, why_size, "ibv_open_device", errno)
                              : query_device(dev, why, why_size);
    if (rc == CR_OK && (dev->pd = ibv_alloc_pd(dev->ctx)) == NULL)
        rc = fail(why, why_size, "ibv_alloc_pd", errno);
    if (rc != CR_OK) {
        cr_xfer_verbs_device_close(dev);
        return rc;
    }
    *out = dev;
    return CR_OK;
}

uint32_t cr_xfer_verbs_device_gid_index(const struct cr_xfer_verbs_device *dev) {
    assert(dev != NULL && dev->gid_index >= 0);
    return (uint32_t)dev->gid_index;
}

const char *cr_xfer_verbs_device_name(const struct cr_xfer_verbs_device *dev) {
    assert(dev != NULL);
    return dev->name;
}

void cr_xfer_verbs_device_close(struct cr_xfer_verbs_device *dev) {
    if (dev == NULL) return;
    if (dev->pd != NULL) ibv_dealloc_pd(dev->pd);
    if (dev->ctx != NULL) ibv_close_device(dev->ctx);
    free(dev);
}

int cr_xfer_verbs_register(struct cr_xfer_verbs_device *dev, void *addr, uint64_t len,
                           struct ibv_mr **out, uint32_t *lkey, uint32_t *rkey, char *why,
                           size_t why_size) {
    assert(dev != NULL && addr != NULL && len > 0 && out != NULL);
    *out = ibv_reg_mr(dev->pd, addr, len, ACCESS);
    if (*out == NULL) {
        int err = errno ? errno : EIO;
        snprintf(why, why_size, "ibv_reg_mr of %llu bytes on %s failed: %s%s",
                 (unsigned long long)len, dev->name, strerror(err),
                 err == ENOMEM || err == EPERM ? " (registration pins the memory: raise the "
                                                 "locked-memory limit, ulimit -l)"
                                               : "");
        return CR_ERR_IO;
    }
    *lkey = (*out)->lkey;
    *rkey = (*out)->rkey;
    return CR_OK;
}

void cr_xfer_verbs_deregister(struct ibv_mr *mr) {
    if (mr != NULL) ibv_dereg_mr(mr);
}

static int create_qp(struct cr_xfer_verbs *v, uint32_t i, char *why, size_t size) {
    struct cr_xfer_verbs_device *dev = v->devs[i % v->dev_count];
    struct ibv_cq *cq = v->cqs[i % v->dev_count];
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 0,
        .cap = {.max_send_wr = v->send_depth, .max_recv_wr = 1, .max_send_sge = dev->max_sge,
                .max_recv_sge = 1}};
    v->qps[i] = ibv_create_qp(dev->pd, &init);
    if (v->qps[i] == NULL) return fail(why, size, "ibv_create_qp", errno);
    struct ibv_qp_attr attr = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = dev->port,
                               .qp_access_flags = ACCESS};
    if (ibv_modify_qp(v->qps[i], &attr,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
        return fail(why, size, "ibv_modify_qp(INIT)", errno);
    uint32_t random = 0;
    if (getrandom(&random, sizeof(random), 0) != (ssize_t)sizeof(random)) random = i * 7919u;
    v->psn[i] = random & 0xffffffu;
    return CR_OK;
}

int cr_xfer_verbs_open(struct cr_xfer_verbs_device *const *devs, uint32_t dev_count,
                       uint32_t qp_count, uint32_t send_depth, struct cr_xfer_verbs **out,
                       char *why, size_t why_size) {
    assert(devs != NULL && out != NULL);
    *out = NULL;
    if (qp_count == 0 || qp_count > CR_XFER_VERBS_QPS_MAX || send_depth == 0 || dev_count == 0 ||
        dev_count > CR_XFER_VERBS_DEVICES_MAX) {
        snprintf(why, why_size, "qp_count must be 1..%u, devices 1..%u and send_depth >= 1",
                 CR_XFER_VERBS_QPS_MAX, CR_XFER_VERBS_DEVICES_MAX);
        return CR_ERR_INVALID_PARAMS;
    }
    struct cr_xfer_verbs *v = calloc(1, sizeof(*v));
    if (v == NULL) return CR_ERR_NOMEM;
    v->dev_count = dev_count < qp_count ? dev_count : qp_count; /* each device gets a QP */
    v->qp_count = v->live = qp_count;
    v->send_depth = send_depth;
    int rc = CR_OK;
    for (uint32_t d = 0; rc == CR_OK && d < v->dev_count; d++) {
        v->devs[d] = devs[d];
        uint32_t on_it = (qp_count - d + v->dev_count - 1) / v->dev_count; /* QPs d, d + n, .. */
        v->cqs[d] = ibv_create_cq(devs[d]->ctx, (int)(send_depth * on_it), NULL, NULL, 0);
        if (v->cqs[d] == NULL) rc = fail(why, why_size, "ibv_create_cq", errno);
    }
    for (uint32_t i = 0; rc == CR_OK && i < qp_count; i++) rc = create_qp(v, i, why, why_size);
    if (rc != CR_OK) {
        cr_xfer_verbs_close(v);
        return rc;
    }
    *out = v;
    return CR_OK;
}

void cr_xfer_verbs_local_hello(const struct cr_xfer_verbs *v, struct cr_xfer_verbs_hello *out) {
    memset(out, 0, sizeof(*out));
    out->qp_count = (uint8_t)v->qp_count;
    out->device_count = (uint8_t)v->dev_count;
    for (uint32_t d = 0; d < v->dev_count; d++) {
        const struct cr_xfer_verbs_device *dev = v->devs[d];
        out->devices[d] = (struct cr_xfer_verbs_port){.port = dev->port, .mtu = (uint8_t)dev->mtu,
                                                      .lid = dev->lid};
        memcpy(out->devices[d].gid, dev->gid.raw, 16);
    }
    for (uint32_t i = 0; i < v->qp_count; i++) {
        out->qpn[i] = v->qps[i]->qp_num;
        out->psn[i] = v->psn[i];
    }
}

static int to_rtr_rts(struct cr_xfer_verbs *v, uint32_t i, const struct cr_xfer_verbs_hello *peer,
                      char *why, size_t size) {
    const struct cr_xfer_verbs_device *dev = v->devs[i % v->dev_count];
    const struct cr_xfer_verbs_port *to = &peer->devices[i % peer->device_count];
    struct ibv_qp_attr attr = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = (enum ibv_mtu)(to->mtu < (uint8_t)dev->mtu ? to->mtu : (uint8_t)dev->mtu),
        .dest_qp_num = peer->qpn[i], .rq_psn = peer->psn[i],
        .max_dest_rd_atomic = dev->rd_atomic, .min_rnr_timer = 12,
        .ah_attr = {.dlid = to->lid, .sl = 0, .src_path_bits = 0, .port_num = dev->port}};
    if (to->lid == 0) { /* RoCE: route by GID */
        attr.ah_attr.is_global = 1;
        memcpy(attr.ah_attr.grh.dgid.raw, to->gid, 16);
        attr.ah_attr.grh.sgid_index = (uint8_t)dev->gid_index;
        attr.ah_attr.grh.hop_limit = 64;
    }
    if (ibv_modify_qp(v->qps[i], &attr,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                          IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        return fail(why, size, "ibv_modify_qp(RTR)", errno);
    struct ibv_qp_attr rts = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
                              .rnr_retry = 7, .sq_psn = v->psn[i],
                              .max_rd_atomic = dev->rd_atomic};
    if (ibv_modify_qp(v->qps[i], &rts,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        return fail(why, size, "ibv_modify_qp(RTS)", errno);
    return CR_OK;
}

int cr_xfer_verbs_connect(struct cr_xfer_verbs *v, const struct cr_xfer_verbs_hello *peer,
                          char *why, size_t why_size) {
    assert(v != NULL && peer != NULL && peer->device_count >= 1);
    if (peer->qp_count < v->qp_count) {
        snprintf(why, why_size, "peer offers %u QPs, %u needed", peer->qp_count, v->qp_count);
        return CR_ERR_INVALID_PARAMS;
    }
    v->peer_devices = peer->device_count;
    for (uint32_t i = 0; i < v->qp_count; i++) {
        int rc = to_rtr_rts(v, i, peer, why, why_size);
        if (rc != CR_OK) return rc;
    }
    return CR_OK;
}

/* The gather list of bytes [offset, offset + length) of the op's local
 * ranges, with the lkeys of device `dev`.  Returns the entries used, or
 * max + 1 when more are needed. */
static uint32_t slice(const struct cr_xfer_verbs_local *local, uint32_t count, uint32_t dev,
                      uint64_t offset, uint64_t length, struct ibv_sge *out, uint32_t max) {
    uint32_t used = 0;
    for (uint32_t i = 0; i < count && length > 0; i++) {
        if (offset >= local[i].length) {
            offset -= local[i].length;
            continue;
        }
        if (used == max) return max + 1;
        uint64_t take = local[i].length - offset < length ? local[i].length - offset : length;
        out[used++] = (struct ibv_sge){.addr = (uintptr_t)local[i].addr + offset,
                                       .length = (uint32_t)take, .lkey = local[i].lkey[dev]};
        length -= take;
        offset = 0;
    }
    assert(length == 0);
    return used;
}

int cr_xfer_verbs_post(struct cr_xfer_verbs *v, bool write, const struct cr_xfer_verbs_local *local,
                       uint32_t count, uint64_t remote_addr, const uint32_t *rkey, uint64_t length,
                       uint64_t wr_id, uint32_t *posted) {
    assert(v != NULL && local != NULL && count >= 1 && count <= MAX_SGE && length > 0);
    *posted = 0;
    uint32_t peer_devices = v->peer_devices > 0 ? v->peer_devices : 1; /* 0: not connected */
    if (v->live == 0) return CR_ERR_IO;
    uint32_t live[CR_XFER_VERBS_QPS_MAX], n_live = 0;
    for (uint32_t q = 0; q < v->qp_count; q++)
        if (!v->failed[q]) live[n_live++] = q;
    assert(n_live == v->live);
    struct cr_xfer_stripe stripes[CR_XFER_VERBS_QPS_MAX];
    struct ibv_sge sges[CR_XFER_VERBS_QPS_MAX][MAX_SGE];
    uint32_t sge_count[CR_XFER_VERBS_QPS_MAX];
    uint32_t next = v->next_qp % n_live;
    uint32_t devices = v->dev_count < n_live ? v->dev_count : n_live;
    uint32_t n = cr_xfer_verbs_plan(length, n_live, devices, &next, stripes, CR_XFER_VERBS_QPS_MAX);
    /* Check every stripe before posting any: an op is posted whole or not at all. */
    for (uint32_t k = 0; k < n; k++) {
        uint32_t q = stripes[k].qp = live[stripes[k].qp];
        const struct cr_xfer_verbs_device *dev = v->devs[q % v->dev_count];
        if (stripes[k].length > MESSAGE_MAX_BYTES) return CR_ERR_INVALID_PARAMS;
        if (v->outstanding[q] >= v->send_depth) return CR_ERR_AGAIN;
        sge_count[k] = slice(local, count, q % v->dev_count, stripes[k].offset, stripes[k].length,
                             sges[k], dev->max_sge);
        if (sge_count[k] > dev->max_sge) return CR_ERR_INVALID_PARAMS;
    }
    v->next_qp = next;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t q = stripes[k].qp;
        struct ibv_send_wr wr = {
            .wr_id = wr_id, .sg_list = sges[k], .num_sge = (int)sge_count[k],
            .opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
            .send_flags = IBV_SEND_SIGNALED,
            .wr.rdma = {.remote_addr = remote_addr + stripes[k].offset,
                        .rkey = rkey[q % peer_devices]}};
        struct ibv_send_wr *bad = NULL;
        /* Stripes before k are on the wire and will complete: *posted
         * tells the caller to reap them. */
        if (ibv_post_send(v->qps[q], &wr, &bad) != 0) return CR_ERR_IO;
        v->outstanding[q]++;
        v->outstanding_total++;
        (*posted)++;
    }
    return CR_OK;
}

int cr_xfer_verbs_poll(struct cr_xfer_verbs *v, struct cr_xfer_verbs_completion *out, int max) {
    assert(v != NULL && out != NULL);
    struct ibv_wc wc[32];
    int got = 0;
    for (uint32_t d = 0; d < v->dev_count && got < max; d++) {
        int want = max - got < 32 ? max - got : 32;
        int n = ibv_poll_cq(v->cqs[d], want, wc);
        for (int i = 0; i < n; i++) {
            bool ok = wc[i].status == IBV_WC_SUCCESS;
            uint32_t q = 0;
            while (q < v->qp_count && v->qps[q]->qp_num != wc[i].qp_num) q++;
            assert(q < v->qp_count && v->outstanding[q] > 0 && v->outstanding_total > 0);
            v->outstanding[q]--;
            v->outstanding_total--;
            out[got++] = (struct cr_xfer_verbs_completion){
                .wr_id = wc[i].wr_id, .status = ok ? CR_OK : CR_ERR_IO, .qp = q,
                .remote_access = wc[i].status == IBV_WC_REM_ACCESS_ERR ||
                                 wc[i].status == IBV_WC_REM_INV_REQ_ERR,
                .reason = ok ? NULL : ibv_wc_status_str(wc[i].status)};
        }
    }
    return got;
}

bool cr_xfer_verbs_qp_fail(struct cr_xfer_verbs *v, uint32_t qp) {
    assert(v != NULL && qp < v->qp_count);
    if (v->failed[qp]) return false;
    uint32_t peers = v->peer_devices > 0 ? v->peer_devices : 1;
    for (uint32_t q = 0; q < v->qp_count; q++) {
        bool same_path = q % v->dev_count == qp % v->dev_count && q % peers == qp % peers;
        if (same_path && !v->failed[q]) {
            v->failed[q] = true;
            v->live--;
        }
    }
    return true;
}

uint32_t cr_xfer_verbs_live_qps(const struct cr_xfer_verbs *v) {
    assert(v != NULL);
    return v->live;
}

const char *cr_xfer_verbs_qp_device(const struct cr_xfer_verbs *v, uint32_t qp) {
    assert(v != NULL && qp < v->qp_count);
    return v->devs[qp % v->dev_count]->name;
}

uint32_t cr_xfer_verbs_qp_count(const struct cr_xfer_verbs *v) {
    assert(v != NULL);
    return v->qp_count;
}

uint32_t cr_xfer_verbs_device_count(const struct cr_xfer_verbs *v) {
    assert(v != NULL);
    return v->dev_count;
}

uint32_t cr_xfer_verbs_outstanding(const struct cr_xfer_verbs *v) {
    assert(v != NULL);
    return v->outstanding_total;
}

void cr_xfer_verbs_close(struct cr_xfer_verbs *v) {
    if (v == NULL) return;
    for (uint32_t i = 0; i < CR_XFER_VERBS_QPS_MAX; i++)
        if (v->qps[i] != NULL) ibv_destroy_qp(v->qps[i]);
    for (uint32_t d = 0; d < CR_XFER_VERBS_DEVICES_MAX; d++)
        if (v->cqs[d] != NULL) ibv_destroy_cq(v->cqs[d]);
    free(v);
}

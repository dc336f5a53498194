/* The verbs transport's device side: libibverbs RC QPs and one-sided RDMA
 * READ/WRITE (pure parts in xfer_verbs_plan.c, design in xfer_verbs.h).
 *
 * A context is one device: a protection domain, one completion queue shared
 * by its QPs, qp_count RC QPs, and the memory regions registered on it (each
 * segment or buffer once).  Connecting follows the usual RC state machine:
 * RESET -> INIT (port, access flags) -> RTR (peer's QPN, PSN, LID/GID, MTU)
 * -> RTS (our PSN, timeouts).  Each stripe of an op is one signalled work
 * request; a bounded number (SEND_DEPTH) are outstanding per QP.
 *
 * Not exercised on hardware in this repository's CI: the machines have no
 * RDMA device (ibv_get_device_list fails with ENOSYS) and no SoftRoCE. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <infiniband/verbs.h>

#include "crescent/error.h"
#include "rdma/xfer_verbs.h"

#define SEND_DEPTH 128u   /* outstanding work requests per QP */
#define CQ_DEPTH (SEND_DEPTH * CR_XFER_VERBS_QPS_MAX)
#define MRS_MAX 64u
#define MAX_RD_ATOMIC 16u /* RDMA READs in flight per QP, each way */
#define MESSAGE_MAX_BYTES (UINT64_C(1) << 31) /* an RC message's limit */

struct cr_xfer_verbs {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    uint8_t port;
    uint8_t gid_index;
    enum ibv_mtu mtu;
    uint16_t lid;
    union ibv_gid gid;
    uint32_t qp_count;
    uint32_t next_qp;
    struct ibv_qp *qps[CR_XFER_VERBS_QPS_MAX];
    uint32_t psn[CR_XFER_VERBS_QPS_MAX];
    uint32_t outstanding[CR_XFER_VERBS_QPS_MAX];
    struct ibv_mr *mrs[MRS_MAX];
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

static int open_device(struct cr_xfer_verbs *v, uint32_t index, char *why, size_t size) {
    int count = 0;
    struct ibv_device **list = ibv_get_device_list(&count);
    if (list == NULL) return fail(why, size, "ibv_get_device_list", errno);
    if (index >= (uint32_t)count) {
        ibv_free_device_list(list);
        snprintf(why, size, "RDMA device %u does not exist (%d found)", index, count);
        return CR_ERR_INVALID_PARAMS;
    }
    v->ctx = ibv_open_device(list[index]);
    ibv_free_device_list(list);
    if (v->ctx == NULL) return fail(why, size, "ibv_open_device", errno);
    struct ibv_port_attr port;
    if (ibv_query_port(v->ctx, v->port, &port) != 0) return fail(why, size, "ibv_query_port", errno);
    v->lid = port.lid;
    v->mtu = port.active_mtu;
    v->gid_index = 0;
    if (ibv_query_gid(v->ctx, v->port, v->gid_index, &v->gid) != 0)
        return fail(why, size, "ibv_query_gid", errno);
    v->pd = ibv_alloc_pd(v->ctx);
    if (v->pd == NULL) return fail(why, size, "ibv_alloc_pd", errno);
    v->cq = ibv_create_cq(v->ctx, (int)CQ_DEPTH, NULL, NULL, 0);
    if (v->cq == NULL) return fail(why, size, "ibv_create_cq", errno);
    return CR_OK;
}

static int create_qp(struct cr_xfer_verbs *v, uint32_t i, char *why, size_t size) {
    struct ibv_qp_init_attr init = {
        .send_cq = v->cq, .recv_cq = v->cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 0,
        .cap = {.max_send_wr = SEND_DEPTH, .max_recv_wr = 1, .max_send_sge = 1,
                .max_recv_sge = 1}};
    v->qps[i] = ibv_create_qp(v->pd, &init);
    if (v->qps[i] == NULL) return fail(why, size, "ibv_create_qp", errno);
    struct ibv_qp_attr attr = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = v->port,
                               .qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
                                                  IBV_ACCESS_REMOTE_READ |
                                                  IBV_ACCESS_REMOTE_WRITE};
    if (ibv_modify_qp(v->qps[i], &attr,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
        return fail(why, size, "ibv_modify_qp(INIT)", errno);
    uint32_t random = 0;
    if (getrandom(&random, sizeof(random), 0) != (ssize_t)sizeof(random)) random = i * 7919u;
    v->psn[i] = random & 0xffffffu;
    return CR_OK;
}

int cr_xfer_verbs_open(uint32_t device_index, uint32_t qp_count, uint8_t port,
                       struct cr_xfer_verbs **out, char *why, size_t why_size) {
    assert(out != NULL);
    *out = NULL;
    if (qp_count == 0 || qp_count > CR_XFER_VERBS_QPS_MAX || port == 0) {
        snprintf(why, why_size, "qp_count must be 1..%u and port >= 1", CR_XFER_VERBS_QPS_MAX);
        return CR_ERR_INVALID_PARAMS;
    }
    struct cr_xfer_verbs *v = calloc(1, sizeof(*v));
    if (v == NULL) return CR_ERR_NOMEM;
    v->port = port;
    v->qp_count = qp_count;
    int rc = open_device(v, device_index, why, why_size);
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
    out->port = v->port;
    out->mtu = (uint8_t)v->mtu;
    out->gid_index = v->gid_index;
    out->lid = v->lid;
    memcpy(out->gid, v->gid.raw, 16);
    for (uint32_t i = 0; i < v->qp_count; i++) {
        out->qpn[i] = v->qps[i]->qp_num;
        out->psn[i] = v->psn[i];
    }
}

static int to_rtr_rts(struct cr_xfer_verbs *v, uint32_t i, const struct cr_xfer_verbs_hello *peer,
                      char *why, size_t size) {
    struct ibv_qp_attr attr = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = (enum ibv_mtu)(peer->mtu < (uint8_t)v->mtu ? peer->mtu : (uint8_t)v->mtu),
        .dest_qp_num = peer->qpn[i], .rq_psn = peer->psn[i],
        .max_dest_rd_atomic = MAX_RD_ATOMIC, .min_rnr_timer = 12,
        .ah_attr = {.dlid = peer->lid, .sl = 0, .src_path_bits = 0, .port_num = v->port}};
    if (peer->lid == 0) { /* RoCE: route by GID */
        attr.ah_attr.is_global = 1;
        memcpy(attr.ah_attr.grh.dgid.raw, peer->gid, 16);
        attr.ah_attr.grh.sgid_index = v->gid_index;
        attr.ah_attr.grh.hop_limit = 64;
    }
    if (ibv_modify_qp(v->qps[i], &attr,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                          IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        return fail(why, size, "ibv_modify_qp(RTR)", errno);
    struct ibv_qp_attr rts = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
                              .rnr_retry = 7, .sq_psn = v->psn[i],
                              .max_rd_atomic = MAX_RD_ATOMIC};
    if (ibv_modify_qp(v->qps[i], &rts,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        return fail(why, size, "ibv_modify_qp(RTS)", errno);
    return CR_OK;
}

int cr_xfer_verbs_connect(struct cr_xfer_verbs *v, const struct cr_xfer_verbs_hello *peer,
                          char *why, size_t why_size) {
    assert(v != NULL && peer != NULL);
    if (peer->qp_count < v->qp_count) {
        snprintf(why, why_size, "peer offers %u QPs, %u needed", peer->qp_count, v->qp_count);
        return CR_ERR_INVALID_PARAMS;
    }
    for (uint32_t i = 0; i < v->qp_count; i++) {
        int rc = to_rtr_rts(v, i, peer, why, why_size);
        if (rc != CR_OK) return rc;
    }
    return CR_OK;
}

int cr_xfer_verbs_register(struct cr_xfer_verbs *v, void *addr, uint64_t len, uint32_t *lkey,
                           uint32_t *rkey, char *why, size_t why_size) {
    assert(v != NULL && addr != NULL && len > 0);
    for (uint32_t i = 0; i < MRS_MAX; i++) {
        if (v->mrs[i] != NULL) continue;
        v->mrs[i] = ibv_reg_mr(v->pd, addr, len,
                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                                   IBV_ACCESS_REMOTE_WRITE);
        if (v->mrs[i] == NULL) return fail(why, why_size, "ibv_reg_mr", errno);
        *lkey = v->mrs[i]->lkey;
        *rkey = v->mrs[i]->rkey;
        return CR_OK;
    }
    snprintf(why, why_size, "%u memory regions registered already", MRS_MAX);
    return CR_ERR_NOMEM;
}

int cr_xfer_verbs_post(struct cr_xfer_verbs *v, bool write, void *local, uint32_t lkey,
                       uint64_t remote_addr, uint32_t rkey, uint64_t length, uint64_t wr_id) {
    struct cr_xfer_stripe stripes[CR_XFER_VERBS_QPS_MAX];
    uint32_t next = v->next_qp;
    uint32_t n = cr_xfer_verbs_plan(length, v->qp_count, 1, &next, stripes, CR_XFER_VERBS_QPS_MAX);
    for (uint32_t k = 0; k < n; k++) {
        if (stripes[k].length > MESSAGE_MAX_BYTES) return CR_ERR_INVALID_PARAMS;
        if (v->outstanding[stripes[k].qp] >= SEND_DEPTH) return CR_ERR_AGAIN;
    }
    v->next_qp = next;
    for (uint32_t k = 0; k < n; k++) {
        struct ibv_sge sge = {.addr = (uintptr_t)local + stripes[k].offset,
                              .length = (uint32_t)stripes[k].length, .lkey = lkey};
        struct ibv_send_wr wr = {
            .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
            .opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
            .send_flags = IBV_SEND_SIGNALED,
            .wr.rdma = {.remote_addr = remote_addr + stripes[k].offset, .rkey = rkey}};
        struct ibv_send_wr *bad = NULL;
        if (ibv_post_send(v->qps[stripes[k].qp], &wr, &bad) != 0) return CR_ERR_IO;
        v->outstanding[stripes[k].qp]++;
    }
    return (int)n;
}

int cr_xfer_verbs_poll(struct cr_xfer_verbs *v, uint64_t *wr_ids, int *statuses, int max) {
    struct ibv_wc wc[32];
    int n = ibv_poll_cq(v->cq, max < 32 ? max : 32, wc);
    for (int i = 0; i < n; i++) {
        wr_ids[i] = wc[i].wr_id;
        statuses[i] = wc[i].status == IBV_WC_SUCCESS ? CR_OK : CR_ERR_IO;
        for (uint32_t q = 0; q < v->qp_count; q++)
            if (v->qps[q]->qp_num == wc[i].qp_num && v->outstanding[q] > 0) v->outstanding[q]--;
    }
    return n < 0 ? 0 : n;
}

void cr_xfer_verbs_close(struct cr_xfer_verbs *v) {
    if (v == NULL) return;
    for (uint32_t i = 0; i < CR_XFER_VERBS_QPS_MAX; i++)
        if (v->qps[i] != NULL) ibv_destroy_qp(v->qps[i]);
    for (uint32_t i = 0; i < MRS_MAX; i++)
        if (v->mrs[i] != NULL) ibv_dereg_mr(v->mrs[i]);
    if (v->cq != NULL) ibv_destroy_cq(v->cq);
    if (v->pd != NULL) ibv_dealloc_pd(v->pd);
    if (v->ctx != NULL) ibv_close_device(v->ctx);
    free(v);
}

/* The transfer server's verbs side (design in README.md, "verbs").
 *
 * At create the server opens its RDMA devices (the ones named in the config,
 * or every one whose port is active; a context + PD each); its protocol is
 * then "rdma".  Each segment is registered on every device once at register
 * (ibv_reg_mr) and deregistered at unregister, so its rkeys stop working the
 * moment it goes.  A client that wants verbs opens a control connection and
 * sends HELLO (its devices and QPs); the server opens a QP set for that
 * connection (as many RC QPs, QP i on its device i % count, a CQ per
 * device), connects QP i to the client's QP i, answers with its own hello,
 * and closes the set with the connection.  KEY asks for a segment's base,
 * size and rkey on each device.  The server
 * posts nothing itself: the client's QPs read and write segment memory
 * one-sided, and the HCA checks every access against the region. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer_server_internal.h"
#include "rdma/xfer_verbs.h"

#define SEND_DEPTH 1u    /* the server's QPs only answer: nothing is posted on them */
#define QPS_MAX 4096u    /* QPs over all clients: what hellos may take of the HCA */

void cr_xfer_server_verbs_open(struct cr_xfer_server *srv, const struct cr_xfer_server_config *cfg) {
    if (cfg->verbs_disabled) {
        snprintf(srv->verbs_why, sizeof(srv->verbs_why), "disabled by config");
        return;
    }
    char why[sizeof(srv->verbs_why)];
    bool present = cr_xfer_verbs_probe(why, sizeof(why)) > 0;
    int gid = cfg->rdma_gid_index_set ? cfg->rdma_gid_index : -1;
    srv->verbs_count = present ? cr_xfer_verbs_devices_open(cfg->rdma_devices, gid, srv->verbs,
                                                            why, sizeof(why))
                               : 0;
    if (srv->verbs_count == 0) {
        if (present)
            CR_WARN("xfer", "%s: RDMA devices are present but none can be used (%s); serving tcp "
                    "only", srv->endpoint, why);
        memcpy(srv->verbs_why, why, sizeof(why));
        return;
    }
    size_t used = 0;
    for (uint32_t d = 0; d < srv->verbs_count && used < sizeof(srv->verbs_why); d++)
        used += (size_t)snprintf(srv->verbs_why + used, sizeof(srv->verbs_why) - used, "%s%s",
                                 d ? ", " : "", cr_xfer_verbs_device_name(srv->verbs[d]));
}

void cr_xfer_server_verbs_close(struct cr_xfer_server *srv) {
    cr_xfer_verbs_devices_close(srv->verbs, srv->verbs_count);
    srv->verbs_count = 0;
}

void cr_xfer_server_verbs_register(struct cr_xfer_server *srv, struct cr_xfer_server_segment *seg) {
    assert(seg->used && seg->region.count == 0);
    if (srv->verbs_count == 0) return;
    char why[192];
    if (cr_xfer_verbs_region_register(srv->verbs, srv->verbs_count, seg->base, seg->size,
                                      &seg->region, why, sizeof(why)) != CR_OK) {
        CR_WARN("xfer", "segment '%s': %s; it is served by tcp only", seg->name, why);
    }
}

void cr_xfer_server_verbs_unregister(struct cr_xfer_server_segment *seg) {
    cr_xfer_verbs_region_deregister(&seg->region);
}

int cr_xfer_server_verbs_hello(struct cr_xfer_server *srv, const char *peer, const uint8_t *hello,
                               struct cr_xfer_verbs **qps, uint8_t *answer, uint64_t *answer_len) {
    *answer_len = 0;
    if (*qps != NULL) return CR_ERR_PROTOCOL; /* one hello per connection */
    struct cr_xfer_verbs_hello theirs;
    /* The frame parser decoded it already; decode again for the fields. */
    if (cr_xfer_verbs_hello_decode(hello, CR_XFER_VERBS_HELLO_BYTES, &theirs) != CR_OK)
        return CR_ERR_PROTOCOL;
    if (srv->verbs_count == 0) {
        srv->stats.verbs_hellos_refused++;
        return CR_OK; /* "no verbs here": the client uses tcp */
    }
    if (srv->verbs_qps_open + theirs.qp_count > QPS_MAX) {
        srv->stats.verbs_hellos_refused++;
        CR_WARN("xfer", "%s: verbs hello refused: %u QPs open already (at most %u)", peer,
                srv->verbs_qps_open, QPS_MAX);
        return CR_ERR_NOMEM;
    }
    char why[160];
    struct cr_xfer_verbs *set = NULL;
    int rc = cr_xfer_verbs_open(srv->verbs, srv->verbs_count, theirs.qp_count, SEND_DEPTH, &set,
                                why, sizeof(why));
    if (rc == CR_OK) rc = cr_xfer_verbs_connect(set, &theirs, why, sizeof(why));
    if (rc != CR_OK) {
        cr_xfer_verbs_close(set);
        srv->stats.verbs_hellos_refused++;
        CR_WARN("xfer", "%s: verbs hello refused: %s", peer, why);
        return rc == CR_ERR_NOMEM ? rc : CR_ERR_IO;
    }
    struct cr_xfer_verbs_hello ours;
    cr_xfer_verbs_local_hello(set, &ours);
    *answer_len = cr_xfer_verbs_hello_encode(&ours, answer);
    *qps = set;
    srv->verbs_qps_open += theirs.qp_count;
    srv->stats.verbs_hellos++;
    CR_INFO("xfer", "%s: verbs: %u QPs connected on %u device(s) (%s), to its %u", peer,
            theirs.qp_count, cr_xfer_verbs_device_count(set), srv->verbs_why, theirs.device_count);
    return CR_OK;
}

int cr_xfer_server_verbs_key(struct cr_xfer_server *srv, const char *name, size_t len,
                             uint8_t *answer, uint64_t *answer_len) {
    *answer_len = 0;
    const struct cr_xfer_server_segment *seg = cr_xfer_server_find(srv, name, len);
    if (seg == NULL) {
        srv->stats.verbs_keys_missing++;
        return CR_ERR_SEGMENT_NOT_FOUND;
    }
    if (seg->region.count == 0) return CR_OK; /* not on the devices: tcp for this segment */
    struct cr_xfer_verbs_key key = {.device_count = seg->region.count,
                                    .base = (uintptr_t)seg->base, .size = seg->size};
    memcpy(key.rkey, seg->region.rkey, sizeof(key.rkey));
    *answer_len = cr_xfer_verbs_key_encode(&key, answer);
    srv->stats.verbs_keys++;
    return CR_OK;
}

void cr_xfer_server_verbs_hangup(struct cr_xfer_server *srv, struct cr_xfer_verbs *qps) {
    if (qps == NULL) return;
    uint32_t count = cr_xfer_verbs_qp_count(qps);
    assert(srv->verbs_qps_open >= count);
    srv->verbs_qps_open -= count;
    cr_xfer_verbs_close(qps);
}

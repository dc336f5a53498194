/* The pure parts of the verbs transport (xfer_verbs.h): the setup messages,
 * the striping plan and the transport choice.  No libibverbs calls here. */
#include <arpa/inet.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "rdma/xfer_frame.h"
#include "rdma/xfer_verbs.h"

#define HELLO_MAGIC 0x32425658u /* "XVB2": several devices (v1 had one) */
#define KEY_MAGIC 0x324b5658u   /* "XVK2": an rkey per device */
#define QPN_AT (8 + CR_XFER_VERBS_DEVICES_MAX * CR_XFER_VERBS_PORT_BYTES)
#define PSN_AT (QPN_AT + 4 * CR_XFER_VERBS_QPS_MAX)
#define QPN_MASK 0xffffffu      /* QPNs and PSNs are 24 bits */

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p) {
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

size_t cr_xfer_verbs_hello_encode(const struct cr_xfer_verbs_hello *hello, uint8_t *out) {
    assert(hello->qp_count >= 1 && hello->qp_count <= CR_XFER_VERBS_QPS_MAX);
    assert(hello->device_count >= 1 && hello->device_count <= CR_XFER_VERBS_DEVICES_MAX);
    memset(out, 0, CR_XFER_VERBS_HELLO_BYTES);
    put32(out, HELLO_MAGIC);
    out[4] = hello->qp_count;
    out[5] = hello->device_count;
    for (uint32_t d = 0; d < CR_XFER_VERBS_DEVICES_MAX; d++) {
        const struct cr_xfer_verbs_port *p = &hello->devices[d];
        uint8_t *at = out + 8 + d * CR_XFER_VERBS_PORT_BYTES;
        at[0] = p->port;
        at[1] = p->mtu;
        at[2] = (uint8_t)p->lid;
        at[3] = (uint8_t)(p->lid >> 8);
        memcpy(at + 4, p->gid, 16);
    }
    for (uint32_t i = 0; i < CR_XFER_VERBS_QPS_MAX; i++) {
        put32(out + QPN_AT + 4 * i, hello->qpn[i]);
        put32(out + PSN_AT + 4 * i, hello->psn[i]);
    }
    return CR_XFER_VERBS_HELLO_BYTES;
}

int cr_xfer_verbs_hello_decode(const uint8_t *buf, size_t len, struct cr_xfer_verbs_hello *out) {
    if (len < CR_XFER_VERBS_HELLO_BYTES || get32(buf) != HELLO_MAGIC) return CR_ERR_PROTOCOL;
    struct cr_xfer_verbs_hello h = {.qp_count = buf[4], .device_count = buf[5]};
    if (h.qp_count == 0 || h.qp_count > CR_XFER_VERBS_QPS_MAX || h.device_count == 0 ||
        h.device_count > CR_XFER_VERBS_DEVICES_MAX || h.device_count > h.qp_count ||
        buf[6] != 0 || buf[7] != 0)
        return CR_ERR_PROTOCOL;
    for (uint32_t d = 0; d < CR_XFER_VERBS_DEVICES_MAX; d++) {
        const uint8_t *at = buf + 8 + d * CR_XFER_VERBS_PORT_BYTES;
        struct cr_xfer_verbs_port *p = &h.devices[d];
        *p = (struct cr_xfer_verbs_port){.port = at[0], .mtu = at[1],
                                         .lid = (uint16_t)(at[2] | at[3] << 8)};
        memcpy(p->gid, at + 4, 16);
        if (d < h.device_count && (p->port == 0 || p->mtu < 1 || p->mtu > 5))
            return CR_ERR_PROTOCOL;
    }
    for (uint32_t i = 0; i < CR_XFER_VERBS_QPS_MAX; i++) {
        h.qpn[i] = get32(buf + QPN_AT + 4 * i);
        h.psn[i] = get32(buf + PSN_AT + 4 * i);
        if (h.qpn[i] > QPN_MASK || h.psn[i] > QPN_MASK) return CR_ERR_PROTOCOL;
        if (i < h.qp_count && h.qpn[i] == 0) return CR_ERR_PROTOCOL; /* QP 0 is special */
    }
    *out = h;
    return CR_OK;
}

size_t cr_xfer_verbs_key_encode(const struct cr_xfer_verbs_key *key, uint8_t *out) {
    assert(key->device_count >= 1 && key->device_count <= CR_XFER_VERBS_DEVICES_MAX);
    memset(out, 0, CR_XFER_VERBS_KEY_BYTES);
    put32(out, KEY_MAGIC);
    out[4] = (uint8_t)key->device_count;
    put64(out + 8, key->base);
    put64(out + 16, key->size);
    for (uint32_t d = 0; d < CR_XFER_VERBS_DEVICES_MAX; d++) put32(out + 24 + 4 * d, key->rkey[d]);
    return CR_XFER_VERBS_KEY_BYTES;
}

int cr_xfer_verbs_key_decode(const uint8_t *buf, size_t len, struct cr_xfer_verbs_key *out) {
    if (len < CR_XFER_VERBS_KEY_BYTES || get32(buf) != KEY_MAGIC) return CR_ERR_PROTOCOL;
    struct cr_xfer_verbs_key key = {.device_count = buf[4], .base = get64(buf + 8),
                                    .size = get64(buf + 16)};
    if (key.device_count == 0 || key.device_count > CR_XFER_VERBS_DEVICES_MAX || buf[5] != 0 ||
        buf[6] != 0 || buf[7] != 0 || key.size == 0 || key.base + key.size < key.base)
        return CR_ERR_PROTOCOL;
    for (uint32_t d = 0; d < CR_XFER_VERBS_DEVICES_MAX; d++) key.rkey[d] = get32(buf + 24 + 4 * d);
    *out = key;
    return CR_OK;
}

uint32_t cr_xfer_verbs_plan(uint64_t length, uint32_t qp_count, uint32_t device_count,
                            uint32_t *next_qp, struct cr_xfer_stripe *out, uint32_t max) {
    assert(qp_count >= 1 && device_count >= 1 && device_count <= qp_count);
    (void)device_count; /* the layout (QP i on device i % devices) spreads the stripes */
    assert(next_qp != NULL && out != NULL && max >= 1);
    if (length < CR_XFER_VERBS_STRIPE_MIN_BYTES || qp_count == 1 || max == 1) {
        out[0] = (struct cr_xfer_stripe){.qp = *next_qp % qp_count, .offset = 0, .length = length};
        *next_qp = (*next_qp + 1) % qp_count;
        return 1;
    }
    uint32_t count = qp_count < max ? qp_count : max;
    uint64_t align = CR_XFER_VERBS_STRIPE_ALIGN_BYTES;
    uint64_t stripe = (length / count + align - 1) / align * align;
    uint32_t n = 0;
    for (uint64_t offset = 0; offset < length; n++) {
        assert(n < count);
        uint64_t len = length - offset < stripe || n + 1 == count ? length - offset : stripe;
        out[n] = (struct cr_xfer_stripe){
            .qp = n, .offset = offset, .length = len}; /* QP n is on device n % devices */
        offset += len;
    }
    return n;
}

static bool ipv4_mapped(const uint8_t *raw) {
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(raw, prefix, 12) == 0;
}

static bool link_local(const uint8_t *raw) { return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80; }

int cr_xfer_verbs_pick_gid(const struct cr_xfer_verbs_gid *table, uint32_t count, bool ethernet,
                           const char **why) {
    assert(table != NULL || count == 0);
    static const char *const rules[] = {"the first RoCE v2 entry with an IPv4-mapped address",
                                        "the first RoCE v2 entry that is not link-local",
                                        "the first RoCE v2 entry", "the first entry"};
    *why = rules[3];
    if (count == 0) return -1;
    if (!ethernet) return 0;
    for (uint32_t rule = 0; rule < 3; rule++) {
        for (uint32_t i = 0; i < count; i++) {
            const struct cr_xfer_verbs_gid *g = &table[i];
            if (g->type != CR_XFER_GID_ROCE_V2) continue;
            if ((rule == 0 && !ipv4_mapped(g->raw)) || (rule == 1 && link_local(g->raw))) continue;
            *why = rules[rule];
            return (int)i;
        }
    }
    return 0;
}

void cr_xfer_verbs_gid_describe(const struct cr_xfer_verbs_gid *gid, char *out, size_t size) {
    char text[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, gid->raw, text, sizeof(text));
    snprintf(out, size, "%s %s",
             gid->type == CR_XFER_GID_ROCE_V2 ? "RoCE v2"
             : gid->type == CR_XFER_GID_ROCE_V1 ? "RoCE v1" : "IB",
             text);
}

bool cr_xfer_verbs_parse_gid_index(const char *text, int *out) {
    if (strcmp(text, "auto") == 0) {
        *out = -1;
        return true;
    }
    char *end;
    unsigned long v = strtoul(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || v > 255) return false;
    *out = (int)v;
    return true;
}

const char *cr_xfer_transport_name(enum cr_xfer_transport transport) {
    switch (transport) {
    case CR_XFER_TRANSPORT_SHM: return "shm";
    case CR_XFER_TRANSPORT_VERBS: return "verbs";
    case CR_XFER_TRANSPORT_TCP: break;
    }
    return "tcp";
}

enum cr_xfer_transport cr_xfer_choose_transport(const struct cr_xfer_transport_facts *f,
                                                char *why, size_t why_size) {
    assert(f != NULL && why != NULL);
    if (!f->shm_disabled && f->shm_reachable) {
        snprintf(why, why_size, "same host: its shm socket accepted the connection");
        return CR_XFER_TRANSPORT_SHM;
    }
    char shm[96];
    snprintf(shm, sizeof(shm), "%s", f->shm_disabled ? "disabled by config"
                                     : f->shm_error ? f->shm_error : "not reachable");
    if (f->local_devices > 0 && f->peer_offers_verbs) {
        snprintf(why, why_size, "%u RDMA device(s) here and the peer offers verbs (shm: %s)",
                 f->local_devices, shm);
        return CR_XFER_TRANSPORT_VERBS;
    }
    snprintf(why, why_size, "shm: %s; verbs: %s", shm,
             f->local_devices == 0 ? (f->verbs_error ? f->verbs_error : "no RDMA device")
                                   : f->peer_verbs_error ? f->peer_verbs_error
                                                         : "the peer offers no verbs");
    return CR_XFER_TRANSPORT_TCP;
}

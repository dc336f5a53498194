/* The transfer server's capability check (format and MAC in core/xfer_cap.h).
 *
 * Checked after the request decoded and its range lies inside the named
 * segment, before a byte moves.  Costs one keyed BLAKE2b of ~60 bytes plus
 * the name per request that carries one (bench/RESULTS.md: "capabilities");
 * no allocation, no syscall (the clock is the vDSO's clock_gettime).
 *
 * Time: the capability's expiry is the master's clock (Unix ms) and is
 * compared with this server's; a server whose clock runs up to
 * capability_skew_ms ahead still accepts a fresh capability.  Hosts are
 * expected to keep their clocks within that (NTP keeps them within ms). */
#include <assert.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer.h"
#include "rdma/xfer_internal.h"
#include "rdma/xfer_server_internal.h"

#define CAP_LOG_EVERY_NS (60ull * 1000000000ull)

static uint64_t server_now_ms(const struct cr_xfer_server *srv) {
    if (srv->now_ms != NULL) return srv->now_ms(srv->now_arg);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int cr_xfer_server_set_key(struct cr_xfer_server *srv, const char *name,
                           const uint8_t key[CR_CAP_KEY_BYTES]) {
    assert(srv != NULL && key != NULL);
    size_t len = name == NULL ? 0 : strlen(name);
    struct cr_xfer_server_segment *seg =
        (struct cr_xfer_server_segment *)cr_xfer_server_find(srv, name, len);
    if (seg == NULL) return CR_ERR_SEGMENT_NOT_FOUND;
    memcpy(seg->key, key, CR_CAP_KEY_BYTES);
    seg->has_key = true;
    return CR_OK;
}

enum cr_cap_verdict cr_xfer_server_cap_check(struct cr_xfer_server *srv, const char *peer,
                                             const struct cr_xfer_server_segment *seg,
                                             uint8_t mode, uint64_t addr, uint64_t length,
                                             bool has_cap, const struct cr_cap *cap) {
    assert(srv != NULL && seg != NULL && cap != NULL);
    enum cr_cap_verdict v;
    if (!has_cap) {
        if (!srv->require_capability) return CR_CAP_OK;
        v = CR_CAP_MISSING;
    } else if (!seg->has_key) {
        if (!srv->require_capability) return CR_CAP_OK; /* nothing to check it with */
        v = CR_CAP_NO_KEY;
    } else {
        if (mode == 0) { /* a verbs KEY: the rkey it answers covers the whole segment */
            mode = (cap->mode & CR_CAP_READ) ? CR_CAP_READ : CR_CAP_WRITE;
            addr = cap->addr;
            length = 0;
        }
        v = cr_cap_check(seg->key, seg->name, seg->name_len, cap, mode, addr, length,
                         server_now_ms(srv), srv->capability_skew_ms);
        if (v == CR_CAP_OK) {
            srv->stats.capability_checked++;
            return CR_CAP_OK;
        }
    }
    srv->stats.refused_capability[v]++;
    uint64_t now = cr_xfer_now_ns();
    uint64_t *last = &srv->last_cap_log_ns[v];
    if (*last == 0 || now - *last >= CAP_LOG_EVERY_NS) {
        *last = now;
        CR_WARN("xfer",
                "%s: %s of segment '%s' range 0x%llx+%llu refused: capability %s (%llu so far; "
                "logged at most once a minute per cause)",
                peer, mode == CR_CAP_WRITE ? "write" : mode == CR_CAP_READ ? "read" : "key",
                seg->name, (unsigned long long)addr, (unsigned long long)length,
                cr_cap_verdict_name(v), (unsigned long long)srv->stats.refused_capability[v]);
    }
    return v;
}

/* Capabilities signed into replica handles (see rpc_caps.h).
 *
 * Runs on the segments actor, once per handle of a keyed segment: one keyed
 * BLAKE2b over ~80 bytes (0.55 us, bench/RESULTS.md "capabilities"); no
 * allocation, no syscall (the clock is the vDSO's). */
#include "rpc/rpc_caps.h"

#include <assert.h>
#include <string.h>
#include <time.h>

uint64_t cr_rpc_caps_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The name a replica's bytes are served under: the segment's for memory
 * (*name points at it), "<segment>" CR_CAP_SSD_SUFFIX for local_disk (the
 * server's read-only SSD segment, read at the replica's position; built in
 * buf).  Returns its length, or 0 when it cannot be signed (no name, or
 * longer than cr_cap_sign's 255 bytes). */
static size_t served_name(const struct cr_store_replica_desc *d, char buf[256],
                          const char **name) {
    size_t len = d->segment_name != NULL ? strlen(d->segment_name) : 0;
    *name = d->segment_name;
    if (d->medium != CR_MEDIUM_LOCAL_DISK) return len <= 255 ? len : 0;
    size_t suffix_len = strlen(CR_CAP_SSD_SUFFIX);
    if (len == 0 || len + suffix_len > 255) return 0;
    memcpy(buf, d->segment_name, len);
    memcpy(buf + len, CR_CAP_SSD_SUFFIX, suffix_len + 1);
    *name = buf;
    return len + suffix_len;
}

void cr_rpc_caps_sign_one(struct cr_store_replica_desc *d, uint8_t mode, uint64_t expiry_ms) {
    assert(d != NULL && (mode == CR_CAP_READ || mode == CR_CAP_WRITE));
    /* Memory replicas in either mode; an SSD replica is only ever read (its
     * segment is read-only).  Disk replicas are files: nothing to sign. */
    bool signable = d->medium == CR_MEDIUM_MEMORY ||
                    (d->medium == CR_MEDIUM_LOCAL_DISK && mode == CR_CAP_READ);
    char buf[256];
    const char *name = NULL;
    size_t name_len = signable && d->cap_key != NULL ? served_name(d, buf, &name) : 0;
    d->has_cap = name_len > 0;
    if (!d->has_cap) return;
    struct cr_cap cap = {.addr = d->buffer, .length = d->size, .expiry_ms = expiry_ms,
                         .mode = mode};
    cr_cap_sign(d->cap_key, name, name_len, &cap);
    cr_cap_encode(&cap, d->cap);
}

void cr_rpc_caps_sign(struct cr_store_replica_list *list, uint8_t mode, uint64_t ttl_ms,
                      uint64_t unix_now_ms) {
    assert(list != NULL);
    for (uint32_t i = 0; i < list->count; i++)
        cr_rpc_caps_sign_one(&list->replicas[i], mode, unix_now_ms + ttl_ms);
}

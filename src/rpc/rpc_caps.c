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

void cr_rpc_caps_sign_one(struct cr_store_replica_desc *d, uint8_t mode, uint64_t expiry_ms) {
    assert(d != NULL && (mode == CR_CAP_READ || mode == CR_CAP_WRITE));
    size_t name_len = d->segment_name != NULL ? strlen(d->segment_name) : 0;
    /* cr_cap_sign takes names of 1..255 bytes; a 256-byte one goes unsigned */
    d->has_cap = d->medium == CR_MEDIUM_MEMORY && d->cap_key != NULL && name_len >= 1 &&
                 name_len <= 255;
    if (!d->has_cap) return;
    struct cr_cap cap = {.addr = d->buffer, .length = d->size, .expiry_ms = expiry_ms,
                         .mode = mode};
    cr_cap_sign(d->cap_key, d->segment_name, name_len, &cap);
    cr_cap_encode(&cap, d->cap);
}

void cr_rpc_caps_sign(struct cr_store_replica_list *list, uint8_t mode, uint64_t ttl_ms,
                      uint64_t unix_now_ms) {
    assert(list != NULL);
    for (uint32_t i = 0; i < list->count; i++)
        cr_rpc_caps_sign_one(&list->replicas[i], mode, unix_now_ms + ttl_ms);
}

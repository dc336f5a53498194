/* libFuzzer target for Dynamo's NATS payload decoder (src/msgs/dynamo_event.c),
 * which crescentd feeds whatever arrives on its kv_events and load_metrics
 * subjects.  Each input is decoded both as a RouterEvent (one decoder reused
 * across inputs, as the indexer reuses one) and as load metrics.
 * Invariants besides "no crash":
 *  - a refusal is CR_ERR_PROTOCOL with a known cause and a non-empty message;
 *  - an accepted RouterEvent is STORED, REMOVED or CLEARED, within the hash
 *    and token bounds, and every hash and token id it returns is readable
 *    (ASan catches a short array); CLEARED carries no hashes;
 *  - accepted metrics have ratios in [0, 1] and a NUL-terminated name.
 * Build and run instructions are in tests/fuzz/README.md. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "msgs/dynamo_event.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "invariant failed: %s (line %d)\n", #cond, __LINE__);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static struct cr_dyn_decoder *dec;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (dec == NULL && cr_dyn_decoder_create(&dec) != CR_OK) abort();
    char err[256];
    enum cr_dyn_bad cause = CR_DYN_BAD_KINDS;
    struct cr_dyn_router_event e;
    err[0] = '\0';
    int rc = cr_dyn_decode_router_event(dec, data, size, &e, &cause, err, sizeof(err));
    if (rc == CR_OK) {
        CHECK(e.kind == CR_KV_EVENT_STORED || e.kind == CR_KV_EVENT_REMOVED ||
              e.kind == CR_KV_EVENT_CLEARED);
        CHECK(e.hash_count <= CR_DYN_MAX_HASHES && e.token_count <= CR_DYN_MAX_TOKENS);
        CHECK(e.kind != CR_KV_EVENT_CLEARED || e.hash_count == 0);
        CHECK(e.has_token_ids || e.token_count == 0);
        volatile uint64_t sum = 0;
        for (uint32_t i = 0; i < e.hash_count; i++) sum += e.hashes[i];
        for (uint32_t i = 0; i < e.token_count; i++) sum += e.token_ids[i];
        (void)sum;
    } else {
        CHECK(rc == CR_ERR_PROTOCOL && cause < CR_DYN_BAD_KINDS && err[0] != '\0');
        CHECK(strlen(err) < sizeof(err));
    }
    struct cr_dyn_metrics m;
    cause = CR_DYN_BAD_KINDS;
    err[0] = '\0';
    rc = cr_dyn_decode_metrics(data, size, &m, &cause, err, sizeof(err));
    if (rc == CR_OK) {
        CHECK(m.gpu_cache_usage_perc >= 0 && m.gpu_cache_usage_perc <= 1);
        CHECK(m.gpu_prefix_cache_hit_rate >= 0 && m.gpu_prefix_cache_hit_rate <= 1);
        CHECK(strlen(m.endpoint_name) < sizeof(m.endpoint_name));
    } else {
        CHECK(rc == CR_ERR_PROTOCOL && cause < CR_DYN_BAD_KINDS && err[0] != '\0');
    }
    return 0;
}

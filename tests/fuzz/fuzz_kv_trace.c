/* libFuzzer target for the request-trace line reader (cr_kv_trace_add_line
 * in src/core/kv_trace.c), which crescent-bench's trace workloads and
 * bench/prefix_trace feed whatever file they are given.
 *
 * Each input is split at newlines, as cr_kv_trace_load splits a file, and
 * every line added to one trace.  Invariants checked besides "no crash":
 *  - a refused line changes nothing but its cause's counter (requests, ids,
 *    max id unchanged), and the cause is a known one;
 *  - an accepted line adds exactly one request whose ids follow the previous
 *    ones, number at least one, are each <= CR_KV_TRACE_ID_MAX and <= max_id,
 *    and are all distinct; its timestamp is not before the previous one's;
 *  - lines counted = requests + bad lines.
 * Build and run instructions are in tests/fuzz/README.md. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/kv_trace.h"
#include "crescent/error.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "invariant failed: %s (line %d)\n", #cond, __LINE__);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_added(const struct cr_kv_trace *t) {
    const struct cr_kv_trace_request *r = &t->requests[t->count - 1];
    CHECK(r->block_count >= 1);
    CHECK(r->first_id + r->block_count == t->id_count);
    if (t->count > 1) {
        const struct cr_kv_trace_request *p = &t->requests[t->count - 2];
        CHECK(p->first_id + p->block_count == r->first_id);
        CHECK(p->timestamp_ms <= r->timestamp_ms);
    }
    const uint64_t *ids = cr_kv_trace_ids(t, t->count - 1);
    for (uint32_t i = 0; i < r->block_count; i++) {
        CHECK(ids[i] <= CR_KV_TRACE_ID_MAX && ids[i] <= t->max_id);
        for (uint32_t j = 0; j < i && r->block_count <= 256; j++) CHECK(ids[i] != ids[j]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct cr_kv_trace t;
    cr_kv_trace_init(&t);
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl != NULL ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        size_t count = t.count, ids = t.id_count;
        uint64_t max_id = t.max_id, bad[CR_KV_TRACE_BAD_KINDS];
        memcpy(bad, t.bad, sizeof(bad));
        enum cr_kv_trace_bad cause;
        int rc = cr_kv_trace_add_line(&t, p, len, &cause);
        if (rc == CR_ERR_NOMEM) break;
        if (rc == CR_OK) {
            CHECK(cause == CR_KV_TRACE_BAD_KINDS);
            CHECK(t.count == count || t.count == count + 1);
            if (t.count == count + 1) check_added(&t);
            else CHECK(t.id_count == ids);
        } else {
            CHECK(rc == CR_ERR_INVALID_PARAMS && cause < CR_KV_TRACE_BAD_KINDS);
            CHECK(t.count == count && t.id_count == ids && t.max_id == max_id);
            CHECK(t.bad[cause] == bad[cause] + 1);
        }
        p += len;
    }
    uint64_t bad_total = 0;
    for (int k = 0; k < CR_KV_TRACE_BAD_KINDS; k++) bad_total += t.bad[k];
    CHECK(t.lines == t.count + bad_total);
    cr_kv_trace_free(&t);
    return 0;
}

/* Request traces in the Mooncake FAST'25 format (JSON Lines):
 *
 *   {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}
 *
 * timestamp: arrival in ms from the trace's start; hash_ids: one id per
 * 512-token block, equal ids meaning the same reusable prefix block.  Any
 * other field is ignored (the conversation and tool-and-agent traces carry
 * the same four).
 *
 * A bad line is skipped and counted under its cause; the caller logs the
 * first of each cause (cr_kv_trace_load does, once per cause).  Causes:
 * not JSON or not an object; a field missing or of the wrong type; a hash id
 * negative or above CR_KV_TRACE_ID_MAX; hash ids out of order (an id
 * repeated within one request: a chain cannot hold a block twice); a
 * timestamp before the previous line's; no hash ids.
 *
 * Single-threaded (src/core rules). */
#ifndef CRESCENT_CORE_KV_TRACE_H
#define CRESCENT_CORE_KV_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define CR_KV_TRACE_ID_MAX ((1ULL << 53) - 1)   /* JSON integers exact in a double */
#define CR_KV_TRACE_LINE_MAX (64u << 20)        /* longest line read */

enum cr_kv_trace_bad {
    CR_KV_TRACE_BAD_JSON = 0,     /* not JSON, or not an object */
    CR_KV_TRACE_BAD_FIELD,        /* timestamp/hash_ids missing or mistyped, lengths mistyped */
    CR_KV_TRACE_BAD_HASH_ID,      /* negative, fractional or above CR_KV_TRACE_ID_MAX */
    CR_KV_TRACE_BAD_ORDER,        /* a hash id repeated within the request */
    CR_KV_TRACE_BAD_TIME,         /* timestamp before the previous request's */
    CR_KV_TRACE_BAD_EMPTY,        /* hash_ids empty */
    CR_KV_TRACE_BAD_KINDS
};

struct cr_kv_trace_request {
    uint64_t timestamp_ms;
    uint32_t input_length;   /* 0 when absent */
    uint32_t output_length;  /* 0 when absent */
    uint32_t block_count;
    size_t first_id;         /* index of its first hash id in cr_kv_trace.ids */
};

struct cr_kv_trace {
    struct cr_kv_trace_request *requests;
    size_t count, cap;
    uint64_t *ids;           /* every request's hash ids, one after another */
    size_t id_count, id_cap;
    uint64_t max_id;
    uint64_t lines;          /* lines read, blank ones excluded */
    uint64_t bad[CR_KV_TRACE_BAD_KINDS];
};

/* Names a cause ("bad_json", ...), for logs and reports. */
const char *cr_kv_trace_bad_name(enum cr_kv_trace_bad cause);

/* An empty trace. */
void cr_kv_trace_init(struct cr_kv_trace *trace);
void cr_kv_trace_free(struct cr_kv_trace *trace);

/* Parses one line (len bytes, no NUL needed) and appends its request.
 * Returns CR_OK; CR_ERR_INVALID_PARAMS for a bad line (counted in bad[],
 * *cause set, the trace unchanged); CR_ERR_NOMEM.  A blank line is CR_OK
 * and adds nothing. */
int cr_kv_trace_add_line(struct cr_kv_trace *trace, const char *line, size_t len,
                         enum cr_kv_trace_bad *cause);

/* Reads a whole file.  Bad lines are skipped, counted and the first of each
 * cause logged (WARN, with its line number).  Returns CR_OK, or CR_ERR_IO /
 * CR_ERR_NOMEM with a message in err. */
int cr_kv_trace_load(struct cr_kv_trace *trace, const char *path, char *err, size_t err_len);

static inline const uint64_t *cr_kv_trace_ids(const struct cr_kv_trace *trace, size_t request) {
    return trace->ids + trace->requests[request].first_id;
}

#endif

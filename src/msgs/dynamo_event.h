/* NVIDIA Dynamo's KV-router payloads (seed 003), as JSON on NATS subjects:
 *
 *   kv_events     RouterEvent {"worker_id": i64, "data": {"Stored": {...}}}
 *                 Stored: {"request_id"?, "token_ids": [u32], "block_hashes": [u64],
 *                          "parent_hash"?: u64|null, "lora_id"?: u64|null}
 *                 Removed: {"block_hashes": [u64]}    Cleared: null or {}
 *                 Dynamo's newer envelope is accepted too:
 *                 {"worker_id", "event": {"event_id": u64, "data": {"stored": {
 *                   "parent_hash": u64|null, "blocks": [{"block_hash", "tokens_hash",
 *                   "mm_extra_info"?}], "token_ids"?: [u32]}}, "dp_rank"?}}
 *                 ("removed", "cleared" likewise; "storage_tier" is ignored);
 *                 variant names are taken in either case ("Stored", "stored").
 *   load_metrics  {"worker_id": i64, "endpoint_name"?: str, "metrics": ForwardPassMetrics}
 *                 or a bare ForwardPassMetrics with "worker_id" beside its fields.
 *   kv-hit-rate   KVHitRateEvent {"isl_tokens", "hit_tokens", "worker_id"} (published).
 *
 * Block hashes are u64 (serde prints them unsigned, so half are above
 * INT64_MAX); negative, fractional or larger values are refused (a decimal
 * string is taken as well: that is how values above INT64_MAX reach jansson).
 *
 * Every payload is validated whole before success: on failure nothing is
 * returned but the cause (for counters) and one line naming the fault.
 * Pure: no sockets, no threads; a decoder is used by one thread. */
#ifndef CRESCENT_MSGS_DYNAMO_EVENT_H
#define CRESCENT_MSGS_DYNAMO_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msgs/kv_event.h"

#define CR_DYN_MAX_PAYLOAD_BYTES (16u << 20)
#define CR_DYN_MAX_HASHES CR_KV_MAX_HASHES_PER_EVENT
#define CR_DYN_MAX_TOKENS CR_KV_MAX_TOKENS_PER_EVENT
#define CR_DYN_NAME_MAX 256u

/* Why a payload was refused (one counter each). */
enum cr_dyn_bad {
    CR_DYN_BAD_JSON = 0, /* not JSON, too deep or too large, or not an object */
    CR_DYN_BAD_FIELD,    /* a field missing or of the wrong type */
    CR_DYN_BAD_KIND,     /* an event variant other than stored/removed/cleared */
    CR_DYN_BAD_HASH,     /* a block hash not an integer in [0, 2^64) */
    CR_DYN_BAD_TOKENS,   /* a token id not in u32, or too few for the blocks */
    CR_DYN_BAD_LIMIT,    /* more hashes or tokens than the bounds above */
    CR_DYN_BAD_KINDS
};

struct cr_dyn_router_event {
    int64_t worker_id;
    bool has_event_id;
    uint64_t event_id;
    enum cr_kv_event_kind kind; /* STORED, REMOVED or CLEARED */
    const uint64_t *hashes;     /* engine block hashes, in chain order */
    uint32_t hash_count;
    /* Each block's hash of its own tokens (XXH3-64 of the tokens as
     * little-endian u32 with Dynamo's seed, 1337 unless changed): the blocks'
     * tokens_hash, or for the seed's shape its block_hashes themselves (the
     * seed computes them with compute_block_hash_for_seq); NULL when the
     * blocks carry no tokens_hash.  hash_count of them. */
    const uint64_t *local_hashes;
    bool has_parent;
    uint64_t parent_hash;
    bool has_token_ids;
    const uint32_t *token_ids;
    uint32_t token_count;
    bool has_lora_id;
    uint64_t lora_id;
};

/* ForwardPassMetrics with its worker. */
struct cr_dyn_metrics {
    int64_t worker_id;
    char endpoint_name[CR_DYN_NAME_MAX];
    uint64_t request_active_slots, request_total_slots;
    uint64_t kv_active_blocks, kv_total_blocks;
    uint64_t num_requests_waiting;
    double gpu_cache_usage_perc, gpu_prefix_cache_hit_rate;
};

struct cr_dyn_decoder;

/* Returns CR_OK and *out, or CR_ERR_NOMEM. */
int cr_dyn_decoder_create(struct cr_dyn_decoder **out);
void cr_dyn_decoder_destroy(struct cr_dyn_decoder *dec);

/* Decodes a RouterEvent.  On CR_OK fills *out, whose arrays belong to dec
 * until its next call.  On CR_ERR_PROTOCOL sets *cause and err (one line);
 * CR_ERR_NOMEM when memory ran out. */
int cr_dyn_decode_router_event(struct cr_dyn_decoder *dec, const void *payload, size_t len,
                               struct cr_dyn_router_event *out, enum cr_dyn_bad *cause, char *err,
                               size_t err_size);

/* Decodes load metrics, as cr_dyn_decode_router_event. */
int cr_dyn_decode_metrics(const void *payload, size_t len, struct cr_dyn_metrics *out,
                          enum cr_dyn_bad *cause, char *err, size_t err_size);

/* Writes a KVHitRateEvent's JSON into buf; returns its length, or 0 when it
 * does not fit. */
size_t cr_dyn_hit_rate_json(char *buf, size_t size, uint64_t isl_tokens, uint64_t hit_tokens,
                            int64_t worker_id);

/* "bad_json", "bad_field", ...; never NULL. */
const char *cr_dyn_bad_name(enum cr_dyn_bad cause);

#endif

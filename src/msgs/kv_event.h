/* KV-cache event decoding: every dialect the prefix indexer ingests.
 *
 * One decoder per publisher (or per indexer thread) turns a msgpack payload
 * (the third ZMQ frame) into a normalized struct cr_kv_batch.  The dialect is
 * detected per event, so the same call handles:
 *   - vLLM positional arrays: ["BlockStored", hashes, parent, tokens, block_size,
 *     lora_id?, medium?, lora_name?, extra_keys?, group_idx?, spec_kind?,
 *     sliding_window?, ...] (length >= 5, trailing extras ignored),
 *     ["BlockRemoved", hashes, medium?, group_idx?], ["AllBlocksCleared"];
 *   - vLLM >= 0.26 / newer SGLang map events ({"type": ..., field names});
 *   - standardized map events ({"event_type": "stored"|"removed"|"cleared", ...});
 *   - the store's own events (seed 000: BlockStoreEvent, BlockUpdateEvent,
 *     RemoveAllEvent);
 * inside batches [ts, events], [ts, events, dp_rank|nil] or
 * {"ts", "events", "data_parallel_rank"|"attn_dp_rank"|"dp_rank"}.
 *
 * Normalization rules:
 *   - ts: a float is seconds; an integer is milliseconds (the standardized
 *     publisher) and is divided by 1000.  Non-finite or negative ts is rejected.
 *   - Block hashes: any msgpack int width, signed or unsigned, becomes its
 *     64-bit two's complement value (SGLang's -1 is 0xFFFF...FF).  A bin of any
 *     length is reduced to its LAST 8 bytes read big-endian -- the integer form
 *     vLLM derives from a 32-byte digest -- and a bin shorter than 8 bytes is
 *     zero-padded on the left (bin 01 02 -> 0x0102).
 *   - Token ids must be non-negative ints that fit in u32.
 *   - Strings are copied into the decoder's arena and NUL-terminated; an
 *     absent (or nil) string has ptr == NULL.
 *
 * Validation is complete before success: the payload is first scanned
 * without allocation (well-formed, no trailing bytes, nesting <=
 * CR_KV_MAX_DEPTH, container counts plausible), then unpacked with msgpack-c
 * into a zone sized from that scan, then every event is type-checked and
 * bounded.  Any failure returns CR_ERR_PROTOCOL with a message such as
 * "event 3: BlockStored.token_ids length 40 != 3 blocks * 16" and no batch.
 *
 * Memory: the decoder owns a msgpack zone and an output arena; both are
 * rewound per batch and grow to the high-water mark, so steady-state decoding
 * performs no malloc.  A returned batch stays valid until the next
 * cr_kv_decode or cr_kv_decoder_destroy on the same decoder.
 *
 * Thread safety: a decoder is single-threaded; use one per thread. */
#ifndef CRESCENT_MSGS_KV_EVENT_H
#define CRESCENT_MSGS_KV_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits.  Anything beyond them is CR_ERR_PROTOCOL, never an allocation. */
#define CR_KV_MAX_PAYLOAD_BYTES (64u * 1024u * 1024u) /* one msgpack payload */
#define CR_KV_MAX_DEPTH 8u                 /* container nesting; formats need 6 */
#define CR_KV_MAX_EVENTS_PER_BATCH 16384u  /* the store sends <= 50, vLLM ~ a step */
#define CR_KV_MAX_HASHES_PER_EVENT 65536u  /* 1M-token prompt at block_size 16 */
#define CR_KV_MAX_TOKENS_PER_EVENT (1u << 21) /* 2M tokens */
#define CR_KV_MAX_BLOCK_SIZE (1u << 20)    /* tokens per block (vLLM/standard) */
#define CR_KV_MAX_STRING_BYTES 4096u       /* any one string field */
#define CR_KV_MAX_REPLICAS 256u            /* replicas of one store object */

enum cr_kv_event_kind {
    CR_KV_EVENT_STORED = 0,  /* BlockStored, "stored", BlockStoreEvent */
    CR_KV_EVENT_REMOVED = 1, /* BlockRemoved, "removed" */
    CR_KV_EVENT_CLEARED = 2, /* AllBlocksCleared, "cleared", RemoveAllEvent */
    CR_KV_EVENT_UPDATED = 3, /* BlockUpdateEvent: `replicas` is the new full set */
};

enum cr_kv_dialect {
    CR_KV_DIALECT_VLLM_ARRAY = 0, /* vLLM < 0.26 / SGLang positional arrays */
    CR_KV_DIALECT_VLLM_MAP = 1,   /* vLLM >= 0.26 / newer SGLang maps ("type") */
    CR_KV_DIALECT_STANDARD = 2,   /* standardized maps ("event_type") */
    CR_KV_DIALECT_STORE = 3,      /* the store's own seed-000 events */
};

/* vLLM's kv_cache_spec_kind; only FULL (or UNSET, older engines) groups are
 * prefix caches, so the indexer skips the others. */
enum cr_kv_spec_kind {
    CR_KV_SPEC_UNSET = 0,          /* absent or nil */
    CR_KV_SPEC_FULL_ATTENTION = 1, /* "full_attention", "full", "FullAttentionSpec" */
    CR_KV_SPEC_SLIDING_WINDOW = 2, /* any name containing "sliding" */
    CR_KV_SPEC_MAMBA = 3,          /* any name containing "mamba" */
    CR_KV_SPEC_OTHER = 4,          /* any other name: see spec_kind_name */
};

/* A string copied into the decoder arena; ptr == NULL when absent. */
struct cr_kv_str {
    const char *ptr; /* NUL-terminated */
    uint32_t len;
};

struct cr_kv_replica {
    struct cr_kv_str type;     /* "memory", "disk", "local_disk" */
    struct cr_kv_str location; /* transport endpoint or file path */
};

struct cr_kv_event {
    enum cr_kv_event_kind kind;
    enum cr_kv_dialect dialect;

    /* Engine block hashes (vLLM/SGLang block_hashes, standard seq_hashes). */
    const uint64_t *hashes;
    uint32_t hash_count;
    bool seq_hashes; /* true: hashes are already standard sequence hashes */
    /* Stored runs without token ids: each block's own hash of its tokens by
     * the standard rule (Dynamo's tokens_hash), hash_count of them; NULL none. */
    const uint64_t *local_hashes;
    bool has_parent;
    uint64_t parent_hash;

    bool has_token_ids;
    uint32_t token_count;
    const uint32_t *token_ids;
    uint32_t block_size; /* 0 when absent */

    struct cr_kv_str medium;
    struct cr_kv_str lora_name;
    bool has_lora_id;
    int64_t lora_id;
    bool has_group_idx;
    uint32_t group_idx;
    enum cr_kv_spec_kind spec_kind;
    struct cr_kv_str spec_kind_name;
    bool has_sliding_window;
    int64_t sliding_window;

    /* Standardized events. */
    bool has_event_id;
    uint64_t event_id;
    bool has_timestamp_ms;
    int64_t timestamp_ms;
    bool has_dp_rank; /* per-event dp_rank; the batch's may be set too */
    uint32_t dp_rank;
    struct cr_kv_str model_name; /* standardized and store events */
    struct cr_kv_str additional_salt;
    struct cr_kv_str tenant_id;
    struct cr_kv_str backend_id;
    bool has_base_block_idx;
    uint64_t base_block_idx;

    /* The store's own events. */
    struct cr_kv_str key;
    struct cr_kv_str block_hash;        /* "" when unset, as the store sends it */
    struct cr_kv_str parent_block_hash; /* "" at the root */
    const struct cr_kv_replica *replicas;
    uint32_t replica_count;
};

struct cr_kv_batch {
    double ts; /* seconds since the epoch */
    bool has_dp_rank;
    uint32_t dp_rank;
    uint32_t event_count;
    const struct cr_kv_event *events;
};

struct cr_kv_decoder;

/* Creates a decoder.  Returns CR_OK and sets *out, or CR_ERR_NOMEM. */
int cr_kv_decoder_create(struct cr_kv_decoder **out);

/* Frees the decoder and every batch it returned.  NULL is a no-op. */
void cr_kv_decoder_destroy(struct cr_kv_decoder *dec);

/* Decodes one payload.  On CR_OK sets *out to a batch owned by `dec`, valid
 * until the next call on `dec`.  On CR_ERR_PROTOCOL (malformed, wrong types,
 * limits exceeded) or CR_ERR_NOMEM, *out is NULL and, when err != NULL, a
 * NUL-terminated message naming the fault is written to err[0..err_size).
 * Invalidates any batch previously returned by `dec`. */
int cr_kv_decode(struct cr_kv_decoder *dec, const void *payload, size_t len,
                 const struct cr_kv_batch **out, char *err, size_t err_size);

/* "STORED", "REMOVED", "CLEARED", "UPDATED"; never NULL. */
const char *cr_kv_event_kind_name(enum cr_kv_event_kind kind);

#endif

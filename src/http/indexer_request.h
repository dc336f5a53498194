/* Request bodies of the indexer's HTTP routes: JSON (jansson) or msgpack,
 * validated completely into plain structs before anything is asked.
 * Pure functions, safe on any thread. */
#ifndef CRESCENT_HTTP_INDEXER_REQUEST_H
#define CRESCENT_HTTP_INDEXER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msgs/indexer_msgs.h"

#define CR_INDEXER_QUERY_TOKENS_MAX (1u << 21) /* 2M tokens, as an event may carry */
#define CR_INDEXER_DETAIL_MAX 256u
#define CR_INDEXER_TOP_K_MAX 65536u /* more than instances can be (16-bit ids) */
/* Nesting bound of JSON bodies and files (the deepest request is 3 levels). */
#define CR_JSON_DEPTH_MAX 32u

struct json_t;

/* /query, /query_by_hash, /route. */
struct cr_indexer_request {
    char model[CR_INDEXER_NAME_MAX];
    char tenant[CR_INDEXER_NAME_MAX]; /* "default" when absent */
    char lora[CR_INDEXER_NAME_MAX];
    char salt[CR_INDEXER_NAME_MAX]; /* cache_salt (alias additionalsalt) */
    char instance[CR_INDEXER_NAME_MAX];
    bool has_instance;
    uint32_t block_size;
    uint32_t *tokens; /* /query, /route: token_ids */
    size_t token_count;
    uint64_t *hashes; /* /query_by_hash: seq_hashes (alias block_hash) */
    size_t hash_count;
    bool include_unhealthy; /* /route: also instances never connected or stale */
    uint32_t top_k; /* answer only the top_k longest matches; 0: every instance */
};

/* Returns whether no array or object of the JSON text nests deeper than
 * depth_max (strings skipped, escapes honoured; other errors are left to the
 * parser); false with detail naming the byte and the bound.  Iterative: call
 * it before any recursive parser. */
bool cr_json_depth_ok(const char *text, size_t len, unsigned depth_max, char *detail,
                      size_t detail_size);

/* Parses a body into a jansson value: JSON, or msgpack when msgpack is true
 * (unsigned integers above INT64_MAX become decimal strings in both, since
 * jansson integers are signed).  JSON nested deeper than CR_JSON_DEPTH_MAX is
 * refused before jansson parses it.  Returns NULL with detail set on bad input. */
struct json_t *cr_indexer_body_parse(const char *body, size_t len, bool msgpack, char *detail,
                                     size_t detail_size);

/* Fills *req from a parsed body.  by_hash selects seq_hashes/block_hash
 * instead of token_ids.  Returns CR_OK, or CR_ERR_INVALID_PARAMS with detail
 * naming the field (missing, mistyped, block_size 0, out of range); *req then
 * holds nothing to free. */
int cr_indexer_request_from_json(struct json_t *root, bool by_hash, struct cr_indexer_request *req,
                                 char *detail, size_t detail_size);

/* Fast path for the common /query body: one JSON object whose values are
 * plain strings (ASCII, no escapes), integers, null or arrays of integers.
 * Returns CR_OK with *req filled (token_ids query, validated as
 * cr_indexer_request_from_json would), or CR_ERR_AGAIN when the body is
 * outside that subset or invalid -- the caller then takes the jansson path,
 * which accepts all of JSON and words the errors.  Never accepts a body the
 * jansson path would refuse. */
int cr_indexer_request_fast(const char *body, size_t len, struct cr_indexer_request *req);

void cr_indexer_request_free(struct cr_indexer_request *req);

/* Fills a load report from {instance_id, tenant_id?, request_active_slots?,
 * ...} (the fields of seed 003's ForwardPassMetrics, flat or under
 * "metrics").  Returns CR_OK or CR_ERR_INVALID_PARAMS with detail. */
int cr_indexer_load_from_json(struct json_t *root, struct cr_indexer_load *load, char *detail,
                              size_t detail_size);

#endif

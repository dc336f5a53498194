/* Messages to the prefix indexer actor (types 192..255, see store_msgs.h).
 *
 * Every message here is an ask from an HTTP worker: the body points into the
 * asker's memory, valid until the reply (msg.h).  The only memory that moves
 * the other way is a query's result (`result_out`) and a JSON document
 * (`json_out`), which the actor allocates and the asker frees
 * (cr_indexer_result_free, json_decref).
 *
 * The store's own events arrive as CR_MSG_STORE_EVENT (store_msgs.h). */
#ifndef CRESCENT_MSGS_INDEXER_MSGS_H
#define CRESCENT_MSGS_INDEXER_MSGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/prefix_index.h"
#include "msgs/store_msgs.h"

#define CR_INDEXER_NAME_MAX 256u     /* instance, tenant, model, LoRA, salt (with NUL) */
#define CR_INDEXER_ENDPOINT_MAX 256u /* ZMQ endpoint (with NUL) */
#define CR_INDEXER_ERROR_MAX 256u

enum cr_indexer_msg_type {
    CR_MSG_INDEXER_REGISTER = CR_MSG_INDEXER_FIRST + 0,    /* ask: cr_msg_indexer_register */
    CR_MSG_INDEXER_UNREGISTER = CR_MSG_INDEXER_FIRST + 1,  /* ask: cr_msg_indexer_unregister */
    CR_MSG_INDEXER_QUERY = CR_MSG_INDEXER_FIRST + 2,       /* ask: cr_msg_indexer_query */
    CR_MSG_INDEXER_LOAD = CR_MSG_INDEXER_FIRST + 3,        /* ask: cr_msg_indexer_load */
    CR_MSG_INDEXER_SERVICES = CR_MSG_INDEXER_FIRST + 4,    /* ask: cr_msg_indexer_json */
    CR_MSG_INDEXER_GLOBAL_VIEW = CR_MSG_INDEXER_FIRST + 5, /* ask: cr_msg_indexer_json */
    CR_MSG_INDEXER_NATS = CR_MSG_INDEXER_FIRST + 6,        /* send: cr_msg_indexer_nats */
};

/* A message libnats delivered on a Dynamo subject (src/actors/indexer_nats.c),
 * handed from libnats' delivery thread to the indexer's: the natsMsg is
 * owned by the message (natsMsg_Destroy'd by the indexer, or by discard). */
enum cr_indexer_nats_kind { CR_INDEXER_NATS_KV = 0, CR_INDEXER_NATS_METRICS = 1 };
struct cr_msg_indexer_nats {
    void *nats_msg; /* natsMsg * */
    uint32_t kind;  /* enum cr_indexer_nats_kind */
};

/* One publisher registration (the conductor's /register body). */
struct cr_indexer_registration {
    char instance_id[CR_INDEXER_NAME_MAX];
    char tenant_id[CR_INDEXER_NAME_MAX]; /* "default" when absent */
    uint32_t dp_rank;
    char endpoint[CR_INDEXER_ENDPOINT_MAX];
    char replay_endpoint[CR_INDEXER_ENDPOINT_MAX]; /* "" = no replay */
    char type[32];                                 /* "vLLM", "SGLang", "Mooncake", ... */
    char model[CR_INDEXER_NAME_MAX];
    char lora_name[CR_INDEXER_NAME_MAX];
    uint32_t block_size;
    char salt[CR_INDEXER_NAME_MAX]; /* "additionalsalt" */
    /* crescent binds the SUB at endpoint and the publisher connects its PUB
     * (vLLM does when its endpoint names a host, not "*"); replay_endpoint
     * is still connected to (vLLM's replay ROUTER always binds). */
    bool bind;
};

struct cr_msg_indexer_register {
    const struct cr_indexer_registration *reg;
    char *error; /* CR_INDEXER_ERROR_MAX bytes: why a registration failed */
};

struct cr_msg_indexer_unregister {
    const char *instance_id;
    const char *tenant_id;
    uint32_t dp_rank;
    char *error; /* CR_INDEXER_ERROR_MAX bytes: why it failed (a failed save) */
};

/* A query by sequence hashes; the HTTP worker hashes token ids itself (the
 * namespace seed is a pure function of LoRA and salt), so the actor only
 * walks the index. */
struct cr_indexer_query {
    struct cr_prefix_context_key key;
    const uint64_t *seq_hashes;
    uint32_t block_count;
    const char *instance_filter; /* NULL: every instance */
    bool route;                  /* pick the best instance and count its hit rate */
    uint64_t request_tokens;     /* with route: the prompt's length in tokens */
    /* With route: also instances whose publishers never connected or are
     * stale (left out by default: their index entries may be wrong). */
    bool include_unhealthy;
};

/* One instance's hit.  dp_tokens holds one count per set bit of dp_mask, in
 * rank order (most hits are on one or two ranks: 64 slots per hit made a
 * 1000-hit answer 300 KB). */
struct cr_indexer_hit {
    const char *instance;     /* points into the result block */
    const uint32_t *dp_tokens; /* points into the result block */
    uint16_t instance_id;     /* the index's id (valid until the instance is removed) */
    uint32_t longest_tokens;
    uint32_t medium_tokens[CR_PREFIX_MEDIA_MAX];
    uint64_t dp_mask;
};

/* What a query's context was (X-Crescent-Match on /query): an empty answer
 * for a known context is a real miss; for an unknown one it says nothing
 * about the prompt. */
enum cr_indexer_match {
    CR_INDEXER_MATCH_HIT,              /* at least one instance matched */
    CR_INDEXER_MATCH_MISS,             /* known context and instance, nothing held */
    CR_INDEXER_MATCH_UNKNOWN_TENANT,   /* no instance is known under the tenant */
    CR_INDEXER_MATCH_UNKNOWN_CONTEXT,  /* no events for the model/LoRA/block size/salt */
    CR_INDEXER_MATCH_UNKNOWN_INSTANCE, /* the instance_id filter names no known instance */
};

/* A query's answer: one heap block (header, hits, DP counts, names), freed with
 * cr_indexer_result_free.  With route, best_instance is "" when no instance
 * of the tenant and model is known. */
struct cr_indexer_result {
    uint32_t hit_count;
    uint8_t media_count;
    char media[CR_PREFIX_MEDIA_MAX][32];
    struct cr_indexer_hit *hits;
    char best_instance[CR_INDEXER_NAME_MAX];
    uint32_t best_tokens;
    double best_cost;
    double best_load;
    uint32_t candidates;
    uint32_t excluded; /* candidates left out as unhealthy (see include_unhealthy) */
    enum cr_indexer_match match;
};

struct cr_msg_indexer_query {
    const struct cr_indexer_query *query;
    struct cr_indexer_result **result_out;
};

/* Load report of one instance (seed 003's ForwardPassMetrics). */
struct cr_indexer_load {
    char instance_id[CR_INDEXER_NAME_MAX];
    char tenant_id[CR_INDEXER_NAME_MAX];
    uint64_t request_active_slots, request_total_slots;
    uint64_t kv_active_blocks, kv_total_blocks;
    uint64_t num_requests_waiting;
    double gpu_cache_usage_perc;
    double gpu_prefix_cache_hit_rate;
};

/* Instances known only from POST /load (no publisher, no store events): at
 * most this many, and each is forgotten when its last report is older than
 * CR_INDEXER_LOAD_TTL_NS, so a client cannot fill the instance table.  A
 * report for one more is answered CR_ERR_NOMEM. */
#define CR_INDEXER_LOAD_ONLY_MAX 1024u
#define CR_INDEXER_LOAD_TTL_NS (30ull * 1000000000u)

struct cr_msg_indexer_load {
    const struct cr_indexer_load *load;
};

struct json_t;
struct cr_msg_indexer_json {
    struct json_t **json_out; /* the actor builds it; the asker json_decref's it */
};

void cr_indexer_result_free(struct cr_indexer_result *result);

/* A /query (not a /route) answered on the calling thread, reading the
 * indexer's index under its read lock (src/actors/indexer_read.c);
 * indexer_state is the indexer subsystem's state (NULL: ask the actor, as
 * a bench does to compare).  Returns CR_OK with
 * *result_out set, or CR_OK with *result_out NULL when the answer is the
 * actor's to give (ask it: an unknown context, a filter naming an instance
 * known only from /load), or CR_ERR_NOMEM. */
int cr_indexer_query_read(void *indexer_state, const struct cr_indexer_query *q,
                          struct cr_indexer_result **result_out);

/* Fills *reg from one registration object (the /register body, or an entry
 * of kvevent_instance; default_instance names it when it has no
 * "instance_id").  Returns CR_OK or CR_ERR_INVALID_PARAMS with one line in
 * error (missing or mistyped field, bad value); validates as
 * cr_indexer_registration_check. */
int cr_indexer_registration_from_json(struct json_t *obj, const char *default_instance,
                                      struct cr_indexer_registration *reg, char *error,
                                      size_t error_size);

#endif

/* The store-master methods, run on the segments actor's thread: each takes a
 * decoded, validated request (struct cr_master_call), applies it to the
 * store and packs the protobuf response into call->reply.
 *
 * The response is packed here, not in the gateway, because the views the
 * store hands out (segment names, endpoints, keys) point into store memory
 * and stay valid only until the next call that changes the store: packing
 * copies them once, where a deep copy for the gateway would copy twice. */
#ifndef CRESCENT_ACTORS_RPC_METHODS_H
#define CRESCENT_ACTORS_RPC_METHODS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/read_latency.h"
#include "core/store.h"
#include "msgs/master_msgs.h"

/* Scratch memory for building responses, kept between calls (one per
 * segments actor; single-threaded). */
struct cr_rpc_arena;
struct cr_rpc_arena *cr_rpc_arena_new(void); /* NULL when out of memory */
void cr_rpc_arena_free(struct cr_rpc_arena *arena);

/* The shared file tier as crescentd runs it (docs/tiers.md); kept by the
 * segments actor, read and counted by DiskReplicaReport and GetVersion. */
struct cr_rpc_files {
    char root[CR_STORE_FILE_PATH_LEN_MAX / 2]; /* --root_fs_dir; "" none */
    char cluster[256];                          /* --cluster_id */
    char dir[CR_STORE_FILE_PATH_LEN_MAX / 2 + 258]; /* root/cluster */
    uint64_t quota_bytes;   /* --global_file_segment_size; UINT64_MAX unlimited */
    uint64_t rng;           /* the file tier's eviction sampling */
    /* Persist failures clients reported, by cause: missing, read-only, full, other. */
    uint64_t failed[4];
    uint64_t skipped_busy; /* persists clients skipped: their writer was behind */
    uint64_t reports, reported_files, dropped_files;
};

/* What a call's entries came to, for Mooncake's metrics (counted by the
 * segments actor: segments_mc.c).  Out fields, zero before the call. */
struct cr_rpc_outcome {
    uint32_t items, failed_items; /* a batch's entries, and those refused as Mooncake counts */
    uint32_t gets, gets_valid;    /* GetReplicaList lookups (single and batch), those answered */
    uint32_t mem_hits, file_hits; /* answered with a memory / file (disk, SSD) replica first */
    uint64_t mem_hit_bytes, file_hit_bytes; /* their objects' bytes */
};

struct cr_rpc_run {
    cr_store *store;
    struct cr_rpc_arena *arena;
    uint64_t now_ms;
    uint64_t client_ttl_ms; /* reported by Ping */
    bool no_space;          /* out: some PutStart found no space (NO_AVAILABLE_HANDLE) */
    /* A finished scan of the call's regex (GetReplicaListByRegex,
     * RemoveByRegex), applied instead of scanning now; NULL: scan now. */
    const struct cr_store_regex_scan *scan;
    /* A finished sliced RemoveAll of the call (cr_store_remove_all_step):
     * its count is answered instead of removing now; NULL: remove now. */
    const struct cr_store_remove_all_run *remove_all;
    /* The file tier (NULL or root "": none). */
    struct cr_rpc_files *files;
    struct cr_rpc_outcome outcome; /* out */
    /* Read latency per tier clients report with Ping (NULL: not kept). */
    struct cr_read_latency_sums *reads;
};

/* Returns whether the call is a RemoveAll, with its tenant (NULL: every
 * tenant) and force. */
bool cr_rpc_methods_remove_all(const struct cr_master_call *call, const char **tenant,
                               bool *force);

/* Returns whether the call is a regex method, with its tenant and pattern. */
bool cr_rpc_methods_regex(const struct cr_master_call *call, const char **tenant,
                          const char **pattern);

/* FetchTasks and MarkTaskToComplete: run here for the executor's secret
 * check only.  One that passes is left without a reply (call->reply NULL)
 * for the tasks actor to answer; a refusal has its reply. */
bool cr_rpc_methods_task_gated(uint16_t method);

/* Runs call->request and sets call->status (CR_OK, or CR_ERR_NOMEM with a
 * text body when the response could not be built), call->reply and
 * call->reply_len.  Returns the response's status_code (the store's verdict;
 * for batches the first failing entry's code, or CR_OK). */
int cr_rpc_methods_run(struct cr_rpc_run *run, struct cr_master_call *call);

/* Prefetches what running `call` will look up first (the key of a
 * single-key method whose call->key is made; others are left alone), as
 * cr_store_prefetch. */
void cr_rpc_methods_prefetch(const cr_store *store, const struct cr_master_call *call, bool deep);

/* Makes call->key for a validated single-key request (GetReplicaList,
 * PutStart, ExistKey, Remove, PutEnd, PutRevoke); leaves it unset for other
 * methods.  The gateway calls it on its own thread after cr_rpc_validate;
 * segments makes the key itself for a call that arrives without one. */
void cr_rpc_call_prepare_key(struct cr_master_call *call);

#endif

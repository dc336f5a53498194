/* Messages of the store master: RPC gateway ⇄ segments, segments ⇄ leases,
 * and the admin asks of the HTTP routes.  Types 65..127 (store_msgs.h).
 *
 *   rpc ──MASTER_CALL──▶ segments ──MASTER_DONE──▶ rpc            (owned call)
 *   leases ──EVICT_POLL──▶ segments ──EVICT_SAMPLE──▶ leases      (owned sample)
 *   leases ──EVICT_APPLY──▶ segments                              (owned victims)
 *   segments ──EVICT_NEEDED──▶ leases     (a PutStart found no space)
 *   leases ──ZOMBIE_RECLAIM──▶ segments   (reclaim puts past the release timeout)
 *   HTTP worker ──MASTER_ADMIN (ask)──▶ segments
 *
 * Ownership: every pointer in these bodies transfers ownership with the
 * message (the receiver frees it, or its discard hook does), except in the
 * MASTER_ADMIN ask and in a MASTER_CALL sent as an ask, whose pointers stay
 * the asker's. */
#ifndef CRESCENT_MSGS_MASTER_MSGS_H
#define CRESCENT_MSGS_MASTER_MSGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/store.h"
#include "msgs/msg.h"
#include "msgs/store_msgs.h"

struct cr_actor;
struct ProtobufCMessage;
struct cr_evict_candidate;
struct cr_rpc_batch;

enum cr_master_msg_type {
    /* rpc → segments: body cr_msg_master_call.  Segments runs the call and
     * sends it back as MASTER_DONE to call->reply_to; sent as an ask
     * (in-process callers, benchmarks) it is answered with cr_reply instead
     * and call->reply_to is ignored. */
    CR_MSG_MASTER_CALL = CR_MSG_STORE_FIRST + 0,
    /* segments → rpc: body cr_msg_master_call, the call with its reply,
     * first of a chain of finished calls linked by call->next (one message
     * per batch, not per call: see segments' round_end). */
    CR_MSG_MASTER_DONE = CR_MSG_STORE_FIRST + 1,
    /* leases → segments: body cr_msg_evict_poll. */
    CR_MSG_EVICT_POLL = CR_MSG_STORE_FIRST + 2,
    /* segments → leases: body cr_msg_evict_sample (answer to EVICT_POLL). */
    CR_MSG_EVICT_SAMPLE = CR_MSG_STORE_FIRST + 3,
    /* leases → segments: body cr_msg_evict_apply. */
    CR_MSG_EVICT_APPLY = CR_MSG_STORE_FIRST + 4,
    /* segments → leases: no body. */
    CR_MSG_EVICT_NEEDED = CR_MSG_STORE_FIRST + 5,
    /* leases → segments: no body. */
    CR_MSG_ZOMBIE_RECLAIM = CR_MSG_STORE_FIRST + 6,
    /* HTTP → segments (ask): body cr_msg_master_admin. */
    CR_MSG_MASTER_ADMIN = CR_MSG_STORE_FIRST + 7,
    /* Timers of the store actors (to themselves). */
    CR_MSG_SEGMENTS_TICK = CR_MSG_STORE_FIRST + 8,
    CR_MSG_LEASES_TICK = CR_MSG_STORE_FIRST + 9,
    CR_MSG_RPC_TICK = CR_MSG_STORE_FIRST + 10,
    /* segments → itself (a timer due now): the next slice of a regex call. */
    CR_MSG_SEGMENTS_REGEX_STEP = CR_MSG_STORE_FIRST + 11,
    /* The local segment's heartbeat (data.c, to itself). */
    CR_MSG_DATA_TICK = CR_MSG_STORE_FIRST + 12,
    /* segments → itself (a timer): a snapshot's next slice is due. */
    CR_MSG_SEGMENTS_SNAPSHOT_STEP = CR_MSG_STORE_FIRST + 13,
    /* segments → itself (a timer): the next step of the stats' census walk. */
    CR_MSG_SEGMENTS_CENSUS_STEP = CR_MSG_STORE_FIRST + 14,
};

/* ZMQ routing ids are at most 255 bytes. */
#define CR_MASTER_IDENTITY_MAX 255u
/* Tenant names travel in store-event messages (cr_msg_store_event.tenant). */
#define CR_MASTER_TENANT_MAX 23u
/* Bytes of packed response kept inside the call (struct cr_master_call). */
#define CR_MASTER_REPLY_INLINE 256u
/* Keys per batch request. */
#define CR_MASTER_BATCH_MAX 4096u

/* One RPC in flight.  Allocated by the gateway, owned by whoever holds the
 * message that carries it; freed with cr_master_call_free. */
struct cr_master_call {
    uint16_t method; /* enum Crescent__Master__Method */
    uint64_t request_id;
    struct cr_actor *reply_to;        /* where MASTER_DONE goes */
    struct ProtobufCMessage *request; /* decoded (protobuf_c unpack), owned */
    /* The memory `request` was unpacked into (cr_rpc_unpack), freed whole
     * with the call; NULL when it was unpacked with malloc (freed with
     * protobuf_c_message_free_unpacked) or is not owned. */
    void *request_arena;
    /* A batch request read by hand (rpc/rpc_batch.h), in request_arena;
     * `request` is NULL then.  NULL for other calls: segments reads a batch
     * that came unpacked from `request`. */
    const struct cr_rpc_batch *batch;
    int32_t status;                   /* transport status for the reply: CR_OK or error */
    uint8_t *reply;   /* packed response or error text: reply_inline, or malloc'd */
    size_t reply_len;
    uint64_t received_ns; /* when the gateway read it (runtime clock) */
    bool one_frame;       /* the request came in one frame: so does the reply */
    bool admin;           /* it carried crescentd's admin token (never set without one) */
    /* 0: its reply goes to reply_to as MASTER_DONE; k: it came from edge k-1
     * of the segments actor (rpc/edge.h), which writes the reply. */
    uint8_t edge;
    /* The request's key with its hash, for single-key methods: made by the
     * gateway after validation (cr_rpc_call_prepare_key), so segments
     * neither measures nor hashes it; key.key NULL when not made. */
    struct cr_store_key key;
    /* MASTER_DONE: the next finished call of the chain, NULL at its end.
     * Written by segments before the chain is sent. */
    struct cr_master_call *next;
    uint8_t identity_len;
    uint8_t identity[CR_MASTER_IDENTITY_MAX];
    /* Most responses (a status, a replica or two) fit here: segments packs
     * into the call the gateway allocated anyway, instead of a malloc on its
     * thread freed on the gateway's. */
    _Alignas(8) uint8_t reply_inline[CR_MASTER_REPLY_INLINE];
};

/* Frees the request, the reply and the call; NULL is ignored.  Defined in
 * src/rpc/rpc_codec.c. */
void cr_master_call_free(struct cr_master_call *call);

/* Frees every call of a MASTER_DONE chain (cr_master_call_free each). */
void cr_master_call_free_chain(struct cr_master_call *head);

/* Frees the reply only (it may live in the call), for callers that own the
 * call and reuse it: in-process asks, benchmarks. */
void cr_master_call_reply_free(struct cr_master_call *call);

struct cr_msg_master_call {
    struct cr_master_call *call;
};

struct cr_msg_evict_poll {
    uint16_t seq;         /* echoed in the sample: which poll it answers (wraps) */
    uint32_t sample_size; /* candidates wanted */
    uint8_t alloc_failed; /* a PutStart failed for lack of space */
};

/* Segments' answer: usage and the sampled candidates.  `candidates` is NULL
 * when nothing needs to be freed (bytes_to_free and objects_to_free 0).
 * (Leases reads allow_evict_soft_pinned_objects from the daemon config: the
 * body is full.) */
struct cr_msg_evict_sample {
    struct cr_evict_candidate *candidates; /* owned, malloc'd */
    uint32_t objects_to_free; /* the count watermark's (≤ max_objects, 2^30) */
    uint16_t count;           /* ≤ segments' SAMPLE_MAX */
    uint16_t seq;             /* the poll's */
    uint64_t bytes_to_free;
    uint64_t used_bytes;
    uint64_t capacity_bytes;
};

struct cr_msg_evict_apply {
    struct cr_evict_candidate *victims; /* owned, malloc'd */
    uint32_t count;
};

enum cr_master_admin_kind {
    CR_MASTER_ADMIN_SEGMENTS = 1, /* every segment */
    CR_MASTER_ADMIN_SEGMENT = 2,  /* one segment: name */
    CR_MASTER_ADMIN_OBJECTS = 3,  /* tenant, prefix, limit */
    CR_MASTER_ADMIN_OBJECT = 4,   /* tenant, key */
    CR_MASTER_ADMIN_STATS = 5,
    CR_MASTER_ADMIN_KEYS = 6,     /* every key of every tenant: {"keys": [...]} */
    CR_MASTER_ADMIN_REMOVE_ALL = 7, /* a mutation: tenant (NULL: every one), force:
                                       {"removed_count": N} (cr_store_remove_all) */
    CR_MASTER_ADMIN_RECENT_OBJECTS = 8, /* the last objects put, newest first: tenant, prefix, limit */
    CR_MASTER_ADMIN_QUOTAS = 9,         /* Mooncake's tenant quotas: name (NULL: every one) */
    CR_MASTER_ADMIN_QUOTA_SET = 10,     /* a mutation: name, quota_bytes */
    CR_MASTER_ADMIN_QUOTA_DELETE = 11,  /* a mutation: name */
    CR_MASTER_ADMIN_DRAIN_CREATE = 12,  /* Mooncake's drain jobs (a mutation): drain */
    CR_MASTER_ADMIN_DRAIN_QUERY = 13,   /* drain (its job id) */
    CR_MASTER_ADMIN_DRAIN_CANCEL = 14,  /* a mutation: drain (its job id) */
};

struct cr_drain_request; /* actors/segments_drain.h */

/* Ask: segments renders the answer as JSON text into *json_out (malloc'd;
 * the asker frees it) and replies CR_OK, CR_ERR_SEGMENT_NOT_FOUND,
 * CR_ERR_OBJECT_NOT_FOUND or CR_ERR_NOMEM. */
struct cr_master_admin_query {
    enum cr_master_admin_kind kind;
    const char *name;   /* segment name or key */
    const char *tenant; /* NULL: every tenant (objects), "default" (object) */
    const char *prefix;
    uint32_t limit;
    uint64_t wall_now_ms; /* CLOCK_REALTIME when asked: object times are shown in ISO 8601 */
    bool hide_owner;      /* the asker is no admin (crescentd has an admin token): owner null */
    /* Objects in slices: where this slice starts and ends (in/out), and
     * whether the walk is done (out); NULL: the whole walk in one answer. */
    uint32_t *cursor;
    bool *done;
    bool force;           /* REMOVE_ALL: leased objects too */
    uint64_t quota_bytes; /* QUOTA_SET */
    const struct cr_drain_request *drain; /* DRAIN_* */
};

struct cr_msg_master_admin {
    const struct cr_master_admin_query *query;
    char **json_out;
};

#endif

/* Store events and their seed-000 msgpack encoding.
 *
 * The segment manager creates one cr_store_event per change (a first Put, a
 * replica change, a RemoveAll) and hands it to the publisher by pointer.  The
 * publisher appends events to a cr_event_encoder and finishes each batch into
 * a cr_event_batch: the exact payload bytes of seed 000
 * (`[ts, [event, ...]]`), encoded once and shared by reference count between
 * the PUB send and the replay ring, never re-encoded.
 *
 * Wire shapes (seed 000, byte for byte; msgpack-c chooses the smallest forms,
 * which is also what Python's msgpack.packb produces):
 *   ["BlockStoreEvent", key, replicas, model_name, block_size, block_hash,
 *    parent_block_hash, token_ids]                                   8 elements
 *   ["BlockUpdateEvent", key, replicas]                              3 elements
 *   ["RemoveAllEvent"]                                               1 element
 *   replicas = [[type, location], ...], type "memory" | "disk" | "local_disk"
 *
 * The encoder is a single-threaded value.  An event is immutable once made.
 * Segments writes the events of one round into a cr_store_event_chain, one
 * heap block shared by reference count between the publisher and the
 * indexer: one malloc, one free and one atomic per consumer for a chain of
 * up to 32 store changes, not per change (each was a malloc on segments, a
 * free on another thread and a reference taken and dropped twice;
 * bench/RESULTS.md, "Store events in one block per chain").  cr_event_batch
 * is shared the same way.  A lone event (cr_store_event_new_*) is for tests and
 * tools: one block, freed by cr_store_event_free. */
#ifndef CRESCENT_MSGS_STORE_EVENT_H
#define CRESCENT_MSGS_STORE_EVENT_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Defaults of the reference publisher (wire-formats.md §1). */
#define CR_EVENT_BATCH_MAX_EVENTS_DEFAULT 50u
/* Largest string, list or replica count the msgpack format can carry (str32,
 * array32).  A longer input is refused rather than truncated. */
#define CR_STORE_EVENT_LEN_MAX UINT32_MAX

typedef enum cr_store_event_kind {
    CR_STORE_EVENT_BLOCK_STORE = 0,
    CR_STORE_EVENT_BLOCK_UPDATE = 1,
    CR_STORE_EVENT_REMOVE_ALL = 2,
} cr_store_event_kind;
#define CR_STORE_EVENT_KIND_COUNT 3

typedef enum cr_replica_type {
    CR_REPLICA_MEMORY = 0,
    CR_REPLICA_DISK = 1,
    CR_REPLICA_LOCAL_DISK = 2,
} cr_replica_type;
#define CR_REPLICA_TYPE_COUNT 3

/* A byte string that is not necessarily NUL-terminated.  `ptr` may be NULL
 * only when `len` is 0 (the empty string, the seed's "unset"). */
typedef struct cr_event_str {
    const char *ptr;
    size_t len;
} cr_event_str;

typedef struct cr_store_replica {
    cr_replica_type type;
    cr_event_str location; /* transport endpoint or file path */
} cr_store_replica;

/* StoreEventInfo.  A zeroed struct is the seed's "unset" value:
 * model_name "", block_size 0, block_hash "", parent_block_hash "", token_ids []. */
typedef struct cr_store_event_info {
    cr_event_str model_name;
    uint32_t block_size;
    cr_event_str block_hash;
    cr_event_str parent_block_hash;
    const uint32_t *token_ids; /* may be NULL when token_count is 0 */
    size_t token_count;
} cr_store_event_info;

/* One store event, one contiguous piece of memory (a lone block or a part
 * of a chain's): this header followed by the replica array, the token ids
 * and every string (each also NUL-terminated).  The pointers inside point
 * into that memory: never copy the struct by value to keep it. */
typedef struct cr_store_event {
    cr_store_event_kind kind;
    uint32_t replica_count;
    cr_event_str key;
    const cr_store_replica *replicas;
    cr_store_event_info info; /* defaults unless kind is BLOCK_STORE */
    size_t size_bytes;        /* the event's memory, header included */
    /* The next event of its chain, in order; NULL at the end (and for a
     * lone event).  Written before the chain is first shared. */
    struct cr_store_event *next;
} cr_store_event;

/* Store events in one heap block, in order from `head` along `next`.
 * Filled by one thread (cr_store_event_chain_add), then shared read-only:
 * each holder reads its events and drops its reference once
 * (cr_store_event_chain_release); the last frees the block.  `refs` is the
 * only field written after the chain is first shared. */
typedef struct cr_store_event_chain {
    atomic_uint refs;
    uint32_t count;    /* events in it */
    cr_store_event *head, *tail;
    size_t used;       /* bytes of `bytes` taken */
    size_t capacity;   /* bytes of `bytes` */
    alignas(max_align_t) unsigned char bytes[];
} cr_store_event_chain;

/* A chain's default room: a store event of a 40-byte key, one replica and
 * no StoreEventInfo strings takes about 220 bytes, so 32 of them fit. */
#define CR_STORE_EVENT_CHAIN_BYTES_DEFAULT (8u * 1024u)

/* An encoded batch: immutable once finished.  The publisher and the replay
 * actor hold it at the same time (PUB send, replay ring), so the reference
 * count is the one atomic in the event plane; everything else in the struct
 * is written before the batch is first shared and only read afterwards. */
typedef struct cr_event_batch {
    atomic_uint refcount;
    uint32_t event_count;
    uint64_t seq;
    double ts_s;
    uint32_t event_count_by_kind[CR_STORE_EVENT_KIND_COUNT];
    size_t len;        /* payload bytes */
    uint8_t bytes[];   /* seed-000 payload: [ts, [events...]] */
} cr_event_batch;

typedef struct cr_event_encoder cr_event_encoder;

typedef struct cr_event_encoder_config {
    uint32_t max_events;           /* events per batch; 0 means 50 */
    size_t initial_capacity_bytes; /* first buffer size; 0 means 16 KiB */
} cr_event_encoder_config;

static inline cr_event_str cr_event_str_c(const char *s) {
    cr_event_str str = {s, s != NULL ? strlen(s) : 0};
    return str;
}

/* Names on the wire: "BlockStoreEvent" ..., "memory" ...; never NULL
 * (an out-of-range value is a programmer error, asserted). */
const char *cr_store_event_kind_name(cr_store_event_kind kind);
const char *cr_replica_type_name(cr_replica_type type);

/* Parses a wire replica type name.  Returns CR_OK and sets *out, or
 * CR_ERR_INVALID_PARAMS for any other string.  Changes nothing on error. */
int cr_replica_type_parse(const char *name, size_t len, cr_replica_type *out);

/* Creates a BlockStoreEvent from borrowed inputs (all copied).  `info` NULL
 * means every StoreEventInfo field unset.  Returns CR_OK and sets *out, or
 * CR_ERR_INVALID_PARAMS (a NULL pointer with a non-zero length, an unknown
 * replica type, a string or count above CR_STORE_EVENT_LEN_MAX) or
 * CR_ERR_NOMEM.  *out is untouched on error. */
int cr_store_event_new_block_store(cr_event_str key, const cr_store_replica *replicas,
                                   size_t replica_count, const cr_store_event_info *info,
                                   cr_store_event **out);

/* Creates a BlockUpdateEvent; same rules and errors as new_block_store. */
int cr_store_event_new_block_update(cr_event_str key, const cr_store_replica *replicas,
                                    size_t replica_count, cr_store_event **out);

/* Creates a RemoveAllEvent.  Returns CR_OK or CR_ERR_NOMEM. */
int cr_store_event_new_remove_all(cr_store_event **out);

/* Frees an event made by cr_store_event_new_* (never one of a chain's); NULL
 * is ignored. */
void cr_store_event_free(cr_store_event *event);

/* Creates an empty chain with room for `capacity` bytes of events (0 means
 * CR_STORE_EVENT_CHAIN_BYTES_DEFAULT) and one reference.  Returns CR_OK and
 * sets *out, or CR_ERR_NOMEM. */
int cr_store_event_chain_new(size_t capacity, cr_store_event_chain **out);

/* Appends an event of `kind` made from borrowed inputs (all copied; `info`
 * is read for BLOCK_STORE only, NULL meaning unset; `key` and `replicas` are
 * ignored for REMOVE_ALL).  Only before the chain is shared.  Returns CR_OK;
 * CR_ERR_INVALID_PARAMS as cr_store_event_new_block_store; or CR_ERR_AGAIN
 * when the chain has no room for it, with *need set to the capacity of a
 * chain that holds this event alone.  The chain is unchanged on error. */
int cr_store_event_chain_add(cr_store_event_chain *chain, cr_store_event_kind kind,
                             cr_event_str key, const cr_store_replica *replicas,
                             size_t replica_count, const cr_store_event_info *info,
                             size_t *need);

/* Takes one more reference (for one more holder); returns `chain`.  Safe
 * from any thread holding a reference. */
cr_store_event_chain *cr_store_event_chain_ref(cr_store_event_chain *chain);

/* Drops one reference; the last frees the chain with its events.  NULL is
 * ignored. */
void cr_store_event_chain_release(cr_store_event_chain *chain);

/* Creates an encoder with its buffer.  `config` NULL means defaults.  Returns
 * CR_OK, CR_ERR_INVALID_PARAMS (max_events above 2^24) or CR_ERR_NOMEM. */
int cr_event_encoder_create(const cr_event_encoder_config *config, cr_event_encoder **out);

/* Frees the encoder with the bytes of a batch not yet finished. NULL is ignored. */
void cr_event_encoder_destroy(cr_event_encoder *encoder);

/* Encodes `event` (borrowed; the caller still frees it) into the batch being
 * built.  Returns CR_OK, CR_ERR_AGAIN when the batch already holds max_events
 * (finish it first), or CR_ERR_NOMEM when the buffer cannot grow.  On error
 * the batch being built is unchanged.  No allocation once the buffer has
 * grown to the largest batch seen. */
int cr_event_encoder_append(cr_event_encoder *encoder, const cr_store_event *event);

uint32_t cr_event_encoder_event_count(const cr_event_encoder *encoder);
bool cr_event_encoder_is_full(const cr_event_encoder *encoder);
uint32_t cr_event_encoder_max_events(const cr_event_encoder *encoder);

/* Finishes the batch being built into a new batch with reference count 1,
 * sequence `seq` and timestamp `ts_s` (seconds since the epoch; the caller
 * reads the clock), then starts an empty batch.  Returns CR_OK and sets *out,
 * CR_ERR_INVALID_PARAMS when no event was appended (a batch must carry one),
 * or CR_ERR_NOMEM (the events stay pending then). */
int cr_event_encoder_finish(cr_event_encoder *encoder, uint64_t seq, double ts_s,
                            cr_event_batch **out);

/* Drops the events appended since the last finish. */
void cr_event_encoder_reset(cr_event_encoder *encoder);

/* Wraps already-encoded payload bytes (copied) in a batch with reference
 * count 1 and no per-kind counts; for tools and tests that build batches by
 * hand.  Returns CR_OK, CR_ERR_INVALID_PARAMS (NULL bytes with len > 0) or
 * CR_ERR_NOMEM. */
int cr_event_batch_create(uint64_t seq, const uint8_t *bytes, size_t len,
                          cr_event_batch **out);

/* Takes one more reference; returns `batch` for chaining.  Safe from any
 * thread holding a reference. */
cr_event_batch *cr_event_batch_ref(cr_event_batch *batch);

/* Drops one reference; the last one frees the batch.  NULL is ignored. */
void cr_event_batch_unref(cr_event_batch *batch);

#endif

/* Store events, the seed-000 batch encoder and shared batches
 * (see store_event.h for the wire shapes and the ownership rules). */
#include "msgs/store_event.h"

#include <assert.h>
#include <msgpack.h>
#include <stdalign.h>
#include <stdlib.h>

#include "crescent/error.h"

#define ENCODER_INITIAL_CAPACITY_DEFAULT (16u * 1024u)
#define ENCODER_MAX_EVENTS_LIMIT (1u << 24)
/* Worst-case header bytes of one msgpack string, array or integer (type byte
 * plus a 32-bit length or value); used to reserve an event's room up front. */
#define MSGPACK_HEADER_BYTES_MAX 5u
/* [ts, [events]]: fixarray(2) + float64 (1 + 8) + array32 header (5). */
#define BATCH_HEADER_BYTES_MAX (1u + 9u + 5u)
/* The pack helpers are forced inline so that the packer (a local with a known
 * write callback) stays visible and the compiler can turn msgpack-c's
 * indirect callback calls into direct ones.  clang does this unasked; gcc -O2
 * did not (bench/event_codec p50 per batch 8.7 us before, 6.9 us after). */
#define PACK_INLINE inline __attribute__((always_inline))

struct cr_event_encoder {
    uint8_t *buffer; /* encoded events of the batch being built, back to back */
    size_t len;
    size_t capacity;
    uint32_t event_count;
    uint32_t max_events;
    uint32_t event_count_by_kind[CR_STORE_EVENT_KIND_COUNT];
};

/* A fixed buffer that the batch header is packed into. */
struct header_buffer {
    uint8_t bytes[BATCH_HEADER_BYTES_MAX];
    size_t len;
};

static int encoder_write(void *data, const char *buf, size_t len);
static int header_write(void *data, const char *buf, size_t len);
static int event_layout(const cr_store_event *proto, size_t *total_out);
static cr_store_event *event_build(void *memory, const cr_store_event *proto, size_t total);
static int event_proto(cr_store_event_kind kind, cr_event_str key,
                       const cr_store_replica *replicas, size_t replica_count,
                       const cr_store_event_info *info, cr_store_event *proto, size_t *total);

/* Wire names with their lengths, so the hot path never calls strlen. */
static const cr_event_str kind_names[CR_STORE_EVENT_KIND_COUNT] = {
    [CR_STORE_EVENT_BLOCK_STORE] = {"BlockStoreEvent", 15},
    [CR_STORE_EVENT_BLOCK_UPDATE] = {"BlockUpdateEvent", 16},
    [CR_STORE_EVENT_REMOVE_ALL] = {"RemoveAllEvent", 14},
};

static const cr_event_str replica_type_names[CR_REPLICA_TYPE_COUNT] = {
    [CR_REPLICA_MEMORY] = {"memory", 6},
    [CR_REPLICA_DISK] = {"disk", 4},
    [CR_REPLICA_LOCAL_DISK] = {"local_disk", 10},
};

const char *cr_store_event_kind_name(cr_store_event_kind kind) {
    assert((unsigned)kind < CR_STORE_EVENT_KIND_COUNT);
    assert(strlen(kind_names[kind].ptr) == kind_names[kind].len);
    return kind_names[kind].ptr;
}

const char *cr_replica_type_name(cr_replica_type type) {
    assert((unsigned)type < CR_REPLICA_TYPE_COUNT);
    assert(strlen(replica_type_names[type].ptr) == replica_type_names[type].len);
    return replica_type_names[type].ptr;
}

int cr_replica_type_parse(const char *name, size_t len, cr_replica_type *out) {
    assert(out != NULL);
    if (name == NULL) return CR_ERR_INVALID_PARAMS;
    for (unsigned type = 0; type < CR_REPLICA_TYPE_COUNT; type++) {
        cr_event_str candidate = replica_type_names[type];
        if (candidate.len == len && memcmp(candidate.ptr, name, len) == 0) {
            *out = (cr_replica_type)type;
            return CR_OK;
        }
    }
    return CR_ERR_INVALID_PARAMS;
}

/* ---- events ------------------------------------------------------------ */

static bool str_valid(cr_event_str str) {
    return (str.ptr != NULL || str.len == 0) && str.len <= CR_STORE_EVENT_LEN_MAX;
}

static bool add_size(size_t *total, size_t more) {
    return !__builtin_add_overflow(*total, more, total);
}

static size_t align_up(size_t value, size_t alignment) {
    assert(alignment > 0 && (alignment & (alignment - 1)) == 0);
    return (value + alignment - 1) & ~(alignment - 1);
}

/* Validates the borrowed inputs in `proto` and adds up the block:
 * header, replica array, token ids, then each string plus its NUL. */
static int event_layout(const cr_store_event *proto, size_t *total_out) {
    assert(proto != NULL && total_out != NULL);
    const cr_store_event_info *info = &proto->info;
    if (proto->replica_count > 0 && proto->replicas == NULL) return CR_ERR_INVALID_PARAMS;
    if (info->token_count > CR_STORE_EVENT_LEN_MAX) return CR_ERR_INVALID_PARAMS;
    if (info->token_count > 0 && info->token_ids == NULL) return CR_ERR_INVALID_PARAMS;
    if (!str_valid(proto->key) || !str_valid(info->model_name) ||
        !str_valid(info->block_hash) || !str_valid(info->parent_block_hash)) {
        return CR_ERR_INVALID_PARAMS;
    }
    /* Counts are ≤ 2^32, so the array products below cannot overflow 64 bits. */
    size_t total = align_up(sizeof(cr_store_event), alignof(cr_store_replica));
    total += (size_t)proto->replica_count * sizeof(cr_store_replica);
    total += info->token_count * sizeof(uint32_t);
    bool fits = add_size(&total, proto->key.len + 1) &&
                add_size(&total, info->model_name.len + 1) &&
                add_size(&total, info->block_hash.len + 1) &&
                add_size(&total, info->parent_block_hash.len + 1);
    for (uint32_t i = 0; fits && i < proto->replica_count; i++) {
        const cr_store_replica *replica = &proto->replicas[i];
        if ((unsigned)replica->type >= CR_REPLICA_TYPE_COUNT) return CR_ERR_INVALID_PARAMS;
        if (!str_valid(replica->location)) return CR_ERR_INVALID_PARAMS;
        fits = add_size(&total, replica->location.len + 1);
    }
    if (!fits) return CR_ERR_INVALID_PARAMS;
    *total_out = total;
    return CR_OK;
}

/* Copies `str` to *cursor with a NUL and returns the copy's view. */
static cr_event_str copy_str(char **cursor, cr_event_str str) {
    char *dest = *cursor;
    if (str.len > 0) memcpy(dest, str.ptr, str.len);
    dest[str.len] = '\0';
    *cursor = dest + str.len + 1;
    cr_event_str copy = {dest, str.len};
    return copy;
}

/* Copies everything into `memory`, `total` bytes as event_layout sized them
 * and aligned for a cr_store_event. */
static cr_store_event *event_build(void *memory, const cr_store_event *proto, size_t total) {
    assert(memory != NULL && proto != NULL && total >= sizeof(cr_store_event));
    assert((uintptr_t)memory % alignof(cr_store_event) == 0);
    cr_store_event *event = memory;
    uint8_t *base = (uint8_t *)event;
    size_t offset = align_up(sizeof(cr_store_event), alignof(cr_store_replica));
    cr_store_replica *replicas = (cr_store_replica *)(base + offset);
    offset += (size_t)proto->replica_count * sizeof(cr_store_replica);
    uint32_t *token_ids = (uint32_t *)(base + offset); /* replica size keeps 4-byte alignment */
    offset += proto->info.token_count * sizeof(uint32_t);
    char *cursor = (char *)(base + offset);

    *event = *proto;
    event->size_bytes = total;
    event->next = NULL;
    event->replicas = replicas;
    event->key = copy_str(&cursor, proto->key);
    for (uint32_t i = 0; i < proto->replica_count; i++) {
        replicas[i].type = proto->replicas[i].type;
        replicas[i].location = copy_str(&cursor, proto->replicas[i].location);
    }
    if (proto->info.token_count > 0) {
        memcpy(token_ids, proto->info.token_ids, proto->info.token_count * sizeof(uint32_t));
    }
    event->info.token_ids = token_ids;
    event->info.model_name = copy_str(&cursor, proto->info.model_name);
    event->info.block_hash = copy_str(&cursor, proto->info.block_hash);
    event->info.parent_block_hash = copy_str(&cursor, proto->info.parent_block_hash);
    assert((size_t)((uint8_t *)cursor - base) == total);
    return event;
}

/* Fills *proto with the borrowed inputs of an event of `kind` and sizes it:
 * a REMOVE_ALL has no key, replicas or info; only a BLOCK_STORE has info. */
static int event_proto(cr_store_event_kind kind, cr_event_str key,
                       const cr_store_replica *replicas, size_t replica_count,
                       const cr_store_event_info *info, cr_store_event *proto, size_t *total) {
    assert(proto != NULL && total != NULL);
    assert((unsigned)kind < CR_STORE_EVENT_KIND_COUNT);
    *proto = (cr_store_event){.kind = kind};
    if (kind != CR_STORE_EVENT_REMOVE_ALL) {
        if (replica_count > CR_STORE_EVENT_LEN_MAX) return CR_ERR_INVALID_PARAMS;
        proto->replica_count = (uint32_t)replica_count;
        proto->key = key;
        proto->replicas = replicas;
        if (kind == CR_STORE_EVENT_BLOCK_STORE && info != NULL) proto->info = *info;
    }
    return event_layout(proto, total);
}

static int event_new(cr_store_event_kind kind, cr_event_str key,
                     const cr_store_replica *replicas, size_t replica_count,
                     const cr_store_event_info *info, cr_store_event **out) {
    assert(out != NULL);
    cr_store_event proto;
    size_t total = 0;
    int status = event_proto(kind, key, replicas, replica_count, info, &proto, &total);
    if (status != CR_OK) return status;
    void *memory = malloc(total);
    if (memory == NULL) return CR_ERR_NOMEM;
    *out = event_build(memory, &proto, total);
    return CR_OK;
}

int cr_store_event_new_block_store(cr_event_str key, const cr_store_replica *replicas,
                                   size_t replica_count, const cr_store_event_info *info,
                                   cr_store_event **out) {
    assert(out != NULL);
    return event_new(CR_STORE_EVENT_BLOCK_STORE, key, replicas, replica_count, info, out);
}

int cr_store_event_new_block_update(cr_event_str key, const cr_store_replica *replicas,
                                    size_t replica_count, cr_store_event **out) {
    assert(out != NULL);
    return event_new(CR_STORE_EVENT_BLOCK_UPDATE, key, replicas, replica_count, NULL, out);
}

int cr_store_event_new_remove_all(cr_store_event **out) {
    assert(out != NULL);
    cr_event_str empty = {NULL, 0};
    return event_new(CR_STORE_EVENT_REMOVE_ALL, empty, NULL, 0, NULL, out);
}

void cr_store_event_free(cr_store_event *event) {
    if (event == NULL) return;
    assert((unsigned)event->kind < CR_STORE_EVENT_KIND_COUNT);
    free(event);
}

/* ---- shared references -------------------------------------------------- */

/* A chain and an encoded batch are shared the same way: a holder takes
 * another reference only while it holds one, so relaxed is enough; a drop
 * is acquire-release, so the last holder frees after every other's reads
 * (one locked instruction on x86 either way, and TSan models it, where it
 * does not model a separate fence). */
static void ref_take(atomic_uint *refs) {
    unsigned before = atomic_fetch_add_explicit(refs, 1, memory_order_relaxed);
    assert(before > 0 && before < UINT32_MAX); /* a reference must be held to take another */
    (void)before;
}

/* Drops one reference; true when it was the last. */
static bool ref_drop(atomic_uint *refs) {
    unsigned before = atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel);
    assert(before > 0);
    return before == 1;
}

/* ---- chains ------------------------------------------------------------ */

int cr_store_event_chain_new(size_t capacity, cr_store_event_chain **out) {
    assert(out != NULL);
    if (capacity == 0) capacity = CR_STORE_EVENT_CHAIN_BYTES_DEFAULT;
    size_t total = 0;
    if (__builtin_add_overflow(sizeof(cr_store_event_chain), capacity, &total))
        return CR_ERR_NOMEM;
    cr_store_event_chain *chain = malloc(total);
    if (chain == NULL) return CR_ERR_NOMEM;
    atomic_init(&chain->refs, 1);
    chain->count = 0;
    chain->head = chain->tail = NULL;
    chain->used = 0;
    chain->capacity = capacity;
    *out = chain;
    return CR_OK;
}

int cr_store_event_chain_add(cr_store_event_chain *chain, cr_store_event_kind kind,
                             cr_event_str key, const cr_store_replica *replicas,
                             size_t replica_count, const cr_store_event_info *info,
                             size_t *need) {
    assert(chain != NULL && need != NULL);
    assert(atomic_load_explicit(&chain->refs, memory_order_relaxed) == 1); /* not shared yet */
    assert(chain->used <= chain->capacity);
    cr_store_event proto;
    size_t total = 0;
    int status = event_proto(kind, key, replicas, replica_count, info, &proto, &total);
    if (status != CR_OK) return status;
    /* Each event starts aligned for its header; `bytes` itself is max-aligned. */
    size_t at = align_up(chain->used, alignof(cr_store_event));
    if (at > chain->capacity || total > chain->capacity - at) {
        *need = total;
        return CR_ERR_AGAIN;
    }
    cr_store_event *event = event_build(chain->bytes + at, &proto, total);
    chain->used = at + total;
    if (chain->tail != NULL) chain->tail->next = event;
    else chain->head = event;
    chain->tail = event;
    chain->count++;
    return CR_OK;
}

cr_store_event_chain *cr_store_event_chain_ref(cr_store_event_chain *chain) {
    assert(chain != NULL);
    ref_take(&chain->refs);
    return chain;
}

void cr_store_event_chain_release(cr_store_event_chain *chain) {
    if (chain != NULL && ref_drop(&chain->refs)) free(chain);
}

/* ---- encoder ----------------------------------------------------------- */

/* msgpack-c write callback.  append() reserved the event's worst case before
 * packing, so running out of room here is a bug in that bound. */
static int encoder_write(void *data, const char *buf, size_t len) {
    cr_event_encoder *encoder = data;
    assert(encoder != NULL && buf != NULL);
    if (len > encoder->capacity - encoder->len) {
        assert(!"encoder reservation too small");
        return -1;
    }
    uint8_t *dest = encoder->buffer + encoder->len;
    /* msgpack-c writes most items as 1 to 9 byte pieces; a byte loop beats a
     * libc memcpy call for those (the bench showed memmove on top). */
    if (len <= 16) {
        for (size_t i = 0; i < len; i++) dest[i] = (uint8_t)buf[i];
    } else {
        memcpy(dest, buf, len);
    }
    encoder->len += len;
    return 0;
}

static int header_write(void *data, const char *buf, size_t len) {
    struct header_buffer *header = data;
    assert(header != NULL && buf != NULL);
    if (len > sizeof(header->bytes) - header->len) return -1;
    memcpy(header->bytes + header->len, buf, len);
    header->len += len;
    return 0;
}

/* Upper bound of the encoded size of `event`: every header at its widest. */
static size_t event_encoded_bound(const cr_store_event *event) {
    assert(event != NULL);
    const size_t h = MSGPACK_HEADER_BYTES_MAX;
    size_t bound = h + h + kind_names[event->kind].len + h + event->key.len;
    bound += h; /* replica list header */
    for (uint32_t i = 0; i < event->replica_count; i++) {
        bound += h + h + replica_type_names[event->replicas[i].type].len;
        bound += h + event->replicas[i].location.len;
    }
    const cr_store_event_info *info = &event->info;
    bound += h + info->model_name.len + h + h + info->block_hash.len;
    bound += h + info->parent_block_hash.len + h + info->token_count * h;
    return bound;
}

/* Grows the buffer so that `more` bytes fit; doubling keeps growth rare and
 * the buffer is kept across batches, so steady state never allocates. */
static int encoder_reserve(cr_event_encoder *encoder, size_t more) {
    assert(encoder != NULL && encoder->len <= encoder->capacity);
    if (more <= encoder->capacity - encoder->len) return CR_OK;
    size_t needed = encoder->len;
    if (!add_size(&needed, more)) return CR_ERR_NOMEM;
    size_t capacity = encoder->capacity;
    while (capacity < needed) {
        if (capacity > SIZE_MAX / 2) return CR_ERR_NOMEM;
        capacity *= 2;
    }
    uint8_t *grown = realloc(encoder->buffer, capacity);
    if (grown == NULL) return CR_ERR_NOMEM;
    encoder->buffer = grown;
    encoder->capacity = capacity;
    return CR_OK;
}

static PACK_INLINE void pack_str(msgpack_packer *packer, cr_event_str str) {
    msgpack_pack_str(packer, str.len);
    msgpack_pack_str_body(packer, str.len > 0 ? str.ptr : "", str.len);
}

static PACK_INLINE void pack_replicas(msgpack_packer *packer, const cr_store_event *event) {
    assert(event->replica_count == 0 || event->replicas != NULL);
    msgpack_pack_array(packer, event->replica_count);
    for (uint32_t i = 0; i < event->replica_count; i++) {
        const cr_store_replica *replica = &event->replicas[i];
        msgpack_pack_array(packer, 2);
        assert((unsigned)replica->type < CR_REPLICA_TYPE_COUNT);
        pack_str(packer, replica_type_names[replica->type]);
        pack_str(packer, replica->location);
    }
}

static PACK_INLINE void pack_info(msgpack_packer *packer, const cr_store_event_info *info) {
    assert(info->token_count <= CR_STORE_EVENT_LEN_MAX);
    pack_str(packer, info->model_name);
    msgpack_pack_uint32(packer, info->block_size);
    pack_str(packer, info->block_hash);
    pack_str(packer, info->parent_block_hash);
    msgpack_pack_array(packer, info->token_count);
    for (size_t i = 0; i < info->token_count; i++) {
        msgpack_pack_uint32(packer, info->token_ids[i]);
    }
}

/* Element counts per kind: seed 000's 8, 3 and 1. */
static const uint32_t kind_element_counts[CR_STORE_EVENT_KIND_COUNT] = {8, 3, 1};

static PACK_INLINE void pack_event(msgpack_packer *packer, const cr_store_event *event) {
    assert((unsigned)event->kind < CR_STORE_EVENT_KIND_COUNT);
    msgpack_pack_array(packer, kind_element_counts[event->kind]);
    pack_str(packer, kind_names[event->kind]);
    if (event->kind == CR_STORE_EVENT_REMOVE_ALL) return;
    pack_str(packer, event->key);
    pack_replicas(packer, event);
    if (event->kind == CR_STORE_EVENT_BLOCK_STORE) pack_info(packer, &event->info);
}

int cr_event_encoder_create(const cr_event_encoder_config *config, cr_event_encoder **out) {
    assert(out != NULL);
    cr_event_encoder_config defaults = {0};
    if (config == NULL) config = &defaults;
    uint32_t max_events = config->max_events != 0 ? config->max_events
                                                   : CR_EVENT_BATCH_MAX_EVENTS_DEFAULT;
    size_t capacity = config->initial_capacity_bytes != 0 ? config->initial_capacity_bytes
                                                          : ENCODER_INITIAL_CAPACITY_DEFAULT;
    if (max_events > ENCODER_MAX_EVENTS_LIMIT) return CR_ERR_INVALID_PARAMS;
    cr_event_encoder *encoder = calloc(1, sizeof(*encoder));
    if (encoder == NULL) return CR_ERR_NOMEM;
    encoder->buffer = malloc(capacity);
    if (encoder->buffer == NULL) {
        free(encoder);
        return CR_ERR_NOMEM;
    }
    encoder->capacity = capacity;
    encoder->max_events = max_events;
    *out = encoder;
    return CR_OK;
}

void cr_event_encoder_destroy(cr_event_encoder *encoder) {
    if (encoder == NULL) return;
    assert(encoder->len <= encoder->capacity);
    free(encoder->buffer);
    free(encoder);
}

int cr_event_encoder_append(cr_event_encoder *encoder, const cr_store_event *event) {
    assert(encoder != NULL && event != NULL);
    assert((unsigned)event->kind < CR_STORE_EVENT_KIND_COUNT);
    if (encoder->event_count >= encoder->max_events) return CR_ERR_AGAIN;
    int status = encoder_reserve(encoder, event_encoded_bound(event));
    if (status != CR_OK) return status;
    msgpack_packer packer;
    msgpack_packer_init(&packer, encoder, encoder_write);
    pack_event(&packer, event);
    encoder->event_count++;
    encoder->event_count_by_kind[event->kind]++;
    return CR_OK;
}

uint32_t cr_event_encoder_event_count(const cr_event_encoder *encoder) {
    assert(encoder != NULL);
    return encoder->event_count;
}

bool cr_event_encoder_is_full(const cr_event_encoder *encoder) {
    assert(encoder != NULL);
    return encoder->event_count >= encoder->max_events;
}

uint32_t cr_event_encoder_max_events(const cr_event_encoder *encoder) {
    assert(encoder != NULL);
    return encoder->max_events;
}

void cr_event_encoder_reset(cr_event_encoder *encoder) {
    assert(encoder != NULL);
    encoder->len = 0;
    encoder->event_count = 0;
    memset(encoder->event_count_by_kind, 0, sizeof(encoder->event_count_by_kind));
}

/* Allocates a batch with room for `len` payload bytes and reference count 1.
 * One malloc per batch (not per event): the batch outlives the encoder and
 * is freed by whichever of the PUB send and the replay ring lets go last. */
static cr_event_batch *batch_alloc(uint64_t seq, size_t len) {
    if (len > SIZE_MAX - sizeof(cr_event_batch)) return NULL;
    cr_event_batch *batch = malloc(sizeof(cr_event_batch) + len);
    if (batch == NULL) return NULL;
    memset(batch, 0, sizeof(*batch));
    atomic_init(&batch->refcount, 1);
    batch->seq = seq;
    batch->len = len;
    return batch;
}

int cr_event_encoder_finish(cr_event_encoder *encoder, uint64_t seq, double ts_s,
                            cr_event_batch **out) {
    assert(encoder != NULL && out != NULL);
    assert(encoder->event_count <= encoder->max_events);
    if (encoder->event_count == 0) return CR_ERR_INVALID_PARAMS;
    struct header_buffer header = {.len = 0};
    msgpack_packer packer;
    msgpack_packer_init(&packer, &header, header_write);
    msgpack_pack_array(&packer, 2);
    msgpack_pack_double(&packer, ts_s);
    msgpack_pack_array(&packer, encoder->event_count);
    assert(header.len > 0 && header.len <= sizeof(header.bytes));

    cr_event_batch *batch = batch_alloc(seq, header.len + encoder->len);
    if (batch == NULL) return CR_ERR_NOMEM;
    memcpy(batch->bytes, header.bytes, header.len);
    memcpy(batch->bytes + header.len, encoder->buffer, encoder->len);
    batch->ts_s = ts_s;
    batch->event_count = encoder->event_count;
    memcpy(batch->event_count_by_kind, encoder->event_count_by_kind,
           sizeof(batch->event_count_by_kind));
    cr_event_encoder_reset(encoder);
    *out = batch;
    return CR_OK;
}

/* ---- batches ------------------------------------------------------------ */

int cr_event_batch_create(uint64_t seq, const uint8_t *bytes, size_t len,
                          cr_event_batch **out) {
    assert(out != NULL);
    if (bytes == NULL && len > 0) return CR_ERR_INVALID_PARAMS;
    cr_event_batch *batch = batch_alloc(seq, len);
    if (batch == NULL) return CR_ERR_NOMEM;
    if (len > 0) memcpy(batch->bytes, bytes, len);
    *out = batch;
    return CR_OK;
}

cr_event_batch *cr_event_batch_ref(cr_event_batch *batch) {
    assert(batch != NULL);
    ref_take(&batch->refcount);
    return batch;
}

void cr_event_batch_unref(cr_event_batch *batch) {
    if (batch != NULL && ref_drop(&batch->refcount)) free(batch);
}

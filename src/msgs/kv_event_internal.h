/* The KV event decoder's private state, shared by its passes (kv_event.c,
 * kv_event_scan.c).  Not for other modules: kv_event.h is the contract. */
#ifndef CRESCENT_MSGS_KV_EVENT_INTERNAL_H
#define CRESCENT_MSGS_KV_EVENT_INTERNAL_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

#include "msgs/kv_event.h"

struct arena_chunk {
    struct arena_chunk *next;
    size_t cap;
    size_t used;
    max_align_t data[]; /* cap bytes */
};

/* Bump allocator rewound per batch.  When a batch needed more than one chunk,
 * the rewind replaces them by one chunk of the combined size, so after the
 * first few batches of a given shape decoding stops calling malloc. */
struct kv_arena {
    struct arena_chunk *head;
    struct arena_chunk *cur;
};

struct cr_kv_decoder {
    msgpack_zone zone;
    size_t zone_chunk_bytes;
    const void *zone_head; /* the zone's only chunk, to assert it never grows */
    bool zone_live;
    struct kv_arena arena;
    struct cr_kv_batch batch;
};

/* Where the decoder is, for error messages. */
struct kv_ctx {
    struct cr_kv_decoder *dec;
    char *err;
    size_t err_size;
    long event_index; /* -1 outside the events array */
};

/* The msgpack zone's smallest first chunk. */
#define ZONE_MIN_CHUNK_BYTES ((size_t)64 * 1024)

/* Writes "event N: " (inside the events array) and the message into the
 * context's error buffer; returns CR_ERR_PROTOCOL. */
__attribute__((format(printf, 2, 3))) int cr_kv_fail(struct kv_ctx *c, const char *fmt, ...);

/* Passes 1 and 2: scans the payload (truncation, depth, counts against the
 * bytes left, trailing bytes) and unpacks it into the decoder's zone, which
 * never grows.  Returns CR_OK, CR_ERR_PROTOCOL (message in the context) or
 * CR_ERR_NOMEM. */
int cr_kv_unpack_payload(struct kv_ctx *c, const void *payload, size_t len,
                         msgpack_object *root);
/* Makes the zone's first chunk hold `need` bytes (CR_OK or CR_ERR_NOMEM). */
int cr_kv_zone_reserve(struct cr_kv_decoder *dec, size_t need);

#endif

/* Replay buffer: a count- and byte-bounded ring of batch references
 * (see replay_buffer.h). */
#include "core/replay_buffer.h"

#include <assert.h>
#include <stdlib.h>

#include "crescent/error.h"

struct cr_replay_buffer {
    cr_event_batch **slots; /* capacity entries; the live ones start at head */
    uint32_t capacity;      /* max_batches */
    uint32_t head;          /* slot of the oldest kept batch */
    uint32_t count;         /* kept batches */
    uint64_t bytes;         /* payload bytes of the kept batches */
    uint64_t max_bytes;
    uint64_t pushed_total;  /* absolute position of the next push */
    uint64_t evicted_total;
};

/* Absolute position of the oldest kept batch. */
static uint64_t oldest_position(const cr_replay_buffer *buffer) {
    assert(buffer->pushed_total >= buffer->count);
    return buffer->pushed_total - buffer->count;
}

/* The kept batch at `index` (0 = oldest). */
static cr_event_batch *slot_at(const cr_replay_buffer *buffer, uint64_t index) {
    assert(index < buffer->count);
    uint64_t slot = (buffer->head + index) % buffer->capacity;
    cr_event_batch *batch = buffer->slots[slot];
    assert(batch != NULL);
    return batch;
}

static void evict_oldest(cr_replay_buffer *buffer) {
    assert(buffer->count > 0);
    cr_event_batch *batch = buffer->slots[buffer->head];
    assert(batch != NULL && buffer->bytes >= batch->len);
    buffer->slots[buffer->head] = NULL;
    buffer->head = (buffer->head + 1) % buffer->capacity;
    buffer->count--;
    buffer->bytes -= batch->len;
    buffer->evicted_total++;
    cr_event_batch_unref(batch);
}

int cr_replay_buffer_create(const cr_replay_buffer_config *config, cr_replay_buffer **out) {
    assert(out != NULL);
    cr_replay_buffer_config defaults = {0};
    if (config == NULL) config = &defaults;
    uint32_t capacity = config->max_batches != 0 ? config->max_batches
                                                 : CR_REPLAY_BUFFER_MAX_BATCHES_DEFAULT;
    if (capacity > CR_REPLAY_BUFFER_MAX_BATCHES_LIMIT) return CR_ERR_INVALID_PARAMS;
    cr_replay_buffer *buffer = calloc(1, sizeof(*buffer));
    if (buffer == NULL) return CR_ERR_NOMEM;
    buffer->slots = calloc(capacity, sizeof(buffer->slots[0]));
    if (buffer->slots == NULL) {
        free(buffer);
        return CR_ERR_NOMEM;
    }
    buffer->capacity = capacity;
    buffer->max_bytes = config->max_bytes != 0 ? config->max_bytes
                                               : CR_REPLAY_BUFFER_MAX_BYTES_DEFAULT;
    *out = buffer;
    return CR_OK;
}

void cr_replay_buffer_destroy(cr_replay_buffer *buffer) {
    if (buffer == NULL) return;
    cr_replay_buffer_clear(buffer);
    assert(buffer->count == 0 && buffer->bytes == 0);
    free(buffer->slots);
    free(buffer);
}

int cr_replay_buffer_push(cr_replay_buffer *buffer, cr_event_batch *batch) {
    assert(buffer != NULL && batch != NULL);
    if (buffer->count > 0 && batch->seq <= slot_at(buffer, buffer->count - 1)->seq) {
        return CR_ERR_INVALID_PARAMS;
    }
    if (batch->len > buffer->max_bytes) return CR_ERR_NOMEM;
    while (buffer->count > 0 && (buffer->count == buffer->capacity ||
                                 batch->len > buffer->max_bytes - buffer->bytes)) {
        evict_oldest(buffer);
    }
    uint32_t slot = (uint32_t)(((uint64_t)buffer->head + buffer->count) % buffer->capacity);
    assert(buffer->slots[slot] == NULL);
    buffer->slots[slot] = batch;
    buffer->count++;
    buffer->bytes += batch->len;
    buffer->pushed_total++;
    assert(buffer->count <= buffer->capacity && buffer->bytes <= buffer->max_bytes);
    return CR_OK;
}

void cr_replay_buffer_clear(cr_replay_buffer *buffer) {
    assert(buffer != NULL);
    while (buffer->count > 0) evict_oldest(buffer);
    buffer->head = 0;
    assert(buffer->bytes == 0);
}

/* Index (0 = oldest) of the first kept batch with seq >= start_seq, or count
 * when there is none.  Seqs increase along the ring, so binary search. */
static uint64_t lower_bound(const cr_replay_buffer *buffer, uint64_t start_seq) {
    uint64_t low = 0, high = buffer->count;
    while (low < high) {
        uint64_t middle = low + (high - low) / 2;
        if (slot_at(buffer, middle)->seq < start_seq) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    assert(low <= buffer->count);
    return low;
}

void cr_replay_buffer_find_from(const cr_replay_buffer *buffer, uint64_t start_seq,
                                cr_replay_cursor *cursor_out, bool *clamped_out) {
    assert(buffer != NULL && cursor_out != NULL && clamped_out != NULL);
    uint64_t oldest = oldest_position(buffer);
    cursor_out->end_position = buffer->pushed_total;
    cursor_out->skipped_batches = 0;
    *clamped_out = buffer->count > 0 && start_seq < slot_at(buffer, 0)->seq;
    cursor_out->next_position = oldest + lower_bound(buffer, start_seq);
    assert(cursor_out->next_position <= cursor_out->end_position);
}

cr_event_batch *cr_replay_buffer_next(const cr_replay_buffer *buffer,
                                      cr_replay_cursor *cursor) {
    assert(buffer != NULL && cursor != NULL);
    assert(cursor->next_position <= cursor->end_position);
    uint64_t oldest = oldest_position(buffer);
    if (cursor->next_position < oldest) {
        /* Evicted (or cleared) while this session waited: skip, and count. */
        uint64_t resume = oldest < cursor->end_position ? oldest : cursor->end_position;
        cursor->skipped_batches += resume - cursor->next_position;
        cursor->next_position = resume;
    }
    if (cursor->next_position >= cursor->end_position) return NULL;
    assert(cursor->next_position < buffer->pushed_total);
    cr_event_batch *batch = slot_at(buffer, cursor->next_position - oldest);
    cursor->next_position++;
    return batch;
}

uint64_t cr_replay_cursor_remaining(const cr_replay_cursor *cursor) {
    assert(cursor != NULL && cursor->next_position <= cursor->end_position);
    return cursor->end_position - cursor->next_position;
}

void cr_replay_buffer_get_stats(const cr_replay_buffer *buffer, cr_replay_buffer_stats *out) {
    assert(buffer != NULL && out != NULL);
    out->batch_count = buffer->count;
    out->bytes = buffer->bytes;
    out->pushed_total = buffer->pushed_total;
    out->evicted_total = buffer->evicted_total;
    out->oldest_seq = buffer->count > 0 ? slot_at(buffer, 0)->seq : 0;
    out->newest_seq = buffer->count > 0 ? slot_at(buffer, buffer->count - 1)->seq : 0;
}

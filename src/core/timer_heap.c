/* Bounded binary min-heap of timers (see timer_heap.h). */
#include "core/timer_heap.h"

#include <assert.h>
#include <stdlib.h>

#include "crescent/error.h"

static bool timer_before(const struct cr_timer *a, const struct cr_timer *b) {
    /* Ties broken by id so equal deadlines fire in the order they were set. */
    if (a->deadline_ns != b->deadline_ns) return a->deadline_ns < b->deadline_ns;
    return a->id < b->id;
}

static void timer_swap(struct cr_timer *a, struct cr_timer *b) {
    struct cr_timer tmp = *a;
    *a = *b;
    *b = tmp;
}

static void sift_up(struct cr_timer_heap *heap, uint32_t index) {
    while (index > 0) {
        uint32_t parent = (index - 1) / 2;
        if (!timer_before(&heap->timers[index], &heap->timers[parent])) break;
        timer_swap(&heap->timers[index], &heap->timers[parent]);
        index = parent;
    }
}

static void sift_down(struct cr_timer_heap *heap, uint32_t index) {
    for (;;) {
        uint32_t left = 2 * index + 1, right = left + 1, smallest = index;
        if (left < heap->count && timer_before(&heap->timers[left], &heap->timers[smallest]))
            smallest = left;
        if (right < heap->count && timer_before(&heap->timers[right], &heap->timers[smallest]))
            smallest = right;
        if (smallest == index) return;
        timer_swap(&heap->timers[index], &heap->timers[smallest]);
        index = smallest;
    }
}

int cr_timer_heap_init(struct cr_timer_heap *heap, uint32_t capacity) {
    assert(heap != NULL);
    if (capacity == 0) return CR_ERR_INVALID_PARAMS;
    heap->timers = calloc(capacity, sizeof(struct cr_timer));
    if (heap->timers == NULL) return CR_ERR_NOMEM;
    heap->count = 0;
    heap->capacity = capacity;
    heap->next_id = 1;
    return CR_OK;
}

void cr_timer_heap_destroy(struct cr_timer_heap *heap) {
    assert(heap != NULL);
    free(heap->timers);
    heap->timers = NULL;
    heap->count = heap->capacity = 0;
}

int cr_timer_heap_add(struct cr_timer_heap *heap, uint64_t deadline_ns,
                      const struct cr_msg *msg, uint64_t *id_out) {
    assert(heap != NULL && msg != NULL && id_out != NULL);
    assert(heap->count <= heap->capacity);
    if (heap->count == heap->capacity) return CR_ERR_NOMEM;
    struct cr_timer *timer = &heap->timers[heap->count];
    timer->deadline_ns = deadline_ns;
    timer->id = heap->next_id++;
    timer->msg = *msg;
    *id_out = timer->id;
    sift_up(heap, heap->count++);
    return CR_OK;
}

static void remove_at(struct cr_timer_heap *heap, uint32_t index) {
    assert(index < heap->count);
    heap->count--;
    if (index == heap->count) return;
    heap->timers[index] = heap->timers[heap->count];
    /* The moved timer may belong above or below its new place. */
    sift_up(heap, index);
    sift_down(heap, index);
}

bool cr_timer_heap_cancel(struct cr_timer_heap *heap, uint64_t id) {
    assert(heap != NULL);
    for (uint32_t i = 0; i < heap->count; i++) {
        if (heap->timers[i].id == id) {
            remove_at(heap, i);
            return true;
        }
    }
    return false;
}

bool cr_timer_heap_pop_due(struct cr_timer_heap *heap, uint64_t now_ns, uint64_t id_limit,
                           struct cr_timer *out) {
    assert(heap != NULL && out != NULL);
    if (heap->count == 0 || heap->timers[0].deadline_ns > now_ns) return false;
    if (heap->timers[0].id >= id_limit) return false;
    *out = heap->timers[0];
    remove_at(heap, 0);
    return true;
}

uint64_t cr_timer_heap_next_deadline(struct cr_timer_heap *heap) {
    assert(heap != NULL);
    return heap->count == 0 ? UINT64_MAX : heap->timers[0].deadline_ns;
}

/* The copy/move task table (see task_table.h). */
#include "core/task_table.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"

#define TASKS_TOTAL_MAX (1u << 24) /* keeps the hash index's size in 32 bits */
#define EMPTY 0u                   /* a hash slot holds task index + 1 */

struct cr_task_table {
    struct cr_task *tasks; /* capacity slots: active and finished share them */
    uint32_t capacity;
    uint32_t *free_stack; /* unused slot indexes */
    uint32_t free_count;
    uint32_t *active; /* dense: max_active */
    uint32_t active_count, max_active;
    uint32_t *finished; /* ring: max_finished, oldest at finished_head */
    uint32_t finished_head, finished_count, max_finished;
    uint32_t *index; /* open addressing by id, index_mask + 1 slots */
    uint32_t index_mask;
    uint64_t dropped;
};

static uint64_t id_hash(const struct cr_uuid *id) {
    uint64_t h;
    memcpy(&h, id->b, sizeof(h));
    /* Ids are random, but a caller may choose them: mix anyway (splitmix64). */
    h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27, h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

int cr_task_table_create(uint32_t max_active, uint32_t max_finished, struct cr_task_table **out) {
    assert(out != NULL);
    if (max_active == 0 || max_finished == 0 ||
        (uint64_t)max_active + max_finished > TASKS_TOTAL_MAX)
        return CR_ERR_INVALID_PARAMS;
    struct cr_task_table *t = calloc(1, sizeof(*t));
    if (t == NULL) return CR_ERR_NOMEM;
    t->capacity = max_active + max_finished;
    t->max_active = max_active;
    t->max_finished = max_finished;
    uint32_t slots = 2;
    while (slots < 2 * t->capacity) slots <<= 1; /* load at most one half */
    t->index_mask = slots - 1;
    t->tasks = calloc(t->capacity, sizeof(*t->tasks));
    t->free_stack = malloc(t->capacity * sizeof(uint32_t));
    t->active = malloc(max_active * sizeof(uint32_t));
    t->finished = malloc(max_finished * sizeof(uint32_t));
    t->index = calloc(slots, sizeof(uint32_t));
    if (!t->tasks || !t->free_stack || !t->active || !t->finished || !t->index) {
        cr_task_table_destroy(t);
        return CR_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < t->capacity; i++) t->free_stack[i] = t->capacity - 1 - i;
    t->free_count = t->capacity;
    *out = t;
    return CR_OK;
}

void cr_task_table_destroy(struct cr_task_table *t) {
    if (t == NULL) return;
    free(t->tasks);
    free(t->free_stack);
    free(t->active);
    free(t->finished);
    free(t->index);
    free(t);
}

/* The hash slot holding `id`, or the empty slot where it would go. */
static uint32_t index_probe(const struct cr_task_table *t, const struct cr_uuid *id) {
    uint32_t s = (uint32_t)id_hash(id) & t->index_mask;
    for (uint32_t n = 0; n <= t->index_mask; n++, s = (s + 1) & t->index_mask) {
        uint32_t v = t->index[s];
        if (v == EMPTY || memcmp(t->tasks[v - 1].id.b, id->b, sizeof(id->b)) == 0) return s;
    }
    assert(!"task index full"); /* load is at most one half */
    return 0;
}

/* Backward-shift deletion: no tombstones, probes stay short. */
static void index_delete(struct cr_task_table *t, const struct cr_uuid *id) {
    uint32_t hole = index_probe(t, id);
    assert(t->index[hole] != EMPTY);
    for (uint32_t s = (hole + 1) & t->index_mask; t->index[s] != EMPTY;
         s = (s + 1) & t->index_mask) {
        uint32_t home = (uint32_t)id_hash(&t->tasks[t->index[s] - 1].id) & t->index_mask;
        /* Move s into the hole unless its home lies cyclically in (hole, s]. */
        bool stays = hole <= s ? (home > hole && home <= s) : (home > hole || home <= s);
        if (stays) continue;
        t->index[hole] = t->index[s];
        hole = s;
    }
    t->index[hole] = EMPTY;
}

static void set_message(struct cr_task *task, const char *message) {
    if (message != NULL) snprintf(task->message, sizeof(task->message), "%s", message);
}

int cr_task_table_add(struct cr_task_table *t, const struct cr_uuid *id, enum cr_task_type type,
                      const struct cr_uuid *executor, uint64_t now_epoch_ms, uint64_t deadline_ms,
                      void *detail, struct cr_task **out) {
    assert(t != NULL && id != NULL && executor != NULL && out != NULL);
    if (t->active_count == t->max_active) return CR_ERR_NOMEM;
    uint32_t s = index_probe(t, id);
    if (t->index[s] != EMPTY) return CR_ERR_OBJECT_ALREADY_EXISTS;
    /* Finished tasks never hold more than max_finished slots, so a slot is
     * free whenever fewer than max_active tasks are in flight. */
    assert(t->free_count > 0);
    uint32_t slot = t->free_stack[--t->free_count];
    struct cr_task *task = &t->tasks[slot];
    *task = (struct cr_task){.id = *id, .executor = *executor, .type = type,
                             .status = CR_TASK_PENDING, .created_epoch_ms = now_epoch_ms,
                             .updated_epoch_ms = now_epoch_ms, .deadline_ms = deadline_ms,
                             .detail = detail, .position = t->active_count};
    t->active[t->active_count++] = slot;
    t->index[s] = slot + 1;
    *out = task;
    return CR_OK;
}

struct cr_task *cr_task_table_find(const struct cr_task_table *t, const struct cr_uuid *id) {
    assert(t != NULL && id != NULL);
    uint32_t v = t->index[index_probe(t, id)];
    return v == EMPTY ? NULL : &t->tasks[v - 1];
}

__attribute__((unused)) /* only asserted: NDEBUG builds (zig build bench) drop the calls */
static bool in_flight(enum cr_task_status s) {
    return s == CR_TASK_PENDING || s == CR_TASK_PROCESSING;
}

void cr_task_table_update(struct cr_task_table *t, struct cr_task *task,
                          enum cr_task_status status, const char *message,
                          uint64_t now_epoch_ms) {
    assert(t != NULL && task != NULL && in_flight(task->status) && in_flight(status));
    /* PENDING → PROCESSING, and back to PENDING when handed to another executor */
    (void)t; /* only asserted: unused under NDEBUG (zig build bench is ReleaseFast) */
    task->status = status;
    set_message(task, message);
    if (now_epoch_ms > task->updated_epoch_ms) task->updated_epoch_ms = now_epoch_ms;
}

/* Drops the oldest finished task: its slot becomes free. */
static void drop_oldest(struct cr_task_table *t) {
    assert(t->finished_count > 0);
    uint32_t slot = t->finished[t->finished_head];
    t->finished_head = (t->finished_head + 1) % t->max_finished;
    t->finished_count--;
    index_delete(t, &t->tasks[slot].id);
    memset(&t->tasks[slot], 0, sizeof(t->tasks[slot]));
    t->free_stack[t->free_count++] = slot;
    t->dropped++;
}

void cr_task_table_finish(struct cr_task_table *t, struct cr_task *task,
                          enum cr_task_status status, const char *message,
                          uint64_t now_epoch_ms) {
    assert(t != NULL && task != NULL && in_flight(task->status) && !in_flight(status));
    assert(task->detail == NULL);
    uint32_t slot = (uint32_t)(task - t->tasks);
    assert(slot < t->capacity && task->position < t->active_count &&
           t->active[task->position] == slot);
    /* Out of the active array: the last one takes its place. */
    uint32_t last = t->active[--t->active_count];
    t->active[task->position] = last;
    t->tasks[last].position = task->position;
    if (t->finished_count == t->max_finished) drop_oldest(t);
    task->status = status;
    set_message(task, message);
    if (now_epoch_ms > task->updated_epoch_ms) task->updated_epoch_ms = now_epoch_ms;
    task->position = (t->finished_head + t->finished_count) % t->max_finished;
    t->finished[task->position] = slot;
    t->finished_count++;
}

uint32_t cr_task_table_active_count(const struct cr_task_table *t) { return t->active_count; }

struct cr_task *cr_task_table_active_at(const struct cr_task_table *t, uint32_t i) {
    assert(i < t->active_count);
    return &t->tasks[t->active[i]];
}

uint32_t cr_task_table_finished_count(const struct cr_task_table *t) { return t->finished_count; }

struct cr_task *cr_task_table_finished_at(const struct cr_task_table *t, uint32_t i) {
    assert(i < t->finished_count);
    return &t->tasks[t->finished[(t->finished_head + i) % t->max_finished]];
}

uint64_t cr_task_table_dropped(const struct cr_task_table *t) { return t->dropped; }

const char *cr_task_status_name(enum cr_task_status s) {
    switch (s) {
    case CR_TASK_PENDING: return "PENDING";
    case CR_TASK_PROCESSING: return "PROCESSING";
    case CR_TASK_SUCCESS: return "SUCCESS";
    case CR_TASK_FAILED: return "FAILED";
    }
    return "UNKNOWN";
}

const char *cr_task_type_name(enum cr_task_type type) {
    return type == CR_TASK_MOVE      ? "REPLICA_MOVE"
           : type == CR_TASK_OFFLOAD ? "REPLICA_OFFLOAD"
                                     : "REPLICA_COPY";
}

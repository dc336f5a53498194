/* The copy/move task table (seed 004 CreateCopyTask/CreateMoveTask/QueryTask,
 * wire-formats §6): every task in flight and the last N finished ones.
 *
 * Single-threaded (src/core): the tasks actor owns one.  Time comes in as
 * parameters: `now_epoch_ms` for the timestamps QueryTask reports, and
 * deadlines on whatever monotonic clock the caller uses (the runtime's, so
 * tests drive them with the manual clock).  Nothing here logs.
 *
 * Bounds: at most max_active tasks PENDING or PROCESSING (a full table
 * refuses new ones), and at most max_finished SUCCESS or FAILED ones kept
 * for QueryTask: finishing one more drops the oldest finished task.
 *
 * Lookups by id are one hash probe (open addressing over the id's first
 * eight bytes, which are random); tasks in flight sit in a dense array the
 * caller walks for deadlines and hand-out; finished tasks sit in a FIFO ring
 * in the order they finished. */
#ifndef CRESCENT_CORE_TASK_TABLE_H
#define CRESCENT_CORE_TASK_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/store.h"

#define CR_TASK_MESSAGE_MAX 256u /* bytes of a task's message, NUL included */

enum cr_task_type { CR_TASK_COPY = 0, CR_TASK_MOVE = 1, CR_TASK_OFFLOAD = 2 }; /* = proto TaskType */

enum cr_task_status { /* = proto TaskStatus */
    CR_TASK_PENDING = 0,
    CR_TASK_PROCESSING = 1,
    CR_TASK_SUCCESS = 2,
    CR_TASK_FAILED = 3,
};

struct cr_task {
    struct cr_uuid id;
    struct cr_uuid executor;  /* the client that runs it (assigned_client) */
    enum cr_task_type type;
    enum cr_task_status status;
    uint64_t created_epoch_ms;
    uint64_t updated_epoch_ms;
    uint64_t deadline_ms;     /* caller's monotonic clock */
    void *detail;             /* the caller's, while in flight; NULL once finished */
    char message[CR_TASK_MESSAGE_MAX];
    /* table bookkeeping */
    uint32_t position;        /* index in the active array or the finished ring */
};

struct cr_task_table;

/* Returns CR_OK, CR_ERR_INVALID_PARAMS (a bound of 0, or their sum above
 * 2^24) or CR_ERR_NOMEM. */
int cr_task_table_create(uint32_t max_active, uint32_t max_finished, struct cr_task_table **out);
/* Frees the table; details of tasks still in flight are the caller's to
 * free first (cr_task_table_active_at). */
void cr_task_table_destroy(struct cr_task_table *table);

/* Adds a PENDING task.  Returns CR_OK and *out, CR_ERR_NOMEM (max_active
 * tasks in flight) or CR_ERR_OBJECT_ALREADY_EXISTS (the id is taken).
 * Changes nothing on error. */
int cr_task_table_add(struct cr_task_table *table, const struct cr_uuid *id,
                      enum cr_task_type type, const struct cr_uuid *executor,
                      uint64_t now_epoch_ms, uint64_t deadline_ms, void *detail,
                      struct cr_task **out);

/* The task with that id (in flight or kept finished), or NULL. */
struct cr_task *cr_task_table_find(const struct cr_task_table *table, const struct cr_uuid *id);

/* A task in flight changes status (PENDING → PROCESSING, or back to PENDING
 * when it is handed to another executor) or message;
 * `message` NULL keeps the old one.  The pointer stays valid. */
void cr_task_table_update(struct cr_task_table *table, struct cr_task *task,
                          enum cr_task_status status, const char *message,
                          uint64_t now_epoch_ms);

/* Finishes a task in flight (SUCCESS or FAILED, detail already released by
 * the caller and set to NULL): it joins the finished ring, and when the ring
 * holds max_finished the oldest finished task is dropped first.  `task` stays
 * valid until the next add or finish. */
void cr_task_table_finish(struct cr_task_table *table, struct cr_task *task,
                          enum cr_task_status status, const char *message,
                          uint64_t now_epoch_ms);

/* Tasks in flight, in no particular order: index 0..active_count-1.
 * Finishing one moves another into its index, so walk from the end. */
uint32_t cr_task_table_active_count(const struct cr_task_table *table);
struct cr_task *cr_task_table_active_at(const struct cr_task_table *table, uint32_t index);

/* Finished tasks, oldest first: index 0..finished_count-1. */
uint32_t cr_task_table_finished_count(const struct cr_task_table *table);
struct cr_task *cr_task_table_finished_at(const struct cr_task_table *table, uint32_t index);

/* Finished tasks dropped so far to keep the bound. */
uint64_t cr_task_table_dropped(const struct cr_task_table *table);

const char *cr_task_status_name(enum cr_task_status status); /* "PENDING", … */
const char *cr_task_type_name(enum cr_task_type type);       /* "REPLICA_COPY", … */

#endif

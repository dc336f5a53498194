/* Messages of copy/move tasks: segments ⇄ tasks, rpc → tasks, HTTP → tasks.
 * Types STORE_FIRST+40.. (the store-master range, master_msgs.h).
 *
 *   rpc ──MASTER_CALL(CreateCopyTask|CreateMoveTask)──▶ segments
 *       segments reserves the targets, then
 *       ──TASK_CREATE(call, detail)──▶ tasks ──MASTER_DONE(task id)──▶ rpc
 *       (a refusal goes back from segments as an ordinary MASTER_DONE)
 *   rpc ──MASTER_CALL(QueryTask|FetchTasks|MarkTaskToComplete)──▶ tasks
 *   tasks ──TASK_OP(commit | rollback | release source)──▶ segments
 *       ──TASK_OP_DONE(same op, with the store's verdict)──▶ tasks
 *   segments ──TASKS_RECHECK──▶ tasks, after a segment was unmounted or a
 *       client expired: tasks sends TASK_OP(check) for each task in flight
 *   HTTP worker ──TASKS_ADMIN (ask)──▶ tasks
 *
 * Ownership moves with the message: TASK_CREATE's call and detail go to
 * tasks, a TASK_OP to segments and back; discard hooks free what is left in
 * a ring at shutdown (a detail's reservation then dies with the store). */
#ifndef CRESCENT_MSGS_TASK_MSGS_H
#define CRESCENT_MSGS_TASK_MSGS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/store.h"
#include "core/task_table.h"
#include "msgs/master_msgs.h"

enum cr_task_msg_type {
    CR_MSG_TASK_CREATE = CR_MSG_STORE_FIRST + 40,  /* segments → tasks: cr_msg_task_create */
    CR_MSG_TASK_OP = CR_MSG_STORE_FIRST + 41,      /* tasks → segments: cr_msg_task_op */
    CR_MSG_TASK_OP_DONE = CR_MSG_STORE_FIRST + 42, /* segments → tasks: cr_msg_task_op */
    CR_MSG_TASKS_TICK = CR_MSG_STORE_FIRST + 43,   /* tasks' deadline timer */
    CR_MSG_TASKS_ADMIN = CR_MSG_STORE_FIRST + 44,  /* HTTP → tasks (ask): cr_msg_tasks_admin */
    CR_MSG_TASKS_RECHECK = CR_MSG_STORE_FIRST + 45, /* segments → tasks: no body */
};

/* One replica as an executor needs it: where to read or write. */
struct cr_task_replica {
    char segment[CR_STORE_NAME_LEN_MAX];
    char endpoint[CR_STORE_ENDPOINT_LEN_MAX];
    uint64_t buffer; /* segment base + offset in its owner's memory */
    uint64_t size;
    /* The capability for this range (core/xfer_cap.h wire form): read on the
     * source, write on a target, until the task's timeout; signed when the
     * segment has a key (rpc/rpc_caps.h). */
    bool has_cap;
    uint8_t cap[48];
};

enum cr_task_op_kind {
    CR_TASK_OP_COMMIT = 1,   /* targets COMPLETE; a move also releases its source if unleased */
    CR_TASK_OP_ROLLBACK = 2, /* targets freed */
    CR_TASK_OP_RELEASE = 3,  /* a committed move's source, if unleased by now */
    CR_TASK_OP_CHECK = 4,    /* the source still held by the executor? else reassign or fail */
};

/* Everything about a task in flight: made by segments at reservation,
 * owned by tasks afterwards (cr_task.detail), freed when the task ends. */
struct cr_task_detail {
    enum cr_task_type type;
    char tenant[CR_MASTER_TENANT_MAX + 1];
    struct cr_store_task_ref ref;
    struct cr_uuid executor; /* the owner of the source segment */
    struct cr_task_replica source;
    uint32_t target_count;
    struct cr_task_replica targets[CR_STORE_REPLICAS_MAX];
    bool has_checksum; /* the object's PutEnd checksum, for the executor */
    uint64_t checksum;
    uint64_t ssd_position; /* OFFLOAD: where the executor reported the object */
    bool promote; /* a COPY from a local_disk replica to memory (core/store_promote.h) */
    /* tasks' own state */
    bool op_in_flight;           /* a TASK_OP is out: nothing else starts */
    bool committed;              /* a move whose source waits for its lease */
    uint64_t lease_deadline_ms;  /* until when, on the runtime clock */
    struct cr_master_call *held; /* MarkTaskToComplete answered when the op returns */
    enum cr_task_op_kind op_kind; /* the op in flight */
    bool recheck;                /* a check is due (an unmount or expiry since) */
    bool release_source;         /* a move whose source is still to be released */
    uint32_t reassigned;         /* times handed to another executor */
    struct cr_uuid lost_executor; /* the last executor lost, when reassigned */
    char lost_why[160];          /* how it was lost */
    uint32_t key_len;
    char key[]; /* key_len bytes and a NUL */
};

struct cr_msg_task_create {
    struct cr_master_call *call;
    struct cr_task_detail *detail;
};

struct cr_task_op {
    enum cr_task_op_kind kind;
    bool release_source;
    bool offload;          /* an OFFLOAD task's op (store_offload.h) */
    bool promote;          /* a promotion's op (store_promote.h) */
    uint64_t ssd_position; /* OFFLOAD COMMIT: the object's SSD position */
    struct cr_uuid task_id;
    struct cr_store_task_ref ref;
    /* segments' verdict */
    int32_t status;
    uint64_t lease_deadline_ms;
    char message[CR_STORE_ERROR_LEN];
    /* CHECK: the executor (in), and what the store found (out) */
    struct cr_uuid executor;
    bool source_lost, executor_known, moved;
    struct cr_task_replica source;  /* when moved: the new source and targets */
    struct cr_task_replica targets[CR_STORE_REPLICAS_MAX];
};

struct cr_msg_task_op {
    struct cr_task_op *op;
};

/* Ask: tasks renders JSON into *json_out (malloc'd; the asker frees it):
 * every task (id NULL) or one, and replies CR_OK, CR_ERR_OBJECT_NOT_FOUND
 * (no such task) or CR_ERR_NOMEM. */
struct cr_msg_tasks_admin {
    const struct cr_uuid *id;
    char **json_out;
};

#endif

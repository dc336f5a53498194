/* The store's side of copy/move tasks, run on the segments actor's thread
 * (task_msgs.h has the protocol): reserving the targets of a new task and
 * applying the tasks actor's commit, rollback and release operations. */
#ifndef CRESCENT_ACTORS_TASK_STORE_H
#define CRESCENT_ACTORS_TASK_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/store.h"
#include "msgs/master_msgs.h"
#include "msgs/task_msgs.h"

/* CreateCopyTask and CreateMoveTask: run by segments, finished by tasks. */
bool cr_task_method_creates(uint16_t method);

/* QueryTask, FetchTasks, MarkTaskToComplete: the gateway sends them to tasks. */
bool cr_task_method_for_tasks(uint16_t method);
/* Whether a Ping asks for its client's tasks (PingRequest.max_tasks > 0):
 * segments runs the ping, then tasks adds them to its response. */
bool cr_task_ping_wants_tasks(const struct cr_master_call *call);

/* Runs a CreateCopyTask/CreateMoveTask call's reservation.  Returns CR_OK
 * with *out (malloc'd, the caller's; the store holds the reservation), or
 * the store's refusal, with the refusal response packed into the call
 * (call->reply, status CR_OK) ready to go back to the gateway. */
int cr_task_store_create(cr_store *store, uint64_t now_ms, struct cr_master_call *call,
                         struct cr_task_detail **out);

/* A move of `key` from `source` to `target` that crescentd makes itself
 * (a drain job): reserves the target as cr_task_store_create does and
 * returns CR_OK with *out (malloc'd), or the store's refusal (its reason in
 * cr_store_last_error), changing nothing. */
int cr_task_store_create_move(cr_store *store, uint64_t now_ms, const struct cr_store_key *key,
                              const char *source, const char *target,
                              struct cr_task_detail **out);

/* A task's detail (malloc'd, the caller's) for the reservation `res` of
 * object `key`; NULL when out of memory. */
struct cr_task_detail *cr_task_detail_new(const cr_store *store, enum cr_task_type type,
                                          const struct cr_store_key *key,
                                          const struct cr_store_task_reservation *res);

/* Packs a refusal of `status` with `why` into a CreateCopyTask or
 * CreateMoveTask call (also used by tasks when it cannot take the task). */
void cr_task_call_refuse(struct cr_master_call *call, int status, const char *why);

/* Applies op to the store and records the verdict in op->status,
 * op->lease_deadline_ms and op->message; a CHECK also what it found
 * (source_lost, executor_known) and, when the task moved to another
 * executor (moved), op->ref, op->executor, op->source and op->targets. */
void cr_task_store_run_op(cr_store *store, uint64_t now_ms, struct cr_task_op *op);

#endif

/* crescentd's local segment as an executor of copy/move tasks (seed 004:
 * "crescent-store and crescentd's local segment run assigned tasks").
 *
 * The data actor asks for its tasks with its heartbeat Ping (max_tasks), as
 * crescent-store does; the tasks handed to it are those whose source is the
 * local segment.  One runs on the data actor's own thread, which owns the
 * segment's memory: the source is read in place (no transfer), its XXH3 is
 * checked against the object's checksum, and every target is written
 * through a transfer client (task_exec.h), after which the actor reports
 * with MarkTaskToComplete like any executor. */
#ifndef CRESCENT_ACTORS_DATA_TASKS_H
#define CRESCENT_ACTORS_DATA_TASKS_H

#include <stddef.h>

#include "master.pb-c.h"

struct cr_xfer_client;
struct cr_xfer_segment;

/* Runs one assignment whose source must lie inside `segment`, registered
 * and mounted as `segment_name` at its own address (MountSegment's buffer
 * = segment->base).  Returns CR_OK, or a failure with a sentence in why:
 * CR_ERR_INVALID_PARAMS (the source is not in the local segment, or the
 * assignment has no or too many targets), and cr_task_exec_write's
 * (checksum mismatch: nothing written; a target's transfer failure). */
int cr_data_task_run(const struct cr_xfer_segment *segment, const char *segment_name,
                     struct cr_xfer_client *xfer, const Crescent__Master__TaskAssignment *a,
                     char *why, size_t why_len);

/* Runs one REPLICA_OFFLOAD assignment (docs/tiers.md, "Offload on
 * eviction"): the object, read in place from `segment`, is written to the
 * local segment's SSD tier `ssd` (tier/ssd_host.h: checked against the
 * task's checksum, fdatasync'd, renamed) and *position gets its id, for the
 * report.  Returns CR_OK, or a failure with a sentence in why: no SSD tier,
 * no checksum, a source outside the segment, or the write's. */
struct cr_store_ssd;
int cr_data_task_offload(const struct cr_xfer_segment *segment, const char *segment_name,
                         struct cr_store_ssd *ssd, const Crescent__Master__TaskAssignment *a,
                         uint64_t *position, char *why, size_t why_len);

#endif

/* The executor's side of a copy/move task: move one object's bytes from its
 * source replica to each target replica through the transfer layer
 * (src/rdma/xfer.h), verifying them against the object's PutEnd checksum
 * before any target is written.  Store servers (crescent-store) and
 * crescentd's local segment run it for the tasks they fetch (FetchTasks),
 * then report the outcome (MarkTaskToComplete); the master commits or rolls
 * back the targets, which no reader sees before the commit.
 *
 * Blocking on the caller's thread: the caller's transfer client is polled
 * until every op completed or failed (the transfer layer fails ops that make
 * no progress for its op timeout, so this ends). */
#ifndef CRESCENT_CLIENT_TASK_EXEC_H
#define CRESCENT_CLIENT_TASK_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cr_xfer_client;

#define CR_TASK_EXEC_TARGETS_MAX 8u /* = CR_STORE_REPLICAS_MAX (checked in task_exec.c) */
#define CR_TASK_EXEC_ERROR_MAX 256u

/* Where one replica lives: as a BufHandle says it. */
struct cr_task_exec_replica {
    const char *endpoint; /* the owner's transfer "host:port" */
    const char *segment;
    uint64_t buffer;      /* address in the owner's memory: segment base + offset */
    /* The master's capability for it (BufHandle.capability, 48 bytes: read on
     * the source, write on a target), passed with the transfer; NULL: none. */
    const uint8_t *cap;
};

struct cr_task_exec_job {
    uint64_t size; /* the object's bytes */
    struct cr_task_exec_replica source;
    struct cr_task_exec_replica targets[CR_TASK_EXEC_TARGETS_MAX];
    uint32_t target_count;
    bool has_checksum; /* the object's XXH3-64 from PutEnd */
    uint64_t checksum;
};

/* Reads the source (in place when the transfer layer maps it, same host; a
 * copy into a buffer otherwise), checks its XXH3 against the checksum when
 * the job has one, then writes every target, all at once.  Returns CR_OK, or
 * the first failure with a sentence in why (naming the peer, the segment and
 * the reason): CR_ERR_INVALID_PARAMS (a bad job), CR_ERR_NOMEM, CR_ERR_RPC_FAIL
 * (the bytes read do not match the checksum: no target was written), or
 * the transfer layer's status (CR_ERR_IO, CR_ERR_TIMEOUT, ...). */
int cr_task_exec_run(struct cr_xfer_client *xfer, const struct cr_task_exec_job *job, char *why,
                     size_t why_len);

/* The second half of cr_task_exec_run, for an executor that holds the
 * source bytes itself (crescentd's local segment): checks their XXH3
 * against the job's checksum, then writes every target.  Same returns. */
int cr_task_exec_write(struct cr_xfer_client *xfer, const struct cr_task_exec_job *job,
                       const void *bytes, char *why, size_t why_len);

/* One round of an executor's loop, for a store server after its heartbeat:
 * fetches up to `max` (1..256) tasks assigned to `master`'s client id
 * (FetchTasks), runs each with cr_task_exec_run over `xfer`, and reports
 * each outcome (MarkTaskToComplete: SUCCESS, or FAILED with the reason).
 * Returns the number of tasks run (>= 0), or the fetch's failure (a
 * negative cr_status; cr_client_last_error(master) says why).  A report that
 * fails is logged: the master fails the task at its deadline anyway. */
struct cr_client;
int cr_task_exec_serve(struct cr_client *master, struct cr_xfer_client *xfer, uint32_t max);

/* Runs and reports tasks already handed out (e.g. by a Ping response,
 * cr_client_heartbeat_tasks), as cr_task_exec_serve does after its fetch.
 * Returns how many ran. */
struct cr_task_assignments;
int cr_task_exec_run_all(struct cr_client *master, struct cr_xfer_client *xfer,
                         const struct cr_task_assignments *tasks);

/* A store server's SSD tier, for OFFLOAD tasks (docs/tiers.md, "Local SSD
 * tier"): the object's bytes are in the server's own segment
 * [segment_base, segment_base + segment_size), at the source handle's
 * buffer; `write` stores them durably (checking their XXH3 against xxh3)
 * and gives their position, `remove` deletes a file the master refused. */
struct cr_task_exec_ssd {
    const uint8_t *segment_base;
    uint64_t segment_size;
    int (*write)(void *arg, const char *tenant, const char *key, const void *value, uint64_t len,
                 uint64_t xxh3, uint64_t *position, char *why, size_t why_len);
    void (*remove)(void *arg, uint64_t position);
    void *arg;
};

/* Runs one OFFLOAD task: checks that the source lies in ssd's segment,
 * writes it with ssd->write (ssd NULL: fails, "no SSD tier") and reports
 * (cr_client_mark_task_offloaded, or a failure with the reason).  When the
 * master refuses the success report (the object went meanwhile), the file
 * is removed.  Returns CR_OK when the master recorded the offload. */
struct cr_task_assignment;
int cr_task_exec_offload(struct cr_client *master, const struct cr_task_exec_ssd *ssd,
                         const struct cr_task_assignment *a);

/* cr_task_exec_run_all, with OFFLOAD tasks run by cr_task_exec_offload
 * (ssd may be NULL). */
int cr_task_exec_run_all_ssd(struct cr_client *master, struct cr_xfer_client *xfer,
                             const struct cr_task_assignments *tasks,
                             const struct cr_task_exec_ssd *ssd);
#endif

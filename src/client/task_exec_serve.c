/* An executor's round: fetch, run, report (see task_exec.h). */
#include <stdio.h>

#include "client/task_exec.h"
#include "core/log.h"
#include "crescent/client.h"

/* The assignment as a job: handles point into the assignment. */
static void job_of(const struct cr_task_assignment *a, struct cr_task_exec_job *job) {
    *job = (struct cr_task_exec_job){.size = a->source.size_bytes,
                                     .has_checksum = a->has_checksum,
                                     .checksum = a->checksum_xxh3};
    job->source = (struct cr_task_exec_replica){
        a->source.transport_endpoint, a->source.segment_name, a->source.buffer,
        a->source.has_capability ? a->source.capability : NULL};
    for (size_t i = 0; i < a->target_count && i < CR_TASK_EXEC_TARGETS_MAX; i++)
        job->targets[job->target_count++] = (struct cr_task_exec_replica){
            a->targets[i].transport_endpoint, a->targets[i].segment_name, a->targets[i].buffer,
            a->targets[i].has_capability ? a->targets[i].capability : NULL};
}

int cr_task_exec_run_all(struct cr_client *master, struct cr_xfer_client *xfer,
                         const struct cr_task_assignments *tasks) {
    return cr_task_exec_run_all_ssd(master, xfer, tasks, NULL);
}

int cr_task_exec_run_all_ssd(struct cr_client *master, struct cr_xfer_client *xfer,
                             const struct cr_task_assignments *tasks,
                             const struct cr_task_exec_ssd *ssd) {
    for (size_t i = 0; i < tasks->count; i++) {
        const struct cr_task_assignment *a = &tasks->tasks[i];
        if (a->type == CR_CLIENT_TASK_OFFLOAD) {
            (void)cr_task_exec_offload(master, ssd, a);
            continue;
        }
        struct cr_task_exec_job job;
        job_of(a, &job);
        char why[CR_TASK_EXEC_ERROR_MAX];
        int run = cr_task_exec_run(xfer, &job, why, sizeof(why));
        char id[CR_CLIENT_UUID_TEXT];
        cr_client_uuid_format(a->id, id);
        if (run != CR_OK)
            CR_WARN("tasks", "task %s (%s of '%s'): %s", id, cr_client_task_type_name(a->type),
                    a->key, why);
        if (cr_client_mark_task_to_complete(master, a->id, run == CR_OK,
                                            run == CR_OK ? NULL : why) != CR_OK)
            CR_WARN("tasks", "task %s: the master refused its report: %s", id,
                    cr_client_last_error(master));
    }
    return (int)tasks->count;
}

int cr_task_exec_serve(struct cr_client *master, struct cr_xfer_client *xfer, uint32_t max) {
    struct cr_task_assignments tasks;
    int rc = cr_client_fetch_tasks(master, max, &tasks);
    if (rc != CR_OK) return rc;
    int ran = cr_task_exec_run_all(master, xfer, &tasks);
    cr_client_task_assignments_free(&tasks);
    return ran;
}

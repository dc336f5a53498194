/* crescentd's local segment as a copy/move executor (see data_tasks.h). */
#include "actors/data_tasks.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "client/task_exec.h"
#include "crescent/error.h"
#include "rdma/xfer.h"
#include "tier/ssd_host.h"

/* Whether [buffer, buffer + size) lies inside the segment, without overflow.
 * An empty object (size 0) still names an address of the segment. */
static bool inside(const struct cr_xfer_segment *segment, uint64_t buffer, uint64_t size) {
    uint64_t base = (uint64_t)(uintptr_t)segment->base;
    return buffer >= base && size <= segment->size && buffer - base <= segment->size - size &&
           (size > 0 || buffer - base < segment->size);
}

int cr_data_task_run(const struct cr_xfer_segment *segment, const char *segment_name,
                     struct cr_xfer_client *xfer, const Crescent__Master__TaskAssignment *a,
                     char *why, size_t why_len) {
    assert(segment != NULL && segment_name != NULL && xfer != NULL && a != NULL);
    assert(why != NULL && why_len > 0);
    const Crescent__Master__BufHandle *src = a->source;
    if (src == NULL || strcmp(src->segment_name, segment_name) != 0 ||
        !inside(segment, src->buffer, src->size)) {
        snprintf(why, why_len, "the task's source is not in crescentd's local segment %s",
                 segment_name);
        return CR_ERR_INVALID_PARAMS;
    }
    if (a->n_targets == 0 || a->n_targets > CR_TASK_EXEC_TARGETS_MAX) {
        snprintf(why, why_len, "a task needs 1 to %u targets, this one has %zu",
                 CR_TASK_EXEC_TARGETS_MAX, a->n_targets);
        return CR_ERR_INVALID_PARAMS;
    }
    if (src->size == 0) return CR_OK; /* an empty object: its targets need no bytes */
    struct cr_task_exec_job job = {.size = src->size,
                                   .source = {src->transport_endpoint, src->segment_name,
                                              src->buffer, NULL}, /* read in place */
                                   .target_count = (uint32_t)a->n_targets,
                                   .has_checksum = a->has_checksum_xxh3,
                                   .checksum = a->checksum_xxh3};
    for (size_t i = 0; i < a->n_targets; i++) {
        const Crescent__Master__BufHandle *t = a->targets[i];
        bool cap = t->has_capability && t->capability.len == CR_CAP_BYTES;
        job.targets[i] = (struct cr_task_exec_replica){t->transport_endpoint, t->segment_name,
                                                       t->buffer, cap ? t->capability.data : NULL};
    }
    const uint8_t *bytes = (const uint8_t *)segment->base +
                           (src->buffer - (uint64_t)(uintptr_t)segment->base);
    return cr_task_exec_write(xfer, &job, bytes, why, why_len);
}

int cr_data_task_offload(const struct cr_xfer_segment *segment, const char *segment_name,
                         struct cr_store_ssd *ssd, const Crescent__Master__TaskAssignment *a,
                         uint64_t *position, char *why, size_t why_len) {
    assert(segment != NULL && segment_name != NULL && a != NULL && position != NULL);
    assert(why != NULL && why_len > 0);
    const Crescent__Master__BufHandle *src = a->source;
    if (ssd == NULL || ssd->store == NULL) {
        snprintf(why, why_len, "crescentd's local segment has no SSD tier "
                 "(--local-segment-ssd-dir)");
        return CR_ERR_INVALID_PARAMS;
    }
    if (!a->has_checksum_xxh3) {
        snprintf(why, why_len, "the task carries no checksum to write against");
        return CR_ERR_INVALID_PARAMS;
    }
    if (src == NULL || strcmp(src->segment_name, segment_name) != 0 ||
        !inside(segment, src->buffer, src->size)) {
        snprintf(why, why_len, "the task's source is not in crescentd's local segment %s",
                 segment_name);
        return CR_ERR_INVALID_PARAMS;
    }
    const uint8_t *bytes = (const uint8_t *)segment->base +
                           (src->buffer - (uint64_t)(uintptr_t)segment->base);
    return cr_store_ssd_write(ssd, a->tenant_id != NULL ? a->tenant_id : "default", a->key,
                              bytes, src->size, a->checksum_xxh3, position, why, why_len);
}

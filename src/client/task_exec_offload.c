/* The executor's side of an OFFLOAD task (see task_exec.h): a store server
 * writes an object of its own segment to its SSD tier and reports where. */
#include <inttypes.h>
#include <stdio.h>

#include "client/task_exec.h"
#include "core/log.h"
#include "crescent/client.h"
#include "crescent/error.h"

/* The source's bytes in the server's own segment, or NULL (why filled). */
static const uint8_t *source_bytes(const struct cr_task_exec_ssd *ssd,
                                   const struct cr_task_assignment *a, char *why, size_t len) {
    uint64_t base = (uint64_t)(uintptr_t)ssd->segment_base;
    uint64_t at = a->source.buffer, size = a->source.size_bytes;
    if (at < base || at - base > ssd->segment_size || size > ssd->segment_size - (at - base)) {
        snprintf(why, len, "the source (%" PRIu64 " bytes at 0x%" PRIx64 ") is not in this "
                 "server's segment", size, at);
        return NULL;
    }
    return ssd->segment_base + (at - base);
}

static int report_failure(struct cr_client *master, const struct cr_task_assignment *a,
                          const char *id, const char *why) {
    CR_WARN("tasks", "offload %s of '%s' failed: %s", id, a->key, why);
    if (cr_client_mark_task_to_complete(master, a->id, false, why) != CR_OK)
        CR_WARN("tasks", "offload %s: the master refused its report: %s", id,
                cr_client_last_error(master));
    return CR_ERR_IO;
}

int cr_task_exec_offload(struct cr_client *master, const struct cr_task_exec_ssd *ssd,
                         const struct cr_task_assignment *a) {
    char id[CR_CLIENT_UUID_TEXT], why[CR_TASK_EXEC_ERROR_MAX];
    cr_client_uuid_format(a->id, id);
    if (ssd == NULL || ssd->write == NULL)
        return report_failure(master, a, id, "this server has no SSD tier (--ssd-dir)");
    if (!a->has_checksum)
        return report_failure(master, a, id, "the task carries no checksum to write against");
    const uint8_t *bytes = source_bytes(ssd, a, why, sizeof(why));
    if (bytes == NULL) return report_failure(master, a, id, why);
    uint64_t position = 0;
    int rc = ssd->write(ssd->arg, a->tenant != NULL ? a->tenant : "default", a->key, bytes,
                        a->source.size_bytes, a->checksum_xxh3, &position, why, sizeof(why));
    if (rc != CR_OK) return report_failure(master, a, id, why);
    rc = cr_client_mark_task_offloaded(master, a->id, position);
    if (rc == CR_OK) return CR_OK;
    /* Refused (the object went, the task ended or failed): nobody will read
     * it.  Unanswered (timeout, transport): the master may have committed
     * it, so the file stays (the SSD's own LRU reclaims it if unused). */
    bool unanswered = rc != CR_ERR_OBJECT_NOT_FOUND && rc != CR_ERR_INVALID_PARAMS &&
                      rc != CR_ERR_ILLEGAL_CLIENT;
    CR_WARN("tasks", "offload %s of '%s': the master did not record it (%s); its SSD file %"
            PRIu64 " is %s", id, a->key, cr_client_last_error(master), position,
            unanswered ? "kept" : "removed");
    if (!unanswered && ssd->remove != NULL) ssd->remove(ssd->arg, position);
    return rc;
}

/* Segments' part of memory eviction's offload to a store server's SSD
 * (core/store_offload.h; docs/tiers.md, "Local SSD tier"): a victim that
 * lives on a segment whose server has an SSD tier becomes an OFFLOAD task
 * for that server instead of being dropped.  The tasks actor runs it; its
 * commit (task_store.c) records the local_disk replica and frees memory. */
#include <stdlib.h>

#include "actors/segments_internal.h"
#include "actors/task_store.h"
#include "core/log.h"
#include "crescent/error.h"
#include "msgs/task_msgs.h"

bool segments_offload_victim(struct segments_state *st, const struct cr_evict_candidate *v) {
    struct cr_store_task_reservation res;
    struct cr_store_key key;
    if (cr_store_offload_begin(st->store, v->object_id, v->generation, st->now_ms, &res, &key) !=
        CR_OK)
        return false; /* no SSD behind it (or no checksum): evicted as ever */
    struct cr_task_detail *detail = cr_task_detail_new(st->store, CR_TASK_OFFLOAD, &key, &res);
    struct cr_msg fwd = {.type = CR_MSG_TASK_CREATE};
    struct cr_msg_task_create *body = CR_MSG_BODY(&fwd, struct cr_msg_task_create);
    body->call = NULL, body->detail = detail;
    if (detail != NULL && cr_send_try(st->peers->actors[CR_SUBSYSTEM_TASKS], &fwd) == CR_OK)
        return true;
    /* Out of memory, or tasks busy or stopping: the object stays in memory
     * and evictable; the next pass tries again. */
    cr_store_offload_rollback(st->store, &res.ref);
    free(detail);
    st->offloads_unsent++;
    return true; /* not dropped either: offloading beats dropping when it only waits */
}

/* Segments' part of promotion from a store server's SSD back to memory
 * (core/store_promote.h; docs/tiers.md, "Promotion"): objects whose gets the
 * SSD served --promotion-hits times within --promotion-window-sec become
 * copy tasks for that server, reading its reader segment "<segment>#ssd"
 * (the whole value at the SSD position, checked there) and writing a
 * reserved memory replica.  The tasks actor runs them like any copy; their
 * ops come back marked `promote` (task_store.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/segments_internal.h"
#include "actors/task_store.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/task_msgs.h"

/* Promotions begun per tick at most: a burst of SSD reads does not hold the
 * store's thread; the rest wait in the store's queue for the next tick. */
#define PROMOTIONS_PER_TICK 64u
/* CR_HOST_SSD_SUFFIX (include/crescent/host.h, which cannot come in beside
 * core/store.h: both define the replica enums). */
#define SSD_READER_SUFFIX "#ssd"

int segments_promote_setup(struct segments_state *st, const struct cr_daemon_config *config) {
    int rc = cr_store_set_promotion(st->store, config->promotion_hits,
                                    (uint64_t)config->promotion_window_sec * 1000u);
    if (rc != CR_OK) {
        CR_ERROR("segments", "--promotion-hits: %s", cr_store_last_error(st->store));
        cr_store_destroy(st->store);
        st->store = NULL;
    }
    return rc;
}

/* The task that copies the SSD file into the reserved replica: its source is
 * the server's reader segment, which needs no capability of the master's
 * (a server requiring capabilities offers no SSD tier). */
static struct cr_task_detail *promotion_task(struct segments_state *st,
                                             const struct cr_store_key *key,
                                             const struct cr_store_task_reservation *res) {
    struct cr_task_detail *d = cr_task_detail_new(st->store, CR_TASK_COPY, key, res);
    if (d == NULL) return NULL;
    int n = snprintf(d->source.segment, sizeof(d->source.segment), "%s%s",
                     res->source.segment_name, SSD_READER_SUFFIX);
    if (n < 0 || (size_t)n >= sizeof(d->source.segment)) {
        free(d); /* a segment name this long has no reader segment either */
        return NULL;
    }
    d->source.has_cap = false;
    d->promote = true;
    return d;
}

void segments_promote_tick(struct segments_state *st) {
    if (st->standby) return; /* its leader promotes */
    uint32_t id, generation;
    for (uint32_t i = 0; i < PROMOTIONS_PER_TICK &&
                         cr_store_promote_next(st->store, &id, &generation); i++) {
        struct cr_store_task_reservation res;
        struct cr_store_key key;
        if (cr_store_promote_begin(st->store, id, generation, st->now_ms, &res, &key) != CR_OK)
            continue; /* gone, in memory again, busy, or no room: counted by the store */
        struct cr_task_detail *detail = promotion_task(st, &key, &res);
        struct cr_msg fwd = {.type = CR_MSG_TASK_CREATE};
        struct cr_msg_task_create *body = CR_MSG_BODY(&fwd, struct cr_msg_task_create);
        body->call = NULL, body->detail = detail;
        if (detail != NULL && cr_send_try(st->peers->actors[CR_SUBSYSTEM_TASKS], &fwd) == CR_OK)
            continue;
        /* Out of memory, or tasks busy or stopping: the object stays on the
         * SSD; its next hits ask again. */
        cr_store_promote_rollback(st->store, &res.ref);
        free(detail);
    }
}

/* Applying log records to a live store (apply.h). */
#include "durable/apply.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"

void cr_durable_restore_from(const struct cr_durable_record *rec,
                             struct cr_store_restore_object *o) {
    *o = (struct cr_store_restore_object){
        .tenant = rec->tenant, .key = rec->key, .key_len = rec->key_len, .size = rec->size,
        .has_checksum = (rec->flags & CR_DURABLE_OBJ_CHECKSUM) != 0,
        .checksum = rec->checksum,
        .with_soft_pin = (rec->flags & CR_DURABLE_OBJ_SOFT_PIN) != 0,
        .hard_pinned = (rec->flags & CR_DURABLE_OBJ_HARD_PIN) != 0, .owner = rec->owner,
        .replica_count = rec->replica_count};
    for (uint32_t i = 0; i < rec->replica_count; i++)
        o->replicas[i] = (struct cr_store_restore_replica){
            .medium = (enum cr_replica_medium)rec->replicas[i].medium,
            .segment = rec->replicas[i].segment, .offset = rec->replicas[i].offset,
            .size = rec->replicas[i].size,
            .file_path = rec->replicas[i].medium == CR_MEDIUM_DISK ? rec->file_path : NULL};
}

static int apply_mount(cr_store *store, const struct cr_durable_record *rec, uint64_t now_ms,
                       struct cr_durable_apply_counts *c, char *err, size_t err_len) {
    struct cr_store_segment_params p = {.name = rec->name, .base = rec->base, .size = rec->size,
                                        .endpoint = rec->endpoint, .protocol = rec->protocol};
    int rc = cr_store_remount_segment(store, &rec->owner, &p, now_ms);
    if (rc == CR_ERR_SEGMENT_ALREADY_EXISTS || rc == CR_ERR_INVALID_PARAMS) {
        /* Another segment of that name (or overlapping it) than the leader
         * has now: the record is newer. */
        (void)cr_store_unmount_segment(store, NULL, rec->name, NULL);
        rc = cr_store_mount_segment(store, &rec->owner, &p, now_ms);
    }
    if (rc != CR_OK) {
        snprintf(err, err_len, "cannot mount segment %s: %s", rec->name,
                 cr_store_last_error(store));
        return rc;
    }
    c->segments_mounted++;
    return CR_OK;
}

static int apply_put(cr_store *store, const struct cr_durable_record *rec, uint64_t now_ms,
                     struct cr_durable_apply_counts *c, char *err, size_t err_len) {
    struct cr_store_restore_object *o = malloc(sizeof(*o));
    if (o == NULL) {
        snprintf(err, err_len, "no memory to apply an object");
        return CR_ERR_NOMEM;
    }
    cr_durable_restore_from(rec, o);
    /* The object's whole state replaces what the standby had of it. */
    (void)cr_store_remove(store, rec->tenant, rec->key, rec->key_len, true, now_ms);
    uint32_t dropped = 0;
    int rc = cr_store_restore_object(store, o, now_ms, &dropped);
    free(o);
    c->replicas_dropped += dropped;
    if (rc == CR_OK) {
        c->objects_put++;
        return CR_OK;
    }
    if (rc == CR_ERR_SEGMENT_NOT_FOUND) {
        c->objects_dropped++;
        return CR_OK;
    }
    snprintf(err, err_len, "cannot apply an object of %u key bytes: %s", rec->key_len,
             cr_store_last_error(store));
    return rc;
}

int cr_durable_apply(cr_store *store, const struct cr_durable_record *rec, uint64_t now_ms,
                     struct cr_durable_apply_counts *c, char *err, size_t err_len) {
    assert(store != NULL && rec != NULL && c != NULL && err != NULL);
    c->records++;
    switch (rec->type) {
    case CR_DURABLE_SEGMENT_MOUNT: return apply_mount(store, rec, now_ms, c, err, err_len);
    case CR_DURABLE_SEGMENT_UNMOUNT:
        if (cr_store_unmount_segment(store, NULL, rec->name, NULL) == CR_OK)
            c->segments_unmounted++;
        return CR_OK;
    case CR_DURABLE_OBJECT_PUT:
    case CR_DURABLE_OBJECT_PUT_TIERED: /* decoded as OBJECT_PUT; here for the switch's sake */
        return apply_put(store, rec, now_ms, c, err, err_len);
    case CR_DURABLE_OBJECT_REMOVE:
        if (cr_store_remove(store, rec->tenant, rec->key, rec->key_len, true, now_ms) == CR_OK)
            c->objects_removed++;
        return CR_OK;
    case CR_DURABLE_REMOVE_ALL:
        c->objects_removed +=
            cr_store_remove_all(store, rec->tenant[0] != '\0' ? rec->tenant : NULL, true, now_ms);
        return CR_OK;
    case CR_DURABLE_SNAPSHOT_END: return CR_OK;
    /* A standby keeps no drain jobs (docs/mooncake.md): the leader runs them. */
    case CR_DURABLE_DRAIN_JOB: return CR_OK;
    }
    snprintf(err, err_len, "a record of unknown type %d", (int)rec->type);
    return CR_ERR_PROTOCOL;
}

int cr_durable_apply_block(cr_store *store, const uint8_t *block, size_t len, uint64_t now_ms,
                           struct cr_durable_apply_counts *counts, uint64_t *last_lsn, char *err,
                           size_t err_len) {
    struct cr_durable_record *rec = malloc(sizeof(*rec));
    if (rec == NULL) {
        snprintf(err, err_len, "no memory to apply records");
        return CR_ERR_NOMEM;
    }
    size_t off = 0;
    int rc = CR_OK;
    while (rc == CR_OK && off < len) {
        const uint8_t *body;
        uint32_t body_len;
        size_t frame_len;
        if (cr_durable_frame_next(block + off, len - off, &body, &body_len, &frame_len) !=
            CR_DURABLE_FRAME_OK) {
            snprintf(err, err_len, "a record at byte %zu of a checked block is damaged", off);
            rc = CR_ERR_PROTOCOL;
            break;
        }
        rc = cr_durable_decode(body, body_len, rec, err, err_len);
        if (rc == CR_OK) rc = cr_durable_apply(store, rec, now_ms, counts, err, err_len);
        if (rc == CR_OK && last_lsn != NULL) *last_lsn = rec->lsn;
        off += frame_len;
    }
    free(rec);
    return rc;
}

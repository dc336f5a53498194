/* The round's records, from the store's events and state (feed.h). */
#include "durable/feed.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"

struct cr_durable_known_segment {
    uint32_t epoch; /* of the last diff that saw it */
    struct cr_uuid owner;
    uint64_t base;
    uint64_t size;
    char name[CR_STORE_NAME_LEN_MAX + 1];
    char endpoint[CR_STORE_ENDPOINT_LEN_MAX + 1];
    char protocol[CR_STORE_NAME_LEN_MAX + 1];
};

int cr_durable_feed_init(struct cr_durable_feed *feed, uint64_t next_lsn, uint32_t max_segments,
                         const char *volatile_segment) {
    assert(feed != NULL && next_lsn > 0);
    memset(feed, 0, sizeof(*feed));
    if (volatile_segment != NULL)
        snprintf(feed->volatile_segment, sizeof(feed->volatile_segment), "%s", volatile_segment);
    feed->next_lsn = next_lsn;
    feed->max_segments = max_segments;
    feed->known = calloc(max_segments > 0 ? max_segments : 1, sizeof(*feed->known));
    feed->rec = malloc(sizeof(*feed->rec));
    cr_buf_init(&feed->block);
    cr_buf_init(&feed->dirty);
    /* The segments a restart mounted are compared at the first round. */
    feed->segments_dirty = true;
    if (feed->known == NULL || feed->rec == NULL) {
        cr_durable_feed_free(feed);
        return CR_ERR_NOMEM;
    }
    return CR_OK;
}

void cr_durable_feed_free(struct cr_durable_feed *feed) {
    if (feed == NULL) return;
    for (uint32_t i = 0; feed->known != NULL && i < feed->max_segments; i++) free(feed->known[i]);
    free(feed->known);
    free(feed->rec);
    cr_buf_free(&feed->block);
    cr_buf_free(&feed->dirty);
    memset(feed, 0, sizeof(*feed));
}

/* The scratch record, cleared of the last one's fields (not its arrays). */
static struct cr_durable_record *rec_start(struct cr_durable_feed *feed,
                                           enum cr_durable_type type) {
    struct cr_durable_record *rec = feed->rec;
    rec->type = type;
    rec->name[0] = rec->endpoint[0] = rec->protocol[0] = rec->tenant[0] = '\0';
    memset(&rec->owner, 0, sizeof(rec->owner));
    rec->base = rec->size = rec->checksum = rec->record_count = 0;
    rec->key_len = rec->replica_count = 0;
    rec->flags = 0;
    rec->file_path[0] = '\0';
    return rec;
}

static void emit(struct cr_durable_feed *feed, struct cr_durable_record *rec) {
    rec->lsn = feed->next_lsn++;
    if (cr_durable_encode(rec, &feed->block) != CR_OK) return; /* the buffer failed: flush says */
    feed->block_last_lsn = rec->lsn;
    feed->records++;
}

void cr_durable_feed_append(struct cr_durable_feed *feed, struct cr_durable_record *rec) {
    assert(feed != NULL && rec != NULL);
    feed->changes++;
    emit(feed, rec);
}

void cr_durable_feed_note(struct cr_durable_feed *feed, const struct cr_store_change *ev) {
    assert(feed != NULL && ev != NULL);
    const char *tenant = ev->tenant != NULL ? ev->tenant : "";
    size_t tn = strnlen(tenant, CR_STORE_NAME_LEN_MAX + 1);
    if (tn > CR_STORE_NAME_LEN_MAX) return; /* the store refuses such tenants */
    feed->changes++;
    if (ev->kind == CR_STORE_CHANGE_REMOVE_ALL) {
        struct cr_durable_record *rec = rec_start(feed, CR_DURABLE_REMOVE_ALL);
        memcpy(rec->tenant, tenant, tn);
        rec->tenant[tn] = '\0';
        emit(feed, rec);
        return;
    }
    if (ev->key == NULL || ev->key_len == 0 || ev->key_len > CR_STORE_KEY_LEN_MAX) return;
    uint8_t head[2 + CR_STORE_NAME_LEN_MAX + 4];
    head[0] = (uint8_t)tn;
    head[1] = (uint8_t)(tn >> 8);
    memcpy(head + 2, tenant, tn);
    memcpy(head + 2 + tn, &ev->key_len, 4);
    cr_buf_append(&feed->dirty, head, 2 + tn + 4);
    cr_buf_append(&feed->dirty, ev->key, ev->key_len);
}

/* ---- segments ------------------------------------------------------------------ */

static bool known_matches(const struct cr_durable_known_segment *k,
                          const struct cr_store_segment_view *v) {
    return k->base == v->base && k->size == v->size &&
           memcmp(k->owner.b, v->owner.b, sizeof(k->owner.b)) == 0 &&
           strcmp(k->name, v->name) == 0 && strcmp(k->endpoint, v->endpoint) == 0 &&
           strcmp(k->protocol, v->protocol) == 0;
}

static void emit_unmount(struct cr_durable_feed *feed, const struct cr_durable_known_segment *k) {
    struct cr_durable_record *rec = rec_start(feed, CR_DURABLE_SEGMENT_UNMOUNT);
    strcpy(rec->name, k->name);
    emit(feed, rec);
}

static void copy_str(char *dst, size_t cap, const char *src) {
    size_t n = strnlen(src != NULL ? src : "", cap - 1);
    memcpy(dst, src != NULL ? src : "", n);
    dst[n] = '\0';
}

/* Mount records for segments new or changed since the last diff, unmount
 * records for those gone. */
static void diff_segments(struct cr_durable_feed *feed, const cr_store *store) {
    feed->segment_epoch++;
    uint32_t cursor = 0;
    struct cr_store_segment_view v;
    while (cr_store_segment_next(store, &cursor, &v)) {
        if (v.segment_id >= feed->max_segments) continue; /* asserted by the store's bound */
        if (strcmp(v.name, feed->volatile_segment) == 0) continue;
        struct cr_durable_known_segment *k = feed->known[v.segment_id];
        if (k != NULL && known_matches(k, &v)) {
            k->epoch = feed->segment_epoch;
            continue;
        }
        if (k != NULL) emit_unmount(feed, k); /* the slot now holds another segment */
        if (k == NULL && (k = malloc(sizeof(*k))) == NULL) {
            feed->failures++;
            continue;
        }
        feed->known[v.segment_id] = k;
        *k = (struct cr_durable_known_segment){.epoch = feed->segment_epoch, .owner = v.owner,
                                                .base = v.base, .size = v.size};
        copy_str(k->name, sizeof(k->name), v.name);
        copy_str(k->endpoint, sizeof(k->endpoint), v.endpoint);
        copy_str(k->protocol, sizeof(k->protocol), v.protocol);
        struct cr_durable_record *rec = rec_start(feed, CR_DURABLE_SEGMENT_MOUNT);
        strcpy(rec->name, k->name);
        strcpy(rec->endpoint, k->endpoint);
        strcpy(rec->protocol, k->protocol);
        rec->owner = k->owner;
        rec->base = k->base;
        rec->size = k->size;
        emit(feed, rec);
    }
    for (uint32_t i = 0; i < feed->max_segments; i++) {
        struct cr_durable_known_segment *k = feed->known[i];
        if (k == NULL || k->epoch == feed->segment_epoch) continue;
        emit_unmount(feed, k);
        free(k);
        feed->known[i] = NULL;
    }
}

/* ---- objects -------------------------------------------------------------------- */

static uint64_t segment_base(struct cr_durable_feed *feed, const cr_store *store,
                             const struct cr_store_replica_desc *d) {
    if (d->segment_id < feed->max_segments && feed->known[d->segment_id] != NULL &&
        strcmp(feed->known[d->segment_id]->name, d->segment_name) == 0)
        return feed->known[d->segment_id]->base;
    struct cr_store_segment_view v;
    return cr_store_segment_find(store, d->segment_name, &v) == CR_OK ? v.base : d->buffer;
}

/* Fills rec (tenant and key set) with a complete object's state; false when
 * none of its replicas is logged (so it is not either). */
static bool object_record(struct cr_durable_feed *feed, const cr_store *store,
                          const struct cr_store_object_view *v, struct cr_durable_record *rec) {
    rec->replica_count = 0;
    for (uint32_t i = 0; v->complete && i < v->replicas.count; i++) {
        const struct cr_store_replica_desc *d = &v->replicas.replicas[i];
        if (d->status != CR_REPLICA_COMPLETE) continue; /* a task's reservation */
        if (d->medium == CR_MEDIUM_DISK) { /* the file outlives every segment */
            struct cr_durable_replica *r = &rec->replicas[rec->replica_count++];
            *r = (struct cr_durable_replica){.medium = CR_MEDIUM_DISK, .size = v->size_bytes};
            copy_str(rec->file_path, sizeof(rec->file_path), d->file_path);
            continue;
        }
        if (strcmp(d->segment_name, feed->volatile_segment) == 0) continue;
        struct cr_durable_replica *r = &rec->replicas[rec->replica_count++];
        r->medium = (uint8_t)d->medium;
        copy_str(r->segment, sizeof(r->segment), d->segment_name);
        if (d->medium == CR_MEDIUM_LOCAL_DISK) {
            r->offset = d->buffer; /* the server's position, not an address */
            r->size = v->size_bytes;
            continue;
        }
        r->offset = d->buffer - segment_base(feed, store, d);
        r->size = v->size_bytes > 0 ? v->size_bytes : 1; /* cr_store_alloc_bytes */
    }
    if (rec->replica_count == 0) return false;
    rec->type = CR_DURABLE_OBJECT_PUT;
    rec->size = v->size_bytes;
    rec->flags = (uint8_t)((v->replicas.has_checksum ? CR_DURABLE_OBJ_CHECKSUM : 0) |
                           (v->soft_pinned ? CR_DURABLE_OBJ_SOFT_PIN : 0) |
                           (v->hard_pinned ? CR_DURABLE_OBJ_HARD_PIN : 0));
    rec->checksum = v->replicas.has_checksum ? v->replicas.checksum : 0;
    rec->owner = v->owner;
    return true;
}

/* The record of one noted key: the object's whole state, or its removal. */
static void emit_object(struct cr_durable_feed *feed, const cr_store *store, uint64_t now_ms,
                        const char *tenant, const char *key, uint32_t key_len) {
    struct cr_durable_record *rec = rec_start(feed, CR_DURABLE_OBJECT_REMOVE);
    struct cr_store_object_view v;
    strcpy(rec->tenant, tenant);
    rec->key_len = key_len;
    memcpy(rec->key, key, key_len);
    bool found = cr_store_object_find(store, tenant, key, key_len, now_ms, &v) == CR_OK;
    if (!found || !object_record(feed, store, &v, rec)) rec->type = CR_DURABLE_OBJECT_REMOVE;
    emit(feed, rec);
}

void cr_durable_feed_snapshot_segments(struct cr_durable_feed *feed, const cr_store *store,
                                       uint64_t lsn, struct cr_buf *out, uint64_t *count) {
    assert(feed != NULL && store != NULL && out != NULL && count != NULL);
    uint32_t cursor = 0;
    struct cr_store_segment_view v;
    while (cr_store_segment_next(store, &cursor, &v)) {
        if (strcmp(v.name, feed->volatile_segment) == 0) continue;
        struct cr_durable_record *rec = rec_start(feed, CR_DURABLE_SEGMENT_MOUNT);
        rec->lsn = lsn;
        copy_str(rec->name, sizeof(rec->name), v.name);
        copy_str(rec->endpoint, sizeof(rec->endpoint), v.endpoint);
        copy_str(rec->protocol, sizeof(rec->protocol), v.protocol);
        rec->owner = v.owner;
        rec->base = v.base;
        rec->size = v.size;
        if (cr_durable_encode(rec, out) == CR_OK) (*count)++;
    }
}

void cr_durable_feed_snapshot_end(struct cr_durable_feed *feed, uint64_t lsn, uint64_t count,
                                  struct cr_buf *out) {
    struct cr_durable_record *rec = rec_start(feed, CR_DURABLE_SNAPSHOT_END);
    rec->lsn = lsn;
    rec->record_count = count;
    (void)cr_durable_encode(rec, out); /* a failed buffer: the journal gets none */
}

bool cr_durable_feed_snapshot_objects(struct cr_durable_feed *feed, const cr_store *store,
                                      uint64_t now_ms, uint64_t lsn, uint32_t *cursor,
                                      size_t limit, struct cr_buf *out, uint64_t *count) {
    assert(feed != NULL && store != NULL && cursor != NULL && out != NULL && count != NULL);
    struct cr_store_object_view views[64];
    size_t seen = 0;
    size_t batch = limit < 64 ? (limit > 0 ? limit : 1) : 64;
    while (seen < limit) {
        size_t n = cr_store_list_objects(store, NULL, NULL, now_ms, cursor, batch, views);
        for (size_t i = 0; i < n; i++) {
            const struct cr_store_object_view *v = &views[i];
            if (!v->complete || v->key_len > CR_STORE_KEY_LEN_MAX) continue;
            struct cr_durable_record *rec = rec_start(feed, CR_DURABLE_OBJECT_PUT);
            rec->lsn = lsn;
            copy_str(rec->tenant, sizeof(rec->tenant), v->tenant);
            rec->key_len = v->key_len;
            memcpy(rec->key, v->key, v->key_len);
            if (object_record(feed, store, v, rec) && cr_durable_encode(rec, out) == CR_OK)
                (*count)++;
        }
        if (n < batch) return true; /* the walk reached the end of the slab */
        seen += n;
    }
    return false;
}

bool cr_durable_feed_flush(struct cr_durable_feed *feed, const cr_store *store, uint64_t now_ms,
                           uint8_t **block, size_t *len, uint64_t *last_lsn) {
    assert(feed != NULL && store != NULL && block != NULL && len != NULL && last_lsn != NULL);
    if (feed->segments_dirty) diff_segments(feed, store);
    feed->segments_dirty = false;
    const uint8_t *p = (const uint8_t *)feed->dirty.data;
    size_t left = cr_buf_ok(&feed->dirty) ? feed->dirty.len : 0;
    char tenant[CR_STORE_NAME_LEN_MAX + 1];
    while (left > 0) {
        size_t tn = (size_t)p[0] | (size_t)p[1] << 8;
        memcpy(tenant, p + 2, tn);
        tenant[tn] = '\0';
        uint32_t key_len;
        memcpy(&key_len, p + 2 + tn, 4);
        const char *key = (const char *)p + 2 + tn + 4;
        emit_object(feed, store, now_ms, tenant, key, key_len);
        size_t used = 2 + tn + 4 + key_len;
        assert(used <= left);
        p += used;
        left -= used;
    }
    bool lost = !cr_buf_ok(&feed->dirty) || !cr_buf_ok(&feed->block);
    if (cr_buf_ok(&feed->dirty) && feed->dirty.data != NULL) {
        feed->dirty.len = 0; /* kept for the next round: no malloc per round */
        feed->dirty.data[0] = '\0';
    } else {
        cr_buf_free(&feed->dirty);
        cr_buf_init(&feed->dirty);
    }
    if (lost) {
        feed->failures++;
        cr_buf_free(&feed->block);
        cr_buf_init(&feed->block);
        return false;
    }
    if (feed->block.len == 0) return false;
    *last_lsn = feed->block_last_lsn;
    *block = (uint8_t *)cr_buf_take(&feed->block, len);
    return true;
}

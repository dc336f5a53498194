/* The replay image (image.h): two chained hash tables of encoded records,
 * segments by name and objects by (tenant, key). */
#include "durable/image.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "crescent/error.h"

/* One record: its table key (a name, or tenant NUL key) and its body. */
struct entry {
    struct entry *next;
    uint64_t hash;
    uint32_t key_len;
    uint32_t body_len;
    uint8_t data[]; /* key_len key bytes, then body_len body bytes */
};

struct table {
    struct entry **buckets;
    uint64_t mask; /* buckets - 1; 0 before the first insert */
    uint64_t count;
};

struct cr_durable_image {
    struct table segments;
    struct table objects;
    uint64_t lsn;
};

struct cr_durable_image *cr_durable_image_create(void) {
    return calloc(1, sizeof(struct cr_durable_image));
}

static void table_free(struct table *t) {
    for (uint64_t i = 0; t->buckets != NULL && i <= t->mask; i++) {
        struct entry *e = t->buckets[i];
        while (e != NULL) {
            struct entry *next = e->next;
            free(e);
            e = next;
        }
    }
    free(t->buckets);
    memset(t, 0, sizeof(*t));
}

void cr_durable_image_destroy(struct cr_durable_image *img) {
    if (img == NULL) return;
    table_free(&img->segments);
    table_free(&img->objects);
    free(img);
}

/* Doubles the buckets at one entry per bucket.  Returns false on no memory
 * (the table is unchanged and still correct, only slower). */
static bool table_grow(struct table *t) {
    if (t->buckets != NULL && t->count < t->mask + 1) return true;
    uint64_t n = t->buckets == NULL ? 1024 : (t->mask + 1) * 2;
    struct entry **b = calloc(n, sizeof(*b));
    if (b == NULL) return t->buckets != NULL;
    for (uint64_t i = 0; t->buckets != NULL && i <= t->mask; i++) {
        struct entry *e = t->buckets[i];
        while (e != NULL) {
            struct entry *next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->mask = n - 1;
    return true;
}

/* The link pointing at the entry with this key, or at the chain's end. */
static struct entry **table_find(const struct table *t, uint64_t hash, const uint8_t *key,
                                 uint32_t key_len) {
    if (t->buckets == NULL) return NULL;
    struct entry **link = &t->buckets[hash & t->mask];
    while (*link != NULL) {
        struct entry *e = *link;
        if (e->hash == hash && e->key_len == key_len && memcmp(e->data, key, key_len) == 0)
            return link;
        link = &e->next;
    }
    return link;
}

/* Inserts or replaces.  Returns CR_OK or CR_ERR_NOMEM (unchanged). */
static int table_put(struct table *t, const uint8_t *key, uint32_t key_len, const uint8_t *body,
                     uint32_t body_len) {
    if (!table_grow(t)) return CR_ERR_NOMEM;
    uint64_t hash = XXH3_64bits(key, key_len);
    struct entry *e = malloc(sizeof(*e) + key_len + body_len);
    if (e == NULL) return CR_ERR_NOMEM;
    e->hash = hash;
    e->key_len = key_len;
    e->body_len = body_len;
    memcpy(e->data, key, key_len);
    memcpy(e->data + key_len, body, body_len);
    struct entry **link = table_find(t, hash, key, key_len);
    if (*link != NULL) {
        e->next = (*link)->next;
        free(*link);
    } else {
        e->next = NULL;
        t->count++;
    }
    *link = e;
    return CR_OK;
}

static void table_remove_link(struct table *t, struct entry **link) {
    struct entry *e = *link;
    *link = e->next;
    free(e);
    t->count--;
}

static void table_remove(struct table *t, const uint8_t *key, uint32_t key_len) {
    struct entry **link = table_find(t, XXH3_64bits(key, key_len), key, key_len);
    if (link != NULL && *link != NULL) table_remove_link(t, link);
}

/* An object's table key: tenant, NUL, key bytes. */
static uint32_t object_key(const char *tenant, const char *key, uint32_t key_len,
                           uint8_t *out) {
    size_t tn = strlen(tenant);
    memcpy(out, tenant, tn);
    out[tn] = 0;
    memcpy(out + tn + 1, key, key_len);
    return (uint32_t)(tn + 1 + key_len);
}

/* Removes every object of `tenant` ("" = all). */
static void remove_all(struct table *t, const char *tenant) {
    size_t tn = strlen(tenant);
    for (uint64_t i = 0; t->buckets != NULL && i <= t->mask; i++) {
        struct entry **link = &t->buckets[i];
        while (*link != NULL) {
            struct entry *e = *link;
            bool match = tn == 0 || (e->key_len > tn && memcmp(e->data, tenant, tn) == 0 &&
                                     e->data[tn] == 0);
            if (match) table_remove_link(t, link);
            else link = &e->next;
        }
    }
}

int cr_durable_image_apply(void *ctx, const struct cr_durable_record *rec, char *err,
                           size_t err_len) {
    struct cr_durable_image *img = ctx;
    assert(img != NULL && rec != NULL);
    static_assert(CR_STORE_NAME_LEN_MAX + 1 + CR_STORE_KEY_LEN_MAX < CR_DURABLE_RECORD_MAX,
                  "object keys fit a record-sized buffer");
    uint8_t key[CR_STORE_NAME_LEN_MAX + 1 + CR_STORE_KEY_LEN_MAX];
    uint32_t key_len = 0;
    int rc = CR_OK;
    struct cr_buf body;
    cr_buf_init(&body);
    switch (rec->type) {
    case CR_DURABLE_SEGMENT_MOUNT:
    case CR_DURABLE_OBJECT_PUT:
    case CR_DURABLE_OBJECT_PUT_TIERED: /* never decoded as such: given back as OBJECT_PUT */
        rc = cr_durable_encode(rec, &body);
        if (rc != CR_OK) break;
        if (rec->type == CR_DURABLE_SEGMENT_MOUNT) {
            rc = table_put(&img->segments, (const uint8_t *)rec->name,
                           (uint32_t)strlen(rec->name),
                           (const uint8_t *)body.data + CR_DURABLE_FRAME_HEADER,
                           (uint32_t)(body.len - CR_DURABLE_FRAME_HEADER));
        } else {
            key_len = object_key(rec->tenant, rec->key, rec->key_len, key);
            rc = table_put(&img->objects, key, key_len,
                           (const uint8_t *)body.data + CR_DURABLE_FRAME_HEADER,
                           (uint32_t)(body.len - CR_DURABLE_FRAME_HEADER));
        }
        break;
    case CR_DURABLE_SEGMENT_UNMOUNT:
        table_remove(&img->segments, (const uint8_t *)rec->name, (uint32_t)strlen(rec->name));
        break;
    case CR_DURABLE_OBJECT_REMOVE:
        key_len = object_key(rec->tenant, rec->key, rec->key_len, key);
        table_remove(&img->objects, key, key_len);
        break;
    case CR_DURABLE_REMOVE_ALL:
        remove_all(&img->objects, rec->tenant);
        break;
    case CR_DURABLE_SNAPSHOT_END:
        break;
    }
    cr_buf_free(&body);
    if (rc != CR_OK) {
        snprintf(err, err_len, "no memory to replay record %llu (%llu objects so far)",
                 (unsigned long long)rec->lsn, (unsigned long long)img->objects.count);
        return rc;
    }
    if (rec->lsn > img->lsn) img->lsn = rec->lsn;
    return CR_OK;
}

uint64_t cr_durable_image_objects(const struct cr_durable_image *img) {
    return img->objects.count;
}

uint32_t cr_durable_image_segments(const struct cr_durable_image *img) {
    return (uint32_t)img->segments.count;
}

uint64_t cr_durable_image_lsn(const struct cr_durable_image *img) { return img->lsn; }

static void decode_entry(const struct entry *e, struct cr_durable_record *out) {
    char why[160];
    int rc = cr_durable_decode(e->data + e->key_len, e->body_len, out, why, sizeof(why));
    assert(rc == CR_OK); /* encoded by this image from a valid record */
    (void)rc;
}

/* The cursor packs bucket (high 40 bits) and position in its chain (low 24:
 * chains are about one entry long; a longer one is walked by position). */
static bool table_next(const struct table *t, uint64_t *cursor, struct cr_durable_record *out) {
    uint64_t bucket = *cursor >> 24, pos = *cursor & 0xffffffu;
    for (; t->buckets != NULL && bucket <= t->mask; bucket++, pos = 0) {
        const struct entry *e = t->buckets[bucket];
        for (uint64_t i = 0; e != NULL && i < pos; i++) e = e->next;
        if (e != NULL) {
            decode_entry(e, out);
            *cursor = bucket << 24 | (pos + 1);
            return true;
        }
    }
    *cursor = bucket << 24;
    return false;
}

bool cr_durable_image_segment_next(const struct cr_durable_image *img, uint64_t *cursor,
                                   struct cr_durable_record *out) {
    assert(img != NULL && cursor != NULL && out != NULL);
    return table_next(&img->segments, cursor, out);
}

bool cr_durable_image_object_next(const struct cr_durable_image *img, uint64_t *cursor,
                                  struct cr_durable_record *out) {
    assert(img != NULL && cursor != NULL && out != NULL);
    return table_next(&img->objects, cursor, out);
}

int cr_durable_image_object_find(const struct cr_durable_image *img, const char *tenant,
                                 const char *key, uint32_t key_len,
                                 struct cr_durable_record *out) {
    assert(img != NULL && tenant != NULL && key != NULL && out != NULL);
    if (strlen(tenant) > CR_STORE_NAME_LEN_MAX || key_len > CR_STORE_KEY_LEN_MAX)
        return CR_ERR_OBJECT_NOT_FOUND;
    uint8_t k[CR_STORE_NAME_LEN_MAX + 1 + CR_STORE_KEY_LEN_MAX];
    uint32_t n = object_key(tenant, key, key_len, k);
    struct entry **link = table_find(&img->objects, XXH3_64bits(k, n), k, n);
    if (link == NULL || *link == NULL) return CR_ERR_OBJECT_NOT_FOUND;
    decode_entry(*link, out);
    return CR_OK;
}

void cr_durable_image_object_get(const struct cr_durable_image *img, uint64_t ref,
                                 struct cr_durable_record *out) {
    assert(img != NULL && out != NULL);
    uint64_t bucket = ref >> 24, pos = ref & 0xffffffu;
    assert(pos > 0 && img->objects.buckets != NULL && bucket <= img->objects.mask);
    const struct entry *e = img->objects.buckets[bucket];
    for (uint64_t i = 1; e != NULL && i < pos; i++) e = e->next;
    assert(e != NULL);
    decode_entry(e, out);
}

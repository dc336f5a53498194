/* The replay image (image.h): two chained hash tables of encoded records,
 * segments by name and objects by (tenant, key).
 *
 * Entries live in an arena of large chunks, not one malloc each: a restart
 * of 10 M objects made 10 M mallocs and as many frees (a tenth of its time,
 * bench/RESULTS.md).  A replacement that fits is written over the entry in
 * place; a removed entry goes on a free list that the next insert of its
 * size or smaller reuses, so a log that keeps rewriting a working set does
 * not grow the arena; the rest is given back when the image is destroyed,
 * right after the restore. */
#include "durable/image.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xxhash.h>

#include "crescent/error.h"

/* One record: its table key (a name, or tenant NUL key) and its body. */
struct entry {
    struct entry *next; /* in its chain; in the free list once removed */
    uint64_t hash;
    uint64_t order_segment; /* objects: XXH3 of the first replica's segment name */
    uint64_t order_offset;  /* ... and its offset (image.h's restore order) */
    /* body_len bytes: in data[] after the key, or a snapshot's record
     * where the image borrowed its bytes (cr_durable_image_borrow) */
    const uint8_t *body;
    uint32_t key_len;
    uint32_t body_len;
    uint32_t room;     /* bytes of data[]: a replacement up to this size fits */
    uint8_t data[];    /* key_len key bytes, then (unless borrowed) the body */
};

struct table {
    struct entry **buckets;
    uint64_t mask; /* buckets - 1; 0 before the first insert */
    uint64_t count;
};

/* A chunk of the arena; entries are carved from its end on. */
struct chunk {
    struct chunk *prev;
    size_t used;
    size_t size;
    _Alignas(8) uint8_t data[];
};

/* Chunks double from 64 KiB (a small image stays small) to 32 MiB. */
#define CHUNK_FIRST (64u << 10)
#define CHUNK_MAX (32u << 20)

/* A snapshot's object is linked into the table LOAD_RING objects after it
 * was copied in: its bucket is prefetched at once and the bucket's first
 * entry half way, so neither miss is waited for (image.h's load). */
#define LOAD_RING 32u

struct cr_durable_image {
    struct table segments;
    struct table objects;
    uint64_t lsn;
    struct chunk *chunks;    /* the newest first */
    struct entry *free_list; /* removed entries, any room */
    struct cr_durable_drain_jobs drain; /* drain jobs (few: kept whole) */
    /* A snapshot's objects on their way into the table (load_push): a ring,
     * the oldest at pending_head. */
    struct entry *pending[LOAD_RING];
    uint32_t pending_head;
    uint32_t pending_count;
    /* A snapshot's bytes the caller keeps until the image is destroyed:
     * records loaded from there are pointed at, not copied. */
    const uint8_t *borrowed;
    size_t borrowed_len;
};

/* Zeroed memory of its own mapping, hinted to 2 MiB pages: an image of
 * 10 M objects is gigabytes, and a 4 KiB page fault each was a tenth of a
 * restart (bench/RESULTS.md).  Its pages are populated at once
 * (MADV_POPULATE_WRITE): every byte of a chunk, the buckets or the order
 * is written soon after, and one call for all of them costs the kernel
 * far less than a fault per 2 MiB page (on a virtual machine, each fault
 * is an exit to the host).  NULL when out of memory. */
static void *big_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: refused where THP is off */
#endif
#ifdef MADV_POPULATE_WRITE
    (void)madvise(p, bytes, MADV_POPULATE_WRITE); /* a hint too: faults do it otherwise */
#endif
    return p;
}

static void big_free(void *p, size_t bytes) {
    if (p != NULL) munmap(p, bytes);
}

struct cr_durable_image *cr_durable_image_create(void) {
    return calloc(1, sizeof(struct cr_durable_image));
}

static void table_free(struct table *t) {
    if (t->buckets != NULL) big_free(t->buckets, (t->mask + 1) * sizeof(*t->buckets));
}

void cr_durable_image_destroy(struct cr_durable_image *img) {
    if (img == NULL) return;
    for (struct chunk *c = img->chunks, *prev; c != NULL; c = prev) {
        prev = c->prev;
        big_free(c, sizeof(*c) + c->size);
    }
    table_free(&img->segments);
    table_free(&img->objects);
    cr_durable_drain_jobs_free(&img->drain);
    free(img);
}

void cr_durable_image_take_drain(struct cr_durable_image *img, struct cr_durable_drain_jobs *out) {
    assert(img != NULL && out != NULL);
    *out = img->drain;
    img->drain.count = 0;
}

/* Room for an entry of `need` data bytes: the free list's head when it is
 * large enough (records of one workload mostly have one size), else carved
 * from the arena.  NULL when out of memory. */
static struct entry *entry_take(struct cr_durable_image *img, uint32_t need) {
    struct entry *e = img->free_list;
    if (e != NULL && e->room >= need) {
        img->free_list = e->next;
        return e;
    }
    size_t bytes = (sizeof(struct entry) + need + 7u) & ~(size_t)7u;
    struct chunk *c = img->chunks;
    if (c == NULL || c->size - c->used < bytes) {
        size_t size = c == NULL ? CHUNK_FIRST : c->size * 2 > CHUNK_MAX ? CHUNK_MAX : c->size * 2;
        if (size < bytes) size = bytes;
        struct chunk *fresh = big_alloc(sizeof(*fresh) + size);
        if (fresh == NULL) return NULL;
        *fresh = (struct chunk){.prev = c, .used = 0, .size = size};
        img->chunks = c = fresh;
    }
    e = (struct entry *)(c->data + c->used);
    c->used += bytes;
    e->room = (uint32_t)(bytes - sizeof(struct entry));
    return e;
}

static void entry_give(struct cr_durable_image *img, struct entry *e) {
    e->next = img->free_list;
    img->free_list = e;
}

/* Sizes the buckets for n entries at one per bucket.  Returns false on no
 * memory (the table is unchanged and still correct, only slower). */
static bool table_size_for(struct table *t, uint64_t n) {
    uint64_t want = 1024;
    while (want < n) want *= 2;
    if (t->buckets != NULL && want <= t->mask + 1) return true;
    struct entry **b = big_alloc(want * sizeof(*b));
    if (b == NULL) return t->buckets != NULL;
    for (uint64_t i = 0; t->buckets != NULL && i <= t->mask; i++) {
        struct entry *e = t->buckets[i];
        while (e != NULL) {
            struct entry *next = e->next;
            e->next = b[e->hash & (want - 1)];
            b[e->hash & (want - 1)] = e;
            e = next;
        }
    }
    table_free(t);
    t->buckets = b;
    t->mask = want - 1;
    return true;
}

/* Doubles the buckets at one entry per bucket. */
static bool table_grow(struct table *t) {
    if (t->buckets != NULL && t->count < t->mask + 1) return true;
    return table_size_for(t, t->buckets == NULL ? 1024 : (t->mask + 1) * 2);
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
static int table_put(struct cr_durable_image *img, struct table *t, const uint8_t *key,
                     uint32_t key_len, const uint8_t *body, uint32_t body_len,
                     uint64_t order_segment, uint64_t order_offset) {
    if (!table_grow(t)) return CR_ERR_NOMEM;
    uint64_t hash = XXH3_64bits(key, key_len);
    struct entry **link = table_find(t, hash, key, key_len);
    struct entry *e = *link;
    uint32_t need = key_len + body_len;
    if (e == NULL || e->room < need) {
        struct entry *fresh = entry_take(img, need);
        if (fresh == NULL) return CR_ERR_NOMEM;
        if (e != NULL) {
            fresh->next = e->next;
            entry_give(img, e);
        } else {
            fresh->next = NULL;
            t->count++;
        }
        *link = e = fresh;
        e->hash = hash;
        e->key_len = key_len;
        memcpy(e->data, key, key_len);
    }
    e->body_len = body_len;
    e->order_segment = order_segment;
    e->order_offset = order_offset;
    memcpy(e->data + key_len, body, body_len);
    e->body = e->data + key_len;
    return CR_OK;
}

static void table_remove_link(struct cr_durable_image *img, struct table *t,
                              struct entry **link) {
    struct entry *e = *link;
    *link = e->next;
    entry_give(img, e);
    t->count--;
}

static void table_remove(struct cr_durable_image *img, struct table *t, const uint8_t *key,
                         uint32_t key_len) {
    struct entry **link = table_find(t, XXH3_64bits(key, key_len), key, key_len);
    if (link != NULL && *link != NULL) table_remove_link(img, t, link);
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
static void remove_all(struct cr_durable_image *img, const char *tenant) {
    struct table *t = &img->objects;
    size_t tn = strlen(tenant);
    for (uint64_t i = 0; t->buckets != NULL && i <= t->mask; i++) {
        struct entry **link = &t->buckets[i];
        while (*link != NULL) {
            struct entry *e = *link;
            bool match = tn == 0 || (e->key_len > tn && memcmp(e->data, tenant, tn) == 0 &&
                                     e->data[tn] == 0);
            if (match) table_remove_link(img, t, link);
            else link = &e->next;
        }
    }
}

/* Where a restore claims the object's first replica (image.h). */
static void order_of(const struct cr_durable_record *rec, uint64_t *segment, uint64_t *offset) {
    const struct cr_durable_replica *r = &rec->replicas[0];
    bool memory = rec->replica_count > 0 && r->medium == CR_MEDIUM_MEMORY;
    *segment = memory ? XXH3_64bits(r->segment, strlen(r->segment)) : 0;
    *offset = memory ? r->offset : 0;
}

static int put_record(struct cr_durable_image *img, const struct cr_durable_record *rec,
                      const uint8_t *body, uint32_t body_len) {
    if (rec->type == CR_DURABLE_SEGMENT_MOUNT)
        return table_put(img, &img->segments, (const uint8_t *)rec->name,
                         (uint32_t)strlen(rec->name), body, body_len, 0, 0);
    uint8_t key[CR_STORE_NAME_LEN_MAX + 1 + CR_STORE_KEY_LEN_MAX];
    uint32_t key_len = object_key(rec->tenant, rec->key, rec->key_len, key);
    uint64_t segment, offset;
    order_of(rec, &segment, &offset);
    return table_put(img, &img->objects, key, key_len, body, body_len, segment, offset);
}

int cr_durable_image_apply_body(void *ctx, const struct cr_durable_record *rec,
                                const uint8_t *body, uint32_t body_len, char *err,
                                size_t err_len) {
    struct cr_durable_image *img = ctx;
    assert(img != NULL && rec != NULL);
    assert(img->pending_count == 0); /* a load is ended before the log's records */
    static_assert(CR_STORE_NAME_LEN_MAX + 1 + CR_STORE_KEY_LEN_MAX < CR_DURABLE_RECORD_MAX,
                  "object keys fit a record-sized buffer");
    int rc = CR_OK;
    struct cr_buf encoded;
    cr_buf_init(&encoded);
    switch (rec->type) {
    case CR_DURABLE_SEGMENT_MOUNT:
    case CR_DURABLE_OBJECT_PUT:
    case CR_DURABLE_OBJECT_PUT_TIERED: /* never decoded as such: given back as OBJECT_PUT */
        if (body == NULL) { /* a record made here, not read: its bytes are encoded */
            rc = cr_durable_encode(rec, &encoded);
            if (rc != CR_OK) break;
            body = (const uint8_t *)encoded.data + CR_DURABLE_FRAME_HEADER;
            body_len = (uint32_t)(encoded.len - CR_DURABLE_FRAME_HEADER);
        }
        rc = put_record(img, rec, body, body_len);
        break;
    case CR_DURABLE_SEGMENT_UNMOUNT:
        table_remove(img, &img->segments, (const uint8_t *)rec->name,
                     (uint32_t)strlen(rec->name));
        break;
    case CR_DURABLE_OBJECT_REMOVE: {
        uint8_t key[CR_STORE_NAME_LEN_MAX + 1 + CR_STORE_KEY_LEN_MAX];
        uint32_t key_len = object_key(rec->tenant, rec->key, rec->key_len, key);
        table_remove(img, &img->objects, key, key_len);
        break;
    }
    case CR_DURABLE_REMOVE_ALL:
        remove_all(img, rec->tenant);
        break;
    case CR_DURABLE_SNAPSHOT_END:
        break;
    case CR_DURABLE_DRAIN_JOB:
        if (cr_durable_drain_jobs_put(&img->drain, &rec->drain) != 0) rc = CR_ERR_NOMEM;
        break;
    }
    cr_buf_free(&encoded);
    if (rc != CR_OK) {
        snprintf(err, err_len, "no memory to replay record %llu (%llu objects so far)",
                 (unsigned long long)rec->lsn, (unsigned long long)img->objects.count);
        return rc;
    }
    if (rec->lsn > img->lsn) img->lsn = rec->lsn;
    return CR_OK;
}

/* ---- snapshot load ------------------------------------------------------------ */

/* Links e into the objects: it replaces an entry of the same key (a
 * snapshot holds each key once; a forged one with a key twice keeps the
 * later, as cr_durable_image_apply_body does). */
static int table_link(struct cr_durable_image *img, struct table *t, struct entry *e) {
    if (!table_grow(t)) return CR_ERR_NOMEM;
    struct entry **link = table_find(t, e->hash, e->data, e->key_len);
    struct entry *old = *link;
    if (old != NULL) {
        e->next = old->next;
        entry_give(img, old);
    } else {
        e->next = NULL;
        t->count++;
    }
    *link = e;
    return CR_OK;
}

static int link_oldest(struct cr_durable_image *img) {
    assert(img->pending_count > 0);
    struct entry *e = img->pending[img->pending_head];
    img->pending_head = (img->pending_head + 1) & (LOAD_RING - 1);
    img->pending_count--;
    return table_link(img, &img->objects, e);
}

/* Queues e, links the entry LOAD_RING before it, and starts loading what
 * the entries after that will probe: e's bucket now, and the first entry
 * of the bucket of the one LOAD_RING/2 before e (its bucket is in cache by
 * then).  A bucket that changes meanwhile only wastes a prefetch. */
static int load_push(struct cr_durable_image *img, struct entry *e) {
    const struct table *t = &img->objects;
    if (img->pending_count == LOAD_RING) {
        int rc = link_oldest(img);
        if (rc != CR_OK) return rc;
    }
    uint32_t at = (img->pending_head + img->pending_count) & (LOAD_RING - 1);
    img->pending[at] = e;
    img->pending_count++;
    if (t->buckets == NULL) return CR_OK;
    __builtin_prefetch(&t->buckets[e->hash & t->mask], 1);
    if (img->pending_count > LOAD_RING / 2) {
        const struct entry *mid = img->pending[(at - LOAD_RING / 2) & (LOAD_RING - 1)];
        const struct entry *head = t->buckets[mid->hash & t->mask];
        if (head != NULL) __builtin_prefetch(head);
    }
    return CR_OK;
}

static int load_flush(struct cr_durable_image *img) {
    while (img->pending_count > 0) {
        int rc = link_oldest(img);
        if (rc != CR_OK) return rc;
    }
    return CR_OK;
}

static int replay_nomem(const struct cr_durable_image *img, const struct cr_durable_record *rec,
                        char *err, size_t err_len) {
    snprintf(err, err_len, "no memory to replay record %llu (%llu objects so far)",
             (unsigned long long)rec->lsn, (unsigned long long)img->objects.count);
    return CR_ERR_NOMEM;
}

int cr_durable_image_load_body(void *ctx, const struct cr_durable_record *rec,
                               const uint8_t *body, uint32_t body_len, char *err,
                               size_t err_len) {
    struct cr_durable_image *img = ctx;
    assert(img != NULL && rec != NULL);
    bool object = body != NULL && (rec->type == CR_DURABLE_OBJECT_PUT ||
                                   rec->type == CR_DURABLE_OBJECT_PUT_TIERED);
    if (!object) { /* in order with the objects before it */
        if (load_flush(img) != CR_OK) return replay_nomem(img, rec, err, err_len);
        return cr_durable_image_apply_body(img, rec, body, body_len, err, err_len);
    }
    uint8_t key[CR_STORE_NAME_LEN_MAX + 1 + CR_STORE_KEY_LEN_MAX];
    uint32_t key_len = object_key(rec->tenant, rec->key, rec->key_len, key);
    uintptr_t from = (uintptr_t)img->borrowed, at = (uintptr_t)body;
    bool borrowed = img->borrowed != NULL && at >= from && at - from <= img->borrowed_len &&
                    body_len <= img->borrowed_len - (at - from);
    struct entry *e = entry_take(img, key_len + (borrowed ? 0 : body_len));
    if (e == NULL) return replay_nomem(img, rec, err, err_len);
    e->hash = XXH3_64bits(key, key_len);
    e->key_len = key_len;
    e->body_len = body_len;
    order_of(rec, &e->order_segment, &e->order_offset);
    memcpy(e->data, key, key_len);
    if (borrowed) {
        e->body = body;
    } else {
        memcpy(e->data + key_len, body, body_len);
        e->body = e->data + key_len;
    }
    if (load_push(img, e) != CR_OK) return replay_nomem(img, rec, err, err_len);
    if (rec->lsn > img->lsn) img->lsn = rec->lsn;
    return CR_OK;
}

int cr_durable_image_load_end(struct cr_durable_image *img, char *err, size_t err_len) {
    assert(img != NULL);
    if (load_flush(img) == CR_OK) return CR_OK;
    snprintf(err, err_len, "no memory to index the snapshot's objects (%llu so far)",
             (unsigned long long)img->objects.count);
    return CR_ERR_NOMEM;
}

int cr_durable_image_apply(void *img, const struct cr_durable_record *rec, char *err,
                           size_t err_len) {
    return cr_durable_image_apply_body(img, rec, NULL, 0, err, err_len);
}

void cr_durable_image_borrow(struct cr_durable_image *img, const uint8_t *data, size_t len) {
    assert(img != NULL && data != NULL);
    img->borrowed = data;
    img->borrowed_len = len;
}

void cr_durable_image_reserve(struct cr_durable_image *img, uint64_t objects) {
    assert(img != NULL);
    (void)table_size_for(&img->objects, objects); /* a hint: growing later works too */
}

uint64_t cr_durable_image_objects(const struct cr_durable_image *img) {
    assert(img->pending_count == 0);
    return img->objects.count;
}

uint64_t cr_durable_image_arena_bytes(const struct cr_durable_image *img) {
    uint64_t n = 0;
    for (const struct chunk *c = img->chunks; c != NULL; c = c->prev) n += c->used;
    return n;
}

uint32_t cr_durable_image_segments(const struct cr_durable_image *img) {
    return (uint32_t)img->segments.count;
}

uint64_t cr_durable_image_lsn(const struct cr_durable_image *img) { return img->lsn; }

static void decode_entry(const struct entry *e, struct cr_durable_record *out) {
    char why[160];
    int rc = cr_durable_decode(e->body, e->body_len, out, why, sizeof(why));
    assert(rc == CR_OK); /* checked when read, or encoded here from a valid record */
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
    assert(img->pending_count == 0);
    return table_next(&img->objects, cursor, out);
}

int cr_durable_image_object_find(const struct cr_durable_image *img, const char *tenant,
                                 const char *key, uint32_t key_len,
                                 struct cr_durable_record *out) {
    assert(img != NULL && tenant != NULL && key != NULL && out != NULL);
    assert(img->pending_count == 0);
    if (strlen(tenant) > CR_STORE_NAME_LEN_MAX || key_len > CR_STORE_KEY_LEN_MAX)
        return CR_ERR_OBJECT_NOT_FOUND;
    uint8_t k[CR_STORE_NAME_LEN_MAX + 1 + CR_STORE_KEY_LEN_MAX];
    uint32_t n = object_key(tenant, key, key_len, k);
    struct entry **link = table_find(&img->objects, XXH3_64bits(k, n), k, n);
    if (link == NULL || *link == NULL) return CR_ERR_OBJECT_NOT_FOUND;
    decode_entry(*link, out);
    return CR_OK;
}

/* ---- restore order ------------------------------------------------------------ */

static bool ref_less(const struct cr_durable_image_ref *a, const struct cr_durable_image_ref *b) {
    return a->segment != b->segment ? a->segment < b->segment : a->offset < b->offset;
}

/* In-place LSD radix sort would need a second array as large; an
 * introsort-free quicksort on the two keys (median of three, insertion
 * sort for short runs) is as fast as qsort without its indirect calls. */
static void sort_refs(struct cr_durable_image_ref *v, uint64_t n) {
    while (n > 16) {
        struct cr_durable_image_ref *a = &v[0], *b = &v[n / 2], *c = &v[n - 1], pivot;
        if (ref_less(b, a)) { struct cr_durable_image_ref t = *a; *a = *b; *b = t; }
        if (ref_less(c, b)) { struct cr_durable_image_ref t = *b; *b = *c; *c = t; }
        if (ref_less(b, a)) { struct cr_durable_image_ref t = *a; *a = *b; *b = t; }
        pivot = *b;
        uint64_t i = 0, j = n - 1;
        for (;;) {
            while (ref_less(&v[i], &pivot)) i++;
            while (ref_less(&pivot, &v[j])) j--;
            if (i >= j) break;
            struct cr_durable_image_ref t = v[i];
            v[i] = v[j];
            v[j] = t;
            i++;
            j--;
        }
        /* Recurse into the smaller part, loop on the larger: log n depth. */
        uint64_t left = j + 1;
        if (left < n - left) {
            sort_refs(v, left);
            v += left;
            n -= left;
        } else {
            sort_refs(v + left, n - left);
            n = left;
        }
    }
    for (uint64_t i = 1; i < n; i++) {
        struct cr_durable_image_ref t = v[i];
        uint64_t j = i;
        for (; j > 0 && ref_less(&t, &v[j - 1]); j--) v[j] = v[j - 1];
        v[j] = t;
    }
}

int cr_durable_image_restore_order(const struct cr_durable_image *img,
                                   struct cr_durable_image_ref **out, uint64_t *count) {
    assert(img != NULL && out != NULL && count != NULL);
    assert(img->pending_count == 0);
    const struct table *t = &img->objects;
    struct cr_durable_image_ref *v = big_alloc((t->count > 0 ? t->count : 1) * sizeof(*v));
    *out = v;
    *count = 0;
    if (v == NULL) return CR_ERR_NOMEM;
    uint64_t n = 0;
    for (uint64_t i = 0; t->buckets != NULL && i <= t->mask; i++)
        for (const struct entry *e = t->buckets[i]; e != NULL; e = e->next)
            v[n++] = (struct cr_durable_image_ref){e->order_segment, e->order_offset, e};
    assert(n == t->count);
    sort_refs(v, n);
    *count = n;
    return CR_OK;
}

void cr_durable_image_order_free(struct cr_durable_image_ref *refs, uint64_t count) {
    big_free(refs, (count > 0 ? count : 1) * sizeof(*refs));
}

void cr_durable_image_ref_prefetch(const struct cr_durable_image_ref *ref) {
    const char *e = ref->entry;
    __builtin_prefetch(e);
    __builtin_prefetch(e + 64);
    __builtin_prefetch(e + 128);
}

void cr_durable_image_ref_key(const struct cr_durable_image_ref *ref, const char **tenant,
                              const char **key, uint32_t *key_len) {
    assert(ref != NULL && ref->entry != NULL && tenant != NULL && key != NULL);
    const struct entry *e = ref->entry;
    size_t tn = strnlen((const char *)e->data, e->key_len);
    assert(tn < e->key_len); /* object_key wrote tenant, NUL, key */
    *tenant = (const char *)e->data;
    *key = (const char *)e->data + tn + 1;
    *key_len = e->key_len - (uint32_t)tn - 1;
}

void cr_durable_image_ref_decode(const struct cr_durable_image_ref *ref,
                                 struct cr_durable_record *out) {
    assert(ref != NULL && ref->entry != NULL && out != NULL);
    decode_entry(ref->entry, out);
}

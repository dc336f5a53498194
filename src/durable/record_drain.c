/* The DRAIN_JOB record's payload and the replay's set of jobs
 * (record_drain.h).  The decoder's input may be damaged: every length is
 * checked against what is left before it is read. */
#include "durable/record_drain.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/le.h"
#include "core/store.h"

#define FIXED_BYTES (8 + 8 + 1 + 4 + 8 * 5 + 1 + 1)

void cr_durable_drain_clear(struct cr_durable_drain *d) {
    assert(d != NULL);
    size_t head = offsetof(struct cr_durable_drain, names);
    memset(d, 0, head);
    d->names[0] = '\0';
    d->message[0] = '\0';
}

bool cr_durable_drain_add(struct cr_durable_drain *d, const char *name, bool target) {
    assert(d != NULL && name != NULL);
    size_t n = strlen(name);
    uint32_t *count = target ? &d->target_count : &d->segment_count;
    if (!target && d->target_count > 0) return false; /* segments first */
    if (n == 0 || n > CR_STORE_NAME_LEN_MAX || *count >= CR_DURABLE_DRAIN_SEGMENTS_MAX ||
        n + 1 > CR_DURABLE_DRAIN_NAMES_MAX - d->names_len)
        return false;
    memcpy(d->names + d->names_len, name, n + 1);
    d->names_len += (uint32_t)n + 1;
    (*count)++;
    return true;
}

const char *cr_durable_drain_next(const struct cr_durable_drain *d, uint32_t *cursor) {
    assert(d != NULL && cursor != NULL);
    if (*cursor >= d->names_len) return NULL;
    const char *name = d->names + *cursor;
    *cursor += (uint32_t)strlen(name) + 1;
    return name;
}

size_t cr_durable_drain_payload_size(const struct cr_durable_drain *d) {
    /* Each name: its bytes and a u16 length where the buffer has its NUL. */
    return FIXED_BYTES + d->names_len + d->segment_count + d->target_count + 2 +
           strlen(d->message);
}

static void put_u64(uint8_t **p, uint64_t v) {
    cr_le_put_u64(*p, v);
    *p += 8;
}

static void put_str(uint8_t **p, const char *s, size_t n) {
    cr_le_put_u16(*p, (uint16_t)n);
    if (n > 0) memcpy(*p + 2, s, n);
    *p += 2 + n;
}

void cr_durable_drain_encode(const struct cr_durable_drain *d, uint8_t *p) {
    assert(d != NULL && p != NULL);
    assert(d->segment_count <= CR_DURABLE_DRAIN_SEGMENTS_MAX &&
           d->target_count <= CR_DURABLE_DRAIN_SEGMENTS_MAX);
    assert(strlen(d->message) <= CR_DURABLE_DRAIN_MESSAGE_MAX);
    put_u64(&p, d->id_first);
    put_u64(&p, d->id_second);
    *p++ = d->status;
    cr_le_put_u32(p, d->max_concurrency);
    p += 4;
    put_u64(&p, d->created_wall_ms);
    put_u64(&p, d->updated_wall_ms);
    put_u64(&p, d->succeeded);
    put_u64(&p, d->failed);
    put_u64(&p, d->migrated_bytes);
    *p++ = (uint8_t)d->segment_count;
    *p++ = (uint8_t)d->target_count;
    uint32_t cursor = 0;
    for (const char *name; (name = cr_durable_drain_next(d, &cursor)) != NULL;)
        put_str(&p, name, strlen(name));
    put_str(&p, d->message, strlen(d->message));
}

/* ---- decoding ------------------------------------------------------------ */

struct rd {
    const uint8_t *p;
    size_t left;
};

static bool take(struct rd *r, size_t n) {
    if (r->left < n) return false;
    r->left -= n;
    return true;
}

static uint64_t u64_at(struct rd *r) {
    uint64_t v = cr_le_get_u64(r->p);
    r->p += 8;
    return v;
}

/* A u16-length string of at most max bytes without NUL: its bytes and
 * length, or NULL. */
static const uint8_t *take_str(struct rd *r, size_t max, size_t *n) {
    if (!take(r, 2)) return NULL;
    *n = cr_le_get_u16(r->p);
    r->p += 2;
    if (*n > max || !take(r, *n)) return NULL;
    const uint8_t *s = r->p;
    r->p += *n;
    return memchr(s, '\0', *n) == NULL ? s : NULL;
}

static bool among(const struct cr_durable_drain *d, uint32_t count, const char *name) {
    uint32_t cursor = 0;
    for (uint32_t i = 0; i < count; i++)
        if (strcmp(cr_durable_drain_next(d, &cursor), name) == 0) return true;
    return false;
}

static const char *take_names(struct rd *r, struct cr_durable_drain *d, uint32_t segments,
                              uint32_t targets) {
    for (uint32_t i = 0; i < segments + targets; i++) {
        bool target = i >= segments;
        size_t n;
        const uint8_t *s = take_str(r, CR_STORE_NAME_LEN_MAX, &n);
        if (s == NULL || n == 0) return target ? "target name" : "segment name";
        if (n + 1 > CR_DURABLE_DRAIN_NAMES_MAX - d->names_len) return "names (too many bytes)";
        char *at = d->names + d->names_len;
        memcpy(at, s, n);
        at[n] = '\0';
        if (among(d, d->segment_count, at))
            return target ? "target (one of the segments drained)" : "segment (named twice)";
        d->names_len += (uint32_t)n + 1;
        (*(target ? &d->target_count : &d->segment_count))++;
    }
    return NULL;
}

const char *cr_durable_drain_decode(const uint8_t *p, size_t len, struct cr_durable_drain *d) {
    assert((p != NULL || len == 0) && d != NULL);
    cr_durable_drain_clear(d);
    struct rd r = {.p = p, .left = len};
    if (!take(&r, FIXED_BYTES)) return "drain job (cut short)";
    d->id_first = u64_at(&r);
    d->id_second = u64_at(&r);
    d->status = *r.p++;
    d->max_concurrency = cr_le_get_u32(r.p);
    r.p += 4;
    d->created_wall_ms = u64_at(&r);
    d->updated_wall_ms = u64_at(&r);
    d->succeeded = u64_at(&r);
    d->failed = u64_at(&r);
    d->migrated_bytes = u64_at(&r);
    uint32_t segments = *r.p++, targets = *r.p++;
    if (d->status > CR_DURABLE_DRAIN_STATUS_MAX) return "drain job status";
    if (d->max_concurrency == 0 || d->max_concurrency > CR_DURABLE_DRAIN_CONCURRENCY_MAX)
        return "drain job concurrency";
    if (segments == 0 || segments > CR_DURABLE_DRAIN_SEGMENTS_MAX ||
        targets > CR_DURABLE_DRAIN_SEGMENTS_MAX)
        return "drain job segment or target count";
    const char *bad = take_names(&r, d, segments, targets);
    if (bad != NULL) return bad;
    size_t n;
    const uint8_t *m = take_str(&r, CR_DURABLE_DRAIN_MESSAGE_MAX, &n);
    if (m == NULL) return "drain job message";
    memcpy(d->message, m, n);
    d->message[n] = '\0';
    return r.left == 0 ? NULL : "record length (bytes left over)";
}

/* ---- the replay's jobs --------------------------------------------------- */

static bool finished(const struct cr_durable_drain *d) { return d->status >= 3; }

int cr_durable_drain_jobs_put(struct cr_durable_drain_jobs *jobs,
                              const struct cr_durable_drain *d) {
    assert(jobs != NULL && d != NULL);
    for (uint32_t i = 0; i < jobs->count; i++) {
        struct cr_durable_drain *j = jobs->at[i];
        if (j->id_first == d->id_first && j->id_second == d->id_second) {
            memcpy(j, d, sizeof(*j));
            return 0;
        }
    }
    struct cr_durable_drain *copy = malloc(sizeof(*copy));
    if (copy == NULL) return -1;
    memcpy(copy, d, sizeof(*copy));
    if (jobs->count == CR_DURABLE_DRAIN_JOBS_MAX) {
        uint32_t drop = 0;
        for (uint32_t i = 0; i < jobs->count; i++)
            if (finished(jobs->at[i])) {
                drop = i;
                break;
            }
        free(jobs->at[drop]);
        memmove(&jobs->at[drop], &jobs->at[drop + 1],
                (jobs->count - drop - 1) * sizeof(jobs->at[0]));
        jobs->count--;
    }
    jobs->at[jobs->count++] = copy;
    return 0;
}

void cr_durable_drain_jobs_free(struct cr_durable_drain_jobs *jobs) {
    if (jobs == NULL) return;
    for (uint32_t i = 0; i < jobs->count; i++) free(jobs->at[i]);
    jobs->count = 0;
}

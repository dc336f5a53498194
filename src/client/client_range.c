/* Byte ranges of objects whose replica lists the caller holds: the writes
 * of a put made in parts and ranged reads (include/crescent/client.h, "byte
 * ranges").  Built on client_data.c's window ops: every range's first
 * attempt is queued at once and drained together; a failed read moves to the
 * object's next replica in a further round. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/client_internal.h"

#define ORDER_MAX 16u /* replicas tried per read (the master lists at most 8) */

struct range_state {
    uint64_t object_len;
    size_t order[ORDER_MAX];
    size_t ranked, tried;
    struct attempt attempt;  /* reads: the replica being tried */
    bool active;
};

/* The window's checks: a list with a complete replica and the window inside
 * its object.  Sets r->status and returns false when it fails. */
static bool range_check(cr_client *c, struct cr_range *r, struct range_state *st, bool write) {
    const struct cr_replica_list *list = r->list;
    r->status = CR_ERR_INVALID_PARAMS;
    if (list == NULL || list->count == 0 || (r->buf == NULL && r->len > 0)) return false;
    st->object_len = cr_client_list_bytes(list);
    if (r->offset > st->object_len || r->len > st->object_len - r->offset) return false;
    if (!write) {
        st->ranked = cr_client_rank_replicas(c, list, st->order);
        if (st->ranked == 0) return false;
    }
    r->status = CR_OK;
    return true;
}

/* The first failing range's status, with a message naming it. */
static int first_failure(cr_client *c, const struct cr_range *ranges, size_t count,
                         const struct range_state *st, const char *verb) {
    for (size_t i = 0; i < count; i++) {
        if (ranges[i].status == CR_OK) continue;
        const struct cr_range *r = &ranges[i];
        const char *why = st[i].attempt.status != CR_OK ? st[i].attempt.why
                          : r->status == CR_ERR_INVALID_PARAMS
                              ? "outside the object, or no complete replica"
                              : cr_strerror(r->status);
        return cr_client_fail(c, r->status, "%s of range %zu (bytes %llu..+%zu of %llu): %s",
                              verb, i, (unsigned long long)r->offset, r->len,
                              (unsigned long long)st[i].object_len, why);
    }
    return CR_OK;
}

static struct range_state *states(cr_client *c, size_t count) {
    struct range_state *st = calloc(count > 0 ? count : 1, sizeof(*st));
    if (st == NULL) cr_client_fail(c, CR_ERR_NOMEM, "no memory for %zu ranges", count);
    return st;
}

int cr_client_write_ranges(cr_client *c, struct cr_range *ranges, size_t count) {
    assert(c != NULL && (ranges != NULL || count == 0));
    int rc = cr_client_data_open(c);
    if (rc != CR_OK) return rc;
    struct range_state *st = states(c, count);
    if (st == NULL) return CR_ERR_NOMEM;
    /* One attempt per replica of each range: all must land. */
    size_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += range_check(c, &ranges[i], &st[i], true) ? ranges[i].list->count : 0;
    /* (only memory replicas are written: a put's list has no other kind) */
    struct attempt *attempts = calloc(total > 0 ? total : 1, sizeof(*attempts));
    if (attempts == NULL) {
        free(st);
        return cr_client_fail(c, CR_ERR_NOMEM, "no memory for %zu writes", total);
    }
    struct attempt *a = attempts;
    for (size_t i = 0; i < count; i++) {
        struct cr_range *r = &ranges[i];
        if (r->status != CR_OK) continue;
        for (size_t k = 0; k < r->list->count; k++, a++)
            if (r->list->replicas[k].medium == CR_MEDIUM_MEMORY)
                cr_client_submit_window(c, CR_XFER_WRITE, &r->list->replicas[k],
                                        st[i].object_len, r->offset, r->buf, r->len, a);
    }
    cr_client_drain(c);
    a = attempts;
    for (size_t i = 0; i < count; i++) {
        struct cr_range *r = &ranges[i];
        if (r->status != CR_OK) continue;
        for (size_t k = 0; k < r->list->count; k++, a++)
            if (a->status != CR_OK && r->status == CR_OK) {
                r->status = a->status;
                st[i].attempt = *a;
            }
    }
    rc = first_failure(c, ranges, count, st, "write");
    free(attempts);
    free(st);
    return rc;
}

/* Starts range i's next replica; false when none is left. */
static bool read_next(cr_client *c, struct cr_range *r, struct range_state *st) {
    st->active = st->tried < st->ranked;
    if (st->active)
        cr_client_submit_window(c, CR_XFER_READ, &r->list->replicas[st->order[st->tried++]],
                                st->object_len, r->offset, r->buf, r->len, &st->attempt);
    return st->active;
}

int cr_client_read_ranges(cr_client *c, struct cr_range *ranges, size_t count) {
    assert(c != NULL && (ranges != NULL || count == 0));
    int rc = cr_client_data_open(c);
    if (rc != CR_OK) return rc;
    struct range_state *st = states(c, count);
    if (st == NULL) return CR_ERR_NOMEM;
    for (size_t i = 0; i < count; i++)
        if (range_check(c, &ranges[i], &st[i], false)) read_next(c, &ranges[i], &st[i]);
    for (bool again = true; again;) {
        cr_client_drain(c);
        again = false;
        for (size_t i = 0; i < count; i++) {
            if (!st[i].active) continue;
            st[i].active = false;
            if (st[i].attempt.status == CR_OK) continue; /* read */
            ranges[i].status = st[i].attempt.status;    /* the latest failure */
            if (read_next(c, &ranges[i], &st[i])) {
                ranges[i].status = CR_OK;
                again = true;
            }
        }
    }
    rc = first_failure(c, ranges, count, st, "read");
    free(st);
    return rc;
}

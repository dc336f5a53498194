/* libcrescent's table of pipelined requests awaiting their replies.
 *
 * Every submitted request gets exactly one completion: its reply, or
 * CR_ERR_TIMEOUT once the client's timeout has passed without one (crescentd
 * restarted, or could not send the reply).  A reply that turns up after that
 * finds no entry and is dropped, so no request is counted twice and a caller
 * waiting for cr_client_in_flight() to reach 0 always gets there.
 *
 * The table is a ring in submission order.  Request ids grow with the
 * sequence number, so the ring is sorted by id and a reply is found by binary
 * search (the head first: replies mostly come back in order).  An entry
 * answered out of order is marked done and leaves when it reaches the head,
 * so the head is always the oldest unanswered request: the first to expire. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

#include "client/client_internal.h"

#define PENDING_INITIAL 64u
#define NOT_FOUND SIZE_MAX

static struct cr_client_pending *at(const cr_client *c, size_t i) {
    assert(i < c->pending_count);
    return &c->pending[(c->pending_head + i) % c->pending_capacity];
}

int cr_client_pending_reserve(cr_client *c) {
    assert(c != NULL);
    if (c->pending_count < c->pending_capacity) return CR_OK;
    size_t capacity = c->pending_capacity ? c->pending_capacity * 2 : PENDING_INITIAL;
    struct cr_client_pending *grown = malloc(capacity * sizeof(*grown));
    if (grown == NULL)
        return cr_client_fail(c, CR_ERR_NOMEM, "out of memory tracking %zu pipelined requests",
                              c->pending_count + 1);
    for (size_t i = 0; i < c->pending_count; i++) grown[i] = *at(c, i);
    free(c->pending);
    c->pending = grown;
    c->pending_capacity = capacity;
    c->pending_head = 0;
    return CR_OK;
}

void cr_client_pending_add(cr_client *c, uint64_t id, int64_t deadline_ms) {
    assert(c != NULL && c->pending_count < c->pending_capacity);
    assert(c->pending_count == 0 || at(c, c->pending_count - 1)->id < id); /* sorted by id */
    c->pending_count++;
    *at(c, c->pending_count - 1) = (struct cr_client_pending){id, deadline_ms, false};
    c->pending_live++;
}

/* Index of the entry for `id`, or NOT_FOUND. */
static size_t find(const cr_client *c, uint64_t id) {
    if (c->pending_count == 0) return NOT_FOUND;
    if (at(c, 0)->id == id) return 0;
    size_t lo = 0, hi = c->pending_count; /* the entry, if any, is in [lo, hi) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t mid_id = at(c, mid)->id;
        if (mid_id == id) return mid;
        if (mid_id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NOT_FOUND;
}

bool cr_client_pending_waiting(const cr_client *c, uint64_t id) {
    assert(c != NULL);
    size_t i = find(c, id);
    return i != NOT_FOUND && !at(c, i)->done;
}

/* Drops answered entries from the head, keeping the head unanswered. */
static void pop_done(cr_client *c) {
    while (c->pending_count > 0 && at(c, 0)->done) {
        c->pending_head = (c->pending_head + 1) % c->pending_capacity;
        c->pending_count--;
    }
}

bool cr_client_pending_settle(cr_client *c, uint64_t id) {
    assert(c != NULL);
    size_t i = find(c, id);
    if (i == NOT_FOUND || at(c, i)->done) return false;
    at(c, i)->done = true;
    assert(c->pending_live > 0);
    c->pending_live--;
    pop_done(c);
    return true;
}

size_t cr_client_pending_expire(cr_client *c, int64_t now_ms, struct cr_completion *out,
                                size_t max) {
    assert(c != NULL && (out != NULL || max == 0));
    size_t n = 0;
    while (n < max && c->pending_count > 0) {
        const struct cr_client_pending *head = at(c, 0);
        assert(!head->done);
        if (head->deadline_ms > now_ms) break;
        out[n++] = (struct cr_completion){.request_id = head->id,
                                          .method = (enum cr_method)cr_client_id_method(head->id),
                                          .status = CR_ERR_TIMEOUT};
        bool settled = cr_client_pending_settle(c, head->id);
        assert(settled);
        (void)settled;
    }
    return n;
}

int64_t cr_client_pending_next_deadline(const cr_client *c) {
    assert(c != NULL);
    return c->pending_count > 0 ? at(c, 0)->deadline_ms : INT64_MAX;
}

/* The end of a restore with its claims on two threads (finish.h). */
#include "durable/finish.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "crescent/error.h"

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint32_t cr_durable_finish_split(const struct cr_store_restore_plan *plan) {
    assert(plan != NULL);
    uint32_t n = cr_store_restore_plan_segments(plan);
    uint64_t total = 0;
    for (uint32_t s = 0; s < n; s++) total += cr_store_restore_plan_claims(plan, s);
    /* The first k whose prefix holds at least half: its range is then the
     * larger by less than one segment's claims. */
    uint64_t prefix = 0;
    uint32_t k = 0;
    while (k < n && 2 * prefix < total) prefix += cr_store_restore_plan_claims(plan, k++);
    /* One segment fewer, when that is closer to half. */
    if (k > 0) {
        uint64_t before = prefix - cr_store_restore_plan_claims(plan, k - 1);
        if (total - 2 * before < 2 * prefix - total) k--;
    }
    return k;
}

struct claimer {
    cr_store *store;
    struct cr_store_restore_plan *plan;
    uint32_t seg_lo, seg_hi;
    struct cr_store_restore_part part;
};

static void *claimer_main(void *arg) {
    struct claimer *c = arg;
    cr_store_restore_finish_claims(c->store, c->plan, c->seg_lo, c->seg_hi, &c->part);
    return NULL;
}

int cr_durable_finish(cr_store *store, uint32_t threads, struct cr_store_restore_dropped *dropped,
                      struct cr_durable_finish_times *times) {
    assert(store != NULL && dropped != NULL && (threads == 1 || threads == 2));
    struct cr_durable_finish_times t = {.threads = 1};
    memset(dropped, 0, sizeof(*dropped));
    uint64_t t0 = now_ns();
    struct cr_store_restore_plan *plan;
    int rc = cr_store_restore_finish_prepare(store, &plan);
    if (rc != CR_OK) return rc;
    uint64_t t1 = now_ns();
    uint32_t n = cr_store_restore_plan_segments(plan);
    uint32_t k = threads == 2 ? cr_durable_finish_split(plan) : n;
    /* The second range on a thread of its own, the first on this one. */
    struct claimer second = {.store = store, .plan = plan, .seg_lo = k, .seg_hi = n};
    pthread_t thread;
    bool started = k < n && k > 0 && pthread_create(&thread, NULL, claimer_main, &second) == 0;
    struct cr_store_restore_part parts[2];
    if (started) {
        cr_store_restore_finish_claims(store, plan, 0, k, &parts[0]);
        pthread_join(thread, NULL);
        parts[1] = second.part;
        t.threads = 2;
    } else {
        if (threads == 2 && k > 0 && k < n)
            CR_DEBUG("durable", "no second thread for the restore's claims: one claims all");
        cr_store_restore_finish_claims(store, plan, 0, k, &parts[0]);
        cr_store_restore_finish_claims(store, plan, k, n, &parts[1]);
    }
    uint64_t t2 = now_ns();
    cr_store_restore_finish_end(store, plan, parts, 2, dropped);
    uint64_t t3 = now_ns();
    t.plan_ns = t1 - t0;
    t.claims_ns = t2 - t1;
    t.end_ns = t3 - t2;
    if (times != NULL) *times = t;
    return CR_OK;
}

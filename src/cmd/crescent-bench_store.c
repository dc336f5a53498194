/* crescent-bench's workers: one thread per connection (a cr_client may not
 * be shared between threads), each running the store workload in a closed
 * loop (keep --depth requests in flight) or an open loop (send at a fixed
 * rate; latency counts from the time a request was due, not from when it
 * could be sent, so a stalled server shows up as latency rather than as a
 * lower send rate: the coordinated-omission correction wrk2 makes).
 *
 * Single keys (--batch 1) go through the pipelined calls; batches through the
 * blocking batch calls, one request at a time per connection. */
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/crescent-bench.h"

#define POLL_BATCH 256u
/* cr_client_poll waits in whole milliseconds: under 1 ms before the next send
 * the loop polls without waiting and naps this long in between, so a reply is
 * read at most this late and the send is not late by a whole millisecond. */
#define NAP_NS 50000u

const char *const bench_op_names[OP_KINDS] = {"get", "put", "exist", "remove", "query", "route"};

struct slot {
    bool busy;
    bool second_phase;     /* put: the PutEnd is in flight */
    bool measured;
    enum bench_op op;
    uint64_t request_id;
    uint64_t key;          /* key-space index (get, exist) or fresh index (put, remove) */
    uint64_t intended_ns;  /* when the request was due: latency starts here */
    uint64_t sent_ns;      /* when it was sent: the uncorrected latency starts here */
};

struct bench_zipf {
    uint64_t n;
    double theta, alpha, zetan, eta, half_pow_theta;
};

/* ---- keys -------------------------------------------------------------- */

void bench_key_space(const struct bench_options *opt, uint64_t index, char out[BENCH_KEY_BYTES]) {
    int n = snprintf(out, BENCH_KEY_BYTES, "%s-k%" PRIu64, opt->run_id, index);
    assert(n > 0 && n < (int)BENCH_KEY_BYTES);
    (void)n; /* read only by the assert: a release build drops it */
}

void bench_key_fresh(const struct bench_options *opt, unsigned worker, uint64_t index,
                     char out[BENCH_KEY_BYTES]) {
    int n = snprintf(out, BENCH_KEY_BYTES, "%s-w%u-p%" PRIu64, opt->run_id, worker, index);
    assert(n > 0 && n < (int)BENCH_KEY_BYTES);
    (void)n; /* read only by the assert: a release build drops it */
}

/* xorshift64*: fast, and per worker, so no shared state. */
static uint64_t rng_next(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * UINT64_C(2685821657736338717);
}

static double rng_unit(uint64_t *state) {
    return (double)(rng_next(state) >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
}

/* Gray et al.'s zipfian generator as YCSB uses it: rank 0 is the most
 * popular; zeta(n) is summed once here (O(n), n = --keys). */
struct bench_zipf *bench_zipf_create(uint64_t n, double theta) {
    assert(n > 0 && theta > 0.0 && theta < 1.0);
    struct bench_zipf *z = calloc(1, sizeof(*z));
    if (z == NULL) return NULL;
    double zeta2 = 1.0 + pow(0.5, theta);
    for (uint64_t i = 1; i <= n; i++) z->zetan += pow((double)i, -theta);
    z->n = n;
    z->theta = theta;
    z->alpha = 1.0 / (1.0 - theta);
    z->eta = (1.0 - pow(2.0 / (double)n, 1.0 - theta)) / (1.0 - zeta2 / z->zetan);
    z->half_pow_theta = pow(0.5, theta);
    return z;
}

void bench_zipf_free(struct bench_zipf *zipf) { free(zipf); }

static uint64_t zipf_rank(const struct bench_zipf *z, uint64_t *rng) {
    double u = rng_unit(rng), uz = u * z->zetan;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + z->half_pow_theta) return 1 % z->n;
    uint64_t rank = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha));
    return rank < z->n ? rank : z->n - 1;
}

/* A key-space index: uniform, or zipfian with ranks scattered over the key
 * space (YCSB's scrambled zipfian: hot keys are not neighbours). */
uint64_t bench_pick_key(struct bench_worker *w) {
    uint64_t n = w->opt->keys;
    if (w->zipf == NULL) return rng_next(&w->rng) % n;
    uint64_t x = zipf_rank(w->zipf, &w->rng) + 0x9e3779b97f4a7c15u; /* splitmix64 finalizer */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return (x ^ (x >> 31)) % n;
}

static enum bench_op pick_op(struct bench_worker *w) {
    const unsigned *mix = w->opt->mix;
    unsigned total = 0;
    for (int op = 0; op < OP_KINDS; op++) total += mix[op];
    assert(total > 0);
    unsigned r = (unsigned)(rng_next(&w->rng) % total);
    for (int op = 0; op < OP_KINDS; op++) {
        if (r < mix[op]) return (enum bench_op)op;
        r -= mix[op];
    }
    return OP_GET;
}

/* A fresh key this worker may remove: one preloaded for --workload remove,
 * else the oldest whose put succeeded.  false: none (the op becomes a put). */
static bool take_removable(struct bench_worker *w, uint64_t *key) {
    if (w->remove_next < w->preloaded) {
        *key = w->remove_next++;
        return true;
    }
    if (w->removable_head == w->removable_tail) return false;
    *key = w->removable[w->removable_head++ % BENCH_REMOVABLE_MAX];
    return true;
}

static void remember_removable(struct bench_worker *w, uint64_t key) {
    if (w->removable_tail - w->removable_head == BENCH_REMOVABLE_MAX) return; /* clean-up gets it */
    w->removable[w->removable_tail++ % BENCH_REMOVABLE_MAX] = key;
}

/* ---- recording ---------------------------------------------------------- */

static void note_status(struct bench_worker *w, int status) {
    assert(status != CR_OK);
    w->errors++;
    for (unsigned i = 0; i < BENCH_STATUS_KINDS; i++) {
        if (w->statuses[i].count > 0 && w->statuses[i].status != status) continue;
        w->statuses[i].status = status;
        w->statuses[i].count++;
        return;
    }
    w->statuses_other++;
}

/* One finished operation of `keys` keys that was due at intended_ns and sent
 * at sent_ns: its latency counts from when it was due (coordinated omission
 * corrected); the uncorrected view, from the send, is kept beside it. */
void bench_record(struct bench_worker *w, enum bench_op op, bool measured, uint64_t intended_ns,
                  uint64_t sent_ns,                    unsigned keys, int status) {
    if (!measured) return;
    uint64_t now = bench_now_ns();
    uint64_t latency = now > intended_ns ? now - intended_ns : 0;
    w->ops[op]++;
    w->keys_done += keys;
    if (status != CR_OK) note_status(w, status);
    cr_latency_hist_record(w->hist[op], latency);
    cr_latency_hist_record(w->uncorrected, now > sent_ns ? now - sent_ns : 0);
    uint64_t second = (now - w->measure_ns) / 1000000000u;
    if (second >= BENCH_SECONDS_MAX) second = BENCH_SECONDS_MAX - 1;
    struct bench_second *s = &w->seconds[second];
    s->ops++;
    s->errors += status != CR_OK;
    s->latency_sum_ns += (double)latency;
    if (latency > s->latency_max_ns) s->latency_max_ns = latency;
    if (now > w->measured_last_ns) w->measured_last_ns = now;
    atomic_fetch_add_explicit(&w->progress, 1, memory_order_relaxed);
}

/* A measured operation due at due_ns was sent at sent_ns: the measured phase
 * starts at the first one's due time; the send times give the rate held. */
void bench_note_sent(struct bench_worker *w, uint64_t due_ns, uint64_t sent_ns, uint64_t nth) {
    if (nth == 0) {
        w->measured_first_ns = due_ns;
        w->sent_first_ns = sent_ns;
    }
    w->sent_last_ns = sent_ns;
    w->sent_count = nth + 1;
}

/* ---- issuing ------------------------------------------------------------- */

/* Whether another operation due at `due_ns` may start, and whether it counts. */
bool bench_may_issue(struct bench_worker *w, uint64_t due_ns, uint64_t issued_measured,
                      bool *measured) {
    *measured = due_ns >= w->measure_ns;
    if (w->opt->count > 0) return !*measured || issued_measured < w->quota;
    return due_ns < w->end_ns && bench_now_ns() < w->stop_ns;
}

static int submit_first(struct bench_worker *w, struct slot *s) {
    const char *tenant = w->opt->tenant;
    char key[BENCH_KEY_BYTES];
    if (s->op == OP_REMOVE && !take_removable(w, &s->key)) s->op = OP_PUT;
    switch (s->op) {
    case OP_GET:
    case OP_EXIST:
        s->key = bench_pick_key(w);
        bench_key_space(w->opt, s->key, key);
        return s->op == OP_GET ? cr_client_submit_get_replica_list(w->client, tenant, key,
                                                                   &s->request_id)
                               : cr_client_submit_exist_key(w->client, tenant, key,
                                                            &s->request_id);
    case OP_PUT: {
        s->key = w->put_next++;
        bench_key_fresh(w->opt, w->index, s->key, key);
        struct cr_put_item item = {.key = key, .size_bytes = w->opt->object_bytes};
        return cr_client_submit_put_start(w->client, tenant, &item, &s->request_id);
    }
    case OP_REMOVE:
        bench_key_fresh(w->opt, w->index, s->key, key);
        return cr_client_submit_remove(w->client, tenant, key, true, &s->request_id);
    case OP_QUERY:
    case OP_ROUTE:
    case OP_KINDS: break;
    }
    return CR_ERR_INVALID_PARAMS;
}

/* Handles one completion; returns true when its operation is finished. */
static bool complete(struct bench_worker *w, struct slot *s, int status) {
    if (status == CR_OK && s->op == OP_PUT && !s->second_phase) {
        char key[BENCH_KEY_BYTES];
        bench_key_fresh(w->opt, w->index, s->key, key);
        status = cr_client_submit_put_end(w->client, w->opt->tenant, key, &s->request_id);
        if (status == CR_OK) {
            s->second_phase = true;
            return false;
        }
    }
    if (status == CR_OK && s->op == OP_PUT) remember_removable(w, s->key);
    bench_record(w, s->op, s->measured, s->intended_ns, s->sent_ns, 1, status);
    s->busy = false;
    return true;
}

static struct slot *find_slot(struct slot *slots, unsigned depth, uint64_t request_id) {
    for (unsigned i = 0; i < depth; i++)
        if (slots[i].busy && slots[i].request_id == request_id) return &slots[i];
    return NULL;
}

void bench_sleep_until(uint64_t when_ns) {
    struct timespec ts = {.tv_sec = (time_t)(when_ns / 1000000000u),
                          .tv_nsec = (long)(when_ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
}

static void nap_before(uint64_t due_ns) {
    uint64_t now = bench_now_ns();
    if (due_ns <= now) return;
    bench_sleep_until(due_ns - now < NAP_NS ? due_ns : now + NAP_NS);
}

/* How long poll may wait: until the next send is due (open loop), else the
 * client's timeout. */
static int poll_timeout_ms(const struct bench_worker *w, bool issuing, uint64_t next_due_ns,
                           unsigned in_flight) {
    /* Closed loop, draining, or every slot busy: only a reply can move things on. */
    if (w->opt->rate <= 0.0 || !issuing || in_flight == w->opt->depth)
        return in_flight > 0 ? -1 : 0;
    uint64_t now = bench_now_ns();
    if (next_due_ns <= now) return 0;
    return (int)((next_due_ns - now) / 1000000u);
}

/* Fills free slots with operations that are due; returns false once the
 * run has issued everything it will. */
static bool fill_slots(struct bench_worker *w, struct slot *slots, unsigned *in_flight,
                       uint64_t *next_due_ns, uint64_t *issued_measured, double interval_ns) {
    unsigned depth = w->opt->depth;
    for (unsigned i = 0; i < depth && *in_flight < depth; i++) {
        if (slots[i].busy) continue;
        uint64_t now = bench_now_ns();
        uint64_t due = w->opt->rate > 0.0 ? *next_due_ns : now;
        if (due > now) return true;
        bool measured;
        if (!bench_may_issue(w, due, *issued_measured, &measured)) return false;
        struct slot *s = &slots[i];
        *s = (struct slot){.busy = true, .op = pick_op(w), .measured = measured,
                           .intended_ns = due, .sent_ns = now};
        if (measured) bench_note_sent(w, due, now, (*issued_measured)++);
        if (w->opt->rate > 0.0) *next_due_ns = w->start_ns + (uint64_t)(interval_ns *
                                  (double)(++w->sent_scheduled));
        int rc = submit_first(w, s);
        if (rc != CR_OK) {
            bench_record(w, s->op, measured, due, now, 1, rc);
            s->busy = false;
            continue;
        }
        (*in_flight)++;
    }
    return true;
}

static void run_pipelined(struct bench_worker *w) {
    struct slot *slots = calloc(w->opt->depth, sizeof(*slots));
    if (slots == NULL) {
        snprintf(w->failure, sizeof(w->failure), "out of memory for %u slots", w->opt->depth);
        return;
    }
    double interval_ns = w->opt->rate > 0.0 ? 1e9 * w->opt->connections / w->opt->rate : 0.0;
    uint64_t next_due = w->start_ns, issued_measured = 0;
    unsigned in_flight = 0;
    bool issuing = true;
    struct cr_completion done[POLL_BATCH];
    while (issuing || in_flight > 0) {
        if (issuing)
            issuing = fill_slots(w, slots, &in_flight, &next_due, &issued_measured, interval_ns);
        if (!issuing && in_flight == 0) break;
        int timeout = poll_timeout_ms(w, issuing, next_due, in_flight);
        int n = cr_client_poll(w->client, done, POLL_BATCH, timeout);
        if (n < 0) {
            snprintf(w->failure, sizeof(w->failure), "poll failed: %s",
                     cr_client_last_error(w->client));
            break;
        }
        for (int i = 0; i < n; i++) {
            struct slot *s = find_slot(slots, w->opt->depth, done[i].request_id);
            if (s != NULL && complete(w, s, done[i].status)) in_flight--;
        }
        if (n == 0 && issuing && w->opt->rate > 0.0) nap_before(next_due);
    }
    free(slots);
}

/* ---- batches ------------------------------------------------------------- */

static int first_failure(const struct cr_status_list *list) {
    for (size_t i = 0; i < list->count; i++)
        if (list->statuses[i] != CR_OK) return list->statuses[i];
    return CR_OK;
}

static int batch_put(struct bench_worker *w, char (*keys)[BENCH_KEY_BYTES],
                     const char **key_ptrs, unsigned n, uint64_t first) {
    struct cr_put_item items[CR_CLIENT_BATCH_MAX];
    for (unsigned i = 0; i < n; i++)
        items[i] = (struct cr_put_item){.key = keys[i], .size_bytes = w->opt->object_bytes};
    struct cr_replica_lists started;
    int rc = cr_client_batch_put_start(w->client, w->opt->tenant, items, n, &started);
    if (rc != CR_OK) return rc;
    for (size_t i = 0; i < started.count && rc == CR_OK; i++) rc = started.lists[i].status;
    cr_client_replica_lists_free(&started);
    if (rc != CR_OK) return rc;
    struct cr_status_list ended;
    rc = cr_client_batch_put_end(w->client, w->opt->tenant, key_ptrs, n, &ended);
    if (rc == CR_OK) rc = first_failure(&ended);
    cr_client_status_list_free(&ended);
    for (unsigned i = 0; rc == CR_OK && i < n; i++) remember_removable(w, first + i);
    return rc;
}

/* One batch operation of `op` over opt->batch keys; returns its status. */
static int batch_once(struct bench_worker *w, enum bench_op *op) {
    unsigned n = w->opt->batch;
    static _Thread_local char keys[CR_CLIENT_BATCH_MAX][BENCH_KEY_BYTES];
    const char *key_ptrs[CR_CLIENT_BATCH_MAX];
    uint64_t first = w->put_next;
    if (*op == OP_REMOVE) {
        uint64_t available = w->preloaded - w->remove_next + w->removable_tail - w->removable_head;
        if (available < n) *op = OP_PUT;
    }
    for (unsigned i = 0; i < n; i++) {
        uint64_t index = 0;
        if (*op == OP_GET || *op == OP_EXIST) bench_key_space(w->opt, bench_pick_key(w), keys[i]);
        if (*op == OP_PUT) bench_key_fresh(w->opt, w->index, w->put_next++, keys[i]);
        if (*op == OP_REMOVE && take_removable(w, &index))
            bench_key_fresh(w->opt, w->index, index, keys[i]);
        key_ptrs[i] = keys[i];
    }
    if (*op == OP_PUT) return batch_put(w, keys, key_ptrs, n, first);
    if (*op == OP_GET) {
        struct cr_replica_lists lists;
        int rc = cr_client_batch_get_replica_list(w->client, w->opt->tenant, key_ptrs, n, &lists);
        for (size_t i = 0; rc == CR_OK && i < lists.count; i++) rc = lists.lists[i].status;
        cr_client_replica_lists_free(&lists);
        return rc;
    }
    struct cr_status_list statuses;
    int rc = *op == OP_EXIST
                 ? cr_client_batch_exist_key(w->client, w->opt->tenant, key_ptrs, n, &statuses)
                 : cr_client_batch_remove(w->client, w->opt->tenant, key_ptrs, n, true, &statuses);
    if (rc == CR_OK) rc = first_failure(&statuses);
    cr_client_status_list_free(&statuses);
    return rc;
}

/* One value call: cr_client_put of a fresh key or cr_client_get_into of a key
 * of the key space (clean-up removes fresh keys [0, put_next)). */
static int value_once(struct bench_worker *w, enum bench_op *op) {
    char key[BENCH_KEY_BYTES];
    *op = w->opt->mix[OP_PUT] > 0 ? OP_PUT : OP_GET;
    if (*op == OP_PUT) {
        bench_key_fresh(w->opt, w->index, w->put_next++, key);
        return cr_client_put(w->client, w->opt->tenant, key, w->value, w->opt->object_bytes,
                             NULL);
    }
    size_t len = 0;
    bench_key_space(w->opt, bench_pick_key(w), key);
    int rc = cr_client_get_into(w->client, w->opt->tenant, key, w->value, w->opt->object_bytes,
                                &len);
    return rc == CR_OK && len != w->opt->object_bytes ? CR_ERR_INVALID_PARAMS : rc;
}

/* put-bytes keeps at most --keys of its values per connection: past that the
 * oldest is removed (after the put's time was taken), so the run measures
 * puts without filling the deployment's memory, which would evict its users'
 * objects, or be refused NO_AVAILABLE_HANDLE between two eviction passes.
 * A removal that fails is left to the clean-up. */
static void trim_values(struct bench_worker *w) {
    while (w->put_next - w->trimmed > w->opt->keys) {
        char key[BENCH_KEY_BYTES];
        bench_key_fresh(w->opt, w->index, w->trimmed++, key);
        (void)cr_client_remove(w->client, w->opt->tenant, key, true);
    }
}

static int batch_picked(struct bench_worker *w, enum bench_op *op) {
    *op = pick_op(w);
    return batch_once(w, op);
}

/* One call at a time on this connection (closed loop, or open at --rate):
 * `once` issues it and says which kind it was; each counts `keys` keys. */
static void run_serial(struct bench_worker *w, int (*once)(struct bench_worker *, enum bench_op *),
                       unsigned keys) {
    double interval_ns = w->opt->rate > 0.0 ? 1e9 * w->opt->connections / w->opt->rate : 0.0;
    uint64_t issued_measured = 0;
    for (;;) {
        uint64_t now = bench_now_ns();
        uint64_t due = w->opt->rate > 0.0
                           ? w->start_ns + (uint64_t)(interval_ns * (double)w->sent_scheduled)
                           : now;
        bool measured;
        if (!bench_may_issue(w, due, issued_measured, &measured)) return;
        if (due > now) bench_sleep_until(due);
        w->sent_scheduled++;
        uint64_t sent = bench_now_ns();
        if (measured) bench_note_sent(w, due, sent, issued_measured++);
        enum bench_op op;
        int rc = once(w, &op);
        bench_record(w, op, measured, due, sent, keys, rc);
        if (once == value_once && op == OP_PUT) trim_values(w);
    }
}

void *bench_worker_main(void *arg) {
    struct bench_worker *w = arg;
    assert(w->opt->depth >= 1 && w->opt->batch >= 1);
    bench_sleep_until(w->start_ns); /* every worker begins together, warm-up first */
    if (w->indexer != NULL)
        bench_indexer_run(w);
    else if (w->opt->values)
        run_serial(w, value_once, 1);
    else if (w->opt->batch > 1)
        run_serial(w, batch_picked, w->opt->batch);
    else
        run_pipelined(w);
    return NULL;
}

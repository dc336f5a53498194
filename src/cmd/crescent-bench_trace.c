/* crescent-bench's trace workloads: a Mooncake FAST'25 trace (--trace)
 * replayed in order, at --trace-speed times its own pace or as fast as the
 * calls go (--trace-speed 0), on one connection: a routing decision depends
 * on every one before it.
 *
 * trace-route: --instances simulated engines (vLLM publishers, as the query
 * and route workloads register them), each a KV cache of --kv-blocks blocks
 * with LRU eviction (src/core/kv_lru.c).  A trace hash id is one block of
 * --block-size tokens all equal to the id (as Dynamo's trace benchmark
 * expands them).  Per request: POST /route with the tokens; the chosen
 * engine serves it: its LRU evictions go out as one BlockRemoved and the
 * blocks it stores as BlockStored runs (parent: the block before), one
 * batch on its publisher; then its load goes to POST /load (KV blocks used
 * and the requests it is decoding: each holds a slot for output_length x 20
 * ms of trace time, 16 slots).  Reported: the hit rate of the routed run
 * (blocks the chosen engine held / blocks requested), of the best engine in
 * hindsight for each decision (the most blocks any engine held then), and of
 * random routing (its own engines, the same trace), events/s, and /route's
 * latency.
 *
 * trace-store: the store as the cache pool.  A block's key is
 * <run id>-<chain hash> (one key per prefix).  Per request: BatchExistKey
 * on its blocks; BatchGet the leading ones that exist (the prefix hit:
 * GetReplicaList, or with --block-bytes moved through the data plane
 * unless --mount-fake); BatchPut the missing ones (PutStart + PutEnd, or a
 * put of --block-bytes).  A key this run put that no longer exists was
 * evicted by the store (its capacity: the segments mounted).  Reported: hit
 * rate, evictions, keys/s, latency per call. */
#include <inttypes.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/crescent-bench.h"
#include "core/kv_lru.h"
#include "core/kv_trace.h"
#include "core/prefix_hash.h"
#include "core/prefix_map.h"

#define DECODE_NS_PER_TOKEN 20000000ull /* a slot is held output_length x 20 ms */
#define SLOTS 16u

struct engine_sim {
    struct cr_kv_lru lru;
    uint64_t *busy_until;        /* per slot, trace ns */
};

struct scratch {
    uint64_t *chain;             /* the request's block keys */
    uint32_t *run_start, *run_len;
    uint64_t *removed;
    char *body;
    size_t body_cap;
};

static uint64_t trace_ns(const struct cr_kv_trace *t, size_t r) {
    return (t->requests[r].timestamp_ms - t->requests[0].timestamp_ms) * 1000000ull;
}

/* Waits until request r is due at --trace-speed (0: never waits). */
static void pace(const struct bench_options *opt, const struct cr_kv_trace *t, size_t r,
                 uint64_t start_ns) {
    if (opt->trace_speed <= 0.0) return;
    bench_sleep_until(start_ns + (uint64_t)((double)trace_ns(t, r) / opt->trace_speed));
}

/* Block keys: a chain, so that a key names its whole prefix. */
static uint32_t chain_of(const struct cr_kv_trace *t, size_t r, uint32_t cap, uint64_t *out) {
    uint32_t n = t->requests[r].block_count < cap ? t->requests[r].block_count : cap;
    const uint64_t *ids = cr_kv_trace_ids(t, r);
    uint64_t prev = 0x6372657363656e74ull;
    for (uint32_t b = 0; b < n; b++) out[b] = prev = cr_prefix_hash_roll(prev, ids[b], 0);
    return n;
}

static int scratch_init(struct scratch *s, uint32_t blocks) {
    memset(s, 0, sizeof(*s));
    s->chain = malloc(blocks * sizeof(uint64_t));
    s->run_start = malloc(blocks * sizeof(uint32_t));
    s->run_len = malloc(blocks * sizeof(uint32_t));
    s->removed = malloc(blocks * sizeof(uint64_t));
    return s->chain && s->run_start && s->run_len && s->removed ? CR_OK : CR_ERR_NOMEM;
}

static void scratch_free(struct scratch *s) {
    free(s->chain);
    free(s->run_start);
    free(s->run_len);
    free(s->removed);
    free(s->body);
}

static void report_bad_lines(FILE *out, const struct cr_kv_trace *t) {
    uint64_t bad = 0;
    for (int k = 0; k < CR_KV_TRACE_BAD_KINDS; k++) bad += t->bad[k];
    fprintf(out, "trace: %zu requests, %zu blocks, %" PRIu64 " bad lines skipped", t->count,
            t->id_count, bad);
    for (int k = 0; k < CR_KV_TRACE_BAD_KINDS; k++)
        if (t->bad[k] > 0) fprintf(out, " %s=%" PRIu64, cr_kv_trace_bad_name(k), t->bad[k]);
    fputc('\n', out);
}

static void print_latency(FILE *out, const char *name, const struct cr_latency_hist *h) {
    if (h->total_count == 0) return;
    fprintf(out, "%-14s %10" PRIu64 " calls  p50 %9.1f us  p99 %9.1f us  max %9.1f us\n", name,
            h->total_count, (double)cr_latency_hist_value_at(h, 50) / 1e3,
            (double)cr_latency_hist_value_at(h, 99) / 1e3,
            (double)cr_latency_hist_value_at(h, 100) / 1e3);
}

/* ---- trace-route ---------------------------------------------------------- */

static void pack_str(msgpack_packer *pk, const char *s) {
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* The engine's batch for one served request: evictions, then stored runs. */
static void pack_events(const struct bench_options *opt, const struct scratch *s,
                        const struct cr_kv_lru_result *res, const uint64_t *ids,
                        msgpack_sbuffer *sb) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, 0.0);
    msgpack_pack_array(&pk, res->run_count + (res->removed_count > 0));
    if (res->removed_count > 0) {
        msgpack_pack_array(&pk, 3);
        pack_str(&pk, "BlockRemoved");
        msgpack_pack_array(&pk, res->removed_count);
        for (uint32_t i = 0; i < res->removed_count; i++) msgpack_pack_uint64(&pk, res->removed[i]);
        msgpack_pack_nil(&pk);
    }
    for (uint32_t k = 0; k < res->run_count; k++) {
        uint32_t first = res->run_start[k], n = res->run_len[k];
        msgpack_pack_array(&pk, 8);
        pack_str(&pk, "BlockStored");
        msgpack_pack_array(&pk, n);
        for (uint32_t b = 0; b < n; b++) msgpack_pack_uint64(&pk, s->chain[first + b]);
        if (first > 0) msgpack_pack_uint64(&pk, s->chain[first - 1]);
        else msgpack_pack_nil(&pk);
        msgpack_pack_array(&pk, n * opt->block_size);
        for (uint32_t b = 0; b < n; b++)
            for (unsigned t = 0; t < opt->block_size; t++)
                msgpack_pack_uint32(&pk, (uint32_t)ids[first + b]);
        msgpack_pack_uint32(&pk, opt->block_size);
        msgpack_pack_nil(&pk);
        msgpack_pack_nil(&pk);
        msgpack_pack_nil(&pk);
    }
    msgpack_pack_nil(&pk);
}

static int body_reserve(struct scratch *s, size_t need) {
    if (need <= s->body_cap) return CR_OK;
    char *grown = realloc(s->body, need);
    if (grown == NULL) return CR_ERR_NOMEM;
    s->body = grown;
    s->body_cap = need;
    return CR_OK;
}

/* The /route body: the request's blocks as tokens. */
static const char *route_body(const struct bench_options *opt, struct scratch *s,
                              const uint64_t *ids, uint32_t n) {
    size_t need = 256 + strlen(opt->model) + strlen(opt->tenant) + (size_t)n * opt->block_size * 21;
    if (body_reserve(s, need) != CR_OK) return NULL;
    char *p = s->body;
    p += sprintf(p, "{\"model\":\"%s\",\"block_size\":%u,\"tenant_id\":\"%s\",\"token_ids\":[",
                 opt->model, opt->block_size, opt->tenant);
    for (uint32_t b = 0; b < n; b++)
        for (unsigned t = 0; t < opt->block_size; t++)
            p += sprintf(p, "%s%" PRIu32, b + t > 0 ? "," : "", (uint32_t)ids[b]);
    strcpy(p, "]}");
    return s->body;
}

static unsigned busy_slots(const struct engine_sim *e, uint64_t now) {
    unsigned n = 0;
    for (unsigned i = 0; i < SLOTS; i++) n += e->busy_until[i] > now;
    return n;
}

static void occupy(struct engine_sim *e, uint64_t now, uint64_t until) {
    unsigned best = 0;
    for (unsigned i = 1; i < SLOTS; i++)
        if (e->busy_until[i] < e->busy_until[best]) best = i;
    (void)now;
    e->busy_until[best] = until;
}

static int post_load(struct bench_indexer *ix, struct bench_http *h, unsigned i,
                     const struct engine_sim *e, uint64_t now) {
    const struct bench_options *opt = ix->opt;
    char body[512];
    unsigned busy = busy_slots(e, now);
    snprintf(body, sizeof(body),
             "{\"instance_id\":\"%s\",\"tenant_id\":\"%s\",\"kv_active_blocks\":%u,"
             "\"kv_total_blocks\":%u,\"request_active_slots\":%u,\"request_total_slots\":%u,"
             "\"num_requests_waiting\":0}", ix->names[i], opt->tenant, e->lru.used,
             e->lru.capacity, busy, SLOTS);
    size_t len;
    char *request = bench_format_request(opt, "POST", "/load", body, &len);
    if (request == NULL) return CR_ERR_NOMEM;
    int status = 0;
    size_t at;
    int rc = bench_http_exchange(h, opt, request, len, &status, &at);
    free(request);
    return rc == CR_OK && status != 200 ? status : rc;
}

/* The chosen instance's index from /route's answer; -1 when none. */
static int routed_to(const struct bench_indexer *ix, const char *answer) {
    json_t *root = json_loads(answer, 0, NULL);
    const char *name = json_string_value(json_object_get(root, "instance_id"));
    int found = -1;
    for (unsigned i = 0; name != NULL && i < ix->opt->instances; i++)
        if (strcmp(ix->names[i], name) == 0) found = (int)i;
    json_decref(root);
    return found;
}

struct route_totals {
    uint64_t blocks, hit, oracle, random_hit, events, unrouted, errors;
    struct cr_latency_hist route, load;
};

static int engines_init(struct engine_sim *e, unsigned n, uint32_t blocks) {
    for (unsigned i = 0; i < n; i++) {
        e[i].busy_until = calloc(SLOTS, sizeof(uint64_t));
        if (e[i].busy_until == NULL || cr_kv_lru_init(&e[i].lru, blocks) != CR_OK)
            return CR_ERR_NOMEM;
    }
    return CR_OK;
}

static void engines_free(struct engine_sim *e, unsigned n) {
    for (unsigned i = 0; e != NULL && i < n; i++) {
        cr_kv_lru_free(&e[i].lru);
        free(e[i].busy_until);
    }
    free(e);
}

static int route_one(struct bench_indexer *ix, struct bench_http *h, struct engine_sim *eng,
                     struct engine_sim *rnd, uint64_t *rng, const struct cr_kv_trace *t, size_t r,
                     struct scratch *s, msgpack_sbuffer *sb, struct route_totals *tot) {
    const struct bench_options *opt = ix->opt;
    uint32_t n = chain_of(t, r, opt->kv_blocks, s->chain);
    const uint64_t *ids = cr_kv_trace_ids(t, r);
    uint64_t now = trace_ns(t, r);
    tot->blocks += n;
    uint32_t best = 0;
    for (unsigned i = 0; i < opt->instances; i++) {
        uint32_t held = cr_kv_lru_prefix(&eng[i].lru, s->chain, n);
        if (held > best) best = held;
    }
    tot->oracle += best;
    const char *body = route_body(opt, s, ids, n);
    size_t len;
    char *request = body != NULL ? bench_format_request(opt, "POST", "/route", body, &len) : NULL;
    if (request == NULL) return CR_ERR_NOMEM;
    int status = 0;
    size_t at = 0;
    uint64_t t0 = bench_now_ns();
    int rc = bench_http_exchange(h, opt, request, len, &status, &at);
    cr_latency_hist_record(&tot->route, bench_now_ns() - t0);
    free(request);
    if (rc != CR_OK) return rc;
    int chosen = status == 200 ? routed_to(ix, h->buf + at) : -1;
    if (status != 200) tot->errors++;
    if (chosen < 0) { /* no candidate: served by a random engine, counted */
        tot->unrouted++;
        chosen = (int)(*rng % opt->instances);
    }
    struct cr_kv_lru_result res = {.run_start = s->run_start, .run_len = s->run_len,
                                   .removed = s->removed};
    rc = cr_kv_lru_serve(&eng[chosen].lru, s->chain, n, &res);
    if (rc != CR_OK) return rc;
    tot->hit += res.hit;
    tot->events += res.stored + res.removed_count;
    occupy(&eng[chosen], now, now + t->requests[r].output_length * DECODE_NS_PER_TOKEN);
    if (res.run_count + res.removed_count > 0) {
        msgpack_sbuffer_clear(sb);
        pack_events(opt, s, &res, ids, sb);
        rc = bench_publish(ix, (unsigned)chosen, sb->data, sb->size);
        if (rc != CR_OK) return rc;
    }
    t0 = bench_now_ns();
    rc = post_load(ix, h, (unsigned)chosen, &eng[chosen], now);
    cr_latency_hist_record(&tot->load, bench_now_ns() - t0);
    if (rc > 0) tot->errors++, rc = CR_OK;
    if (rc != CR_OK) return rc;
    /* Random routing, on its own engines. */
    *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
    unsigned pick = (unsigned)(*rng % opt->instances);
    rc = cr_kv_lru_serve(&rnd[pick].lru, s->chain, n, &res);
    tot->random_hit += res.hit;
    return rc;
}

static int trace_route(const struct bench_options *opt, const struct cr_kv_trace *t, FILE *out) {
    struct bench_indexer ix = {.control = {.fd = -1}};
    struct bench_http h = {.fd = -1, .buf = malloc(4097), .cap = 4097};
    struct engine_sim *eng = calloc(opt->instances, sizeof(*eng));
    struct engine_sim *rnd = calloc(opt->instances, sizeof(*rnd));
    struct route_totals *tot = calloc(1, sizeof(*tot));
    struct scratch s;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc = BENCH_EXIT_ERRORS;
    if (h.buf == NULL || eng == NULL || rnd == NULL || tot == NULL ||
        scratch_init(&s, opt->kv_blocks) != CR_OK ||
        engines_init(eng, opt->instances, opt->kv_blocks) != CR_OK ||
        engines_init(rnd, opt->instances, opt->kv_blocks) != CR_OK) {
        fprintf(stderr, "crescent-bench: out of memory for %u engines of %u blocks\n",
                opt->instances, opt->kv_blocks);
        goto done;
    }
    cr_latency_hist_reset(&tot->route);
    cr_latency_hist_reset(&tot->load);
    rc = bench_indexer_open(&ix, opt);
    if (rc != BENCH_EXIT_OK) goto done;
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid(), start = bench_now_ns();
    for (size_t r = 0; r < t->count; r++) {
        pace(opt, t, r, start);
        int step = route_one(&ix, &h, eng, rnd, &rng, t, r, &s, &sb, tot);
        if (step != CR_OK) {
            fprintf(stderr, "crescent-bench: trace request %zu: %s (crescentd at %s)\n", r,
                    cr_strerror(step), opt->http_address);
            rc = BENCH_EXIT_UNREACHABLE;
            goto done;
        }
    }
    double elapsed = (double)(bench_now_ns() - start) / 1e9;
    report_bad_lines(out, t);
    char speed[48] = "as fast as possible";
    if (opt->trace_speed > 0) snprintf(speed, sizeof(speed), "x%.3g", opt->trace_speed);
    fprintf(out, "trace-route: %u instances x %u blocks, block %u tokens, speed %s, %.2f s\n",
            opt->instances, opt->kv_blocks, opt->block_size, speed, elapsed);
    double b = tot->blocks > 0 ? (double)tot->blocks : 1.0;
    fprintf(out, "hit rate: routed %.2f%%, best in hindsight %.2f%%, random %.2f%% "
            "(%" PRIu64 " blocks requested)\n", 100.0 * (double)tot->hit / b,
            100.0 * (double)tot->oracle / b, 100.0 * (double)tot->random_hit / b, tot->blocks);
    fprintf(out, "events: %" PRIu64 " blocks stored or removed, %.0f events/s; "
            "%" PRIu64 " requests without a route, %" PRIu64 " HTTP errors\n", tot->events,
            (double)tot->events / elapsed, tot->unrouted, tot->errors);
    print_latency(out, "/route", &tot->route);
    print_latency(out, "/load", &tot->load);
    rc = tot->errors > 0 ? BENCH_EXIT_ERRORS : BENCH_EXIT_OK;
done:
    bench_indexer_clean_up(&ix);
    engines_free(eng, opt->instances);
    engines_free(rnd, opt->instances);
    if (h.fd >= 0) close(h.fd);
    free(h.buf);
    free(tot);
    scratch_free(&s);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* ---- trace-store ---------------------------------------------------------- */

int bench_trace_store(const struct bench_options *opt, const struct cr_kv_trace *t, FILE *out);

int bench_trace_main(const struct bench_options *opt) {
    struct cr_kv_trace t;
    cr_kv_trace_init(&t);
    char err[512];
    if (cr_kv_trace_load(&t, opt->trace_path, err, sizeof(err)) != CR_OK) {
        fprintf(stderr, "crescent-bench: %s\n", err);
        return BENCH_EXIT_USAGE;
    }
    if (t.count == 0) {
        report_bad_lines(stderr, &t);
        fprintf(stderr, "crescent-bench: %s holds no usable request\n", opt->trace_path);
        cr_kv_trace_free(&t);
        return BENCH_EXIT_USAGE;
    }
    int rc = opt->trace_store ? bench_trace_store(opt, &t, stdout) : trace_route(opt, &t, stdout);
    cr_kv_trace_free(&t);
    return rc;
}

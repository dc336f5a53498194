/* Stress test of /query read by HTTP workers beside the indexer actor
 * (src/actors/indexer_read.c): reader threads query the index with
 * cr_indexer_query_read while a writer thread, playing the actor, stores
 * and evicts blocks (and clears publishers, removes and re-adds instances)
 * in batches under indexer_write_begin/end.
 *
 * Two checks:
 *   - at quiescent points (the writer waits for every reader), each reader's
 *     answer to every prompt, with and without an instance filter, equals a
 *     serial oracle (a bitmap of the blocks each instance holds);
 *   - at all times, instances 2k and 2k+1 hold the same blocks at the end of
 *     each batch (the writer changes both within one hold, one after the
 *     other), so a reader that sees them differ saw half a batch.
 * Reader threads never call cmocka (it is not thread-safe): they count
 * failures and keep the first one's text for the main thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/indexer_internal.h"
#include "actors/subsystems.h"
#include "core/prefix_hash.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/indexer_msgs.h"

#define INSTANCES 8u  /* pairs (2k, 2k+1) mirror each other */
#define PROMPTS 12u
#define BLOCKS 24u    /* per prompt; the held bitmap is one uint32_t */
#define BLOCK_SIZE 4u
#define READERS 4
#define ROUNDS 3000u
#define OPS_PER_ROUND 6u
#define QUIET_EVERY 100u

struct fx {
    struct indexer_state *st;
    uint32_t context;
    uint32_t publisher[INSTANCES];
    uint32_t tokens[PROMPTS][BLOCKS * BLOCK_SIZE];
    uint64_t seq[PROMPTS][BLOCKS];
    uint32_t held[INSTANCES][PROMPTS]; /* the oracle: bit b = block b held */
    _Atomic uint32_t quiet_gen;        /* odd: the writer waits, readers compare */
    _Atomic uint32_t readers_done;
    _Atomic int stop;
    _Atomic uint64_t queries, torn, wrong, errors;
    pthread_mutex_t first_lock;
    char first[256];
    uint64_t rng;
};

static uint32_t next_rand(struct fx *f) {
    f->rng ^= f->rng << 13, f->rng ^= f->rng >> 7, f->rng ^= f->rng << 17;
    return (uint32_t)(f->rng >> 11);
}

static void report(struct fx *f, _Atomic uint64_t *counter, const char *fmt, ...) {
    atomic_fetch_add(counter, 1);
    pthread_mutex_lock(&f->first_lock);
    if (f->first[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->first, sizeof(f->first), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&f->first_lock);
}

static uint64_t engine_hash(uint32_t p, uint32_t b) { return ((uint64_t)p << 20 | b) + 1; }

static uint32_t leading_blocks(uint32_t bits) {
    return bits == UINT32_MAX ? 32u : (uint32_t)__builtin_ctz(~bits);
}

/* ---- the writer (the actor's part) ---- */

static void store(struct fx *f, uint32_t i, uint32_t p, uint32_t from, uint32_t n) {
    uint64_t eh[BLOCKS], parent = from > 0 ? engine_hash(p, from - 1) : 0;
    for (uint32_t k = 0; k < n; k++) eh[k] = engine_hash(p, from + k);
    int rc = cr_prefix_index_stored_tokens(f->st->index, f->publisher[i], f->context,
                                           from > 0 ? &parent : NULL, eh, n,
                                           &f->tokens[p][from * BLOCK_SIZE], n * BLOCK_SIZE,
                                           BLOCK_SIZE, CR_PREFIX_MEDIUM_GPU);
    assert_int_equal(rc, CR_OK);
    for (uint32_t k = 0; k < n; k++) f->held[i][p] |= 1u << (from + k);
}

static void evict(struct fx *f, uint32_t i, uint32_t p, uint32_t b) {
    uint64_t eh = engine_hash(p, b);
    assert_int_equal(cr_prefix_index_removed(f->st->index, f->publisher[i], f->context, &eh, 1,
                                             CR_PREFIX_MEDIUM_ALL),
                     CR_OK);
    f->held[i][p] &= ~(1u << b);
}

static void add_instance(struct fx *f, uint32_t i) {
    char name[16];
    snprintf(name, sizeof(name), "inst-%u", i);
    uint16_t id;
    assert_int_equal(cr_prefix_index_instance_add(f->st->index, name, "default", &id), CR_OK);
    assert_int_equal(cr_prefix_index_publisher(f->st->index, id, 0, &f->publisher[i]), CR_OK);
    memset(f->held[i], 0, sizeof(f->held[i]));
}

/* One change, applied to both instances of a pair in the same hold. */
static void one_op(struct fx *f) {
    uint32_t pair = next_rand(f) % (INSTANCES / 2), p = next_rand(f) % PROMPTS;
    uint32_t a = 2 * pair, r = next_rand(f) % 100;
    uint32_t held = f->held[a][p], hole = leading_blocks(held); /* the twin's are equal */
    uint32_t b = held != 0 ? (uint32_t)__builtin_ctz(held) + r % 5 : BLOCKS; /* tail or middle */
    for (uint32_t i = a; i < a + 2; i++) {
        if (r < 55 && hole < BLOCKS) {
            uint32_t n = 1 + (r % 4);
            store(f, i, p, hole, hole + n > BLOCKS ? BLOCKS - hole : n);
        } else if (r < 95) {
            if (b < BLOCKS && (held & (1u << b))) evict(f, i, p, b);
        } else if (r < 98) {
            assert_int_equal(cr_prefix_index_cleared(f->st->index, f->publisher[i]), CR_OK);
            memset(f->held[i], 0, sizeof(f->held[i]));
        } else {
            uint16_t id;
            char name[16];
            snprintf(name, sizeof(name), "inst-%u", i);
            assert_int_equal(cr_prefix_index_instance_find(f->st->index, name, "default", &id),
                             CR_OK);
            assert_int_equal(cr_prefix_index_instance_remove(f->st->index, id), CR_OK);
            add_instance(f, i);
        }
    }
}

/* ---- the readers (HTTP workers) ---- */

static struct cr_indexer_query query_of(struct fx *f, uint32_t p, const char *filter) {
    return (struct cr_indexer_query){
        .key = {.tenant = "default", .model = "m", .block_size = BLOCK_SIZE},
        .seq_hashes = f->seq[p],
        .block_count = BLOCKS,
        .instance_filter = filter,
    };
}

/* Longest tokens per instance in r; false (and a failure) on a malformed answer. */
static bool tokens_by_instance(struct fx *f, const struct cr_indexer_result *r,
                               uint32_t out[INSTANCES]) {
    memset(out, 0, INSTANCES * sizeof(uint32_t));
    for (uint32_t h = 0; h < r->hit_count; h++) {
        unsigned i;
        const struct cr_indexer_hit *hit = &r->hits[h];
        if (sscanf(hit->instance, "inst-%u", &i) != 1 || i >= INSTANCES || out[i] != 0 ||
            hit->longest_tokens == 0 || hit->longest_tokens % BLOCK_SIZE != 0 ||
            hit->longest_tokens > BLOCKS * BLOCK_SIZE ||
            hit->medium_tokens[CR_PREFIX_MEDIUM_GPU] != hit->longest_tokens) {
            report(f, &f->wrong, "malformed hit %s longest %u", hit->instance, hit->longest_tokens);
            return false;
        }
        out[i] = hit->longest_tokens;
    }
    return true;
}

static void check_against_oracle(struct fx *f, uint32_t p) {
    for (int filtered = 0; filtered <= (int)INSTANCES; filtered++) {
        char name[16];
        snprintf(name, sizeof(name), "inst-%d", filtered - 1);
        struct cr_indexer_query q = query_of(f, p, filtered > 0 ? name : NULL);
        struct cr_indexer_result *r = NULL;
        if (cr_indexer_query_read(f->st, &q, &r) != CR_OK || r == NULL) {
            report(f, &f->errors, "quiet query of prompt %u failed", p);
            return;
        }
        uint32_t got[INSTANCES];
        if (tokens_by_instance(f, r, got)) {
            for (uint32_t i = 0; i < INSTANCES; i++) {
                uint32_t want = leading_blocks(f->held[i][p]) * BLOCK_SIZE;
                if (filtered > 0 && i != (uint32_t)(filtered - 1)) want = 0;
                if (got[i] != want)
                    report(f, &f->wrong, "prompt %u filter %d inst-%u: %u tokens, oracle %u", p,
                         filtered - 1, i, got[i], want);
            }
            bool hit = false;
            for (uint32_t i = 0; i < INSTANCES; i++) hit |= got[i] > 0;
            if (r->match != (hit ? CR_INDEXER_MATCH_HIT : CR_INDEXER_MATCH_MISS))
                report(f, &f->wrong, "prompt %u: match %d", p, (int)r->match);
        }
        cr_indexer_result_free(r);
    }
}

static void *reader(void *arg) {
    struct fx *f = arg;
    uint32_t seen_gen = 0, p = 0;
    while (!atomic_load(&f->stop)) {
        uint32_t gen = atomic_load_explicit(&f->quiet_gen, memory_order_acquire);
        if ((gen & 1u) && gen != seen_gen) {
            for (uint32_t k = 0; k < PROMPTS; k++) check_against_oracle(f, k);
            seen_gen = gen;
            atomic_fetch_add_explicit(&f->readers_done, 1, memory_order_release);
            continue;
        }
        p = (p + 1) % PROMPTS;
        struct cr_indexer_query q = query_of(f, p, NULL);
        struct cr_indexer_result *r = NULL;
        if (cr_indexer_query_read(f->st, &q, &r) != CR_OK || r == NULL) {
            report(f, &f->errors, "query of prompt %u failed", p);
            continue;
        }
        atomic_fetch_add_explicit(&f->queries, 1, memory_order_relaxed);
        uint32_t got[INSTANCES];
        if (tokens_by_instance(f, r, got)) {
            for (uint32_t i = 0; i < INSTANCES; i += 2)
                if (got[i] != got[i + 1])
                    report(f, &f->torn, "prompt %u: inst-%u has %u tokens, its twin %u", p, i,
                         got[i], got[i + 1]);
        }
        cr_indexer_result_free(r);
    }
    return NULL;
}

static void test_readers_beside_ingest_and_eviction(void **state) {
    (void)state;
    struct cr_daemon_config config;
    cr_daemon_config_default(&config);
    config.indexer_config[0] = '\0';
    unsetenv("CONDUCTOR_CONFIG_PATH");
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    void *st;
    assert_int_equal(cr_indexer_def.create(&config, &st), CR_OK);
    f->st = st;
    f->rng = 0x9e3779b97f4a7c15ull;
    pthread_mutex_init(&f->first_lock, NULL);

    indexer_write_begin(f->st);
    struct cr_prefix_context_key key = {.tenant = "default", .model = "m",
                                        .block_size = BLOCK_SIZE};
    assert_int_equal(cr_prefix_index_context(f->st->index, &key, true, &f->context), CR_OK);
    struct cr_prefix_context_info info;
    assert_int_equal(cr_prefix_index_context_info(f->st->index, f->context, &info), CR_OK);
    for (uint32_t i = 0; i < INSTANCES; i++) add_instance(f, i);
    indexer_write_end(f->st);
    for (uint32_t p = 0; p < PROMPTS; p++) {
        for (uint32_t t = 0; t < BLOCKS * BLOCK_SIZE; t++) f->tokens[p][t] = p * 100000u + t + 1;
        cr_prefix_hash_chain(f->tokens[p], BLOCKS * BLOCK_SIZE, BLOCK_SIZE, info.seed, false, 0,
                             f->seq[p], BLOCKS);
    }

    pthread_t threads[READERS];
    for (int t = 0; t < READERS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, reader, f), 0);
    uint32_t quiet_checks = 0;
    for (uint32_t round = 1; round <= ROUNDS; round++) {
        indexer_write_begin(f->st);
        for (uint32_t k = 0; k < OPS_PER_ROUND; k++) one_op(f);
        indexer_write_end(f->st);
        if (round % 8 == 0) sched_yield(); /* let readers in on a busy machine */
        if (round % QUIET_EVERY != 0) continue;
        atomic_store(&f->readers_done, 0);
        atomic_fetch_add_explicit(&f->quiet_gen, 1, memory_order_release); /* odd: quiet */
        while (atomic_load_explicit(&f->readers_done, memory_order_acquire) < READERS)
            sched_yield();
        atomic_fetch_add_explicit(&f->quiet_gen, 1, memory_order_release);
        quiet_checks++;
    }
    atomic_store(&f->stop, 1);
    for (int t = 0; t < READERS; t++) pthread_join(threads[t], NULL);

    print_message("%llu queries beside %u batches, %u quiescent comparisons\n",
                  (unsigned long long)atomic_load(&f->queries), ROUNDS, quiet_checks);
    if (f->first[0] != '\0') print_error("first failure: %s\n", f->first);
    assert_int_equal(atomic_load(&f->errors), 0);
    assert_int_equal(atomic_load(&f->wrong), 0);
    assert_int_equal(atomic_load(&f->torn), 0);
    assert_int_equal(quiet_checks, ROUNDS / QUIET_EVERY);
    assert_true(atomic_load(&f->queries) > 0);
    /* Every shared answer was counted as a query. */
    assert_true(atomic_load(&f->st->queries_shared) >= atomic_load(&f->queries));
    pthread_mutex_destroy(&f->first_lock);
    cr_indexer_def.destroy(f->st);
    free(f);
}

/* A query the shared path leaves to the actor: an unknown context. */
static void test_unknown_context_is_the_actors(void **state) {
    (void)state;
    struct cr_daemon_config config;
    cr_daemon_config_default(&config);
    config.indexer_config[0] = '\0';
    void *st;
    assert_int_equal(cr_indexer_def.create(&config, &st), CR_OK);
    uint64_t h = 1;
    struct cr_indexer_query q = {.key = {.tenant = "default", .model = "nope", .block_size = 4},
                                 .seq_hashes = &h,
                                 .block_count = 1};
    struct cr_indexer_result *r = (struct cr_indexer_result *)&h;
    assert_int_equal(cr_indexer_query_read(st, &q, &r), CR_OK);
    assert_null(r);
    cr_indexer_def.destroy(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readers_beside_ingest_and_eviction),
        cmocka_unit_test(test_unknown_context_is_the_actors),
    };
    return cmocka_run_group_tests_name("indexer_read", tests, NULL, NULL);
}

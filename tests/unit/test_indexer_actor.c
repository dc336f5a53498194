/* Unit tests for the indexer actor's load reports (src/actors/indexer.c) on
 * a real runtime with a manual clock: instances known only from POST /load
 * are bounded and forgotten when their reports stop, while instances with a
 * publisher keep theirs.  Asks go in as the HTTP routes send them; nothing
 * sleeps for time to pass -- the test moves the clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/indexer_internal.h"
#include "runtime/runtime.h"
#include "actors/subsystems.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/indexer_msgs.h"

#define SEC 1000000000ull
#define ASK_NS (5 * SEC)

struct fx {
    _Atomic uint64_t now_ns;
    struct cr_runtime *rt;
    struct cr_actor *indexer;
    void *state;
};

static uint64_t manual_now(void *ctx) { return atomic_load(&((struct fx *)ctx)->now_ns); }

static void advance_ns(struct fx *f, uint64_t ns) {
    atomic_fetch_add(&f->now_ns, ns);
    cr_runtime_clock_changed(f->rt);
}

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    struct cr_daemon_config config;
    cr_daemon_config_default(&config);
    config.indexer_config[0] = '\0';
    unsetenv("CONDUCTOR_CONFIG_PATH");
    assert_int_equal(cr_indexer_def.create(&config, &f->state), CR_OK);
    struct cr_runtime_config rc;
    cr_runtime_config_default(&rc);
    rc.pin_threads = false;
    rc.clock = (struct cr_clock){.now_ns = manual_now, .ctx = f};
    atomic_store(&f->now_ns, 1000 * SEC);
    assert_int_equal(cr_runtime_create(&rc, &f->rt), CR_OK);
    assert_int_equal(cr_runtime_spawn(f->rt, "indexer", cr_indexer_def.ops, f->state, &f->indexer),
                     CR_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    cr_runtime_destroy(f->rt);
    cr_indexer_def.destroy(f->state);
    free(f);
    return 0;
}

/* ---- asks ---- */

static int load(struct fx *f, const char *instance, uint64_t waiting) {
    struct cr_indexer_load l = {.kv_total_blocks = 100, .num_requests_waiting = waiting};
    snprintf(l.instance_id, sizeof(l.instance_id), "%s", instance);
    snprintf(l.tenant_id, sizeof(l.tenant_id), "default");
    struct cr_msg msg = {.type = CR_MSG_INDEXER_LOAD};
    CR_MSG_BODY(&msg, struct cr_msg_indexer_load)->load = &l;
    return cr_ask(f->indexer, &msg, ASK_NS);
}

static int reg(struct fx *f, const char *instance, const char *endpoint) {
    struct cr_indexer_registration r = {.block_size = 16};
    snprintf(r.instance_id, sizeof(r.instance_id), "%s", instance);
    snprintf(r.tenant_id, sizeof(r.tenant_id), "default");
    snprintf(r.endpoint, sizeof(r.endpoint), "%s", endpoint);
    snprintf(r.type, sizeof(r.type), "vLLM");
    snprintf(r.model, sizeof(r.model), "m");
    char error[CR_INDEXER_ERROR_MAX] = "";
    struct cr_msg msg = {.type = CR_MSG_INDEXER_REGISTER};
    *CR_MSG_BODY(&msg, struct cr_msg_indexer_register) =
        (struct cr_msg_indexer_register){.reg = &r, .error = error};
    return cr_ask(f->indexer, &msg, ASK_NS);
}

/* /global_view's document (caller json_decref's it). */
static json_t *global_view(struct fx *f) {
    json_t *out = NULL;
    struct cr_msg msg = {.type = CR_MSG_INDEXER_GLOBAL_VIEW};
    CR_MSG_BODY(&msg, struct cr_msg_indexer_json)->json_out = (struct json_t **)&out;
    assert_int_equal(cr_ask(f->indexer, &msg, ASK_NS), CR_OK);
    assert_non_null(out);
    return out;
}

static long long instance_count(struct fx *f) {
    json_t *v = global_view(f);
    long long n = json_integer_value(json_object_get(v, "instances"));
    assert_int_equal(json_array_size(json_object_get(v, "instance_list")), (size_t)n);
    json_decref(v);
    return n;
}

/* The instance's load report in /global_view: NULL when it is not listed,
 * json null when listed without a report (caller json_decref's it). */
static json_t *instance_load(struct fx *f, const char *instance) {
    json_t *v = global_view(f), *found = NULL, *item;
    size_t i;
    json_array_foreach(json_object_get(v, "instance_list"), i, item) {
        if (strcmp(json_string_value(json_object_get(item, "instance_id")), instance) == 0)
            found = json_incref(json_object_get(item, "load"));
    }
    json_decref(v);
    return found;
}

/* /route over an empty prompt for model m: who wins and among how many. */
/* Routes with include_unhealthy: the publishers registered here never
 * connect (nothing listens on their endpoints). */
static uint32_t route(struct fx *f, char *best, size_t best_size) {
    struct cr_indexer_query q = {
        .key = {.model = "m", .block_size = 16}, .route = true, .include_unhealthy = true};
    struct cr_indexer_result *r = NULL;
    struct cr_msg msg = {.type = CR_MSG_INDEXER_QUERY};
    *CR_MSG_BODY(&msg, struct cr_msg_indexer_query) =
        (struct cr_msg_indexer_query){.query = &q, .result_out = &r};
    assert_int_equal(cr_ask(f->indexer, &msg, ASK_NS), CR_OK);
    assert_non_null(r);
    snprintf(best, best_size, "%s", r->best_instance);
    uint32_t candidates = r->candidates;
    cr_indexer_result_free(r);
    return candidates;
}

static uint64_t stat_of(struct fx *f, const char *name) {
    struct cr_actor_stats out = {0};
    memset(&out, 0, sizeof(out));
    struct cr_msg msg = {.type = CR_MSG_STATS};
    CR_MSG_BODY(&msg, struct cr_msg_stats)->out = &out;
    assert_int_equal(cr_ask(f->indexer, &msg, ASK_NS), CR_OK);
    for (uint32_t i = 0; i < out.extra_count; i++)
        if (strcmp(out.extra[i].name, name) == 0) return out.extra[i].value;
    fail_msg("no stat %s", name);
    return 0;
}

/* ---- tests ---- */

/* A client posting /load for ever new names cannot grow the instance table
 * past CR_INDEXER_LOAD_ONLY_MAX; names already known keep reporting. */
static void test_load_only_instances_are_bounded(void **state) {
    struct fx *f = *state;
    char name[32];
    for (uint32_t i = 0; i < CR_INDEXER_LOAD_ONLY_MAX; i++) {
        snprintf(name, sizeof(name), "junk-%u", i);
        assert_int_equal(load(f, name, 0), CR_OK);
    }
    assert_int_equal(load(f, "one-too-many", 0), CR_ERR_NOMEM);
    assert_int_equal(load(f, "junk-7", 3), CR_OK); /* a known one still reports */
    assert_int_equal(instance_count(f), CR_INDEXER_LOAD_ONLY_MAX);
    assert_int_equal(stat_of(f, "load_only_instances"), CR_INDEXER_LOAD_ONLY_MAX);
    assert_int_equal(stat_of(f, "load_only_rejected_total"), 1);
    json_t *l = instance_load(f, "junk-7");
    assert_non_null(l);
    assert_int_equal(json_integer_value(json_object_get(l, "num_requests_waiting")), 3);
    json_decref(l);
}

/* A load-only instance is forgotten once its last report is older than the
 * TTL: gone from /global_view and from /route's candidates, and its place
 * in the bound is free again.  One that keeps reporting stays. */
static void test_silent_load_only_instances_expire(void **state) {
    struct fx *f = *state;
    char name[32], best[CR_INDEXER_NAME_MAX];
    for (uint32_t i = 0; i < CR_INDEXER_LOAD_ONLY_MAX; i++) {
        snprintf(name, sizeof(name), "junk-%u", i);
        assert_int_equal(load(f, name, 0), CR_OK);
    }
    assert_int_equal(load(f, "keeps-reporting", 0), CR_ERR_NOMEM);
    assert_int_equal(load(f, "junk-0", 0), CR_OK);
    advance_ns(f, CR_INDEXER_LOAD_TTL_NS / 2);
    assert_int_equal(load(f, "junk-0", 0), CR_OK); /* junk-0 keeps reporting */
    advance_ns(f, CR_INDEXER_LOAD_TTL_NS / 2);
    /* The others' reports are TTL old: forgotten, room again. */
    assert_int_equal(load(f, "keeps-reporting", 0), CR_OK);
    assert_int_equal(instance_count(f), 2);
    assert_int_equal(stat_of(f, "load_only_expired_total"), CR_INDEXER_LOAD_ONLY_MAX - 1);
    assert_int_equal(route(f, best, sizeof(best)), 2);
    advance_ns(f, CR_INDEXER_LOAD_TTL_NS / 2);
    assert_int_equal(load(f, "keeps-reporting", 0), CR_OK);
    advance_ns(f, CR_INDEXER_LOAD_TTL_NS / 2);
    /* junk-0 is silent since TTL: not a candidate, not listed. */
    assert_int_equal(route(f, best, sizeof(best)), 1);
    assert_string_equal(best, "keeps-reporting");
    assert_null(instance_load(f, "junk-0"));
    assert_int_equal(instance_count(f), 1);
    assert_int_equal(stat_of(f, "load_only_instances"), 1);
}

/* An instance with a publisher keeps its load report however old (it is
 * removed with its last publisher); one that reported load before it was
 * registered stops counting as load-only. */
static void test_registered_instances_keep_their_load(void **state) {
    struct fx *f = *state;
    char best[CR_INDEXER_NAME_MAX];
    assert_int_equal(load(f, "early", 4), CR_OK); /* reports before registering */
    assert_int_equal(stat_of(f, "load_only_instances"), 1);
    assert_int_equal(reg(f, "early", "tcp://127.0.0.1:9"), CR_OK);
    assert_int_equal(reg(f, "late", "tcp://127.0.0.1:9"), CR_OK);
    assert_int_equal(load(f, "late", 5), CR_OK);
    assert_int_equal(stat_of(f, "load_only_instances"), 0);
    advance_ns(f, 3 * CR_INDEXER_LOAD_TTL_NS);
    assert_int_equal(instance_count(f), 2);
    json_t *l = instance_load(f, "early");
    assert_non_null(l);
    assert_int_equal(json_integer_value(json_object_get(l, "num_requests_waiting")), 4);
    json_decref(l);
    assert_int_equal(route(f, best, sizeof(best)), 2);
    assert_int_equal(stat_of(f, "load_only_expired_total"), 0);
}

/* A registration refused for its endpoint leaves no instance behind (the
 * instance table used to keep an empty one per failed /register). */
static void test_failed_register_leaves_no_instance(void **state) {
    struct fx *f = *state;
    assert_int_equal(reg(f, "typo", "nope://x"), CR_ERR_INVALID_PARAMS);
    assert_int_equal(instance_count(f), 0);
    assert_null(instance_load(f, "typo"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_load_only_instances_are_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_silent_load_only_instances_expire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registered_instances_keep_their_load, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_register_leaves_no_instance, setup, teardown),
    };
    return cmocka_run_group_tests_name("indexer_actor", tests, NULL, NULL);
}

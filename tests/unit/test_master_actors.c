/* The store master's actors (segments, leases) on a real runtime with a
 * manual clock: calls in process (MASTER_CALL as an ask), store events
 * delivered to both the publisher and the indexer, eviction decided by
 * leases and applied by segments, clients expired by the segments timer.
 * Nothing sleeps for time to pass: the test moves the clock and waits
 * (bounded) for the actors to react. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc/rpc_codec.h"
#include "runtime/runtime.h"
#include "actors/subsystems.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/master_msgs.h"
#include "msgs/store_event.h"
#include "msgs/store_msgs.h"

#define MiB (1u << 20)

/* ---- a sink actor standing in for the publisher and the indexer --------- */

#define SINK_RECORDS 256u

struct sink {
    _Atomic uint64_t events[3];
    char last_key[64];
    _Atomic int last_key_ready;
    /* BlockStoreEvents in arrival order, "tenant/key/tokens" ([0, records) written
     * before `records` is bumped). */
    char record[SINK_RECORDS][96];
    _Atomic uint32_t records;
};

static void sink_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    struct sink *s = arg;
    if (msg->type != CR_MSG_STORE_EVENT) return;
    cr_store_event_chain *chain = CR_MSG_BODY(msg, struct cr_msg_store_event)->chain;
    for (const cr_store_event *ev = chain->head; ev != NULL; ev = ev->next) {
        if (ev->kind == CR_STORE_EVENT_BLOCK_STORE && ev->key.len < sizeof(s->last_key)) {
            memcpy(s->last_key, ev->key.ptr, ev->key.len);
            s->last_key[ev->key.len] = '\0';
            atomic_store(&s->last_key_ready, 1);
            uint32_t n = atomic_load(&s->records);
            if (n < SINK_RECORDS) {
                snprintf(s->record[n], sizeof(s->record[n]), "%.24s/%.63s/%zu",
                         CR_MSG_BODY(msg, struct cr_msg_store_event)->tenant, s->last_key,
                         ev->info.token_count);
                atomic_store(&s->records, n + 1);
            }
        }
        atomic_fetch_add(&s->events[ev->kind], 1);
    }
    cr_store_event_chain_release(chain);
}

static const struct cr_actor_ops sink_ops = {.handle = sink_handle};

/* ---- fixture ------------------------------------------------------------- */

struct fixture {
    _Atomic uint64_t now_ns;
    struct cr_runtime *rt;
    struct cr_daemon_config config;
    struct cr_subsystems peers;
    struct sink publisher, indexer;
};

static uint64_t manual_now(void *ctx) { return atomic_load(&((struct fixture *)ctx)->now_ns); }

static void advance_ms(struct fixture *f, uint64_t ms) {
    atomic_fetch_add(&f->now_ns, ms * 1000000u);
    cr_runtime_clock_changed(f->rt);
}

/* The runtime on the manual clock, at 1 s. */
static void runtime_start(struct fixture *f) {
    struct cr_runtime_config rc;
    cr_runtime_config_default(&rc);
    rc.pin_threads = false;
    rc.clock = (struct cr_clock){.now_ns = manual_now, .ctx = f};
    atomic_store(&f->now_ns, 1000000000ull);
    assert_int_equal(cr_runtime_create(&rc, &f->rt), CR_OK);
    f->peers.config = &f->config;
}

static void start(struct fixture *f) {
    runtime_start(f);
    f->peers.ask_timeout_ns = 5000000000ull;
    const struct cr_subsystem_def *defs[] = {&cr_segments_def, &cr_leases_def};
    enum cr_subsystem ids[] = {CR_SUBSYSTEM_SEGMENTS, CR_SUBSYSTEM_LEASES};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(defs[i]->create(&f->config, &f->peers.states[ids[i]]), CR_OK);
        assert_int_equal(cr_runtime_spawn(f->rt, defs[i]->name, defs[i]->ops,
                                          f->peers.states[ids[i]], &f->peers.actors[ids[i]]),
                         CR_OK);
    }
    assert_int_equal(cr_runtime_spawn(f->rt, "publisher", &sink_ops, &f->publisher,
                                      &f->peers.actors[CR_SUBSYSTEM_PUBLISHER]),
                     CR_OK);
    assert_int_equal(cr_runtime_spawn(f->rt, "indexer", &sink_ops, &f->indexer,
                                      &f->peers.actors[CR_SUBSYSTEM_INDEXER]),
                     CR_OK);
    for (int i = 0; i < 2; i++) {
        struct cr_msg wire = {.type = CR_MSG_WIRE};
        wire.body.ptr[0] = &f->peers;
        assert_int_equal(cr_send(f->peers.actors[ids[i]], &wire), CR_OK);
    }
}

static void stop(struct fixture *f) {
    cr_runtime_destroy(f->rt);
    cr_segments_def.destroy(f->peers.states[CR_SUBSYSTEM_SEGMENTS]);
    cr_leases_def.destroy(f->peers.states[CR_SUBSYSTEM_LEASES]);
    free(f);
}

static struct fixture *fixture_new(void) {
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    cr_daemon_config_default(&f->config);
    return f;
}

/* Bounded wait for a condition another thread makes true. */
#define WAIT_FOR(cond)                                                                             \
    do {                                                                                           \
        struct timespec t0_, t1_;                                                                  \
        clock_gettime(CLOCK_MONOTONIC, &t0_);                                                      \
        while (!(cond)) {                                                                          \
            clock_gettime(CLOCK_MONOTONIC, &t1_);                                                  \
            assert_true(t1_.tv_sec - t0_.tv_sec < 60); /* a hang: the machine is shared */         \
            sched_yield();                                                                         \
        }                                                                                          \
    } while (0)

/* Runs one method in process; returns the unpacked response (caller frees). */
static ProtobufCMessage *call(struct fixture *f, uint16_t method, ProtobufCMessage *req) {
    char err[CR_RPC_ERROR_MAX];
    assert_int_equal(cr_rpc_validate(method, req, err), CR_OK);
    struct cr_master_call c = {.method = method, .request = req};
    struct cr_msg msg = {.type = CR_MSG_MASTER_CALL};
    CR_MSG_BODY(&msg, struct cr_msg_master_call)->call = &c;
    assert_int_equal(cr_ask(f->peers.actors[CR_SUBSYSTEM_SEGMENTS], &msg, 5000000000ull), CR_OK);
    assert_int_equal(c.status, CR_OK);
    const struct cr_rpc_method *m = cr_rpc_method_find(method);
    ProtobufCMessage *resp = protobuf_c_message_unpack(m->response, NULL, c.reply_len, c.reply);
    cr_master_call_reply_free(&c);
    assert_non_null(resp);
    return resp;
}

static int32_t status_of(ProtobufCMessage *resp) {
    int32_t code = cr_rpc_status_code(resp);
    protobuf_c_message_free_unpacked(resp, NULL);
    return code;
}

static Crescent__Master__UUID client_a = {
    PROTOBUF_C_MESSAGE_INIT(&crescent__master__uuid__descriptor), 0xA, 1};

/* The secret segments issued to client_a at its first mount (one fixture
 * at a time): client_a's later calls carry it, as libcrescent's would. */
static uint8_t secret_a[CR_STORE_CLIENT_SECRET_BYTES];
static protobuf_c_boolean has_secret_a;
#define WITH_SECRET_A(r)                                                                           \
    ((r).has_client_secret = has_secret_a,                                                       \
     (r).client_secret = (ProtobufCBinaryData){.len = sizeof(secret_a), .data = secret_a})

static void mount(struct fixture *f, const char *name, uint64_t size, uint64_t base) {
    Crescent__Master__MountSegmentRequest r = CRESCENT__MASTER__MOUNT_SEGMENT_REQUEST__INIT;
    r.segment_name = (char *)name;
    r.size = size;
    r.buffer = base;
    r.client_id = &client_a;
    r.transport_endpoint = "10.0.0.1:7000";
    WITH_SECRET_A(r);
    Crescent__Master__MountSegmentResponse *resp =
        (void *)call(f, CRESCENT__MASTER__METHOD__MOUNT_SEGMENT, &r.base);
    assert_int_equal(resp->status_code, CR_OK);
    if (resp->has_client_secret) { /* the first mount of this fixture's store */
        assert_int_equal(resp->client_secret.len, sizeof(secret_a));
        memcpy(secret_a, resp->client_secret.data, sizeof(secret_a));
        has_secret_a = 1;
    }
    protobuf_c_message_free_unpacked(&resp->base, NULL);
}

static int32_t put(struct fixture *f, const char *key, int64_t size, bool soft_pin) {
    Crescent__Master__ReplicateConfig cfg = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    cfg.with_soft_pin = soft_pin;
    Crescent__Master__BlockInfo block = CRESCENT__MASTER__BLOCK_INFO__INIT;
    block.model_name = "m";
    Crescent__Master__PutStartRequest s = CRESCENT__MASTER__PUT_START_REQUEST__INIT;
    s.key = (char *)key;
    s.value_length = size;
    s.config = &cfg;
    s.client_id = &client_a;
    WITH_SECRET_A(s);
    s.block = &block;
    int32_t rc = status_of(call(f, CRESCENT__MASTER__METHOD__PUT_START, &s.base));
    if (rc != CR_OK) return rc;
    Crescent__Master__PutEndRequest e = CRESCENT__MASTER__PUT_END_REQUEST__INIT;
    e.key = (char *)key;
    e.client_id = &client_a;
    WITH_SECRET_A(e);
    return status_of(call(f, CRESCENT__MASTER__METHOD__PUT_END, &e.base));
}

static uint64_t stat_of(struct fixture *f, enum cr_subsystem who, const char *name) {
    struct cr_actor_stats s = {0}; /* histograms NULL: none asked for */
    struct cr_msg msg = {.type = CR_MSG_STATS};
    CR_MSG_BODY(&msg, struct cr_msg_stats)->out = &s;
    assert_int_equal(cr_ask(f->peers.actors[who], &msg, 5000000000ull), CR_OK);
    for (uint32_t i = 0; i < s.extra_count; i++)
        if (strcmp(s.extra[i].name, name) == 0) return s.extra[i].value;
    fail_msg("no stat %s", name);
    return 0;
}

static bool exists(struct fixture *f, const char *key) {
    Crescent__Master__ExistKeyRequest r = CRESCENT__MASTER__EXIST_KEY_REQUEST__INIT;
    r.key = (char *)key;
    Crescent__Master__ExistKeyResponse *resp =
        (void *)call(f, CRESCENT__MASTER__METHOD__EXIST_KEY, &r.base);
    bool found = resp->exists;
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    return found;
}

/* ---- tests ----------------------------------------------------------------- */

static void test_put_end_event_reaches_publisher_and_indexer(void **state) {
    (void)state;
    struct fixture *f = fixture_new();
    start(f);
    mount(f, "seg", MiB, 0x1000);
    assert_int_equal(put(f, "block-1", 4096, false), CR_OK);
    WAIT_FOR(atomic_load(&f->publisher.events[CR_STORE_EVENT_BLOCK_STORE]) == 1 &&
             atomic_load(&f->indexer.events[CR_STORE_EVENT_BLOCK_STORE]) == 1);
    WAIT_FOR(atomic_load(&f->publisher.last_key_ready) && atomic_load(&f->indexer.last_key_ready));
    assert_string_equal(f->publisher.last_key, "block-1");
    assert_string_equal(f->indexer.last_key, "block-1");
    /* RemoveAll is an event too. */
    Crescent__Master__RemoveAllRequest ra = CRESCENT__MASTER__REMOVE_ALL_REQUEST__INIT;
    assert_int_equal(status_of(call(f, CRESCENT__MASTER__METHOD__REMOVE_ALL, &ra.base)), CR_OK);
    WAIT_FOR(atomic_load(&f->publisher.events[CR_STORE_EVENT_REMOVE_ALL]) == 1 &&
             atomic_load(&f->indexer.events[CR_STORE_EVENT_REMOVE_ALL]) == 1);
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_SEGMENTS, "events_dropped_total"), 0);
    stop(f);
}

/* ---- calls sent as messages: replies and events come back in chains ----- */

#define CHAINED_KEYS 96u

struct collector {
    _Atomic uint32_t done;        /* calls answered */
    _Atomic uint32_t longest;     /* longest MASTER_DONE chain */
    _Atomic uint32_t bad_status;  /* transport errors or refusals */
    uint32_t order[2 * CHAINED_KEYS]; /* call indexes in reply order */
};

struct chained_call {
    struct cr_master_call call;
    uint32_t index;
};

static void collector_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    struct collector *c = arg;
    if (msg->type != CR_MSG_MASTER_DONE) return;
    uint32_t length = 0;
    for (struct cr_master_call *call = CR_MSG_BODY(msg, struct cr_msg_master_call)->call; call;
         call = call->next) {
        const struct cr_rpc_method *m = cr_rpc_method_find(call->method);
        ProtobufCMessage *resp =
            protobuf_c_message_unpack(m->response, NULL, call->reply_len, call->reply);
        if (call->status != CR_OK || resp == NULL || cr_rpc_status_code(resp) != CR_OK)
            atomic_fetch_add(&c->bad_status, 1);
        if (resp != NULL) protobuf_c_message_free_unpacked(resp, NULL);
        struct chained_call *cc = (struct chained_call *)call;
        uint32_t n = atomic_load(&c->done);
        c->order[n] = cc->index;
        atomic_store(&c->done, n + 1);
        length++;
    }
    if (length > atomic_load(&c->longest)) atomic_store(&c->longest, length);
}

static const struct cr_actor_ops collector_ops = {.handle = collector_handle};

/* PutStart then PutEnd for 96 keys under three tenants (in runs of 1 to 3
 * keys, so event chains break on tenant changes), every fifth key's block
 * with 3000 token ids (12 KB: larger than a chain's default room, so chains
 * also break on bytes and one is sized for it alone), all sent at once as
 * messages: every call is answered once and in order, no chain is longer
 * than its cap, and both consumers see every event, in put order, under
 * its own tenant, with its tokens. */
static void test_chained_replies_and_events_keep_order_and_tenant(void **state) {
    (void)state;
    struct fixture *f = fixture_new();
    start(f);
    mount(f, "seg", 64 * MiB, 0x1000);
    struct collector *col = calloc(1, sizeof(*col));
    assert_non_null(col);
    struct cr_actor *collector;
    assert_int_equal(cr_runtime_spawn(f->rt, "collector", &collector_ops, col, &collector),
                     CR_OK);
    static const char *const tenants[] = {"default", "tenant-b", "tenant-c"};
    char keys[CHAINED_KEYS][16];
    const char *tenant_of[CHAINED_KEYS];
    Crescent__Master__PutStartRequest *starts = calloc(CHAINED_KEYS, sizeof(*starts));
    Crescent__Master__PutEndRequest *ends = calloc(CHAINED_KEYS, sizeof(*ends));
    struct chained_call *calls = calloc(2 * CHAINED_KEYS, sizeof(*calls));
    assert_true(starts && ends && calls);
    Crescent__Master__ReplicateConfig cfg = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    static uint32_t tokens[3000];
    _Static_assert(sizeof(tokens) > CR_STORE_EVENT_CHAIN_BYTES_DEFAULT, "one event overflows");
    for (uint32_t t = 0; t < 3000; t++) tokens[t] = t;
    Crescent__Master__BlockInfo block = CRESCENT__MASTER__BLOCK_INFO__INIT;
    block.model_name = "m";
    block.n_token_ids = 3000;
    block.token_ids = tokens;
    for (uint32_t i = 0; i < CHAINED_KEYS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%03u", i);
        tenant_of[i] = tenants[(i / (1 + i % 3)) % 3];
        starts[i] = (Crescent__Master__PutStartRequest)CRESCENT__MASTER__PUT_START_REQUEST__INIT;
        starts[i].key = keys[i];
        starts[i].value_length = 4096;
        starts[i].config = &cfg;
        starts[i].client_id = &client_a;
        WITH_SECRET_A(starts[i]);
        starts[i].tenant_id = (char *)tenant_of[i];
        if (i % 5 == 0) starts[i].block = &block;
        ends[i] = (Crescent__Master__PutEndRequest)CRESCENT__MASTER__PUT_END_REQUEST__INIT;
        ends[i].key = keys[i];
        ends[i].client_id = &client_a;
        WITH_SECRET_A(ends[i]);
        ends[i].tenant_id = (char *)tenant_of[i];
    }
    for (uint32_t i = 0; i < 2 * CHAINED_KEYS; i++) {
        uint32_t k = i / 2;
        calls[i].index = i;
        calls[i].call = (struct cr_master_call){
            .method = i % 2 == 0 ? CRESCENT__MASTER__METHOD__PUT_START
                                 : CRESCENT__MASTER__METHOD__PUT_END,
            .request = i % 2 == 0 ? &starts[k].base : &ends[k].base,
            .reply_to = collector};
        struct cr_msg msg = {.type = CR_MSG_MASTER_CALL};
        CR_MSG_BODY(&msg, struct cr_msg_master_call)->call = &calls[i].call;
        assert_int_equal(cr_send(f->peers.actors[CR_SUBSYSTEM_SEGMENTS], &msg), CR_OK);
    }
    WAIT_FOR(atomic_load(&col->done) == 2 * CHAINED_KEYS);
    assert_int_equal(atomic_load(&col->bad_status), 0);
    assert_in_range(atomic_load(&col->longest), 1, 16);
    for (uint32_t i = 0; i < 2 * CHAINED_KEYS; i++) assert_int_equal(col->order[i], i);
    struct sink *sinks[] = {&f->publisher, &f->indexer};
    for (int s = 0; s < 2; s++) {
        WAIT_FOR(atomic_load(&sinks[s]->records) == CHAINED_KEYS);
        for (uint32_t i = 0; i < CHAINED_KEYS; i++) {
            char want[64];
            snprintf(want, sizeof(want), "%s/%s/%u", tenant_of[i], keys[i],
                     i % 5 == 0 ? 3000u : 0u);
            assert_string_equal(sinks[s]->record[i], want);
        }
    }
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_SEGMENTS, "events_dropped_total"), 0);
    stop(f);
    for (uint32_t i = 0; i < 2 * CHAINED_KEYS; i++) cr_master_call_reply_free(&calls[i].call);
    free(calls);
    free(starts);
    free(ends);
    free(col);
}

static void test_leases_evicts_to_the_watermark(void **state) {
    (void)state;
    struct fixture *f = fixture_new();
    f->config.eviction_high_watermark_ratio = 0.5;
    f->config.eviction_ratio = 0.1;
    f->config.allow_evict_soft_pinned_objects = false;
    f->config.default_kv_lease_ttl = 600000;
    /* The clock below may run up to 60 s with no Ping: the default client TTL
     * (10 s) would expire the client and unmount its segment mid-pass. */
    f->config.client_ttl = 3600;
    start(f);
    mount(f, "seg", MiB, 0x1000);
    assert_int_equal(put(f, "pinned", 64 * 1024, true), CR_OK);
    assert_true(exists(f, "pinned")); /* leased from now on (ttl 10 min) */
    assert_int_equal(put(f, "soft", 64 * 1024, true), CR_OK);
    char key[32];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "plain%d", i);
        advance_ms(f, 1); /* distinct access times: LRU order is the put order */
        assert_int_equal(put(f, key, 64 * 1024, false), CR_OK);
    }
    /* 12 x 64 KiB = 75%: the next leases tick (100 ms) starts a pass.  The
     * clock moves a tick per check, at most 60 s in all: unbounded, it could
     * pass the 10 min lease on "pinned" while a loaded machine ran the pass. */
    uint64_t advanced_ms = 0;
    WAIT_FOR((advanced_ms < 60000 ? (advance_ms(f, 100), advanced_ms += 100) : 0,
              stat_of(f, CR_SUBSYSTEM_SEGMENTS, "used_bytes") <= MiB / 2));
    assert_true(exists(f, "pinned"));
    assert_true(exists(f, "soft"));
    assert_false(exists(f, "plain0")); /* the oldest went first */
    assert_true(exists(f, "plain9"));
    assert_true(stat_of(f, CR_SUBSYSTEM_LEASES, "victims_chosen_total") >= 4);
    stop(f);
}

static void test_silent_client_is_expired_on_the_runtime_clock(void **state) {
    (void)state;
    struct fixture *f = fixture_new();
    f->config.client_ttl = 1;
    start(f);
    mount(f, "seg", MiB, 0x1000);
    assert_int_equal(put(f, "k", 4096, false), CR_OK);
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_SEGMENTS, "segments"), 1);
    advance_ms(f, 500);
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_SEGMENTS, "segments"), 1); /* within its TTL */
    WAIT_FOR((advance_ms(f, 500), stat_of(f, CR_SUBSYSTEM_SEGMENTS, "segments") == 0));
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_SEGMENTS, "clients_expired_total"), 1);
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_SEGMENTS, "objects"), 0);
    stop(f);
}

/* ---- leases alone, facing a segments actor that never answers ------------ */

struct mute_segments {
    _Atomic uint64_t polls;
    _Atomic uint16_t last_seq; /* of the latest poll */
};

static void mute_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    struct mute_segments *m = arg;
    if (msg->type != CR_MSG_EVICT_POLL) return; /* the sample is "lost" */
    atomic_store(&m->last_seq, CR_MSG_BODY(msg, struct cr_msg_evict_poll)->seq);
    atomic_fetch_add(&m->polls, 1);
}

static const struct cr_actor_ops mute_ops = {.handle = mute_handle};

static void start_leases_facing(struct fixture *f, struct mute_segments *mute) {
    runtime_start(f);
    assert_int_equal(cr_runtime_spawn(f->rt, "segments", &mute_ops, mute,
                                      &f->peers.actors[CR_SUBSYSTEM_SEGMENTS]),
                     CR_OK);
    assert_int_equal(cr_leases_def.create(&f->config, &f->peers.states[CR_SUBSYSTEM_LEASES]),
                     CR_OK);
    assert_int_equal(cr_runtime_spawn(f->rt, "leases", cr_leases_def.ops,
                                      f->peers.states[CR_SUBSYSTEM_LEASES],
                                      &f->peers.actors[CR_SUBSYSTEM_LEASES]),
                     CR_OK);
    struct cr_msg wire = {.type = CR_MSG_WIRE};
    wire.body.ptr[0] = &f->peers;
    assert_int_equal(cr_send(f->peers.actors[CR_SUBSYSTEM_LEASES], &wire), CR_OK);
}

static uint64_t timers_fired(struct fixture *f, enum cr_subsystem who) {
    struct cr_actor_stats s = {0}; /* histograms NULL: none asked for */
    struct cr_msg msg = {.type = CR_MSG_STATS};
    CR_MSG_BODY(&msg, struct cr_msg_stats)->out = &s;
    assert_int_equal(cr_ask(f->peers.actors[who], &msg, 5000000000ull), CR_OK);
    return s.timers_fired;
}

/* One leases tick (100 ms on the manual clock), waited for until handled. */
static void leases_tick(struct fixture *f) {
    uint64_t before = timers_fired(f, CR_SUBSYSTEM_LEASES);
    advance_ms(f, 100);
    WAIT_FOR(timers_fired(f, CR_SUBSYSTEM_LEASES) > before);
}

static void send_empty_sample(struct fixture *f, uint16_t seq) {
    struct cr_msg msg = {.type = CR_MSG_EVICT_SAMPLE}; /* nothing to free, no candidates */
    CR_MSG_BODY(&msg, struct cr_msg_evict_sample)->seq = seq;
    assert_int_equal(cr_send(f->peers.actors[CR_SUBSYSTEM_LEASES], &msg), CR_OK);
}

static void test_leases_polls_again_after_a_lost_sample(void **state) {
    (void)state;
    struct fixture *f = fixture_new();
    struct mute_segments mute = {0};
    start_leases_facing(f, &mute);
    leases_tick(f); /* the first poll; its sample never comes */
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_LEASES, "polls_total"), 1);
    for (int i = 0; i < 9; i++) leases_tick(f); /* 900 ms: still waiting for it */
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_LEASES, "polls_total"), 1);
    leases_tick(f); /* 1 s: given up, polled again */
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_LEASES, "polls_total"), 2);
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_LEASES, "poll_timeouts_total"), 1);
    WAIT_FOR(atomic_load(&mute.polls) == 2);
    uint16_t second = atomic_load(&mute.last_seq);
    /* The first poll's sample turns up after all, while the second is
     * outstanding: it is not that poll's answer, so it is dropped and the
     * second poll still waits. */
    send_empty_sample(f, (uint16_t)(second - 1));
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_LEASES, "late_samples_total"), 1);
    leases_tick(f);
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_LEASES, "polls_total"), 2);
    /* The second poll's sample answers it; a copy of it finds none waiting. */
    send_empty_sample(f, second);
    send_empty_sample(f, second);
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_LEASES, "late_samples_total"), 2);
    leases_tick(f); /* nothing outstanding: the next tick polls at once */
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_LEASES, "polls_total"), 3);
    assert_int_equal(stat_of(f, CR_SUBSYSTEM_LEASES, "poll_timeouts_total"), 1);
    cr_runtime_destroy(f->rt);
    cr_leases_def.destroy(f->peers.states[CR_SUBSYSTEM_LEASES]);
    free(f);
}

static void test_validation_refuses_bad_requests(void **state) {
    (void)state;
    char err[CR_RPC_ERROR_MAX];
    Crescent__Master__ReplicateConfig cfg = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    Crescent__Master__PutStartRequest s = CRESCENT__MASTER__PUT_START_REQUEST__INIT;
    s.key = "k";
    s.value_length = 10;
    s.config = &cfg;
    s.client_id = &client_a;
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__PUT_START, &s.base, err), CR_OK);
    cfg.replica_num = 0;
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__PUT_START, &s.base, err),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "replica_num"));
    cfg.replica_num = 1;
    s.value_length = 0; /* an empty object */
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__PUT_START, &s.base, err), CR_OK);
    s.value_length = -1;
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__PUT_START, &s.base, err),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "value_length"));
    s.value_length = 10;
    s.key = "";
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__PUT_START, &s.base, err),
                     CR_ERR_INVALID_PARAMS);
    s.key = "k";
    s.client_id = NULL;
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__PUT_START, &s.base, err),
                     CR_ERR_INVALID_PARAMS);
    /* Copy/move tasks: the request's own contradictions are refused here. */
    Crescent__Master__CreateMoveTaskRequest mv = CRESCENT__MASTER__CREATE_MOVE_TASK_REQUEST__INIT;
    mv.key = "k", mv.source = "seg-a", mv.target = "seg-a";
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__CREATE_MOVE_TASK, &mv.base, err),
                     CR_ERR_INVALID_PARAMS);
    assert_string_equal(err, "target equals the source segment");
    mv.target = "seg-b";
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__CREATE_MOVE_TASK, &mv.base, err),
                     CR_OK);
    Crescent__Master__CreateCopyTaskRequest cp = CRESCENT__MASTER__CREATE_COPY_TASK_REQUEST__INIT;
    char *twice[] = {"seg-b", "seg-b"};
    cp.key = "k", cp.targets = twice, cp.n_targets = 0;
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__CREATE_COPY_TASK, &cp.base, err),
                     CR_ERR_INVALID_PARAMS);
    cp.n_targets = 2;
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__CREATE_COPY_TASK, &cp.base, err),
                     CR_ERR_INVALID_PARAMS);
    assert_string_equal(err, "target 1 names the same segment as an earlier one");
    cp.n_targets = 1;
    cp.source = "seg-b";
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__CREATE_COPY_TASK, &cp.base, err),
                     CR_ERR_INVALID_PARAMS);
    cp.source = NULL;
    assert_int_equal(cr_rpc_validate(CRESCENT__MASTER__METHOD__CREATE_COPY_TASK, &cp.base, err),
                     CR_OK);
    Crescent__Master__MarkTaskToCompleteRequest mk =
        CRESCENT__MASTER__MARK_TASK_TO_COMPLETE_REQUEST__INIT;
    mk.status = CRESCENT__MASTER__TASK_STATUS__PROCESSING;
    assert_int_equal(
        cr_rpc_validate(CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE, &mk.base, err),
        CR_ERR_INVALID_PARAMS);
    /* Every response type packs as a bare status. */
    size_t n;
    const struct cr_rpc_method *m = cr_rpc_methods(&n);
    assert_int_equal(n, 29);
    for (size_t i = 0; i < n; i++) {
        uint8_t *buf;
        size_t len;
        assert_int_equal(
            cr_rpc_pack_status(m[i].response, CR_ERR_INVALID_PARAMS, "why", &buf, &len), CR_OK);
        ProtobufCMessage *r = protobuf_c_message_unpack(m[i].response, NULL, len, buf);
        assert_non_null(r);
        const ProtobufCFieldDescriptor *text =
            protobuf_c_message_descriptor_get_field_by_name(r->descriptor, "error_message");
        assert_non_null(text);
        assert_string_equal(*(const char **)(const void *)((const char *)r + text->offset), "why");
        assert_int_equal(status_of(r), CR_ERR_INVALID_PARAMS);
        free(buf);
    }
    assert_null(cr_rpc_method_find(999));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_end_event_reaches_publisher_and_indexer),
        cmocka_unit_test(test_chained_replies_and_events_keep_order_and_tenant),
        cmocka_unit_test(test_leases_evicts_to_the_watermark),
        cmocka_unit_test(test_silent_client_is_expired_on_the_runtime_clock),
        cmocka_unit_test(test_leases_polls_again_after_a_lost_sample),
        cmocka_unit_test(test_validation_refuses_bad_requests),
    };
    return cmocka_run_group_tests_name("master_actors", tests, NULL, NULL);
}

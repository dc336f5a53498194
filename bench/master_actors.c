/* bench/master_actors: the store master's operations in process, at actor
 * level: no socket, no protobuf decoding of requests.
 *
 * The segments and leases actors run on a real runtime (real clock) as in
 * crescentd; two sink actors stand in for the publisher and the indexer
 * (they receive every store event a PutEnd makes and free it).  A driver
 * actor (the in-process stand-in for the RPC gateway: one thread feeding
 * segments) keeps C MASTER_CALL messages in flight, C = 1, 8, 64 (the
 * concurrency of bench/master), with requests built as protobuf-c structs,
 * exactly what the RPC gateway hands over after decoding; segments runs them (store operation plus response
 * packing) and sends MASTER_DONE back.  The operations are those of
 * bench/master over RPC:
 *   put     PutStart + PutEnd pairs (4 KiB objects, 1 replica, 16 segments);
 *           a pair is one op of two calls, its latency PutStart sent ->
 *           PutEnd answered
 *   get     GetReplicaList on the keys just put
 *   exist   ExistKey on the same keys
 *   remove  Remove(force) of the same keys (force: gets took leases)
 * One line per case: ops/s (calls per second in a "calls/s" line for put
 * pairs) and p50/p99/p999 latency per op.
 *
 * Run: ./master_actors [--ops N (200000)] [--inflight 1,8,64] [--drivers N (1)]
 *                      [--only put|get|exist|remove (put fills and remove
 *                      empties the store, so they always run)]
 *                      [--repeat N (1): run the get and exist cases N times
 *                      on the same keys, for a profile of reads alone]
 *                      [--stats: each actor's messages, parks and wakes per case] */
#include <getopt.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "rpc/rpc_codec.h"
#include "rpc/rpc_methods.h"
#include "runtime/runtime.h"
#include "actors/subsystems.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "master.pb-c.h"
#include "msgs/master_msgs.h"
#include "msgs/store_event.h"

#define SEGMENTS 16u
#define SEGMENT_BYTES (1ull << 32)
#define OBJECT_BYTES 4096u
#define KEY_BYTES 32u
#define DRIVERS_MAX 8 /* the runtime holds 16 actors; five are the store's and sinks */
#define DEPTH_MAX 256u
#define BENCH_GO CR_MSG_TEST_SEQ /* main thread -> driver: start the case */

enum workload { WL_PUT, WL_GET, WL_EXIST, WL_REMOVE, WL_COUNT };
static const char *const workload_names[] = {"put_start+put_end pairs", "get_replica_list",
                                             "exist_key", "remove(force)"};

static Crescent__Master__UUID client_id = {
    PROTOBUF_C_MESSAGE_INIT(&crescent__master__uuid__descriptor), 0xBE, 0x1C};

/* One call in flight, with every request shape it may carry. */
struct slot {
    struct cr_master_call call;
    Crescent__Master__ReplicateConfig config;
    Crescent__Master__PutStartRequest put_start;
    Crescent__Master__PutEndRequest put_end;
    Crescent__Master__GetReplicaListRequest get;
    Crescent__Master__ExistKeyRequest exist;
    Crescent__Master__RemoveRequest remove;
    char key[KEY_BYTES];
    uint64_t started_ns;
    bool second_phase; /* put: the PutEnd is in flight */
};

struct driver {
    struct cr_actor *self, *segments;
    enum workload workload;
    uint32_t id;
    uint64_t first, count; /* this driver's keys: [first, first + count) */
    uint64_t next, done, calls, errors;
    unsigned depth;
    struct slot slots[DEPTH_MAX];
    struct bench_latency lat;
    _Atomic int finished;
};

static char (*keys)[KEY_BYTES]; /* key i of every case */

static void sink_handle(struct cr_actor *self, void *state, struct cr_msg *msg) {
    (void)self, (void)state;
    if (msg->type == CR_MSG_STORE_EVENT)
        cr_store_event_chain_release(CR_MSG_BODY(msg, struct cr_msg_store_event)->chain);
}

static const struct cr_actor_ops sink_ops = {.handle = sink_handle};

/* Issued by the first mount; PutStart and PutEnd carry it too. */
static uint8_t secret[64];
static size_t secret_len;

static void slot_init(struct slot *s) {
    memset(s, 0, sizeof(*s));
    s->config = (Crescent__Master__ReplicateConfig)CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    s->config.replica_num = 1;
    s->put_start = (Crescent__Master__PutStartRequest)CRESCENT__MASTER__PUT_START_REQUEST__INIT;
    s->put_start.key = s->key;
    s->put_start.value_length = OBJECT_BYTES;
    s->put_start.config = &s->config;
    s->put_start.client_id = &client_id;
    s->put_end = (Crescent__Master__PutEndRequest)CRESCENT__MASTER__PUT_END_REQUEST__INIT;
    s->put_end.key = s->key;
    s->put_end.client_id = &client_id;
    s->get = (Crescent__Master__GetReplicaListRequest)
        CRESCENT__MASTER__GET_REPLICA_LIST_REQUEST__INIT;
    s->get.key = s->key;
    s->exist = (Crescent__Master__ExistKeyRequest)CRESCENT__MASTER__EXIST_KEY_REQUEST__INIT;
    s->exist.key = s->key;
    s->remove = (Crescent__Master__RemoveRequest)CRESCENT__MASTER__REMOVE_REQUEST__INIT;
    s->remove.key = s->key;
    s->remove.force = true;
}

static void send_call(struct driver *d, struct slot *s, uint16_t method, ProtobufCMessage *req) {
    /* The secret is issued at setup's first mount, after the slots were made. */
    s->put_start.has_client_secret = s->put_end.has_client_secret = secret_len > 0;
    s->put_start.client_secret = s->put_end.client_secret = (ProtobufCBinaryData){secret_len, secret};
    s->call.method = method;
    s->call.request = req;
    s->call.key = (struct cr_store_key){0};
    cr_rpc_call_prepare_key(&s->call); /* as the gateway does after validation */
    s->call.reply_to = d->self;
    s->call.reply = NULL;
    struct cr_msg msg = {.type = CR_MSG_MASTER_CALL};
    CR_MSG_BODY(&msg, struct cr_msg_master_call)->call = &s->call;
    if (cr_send(d->segments, &msg) != CR_OK) {
        fprintf(stderr, "driver %u: cannot send to segments\n", d->id);
        exit(1);
    }
    d->calls++;
}

/* Starts the op on the driver's next key, if any is left. */
static void start_op(struct driver *d, struct slot *s) {
    if (d->next == d->first + d->count) return;
    memcpy(s->key, keys[d->next++], KEY_BYTES); /* made up front: no printf per op */
    s->started_ns = bench_now_ns();
    s->second_phase = false;
    switch (d->workload) {
    case WL_PUT: send_call(d, s, CRESCENT__MASTER__METHOD__PUT_START, &s->put_start.base); break;
    case WL_GET: send_call(d, s, CRESCENT__MASTER__METHOD__GET_REPLICA_LIST, &s->get.base); break;
    case WL_EXIST: send_call(d, s, CRESCENT__MASTER__METHOD__EXIST_KEY, &s->exist.base); break;
    case WL_REMOVE: send_call(d, s, CRESCENT__MASTER__METHOD__REMOVE, &s->remove.base); break;
    default: abort();
    }
}

/* The response's status_code: the first field of every response message. */
static int32_t reply_status(const struct cr_master_call *call) {
    if (call->status != CR_OK) return call->status;
    const struct cr_rpc_method *m = cr_rpc_method_find(call->method);
    ProtobufCMessage *resp = protobuf_c_message_unpack(m->response, NULL, call->reply_len,
                                                       call->reply);
    if (resp == NULL) return CR_ERR_PROTOCOL;
    int32_t code = cr_rpc_status_code(resp);
    protobuf_c_message_free_unpacked(resp, NULL);
    return code;
}

static void on_done(struct driver *d, struct cr_master_call *call) {
    struct slot *s = (struct slot *)((char *)call - offsetof(struct slot, call));
    /* Checking every reply would unpack it on this thread, which the RPC
     * client does too; one in 64 keeps the check without timing it. */
    if ((d->calls & 63u) == 0 && reply_status(call) != CR_OK) d->errors++;
    cr_master_call_reply_free(call);
    if (d->workload == WL_PUT && !s->second_phase) {
        s->second_phase = true;
        send_call(d, s, CRESCENT__MASTER__METHOD__PUT_END, &s->put_end.base);
        return;
    }
    bench_latency_add(&d->lat, bench_now_ns() - s->started_ns);
    d->done++;
    if (d->done == d->count)
        atomic_store_explicit(&d->finished, 1, memory_order_release);
    else
        start_op(d, s);
}

static void driver_handle(struct cr_actor *self, void *state, struct cr_msg *msg) {
    (void)self;
    struct driver *d = state;
    if (msg->type == BENCH_GO) {
        for (unsigned i = 0; i < d->depth; i++) start_op(d, &d->slots[i]);
    } else if (msg->type == CR_MSG_MASTER_DONE) {
        /* A chain of finished calls; on_done may send the call again, so
         * the link is read first. */
        for (struct cr_master_call *call = CR_MSG_BODY(msg, struct cr_msg_master_call)->call,
                                   *next;
             call != NULL; call = next) {
            next = call->next;
            on_done(d, call);
        }
    }
}

static const struct cr_actor_ops driver_ops = {.handle = driver_handle};

struct bench {
    struct cr_daemon_config config;
    struct cr_runtime *rt;
    struct cr_subsystems peers;
    struct driver *drivers[DRIVERS_MAX];
    int driver_count;
};

static void check(int rc, const char *what) {
    if (rc != CR_OK) {
        fprintf(stderr, "%s: %s\n", what, cr_strerror(rc));
        exit(1);
    }
}

static void spawn_drivers(struct bench *b, int drivers) {
    for (int i = 0; i < drivers; i++) {
        struct driver *d = calloc(1, sizeof(*d));
        if (d == NULL) check(CR_ERR_NOMEM, "driver");
        d->id = (uint32_t)i;
        d->segments = b->peers.actors[CR_SUBSYSTEM_SEGMENTS];
        for (unsigned s = 0; s < DEPTH_MAX; s++) slot_init(&d->slots[s]);
        char name[16];
        snprintf(name, sizeof(name), "driver%d", i);
        check(cr_runtime_spawn(b->rt, name, &driver_ops, d, &d->self), "spawn driver");
        b->drivers[i] = d;
    }
    b->driver_count = drivers;
}

/* Threads are pinned as crescentd pins them (round-robin over the affinity
 * mask in spawn order), and the driver is spawned right after segments, as
 * crescentd spawns the RPC gateway next to it: the two busy threads get
 * different CPUs.  Unpinned, runs were bimodal (gets 1.1 M/s or 1.6 M/s)
 * depending on where the scheduler put them. */
static void setup(struct bench *b, int drivers) {
    cr_daemon_config_default(&b->config);
    b->config.client_ttl = 3600; /* the bench's client never pings */
    struct cr_runtime_config rc;
    cr_runtime_config_default(&rc);
    check(cr_runtime_create(&rc, &b->rt), "runtime");
    b->peers.config = &b->config;
    b->peers.ask_timeout_ns = 5000000000ull;
    const struct cr_subsystem_def *defs[] = {&cr_segments_def, &cr_leases_def};
    enum cr_subsystem ids[] = {CR_SUBSYSTEM_SEGMENTS, CR_SUBSYSTEM_LEASES};
    for (int i = 0; i < 2; i++) {
        check(defs[i]->create(&b->config, &b->peers.states[ids[i]]), defs[i]->name);
        check(cr_runtime_spawn(b->rt, defs[i]->name, defs[i]->ops, b->peers.states[ids[i]],
                               &b->peers.actors[ids[i]]),
              "spawn");
        if (i == 0) spawn_drivers(b, drivers);
    }
    check(cr_runtime_spawn(b->rt, "publisher", &sink_ops, NULL,
                           &b->peers.actors[CR_SUBSYSTEM_PUBLISHER]),
          "spawn");
    check(cr_runtime_spawn(b->rt, "indexer", &sink_ops, NULL,
                           &b->peers.actors[CR_SUBSYSTEM_INDEXER]),
          "spawn");
    for (int i = 0; i < 2; i++) {
        struct cr_msg wire = {.type = CR_MSG_WIRE};
        wire.body.ptr[0] = &b->peers;
        check(cr_send(b->peers.actors[ids[i]], &wire), "wire");
    }
    /* 16 segments of the bench's client, as bench/master mounts.  The first
     * mount issues the client's secret; the later ones carry it. */
    for (unsigned i = 0; i < SEGMENTS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "bench-seg-%02u", i);
        Crescent__Master__MountSegmentRequest r = CRESCENT__MASTER__MOUNT_SEGMENT_REQUEST__INIT;
        r.segment_name = name;
        r.size = SEGMENT_BYTES;
        r.buffer = (uint64_t)(i + 1) << 40;
        r.client_id = &client_id;
        r.transport_endpoint = "127.0.0.1:7000";
        r.has_client_secret = secret_len > 0;
        r.client_secret = (ProtobufCBinaryData){secret_len, secret};
        struct cr_master_call c = {.method = CRESCENT__MASTER__METHOD__MOUNT_SEGMENT,
                                   .request = &r.base};
        struct cr_msg msg = {.type = CR_MSG_MASTER_CALL};
        CR_MSG_BODY(&msg, struct cr_msg_master_call)->call = &c;
        check(cr_ask(b->peers.actors[CR_SUBSYSTEM_SEGMENTS], &msg, 5000000000ull), "mount");
        check(reply_status(&c), "mount");
        Crescent__Master__MountSegmentResponse *resp =
            crescent__master__mount_segment_response__unpack(NULL, c.reply_len, c.reply);
        if (resp != NULL && resp->has_client_secret && resp->client_secret.len <= sizeof(secret)) {
            secret_len = resp->client_secret.len;
            memcpy(secret, resp->client_secret.data, secret_len);
        }
        if (resp != NULL) crescent__master__mount_segment_response__free_unpacked(resp, NULL);
        cr_master_call_reply_free(&c);
    }
}

static void teardown(struct bench *b) {
    cr_runtime_destroy(b->rt);
    cr_segments_def.destroy(b->peers.states[CR_SUBSYSTEM_SEGMENTS]);
    cr_leases_def.destroy(b->peers.states[CR_SUBSYSTEM_LEASES]);
    for (int i = 0; i < b->driver_count; i++) free(b->drivers[i]);
}

/* --stats: each actor's runtime counters, so a case's parks and wakes (each
 * a syscall) can be read next to its throughput. */
static bool show_stats;
#define STATS_ACTORS (DRIVERS_MAX + 4)

static int snapshot(struct bench *b, struct cr_actor_stats *out) {
    struct cr_actor *actors[STATS_ACTORS];
    int n = 0;
    const enum cr_subsystem ids[] = {CR_SUBSYSTEM_SEGMENTS, CR_SUBSYSTEM_LEASES,
                                     CR_SUBSYSTEM_PUBLISHER, CR_SUBSYSTEM_INDEXER};
    for (int i = 0; i < 4; i++) actors[n++] = b->peers.actors[ids[i]];
    for (int i = 0; i < b->driver_count; i++) actors[n++] = b->drivers[i]->self;
    for (int i = 0; i < n; i++) {
        struct cr_msg msg = {.type = CR_MSG_STATS};
        CR_MSG_BODY(&msg, struct cr_msg_stats)->out = &out[i];
        check(cr_ask(actors[i], &msg, 5000000000ull), "stats");
    }
    return n;
}

static void print_stats(const struct cr_actor_stats *before, const struct cr_actor_stats *after,
                        int n, uint64_t ops) {
    for (int i = 0; i < n; i++)
        printf("    %-10s cpu %2d  handled %9llu  parks %7llu  wakes %7llu  (%.3f parks per op)\n",
               after[i].name, after[i].cpu,
               (unsigned long long)(after[i].messages_handled - before[i].messages_handled),
               (unsigned long long)(after[i].parks - before[i].parks),
               (unsigned long long)(after[i].wakes - before[i].wakes),
               (double)(after[i].parks - before[i].parks) / (double)ops);
}

static void run_case(struct bench *b, enum workload workload, unsigned depth, uint64_t ops) {
    struct cr_actor_stats stats_before[STATS_ACTORS], stats_after[STATS_ACTORS];
    if (show_stats) (void)snapshot(b, stats_before);
    int drivers = b->driver_count;
    uint64_t per = ops / (uint64_t)drivers;
    for (int i = 0; i < drivers; i++) {
        struct driver *d = b->drivers[i];
        d->depth = depth;
        d->workload = workload;
        d->first = (uint64_t)i * per;
        d->count = per;
        d->next = d->first;
        d->done = d->calls = d->errors = 0;
        atomic_store(&d->finished, 0);
        bench_latency_init(&d->lat, (size_t)per);
    }
    uint64_t start = bench_now_ns(), cpu_start = bench_cpu_ns(), calls = 0, errors = 0;
    for (int i = 0; i < drivers; i++) {
        struct cr_msg go = {.type = BENCH_GO};
        check(cr_send(b->drivers[i]->self, &go), "go");
    }
    struct bench_latency all;
    bench_latency_init(&all, (size_t)ops);
    for (int i = 0; i < drivers; i++) {
        struct driver *d = b->drivers[i];
        while (!atomic_load_explicit(&d->finished, memory_order_acquire)) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL); /* the main thread only waits */
        }
    }
    uint64_t elapsed = bench_now_ns() - start;
    for (int i = 0; i < drivers; i++) {
        struct driver *d = b->drivers[i];
        for (size_t k = 0; k < d->lat.count; k++) bench_latency_add(&all, d->lat.samples_ns[k]);
        calls += d->calls;
        errors += d->errors;
        bench_latency_free(&d->lat);
    }
    char name[96];
    if (drivers == 1)
        snprintf(name, sizeof(name), "%s, %u in flight", workload_names[workload], depth);
    else
        snprintf(name, sizeof(name), "%s, %d drivers x %u", workload_names[workload], drivers,
                 depth);
    bench_report(name, per * (uint64_t)drivers, elapsed, &all);
    printf("  %.2f M calls/s; CPU per op (all threads): %.2f us%s\n",
           (double)calls / ((double)elapsed / 1e9) / 1e6,
           (double)(bench_cpu_ns() - cpu_start) / 1e3 / (double)(per * (uint64_t)drivers),
           errors > 0 ? "; ERRORS in sampled replies" : "");
    if (show_stats) print_stats(stats_before, stats_after, snapshot(b, stats_after), ops);
    bench_latency_free(&all);
}

static int parse_list(const char *text, unsigned *out, unsigned max) {
    int n = 0;
    for (const char *p = text; *p != '\0';) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || (unsigned long)v > max || n == 8) return 0;
        out[n++] = (unsigned)v;
        if (*end != ',' && *end != '\0') return 0;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    uint64_t ops = 200000;
    unsigned depths[8] = {1, 8, 64}, drivers = 1, repeat = 1;
    int cases = 3, only = -1;
    static const struct option longopts[] = {{"ops", required_argument, NULL, 'o'},
                                             {"inflight", required_argument, NULL, 'i'},
                                             {"drivers", required_argument, NULL, 'd'},
                                             {"only", required_argument, NULL, 'w'},
                                             {"repeat", required_argument, NULL, 'r'},
                                             {"stats", no_argument, NULL, 's'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'o') {
            ops = strtoull(optarg, NULL, 10);
        } else if (c == 'i') {
            cases = parse_list(optarg, depths, DEPTH_MAX);
        } else if (c == 'd') {
            drivers = (unsigned)strtoul(optarg, NULL, 10);
        } else if (c == 'r') {
            repeat = (unsigned)strtoul(optarg, NULL, 10);
        } else if (c == 's') {
            show_stats = true;
        } else if (c == 'w') {
            for (int w = 0; w < WL_COUNT; w++)
                if (strncmp(optarg, workload_names[w], strlen(optarg)) == 0 && optarg[0] != '\0')
                    only = w;
            if (only < 0) c = '?';
        }
        if (c != 'o' && c != 'i' && c != 'd' && c != 'w' && c != 'r' && c != 's') {
            printf("usage: master_actors [--ops N (200000)] [--inflight 1,8,64 (each 1..%u)] "
                   "[--drivers N (1..%d)] [--only put|get|exist|remove] [--repeat N (1)] "
                   "[--stats]\n",
                   DEPTH_MAX, DRIVERS_MAX);
            return c == 'h' ? 0 : 2;
        }
    }
    if (ops == 0 || cases == 0 || drivers < 1 || drivers > DRIVERS_MAX || repeat < 1 ||
        repeat > 1000) {
        fprintf(stderr,
                "master_actors: bad --ops, --inflight, --drivers or --repeat (see --help)\n");
        return 2;
    }
    printf("bench/master_actors: segments actor in process, %llu ops per case, %u driver(s)\n",
           (unsigned long long)ops, drivers);
    keys = malloc(ops * KEY_BYTES);
    if (keys == NULL) check(CR_ERR_NOMEM, "keys");
    for (uint64_t i = 0; i < ops; i++)
        snprintf(keys[i], KEY_BYTES, "bench/%010llu", (unsigned long long)i);
    struct bench b = {0};
    setup(&b, (int)drivers);
    for (int i = 0; i < cases; i++)
        for (int w = 0; w < WL_COUNT; w++)
            if (only < 0 || w == only || w == WL_PUT || w == WL_REMOVE) {
                bool read = w == WL_GET || w == WL_EXIST;
                for (unsigned r = 0; r < (read ? repeat : 1); r++)
                    run_case(&b, (enum workload)w, depths[i], ops); /* put fills, remove empties */
            }
    teardown(&b);
    free(keys);
    return 0;
}

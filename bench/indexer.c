/* Indexer benchmark: ingest through decoding, query latency in process and
 * over HTTP, memory per (block, instance).
 *
 * Ingest: vLLM-format batches ([ts, [BlockStored...], nil], 16 events of 16
 * blocks x 16 tokens, continuing chains from their parents) go through
 * cr_kv_decode, cr_indexer_batch_check and cr_indexer_batch_apply, as the
 * actor does for each SUB message (the socket read itself is not included).
 * Query: 16 prompts of 32k tokens sharing a 1k-token system prefix; each of N
 * instances (100, 1000) holds one prompt to a random depth (the set of holders
 * thins out along the prompt).  In process: cr_prefix_index_query_tokens
 * (hashing included) for 2k/8k/32k-token prompts at block sizes 16 and 128.
 * HTTP: crescent's own HTTP front and indexer actor in this process (the index
 * is filled before the actor starts), C clients on keep-alive connections
 * POSTing /query with JSON bodies of 2k/8k/32k tokens.
 *
 * --bare N: each HTTP case runs an untimed 0.5 s of /query (the workers'
 * first queries make their scratch), then N rounds, each /query (read by the workers),
 * /query asking the indexer actor (as before the workers read), then the ceiling
 * measured beside it: POST /bare on the same front, a handler that answers
 * 200 with a stored body as long as /query's answers (no index, no JSON
 * rendering), same request bodies and connections; medians and the ratio.
 *
 * Run: ./indexer [--quick] [--only ingest|query|http] [--conns N (HTTP clients, 16)]
 *              [--tokens N] [--instances N] [--bs N] (only the cases with that value)
 *              [--bare N] [--top-k K (/query bodies carry "top_k":K; the bare
 *              handler then answers as many bytes as that smaller answer)] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <msgpack.h>

#include "harness.h"
#include "prefix_workload.h"
#include "actors/indexer_internal.h"
#include "actors/subsystems.h"
#include "core/buf.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "http/front.h"

#define CLIENTS_MAX 64

static int clients = 16; /* --conns: keep-alive connections, one request in flight each */
static int bare_rounds = 0; /* --bare: rounds of /query beside the bare-handler ceiling */
static unsigned top_k = 0;  /* --top-k: /query bodies ask for the top_k longest matches only */

int cr_indexer_register_routes(struct cr_http_front *front, struct cr_subsystems *peers);

/* ---- ingest ---- */

static void pack_batch(msgpack_sbuffer *buf, uint64_t first_engine, bool rooted,
                       const uint32_t *tokens) {
    msgpack_packer pk;
    msgpack_sbuffer_clear(buf);
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, 1700000000.0);
    msgpack_pack_array(&pk, 16);
    for (uint32_t e = 0; e < 16; e++) {
        uint64_t base = first_engine + (uint64_t)e * RUN_BLOCKS;
        msgpack_pack_array(&pk, 7);
        msgpack_pack_str(&pk, 11);
        msgpack_pack_str_body(&pk, "BlockStored", 11);
        msgpack_pack_array(&pk, RUN_BLOCKS);
        for (uint32_t b = 0; b < RUN_BLOCKS; b++) msgpack_pack_uint64(&pk, base + b);
        if (e == 0 && rooted)
            msgpack_pack_nil(&pk);
        else
            msgpack_pack_uint64(&pk, base - 1);
        msgpack_pack_array(&pk, RUN_BLOCKS * 16);
        for (uint32_t t = 0; t < RUN_BLOCKS * 16; t++)
            msgpack_pack_uint32(&pk, tokens[e * RUN_BLOCKS * 16 + t]);
        msgpack_pack_uint32(&pk, 16);
        msgpack_pack_nil(&pk);
        msgpack_pack_str(&pk, 3);
        msgpack_pack_str_body(&pk, "GPU", 3);
    }
    msgpack_pack_nil(&pk);
}

static void bench_ingest(size_t batches) {
    struct cr_prefix_index *ix;
    struct cr_kv_decoder *dec;
    check(cr_prefix_index_create(0, &ix), "create");
    check(cr_kv_decoder_create(&dec), "decoder");
    struct indexer_counters counters = {0};
    struct cr_prefix_map keys;
    cr_prefix_map_init(&keys, NULL);
    struct indexer_target t[100];
    for (int i = 0; i < 100; i++) {
        char name[32];
        uint16_t id;
        snprintf(name, sizeof(name), "ingest-%d", i);
        check(cr_prefix_index_instance_add(ix, name, NULL, &id), "instance");
        t[i] = (struct indexer_target){.instance = id,
                                       .tenant = "default",
                                       .model = "m",
                                       .lora_name = "",
                                       .salt = "",
                                       .block_size = 16,
                                       .counters = &counters,
                                       .keys = &keys};
    }
    /* Payloads are built before timing; 64 distinct ones are cycled with fresh engine ids. */
    enum { DISTINCT = 64 };
    msgpack_sbuffer bufs[DISTINCT];
    uint32_t *tokens = malloc(16 * RUN_BLOCKS * 16 * sizeof(uint32_t));
    for (int k = 0; k < DISTINCT; k++) {
        for (uint32_t i = 0; i < 16 * RUN_BLOCKS * 16; i++) tokens[i] = (uint32_t)(rng() % VOCAB);
        msgpack_sbuffer_init(&bufs[k]);
        pack_batch(&bufs[k], ((uint64_t)k << 32) + 1, true, tokens);
    }
    free(tokens);
    uint64_t start = bench_now_ns();
    for (size_t b = 0; b < batches; b++) {
        const struct cr_kv_batch *batch;
        char err[128];
        msgpack_sbuffer *buf = &bufs[b % DISTINCT];
        check(cr_kv_decode(dec, buf->data, buf->size, &batch, err, sizeof(err)), "decode");
        check(cr_indexer_batch_check(ix, &t[b % 100], batch, err, sizeof(err)), "check");
        check(cr_indexer_batch_apply(ix, &t[b % 100], batch), "apply");
    }
    uint64_t elapsed = bench_now_ns() - start;
    bench_report("ingest vLLM batches 16x16x16 (blocks/s)", batches * 16 * RUN_BLOCKS, elapsed,
                 NULL);
    struct cr_prefix_summary s;
    cr_prefix_index_summary(ix, &s);
    printf("  ingest memory: %llu pairs, %zu bytes, %.1f bytes/(block,instance)\n",
           (unsigned long long)s.pairs, s.bytes_used, (double)s.bytes_used / (double)s.pairs);
    for (int k = 0; k < DISTINCT; k++) msgpack_sbuffer_destroy(&bufs[k]);
    cr_prefix_map_free(&keys);
    cr_kv_decoder_destroy(dec);
    cr_prefix_index_destroy(ix);
}

/* ---- population shared by the query benchmarks ---- */


static void populate_default(struct cr_prefix_index *ix, uint32_t bs, int instances,
                             const uint32_t *prompts) {
    struct cr_prefix_context_key key = {.tenant = "default", .model = "m", .block_size = bs};
    uint32_t ctx;
    check(cr_prefix_index_context(ix, &key, true, &ctx), "context");
    populate(ix, ctx, bs, instances, prompts);
}

static const uint32_t lengths[3] = {2048, 8192, 32768};

/* --tokens, --instances, --bs: run only the cases with that value (0 = all). */
static uint32_t only_tokens, only_instances, only_bs;

/* An index shape (instances, block size) the flags leave out: not even built. */
static bool skip_index(int instances, uint32_t bs) {
    return (only_instances != 0 && (uint32_t)instances != only_instances) ||
           (only_bs != 0 && bs != only_bs);
}

static bool skip_case(uint32_t tokens, int instances, uint32_t bs) {
    return (only_tokens != 0 && tokens != only_tokens) || skip_index(instances, bs);
}

static void bench_in_process(struct cr_prefix_index *ix, int instances, uint32_t bs,
                             const uint32_t *prompts, int iters) {
    struct cr_prefix_context_key key = {.tenant = "default", .model = "m", .block_size = bs};
    for (int l = 0; l < 3; l++) {
        if (skip_case(lengths[l], instances, bs)) continue;
        struct bench_latency lat;
        bench_latency_init(&lat, (size_t)iters);
        uint64_t start = bench_now_ns();
        for (int it = 0; it < iters; it++) {
            const uint32_t *q = prompts + (size_t)(it % PROMPTS) * PROMPT_TOKENS;
            const struct cr_prefix_match *m;
            size_t count;
            uint64_t t0 = bench_now_ns();
            check(cr_prefix_index_query_tokens(ix, &key, q, lengths[l], NULL, 0, &m, &count),
                  "query");
            bench_latency_add(&lat, bench_now_ns() - t0);
        }
        char name[96];
        snprintf(name, sizeof(name), "query %uk tok (%u blocks) bs %u, %d inst", lengths[l] / 1024,
                 lengths[l] / bs, bs, instances);
        bench_report(name, (uint64_t)iters, bench_now_ns() - start, &lat);
        bench_latency_free(&lat);
    }
}

/* ---- HTTP ---- */

struct client {
    int port;
    const char *request; /* the whole HTTP request */
    size_t request_len;
    uint64_t deadline_ns;
    struct bench_latency lat;
    uint64_t done, errors;
    long body_len; /* the last answer's */
};

/* The ceiling's answer: as many bytes as /query's, made once per case. */
static struct cr_subsystems *http_peers; /* the routes' peers: rounds switch the read path */
static char *bare_body;
static size_t bare_len;

static void bare_handler(void *ctx, const struct cr_http_request *req,
                         struct cr_http_response *resp) {
    (void)ctx, (void)req;
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = malloc(bare_len + 1);
    if (resp->body == NULL) {
        resp->status = 503;
        return;
    }
    memcpy(resp->body, bare_body, bare_len + 1);
    resp->body_len = bare_len;
}

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads one response (headers + Content-Length body); returns the status or -1. */
static int read_response(int fd, char *buf, size_t cap, long *body_len) {
    size_t have = 0;
    char *body = NULL;
    long need = -1;
    for (;;) {
        if (body == NULL) {
            buf[have] = '\0';
            char *end = strstr(buf, "\r\n\r\n");
            if (end != NULL) {
                body = end + 4;
                char *cl = strcasestr(buf, "Content-Length:");
                need = cl != NULL ? strtol(cl + 15, NULL, 10) : 0;
            }
        }
        if (body != NULL && (long)(have - (size_t)(body - buf)) >= need) {
            *body_len = need;
            return atoi(buf + 9);
        }
        if (have + 1 >= cap) return -1;
        /* The front writes headers and body separately; with Nagle on its
         * side, a delayed ACK here would stall every response by ~40 ms. */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
        ssize_t n = read(fd, buf + have, cap - 1 - have);
        if (n <= 0) return -1;
        have += (size_t)n;
    }
}

static void *client_main(void *arg) {
    struct client *c = arg;
    char *buf = malloc(1 << 20);
    int fd = connect_to(c->port);
    while (fd >= 0 && bench_now_ns() < c->deadline_ns) {
        uint64_t t0 = bench_now_ns();
        if (write(fd, c->request, c->request_len) != (ssize_t)c->request_len ||
            read_response(fd, buf, 1 << 20, &c->body_len) != 200) {
            c->errors++;
            break;
        }
        bench_latency_add(&c->lat, bench_now_ns() - t0);
        c->done++;
    }
    if (fd >= 0) close(fd);
    free(buf);
    return NULL;
}

static char *query_request(const char *path, const uint32_t *tokens, uint32_t n, uint32_t bs,
                           size_t *len) {
    struct cr_buf body, req;
    cr_buf_init(&body);
    cr_buf_appendf(&body, "{\"model\":\"m\",\"block_size\":%u,\"token_ids\":[", bs);
    for (uint32_t i = 0; i < n; i++) cr_buf_appendf(&body, "%s%u", i ? "," : "", tokens[i]);
    cr_buf_appendf(&body, "]");
    if (top_k > 0) cr_buf_appendf(&body, ",\"top_k\":%u", top_k);
    cr_buf_appendf(&body, "}");
    size_t body_len;
    char *b = cr_buf_take(&body, &body_len);
    cr_buf_init(&req);
    cr_buf_appendf(&req,
                   "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\n\r\n",
                   path, body_len);
    cr_buf_append(&req, b, body_len);
    free(b);
    return cr_buf_take(&req, len);
}

/* One timed run of every client against `path`; returns requests per
 * second and sets *body_len to an answer's length. */
static double http_run(int port, const char *path, uint32_t tokens, uint32_t bs,
                       const uint32_t *prompts, double seconds, const char *name,
                       long *body_len) {
    struct client c[CLIENTS_MAX];
    pthread_t th[CLIENTS_MAX];
    uint64_t start = bench_now_ns(), cpu_start = bench_cpu_ns();
    for (int i = 0; i < clients; i++) {
        c[i] = (struct client){.port = port, .deadline_ns = start + (uint64_t)(seconds * 1e9)};
        c[i].request = query_request(path, prompts + (size_t)(i % PROMPTS) * PROMPT_TOKENS,
                                     tokens, bs, &c[i].request_len);
        bench_latency_init(&c[i].lat, 1u << 20);
        pthread_create(&th[i], NULL, client_main, &c[i]);
    }
    struct bench_latency all;
    bench_latency_init(&all, (size_t)clients << 20);
    uint64_t done = 0, errors = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        for (size_t k = 0; k < c[i].lat.count; k++) bench_latency_add(&all, c[i].lat.samples_ns[k]);
        done += c[i].done;
        errors += c[i].errors;
        if (c[i].done > 0) *body_len = c[i].body_len;
        bench_latency_free(&c[i].lat);
        free((void *)c[i].request);
    }
    uint64_t elapsed = bench_now_ns() - start;
    if (done > 0) {
        bench_report(name, done, elapsed, &all);
        printf("  CPU per request (server and clients): %.1f us\n",
               (double)(bench_cpu_ns() - cpu_start) / 1e3 / (double)done);
    }
    if (errors > 0) printf("  %llu errors\n", (unsigned long long)errors);
    bench_latency_free(&all);
    return (double)done / ((double)elapsed / 1e9);
}

static void bench_http(int port, int instances, uint32_t bs, const uint32_t *prompts,
                       double seconds) {
    for (int l = 0; l < 3; l++) {
        if (skip_case(lengths[l], instances, bs)) continue;
        char name[96];
        snprintf(name, sizeof(name), "HTTP /query %uk tok bs %u, %d inst, %d conns",
                 lengths[l] / 1024, bs, instances, clients);
        long body_len = 0;
        if (bare_rounds == 0) {
            http_run(port, "/query", lengths[l], bs, prompts, seconds, name, &body_len);
            continue;
        }
        double query[99], hop[99], bare[99], ratio[99], hop_ratio[99];
        /* Untimed: each worker thread's first /query makes its query
         * scratch (page faults), which made round 1 the slowest. */
        http_run(port, "/query", lengths[l], bs, prompts, 0.5, "  warm-up (not counted)",
                 &body_len);
        for (int r = 0; r < bare_rounds; r++) {
            query[r] = http_run(port, "/query", lengths[l], bs, prompts, seconds, name, &body_len);
            /* The same route asking the actor (no state to read under the
             * lock): /query as it was before the workers read the index. */
            void *indexer = http_peers->states[CR_SUBSYSTEM_INDEXER];
            http_peers->states[CR_SUBSYSTEM_INDEXER] = NULL;
            hop[r] = http_run(port, "/query", lengths[l], bs, prompts, seconds,
                              "  before: /query asking the indexer actor", &body_len);
            http_peers->states[CR_SUBSYSTEM_INDEXER] = indexer;
            hop_ratio[r] = hop[r] / query[r];
            free(bare_body);
            bare_len = body_len > 0 ? (size_t)body_len : 2;
            bare_body = malloc(bare_len + 1);
            memset(bare_body, ' ', bare_len);
            bare_body[0] = '{', bare_body[bare_len - 1] = '}', bare_body[bare_len] = '\0';
            long bare_answer = 0;
            bare[r] = http_run(port, "/bare", lengths[l], bs, prompts, seconds,
                               "  ceiling: bare 200 handler, same body sizes", &bare_answer);
            ratio[r] = query[r] / bare[r];
        }
        printf("median of %d rounds: /query %.0f req/s, bare handler %.0f req/s (ratio %.2f), "
               "answers of %ld bytes\n", bare_rounds, bench_median(query, bare_rounds),
               bench_median(bare, bare_rounds), bench_median(ratio, bare_rounds), body_len);
        printf("  /query asking the actor %.0f req/s (%.2f of the workers' read; %.2f of bare)\n",
               bench_median(hop, bare_rounds), bench_median(hop_ratio, bare_rounds),
               bench_median(hop, bare_rounds) / bench_median(bare, bare_rounds));
    }
}

/* Runs the indexer actor and the HTTP front in this process over a
 * pre-filled index (filled on this thread before the actor's starts). */
static void bench_http_setup(int instances, uint32_t bs, const uint32_t *prompts, double seconds) {
    struct cr_daemon_config config;
    cr_daemon_config_default(&config);
    config.indexer_config[0] = '\0';
    unsetenv("CONDUCTOR_CONFIG_PATH");
    void *state;
    check(cr_indexer_def.create(&config, &state), "indexer create");
    populate_default(((struct indexer_state *)state)->index, bs, instances, prompts);
    struct cr_runtime_config rc;
    cr_runtime_config_default(&rc);
    rc.pin_threads = false;
    struct cr_runtime *rt;
    check(cr_runtime_create(&rc, &rt), "runtime");
    struct cr_subsystems peers = {.ask_timeout_ns = 5000000000ull};
    peers.states[CR_SUBSYSTEM_INDEXER] = state; /* /query reads the index in the workers */
    http_peers = &peers;
    check(cr_runtime_spawn(rt, "indexer", cr_indexer_def.ops, state,
                           &peers.actors[CR_SUBSYSTEM_INDEXER]),
          "spawn");
    struct cr_http_front *front;
    check(cr_http_front_create(&front), "front");
    check(cr_indexer_register_routes(front, &peers), "routes");
    check(cr_http_front_add_route(front, "POST", "/bare", bare_handler, NULL), "bare route");
    char error[256], address[64];
    struct cr_http_front_limits limits;
    cr_http_front_limits_default(&limits);
    limits.workers = (unsigned)clients + 2;
    int port = 0;
    for (int tries = 0; tries < 20 && port == 0; tries++) {
        int p = 20000 + (int)(rng() % 30000);
        snprintf(address, sizeof(address), "127.0.0.1:%d", p);
        if (cr_http_front_start(front, address, &limits, error, sizeof(error)) == CR_OK)
            port = p;
    }
    if (port == 0) {
        fprintf(stderr, "cannot start the HTTP front: %s\n", error);
        exit(1);
    }
    bench_http(port, instances, bs, prompts, seconds);
    cr_http_front_destroy(front);
    cr_runtime_destroy(rt);
    cr_indexer_def.destroy(state);
}

/* Flags: --quick (short runs), --only ingest|query|http (one section). */
int main(int argc, char **argv) {
    bool quick = false;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--conns") == 0 && i + 1 < argc)
            clients = atoi(argv[++i]);
        else if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc)
            only_tokens = (uint32_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--instances") == 0 && i + 1 < argc)
            only_instances = (uint32_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--bs") == 0 && i + 1 < argc)
            only_bs = (uint32_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--bare") == 0 && i + 1 < argc)
            bare_rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--top-k") == 0 && i + 1 < argc)
            top_k = (unsigned)atoi(argv[++i]);
    }
    if (bare_rounds < 0 || bare_rounds > 99) {
        fprintf(stderr, "--bare takes 0..99 rounds\n");
        return 2;
    }
    if (clients < 1 || clients > CLIENTS_MAX) {
        fprintf(stderr, "--conns must be in [1, %d]\n", CLIENTS_MAX);
        return 2;
    }
    if (only == NULL || strcmp(only, "ingest") == 0) bench_ingest(quick ? 200 : 4000);
    uint32_t *prompts = make_prompts();
    const int counts[2] = {100, 1000};
    const uint32_t sizes[2] = {16, 128};
    for (int c = 0; c < 2 && (only == NULL || strcmp(only, "query") == 0); c++) {
        for (int s = 0; s < 2; s++) {
            if (skip_index(counts[c], sizes[s])) continue;
            struct cr_prefix_index *ix;
            check(cr_prefix_index_create(0, &ix), "create");
            populate_default(ix, sizes[s], counts[c], prompts);
            struct cr_prefix_summary sum;
            cr_prefix_index_summary(ix, &sum);
            printf("  %d instances bs %u: %llu blocks, %llu pairs, %.1f bytes/(block,instance)\n",
                   counts[c], sizes[s], (unsigned long long)sum.blocks,
                   (unsigned long long)sum.pairs, (double)sum.bytes_used / (double)sum.pairs);
            bench_in_process(ix, counts[c], sizes[s], prompts, quick ? 200 : 2000);
            cr_prefix_index_destroy(ix);
        }
    }
    for (int c = 0; c < 2 && (only == NULL || strcmp(only, "http") == 0); c++)
        for (int s = 0; s < 2; s++)
            if (!skip_index(counts[c], sizes[s]))
                bench_http_setup(counts[c], sizes[s], prompts, quick ? 0.3 : 2.0);
    free(prompts);
    free(bare_body);
    return 0;
}

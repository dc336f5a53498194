/* crescent-bench: latency and throughput of a running crescentd's store
 * master, measured from outside through libcrescent (see --help).
 *
 * Files: crescent-bench.c (options, set-up, the run, clean-up),
 * crescent-bench_store.c (one worker thread per connection: closed or open
 * loop over the pipelined or batch calls), crescent-bench_report.c (the
 * summary table and the JSON document). */
#ifndef CRESCENT_CMD_CRESCENT_BENCH_H
#define CRESCENT_CMD_CRESCENT_BENCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <jansson.h>

#include "core/latency_hist.h"
#include "crescent/client.h"

#define BENCH_EXIT_OK 0
#define BENCH_EXIT_ERRORS 1      /* the run finished but some operations failed */
#define BENCH_EXIT_USAGE 2
#define BENCH_EXIT_UNREACHABLE 3 /* crescentd could not be reached or refused the set-up */

#define BENCH_CONNECTIONS_MAX 256u
#define BENCH_DEPTH_MAX 1024u
#define BENCH_STATUS_KINDS 16u   /* distinct error statuses counted per worker */
#define BENCH_SECONDS_MAX 3600u  /* warm-up + duration, for the per-second timeline */
#define BENCH_KEY_BYTES 64u
#define BENCH_REMOVABLE_MAX 4096u /* fresh keys a mix worker remembers for its removes */

enum bench_op { OP_GET, OP_PUT, OP_EXIST, OP_REMOVE, OP_QUERY, OP_ROUTE, OP_KINDS };
#define BENCH_STORE_OPS 4 /* get..remove: the store RPC; query, route: the indexer's HTTP */
extern const char *const bench_op_names[OP_KINDS];

enum bench_distribution { DIST_UNIFORM, DIST_ZIPFIAN };

struct bench_options {
    const char *rpc_address;
    const char *tenant;
    char tenant_buf[64];
    char run_id[24];             /* prefix of every key this run creates */
    const char *workload;        /* as given: get, put, exist, remove or mix */
    unsigned mix[OP_KINDS];      /* weights; a single workload has one non-zero */
    unsigned connections;
    unsigned depth;
    unsigned batch;              /* keys per request; 1: the pipelined single-key calls */
    uint64_t keys;               /* key space preloaded for get/exist (and mix) */
    enum bench_distribution distribution;
    double zipf_theta;
    uint64_t object_bytes;
    bool values;                 /* put-bytes, get-bytes: move object_bytes of value per op */
    double duration_s;           /* 0 when --count is given */
    uint64_t count;              /* operations in the measured phase; 0: use duration */
    double warmup_s;
    double rate;                 /* open loop: operations per second over all connections; 0: closed */
    int timeout_ms;
    bool mount_fake;
    uint64_t fake_segment_bytes;
    const char *json_path;       /* "-" for stdout */
    const char *report_path;     /* --report: the HTML page */
    /* indexer workloads (query, route); --prompts is `keys` */
    bool indexer;
    const char *http_address;
    unsigned prompt_tokens;
    double shared_prefix;        /* share of every prompt that all prompts have in common */
    unsigned instances;          /* simulated publishers */
    unsigned block_size;
    const char *model;
    char model_buf[48];
    bool quiet;
    /* trace workloads (trace-route, trace-store: crescent-bench_trace*.c) */
    const char *trace_path;
    bool trace;                  /* a trace workload was chosen */
    bool trace_store;            /* trace-store (else trace-route) */
    double trace_speed;          /* x real time; 0: as fast as possible */
    unsigned kv_blocks;          /* trace-route: each simulated engine's KV cache */
    uint64_t block_bytes;        /* trace-store: bytes per block; 0: metadata of 4 KiB */
};

/* One error status and how often it was seen. */
struct bench_status_count {
    int status;
    uint64_t count;
};

/* One second of the run (index: whole seconds since the start, warm-up included). */
struct bench_second {
    uint64_t ops;
    uint64_t errors;
    double latency_sum_ns;
    uint64_t latency_max_ns;
};

struct bench_zipf;

struct bench_http {
    int fd;                  /* -1: not connected */
    char *buf;               /* the last response: head and body */
    size_t cap;
    size_t have;             /* bytes in buf: the last response and what followed it */
    size_t consumed;         /* the last response's end (the next one starts there) */
    char saved;              /* the byte at buf[consumed], overwritten by the body's NUL */
};

/* The indexer workloads' shared, read-only-while-running state. */
struct bench_indexer {
    const struct bench_options *opt;
    struct bench_http control;       /* set-up and clean-up requests */
    bool reachable;
    void *zmq_ctx;
    void **pubs;                     /* one PUB socket per simulated instance */
    uint64_t *sent;                  /* batches each has published */
    char (*names)[48];               /* their instance ids */
    unsigned registered;
    char **requests;                 /* a whole HTTP request per prompt */
    size_t *request_lens;
};

/* A worker owns one connection and everything below; the main thread reads
 * only `progress` while it runs and the rest after joining it. */
struct bench_worker {
    const struct bench_options *opt;
    const struct bench_zipf *zipf;   /* NULL: uniform */
    const struct bench_indexer *indexer; /* NULL: store workloads */
    unsigned index;
    uint64_t quota;                  /* measured operations for this worker (count mode) */
    uint64_t start_ns;               /* shared start of the run (warm-up begins) */
    uint64_t measure_ns;             /* start of the measured phase */
    uint64_t end_ns;                 /* end of the measured phase (duration mode) */
    uint64_t stop_ns;                /* no send after this: end_ns plus a grace (duration mode) */
    uint64_t rng;
    uint64_t sent_scheduled;         /* open loop: sends due so far (the next is due at
                                        start_ns + sent_scheduled / per-connection rate) */
    cr_client *client;
    _Atomic uint64_t progress;       /* measured operations finished, for the progress line */
    uint64_t ops[OP_KINDS];          /* measured, finished (ok or not) */
    uint64_t keys_done;              /* keys touched by measured operations */
    uint64_t errors;
    struct bench_status_count statuses[BENCH_STATUS_KINDS];
    uint64_t statuses_other;         /* errors beyond BENCH_STATUS_KINDS distinct statuses */
    uint64_t put_next;               /* fresh keys this worker has put (named by number) */
    uint64_t preloaded;              /* fresh keys put for it before the run (remove) */
    uint64_t remove_next;            /* preloaded keys removed so far (oldest first) */
    uint64_t trimmed;                /* put-bytes: fresh keys [0, trimmed) removed in the run */
    uint64_t removable[BENCH_REMOVABLE_MAX]; /* ring: fresh keys whose put succeeded (mix) */
    uint64_t removable_head, removable_tail;
    uint64_t measured_first_ns;      /* first measured send, last measured completion */
    uint64_t measured_last_ns;
    uint64_t sent_first_ns;          /* actual send times of the first and last measured */
    uint64_t sent_last_ns;           /* operations (open loop: how well the rate held) */
    uint64_t sent_count;
    struct bench_second *seconds;    /* BENCH_SECONDS_MAX */
    struct cr_latency_hist *hist[OP_KINDS];
    struct cr_latency_hist *uncorrected; /* every op, from its send (wrk2's --u_latency) */
    char failure[256];               /* why the worker stopped early; "" if it did not */
    void *value;                     /* put-bytes, get-bytes: object_bytes, this worker's */
};

/* Results merged from every worker. */
struct bench_totals {
    uint64_t ops[OP_KINDS];
    uint64_t ops_all;
    uint64_t keys_done;
    uint64_t errors;
    struct bench_status_count statuses[BENCH_STATUS_KINDS * 4];
    size_t status_kinds;
    uint64_t statuses_other;
    double elapsed_s;                /* measured phase: first send to last completion */
    double span_s;                   /* from the measured phase's start to its last completion:
                                        the timeline's last second covers span_s - (n - 1) */
    double sent_rate;                /* measured sends per second, over all connections */
    struct cr_latency_hist *hist[OP_KINDS + 1]; /* [OP_KINDS]: every operation */
    struct cr_latency_hist *uncorrected;        /* every operation, from its send */
    struct bench_second *seconds;
    unsigned seconds_used;
};

/* crescent-bench_store.c */
struct bench_zipf *bench_zipf_create(uint64_t n, double theta);
void bench_zipf_free(struct bench_zipf *zipf);
void bench_key_space(const struct bench_options *opt, uint64_t index, char out[BENCH_KEY_BYTES]);
void bench_key_fresh(const struct bench_options *opt, unsigned worker, uint64_t index,
                     char out[BENCH_KEY_BYTES]);
void *bench_worker_main(void *arg);
/* Shared by the store and indexer loops (see crescent-bench_store.c). */
bool bench_may_issue(struct bench_worker *w, uint64_t due_ns, uint64_t issued_measured,
                     bool *measured);
void bench_note_sent(struct bench_worker *w, uint64_t due_ns, uint64_t sent_ns, uint64_t nth);
void bench_record(struct bench_worker *w, enum bench_op op, bool measured, uint64_t intended_ns,
                  uint64_t sent_ns, unsigned keys, int status);
uint64_t bench_pick_key(struct bench_worker *w);
void bench_sleep_until(uint64_t when_ns);

/* crescent-bench_indexer.c: returns a BENCH_EXIT_* status (after a message). */
int bench_indexer_set_up(struct bench_indexer *ix, const struct bench_options *opt);
/* Only the publishers: checks /health, registers --instances publishers and
 * waits until the indexer subscribed to each (what the trace workloads use). */
int bench_indexer_open(struct bench_indexer *ix, const struct bench_options *opt);
/* Publishes one vLLM batch (msgpack) as instance's next seq. */
int bench_publish(struct bench_indexer *ix, unsigned instance, const void *data, size_t len);
/* last_seq the indexer reports for the instance; -1 when none yet. */
int64_t bench_applied_seq(struct bench_indexer *ix, unsigned instance);
/* A whole HTTP/1.1 request (malloc'd, *len_out bytes); NULL when out of memory. */
char *bench_format_request(const struct bench_options *opt, const char *method,
                           const char *path, const char *body, size_t *len_out);
/* Sends a whole request on h (connecting, or reconnecting once) and reads the
 * answer: its status and where the body starts in h->buf. */
int bench_http_exchange(struct bench_http *h, const struct bench_options *opt,
                        const char *request, size_t len, int *status, size_t *body_at);
/* A set-up call: the parsed answer of a 200, else NULL after a message. */
json_t *bench_http_call(struct bench_http *h, const struct bench_options *opt,
                        const char *method, const char *path, json_t *body);
void bench_indexer_clean_up(struct bench_indexer *ix);
void bench_indexer_run(struct bench_worker *w);

/* crescent-bench_trace.c: runs --workload trace-route or trace-store and
 * prints its report; returns a BENCH_EXIT_* status. */
int bench_trace_main(const struct bench_options *opt);

/* crescent-bench_report.c */
/* "OBJECT_NOT_FOUND", or "HTTP_400" for an HTTP status (positive). */
const char *bench_status_name(int status, char buf[16]);
void bench_print_summary(FILE *out, const struct bench_options *opt,
                         const struct bench_totals *totals);
/* The JSON document with every number (a new reference; NULL: out of memory). */
struct json_t;
struct json_t *bench_json_document(const struct bench_options *opt,
                                   const struct bench_totals *totals);
/* crescent-bench_html.c: the --report page; returns 0, or -1 with a message on stderr. */
int bench_write_report(const char *path, const struct bench_options *opt,
                       const struct bench_totals *totals);
/* Writes the JSON document; returns 0, or -1 with a message on stderr. */
int bench_write_json(const char *path, const struct bench_options *opt,
                     const struct bench_totals *totals);

static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif

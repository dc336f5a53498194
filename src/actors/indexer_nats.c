/* Dynamo's KV-router subjects over NATS (seed 003), on the indexer actor.
 *
 * With --nats-url, crescentd subscribes to
 *   namespace.<ns>.component.<component>.<kv subject>       RouterEvent
 *   namespace.<ns>.component.<component>.<metrics subject>  ForwardPassMetrics
 * and after each /route publishes a KVHitRateEvent on
 *   namespace.<ns>.component.<router component>.<hit-rate subject>.
 *
 * Threads: libnats delivers each subscription's messages on its own thread.
 * The callback does nothing but hand the natsMsg to the indexer actor with
 * cr_send (the runtime's rings; the message owns the natsMsg), so all
 * decoding and every change to the index happen on the indexer's thread.
 * No allocation is added per message: libnats already made the natsMsg.
 *
 * Each worker_id is an index instance named by its decimal worker_id in
 * tenant "default"; its blocks file under --nats-model and
 * --nats-block-size.  Blocks without token ids are placed by their
 * tokens_hash (Dynamo's XXH3 of the tokens, seed 1337), chained like tokens
 * under --prefix-hash-seed: with 1337 they land where token queries look.
 * A RouterEvent becomes a one-event batch and goes the
 * way a ZMQ engine's batch goes (cr_indexer_batch_check, then
 * cr_indexer_batch_apply), so nothing is applied unless all of it can be.
 * Metrics become the instance's load (as POST /load), and a worker whose
 * metrics are older than --nats-stale-ms is stale: /route leaves it out. */
#include <assert.h>
#include <inttypes.h>
#include <nats/nats.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/indexer_internal.h"
#include "core/log.h"
#include "crescent/error.h"
#include "msgs/dynamo_event.h"
#include "runtime/runtime.h"

/* Dynamo workers tracked at once; events of one more are refused, so a
 * publisher making up worker ids cannot fill the instance table. */
#define NATS_WORKERS_MAX 4096u
#define NATS_SWEEP_NS (100ull * 1000000u)
#define NATS_SUBJECT_MAX 1024u
#define NATS_DYNAMO_SEED 1337u /* Dynamo's XXH3_SEED (kv_router protocols) */

struct nats_sub {
    struct indexer_nats *owner;
    uint32_t kind; /* enum cr_indexer_nats_kind */
    natsSubscription *sub;
};

struct indexer_nats {
    natsConnection *conn;
    struct cr_actor *self;
    struct nats_sub subs[2];
    char subjects[2][NATS_SUBJECT_MAX];
    char hit_subject[NATS_SUBJECT_MAX]; /* "" none */
    struct cr_dyn_decoder *dec;
    struct indexer_counters counters; /* the workers' batches, as a publisher's */
    uint64_t stale_ns;
    uint64_t next_sweep_ns;
    _Atomic uint64_t dropped; /* cr_send refused (ring full past its wait, or stopping) */
    uint64_t events, metrics, refused[CR_DYN_BAD_KINDS], apply_refused, workers_refused;
    uint32_t workers, stale_workers;
    uint64_t stale_marks, hit_published, hit_failures;
    uint32_t logged;  /* bit per cause logged once (decode causes, then ours) */
};

enum { LOG_APPLY = CR_DYN_BAD_KINDS, LOG_WORKERS, LOG_PUBLISH, LOG_DROP };

static bool log_once(struct indexer_nats *n, unsigned bit) {
    if (n->logged & (1u << bit)) return false;
    n->logged |= 1u << bit;
    return true;
}

/* libnats' delivery thread: hand over, nothing else. */
static void on_message(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure) {
    (void)nc, (void)sub;
    struct nats_sub *s = closure;
    struct cr_msg msg = {.type = CR_MSG_INDEXER_NATS, .sender = CR_SENDER_EXTERNAL};
    struct cr_msg_indexer_nats *body = CR_MSG_BODY(&msg, struct cr_msg_indexer_nats);
    body->nats_msg = m;
    body->kind = s->kind;
    if (cr_send(s->owner->self, &msg) != CR_OK) {
        natsMsg_Destroy(m);
        atomic_fetch_add_explicit(&s->owner->dropped, 1, memory_order_relaxed);
    }
}

/* libnats' thread, once a connect retried in the background succeeds.  Its
 * being set is what makes natsConnection_Connect return at once when the
 * server is not up yet, instead of retrying there and holding the start. */
static void on_connected(natsConnection *nc, void *closure) {
    (void)nc, (void)closure;
    CR_INFO("indexer", "NATS: connected");
}

static int nats_fail(const char *what, natsStatus s) {
    CR_ERROR("indexer", "NATS: %s: %s (check --nats-url and that the server runs)", what,
             natsStatus_GetText(s));
    return CR_ERR_IO;
}

static void subject(char *out, const struct cr_daemon_config *c, const char *component,
                    const char *last) {
    snprintf(out, NATS_SUBJECT_MAX, "namespace.%s.component.%s.%s", c->nats_namespace, component,
             last);
}

int indexer_nats_start(struct indexer_state *st, struct cr_actor *self) {
    const struct cr_daemon_config *c = &st->config;
    if (c->nats_url[0] == '\0') return CR_OK;
    struct indexer_nats *n = calloc(1, sizeof(*n));
    if (n == NULL || cr_dyn_decoder_create(&n->dec) != CR_OK) {
        free(n);
        return CR_ERR_NOMEM;
    }
    st->nats = n;
    n->self = self;
    n->stale_ns = (uint64_t)c->nats_stale_ms * 1000000u;
    subject(n->subjects[CR_INDEXER_NATS_KV], c, c->nats_component, c->nats_kv_subject);
    subject(n->subjects[CR_INDEXER_NATS_METRICS], c, c->nats_component, c->nats_metrics_subject);
    if (c->nats_hit_rate_subject[0] != '\0')
        subject(n->hit_subject, c, c->nats_router_component, c->nats_hit_rate_subject);
    natsOptions *opts = NULL;
    natsStatus s = natsOptions_Create(&opts);
    if (s == NATS_OK) s = natsOptions_SetURL(opts, c->nats_url);
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1); /* forever */
    if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, 500);
    if (s == NATS_OK) s = natsOptions_SetRetryOnFailedConnect(opts, true, on_connected, NULL);
    if (s != NATS_OK) {
        natsOptions_Destroy(opts);
        return nats_fail("options", s);
    }
    s = natsConnection_Connect(&n->conn, opts);
    natsOptions_Destroy(opts);
    if (s == NATS_NOT_YET_CONNECTED)
        CR_WARN("indexer", "NATS: %s not reachable yet; connecting in the background", c->nats_url);
    else if (s != NATS_OK)
        return nats_fail(c->nats_url, s);
    for (uint32_t k = 0; k < 2; k++) {
        n->subs[k] = (struct nats_sub){.owner = n, .kind = k};
        s = natsConnection_Subscribe(&n->subs[k].sub, n->conn, n->subjects[k], on_message,
                                     &n->subs[k]);
        if (s != NATS_OK) return nats_fail(n->subjects[k], s);
    }
    if (c->prefix_hash_seed != NATS_DYNAMO_SEED)
        CR_WARN("indexer", "NATS: --prefix-hash-seed is %u, not Dynamo's %u: RouterEvents whose "
                "blocks carry tokens_hash but no token_ids will not match token queries",
                c->prefix_hash_seed, NATS_DYNAMO_SEED);
    CR_INFO("indexer", "NATS %s: RouterEvents on %s, metrics on %s, hit rate to %s", c->nats_url,
            n->subjects[0], n->subjects[1], n->hit_subject[0] ? n->hit_subject : "(none)");
    return CR_OK;
}

void indexer_nats_stop(struct indexer_state *st) {
    struct indexer_nats *n = st->nats;
    if (n == NULL) return;
    for (uint32_t k = 0; k < 2; k++) {
        if (n->subs[k].sub == NULL) continue;
        /* Unsubscribe, then wait until no callback runs (its sends now fail
         * with CR_ERR_SHUTDOWN and free their natsMsg). */
        if (natsSubscription_Drain(n->subs[k].sub) == NATS_OK)
            natsSubscription_WaitForDrainCompletion(n->subs[k].sub, 2000);
        natsSubscription_Destroy(n->subs[k].sub);
        n->subs[k].sub = NULL;
    }
    if (n->conn != NULL) natsConnection_Close(n->conn);
}

void indexer_nats_free(struct indexer_state *st) {
    struct indexer_nats *n = st->nats;
    if (n == NULL) return;
    indexer_nats_stop(st);
    natsConnection_Destroy(n->conn);
    cr_dyn_decoder_destroy(n->dec);
    free(n);
    st->nats = NULL;
    nats_Close();
}

void indexer_nats_discard(struct cr_msg_indexer_nats *body) { natsMsg_Destroy(body->nats_msg); }

/* The worker's instance, made on first sight within NATS_WORKERS_MAX. */
static struct indexer_instance_info *worker(struct indexer_state *st, int64_t worker_id,
                                            uint16_t *id) {
    struct indexer_nats *n = st->nats;
    char name[32];
    snprintf(name, sizeof(name), "%" PRId64, worker_id);
    int rc = cr_prefix_index_instance_find(st->index, name, "default", id);
    struct indexer_instance_info *info = rc == CR_OK ? indexer_instance_info_get(st, *id) : NULL;
    if (info != NULL && info->nats_worker) return info;
    if (n->workers >= NATS_WORKERS_MAX) {
        n->workers_refused++;
        if (log_once(n, LOG_WORKERS))
            CR_WARN("indexer", "NATS: worker %s refused: %u Dynamo workers already tracked",
                    name, NATS_WORKERS_MAX);
        return NULL;
    }
    if (rc != CR_OK) {
        rc = cr_prefix_index_instance_add(st->index, name, "default", id);
        if (rc != CR_OK && rc != CR_ERR_OBJECT_ALREADY_EXISTS) return NULL;
        if ((info = indexer_instance_info_get(st, *id)) == NULL) return NULL;
    }
    if (info == NULL) return NULL;
    indexer_instance_claimed(st, *id);
    info->nats_worker = true;
    info->nats_worker_id = worker_id;
    info->nats_metrics_ns = st->now_ns; /* the timeout runs from first sight */
    n->workers++;
    return info;
}

static void refused(struct indexer_nats *n, enum cr_dyn_bad cause, const char *subject,
                    const char *error) {
    n->refused[cause]++;
    if (log_once(n, cause))
        CR_WARN("indexer", "NATS %s: payload refused (%s; logged once per cause, counted in "
                "crescent_indexer_nats_refused_*): %s", subject, cr_dyn_bad_name(cause), error);
}

static void apply_event(struct indexer_state *st, const struct cr_dyn_router_event *e) {
    struct indexer_nats *n = st->nats;
    uint16_t id;
    if (worker(st, e->worker_id, &id) == NULL) return;
    char lora[32];
    snprintf(lora, sizeof(lora), "%" PRIu64, e->lora_id);
    struct cr_kv_event ev = {
        .kind = e->kind,
        .dialect = CR_KV_DIALECT_VLLM_MAP,
        .hashes = e->hashes,
        .hash_count = e->hash_count,
        .has_parent = e->has_parent,
        .parent_hash = e->parent_hash,
        .has_token_ids = e->has_token_ids,
        .token_ids = e->token_ids,
        .token_count = e->token_count,
        .local_hashes = e->has_token_ids ? NULL : e->local_hashes,
        .lora_name = {e->has_lora_id && e->lora_id != 0 ? lora : NULL, (uint32_t)strlen(lora)},
    };
    const char *error_prefix = "";
    char error[256] = "";
    uint64_t want = (uint64_t)e->hash_count * st->config.nats_block_size;
    /* The seed's token_ids are the whole sequence: a partial last block
     * has no hash and is left out. */
    if (e->kind == CR_KV_EVENT_STORED && e->has_token_ids && e->token_count > want)
        ev.token_count = (uint32_t)want;
    /* A worker's tokens_hash under a LoRA was seeded by rules of its Dynamo
     * release that crescent's namespaces do not share: filed, such blocks
     * could never match a query, so the run is an orphan. */
    if (ev.kind == CR_KV_EVENT_STORED && !e->has_token_ids && ev.lora_name.ptr != NULL)
        ev.local_hashes = NULL;
    struct cr_kv_batch batch = {.event_count = 1, .events = &ev};
    struct indexer_target target = {
        .instance = id,
        .tenant = "default",
        .model = st->config.nats_model,
        .block_size = st->config.nats_block_size,
        .counters = &n->counters,
    };
    int rc = cr_indexer_batch_check(st->index, &target, &batch, error, sizeof(error));
    if (rc == CR_OK) rc = cr_indexer_batch_apply(st->index, &target, &batch);
    if (rc == CR_ERR_NOMEM) error_prefix = "out of memory or engine hash bound: ";
    if (rc == CR_OK) {
        n->events++;
        n->counters.events++;
        return;
    }
    n->apply_refused++;
    if (log_once(n, LOG_APPLY))
        CR_WARN("indexer", "NATS: RouterEvent of worker %" PRId64 " not applied (logged once, "
                "counted in crescent_indexer_nats_apply_refused_total): %s%s", e->worker_id,
                error_prefix, error);
}

static void apply_metrics(struct indexer_state *st, const struct cr_dyn_metrics *m) {
    struct indexer_nats *n = st->nats;
    uint16_t id;
    struct indexer_instance_info *info = worker(st, m->worker_id, &id);
    if (info == NULL) return;
    info->has_load = true;
    info->load = (struct cr_indexer_load){
        .request_active_slots = m->request_active_slots,
        .request_total_slots = m->request_total_slots,
        .kv_active_blocks = m->kv_active_blocks,
        .kv_total_blocks = m->kv_total_blocks,
        .num_requests_waiting = m->num_requests_waiting,
        .gpu_cache_usage_perc = m->gpu_cache_usage_perc,
        .gpu_prefix_cache_hit_rate = m->gpu_prefix_cache_hit_rate,
    };
    snprintf(info->load.instance_id, sizeof(info->load.instance_id), "%" PRId64, m->worker_id);
    snprintf(info->load.tenant_id, sizeof(info->load.tenant_id), "default");
    info->load_ns = info->nats_metrics_ns = st->now_ns;
    if (info->nats_stale) {
        info->nats_stale = false;
        n->stale_workers--;
        CR_INFO("indexer", "NATS: worker %" PRId64 " reports metrics again", m->worker_id);
    }
    n->metrics++;
}

void indexer_nats_handle(struct indexer_state *st, struct cr_msg_indexer_nats *body) {
    struct indexer_nats *n = st->nats;
    natsMsg *m = body->nats_msg;
    if (n == NULL) { /* cannot happen: only its subscriptions send these */
        natsMsg_Destroy(m);
        return;
    }
    const char *data = natsMsg_GetData(m);
    size_t len = (size_t)natsMsg_GetDataLength(m);
    char error[256];
    enum cr_dyn_bad cause;
    if (body->kind == CR_INDEXER_NATS_KV) {
        struct cr_dyn_router_event e;
        int rc = cr_dyn_decode_router_event(n->dec, data, len, &e, &cause, error, sizeof(error));
        if (rc == CR_OK) apply_event(st, &e);
        else if (rc == CR_ERR_PROTOCOL) refused(n, cause, natsMsg_GetSubject(m), error);
        else n->apply_refused++;
    } else {
        struct cr_dyn_metrics metrics;
        if (cr_dyn_decode_metrics(data, len, &metrics, &cause, error, sizeof(error)) == CR_OK)
            apply_metrics(st, &metrics);
        else
            refused(n, cause, natsMsg_GetSubject(m), error);
    }
    natsMsg_Destroy(m);
    indexer_nats_sweep(st);
}

void indexer_nats_sweep(struct indexer_state *st) {
    struct indexer_nats *n = st->nats;
    if (n == NULL || st->now_ns < n->next_sweep_ns) return;
    n->next_sweep_ns = st->now_ns + NATS_SWEEP_NS;
    for (uint32_t id = 0; id < st->instance_cap; id++) {
        struct indexer_instance_info *info = &st->instances[id];
        if (!info->nats_worker || info->nats_stale || st->now_ns - info->nats_metrics_ns < n->stale_ns)
            continue;
        info->nats_stale = true;
        n->stale_workers++;
        n->stale_marks++;
        CR_WARN("indexer", "NATS: worker %" PRId64 " stale: no metrics for %u ms (--nats-stale-ms);"
                " /route leaves it out", info->nats_worker_id, st->config.nats_stale_ms);
    }
}

bool indexer_nats_stale(const struct indexer_state *st, uint16_t id) {
    return st->nats != NULL && id < st->instance_cap && st->instances[id].nats_worker &&
           st->instances[id].nats_stale;
}

/* One publish per /route: libnats copies it into its buffer under a lock
 * and its flusher thread writes it; the seed sends each event as it comes. */
void indexer_nats_routed(struct indexer_state *st, uint16_t best, uint64_t isl_tokens,
                         uint64_t hit_tokens) {
    struct indexer_nats *n = st->nats;
    if (n == NULL || n->hit_subject[0] == '\0' || best >= st->instance_cap ||
        !st->instances[best].nats_worker)
        return;
    char json[160];
    size_t len = cr_dyn_hit_rate_json(json, sizeof(json), isl_tokens, hit_tokens,
                                      st->instances[best].nats_worker_id);
    natsStatus s = natsConnection_Publish(n->conn, n->hit_subject, json, (int)len);
    if (s == NATS_OK) {
        n->hit_published++;
        return;
    }
    n->hit_failures++;
    if (log_once(n, LOG_PUBLISH))
        CR_WARN("indexer", "NATS: hit-rate event not published on %s (logged once): %s",
                n->hit_subject, natsStatus_GetText(s));
}

#define STAT(name_, value_)                                                                        \
    do {                                                                                           \
        if (out->extra_count < CR_ACTOR_STATS_EXTRA_MAX) {                                         \
            out->extra[out->extra_count].name = (name_);                                           \
            out->extra[out->extra_count].value = (uint64_t)(value_);                               \
            out->extra_count++;                                                                    \
        }                                                                                          \
    } while (0)

void indexer_nats_stats(const struct indexer_state *st, struct cr_actor_stats *out) {
    struct indexer_nats *n = st->nats;
    if (n == NULL) return;
    STAT("nats_events_total", n->events);
    STAT("nats_metrics_total", n->metrics);
    STAT("nats_refused_bad_json_total", n->refused[CR_DYN_BAD_JSON]);
    STAT("nats_refused_bad_field_total", n->refused[CR_DYN_BAD_FIELD]);
    STAT("nats_refused_bad_kind_total", n->refused[CR_DYN_BAD_KIND]);
    STAT("nats_refused_bad_hash_total", n->refused[CR_DYN_BAD_HASH]);
    STAT("nats_refused_bad_tokens_total", n->refused[CR_DYN_BAD_TOKENS]);
    STAT("nats_refused_over_limit_total", n->refused[CR_DYN_BAD_LIMIT]);
    STAT("nats_apply_refused_total", n->apply_refused);
    STAT("nats_orphan_runs_total", n->counters.orphans);
    STAT("nats_dropped_total", atomic_load_explicit(&((struct indexer_nats *)n)->dropped,
                                                    memory_order_relaxed));
    STAT("nats_workers", n->workers);
    STAT("nats_workers_refused_total", n->workers_refused);
    STAT("nats_workers_stale", n->stale_workers);
    STAT("nats_stale_marks_total", n->stale_marks);
    STAT("nats_hit_rate_published_total", n->hit_published);
    STAT("nats_hit_rate_publish_failures_total", n->hit_failures);
}

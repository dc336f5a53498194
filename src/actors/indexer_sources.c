/* The indexer's external publishers: one SUB socket per (instance, tenant,
 * dp_rank), sequence tracking, replay after a gap on a DEALER that lives for
 * one replay round (see indexer_internal.h).  Runs on the indexer's thread
 * only. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "actors/indexer_internal.h"
#include "core/log.h"
#include "crescent/error.h"

#define FRAMES_MAX 4u
#define MALFORMED_LOG_NS (60ull * 1000000000u)
#define REPLAY_POLL_MS 50

static const uint8_t end_marker[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

static void put_be64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static struct indexer_source *source_find(struct indexer_state *st, const char *instance,
                                          const char *tenant, uint32_t dp_rank) {
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++) {
        struct indexer_source *s = &st->sources[i];
        if (s->used && s->reg.dp_rank == dp_rank && strcmp(s->reg.instance_id, instance) == 0 &&
            strcmp(s->reg.tenant_id, tenant) == 0)
            return s;
    }
    return NULL;
}

static void socket_options(struct indexer_state *st, void *sock) {
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
    /* A peer announcing a larger message is disconnected before ZMQ
     * allocates it (--indexer-max-message-mb). */
    if (st->max_message_bytes > 0)
        zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &st->max_message_bytes, sizeof(st->max_message_bytes));
}

static void *open_socket(struct indexer_state *st, int type, const char *endpoint, char *error,
                         size_t size) {
    void *sock = zmq_socket(st->zmq, type);
    if (sock != NULL) socket_options(st, sock);
    if (sock == NULL || zmq_connect(sock, endpoint) != 0) {
        snprintf(error, size, "cannot connect to '%.200s': %s", endpoint,
                 zmq_strerror(zmq_errno()));
        if (sock != NULL) zmq_close(sock);
        return NULL;
    }
    return sock;
}

/* Opens the publisher's SUB with a monitor (a PAIR on an inproc endpoint
 * of its own) that reports handshakes and disconnects, for the health in
 * /services and because a SUB whose peer broke the protocol (a message
 * over ZMQ_MAXMSGSIZE above all) is dropped by ZMQ and never reconnected:
 * on a disconnect the SUB is opened again (monitor_event).  The monitor is
 * attached before the connect, so its first handshake is seen.  With bind
 * the SUB listens at endpoint and the publisher connects (an address in use
 * is refused).  Returns
 * the SUB (and *monitor, NULL when it could not be set up: health then
 * stays "never connected"), or NULL with one line in error. */
static void *sub_open(struct indexer_state *st, const char *endpoint, bool bind,
                      void **monitor, char *error, size_t size) {
    *monitor = NULL;
    void *sub = zmq_socket(st->zmq, ZMQ_SUB);
    if (sub == NULL) {
        snprintf(error, size, "cannot open a SUB socket: %s", zmq_strerror(zmq_errno()));
        return NULL;
    }
    socket_options(st, sub);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
    char ep[64];
    snprintf(ep, sizeof(ep), "inproc://crescent-indexer-monitor-%llu",
             (unsigned long long)++st->monitor_seq);
    if (zmq_socket_monitor(sub, ep, ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED) == 0) {
        *monitor = zmq_socket(st->zmq, ZMQ_PAIR);
        int zero = 0;
        if (*monitor != NULL) zmq_setsockopt(*monitor, ZMQ_LINGER, &zero, sizeof(zero));
        if (*monitor != NULL && zmq_connect(*monitor, ep) != 0) {
            zmq_close(*monitor);
            *monitor = NULL;
        }
    }
    if ((bind ? zmq_bind(sub, endpoint) : zmq_connect(sub, endpoint)) != 0) {
        int err = zmq_errno();
        if (bind && err == EADDRINUSE)
            snprintf(error, size,
                     "cannot bind '%.200s': the address is in use (by another process or "
                     "registration); give the publisher another port",
                     endpoint);
        else
            snprintf(error, size, "cannot %s '%.200s': %s", bind ? "bind" : "connect to",
                     endpoint, zmq_strerror(err));
        zmq_close(sub);
        if (*monitor != NULL) zmq_close(*monitor);
        *monitor = NULL;
        return NULL;
    }
    return sub;
}

static void source_bind_target(struct indexer_source *s, uint16_t instance) {
    s->target = (struct indexer_target){
        .instance = instance,
        .dp_rank = (uint8_t)s->reg.dp_rank,
        .tenant = s->reg.tenant_id,
        .model = s->reg.model,
        .lora_name = s->reg.lora_name,
        .salt = s->reg.salt,
        .block_size = s->reg.block_size,
        .counters = &s->counters,
        .keys = &s->keys,
    };
}

/* Opens the publisher's SUB (or, with `bound`, takes that bound SUB over:
 * ZMQ closes sockets in the background, so a new SUB could not bind the
 * address the old one still holds) and checks the replay endpoint with a
 * DEALER that is closed again: each replay round opens its own.  Returns
 * the SUB, or NULL with one line in error (`bound` then keeps its SUB). */
static void *source_open(struct indexer_state *st, const struct cr_indexer_registration *reg,
                         struct indexer_source *bound, void **monitor, char *error,
                         size_t error_size) {
    void *sub = bound != NULL ? bound->sub : NULL;
    if (bound != NULL) *monitor = bound->monitor;
    else sub = sub_open(st, reg->endpoint, reg->bind, monitor, error, error_size);
    if (sub == NULL || reg->replay_endpoint[0] == '\0') return sub;
    void *probe = open_socket(st, ZMQ_DEALER, reg->replay_endpoint, error, error_size);
    if (probe == NULL) {
        if (bound != NULL) return NULL;
        zmq_close(sub);
        if (*monitor != NULL) zmq_close(*monitor);
        return NULL;
    }
    zmq_close(probe);
    return sub;
}

static bool replay_start(struct indexer_state *st, struct indexer_source *s, const void *payload,
                         size_t len, uint64_t seq, bool first);

static struct indexer_source *source_free_slot(struct indexer_state *st) {
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++)
        if (!st->sources[i].used) return &st->sources[i];
    return NULL;
}

int indexer_source_add(struct indexer_state *st, const struct cr_indexer_registration *reg,
                       char *error, size_t error_size) {
    assert(st != NULL && reg != NULL && error != NULL && error_size > 0);
    /* Sockets first: a registration refused for its endpoints leaves
     * everything as it was, an earlier registration of the key included.
     * The same key binding the same address again keeps its bound SUB. */
    struct indexer_source *old = source_find(st, reg->instance_id, reg->tenant_id, reg->dp_rank);
    struct indexer_source *bound =
        old != NULL && reg->bind && old->reg.bind && strcmp(old->reg.endpoint, reg->endpoint) == 0
            ? old
            : NULL;
    bool connected = bound != NULL && bound->connected;
    void *monitor;
    void *sub = source_open(st, reg, bound, &monitor, error, error_size);
    if (sub == NULL) return CR_ERR_INVALID_PARAMS;
    if (bound != NULL) bound->sub = bound->monitor = NULL; /* taken over */
    /* Registering the same key again replaces it (an engine that restarted
     * may come back on another endpoint); its blocks go with the old one. */
    if (source_find(st, reg->instance_id, reg->tenant_id, reg->dp_rank) != NULL)
        indexer_source_remove(st, reg->instance_id, reg->tenant_id, reg->dp_rank);
    struct indexer_source *s = source_free_slot(st);
    uint16_t instance = 0;
    int rc = s == NULL ? CR_ERR_NOMEM
                       : cr_prefix_index_instance_add(st->index, reg->instance_id, reg->tenant_id,
                                                      &instance);
    if (rc != CR_OK && rc != CR_ERR_OBJECT_ALREADY_EXISTS) {
        if (s == NULL)
            snprintf(error, error_size,
                     "at most %u publishers can be registered; unregister one first",
                     CR_INDEXER_SOURCES_MAX);
        else
            snprintf(error, error_size, "cannot add instance: %s", cr_strerror(rc));
        zmq_close(sub);
        if (monitor != NULL) zmq_close(monitor);
        return rc;
    }
    /* Nothing fails from here on: no half-made registration is left. */
    indexer_instance_claimed(st, instance);
    memset(s, 0, sizeof(*s));
    s->reg = *reg;
    s->sub = sub;
    s->monitor = monitor;
    s->connected = s->ever_connected = connected;
    s->link_since_ns = st->now_ns;
    cr_prefix_map_init(&s->keys, NULL);
    source_bind_target(s, instance);
    s->used = true;
    st->source_count++;
    st->poll_dirty = true;
    CR_INFO("indexer", "registered %s|%s|%u (%s) %s %s%s", reg->instance_id, reg->tenant_id,
            reg->dp_rank, reg->type, reg->bind ? "bound at" : "on", reg->endpoint,
            reg->replay_endpoint[0] != '\0' ? " with replay from seq 0" : "");
    /* First subscribe (crescentd's start included): everything the
     * publisher still holds, from its oldest batch, before the live stream
     * (held meanwhile; its copies of replayed batches are then dropped). */
    if (reg->replay_endpoint[0] != '\0') {
        s->synced = true;
        replay_start(st, s, NULL, 0, 0, true);
    }
    return CR_OK;
}

static void source_close(struct indexer_source *s) {
    if (s->sub != NULL) zmq_close(s->sub);
    if (s->monitor != NULL) zmq_close(s->monitor);
    s->monitor = NULL;
    if (s->dealer != NULL) zmq_close(s->dealer);
    free(s->pending);
    cr_prefix_map_free(&s->keys);
    s->sub = s->dealer = s->pending = NULL;
    s->used = false;
}

bool indexer_instance_has_sources(const struct indexer_state *st, uint16_t id) {
    assert(st != NULL);
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++)
        if (st->sources[i].used && st->sources[i].target.instance == id) return true;
    return false;
}

/* Clears (or removes) what the source filed under every DP rank it used:
 * events and batches may name ranks other than the registered one. */
static void source_clear_ranks(struct indexer_state *st, struct indexer_source *s, bool remove) {
    uint64_t ranks = s->counters.dp_ranks_seen | (1ull << s->target.dp_rank);
    for (uint32_t rank = 0; rank < 64; rank++) {
        uint32_t pub;
        if (!(ranks & (1ull << rank))) continue;
        if (cr_prefix_index_publisher(st->index, s->target.instance, (uint8_t)rank, &pub) != CR_OK)
            continue;
        if (remove)
            cr_prefix_index_publisher_remove(st->index, pub);
        else
            cr_prefix_index_cleared(st->index, pub);
    }
}

int indexer_source_remove(struct indexer_state *st, const char *instance, const char *tenant,
                          uint32_t dp_rank) {
    assert(st != NULL && instance != NULL && tenant != NULL);
    struct indexer_source *s = source_find(st, instance, tenant, dp_rank);
    if (s == NULL) return CR_ERR_OBJECT_NOT_FOUND;
    uint16_t id = s->target.instance;
    source_clear_ranks(st, s, true);
    source_close(s);
    st->source_count--;
    st->poll_dirty = true;
    /* The last publisher of the instance: its blocks, load and hit counters go. */
    if (!indexer_instance_has_sources(st, id)) indexer_instance_forget(st, id);
    CR_INFO("indexer", "unregistered %s|%s|%u", instance, tenant, dp_rank);
    return CR_OK;
}

void indexer_sources_close(struct indexer_state *st) {
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++)
        if (st->sources[i].used) source_close(&st->sources[i]);
    st->source_count = 0;
}

/* ---- applying payloads ---- */

/* Decodes, checks and applies one batch; one that fails is counted and
 * dropped.  Returns the batch's ts, or -1 when it does not decode. */
static double apply_payload(struct indexer_state *st, struct indexer_source *s,
                            const void *payload, size_t len) {
    const struct cr_kv_batch *batch;
    char error[256];
    double ts = -1.0;
    s->last_batch_ns = st->now_ns;
    s->have_batch = true;
    int rc = cr_kv_decode(st->decoder, payload, len, &batch, error, sizeof(error));
    if (rc == CR_OK) {
        ts = batch->ts;
        rc = cr_indexer_batch_check(st->index, &s->target, batch, error, sizeof(error));
    }
    uint64_t refusals = cr_prefix_index_engine_refusals(st->index);
    if (rc == CR_OK) rc = cr_indexer_batch_apply(st->index, &s->target, batch);
    uint64_t refused = cr_prefix_index_engine_refusals(st->index) - refusals;
    if (refused > 0) {
        s->counters.engine_refusals += refused;
        if (!s->engine_bound_hit)
            CR_WARN("indexer", "%s|%s|%u: holds %u engine block hashes, the bound: stored runs "
                    "past it are refused (raise --indexer-engine-hashes-max if the engine "
                    "really holds that many blocks)", s->reg.instance_id, s->reg.tenant_id,
                    s->reg.dp_rank, st->engine_hashes_max);
        s->engine_bound_hit = true;
    }
    /* A batch refused at the bound is well-formed: it is counted once, as
     * engine_bound_refusals above, and not as malformed too. */
    if (rc == CR_OK || (rc == CR_ERR_NOMEM && refused > 0)) return ts;
    if (rc == CR_ERR_NOMEM) snprintf(error, sizeof(error), "out of memory applying the batch");
    s->counters.malformed++;
    if (cr_log_ratelimit(&s->last_malformed_log_ns, st->now_ns, MALFORMED_LOG_NS))
        CR_WARN("indexer", "%s|%s|%u: batch dropped (%llu so far): %s", s->reg.instance_id,
                s->reg.tenant_id, s->reg.dp_rank, (unsigned long long)s->counters.malformed, error);
    return ts;
}

static void restart_seen(struct indexer_state *st, struct indexer_source *s, uint64_t seq) {
    /* Sequence numbers went back: the engine restarted and its cache (and
     * its per-process hash seed) is gone, so its old blocks are too. */
    s->counters.restarts++;
    source_clear_ranks(st, s, false);
    cr_prefix_map_free(&s->keys);
    s->stale = false;
    s->stale_reason = NULL;
    s->lost_count = 0; /* what was lost went with the blocks */
    s->engine_bound_hit = false;
    CR_INFO("indexer", "%s|%s|%u restarted (seq %llu after %llu): its blocks were cleared",
            s->reg.instance_id, s->reg.tenant_id, s->reg.dp_rank, (unsigned long long)seq,
            (unsigned long long)s->last_seq);
}

/* ---- replay rounds ---- */

/* The seq the index needs next from this publisher. */
static uint64_t next_seq(const struct indexer_source *s) { return s->have_seq ? s->last_seq + 1 : 0; }

/* Closes the round's DEALER (LINGER 0, see open_socket): replies still in
 * flight for it are discarded with the socket. */
static void replay_close(struct indexer_state *st, struct indexer_source *s) {
    if (s->dealer == NULL) return;
    zmq_close(s->dealer);
    s->dealer = NULL;
    st->poll_dirty = true;
}

static void mark_stale(struct indexer_source *s, const char *reason) {
    s->stale = true;
    s->stale_reason = reason;
}

/* The index misses seqs [first, last]: the publisher's replay no longer
 * holds them (reason NULL), or gave no answer (reason says so).  Counted,
 * kept for /services (the newest CR_INDEXER_LOST_RANGES_MAX), logged, and
 * the publisher marked stale: blocks those batches stored are unknown. */
static void history_lost(struct indexer_source *s, uint64_t first, uint64_t last,
                         const char *reason) {
    assert(first <= last);
    if (s->lost_count == CR_INDEXER_LOST_RANGES_MAX) {
        memmove(&s->lost[0], &s->lost[1], sizeof(s->lost[0]) * (CR_INDEXER_LOST_RANGES_MAX - 1));
        s->lost_count--;
    }
    s->lost[s->lost_count++] = (struct indexer_seq_range){first, last};
    s->counters.lost_batches += last - first + 1;
    if (reason == NULL) reason = "history lost: the publisher's replay no longer holds some seqs";
    mark_stale(s, reason);
    CR_WARN("indexer", "%s|%s|%u: seqs %llu..%llu missed (%s); blocks they stored are unknown to "
            "the index", s->reg.instance_id, s->reg.tenant_id, s->reg.dp_rank,
            (unsigned long long)first, (unsigned long long)last, reason);
}

/* Opens a fresh DEALER for a round and sends ["", start].  A fresh socket
 * per round, so that late replies of an earlier round (its end marker
 * above all) can never be read as the next round's, and so that the
 * peer's send queue for this connection starts empty (see
 * CR_INDEXER_REPLAY_WINDOW).  Returns CR_OK or CR_ERR_IO (logged, at most
 * once a minute per publisher). */
static int replay_request(struct indexer_state *st, struct indexer_source *s, uint64_t start) {
    char error[CR_INDEXER_ERROR_MAX + 64] = "cannot send the request";
    uint8_t start_be[8];
    put_be64(start_be, start);
    replay_close(st, s);
    s->round_taken = 0;
    s->replay_deadline_ns = st->now_ns + CR_INDEXER_REPLAY_TIMEOUT_NS;
    s->dealer = open_socket(st, ZMQ_DEALER, s->reg.replay_endpoint, error, sizeof(error));
    /* The empty delimiter frame first: a ROUTER peer expects [id, "", start]. */
    if (s->dealer != NULL && zmq_send(s->dealer, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) == 0 &&
        zmq_send(s->dealer, start_be, 8, ZMQ_DONTWAIT) == 8) {
        s->counters.replay_rounds++;
        st->poll_dirty = true;
        return CR_OK;
    }
    replay_close(st, s);
    if (cr_log_ratelimit(&s->last_replay_log_ns, st->now_ns, MALFORMED_LOG_NS))
        CR_WARN("indexer", "%s|%s|%u: no replay from %llu: %s", s->reg.instance_id,
                s->reg.tenant_id, s->reg.dp_rank, (unsigned long long)start, error);
    return CR_ERR_IO;
}

/* Starts a replay from next_seq.  payload is the live batch that revealed
 * the gap, applied after the replay; NULL for a first subscribe (first) or
 * a reconnection.  Returns false when no memory for the copy: the caller
 * goes on without a replay. */
static bool replay_start(struct indexer_state *st, struct indexer_source *s, const void *payload,
                         size_t len, uint64_t seq, bool first) {
    assert(!s->replaying && s->pending == NULL && s->dealer == NULL);
    if (payload != NULL) {
        s->pending = malloc(len > 0 ? len : 1); /* one copy per gap, not per message */
        if (s->pending == NULL) return false;
        memcpy(s->pending, payload, len);
        s->pending_len = len;
        s->pending_seq = seq;
    }
    s->replaying = true;
    s->replay_first = first;
    s->replay_started_ns = st->now_ns;
    s->replay_taken_at_start = s->counters.replayed;
    s->round_fails = 0;
    s->replay_ts_max = -1.0;
    s->counters.replays++;
    st->poll_dirty = true;
    if (replay_request(st, s, next_seq(s)) != CR_OK) {
        s->round_fails = 1;
        s->retry_at_ns = st->now_ns + CR_INDEXER_REPLAY_BACKOFF_NS;
    }
    return true;
}

static void replay_finish(struct indexer_state *st, struct indexer_source *s) {
    assert(s->replaying);
    replay_close(st, s);
    s->replaying = false;
    st->poll_dirty = true;
    uint64_t window_next = s->have_seq ? s->last_seq + 1 : 0;
    if (s->pending != NULL) {
        window_next = s->pending_seq + 1;
        if (!s->have_seq || s->pending_seq > s->last_seq) {
            if (s->pending_seq != next_seq(s))
                history_lost(s, next_seq(s), s->pending_seq - 1, s->stale_reason);
            s->have_seq = true;
            s->last_seq = s->pending_seq;
            double ts = apply_payload(st, s, s->pending, s->pending_len);
            if (ts > s->replay_ts_max) s->replay_ts_max = ts;
        } else {
            s->counters.duplicates++;
        }
    } else if (s->replay_first) {
        window_next = 0; /* first subscribe: every live batch so far may be a copy */
    }
    free(s->pending);
    s->pending = NULL;
    uint64_t taken = s->counters.replayed - s->replay_taken_at_start;
    if (taken > 0 || s->replay_first)
        CR_INFO("indexer", "%s|%s|%u: %s replay took %llu batches in %llu ms; at seq %s%llu",
                s->reg.instance_id, s->reg.tenant_id, s->reg.dp_rank,
                s->replay_first ? "first-subscribe" : "gap", (unsigned long long)taken,
                (unsigned long long)((st->now_ns - s->replay_started_ns) / 1000000u),
                s->have_seq ? "" : "(none) ", (unsigned long long)s->last_seq);
    s->after_replay = s->have_seq;
    s->replayed_until = s->last_seq;
    s->window_next = window_next;
}

/* A round brought nothing (no answer in time, or its request could not be
 * sent): ask again after a doubling wait, or give up after
 * CR_INDEXER_REPLAY_TRIES such rounds in a row. */
static void round_failed(struct indexer_state *st, struct indexer_source *s) {
    replay_close(st, s);
    if (++s->round_fails >= CR_INDEXER_REPLAY_TRIES) {
        CR_WARN("indexer", "%s|%s|%u: replay from %llu unanswered after %u tries; abandoned, "
                "marked stale", s->reg.instance_id, s->reg.tenant_id, s->reg.dp_rank,
                (unsigned long long)next_seq(s), CR_INDEXER_REPLAY_TRIES);
        mark_stale(s, "replay unanswered: the publisher's replay endpoint did not answer");
        replay_finish(st, s);
        s->counters.replays_abandoned++;
        return;
    }
    s->retry_at_ns = st->now_ns + (CR_INDEXER_REPLAY_BACKOFF_NS << (s->round_fails - 1));
}

/* Ends the current round; the next asks from next_seq: at once after a
 * round that took batches, after the backoff otherwise. */
static void round_next(struct indexer_state *st, struct indexer_source *s) {
    if (s->round_taken == 0) {
        round_failed(st, s);
        return;
    }
    s->round_fails = 0;
    if (replay_request(st, s, next_seq(s)) != CR_OK) round_failed(st, s);
}

/* Whether a live batch is a copy of one the last replay delivered (a
 * duplicate) rather than news.  The rule:
 *   - copies have seqs in [window_next, replayed_until]: SUB was held from
 *     the gap (or the first subscribe) on while the replay delivered up to
 *     replayed_until;
 *   - SUB delivers in order, so copies come with rising seqs (some may be
 *     missing: dropped at the high-water mark while SUB was held); a seq
 *     below the next copy's is a new numbering;
 *   - a copy carries its replayed twin's ts, so it is not newer than every
 *     replayed batch; one that is was published after the replay was
 *     served.
 * A batch in the window that fails either of the last two tests comes from
 * a restarted publisher whose new seqs happen to fall in the window: the
 * caller treats it as a restart instead of dropping the new run.  A batch that does not decode has no ts; it is
 * taken as a copy when its seq fits (it could not be applied anyway). */
static bool replay_copy(struct indexer_state *st, struct indexer_source *s, uint64_t seq,
                        const void *payload, size_t len) {
    if (!s->after_replay || seq < s->window_next || seq > s->replayed_until) return false;
    const struct cr_kv_batch *batch;
    if (cr_kv_decode(st->decoder, payload, len, &batch, NULL, 0) == CR_OK &&
        batch->ts > s->replay_ts_max)
        return false;
    s->window_next = seq + 1;
    return true;
}

static void live_message(struct indexer_state *st, struct indexer_source *s, uint64_t seq,
                         const void *payload, size_t len) {
    if (replay_copy(st, s, seq, payload, len)) {
        s->counters.duplicates++; /* queued on SUB while the replay delivered it */
        return;
    }
    s->after_replay = false;
    if (s->have_seq && seq == s->last_seq && seq != 0) {
        /* The batch just applied, sent again: a copy.  A restarted engine
         * numbers from 0 again, so only seq 0 repeated can be a new run. */
        s->counters.duplicates++;
        return;
    }
    /* After 2^64-1 comes 0 (next_seq wraps with it): a continuation. */
    bool wrapped = s->have_seq && s->last_seq == UINT64_MAX && seq == 0;
    if (s->have_seq && seq <= s->last_seq && !wrapped) {
        /* The new run's earlier batches (before seq) are in its replay buffer. */
        restart_seen(st, s, seq);
        s->have_seq = false;
        s->synced = s->reg.replay_endpoint[0] != '\0';
    }
    if ((s->have_seq || s->synced) && seq > next_seq(s)) {
        s->counters.gaps++;
        if (s->reg.replay_endpoint[0] != '\0' && replay_start(st, s, payload, len, seq, false))
            return;
        mark_stale(s, "gap without a replay endpoint: the missed batches are unknown");
    }
    s->have_seq = true;
    s->last_seq = seq;
    apply_payload(st, s, payload, len);
}

static void replay_message(struct indexer_state *st, struct indexer_source *s, zmq_msg_t *f,
                           unsigned n) {
    /* Only the current round's DEALER is read, and only during the round. */
    assert(s->replaying && s->dealer != NULL);
    unsigned first = n > 0 && zmq_msg_size(&f[0]) == 0 ? 1 : 0; /* the empty delimiter */
    unsigned rest = n - first;
    if (rest != 2 && rest != 3) {
        s->counters.malformed++;
        return;
    }
    zmq_msg_t *seq_f = &f[first + rest - 2], *pay_f = &f[first + rest - 1];
    const uint8_t *seq_p = zmq_msg_data(seq_f);
    bool end =
        (zmq_msg_size(pay_f) == 8 && memcmp(zmq_msg_data(pay_f), end_marker, 8) == 0) ||
        (zmq_msg_size(seq_f) == 8 && memcmp(seq_p, end_marker, 8) == 0 && zmq_msg_size(pay_f) == 0);
    if (end) {
        /* Everything the publisher holds from the round's start has come: a
         * round that reads this far took fewer replies than the peer's send
         * queue holds, so none was dropped.  What is still missing before
         * the pending batch is history lost (replay_finish says so). */
        replay_finish(st, s);
        return;
    }
    if (zmq_msg_size(seq_f) != 8) {
        s->counters.malformed++;
        return;
    }
    /* Progress: the deadline is for a replay that stalls, not one that is long. */
    s->replay_deadline_ns = st->now_ns + CR_INDEXER_REPLAY_TIMEOUT_NS;
    uint64_t seq = be64(seq_p);
    if (s->have_seq && seq <= s->last_seq) {
        s->counters.duplicates++;
        return;
    }
    if (s->replay_first && !s->have_seq) {
        /* First subscribe: the oldest batch the publisher still holds.
         * What came before it was never seen here (not a loss of ours). */
        s->oldest_seq = seq;
        s->have_oldest = true;
    } else if (seq > next_seq(s)) {
        if (s->round_taken > 0) {
            /* A hole after replies that came: the peer's send queue dropped
             * some.  Asked again from the first missing seq. */
            s->counters.replay_holes++;
            round_next(st, s);
            return;
        }
        /* The round's first reply is past the seq asked for: the
         * publisher's oldest batch is newer than what is missing. */
        history_lost(s, next_seq(s), seq - 1, NULL);
    }
    s->have_seq = true;
    s->last_seq = seq;
    s->round_taken++;
    s->counters.replayed++;
    double ts = apply_payload(st, s, zmq_msg_data(pay_f), zmq_msg_size(pay_f));
    if (ts > s->replay_ts_max) s->replay_ts_max = ts;
    if (s->round_taken >= CR_INDEXER_REPLAY_WINDOW) round_next(st, s);
}

/* ---- receiving ---- */

/* Receives one multipart message into f (at most FRAMES_MAX kept, the rest
 * counted).  Returns the number of frames, 0 when none was waiting. */
static unsigned recv_multipart(void *sock, zmq_msg_t *f, unsigned *total) {
    unsigned n = 0;
    *total = 0;
    for (;;) {
        zmq_msg_t scratch;
        zmq_msg_t *m = n < FRAMES_MAX ? &f[n] : &scratch;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, sock, *total == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(m);
            return n;
        }
        (*total)++;
        bool more = zmq_msg_more(m);
        if (n < FRAMES_MAX)
            n++;
        else
            zmq_msg_close(m);
        if (!more) return n;
    }
}

static void drain_socket(struct indexer_state *st, struct indexer_source *s, bool dealer) {
    zmq_msg_t f[FRAMES_MAX];
    for (unsigned k = 0; k < CR_INDEXER_DRAIN_MAX && s->used; k++) {
        if (!dealer && s->replaying) return; /* live data waits for the replay */
        /* An end marker closes the round's DEALER; a live gap opens one. */
        if (dealer && (!s->replaying || s->dealer == NULL)) return;
        unsigned total, n = recv_multipart(dealer ? s->dealer : s->sub, f, &total);
        if (n == 0) return;
        if (dealer) {
            replay_message(st, s, f, total > FRAMES_MAX ? 0 : n);
        } else if (total != 3 || zmq_msg_size(&f[1]) != 8) {
            s->counters.malformed++; /* [topic, seq(8 bytes), payload] is the only layout */
        } else {
            live_message(st, s, be64(zmq_msg_data(&f[1])), zmq_msg_data(&f[2]),
                         zmq_msg_size(&f[2]));
        }
        for (unsigned i = 0; i < n; i++) zmq_msg_close(&f[i]);
    }
}

/* One monitor event: [event u16, value u32 (native order)], [endpoint]. */
static void monitor_event(struct indexer_state *st, struct indexer_source *s) {
    for (unsigned k = 0; k < CR_INDEXER_DRAIN_MAX && s->monitor != NULL; k++) {
        zmq_msg_t f[FRAMES_MAX];
        unsigned total, n = recv_multipart(s->monitor, f, &total);
        if (n == 0) return;
        uint16_t event = 0;
        if (zmq_msg_size(&f[0]) >= 2) memcpy(&event, zmq_msg_data(&f[0]), 2);
        for (unsigned i = 0; i < n; i++) zmq_msg_close(&f[i]);
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            s->connected = s->ever_connected = true;
            s->link_since_ns = st->now_ns;
            /* Connected (again) after the replay before it was answered:
             * what was published in between would show as a gap only at
             * the next live batch, which may be long coming. */
            if (s->reg.replay_endpoint[0] != '\0' && !s->replaying && (s->have_seq || s->synced))
                replay_start(st, s, NULL, 0, 0, false);
        } else if (event == ZMQ_EVENT_DISCONNECTED && s->connected && s->reg.bind) {
            /* A bound SUB keeps listening: the publisher connects again. */
            s->connected = false;
            s->link_since_ns = st->now_ns;
            s->disconnects++;
        } else if (event == ZMQ_EVENT_DISCONNECTED && s->connected) {
            /* (A connect that fails before any handshake reports this too:
             * ZMQ retries those itself.) */
            s->connected = false;
            s->link_since_ns = st->now_ns;
            s->disconnects++;
            /* A fresh SUB: ZMQ does not reconnect one whose peer broke
             * the protocol.  What was published meanwhile is a gap. */
            char error[CR_INDEXER_ERROR_MAX + 64];
            void *monitor;
            void *sub = sub_open(st, s->reg.endpoint, false, &monitor, error, sizeof(error));
            if (sub == NULL) {
                CR_WARN("indexer", "%s|%s|%u: disconnected and %s", s->reg.instance_id,
                        s->reg.tenant_id, s->reg.dp_rank, error);
                return; /* keeps the old SUB */
            }
            zmq_close(s->sub);
            zmq_close(s->monitor);
            s->sub = sub;
            s->monitor = monitor;
            st->poll_dirty = true;
            return; /* the old monitor is gone */
        }
    }
}

static void poll_rebuild(struct indexer_state *st, int wake_fd) {
    zmq_pollitem_t *items = st->pollitems;
    uint32_t n = 0;
    items[n] = (zmq_pollitem_t){.fd = wake_fd, .events = ZMQ_POLLIN};
    st->poll_source[n++] = -1;
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++) {
        struct indexer_source *s = &st->sources[i];
        if (!s->used) continue;
        if (!s->replaying) {
            items[n] = (zmq_pollitem_t){.socket = s->sub, .events = ZMQ_POLLIN};
            st->poll_is_dealer[n] = 0;
            st->poll_source[n++] = (int16_t)i;
        }
        if (s->dealer != NULL) {
            items[n] = (zmq_pollitem_t){.socket = s->dealer, .events = ZMQ_POLLIN};
            st->poll_is_dealer[n] = 1;
            st->poll_source[n++] = (int16_t)i;
        }
        if (s->monitor != NULL) {
            items[n] = (zmq_pollitem_t){.socket = s->monitor, .events = ZMQ_POLLIN};
            st->poll_is_dealer[n] = 2;
            st->poll_source[n++] = (int16_t)i;
        }
    }
    st->poll_count = n;
    st->poll_dirty = false;
}

/* Rounds that stalled are asked again (or the replay abandoned); rounds
 * waiting out a backoff are asked when it ends.  Sets *any when a replay
 * is under way, so the wait polls often enough to keep its deadlines. */
static void replays_due(struct indexer_state *st, bool *any) {
    *any = false;
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++) {
        struct indexer_source *s = &st->sources[i];
        if (!s->used || !s->replaying) continue;
        *any = true;
        if (s->dealer == NULL) {
            if (st->now_ns >= s->retry_at_ns && replay_request(st, s, next_seq(s)) != CR_OK)
                round_failed(st, s);
            continue;
        }
        if (st->now_ns < s->replay_deadline_ns) continue;
        s->counters.replay_timeouts++;
        CR_WARN("indexer", "%s|%s|%u: replay stalled at %llu (nothing for %llu ms)%s",
                s->reg.instance_id, s->reg.tenant_id, s->reg.dp_rank,
                (unsigned long long)next_seq(s),
                (unsigned long long)(CR_INDEXER_REPLAY_TIMEOUT_NS / 1000000u),
                s->round_taken > 0 ? "; asked again" : "");
        round_next(st, s);
    }
}

void indexer_wait(struct indexer_state *st, int wake_fd, int timeout_ms) {
    assert(st != NULL && wake_fd >= 0);
    bool replaying;
    replays_due(st, &replaying);
    if (replaying && (timeout_ms < 0 || timeout_ms > REPLAY_POLL_MS)) timeout_ms = REPLAY_POLL_MS;
    if (st->poll_dirty || ((zmq_pollitem_t *)st->pollitems)[0].fd != wake_fd)
        poll_rebuild(st, wake_fd);
    zmq_pollitem_t *items = st->pollitems;
    /* Readers of the index (indexer_read.c) run while the actor sleeps;
     * what the poll brings is applied under one hold (a batch, not an event). */
    bool held = st->write_held; /* tests call this without the hold */
    if (held) indexer_write_end(st);
    int ready = zmq_poll(items, (int)st->poll_count, timeout_ms);
    if (held) indexer_write_begin(st);
    if (st->clock != NULL) st->now_ns = st->clock(st->clock_ctx);
    if (ready < 0) {
        if (zmq_errno() != EINTR)
            CR_ERROR("indexer", "zmq_poll failed: %s", zmq_strerror(zmq_errno()));
        return;
    }
    uint32_t count = st->poll_count; /* draining may mark the items dirty; finish this round */
    for (uint32_t i = 1; i < count && ready > 0; i++) {
        if (!(items[i].revents & ZMQ_POLLIN)) continue;
        struct indexer_source *s = &st->sources[st->poll_source[i]];
        if (!s->used) continue;
        if (st->poll_is_dealer[i] == 2)
            monitor_event(st, s);
        else
            drain_socket(st, s, st->poll_is_dealer[i] != 0);
    }
}

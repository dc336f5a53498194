/* The leases actor: the store master's eviction policy.
 *
 * It decides; the segments actor revalidates and applies.  Every 100 ms (and
 * at once when a PutStart found no space: CR_MSG_EVICT_NEEDED) it polls
 * segments (CR_MSG_EVICT_POLL); segments answers with its usage, the bytes
 * and the objects a pass should free (0 below the high watermark of bytes,
 * and of counts: objects against max_objects, a segment's allocations
 * against max_allocations_per_segment) and a random sample of evictable
 * objects (CR_MSG_EVICT_SAMPLE).  Leases picks the victims with
 * cr_evict_choose (approximate LRU: oldest first; soft-pinned ones only when
 * nothing else frees enough and the setting allows) and sends them back
 * (CR_MSG_EVICT_APPLY).  Segments checks each victim again, because a lease
 * may have been granted since the sample.  While a pass still has bytes to
 * free it polls again at once: the apply and the next poll travel on the same
 * ring, so the poll sees the applied result.  Every second it also tells
 * segments to reclaim zombie puts older than the release timeout
 * (CR_MSG_ZOMBIE_RECLAIM).
 *
 * One poll is outstanding at a time, so samples never pile up.  A poll whose
 * sample has not come back within POLL_TIMEOUT_NS (segments could not send
 * it: its ring to leases full, or shutdown) is given up and the next tick
 * polls again, so one lost message cannot stop eviction for good.  A sample
 * that does not answer the outstanding poll (each poll carries a sequence
 * number, echoed in its sample) is the late answer of a poll given up that way
 * (the poll was slow, not lost): it is dropped, so each poll feeds one pass at
 * most and no pass runs on a sample older than its poll. */
#include <stdlib.h>

#include "actors/subsystems.h"
#include "core/log.h"
#include "core/store.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/master_msgs.h"
#include "runtime/heap.h"
#include "runtime/stats_extra.h"

#define LEASES_TICK_NS 100000000ull /* 100 ms */
#define ZOMBIE_EVERY_TICKS 10u      /* reclaim zombies once a second */
#define SAMPLE_SIZE 512u            /* candidates per poll */
#define ROUNDS_PER_TICK_MAX 64u     /* immediate re-polls before waiting for the next tick */
/* Ten ticks: segments answers a poll within one message turn, so only a lost
 * sample (or a segments thread stalled that long) gets near this. */
#define POLL_TIMEOUT_NS 1000000000ull

struct leases_state {
    struct cr_actor *self;
    struct cr_heap_trim heap; /* free heap memory given back after spikes (heap.h) */
    struct cr_subsystems *peers;
    bool poll_in_flight;
    uint16_t poll_seq; /* of the latest poll sent (wraps; one poll is outstanding at a time) */
    uint64_t poll_deadline_ns; /* runtime clock; meaningful while poll_in_flight */
    bool alloc_failed; /* a PutStart failed since the last poll */
    bool allow_soft_pinned; /* allow_evict_soft_pinned_objects */
    uint32_t ticks;
    uint32_t rounds; /* immediate re-polls since the last tick */
    uint64_t polls;
    uint64_t passes; /* polls answered with bytes or objects to free */
    uint64_t count_passes; /* of those, with objects to free (the count watermark) */
    uint64_t victims_chosen;
    uint64_t unmet_passes; /* passes whose sample could not free enough */
    uint64_t alloc_failures;
    uint64_t send_failures;
    uint64_t poll_timeouts; /* polls given up without a sample */
    uint64_t late_samples;  /* samples dropped: not the answer to the outstanding poll */
    uint64_t last_used_bytes;
    uint64_t last_capacity_bytes;
    uint64_t last_log_ns;
    uint64_t last_timeout_log_ns;
};

static uint64_t now_ns(const struct leases_state *st) {
    return cr_runtime_now_ns(cr_actor_runtime(st->self));
}

static void poll_segments(struct leases_state *st) {
    if (st->poll_in_flight || st->peers == NULL) return;
    struct cr_msg msg = {.type = CR_MSG_EVICT_POLL};
    struct cr_msg_evict_poll *p = CR_MSG_BODY(&msg, struct cr_msg_evict_poll);
    p->seq = (uint16_t)(st->poll_seq + 1);
    p->sample_size = SAMPLE_SIZE;
    p->alloc_failed = st->alloc_failed;
    if (cr_send(st->peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg) != CR_OK) {
        st->send_failures++; /* the next tick tries again */
        return;
    }
    st->alloc_failed = false;
    st->poll_seq++;
    st->poll_in_flight = true;
    st->poll_deadline_ns = now_ns(st) + POLL_TIMEOUT_NS;
    st->polls++;
}

/* Gives up an outstanding poll past its deadline, so the caller polls again. */
static void expire_poll(struct leases_state *st) {
    if (!st->poll_in_flight) return;
    uint64_t now = now_ns(st);
    if (now < st->poll_deadline_ns) return;
    st->poll_in_flight = false;
    st->poll_timeouts++;
    if (cr_log_ratelimit(&st->last_timeout_log_ns, now, 60ull * 1000000000u))
        CR_WARN("leases", "segments did not answer an eviction poll within %llu ms: polling again",
                (unsigned long long)(POLL_TIMEOUT_NS / 1000000u));
}

static void arm_tick(struct leases_state *st) {
    struct cr_msg tick = {.type = CR_MSG_LEASES_TICK};
    if (cr_actor_timer_after(st->self, LEASES_TICK_NS, &tick, NULL) != CR_OK)
        CR_ERROR("leases", "cannot arm the eviction timer: eviction stops");
}

static void on_tick(struct leases_state *st) {
    st->rounds = 0;
    expire_poll(st);
    poll_segments(st);
    /* Off every hot path: leases' thread only waits for its timer here. */
    cr_heap_trim_tick(&st->heap, now_ns(st));
    if (++st->ticks % ZOMBIE_EVERY_TICKS == 0) {
        struct cr_msg msg = {.type = CR_MSG_ZOMBIE_RECLAIM};
        if (cr_send(st->peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg) != CR_OK) st->send_failures++;
    }
    arm_tick(st);
}

/* Chooses victims from the sample and hands them (the same array) back. */
static void on_sample(struct leases_state *st, struct cr_msg_evict_sample *s) {
    if (!st->poll_in_flight || s->seq != st->poll_seq) { /* its poll was given up */
        st->late_samples++;
        free(s->candidates);
        return;
    }
    st->poll_in_flight = false;
    st->last_used_bytes = s->used_bytes;
    st->last_capacity_bytes = s->capacity_bytes;
    bool wanted = s->bytes_to_free > 0 || s->objects_to_free > 0;
    if (!wanted || s->count == 0) {
        if (wanted) st->unmet_passes++;
        free(s->candidates);
        return;
    }
    st->passes++;
    if (s->objects_to_free > 0) st->count_passes++;
    size_t n = cr_evict_choose(s->candidates, s->count, s->bytes_to_free, s->objects_to_free,
                               st->allow_soft_pinned);
    uint64_t chosen = 0;
    for (size_t i = 0; i < n; i++) chosen += s->candidates[i].size_bytes;
    if (chosen < s->bytes_to_free || n < s->objects_to_free) st->unmet_passes++;
    if (n == 0) {
        free(s->candidates);
        return;
    }
    struct cr_msg msg = {.type = CR_MSG_EVICT_APPLY};
    struct cr_msg_evict_apply *a = CR_MSG_BODY(&msg, struct cr_msg_evict_apply);
    a->victims = s->candidates;
    a->count = (uint32_t)n;
    if (cr_send(st->peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg) != CR_OK) {
        st->send_failures++;
        free(s->candidates);
        return;
    }
    st->victims_chosen += n;
    /* More to free (the sample was short) or just applied: look again now. */
    if (++st->rounds < ROUNDS_PER_TICK_MAX) poll_segments(st);
}

static void leases_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    struct leases_state *st = arg;
    switch (msg->type) {
    case CR_MSG_WIRE:
        st->peers = msg->body.ptr[0];
        arm_tick(st);
        return;
    case CR_MSG_LEASES_TICK: on_tick(st); return;
    case CR_MSG_EVICT_NEEDED:
        st->alloc_failures++;
        st->alloc_failed = true;
        poll_segments(st);
        return;
    case CR_MSG_EVICT_SAMPLE: on_sample(st, CR_MSG_BODY(msg, struct cr_msg_evict_sample)); return;
    default: {
        uint64_t now = cr_runtime_now_ns(cr_actor_runtime(self));
        if (cr_log_ratelimit(&st->last_log_ns, now, 60ull * 1000000000u))
            CR_WARN("leases", "message type %u from sender %u is not handled here", msg->type,
                    msg->sender);
        if (msg->flags & CR_MSG_ASK) cr_reply(msg, CR_ERR_INVALID_PARAMS);
    }
    }
}

static int leases_start(struct cr_actor *self, void *arg) {
    ((struct leases_state *)arg)->self = self;
    return CR_OK;
}

static void leases_discard(void *arg, struct cr_msg *msg) {
    (void)arg;
    if (msg->type == CR_MSG_EVICT_SAMPLE)
        free(CR_MSG_BODY(msg, struct cr_msg_evict_sample)->candidates);
}

static void leases_stats(struct cr_actor *self, void *arg, struct cr_actor_stats *out) {
    (void)self;
    const struct leases_state *st = arg;
    cr_actor_stats_add(out, "polls_total", st->polls);
    cr_actor_stats_add(out, "eviction_passes_total", st->passes);
    cr_actor_stats_add(out, "count_eviction_passes_total", st->count_passes);
    cr_actor_stats_add(out, "victims_chosen_total", st->victims_chosen);
    cr_actor_stats_add(out, "unmet_passes_total", st->unmet_passes);
    cr_actor_stats_add(out, "alloc_failures_total", st->alloc_failures);
    cr_actor_stats_add(out, "send_failures_total", st->send_failures);
    cr_actor_stats_add(out, "poll_timeouts_total", st->poll_timeouts);
    cr_actor_stats_add(out, "late_samples_total", st->late_samples);
    cr_actor_stats_add(out, "used_bytes", st->last_used_bytes);
    cr_actor_stats_add(out, "capacity_bytes", st->last_capacity_bytes);
    cr_actor_stats_add(out, "heap_trims_total", st->heap.trims);
    cr_actor_stats_add(out, "heap_released_bytes_total", st->heap.released_bytes);
    cr_actor_stats_add(out, "heap_free_bytes", st->heap.free_bytes);
}

static int leases_create(const struct cr_daemon_config *config, void **state_out) {
    struct leases_state *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
    st->allow_soft_pinned = config->allow_evict_soft_pinned_objects;
    *state_out = st;
    return CR_OK;
}

static void leases_destroy(void *state) { free(state); }

static const struct cr_actor_ops leases_ops = {
    .start = leases_start,
    .handle = leases_handle,
    .discard = leases_discard,
    .stats = leases_stats,
};

const struct cr_subsystem_def cr_leases_def = {
    .name = "leases",
    .ops = &leases_ops,
    .create = leases_create,
    .destroy = leases_destroy,
};

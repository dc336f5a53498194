/* Benchmark: seed-000 event encoding (src/msgs/store_event).
 *
 * Cases (one line each, bench/harness.h format):
 *   encode: BlockStoreEvents (16 token ids, 1 replica) appended into batches of
 *           50 and finished into a shared batch; ops = events, latency = per batch
 *           (50 appends + finish; the batch's unref is outside the timed region).
 *   create: cr_store_event_new_block_store + free of the same event, per event
 *           (the segment manager's cost of handing an event to the publisher).
 *   decode: the JSON decoder (crescentctl's path) over one finished batch.
 * Also prints ns per event for the encode case.
 *
 * usage: event_codec [batches]   (default 200000 batches = 10M events) */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "crescent/error.h"
#include "msgs/store_event.h"
#include "msgs/store_event_json.h"

#define EVENT_VARIANTS 256
#define TOKENS_PER_EVENT 16
#define EVENTS_PER_BATCH 50
#define WARMUP_BATCHES 2000

struct fixture {
    cr_store_event *events[EVENT_VARIANTS];
    char keys[EVENT_VARIANTS][48];
    char hashes[EVENT_VARIANTS][24];
    uint32_t tokens[EVENT_VARIANTS][TOKENS_PER_EVENT];
    cr_store_replica replica;
    cr_store_event_info infos[EVENT_VARIANTS];
};

/* Realistic-looking events: distinct keys and hashes, token ids spread over
 * the vocabulary so they take 1- to 5-byte msgpack forms. */
static void fixture_init(struct fixture *fx) {
    fx->replica = (cr_store_replica){CR_REPLICA_MEMORY, cr_event_str_c("tcp://10.0.0.1:12345")};
    for (int i = 0; i < EVENT_VARIANTS; i++) {
        snprintf(fx->keys[i], sizeof(fx->keys[i]), "tenant-a/llama-3-8b/block-%08d", i * 7919);
        snprintf(fx->hashes[i], sizeof(fx->hashes[i]), "0x%016llx",
                 (unsigned long long)i * 0x9e3779b97f4a7c15ull);
        for (int t = 0; t < TOKENS_PER_EVENT; t++) {
            fx->tokens[i][t] = (uint32_t)((i * 131 + t * 2657) % 128256);
        }
        fx->infos[i] = (cr_store_event_info){
            .model_name = cr_event_str_c("meta-llama/Llama-3-8B"),
            .block_size = TOKENS_PER_EVENT,
            .block_hash = cr_event_str_c(fx->hashes[i]),
            .parent_block_hash = cr_event_str_c(fx->hashes[(i + EVENT_VARIANTS - 1) %
                                                           EVENT_VARIANTS]),
            .token_ids = fx->tokens[i],
            .token_count = TOKENS_PER_EVENT,
        };
        int status = cr_store_event_new_block_store(cr_event_str_c(fx->keys[i]), &fx->replica,
                                                    1, &fx->infos[i], &fx->events[i]);
        assert(status == CR_OK);
        (void)status;
    }
}

static cr_event_batch *encode_batch(cr_event_encoder *encoder, struct fixture *fx,
                                    uint64_t seq) {
    for (int e = 0; e < EVENTS_PER_BATCH; e++) {
        int status = cr_event_encoder_append(encoder, fx->events[(seq + e) % EVENT_VARIANTS]);
        assert(status == CR_OK);
        (void)status;
    }
    cr_event_batch *batch = NULL;
    int status = cr_event_encoder_finish(encoder, seq, 1700000000.5 + (double)seq, &batch);
    assert(status == CR_OK);
    (void)status;
    return batch;
}

static void bench_encode(struct fixture *fx, uint64_t batches) {
    cr_event_encoder *encoder = NULL;
    int status = cr_event_encoder_create(NULL, &encoder);
    assert(status == CR_OK);
    (void)status;
    for (uint64_t i = 0; i < WARMUP_BATCHES; i++) {
        cr_event_batch_unref(encode_batch(encoder, fx, i));
    }
    struct bench_latency lat;
    bench_latency_init(&lat, batches);
    size_t bytes = 0;
    uint64_t start = bench_now_ns(), timed_ns = 0;
    for (uint64_t seq = 0; seq < batches; seq++) {
        uint64_t t0 = bench_now_ns();
        cr_event_batch *batch = encode_batch(encoder, fx, seq);
        uint64_t t1 = bench_now_ns();
        bench_latency_add(&lat, t1 - t0);
        timed_ns += t1 - t0;
        bytes += batch->len;
        cr_event_batch_unref(batch);
    }
    uint64_t elapsed = bench_now_ns() - start;
    uint64_t events = batches * EVENTS_PER_BATCH;
    bench_report("encode BlockStoreEvent 16 tok 1 rep, batch 50", events, elapsed, &lat);
    printf("  %.1f ns/event (timed region), %.1f ns/event (loop incl. unref), %.0f B/batch\n",
           (double)timed_ns / (double)events, (double)elapsed / (double)events,
           (double)bytes / (double)batches);
    bench_latency_free(&lat);
    cr_event_encoder_destroy(encoder);
}

static void bench_create(struct fixture *fx, uint64_t count) {
    uint64_t start = bench_now_ns();
    for (uint64_t i = 0; i < count; i++) {
        size_t v = i % EVENT_VARIANTS;
        cr_store_event *event = NULL;
        int status = cr_store_event_new_block_store(cr_event_str_c(fx->keys[v]), &fx->replica, 1,
                                                    &fx->infos[v], &event);
        assert(status == CR_OK);
        (void)status;
        cr_store_event_free(event);
    }
    bench_report("create+free BlockStoreEvent 16 tok 1 rep", count, bench_now_ns() - start,
                 NULL);
}

static void bench_decode(struct fixture *fx, uint64_t count) {
    cr_event_encoder *encoder = NULL;
    int status = cr_event_encoder_create(NULL, &encoder);
    assert(status == CR_OK);
    cr_event_batch *batch = encode_batch(encoder, fx, 0);
    struct bench_latency lat;
    bench_latency_init(&lat, count);
    uint64_t start = bench_now_ns();
    for (uint64_t i = 0; i < count; i++) {
        uint64_t t0 = bench_now_ns();
        json_t *events = NULL;
        status = cr_store_event_json_decode(batch->bytes, batch->len, i, &events, NULL, 0);
        assert(status == CR_OK);
        json_decref(events);
        bench_latency_add(&lat, bench_now_ns() - t0);
    }
    bench_report("json decode batch of 50 (ops = events)", count * EVENTS_PER_BATCH,
                 bench_now_ns() - start, &lat);
    (void)status;
    bench_latency_free(&lat);
    cr_event_batch_unref(batch);
    cr_event_encoder_destroy(encoder);
}

int main(int argc, char **argv) {
    uint64_t batches = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000;
    if (batches == 0) {
        fprintf(stderr, "usage: event_codec [batches > 0]\n");
        return 2;
    }
    struct fixture *fx = calloc(1, sizeof(*fx));
    if (fx == NULL) return 1;
    fixture_init(fx);
    bench_encode(fx, batches);
    bench_create(fx, batches * EVENTS_PER_BATCH);
    bench_decode(fx, batches / 50 + 1);
    for (int i = 0; i < EVENT_VARIANTS; i++) cr_store_event_free(fx->events[i]);
    free(fx);
    return 0;
}

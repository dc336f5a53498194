/* Benchmark: KV-event decoding (src/msgs/kv_event.c) in blocks per second.
 *
 * Payloads are built once with msgpack-c's packer, shaped as engines send
 * them: vLLM positional batches [ts, [BlockStored...], dp_rank] with 64-bit
 * hashes and token ids in uint32 range, the same as vLLM >= 0.26 map events,
 * SGLang's one-page events and the store's own BlockStoreEvent batches.
 * Each case decodes the same payload repeatedly through one decoder (the
 * steady state: arena and zone already grown) and reports blocks/s plus the
 * per-batch latency p50/p99/p999.
 *
 * Usage: kv_decode [seconds_per_case]   (default 1.0) */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "crescent/error.h"
#include "msgs/kv_event.h"

struct shape {
    const char *name;
    unsigned events;
    unsigned blocks;
    unsigned block_size;
    bool map_events;
    bool store;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void pack_str(msgpack_packer *pk, const char *s) {
    msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void pack_hashes_tokens(msgpack_packer *pk, const struct shape *s) {
    msgpack_pack_array(pk, s->blocks);
    for (unsigned b = 0; b < s->blocks; b++) msgpack_pack_uint64(pk, rng_next() | (1ull << 63));
    msgpack_pack_uint64(pk, rng_next() | (1ull << 63)); /* parent */
    msgpack_pack_array(pk, s->blocks * s->block_size);
    for (unsigned t = 0; t < s->blocks * s->block_size; t++)
        msgpack_pack_uint32(pk, (uint32_t)(rng_next() % 152000));
}

static void pack_vllm_event(msgpack_packer *pk, const struct shape *s) {
    msgpack_pack_array(pk, 7);
    pack_str(pk, "BlockStored");
    pack_hashes_tokens(pk, s);
    msgpack_pack_uint32(pk, s->block_size);
    msgpack_pack_nil(pk);
    pack_str(pk, "GPU");
}

/* vLLM >= 0.26: the same fields as a map. */
static void pack_vllm_map_event(msgpack_packer *pk, const struct shape *s) {
    msgpack_pack_map(pk, 6);
    pack_str(pk, "type");
    pack_str(pk, "BlockStored");
    pack_str(pk, "block_hashes");
    msgpack_pack_array(pk, s->blocks);
    for (unsigned b = 0; b < s->blocks; b++) msgpack_pack_uint64(pk, rng_next() | (1ull << 63));
    pack_str(pk, "parent_block_hash");
    msgpack_pack_uint64(pk, rng_next() | (1ull << 63));
    pack_str(pk, "token_ids");
    msgpack_pack_array(pk, s->blocks * s->block_size);
    for (unsigned t = 0; t < s->blocks * s->block_size; t++)
        msgpack_pack_uint32(pk, (uint32_t)(rng_next() % 152000));
    pack_str(pk, "block_size");
    msgpack_pack_uint32(pk, s->block_size);
    pack_str(pk, "medium");
    pack_str(pk, "GPU");
}

static void pack_store_event(msgpack_packer *pk, const struct shape *s) {
    char key[64];
    snprintf(key, sizeof(key), "key_%016llx", (unsigned long long)rng_next());
    msgpack_pack_array(pk, 8);
    pack_str(pk, "BlockStoreEvent");
    pack_str(pk, key);
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 2);
    pack_str(pk, "memory");
    pack_str(pk, "tcp://10.0.0.1:6000");
    pack_str(pk, "llama3-8b");
    msgpack_pack_uint32(pk, s->block_size);
    pack_str(pk, "0x41234125");
    pack_str(pk, "0x51512342");
    msgpack_pack_array(pk, s->block_size);
    for (unsigned t = 0; t < s->block_size; t++)
        msgpack_pack_uint32(pk, (uint32_t)(rng_next() % 152000));
}

static void build_payload(msgpack_sbuffer *sb, const struct shape *s) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, s->store ? 2 : 3);
    msgpack_pack_double(&pk, 1700000000.0);
    msgpack_pack_array(&pk, s->events);
    for (unsigned e = 0; e < s->events; e++) {
        if (s->store) pack_store_event(&pk, s);
        else if (s->map_events) pack_vllm_map_event(&pk, s);
        else pack_vllm_event(&pk, s);
    }
    if (!s->store) msgpack_pack_uint32(&pk, 0);
}

static void run_case(struct cr_kv_decoder *dec, const struct shape *s, double seconds) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    build_payload(&sb, s);
    const struct cr_kv_batch *batch = NULL;
    char err[160];
    if (cr_kv_decode(dec, sb.data, sb.size, &batch, err, sizeof(err)) != CR_OK) {
        fprintf(stderr, "%s: decode failed: %s\n", s->name, err);
        exit(1);
    }
    uint64_t blocks_per_batch = s->store ? s->events : (uint64_t)s->events * s->blocks;
    struct bench_latency lat;
    bench_latency_init(&lat, 4u << 20);
    uint64_t budget_ns = (uint64_t)(seconds * 1e9), blocks = 0, checksum = 0;
    uint64_t start = bench_now_ns(), now = start;
    while (now - start < budget_ns) {
        uint64_t t0 = bench_now_ns();
        int rc = cr_kv_decode(dec, sb.data, sb.size, &batch, NULL, 0);
        now = bench_now_ns();
        assert(rc == CR_OK);
        (void)rc;
        checksum += batch->events[0].token_ids[0];
        bench_latency_add(&lat, now - t0);
        blocks += blocks_per_batch;
    }
    char name[96];
    snprintf(name, sizeof(name), "%s (%zu B)", s->name, sb.size);
    bench_report(name, blocks, now - start, &lat);
    if (checksum == 1) printf("#\n"); /* keeps the loop's reads alive */
    bench_latency_free(&lat);
    msgpack_sbuffer_destroy(&sb);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    static const struct shape shapes[] = {
        {"kv_decode vllm_array 32ev x16blk x16tok blocks", 32, 16, 16, false, false},
        {"kv_decode vllm_map 32ev x16blk x16tok blocks", 32, 16, 16, true, false},
        {"kv_decode vllm_array 4ev x8blk x128tok blocks", 4, 8, 128, false, false},
        {"kv_decode sglang_page 1ev x1blk x16tok blocks", 1, 1, 16, false, false},
        {"kv_decode store 50ev x16tok blocks", 50, 1, 16, false, true},
    };
    struct cr_kv_decoder *dec = NULL;
    if (cr_kv_decoder_create(&dec) != CR_OK) return 1;
    printf("# blocks/s decoded; latency per batch (one cr_kv_decode call)\n");
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        run_case(dec, &shapes[i], seconds);
    cr_kv_decoder_destroy(dec);
    return 0;
}

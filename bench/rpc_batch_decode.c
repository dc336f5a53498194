/* Benchmark: crescentd's decoding of a 32-key BatchGetReplicaListRequest
 * (keys as bench/master_sync sends them, tenant unset: 755 bytes, the
 * batch-get/batch-exist frame) and a 32-entry BatchPutStartRequest and
 * BatchPutEndRequest as libcrescent sends them, through the hand-written
 * decoder (cr_rpc_batch_decode, src/rpc/rpc_batch.c) and through the
 * path it replaced on the request side (cr_rpc_prescan, cr_rpc_unpack into
 * an arena, cr_rpc_validate, then cr_rpc_batch_from_pb, which segments runs
 * on such a request now, and the arena's free), interleaved in rounds.
 * Reported per request: CPU time of the single thread, median over rounds.
 *
 * Usage: rpc_batch_decode [rounds] [requests_per_round]   (default 5, 200000) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_batch.h"
#include "rpc/rpc_codec.h"
#include "crescent/error.h"
#include "harness.h"

#define KEYS 32u

enum { GET, PUT_START, PUT_END, CASES };
static const uint16_t case_method[CASES] = {CRESCENT__MASTER__METHOD__BATCH_GET_REPLICA_LIST,
                                            CRESCENT__MASTER__METHOD__BATCH_PUT_START,
                                            CRESCENT__MASTER__METHOD__BATCH_PUT_END};
static const char *const case_name[CASES] = {"BatchGetReplicaListRequest",
                                             "BatchPutStartRequest", "BatchPutEndRequest"};

static char keys[KEYS][48];
static char *key_ptrs[KEYS];

static size_t pack_request(int which, uint8_t *out) {
    for (unsigned i = 0; i < KEYS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "sync%d-r-t0-%06u", 123456, i);
        key_ptrs[i] = keys[i];
    }
    Crescent__Master__UUID client = CRESCENT__MASTER__UUID__INIT;
    client.first = 0x1234567890abcdefull, client.second = 0xfedcba0987654321ull;
    uint8_t secret[32] = {7};
    if (which == GET) {
        Crescent__Master__BatchGetReplicaListRequest r =
            CRESCENT__MASTER__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
        r.n_keys = KEYS, r.keys = key_ptrs;
        return protobuf_c_message_pack(&r.base, out);
    }
    Crescent__Master__ReplicateConfig cfg = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    cfg.has_replica_num = 1, cfg.replica_num = 1;
    Crescent__Master__PutStartRequest starts[KEYS], *sp[KEYS];
    Crescent__Master__PutEndRequest ends[KEYS], *ep[KEYS];
    for (unsigned i = 0; i < KEYS; i++) {
        crescent__master__put_start_request__init(&starts[i]);
        starts[i].key = keys[i], starts[i].value_length = 4096, starts[i].config = &cfg;
        starts[i].client_id = &client, starts[i].has_client_secret = 1;
        starts[i].client_secret = (ProtobufCBinaryData){sizeof(secret), secret};
        crescent__master__put_end_request__init(&ends[i]);
        ends[i].key = keys[i], ends[i].client_id = &client, ends[i].has_client_secret = 1;
        ends[i].client_secret = (ProtobufCBinaryData){sizeof(secret), secret};
        sp[i] = &starts[i], ep[i] = &ends[i];
    }
    Crescent__Master__BatchPutStartRequest bs = CRESCENT__MASTER__BATCH_PUT_START_REQUEST__INIT;
    Crescent__Master__BatchPutEndRequest be = CRESCENT__MASTER__BATCH_PUT_END_REQUEST__INIT;
    bs.n_requests = be.n_requests = KEYS;
    bs.requests = sp, be.requests = ep;
    return protobuf_c_message_pack(which == PUT_START ? &bs.base : &be.base, out);
}

static void *alloc_from(void *ctx, size_t size) { return cr_rpc_request_alloc(ctx, size); }

/* The path before the hand-written decoder, to the same batch form. */
static uint32_t decode_general(uint16_t method, const uint8_t *buf, size_t len) {
    const struct cr_rpc_method *m = cr_rpc_method_find(method);
    void *arena = NULL, *more = NULL;
    char err[CR_RPC_ERROR_MAX];
    if (cr_rpc_prescan(m->request, buf, len, CR_MASTER_BATCH_MAX) != NULL) abort();
    ProtobufCMessage *msg = cr_rpc_unpack(m->request, buf, len, &arena);
    if (msg == NULL || cr_rpc_validate(method, msg, err) != CR_OK) abort();
    struct cr_rpc_batch b;
    if (!cr_rpc_batch_from_pb(method, msg, alloc_from, &more, &b)) abort();
    uint32_t count = b.count;
    cr_rpc_request_arena_free(more);
    cr_rpc_request_arena_free(arena);
    return count;
}

static uint32_t decode_hand(uint16_t method, const uint8_t *buf, size_t len) {
    void *arena;
    const struct cr_rpc_batch *b;
    if (!cr_rpc_batch_decode(method, buf, len, &arena, &b)) abort();
    uint32_t count = b->count;
    cr_rpc_request_arena_free(arena);
    return count;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    long requests = argc > 2 ? atol(argv[2]) : 200000;
    if (rounds < 1 || rounds > 64 || requests < 1) {
        fprintf(stderr, "usage: rpc_batch_decode [rounds 1..64] [requests_per_round]\n");
        return 2;
    }
    static uint8_t buf[CASES][16384];
    size_t len[CASES];
    for (int c = 0; c < CASES; c++) len[c] = pack_request(c, buf[c]);
    printf("# %u keys per request: BatchGetReplicaList %zu B, BatchPutStart %zu B, "
           "BatchPutEnd %zu B; %d rounds of %ld requests, CPU ns per request (median)\n",
           KEYS, len[GET], len[PUT_START], len[PUT_END], rounds, requests);
    double ns[CASES][2][64];
    uint64_t sink = 0;
    for (int r = 0; r < rounds; r++) {
        for (int c = 0; c < CASES; c++) {
            for (int hand = 0; hand < 2; hand++) {
                uint64_t t0 = bench_thread_cpu_ns();
                for (long i = 0; i < requests; i++)
                    sink += hand ? decode_hand(case_method[c], buf[c], len[c])
                                 : decode_general(case_method[c], buf[c], len[c]);
                ns[c][hand][r] = (double)(bench_thread_cpu_ns() - t0) / (double)requests;
            }
        }
    }
    for (int c = 0; c < CASES; c++) {
        for (int hand = 0; hand < 2; hand++) {
            double med = bench_median(ns[c][hand], rounds);
            printf("%-28s %-40s %8.0f ns/request %6.1f ns/key\n", case_name[c],
                   hand ? "hand-written (cr_rpc_batch_decode)"
                        : "prescan + protobuf-c + validate + copy",
                   med, med / KEYS);
        }
    }
    if (sink != (uint64_t)rounds * CASES * 2 * (uint64_t)requests * KEYS) abort();
    return 0;
}

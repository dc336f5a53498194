/* Benchmark: libcrescent's decoding of a 32-key BatchGetReplicaListResponse
 * and BatchPutStartResponse as crescentd writes them (one replica of one
 * handle per key, a segment name and a transport endpoint), through the
 * hand-written decoder (src/client/client_decode.c) and through what it
 * replaced (protobuf-c's unpack, the copy into cr_replica_lists, both
 * frees), interleaved in rounds.  Reported per reply: CPU time (the process
 * is single-threaded, so a steadier figure than wall time on a shared
 * machine) and the median over rounds.
 *
 * Usage: client_decode [rounds] [replies_per_round]   (default 5, 200000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "client/client_internal.h"

#define KEYS 32u

static size_t pack_reply(bool get, uint8_t *out) {
    Crescent__Master__BufHandle h = CRESCENT__MASTER__BUF_HANDLE__INIT;
    h.segment_name = "bench-segment-0";
    h.transport_endpoint = "10.0.0.17:17800";
    h.size = 4096;
    h.buffer = 0x7f3a5c000000ull;
    h.status = CRESCENT__MASTER__BUF_HANDLE__BUF_STATUS__COMPLETE;
    Crescent__Master__BufHandle *hp = &h;
    Crescent__Master__ReplicaInfo info = CRESCENT__MASTER__REPLICA_INFO__INIT;
    info.n_handles = 1;
    info.handles = &hp;
    info.status = CRESCENT__MASTER__REPLICA_INFO__REPLICA_STATUS__COMPLETE;
    Crescent__Master__ReplicaInfo *ip = &info;
    Crescent__Master__GetReplicaListResponse g[KEYS];
    Crescent__Master__GetReplicaListResponse *gp[KEYS];
    Crescent__Master__PutStartResponse p[KEYS];
    Crescent__Master__PutStartResponse *pp[KEYS];
    for (unsigned i = 0; i < KEYS; i++) {
        crescent__master__get_replica_list_response__init(&g[i]);
        crescent__master__put_start_response__init(&p[i]);
        g[i].n_replica_list = p[i].n_replica_list = 1;
        g[i].replica_list = p[i].replica_list = &ip;
        g[i].has_lease_ttl_ms = true;
        g[i].lease_ttl_ms = 5000;
        gp[i] = &g[i];
        pp[i] = &p[i];
    }
    Crescent__Master__BatchGetReplicaListResponse bg =
        CRESCENT__MASTER__BATCH_GET_REPLICA_LIST_RESPONSE__INIT;
    Crescent__Master__BatchPutStartResponse bp = CRESCENT__MASTER__BATCH_PUT_START_RESPONSE__INIT;
    bg.n_responses = bp.n_responses = KEYS;
    bg.responses = gp;
    bp.responses = pp;
    return protobuf_c_message_pack(get ? &bg.base : &bp.base, out);
}

/* The path before the hand-written decoder: unpack, copy, free both. */
static void decode_protobuf_c(const uint8_t *buf, size_t len, bool get) {
    const ProtobufCMessageDescriptor *desc =
        get ? &crescent__master__batch_get_replica_list_response__descriptor
            : &crescent__master__batch_put_start_response__descriptor;
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, buf);
    if (m == NULL) abort();
    const Crescent__Master__BatchGetReplicaListResponse *bg = (const void *)m;
    const Crescent__Master__BatchPutStartResponse *bp = (const void *)m;
    struct cr_replica_lists out = {.lists = calloc(KEYS, sizeof(struct cr_replica_list))};
    for (size_t i = 0; i < KEYS; i++) {
        Crescent__Master__ReplicaInfo **r =
            get ? bg->responses[i]->replica_list : bp->responses[i]->replica_list;
        size_t n = get ? bg->responses[i]->n_replica_list : bp->responses[i]->n_replica_list;
        if (cr_client_replicas_from_pb(r, n, &out.lists[i]) != CR_OK) abort();
        if (get) cr_client_list_extras_from_pb(bg->responses[i], &out.lists[i]);
        out.count = i + 1;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    cr_client_replica_lists_free(&out);
}

static void decode_hand(const uint8_t *buf, size_t len, bool get) {
    struct cr_client_top top;
    struct cr_replica_lists out;
    if (cr_client_decode_replica_lists(buf, len, get, &top, &out) != CR_OK || out.count != KEYS)
        abort();
    cr_client_replica_lists_free(&out);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    long replies = argc > 2 ? atol(argv[2]) : 200000;
    if (rounds < 1 || rounds > 64 || replies < 1) {
        fprintf(stderr, "usage: client_decode [rounds 1..64] [replies_per_round]\n");
        return 2;
    }
    static const char *const names[2][2] = {
        {"BatchPutStartResponse, protobuf-c + copy", "BatchPutStartResponse, hand-written"},
        {"BatchGetReplicaListResponse, protobuf-c + copy",
         "BatchGetReplicaListResponse, hand-written"}};
    uint8_t buf[2][8192];
    size_t len[2] = {pack_reply(false, buf[0]), pack_reply(true, buf[1])};
    printf("# %u keys per reply: BatchPutStartResponse %zu B, BatchGetReplicaListResponse %zu B; "
           "%d rounds of %ld replies, CPU ns per reply (median)\n",
           KEYS, len[0], len[1], rounds, replies);
    double ns[2][2][64];
    for (int r = 0; r < rounds; r++) {
        for (int get = 0; get < 2; get++) {
            for (int hand = 0; hand < 2; hand++) {
                uint64_t t0 = bench_thread_cpu_ns();
                for (long i = 0; i < replies; i++) {
                    if (hand) decode_hand(buf[get], len[get], get);
                    else decode_protobuf_c(buf[get], len[get], get);
                }
                ns[get][hand][r] = (double)(bench_thread_cpu_ns() - t0) / (double)replies;
            }
        }
    }
    for (int get = 0; get < 2; get++) {
        for (int hand = 0; hand < 2; hand++) {
            double med = bench_median(ns[get][hand], rounds);
            printf("%-48s %9.0f ns/reply %7.1f ns/key\n", names[get][hand], med, med / KEYS);
        }
    }
    return 0;
}

/* libFuzzer target for crescentd's hand-written decoder of the batch
 * requests (cr_rpc_batch_decode, src/rpc/rpc_batch.c): BatchGetReplicaList,
 * BatchExistKey, BatchRemove, BatchPutStart, BatchPutEnd, BatchPutRevoke.
 *
 * Input: byte 0 picks the method (its value mod 6, in that order); the
 * rest is the request body.  Checked against the general path it stands in
 * for (tests/unit/rpc_batch_check.h: pre-scan, protobuf-c's unpack,
 * cr_rpc_validate, cr_rpc_batch_from_pb): the decoder never accepts a body
 * the general path refuses, and where both accept, every key, tenant, flag,
 * put field, token id and secret is the same, and every string the decoder
 * made is NUL-terminated at its length.  A body the decoder accepts is then
 * run on a real store (cr_rpc_methods_run with call->batch), so ASan sees
 * segments read it.  Build, seed and run: tests/fuzz/README.md. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../unit/rpc_batch_check.h"
#include "rpc/rpc_methods.h"
#include "core/store.h"
#include "fuzz_store.h"

static const uint16_t methods[] = {
    CRESCENT__MASTER__METHOD__BATCH_GET_REPLICA_LIST, CRESCENT__MASTER__METHOD__BATCH_EXIST_KEY,
    CRESCENT__MASTER__METHOD__BATCH_REMOVE,           CRESCENT__MASTER__METHOD__BATCH_PUT_START,
    CRESCENT__MASTER__METHOD__BATCH_PUT_END,          CRESCENT__MASTER__METHOD__BATCH_PUT_REVOKE};

static cr_store *store;
static struct cr_rpc_arena *arena;
static uint64_t inputs, now_ms = 1000;

/* Runs an accepted body's decoded form on the store, as segments does. */
static void run_on_store(uint16_t method, const uint8_t *body, size_t len) {
    fuzz_store_refresh(&store, &arena, inputs);
    struct cr_master_call *call = calloc(1, sizeof(*call));
    if (call == NULL) abort();
    call->method = method;
    if (!cr_rpc_batch_decode(method, body, len, &call->request_arena, &call->batch)) abort();
    struct cr_rpc_run run = {.store = store, .arena = arena, .now_ms = now_ms += 37,
                             .client_ttl_ms = 10000};
    cr_rpc_methods_run(&run, call);
    if (call->reply == NULL || (call->status != CR_OK && call->status != CR_ERR_NOMEM)) abort();
    cr_master_call_free(call);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    inputs++;
    uint16_t method = methods[data[0] % 6];
    enum check_outcome out = check_batch_body(method, data + 1, size - 1);
    if (out == CHECK_MISMATCH) abort();
    if (out == CHECK_BOTH) run_on_store(method, data + 1, size - 1);
    return 0;
}

/* ---- seed corpus, written when CR_FUZZ_SEEDS names a directory ---- */

static void write_seed(const char *dir, unsigned pick, const ProtobufCMessage *msg) {
    static unsigned n;
    uint8_t *body;
    size_t len;
    if (cr_rpc_pack(msg, &body, &len) != CR_OK) abort();
    char path[4096];
    snprintf(path, sizeof(path), "%s/seed-%03u", dir, n++);
    FILE *f = fopen(path, "wb");
    if (f != NULL) {
        uint8_t head = (uint8_t)pick;
        fwrite(&head, 1, 1, f);
        fwrite(body, 1, len, f);
        fclose(f);
    }
    free(body);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("CR_FUZZ_SEEDS");
    if (dir == NULL) return 0;
    mkdir(dir, 0755);
    char *keys[] = {"k1", "key-2", "a/b/c"};
    Crescent__Master__BatchRemoveRequest rm = CRESCENT__MASTER__BATCH_REMOVE_REQUEST__INIT;
    rm.n_keys = 3, rm.keys = keys, rm.tenant_id = "t1";
    rm.has_force = 1, rm.force = 1, rm.admin_token = "secret";
    Crescent__Master__BatchExistKeyRequest ex = CRESCENT__MASTER__BATCH_EXIST_KEY_REQUEST__INIT;
    ex.n_keys = 3, ex.keys = keys;
    write_seed(dir, 0, &ex.base); /* a BatchGetReplicaListRequest has its layout */
    write_seed(dir, 1, &ex.base);
    write_seed(dir, 2, &rm.base);

    Crescent__Master__UUID client = CRESCENT__MASTER__UUID__INIT;
    client.first = 1, client.second = 2;
    uint8_t secret[16] = {1, 0, 2};
    uint32_t tokens[] = {1, 300, 70000, 0xffffffffu};
    Crescent__Master__BlockInfo block = CRESCENT__MASTER__BLOCK_INFO__INIT;
    block.model_name = "m", block.block_hash = "h1", block.parent_block_hash = "h0";
    block.has_block_size = 1, block.block_size = 16, block.n_token_ids = 4, block.token_ids = tokens;
    Crescent__Master__ReplicateConfig cfg = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    cfg.has_replica_num = 1, cfg.replica_num = 2, cfg.preferred_segment = "seg0";
    uint64_t slices[] = {4096};
    Crescent__Master__PutStartRequest put = CRESCENT__MASTER__PUT_START_REQUEST__INIT;
    put.key = "k1", put.value_length = 4096, put.config = &cfg, put.client_id = &client;
    put.n_slice_lengths = 1, put.slice_lengths = slices, put.tenant_id = "t1", put.block = &block;
    put.has_client_secret = 1, put.client_secret = (ProtobufCBinaryData){16, secret};
    Crescent__Master__PutStartRequest *puts[] = {&put, &put};
    Crescent__Master__BatchPutStartRequest bs = CRESCENT__MASTER__BATCH_PUT_START_REQUEST__INIT;
    bs.n_requests = 2, bs.requests = puts;
    write_seed(dir, 3, &bs.base);

    Crescent__Master__PutEndRequest end = CRESCENT__MASTER__PUT_END_REQUEST__INIT;
    end.key = "k1", end.client_id = &client, end.has_checksum_xxh3 = 1, end.checksum_xxh3 = 7;
    end.has_client_secret = 1, end.client_secret = (ProtobufCBinaryData){16, secret};
    Crescent__Master__PutEndRequest *ends[] = {&end};
    Crescent__Master__BatchPutEndRequest be = CRESCENT__MASTER__BATCH_PUT_END_REQUEST__INIT;
    be.n_requests = 1, be.requests = ends;
    write_seed(dir, 4, &be.base);
    Crescent__Master__PutRevokeRequest rv = CRESCENT__MASTER__PUT_REVOKE_REQUEST__INIT;
    rv.key = "k1", rv.client_id = &client, rv.tenant_id = "t1";
    Crescent__Master__PutRevokeRequest *rvs[] = {&rv};
    Crescent__Master__BatchPutRevokeRequest br = CRESCENT__MASTER__BATCH_PUT_REVOKE_REQUEST__INIT;
    br.n_requests = 1, br.requests = rvs;
    write_seed(dir, 5, &br.base);
    return 0;
}

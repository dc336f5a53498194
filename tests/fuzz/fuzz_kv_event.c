/* libFuzzer target for the KV-event decoder (src/msgs/kv_event.c).
 *
 * Feeds arbitrary bytes to cr_kv_decode and, when a batch is accepted,
 * re-checks the invariants the indexer relies on by reading every byte the
 * batch points to (so ASan sees any dangling or short allocation).  Build and
 * run instructions are in tests/fuzz/README.md. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "msgs/kv_event.h"

static struct cr_kv_decoder *decoder;

static void check_str(const struct cr_kv_str *s) {
    if (s->ptr == NULL) {
        if (s->len != 0) abort();
        return;
    }
    if (s->len > CR_KV_MAX_STRING_BYTES || s->ptr[s->len] != '\0') abort();
}

static uint64_t check_event(const struct cr_kv_event *e) {
    uint64_t sum = 0;
    if (e->kind > CR_KV_EVENT_UPDATED || e->dialect > CR_KV_DIALECT_STORE) abort();
    if (e->hash_count > CR_KV_MAX_HASHES_PER_EVENT) abort();
    if (e->token_count > CR_KV_MAX_TOKENS_PER_EVENT) abort();
    for (uint32_t i = 0; i < e->hash_count; i++) sum += e->hashes[i];
    for (uint32_t i = 0; i < e->token_count; i++) sum += e->token_ids[i];
    if (e->kind == CR_KV_EVENT_STORED && e->dialect != CR_KV_DIALECT_STORE &&
        e->has_token_ids && e->block_size > 0 &&
        (uint64_t)e->token_count != (uint64_t)e->hash_count * e->block_size)
        abort();
    const struct cr_kv_str *strs[] = {&e->medium, &e->lora_name, &e->spec_kind_name,
                                      &e->model_name, &e->additional_salt, &e->tenant_id,
                                      &e->backend_id, &e->key, &e->block_hash,
                                      &e->parent_block_hash};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) check_str(strs[i]);
    for (uint32_t i = 0; i < e->replica_count; i++) {
        check_str(&e->replicas[i].type);
        check_str(&e->replicas[i].location);
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (decoder == NULL && cr_kv_decoder_create(&decoder) != CR_OK) abort();
    const struct cr_kv_batch *batch = NULL;
    char err[128];
    int rc = cr_kv_decode(decoder, data, size, &batch, err, sizeof(err));
    if (rc != CR_OK) {
        if (batch != NULL || rc != CR_ERR_PROTOCOL) abort();
        if (strnlen(err, sizeof(err)) >= sizeof(err) || err[0] == '\0') abort();
        return 0;
    }
    if (batch == NULL || batch->event_count > CR_KV_MAX_EVENTS_PER_BATCH) abort();
    volatile uint64_t sink = 0;
    for (uint32_t i = 0; i < batch->event_count; i++) sink += check_event(&batch->events[i]);
    (void)sink;
    return 0;
}

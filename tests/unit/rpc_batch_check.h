/* The check shared by tests/unit/test_rpc_batch.c and
 * tests/fuzz/fuzz_rpc_batch.c: crescentd's hand-written decoder of the
 * batch requests (cr_rpc_batch_decode, src/rpc/rpc_batch.c) against the
 * general path it stands in for (cr_rpc_prescan, protobuf-c's unpack,
 * cr_rpc_validate, then cr_rpc_batch_from_pb).  Wherever the decoder
 * accepts a body, the general path must accept it too and give the same
 * request, field by field; where it declines, the general path answers. */
#ifndef CRESCENT_TESTS_RPC_BATCH_CHECK_H
#define CRESCENT_TESTS_RPC_BATCH_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "rpc/rpc_batch.h"
#include "rpc/rpc_codec.h"
#include "crescent/error.h"
#include "msgs/master_msgs.h"

static void *check_alloc(void *ctx, size_t size) {
    return cr_rpc_request_alloc(ctx, size);
}

/* Both strings absent, or both present with the same bytes. */
static bool check_same_string(const char *a, const char *b) {
    if (a == NULL || b == NULL) return a == b;
    return strcmp(a, b) == 0;
}

/* A key batch's or a put's tenant: NULL and "" both mean "default". */
static bool check_same_tenant(const char *a, const char *b) {
    return strcmp(a != NULL && a[0] != '\0' ? a : "default",
                  b != NULL && b[0] != '\0' ? b : "default") == 0 &&
           check_same_string(a != NULL && a[0] == '\0' ? "" : a,
                             b != NULL && b[0] == '\0' ? "" : b);
}

static bool check_same_block(const struct cr_store_block_meta *a,
                             const struct cr_store_block_meta *b) {
    if (a->token_count != b->token_count || a->block_size != b->block_size) return false;
    if (a->token_count > 0 &&
        memcmp(a->token_ids, b->token_ids, a->token_count * sizeof(*a->token_ids)) != 0)
        return false;
    return check_same_string(a->model_name, b->model_name) &&
           check_same_string(a->block_hash, b->block_hash) &&
           check_same_string(a->parent_block_hash, b->parent_block_hash);
}

static bool check_same_put(uint16_t method, const struct cr_rpc_put *a,
                           const struct cr_rpc_put *b) {
    if (a->key_len != b->key_len || memcmp(a->key, b->key, a->key_len) != 0) return false;
    if (strlen(a->key) != a->key_len || !check_same_tenant(a->tenant, b->tenant)) return false;
    if (memcmp(&a->client, &b->client, sizeof(a->client)) != 0) return false;
    if (a->has_secret != b->has_secret || a->secret_len != b->secret_len) return false;
    if (a->secret_len > 0 && memcmp(a->secret, b->secret, a->secret_len) != 0) return false;
    if (method == CRESCENT__MASTER__METHOD__BATCH_PUT_START) {
        if (a->value_length != b->value_length || a->replica_num != b->replica_num ||
            a->with_soft_pin != b->with_soft_pin || a->has_block != b->has_block)
            return false;
        if (!check_same_string(a->preferred_segment, b->preferred_segment)) return false;
        return !a->has_block || check_same_block(&a->block, &b->block);
    }
    return a->has_checksum == b->has_checksum && a->checksum == b->checksum;
}

/* Whether two batch forms of one request are the same. */
static bool check_same_batch(const struct cr_rpc_batch *a, const struct cr_rpc_batch *b) {
    if (a->method != b->method || a->count != b->count) return false;
    if (a->puts != NULL || b->puts != NULL) {
        if (a->puts == NULL || b->puts == NULL) return a->count == 0 && b->count == 0;
        for (uint32_t i = 0; i < a->count; i++)
            if (!check_same_put(a->method, &a->puts[i], &b->puts[i])) return false;
        return true;
    }
    if (!check_same_tenant(a->tenant, b->tenant) || a->force != b->force) return false;
    if (!check_same_string(a->admin_token, b->admin_token)) return false;
    for (uint32_t i = 0; i < a->count; i++) {
        if (a->key_lens[i] != b->key_lens[i] || strlen(a->keys[i]) != a->key_lens[i]) return false;
        if (memcmp(a->keys[i], b->keys[i], a->key_lens[i]) != 0) return false;
    }
    return true;
}

/* The outcome of one body through both decoders. */
enum check_outcome {
    CHECK_BOTH = 1,     /* both accepted it, the same request */
    CHECK_GENERAL = 2,  /* the decoder declined, the general path accepted */
    CHECK_REFUSED = 3,  /* both refused */
    CHECK_MISMATCH = 0, /* the decoder accepted what the general path refused, or differed */
};

static enum check_outcome check_batch_body(uint16_t method, const uint8_t *body, size_t len) {
    const struct cr_rpc_method *m = cr_rpc_method_find(method);
    void *fast_arena = NULL, *pb_arena = NULL;
    const struct cr_rpc_batch *fast = NULL;
    bool fast_ok = cr_rpc_batch_decode(method, body, len, &fast_arena, &fast);
    if (!fast_ok && (fast_arena != NULL || fast != NULL)) return CHECK_MISMATCH;
    ProtobufCMessage *msg = NULL;
    char err[CR_RPC_ERROR_MAX];
    if (cr_rpc_prescan(m->request, body, len, CR_MASTER_BATCH_MAX) == NULL)
        msg = cr_rpc_unpack(m->request, body, len, &pb_arena);
    bool general_ok = msg != NULL && cr_rpc_validate(method, msg, err) == CR_OK;
    enum check_outcome out = CHECK_MISMATCH;
    if (fast_ok && general_ok) {
        struct cr_rpc_batch ref;
        void *ref_arena = NULL;
        if (cr_rpc_batch_from_pb(method, msg, check_alloc, &ref_arena, &ref) &&
            check_same_batch(fast, &ref))
            out = CHECK_BOTH;
        cr_rpc_request_arena_free(ref_arena);
    } else if (!fast_ok) {
        out = general_ok ? CHECK_GENERAL : CHECK_REFUSED;
    }
    cr_rpc_request_arena_free(fast_arena);
    cr_rpc_request_arena_free(pb_arena);
    return out;
}

#endif

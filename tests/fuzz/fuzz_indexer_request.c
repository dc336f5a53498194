/* libFuzzer target for the indexer's HTTP body parsing
 * (src/http/indexer_request.c and cr_indexer_registration_from_json).
 *
 * The first input byte picks the route and the body's encoding, the rest is
 * the body, copied into an exactly sized buffer (ASan sees any over-read):
 *   bits 0-1: 0 /query and /route (fast path, then the jansson path),
 *             1 /query_by_hash, 2 /register, 3 /load
 *   bit 2:    msgpack instead of JSON (Content-Type: application/msgpack)
 * /unregister parses its body with cr_indexer_body_parse and checks it
 * inline in indexer_routes.c: its parsing is covered by every mode here.
 *
 * Invariants checked besides "no crash":
 *  - a refused body yields an error code and a non-empty NUL-terminated
 *    detail, and a refused request holds nothing to free;
 *  - JSON: an accepted body nests at most CR_JSON_DEPTH_MAX levels (jansson
 *    recurses per level on an HTTP worker's stack: ~950 levels killed
 *    crescentd), measured on the parsed value;
 *  - JSON: a body with a NUL byte is refused (JSON has none), and a body the
 *    parser accepts is JSON that jansson itself accepts (the big-integer
 *    quoting must never turn an invalid document into a valid one);
 *  - an accepted request is within the documented bounds (names shorter
 *    than CR_INDEXER_NAME_MAX, tenant never empty, block_size 1..max,
 *    counts at most CR_INDEXER_QUERY_TOKENS_MAX, every id readable);
 *  - the fast path accepts only bodies the jansson path accepts, with the
 *    same result.
 * Build and run instructions are in tests/fuzz/README.md. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crescent/error.h"
#include "http/indexer_request.h"
#include "msgs/indexer_msgs.h"
#include "msgs/kv_event.h"

enum { MODE_QUERY, MODE_BY_HASH, MODE_REGISTER, MODE_LOAD };

static void check_detail(const char *detail, size_t size) {
    if (detail[0] == '\0' || strnlen(detail, size) >= size) abort();
}

static void check_name(const char *s, size_t size) {
    if (strnlen(s, size) >= size) abort();
}

/* Documented bounds of an accepted /query, /query_by_hash or /route. */
static void check_request(const struct cr_indexer_request *q, bool by_hash) {
    const char *names[] = {q->model, q->tenant, q->lora, q->salt, q->instance};
    for (size_t i = 0; i < 5; i++) check_name(names[i], CR_INDEXER_NAME_MAX);
    if (q->tenant[0] == '\0' || q->has_instance != (q->instance[0] != '\0')) abort();
    if (q->block_size == 0 || q->block_size > CR_KV_MAX_BLOCK_SIZE) abort();
    volatile uint64_t sink = 0;
    if (by_hash) {
        if (q->hashes == NULL || q->tokens != NULL) abort();
        if (q->hash_count > CR_INDEXER_QUERY_TOKENS_MAX) abort();
        for (size_t i = 0; i < q->hash_count; i++) sink += q->hashes[i];
    } else {
        if (q->tokens == NULL || q->hashes != NULL) abort();
        if (q->token_count > CR_INDEXER_QUERY_TOKENS_MAX) abort();
        for (size_t i = 0; i < q->token_count; i++) sink += q->tokens[i];
    }
    (void)sink;
}

static bool same_request(const struct cr_indexer_request *a, const struct cr_indexer_request *b) {
    return strcmp(a->model, b->model) == 0 && strcmp(a->tenant, b->tenant) == 0 &&
           strcmp(a->lora, b->lora) == 0 && strcmp(a->salt, b->salt) == 0 &&
           strcmp(a->instance, b->instance) == 0 && a->has_instance == b->has_instance &&
           a->block_size == b->block_size && a->token_count == b->token_count &&
           (a->token_count == 0 ||
            memcmp(a->tokens, b->tokens, a->token_count * sizeof(uint32_t)) == 0);
}

/* Integer literals too long for a double are the one thing the quoting
 * accepts that jansson's INT_AS_REAL reference refuses. */
static bool has_long_digit_run(const char *s, size_t len) {
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        run = (s[i] >= '0' && s[i] <= '9') ? run + 1 : 0;
        if (run > 300) return true;
    }
    return false;
}

/* Levels of arrays and objects in a parsed value (a scalar is 0). */
static unsigned depth_of(json_t *v) {
    unsigned deepest = 0;
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            unsigned d = depth_of(json_array_get(v, i));
            if (d > deepest) deepest = d;
        }
        return deepest + 1;
    }
    if (json_is_object(v)) {
        const char *k;
        json_t *child;
        json_object_foreach(v, k, child) {
            unsigned d = depth_of(child);
            if (d > deepest) deepest = d;
        }
        return deepest + 1;
    }
    return 0;
}

static json_t *parse(const char *body, size_t len, bool msgpack) {
    char detail[CR_INDEXER_DETAIL_MAX];
    detail[0] = '\0';
    json_t *root = cr_indexer_body_parse(body, len, msgpack, detail, sizeof(detail));
    if (root == NULL) {
        check_detail(detail, sizeof(detail));
        return NULL;
    }
    if (!msgpack) {
        if (depth_of(root) > CR_JSON_DEPTH_MAX) abort();
        if (memchr(body, '\0', len) != NULL) abort();
        json_t *ref = json_loadb(body, len, JSON_DECODE_INT_AS_REAL, NULL);
        if (ref == NULL && !has_long_digit_run(body, len)) abort();
        json_decref(ref);
    }
    return root;
}

static void query(json_t *root, bool by_hash, const char *body, size_t len, bool msgpack) {
    char detail[CR_INDEXER_DETAIL_MAX] = "";
    struct cr_indexer_request full;
    int rc = cr_indexer_request_from_json(root, by_hash, &full, detail, sizeof(detail));
    if (rc == CR_OK) {
        check_request(&full, by_hash);
    } else {
        if (rc != CR_ERR_INVALID_PARAMS || full.tokens != NULL || full.hashes != NULL) abort();
        check_detail(detail, sizeof(detail));
    }
    if (!by_hash && !msgpack) {
        struct cr_indexer_request fast;
        int frc = cr_indexer_request_fast(body, len, &fast);
        if (frc == CR_OK) {
            check_request(&fast, false);
            if (rc != CR_OK || !same_request(&fast, &full)) abort();
            cr_indexer_request_free(&fast);
        } else if (frc != CR_ERR_AGAIN || fast.tokens != NULL) {
            abort();
        }
    }
    if (rc == CR_OK) cr_indexer_request_free(&full);
}

/* The fast path runs first in the route, before any jansson parse: it must
 * decline every body the parser refuses. */
static void fast_on_unparsable(const char *body, size_t len) {
    struct cr_indexer_request fast;
    if (cr_indexer_request_fast(body, len, &fast) != CR_ERR_AGAIN || fast.tokens != NULL) abort();
}

static void registration(json_t *root) {
    struct cr_indexer_registration reg;
    char error[CR_INDEXER_ERROR_MAX] = "";
    if (cr_indexer_registration_from_json(root, NULL, &reg, error, sizeof(error)) != CR_OK) {
        check_detail(error, sizeof(error));
        return;
    }
    const char *names[] = {reg.instance_id, reg.tenant_id, reg.model, reg.lora_name, reg.salt};
    for (size_t i = 0; i < 5; i++) check_name(names[i], CR_INDEXER_NAME_MAX);
    check_name(reg.endpoint, sizeof(reg.endpoint));
    check_name(reg.replay_endpoint, sizeof(reg.replay_endpoint));
    check_name(reg.type, sizeof(reg.type));
    if (reg.instance_id[0] == '\0' || reg.endpoint[0] == '\0' || reg.tenant_id[0] == '\0' ||
        reg.type[0] == '\0')
        abort();
    if (strchr(reg.instance_id, '|') != NULL || strchr(reg.tenant_id, '|') != NULL) abort();
    if (reg.block_size == 0 || reg.block_size > CR_KV_MAX_BLOCK_SIZE) abort();
    if (reg.dp_rank >= CR_PREFIX_DP_RANKS) abort();
}

static void load(json_t *root) {
    struct cr_indexer_load l;
    char detail[CR_INDEXER_DETAIL_MAX] = "";
    if (cr_indexer_load_from_json(root, &l, detail, sizeof(detail)) != CR_OK) {
        check_detail(detail, sizeof(detail));
        return;
    }
    check_name(l.instance_id, sizeof(l.instance_id));
    check_name(l.tenant_id, sizeof(l.tenant_id));
    if (l.tenant_id[0] == '\0') abort();
    if (!(l.gpu_cache_usage_perc >= 0) || !(l.gpu_prefix_cache_hit_rate >= 0)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    unsigned mode = data[0] & 3u;
    bool msgpack = (data[0] & 4u) != 0;
    size_t len = size - 1;
    char *body = malloc(len > 0 ? len : 1); /* exact size: no NUL after the body */
    if (body == NULL) abort();
    memcpy(body, data + 1, len);
    json_t *root = parse(body, len, msgpack);
    if (root == NULL) {
        if (!msgpack) fast_on_unparsable(body, len);
    } else if (mode == MODE_QUERY || mode == MODE_BY_HASH) {
        query(root, mode == MODE_BY_HASH, body, len, msgpack);
    } else if (mode == MODE_REGISTER) {
        registration(root);
    } else {
        load(root);
    }
    json_decref(root);
    free(body);
    return 0;
}

/* ---- seed corpus: the bodies of tests/unit/test_indexer_conf.c and of the
 * integration tests, written when CR_FUZZ_SEEDS is set ---- */

static void write_seed(const char *dir, unsigned n, uint8_t mode, const void *body, size_t len) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/seed-%03u", dir, n);
    FILE *f = fopen(path, "wb");
    if (f == NULL) return;
    fputc(mode, f);
    fwrite(body, 1, len, f);
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("CR_FUZZ_SEEDS");
    if (dir == NULL) return 0;
    mkdir(dir, 0755);
    static const struct {
        uint8_t mode;
        const char *body;
    } json[] = {
        {0, "{\"model\":\"m\",\"token_ids\":[1,2,3],\"block_size\":2,\"cache_salt\":\"x\"}"},
        {1, "{\"model\":\"m\",\"block_size\":2,\"block_hash\":[18446744073709551615,-1,"
            "\"18446744073709551614\",\"0x10\", 9223372036854775808]}"},
        {1, "{\"model\":\"m\",\"block_size\":16,\"seq_hashes\":[1,2,3],\"tenant_id\":\"t\"}"},
        {0, "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":0}"},
        {0, "{\"model\":\"m\",\"token_ids\":[4294967296],\"block_size\":1}"},
        {0, "{\"model\":\"m\",\"token_ids\":[1.5],\"block_size\":1}"},
        {0, "{\"model\":\"99999999999999999999\",\"token_ids\":[1],\"block_size\":1}"},
        {0, " { \"block_size\" : 16 , \"token_ids\" : [ ] , \"model\" : \"\" } "},
        {0, "{\"model\":\"m\",\"token_ids\":[4294967295,0],\"block_size\":1,\"tenant_id\":\"t\","
            "\"lora_name\":\"l\",\"additionalsalt\":\"a\",\"instance_id\":\"i\",\"x\":5}"},
        {0, "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"cache_salt\":\"c\","
            "\"additionalsalt\":\"a\"}"},
        {0, "{\"model\":\"m\",\"token_ids\":[1],\"token_ids\":[2,3],\"block_size\":1}"},
        {0, "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"x\":{}}"},
        {0, "{\"model\":\"\xc3\xa9\",\"token_ids\":[1],\"block_size\":1}"},
        {2, "{\"instance_id\":\"vllm-1\",\"endpoint\":\"tcp://127.0.0.1:5557\",\"type\":\"vLLM\","
            "\"modelname\":\"m\",\"lora_name\":\"\",\"tenant_id\":\"default\",\"block_size\":16,"
            "\"dp_rank\":0,\"replay_endpoint\":\"tcp://127.0.0.1:5558\",\"additionalsalt\":\"\"}"},
        {2, "{\"instance_id\":\"sg\",\"endpoint\":\"tcp://h:1\",\"type\":\"SGLang\","
            "\"modelname\":\"m\",\"block_size\":1}"},
        {3, "{\"instance_id\":\"a\",\"metrics\":{\"kv_active_blocks\":3,"
            "\"kv_total_blocks\":10,\"gpu_cache_usage_perc\":0.5}}"},
        {3, "{\"instance_id\":\"a\",\"tenant_id\":\"t\",\"request_active_slots\":1,"
            "\"request_total_slots\":8,\"num_requests_waiting\":0,"
            "\"gpu_prefix_cache_hit_rate\":0.25}"},
        {3, "{\"instance_id\":\"a\",\"kv_active_blocks\":-1}"},
        {3, "{\"instance_id\":\"a\",\"kv_total_blocks\":2.5e3,\"gpu_cache_usage_perc\":1e-3}"},
        {2, "{\"instance_id\":\"a\",\"tenant_id\":\"t\",\"dp_rank\":3}"},
    };
    unsigned n = 0;
    for (size_t i = 0; i < sizeof(json) / sizeof(json[0]); i++)
        write_seed(dir, n++, json[i].mode, json[i].body, strlen(json[i].body));
    /* {"model": "m", "block_size": 1, "seq_hashes": [0xffffffffffffffff, -2]} */
    static const uint8_t mp[] = {0x83, 0xa5, 'm', 'o', 'd', 'e', 'l', 0xa1, 'm', 0xaa, 'b',
                                 'l', 'o', 'c', 'k', '_', 's', 'i', 'z', 'e', 0x01, 0xaa,
                                 's', 'e', 'q', '_', 'h', 'a', 's', 'h', 'e', 's', 0x92,
                                 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe};
    write_seed(dir, n++, 4 | MODE_BY_HASH, mp, sizeof(mp));
    /* {"model": "m", "block_size": 2, "token_ids": [1, 2, 300]} */
    static const uint8_t mq[] = {0x83, 0xa5, 'm', 'o', 'd', 'e', 'l', 0xa1, 'm', 0xaa, 'b', 'l',
                                 'o', 'c', 'k', '_', 's', 'i', 'z', 'e', 0x02, 0xa9, 't', 'o',
                                 'k', 'e', 'n', '_', 'i', 'd', 's', 0x93, 0x01, 0x02, 0xcd, 0x01,
                                 0x2c};
    write_seed(dir, n++, 4 | MODE_QUERY, mq, sizeof(mq));
    static const uint8_t huge[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    write_seed(dir, n++, 4 | MODE_QUERY, huge, sizeof(huge));
    /* Nesting at the bound (the outer object and 31 arrays), one past it,
     * and far past it, for every route. */
    static char deep[2 * 1000 + 64];
    const unsigned depths[] = {CR_JSON_DEPTH_MAX - 1, CR_JSON_DEPTH_MAX, 1000};
    for (uint8_t mode = 0; mode < 4; mode++) {
        for (size_t d = 0; d < 3; d++) {
            int len = snprintf(deep, sizeof(deep), "{\"model\":\"m\",\"x\":");
            memset(deep + len, '[', depths[d]);
            len += (int)depths[d];
            deep[len++] = '1';
            memset(deep + len, ']', depths[d]);
            len += (int)depths[d];
            deep[len++] = '}';
            write_seed(dir, n++, mode, deep, (size_t)len);
        }
    }
    return 0;
}

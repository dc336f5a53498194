/* The /query answer's JSON (src/http/indexer_render.c) against a plain
 * reference renderer written with snprintf, field by field, as the answer's
 * shape is documented (docs/http-api.md, wire-formats.md §5): byte for byte,
 * over random answers (names needing escapes, extra media, DP ranks up to
 * 63, numbers at every digit count), and parsed back by jansson. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/buf.h"
#include "crescent/error.h"
#include "http/indexer_render.h"

/* ---- the reference: one snprintf per field, no cleverness ---- */

static void ref_quoted(struct cr_buf *b, const char *s) {
    cr_buf_append(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\')
            cr_buf_appendf(b, "\\%c", *c);
        else if (*c < 0x20)
            cr_buf_appendf(b, "\\u%04x", *c);
        else
            cr_buf_append(b, c, 1);
    }
    cr_buf_append(b, "\"", 1);
}

static void ref_render(struct cr_buf *b, const char *tenant, const struct cr_indexer_result *r) {
    static const char *const standard[3] = {"GPU", "CPU", "DISK"};
    if (r->hit_count == 0) {
        cr_buf_appendf(b, "{}");
        return;
    }
    cr_buf_appendf(b, "{");
    ref_quoted(b, tenant);
    cr_buf_appendf(b, ":{");
    unsigned media = r->media_count > 3 ? r->media_count : 3;
    for (uint32_t i = 0; i < r->hit_count; i++) {
        const struct cr_indexer_hit *h = &r->hits[i];
        if (i > 0) cr_buf_appendf(b, ",");
        ref_quoted(b, h->instance);
        cr_buf_appendf(b, ":{\"longest_matched\":%u", h->longest_tokens);
        for (unsigned m = 0; m < media; m++) {
            uint32_t tokens = m < r->media_count ? h->medium_tokens[m] : 0;
            if (m >= 3 && tokens == 0) continue;
            cr_buf_appendf(b, ",");
            ref_quoted(b, m < r->media_count ? r->media[m] : standard[m]);
            cr_buf_appendf(b, ":%u", tokens);
        }
        cr_buf_appendf(b, ",\"DP\":{");
        unsigned k = 0;
        for (unsigned rank = 0; rank < 64; rank++) {
            if (!(h->dp_mask >> rank & 1)) continue;
            cr_buf_appendf(b, "%s\"%u\":%u", k > 0 ? "," : "", rank, h->dp_tokens[k]);
            k++;
        }
        cr_buf_appendf(b, "}}");
    }
    cr_buf_appendf(b, "}}");
}

/* ---- random answers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Numbers of every length, and the edges between them. */
static uint32_t random_number(void) {
    static const uint32_t edges[] = {0,      1,       9,        10,        99,         100,
                                     999,    1000,    9999,     10000,     99999,      100000,
                                     999999, 1000000, 9999999,  10000000,  99999999,   100000000,
                                     999999999, 1000000000, 4294967295u, 2048, 512, 16};
    if (rng() % 3 == 0) return edges[rng() % (sizeof(edges) / sizeof(edges[0]))];
    return (uint32_t)(rng() >> (rng() % 32 + 32)); /* 0 .. 2^32-1, every digit count */
}

static void random_name(char *out, size_t cap) {
    size_t len = 1 + rng() % (rng() % 8 == 0 ? cap - 1 : 24);
    for (size_t i = 0; i < len; i++) {
        unsigned pick = (unsigned)(rng() % 40);
        out[i] = pick == 0 ? '"' : pick == 1 ? '\\' : pick == 2 ? (char)(1 + rng() % 31)
                 : pick == 3 ? (char)(0x80 + rng() % 0x7f) : (char)('a' + rng() % 26);
    }
    out[len] = '\0';
}

struct answer {
    struct cr_indexer_result r;
    struct cr_indexer_hit hits[64];
    char names[64][CR_INDEXER_NAME_MAX];
    uint32_t dp[64][64];
};

static void random_answer(struct answer *a) {
    memset(&a->r, 0, sizeof(a->r));
    a->r.hits = a->hits;
    a->r.hit_count = (uint32_t)(rng() % 65);
    a->r.media_count = (uint8_t)(rng() % (CR_PREFIX_MEDIA_MAX + 1));
    static const char *const standard[3] = {"GPU", "CPU", "DISK"};
    for (uint8_t m = 0; m < a->r.media_count; m++) {
        if (m < 3 && rng() % 4 != 0)
            snprintf(a->r.media[m], sizeof(a->r.media[m]), "%s", standard[m]);
        else
            random_name(a->r.media[m], sizeof(a->r.media[m]));
    }
    for (uint32_t i = 0; i < a->r.hit_count; i++) {
        struct cr_indexer_hit *h = &a->hits[i];
        memset(h, 0, sizeof(*h));
        random_name(a->names[i], sizeof(a->names[i]));
        h->instance = a->names[i];
        h->longest_tokens = random_number();
        for (unsigned m = 0; m < CR_PREFIX_MEDIA_MAX; m++)
            h->medium_tokens[m] = rng() % 3 == 0 ? 0 : random_number();
        unsigned shape = (unsigned)(rng() % 4);
        h->dp_mask = shape == 0 ? 1 : shape == 1 ? rng() : shape == 2 ? ~0ull : rng() & rng();
        for (unsigned k = 0; k < 64; k++) a->dp[i][k] = random_number();
        h->dp_tokens = a->dp[i];
    }
}

static void test_render_matches_the_reference_byte_for_byte(void **unused) {
    (void)unused;
    static struct answer a;
    char tenant[CR_INDEXER_NAME_MAX];
    for (int round = 0; round < 20000; round++) {
        random_answer(&a);
        if (round % 2 == 0)
            snprintf(tenant, sizeof(tenant), "default");
        else
            random_name(tenant, sizeof(tenant));
        struct cr_buf got, want;
        cr_buf_init(&got);
        cr_buf_init(&want);
        cr_buf_append(&got, "x", 1); /* renders append: what is there stays */
        cr_buf_append(&want, "x", 1);
        cr_indexer_render_matches_json(&got, tenant, &a.r);
        ref_render(&want, tenant, &a.r);
        assert_true(cr_buf_ok(&got) && cr_buf_ok(&want));
        if (got.len != want.len || memcmp(got.data, want.data, got.len) != 0)
            fail_msg("round %d: rendered\n%s\nexpected\n%s", round, got.data, want.data);
        cr_buf_free(&got);
        cr_buf_free(&want);
    }
}

/* The rendered text is JSON a client reads back to the same numbers. */
static void test_render_parses_back(void **unused) {
    (void)unused;
    static struct answer a;
    for (int round = 0; round < 500; round++) {
        random_answer(&a);
        for (uint32_t i = 0; i < a.r.hit_count; i++) /* distinct keys, valid UTF-8 */
            snprintf(a.names[i], sizeof(a.names[i]), "inst-\"%u\\\x01", i);
        for (uint8_t m = 0; m < a.r.media_count; m++) /* distinct, valid UTF-8 */
            snprintf(a.r.media[m], sizeof(a.r.media[m]), "medium-%u", m);
        struct cr_buf b;
        cr_buf_init(&b);
        cr_indexer_render_matches_json(&b, "t", &a.r);
        json_error_t err;
        json_t *root = json_loadb(b.data, b.len, 0, &err);
        if (root == NULL) fail_msg("round %d: %s in %s", round, err.text, b.data);
        json_t *tenant = json_object_get(root, "t");
        assert_int_equal(json_object_size(a.r.hit_count > 0 ? tenant : root), a.r.hit_count);
        for (uint32_t i = 0; i < a.r.hit_count; i++) {
            json_t *h = json_object_get(tenant, a.names[i]);
            assert_non_null(h);
            assert_int_equal(json_integer_value(json_object_get(h, "longest_matched")),
                             a.hits[i].longest_tokens);
            json_t *dp = json_object_get(h, "DP");
            assert_int_equal(json_object_size(dp), __builtin_popcountll(a.hits[i].dp_mask));
        }
        json_decref(root);
        cr_buf_free(&b);
    }
}

static void test_quoted_escapes(void **unused) {
    (void)unused;
    struct cr_buf b;
    cr_buf_init(&b);
    cr_indexer_render_quoted(&b, "a\"b\\c\x01\x1f\x7f\xc3\xa9");
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\u0001\\u001f\x7f\xc3\xa9\"");
    cr_buf_free(&b);
}

/* keep_top against a reference: the hits sorted by match, longest first,
 * ties in answer order (a stable insertion sort), the first k, in answer
 * order again. */
static void test_keep_top_matches_the_reference(void **unused) {
    (void)unused;
    static struct answer a;
    static struct cr_indexer_hit all[64];
    for (int round = 0; round < 20000; round++) {
        random_answer(&a);
        for (uint32_t i = 0; i < a.r.hit_count; i++) /* many ties */
            a.hits[i].longest_tokens = round % 2 == 0 ? (uint32_t)(rng() % 4) * 16
                                                      : random_number();
        uint32_t n = a.r.hit_count, k = (uint32_t)(rng() % 70);
        memcpy(all, a.hits, sizeof(all));
        uint32_t order[64];
        for (uint32_t i = 0; i < n; i++) {
            uint32_t j = i;
            for (; j > 0 && all[order[j - 1]].longest_tokens < all[i].longest_tokens; j--)
                order[j] = order[j - 1];
            order[j] = i;
        }
        uint32_t keep = k == 0 || k >= n ? n : k;
        bool chosen[64] = {false};
        for (uint32_t i = 0; i < keep; i++) chosen[order[i]] = true;
        assert_int_equal(cr_indexer_result_keep_top(&a.r, k), CR_OK);
        assert_int_equal(a.r.hit_count, keep);
        uint32_t at = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (!chosen[i]) continue;
            assert_ptr_equal(a.hits[at].instance, all[i].instance);
            assert_int_equal(a.hits[at].longest_tokens, all[i].longest_tokens);
            at++;
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_matches_the_reference_byte_for_byte),
        cmocka_unit_test(test_render_parses_back),
        cmocka_unit_test(test_quoted_escapes),
        cmocka_unit_test(test_keep_top_matches_the_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

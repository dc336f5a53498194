/* The /query answer as JSON (see indexer_render.h).
 *
 * A 1,000-instance answer is ~80 KB, and rendering it was the largest share
 * of a /query's time on the HTTP worker (bench/RESULTS.md, issue 30): so the
 * room for a typical answer is reserved once, each record is written in
 * place with one bound check (no function call) and none per field, names that need no escaping are copied
 * whole, and numbers are written two digits at a time from a table. */
#include "http/indexer_render.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"

static char *put(char *p, const char *s, size_t n) {
    memcpy(p, s, n);
    return p + n;
}

#define PUT_LIT(p, lit) put((p), (lit), sizeof(lit) - 1)

static const char digit_pairs[201] = "00010203040506070809"
                                     "10111213141516171819"
                                     "20212223242526272829"
                                     "30313233343536373839"
                                     "40414243444546474849"
                                     "50515253545556575859"
                                     "60616263646566676869"
                                     "70717273747576777879"
                                     "80818283848586878889"
                                     "90919293949596979899";

static unsigned digit_count(uint32_t v) {
    unsigned n = 1;
    for (; v >= 10000; v /= 10000) n += 4;
    return n + (v >= 10) + (v >= 100) + (v >= 1000);
}

/* Decimal digits straight into place, last pair first (never through a
 * stack buffer: copying one out stalled on store-to-load forwarding). */
static char *put_u32(char *p, uint32_t v) {
    if (v < 10) {
        *p = (char)('0' + v);
        return p + 1;
    }
    char *end = p + digit_count(v), *q = end;
    while (v >= 100) {
        q -= 2;
        memcpy(q, digit_pairs + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) {
        memcpy(q - 2, digit_pairs + 2 * v, 2);
    } else {
        q[-1] = (char)('0' + v);
    }
    return end;
}

/* s as a JSON string literal (names are caller-supplied bytes, so quotes,
 * backslashes and control characters are escaped; other bytes pass). */
static char *put_quoted(char *p, const char *s) {
    static const char hex[] = "0123456789abcdef";
    *p++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\') {
            *p++ = '\\';
            *p++ = (char)*c;
        } else if (*c < 0x20) {
            p = PUT_LIT(p, "\\u00");
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        } else {
            *p++ = (char)*c;
        }
    }
    *p++ = '"';
    return p;
}

/* put_quoted for a name of known length: most names need no escape, and
 * those are copied whole. */
static char *put_quoted_n(char *p, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '"' || c == '\\') return put_quoted(p, s);
    }
    *p++ = '"';
    p = put(p, s, len);
    *p++ = '"';
    return p;
}

void cr_indexer_render_quoted(struct cr_buf *b, const char *s) {
    assert(b != NULL && s != NULL);
    char *p = cr_buf_reserve(b, strlen(s) * 6 + 2); /* "\u00XX" is the longest escape */
    if (p != NULL) cr_buf_commit(b, put_quoted(p, s));
}

static const char *medium_name(const struct cr_indexer_result *r, uint8_t m) {
    static const char *const standard[3] = {"GPU", "CPU", "DISK"};
    return m < r->media_count ? r->media[m] : standard[m];
}

/* The `,"MEDIUM":` of each medium, escaped once per answer, not once per hit. */
struct media_keys {
    uint8_t count;
    size_t len[CR_PREFIX_MEDIA_MAX], total;
    char text[CR_PREFIX_MEDIA_MAX][2 + 32 * 6 + 2];
};

static void media_keys_init(struct media_keys *k, const struct cr_indexer_result *r) {
    k->count = r->media_count > 3 ? r->media_count : 3;
    k->total = 0;
    for (uint8_t m = 0; m < k->count; m++) {
        char *p = k->text[m];
        *p++ = ',';
        p = put_quoted(p, medium_name(r, m));
        *p++ = ':';
        k->len[m] = (size_t)(p - k->text[m]);
        k->total += k->len[m] + 10;
    }
}

/* Bytes one hit may take at most, its name's escaping aside:
 * ,"NAME":{"longest_matched":N  MEDIA  ,"DP":{"RANK":N,...}} */
static size_t hit_bound(const struct media_keys *keys, const struct cr_indexer_hit *h,
                        size_t name_len) {
    return 1 + name_len * 6 + 2 + 20 + 10 + keys->total + 7 +
           (size_t)__builtin_popcountll(h->dp_mask) * (1 + 4 + 2 + 10) + 2;
}

/* "name":{"longest_matched":N,"GPU":N,"CPU":N,"DISK":N[,other media],"DP":{"r":N,...}} */
static char *put_hit(char *p, const struct cr_indexer_result *r, const struct media_keys *keys,
                     const struct cr_indexer_hit *h, size_t name_len) {
    p = put_quoted_n(p, h->instance, name_len);
    p = PUT_LIT(p, ":{\"longest_matched\":");
    p = put_u32(p, h->longest_tokens);
    for (uint8_t m = 0; m < keys->count; m++) {
        /* GPU, CPU and DISK always; other media only where they hold tokens. */
        uint32_t tokens = m < r->media_count ? h->medium_tokens[m] : 0;
        if (m >= 3 && tokens == 0) continue;
        p = put(p, keys->text[m], keys->len[m]);
        p = put_u32(p, tokens);
    }
    p = PUT_LIT(p, ",\"DP\":{");
    const uint32_t *counts = h->dp_tokens;
    for (uint64_t ranks = h->dp_mask; ranks != 0; ranks &= ranks - 1) {
        unsigned rank = (unsigned)__builtin_ctzll(ranks);
        if (ranks != h->dp_mask) *p++ = ',';
        *p++ = '"';
        p = put_u32(p, rank);
        p = PUT_LIT(p, "\":");
        p = put_u32(p, *counts++);
    }
    return PUT_LIT(p, "}}");
}

void cr_indexer_render_matches_json(struct cr_buf *b, const char *tenant,
                                    const struct cr_indexer_result *r) {
    assert(b != NULL && tenant != NULL && r != NULL);
    if (r->hit_count == 0) {
        cr_buf_append(b, "{}", 2);
        return;
    }
    struct media_keys keys;
    media_keys_init(&keys, r);
    /* Room for a typical answer at once (~80 bytes a hit), then a check per
     * hit against its bound, in place: a bound for the whole answer would be
     * twice its size (10 digits a number, 6 bytes a name's byte): twice the
     * fresh memory to fault in per request, for nothing. */
    size_t head = 1 + strlen(tenant) * 6 + 2 + 2;
    char *p = cr_buf_reserve(b, head + (size_t)r->hit_count * 96);
    if (p == NULL) return;
    char *end = b->data + b->cap - 1; /* the NUL's byte stays free */
    *p++ = '{';
    p = put_quoted(p, tenant);
    p = PUT_LIT(p, ":{");
    for (uint32_t i = 0; i < r->hit_count; i++) {
        const struct cr_indexer_hit *h = &r->hits[i];
        size_t name_len = strlen(h->instance), bound = hit_bound(&keys, h, name_len) + 2;
        if ((size_t)(end - p) < bound) {
            cr_buf_commit(b, p);
            if ((p = cr_buf_reserve(b, bound)) == NULL) return;
            end = b->data + b->cap - 1;
        }
        if (i > 0) *p++ = ',';
        p = put_hit(p, r, &keys, h, name_len);
    }
    p = PUT_LIT(p, "}}");
    cr_buf_commit(b, p);
}

/* ---- top_k ---- */

static uint64_t hit_key(const struct cr_indexer_result *r, uint32_t i) {
    /* Its match, then its place (the earlier wins a tie): keys are distinct. */
    return (uint64_t)r->hits[i].longest_tokens << 32 | (UINT32_MAX - i);
}

/* Restores the min-heap below slot i of heap[0..n). */
static void heap_down(uint64_t *heap, size_t n, size_t i) {
    for (;;) {
        size_t least = i, l = 2 * i + 1, rgt = l + 1;
        if (l < n && heap[l] < heap[least]) least = l;
        if (rgt < n && heap[rgt] < heap[least]) least = rgt;
        if (least == i) return;
        uint64_t t = heap[i];
        heap[i] = heap[least];
        heap[least] = t;
        i = least;
    }
}

int cr_indexer_result_keep_top(struct cr_indexer_result *r, uint32_t k) {
    assert(r != NULL);
    if (k == 0 || r->hit_count <= k) return CR_OK;
    /* The k largest keys in a min-heap (O(n log k)); its root is then the
     * smallest key kept.  Allocated only for a request that asks for top_k. */
    uint64_t *heap = malloc((size_t)k * sizeof(*heap));
    if (heap == NULL) return CR_ERR_NOMEM;
    for (uint32_t i = 0; i < k; i++) heap[i] = hit_key(r, i);
    for (size_t i = k / 2; i-- > 0;) heap_down(heap, k, i);
    for (uint32_t i = k; i < r->hit_count; i++) {
        uint64_t key = hit_key(r, i);
        if (key <= heap[0]) continue;
        heap[0] = key;
        heap_down(heap, k, 0);
    }
    uint64_t threshold = heap[0];
    free(heap);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < r->hit_count; i++)
        if (hit_key(r, i) >= threshold) r->hits[kept++] = r->hits[i]; /* kept <= i: in place */
    assert(kept == k);
    r->hit_count = kept;
    return CR_OK;
}

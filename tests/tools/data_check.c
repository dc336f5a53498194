/* data_check: drives libcrescent's data path (cr_client_put/get/get_into and
 * the batch forms) against a running crescentd with store servers, and
 * compares every byte read with what was written.  For tests/integration/
 * test_data_path.py.
 *
 * usage: data_check --rpc ENDPOINT MODE [ARGS]
 *   roundtrip N SEED MAX_BYTES [REPLICAS]   N objects of random sizes 0..MAX_BYTES
 *                                           (exactly MAX_BYTES first, 0 B second):
 *                                           put, get, get_into, compared byte for byte
 *   batch N SEED MAX_BYTES                  one batch_put of N (the first 0 B), one
 *                                           batch_get_into
 *   concurrent THREADS N SEED MAX_BYTES     THREADS threads, one client each,
 *                                           putting and reading N keys of their own
 *   put KEY BYTES SEED                      one object of BYTES from SEED
 *   verify KEY BYTES SEED                   get KEY and compare with what put wrote
 *   expect KEY STATUS                       get KEY must fail with STATUS (a name,
 *                                           e.g. CHECKSUM, LEASE_EXPIRED)
 *   corrupt KEY REPLICA                     flips one byte of replica REPLICA in its
 *                                           store server, behind the master's back
 * Keys are "dc-<mode>-<seed>-<thread>-<i>".  Exit status 0; 1 with a message
 * naming the key and the first differing byte on a mismatch or a failure. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/client.h"
#include "rdma/xfer.h"

static const char *rpc;

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* The bytes of one object: a pure function of (seed, size). */
static uint8_t *make_bytes(uint64_t seed, size_t n) {
    uint8_t *b = malloc(n > 0 ? n : 1);
    if (b == NULL) return NULL;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + n + 1;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = next(&s);
        memcpy(b + i, &v, n - i < 8 ? n - i : 8);
    }
    return b;
}

static int compare(const char *key, const uint8_t *want, size_t want_len, const uint8_t *got,
                   size_t got_len) {
    if (want_len != got_len) {
        fprintf(stderr, "data_check: %s: %zu bytes read, %zu written\n", key, got_len, want_len);
        return 1;
    }
    for (size_t i = 0; i < want_len; i++)
        if (want[i] != got[i]) {
            fprintf(stderr, "data_check: %s: byte %zu differs\n", key, i);
            return 1;
        }
    return 0;
}

static cr_client *open_client(void) {
    char error[256];
    cr_client *c;
    struct cr_client_options o = {.timeout_ms = 10000};
    if (cr_client_open(rpc, &o, &c, error, sizeof(error)) != CR_OK) {
        fprintf(stderr, "data_check: %s\n", error);
        return NULL;
    }
    return c;
}

static int failed(cr_client *c, const char *what, const char *key, int rc) {
    fprintf(stderr, "data_check: %s %s: %s (%s)\n", what, key, cr_client_last_error(c),
            cr_status_name(rc));
    return 1;
}

/* Put, get and get_into of one object of n bytes. */
static int one_roundtrip(cr_client *c, const char *key, uint64_t seed, size_t n,
                         uint64_t replicas) {
    uint8_t *want = make_bytes(seed, n);
    struct cr_replicate_config cfg = {.replica_num = replicas};
    int rc = cr_client_put(c, NULL, key, want, n, &cfg);
    if (rc != CR_OK) return free(want), failed(c, "put", key, rc);
    void *got;
    size_t len;
    rc = cr_client_get(c, NULL, key, &got, &len);
    if (rc != CR_OK) return free(want), failed(c, "get", key, rc);
    int bad = compare(key, want, n, got, len);
    memset(got, 0, len);
    size_t into_len = 0;
    /* A 0-byte buffer is nothing to register; get_into takes NULL for it. */
    if (!bad && (len == 0 || (rc = cr_client_register_buffer(c, got, len)) == CR_OK))
        rc = cr_client_get_into(c, NULL, key, len > 0 ? got : NULL, len, &into_len);
    if (len > 0 && cr_client_unregister_buffer(c, got) != CR_OK && !bad)
        bad = failed(c, "unregister_buffer", key, CR_ERR_INVALID_PARAMS);
    if (!bad && rc != CR_OK) bad = failed(c, "get_into", key, rc);
    if (!bad) bad = compare(key, want, n, got, into_len);
    if (!bad && n > 1 && cr_client_get_into(c, NULL, key, got, n - 1, &into_len) !=
                             CR_ERR_INVALID_PARAMS) {
        fprintf(stderr, "data_check: %s: get_into a short buffer was not refused\n", key);
        bad = 1;
    }
    free(want);
    free(got);
    return bad;
}

static size_t pick_size(uint64_t *s, size_t max) { return (size_t)(next(s) % (max + 1)); }

static int roundtrip(int n, uint64_t seed, size_t max, uint64_t replicas) {
    cr_client *c = open_client();
    if (c == NULL) return 1;
    uint64_t s = seed | 1;
    int bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        char key[96];
        snprintf(key, sizeof(key), "dc-roundtrip-%" PRIu64 "-0-%d", seed, i);
        size_t size = i == 0 ? max : i == 1 ? 0 : pick_size(&s, max);
        bad = one_roundtrip(c, key, seed + (uint64_t)i, size, replicas);
    }
    cr_client_close(c);
    return bad;
}

static int batch(int n, uint64_t seed, size_t max) {
    cr_client *c = open_client();
    if (c == NULL) return 1;
    struct cr_put_data *puts = calloc((size_t)n, sizeof(*puts));
    struct cr_get_buffer *gets = calloc((size_t)n, sizeof(*gets));
    char (*keys)[96] = calloc((size_t)n, sizeof(*keys));
    uint64_t s = seed | 1;
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "dc-batch-%" PRIu64 "-0-%d", seed, i);
        size_t size = i == 0 ? 0 : pick_size(&s, max);
        puts[i] = (struct cr_put_data){.key = keys[i], .data = make_bytes(seed + (uint64_t)i, size),
                                       .len = size};
        gets[i] = (struct cr_get_buffer){.key = keys[i], .buf = malloc(size), .cap = size};
    }
    int bad = 0, rc = cr_client_batch_put(c, NULL, puts, (size_t)n);
    if (rc != CR_OK) bad = failed(c, "batch_put", keys[0], rc);
    for (int i = 0; !bad && i < n; i++)
        if (puts[i].status != CR_OK) bad = failed(c, "batch_put item", keys[i], puts[i].status);
    if (!bad && (rc = cr_client_batch_get_into(c, NULL, gets, (size_t)n)) != CR_OK)
        bad = failed(c, "batch_get_into", keys[0], rc);
    for (int i = 0; !bad && i < n; i++) {
        if (gets[i].status != CR_OK) bad = failed(c, "batch_get item", keys[i], gets[i].status);
        else bad = compare(keys[i], puts[i].data, puts[i].len, gets[i].buf, gets[i].len);
    }
    for (int i = 0; i < n; i++) free((void *)puts[i].data), free(gets[i].buf);
    free(puts), free(gets), free(keys);
    cr_client_close(c);
    return bad;
}

struct worker {
    pthread_t thread;
    int index, n;
    uint64_t seed;
    size_t max;
    int bad;
};

static void *work(void *arg) {
    struct worker *w = arg;
    cr_client *c = open_client();
    if (c == NULL) {
        w->bad = 1;
        return NULL;
    }
    uint64_t s = (w->seed + (uint64_t)w->index * 7919) | 1;
    for (int i = 0; i < w->n && !w->bad; i++) {
        char key[96];
        snprintf(key, sizeof(key), "dc-concurrent-%" PRIu64 "-%d-%d", w->seed, w->index, i);
        w->bad = one_roundtrip(c, key, s, pick_size(&s, w->max), 1);
    }
    cr_client_close(c);
    return NULL;
}

static int concurrent(int threads, int n, uint64_t seed, size_t max) {
    struct worker w[64];
    if (threads < 1 || threads > 64) return 1;
    for (int t = 0; t < threads; t++) {
        w[t] = (struct worker){.index = t, .n = n, .seed = seed, .max = max};
        pthread_create(&w[t].thread, NULL, work, &w[t]);
    }
    int bad = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(w[t].thread, NULL);
        bad |= w[t].bad;
    }
    return bad;
}

static int put_or_verify(bool verify, const char *key, size_t n, uint64_t seed) {
    cr_client *c = open_client();
    if (c == NULL) return 1;
    uint8_t *want = make_bytes(seed, n);
    int bad, rc;
    if (!verify) {
        rc = cr_client_put(c, NULL, key, want, n, NULL);
        bad = rc == CR_OK ? 0 : failed(c, "put", key, rc);
    } else {
        void *got = NULL;
        size_t len = 0;
        rc = cr_client_get(c, NULL, key, &got, &len);
        bad = rc == CR_OK ? compare(key, want, n, got, len) : failed(c, "get", key, rc);
        free(got);
    }
    free(want);
    cr_client_close(c);
    return bad;
}

static int expect(const char *key, const char *status) {
    cr_client *c = open_client();
    if (c == NULL) return 1;
    void *got = NULL;
    size_t len = 0;
    int rc = cr_client_get(c, NULL, key, &got, &len);
    free(got);
    int bad = strcmp(cr_status_name(rc), status) != 0;
    if (bad) fprintf(stderr, "data_check: get %s gave %s, not %s\n", key, cr_status_name(rc), status);
    else printf("%s\n", cr_client_last_error(c));
    cr_client_close(c);
    return bad;
}

/* Reads one byte of the replica through the transfer layer, writes it back flipped. */
static int corrupt(const char *key, size_t replica) {
    cr_client *c = open_client();
    struct cr_xfer_client *x = NULL;
    if (c == NULL || cr_xfer_client_create(NULL, &x) != CR_OK) return 1;
    struct cr_replica_list list;
    int rc = cr_client_get_replica_list(c, NULL, key, &list);
    int bad = rc != CR_OK || replica >= list.count;
    if (!bad) {
        const struct cr_buf_handle *h = &list.replicas[replica].handles[0];
        uint8_t b;
        bad = cr_xfer_read(x, h->transport_endpoint, h->segment_name, h->buffer, &b, 1) != CR_OK;
        b ^= 0xFF;
        bad = bad || cr_xfer_write(x, h->transport_endpoint, h->segment_name, h->buffer, &b, 1) != CR_OK;
        cr_client_replica_list_free(&list);
    }
    if (bad) fprintf(stderr, "data_check: cannot corrupt %s replica %zu\n", key, replica);
    cr_xfer_client_destroy(x);
    cr_client_close(c);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[1], "--rpc") != 0) {
        fprintf(stderr, "usage: data_check --rpc ENDPOINT MODE ARGS (see the source)\n");
        return 2;
    }
    rpc = argv[2];
    const char *mode = argv[3];
    char **a = argv + 4;
    int n = argc - 4;
    int bad;
    if (strcmp(mode, "roundtrip") == 0 && (n == 3 || n == 4))
        bad = roundtrip(atoi(a[0]), strtoull(a[1], NULL, 0), strtoull(a[2], NULL, 0),
                        n == 4 ? strtoull(a[3], NULL, 0) : 1);
    else if (strcmp(mode, "batch") == 0 && n == 3)
        bad = batch(atoi(a[0]), strtoull(a[1], NULL, 0), strtoull(a[2], NULL, 0));
    else if (strcmp(mode, "concurrent") == 0 && n == 4)
        bad = concurrent(atoi(a[0]), atoi(a[1]), strtoull(a[2], NULL, 0),
                         strtoull(a[3], NULL, 0));
    else if ((strcmp(mode, "put") == 0 || strcmp(mode, "verify") == 0) && n == 3)
        bad = put_or_verify(mode[0] == 'v', a[0], strtoull(a[1], NULL, 0),
                            strtoull(a[2], NULL, 0));
    else if (strcmp(mode, "expect") == 0 && n == 2)
        return expect(a[0], a[1]);
    else if (strcmp(mode, "corrupt") == 0 && n == 2)
        bad = corrupt(a[0], strtoull(a[1], NULL, 0));
    else {
        fprintf(stderr, "data_check: unknown mode or wrong arguments: %s\n", mode);
        return 2;
    }
    if (!bad) printf("ok\n");
    return bad;
}

/* libFuzzer target for the seed-000 payload → JSON decoder
 * (src/msgs/store_event_json.c), which `crescentctl events --follow` runs on
 * payloads read from the network.
 *
 * The whole input is the payload.  Invariants checked besides "no crash":
 *  - a refused payload returns CR_ERR_PROTOCOL, leaves *events_out untouched
 *    and writes a non-empty NUL-terminated reason; the same verdict comes
 *    without an error buffer, and from cr_store_event_json_write_lines, which
 *    then writes nothing;
 *  - an accepted payload gives an array of at most len event objects, each
 *    with exactly the fields store_event_json.h lists for its type, seq equal
 *    to the batch's, the same ts for all, replica types among the known
 *    names, block_size and token ids within u32, and strings jansson can
 *    serialize (valid UTF-8); write_lines prints exactly one line per event.
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
#include "msgs/store_event.h"
#include "msgs/store_event_json.h"

static void check_u32(json_t *v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > (json_int_t)UINT32_MAX)
        abort();
}

static void check_string(json_t *v) {
    if (!json_is_string(v)) abort();
}

static void check_replicas(json_t *replicas) {
    if (!json_is_array(replicas)) abort();
    size_t i;
    json_t *r;
    json_array_foreach(replicas, i, r) {
        const char *type = json_string_value(json_object_get(r, "type"));
        if (!json_is_object(r) || json_object_size(r) != 2 || type == NULL) abort();
        if (strcmp(type, "memory") != 0 && strcmp(type, "disk") != 0 &&
            strcmp(type, "local_disk") != 0)
            abort();
        check_string(json_object_get(r, "location"));
    }
}

static void check_event(json_t *e, uint64_t seq, double ts) {
    if (!json_is_object(e)) abort();
    json_t *s = json_object_get(e, "seq"), *t = json_object_get(e, "ts");
    const char *type = json_string_value(json_object_get(e, "type"));
    if (!json_is_integer(s) || (uint64_t)json_integer_value(s) != seq) abort();
    if (!json_is_real(t) || memcmp(&(double){json_real_value(t)}, &ts, sizeof(ts)) != 0) abort();
    if (type == NULL) abort();
    if (strcmp(type, "RemoveAllEvent") == 0) {
        if (json_object_size(e) != 3) abort();
        return;
    }
    bool store = strcmp(type, "BlockStoreEvent") == 0;
    if (!store && strcmp(type, "BlockUpdateEvent") != 0) abort();
    if (json_object_size(e) != (store ? 10u : 5u)) abort();
    check_string(json_object_get(e, "key"));
    check_replicas(json_object_get(e, "replicas"));
    if (!store) return;
    check_string(json_object_get(e, "model_name"));
    check_u32(json_object_get(e, "block_size"));
    check_string(json_object_get(e, "block_hash"));
    check_string(json_object_get(e, "parent_block_hash"));
    json_t *tokens = json_object_get(e, "token_ids"), *tok;
    size_t i;
    if (!json_is_array(tokens)) abort();
    json_array_foreach(tokens, i, tok) check_u32(tok);
}

static void check_accepted(json_t *events, size_t len, uint64_t seq) {
    if (!json_is_array(events) || json_array_size(events) > len) abort();
    json_t *first = json_array_get(events, 0);
    double ts = first != NULL ? json_real_value(json_object_get(first, "ts")) : 0;
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) check_event(e, seq, ts);
    char *text = json_dumps(events, JSON_COMPACT); /* fails on invalid UTF-8 */
    if (text == NULL) abort();
    free(text);
}

/* write_lines agrees with decode: `lines` lines on success, nothing on error. */
static void check_write_lines(const uint8_t *data, size_t size, uint64_t seq, int rc,
                              size_t lines) {
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    if (out == NULL) abort();
    char error[128] = "";
    int wrc = cr_store_event_json_write_lines(data, size, seq, out, error, sizeof(error));
    fclose(out);
    if (wrc != rc) abort();
    size_t newlines = 0;
    for (size_t i = 0; i < text_len; i++) newlines += text[i] == '\n';
    if (rc == CR_OK ? newlines != lines : (text_len != 0 || error[0] == '\0')) abort();
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t seq = (uint64_t)size * 0x9e3779b9u; /* any value ≤ INT64_MAX */
    json_t *sentinel = json_null(), *events = sentinel;
    char error[128];
    memset(error, 'x', sizeof(error));
    int rc = cr_store_event_json_decode(data, size, seq, &events, error, sizeof(error));
    json_t *quiet = NULL;
    int qrc = cr_store_event_json_decode(data, size, seq, &quiet, NULL, 0);
    if (qrc != rc) abort();
    json_decref(quiet);
    size_t lines = 0;
    if (rc == CR_OK) {
        if (events == sentinel) abort();
        check_accepted(events, size, seq);
        lines = json_array_size(events);
        json_decref(events);
    } else {
        if (rc != CR_ERR_PROTOCOL || events != sentinel) abort();
        if (error[0] == '\0' || strnlen(error, sizeof(error)) >= sizeof(error)) abort();
    }
    check_write_lines(data, size, seq, rc, lines);
    return 0;
}

/* ---- seed corpus: the payloads of tests/unit/test_store_event.c, written
 * when CR_FUZZ_SEEDS is set ---- */

static void write_seed(const char *dir, unsigned n, const void *bytes, size_t len) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/seed-%03u", dir, n);
    FILE *f = fopen(path, "wb");
    if (f == NULL) return;
    fwrite(bytes, 1, len, f);
    fclose(f);
}

static void write_batch(const char *dir, unsigned n, cr_store_event **events, size_t count) {
    cr_event_encoder_config config = {0};
    cr_event_encoder *encoder = NULL;
    cr_event_batch *batch = NULL;
    if (cr_event_encoder_create(&config, &encoder) != CR_OK) abort();
    for (size_t i = 0; i < count; i++) {
        if (cr_event_encoder_append(encoder, events[i]) != CR_OK) abort();
        cr_store_event_free(events[i]);
    }
    if (cr_event_encoder_finish(encoder, 7, 1.5, &batch) != CR_OK) abort();
    write_seed(dir, n, batch->bytes, batch->len);
    cr_event_batch_unref(batch);
    cr_event_encoder_destroy(encoder);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("CR_FUZZ_SEEDS");
    if (dir == NULL) return 0;
    mkdir(dir, 0755);
    cr_store_replica replicas[] = {{CR_REPLICA_MEMORY, cr_event_str_c("tcp://h:1")},
                                   {CR_REPLICA_DISK, cr_event_str_c("/mnt/kv/0")},
                                   {CR_REPLICA_LOCAL_DISK, cr_event_str_c("nvme0")}};
    const uint32_t tokens[] = {1, 70000, UINT32_MAX, 0};
    cr_store_event_info info = {.model_name = cr_event_str_c("llama"), .block_size = 512,
                                .block_hash = cr_event_str_c("0xa"),
                                .parent_block_hash = cr_event_str_c("0xb"),
                                .token_ids = tokens, .token_count = 4};
    cr_store_event *ev[3];
    if (cr_store_event_new_block_store(cr_event_str_c("k1"), replicas, 3, &info, &ev[0]) != CR_OK ||
        cr_store_event_new_block_update(cr_event_str_c("k2"), replicas, 1, &ev[1]) != CR_OK ||
        cr_store_event_new_remove_all(&ev[2]) != CR_OK)
        abort();
    write_batch(dir, 0, ev, 3);
    if (cr_store_event_new_block_store(cr_event_str_c("k"), NULL, 0, NULL, &ev[0]) != CR_OK)
        abort();
    write_batch(dir, 1, ev, 1);
    /* The wider forms a peer may choose (test_json_accepts_wider_forms). */
    static const uint8_t wide[] = {
        0x92, 0xca, 0x3f, 0xc0, 0x00, 0x00, 0xdc, 0x00, 0x01, 0x98, 0xaf, 'B', 'l', 'o', 'c',
        'k', 'S', 't', 'o', 'r', 'e', 'E', 'v', 'e', 'n', 't', 0xd9, 0x01, 'k', 0x90, 0xa0,
        0xcf, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0xa0, 0xa0, 0x92, 0xd2, 0, 0, 0, 5, 0xd0, 0x07,
    };
    write_seed(dir, 2, wide, sizeof(wide));
    return 0;
}

/* Tests for src/msgs/store_event (events, encoder, batches) and
 * src/msgs/store_event_json (the payload → JSON decoder).
 *
 * The expected byte vectors were worked out by hand from the msgpack spec;
 * each byte group carries a comment naming its msgpack form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crescent/error.h"
#include "msgs/store_event.h"
#include "msgs/store_event_json.h"

/* ---- helpers ------------------------------------------------------------ */

static void assert_bytes_equal(const uint8_t *actual, size_t actual_len,
                               const uint8_t *expected, size_t expected_len) {
    for (size_t i = 0; i < actual_len && i < expected_len; i++) {
        if (actual[i] != expected[i]) {
            fail_msg("byte %zu: got 0x%02x, expected 0x%02x", i, actual[i], expected[i]);
        }
    }
    assert_int_equal(actual_len, expected_len);
}

static cr_event_encoder *encoder_new(uint32_t max_events, size_t capacity) {
    cr_event_encoder_config config = {.max_events = max_events,
                                      .initial_capacity_bytes = capacity};
    cr_event_encoder *encoder = NULL;
    assert_int_equal(cr_event_encoder_create(&config, &encoder), CR_OK);
    assert_non_null(encoder);
    return encoder;
}

/* Encodes a batch of `count` events (seq 0, ts 1.5), borrowed. */
static cr_event_batch *encode_events(const cr_store_event *const *events, size_t count) {
    cr_event_encoder *encoder = encoder_new(0, 0);
    for (size_t i = 0; i < count; i++)
        assert_int_equal(cr_event_encoder_append(encoder, events[i]), CR_OK);
    cr_event_batch *batch = NULL;
    assert_int_equal(cr_event_encoder_finish(encoder, 0, 1.5, &batch), CR_OK);
    cr_event_encoder_destroy(encoder);
    return batch;
}

/* Encodes `event` alone into a batch (seq 0, ts 1.5) and frees the event. */
static cr_event_batch *encode_one(cr_store_event *event) {
    const cr_store_event *events[] = {event};
    cr_event_batch *batch = encode_events(events, 1);
    cr_store_event_free(event);
    return batch;
}

static cr_store_event *update_event(cr_event_str key) {
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_block_update(key, NULL, 0, &event), CR_OK);
    return event;
}

static char *repeated(char c, size_t len) {
    char *text = malloc(len + 1);
    assert_non_null(text);
    memset(text, c, len);
    text[len] = '\0';
    return text;
}

/* Batch prefix shared by every single-event batch at ts 1.5. */
#define BATCH_HEADER_TS_1_5                                                          \
    0x92,                                           /* fixarray(2): [ts, events] */ \
        0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0,         /* float64 1.5 */               \
        0x91                                        /* fixarray(1): events */

/* ---- byte vectors per event kind ----------------------------------------- */

static void test_remove_all_bytes(void **state) {
    (void)state;
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_remove_all(&event), CR_OK);
    cr_event_batch *batch = encode_one(event);
    static const uint8_t expected[] = {
        BATCH_HEADER_TS_1_5,
        0x91,                                       /* fixarray(1): the event */
        0xae, 'R', 'e', 'm', 'o', 'v', 'e', 'A', 'l', 'l', 'E', 'v', 'e', 'n', 't',
        /* fixstr(14) "RemoveAllEvent" */
    };
    assert_bytes_equal(batch->bytes, batch->len, expected, sizeof(expected));
    assert_int_equal(batch->event_count, 1);
    assert_int_equal(batch->event_count_by_kind[CR_STORE_EVENT_REMOVE_ALL], 1);
    assert_int_equal(batch->event_count_by_kind[CR_STORE_EVENT_BLOCK_STORE], 0);
    cr_event_batch_unref(batch);
}

static void test_block_update_bytes(void **state) {
    (void)state;
    cr_store_replica replica = {CR_REPLICA_MEMORY, cr_event_str_c("tcp://h:1")};
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_block_update(cr_event_str_c("k1"), &replica, 1, &event),
                     CR_OK);
    cr_event_batch *batch = encode_one(event);
    static const uint8_t expected[] = {
        BATCH_HEADER_TS_1_5,
        0x93,                                       /* fixarray(3): the event */
        0xb0, 'B', 'l', 'o', 'c', 'k', 'U', 'p', 'd', 'a', 't', 'e', 'E', 'v', 'e', 'n', 't',
        /* fixstr(16) "BlockUpdateEvent" */
        0xa2, 'k', '1',                             /* fixstr(2) key */
        0x91,                                       /* fixarray(1): replicas */
        0x92,                                       /* fixarray(2): [type, location] */
        0xa6, 'm', 'e', 'm', 'o', 'r', 'y',         /* fixstr(6) "memory" */
        0xa9, 't', 'c', 'p', ':', '/', '/', 'h', ':', '1', /* fixstr(9) location */
    };
    assert_bytes_equal(batch->bytes, batch->len, expected, sizeof(expected));
    assert_int_equal(batch->event_count_by_kind[CR_STORE_EVENT_BLOCK_UPDATE], 1);
    cr_event_batch_unref(batch);
}

static void test_block_store_bytes(void **state) {
    (void)state;
    cr_store_replica replicas[] = {
        {CR_REPLICA_MEMORY, cr_event_str_c("tcp://10.0.0.1:6000")},
        {CR_REPLICA_DISK, cr_event_str_c("/d/b.bin")},
        {CR_REPLICA_LOCAL_DISK, cr_event_str_c("tcp://x:7")},
    };
    const uint32_t tokens[] = {1, 127, 128, 200, 256, 70000};
    cr_store_event_info info = {
        .model_name = cr_event_str_c("llama2-7b"),
        .block_size = 512,
        .block_hash = cr_event_str_c("0x41234125"),
        .parent_block_hash = cr_event_str_c("0x51512342"),
        .token_ids = tokens,
        .token_count = 6,
    };
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c("key_12345"), replicas, 3,
                                                    &info, &event),
                     CR_OK);
    cr_event_batch *batch = encode_one(event);
    static const uint8_t expected[] = {
        BATCH_HEADER_TS_1_5,
        0x98,                                       /* fixarray(8): the event */
        0xaf, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'E', 'v', 'e', 'n', 't',
        /* fixstr(15) "BlockStoreEvent" */
        0xa9, 'k', 'e', 'y', '_', '1', '2', '3', '4', '5', /* fixstr(9) key */
        0x93,                                       /* fixarray(3): replicas */
        0x92, 0xa6, 'm', 'e', 'm', 'o', 'r', 'y',   /* [fixstr(6) "memory", */
        0xb3, 't', 'c', 'p', ':', '/', '/', '1', '0', '.', '0', '.', '0', '.', '1', ':',
        '6', '0', '0', '0',                         /*  fixstr(19) location] */
        0x92, 0xa4, 'd', 'i', 's', 'k',             /* [fixstr(4) "disk", */
        0xa8, '/', 'd', '/', 'b', '.', 'b', 'i', 'n', /*  fixstr(8) path] */
        0x92, 0xaa, 'l', 'o', 'c', 'a', 'l', '_', 'd', 'i', 's', 'k', /* [fixstr(10), */
        0xa9, 't', 'c', 'p', ':', '/', '/', 'x', ':', '7', /*  fixstr(9)] */
        0xa9, 'l', 'l', 'a', 'm', 'a', '2', '-', '7', 'b', /* fixstr(9) model_name */
        0xcd, 0x02, 0x00,                           /* uint16 512 block_size */
        0xaa, '0', 'x', '4', '1', '2', '3', '4', '1', '2', '5', /* fixstr(10) hash */
        0xaa, '0', 'x', '5', '1', '5', '1', '2', '3', '4', '2', /* fixstr(10) parent */
        0x96,                                       /* fixarray(6): token_ids */
        0x01, 0x7f,                                 /* positive fixint 1, 127 */
        0xcc, 0x80, 0xcc, 0xc8,                     /* uint8 128, 200 */
        0xcd, 0x01, 0x00,                           /* uint16 256 */
        0xce, 0x00, 0x01, 0x11, 0x70,               /* uint32 70000 */
    };
    assert_bytes_equal(batch->bytes, batch->len, expected, sizeof(expected));
    assert_int_equal(batch->event_count_by_kind[CR_STORE_EVENT_BLOCK_STORE], 1);
    cr_event_batch_unref(batch);
}

static void test_block_store_defaults(void **state) {
    (void)state;
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c("k"), NULL, 0, NULL, &event),
                     CR_OK);
    assert_int_equal(event->info.block_size, 0);
    assert_int_equal(event->info.token_count, 0);
    assert_string_equal(event->info.model_name.ptr, "");
    cr_event_batch *batch = encode_one(event);
    static const uint8_t expected[] = {
        BATCH_HEADER_TS_1_5,
        0x98,                                       /* fixarray(8) */
        0xaf, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'E', 'v', 'e', 'n', 't',
        0xa1, 'k',                                  /* fixstr(1) key */
        0x90,                                       /* fixarray(0): no replicas */
        0xa0,                                       /* fixstr(0): model_name "" */
        0x00,                                       /* positive fixint 0: block_size */
        0xa0, 0xa0,                                 /* "" block_hash, "" parent */
        0x90,                                       /* fixarray(0): token_ids [] */
    };
    assert_bytes_equal(batch->bytes, batch->len, expected, sizeof(expected));
    cr_event_batch_unref(batch);
}

static void test_u32_extremes(void **state) {
    (void)state;
    const uint32_t tokens[] = {0, 255, 65535, 65536, UINT32_MAX};
    cr_store_event_info info = {.block_size = UINT32_MAX, .token_ids = tokens, .token_count = 5};
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c(""), NULL, 0, &info, &event),
                     CR_OK);
    cr_event_batch *batch = encode_one(event);
    static const uint8_t tail[] = {
        0xa0,                                       /* model_name "" */
        0xce, 0xff, 0xff, 0xff, 0xff,               /* uint32 block_size 2^32-1 */
        0xa0, 0xa0,                                 /* hashes "" */
        0x95,                                       /* fixarray(5) */
        0x00,                                       /* fixint 0 */
        0xcc, 0xff,                                 /* uint8 255 */
        0xcd, 0xff, 0xff,                           /* uint16 65535 */
        0xce, 0x00, 0x01, 0x00, 0x00,               /* uint32 65536 */
        0xce, 0xff, 0xff, 0xff, 0xff,               /* uint32 2^32-1 */
    };
    assert_true(batch->len > sizeof(tail));
    assert_bytes_equal(batch->bytes + batch->len - sizeof(tail), sizeof(tail), tail,
                       sizeof(tail));
    cr_event_batch_unref(batch);
}

/* ---- string and array length boundaries --------------------------------- */

/* Offset of the key header in a lone BlockUpdateEvent batch:
 * 1 (batch array) + 9 (float64) + 1 (events array) + 1 (event array)
 * + 17 (fixstr(16) "BlockUpdateEvent"). */
#define UPDATE_KEY_OFFSET 29u

static void check_key_header(size_t key_len, const uint8_t *header, size_t header_len) {
    char *key = repeated('x', key_len);
    cr_event_batch *batch = encode_one(update_event((cr_event_str){key, key_len}));
    assert_int_equal(batch->len, UPDATE_KEY_OFFSET + header_len + key_len + 1);
    assert_bytes_equal(batch->bytes + UPDATE_KEY_OFFSET, header_len, header, header_len);
    assert_memory_equal(batch->bytes + UPDATE_KEY_OFFSET + header_len, key, key_len);
    assert_int_equal(batch->bytes[batch->len - 1], 0x90); /* empty replica list */
    cr_event_batch_unref(batch);
    free(key);
}

static void test_string_boundaries(void **state) {
    (void)state;
    check_key_header(0, (const uint8_t[]){0xa0}, 1);              /* fixstr(0) */
    check_key_header(31, (const uint8_t[]){0xbf}, 1);             /* fixstr(31) */
    check_key_header(32, (const uint8_t[]){0xd9, 0x20}, 2);       /* str8 32 */
    check_key_header(255, (const uint8_t[]){0xd9, 0xff}, 2);      /* str8 255 */
    check_key_header(256, (const uint8_t[]){0xda, 0x01, 0x00}, 3); /* str16 256 */
    check_key_header(65535, (const uint8_t[]){0xda, 0xff, 0xff}, 3); /* str16 max */
    check_key_header(65536, (const uint8_t[]){0xdb, 0x00, 0x01, 0x00, 0x00}, 5); /* str32 */
}

/* Token-list header offset for a BlockStoreEvent with key "" and unset info:
 * 12 (batch header + event array) + 16 (type) + 1 (key) + 1 (replicas)
 * + 1 (model) + 1 (block_size) + 2 (hashes). */
#define STORE_TOKENS_OFFSET 34u

static void check_token_header(size_t count, const uint8_t *header, size_t header_len) {
    uint32_t *tokens = calloc(count + 1, sizeof(uint32_t));
    assert_non_null(tokens);
    for (size_t i = 0; i < count; i++) tokens[i] = (uint32_t)(i & 0x7f); /* 1-byte fixints */
    cr_store_event_info info = {.token_ids = tokens, .token_count = count};
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c(""), NULL, 0, &info, &event),
                     CR_OK);
    cr_event_batch *batch = encode_one(event);
    assert_int_equal(batch->len, STORE_TOKENS_OFFSET + header_len + count);
    assert_bytes_equal(batch->bytes + STORE_TOKENS_OFFSET, header_len, header, header_len);
    if (count > 0) assert_int_equal(batch->bytes[batch->len - 1], (count - 1) & 0x7f);
    cr_event_batch_unref(batch);
    free(tokens);
}

static void test_token_list_boundaries(void **state) {
    (void)state;
    check_token_header(0, (const uint8_t[]){0x90}, 1);               /* fixarray(0) */
    check_token_header(15, (const uint8_t[]){0x9f}, 1);              /* fixarray(15) */
    check_token_header(16, (const uint8_t[]){0xdc, 0x00, 0x10}, 3);  /* array16 16 */
    check_token_header(65535, (const uint8_t[]){0xdc, 0xff, 0xff}, 3); /* array16 max */
    check_token_header(65536, (const uint8_t[]){0xdd, 0x00, 0x01, 0x00, 0x00}, 5); /* array32 */
}

/* ---- batching ------------------------------------------------------------ */

static void test_default_cap_is_50(void **state) {
    (void)state;
    cr_event_encoder *encoder = encoder_new(0, 0);
    assert_int_equal(cr_event_encoder_max_events(encoder), 50);
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_remove_all(&event), CR_OK);
    for (int i = 0; i < 50; i++) {
        assert_false(cr_event_encoder_is_full(encoder));
        assert_int_equal(cr_event_encoder_append(encoder, event), CR_OK);
    }
    assert_true(cr_event_encoder_is_full(encoder));
    assert_int_equal(cr_event_encoder_append(encoder, event), CR_ERR_AGAIN);
    assert_int_equal(cr_event_encoder_event_count(encoder), 50);
    cr_event_batch *batch = NULL;
    assert_int_equal(cr_event_encoder_finish(encoder, 9, 1.5, &batch), CR_OK);
    /* 92, cb + 8 bytes, then array16 50 (dc 00 32): 50 > 15 needs array16. */
    assert_int_equal(batch->bytes[10], 0xdc);
    assert_int_equal(batch->bytes[11], 0x00);
    assert_int_equal(batch->bytes[12], 0x32);
    assert_int_equal(batch->len, 13 + 50 * 16); /* each event 91 + fixstr(14) */
    assert_int_equal(batch->seq, 9);
    assert_int_equal(batch->event_count, 50);
    assert_int_equal(batch->event_count_by_kind[CR_STORE_EVENT_REMOVE_ALL], 50);
    /* The encoder starts over: not full, and a new batch holds only new events. */
    assert_false(cr_event_encoder_is_full(encoder));
    assert_int_equal(cr_event_encoder_append(encoder, event), CR_OK);
    cr_event_batch *second = NULL;
    assert_int_equal(cr_event_encoder_finish(encoder, 10, 1.5, &second), CR_OK);
    assert_int_equal(second->len, 11 + 16);
    assert_int_equal(second->bytes[10], 0x91);
    cr_event_batch_unref(second);
    cr_event_batch_unref(batch);
    cr_store_event_free(event);
    cr_event_encoder_destroy(encoder);
}

static void test_configured_cap_and_array_forms(void **state) {
    (void)state;
    cr_event_encoder *encoder = encoder_new(16, 0);
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_remove_all(&event), CR_OK);
    for (int i = 0; i < 15; i++) assert_int_equal(cr_event_encoder_append(encoder, event), CR_OK);
    cr_event_batch *batch = NULL;
    assert_int_equal(cr_event_encoder_finish(encoder, 0, 1.5, &batch), CR_OK);
    assert_int_equal(batch->bytes[10], 0x9f); /* fixarray(15) */
    cr_event_batch_unref(batch);
    for (int i = 0; i < 16; i++) assert_int_equal(cr_event_encoder_append(encoder, event), CR_OK);
    assert_int_equal(cr_event_encoder_append(encoder, event), CR_ERR_AGAIN);
    assert_int_equal(cr_event_encoder_finish(encoder, 1, 1.5, &batch), CR_OK);
    assert_int_equal(batch->bytes[10], 0xdc); /* array16 16 */
    assert_int_equal(batch->bytes[12], 0x10);
    cr_event_batch_unref(batch);
    cr_store_event_free(event);
    cr_event_encoder_destroy(encoder);
}

static void test_finish_empty_and_reset(void **state) {
    (void)state;
    cr_event_encoder *encoder = encoder_new(0, 0);
    cr_event_batch *batch = NULL;
    assert_int_equal(cr_event_encoder_finish(encoder, 0, 1.0, &batch), CR_ERR_INVALID_PARAMS);
    assert_null(batch);
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_remove_all(&event), CR_OK);
    assert_int_equal(cr_event_encoder_append(encoder, event), CR_OK);
    cr_event_encoder_reset(encoder);
    assert_int_equal(cr_event_encoder_event_count(encoder), 0);
    assert_int_equal(cr_event_encoder_finish(encoder, 0, 1.0, &batch), CR_ERR_INVALID_PARAMS);
    cr_store_event_free(event);
    cr_event_encoder_destroy(encoder);
    cr_event_encoder_config config = {.max_events = (1u << 24) + 1};
    assert_int_equal(cr_event_encoder_create(&config, &encoder), CR_ERR_INVALID_PARAMS);
}

/* A tiny initial buffer must grow mid-batch and still produce the same bytes. */
static void test_buffer_growth_matches(void **state) {
    (void)state;
    char *location = repeated('L', 300);
    cr_store_replica replica = {CR_REPLICA_DISK, cr_event_str_c(location)};
    uint32_t tokens[40];
    for (uint32_t i = 0; i < 40; i++) tokens[i] = i * 1000;
    cr_store_event_info info = {.model_name = cr_event_str_c("m"), .block_size = 16,
                                .token_ids = tokens, .token_count = 40};
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c("key"), &replica, 1, &info,
                                                    &event),
                     CR_OK);
    cr_event_encoder *small = encoder_new(0, 8);
    cr_event_encoder *large = encoder_new(0, 1 << 20);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(cr_event_encoder_append(small, event), CR_OK);
        assert_int_equal(cr_event_encoder_append(large, event), CR_OK);
    }
    cr_event_batch *a = NULL, *b = NULL;
    assert_int_equal(cr_event_encoder_finish(small, 3, 1700000000.25, &a), CR_OK);
    assert_int_equal(cr_event_encoder_finish(large, 3, 1700000000.25, &b), CR_OK);
    assert_bytes_equal(a->bytes, a->len, b->bytes, b->len);
    cr_event_batch_unref(a);
    cr_event_batch_unref(b);
    cr_event_encoder_destroy(small);
    cr_event_encoder_destroy(large);
    cr_store_event_free(event);
    free(location);
}

/* ---- event objects -------------------------------------------------------- */

static void test_event_is_one_deep_copy(void **state) {
    (void)state;
    char key[] = "key-1";
    char location[] = "tcp://a:1";
    uint32_t tokens[] = {5, 6, 7};
    cr_store_replica replica = {CR_REPLICA_LOCAL_DISK, cr_event_str_c(location)};
    cr_store_event_info info = {.model_name = cr_event_str_c("m"), .block_size = 3,
                                .token_ids = tokens, .token_count = 3};
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c(key), &replica, 1, &info,
                                                    &event),
                     CR_OK);
    key[0] = 'X';
    location[0] = 'X';
    tokens[0] = 99;
    const uint8_t *begin = (const uint8_t *)event;
    const uint8_t *end = begin + event->size_bytes;
    assert_string_equal(event->key.ptr, "key-1");
    assert_int_equal(event->key.len, 5);
    assert_string_equal(event->replicas[0].location.ptr, "tcp://a:1");
    assert_int_equal(event->replicas[0].type, CR_REPLICA_LOCAL_DISK);
    assert_int_equal(event->info.token_ids[0], 5);
    assert_int_equal(event->info.block_size, 3);
    const void *inner[] = {event->key.ptr, event->replicas, event->replicas[0].location.ptr,
                           event->info.token_ids, event->info.model_name.ptr,
                           event->info.block_hash.ptr, event->info.parent_block_hash.ptr};
    for (size_t i = 0; i < sizeof(inner) / sizeof(inner[0]); i++) {
        assert_true((const uint8_t *)inner[i] > begin && (const uint8_t *)inner[i] < end);
    }
    cr_store_event_free(event);
}

static void test_event_invalid_params(void **state) {
    (void)state;
    cr_store_event *event = NULL;
    cr_event_str bad = {NULL, 3};
    assert_int_equal(cr_store_event_new_block_update(bad, NULL, 0, &event),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_event_new_block_update(cr_event_str_c("k"), NULL, 2, &event),
                     CR_ERR_INVALID_PARAMS);
    cr_store_replica replica = {(cr_replica_type)7, cr_event_str_c("x")};
    assert_int_equal(cr_store_event_new_block_update(cr_event_str_c("k"), &replica, 1, &event),
                     CR_ERR_INVALID_PARAMS);
    cr_store_replica null_location = {CR_REPLICA_DISK, {NULL, 1}};
    assert_int_equal(
        cr_store_event_new_block_update(cr_event_str_c("k"), &null_location, 1, &event),
        CR_ERR_INVALID_PARAMS);
    cr_store_event_info info = {.token_ids = NULL, .token_count = 4};
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c("k"), NULL, 0, &info, &event),
                     CR_ERR_INVALID_PARAMS);
    cr_store_event_info bad_hash = {.block_hash = {NULL, 2}};
    assert_int_equal(
        cr_store_event_new_block_store(cr_event_str_c("k"), NULL, 0, &bad_hash, &event),
        CR_ERR_INVALID_PARAMS);
    assert_null(event);
    cr_store_event_free(NULL); /* ignored */
}

static void test_names_and_parse(void **state) {
    (void)state;
    assert_string_equal(cr_store_event_kind_name(CR_STORE_EVENT_BLOCK_STORE), "BlockStoreEvent");
    assert_string_equal(cr_replica_type_name(CR_REPLICA_LOCAL_DISK), "local_disk");
    cr_replica_type type = CR_REPLICA_MEMORY;
    assert_int_equal(cr_replica_type_parse("disk", 4, &type), CR_OK);
    assert_int_equal(type, CR_REPLICA_DISK);
    assert_int_equal(cr_replica_type_parse("local_disk", 10, &type), CR_OK);
    assert_int_equal(type, CR_REPLICA_LOCAL_DISK);
    assert_int_equal(cr_replica_type_parse("dis", 3, &type), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_replica_type_parse("memory2", 7, &type), CR_ERR_INVALID_PARAMS);
    assert_int_equal(type, CR_REPLICA_LOCAL_DISK); /* unchanged on error */
}

/* ---- batches and reference counts ------------------------------------------ */

static void test_batch_refcount(void **state) {
    (void)state;
    const uint8_t bytes[] = {1, 2, 3};
    cr_event_batch *batch = NULL;
    assert_int_equal(cr_event_batch_create(42, bytes, 3, &batch), CR_OK);
    assert_int_equal(atomic_load(&batch->refcount), 1);
    assert_int_equal(batch->seq, 42);
    assert_int_equal(batch->len, 3);
    assert_memory_equal(batch->bytes, bytes, 3);
    assert_ptr_equal(cr_event_batch_ref(batch), batch);
    assert_ptr_equal(cr_event_batch_ref(batch), batch);
    assert_int_equal(atomic_load(&batch->refcount), 3);
    cr_event_batch_unref(batch);
    cr_event_batch_unref(batch);
    assert_int_equal(atomic_load(&batch->refcount), 1);
    assert_int_equal(batch->bytes[2], 3); /* still alive */
    cr_event_batch_unref(batch);            /* freed: ASan checks no leak / no reuse */
    cr_event_batch_unref(NULL);
    assert_int_equal(cr_event_batch_create(0, NULL, 1, &batch), CR_ERR_INVALID_PARAMS);
}

/* ---- JSON decoder ----------------------------------------------------------- */

static cr_event_batch *mixed_batch(void) {
    cr_store_replica replica = {CR_REPLICA_MEMORY, cr_event_str_c("tcp://h:1")};
    const uint32_t tokens[] = {1, 70000};
    cr_store_event_info info = {.model_name = cr_event_str_c("llama"), .block_size = 512,
                                .block_hash = cr_event_str_c("0xa"),
                                .parent_block_hash = cr_event_str_c("0xb"),
                                .token_ids = tokens, .token_count = 2};
    cr_store_event *events[3];
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c("k1"), &replica, 1, &info,
                                                    &events[0]),
                     CR_OK);
    assert_int_equal(cr_store_event_new_block_update(cr_event_str_c("k2"), &replica, 1,
                                                     &events[1]),
                     CR_OK);
    assert_int_equal(cr_store_event_new_remove_all(&events[2]), CR_OK);
    cr_event_encoder *encoder = encoder_new(0, 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cr_event_encoder_append(encoder, events[i]), CR_OK);
        cr_store_event_free(events[i]);
    }
    cr_event_batch *batch = NULL;
    assert_int_equal(cr_event_encoder_finish(encoder, 7, 1.5, &batch), CR_OK);
    cr_event_encoder_destroy(encoder);
    return batch;
}

static void test_json_lines(void **state) {
    (void)state;
    cr_event_batch *batch = mixed_batch();
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    assert_non_null(out);
    char error[128];
    assert_int_equal(cr_store_event_json_write_lines(batch->bytes, batch->len, batch->seq, out,
                                                     error, sizeof(error)),
                     CR_OK);
    fclose(out);
    assert_string_equal(
        text,
        "{\"seq\":7,\"ts\":1.5,\"type\":\"BlockStoreEvent\",\"key\":\"k1\",\"replicas\":"
        "[{\"type\":\"memory\",\"location\":\"tcp://h:1\"}],\"model_name\":\"llama\","
        "\"block_size\":512,\"block_hash\":\"0xa\",\"parent_block_hash\":\"0xb\","
        "\"token_ids\":[1,70000]}\n"
        "{\"seq\":7,\"ts\":1.5,\"type\":\"BlockUpdateEvent\",\"key\":\"k2\",\"replicas\":"
        "[{\"type\":\"memory\",\"location\":\"tcp://h:1\"}]}\n"
        "{\"seq\":7,\"ts\":1.5,\"type\":\"RemoveAllEvent\"}\n");
    free(text);
    cr_event_batch_unref(batch);
}

static void test_json_defaults(void **state) {
    (void)state;
    cr_store_event *event = NULL;
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c("k"), NULL, 0, NULL, &event),
                     CR_OK);
    cr_event_batch *batch = encode_one(event);
    json_t *events = NULL;
    assert_int_equal(cr_store_event_json_decode(batch->bytes, batch->len, 0, &events, NULL, 0),
                     CR_OK);
    assert_int_equal(json_array_size(events), 1);
    json_t *object = json_array_get(events, 0);
    assert_string_equal(json_string_value(json_object_get(object, "model_name")), "");
    assert_int_equal(json_integer_value(json_object_get(object, "block_size")), 0);
    assert_string_equal(json_string_value(json_object_get(object, "block_hash")), "");
    assert_string_equal(json_string_value(json_object_get(object, "parent_block_hash")), "");
    assert_int_equal(json_array_size(json_object_get(object, "token_ids")), 0);
    assert_true(json_is_array(json_object_get(object, "token_ids")));
    assert_int_equal(json_array_size(json_object_get(object, "replicas")), 0);
    json_decref(events);
    cr_event_batch_unref(batch);
}

/* Decodes `bytes` and expects a protocol error with a reason. */
static void expect_protocol_error(const uint8_t *bytes, size_t len) {
    json_t *events = NULL;
    char error[160] = "";
    int status = cr_store_event_json_decode(bytes, len, 1, &events, error, sizeof(error));
    if (status != CR_ERR_PROTOCOL) fail_msg("status %d for a malformed payload", status);
    assert_null(events);
    assert_true(strlen(error) > 0);
}

#define PROTOCOL_ERROR(...)                                        \
    do {                                                           \
        static const uint8_t bytes_[] = {__VA_ARGS__};             \
        expect_protocol_error(bytes_, sizeof(bytes_));             \
    } while (0)

#define TS_1_5 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0
#define REMOVE_ALL_STR 0xae, 'R', 'e', 'm', 'o', 'v', 'e', 'A', 'l', 'l', 'E', 'v', 'e', 'n', 't'
#define UPDATE_STR                                                                   \
    0xb0, 'B', 'l', 'o', 'c', 'k', 'U', 'p', 'd', 'a', 't', 'e', 'E', 'v', 'e', 'n', 't'
#define STORE_STR 0xaf, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'E', 'v', 'e', 'n', 't'

static void test_json_rejects_malformed(void **state) {
    (void)state;
    expect_protocol_error(NULL, 0);                                /* empty input */
    PROTOCOL_ERROR(0x91, TS_1_5);                                  /* 1-element batch */
    PROTOCOL_ERROR(0x92, 0x01, 0x90);                              /* ts is an int */
    PROTOCOL_ERROR(0x92, 0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0, 0x90); /* ts is NaN */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x90, 0xc0);                      /* trailing byte */
    PROTOCOL_ERROR(0x92, TS_1_5, 0xdd, 0xff, 0xff, 0xff, 0xff);    /* huge claimed count */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x90);                      /* empty event */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x92, REMOVE_ALL_STR, 0xc0); /* RemoveAll with 2 */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x91, 0xa3, 'F', 'o', 'o'); /* unknown type */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x92, UPDATE_STR, 0xa0);    /* update with 2 */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x93, UPDATE_STR, 0xa1, 0xff, 0x90); /* bad UTF-8 key */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x93, UPDATE_STR, 0x01, 0x90); /* key is an int */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x93, UPDATE_STR, 0xa0, 0x91, 0x91, 0xa4, 'd', 'i', 's',
                   'k');                                           /* replica with 1 element */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x93, UPDATE_STR, 0xa0, 0x91, 0x92, 0xa3, 'r', 'a', 'm',
                   0xa0);                                          /* unknown replica type */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x98, STORE_STR, 0xa0, 0x90, 0xa0, 0xd0, 0xff, 0xa0,
                   0xa0, 0x90);                                    /* block_size int8 -1 */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x98, STORE_STR, 0xa0, 0x90, 0xa0, 0x00, 0xa0, 0xa0,
                   0x91, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0);            /* token id 2^32 */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x98, STORE_STR, 0xa0, 0x90, 0xa0, 0x00, 0xa0, 0xa0,
                   0x91, 0xe0);                                    /* token id -32 */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x97, STORE_STR, 0xa0, 0x90, 0xa0, 0x00, 0xa0,
                   0xa0);                                          /* store with 7 */
    PROTOCOL_ERROR(0x92, TS_1_5, 0x91, 0x93, UPDATE_STR, 0xdb, 0xff, 0xff, 0xff, 0xff,
                   0x90);                                          /* str32 longer than input */
}

static void test_json_accepts_wider_forms(void **state) {
    (void)state;
    /* A peer may choose wider forms than ours: float32 ts, uint64/int32
     * integers, str8 for short strings, array16 for short lists. */
    static const uint8_t bytes[] = {
        0x92, 0xca, 0x3f, 0xc0, 0x00, 0x00,          /* float32 1.5 */
        0xdc, 0x00, 0x01,                            /* array16(1) events */
        0x98, STORE_STR,
        0xd9, 0x01, 'k',                             /* str8 "k" */
        0x90, 0xa0,
        0xcf, 0, 0, 0, 0, 0, 0, 0x02, 0x00,          /* uint64 512 */
        0xa0, 0xa0,
        0x92, 0xd2, 0, 0, 0, 5, 0xd0, 0x07,          /* int32 5, int8 7 */
    };
    json_t *events = NULL;
    assert_int_equal(cr_store_event_json_decode(bytes, sizeof(bytes), 3, &events, NULL, 0),
                     CR_OK);
    json_t *object = json_array_get(events, 0);
    assert_int_equal(json_integer_value(json_object_get(object, "block_size")), 512);
    assert_true(json_real_value(json_object_get(object, "ts")) == 1.5);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(object, "token_ids"), 1)),
                     7);
    json_decref(events);
}

/* Every proper prefix of a valid payload is malformed, and a seq above
 * INT64_MAX is refused before any decoding. */
static void test_json_truncations(void **state) {
    (void)state;
    cr_event_batch *batch = mixed_batch();
    for (size_t len = 0; len < batch->len; len++) expect_protocol_error(batch->bytes, len);
    json_t *events = NULL;
    assert_int_equal(cr_store_event_json_decode(batch->bytes, batch->len, UINT64_MAX, &events,
                                                NULL, 0),
                     CR_ERR_INVALID_PARAMS);
    cr_event_batch_unref(batch);
}

/* Random byte flips: the decoder either succeeds or reports PROTOCOL. */
static void test_json_mutations_never_crash(void **state) {
    (void)state;
    cr_event_batch *batch = mixed_batch();
    uint8_t *copy = malloc(batch->len);
    assert_non_null(copy);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 20000; round++) {
        memcpy(copy, batch->bytes, batch->len);
        for (int flips = 0; flips < 1 + round % 4; flips++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            copy[rng % batch->len] = (uint8_t)(rng >> 32);
        }
        json_t *events = NULL;
        int status = cr_store_event_json_decode(copy, batch->len, 0, &events, NULL, 0);
        assert_true(status == CR_OK || status == CR_ERR_PROTOCOL);
        json_decref(events);
    }
    free(copy);
    cr_event_batch_unref(batch);
}

/* ---- chains ------------------------------------------------------------- */


/* The three kinds appended to a chain are, in order, the events that the lone
 * constructors make from the same inputs: the same batch bytes, every inner
 * pointer inside the chain's block, each event aligned for its header. */
static void test_chain_holds_what_lone_events_hold(void **unused) {
    (void)unused;
    char key[] = "chain-key";
    char location[] = "10.0.0.1:7000";
    uint32_t tokens[] = {7, 8, 9, 10};
    cr_store_replica replica = {CR_REPLICA_MEMORY, cr_event_str_c(location)};
    cr_store_event_info info = {.model_name = cr_event_str_c("llama"), .block_size = 4,
                                .block_hash = cr_event_str_c("h1"),
                                .parent_block_hash = cr_event_str_c("h0"),
                                .token_ids = tokens, .token_count = 4};
    cr_store_event *lone[3] = {NULL, NULL, NULL};
    assert_int_equal(
        cr_store_event_new_block_store(cr_event_str_c(key), &replica, 1, &info, &lone[0]), CR_OK);
    assert_int_equal(cr_store_event_new_block_update(cr_event_str_c(key), &replica, 1, &lone[1]),
                     CR_OK);
    assert_int_equal(cr_store_event_new_remove_all(&lone[2]), CR_OK);

    cr_store_event_chain *chain = NULL;
    size_t need = 0;
    assert_int_equal(cr_store_event_chain_new(0, &chain), CR_OK);
    assert_int_equal(chain->capacity, CR_STORE_EVENT_CHAIN_BYTES_DEFAULT);
    assert_null(chain->head);
    static const cr_store_event_kind kinds[] = {CR_STORE_EVENT_BLOCK_STORE,
                                                CR_STORE_EVENT_BLOCK_UPDATE,
                                                CR_STORE_EVENT_REMOVE_ALL};
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(cr_store_event_chain_add(chain, kinds[i], cr_event_str_c(key), &replica,
                                                  1, &info, &need),
                         CR_OK);
    key[0] = 'X', location[0] = 'X', tokens[0] = 99; /* copies, not views */
    assert_int_equal(chain->count, 3);

    const cr_store_event *chained[3];
    size_t n = 0;
    const uint8_t *begin = chain->bytes, *end = chain->bytes + chain->used;
    for (const cr_store_event *ev = chain->head; ev != NULL; ev = ev->next) {
        assert_true(n < 3);
        assert_int_equal((uintptr_t)ev % _Alignof(cr_store_event), 0);
        assert_true((const uint8_t *)ev >= begin && (const uint8_t *)ev + ev->size_bytes <= end);
        const void *inner[] = {ev->key.ptr, ev->info.model_name.ptr, ev->info.block_hash.ptr,
                               ev->info.parent_block_hash.ptr};
        for (size_t j = 0; j < sizeof(inner) / sizeof(inner[0]); j++)
            assert_true((const uint8_t *)inner[j] > (const uint8_t *)ev &&
                        (const uint8_t *)inner[j] < (const uint8_t *)ev + ev->size_bytes);
        assert_int_equal(ev->size_bytes, lone[n]->size_bytes);
        chained[n++] = ev;
    }
    assert_int_equal(n, 3);
    assert_ptr_equal(chain->tail, chained[2]);
    assert_int_equal(chained[0]->info.token_ids[0], 7);
    assert_int_equal(chained[1]->info.token_count, 0); /* info is a BlockStoreEvent's only */
    assert_int_equal(chained[2]->key.len, 0);          /* a RemoveAllEvent has no key */

    cr_event_batch *from_chain = encode_events(chained, 3);
    cr_event_batch *from_lone = encode_events((const cr_store_event *const *)lone, 3);
    assert_bytes_equal(from_chain->bytes, from_chain->len, from_lone->bytes, from_lone->len);
    cr_event_batch_unref(from_chain);
    cr_event_batch_unref(from_lone);
    for (size_t i = 0; i < 3; i++) cr_store_event_free(lone[i]);
    cr_store_event_chain_release(chain);
}

/* A full chain refuses the next event unchanged and says what a chain that
 * holds it alone needs; a chain of exactly that room takes it. */
static void test_chain_full_says_what_it_needs(void **unused) {
    (void)unused;
    cr_store_replica replica = {CR_REPLICA_DISK, cr_event_str_c("/mnt/ssd/kv")};
    cr_store_event_chain *chain = NULL;
    size_t need = 0;
    assert_int_equal(cr_store_event_chain_new(512, &chain), CR_OK);
    uint32_t added = 0;
    int rc;
    while ((rc = cr_store_event_chain_add(chain, CR_STORE_EVENT_BLOCK_UPDATE,
                                          cr_event_str_c("a-key-of-some-length"), &replica, 1,
                                          NULL, &need)) == CR_OK)
        added++;
    assert_int_equal(rc, CR_ERR_AGAIN);
    assert_true(added >= 1);
    assert_int_equal(chain->count, added);
    size_t used = chain->used;
    const cr_store_event *tail = chain->tail;

    uint32_t tokens[600] = {0};
    cr_store_event_info info = {.token_ids = tokens, .token_count = 600};
    need = 0;
    assert_int_equal(cr_store_event_chain_add(chain, CR_STORE_EVENT_BLOCK_STORE,
                                              cr_event_str_c("big"), &replica, 1, &info, &need),
                     CR_ERR_AGAIN);
    assert_true(need > 600 * sizeof(uint32_t));
    assert_int_equal(chain->count, added);
    assert_int_equal(chain->used, used);
    assert_ptr_equal(chain->tail, tail);
    assert_null(chain->tail->next);

    cr_store_event_chain *big = NULL;
    size_t again = 0;
    assert_int_equal(cr_store_event_chain_new(need, &big), CR_OK);
    assert_int_equal(cr_store_event_chain_add(big, CR_STORE_EVENT_BLOCK_STORE,
                                              cr_event_str_c("big"), &replica, 1, &info, &again),
                     CR_OK);
    assert_int_equal(big->used, need);
    assert_int_equal(big->head->info.token_count, 600);
    cr_store_event_chain_release(big);
    cr_store_event_chain_release(chain);
}

/* Invalid inputs change nothing in the chain. */
static void test_chain_refuses_invalid_events(void **unused) {
    (void)unused;
    cr_store_event_chain *chain = NULL;
    size_t need = 0;
    assert_int_equal(cr_store_event_chain_new(0, &chain), CR_OK);
    cr_store_replica bad_type = {(cr_replica_type)7, cr_event_str_c("x")};
    cr_event_str bad_key = {NULL, 3};
    assert_int_equal(cr_store_event_chain_add(chain, CR_STORE_EVENT_BLOCK_UPDATE,
                                              cr_event_str_c("k"), &bad_type, 1, NULL, &need),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_event_chain_add(chain, CR_STORE_EVENT_BLOCK_STORE, bad_key, NULL,
                                              0, NULL, &need),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_event_chain_add(chain, CR_STORE_EVENT_BLOCK_UPDATE,
                                              cr_event_str_c("k"), NULL, 2, NULL, &need),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(chain->count, 0);
    assert_int_equal(chain->used, 0);
    assert_null(chain->head);
    cr_store_event_chain_release(chain);
}

/* Segments hands one chain to two consumers: each drops its reference once,
 * the block goes with the last (ASan reports a leak or a use after free). */
static void test_chain_shared_by_two_holders(void **unused) {
    (void)unused;
    cr_store_replica rep = {CR_REPLICA_MEMORY, {"10.0.0.1:7000", 13}};
    cr_store_event_chain *chain = NULL;
    size_t need = 0;
    assert_int_equal(cr_store_event_chain_new(0, &chain), CR_OK);
    assert_int_equal(cr_store_event_chain_add(chain, CR_STORE_EVENT_BLOCK_UPDATE,
                                              (cr_event_str){"k", 1}, &rep, 1, NULL, &need),
                     CR_OK);
    assert_int_equal(atomic_load(&chain->refs), 1);
    assert_ptr_equal(cr_store_event_chain_ref(chain), chain);
    assert_int_equal(atomic_load(&chain->refs), 2);
    cr_store_event_chain_release(chain); /* the first consumer is done */
    assert_int_equal(atomic_load(&chain->refs), 1);
    assert_int_equal(chain->head->key.len, 1); /* still readable by the second */
    assert_memory_equal(chain->head->replicas[0].location.ptr, "10.0.0.1:7000", 13);
    cr_store_event_chain_release(chain);
    cr_store_event_chain_release(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remove_all_bytes),
        cmocka_unit_test(test_chain_holds_what_lone_events_hold),
        cmocka_unit_test(test_chain_full_says_what_it_needs),
        cmocka_unit_test(test_chain_refuses_invalid_events),
        cmocka_unit_test(test_chain_shared_by_two_holders),
        cmocka_unit_test(test_block_update_bytes),
        cmocka_unit_test(test_block_store_bytes),
        cmocka_unit_test(test_block_store_defaults),
        cmocka_unit_test(test_u32_extremes),
        cmocka_unit_test(test_string_boundaries),
        cmocka_unit_test(test_token_list_boundaries),
        cmocka_unit_test(test_default_cap_is_50),
        cmocka_unit_test(test_configured_cap_and_array_forms),
        cmocka_unit_test(test_finish_empty_and_reset),
        cmocka_unit_test(test_buffer_growth_matches),
        cmocka_unit_test(test_event_is_one_deep_copy),
        cmocka_unit_test(test_event_invalid_params),
        cmocka_unit_test(test_names_and_parse),
        cmocka_unit_test(test_batch_refcount),
        cmocka_unit_test(test_json_lines),
        cmocka_unit_test(test_json_defaults),
        cmocka_unit_test(test_json_rejects_malformed),
        cmocka_unit_test(test_json_accepts_wider_forms),
        cmocka_unit_test(test_json_truncations),
        cmocka_unit_test(test_json_mutations_never_crash),
    };
    return cmocka_run_group_tests_name("store_event", tests, NULL, NULL);
}

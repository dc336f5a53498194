/* Seed-000 payload → JSON (see store_event_json.h).
 *
 * The msgpack is read with a small bounds-checked reader instead of
 * msgpack-c's unpacker: the unpacker allocates an array's claimed size
 * before reading its elements, so five hostile bytes (dd ff ff ff ff) ask
 * for ~100 GB.  Here every claimed count is checked against the bytes left
 * (each element takes at least one), and JSON values are built as elements
 * are actually read, so memory stays proportional to the input. */
#include "msgs/store_event_json.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "crescent/error.h"
#include "msgs/store_event.h"

struct reader {
    const uint8_t *start;
    const uint8_t *pos;
    const uint8_t *end;
    char *error;
    size_t error_size;
};

/* The JSON fields every event object starts with. */
struct batch_context {
    uint64_t seq;
    double ts_s;
};

static int fail(struct reader *reader, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static int decode_event(struct reader *reader, const struct batch_context *context,
                        json_t *events);

/* Element counts per kind, as in store_event.c: seed 000's 8, 3 and 1. */
static const uint32_t kind_element_counts[CR_STORE_EVENT_KIND_COUNT] = {8, 3, 1};

/* Records why decoding stopped (first failure only) and returns PROTOCOL. */
static int fail(struct reader *reader, const char *format, ...) {
    assert(reader != NULL && format != NULL);
    if (reader->error_size == 0 || reader->error[0] != '\0') return CR_ERR_PROTOCOL;
    int used = snprintf(reader->error, reader->error_size, "byte %zu: ",
                        (size_t)(reader->pos - reader->start));
    if (used >= 0 && (size_t)used < reader->error_size) {
        va_list args;
        va_start(args, format);
        vsnprintf(reader->error + used, reader->error_size - (size_t)used, format, args);
        va_end(args);
    }
    return CR_ERR_PROTOCOL;
}

static size_t remaining(const struct reader *reader) {
    assert(reader->pos <= reader->end);
    return (size_t)(reader->end - reader->pos);
}

/* Reads a big-endian unsigned integer of `width` bytes (1, 2, 4 or 8). */
static int read_be(struct reader *reader, unsigned width, const char *what, uint64_t *out) {
    assert(width >= 1 && width <= 8);
    if (remaining(reader) < width) return fail(reader, "%s is truncated", what);
    uint64_t value = 0;
    for (unsigned i = 0; i < width; i++) value = (value << 8) | reader->pos[i];
    reader->pos += width;
    *out = value;
    return CR_OK;
}

static int read_tag(struct reader *reader, const char *what, uint8_t *tag) {
    if (remaining(reader) == 0) return fail(reader, "%s is missing (end of input)", what);
    *tag = *reader->pos++;
    return CR_OK;
}

/* Reads an array header; the count is bounded by the bytes left. */
static int read_array(struct reader *reader, const char *what, uint32_t *count) {
    assert(reader != NULL && count != NULL);
    uint8_t tag = 0;
    uint64_t value = 0;
    int status = read_tag(reader, what, &tag);
    if (status != CR_OK) return status;
    if ((tag & 0xf0) == 0x90) {
        value = tag & 0x0f;
    } else if (tag == 0xdc || tag == 0xdd) {
        status = read_be(reader, tag == 0xdc ? 2 : 4, what, &value);
        if (status != CR_OK) return status;
    } else {
        reader->pos--;
        return fail(reader, "%s: expected an array, found type byte 0x%02x", what, tag);
    }
    if (value > remaining(reader)) {
        return fail(reader, "%s claims %llu elements, more than the bytes left", what,
                    (unsigned long long)value);
    }
    *count = (uint32_t)value;
    return CR_OK;
}

/* Reads a string header and body; *ptr points into the input. */
static int read_str(struct reader *reader, const char *what, const char **ptr, size_t *len) {
    assert(reader != NULL && ptr != NULL && len != NULL);
    uint8_t tag = 0;
    uint64_t value = 0;
    int status = read_tag(reader, what, &tag);
    if (status != CR_OK) return status;
    if ((tag & 0xe0) == 0xa0) {
        value = tag & 0x1f;
    } else if (tag >= 0xd9 && tag <= 0xdb) {
        status = read_be(reader, 1u << (tag - 0xd9), what, &value);
        if (status != CR_OK) return status;
    } else {
        reader->pos--;
        return fail(reader, "%s: expected a string, found type byte 0x%02x", what, tag);
    }
    if (value > remaining(reader)) return fail(reader, "%s is truncated", what);
    *ptr = (const char *)reader->pos;
    *len = (size_t)value;
    reader->pos += value;
    return CR_OK;
}

/* Reads any msgpack integer form holding a value in [0, UINT32_MAX]. */
static int read_u32(struct reader *reader, const char *what, uint32_t *out) {
    assert(reader != NULL && out != NULL);
    uint8_t tag = 0;
    uint64_t value = 0;
    int status = read_tag(reader, what, &tag);
    if (status != CR_OK) return status;
    if (tag <= 0x7f) {
        value = tag;
    } else if (tag >= 0xcc && tag <= 0xcf) {
        status = read_be(reader, 1u << (tag - 0xcc), what, &value);
    } else if (tag >= 0xd0 && tag <= 0xd3) {
        unsigned width = 1u << (tag - 0xd0);
        status = read_be(reader, width, what, &value);
        if (status == CR_OK && width < 8 && (value >> (8 * width - 1)) != 0) value = UINT64_MAX;
        if (status == CR_OK && width == 8 && (value >> 63) != 0) value = UINT64_MAX;
    } else {
        reader->pos--;
        return fail(reader, "%s: expected an integer, found type byte 0x%02x", what, tag);
    }
    if (status != CR_OK) return status;
    if (value > UINT32_MAX) return fail(reader, "%s is out of the u32 range", what);
    *out = (uint32_t)value;
    return CR_OK;
}

/* Reads a float64 (or float32) that is finite. */
static int read_double(struct reader *reader, const char *what, double *out) {
    assert(reader != NULL && out != NULL);
    uint8_t tag = 0;
    uint64_t bits = 0;
    int status = read_tag(reader, what, &tag);
    if (status != CR_OK) return status;
    if (tag != 0xcb && tag != 0xca) {
        reader->pos--;
        return fail(reader, "%s: expected a float, found type byte 0x%02x", what, tag);
    }
    status = read_be(reader, tag == 0xcb ? 8 : 4, what, &bits);
    if (status != CR_OK) return status;
    if (tag == 0xcb) {
        memcpy(out, &bits, sizeof(*out));
    } else {
        uint32_t narrow = (uint32_t)bits;
        float single;
        memcpy(&single, &narrow, sizeof(single));
        *out = single;
    }
    if (!isfinite(*out)) return fail(reader, "%s is not a finite number", what);
    return CR_OK;
}

/* Length of the UTF-8 sequence starting at s[0] (1..4), or 0 when it is
 * invalid: stray continuation, overlong form, surrogate, above U+10FFFF. */
static size_t utf8_sequence_length(const unsigned char *s, size_t left) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (n == 0 || c > 0xf4 || n > left) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
    }
    if (c == 0xe0 && s[1] < 0xa0) return 0; /* overlong */
    if (c == 0xed && s[1] > 0x9f) return 0; /* surrogate */
    if (c == 0xf0 && s[1] < 0x90) return 0; /* overlong */
    if (c == 0xf4 && s[1] > 0x8f) return 0; /* above U+10FFFF */
    return n;
}

static bool utf8_valid(const char *text, size_t len) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_sequence_length(s + i, len - i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

/* Reads a string field and stores it in `object` under `name`. */
static int read_str_field(struct reader *reader, json_t *object, const char *name) {
    const char *ptr = NULL;
    size_t len = 0;
    int status = read_str(reader, name, &ptr, &len);
    if (status != CR_OK) return status;
    if (!utf8_valid(ptr, len)) {
        reader->pos -= len;
        return fail(reader, "%s is not valid UTF-8", name);
    }
    json_t *value = json_stringn_nocheck(ptr, len);
    if (value == NULL || json_object_set_new(object, name, value) != 0) return CR_ERR_NOMEM;
    return CR_OK;
}

static int set_integer(json_t *object, const char *name, json_int_t number) {
    json_t *value = json_integer(number);
    if (value == NULL || json_object_set_new(object, name, value) != 0) return CR_ERR_NOMEM;
    return CR_OK;
}

/* One [type, location] pair → {"type":…, "location":…}. */
static int decode_replica(struct reader *reader, json_t *replicas) {
    uint32_t count = 0;
    int status = read_array(reader, "replica", &count);
    if (status != CR_OK) return status;
    if (count != 2) return fail(reader, "replica has %u elements, expected 2", count);
    const char *type = NULL;
    size_t type_len = 0;
    status = read_str(reader, "replica type", &type, &type_len);
    if (status != CR_OK) return status;
    cr_replica_type parsed;
    if (cr_replica_type_parse(type, type_len, &parsed) != CR_OK) {
        reader->pos -= type_len;
        return fail(reader, "unknown replica type (memory, disk or local_disk expected)");
    }
    json_t *replica = json_object();
    if (replica == NULL || json_array_append_new(replicas, replica) != 0) return CR_ERR_NOMEM;
    json_t *name = json_string(cr_replica_type_name(parsed));
    if (name == NULL || json_object_set_new(replica, "type", name) != 0) return CR_ERR_NOMEM;
    return read_str_field(reader, replica, "location");
}

static int decode_replicas(struct reader *reader, json_t *object) {
    uint32_t count = 0;
    int status = read_array(reader, "replicas", &count);
    if (status != CR_OK) return status;
    json_t *replicas = json_array();
    if (replicas == NULL || json_object_set_new(object, "replicas", replicas) != 0) {
        return CR_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < count && status == CR_OK; i++) {
        status = decode_replica(reader, replicas);
    }
    return status;
}

static int decode_token_ids(struct reader *reader, json_t *object) {
    uint32_t count = 0;
    int status = read_array(reader, "token_ids", &count);
    if (status != CR_OK) return status;
    json_t *tokens = json_array();
    if (tokens == NULL || json_object_set_new(object, "token_ids", tokens) != 0) {
        return CR_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < count; i++) {
        uint32_t token = 0;
        status = read_u32(reader, "token id", &token);
        if (status != CR_OK) return status;
        json_t *value = json_integer(token);
        if (value == NULL || json_array_append_new(tokens, value) != 0) return CR_ERR_NOMEM;
    }
    return CR_OK;
}

/* StoreEventInfo: model_name, block_size, block_hash, parent_block_hash, token_ids. */
static int decode_info(struct reader *reader, json_t *object) {
    int status = read_str_field(reader, object, "model_name");
    if (status != CR_OK) return status;
    uint32_t block_size = 0;
    status = read_u32(reader, "block_size", &block_size);
    if (status == CR_OK) status = set_integer(object, "block_size", block_size);
    if (status == CR_OK) status = read_str_field(reader, object, "block_hash");
    if (status == CR_OK) status = read_str_field(reader, object, "parent_block_hash");
    if (status == CR_OK) status = decode_token_ids(reader, object);
    return status;
}

/* Reads the event's type string and checks the element count for it. */
static int decode_kind(struct reader *reader, uint32_t count, cr_store_event_kind *kind) {
    if (count == 0) return fail(reader, "event is an empty array");
    const char *name = NULL;
    size_t len = 0;
    int status = read_str(reader, "event type", &name, &len);
    if (status != CR_OK) return status;
    for (unsigned k = 0; k < CR_STORE_EVENT_KIND_COUNT; k++) {
        const char *candidate = cr_store_event_kind_name((cr_store_event_kind)k);
        if (strlen(candidate) != len || memcmp(candidate, name, len) != 0) continue;
        if (count != kind_element_counts[k]) {
            return fail(reader, "%s has %u elements, expected %u", candidate, count,
                        kind_element_counts[k]);
        }
        *kind = (cr_store_event_kind)k;
        return CR_OK;
    }
    reader->pos -= len;
    return fail(reader, "unknown event type");
}

static int decode_event(struct reader *reader, const struct batch_context *context,
                        json_t *events) {
    assert(reader != NULL && context != NULL && events != NULL);
    uint32_t count = 0;
    cr_store_event_kind kind = CR_STORE_EVENT_REMOVE_ALL;
    int status = read_array(reader, "event", &count);
    if (status == CR_OK) status = decode_kind(reader, count, &kind);
    if (status != CR_OK) return status;
    json_t *object = json_object();
    if (object == NULL || json_array_append_new(events, object) != 0) return CR_ERR_NOMEM;
    json_t *ts = json_real(context->ts_s);
    json_t *type = json_string(cr_store_event_kind_name(kind));
    status = set_integer(object, "seq", (json_int_t)context->seq);
    if (ts == NULL || json_object_set_new(object, "ts", ts) != 0) status = CR_ERR_NOMEM;
    if (type == NULL || json_object_set_new(object, "type", type) != 0) status = CR_ERR_NOMEM;
    if (status != CR_OK || kind == CR_STORE_EVENT_REMOVE_ALL) return status;
    status = read_str_field(reader, object, "key");
    if (status == CR_OK) status = decode_replicas(reader, object);
    if (status == CR_OK && kind == CR_STORE_EVENT_BLOCK_STORE) status = decode_info(reader, object);
    return status;
}

/* [ts, [events...]] with nothing after it. */
static int decode_batch(struct reader *reader, uint64_t seq, json_t *events) {
    uint32_t count = 0;
    int status = read_array(reader, "batch", &count);
    if (status != CR_OK) return status;
    if (count != 2) return fail(reader, "batch has %u elements, expected 2 [ts, events]", count);
    struct batch_context context = {.seq = seq};
    status = read_double(reader, "ts", &context.ts_s);
    if (status == CR_OK) status = read_array(reader, "event list", &count);
    for (uint32_t i = 0; i < count && status == CR_OK; i++) {
        status = decode_event(reader, &context, events);
    }
    if (status == CR_OK && remaining(reader) != 0) {
        return fail(reader, "%zu trailing bytes after the batch", remaining(reader));
    }
    return status;
}

int cr_store_event_json_decode(const uint8_t *payload, size_t len, uint64_t seq,
                               json_t **events_out, char *error, size_t error_size) {
    assert(events_out != NULL);
    assert(error != NULL || error_size == 0);
    if (error_size > 0) error[0] = '\0';
    if (seq > INT64_MAX) return CR_ERR_INVALID_PARAMS;
    if (payload == NULL && len > 0) return CR_ERR_INVALID_PARAMS;
    static const uint8_t empty[1] = {0};
    const uint8_t *start = payload != NULL ? payload : empty;
    struct reader reader = {start, start, start + len, error, error_size};
    json_t *events = json_array();
    if (events == NULL) return CR_ERR_NOMEM;
    int status = decode_batch(&reader, seq, events);
    if (status != CR_OK) {
        json_decref(events);
        return status;
    }
    *events_out = events;
    return CR_OK;
}

int cr_store_event_json_write_lines(const uint8_t *payload, size_t len, uint64_t seq,
                                    FILE *out, char *error, size_t error_size) {
    assert(out != NULL);
    json_t *events = NULL;
    int status = cr_store_event_json_decode(payload, len, seq, &events, error, error_size);
    if (status != CR_OK) return status;
    size_t index;
    json_t *event;
    json_array_foreach(events, index, event) {
        if (json_dumpf(event, out, JSON_COMPACT) != 0 || fputc('\n', out) == EOF) {
            status = CR_ERR_IO;
            break;
        }
    }
    json_decref(events);
    return status;
}

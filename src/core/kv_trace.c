/* Mooncake FAST'25 trace reader (see kv_trace.h). */
#include "core/kv_trace.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "crescent/error.h"

static const char *const bad_names[CR_KV_TRACE_BAD_KINDS] = {
    "bad_json", "bad_field", "bad_hash_id", "hash_ids_out_of_order", "timestamp_backwards",
    "empty_hash_ids",
};

const char *cr_kv_trace_bad_name(enum cr_kv_trace_bad cause) {
    return (unsigned)cause < CR_KV_TRACE_BAD_KINDS ? bad_names[cause] : "unknown";
}

void cr_kv_trace_init(struct cr_kv_trace *trace) {
    assert(trace != NULL);
    memset(trace, 0, sizeof(*trace));
}

void cr_kv_trace_free(struct cr_kv_trace *trace) {
    if (trace == NULL) return;
    free(trace->requests);
    free(trace->ids);
    cr_kv_trace_init(trace);
}

static int grow(void **array, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return CR_OK;
    size_t new_cap = *cap < 64 ? 64 : *cap * 2;
    while (new_cap < need) new_cap *= 2;
    void *grown = realloc(*array, new_cap * elem);
    if (grown == NULL) return CR_ERR_NOMEM;
    *array = grown;
    *cap = new_cap;
    return CR_OK;
}

static int u64_compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* An optional non-negative integer length; absent is 0. */
static bool length_field(json_t *root, const char *name, uint32_t *out) {
    json_t *v = json_object_get(root, name);
    *out = 0;
    if (v == NULL || json_is_null(v)) return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
        return false;
    *out = (uint32_t)json_integer_value(v);
    return true;
}

static bool blank(const char *line, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '\n') return false;
    return true;
}

/* Validates the decoded line into *req and the ids after trace->id_count
 * (room reserved by the caller); returns the cause or CR_KV_TRACE_BAD_KINDS. */
static enum cr_kv_trace_bad check_line(struct cr_kv_trace *trace, json_t *root,
                                       struct cr_kv_trace_request *req) {
    if (!json_is_object(root)) return CR_KV_TRACE_BAD_JSON;
    json_t *ts = json_object_get(root, "timestamp"), *ids = json_object_get(root, "hash_ids");
    if (!json_is_integer(ts) || json_integer_value(ts) < 0 || !json_is_array(ids) ||
        !length_field(root, "input_length", &req->input_length) ||
        !length_field(root, "output_length", &req->output_length))
        return CR_KV_TRACE_BAD_FIELD;
    size_t n = json_array_size(ids);
    if (n == 0) return CR_KV_TRACE_BAD_EMPTY;
    if (n > UINT32_MAX) return CR_KV_TRACE_BAD_FIELD;
    uint64_t *out = trace->ids + trace->id_count;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(ids, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) > CR_KV_TRACE_ID_MAX)
            return CR_KV_TRACE_BAD_HASH_ID;
        out[i] = (uint64_t)json_integer_value(v);
    }
    /* A repeated id: sort a copy (after the ids, in the reserved room). */
    uint64_t *sorted = out + n;
    memcpy(sorted, out, n * sizeof(uint64_t));
    qsort(sorted, n, sizeof(uint64_t), u64_compare);
    for (size_t i = 1; i < n; i++)
        if (sorted[i] == sorted[i - 1]) return CR_KV_TRACE_BAD_ORDER;
    req->timestamp_ms = (uint64_t)json_integer_value(ts);
    if (trace->count > 0 && req->timestamp_ms < trace->requests[trace->count - 1].timestamp_ms)
        return CR_KV_TRACE_BAD_TIME;
    req->block_count = (uint32_t)n;
    req->first_id = trace->id_count;
    if (sorted[n - 1] > trace->max_id) trace->max_id = sorted[n - 1];
    return CR_KV_TRACE_BAD_KINDS;
}

int cr_kv_trace_add_line(struct cr_kv_trace *trace, const char *line, size_t len,
                         enum cr_kv_trace_bad *cause) {
    assert(trace != NULL && (line != NULL || len == 0) && cause != NULL);
    *cause = CR_KV_TRACE_BAD_KINDS;
    if (blank(line, len)) return CR_OK;
    trace->lines++;
    json_t *root = json_loadb(line, len, 0, NULL);
    if (root == NULL) {
        *cause = CR_KV_TRACE_BAD_JSON;
        trace->bad[*cause]++;
        return CR_ERR_INVALID_PARAMS;
    }
    json_t *ids = json_is_object(root) ? json_object_get(root, "hash_ids") : NULL;
    size_t n = json_is_array(ids) ? json_array_size(ids) : 0;
    /* Room for the ids and a sorted copy of them. */
    int rc = grow((void **)&trace->ids, &trace->id_cap, trace->id_count + 2 * n, sizeof(uint64_t));
    if (rc == CR_OK)
        rc = grow((void **)&trace->requests, &trace->cap, trace->count + 1,
                  sizeof(*trace->requests));
    if (rc != CR_OK) {
        json_decref(root);
        return rc;
    }
    struct cr_kv_trace_request req = {0};
    *cause = check_line(trace, root, &req);
    json_decref(root);
    if (*cause != CR_KV_TRACE_BAD_KINDS) {
        trace->bad[*cause]++;
        return CR_ERR_INVALID_PARAMS;
    }
    trace->requests[trace->count++] = req;
    trace->id_count += req.block_count;
    return CR_OK;
}

int cr_kv_trace_load(struct cr_kv_trace *trace, const char *path, char *err, size_t err_len) {
    assert(trace != NULL && path != NULL && err != NULL);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, err_len, "cannot open trace %s: %s", path, strerror(errno));
        return CR_ERR_IO;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    uint64_t line_no = 0;
    bool logged[CR_KV_TRACE_BAD_KINDS] = {false};
    int rc = CR_OK;
    while ((len = getline(&line, &cap, f)) >= 0) {
        line_no++;
        enum cr_kv_trace_bad cause;
        if ((size_t)len > CR_KV_TRACE_LINE_MAX) {
            cause = CR_KV_TRACE_BAD_JSON;
            trace->lines++;
            trace->bad[cause]++;
        } else {
            rc = cr_kv_trace_add_line(trace, line, (size_t)len, &cause);
            if (rc == CR_ERR_NOMEM) {
                snprintf(err, err_len, "out of memory reading trace %s at line %llu", path,
                         (unsigned long long)line_no);
                break;
            }
            rc = CR_OK;
        }
        if (cause != CR_KV_TRACE_BAD_KINDS && !logged[cause]) {
            logged[cause] = true;
            CR_WARN("trace", "%s line %llu skipped (%s); later lines with this fault are only "
                    "counted", path, (unsigned long long)line_no, cr_kv_trace_bad_name(cause));
        }
    }
    if (rc == CR_OK && ferror(f)) {
        snprintf(err, err_len, "reading trace %s: %s", path, strerror(errno));
        rc = CR_ERR_IO;
    }
    free(line);
    fclose(f);
    return rc;
}

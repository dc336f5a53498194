/* HTTP routes of copy/move tasks and their JSON (see task_routes.h). */
#include "http/task_routes.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/subsystems.h"
#include "crescent/error.h"
#include "http/front.h"
#include "msgs/task_msgs.h"

void cr_task_id_format(const struct cr_uuid *id, char out[37]) {
    char *p = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
        p += snprintf(p, 3, "%02x", id->b[i]);
    }
    *p = '\0';
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int cr_task_id_parse(const char *text, struct cr_uuid *out) {
    assert(text != NULL && out != NULL);
    size_t len = strlen(text), n = 0;
    bool dashed = len == 36;
    if (len != 32 && !dashed) return CR_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < len; i++) {
        if (dashed && (i == 8 || i == 13 || i == 18 || i == 23)) {
            if (text[i] != '-') return CR_ERR_INVALID_PARAMS;
            continue;
        }
        int hi = hex_digit(text[i]), lo = i + 1 < len ? hex_digit(text[i + 1]) : -1;
        if (hi < 0 || lo < 0) return CR_ERR_INVALID_PARAMS;
        out->b[n++] = (uint8_t)(hi << 4 | lo);
        i++;
    }
    return n == 16 ? CR_OK : CR_ERR_INVALID_PARAMS;
}

static json_t *id_json(const struct cr_uuid *id) {
    char text[37];
    cr_task_id_format(id, text);
    return json_string(text);
}

static json_t *replica_json(const struct cr_task_replica *r) {
    return json_pack("{s:s, s:s, s:I, s:I}", "segment", r->segment, "endpoint", r->endpoint,
                     "buffer", (json_int_t)r->buffer, "size", (json_int_t)r->size);
}

static json_t *task_json(const struct cr_task *t, uint64_t now_ms) {
    json_t *j = json_pack("{s:o, s:s, s:s, s:I, s:I, s:o, s:s}", "id", id_json(&t->id), "type",
                          cr_task_type_name(t->type), "status", cr_task_status_name(t->status),
                          "created_at_ms_epoch", (json_int_t)t->created_epoch_ms,
                          "last_updated_at_ms_epoch", (json_int_t)t->updated_epoch_ms,
                          "assigned_client", id_json(&t->executor), "message", t->message);
    const struct cr_task_detail *d = t->detail;
    if (j == NULL || d == NULL) return j; /* finished: the summary is what is kept */
    json_t *targets = json_array();
    for (uint32_t i = 0; i < d->target_count; i++)
        json_array_append_new(targets, replica_json(&d->targets[i]));
    json_t *key = json_stringn(d->key, d->key_len);
    json_object_set_new(j, "tenant", json_string(d->tenant));
    json_object_set_new(j, "key", key != NULL ? key : json_string("(not UTF-8)"));
    json_object_set_new(j, "source", replica_json(&d->source));
    json_object_set_new(j, "targets", targets);
    json_object_set_new(j, "deadline_in_ms",
                        json_integer(t->deadline_ms > now_ms ? (json_int_t)(t->deadline_ms - now_ms)
                                                             : 0));
    return j;
}

int cr_task_routes_render(const struct cr_task_table *table, uint64_t now_ms,
                          const struct cr_uuid *id, char **json_out) {
    assert(table != NULL && json_out != NULL);
    *json_out = NULL;
    json_t *root;
    if (id != NULL) {
        const struct cr_task *t = cr_task_table_find(table, id);
        if (t == NULL) return CR_ERR_OBJECT_NOT_FOUND;
        root = task_json(t, now_ms);
    } else {
        /* In flight first, then finished from the newest. */
        json_t *arr = json_array();
        uint32_t active = cr_task_table_active_count(table);
        uint32_t finished = cr_task_table_finished_count(table);
        for (uint32_t i = 0; arr != NULL && i < active; i++)
            json_array_append_new(arr, task_json(cr_task_table_active_at(table, i), now_ms));
        for (uint32_t i = finished; arr != NULL && i-- > 0;)
            json_array_append_new(arr, task_json(cr_task_table_finished_at(table, i), now_ms));
        root = json_pack("{s:I, s:I, s:o}", "in_flight", (json_int_t)active, "finished_kept",
                         (json_int_t)finished, "tasks", arr);
    }
    if (root == NULL) return CR_ERR_NOMEM;
    *json_out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return *json_out != NULL ? CR_OK : CR_ERR_NOMEM;
}

/* Without the admin token (crescentd has one), the executors' client ids
 * are left out, as the owners are in /api/v1/segments and /api/v1/objects:
 * a client id is what a caller names to act as that client. */
static char *hide_clients(char *json) {
    json_t *root = json_loads(json, 0, NULL);
    free(json);
    if (root == NULL) return NULL;
    json_t *tasks = json_object_get(root, "tasks");
    if (tasks == NULL) {
        json_object_set_new(root, "assigned_client", json_null());
    } else {
        size_t i;
        json_t *t;
        json_array_foreach(tasks, i, t) json_object_set_new(t, "assigned_client", json_null());
    }
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

static void get_tasks(void *ctx, const struct cr_http_request *req,
                      struct cr_http_response *resp) {
    struct cr_subsystems *peers = ctx;
    const char *prefix = "/api/v1/tasks/";
    struct cr_uuid id;
    bool one = strncmp(req->path, prefix, strlen(prefix)) == 0 && req->path[strlen(prefix)];
    if (one && cr_task_id_parse(req->path + strlen(prefix), &id) != CR_OK) {
        cr_http_respond_error(resp, 400, "bad task id",
                              "a task id is a UUID: 8-4-4-4-12 hex digits, or 32 hex digits");
        return;
    }
    char *json = NULL;
    struct cr_msg msg = {.type = CR_MSG_TASKS_ADMIN};
    struct cr_msg_tasks_admin *body = CR_MSG_BODY(&msg, struct cr_msg_tasks_admin);
    body->id = one ? &id : NULL;
    body->json_out = &json;
    int rc = cr_ask(peers->actors[CR_SUBSYSTEM_TASKS], &msg, peers->ask_timeout_ns);
    if (rc == CR_OK) {
        cr_http_respond_json(resp, 200, req->admin ? json : hide_clients(json));
        return;
    }
    free(json);
    cr_http_respond_error(resp, rc == CR_ERR_OBJECT_NOT_FOUND ? 404 : 503, cr_status_name(rc),
                          rc == CR_ERR_OBJECT_NOT_FOUND
                              ? "no such task (finished tasks are kept up to --task-retention)"
                              : cr_strerror(rc));
}

int cr_task_routes_register(struct cr_http_front *front, struct cr_subsystems *peers) {
    int rc = cr_http_front_add_route(front, "GET", "/api/v1/tasks", get_tasks, peers);
    return rc == CR_OK ? cr_http_front_add_route(front, "GET", "/api/v1/tasks/", get_tasks, peers)
                       : rc;
}

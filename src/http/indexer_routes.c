/* The indexer's HTTP API: the conductor's routes with its response shapes
 * (wire-formats.md §5) plus /route and /load.
 *
 *   POST /query          {model, token_ids, block_size, tenant_id?, instance_id?,
 *                         lora_name?, cache_salt?}  (JSON, or msgpack with
 *                         Content-Type application/msgpack: the answer is then msgpack)
 *     -> {"<tenant>": {"<instance>": {"longest_matched": t, "GPU": t, "CPU": t,
 *                                     "DISK": t, "DP": {"0": t, ...}}}}
 *        ({} when nothing matches, the tenant or model is unknown: the
 *        X-Crescent-Match header tells which, see match_header)
 *   POST /query_by_hash  same, with seq_hashes (alias block_hash) instead of token_ids
 *   POST /register, POST /unregister, GET /services, GET /global_view
 *   POST /load           {instance_id, tenant_id?, request_active_slots, request_total_slots,
 *                         kv_active_blocks, kv_total_blocks, num_requests_waiting,
 *                         gpu_cache_usage_perc, gpu_prefix_cache_hit_rate} (flat or
 *                         under "metrics": seed 003's ForwardPassMetrics); an instance
 *                         with no publisher is kept CR_INDEXER_LOAD_TTL_NS (30 s) after
 *                         its last report, at most CR_INDEXER_LOAD_ONLY_MAX (1024) of
 *                         them: past that, 503
 *   POST /route          a /query body -> {"instance_id", "longest_matched", "request_tokens",
 *                         "cost", "load", "candidates", "excluded_unhealthy",
 *                         "matches": <the /query answer>}
 *
 * Route cost (lower wins), after seed 003's scheduler:
 *   cost = kv_load + waiting / max_waiting + full - 2 * overlap
 *   overlap     = longest_matched / prompt tokens (0..1)
 *   kv_load     = kv_active_blocks / kv_total_blocks (gpu_cache_usage_perc when the
 *                 totals are 0; 0 without a report)
 *   max_waiting = the largest num_requests_waiting among the candidates
 *   full        = 1 when active slots or blocks reached their totals, else 0
 * Candidates: the tenant's publishers registered for the model, the tenant's
 * instances that reported load, and every instance that matched; left out
 * (unless "include_unhealthy": true) an instance with publishers none of
 * which ever connected, or one of which is stale (possibly_stale).  Ties go to
 * the longer match, then the smaller name.  Each /route counts, for the
 * chosen instance, the prompt tokens and the hit tokens (its longest match):
 * the hit rate in /services, /global_view and /metrics.
 *
 * Errors: 400 {"error", "detail"} for bad JSON or msgpack, a missing or
 * mistyped field, block_size 0; 404 for unregistering an unknown key; 503
 * when the indexer does not answer in time.  Handlers parse and hash on the
 * HTTP worker; the actor only walks the index. */
#include <jansson.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "actors/subsystems.h"
#include "core/buf.h"
#include "core/prefix_hash.h"
#include "crescent/error.h"
#include "http/front.h"
#include "http/indexer_render.h"
#include "http/indexer_request.h"
#include "msgs/indexer_msgs.h"

static int ask_indexer(struct cr_subsystems *peers, struct cr_msg *msg) {
    msg->flags = CR_MSG_ASK;
    return cr_ask(peers->actors[CR_SUBSYSTEM_INDEXER], msg, peers->ask_timeout_ns);
}

static void respond_unavailable(struct cr_http_response *resp, int rc) {
    cr_http_respond_error(resp, rc == CR_ERR_NOMEM ? 500 : 503, "indexer unavailable",
                          cr_strerror(rc));
}

static bool is_msgpack(const struct cr_http_request *req) {
    return req->content_type != NULL &&
           strncasecmp(req->content_type, "application/msgpack", 19) == 0;
}

static json_t *parse_body(const struct cr_http_request *req, struct cr_http_response *resp) {
    char detail[CR_INDEXER_DETAIL_MAX];
    json_t *root =
        cr_indexer_body_parse(req->body, req->body_len, is_msgpack(req), detail, sizeof(detail));
    if (root == NULL)
        cr_http_respond_error(resp, 400, is_msgpack(req) ? "invalid msgpack" : "invalid JSON",
                              detail);
    return root;
}

/* ---- rendering a query answer (JSON: indexer_render.c) ---- */

static const char *medium_name(const struct cr_indexer_result *r, uint8_t m) {
    static const char *const standard[3] = {"GPU", "CPU", "DISK"};
    return m < r->media_count ? r->media[m] : standard[m];
}

static void pack_str(msgpack_packer *pk, const char *s) {
    size_t len = strlen(s);
    msgpack_pack_str(pk, len);
    msgpack_pack_str_body(pk, s, len);
}

static void pack_hit(msgpack_packer *pk, const struct cr_indexer_result *r,
                     const struct cr_indexer_hit *h) {
    uint32_t media = 0, ranks = (uint32_t)__builtin_popcountll(h->dp_mask);
    for (uint8_t m = 0; m < 3 || m < r->media_count; m++) media += m < 3 || h->medium_tokens[m] > 0;
    msgpack_pack_map(pk, 2 + media);
    pack_str(pk, "longest_matched");
    msgpack_pack_uint32(pk, h->longest_tokens);
    for (uint8_t m = 0; m < 3 || m < r->media_count; m++) {
        if (m >= 3 && h->medium_tokens[m] == 0) continue;
        pack_str(pk, medium_name(r, m));
        msgpack_pack_uint32(pk, m < r->media_count ? h->medium_tokens[m] : 0);
    }
    pack_str(pk, "DP");
    msgpack_pack_map(pk, ranks);
    const uint32_t *counts = h->dp_tokens;
    for (uint64_t set = h->dp_mask; set != 0; set &= set - 1) {
        char key[4];
        snprintf(key, sizeof(key), "%u", (unsigned)__builtin_ctzll(set));
        pack_str(pk, key);
        msgpack_pack_uint32(pk, *counts++);
    }
}

static void respond_matches_msgpack(struct cr_http_response *resp, const char *tenant,
                                    const struct cr_indexer_result *r) {
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, r->hit_count > 0 ? 1 : 0);
    if (r->hit_count > 0) {
        pack_str(&pk, tenant);
        msgpack_pack_map(&pk, r->hit_count);
        for (uint32_t i = 0; i < r->hit_count; i++) {
            pack_str(&pk, r->hits[i].instance);
            pack_hit(&pk, r, &r->hits[i]);
        }
    }
    resp->status = 200;
    resp->content_type = "application/msgpack";
    size_t size = sbuf.size;
    resp->body = msgpack_sbuffer_release(&sbuf);
    resp->body_len = resp->body != NULL ? size : 0;
    msgpack_sbuffer_destroy(&sbuf);
}

/* ---- /query, /query_by_hash, /route ---- */

/* Hashes the request (token ids) or takes its hashes, then reads the index
 * (a /query; src/actors/indexer_read.c) or asks the actor (a /route, or a
 * /query whose answer is the actor's). */
static int run_query(struct cr_subsystems *peers, const struct cr_indexer_request *req, bool route,
                     struct cr_indexer_result **result) {
    uint64_t *hashes = req->hashes;
    size_t count = req->hash_count;
    if (req->tokens != NULL) {
        /* Hashing here keeps the actor's time per query to the index walk. */
        count = req->token_count / req->block_size;
        hashes = malloc((count + 1) * sizeof(uint64_t));
        if (hashes == NULL) return CR_ERR_NOMEM;
        uint64_t seed =
            cr_prefix_hash_namespace_seed(peers->prefix_hash_seed, req->lora, req->salt);
        count = cr_prefix_hash_chain(req->tokens, req->token_count, req->block_size, seed, false, 0,
                                     hashes, count);
    }
    struct cr_indexer_query q = {
        .key = {.tenant = req->tenant,
                .model = req->model,
                .lora_name = req->lora,
                .block_size = req->block_size,
                .additional_salt = req->salt},
        .seq_hashes = hashes,
        .block_count = (uint32_t)count,
        .instance_filter = req->has_instance ? req->instance : NULL,
        .route = route,
        .request_tokens =
            req->tokens != NULL ? req->token_count : (uint64_t)req->hash_count * req->block_size,
        .include_unhealthy = req->include_unhealthy,
    };
    *result = NULL;
    /* A /query is read here under the index's read lock; a /route changes
     * the actor's counters and load view, so it is asked. */
    int rc = route ? CR_OK : cr_indexer_query_read(peers->states[CR_SUBSYSTEM_INDEXER], &q, result);
    if (rc == CR_OK && *result == NULL) {
        struct cr_msg msg = {.type = CR_MSG_INDEXER_QUERY};
        *CR_MSG_BODY(&msg, struct cr_msg_indexer_query) =
            (struct cr_msg_indexer_query){.query = &q, .result_out = result};
        rc = ask_indexer(peers, &msg);
    }
    if (hashes != req->hashes) free(hashes);
    if (rc != CR_OK) {
        cr_indexer_result_free(*result);
        *result = NULL;
    }
    return rc;
}

/* The X-Crescent-Match line of a /query or /route answer.  A header, not a
 * 404 or a field: routers written for the conductor read the body as
 * tenant -> instance -> result and get {} for a cold or unknown model. */
static const char *match_header(enum cr_indexer_match m) {
    switch (m) {
    case CR_INDEXER_MATCH_HIT: return "X-Crescent-Match: hit";
    case CR_INDEXER_MATCH_MISS: return "X-Crescent-Match: miss";
    case CR_INDEXER_MATCH_UNKNOWN_TENANT: return "X-Crescent-Match: unknown-tenant";
    case CR_INDEXER_MATCH_UNKNOWN_CONTEXT: return "X-Crescent-Match: unknown-model";
    case CR_INDEXER_MATCH_UNKNOWN_INSTANCE: return "X-Crescent-Match: unknown-instance";
    }
    return NULL;
}

static bool parse_query(const struct cr_http_request *req, struct cr_http_response *resp,
                        bool by_hash, struct cr_indexer_request *out) {
    /* Most bodies are plain {model, token_ids, block_size, ...}: parsed without
     * building a jansson tree (one allocation per token id otherwise). */
    if (!by_hash && !is_msgpack(req) &&
        cr_indexer_request_fast(req->body, req->body_len, out) == CR_OK)
        return true;
    json_t *root = parse_body(req, resp);
    if (root == NULL) return false;
    char detail[CR_INDEXER_DETAIL_MAX];
    int rc = cr_indexer_request_from_json(root, by_hash, out, detail, sizeof(detail));
    json_decref(root);
    if (rc == CR_ERR_NOMEM)
        respond_unavailable(resp, rc);
    else if (rc != CR_OK)
        cr_http_respond_error(resp, 400, "invalid request", detail);
    return rc == CR_OK;
}

static void query_common(void *ctx, const struct cr_http_request *req,
                         struct cr_http_response *resp, bool by_hash) {
    struct cr_indexer_request q;
    if (!parse_query(req, resp, by_hash, &q)) return;
    struct cr_indexer_result *r;
    int rc = run_query(ctx, &q, false, &r);
    if (rc == CR_OK) rc = cr_indexer_result_keep_top(r, q.top_k);
    if (rc != CR_OK) {
        respond_unavailable(resp, rc);
    } else if (is_msgpack(req)) {
        respond_matches_msgpack(resp, q.tenant, r);
    } else {
        struct cr_buf b;
        cr_buf_init(&b);
        cr_indexer_render_matches_json(&b, q.tenant, r);
        resp->status = 200;
        resp->content_type = "application/json";
        resp->body = cr_buf_take(&b, &resp->body_len);
    }
    if (rc == CR_OK) resp->header = match_header(r->match);
    cr_indexer_result_free(r);
    cr_indexer_request_free(&q);
}

static void query_route(void *ctx, const struct cr_http_request *req,
                        struct cr_http_response *resp) {
    query_common(ctx, req, resp, false);
}

static void query_by_hash_route(void *ctx, const struct cr_http_request *req,
                                struct cr_http_response *resp) {
    query_common(ctx, req, resp, true);
}

static void route_route(void *ctx, const struct cr_http_request *req,
                        struct cr_http_response *resp) {
    struct cr_indexer_request q;
    if (!parse_query(req, resp, false, &q)) return;
    struct cr_indexer_result *r;
    int rc = run_query(ctx, &q, true, &r);
    if (rc == CR_OK && (rc = cr_indexer_result_keep_top(r, q.top_k)) != CR_OK) {
        cr_indexer_result_free(r); /* the route was chosen and counted: only its answer fails */
        r = NULL;
    }
    if (rc != CR_OK) {
        respond_unavailable(resp, rc);
        cr_indexer_request_free(&q);
        return;
    }
    struct cr_buf b;
    cr_buf_init(&b);
    cr_buf_appendf(&b, "{\"instance_id\":");
    if (r->best_instance[0] != '\0')
        cr_indexer_render_quoted(&b, r->best_instance);
    else
        cr_buf_appendf(&b, "null");
    cr_buf_appendf(&b,
                   ",\"longest_matched\":%u,\"request_tokens\":%zu,\"cost\":%.6f,\"load\":%.6f,"
                   "\"candidates\":%u,\"excluded_unhealthy\":%u,\"matches\":",
                   r->best_tokens, q.token_count, r->best_instance[0] != '\0' ? r->best_cost : 0.0,
                   r->best_load, r->candidates, r->excluded);
    cr_indexer_render_matches_json(&b, q.tenant, r);
    cr_buf_appendf(&b, "}");
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = cr_buf_take(&b, &resp->body_len);
    resp->header = match_header(r->match);
    cr_indexer_result_free(r);
    cr_indexer_request_free(&q);
}

/* ---- registration, load, views ---- */

static void register_route(void *ctx, const struct cr_http_request *req,
                           struct cr_http_response *resp) {
    json_t *root = parse_body(req, resp);
    if (root == NULL) return;
    struct cr_indexer_registration reg;
    char error[CR_INDEXER_ERROR_MAX] = "";
    int rc = cr_indexer_registration_from_json(root, NULL, &reg, error, sizeof(error));
    json_decref(root);
    if (rc != CR_OK) {
        cr_http_respond_error(resp, 400, "invalid registration", error);
        return;
    }
    struct cr_msg msg = {.type = CR_MSG_INDEXER_REGISTER};
    *CR_MSG_BODY(&msg, struct cr_msg_indexer_register) =
        (struct cr_msg_indexer_register){.reg = &reg, .error = error};
    rc = ask_indexer(ctx, &msg);
    if (rc == CR_ERR_INVALID_PARAMS || rc == CR_ERR_NOMEM) {
        cr_http_respond_error(resp, rc == CR_ERR_NOMEM ? 503 : 400, "registration failed",
                              error[0] != '\0' ? error : cr_strerror(rc));
    } else if (rc == CR_ERR_IO) { /* --state-dir could not be written: nothing registered */
        cr_http_respond_error(resp, 500, "registration not saved", error);
    } else if (rc != CR_OK) {
        respond_unavailable(resp, rc);
    } else {
        json_t *o = json_pack("{s:s, s:s}", "status", "registered successfully", "instance_id",
                              reg.instance_id);
        cr_http_respond_json(resp, 200, o != NULL ? json_dumps(o, JSON_COMPACT) : NULL);
        json_decref(o);
    }
}

static void unregister_route(void *ctx, const struct cr_http_request *req,
                             struct cr_http_response *resp) {
    json_t *root = parse_body(req, resp);
    if (root == NULL) return;
    json_t *inst = json_object_get(root, "instance_id"), *ten = json_object_get(root, "tenant_id");
    json_t *dp = json_object_get(root, "dp_rank");
    const char *detail = NULL;
    if (!json_is_object(root))
        detail = "the body must be an object";
    else if (!json_is_string(inst))
        detail = "field 'instance_id' is required and must be a string";
    else if (ten != NULL && !json_is_null(ten) && !json_is_string(ten))
        detail = "field 'tenant_id' must be a string";
    else if (dp != NULL && !json_is_null(dp) &&
             (!json_is_integer(dp) || json_integer_value(dp) < 0 || json_integer_value(dp) > 63))
        detail = "field 'dp_rank' must be an integer from 0 to 63";
    if (detail != NULL) {
        cr_http_respond_error(resp, 400, "invalid request", detail);
        json_decref(root);
        return;
    }
    struct cr_msg_indexer_unregister u = {
        .instance_id = json_string_value(inst),
        .tenant_id = json_is_string(ten) ? json_string_value(ten) : "default",
        .dp_rank = json_is_integer(dp) ? (uint32_t)json_integer_value(dp) : 0,
    };
    if (u.tenant_id[0] == '\0') u.tenant_id = "default";
    char key[3 * CR_INDEXER_NAME_MAX];
    snprintf(key, sizeof(key), "%s|%s|%u", u.instance_id, u.tenant_id, u.dp_rank);
    char error[CR_INDEXER_ERROR_MAX] = "";
    u.error = error;
    struct cr_msg msg = {.type = CR_MSG_INDEXER_UNREGISTER};
    *CR_MSG_BODY(&msg, struct cr_msg_indexer_unregister) = u;
    int rc = ask_indexer(ctx, &msg);
    json_decref(root);
    if (rc == CR_ERR_OBJECT_NOT_FOUND) {
        cr_http_respond_error(resp, 404, "not registered", key);
    } else if (rc == CR_ERR_IO) { /* --state-dir could not be written: still registered */
        cr_http_respond_error(resp, 500, "unregistration not saved", error);
    } else if (rc != CR_OK) {
        respond_unavailable(resp, rc);
    } else {
        json_t *o = json_pack("{s:s, s:[s]}", "status", "unregistered successfully",
                              "removed_instances", key);
        cr_http_respond_json(resp, 200, o != NULL ? json_dumps(o, JSON_COMPACT) : NULL);
        json_decref(o);
    }
}

static void load_route(void *ctx, const struct cr_http_request *req,
                       struct cr_http_response *resp) {
    json_t *root = parse_body(req, resp);
    if (root == NULL) return;
    struct cr_indexer_load load;
    char detail[CR_INDEXER_DETAIL_MAX];
    int rc = cr_indexer_load_from_json(root, &load, detail, sizeof(detail));
    json_decref(root);
    if (rc != CR_OK) {
        cr_http_respond_error(resp, 400, "invalid load report", detail);
        return;
    }
    struct cr_msg msg = {.type = CR_MSG_INDEXER_LOAD};
    CR_MSG_BODY(&msg, struct cr_msg_indexer_load)->load = &load;
    rc = ask_indexer(ctx, &msg);
    if (rc == CR_ERR_NOMEM) {
        char text[192];
        snprintf(text, sizeof(text),
                 "the indexer already tracks %u instances known only from /load (each is "
                 "forgotten %llu s after its last report): register the instance, or retry "
                 "later",
                 CR_INDEXER_LOAD_ONLY_MAX,
                 (unsigned long long)(CR_INDEXER_LOAD_TTL_NS / 1000000000u));
        cr_http_respond_error(resp, 503, "too many instances without a publisher", text);
        return;
    }
    if (rc != CR_OK) {
        respond_unavailable(resp, rc);
        return;
    }
    json_t *o = json_pack("{s:s, s:s}", "status", "ok", "instance_id", load.instance_id);
    cr_http_respond_json(resp, 200, o != NULL ? json_dumps(o, JSON_COMPACT) : NULL);
    json_decref(o);
}

static void view_route(struct cr_subsystems *peers, uint16_t type, struct cr_http_response *resp) {
    json_t *out = NULL;
    struct cr_msg msg = {.type = type};
    CR_MSG_BODY(&msg, struct cr_msg_indexer_json)->json_out = (struct json_t **)&out;
    int rc = ask_indexer(peers, &msg);
    if (rc != CR_OK) {
        respond_unavailable(resp, rc);
        return;
    }
    cr_http_respond_json(resp, 200, json_dumps(out, JSON_COMPACT));
    json_decref(out);
}

static void services_route(void *ctx, const struct cr_http_request *req,
                           struct cr_http_response *resp) {
    (void)req;
    view_route(ctx, CR_MSG_INDEXER_SERVICES, resp);
}

static void global_view_route(void *ctx, const struct cr_http_request *req,
                              struct cr_http_response *resp) {
    (void)req;
    view_route(ctx, CR_MSG_INDEXER_GLOBAL_VIEW, resp);
}

int cr_indexer_register_routes(struct cr_http_front *front, struct cr_subsystems *peers);

int cr_indexer_register_routes(struct cr_http_front *front, struct cr_subsystems *peers) {
    static const struct {
        const char *method, *path;
        cr_http_handler handler;
    } routes[] = {
        {"POST", "/query", query_route},           {"POST", "/query_by_hash", query_by_hash_route},
        {"POST", "/route", route_route},           {"POST", "/register", register_route},
        {"POST", "/unregister", unregister_route}, {"POST", "/load", load_route},
        {"GET", "/services", services_route},      {"GET", "/global_view", global_view_route},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        int rc = cr_http_front_add_route(front, routes[i].method, routes[i].path, routes[i].handler,
                                         peers);
        if (rc != CR_OK) return rc;
    }
    /* Registration changes which engines the indexer trusts: admin only when
     * crescentd has an admin token.  /load stays open: engines post it. */
    int rc = cr_http_front_require_admin(front, "POST", "/register");
    return rc == CR_OK ? cr_http_front_require_admin(front, "POST", "/unregister") : rc;
}

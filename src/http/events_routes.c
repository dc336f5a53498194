/* GET /api/v1/events: what the publisher sent and what the replay actor keeps.
 *
 * {"seq": next seq, "first_seq": seq this run started at (with --state-dir
 *  above every seq an earlier run sent), "last_seq": seq of the newest batch
 *  sent by this run or null,
 *  "batches_sent", "events_sent", "events_by_type": {"BlockStoreEvent": n, ...},
 *  "events_pending", "send_drops", "encode_errors", "handoff_drops",
 *  "replay": {"sessions_served", "sessions_clamped", "malformed_requests",
 *             "clients_dropped", "batches_replayed", "sessions_active",
 *             "batches_kept", "bytes_kept", "oldest_seq", "newest_seq" (null when
 *             empty), "restarts", "oversized_batches"}}
 *
 * The handler asks both actors (never reads their state); an actor that does
 * not answer in ask_timeout makes the answer 503. */
#include "http/events_routes.h"

#include <jansson.h>

#include "actors/subsystems.h"
#include "crescent/error.h"
#include "http/front.h"
#include "msgs/event_msgs.h"

static json_t *json_u64(uint64_t value) { return json_integer((json_int_t)value); }

static json_t *json_seq_or_null(bool present, uint64_t seq) {
    return present ? json_u64(seq) : json_null();
}

static json_t *replay_json(const struct cr_replay_info *r) {
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                     "sessions_served", json_u64(r->sessions_served), "sessions_clamped",
                     json_u64(r->sessions_clamped), "malformed_requests",
                     json_u64(r->malformed_requests), "clients_dropped",
                     json_u64(r->clients_dropped), "batches_replayed",
                     json_u64(r->batches_replayed), "sessions_active",
                     json_u64(r->sessions_active), "batches_kept", json_u64(r->batches_kept),
                     "bytes_kept", json_u64(r->bytes_kept), "oldest_seq",
                     json_seq_or_null(r->has_batches, r->oldest_seq), "newest_seq",
                     json_seq_or_null(r->has_batches, r->newest_seq), "restarts",
                     json_u64(r->restarts), "oversized_batches", json_u64(r->oversized_batches));
}

static json_t *events_json(const struct cr_publisher_info *p, const struct cr_replay_info *r) {
    json_t *by_type = json_object();
    for (int k = 0; k < CR_STORE_EVENT_KIND_COUNT; k++)
        json_object_set_new(by_type, cr_store_event_kind_name((cr_store_event_kind)k),
                            json_u64(p->events_by_kind[k]));
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "seq",
                     json_u64(p->next_seq), "first_seq", json_u64(p->first_seq), "last_seq",
                     json_seq_or_null(p->batches_sent > 0, p->next_seq - 1), "batches_sent",
                     json_u64(p->batches_sent), "events_sent", json_u64(p->events_sent),
                     "events_by_type", by_type, "events_pending", json_u64(p->events_pending),
                     "send_drops", json_u64(p->send_drops), "encode_errors",
                     json_u64(p->encode_errors), "handoff_drops", json_u64(p->handoff_drops),
                     "replay", replay_json(r));
}

static void events_route(void *ctx, const struct cr_http_request *req,
                         struct cr_http_response *resp) {
    (void)req;
    const struct cr_subsystems *peers = ctx;
    struct cr_publisher_info pub = {0};
    struct cr_replay_info rep = {0};
    struct cr_msg ask = {.type = CR_MSG_PUBLISHER_INFO};
    CR_MSG_BODY(&ask, struct cr_msg_publisher_info)->out = &pub;
    int rc = cr_ask(peers->actors[CR_SUBSYSTEM_PUBLISHER], &ask, peers->ask_timeout_ns);
    if (rc == CR_OK) {
        ask = (struct cr_msg){.type = CR_MSG_REPLAY_INFO};
        CR_MSG_BODY(&ask, struct cr_msg_replay_info)->out = &rep;
        rc = cr_ask(peers->actors[CR_SUBSYSTEM_REPLAY], &ask, peers->ask_timeout_ns);
    }
    if (rc != CR_OK) {
        cr_http_respond_error(resp, 503, "actor_unavailable", cr_strerror(rc));
        return;
    }
    json_t *obj = events_json(&pub, &rep);
    cr_http_respond_json(resp, 200, obj != NULL ? json_dumps(obj, JSON_COMPACT) : NULL);
    json_decref(obj);
}

int cr_events_register_routes(struct cr_http_front *front, struct cr_subsystems *peers) {
    return cr_http_front_add_route(front, "GET", "/api/v1/events", events_route, peers);
}

/* The HA routes (see ha_routes.h). */
#include "http/ha_routes.h"

#include <stdio.h>
#include <time.h>

#include "crescent/error.h"
#include "durable/role.h"

json_t *cr_ha_json(void) {
    struct cr_role_status s;
    cr_role_get(&s);
    json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:I}", "role", cr_role_name(s.role), "fenced",
                          s.fenced, "term", (json_int_t)s.term, "highest_term",
                          (json_int_t)s.highest_term, "applied_lsn", (json_int_t)s.applied_lsn);
    if (o == NULL) return NULL;
    json_object_set_new(o, "log_bytes", json_integer((json_int_t)s.log_bytes));
    json_object_set_new(o, "snapshot_lsn", json_integer((json_int_t)s.snapshot_lsn));
    json_object_set_new(o, "snapshot_unix_ms", json_integer((json_int_t)s.snapshot_unix_ms));
    json_object_set_new(o, "diverged_kept", json_integer((json_int_t)s.diverged_kept));
    if (s.role == CR_ROLE_STANDBY) {
        json_object_set_new(o, "leader", json_string(s.leader));
        json_object_set_new(o, "connected", json_boolean(s.connected));
        json_object_set_new(o, "lag_records", json_integer((json_int_t)s.lag_records));
        json_object_set_new(o, "lag_ms", json_integer((json_int_t)s.lag_ms));
    }
    if (s.role == CR_ROLE_LEADER) {
        json_t *list = json_array();
        for (uint32_t i = 0; i < s.standbys; i++)
            json_array_append_new(
                list, json_pack("{s:s, s:I, s:I, s:I}", "address", s.standby[i].name,
                                "acked_lsn", (json_int_t)s.standby[i].acked_lsn, "lag_records",
                                (json_int_t)s.standby[i].lag_records, "lag_ms",
                                (json_int_t)s.standby[i].lag_ms));
        json_object_set_new(o, "standbys", list);
    }
    return o;
}

static void ha_get(void *ctx, const struct cr_http_request *req, struct cr_http_response *resp) {
    (void)ctx, (void)req;
    json_t *o = cr_ha_json();
    cr_http_respond_json(resp, o != NULL ? 200 : 500, o != NULL ? json_dumps(o, JSON_COMPACT) : NULL);
    json_decref(o);
}

/* A standby leads at the highest term it has seen + 1 (a manual failover:
 * the old leader, if it comes back, is of a lower term and its records are
 * refused).  Answered once the journal has applied what it received and the
 * role changed, or 503 after 5 s. */
static void ha_promote(void *ctx, const struct cr_http_request *req,
                       struct cr_http_response *resp) {
    (void)ctx, (void)req;
    struct cr_role_status s;
    cr_role_get(&s);
    if (s.role != CR_ROLE_STANDBY) {
        cr_http_respond_error(resp, 409, "not a standby",
                              s.role == CR_ROLE_LEADER ? "this master leads already"
                                                       : "this master runs without HA");
        return;
    }
    char err[256];
    uint64_t term = s.highest_term + 1;
    int rc = cr_role_request_leader(term, err, sizeof(err));
    if (rc != CR_OK) {
        cr_http_respond_error(resp, rc == CR_ERR_AGAIN ? 503 : 409, "promotion refused", err);
        return;
    }
    for (int i = 0; i < 5000; i++) {
        cr_role_get(&s);
        if (s.role == CR_ROLE_LEADER && s.term == term) break;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    if (s.role != CR_ROLE_LEADER || s.term != term) {
        cr_http_respond_error(resp, 503, "promotion not done", "the journal did not carry "
                              "out the promotion within 5 s; GET /api/v1/ha says where it is");
        return;
    }
    json_t *o = cr_ha_json();
    cr_http_respond_json(resp, o != NULL ? 200 : 500, o != NULL ? json_dumps(o, JSON_COMPACT) : NULL);
    json_decref(o);
}

int cr_ha_routes_register(struct cr_http_front *front) {
    int rc = cr_http_front_add_route(front, "GET", "/api/v1/ha", ha_get, NULL);
    if (rc == CR_OK) rc = cr_http_front_add_route(front, "POST", "/api/v1/ha/promote", ha_promote, NULL);
    if (rc == CR_OK) rc = cr_http_front_require_admin(front, "POST", "/api/v1/ha/promote");
    return rc;
}

/* The HA thread (ha.h): elect.c's rules against etcd, the fence in the gate. */
#include "ha/ha.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/histogram.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "durable/role.h"
#include "ha/etcd.h"

struct cr_ha {
    struct cr_ha_gate *gate;
    struct cr_etcd *etcd;
    struct cr_elect elect;
    char key[CR_ETCD_KEY_MAX];
    char self[CR_ETCD_VALUE_MAX + 1];
    size_t self_len;
    pthread_t thread;
    pthread_mutex_t lock; /* with wake: stop's signal to a sleeping thread */
    pthread_cond_t wake;
    bool stop;
    struct cr_histogram latency;
    char last_error[320];
    /* What the gate says now (to log changes once). */
    bool was_leader;
    int64_t published_term;
    /* What the role contract (durable/role.h) was last told: the term it
     * leads or follows at (0: nothing yet), and whether as leader. */
    int64_t role_term;
    bool role_leader;
};

bool cr_ha_enabled(const struct cr_daemon_config *c) {
    return c->enable_ha || strcmp(c->ha, "etcd") == 0;
}

void cr_ha_leader_key(const char *cluster_id, char *out, size_t size) {
    snprintf(out, size, "/crescent/%s/leader", cluster_id);
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The host of an address ("tcp://H:P", "H:P", "[v6]:P"), into out. */
static void host_of(const char *addr, char *out, size_t size) {
    const char *p = strstr(addr, "://");
    p = p != NULL ? p + 3 : addr;
    const char *colon = strrchr(p, ':');
    size_t n = colon != NULL ? (size_t)(colon - p) : strlen(p);
    snprintf(out, size, "%.*s", (int)n, p);
}

/* addr with its host replaced by host ("" keeps it). */
static void advertise(const char *addr, const char *host, char *out, size_t size) {
    if (host[0] == '\0') {
        snprintf(out, size, "%s", addr);
        return;
    }
    const char *p = strstr(addr, "://");
    size_t scheme = p != NULL ? (size_t)(p + 3 - addr) : 0;
    const char *colon = strrchr(addr + scheme, ':');
    snprintf(out, size, "%.*s%s%s", (int)scheme, addr, host, colon != NULL ? colon : "");
}

static bool reachable_host(const char *addr) {
    char host[CR_CONFIG_ADDRESS_MAX];
    host_of(addr, host, sizeof(host));
    return host[0] != '\0' && strcmp(host, "*") != 0 && strcmp(host, "0.0.0.0") != 0 &&
           strcmp(host, "[::]") != 0 && strcmp(host, "::") != 0;
}

bool cr_ha_config_check(const struct cr_daemon_config *c, char *error, size_t size) {
    if (c->ha[0] != '\0' && strcmp(c->ha, "etcd") != 0) {
        snprintf(error, size, "ha: '%s' is not etcd ('' or no --ha: off)", c->ha);
        return false;
    }
    if (!cr_ha_enabled(c)) return true;
    size_t n = strlen(c->cluster_id);
    if (n == 0 || n > 128 || strspn(c->cluster_id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                   "0123456789_.-") != n) {
        snprintf(error, size, "cluster-id: '%.128s' must be 1 to 128 of A-Z a-z 0-9 _ . -",
                 c->cluster_id);
        return false;
    }
    struct cr_etcd *probe = NULL;
    char why[300];
    if (c->etcd_endpoints[0] != '\0' &&
        cr_etcd_open(c->etcd_endpoints, 1000, &probe, why, sizeof(why)) != CR_OK) {
        snprintf(error, size, "etcd-endpoints: %s", why);
        return false;
    }
    cr_etcd_close(probe);
    return true;
}

/* What only a starting crescentd needs (--print-config resolves without). */
static bool start_check(const struct cr_daemon_config *c, char *error, size_t size) {
    if (c->etcd_endpoints[0] == '\0') {
        snprintf(error, size, "--ha etcd needs --etcd-endpoints 'HOST:PORT;HOST:PORT'");
        return false;
    }
    const char *addrs[] = {c->rpc_address, c->http_address};
    for (size_t i = 0; i < 2 && c->ha_advertise_host[0] == '\0'; i++) {
        if (!reachable_host(addrs[i])) {
            snprintf(error, size, "--ha etcd: '%.200s' names no host a client can reach; give "
                     "--ha-advertise-host HOST", addrs[i]);
            return false;
        }
    }
    return true;
}

/* This node's addresses as the leader key's value. */
static bool self_value(struct cr_ha *ha, const struct cr_daemon_config *c) {
    const char *h = c->ha_advertise_host;
    char buf[CR_CONFIG_ADDRESS_MAX + 64], node[300], hostname[256] = "";
    json_t *v = json_object();
    if (v == NULL) return false;
    advertise(c->rpc_address, h, buf, sizeof(buf));
    json_object_set_new(v, "rpc", json_string(buf));
    if (c->rpc_tcp_address[0] != '\0' && strcmp(c->rpc_tcp_address, "off") != 0) {
        advertise(c->rpc_tcp_address, h, buf, sizeof(buf));
        json_object_set_new(v, "native", json_string(buf));
    }
    if (c->mooncake_rpc_address[0] != '\0') {
        advertise(c->mooncake_rpc_address, h, buf, sizeof(buf));
        json_object_set_new(v, "mooncake", json_string(buf));
    }
    advertise(c->http_address, h, buf, sizeof(buf));
    json_object_set_new(v, "http", json_string(buf));
    advertise(c->event_address, h, buf, sizeof(buf));
    json_object_set_new(v, "event", json_string(buf));
    advertise(c->replay_address, h, buf, sizeof(buf));
    json_object_set_new(v, "replay", json_string(buf));
    if (c->replication_address[0] != '\0') { /* where standbys stream the log from */
        advertise(c->replication_address, h, buf, sizeof(buf));
        json_object_set_new(v, "replication", json_string(buf));
    }
    gethostname(hostname, sizeof(hostname) - 1);
    snprintf(node, sizeof(node), "%s/%d", hostname, (int)getpid());
    json_object_set_new(v, "node", json_string(node));
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(v);
    if (text == NULL || strlen(text) > CR_ETCD_VALUE_MAX) {
        free(text);
        return false;
    }
    ha->self_len = strlen(text);
    memcpy(ha->self, text, ha->self_len + 1);
    free(text);
    return true;
}

static void drive_role(struct cr_ha *ha);

/* Moves the fence and the view to what the election says now.  A role
 * change is logged once. */
static void publish(struct cr_ha *ha) {
    struct cr_elect *e = &ha->elect;
    bool leader = e->role == CR_ELECT_LEADER;
    atomic_store_explicit(&ha->gate->writable_until_ms, leader ? e->writable_until_ms : 0,
                          memory_order_release);
    atomic_store_explicit(&ha->gate->term, e->term, memory_order_release);
    struct cr_etcd_stats s = cr_etcd_stats(ha->etcd);
    uint64_t now = now_ms();
    pthread_mutex_lock(&ha->gate->lock);
    struct cr_ha_view *v = &ha->gate->view;
    v->leader = leader;
    v->term = e->term;
    snprintf(v->self, sizeof(v->self), "%s", ha->self);
    if (leader) snprintf(v->leader_value, sizeof(v->leader_value), "%s", ha->self);
    else if (e->leader.found) snprintf(v->leader_value, sizeof(v->leader_value), "%s", e->leader.value);
    else v->leader_value[0] = '\0';
    snprintf(v->etcd_endpoint, sizeof(v->etcd_endpoint), "%s", cr_etcd_current(ha->etcd));
    snprintf(v->last_error, sizeof(v->last_error), "%s", ha->last_error);
    v->lease_ttl_ms = e->ttl_ms;
    v->writable_for_ms = leader && e->writable_until_ms > now ? e->writable_until_ms - now : 0;
    v->elect = e->stats;
    v->etcd_requests = s.requests;
    v->etcd_errors = s.errors;
    v->etcd_failovers = s.failovers;
    memcpy(v->etcd_latency_buckets, ha->latency.buckets, sizeof(v->etcd_latency_buckets));
    v->etcd_latency_count = ha->latency.count;
    v->etcd_latency_sum_ns = ha->latency.sum_ns;
    pthread_mutex_unlock(&ha->gate->lock);
    if (leader != ha->was_leader || (leader && e->term != ha->published_term)) {
        if (leader)
            CR_INFO("ha", "leader of term %lld (etcd lease %lld, TTL %llu s)", (long long)e->term,
                    (long long)e->lease, (unsigned long long)(e->ttl_ms / 1000));
        else
            CR_WARN("ha", "stepped down from term %lld: no call is answered until re-elected",
                    (long long)ha->published_term);
    }
    if (!leader && e->leader.found && e->term != ha->published_term)
        CR_INFO("ha", "standby of term %lld: the leader is %s", (long long)e->term, e->leader.value);
    ha->was_leader = leader;
    ha->published_term = e->term;
    drive_role(ha);
}

/* Tells the role contract (durable/role.h) what the election decided, once
 * per change: lead at the term won, or follow the leader's replication
 * address at its term.  A request the journal cannot take yet is asked
 * again at the next step.  Without a known leader (or one that names no
 * replication address) there is nothing to follow: the gate alone refuses
 * mutating calls then. */
static void drive_role(struct cr_ha *ha) {
    struct cr_elect *e = &ha->elect;
    bool leader = e->role == CR_ELECT_LEADER;
    if (e->term == ha->role_term && leader == ha->role_leader) return;
    char err[256] = "";
    int rc = CR_OK;
    if (leader) {
        rc = cr_role_request_leader((uint64_t)e->term, err, sizeof(err));
    } else {
        /* A leader of an older term is fenced by the contract too. */
        if (e->term > 0) cr_role_see_term((uint64_t)e->term);
        if (!e->leader.found || strcmp(e->leader.value, ha->self) == 0) return;
        json_t *v = json_loads(e->leader.value, 0, NULL);
        const char *addr = json_string_value(json_object_get(v, "replication"));
        if (addr != NULL && addr[0] != '\0')
            rc = cr_role_request_follow(addr, (uint64_t)e->term, err, sizeof(err));
        json_decref(v);
        if (addr == NULL) return;
    }
    if (rc == CR_ERR_AGAIN) return; /* the journal is not running yet */
    if (rc != CR_OK)
        CR_WARN("ha", "the store master refused to %s term %lld: %s", leader ? "lead at" : "follow at",
                (long long)e->term, err);
    ha->role_term = e->term;
    ha->role_leader = leader;
}

/* Notes a failed request (the election counts it too). */
static void failed(struct cr_ha *ha, int rc, const char *err) {
    if (rc == CR_OK) return;
    if (strcmp(ha->last_error, err) != 0) CR_WARN("ha", "%s", err);
    snprintf(ha->last_error, sizeof(ha->last_error), "%s", err);
}

static void observed_latency(struct cr_ha *ha, int rc) {
    if (rc == CR_OK) cr_histogram_observe(&ha->latency, cr_etcd_stats(ha->etcd).last_latency_ns);
}

/* Sleeps until wake_ms or stop.  Returns false on stop. */
static bool sleep_until(struct cr_ha *ha, uint64_t wake_ms) {
    pthread_mutex_lock(&ha->lock);
    while (!ha->stop) {
        uint64_t now = now_ms();
        if (now >= wake_ms) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (wake_ms - now) * 1000000u;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&ha->wake, &ha->lock, &ts);
    }
    bool go_on = !ha->stop;
    pthread_mutex_unlock(&ha->lock);
    return go_on;
}

static bool stopping(struct cr_ha *ha) {
    pthread_mutex_lock(&ha->lock);
    bool s = ha->stop;
    pthread_mutex_unlock(&ha->lock);
    return s;
}

/* One step of the election: ask, do, report. */
static void step(struct cr_ha *ha) {
    struct cr_elect *e = &ha->elect;
    char err[300] = "";
    uint64_t wake = 0, sent = now_ms();
    enum cr_elect_action act = cr_elect_next(e, sent, &wake);
    publish(ha); /* a deadline passed in next() closes the gate at once */
    int rc = CR_OK;
    switch (act) {
    case CR_ELECT_WAIT:
        sleep_until(ha, wake);
        return;
    case CR_ELECT_GRANT: {
        int64_t id = 0, ttl = 0;
        rc = cr_etcd_grant(ha->etcd, cr_elect_ttl_s(e), &id, &ttl, err, sizeof(err));
        cr_elect_granted(e, sent, rc == CR_OK, id, ttl);
        break;
    }
    case CR_ELECT_CREATE: {
        bool created = false;
        int64_t rev = 0;
        struct cr_etcd_kv holder;
        rc = cr_etcd_create(ha->etcd, ha->key, ha->self, ha->self_len, e->lease, &created, &rev,
                            &holder, err, sizeof(err));
        cr_elect_created(e, sent, rc == CR_OK, created, rev, &holder);
        break;
    }
    case CR_ELECT_KEEPALIVE: {
        int64_t ttl = 0;
        rc = cr_etcd_keepalive(ha->etcd, e->lease, &ttl, err, sizeof(err));
        cr_elect_renewed(e, sent, rc == CR_OK, ttl);
        break;
    }
    case CR_ELECT_OBSERVE: {
        int64_t rev = 0;
        struct cr_etcd_kv kv;
        rc = cr_etcd_get(ha->etcd, ha->key, &rev, &kv, err, sizeof(err));
        cr_elect_observed(e, now_ms(), rc == CR_OK, &kv);
        if (rc == CR_OK && e->role == CR_ELECT_STANDBY && e->leader.found && !e->want_create) {
            publish(ha);
            uint64_t now = now_ms();
            bool changed = false;
            if (wake > now) {
                observed_latency(ha, rc);
                rc = cr_etcd_watch(ha->etcd, ha->key, rev + 1, (uint32_t)(wake - now), &changed,
                                   err, sizeof(err));
                if (rc != CR_OK) sleep_until(ha, wake); /* no watch: read again at the tick */
            }
        }
        break;
    }
    }
    observed_latency(ha, rc);
    failed(ha, rc, err);
    if (rc == CR_OK) ha->last_error[0] = '\0';
    publish(ha);
}

static void *ha_main(void *arg) {
    struct cr_ha *ha = arg;
    pthread_setname_np(pthread_self(), "ha");
    while (!stopping(ha)) step(ha);
    return NULL;
}

int cr_ha_start(const struct cr_daemon_config *c, struct cr_ha_gate *gate, struct cr_ha **out,
                char *error, size_t size) {
    assert(c != NULL && gate != NULL && out != NULL);
    if (!start_check(c, error, size)) return CR_ERR_INVALID_PARAMS;
    struct cr_ha *ha = calloc(1, sizeof(*ha));
    if (ha == NULL) return CR_ERR_NOMEM;
    ha->gate = gate;
    cr_ha_leader_key(c->cluster_id, ha->key, sizeof(ha->key));
    uint64_t ttl_ms = (uint64_t)c->ha_lease_ttl * 1000u;
    cr_elect_init(&ha->elect, ttl_ms, now_ms());
    int rc = cr_etcd_open(c->etcd_endpoints, (uint32_t)ha->elect.tick_ms, &ha->etcd, error, size);
    if (rc != CR_OK) {
        free(ha);
        return rc;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&ha->lock, NULL);
    pthread_cond_init(&ha->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (!self_value(ha, c)) {
        snprintf(error, size, "--ha etcd: this crescentd's addresses do not fit %u bytes of JSON",
                 CR_ETCD_VALUE_MAX);
        rc = CR_ERR_INVALID_PARAMS;
    } else if (pthread_create(&ha->thread, NULL, ha_main, ha) != 0) {
        snprintf(error, size, "cannot start the HA thread: %s", strerror(errno));
        rc = CR_ERR_IO;
    }
    if (rc != CR_OK) {
        cr_etcd_close(ha->etcd);
        pthread_cond_destroy(&ha->wake);
        pthread_mutex_destroy(&ha->lock);
        free(ha);
        return rc;
    }
    CR_INFO("ha", "electing on etcd %s, key %s, lease TTL %u s", c->etcd_endpoints, ha->key,
            c->ha_lease_ttl);
    *out = ha;
    return CR_OK;
}

void cr_ha_stop(struct cr_ha *ha) {
    if (ha == NULL) return;
    pthread_mutex_lock(&ha->lock);
    ha->stop = true;
    pthread_cond_signal(&ha->wake);
    pthread_mutex_unlock(&ha->lock);
    pthread_join(ha->thread, NULL);
    atomic_store_explicit(&ha->gate->writable_until_ms, 0, memory_order_release);
    if (ha->elect.role == CR_ELECT_LEADER) {
        char err[300];
        /* The gate is closed: now a successor may take over at once. */
        if (cr_etcd_delete_if(ha->etcd, ha->key, ha->elect.term, err, sizeof(err)) != CR_OK ||
            cr_etcd_revoke(ha->etcd, ha->elect.lease, err, sizeof(err)) != CR_OK)
            CR_WARN("ha", "could not resign (a standby takes over when the lease ends): %s", err);
        else
            CR_INFO("ha", "resigned the leadership of term %lld", (long long)ha->elect.term);
    }
    cr_etcd_close(ha->etcd);
    pthread_cond_destroy(&ha->wake);
    pthread_mutex_destroy(&ha->lock);
    free(ha);
}

/* The master's role (role.h): process-wide state read by any thread, and
 * the requests that change it, carried out by the journal actor. */
#include "durable/role.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msgs/durable_msgs.h"
#include "runtime/runtime.h"

/* The role and the fencing flag are read on every mutating call (relaxed:
 * a call that races a step-down is ordered by the journal's message, which
 * segments handles before any later call).  The leader's address changes
 * rarely and is copied under a lock. */
static _Atomic int g_role = CR_ROLE_NONE;
static _Atomic bool g_fenced = false;
static _Atomic uint64_t g_term = 0;
static _Atomic uint64_t g_highest_term = 0;
static _Atomic uint64_t g_applied_lsn = 0;
static _Atomic uint64_t g_lag_records = 0;
static _Atomic uint64_t g_lag_ms = 0;
static _Atomic bool g_connected = false;
static _Atomic uint32_t g_standbys = 0;
static _Atomic uint64_t g_log_bytes = 0;
static _Atomic uint64_t g_snapshot_lsn = 0;
static _Atomic uint32_t g_diverged_kept = 0;
static _Atomic uint64_t g_snapshot_unix_ms = 0;
static _Atomic(struct cr_actor *) g_journal = NULL;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_leader[CR_ROLE_ADDR_MAX];
static struct cr_role_standby g_list[CR_ROLE_STANDBYS_MAX]; /* under g_lock */
static uint32_t g_list_count;

const char *cr_role_name(enum cr_role role) {
    switch (role) {
    case CR_ROLE_LEADER: return "leader";
    case CR_ROLE_STANDBY: return "standby";
    case CR_ROLE_NONE: break;
    }
    return "none";
}

void cr_role_attach(struct cr_actor *journal) {
    atomic_store_explicit(&g_journal, journal, memory_order_release);
}

static int request(const struct cr_role_request *req, char *err, size_t err_len) {
    struct cr_actor *to = atomic_load_explicit(&g_journal, memory_order_acquire);
    if (to == NULL) {
        snprintf(err, err_len, "crescentd's journal is not running (starting or stopping)");
        return CR_ERR_AGAIN;
    }
    struct cr_role_request *copy = malloc(sizeof(*copy));
    if (copy == NULL) {
        snprintf(err, err_len, "no memory for a role request");
        return CR_ERR_NOMEM;
    }
    *copy = *req;
    struct cr_msg msg = {.type = CR_MSG_ROLE_REQUEST};
    msg.body.ptr[0] = copy;
    int rc = cr_send(to, &msg);
    if (rc != CR_OK) {
        free(copy);
        snprintf(err, err_len, "crescentd's journal took no request: %s", cr_strerror(rc));
    }
    return rc;
}

int cr_role_request_leader(uint64_t term, char *err, size_t err_len) {
    assert(err != NULL && err_len > 0);
    uint64_t highest = atomic_load(&g_highest_term);
    if (term < highest) {
        snprintf(err, err_len, "term %llu is below the highest term seen (%llu): a newer "
                 "leader exists", (unsigned long long)term, (unsigned long long)highest);
        return CR_ERR_INVALID_PARAMS;
    }
    struct cr_role_request req = {.kind = CR_ROLE_REQUEST_LEAD, .term = term};
    return request(&req, err, err_len);
}

int cr_role_request_follow(const char *addr, uint64_t term, char *err, size_t err_len) {
    assert(err != NULL && err_len > 0);
    if (addr == NULL || addr[0] == '\0' || strlen(addr) >= CR_ROLE_ADDR_MAX) {
        snprintf(err, err_len, "a leader's replication address is host:port, under %u bytes",
                 CR_ROLE_ADDR_MAX);
        return CR_ERR_INVALID_PARAMS;
    }
    /* Refuse writes now, not once the journal gets to it: a leader told to
     * step down must not acknowledge another call. */
    (void)cr_role_see_term(term);
    if (atomic_load(&g_role) == CR_ROLE_LEADER) atomic_store(&g_fenced, true);
    struct cr_role_request req = {.kind = CR_ROLE_REQUEST_FOLLOW, .term = term};
    snprintf(req.addr, sizeof(req.addr), "%s", addr);
    return request(&req, err, err_len);
}

void cr_role_get(struct cr_role_status *out) {
    assert(out != NULL);
    memset(out, 0, sizeof(*out));
    out->role = (enum cr_role)atomic_load(&g_role);
    out->fenced = atomic_load(&g_fenced);
    out->term = atomic_load(&g_term);
    out->highest_term = atomic_load(&g_highest_term);
    out->applied_lsn = atomic_load(&g_applied_lsn);
    out->lag_records = atomic_load(&g_lag_records);
    out->lag_ms = atomic_load(&g_lag_ms);
    out->connected = atomic_load(&g_connected);
    out->standbys = atomic_load(&g_standbys);
    out->log_bytes = atomic_load(&g_log_bytes);
    out->snapshot_lsn = atomic_load(&g_snapshot_lsn);
    out->snapshot_unix_ms = atomic_load(&g_snapshot_unix_ms);
    out->diverged_kept = atomic_load(&g_diverged_kept);
    pthread_mutex_lock(&g_lock);
    memcpy(out->leader, g_leader, sizeof(out->leader));
    uint32_t n = g_list_count < out->standbys ? g_list_count : out->standbys;
    memcpy(out->standby, g_list, n * sizeof(g_list[0]));
    out->standbys = n;
    pthread_mutex_unlock(&g_lock);
}

bool cr_role_accepts_writes(void) {
    int role = atomic_load_explicit(&g_role, memory_order_relaxed);
    if (role == CR_ROLE_STANDBY) return false;
    return !atomic_load_explicit(&g_fenced, memory_order_relaxed);
}

void cr_role_refusal(char *out, size_t size) {
    struct cr_role_status s;
    cr_role_get(&s);
    if (s.role == CR_ROLE_LEADER)
        snprintf(out, size, "not the leader: this master's term %llu was superseded by term "
                 "%llu; ask the new leader", (unsigned long long)s.term,
                 (unsigned long long)s.highest_term);
    else if (s.leader[0] != '\0')
        snprintf(out, size, "not the leader; leader is %s (this master is a standby)",
                 s.leader);
    else
        snprintf(out, size, "not the leader; no leader known yet (this master is a standby)");
}

void cr_role_set(enum cr_role role, uint64_t term, const char *leader) {
    (void)cr_role_see_term(term);
    if (leader != NULL) {
        pthread_mutex_lock(&g_lock);
        snprintf(g_leader, sizeof(g_leader), "%s", leader);
        pthread_mutex_unlock(&g_lock);
    }
    atomic_store(&g_term, term);
    atomic_store(&g_fenced, false);
    atomic_store(&g_role, (int)role);
    if (role != CR_ROLE_STANDBY) cr_role_note_lag(0, 0, false);
    if (role != CR_ROLE_LEADER) atomic_store(&g_standbys, 0);
}

uint64_t cr_role_see_term(uint64_t term) {
    uint64_t seen = atomic_load(&g_highest_term);
    while (term > seen && !atomic_compare_exchange_weak(&g_highest_term, &seen, term)) {
    }
    if (term > seen) seen = term;
    if (atomic_load(&g_role) == CR_ROLE_LEADER && atomic_load(&g_term) < seen)
        atomic_store(&g_fenced, true);
    return seen;
}

void cr_role_note_applied(uint64_t lsn) { atomic_store_explicit(&g_applied_lsn, lsn, memory_order_relaxed); }

void cr_role_note_lag(uint64_t records, uint64_t ms, bool connected) {
    atomic_store_explicit(&g_lag_records, records, memory_order_relaxed);
    atomic_store_explicit(&g_lag_ms, ms, memory_order_relaxed);
    atomic_store_explicit(&g_connected, connected, memory_order_relaxed);
}

void cr_role_note_standbys(uint32_t count) {
    atomic_store_explicit(&g_standbys, count, memory_order_relaxed);
}

void cr_role_note_standby_list(const struct cr_role_standby *list, uint32_t count) {
    if (count > CR_ROLE_STANDBYS_MAX) count = CR_ROLE_STANDBYS_MAX;
    pthread_mutex_lock(&g_lock);
    memcpy(g_list, list, count * sizeof(*list));
    g_list_count = count;
    pthread_mutex_unlock(&g_lock);
    cr_role_note_standbys(count);
}

void cr_role_note_storage(uint64_t log_bytes, uint64_t snapshot_lsn, uint64_t snapshot_unix_ms) {
    atomic_store_explicit(&g_log_bytes, log_bytes, memory_order_relaxed);
    atomic_store_explicit(&g_snapshot_lsn, snapshot_lsn, memory_order_relaxed);
    atomic_store_explicit(&g_snapshot_unix_ms, snapshot_unix_ms, memory_order_relaxed);
}

void cr_role_note_diverged(uint32_t kept) {
    atomic_store_explicit(&g_diverged_kept, kept, memory_order_relaxed);
}

void cr_role_reset(void) {
    atomic_store(&g_role, CR_ROLE_NONE);
    atomic_store(&g_fenced, false);
    atomic_store(&g_term, 0);
    atomic_store(&g_highest_term, 0);
    atomic_store(&g_applied_lsn, 0);
    cr_role_note_lag(0, 0, false);
    atomic_store(&g_standbys, 0);
    pthread_mutex_lock(&g_lock);
    g_leader[0] = '\0';
    pthread_mutex_unlock(&g_lock);
}

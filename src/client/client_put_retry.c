/* A put refused for room while offloads make it (crescent/client.h,
 * cr_client_set_put_retry_ms; docs/tiers.md, "A put that finds no room").
 *
 * crescentd refuses a PutStart CR_ERR_NO_AVAILABLE_HANDLE when memory is full
 * of objects its eviction keeps on a store server's SSD rather than drops:
 * the refusal starts their offloads, and memory is freed when each server
 * confirms its file, a ping later.  So the refusal is transient while an SSD
 * tier takes a churn, and the put is started again after a short, growing
 * wait, up to a deadline; every other error goes to the caller at once.  The
 * waits sleep the caller's thread (the client is used from one thread at a
 * time, and its puts are synchronous anyway). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"

#define RETRY_MS_MAX 3600000
#define BACKOFF_FIRST_MS 1
#define BACKOFF_MAX_MS 64

int cr_client_set_put_retry_ms(cr_client *c, int ms) {
    if (ms < 0 || ms > RETRY_MS_MAX)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "put retry of %d ms is outside 0..%d",
                              ms, RETRY_MS_MAX);
    c->put_retry.deadline_ms = ms;
    return CR_OK;
}

/* The deadline in force: set, else $CRESCENT_PUT_RETRY_MS (read once; a bad
 * value is refused at the first put that reads it), else the default. */
static int deadline_ms(cr_client *c, int *out) {
    if (c->put_retry.deadline_ms < 0) {
        const char *env = getenv("CRESCENT_PUT_RETRY_MS");
        long ms = CR_CLIENT_PUT_RETRY_MS_DEFAULT;
        if (env != NULL && env[0] != '\0') {
            char *end = NULL;
            errno = 0;
            ms = strtol(env, &end, 10);
            if (errno != 0 || end == env || *end != '\0' || ms < 0 || ms > RETRY_MS_MAX)
                return cr_client_fail(c, CR_ERR_INVALID_PARAMS,
                                      "CRESCENT_PUT_RETRY_MS='%s': want 0..%d milliseconds", env,
                                      RETRY_MS_MAX);
        }
        c->put_retry.deadline_ms = (int)ms;
    }
    *out = c->put_retry.deadline_ms;
    return CR_OK;
}

void cr_client_put_retry_stats(cr_client *c, struct cr_put_retry_stats *out) {
    int ms = 0;
    if (deadline_ms(c, &ms) != CR_OK) ms = CR_CLIENT_PUT_RETRY_MS_DEFAULT;
    *out = c->put_retry;
    out->deadline_ms = ms;
}

/* Waits before try `round` (1, 2, ...) when the deadline, counted from
 * started_ms, leaves time for it; false when it does not. */
static bool wait_for_room(cr_client *c, int64_t started_ms, int limit_ms, unsigned round) {
    int64_t left = started_ms + limit_ms - c->clock_ms(c->clock_ctx);
    if (left <= 0) return false;
    int64_t wait = round > 7 ? BACKOFF_MAX_MS : (int64_t)BACKOFF_FIRST_MS << (round - 1);
    if (wait > BACKOFF_MAX_MS) wait = BACKOFF_MAX_MS;
    if (wait > left) wait = left;
    struct timespec ts = {.tv_sec = wait / 1000, .tv_nsec = (long)(wait % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    c->put_retry.retries++;
    return true;
}

int cr_client_put_start_retrying(cr_client *c, const char *tenant,
                                 const struct cr_put_item *item, struct cr_replica_list *out) {
    int rc = cr_client_put_start(c, tenant, item, out);
    int limit = 0;
    if (rc != CR_ERR_NO_AVAILABLE_HANDLE || deadline_ms(c, &limit) != CR_OK || limit == 0)
        return rc;
    c->put_retry.puts_retried++;
    int64_t started = c->clock_ms(c->clock_ctx);
    for (unsigned round = 1; rc == CR_ERR_NO_AVAILABLE_HANDLE; round++) {
        if (!wait_for_room(c, started, limit, round)) {
            c->put_retry.gave_up++;
            return rc; /* the master's refusal, as without the retry */
        }
        rc = cr_client_put_start(c, tenant, item, out);
    }
    c->put_retry.recovered += rc == CR_OK;
    return rc;
}

int cr_client_batch_put(cr_client *c, const char *tenant, struct cr_put_data *items,
                        size_t count) {
    int rc = cr_client_batch_put_once(c, tenant, items, count);
    int limit = 0;
    if (rc != CR_OK || deadline_ms(c, &limit) != CR_OK || limit == 0) return rc;
    size_t refused = 0;
    for (size_t i = 0; i < count; i++) refused += items[i].status == CR_ERR_NO_AVAILABLE_HANDLE;
    if (refused == 0) return CR_OK;
    /* The refused items, in order, put again as a batch of their own; their
     * statuses go back to the caller's items after each round. */
    struct cr_put_data *again = malloc(refused * sizeof(*again));
    size_t *at = malloc(refused * sizeof(*at));
    if (again == NULL || at == NULL) {
        free(again), free(at);
        return CR_OK; /* the items keep their refusal */
    }
    c->put_retry.puts_retried += refused;
    int64_t started = c->clock_ms(c->clock_ctx);
    for (unsigned round = 1; refused > 0; round++) {
        if (!wait_for_room(c, started, limit, round)) {
            c->put_retry.gave_up += refused;
            break;
        }
        size_t n = 0;
        for (size_t i = 0; i < count; i++)
            if (items[i].status == CR_ERR_NO_AVAILABLE_HANDLE) {
                again[n] = items[i];
                at[n++] = i;
            }
        char error[sizeof(c->error)];
        memcpy(error, c->error, sizeof(error));
        if (cr_client_batch_put_once(c, tenant, again, n) != CR_OK) {
            memcpy(c->error, error, sizeof(error)); /* the first round's, with its items' */
            c->put_retry.gave_up += refused;
            break; /* the RPC failed: the items keep their refusal */
        }
        refused = 0;
        for (size_t k = 0; k < n; k++) {
            items[at[k]].status = again[k].status;
            refused += again[k].status == CR_ERR_NO_AVAILABLE_HANDLE;
            c->put_retry.recovered += again[k].status == CR_OK;
        }
    }
    free(again), free(at);
    return CR_OK;
}

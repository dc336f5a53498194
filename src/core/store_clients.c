/* Store master core: clients (their liveness, secrets, and the segments they
 * own, unmounted when they expire). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/store_internal.h"
#include "crescent/error.h"

static uint32_t client_slot(const cr_store *store, const struct cr_uuid *client, bool *found) {
    assert(client != NULL && found != NULL);
    uint32_t i = (uint32_t)XXH3_64bits(client->b, sizeof(client->b)) & store->clients_mask;
    while (store->clients[i].in_use) {
        if (cr_uuid_equal(&store->clients[i].id, client)) {
            *found = true;
            return i;
        }
        i = (i + 1) & store->clients_mask;
    }
    *found = false;
    return i;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void client_delete(cr_store *store, uint32_t hole) {
    assert(store->clients[hole].in_use);
    uint32_t mask = store->clients_mask;
    uint32_t i = hole;
    for (;;) {
        i = (i + 1) & mask;
        struct cr_store_client *c = &store->clients[i];
        if (!c->in_use) break;
        uint32_t home = (uint32_t)XXH3_64bits(c->id.b, sizeof(c->id.b)) & mask;
        /* Move c into the hole unless its home lies cyclically in (hole, i]. */
        bool stays = (hole <= i) ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays) continue;
        store->clients[hole] = *c;
        hole = i;
    }
    store->clients[hole] = (struct cr_store_client){0}; /* its secret goes with it */
    store->client_count--;
}

bool cr_store_client_known(const cr_store *store, const struct cr_uuid *client) {
    bool found;
    client_slot(store, client, &found);
    return found;
}

int cr_store_client_touch(cr_store *store, const struct cr_uuid *client, uint64_t now_ms) {
    assert(store != NULL && client != NULL);
    bool found;
    uint32_t i = client_slot(store, client, &found);
    if (!found) {
        if (store->client_count == store->cfg.max_clients)
            return cr_store_fail(store, CR_ERR_NOMEM, "client table full (max_clients)");
        store->clients[i] =
            (struct cr_store_client){.id = *client, .conn = store->caller_conn, .in_use = true};
        store->client_count++;
    }
    if (now_ms > store->clients[i].last_seen_ms) store->clients[i].last_seen_ms = now_ms;
    store->clients[i].awaiting = false;
    return CR_OK;
}

/* Only a client the store knows (it mounted or put) is recorded: a Ping
 * from an unknown id has nothing to keep alive, and 4,200 made-up ids used
 * to fill the client table for everyone.  *was_known tells a forgotten store
 * server to remount (which makes it known again). */
int cr_store_client_ping(cr_store *store, const struct cr_uuid *client, uint64_t now_ms,
                         bool *was_known) {
    bool known = cr_store_client_known(store, client);
    if (was_known != NULL) *was_known = known;
    if (!known) return CR_OK;
    return cr_store_client_touch(store, client, now_ms);
}

void cr_store_client_set_awaiting(cr_store *store, const struct cr_uuid *client) {
    assert(store != NULL && client != NULL);
    bool found;
    uint32_t i = client_slot(store, client, &found);
    if (found) store->clients[i].awaiting = true;
}

bool cr_store_client_awaiting(const cr_store *store, const struct cr_uuid *client) {
    assert(store != NULL && client != NULL);
    bool found;
    uint32_t i = client_slot(store, client, &found);
    return found && store->clients[i].awaiting;
}

int cr_store_client_issue_secret(cr_store *store, const struct cr_uuid *client,
                                 const uint8_t secret[CR_STORE_CLIENT_SECRET_BYTES],
                                 bool *issued) {
    assert(store != NULL && client != NULL && secret != NULL && issued != NULL);
    bool found;
    struct cr_store_client *c = &store->clients[client_slot(store, client, &found)];
    *issued = found && !c->has_secret;
    if (!*issued) return CR_OK;
    memcpy(c->secret, secret, CR_STORE_CLIENT_SECRET_BYTES);
    c->has_secret = true;
    return CR_OK;
}

void cr_store_set_caller(cr_store *store, uint64_t conn) {
    assert(store != NULL);
    store->caller_conn = conn;
}

bool cr_store_client_wants_secret(const cr_store *store, const struct cr_uuid *client) {
    assert(store != NULL && client != NULL);
    bool found;
    uint32_t i = client_slot(store, client, &found);
    return found && !store->clients[i].has_secret &&
           store->clients[i].conn == store->caller_conn;
}

int cr_store_client_check_secret(cr_store *store, const struct cr_uuid *client,
                                 const uint8_t *secret, size_t len) {
    assert(store != NULL && client != NULL);
    bool found;
    const struct cr_store_client *c = &store->clients[client_slot(store, client, &found)];
    if (!found || !c->has_secret) return CR_OK;
    char hex[2 * sizeof(client->b) + 1];
    for (size_t i = 0; i < sizeof(client->b); i++)
        snprintf(hex + 2 * i, 3, "%02x", client->b[i]);
    if (secret == NULL || len == 0)
        return cr_store_fail(store, CR_ERR_ILLEGAL_CLIENT,
                             "client id %s is registered with a secret; this call carries none: "
                             "use the client that registered it (or pass its "
                             "CRESCENT_CLIENT_SECRET), or wait for its TTL to expire",
                             hex);
    /* Constant time: every byte is compared whatever the first difference. */
    uint8_t diff = len == CR_STORE_CLIENT_SECRET_BYTES ? 0 : 1;
    for (size_t i = 0; i < CR_STORE_CLIENT_SECRET_BYTES; i++)
        diff |= (uint8_t)(c->secret[i] ^ (i < len ? secret[i] : 0));
    if (diff == 0) return CR_OK;
    return cr_store_fail(store, CR_ERR_ILLEGAL_CLIENT,
                         "client id %s is registered with another secret: use the client that "
                         "registered it (or its CRESCENT_CLIENT_SECRET), or wait for its TTL "
                         "to expire",
                         hex);
}

static void client_unmount_all(cr_store *store, const struct cr_uuid *client) {
    for (uint32_t i = 0; i < store->mounted_count;) {
        uint32_t id = store->mounted[i];
        if (!cr_uuid_equal(&store->segments[id].owner, client)) {
            i++;
            continue;
        }
        /* Unmount swaps the last mounted id into position i: look at i again. */
        int rc = cr_store_unmount_segment(store, NULL, store->segments[id].name, NULL);
        assert(rc == CR_OK);
        (void)rc;
    }
}

uint32_t cr_store_expire_clients(cr_store *store, uint64_t now_ms) {
    return cr_store_expire_clients_each(store, now_ms, NULL, NULL);
}

uint32_t cr_store_expire_clients_each(cr_store *store, uint64_t now_ms,
                                      void (*gone)(void *arg, const struct cr_uuid *client),
                                      void *arg) {
    assert(store != NULL);
    uint32_t expired = 0;
    for (uint32_t i = 0; i <= store->clients_mask;) {
        struct cr_store_client *c = &store->clients[i];
        if (!c->in_use || now_ms < c->last_seen_ms ||
            now_ms - c->last_seen_ms <= store->cfg.client_live_ttl_ms) {
            i++;
            continue;
        }
        struct cr_uuid id = c->id;
        client_unmount_all(store, &id);
        cr_store_obj_revoke_client(store, &id);
        client_delete(store, i); /* may shift a later client into slot i */
        if (gone != NULL) gone(arg, &id);
        expired++;
    }
    store->counters.clients_expired += expired;
    return expired;
}


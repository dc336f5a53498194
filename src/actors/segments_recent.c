/* The keys of the last objects put, newest first, for the dashboard's
 * "Recent objects" (GET /api/v1/objects?order=recent): the store files
 * objects by key hash, so without this the list could only be the first
 * keys of the table.  A ring of RECENT_MAX (tenant, key) copies, written at
 * each STORE event (an object's first PutEnd): a memcpy of the key per put,
 * no allocation (the ring is allocated once, ~RECENT_MAX x 4.4 KiB). */
#include "actors/segments_recent.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/store.h"
#include "http/store_routes.h"

struct recent_key {
    uint32_t key_len;
    char tenant[CR_MASTER_TENANT_MAX + 1];
    char key[CR_STORE_KEY_LEN_MAX];
};

struct segments_recent {
    uint32_t next; /* the slot the next put takes */
    uint32_t count;
    struct recent_key keys[SEGMENTS_RECENT_MAX];
};

struct segments_recent *segments_recent_new(void) {
    return calloc(1, sizeof(struct segments_recent));
}

void segments_recent_free(struct segments_recent *r) {
    free(r);
}

void segments_recent_note(struct segments_recent *r, const char *tenant, const char *key,
                          uint32_t key_len) {
    if (r == NULL || key == NULL || key_len > CR_STORE_KEY_LEN_MAX) return;
    struct recent_key *k = &r->keys[r->next];
    size_t t = tenant != NULL ? strnlen(tenant, CR_MASTER_TENANT_MAX) : 0;
    memcpy(k->tenant, tenant != NULL ? tenant : "", t);
    k->tenant[t] = '\0';
    memcpy(k->key, key, key_len);
    k->key_len = key_len;
    r->next = (r->next + 1) % SEGMENTS_RECENT_MAX;
    if (r->count < SEGMENTS_RECENT_MAX) r->count++;
}

int segments_recent_render(const struct segments_recent *r, const cr_store *store,
                           uint64_t now_ms, const struct cr_master_admin_query *q,
                           char **json_out) {
    assert(store != NULL && q != NULL && json_out != NULL);
    const char *tenants[SEGMENTS_RECENT_MAX], *keys[SEGMENTS_RECENT_MAX];
    uint32_t lens[SEGMENTS_RECENT_MAX], n = 0;
    for (uint32_t i = 0; r != NULL && i < r->count; i++) {
        const struct recent_key *k =
            &r->keys[(r->next + SEGMENTS_RECENT_MAX - 1 - i) % SEGMENTS_RECENT_MAX];
        if (q->tenant != NULL && strcmp(q->tenant, k->tenant[0] ? k->tenant : "default") != 0)
            continue;
        tenants[n] = k->tenant, keys[n] = k->key, lens[n] = k->key_len, n++;
    }
    return cr_store_admin_render_keys(store, now_ms, q, tenants, keys, lens, n, json_out);
}

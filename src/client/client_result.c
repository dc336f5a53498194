/* libcrescent's result structs: deep copies out of unpacked protobuf (so the
 * caller never sees protobuf-c types) and the matching free functions. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"

static char *copy_string(const char *s) { return strdup(s != NULL ? s : ""); }

static void free_replica(struct cr_replica *r) {
    for (size_t i = 0; i < r->handle_count; i++) {
        free(r->handles[i].segment_name);
        free(r->handles[i].transport_endpoint);
    }
    free(r->handles);
    memset(r, 0, sizeof(*r));
}

/* Copies one ReplicaInfo; on failure frees what it took and returns NOMEM. */
static int copy_replica(const Crescent__Master__ReplicaInfo *in, struct cr_replica *out) {
    memset(out, 0, sizeof(*out));
    out->status = (enum cr_replica_status)in->status;
    if (in->n_handles == 0) return CR_OK;
    out->handles = calloc(in->n_handles, sizeof(*out->handles));
    if (out->handles == NULL) return CR_ERR_NOMEM;
    for (size_t i = 0; i < in->n_handles; i++) {
        const Crescent__Master__BufHandle *h = in->handles[i];
        struct cr_buf_handle *o = &out->handles[i];
        out->handle_count = i + 1; /* counted before filling: free_replica sees it */
        o->segment_name = copy_string(h->segment_name);
        o->transport_endpoint = copy_string(h->transport_endpoint);
        o->size_bytes = h->size;
        o->buffer = h->buffer;
        o->status = (enum cr_buf_status)h->status;
        if (o->segment_name == NULL || o->transport_endpoint == NULL) {
            free_replica(out);
            return CR_ERR_NOMEM;
        }
    }
    return CR_OK;
}

int cr_client_replicas_from_pb(Crescent__Master__ReplicaInfo *const *infos, size_t count,
                               struct cr_replica_list *out) {
    assert(out != NULL);
    assert(infos != NULL || count == 0);
    memset(out, 0, sizeof(*out)); /* key and status are the caller's to set */
    if (count == 0) return CR_OK;
    out->replicas = calloc(count, sizeof(*out->replicas));
    if (out->replicas == NULL) return CR_ERR_NOMEM;
    for (size_t i = 0; i < count; i++) {
        if (copy_replica(infos[i], &out->replicas[i]) != CR_OK) {
            cr_client_replica_list_free(out);
            return CR_ERR_NOMEM;
        }
        out->count = i + 1;
    }
    return CR_OK;
}

void cr_client_list_extras_from_pb(const Crescent__Master__GetReplicaListResponse *resp,
                                   struct cr_replica_list *out) {
    assert(resp != NULL && out != NULL);
    out->has_checksum = resp->has_checksum_xxh3;
    out->checksum_xxh3 = resp->has_checksum_xxh3 ? resp->checksum_xxh3 : 0;
    out->lease_ttl_ms = resp->has_lease_ttl_ms ? resp->lease_ttl_ms : 0;
}

void cr_client_replica_list_free(struct cr_replica_list *list) {
    if (list == NULL) return;
    for (size_t i = 0; i < list->count; i++) free_replica(&list->replicas[i]);
    free(list->replicas);
    free(list->key);
    memset(list, 0, sizeof(*list));
}

void cr_client_replica_lists_free(struct cr_replica_lists *lists) {
    if (lists == NULL) return;
    for (size_t i = 0; i < lists->count; i++) cr_client_replica_list_free(&lists->lists[i]);
    free(lists->lists);
    memset(lists, 0, sizeof(*lists));
}

void cr_client_status_list_free(struct cr_status_list *list) {
    if (list == NULL) return;
    free(list->statuses);
    memset(list, 0, sizeof(*list));
}

void cr_client_key_list_free(struct cr_key_list *list) {
    if (list == NULL) return;
    for (size_t i = 0; i < list->count; i++) free(list->keys[i]);
    free(list->keys);
    memset(list, 0, sizeof(*list));
}

void cr_client_ips_free(struct cr_client_ips *ips) {
    if (ips == NULL) return;
    for (size_t i = 0; i < ips->count; i++) {
        for (size_t j = 0; j < ips->entries[i].count; j++) free(ips->entries[i].addresses[j]);
        free(ips->entries[i].addresses);
    }
    free(ips->entries);
    memset(ips, 0, sizeof(*ips));
}

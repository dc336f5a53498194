/* libcrescent's result structs: deep copies out of unpacked protobuf (so the
 * caller never sees protobuf-c types) and the matching free functions.  An
 * object's replicas, their handles and the handles' strings are one
 * allocation (list->replicas points to its start): one malloc and one free
 * per object, where a malloc per replica, handle and string were most of a
 * 32-key batch's client time (bench/RESULTS.md). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"

/* Copies `s` (NULL: "") into the block's string area at *at. */
static char *put_string(char **at, const char *s) {
    size_t n = s != NULL ? strlen(s) : 0;
    char *out = *at;
    if (n > 0) memcpy(out, s, n);
    out[n] = '\0';
    *at += n + 1;
    return out;
}

int cr_client_list_block_alloc(size_t replicas, size_t handles, size_t string_bytes,
                               struct cr_client_list_block *out) {
    assert(out != NULL && (replicas > 0 || (handles == 0 && string_bytes == 0)));
    memset(out, 0, sizeof(*out));
    if (replicas == 0) return CR_OK;
    size_t head = replicas * sizeof(struct cr_replica) + handles * sizeof(struct cr_buf_handle);
    uint8_t *block = malloc(head + string_bytes);
    if (block == NULL) return CR_ERR_NOMEM;
    out->replicas = (struct cr_replica *)block;
    out->handles = handles > 0 ? (struct cr_buf_handle *)(out->replicas + replicas) : NULL;
    out->strings = (char *)block + head;
    return CR_OK;
}

int cr_client_replicas_from_pb(Crescent__Master__ReplicaInfo *const *infos, size_t count,
                               struct cr_replica_list *out) {
    assert(out != NULL);
    assert(infos != NULL || count == 0);
    memset(out, 0, sizeof(*out)); /* key and status are the caller's to set */
    size_t handles = 0, string_bytes = 0;
    for (size_t i = 0; i < count; i++) {
        const Crescent__Master__ReplicaInfo *in = infos[i];
        string_bytes += (in->file_path != NULL ? strlen(in->file_path) : 0) + 1;
        string_bytes += (in->endpoint != NULL ? strlen(in->endpoint) : 0) + 1;
        string_bytes += (in->segment_name != NULL ? strlen(in->segment_name) : 0) + 1;
        handles += infos[i]->n_handles;
        for (size_t j = 0; j < infos[i]->n_handles; j++) {
            const Crescent__Master__BufHandle *h = infos[i]->handles[j];
            string_bytes += (h->segment_name != NULL ? strlen(h->segment_name) : 0) + 1;
            string_bytes += (h->transport_endpoint != NULL ? strlen(h->transport_endpoint) : 0) + 1;
        }
    }
    struct cr_client_list_block b;
    if (cr_client_list_block_alloc(count, handles, string_bytes, &b) != CR_OK)
        return CR_ERR_NOMEM;
    struct cr_buf_handle *next = b.handles;
    for (size_t i = 0; i < count; i++) {
        const Crescent__Master__ReplicaInfo *in = infos[i];
        struct cr_replica *r = &b.replicas[i];
        r->status = (enum cr_replica_status)in->status;
        r->medium = in->has_medium ? (enum cr_replica_medium)in->medium : CR_MEDIUM_MEMORY;
        r->file_path = put_string(&b.strings, in->file_path);
        r->endpoint = put_string(&b.strings, in->endpoint);
        r->segment_name = put_string(&b.strings, in->segment_name);
        r->object_size = in->has_object_size ? in->object_size : 0;
        r->position = in->has_position ? in->position : 0;
        r->has_capability = in->has_capability && in->capability.len == CR_CLIENT_CAPABILITY_BYTES;
        if (r->has_capability) memcpy(r->capability, in->capability.data, CR_CLIENT_CAPABILITY_BYTES);
        r->handle_count = in->n_handles;
        r->handles = in->n_handles > 0 ? next : NULL;
        for (size_t j = 0; j < in->n_handles; j++, next++) {
            const Crescent__Master__BufHandle *h = in->handles[j];
            next->segment_name = put_string(&b.strings, h->segment_name);
            next->transport_endpoint = put_string(&b.strings, h->transport_endpoint);
            next->size_bytes = h->size;
            next->buffer = h->buffer;
            next->status = (enum cr_buf_status)h->status;
            next->has_capability = h->has_capability && h->capability.len == CR_CLIENT_CAPABILITY_BYTES;
            if (next->has_capability) memcpy(next->capability, h->capability.data, CR_CLIENT_CAPABILITY_BYTES);
        }
    }
    out->replicas = b.replicas;
    out->count = count;
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
    free(list->replicas); /* the one block of the replicas, handles and strings */
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

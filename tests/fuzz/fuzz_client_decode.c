/* libFuzzer target for libcrescent's hand-written decoder of
 * BatchGetReplicaListResponse and BatchPutStartResponse
 * (src/client/client_decode.c), the replies crescentd sends a client.
 *
 * Input: byte 0's low bit picks the message (1: BatchGetReplicaList, read
 * with each entry's checksum and lease; 0: BatchPutStart); the rest is the
 * reply body.  Checked against protobuf-c's unpack and the copy the decoder
 * replaced (cr_client_replicas_from_pb): both accept the same bodies, and
 * where they do, the top-level status and every list (status, checksum,
 * lease, replicas, handles, strings) are the same; every string the decoder
 * wrote is read, so ASan sees any short block; both results are freed with
 * the public free functions.  Build and run: tests/fuzz/README.md. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"

static void check(bool ok) {
    if (!ok) abort();
}

static bool same_string(const char *a, const char *b) {
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* The reference lists from protobuf-c's unpacked message (as the client
 * copied them before the hand-written decoder). */
static void reference_lists(const ProtobufCMessage *m, bool get, struct cr_replica_lists *out) {
    const Crescent__Master__BatchGetReplicaListResponse *bg = (const void *)m;
    const Crescent__Master__BatchPutStartResponse *bp = (const void *)m;
    size_t n = get ? bg->n_responses : bp->n_responses;
    out->lists = calloc(n + 1, sizeof(*out->lists));
    check(out->lists != NULL);
    for (size_t i = 0; i < n; i++) {
        struct cr_replica_list *l = &out->lists[i];
        if (get) {
            const Crescent__Master__GetReplicaListResponse *e = bg->responses[i];
            check(cr_client_replicas_from_pb(e->replica_list, e->n_replica_list, l) == CR_OK);
            cr_client_list_extras_from_pb(e, l);
            l->status = e->status_code;
        } else {
            const Crescent__Master__PutStartResponse *e = bp->responses[i];
            check(cr_client_replicas_from_pb(e->replica_list, e->n_replica_list, l) == CR_OK);
            l->status = e->status_code;
        }
        out->count = i + 1;
    }
}

static void same_lists(const struct cr_replica_lists *a, const struct cr_replica_lists *b) {
    check(a->count == b->count);
    for (size_t i = 0; i < a->count; i++) {
        const struct cr_replica_list *x = &a->lists[i], *y = &b->lists[i];
        check(x->key == NULL && x->status == y->status && x->count == y->count);
        check(x->has_checksum == y->has_checksum && x->checksum_xxh3 == y->checksum_xxh3);
        check(x->lease_ttl_ms == y->lease_ttl_ms);
        for (size_t r = 0; r < x->count; r++) {
            const struct cr_replica *p = &x->replicas[r], *q = &y->replicas[r];
            check(p->status == q->status && p->handle_count == q->handle_count);
            for (size_t h = 0; h < p->handle_count; h++) {
                const struct cr_buf_handle *s = &p->handles[h], *t = &q->handles[h];
                check(same_string(s->segment_name, t->segment_name));
                check(same_string(s->transport_endpoint, t->transport_endpoint));
                check(s->size_bytes == t->size_bytes && s->buffer == t->buffer);
                check(s->status == t->status);
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bool get = (data[0] & 1) != 0;
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    struct cr_client_top top;
    struct cr_replica_lists mine;
    int rc = cr_client_decode_replica_lists(len > 0 ? body : NULL, len, get, &top, &mine);
    check(rc == CR_OK || rc == CR_ERR_PROTOCOL);
    const ProtobufCMessageDescriptor *desc =
        get ? &crescent__master__batch_get_replica_list_response__descriptor
            : &crescent__master__batch_put_start_response__descriptor;
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, body);
    check((rc == CR_OK) == (m != NULL));
    if (m == NULL) {
        check(mine.count == 0 && mine.lists == NULL);
        return 0;
    }
    const Crescent__Master__BatchGetReplicaListResponse *bg = (const void *)m;
    const Crescent__Master__BatchPutStartResponse *bp = (const void *)m;
    check(top.status_code == (get ? bg->status_code : bp->status_code));
    const char *error = get ? bg->error_message : bp->error_message;
    size_t shown = top.error != NULL ? strnlen(top.error, top.error_len) : 0;
    check(shown == (error != NULL ? strlen(error) : 0));
    check(shown == 0 || memcmp(top.error, error, shown) == 0);
    struct cr_replica_lists ref = {0};
    reference_lists(m, get, &ref);
    same_lists(&mine, &ref);
    protobuf_c_message_free_unpacked(m, NULL);
    cr_client_replica_lists_free(&mine);
    cr_client_replica_lists_free(&ref);
    return 0;
}

/* The store-master RPC methods: their protobuf types, request validation and
 * response packing, shared by the gateway (rpc.c) and the handlers that run
 * on the segments actor (rpc_methods.c).
 *
 * Everything here is pure: no actor state, no sockets. */
#ifndef CRESCENT_ACTORS_RPC_CODEC_H
#define CRESCENT_ACTORS_RPC_CODEC_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/store.h"
#include "master.pb-c.h"
#include "msgs/master_msgs.h"

#define CR_RPC_METHOD_SLOTS 72u /* method ids are below this */
#define CR_RPC_ERROR_MAX 256u

struct cr_rpc_method {
    uint16_t id;
    const char *name;   /* "put_start": static, Prometheus-safe (a label value) */
    const char *metric; /* "requests_put_start_total": static, Prometheus-safe */
    const ProtobufCMessageDescriptor *request;
    const ProtobufCMessageDescriptor *response;
};

/* The method with that id, or NULL when unknown. */
const struct cr_rpc_method *cr_rpc_method_find(uint16_t id);

/* Every method, in id order (for stats); *count is set. */
const struct cr_rpc_method *cr_rpc_methods(size_t *count);

/* Checks a decoded request beyond what protobuf itself guarantees: keys
 * non-empty and at most CR_STORE_KEY_LEN_MAX bytes, tenants at most
 * CR_MASTER_TENANT_MAX bytes, value_length > 0, replica_num in
 * 1..CR_STORE_REPLICAS_MAX, batches at most CR_MASTER_BATCH_MAX entries,
 * client ids present where the method changes state for a client.  Every
 * entry of a batch is checked, so a batch is refused whole or applied whole.
 * Returns CR_OK, or CR_ERR_INVALID_PARAMS with a sentence in err. */
int cr_rpc_validate(uint16_t method, const ProtobufCMessage *request, char err[CR_RPC_ERROR_MAX]);

/* Field number of admin_token in the requests that declare it. */
#define CR_RPC_ADMIN_TOKEN_FIELD 14u

/* Whether a decoded request needs the admin token when crescentd has one:
 * RemoveAll, RemoveByRegex, BatchReplicaClear, BatchQueryIp, and Remove or
 * BatchRemove with force (README, "Exposing crescentd safely"). */
bool cr_rpc_needs_admin(uint16_t method, const ProtobufCMessage *request);

/* Token ids one PutStart may carry: the store's default block_token_ids_max. */
#define CR_RPC_TOKEN_IDS_MAX (1u << 16)

/* Unknown fields one request may carry (a newer client's additions), and
 * fields that make protobuf-c allocate (strings, bytes, sub-messages,
 * repeated entries, unknown fields), over all levels of one request: the
 * largest legitimate request, a BatchPutStart of 4096 puts with block
 * metadata, has about 41,000. */
#define CR_RPC_UNKNOWN_FIELDS_MAX 64
#define CR_RPC_ALLOCS_MAX 131072
#define CR_RPC_STR_(x) #x
#define CR_RPC_STR(x) CR_RPC_STR_(x)

/* Walks a protobuf body with its descriptor, without allocating.  Returns
 * NULL if it may be unpacked, or the reason it may not: it is not
 * well-formed, a field (at any depth) occurs more than max_repeat times, it
 * has more than CR_RPC_UNKNOWN_FIELDS_MAX unknown fields or more than
 * CR_RPC_ALLOCS_MAX fields that allocate, or a string contains a NUL byte.
 * Run before unpacking, which allocates per repeated entry and per unknown
 * field and cuts strings at their first NUL. */
const char *cr_rpc_prescan(const ProtobufCMessageDescriptor *desc, const uint8_t *body,
                           size_t len, uint32_t max_repeat);

/* Unpacks a request into an arena of its own (protobuf-c's allocator hook):
 * one malloc for most requests, a few for large ones, instead of one per
 * string, sub-message and repeated array, and one free at the end instead of
 * a walk over the message (a 32-entry BatchPutStart made about 200
 * allocations).  Returns the message and sets *arena, which
 * cr_rpc_request_arena_free releases (the message with it); NULL when the
 * body does not decode or memory ran out (*arena NULL then).  Run
 * cr_rpc_prescan first, as for protobuf_c_message_unpack. */
ProtobufCMessage *cr_rpc_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *body,
                                size_t len, void **arena);
void cr_rpc_request_arena_free(void *arena);

/* `size` bytes, aligned for any type, from a request arena (*arena NULL:
 * a new one, its first chunk at least `size`); NULL when out of memory.
 * Freed with the arena. */
void *cr_rpc_request_alloc(void **arena, size_t size);

/* A request's envelope (msgs/rpc_frame.h) as read from its frames. */
struct cr_rpc_envelope {
    bool one_frame;      /* answer in one frame */
    uint16_t method;     /* 0 when unreadable */
    uint64_t request_id; /* 0 when unreadable */
    const uint8_t *body; /* points into the frames */
    size_t body_len;
};

/* Reads method, id and body from a request's frames after the identity:
 * `frames` counts them all, data[i]/size[i] are the first min(frames, 3).
 * Returns false when the fields are not where a layout puts them (env then
 * holds what could be read, and the layout to answer in). */
bool cr_rpc_read_envelope(size_t frames, const uint8_t *const data[3], const size_t size[3],
                          struct cr_rpc_envelope *env);

/* Packs msg into a new malloc'd buffer.  Returns CR_OK or CR_ERR_NOMEM. */
int cr_rpc_pack(const ProtobufCMessage *msg, uint8_t **out, size_t *len_out);

/* Packs an otherwise empty response of type `response` whose status_code is
 * `status` (every response's field 1) and whose error_message is `message`
 * (NULL or "": none).  Returns CR_OK or CR_ERR_NOMEM. */
int cr_rpc_pack_status(const ProtobufCMessageDescriptor *response, int32_t status,
                       const char *message, uint8_t **out, size_t *len_out);

/* Makes the call's reply the transport error "out of memory building the
 * response" (status CR_ERR_NOMEM), for when its response could not be packed. */
void cr_rpc_reply_nomem(struct cr_master_call *call);

/* A response's status_code (field 1 of every response). */
int32_t cr_rpc_status_code(const ProtobufCMessage *resp);

/* Points a response's error_message (every response has one) at text, which
 * must outlive the packing. */
void cr_rpc_set_error_message(ProtobufCMessage *resp, const char *text);

/* A UUID message as the store's 16-byte id (first, then second, big-endian). */
void cr_rpc_uuid_from_pb(const Crescent__Master__UUID *in, struct cr_uuid *out);
void cr_rpc_uuid_to_pb(const struct cr_uuid *in, Crescent__Master__UUID *out);

#endif

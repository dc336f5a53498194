/* Mooncake's master calls (WrappedMasterService at the commit docs/mooncake.md
 * names), translated to and from crescent's store-master calls.
 *
 * A request's struct_pack arguments become the protobuf request of the
 * crescent method that does the same (so it runs through the same intake,
 * validation and store as every other endpoint: one store, several wire
 * formats); the protobuf response comes back as the struct_pack result
 * Mooncake's client expects.  A few calls have no store effect and are
 * answered here (ServiceReady, GetStorageConfig, GetFsdir, FetchTasks).
 *
 * What the edge must remember between calls lives in cr_mc_state: which
 * segment name a Mooncake segment id stands for (UnmountSegment names the
 * id), each segment's protocol (a replica descriptor carries it), and the
 * secret crescent issued to each client id (crescent requires it on a
 * client's later calls; Mooncake's client does not know of it).
 *
 * Single-threaded (the segments thread); no sockets. */
#ifndef CRESCENT_MOONCAKE_MC_CALLS_H
#define CRESCENT_MOONCAKE_MC_CALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/struct_pack.h"

/* The version string Mooncake's client compares with its own
 * (GetMooncakeStoreVersion(), mooncake-store/include/version.h.in). */
#define CR_MC_STORE_VERSION "2.0.0"

/* Mooncake's ErrorCode values used here (mooncake-store/include/types.h). */
enum {
    CR_MC_OK = 0,
    CR_MC_INTERNAL_ERROR = -1,
    CR_MC_SEGMENT_NOT_FOUND = -101,
    CR_MC_INVALID_PARAMS = -600,
    CR_MC_REPLICA_IS_NOT_READY = -703,
    CR_MC_INVALID_REPLICA = -702,
    CR_MC_LEASE_EXPIRED = -707,
    CR_MC_CHECKSUM_MISMATCH = -801,
    CR_MC_RPC_FAIL = -900,
    CR_MC_UNAVAILABLE_IN_CURRENT_MODE = -1011,
};

/* coro_rpc's errc values (ylt/coro_rpc/impl/errno.h) this endpoint sends. */
enum {
    CR_CORO_ERRC_INVALID_ARGUMENTS = 4,
    CR_CORO_ERRC_FUNCTION_NOT_REGISTERED = 11,
};

#define CR_MC_KEY_MAX 4096u     /* bytes of a key or a regex */
#define CR_MC_NAME_MAX 255u     /* bytes of a segment name, endpoint, protocol */
#define CR_MC_BATCH_MAX 4096u   /* keys in a batch (crescent's CR_MASTER_BATCH_MAX) */
#define CR_MC_SECRET_MAX 64u

struct cr_mc_uuid {
    uint64_t first, second;
};

struct cr_mc_segment {
    struct cr_mc_uuid id, client;
    char name[CR_MC_NAME_MAX + 1];
    char protocol[16];
};

struct cr_mc_secret {
    struct cr_mc_uuid client;
    uint8_t len;
    uint8_t bytes[CR_MC_SECRET_MAX];
};

struct cr_mc_state {
    struct cr_mc_segment *segments;
    size_t segment_count, segment_cap;
    struct cr_mc_secret *secrets;
    size_t secret_count, secret_cap;
};

void cr_mc_state_free(struct cr_mc_state *st);

/* Forgets `client` (the store expired it): its secret and the segments it
 * mounted, calling segment(arg, name) for each of those first (NULL: none).
 * Returns the segments forgotten.  Without it the tables only grew: a
 * client id is new at every Mooncake client start. */
size_t cr_mc_state_forget_client(struct cr_mc_state *st, const struct cr_mc_uuid *client,
                                 void (*segment)(void *arg, const char *name), void *arg);

struct cr_mc_fn; /* one Mooncake call (mc_calls.c's table) */

/* The call with coro_rpc function id `id`, or NULL.  *name is set to the
 * call's name for ids of WrappedMasterService crescent does not serve (for
 * the log line), else NULL. */
const struct cr_mc_fn *cr_mc_fn_find(uint32_t id, const char **name);
const char *cr_mc_fn_name(const struct cr_mc_fn *fn);
/* For a call crescent does not serve (cr_mc_fn_find gave NULL and a name):
 * appends its result holding UNAVAILABLE_IN_CURRENT_MODE when the result is
 * one tl::expected of a type the table knows; false otherwise (answer with
 * coro_rpc's function_not_registered) or out of memory (w->nomem). */
bool cr_mc_unavailable(uint32_t id, struct cr_sp_writer *w);
/* The crescent method the call becomes; 0 for calls answered here. */
uint16_t cr_mc_fn_method(const struct cr_mc_fn *fn);
/* Index in the table (travels with a call), and back. */
uint16_t cr_mc_fn_index(const struct cr_mc_fn *fn);
const struct cr_mc_fn *cr_mc_fn_at(uint16_t index);

/* What a decoded request asks for. */
struct cr_mc_request {
    uint16_t method;         /* crescent method; 0: answer `local` now */
    uint8_t *body;           /* packed protobuf request (malloc'd), body_len bytes */
    size_t body_len;
    uint32_t entries;        /* keys of a batch: the length of an all-error answer */
    struct cr_mc_uuid client;/* the call's client id (zero when it has none) */
    bool has_client;
    /* ReMountSegment with several segments: the other bodies (each a
     * REMOUNT_SEGMENT call); the edge sends them all and answers once. */
    uint8_t **more;
    size_t *more_len;
    size_t more_count;
};

void cr_mc_request_free(struct cr_mc_request *req);

/* Decodes a request body of `fn`.  CR_OK: `req` filled (method 0: answer it
 * with cr_mc_answer_local).  CR_ERR_PROTOCOL: the bytes are not fn's
 * arguments, one line in err.  CR_ERR_NOMEM. */
int cr_mc_decode(const struct cr_mc_fn *fn, const uint8_t *body, size_t len,
                 struct cr_mc_state *st, struct cr_mc_request *req, char *err, size_t err_size);

/* Appends fn's result for a call answered here (method 0). */
bool cr_mc_answer_local(const struct cr_mc_fn *fn, struct cr_sp_writer *w);

/* Appends fn's result from crescent's answer: status CR_OK and the packed
 * protobuf response, or a transport status (any other) whose every entry
 * becomes Mooncake's code for it.  `entries` is the request's.  Learns
 * client secrets from responses that issue one (client id `client`). */
bool cr_mc_answer(const struct cr_mc_fn *fn, int32_t status, const uint8_t *reply, size_t len,
                  uint32_t entries, const struct cr_mc_uuid *client, struct cr_mc_state *st,
                  struct cr_sp_writer *w);

/* Appends fn's result carrying Mooncake error `code` in every entry. */
bool cr_mc_answer_error(const struct cr_mc_fn *fn, int32_t code, uint32_t entries,
                        struct cr_sp_writer *w);

/* crescent's status code as Mooncake's ErrorCode (docs/mooncake.md). */
int32_t cr_mc_error_code(int32_t crescent_status);

/* The body of a coro_rpc error reply: the message as a struct_pack string. */
bool cr_mc_error_body(const char *msg, struct cr_sp_writer *w);

#endif

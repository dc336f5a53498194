/* What mc_calls.c (the table, the state, requests) and mc_results.c (results)
 * share; not for other files.  See mc_calls.h. */
#ifndef CRESCENT_MOONCAKE_MC_INTERNAL_H
#define CRESCENT_MOONCAKE_MC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "mooncake/mc_calls.h"
#include "master.pb-c.h"

enum shape {
    R_STRING,       /* expected<string> */
    R_STORAGE,      /* expected<GetStorageConfigResponse> */
    R_PING,         /* expected<PingResponse> */
    R_TASKS,        /* expected<vector<TaskAssignment>> */
    R_VOID,         /* expected<void> */
    R_DESCS,        /* expected<vector<Descriptor>> */
    R_VEC_DESCS,    /* vector<expected<vector<Descriptor>>> */
    R_VEC_VOID,     /* vector<expected<void>> */
    R_BOOL,         /* expected<bool> */
    R_VEC_BOOL,     /* vector<expected<bool>> */
    R_GRLR,         /* expected<GetReplicaListResponse> */
    R_VEC_GRLR,     /* vector<expected<GetReplicaListResponse>> */
    R_MAP,          /* expected<unordered_map<string, vector<Descriptor>>> */
    R_LONG,         /* expected<long> */
    R_PLAIN_LONG,   /* long */
};

enum fn_id {
    FN_SERVICE_READY, FN_GET_STORAGE_CONFIG, FN_GET_FSDIR, FN_PING, FN_FETCH_TASKS,
    FN_MOUNT, FN_REMOUNT, FN_UNMOUNT, FN_PUT_START, FN_PUT_END, FN_PUT_REVOKE,
    FN_BATCH_PUT_START, FN_BATCH_PUT_END, FN_BATCH_PUT_REVOKE, FN_EXIST, FN_BATCH_EXIST,
    FN_GET, FN_BATCH_GET, FN_GET_REGEX, FN_REMOVE, FN_REMOVE_REGEX, FN_REMOVE_ALL,
    FN_BATCH_REMOVE, FN_COUNT
};

struct cr_mc_fn {
    uint32_t id; /* MD5("mooncake::WrappedMasterService::" + name)[0..4] BE */
    const char *name;
    struct cr_sp_type req, resp;
    enum shape shape;
    uint16_t method; /* crescent's; 0: answered here */
    const ProtobufCMessageDescriptor *reply_desc;
};


/* The calls crescent serves, by enum fn_id (mc_calls.c). */
extern const struct cr_mc_fn cr_mc_fns[FN_COUNT];

/* The protocol segment `name` was mounted with ("tcp" when unknown). */
const char *cr_mc_protocol_of(const struct cr_mc_state *st, const char *name);
/* The segment a mount named with Mooncake segment id `id`, or NULL. */
struct cr_mc_segment *cr_mc_segment_by_id(struct cr_mc_state *st, const struct cr_mc_uuid *id);
/* Remembers a mounted segment (replacing the entry of the same id); false
 * when out of memory. */
bool cr_mc_segment_note(struct cr_mc_state *st, const struct cr_mc_segment *seg);
/* The secret crescent issued to `client`, or NULL. */
const struct cr_mc_secret *cr_mc_secret_of(const struct cr_mc_state *st,
                                           const struct cr_mc_uuid *client);
/* Keeps the secret crescent issued to `client` (ignored when empty or too long). */
void cr_mc_secret_note(struct cr_mc_state *st, const struct cr_mc_uuid *client,
                       const ProtobufCBinaryData *secret);

#endif

/* The store master's intake, shared by its endpoints: the ZMQ gateway
 * (rpc.c, --rpc-address) and the native TCP endpoint (rpc_tcp.c,
 * --rpc-tcp-address, an edge served on segments' thread: edge.h).  Both read the same envelope (msgs/rpc_frame.h) and
 * hand the request here: the method is looked up, the body pre-scanned,
 * decoded, validated and checked against the admin token, and the call is
 * sent to the actor that owns it (segments, or tasks for QueryTask).  So the
 * two endpoints refuse exactly the same requests with exactly the same
 * answers, and admin token and client secrets are enforced identically.
 *
 * Single-threaded: one intake per endpoint, used on its thread only. */
#ifndef CRESCENT_ACTORS_RPC_INTAKE_H
#define CRESCENT_ACTORS_RPC_INTAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/rpc_codec.h"
#include "runtime/runtime.h"
#include "core/histogram.h"
#include "daemon/admin_token.h"
#include "msgs/master_msgs.h"

struct cr_subsystems;

struct cr_rpc_intake {
    struct cr_admin_token admin; /* len 0: no admin token, nothing gated */
    struct cr_actor *self;       /* where MASTER_DONE comes back */
    struct cr_actor *segments;   /* NULL until wired */
    struct cr_actor *tasks;      /* QueryTask; NULL until wired */
    uint64_t requests[CR_RPC_METHOD_SLOTS];
    uint64_t replies;
    uint64_t malformed;      /* envelope or frame not readable */
    uint64_t unknown_method;
    uint64_t decode_errors;  /* protobuf did not decode */
    uint64_t invalid;        /* decoded but out of range */
    uint64_t admin_refused;  /* calls refused for want of the admin token */
    uint64_t not_ready;      /* arrived before wiring or while segments refused */
    uint64_t send_dropped;   /* replies that could not be written */
    uint64_t in_flight;
    /* Per method, from the read of the request to its reply (see done). */
    struct cr_histogram latency[CR_RPC_METHOD_SLOTS];
};

/* What to answer at once for a request refused at intake: a transport
 * error (status != CR_OK, body a sentence) or a method's response with a
 * non-zero status_code (status CR_OK, body packed protobuf). */
struct cr_rpc_refusal {
    int32_t status;
    const uint8_t *body;
    size_t len;
    uint8_t *owned; /* malloc'd body, freed by cr_rpc_refusal_free; or NULL */
    char text[CR_RPC_ERROR_MAX + 256];
};

/* Reads the admin token (--admin-token-file).  False with one line in
 * `why` when the file cannot be used. */
bool cr_rpc_intake_init(struct cr_rpc_intake *in, const char *admin_token_file, char *why,
                        size_t why_size);

/* Takes the peers from the WIRE message's table. */
void cr_rpc_intake_wire(struct cr_rpc_intake *in, const struct cr_subsystems *peers);

/* Runs intake on a request whose envelope was read (call->method,
 * request_id, received_ns set by the endpoint, which also sets reply_to's
 * addressing fields).  body/len is the protobuf body.  Returns true when
 * the call went to its owner (which now owns it; in_flight counts it);
 * false with `out` filled when it must be answered now, the call still the
 * caller's to free.  Counts every outcome. */
bool cr_rpc_intake_take(struct cr_rpc_intake *in, struct cr_master_call *call,
                        const uint8_t *body, size_t len, struct cr_rpc_refusal *out);

/* cr_rpc_intake_take in two halves, for an endpoint served on segments'
 * own thread (rpc/edge.h), which runs segments' calls inline and
 * forwards only the others.  check: lookup, decode, validation, admin gate,
 * key (false: `out` filled, counted).  forward: the send to the owner
 * (false: `out` filled; true: in_flight counts it). */
bool cr_rpc_intake_check(struct cr_rpc_intake *in, struct cr_master_call *call,
                         const uint8_t *body, size_t len, struct cr_rpc_refusal *out);
bool cr_rpc_intake_forward(struct cr_rpc_intake *in, struct cr_master_call *call,
                           struct cr_rpc_refusal *out);
/* Whether the call's owner is the tasks actor rather than segments. */
bool cr_rpc_intake_for_tasks(const struct cr_master_call *call);

/* A transport error answer: sets `out` to status + text. */
void cr_rpc_refusal_text(struct cr_rpc_refusal *out, int32_t status, const char *text);

void cr_rpc_refusal_free(struct cr_rpc_refusal *out);

/* A finished call came back: counts it out of in_flight and records its
 * latency at now_ns. */
void cr_rpc_intake_done(struct cr_rpc_intake *in, const struct cr_master_call *call,
                        uint64_t now_ns);

/* Adds the intake's counters and per-method histograms to a stats reply
 * (the same names for both endpoints; the actor's name tells them apart). */
void cr_rpc_intake_stats(const struct cr_rpc_intake *in, struct cr_actor_stats *out);

#endif

/* libcrescent internals shared by src/client/client*.c and the unit tests:
 * the client struct, request ids, the reply envelope, the allocation-free
 * reply scanner used by the pipelined path, and protobuf -> C conversions. */
#ifndef CRESCENT_CLIENT_CLIENT_INTERNAL_H
#define CRESCENT_CLIENT_CLIENT_INTERNAL_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/histogram.h"
#include "crescent/client.h"
#include "master.pb-c.h"
#include "msgs/pb_wire.h"
#include "rdma/xfer.h"

#define CR_CLIENT_ERROR_MAX 512u

/* Request id layout: [seq (47 bits)][sync (1 bit)][method (16 bits)].  The
 * method travels in the id so a pipelined reply is decoded without a lookup
 * table; the sync bit marks blocking calls, so a late reply to a blocking
 * call that already timed out is dropped instead of surfacing in poll. */
#define CR_CLIENT_ID_SYNC_BIT (1ull << 16)
#define CR_CLIENT_ID_SEQ_SHIFT 17u

/* A pipelined request sent and not yet settled (client_pending.c). */
struct cr_client_pending {
    uint64_t id;
    int64_t deadline_ms; /* on the client's clock: submit time + timeout */
    bool done;           /* answered out of order; leaves at the head */
};

/* Endpoints with this scheme use the native TCP transport (client_tcp.c). */
#define CR_CLIENT_NATIVE_SCHEME "crescent://"
/* Endpoints with this scheme follow the leader etcd names (client_follow.c). */
#define CR_CLIENT_ETCD_SCHEME "etcd://"

struct cr_client_follow; /* client_follow.c */

struct cr_client_shm; /* client_shm.c */

struct cr_client {
    /* Native transport (crescent://): tcp_address set, tcp_fd -1 until the
     * first send connects; replies are read into rx (rx_taken bytes of it
     * are the frame last handed out).  ZMQ (tcp://, ipc://): socket set. */
    char *tcp_address;
    int tcp_fd;
    uint8_t *rx;
    size_t rx_len, rx_cap, rx_taken;
    /* Same-host shared memory (shm://NAME, client_shm.c): replies are read
     * into rx as with crescent://. */
    struct cr_client_shm *shm;
    void *context;
    bool uses_process_context;      /* false: the caller's own context */
    void *socket;
    /* ZMQ_PAIR reading the socket's connection events until the first
     * handshake (client_monitor.c); link_up: one succeeded. */
    void *monitor;
    bool link_up;
    uint32_t connect_retries; /* CONNECT_RETRIED events seen before link_up */
    int rcvtimeo_ms;                /* the socket's ZMQ_RCVTIMEO now (-1: ZMQ's default) */
    int timeout_ms;
    int64_t (*clock_ms)(void *ctx); /* monotonic milliseconds; tests inject their own */
    void *clock_ctx;
    uint8_t id[CR_CLIENT_ID_BYTES];
    char *admin_token;              /* sent with the calls that need it; NULL: none */
    /* The secret the master issued to this client id (first Mount or Ping),
     * sent with its state-changing calls (proto/master.proto). */
    uint8_t secret[CR_CLIENT_SECRET_BYTES];
    bool has_secret;
    uint64_t next_seq;
    /* Pipelined requests: a ring in submission order (so sorted by id).  In
     * flight = pending_live + stash_count: each request is in exactly one of
     * the two until poll returns its completion. */
    struct cr_client_pending *pending;
    size_t pending_head;
    size_t pending_count;           /* entries, answered ones not yet at the head included */
    size_t pending_capacity;
    size_t pending_live;            /* entries waiting for their reply */
    uint8_t *scratch;               /* packed request bodies; grows, kept */
    size_t scratch_size;
    struct cr_completion *stash;    /* FIFO of completions seen by blocking calls */
    size_t stash_head;
    size_t stash_count;
    size_t stash_capacity;
    char error[CR_CLIENT_ERROR_MAX];
    /* The transfer client for Put/Get (client_data.c): made on first use. */
    struct cr_xfer_client *xfer;
    /* This host's interface addresses, to rank same-host replicas first
     * (client_data.c): read when a Get first has a choice, then kept a while. */
    struct cr_client_local_hosts *local_hosts;
    /* etcd://: the leader followed (client_follow.c); NULL for other endpoints. */
    struct cr_client_follow *follow;
    /* The shared file tier (client_files.c): checked at the first put/get. */
    enum {
        CR_CLIENT_FILES_UNCHECKED = 0,
        CR_CLIENT_FILES_OFF,     /* crescentd has no file tier */
        CR_CLIENT_FILES_READY,   /* files set */
        CR_CLIENT_FILES_REFUSED, /* files_refusal says why */
    } files_state;
    char *root_fs_dir;           /* cr_client_set_root_fs_dir; NULL: the environment */
    struct cr_client_files *files;
    char files_refusal[768];
    /* Read latency per tier (client_latency.c). */
    struct cr_histogram read_latency[CR_READ_TIERS];
    /* Reads of local_disk replicas asked of store servers (client_ssd.c). */
    uint64_t offload_reads;
    uint64_t offload_shm_reads;     /* of them, read from the file passed over shm */
    uint64_t offload_shm_fallbacks; /* shm file refused or failing its checks: read by tcp */
    /* What the master has of them (sent with a Ping it answered), and when
     * the last Ping that carried reads was answered or failed. */
    struct cr_histogram read_reported[CR_READ_TIERS];
    int64_t read_reported_ms;
    /* Puts refused for room, started again (client_put_retry.c); deadline_ms
     * -1 until set or read from the environment. */
    struct cr_put_retry_stats put_retry;
};

/* What the allocation-free scanner reads from a response body: field 1
 * (status_code, every response has it) and field 2 as a varint (ExistKey's
 * `exists`) or counted as length-delimited (replica_list entries). */
/* Puts this client's secret, if it has one, into a request's field. */
static inline void cr_client_secret_to_pb(cr_client *c, protobuf_c_boolean *has,
                                          ProtobufCBinaryData *out) {
    *has = c->has_secret;
    *out = (ProtobufCBinaryData){.len = c->has_secret ? CR_CLIENT_SECRET_BYTES : 0,
                                 .data = c->secret};
}

/* Keeps a secret the master issued in a response (a wrong-sized one is
 * ignored: the master would refuse it anyway). */
static inline void cr_client_secret_take(cr_client *c, protobuf_c_boolean has,
                                         ProtobufCBinaryData in) {
    if (!has || in.len != CR_CLIENT_SECRET_BYTES) return;
    memcpy(c->secret, in.data, CR_CLIENT_SECRET_BYTES);
    c->has_secret = true;
}

struct cr_client_scan {
    int32_t status_code;
    bool has_status;
    uint64_t field2_varint;
    uint32_t field2_count;
};

static inline uint64_t cr_client_make_id(uint64_t seq, bool sync, uint16_t method) {
    return seq << CR_CLIENT_ID_SEQ_SHIFT | (sync ? CR_CLIENT_ID_SYNC_BIT : 0) | method;
}
static inline uint16_t cr_client_id_method(uint64_t id) { return (uint16_t)id; }
static inline bool cr_client_id_sync(uint64_t id) { return (id & CR_CLIENT_ID_SYNC_BIT) != 0; }

/* ---- client_codec.c ---- */

/* Walks a protobuf body's top-level fields.  Returns CR_OK, or
 * CR_ERR_PROTOCOL when the bytes are not well-formed protobuf or field 1 is
 * missing or not a varint.  Reads nothing beyond `len`; allocates nothing. */
int cr_client_scan_reply(const uint8_t *body, size_t len, struct cr_client_scan *out);

/* Protobuf wire reading: varints with msgs/pb_wire.h's cr_pb_read_varint;
 * skipping a field's value of wire `type` (false if it runs past the end, or
 * for groups and reserved types). */
bool cr_client_skip_value(const uint8_t *p, size_t len, size_t *pos, unsigned type);

/* Checks a reply's id and status frames (8 and 4 bytes). Returns CR_OK with
 * both values, or CR_ERR_PROTOCOL. */
int cr_client_parse_envelope(const uint8_t *id, size_t id_len, const uint8_t *status,
                             size_t status_len, uint64_t *id_out, int32_t *status_out);

/* Argument checks: a key (1..CR_CLIENT_KEY_MAX bytes), a name (tenant,
 * segment, protocol: 1..CR_CLIENT_NAME_MAX).  Return CR_OK or
 * CR_ERR_INVALID_PARAMS with `why` set to a sentence. */
int cr_client_check_key(const char *key, const char **why);
int cr_client_check_name(const char *name, const char *what, char *why, size_t why_size);

/* Response descriptor for a method; NULL for an unknown method. */
const ProtobufCMessageDescriptor *cr_client_response_descriptor(uint16_t method);

/* The status_code of any unpacked response (field 1). */
int32_t cr_client_response_status(const ProtobufCMessage *response);
/* The response's error_message (crescentd's reason for a non-zero status_code),
 * or NULL when it has none. */
const char *cr_client_response_error(const ProtobufCMessage *response);

/* Deep copies of protobuf replica lists into caller-owned C structs.
 * Return CR_OK or CR_ERR_NOMEM (nothing left allocated). */
int cr_client_replicas_from_pb(Crescent__Master__ReplicaInfo *const *infos, size_t count,
                               struct cr_replica_list *out);

/* One object's replicas, handles and strings in one allocation: `replicas`
 * is its start (what cr_client_replica_list_free frees), `handles` follow
 * (NULL when none), then `strings` (string_bytes).  All NULL when replicas
 * is 0.  CR_OK or CR_ERR_NOMEM. */
struct cr_client_list_block {
    struct cr_replica *replicas;
    struct cr_buf_handle *handles;
    char *strings;
};
int cr_client_list_block_alloc(size_t replicas, size_t handles, size_t string_bytes,
                               struct cr_client_list_block *out);

/* ---- client_decode.c ---- */

/* A response's top-level status_code and error_message (pointing into the
 * body: error_len bytes, not NUL-terminated; NULL when absent). */
struct cr_client_top {
    int32_t status_code;
    const char *error;
    size_t error_len;
};

/* Decodes a BatchGetReplicaListResponse (`extras`: each entry's checksum and
 * lease too) or a BatchPutStartResponse into `top` and `out` (one list per
 * entry, in order; the caller frees it with cr_client_replica_lists_free).
 * CR_OK; CR_ERR_PROTOCOL when the bytes are not such a message (protobuf-c
 * would refuse them too); CR_ERR_NOMEM.  On failure `out` holds nothing. */
int cr_client_decode_replica_lists(const uint8_t *body, size_t len, bool extras,
                                   struct cr_client_top *top, struct cr_replica_lists *out);

/* A GetReplicaListResponse's object-level fields (checksum, lease) into `out`. */
void cr_client_list_extras_from_pb(const Crescent__Master__GetReplicaListResponse *resp,
                                   struct cr_replica_list *out);

/* UUID message <-> 16 bytes (big-endian halves, as the reference). */
void cr_client_uuid_to_pb(const uint8_t id[CR_CLIENT_ID_BYTES], Crescent__Master__UUID *out);
void cr_client_uuid_from_pb(const Crescent__Master__UUID *in, uint8_t id[CR_CLIENT_ID_BYTES]);

/* ---- client_data.c ---- */

/* Frees the transfer client, if one was made. */
void cr_client_data_close(cr_client *c);
/* Opens the client's transfer client on first use. */
int cr_client_data_open(cr_client *c);
/* Polls until no submitted transfer op is in flight. */
void cr_client_drain(cr_client *c);
/* order[] = the complete replicas of `list`, same-host first; returns how many. */
size_t cr_client_rank_replicas(cr_client *c, const struct cr_replica_list *list, size_t *order);
/* The bytes of an object as replica r lays them out (its handles' sum). */
uint64_t cr_client_replica_bytes(const struct cr_replica *r);
/* The object's bytes as its list gives them: a memory replica's handles,
 * else a disk or local_disk replica's object_size. */
uint64_t cr_client_list_bytes(const struct cr_replica_list *list);

/* One replica being read or written: its ops left and its first failure. */
struct attempt {
    uint32_t pending;
    int status;
    char why[CR_XFER_MESSAGE_MAX];
};
/* The handle's capability decoded into *out for a transfer op, or NULL: none, or
 * one that does not decode (the store server then decides, as for none). */
const struct cr_cap *cr_client_handle_cap(const struct cr_buf_handle *bh, struct cr_cap *out);

/* Queues the ops moving bytes [offset, offset + len) of replica r's object
 * (object_len bytes) to (CR_XFER_WRITE) or from (CR_XFER_READ) base; the
 * attempt counts them down as they complete (cr_client_drain). */
void cr_client_submit_window(cr_client *c, enum cr_xfer_opcode opcode, const struct cr_replica *r,
                             uint64_t object_len, uint64_t offset, uint8_t *base, size_t len,
                             struct attempt *a);

/* ---- client_latency.c: read latency per tier ---- */

uint64_t cr_client_now_ns(void);
/* Counts one read of `ns` that returned an object's bytes under `tier`
 * (enum cr_read_tier). */
void cr_client_read_observe(cr_client *c, int tier, uint64_t ns);

/* ---- client_files.c: the shared file tier ---- */

/* client_ssd.c: local_disk replicas (a store server's SSD tier).  Whether
 * the list has a complete one; reading one (each in turn until one reads and
 * matches the put's checksum) into buf: CR_OK and *len, or the last
 * failure with a sentence in why. */
bool cr_client_ssd_has_replica(const struct cr_replica_list *list);
int cr_client_ssd_read(cr_client *c, const struct cr_replica_list *list, void *buf, size_t cap,
                       size_t *len, char *why, size_t why_len);

/* At the first put/get: asks crescentd for its file tier and starts the
 * writer, or refuses (the refusal stays).  CR_OK when the tier is usable or
 * off. */
int cr_client_files_check(cr_client *c);
/* Queues a persist of a put that succeeded (no-op without the tier). */
void cr_client_files_enqueue(cr_client *c, const char *tenant, const char *key, const void *data,
                             size_t len, uint64_t checksum);
/* The same in steps, so that a put copies its value for the writer while
 * it hashes it (one pass over the caller's bytes, not two): reserve a
 * buffer (NULL: no tier, or the queue is full and the persist is counted
 * dropped) and fill *value with the len bytes, then commit (the put
 * succeeded) or cancel (it did not). */
struct cr_files_job;
struct cr_files_job *cr_client_files_reserve(cr_client *c, const char *tenant, const char *key,
                                             size_t len, void **value);
void cr_client_files_commit(cr_client *c, struct cr_files_job *j, uint64_t checksum);
void cr_client_files_cancel(cr_client *c, struct cr_files_job *j);
/* Reports finished persists when enough have gathered (at each put/get). */
void cr_client_files_poll(cr_client *c);

/* The read latency a Ping carries to the master (client_latency.c): what
 * this client observed per tier since the last Ping the master answered. */
struct cr_client_read_report {
    Crescent__Master__PingRequest__ReadLatency entries[CR_READ_TIERS];
    Crescent__Master__PingRequest__ReadLatency *ptrs[CR_READ_TIERS];
    uint64_t buckets[CR_READ_TIERS][CR_HISTOGRAM_BUCKETS];
    struct cr_histogram snapshot[CR_READ_TIERS];
};
/* Fills r and points req's read_latency at it (nothing when no new reads). */
void cr_client_read_report_attach(cr_client *c, struct cr_client_read_report *r,
                                  Crescent__Master__PingRequest *req);
/* The master answered the Ping that carried r: those reads are reported. */
void cr_client_read_report_sent(cr_client *c, const struct cr_client_read_report *r);
/* At a get: a Ping with the reads of the last CR_CLIENT_READ_REPORT_MS and
 * more, when there are any (a client that never pings still reports). */
#define CR_CLIENT_READ_REPORT_MS 1000
void cr_client_read_report_poll(cr_client *c);
/* The list's complete disk replica, or NULL. */
const struct cr_replica *cr_client_files_replica(const struct cr_replica_list *list);
/* Reads the object from its disk replica (there must be one) into buf. */
int cr_client_files_read(cr_client *c, const char *tenant, const char *key,
                         const struct cr_replica_list *list, void *buf, size_t cap,
                         size_t *len, char *why, size_t why_len);
/* Writes what is queued, reports it, stops the writer (at close). */
void cr_client_files_close(cr_client *c);

/* ---- client_rpc.c ---- */

/* Everything a PutStartRequest points to, on the caller's stack. */
struct cr_client_put_start_parts {
    Crescent__Master__PutStartRequest req;
    Crescent__Master__ReplicateConfig config;
    Crescent__Master__BlockInfo block;
    Crescent__Master__UUID id;
};

/* Checks `item` and builds its request into `p` (pointers into p and into
 * the caller's strings).  CR_OK or CR_ERR_INVALID_PARAMS (error recorded). */
int cr_client_build_put_start(cr_client *c, const char *tenant, const struct cr_put_item *item,
                              struct cr_client_put_start_parts *p);

/* Argument checks that record the failure on `c`.  check_tenant maps NULL
 * to "default" in place. */
int cr_client_check_tenant(cr_client *c, const char **tenant);
int cr_client_require_key(cr_client *c, const char *key);
int cr_client_require_name(cr_client *c, const char *name, const char *what);

/* ---- client_pending.c ---- */

/* Makes room for one more pending request, before it is sent.  Returns CR_OK
 * or CR_ERR_NOMEM (message recorded; the table is unchanged). */
int cr_client_pending_reserve(cr_client *c);

/* Records a request just sent (room reserved); its id is above every id in
 * the table. */
void cr_client_pending_add(cr_client *c, uint64_t id, int64_t deadline_ms);

/* Whether `id` is a request still waiting for its reply. */
bool cr_client_pending_waiting(const cr_client *c, uint64_t id);

/* Settles `id` with its reply.  Returns false, changing nothing, when no
 * request is waiting under that id: already answered, timed out, or never
 * sent by this client. */
bool cr_client_pending_settle(cr_client *c, uint64_t id);

/* Settles the requests whose deadline is <= now_ms, oldest first, at most
 * `max`, writing a CR_ERR_TIMEOUT completion for each.  Returns the count. */
size_t cr_client_pending_expire(cr_client *c, int64_t now_ms, struct cr_completion *out,
                                size_t max);

/* Deadline of the oldest waiting request; INT64_MAX when none waits.  Only
 * the oldest is watched: after cr_client_set_timeout shortened the timeout,
 * a newer request may expire late (when the older ones have), never early. */
int64_t cr_client_pending_next_deadline(const cr_client *c);

/* ---- client_tcp.c ---- */

/* Sets up the native transport for `endpoint` (crescent://HOST:PORT); the
 * connection is made by the first send.  CR_OK, CR_ERR_INVALID_PARAMS or
 * CR_ERR_NOMEM with `error` set. */
int cr_client_tcp_open(cr_client *c, const char *endpoint, char *error, size_t error_size);

/* client_monitor.c: watch the ZMQ socket's connection (before zmq_connect);
 * wait up to wait_ms for a reply or an event: CR_OK (a reply waits, or the
 * handshake succeeded: c->link_up), CR_ERR_AGAIN (nothing yet), or
 * CR_ERR_RPC_FAIL with the reason (refused or unreachable; handshake turned
 * down; CR_ERR_IO: zmq_poll failed). */
int cr_client_monitor_open(cr_client *c, char *error, size_t error_size);
int cr_client_monitor_wait(cr_client *c, int wait_ms);
void cr_client_monitor_close(cr_client *c);
void cr_client_tcp_close(cr_client *c);

/* The transport of an endpoint (tcp://, ipc://, crescent://, shm://):
 * opened (client.c) and closed, the client kept (client_follow.c reconnects
 * it to a new leader). */
int cr_client_transport_open(cr_client *c, const char *endpoint,
                             const struct cr_client_options *options, char *error,
                             size_t error_size);
void cr_client_transport_close(cr_client *c);

/* ---- client_follow.c ---- */
int cr_client_follow_open(cr_client *c, const char *endpoint,
                          const struct cr_client_options *options, char *error,
                          size_t error_size);
void cr_client_follow_close(cr_client *c);
/* Whether a call whose answer was lost may be sent again (changes nothing
 * or may be repeated). */
bool cr_client_follow_retry_safe(uint16_t method);
/* Reads the leader from etcd (one of another term when new_term), waiting
 * up to the client's timeout, and reconnects to it.  CR_OK or the status
 * with the reason in c->error. */
int cr_client_follow_leader(cr_client *c, bool new_term);

/* Writes one whole frame (length prefix included), connecting first when
 * not connected, by `deadline` (client clock).  CR_OK or a recorded error. */
int cr_client_tcp_send(cr_client *c, const uint8_t *frame, size_t len, int64_t deadline);

/* Waits up to timeout_ms (0: only what is buffered or readable now) for one
 * reply frame; its payload (the one-frame reply envelope) stays valid until
 * the next receive.  CR_OK, CR_ERR_TIMEOUT, or a recorded CR_ERR_IO /
 * CR_ERR_PROTOCOL (connection closed). */
int cr_client_tcp_recv(cr_client *c, int64_t timeout_ms, const uint8_t **payload, size_t *len);

/* The receive buffer both stream transports read replies into: room for
 * a frame of frame_total bytes (or a chunk), and the release of the frame
 * handed out by the previous receive. */
int cr_client_rx_reserve(cr_client *c, size_t frame_total);
void cr_client_rx_release(cr_client *c);

/* ---- client_shm.c ---- */

/* Sets up the shm transport for `endpoint` (shm://NAME: "@abstract" or a
 * socket path); the rings are set up by the first send.  CR_OK,
 * CR_ERR_INVALID_PARAMS or CR_ERR_NOMEM with `error` set. */
int cr_client_shm_open(cr_client *c, const char *endpoint, char *error, size_t error_size);
void cr_client_shm_close(cr_client *c);

/* As cr_client_tcp_send / cr_client_tcp_recv, over the rings. */
int cr_client_shm_send(cr_client *c, const uint8_t *frame, size_t len, int64_t deadline);
int cr_client_shm_recv(cr_client *c, int64_t timeout_ms, const uint8_t **payload, size_t *len);

/* ---- client.c ---- */

/* Records a failure: formats the message and returns `status`. */
/* client_put_retry.c: a put refused for room (CR_ERR_NO_AVAILABLE_HANDLE),
 * started again with backoff until the retry deadline.  put_start: a
 * PutStart that is retried so.  batch_put_once: cr_client_batch_put's one
 * round, which cr_client_batch_put repeats for the items refused for room. */
int cr_client_put_start_retrying(cr_client *c, const char *tenant,
                                 const struct cr_put_item *item, struct cr_replica_list *out);
int cr_client_batch_put_once(cr_client *c, const char *tenant, struct cr_put_data *items,
                             size_t count);

int cr_client_fail(cr_client *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Blocking call: packs `request`, sends it as `method`, waits for its reply,
 * unpacks it as the method's response.  Returns CR_OK with *response set
 * (caller frees with protobuf_c_message_free_unpacked), or the response's
 * non-OK status_code or a transport error, with *response NULL. */
int cr_client_call(cr_client *c, uint16_t method, const ProtobufCMessage *request,
                   ProtobufCMessage **response);

/* cr_client_call with the reply's body given to `decode` (a hand-written
 * decoder, client_decode.c) instead of protobuf-c: `decode` returns CR_OK
 * with its results in ctx, or a failure it recorded (cr_client_refused for
 * a non-zero status_code). */
typedef int (*cr_client_decode_fn)(cr_client *c, const uint8_t *body, size_t len, void *ctx);
int cr_client_call_decode(cr_client *c, uint16_t method, const ProtobufCMessage *request,
                          cr_client_decode_fn decode, void *ctx);

/* Records crescentd's refusal of a call: its status_code and its
 * error_message (why_len bytes; NULL or empty: the status's own text). */
int cr_client_refused(cr_client *c, int32_t status, const char *why, size_t why_len);

/* Pipelined send of `request` as `method`. */
int cr_client_submit(cr_client *c, uint16_t method, const ProtobufCMessage *request,
                     uint64_t *request_id);

#endif

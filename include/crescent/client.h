/* libcrescent: the C client of crescentd's store master.
 *
 * A cr_client is one ZMQ DEALER connection, in the process's shared ZMQ
 * context unless cr_client_options.zmq_context names another, to the
 * gateway's ROUTER endpoint (default tcp://127.0.0.1:50051), speaking the
 * envelope of proto/master.proto in one frame: request [method u16 BE |
 * request id u64 BE | protobuf], reply [request id u64 BE | status i32 BE |
 * body] (replies in three frames are read too).
 *
 * Threads: a cr_client is NOT internally locked.  Use one cr_client per
 * thread (ZMQ sockets may not be shared either); distinct clients may be used
 * concurrently, also when they share a ZMQ context (contexts are thread-safe).
 *
 * Errors: every call returns an int, CR_OK or a negative enum cr_status: the
 * server's status_code (e.g. CR_ERR_OBJECT_NOT_FOUND), or a transport error:
 * CR_ERR_TIMEOUT (no reply within the client's timeout; crescentd down or
 * unreachable looks like this, because ZMQ connects in the background),
 * CR_ERR_IO (a ZMQ call failed), CR_ERR_PROTOCOL (the reply did not decode),
 * CR_ERR_INVALID_PARAMS (an argument was refused before anything was sent),
 * CR_ERR_NOMEM.  cr_client_last_error() then holds a sentence a person can
 * act on (the server's message where it sent one).
 *
 * Tenants: every key-level call takes `tenant`; NULL means "default".
 * Results: out-structs are zeroed on entry and filled only on CR_OK (batch
 * calls also fill them when the batch as a whole succeeded); free them with
 * the matching cr_client_*_free, which accepts a zeroed struct. */
#ifndef CRESCENT_CLIENT_H
#define CRESCENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crescent/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CR_CLIENT_ID_BYTES 16u
#define CR_CLIENT_SECRET_BYTES 16u /* the secret the master issues to a client id */
#define CR_CLIENT_UUID_TEXT 37u          /* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" + NUL */
#define CR_CLIENT_KEY_MAX 4096u          /* bytes in a key (the server's ceiling) */
#define CR_CLIENT_NAME_MAX 255u          /* bytes in a tenant, segment name, protocol */
#define CR_CLIENT_ENDPOINT_MAX 255u      /* bytes in "host:port" */
#define CR_CLIENT_BATCH_MAX 4096u        /* items in one batch request (the server's limit) */
#define CR_CLIENT_TIMEOUT_MS_DEFAULT 5000
#define CR_CLIENT_DEFAULT_TENANT "default"

/* Methods: the values of enum crescent.master.Method. */
enum cr_method {
    CR_METHOD_GET_VERSION = 1,
    CR_METHOD_PING = 2,
    CR_METHOD_MOUNT_SEGMENT = 10,
    CR_METHOD_REMOUNT_SEGMENT = 11,
    CR_METHOD_UNMOUNT_SEGMENT = 12,
    CR_METHOD_PUT_START = 20,
    CR_METHOD_PUT_END = 21,
    CR_METHOD_PUT_REVOKE = 22,
    CR_METHOD_BATCH_PUT_START = 23,
    CR_METHOD_BATCH_PUT_END = 24,
    CR_METHOD_BATCH_PUT_REVOKE = 25,
    CR_METHOD_EXIST_KEY = 30,
    CR_METHOD_BATCH_EXIST_KEY = 31,
    CR_METHOD_GET_REPLICA_LIST = 32,
    CR_METHOD_BATCH_GET_REPLICA_LIST = 33,
    CR_METHOD_GET_REPLICA_LIST_BY_REGEX = 34,
    CR_METHOD_REMOVE = 40,
    CR_METHOD_BATCH_REMOVE = 41,
    CR_METHOD_REMOVE_BY_REGEX = 42,
    CR_METHOD_REMOVE_ALL = 43,
    CR_METHOD_BATCH_QUERY_IP = 50,
    CR_METHOD_BATCH_REPLICA_CLEAR = 51,
    CR_METHOD_CREATE_COPY_TASK = 60,
    CR_METHOD_CREATE_MOVE_TASK = 61,
    CR_METHOD_QUERY_TASK = 62,
    CR_METHOD_FETCH_TASKS = 63,
    CR_METHOD_MARK_TASK_TO_COMPLETE = 64,
    CR_METHOD_DISK_REPLICA_REPORT = 70,
    CR_METHOD_LOCAL_DISK_REPORT = 71,
};

/* Values of BufHandle.BufStatus and ReplicaInfo.ReplicaStatus. */
enum cr_buf_status { CR_BUF_INIT = 0, CR_BUF_COMPLETE, CR_BUF_FAILED, CR_BUF_UNREGISTERED };
enum cr_replica_status {
    CR_REPLICA_UNDEFINED = 0,
    CR_REPLICA_INITIALIZED,
    CR_REPLICA_PROCESSING,
    CR_REPLICA_COMPLETE,
    CR_REPLICA_REMOVED,
    CR_REPLICA_FAILED,
};

typedef struct cr_client cr_client;

struct cr_client_options {
    int timeout_ms;                        /* per request; 0: CR_CLIENT_TIMEOUT_MS_DEFAULT */
    const uint8_t *client_id;              /* CR_CLIENT_ID_BYTES; NULL: a random UUID v4 */
    /* NULL (the default): the process's ZMQ context, shared by every client
     * opened with NULL (one I/O thread for all their connections; created by
     * the first, terminated when the last closes).  Otherwise a context from
     * zmq_ctx_new() that the caller owns, shares as it likes (each client
     * still has its own socket and connection) and terminates after closing
     * its clients: for a separate I/O thread pool. */
    void *zmq_context;
    /* CurveZMQ, for a crescentd started with --curve-secret-key-file: Z85
     * text (40 characters) of the daemon's public key and this client's key
     * pair.  Each NULL is taken from CRESCENT_CURVE_SERVER_KEY,
     * CRESCENT_CURVE_PUBLIC_KEY, CRESCENT_CURVE_SECRET_KEY; none at all:
     * plain TCP. */
    const char *curve_server_key, *curve_public_key, *curve_secret_key;
    /* crescentd's admin token (--admin-token-file), sent with the calls that
     * need it: RemoveAll, RemoveByRegex, BatchReplicaClear, BatchQueryIp,
     * forced Remove/BatchRemove, UnmountSegment.  NULL: CRESCENT_ADMIN_TOKEN
     * when set; none otherwise. */
    const char *admin_token;
};

/* ---- connection ------------------------------------------------------- */

/* Creates a client connected (in the background, as ZMQ does) to `endpoint`
 * ("tcp://host:port"; "crescent://host:port", crescentd's native endpoint;
 * "shm://NAME", its same-host shared-memory endpoint, docs/rpc-shm.md: the
 * rings are set up by the first call; "etcd://HOST:PORT;HOST:PORT[/ID]": the
 * leader elected in etcd, read at open (waiting up to the timeout for one)
 * and followed when it changes, docs/ha.md).  `options` may be NULL.  Returns CR_OK and *out, or
 * CR_ERR_INVALID_PARAMS (bad endpoint or timeout), CR_ERR_IO, CR_ERR_NOMEM;
 * on failure *out is NULL and `error` (if not NULL) holds the reason. */
int cr_client_open(const char *endpoint, const struct cr_client_options *options,
                   cr_client **out, char *error, size_t error_size);

/* For an etcd:// client (endpoint "etcd://HOST:PORT;HOST:PORT[/CLUSTER_ID]",
 * docs/ha.md): the leader's endpoint it is connected to now, and that
 * leader's term in *term (may be NULL).  NULL for any other endpoint. */
const char *cr_client_leader(const cr_client *c, long long *term);

/* Closes the socket and context; requests in flight are abandoned.  NULL is ok. */
void cr_client_close(cr_client *client);

/* Changes the per-request timeout (1..3600000 ms); CR_ERR_INVALID_PARAMS otherwise. */
int cr_client_set_timeout(cr_client *client, int timeout_ms);

/* Sets / reads the 16-byte identity sent with state-changing calls (the server
 * accepts PutEnd/PutRevoke only from the client that started the put). */
void cr_client_set_id(cr_client *client, const uint8_t id[CR_CLIENT_ID_BYTES]);
void cr_client_get_id(const cr_client *client, uint8_t id[CR_CLIENT_ID_BYTES]);

/* The secret the master issued to this client's id at its first Mount or
 * Ping (a client id alone is public, so the master requires the secret on the
 * id's later state-changing calls).  The client keeps it and sends it by
 * itself; these move it to another process using the same id (crescentctl
 * prints it as CRESCENT_CLIENT_SECRET, 32 hex digits, which cr_client_open
 * reads).  get returns false while the client holds none; set_id forgets it. */
bool cr_client_get_secret(const cr_client *client, uint8_t secret[CR_CLIENT_SECRET_BYTES]);
void cr_client_set_secret(cr_client *client, const uint8_t secret[CR_CLIENT_SECRET_BYTES]);

/* The message for the last failed call on this client; "" after a success. */
const char *cr_client_last_error(const cr_client *client);

/* UUID text <-> 16 bytes.  Parse accepts 32 hex digits with or without the
 * four dashes; returns CR_ERR_INVALID_PARAMS otherwise (out unchanged). */
int cr_client_uuid_parse(const char *text, uint8_t id[CR_CLIENT_ID_BYTES]);
void cr_client_uuid_format(const uint8_t id[CR_CLIENT_ID_BYTES], char text[CR_CLIENT_UUID_TEXT]);

/* ---- result types ----------------------------------------------------- */

#define CR_CLIENT_CAPABILITY_BYTES 48u  /* BufHandle.capability (core/xfer_cap.h) */
#define CR_CLIENT_CAPABILITY_KEY_BYTES 32u /* MountSegmentRequest.capability_key */

struct cr_buf_handle {
    char *segment_name;
    uint64_t size_bytes;
    uint64_t buffer;               /* address in the owner's memory: base + offset */
    enum cr_buf_status status;
    char *transport_endpoint;      /* "" when the server sent none */
    /* The master's data-plane capability for this range (BufHandle.capability:
     * read for a Get's handles, write for a Put's), passed with every transfer
     * of it; has_capability false when the segment has no key. */
    bool has_capability;
    uint8_t capability[CR_CLIENT_CAPABILITY_BYTES];
};

/* The tier a replica lives on (ReplicaInfo.Medium; seed 000's "memory",
 * "disk", "local_disk"). */
#ifndef CR_REPLICA_MEDIUM_DEFINED
#define CR_REPLICA_MEDIUM_DEFINED
enum cr_replica_medium {
    CR_MEDIUM_MEMORY = 0,     /* in a segment: read through its handles */
    CR_MEDIUM_DISK = 1,       /* a file of the shared file tier: file_path */
    CR_MEDIUM_LOCAL_DISK = 2, /* a store server's SSD: endpoint, segment_name */
};
#endif

struct cr_replica {
    enum cr_replica_status status;
    size_t handle_count;            /* 0 for disk and local_disk replicas */
    struct cr_buf_handle *handles;
    enum cr_replica_medium medium;
    char *file_path;    /* disk: the file; "" otherwise */
    char *endpoint;     /* local_disk: the server's transport endpoint; "" otherwise */
    char *segment_name; /* local_disk: the server's segment; "" otherwise */
    uint64_t object_size; /* disk, local_disk: the value's bytes */
    uint64_t position;    /* local_disk: where the server keeps it */
    /* local_disk: the master's read capability for the server's SSD segment
     * "<segment_name>#ssd" at [position, position + object_size)
     * (ReplicaInfo.capability), sent with the read; false when none. */
    bool has_capability;
    uint8_t capability[CR_CLIENT_CAPABILITY_BYTES];
};

/* One object's replicas; `key` is set only by the regex form. `status` is
 * the per-object status in batch results (CR_OK in single results).  The
 * replicas, their handles and the handles' strings are one allocation:
 * free a list only with cr_client_replica_list_free (or the lists holding
 * it with cr_client_replica_lists_free), never its parts. */
struct cr_replica_list {
    char *key;
    int status;
    size_t count;
    struct cr_replica *replicas;
    /* GetReplicaList (single, batch, regex): the XXH3-64 that PutEnd recorded
     * for the object's bytes, when the writer gave one. */
    bool has_checksum;
    uint64_t checksum_xxh3;
    /* GetReplicaList (single, batch): how long from the reply the lease this
     * call granted lasts; 0 when the server did not say. */
    uint64_t lease_ttl_ms;
};
void cr_client_replica_list_free(struct cr_replica_list *list);

struct cr_replica_lists {
    size_t count;
    struct cr_replica_list *lists;
};
void cr_client_replica_lists_free(struct cr_replica_lists *lists);

/* Per-item status codes of a batch, in request order. */
struct cr_status_list {
    size_t count;
    int *statuses;
};
void cr_client_status_list_free(struct cr_status_list *list);

struct cr_key_list {
    size_t count;
    char **keys;
};
void cr_client_key_list_free(struct cr_key_list *list);

struct cr_client_ip {
    uint8_t client_id[CR_CLIENT_ID_BYTES];
    size_t count;
    char **addresses;
};
struct cr_client_ips {
    size_t count;
    struct cr_client_ip *entries;
};
void cr_client_ips_free(struct cr_client_ips *ips);

struct cr_version {
    char version[64];
    bool ready;
};

/* ---- request types ---------------------------------------------------- */

struct cr_segment_spec {
    const char *name;               /* 1..CR_CLIENT_NAME_MAX bytes */
    uint64_t base;                  /* address of the segment in the owner's memory */
    uint64_t size_bytes;            /* > 0 */
    const char *transport_endpoint; /* "host:port" or NULL */
    const char *protocol;           /* NULL: "tcp" */
    /* The segment's capability key (CR_CLIENT_CAPABILITY_KEY_BYTES), the one
     * its transfer server checks capabilities with; NULL: none (the master
     * then signs no capability for it). */
    const uint8_t *capability_key;
    /* The owner's SSD tier in bytes (a store server's --ssd-size), 0: none.
     * The master offloads objects evicted from this segment to it. */
    uint64_t ssd_capacity_bytes;
};

struct cr_replicate_config {
    uint64_t replica_num;           /* >= 1 */
    bool with_soft_pin;
    const char *preferred_segment;  /* NULL: none */
};

/* Block metadata published on PutEnd (all optional). */
struct cr_block_info {
    const char *model_name;
    uint32_t block_size;            /* 0: unset */
    const char *block_hash;
    const char *parent_block_hash;
    const uint32_t *token_ids;
    size_t token_count;
};

struct cr_put_item {
    const char *key;
    uint64_t size_bytes;                       /* 0..INT64_MAX (0: an empty object) */
    const struct cr_replicate_config *config;  /* NULL: 1 replica, no pin */
    const struct cr_block_info *block;         /* NULL: none */
};

/* ---- blocking calls (one request, wait for its reply) ------------------ */

int cr_client_get_version(cr_client *c, struct cr_version *out);
/* Liveness ping with this client's id; *ttl_ms (may be NULL) is the server's TTL. */
int cr_client_ping(cr_client *c, uint64_t *ttl_ms);
/* The same, and *known (may be NULL): whether the master knew this client
 * before this ping.  false means it restarted or let this client expire
 * (and unmounted its segments): a store server remounts them. */
int cr_client_heartbeat(cr_client *c, uint64_t *ttl_ms, bool *known);
int cr_client_mount_segment(cr_client *c, const struct cr_segment_spec *spec);
int cr_client_remount_segment(cr_client *c, const struct cr_segment_spec *spec);
int cr_client_unmount_segment(cr_client *c, const char *name);

/* Starts a put; on CR_OK *out holds the allocated replicas (to write into). */
int cr_client_put_start(cr_client *c, const char *tenant, const struct cr_put_item *item,
                        struct cr_replica_list *out);
int cr_client_put_end(cr_client *c, const char *tenant, const char *key);
/* PutEnd recording `checksum_xxh3`, XXH3_64bits (seed 0) of the bytes written:
 * readers get it back with the replica list and cr_client_get verifies it.
 * A repeated PutEnd with another checksum is CR_ERR_INVALID_PARAMS. */
int cr_client_put_end_checksum(cr_client *c, const char *tenant, const char *key,
                               uint64_t checksum_xxh3);
int cr_client_put_revoke(cr_client *c, const char *tenant, const char *key);
int cr_client_batch_put_start(cr_client *c, const char *tenant, const struct cr_put_item *items,
                              size_t count, struct cr_replica_lists *out);
int cr_client_batch_put_end(cr_client *c, const char *tenant, const char *const *keys,
                            size_t count, struct cr_status_list *out);
/* The same with checksums[i] for keys[i] (see cr_client_put_end_checksum). */
int cr_client_batch_put_end_checksums(cr_client *c, const char *tenant,
                                      const char *const *keys, const uint64_t *checksums,
                                      size_t count, struct cr_status_list *out);
int cr_client_batch_put_revoke(cr_client *c, const char *tenant, const char *const *keys,
                               size_t count, struct cr_status_list *out);

/* *exists is set on CR_OK; grants a lease on an existing object. */
int cr_client_exist_key(cr_client *c, const char *tenant, const char *key, bool *exists);
/* Per key: CR_OK (exists) or the server's code (CR_ERR_OBJECT_NOT_FOUND ...). */
int cr_client_batch_exist_key(cr_client *c, const char *tenant, const char *const *keys,
                              size_t count, struct cr_status_list *out);
int cr_client_get_replica_list(cr_client *c, const char *tenant, const char *key,
                               struct cr_replica_list *out);
int cr_client_batch_get_replica_list(cr_client *c, const char *tenant, const char *const *keys,
                                     size_t count, struct cr_replica_lists *out);
/* Every matching object, each list with its key set (order: the server's).
 * Both regex calls fail whole with CR_ERR_INVALID_PARAMS when the pattern
 * does not compile, is too expensive for the server's match limits, or
 * matches more keys than crescentd's --regex-max-matches (default 10000):
 * then no lease is granted and nothing is removed; narrow the pattern. */
int cr_client_get_replica_list_by_regex(cr_client *c, const char *tenant, const char *regex,
                                        struct cr_replica_lists *out);

int cr_client_remove(cr_client *c, const char *tenant, const char *key, bool force);
int cr_client_batch_remove(cr_client *c, const char *tenant, const char *const *keys,
                           size_t count, bool force, struct cr_status_list *out);
/* *removed (may be NULL) is the number of objects removed. */
int cr_client_remove_by_regex(cr_client *c, const char *tenant, const char *regex, bool force,
                              int64_t *removed);
/* tenant NULL here means EVERY tenant (the proto's unset tenant_id). */
int cr_client_remove_all(cr_client *c, const char *tenant, bool force, int64_t *removed);

int cr_client_batch_query_ip(cr_client *c, const uint8_t (*client_ids)[CR_CLIENT_ID_BYTES],
                             size_t count, struct cr_client_ips *out);
/* Clears this client's replicas of `keys` (on `segment`, or all when NULL). */
int cr_client_batch_replica_clear(cr_client *c, const char *tenant, const char *const *keys,
                                  size_t count, const char *segment, struct cr_key_list *out);

/* ---- object bytes: Put and Get ------------------------------------------ *
 * These move the bytes themselves, through the transfer layer (src/rdma/xfer.h)
 * straight between the caller's memory and the segments of the store servers
 * (crescent-store, crescentd's local segment) that the master picked:
 *
 *   Put = PutStart -> write every replica, all in parallel -> PutEnd with the
 *         XXH3-64 of the bytes.  Any failed write revokes the put (PutRevoke),
 *         so a half-written object is never readable; a put whose writer dies
 *         is never ended and the master frees it after its release timeout.
 *   Get = GetReplicaList (takes a lease) -> read the nearest complete replica
 *         (a same-host server first: shm when it serves it, then the others
 *         in the master's order, over tcp), falling back to the next replica
 *         when a read fails -> check that the read finished within the lease
 *         (else CR_ERR_LEASE_EXPIRED: the bytes may have been evicted and
 *         reused) and that the bytes match the put's checksum (else the next
 *         replica; CR_ERR_CHECKSUM when none matches).  Bytes that fail
 *         either check are never returned as the object.
 *
 * Transfers run on the calling thread (no hidden threads), through one
 * transfer client per cr_client, made on first use; same threading rules as
 * the rest of cr_client.  Errors: the master's status, or CR_ERR_IO (no
 * replica could be read or written: cr_client_last_error names each server
 * and why), CR_ERR_CHECKSUM, CR_ERR_LEASE_EXPIRED, CR_ERR_INVALID_PARAMS
 * (buffer too small for the object, with *len set to the size needed),
 * CR_ERR_NOMEM.  A 0-byte object is an object like any other: its put and
 * get are the RPCs alone, with no transfer (data may then be NULL). */

/* Stores `len` bytes at `data` under `key`.  config NULL: 1 replica. */
int cr_client_put(cr_client *c, const char *tenant, const char *key, const void *data,
                  size_t len, const struct cr_replicate_config *config);

/* Reads the object into a malloc'd buffer: on CR_OK *data (free() it) and *len. */
int cr_client_get(cr_client *c, const char *tenant, const char *key, void **data, size_t *len);

/* Reads the object into the caller's buffer [buf, buf + cap), with no copy
 * in between (tcp receives into it; verbs writes into it once registered).
 * On CR_OK *len is the object's size; when cap is too small the call fails
 * with CR_ERR_INVALID_PARAMS and *len is the size needed. */
int cr_client_get_into(cr_client *c, const char *tenant, const char *key, void *buf, size_t cap,
                       size_t *len);

/* Declares [addr, addr + len) as a buffer that Put and get_into will use,
 * so that a transport that needs registered memory (verbs) can move it
 * without a bounce copy; tcp and shm need none.  The memory must stay mapped
 * until cr_client_unregister_buffer (or cr_client_close).  CR_OK,
 * CR_ERR_INVALID_PARAMS, CR_ERR_NOMEM (64 buffers registered already) or
 * CR_ERR_IO (the RDMA device refused it: cr_client_last_error says why). */
int cr_client_register_buffer(cr_client *c, void *addr, size_t len);

/* Undoes cr_client_register_buffer of the buffer that starts at addr on
 * every transport (with an RDMA device its pages are unpinned); it may then
 * be freed.  CR_OK, CR_ERR_INVALID_PARAMS (not a registered buffer) or
 * CR_ERR_AGAIN (transfers using it are in flight; nothing changed). */
int cr_client_unregister_buffer(cr_client *c, void *addr);

/* Batch forms: one BatchPutStart, all writes of all objects in parallel,
 * one BatchPutEnd (for the objects written whole) and one BatchPutRevoke
 * (for the others); one BatchGetReplicaList and all reads in parallel.
 * Per-item results in `status` (request order); the call returns CR_OK when
 * the RPCs went through, whatever the items' statuses. */
struct cr_put_data {
    const char *key;
    const void *data;
    size_t len;                                /* 0: an empty object */
    const struct cr_replicate_config *config;  /* NULL: 1 replica */
    int status;                                /* out */
};
int cr_client_batch_put(cr_client *c, const char *tenant, struct cr_put_data *items,
                        size_t count);

/* Room made by offloads (docs/tiers.md, "A put that finds no room"): a put
 * whose PutStart is refused CR_ERR_NO_AVAILABLE_HANDLE (memory full; its
 * eviction is writing objects to a store server's SSD, and the room appears
 * when the server confirms) is started again, that error only, after 1 ms,
 * 2, 4 ... up to 64 ms apart, until `ms` have passed since its first try; a
 * batch put starts again only its items refused so.  Past the deadline the
 * put fails with the master's error as before.  Default
 * CR_CLIENT_PUT_RETRY_MS_DEFAULT, or $CRESCENT_PUT_RETRY_MS read at the first
 * put (0..3600000); 0: never retried.  Returns CR_ERR_INVALID_PARAMS for a
 * value out of 0..3600000. */
#define CR_CLIENT_PUT_RETRY_MS_DEFAULT 2000
int cr_client_set_put_retry_ms(cr_client *c, int ms);

struct cr_put_retry_stats {
    int deadline_ms;       /* the retry deadline in force */
    uint64_t puts_retried; /* puts (batch items) refused for room at least once */
    uint64_t retries;      /* PutStarts sent again (a batch's round counts once) */
    uint64_t recovered;    /* retried puts that then got their room */
    uint64_t gave_up;      /* still refused at the deadline: the put failed */
};
void cr_client_put_retry_stats(cr_client *c, struct cr_put_retry_stats *out);

struct cr_get_buffer {
    const char *key;
    void *buf;     /* the caller's buffer, cap bytes */
    size_t cap;
    size_t len;    /* out: the object's size (also when cap was too small) */
    int status;    /* out */
};
int cr_client_batch_get_into(cr_client *c, const char *tenant, struct cr_get_buffer *items,
                             size_t count);
/* ---- byte ranges of objects whose replicas the caller holds ------------ *
 * A put in parts (Mooncake's put sessions): cr_client_batch_put_start
 * reserves the objects and returns their replica lists; cr_client_write_ranges
 * writes ranges of each into every replica, as often as needed; then
 * cr_client_batch_put_end makes them readable (without a checksum: reads of
 * such an object are not verified) or cr_client_batch_put_revoke drops them.
 * A ranged read (Mooncake's get sessions, get_into_ranges) reads with a list
 * from cr_client_get_replica_list / _batch_ (which grants a lease: read
 * within it); a range is not checksummed (only a whole object can be).
 *
 * Each range names its object's list, a window [offset, offset + len) of
 * the object, and the caller's buffer; `status` is set per range: CR_OK,
 * CR_ERR_INVALID_PARAMS (the window is outside the object, or the list has
 * no usable replica), or the transfer's failure (a write fails when any
 * replica's fails; a read tries the next complete replica, same host first).
 * The call returns CR_OK when every range's status is CR_OK, else the first
 * failing range's status (cr_client_last_error says which and why).  Every
 * range is moved at once, in parallel. */
struct cr_range {
    const struct cr_replica_list *list;
    uint64_t offset;
    void *buf;
    size_t len;
    int status; /* out */
};
int cr_client_write_ranges(cr_client *c, struct cr_range *ranges, size_t count);
int cr_client_read_ranges(cr_client *c, struct cr_range *ranges, size_t count);


/* ---- the shared file tier (docs/tiers.md) ------------------------------ *
 * When crescentd runs with --root_fs_dir, the first put or get of a client
 * asks it for the root and cluster id (GetVersion) and compares its own view
 * of the root: cr_client_set_root_fs_dir, else $CRESCENT_ROOT_FS_DIR.  A
 * client with no view, or another path, is refused: that put or get and
 * every later one fail with CR_ERR_INVALID_PARAMS saying what to set.
 * Then every successful put (cr_client_put, cr_client_batch_put) is also
 * persisted by a writer thread to <root>/<cluster_id>/... (the call does not
 * wait; the bytes are copied into one of the writer's pre-faulted buffers, and
 * a put that finds none free is not persisted: persist_skipped_busy), reported
 * to crescentd, which records a disk
 * replica; a get that finds no memory replica to read reads the file,
 * checking its header and XXH3.  A failed persist (directory missing,
 * read-only, full) leaves the put in memory and is counted (stats below,
 * crescentd's /metrics and /health). */
int cr_client_set_root_fs_dir(cr_client *c, const char *root_fs_dir);

/* Waits (at most timeout_ms) until every queued persist is written or
 * failed, and reports them.  CR_OK, or CR_ERR_TIMEOUT with work left. */
int cr_client_file_tier_flush(cr_client *c, int timeout_ms);

struct cr_file_tier_stats {
    bool enabled;                 /* crescentd has a file tier and this client uses it */
    uint64_t persisted, persist_bytes;
    uint64_t persist_failed;      /* by cause below (and "other") */
    uint64_t failed_missing, failed_read_only, failed_full;
    uint64_t persist_dropped;     /* not queued: out of memory, key or value too large */
    uint64_t queued_bytes;
    uint64_t reads, read_bytes, read_failures;
    uint64_t read_ns_total;       /* time in file reads (open to checksum) */
    uint64_t corrupt_dropped;     /* files found gone or corrupt, reported dropped */
    uint64_t reports_refused;     /* persists crescentd did not record */
    /* not persisted: every buffer of the writer was queued (it is behind);
     * the put is in memory (docs/tiers.md, "Writing") */
    uint64_t persist_skipped_busy;
};
void cr_client_file_tier_stats(cr_client *c, struct cr_file_tier_stats *out);

/* ---- read latency per tier (docs/tiers.md, "Read latency") ------------- *
 * Every get of this client that returns an object's bytes, checked, counts
 * the time its read of the replica took, from the start of that replica's
 * read to its verdict (a memory replica: the transfer or same-host copy and
 * the XXH3; a file: open, read, XXH3), under the replica's tier.  crescentd
 * never sees a read (clients read replicas directly), so these live here;
 * an engine exports them with its own metrics, e.g. with
 * cr_client_read_latency_metrics. */
enum cr_read_tier {
    CR_READ_TIER_MEMORY = 0,     /* "memory": a mounted segment */
    CR_READ_TIER_DISK = 1,       /* "disk": the shared file tier */
    CR_READ_TIER_LOCAL_DISK = 2, /* "local_disk": a store server's SSD tier */
};
#define CR_READ_TIERS 3
#define CR_READ_LATENCY_BOUNDS 19u

struct cr_read_latency {
    uint64_t count;                                 /* reads counted */
    uint64_t sum_ns;                                /* their total time */
    uint64_t bound_ns[CR_READ_LATENCY_BOUNDS];      /* bucket upper bounds, 10 us .. 10 s */
    uint64_t buckets[CR_READ_LATENCY_BOUNDS + 1];   /* reads per bucket (not cumulative); last: +Inf */
};

/* One tier's histogram.  CR_OK, or CR_ERR_INVALID_PARAMS for a tier out of
 * range. */
int cr_client_read_latency(cr_client *c, int tier, struct cr_read_latency *out);

/* The three as Prometheus text (one histogram family,
 * crescent_client_read_latency_seconds{tier="memory"|"disk"|"local_disk"}),
 * NUL-terminated in buf.  *len (when not NULL) gets the text's length.
 * CR_OK, or CR_ERR_INVALID_PARAMS when cap is too small (8 KiB suffices). */
int cr_client_read_latency_metrics(cr_client *c, char *buf, size_t cap, size_t *len);

/* How many reads of local_disk replicas (a store server's SSD tier, read
 * through its "<segment>#ssd" segment) this client asked for, successful or
 * not, since it was opened: Mooncake's get_offload_rpc_read_count, which
 * counts its offload RPCs to the peers that hold SSD replicas.  Memory and
 * shared-file reads are not counted. */
uint64_t cr_client_offload_read_count(cr_client *c);

/* Of those reads, how many read the object's file passed over the store
 * server's shm socket (same host: *reads), and how many asked for it and
 * were refused or found it failing a check, then read by tcp (*fallbacks).
 * docs/tiers.md, "Local SSD tier". */
void cr_client_offload_shm_counts(cr_client *c, uint64_t *reads, uint64_t *fallbacks);
/* ---- copy/move tasks (seed 004) --------------------------------------- *
 * A task copies a complete object onto other segments (copy) or onto one
 * other segment, dropping the source replica (move).  crescentd reserves the
 * targets (never readable before the commit) and hands the task to the
 * client that mounted the source segment; that executor fetches it
 * (cr_client_fetch_tasks), moves the bytes and reports
 * (cr_client_mark_task_to_complete).  A task not reported within crescentd's
 * --task-timeout-sec (300 s) is rolled back and FAILED; the last
 * --task-retention (10000) finished tasks can be queried. */

/* OFFLOAD: memory eviction's copy of an object from the executor's own
 * segment (source) to its SSD tier (docs/tiers.md); no targets; reported
 * with cr_client_mark_task_offloaded. */
enum cr_client_task_type {
    CR_CLIENT_TASK_COPY = 0,
    CR_CLIENT_TASK_MOVE = 1,
    CR_CLIENT_TASK_OFFLOAD = 2,
};
enum cr_client_task_status {
    CR_CLIENT_TASK_PENDING = 0,    /* created, not fetched by its executor yet */
    CR_CLIENT_TASK_PROCESSING = 1, /* fetched, or a move waiting for a lease on its source */
    CR_CLIENT_TASK_SUCCESS = 2,
    CR_CLIENT_TASK_FAILED = 3,
};
#define CR_CLIENT_TASK_MESSAGE_MAX 256u

struct cr_task_info {
    uint8_t id[CR_CLIENT_ID_BYTES];
    enum cr_client_task_type type;
    enum cr_client_task_status status;
    int64_t created_at_ms_epoch;
    int64_t last_updated_at_ms_epoch;
    uint8_t assigned_client[CR_CLIENT_ID_BYTES];
    char message[CR_CLIENT_TASK_MESSAGE_MAX]; /* cut to fit */
};

/* "REPLICA_COPY", "PENDING", ... */
const char *cr_client_task_type_name(enum cr_client_task_type type);
const char *cr_client_task_status_name(enum cr_client_task_status status);

/* Copies `key` onto each of targets[0..count) (1 to 7 segment names), from
 * `source` (NULL: any complete replica).  Returns CR_OK and the task id, or
 * crescentd's refusal: CR_ERR_OBJECT_NOT_FOUND, CR_ERR_OBJECT_NOT_READY,
 * CR_ERR_SEGMENT_NOT_FOUND, CR_ERR_INVALID_PARAMS (a target holding a
 * replica already, named twice, or the source), CR_ERR_NO_AVAILABLE_HANDLE. */
int cr_client_create_copy_task(cr_client *c, const char *tenant, const char *key,
                               const char *source, const char *const *targets, size_t count,
                               uint8_t task_id[CR_CLIENT_ID_BYTES]);
/* Moves `key`'s replica on `source` to `target`; refusals as above. */
int cr_client_create_move_task(cr_client *c, const char *tenant, const char *key,
                               const char *source, const char *target,
                               uint8_t task_id[CR_CLIENT_ID_BYTES]);
/* CR_ERR_OBJECT_NOT_FOUND: no such task (or dropped past --task-retention). */
int cr_client_query_task(cr_client *c, const uint8_t task_id[CR_CLIENT_ID_BYTES],
                         struct cr_task_info *out);

/* The executor's side.  One task: read `source`, write each target
 * (source.size_bytes bytes at target.buffer), verify, report. */
struct cr_task_assignment {
    uint8_t id[CR_CLIENT_ID_BYTES];
    enum cr_client_task_type type;
    char *tenant;
    char *key;
    struct cr_buf_handle source;
    size_t target_count;
    struct cr_buf_handle *targets;
    uint64_t deadline_in_ms; /* left before crescentd fails the task */
    bool has_checksum;       /* the object's PutEnd checksum (XXH3-64) to verify against */
    uint64_t checksum_xxh3;
};
struct cr_task_assignments {
    size_t count;
    struct cr_task_assignment *tasks;
};
void cr_client_task_assignments_free(struct cr_task_assignments *list);

/* Takes up to `max` (1..256) of the PENDING tasks assigned to this client's
 * id (they become PROCESSING).  *out may be empty. */
int cr_client_fetch_tasks(cr_client *c, uint32_t max, struct cr_task_assignments *out);
/* cr_client_heartbeat that also takes up to `max` (1..256) of this client's
 * PENDING tasks in the Ping response (seed 004's hand-out; the same tasks
 * FetchTasks would give).  *out may be empty. */
int cr_client_heartbeat_tasks(cr_client *c, uint32_t max, uint64_t *ttl_ms, bool *known,
                              struct cr_task_assignments *out);
/* Reports a fetched task: success commits the targets (and, for a move,
 * releases the source once no lease protects it); failure frees them.
 * `message` may be NULL.  CR_ERR_ILLEGAL_CLIENT: assigned to another client;
 * CR_ERR_INVALID_PARAMS: not fetched, already reported or already ended
 * (e.g. past its deadline). */
int cr_client_mark_task_to_complete(cr_client *c, const uint8_t task_id[CR_CLIENT_ID_BYTES],
                                    bool success, const char *message);
/* Reports an OFFLOAD task done: the object is durable on this server's SSD
 * at `position` (the id its "#ssd" reader segment serves it by); the master
 * records a local_disk replica there and frees the memory replica.  A
 * failed offload is reported with cr_client_mark_task_to_complete(false).
 * Same returns. */
int cr_client_mark_task_offloaded(cr_client *c, const uint8_t task_id[CR_CLIENT_ID_BYTES],
                                  uint64_t position);

/* ---- pipelined calls --------------------------------------------------- *
 * submit_* sends a request without waiting and returns its request id;
 * cr_client_poll collects completions in the order replies arrive (not
 * submission order).  Blocking calls may be mixed in: replies to pipelined
 * requests that arrive meanwhile are kept for the next poll.  A submit may
 * wait for send room (ZMQ high-water mark) up to the client's timeout.
 * Completions carry the status and a few scalars read without unpacking the
 * reply (no allocation per reply); to read replica lists, use the blocking or
 * batch forms (BatchGetReplicaList fetches many in one round trip). */

struct cr_completion {
    uint64_t request_id;
    enum cr_method method;
    int status;              /* the server's status_code or a transport error */
    bool exists;             /* EXIST_KEY: the object exists */
    uint32_t replica_count;  /* PUT_START, GET_REPLICA_LIST: replicas in the reply */
};

int cr_client_submit_put_start(cr_client *c, const char *tenant, const struct cr_put_item *item,
                               uint64_t *request_id);
int cr_client_submit_put_end(cr_client *c, const char *tenant, const char *key,
                             uint64_t *request_id);
int cr_client_submit_put_revoke(cr_client *c, const char *tenant, const char *key,
                                uint64_t *request_id);
int cr_client_submit_exist_key(cr_client *c, const char *tenant, const char *key,
                               uint64_t *request_id);
int cr_client_submit_get_replica_list(cr_client *c, const char *tenant, const char *key,
                                      uint64_t *request_id);
int cr_client_submit_remove(cr_client *c, const char *tenant, const char *key, bool force,
                            uint64_t *request_id);
int cr_client_submit_ping(cr_client *c, uint64_t *request_id);

/* Number of pipelined requests submitted and not yet returned by poll.
 * Every submitted request is returned by poll exactly once: with its reply,
 * or with status CR_ERR_TIMEOUT when no reply came within the client's
 * timeout (as set when it was submitted) — crescentd restarted, or the reply
 * was lost — so a loop polling until this reaches 0 ends.  A reply arriving
 * after its request timed out is dropped. */
size_t cr_client_in_flight(const cr_client *c);

/* Fills up to `max` (1..INT_MAX) completions; waits at most `timeout_ms` (0:
 * do not wait, -1: the client's timeout) for the first one, then takes
 * whatever else is already there, including CR_ERR_TIMEOUT completions of
 * requests past their deadline.  Returns the count (>= 0; 0 on timeout) or a
 * negative cr_status on a transport failure.  A reply whose body does not
 * decode becomes a completion with status CR_ERR_PROTOCOL; one whose envelope
 * (request id) cannot be read is dropped, and its request times out. */
int cr_client_poll(cr_client *c, struct cr_completion *out, size_t max, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif

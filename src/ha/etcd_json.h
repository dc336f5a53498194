/* etcd v3's JSON gateway (grpc-gateway), its answers decoded and validated
 * fully: what crescent's election (elect.h) and clients that follow the
 * leader (libcrescent's etcd:// endpoints) read from etcd.
 *
 * The gateway writes int64 fields as JSON strings of digits ("revision":
 * "12"), leaves out fields at their zero value (a false "succeeded", a TTL
 * of 0) and encodes keys and values in base64.  An answer is taken only
 * when every field crescent reads has the type and range it must have; any
 * other shape is refused with CR_ERR_PROTOCOL and a sentence (a gateway
 * error object, {"error": ..., "code": N}, gives its own message).  Fields
 * crescent does not read are ignored.
 *
 * Pure: no I/O, no globals; the fuzz target is tests/fuzz/fuzz_etcd_json.c. */
#ifndef CRESCENT_HA_ETCD_JSON_H
#define CRESCENT_HA_ETCD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_ETCD_KEY_MAX 512u    /* bytes of a key crescent reads or writes */
#define CR_ETCD_VALUE_MAX 4096u /* bytes of a value (the leader's addresses, JSON) */
#define CR_ETCD_ERROR_MAX 256u

/* One key-value as etcd keeps it. */
struct cr_etcd_kv {
    bool found;
    char key[CR_ETCD_KEY_MAX + 1]; /* NUL-terminated (a key with a NUL is refused) */
    size_t key_len;
    char value[CR_ETCD_VALUE_MAX + 1]; /* NUL-terminated for convenience */
    size_t value_len;
    int64_t create_revision; /* the election's term: the revision that created the key */
    int64_t mod_revision;
    int64_t lease; /* 0: none */
};

/* POST /v3/kv/range of one key: header revision and the kv (found false
 * when there is none).  Returns 0 or CR_ERR_PROTOCOL (err set). */
int cr_etcd_decode_range(const char *json, size_t len, int64_t *revision, struct cr_etcd_kv *kv,
                         char err[CR_ETCD_ERROR_MAX]);

/* POST /v3/kv/txn whose success branch is a put and whose failure branch is
 * a range of the same key (cr_etcd_create): *succeeded, the header revision
 * (the put's revision when it succeeded), and on failure the key's holder
 * in *holder.  Returns 0 or CR_ERR_PROTOCOL. */
int cr_etcd_decode_txn(const char *json, size_t len, bool *succeeded, int64_t *revision,
                       struct cr_etcd_kv *holder, char err[CR_ETCD_ERROR_MAX]);

/* POST /v3/lease/grant: the lease id and the TTL granted (seconds, > 0).
 * Returns 0 or CR_ERR_PROTOCOL (etcd's own refusal in err). */
int cr_etcd_decode_grant(const char *json, size_t len, int64_t *id, int64_t *ttl_s,
                         char err[CR_ETCD_ERROR_MAX]);

/* POST /v3/lease/keepalive: one streamed message {"result": {...}}; *ttl_s
 * is the lease's TTL after the renewal, 0 when the lease no longer exists.
 * Returns 0 or CR_ERR_PROTOCOL. */
int cr_etcd_decode_keepalive(const char *json, size_t len, int64_t id, int64_t *ttl_s,
                             char err[CR_ETCD_ERROR_MAX]);

/* One line of POST /v3/watch's stream: {"result": {"created": true, ...}}
 * or a result with events.  *events is how many events it carries (a
 * created or progress message has none), *deleted whether any is a DELETE,
 * *revision the header revision.  Returns 0 or CR_ERR_PROTOCOL. */
int cr_etcd_decode_watch(const char *json, size_t len, uint32_t *events, bool *deleted,
                         int64_t *revision, char err[CR_ETCD_ERROR_MAX]);

/* Base64 of len bytes into out (NUL-terminated); false when out_size is too
 * small. */
bool cr_etcd_base64(const void *data, size_t len, char *out, size_t out_size);

#endif

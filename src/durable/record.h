/* The store master's durable records: what the operation log and the
 * snapshots hold (docs/durability.md).
 *
 * A record states an effect, not a call: "segment S is mounted with these
 * parameters", "object K now looks like this", "object K is gone".  Replaying
 * effects needs no allocator, clock or random draw to come out the same way
 * twice, and every record is idempotent (a later record about the same key
 * or segment replaces the earlier one), which is what lets a snapshot be
 * taken while the store keeps changing (durable_image.c).
 *
 * Framing (the same in the log and in snapshots), little-endian:
 *
 *     u32 body_len | u64 check | body
 *     body = u8 type | u64 lsn | payload
 *
 * `check` is XXH3-64 of the body (the store's own hash, already linked; a
 * torn or flipped record fails it).  body_len is bounded by
 * CR_DURABLE_RECORD_MAX, so a corrupt length cannot ask for gigabytes.
 *
 * Pure code (no threads, no I/O, no logging), like src/core. */
#ifndef CRESCENT_DURABLE_RECORD_H
#define CRESCENT_DURABLE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/store.h"
#include "durable/record_drain.h"

#define CR_DURABLE_FRAME_HEADER 12u /* u32 body_len + u64 check */
/* The largest body: an object with the longest key, tenant and every replica
 * on a segment with the longest name, with room to spare. */
#define CR_DURABLE_RECORD_MAX 16384u

enum cr_durable_type {
    CR_DURABLE_SEGMENT_MOUNT = 1,
    CR_DURABLE_SEGMENT_UNMOUNT = 2,
    CR_DURABLE_OBJECT_PUT = 3,    /* a complete object's whole state */
    CR_DURABLE_OBJECT_REMOVE = 4, /* the key is gone */
    CR_DURABLE_REMOVE_ALL = 5,    /* every object of a tenant, or of all */
    CR_DURABLE_SNAPSHOT_END = 6,  /* a snapshot's last record */
    /* On disk only: an OBJECT_PUT some of whose replicas are not in memory
     * (each replica starts with its medium byte; a disk replica is its file
     * path and size).  The encoder writes it for such objects, and type 3,
     * byte for byte as before, for the rest; the decoder gives both back as
     * CR_DURABLE_OBJECT_PUT.  Logs of earlier versions read unchanged. */
    CR_DURABLE_OBJECT_PUT_TIERED = 7,
    /* A drain job's whole state (record_drain.h).  Logs of earlier
     * versions read unchanged; an earlier crescentd refuses this type. */
    CR_DURABLE_DRAIN_JOB = 8,
    CR_DURABLE_TYPE_MAX = 8,
};

enum {
    CR_DURABLE_OBJ_CHECKSUM = 1u << 0,
    CR_DURABLE_OBJ_SOFT_PIN = 1u << 1,
    CR_DURABLE_OBJ_HARD_PIN = 1u << 2,
    CR_DURABLE_OBJ_FLAGS = 7u,
};

struct cr_durable_replica {
    uint8_t medium;  /* enum cr_replica_medium; 0 memory */
    char segment[CR_STORE_NAME_LEN_MAX + 1]; /* memory, local_disk; "" for disk */
    uint64_t offset; /* memory: within the segment (buffer - base); local_disk: position */
    uint64_t size;   /* memory: bytes allocated; else the object's size */
};

/* A decoded record.  Strings are NUL-terminated copies (names hold no NUL);
 * a key is key_len arbitrary bytes.  Only the fields of `type` are set. */
struct cr_durable_record {
    enum cr_durable_type type;
    uint64_t lsn;
    /* SEGMENT_MOUNT, SEGMENT_UNMOUNT (name only) */
    char name[CR_STORE_NAME_LEN_MAX + 1];
    char endpoint[CR_STORE_ENDPOINT_LEN_MAX + 1];
    char protocol[CR_STORE_NAME_LEN_MAX + 1];
    struct cr_uuid owner; /* also an object's owner */
    uint64_t base;
    uint64_t size; /* a segment's bytes, or an object's value length */
    /* OBJECT_PUT, OBJECT_REMOVE, REMOVE_ALL (tenant; "" = every tenant) */
    char tenant[CR_STORE_NAME_LEN_MAX + 1];
    uint32_t key_len;
    char key[CR_STORE_KEY_LEN_MAX];
    uint8_t flags; /* CR_DURABLE_OBJ_* */
    uint64_t checksum;
    uint32_t replica_count;
    struct cr_durable_replica replicas[CR_STORE_REPLICAS_MAX];
    /* The disk replica's file (an object has at most one); "" when none. */
    char file_path[CR_STORE_FILE_PATH_LEN_MAX + 1];
    /* SNAPSHOT_END: records before it in the snapshot */
    uint64_t record_count;
    /* DRAIN_JOB (last: the decoder clears only what a record's type uses) */
    struct cr_durable_drain drain;
};

/* Appends one framed record to `out`.  The record's fields must be within
 * the bounds above (asserted: records are made by the store thread from
 * store state, never from input).  Returns CR_OK or CR_ERR_NOMEM (out
 * failed). */
int cr_durable_encode(const struct cr_durable_record *rec, struct cr_buf *out);

/* The bytes one framed record of `rec` takes (for sizing). */
size_t cr_durable_encoded_size(const struct cr_durable_record *rec);

/* What cr_durable_frame_next found at the start of a byte range. */
enum cr_durable_frame_status {
    CR_DURABLE_FRAME_OK = 0,
    CR_DURABLE_FRAME_END = 1,       /* no bytes left */
    CR_DURABLE_FRAME_TORN = 2,      /* fewer bytes than the frame claims */
    CR_DURABLE_FRAME_BAD_LEN = 3,   /* a length no record has */
    CR_DURABLE_FRAME_BAD_CHECK = 4, /* the checksum does not match */
};

/* Looks at the frame at the start of p[0..len): on OK sets *body, *body_len
 * and *frame_len (header included).  Reads nothing outside the range. */
enum cr_durable_frame_status cr_durable_frame_next(const uint8_t *p, size_t len,
                                                   const uint8_t **body, uint32_t *body_len,
                                                   size_t *frame_len);

/* Decodes one checked body into *out, validating every field (type known,
 * lengths within bounds, no NUL in names, flags known, no trailing bytes).
 * Returns CR_OK, or CR_ERR_PROTOCOL with a sentence in err (err_len > 0). */
int cr_durable_decode(const uint8_t *body, uint32_t body_len, struct cr_durable_record *out,
                      char *err, size_t err_len);

const char *cr_durable_frame_status_text(enum cr_durable_frame_status st);

#endif

/* The operation log's and the snapshots' file formats (docs/durability.md).
 *
 * A log file is a 16-byte header followed by framed records (record.h):
 *
 *     "CRESWAL\0" | u32 format | u32 0 | frames...
 *
 * A snapshot is a 24-byte header, framed records (segments first, then
 * objects) and a SNAPSHOT_END record counting them:
 *
 *     "CRESSNAP" | u32 format | u32 0 | u64 lsn | frames... | SNAPSHOT_END
 *
 * `lsn` is the log position the snapshot was begun at: replay applies the
 * log's records with a larger lsn on top of it.
 *
 * The scanners are pure (bytes in, verdict out) so the unit tests and the
 * fuzzer drive them without files; the file helpers below them do the
 * system calls (read whole, write-then-rename with fsync of the file and
 * the directory, as etcd's WAL does). */
#ifndef CRESCENT_DURABLE_FILES_H
#define CRESCENT_DURABLE_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "durable/record.h"

#define CR_DURABLE_FORMAT 1u
#define CR_DURABLE_LOG_HEADER 16u
#define CR_DURABLE_SNAPSHOT_HEADER 24u

typedef int (*cr_durable_apply_fn)(void *ctx, const struct cr_durable_record *rec, char *err,
                                   size_t err_len);

/* The same with the checked body `rec` was decoded from (valid during the
 * call), for a target that keeps the bytes (the replay image, image.h). */
typedef int (*cr_durable_body_fn)(void *ctx, const struct cr_durable_record *rec,
                                  const uint8_t *body, uint32_t body_len, char *err,
                                  size_t err_len);

/* What a log scan found. */
struct cr_durable_log_scan {
    uint64_t records;      /* whole records applied */
    uint64_t last_lsn;     /* of the last one (0 when none) */
    size_t good_len;       /* bytes up to the end of the last whole record */
    enum cr_durable_frame_status tail; /* what stopped the scan (END when clean) */
};

/* Writes a log file's header into out (CR_DURABLE_LOG_HEADER bytes). */
void cr_durable_log_header(uint8_t out[CR_DURABLE_LOG_HEADER]);

/* Scans a log file's bytes: checks the header, then decodes and hands each
 * whole record to apply (skipping none).  A frame that is cut short, has an
 * impossible length or a wrong checksum ends the scan there: out->good_len
 * says where the whole records end and out->tail why, and the caller
 * truncates the file to good_len (a torn tail is what a crash leaves).
 * Returns CR_OK (also for a torn tail), or CR_ERR_PROTOCOL with a sentence
 * in err for what truncation cannot fix: a header of another file or a
 * newer format, a whole record that does not decode, lsns that do not
 * increase, or apply's own error (passed through). */
int cr_durable_log_scan(const uint8_t *data, size_t len, cr_durable_apply_fn apply, void *ctx,
                        struct cr_durable_log_scan *out, char *err, size_t err_len);

/* cr_durable_log_scan handing each record over with its body. */
int cr_durable_log_scan_bodies(const uint8_t *data, size_t len, cr_durable_body_fn apply,
                               void *ctx, struct cr_durable_log_scan *out, char *err,
                               size_t err_len);

/* Writes a snapshot's header (CR_DURABLE_SNAPSHOT_HEADER bytes). */
void cr_durable_snapshot_header(uint64_t lsn, uint8_t out[CR_DURABLE_SNAPSHOT_HEADER]);

/* Checks and applies a whole snapshot: header, every record, the end
 * record's count, nothing after it.  Applies only once all of it checked,
 * so a bad snapshot applies nothing.  Sets *lsn.  Returns CR_OK, or
 * CR_ERR_PROTOCOL with a sentence in err (truncated, corrupt at an offset,
 * a newer format, not a snapshot) or apply's error. */
int cr_durable_snapshot_scan(const uint8_t *data, size_t len, cr_durable_apply_fn apply,
                             void *ctx, uint64_t *lsn, char *err, size_t err_len);

/* Checks and applies a snapshot as cr_durable_snapshot_scan does, in one
 * pass instead of two: each record is applied once it is checked, so when
 * the snapshot turns out bad, the records before the fault were applied.
 * For a target the caller throws away on error (recovery's store:
 * crescentd does not start from a bad snapshot, recover.c). */
int cr_durable_snapshot_load(const uint8_t *data, size_t len, cr_durable_body_fn apply,
                             void *ctx, uint64_t *lsn, char *err, size_t err_len);

/* cr_durable_snapshot_load with a lookahead: each record is shown to peek
 * (NULL: none) as soon as it is checked, and applied `ahead` records later
 * (at most CR_DURABLE_SNAPSHOT_AHEAD_MAX), in file order: a restore starts
 * loading what the next few records will touch while it applies one.  A
 * record peeked at may never be applied (the snapshot turns out bad). */
#define CR_DURABLE_SNAPSHOT_AHEAD_MAX 16u
typedef void (*cr_durable_peek_fn)(void *ctx, const struct cr_durable_record *rec);
int cr_durable_snapshot_load_ahead(const uint8_t *data, size_t len, uint32_t ahead,
                                   cr_durable_peek_fn peek, cr_durable_body_fn apply, void *ctx,
                                   uint64_t *lsn, char *err, size_t err_len);

/* The count of records a snapshot's end record states, to size tables
 * before loading it (at most what len bytes can hold); 0 when its last
 * bytes are no whole end record (the load then says what is wrong). */
uint64_t cr_durable_snapshot_count_hint(const uint8_t *data, size_t len);

/* ---- files (system calls) ------------------------------------------------- */

/* Reads a whole file into a malloc'd buffer.  Returns CR_OK, CR_ERR_IO
 * (err names the file and errno's text) or CR_ERR_NOMEM. */
int cr_durable_read_file(const char *path, uint8_t **data, size_t *len, char *err,
                         size_t err_len);

/* The same for files of any size, in a buffer of its own mapping (2 MiB
 * pages where the kernel allows): a restart's snapshot of millions of
 * objects.  Free it with cr_durable_big_free(data, len). */
int cr_durable_read_big(const char *path, uint8_t **data, size_t *len, char *err,
                        size_t err_len);
void cr_durable_big_free(uint8_t *data, size_t len);

/* A snapshot file mapped read-only with its pages in (MAP_POPULATE), not
 * copied: the page cache's pages are mapped as they are, where a buffer of
 * its own is memory the kernel must zero first (on a virtual machine, 1.5
 * s more for a snapshot of 10 M objects, bench/RESULTS.md).  Only for a
 * file nobody shortens while it is mapped (reading past a cut would be
 * SIGBUS): snapshots are written beside their place and renamed into it,
 * never truncated or rewritten.  Same returns as cr_durable_read_big; an
 * empty file is read instead.  Free it with cr_durable_big_free. */
int cr_durable_map_snapshot(const char *path, uint8_t **data, size_t *len, char *err,
                            size_t err_len);

/* fsyncs a directory, so that a rename or create in it survives a crash.
 * Returns CR_OK or CR_ERR_IO (err set). */
int cr_durable_sync_dir(const char *dir, char *err, size_t err_len);

/* Truncates path to len bytes and fsyncs it.  Returns CR_OK or CR_ERR_IO. */
int cr_durable_truncate(const char *path, size_t len, char *err, size_t err_len);

#endif

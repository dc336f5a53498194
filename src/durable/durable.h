/* Durable metadata of the store master (docs/durability.md): what crescentd
 * keeps under --state-dir so that a restart finds every object again.
 *
 * Files in the state directory:
 *     store-<16 hex digits>.log   operation logs, named by their first lsn
 *                                 (files.h); appended by the journal actor
 *     snapshot-<16 hex>.snap      the store as of a fuzzy cut begun at that
 *                                 lsn; the log from lsn + 1 on makes it exact
 *     snapshot-<16 hex>.tmp       one being written (removed at start)
 * Records (record.h) state effects; recovery restores the snapshot straight
 * into the store and applies the logs after it (recover.c, the argument for
 * it there); the replay image (image.h) builds the same store another way
 * (cr_durable_materialize: tests and bench/ compare the two).
 *
 * Threads: recovery runs on the main thread while segments' state is
 * created, before any actor runs (with a helper thread of its own that
 * populates the store's slab and has ended when recovery returns,
 * prefill.h); the journal actor (journal.c) then owns
 * the newest log file; segments owns its feed (feed.h). */
#ifndef CRESCENT_DURABLE_DURABLE_H
#define CRESCENT_DURABLE_DURABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/store.h"
#include "durable/image.h"

#define CR_DURABLE_PATH_MAX 4096u

struct cr_daemon_config;

enum cr_durability {
    CR_DURABILITY_NONE = 0,  /* no log: a restart starts empty */
    CR_DURABILITY_ASYNC = 1, /* synced at least every 10 ms */
    CR_DURABILITY_SYNC = 2,  /* a mutating call is answered once its record is synced */
};

/* The mode crescentd runs with: NONE without --state-dir, else --durability. */
enum cr_durability cr_durability_of(const struct cr_daemon_config *config);

/* Parses "none", "async" or "sync".  Returns CR_OK or CR_ERR_INVALID_PARAMS. */
int cr_durability_parse(const char *text, enum cr_durability *out);

struct cr_durable_recovery {
    uint64_t snapshot_lsn;     /* of the snapshot loaded (0: none) */
    uint32_t logs;             /* log files read */
    uint64_t records;          /* records replayed */
    uint64_t last_lsn;         /* the next record is last_lsn + 1 */
    uint64_t truncated_bytes;  /* of a torn tail cut off the newest log */
    uint32_t segments;         /* mounted again */
    uint64_t objects;          /* restored */
    uint64_t objects_dropped;  /* no replica could be placed */
    uint64_t replicas_dropped; /* on a segment gone, or a range taken */
    /* Where the time went (monotonic clock; for the log line and bench/). */
    uint64_t read_ns;        /* reading the files */
    uint64_t replay_ns;      /* checking and applying their records to the store */
    uint64_t index_ns;       /* of replay_ns: the key index built after the snapshot */
    uint64_t materialize_ns; /* claiming the restored replicas' ranges (the finish) */
    uint64_t finish_plan_ns;   /* of materialize_ns: collecting and sorting them */
    uint64_t finish_claims_ns; /* of materialize_ns: the claims, on finish_threads threads */
    uint32_t finish_threads;   /* finish.h */
    uint64_t prefilled_bytes; /* of the store's slab populated by a second thread (prefill.h) */
    /* Drain jobs replayed, for segments_drain.c to resume (it frees them). */
    struct cr_durable_drain_jobs drain_jobs;
};

/* Builds the store from an image: mounts its segments (each owned by its
 * recorded client, which counts as seen at now_ms and so has --client-ttl
 * to ping), then adds its objects, each replica at its recorded offset
 * (claimed in ascending offset order per segment, so a restart with
 * millions of objects is O(n log n)).  Fills the segment and object counts
 * of *out.  Returns CR_OK, or the store's error with a sentence in err
 * (a table of the store too small for what the log holds). */
int cr_durable_materialize(const struct cr_durable_image *img, cr_store *store, uint64_t now_ms,
                           struct cr_durable_recovery *out, char *err, size_t err_len);

/* Restores dir's newest snapshot straight into the store (a bulk restore,
 * store_restore.h) and applies the logs' records after it in lsn order
 * (cr_durable_apply; drain jobs are kept in out->drain_jobs), then claims
 * the replicas' ranges.  A torn
 * or corrupt tail of the newest log is cut off (the file truncated and
 * synced; *out says how many bytes) — what a crash mid-write leaves; the
 * same in an older log, a newer format or a record that does not decode is
 * refused; on any error the objects restored so far are removed.
 * Creates dir when missing.  Once the snapshot's object count is
 * known, a second thread reserves the store's room for them and populates
 * its slab while the objects are restored (prefill.h); it has ended when this
 * returns.  Returns CR_OK, or CR_ERR_IO /
 * CR_ERR_PROTOCOL / the store's error with a sentence naming the file in
 * err. */
int cr_durable_recover(const char *dir, cr_store *store, uint64_t now_ms,
                       struct cr_durable_recovery *out, char *err, size_t err_len);

/* Opens dir's newest log for appending, or creates store-<next>.log with
 * its header (file and directory synced).  Sets path, *fd and *last_lsn
 * (the last whole record's).  Returns CR_OK or CR_ERR_IO (err set). */
int cr_durable_log_open(const char *dir, char *path, size_t path_size, int *fd,
                        uint64_t *last_lsn, char *err, size_t err_len);

/* Creates dir/store-<first_lsn>.log with its header (file and directory
 * synced) and opens it for appending.  Returns CR_OK or CR_ERR_IO. */
int cr_durable_log_create(const char *dir, uint64_t first_lsn, char *path, size_t path_size,
                          int *fd, char *err, size_t err_len);

/* After snapshot-<lsn>.snap is on disk: removes the snapshots before it and
 * the logs that hold only records up to lsn (every log named before
 * store-<lsn + 1>.log), then syncs dir.  Returns CR_OK or CR_ERR_IO. */
int cr_durable_drop_redundant(const char *dir, uint64_t lsn, char *err, size_t err_len);

/* The state directory's logs (snapshots false) or finished snapshots
 * (true), sorted by lsn (free with cr_durable_names_free); and the lsn a
 * file's name carries.  Returns CR_OK, CR_ERR_IO or CR_ERR_NOMEM. */
int cr_durable_list(const char *dir, bool snapshots, char ***names, uint32_t *count, char *err,
                    size_t err_len);
void cr_durable_names_free(char **names, uint32_t count);
uint64_t cr_durable_name_lsn(const char *name);

/* The path of snapshot `lsn`: ".snap", or ".tmp" while it is written. */
void cr_durable_snapshot_path(const char *dir, uint64_t lsn, bool tmp, char *out, size_t size);

#endif

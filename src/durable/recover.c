/* Recovery: the state directory's snapshot and logs → the store
 * (durable.h); and the image → the store (cr_durable_materialize). */
#include "durable/durable.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/store_restore.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "durable/apply.h"
#include "durable/files.h"
#include "durable/finish.h"
#include "durable/prefill.h"

#define LOG_PREFIX "store-"
#define LOG_SUFFIX ".log"
#define SNAP_PREFIX "snapshot-"
#define SNAP_SUFFIX ".snap"
#define SNAP_TMP_SUFFIX ".tmp"
#define LOGS_MAX 4096u
#define PREFETCH_AHEAD 8u /* objects: about a cache miss's worth of restores */

enum cr_durability cr_durability_of(const struct cr_daemon_config *config) {
    if (config->state_dir[0] == '\0') return CR_DURABILITY_NONE;
    enum cr_durability mode = CR_DURABILITY_ASYNC;
    (void)cr_durability_parse(config->durability, &mode); /* validated with the config */
    return mode;
}

int cr_durability_parse(const char *text, enum cr_durability *out) {
    static const char *const names[] = {"none", "async", "sync"};
    for (int i = 0; i < 3; i++) {
        if (text != NULL && strcmp(text, names[i]) == 0) {
            *out = (enum cr_durability)i;
            return CR_OK;
        }
    }
    return CR_ERR_INVALID_PARAMS;
}

/* ---- materialize ------------------------------------------------------------ */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int mount_all(const struct cr_durable_image *img, cr_store *store, uint64_t now_ms,
                     struct cr_durable_record *rec, struct cr_durable_recovery *out, char *err,
                     size_t err_len) {
    uint64_t cursor = 0;
    while (cr_durable_image_segment_next(img, &cursor, rec)) {
        struct cr_store_segment_params p = {.name = rec->name, .base = rec->base,
                                            .size = rec->size, .endpoint = rec->endpoint,
                                            .protocol = rec->protocol};
        int rc = cr_store_mount_segment(store, &rec->owner, &p, now_ms);
        if (rc != CR_OK) {
            snprintf(err, err_len, "cannot mount segment %s again: %s", rec->name,
                     cr_store_last_error(store));
            return rc;
        }
        out->segments++;
    }
    return CR_OK;
}

int cr_durable_materialize(const struct cr_durable_image *img, cr_store *store, uint64_t now_ms,
                           struct cr_durable_recovery *out, char *err, size_t err_len) {
    assert(img != NULL && store != NULL && out != NULL);
    struct cr_durable_record *rec = malloc(sizeof(*rec));
    struct cr_store_restore_object *o = malloc(sizeof(*o));
    struct cr_durable_image_ref *order = NULL;
    uint64_t count = 0;
    int rc = rec != NULL && o != NULL ? CR_OK : CR_ERR_NOMEM;
    if (rc == CR_OK) rc = cr_durable_image_restore_order(img, &order, &count);
    if (rc != CR_OK)
        snprintf(err, err_len, "no memory to order %" PRIu64 " objects",
                 cr_durable_image_objects(img));
    if (rc == CR_OK) rc = mount_all(img, store, now_ms, rec, out, err, err_len);
    /* The key index sized once for all of them, not doubled on the way. */
    if (rc == CR_OK) (void)cr_store_restore_reserve(store, count);
    for (uint64_t i = 0; rc == CR_OK && i < count; i++) {
        /* Two cache misses an object, hidden: the entry (the arena is in
         * snapshot order, this walk in segment order) and the store's key
         * index slot (at random). */
        if (i + 2 * PREFETCH_AHEAD < count)
            cr_durable_image_ref_prefetch(&order[i + 2 * PREFETCH_AHEAD]);
        if (i + PREFETCH_AHEAD < count) {
            const char *tenant, *key;
            uint32_t key_len;
            cr_durable_image_ref_key(&order[i + PREFETCH_AHEAD], &tenant, &key, &key_len);
            cr_store_restore_prefetch(store, tenant, key, key_len);
        }
        cr_durable_image_ref_decode(&order[i], rec);
        cr_durable_restore_from(rec, o);
        uint32_t dropped = 0;
        int r = cr_store_restore_object(store, o, now_ms, &dropped);
        out->replicas_dropped += dropped;
        if (r == CR_OK) {
            out->objects++;
        } else if (r == CR_ERR_SEGMENT_NOT_FOUND) {
            out->objects_dropped++;
        } else {
            snprintf(err, err_len, "cannot restore object %" PRIu64 " of %" PRIu64 ": %s",
                     i + 1, count, cr_store_last_error(store));
            rc = r;
        }
    }
    free(o);
    cr_durable_image_order_free(order, count);
    free(rec);
    return rc;
}

/* ---- files -------------------------------------------------------------------- */

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "<prefix><16 lowercase hex digits><suffix>"; the number into *lsn. */
static bool is_name(const char *name, const char *prefix, const char *suffix, uint64_t *lsn) {
    size_t n = strlen(name), p = strlen(prefix);
    if (n != p + 16 + strlen(suffix) || strncmp(name, prefix, p) != 0) return false;
    uint64_t v = 0;
    for (size_t i = p; i < p + 16; i++) {
        char c = name[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
        v = v << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (lsn != NULL) *lsn = v;
    return strcmp(name + n - strlen(suffix), suffix) == 0;
}


/* The log files of dir, sorted (their names sort as their first lsns).
 * Creates dir when missing.  Returns CR_OK or CR_ERR_IO/NOMEM. */
static int list_files(const char *dir, const char *prefix, const char *suffix, char ***names,
                      uint32_t *count, char *err, size_t err_len) {
    *names = NULL;
    *count = 0;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, err_len, "%s: cannot create it: %s", dir, strerror(errno));
        return CR_ERR_IO;
    }
    DIR *d = opendir(dir);
    if (d == NULL) {
        snprintf(err, err_len, "%s: cannot read it: %s", dir, strerror(errno));
        return CR_ERR_IO;
    }
    char **list = calloc(LOGS_MAX, sizeof(*list));
    int rc = list != NULL ? CR_OK : CR_ERR_NOMEM;
    struct dirent *e;
    while (rc == CR_OK && (e = readdir(d)) != NULL) {
        if (!is_name(e->d_name, prefix, suffix, NULL)) continue;
        if (*count == LOGS_MAX) {
            snprintf(err, err_len, "%s: more than %u log files", dir, LOGS_MAX);
            rc = CR_ERR_IO;
        } else if ((list[*count] = strdup(e->d_name)) == NULL) {
            rc = CR_ERR_NOMEM;
        } else {
            (*count)++;
        }
    }
    closedir(d);
    if (rc == CR_OK) qsort(list, *count, sizeof(*list), name_cmp);
    *names = list;
    return rc;
}

static int list_logs(const char *dir, char ***names, uint32_t *count, char *err,
                     size_t err_len) {
    return list_files(dir, LOG_PREFIX, LOG_SUFFIX, names, count, err, err_len);
}

static void free_names(char **names, uint32_t count) {
    for (uint32_t i = 0; names != NULL && i < count; i++) free(names[i]);
    free(names);
}

/* ---- straight into the store --------------------------------------------------
 *
 * Recovery restores the snapshot's objects straight into the store, in file
 * order, then applies the logs' records after the snapshot's lsn as a
 * standby applies its leader's (cr_durable_apply), all inside a bulk
 * restore of the store (store_restore.h), whose finish claims the ranges.
 *
 * Why that gives the exact store although the snapshot is a fuzzy cut (it
 * is written in slices while the store keeps changing, from lsn L on,
 * segments_durable.c): take any object key.
 *  - If nothing changed it from L on, the snapshot holds its state at L
 *    (or lacks it, when it did not exist), and no record after L names it:
 *    that state is its final one.
 *  - If something did, every change is in the log after L: a put or any
 *    change of an object's replicas is an OBJECT_PUT carrying the object's
 *    whole state, and a removal is an OBJECT_REMOVE, a REMOVE_ALL or the
 *    UNMOUNT of its segment.  Applying them in lsn order on top of whatever
 *    the snapshot held of the key (an old state, a new one, nothing, or
 *    two states: a slice that met it twice) leaves the last one's effect,
 *    because each replaces or removes the key whole (apply.h).
 * Segments likewise: the snapshot writes them all at L, first, and every
 * later mount and unmount is a record after L.  So once the log is
 * applied, the objects and segments are those the leader had at the log's
 * end, and their ranges cannot overlap, since the leader's did not.
 * Before that they can: an object removed during the cut may sit in the
 * snapshot beside one placed later on its range, which the log's REMOVE
 * takes away.  That is why nothing is claimed in an allocator until the
 * end (the bulk restore); files are untrusted, so the finish still checks
 * every range and drops (and counts) the replicas that overlap.
 *
 * A key twice in the snapshot: the later in the file replaces the earlier
 * (as the image did).  Which one stays does not matter: a key seen twice
 * changed during the cut, so the log holds its final state (above).
 *
 * An object the snapshot holds on a segment mounted after L is dropped
 * (counted) when the snapshot is applied, and put back by its OBJECT_PUT
 * after the MOUNT: the dropped counts of a restart after a busy cut may
 * include such objects. */
struct restore {
    cr_store *store;
    uint64_t now_ms;
    uint64_t snapshot_lsn;
    struct cr_store_restore_object o; /* the object being restored */
    struct cr_durable_apply_counts counts;
    struct cr_durable_recovery *out;
    uint64_t duplicates; /* snapshot objects replaced by a later one of their key */
};

static int keep_drain(struct restore *r, const struct cr_durable_record *rec, char *err,
                      size_t err_len) {
    if (cr_durable_drain_jobs_put(&r->out->drain_jobs, &rec->drain) == 0) return CR_OK;
    snprintf(err, err_len, "no memory to keep drain job records");
    return CR_ERR_NOMEM;
}

/* A snapshot's record about to be applied: the key index slot its object
 * probes starts loading (one cache miss an object, at random, otherwise). */
static void snapshot_peek(void *ctx, const struct cr_durable_record *rec) {
    const struct restore *r = ctx;
    if (rec->type == CR_DURABLE_OBJECT_PUT)
        cr_store_restore_prefetch(r->store, rec->tenant[0] != '\0' ? rec->tenant : "default",
                                  rec->key, rec->key_len);
}

static int snapshot_apply(void *ctx, const struct cr_durable_record *rec, const uint8_t *body,
                          uint32_t body_len, char *err, size_t err_len) {
    (void)body, (void)body_len;
    struct restore *r = ctx;
    if (rec->type == CR_DURABLE_DRAIN_JOB) return keep_drain(r, rec, err, err_len);
    if (rec->type != CR_DURABLE_OBJECT_PUT) {
        /* A record that may look keys up or remove objects (a snapshot
         * holds none but mounts; the files are untrusted): the index first. */
        if (rec->type != CR_DURABLE_SEGMENT_MOUNT && rec->type != CR_DURABLE_SNAPSHOT_END)
            r->duplicates += cr_store_restore_index_build(r->store);
        return cr_durable_apply(r->store, rec, r->now_ms, &r->counts, err, err_len);
    }
    cr_durable_restore_from(rec, &r->o);
    uint32_t dropped = 0;
    int rc = cr_store_restore_object(r->store, &r->o, r->now_ms, &dropped);
    if (rc == CR_ERR_OBJECT_ALREADY_EXISTS) { /* the key twice: the later stays (above) */
        (void)cr_store_remove(r->store, rec->tenant, rec->key, rec->key_len, true, r->now_ms);
        rc = cr_store_restore_object(r->store, &r->o, r->now_ms, &dropped);
    }
    r->counts.replicas_dropped += dropped;
    if (rc == CR_ERR_SEGMENT_NOT_FOUND) {
        r->counts.objects_dropped++;
        return CR_OK;
    }
    if (rc != CR_OK)
        snprintf(err, err_len, "cannot restore an object of %u key bytes: %s", rec->key_len,
                 cr_store_last_error(r->store));
    return rc;
}

/* A log's record: applied when it is after the snapshot (older ones are
 * in it). */
static int log_apply(void *ctx, const struct cr_durable_record *rec, const uint8_t *body,
                     uint32_t body_len, char *err, size_t err_len) {
    (void)body, (void)body_len;
    struct restore *r = ctx;
    if (rec->lsn <= r->snapshot_lsn) return CR_OK;
    if (rec->type == CR_DURABLE_DRAIN_JOB) return keep_drain(r, rec, err, err_len);
    return cr_durable_apply(r->store, rec, r->now_ms, &r->counts, err, err_len);
}

/* Replays one log; the newest may have its torn tail cut.  *prev_last: the
 * last lsn of the logs before it (its records must follow it). */
static int replay_log(const char *path, bool newest, struct restore *img, uint64_t *prev_last,
                      struct cr_durable_recovery *out, char *err, size_t err_len) {
    uint8_t *data;
    size_t len;
    uint64_t t0 = now_ns();
    int rc = cr_durable_read_big(path, &data, &len, err, err_len);
    uint64_t t1 = now_ns();
    out->read_ns += t1 - t0;
    if (rc != CR_OK) return rc;
    char why[400] = "";
    struct cr_durable_log_scan scan;
    rc = cr_durable_log_scan_bodies(data, len, log_apply, img, &scan, why, sizeof(why));
    cr_durable_big_free(data, len);
    out->replay_ns += now_ns() - t1;
    if (rc != CR_OK) {
        snprintf(err, err_len, "%s: %s", path, why);
        return rc;
    }
    out->records += scan.records;
    if (scan.records > 0) {
        if (scan.last_lsn <= *prev_last) {
            snprintf(err, err_len, "%s: its records do not follow the previous log's", path);
            return CR_ERR_PROTOCOL;
        }
        *prev_last = scan.last_lsn;
        if (scan.last_lsn > out->last_lsn) out->last_lsn = scan.last_lsn;
    }
    if (scan.good_len == len) return CR_OK;
    if (!newest) {
        snprintf(err, err_len, "%s: %s at byte %zu, and newer logs follow it: the log is "
                 "damaged in the middle; move the file away only if losing its later records "
                 "is acceptable", path, cr_durable_frame_status_text(scan.tail), scan.good_len);
        return CR_ERR_PROTOCOL;
    }
    CR_WARN("durable", "%s: %s at byte %zu (of %zu): a write a crash cut short; the %zu bytes "
            "from there are dropped (they were never acknowledged under --durability sync)",
            path, cr_durable_frame_status_text(scan.tail), scan.good_len, len,
            len - scan.good_len);
    out->truncated_bytes = len - scan.good_len;
    return cr_durable_truncate(path, scan.good_len, err, err_len);
}

void cr_durable_snapshot_path(const char *dir, uint64_t lsn, bool tmp, char *out, size_t size) {
    snprintf(out, size, "%s/" SNAP_PREFIX "%016" PRIx64 "%s", dir, lsn,
             tmp ? SNAP_TMP_SUFFIX : SNAP_SUFFIX);
}

/* Removes snapshots a crash left half written. */
static void drop_tmp_snapshots(const char *dir) {
    char **names;
    uint32_t count;
    char err[256];
    if (list_files(dir, SNAP_PREFIX, SNAP_TMP_SUFFIX, &names, &count, err, sizeof(err)) == CR_OK)
        for (uint32_t i = 0; i < count; i++) {
            char path[CR_DURABLE_PATH_MAX];
            snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
            CR_WARN("durable", "%s: a snapshot a stop or crash cut short; removed", path);
            (void)unlink(path);
        }
    free_names(names, count);
}

/* Restores the newest snapshot, if any, into the store and sets
 * r->snapshot_lsn (0: none).  Starts *prefill for the store once the
 * snapshot's object count is known: its second thread sizes the store's
 * tables (handed back before the first object) and populates the slab
 * from the top down while this thread fills it from the bottom up. */
static int load_snapshot(const char *dir, struct restore *r, struct cr_durable_prefill *prefill,
                         char *err, size_t err_len) {
    struct cr_durable_recovery *out = r->out;
    r->snapshot_lsn = 0;
    char **names;
    uint32_t count;
    int rc = list_files(dir, SNAP_PREFIX, SNAP_SUFFIX, &names, &count, err, err_len);
    if (rc == CR_OK && count > 0) {
        char path[CR_DURABLE_PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, names[count - 1]);
        uint8_t *data;
        size_t len;
        uint64_t t0 = now_ns();
        rc = cr_durable_map_snapshot(path, &data, &len, err, err_len);
        uint64_t t1 = now_ns();
        out->read_ns += t1 - t0;
        char why[400] = "";
        if (rc == CR_OK) {
            uint64_t hint = cr_durable_snapshot_count_hint(data, len);
            (void)cr_durable_prefill_start(prefill, r->store, hint); /* else without */
            cr_durable_prefill_handover(prefill); /* the store is this thread's again */
            /* The key index built once the snapshot is in, in home-slot
             * order (store_restore.h); without the memory, as it goes. */
            (void)cr_store_restore_index_defer(r->store, hint);
            /* One pass: a bad snapshot fails the whole recovery, and the
             * objects restored before the fault are removed (the caller). */
            rc = cr_durable_snapshot_load_ahead(data, len, PREFETCH_AHEAD, snapshot_peek,
                                                snapshot_apply, r, &r->snapshot_lsn, why,
                                                sizeof(why));
            cr_durable_big_free(data, len);
            /* Before the logs: their records look keys up. */
            uint64_t t2 = now_ns();
            r->duplicates += cr_store_restore_index_build(r->store);
            out->index_ns = now_ns() - t2;
            out->replay_ns += now_ns() - t1;
            if (r->duplicates > 0)
                CR_DEBUG("durable", "%s: %" PRIu64 " keys twice in the snapshot (a busy cut): "
                         "the later kept", path, r->duplicates);
            if (rc != CR_OK)
                snprintf(err, err_len, "%s: %s (the snapshot is refused: restore it from a "
                         "backup, or move it away to start from the logs it left)", path, why);
        }
        out->snapshot_lsn = r->snapshot_lsn;
    }
    free_names(names, count);
    return rc;
}

int cr_durable_recover(const char *dir, cr_store *store, uint64_t now_ms,
                       struct cr_durable_recovery *out, char *err, size_t err_len) {
    assert(dir != NULL && store != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    char **names = NULL;
    uint32_t count = 0;
    struct restore *r = calloc(1, sizeof(*r));
    int rc = r != NULL ? CR_OK : CR_ERR_NOMEM;
    if (rc != CR_OK) snprintf(err, err_len, "no memory to recover");
    if (rc == CR_OK) {
        *r = (struct restore){.store = store, .now_ms = now_ms, .out = out};
        rc = cr_store_restore_begin(store);
        if (rc != CR_OK) snprintf(err, err_len, "%s", cr_store_last_error(store));
    }
    bool bulk = rc == CR_OK;
    struct cr_durable_prefill prefill = {.started = false};
    if (rc == CR_OK) rc = list_logs(dir, &names, &count, err, err_len); /* makes dir */
    if (rc == CR_OK) drop_tmp_snapshots(dir);
    if (rc == CR_OK) rc = load_snapshot(dir, r, &prefill, err, err_len);
    out->last_lsn = out->snapshot_lsn;
    uint64_t prev_last = 0;
    for (uint32_t i = 0; rc == CR_OK && i < count; i++) {
        char path[CR_DURABLE_PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        rc = replay_log(path, i + 1 == count, r, &prev_last, out, err, err_len);
        out->logs++;
    }
    uint64_t t0 = now_ns();
    struct cr_store_restore_dropped dropped = {0};
    if (rc == CR_OK) {
        /* Two threads claim (finish.h): the prefill thread is done
         * populating by now, so the second core is idle otherwise. */
        struct cr_durable_finish_times ft;
        rc = cr_durable_finish(store, 2, &dropped, &ft);
        if (rc == CR_OK) {
            out->finish_plan_ns = ft.plan_ns;
            out->finish_claims_ns = ft.claims_ns;
            out->finish_threads = ft.threads;
        }
        if (rc != CR_OK)
            snprintf(err, err_len, "cannot claim the restored replicas: %s",
                     cr_store_last_error(store));
    }
    if (rc != CR_OK && bulk) cr_store_restore_abort(store); /* never half a store */
    cr_durable_prefill_join(&prefill);
    out->prefilled_bytes = prefill.bytes_populated;
    if (rc == CR_OK) {
        struct cr_store_stats st;
        cr_store_get_stats(store, now_ms, &st);
        out->segments = st.segment_count;
        out->objects = st.object_count;
        out->objects_dropped = r->counts.objects_dropped + dropped.objects;
        out->replicas_dropped = r->counts.replicas_dropped + dropped.replicas;
    } else {
        cr_durable_drain_jobs_free(&out->drain_jobs);
    }
    out->materialize_ns = now_ns() - t0;
    free(r);
    free_names(names, count);
    return rc;
}

static int apply_none(void *ctx, const struct cr_durable_record *rec, char *err,
                      size_t err_len) {
    (void)ctx, (void)rec, (void)err, (void)err_len;
    return CR_OK;
}

int cr_durable_log_create(const char *dir, uint64_t first_lsn, char *path, size_t path_size,
                          int *fd, char *err, size_t err_len) {
    snprintf(path, path_size, "%s/" LOG_PREFIX "%016" PRIx64 LOG_SUFFIX, dir, first_lsn);
    *fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    uint8_t header[CR_DURABLE_LOG_HEADER];
    cr_durable_log_header(header);
    if (*fd < 0 || write(*fd, header, sizeof(header)) != (ssize_t)sizeof(header) ||
        fsync(*fd) != 0) {
        snprintf(err, err_len, "%s: cannot create the log: %s", path, strerror(errno));
        if (*fd >= 0) close(*fd);
        *fd = -1;
        return CR_ERR_IO;
    }
    int rc = cr_durable_sync_dir(dir, err, err_len);
    if (rc != CR_OK) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

int cr_durable_log_open(const char *dir, char *path, size_t path_size, int *fd,
                        uint64_t *last_lsn, char *err, size_t err_len) {
    assert(dir != NULL && path != NULL && fd != NULL && last_lsn != NULL);
    char **names;
    uint32_t count;
    *fd = -1;
    *last_lsn = 0;
    int rc = list_logs(dir, &names, &count, err, err_len);
    if (rc != CR_OK) {
        free_names(names, count);
        return rc;
    }
    if (count == 0) {
        free_names(names, count);
        /* After a snapshot, the log goes on past it (recovery's last lsn). */
        return cr_durable_log_create(dir, 1, path, path_size, fd, err, err_len);
    }
    snprintf(path, path_size, "%s/%s", dir, names[count - 1]);
    free_names(names, count);
    uint8_t *data;
    size_t len;
    rc = cr_durable_read_file(path, &data, &len, err, err_len);
    if (rc != CR_OK) return rc;
    struct cr_durable_log_scan scan;
    char why[400];
    rc = cr_durable_log_scan(data, len, apply_none, NULL, &scan, why, sizeof(why));
    free(data);
    if (rc != CR_OK || scan.good_len != len) {
        snprintf(err, err_len, "%s: %s", path,
                 rc != CR_OK ? why : "a torn tail recovery did not cut (a second writer?)");
        return CR_ERR_IO;
    }
    *last_lsn = scan.last_lsn;
    *fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (*fd < 0) {
        snprintf(err, err_len, "%s: cannot open the log for appending: %s", path,
                 strerror(errno));
        return CR_ERR_IO;
    }
    return CR_OK;
}

int cr_durable_drop_redundant(const char *dir, uint64_t lsn, char *err, size_t err_len) {
    char **names;
    uint32_t count;
    int rc = list_files(dir, SNAP_PREFIX, SNAP_SUFFIX, &names, &count, err, err_len);
    for (uint32_t i = 0; rc == CR_OK && i < count; i++) {
        uint64_t n;
        if (is_name(names[i], SNAP_PREFIX, SNAP_SUFFIX, &n) && n < lsn) {
            char path[CR_DURABLE_PATH_MAX];
            snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
            (void)unlink(path);
        }
    }
    free_names(names, count);
    if (rc == CR_OK) rc = list_logs(dir, &names, &count, err, err_len);
    for (uint32_t i = 0; rc == CR_OK && i < count; i++) {
        uint64_t first;
        if (is_name(names[i], LOG_PREFIX, LOG_SUFFIX, &first) && first <= lsn) {
            char path[CR_DURABLE_PATH_MAX];
            snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
            (void)unlink(path);
        }
    }
    free_names(names, count);
    return rc == CR_OK ? cr_durable_sync_dir(dir, err, err_len) : rc;
}

int cr_durable_list(const char *dir, bool snapshots, char ***names, uint32_t *count, char *err,
                    size_t err_len) {
    *count = 0;
    return snapshots ? list_files(dir, SNAP_PREFIX, SNAP_SUFFIX, names, count, err, err_len)
                     : list_logs(dir, names, count, err, err_len);
}

void cr_durable_names_free(char **names, uint32_t count) { free_names(names, count); }

uint64_t cr_durable_name_lsn(const char *name) {
    uint64_t lsn = 0;
    if (!is_name(name, LOG_PREFIX, LOG_SUFFIX, &lsn)) (void)is_name(name, SNAP_PREFIX, SNAP_SUFFIX, &lsn);
    return lsn;
}

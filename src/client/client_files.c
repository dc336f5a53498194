/* libcrescent's side of the shared file tier (docs/tiers.md): a Put is
 * written to memory as always and queued here; a writer thread persists it
 * to <root_fs_dir>/<cluster_id>/<name> (temporary name, fsync, rename, fsync
 * of the directory: a reader never sees a torn file under the real name),
 * and the client's own thread reports the finished ones to the master in
 * batches (DiskReplicaReport), which records the disk replicas.  A Get that
 * finds no memory replica it can read reads the file, checking the header's
 * tenant and key and the XXH3 of the bytes; a file gone or corrupt is
 * reported dropped, never served.
 *
 * Threads: the writer thread touches only the queue (under `mu`) and the
 * files; every RPC is made on the caller's thread, which owns cr_client. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#if defined(__x86_64__)
/* The vector XXH3 picked at run time, as in client_data.c (same values as
 * the put's checksum): the plain symbol made the check of a 1 MiB file cost
 * five times its pread (bench/RESULTS.md, "File tier"). */
#include <xxh_x86dispatch.h>
#endif

#include "client/client_internal.h"
#include "core/file_tier.h"
#include "core/log.h"

/* The writer's buffers: a pool of at most this many bytes (queued, being
 * written or free), kept for the client's life and pre-faulted by the
 * writer while it is idle.  A put that finds no free buffer and no room to
 * add one is not persisted and is counted persist_skipped_busy: the put
 * never waits for the file system, never touches fresh memory, and loses no
 * acknowledged data (its memory replica is there; the file tier is a
 * cache).  CRESCENT_FILE_TIER_BUFFER_BYTES overrides it (docs/tiers.md). */
#define POOL_BYTES_DEFAULT (32u << 20)
/* A put adds a buffer to the pool itself (and takes the page faults) only
 * while the pool is this small or the writer is idle; past that only the
 * idle writer adds them: with 64 MiB filled by the puts of a burst, a put
 * ran at 0.15 of memory-only, with 8 MiB at 0.64 (bench/RESULTS.md, "File
 * tier, fourth pass"). */
#define PUT_GROW_BYTES (8u << 20)
#define REPORT_BATCH 64u      /* finished persists that trigger a report */
#define REPORT_AGE_MS 50      /* or the age of the oldest unreported one */
#define REPORT_MAX 256u       /* entries per DiskReplicaReport (on the stack) */
/* Files the writer takes at once: their renames and directory fsyncs are
 * done together, so one journal commit covers many (bench/RESULTS.md,
 * "File tier"). */
#define WRITE_BATCH 16u
/* A job's buffer holds the file as it goes to disk (header, then value),
 * aligned and padded for O_DIRECT. */
#define DIRECT_ALIGN 4096u
/* Free buffers kept for the next puts: a fresh 1 MiB malloc is an mmap,
 * 256 page faults on first touch and an munmap (with a TLB shootdown to the
 * other thread's CPU) when freed, on every put (bench/RESULTS.md, "File
 * tier, third pass"). */
#define SPARE_MAX 64u

enum cause { CAUSE_MISSING, CAUSE_READ_ONLY, CAUSE_FULL, CAUSE_OTHER, CAUSE_COUNT };
static const char *const cause_names[CAUSE_COUNT] = {"missing", "read_only", "full", "other"};

struct cr_files_job {
    struct cr_files_job *next;
    char *tenant;     /* points into the same allocation */
    char *key;
    size_t key_len;
    uint64_t len, checksum;
    uint8_t *buf;     /* header (hlen bytes), value, zero padding; NULL once written */
    size_t cap;       /* bytes of buf: hlen + len rounded up to DIRECT_ALIGN */
    size_t hlen;
    bool ok;          /* done: the file is in place */
    /* A persist the master refused (its object was removed or replaced
     * meanwhile): the writer removes its file, off the caller's thread. */
    bool unlink_only;
    int64_t done_ms;
};

struct cr_client_files {
    char root_fs_dir[PATH_MAX];
    char dir[PATH_MAX];           /* <root_fs_dir>/<cluster_id> */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake, idle;
    struct cr_files_job *head, *tail;      /* to write */
    struct cr_files_job *done_head, *done_tail;
    size_t done_count;
    size_t queued_bytes;
    size_t writing;               /* jobs taken by the writer, not done yet */
    bool stop;
    bool joined;                  /* the writer has exited: refused files go at once */
    int64_t oldest_done_ms;
    uint8_t *spare[SPARE_MAX];    /* written buffers to reuse (under mu) */
    size_t spare_cap[SPARE_MAX];
    size_t spares, spare_bytes;
    size_t pool_bytes, pool_max;  /* every buffer's bytes (free, queued, written); the bound */
    size_t last_need;             /* the last put's buffer size: what the writer pre-faults */
    bool direct_off;              /* the writer's own: O_DIRECT refused here, buffered writes */
    /* counters (under mu) */
    uint64_t persisted, persist_bytes, persist_failed, persist_dropped;
    uint64_t skipped_busy, skipped_reported; /* no free buffer; told the master so far */
    bool busy_logged, too_large_logged;
    int64_t failures_sent_ms;     /* the last report (failure counts go at most this often) */
    uint64_t failures_by_cause[CAUSE_COUNT];
    uint64_t failures_reported[CAUSE_COUNT]; /* told the master so far */
    bool cause_logged[CAUSE_COUNT];
    uint64_t reads, read_bytes, read_failures, corrupt_dropped, reports_refused;
    uint64_t read_ns_total;
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static enum cause cause_of(int err) {
    switch (err) {
    case ENOENT:
    case ENOTDIR: return CAUSE_MISSING;
    case EROFS:
    case EACCES:
    case EPERM: return CAUSE_READ_ONLY;
    case ENOSPC:
    case EDQUOT: return CAUSE_FULL;
    default: return CAUSE_OTHER;
    }
}

/* ---- the writer thread ------------------------------------------------------ */

static bool pwrite_all(int fd, const uint8_t *p, size_t len) {
    for (off_t at = 0; len > 0;) {
        ssize_t w = pwrite(fd, p, len, at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w, at += w, len -= (size_t)w;
    }
    return true;
}

/* Makes the directories of `path` below `dir_len` bytes of it (the root's
 * own directory must exist: a missing mount is a fault, not made here). */
static int make_parents(char *path, size_t dir_len) {
    for (char *p = path + dir_len + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        int rc = mkdir(path, 0755);
        int err = errno;
        *p = '/';
        if (rc != 0 && err != EEXIST) return err;
    }
    return 0;
}

static int fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    int rc = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

/* Writes the job's buffer to `tmp` and makes it durable.  O_DIRECT where
 * the file system takes it: the bytes go from the buffer to the device
 * without a copy into the page cache and without later writeback work, CPU
 * the puts need (a file is read only when its memory replica is gone, so
 * caching it on write buys little).  The padded tail is cut off by
 * ftruncate.  A file system that refuses O_DIRECT (tmpfs, some FUSE and
 * network ones) gets buffered writes from then on. */
static int write_tmp(struct cr_client_files *f, const struct cr_files_job *j, const char *tmp) {
    size_t total = j->hlen + j->len;
    for (;;) {
        bool direct = !f->direct_off;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (direct ? O_DIRECT : 0),
                      0644);
        if (fd < 0 && direct && errno == EINVAL) {
            f->direct_off = true;
            continue;
        }
        if (fd < 0) return errno;
        int err = 0;
        if (!pwrite_all(fd, j->buf, direct ? j->cap : total)) err = errno != 0 ? errno : EIO;
        if (err == EINVAL && direct) { /* alignment this device does not take */
            close(fd);
            unlink(tmp);
            f->direct_off = true;
            continue;
        }
        if (err == 0 && direct && ftruncate(fd, (off_t)total) != 0) err = errno;
        if (err == 0 && fdatasync(fd) != 0) err = errno;
        if (close(fd) != 0 && err == 0) err = errno;
        if (err != 0) unlink(tmp);
        return err;
    }
}

/* Paths of one batch, allocated once per writer thread. */
struct batch_paths {
    char path[WRITE_BATCH][PATH_MAX];
    char tmp[WRITE_BATCH][PATH_MAX + 64];
};

/* Persists up to WRITE_BATCH jobs: each written to a temporary name beside
 * its file and fdatasync'd; then all renamed over their names; then each
 * directory that got one fsync'd once.  A reader never sees a torn file
 * under the real name.  errs[i] is 0 or the errno of the step that failed
 * for jobs[i] (its temporary file removed). */
static void persist_batch(struct cr_client_files *f, struct cr_files_job **jobs, size_t n,
                          uint64_t *seq, struct batch_paths *p, int *errs) {
    size_t dir_len = strlen(f->dir);
    for (size_t i = 0; i < n; i++) {
        const struct cr_files_job *j = jobs[i];
        char name[CR_FILE_TIER_NAME_MAX];
        errs[i] = 0;
        if (cr_file_tier_name(j->tenant, j->key, j->key_len, name, sizeof(name)) == 0) {
            errs[i] = EINVAL;
            continue;
        }
        int len = snprintf(p->path[i], sizeof(p->path[i]), "%s/%s", f->dir, name);
        if (len < 0 || (size_t)len >= sizeof(p->path[i])) {
            errs[i] = ENAMETOOLONG;
            continue;
        }
        errs[i] = make_parents(p->path[i], dir_len);
        if (errs[i] != 0) continue;
        snprintf(p->tmp[i], sizeof(p->tmp[i]), "%s.tmp.%ld.%llu", p->path[i], (long)getpid(),
                 (unsigned long long)++*seq);
        errs[i] = write_tmp(f, j, p->tmp[i]);
    }
    for (size_t i = 0; i < n; i++) {
        if (errs[i] != 0) continue;
        if (rename(p->tmp[i], p->path[i]) != 0) {
            errs[i] = errno;
            unlink(p->tmp[i]);
        }
        *strrchr(p->path[i], '/') = '\0'; /* from here on: the file's directory */
    }
    for (size_t i = 0; i < n; i++) {
        if (errs[i] != 0) continue;
        size_t k = 0; /* the first job of this directory fsyncs it, for all of them */
        while (k < i && (errs[k] != 0 || strcmp(p->path[k], p->path[i]) != 0)) k++;
        if (k < i) continue;
        int err = fsync_dir(p->path[i]);
        for (size_t m = i; err != 0 && m < n; m++)
            if (errs[m] == 0 && strcmp(p->path[m], p->path[i]) == 0) errs[m] = err;
    }
}

static void note_failure(struct cr_client_files *f, int err, const struct cr_files_job *j) {
    enum cause cause = cause_of(err);
    f->persist_failed++;
    f->failures_by_cause[cause]++;
    if (f->cause_logged[cause]) return;
    f->cause_logged[cause] = true; /* once per cause: a full disk fails every put */
    CR_WARN("files", "persisting '%.*s' under %s failed: %s (cause %s; the object stays in "
            "memory; later failures of this cause are counted, not logged)",
            (int)(j->key_len > 64 ? 64 : j->key_len), j->key, f->dir, strerror(err),
            cause_names[cause]);
}

/* Keeps a written buffer for a later put, or says to free it (under mu;
 * then it leaves the pool). */
static bool keep_spare(struct cr_client_files *f, uint8_t *buf, size_t cap) {
    if (f->spares == SPARE_MAX) {
        f->pool_bytes -= cap;
        return false;
    }
    f->spare[f->spares] = buf;
    f->spare_cap[f->spares++] = cap;
    f->spare_bytes += cap;
    return true;
}

/* The smallest spare buffer of at least `need` bytes, or NULL (under mu). */
static uint8_t *take_spare(struct cr_client_files *f, size_t need, size_t *cap) {
    size_t best = SPARE_MAX;
    for (size_t i = 0; i < f->spares; i++)
        if (f->spare_cap[i] >= need && (best == SPARE_MAX || f->spare_cap[i] < f->spare_cap[best]))
            best = i;
    if (best == SPARE_MAX) return NULL;
    uint8_t *buf = f->spare[best];
    *cap = f->spare_cap[best];
    f->spare_bytes -= *cap;
    f->spare[best] = f->spare[--f->spares];
    f->spare_cap[best] = f->spare_cap[f->spares];
    return buf;
}

/* Removes the file of a persist the master did not take (its object was
 * removed or replaced meanwhile): nothing would ever read or evict it.  On
 * the writer's thread: an unlink waits for the file system's journal, which
 * the writer's own fsyncs keep busy, and a put must not wait for that
 * (bench/RESULTS.md, "File tier, third pass").  Only the file this job
 * wrote goes: a later put of the key may have replaced it. */
static void remove_refused(struct cr_client_files *f, const struct cr_files_job *j) {
    char name[CR_FILE_TIER_NAME_MAX], path[PATH_MAX];
    if (cr_file_tier_name(j->tenant, j->key, j->key_len, name, sizeof(name)) == 0) return;
    int n = snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    if (n <= 0 || (size_t)n >= sizeof(path)) return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    uint8_t head[CR_FILE_TIER_HEADER_FIXED + CR_FILE_TIER_TENANT_MAX + CR_FILE_TIER_KEY_MAX];
    size_t want = j->hlen <= sizeof(head) ? j->hlen : 0;
    ssize_t got = want > 0 ? pread(fd, head, want, 0) : -1;
    close(fd);
    struct cr_file_tier_header h;
    if (got == (ssize_t)want && cr_file_tier_header_decode(head, want, &h) == CR_FILE_TIER_OK &&
        h.value_len == j->len && h.value_xxh3 == j->checksum)
        unlink(path);
}

/* While idle, the writer adds one buffer of the last put's size to the
 * pool and touches every page of it, so that puts copy into memory that is
 * already mapped (first-touch faults cost milliseconds per MiB in a
 * paravirtualized guest: bench/RESULTS.md).  Under mu, which it drops
 * meanwhile; false when the pool is full (or memory short). */
static bool prefault_one(struct cr_client_files *f) {
    size_t need = f->last_need;
    if (need == 0 || f->spares == SPARE_MAX || f->pool_bytes + need > f->pool_max) return false;
    f->pool_bytes += need;
    pthread_mutex_unlock(&f->mu);
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, DIRECT_ALIGN, need) != 0) buf = NULL;
    if (buf != NULL) memset(buf, 0, need);
    pthread_mutex_lock(&f->mu);
    if (buf == NULL) {
        f->pool_bytes -= need;
        f->last_need = 0; /* no more tries until a put asks again */
        return false;
    }
    if (keep_spare(f, buf, need)) return true;
    pthread_mutex_unlock(&f->mu);
    free(buf);
    pthread_mutex_lock(&f->mu);
    return false;
}

static void *writer_main(void *arg) {
    struct cr_client_files *f = arg;
    uint64_t seq = 0;
    struct batch_paths *paths = malloc(sizeof(*paths)); /* once per thread */
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->head == NULL && !f->stop)
            if (!prefault_one(f)) pthread_cond_wait(&f->wake, &f->mu);
        if (f->head == NULL) break; /* stopping, and nothing left */
        struct cr_files_job *jobs[WRITE_BATCH], *unlinks[WRITE_BATCH];
        int errs[WRITE_BATCH];
        size_t n = 0, u = 0;
        while (f->head != NULL && n + u < (paths != NULL ? WRITE_BATCH : 1u)) {
            struct cr_files_job *j = f->head;
            f->head = j->next;
            if (j->unlink_only) unlinks[u++] = j;
            else jobs[n++] = j;
        }
        if (f->head == NULL) f->tail = NULL;
        f->writing += n + u;
        pthread_mutex_unlock(&f->mu);
        for (size_t i = 0; i < u; i++) {
            remove_refused(f, unlinks[i]);
            free(unlinks[i]);
        }
        if (paths != NULL) {
            persist_batch(f, jobs, n, &seq, paths, errs);
        } else if (n > 0) {
            errs[0] = ENOMEM;
        }
        uint8_t *to_free[WRITE_BATCH];
        size_t frees = 0;
        pthread_mutex_lock(&f->mu);
        int64_t now = now_ms();
        for (size_t i = 0; i < n; i++) {
            struct cr_files_job *j = jobs[i];
            if (!keep_spare(f, j->buf, j->cap)) to_free[frees++] = j->buf;
            j->buf = NULL;
            f->queued_bytes -= j->len;
            j->ok = errs[i] == 0;
            if (errs[i] == 0) {
                f->persisted++;
                f->persist_bytes += j->len;
            } else {
                note_failure(f, errs[i], j);
            }
            j->next = NULL;
            j->done_ms = now;
            if (f->done_tail != NULL) f->done_tail->next = j;
            else f->done_head = j, f->oldest_done_ms = now;
            f->done_tail = j;
            f->done_count++;
        }
        f->writing -= n + u;
        pthread_cond_broadcast(&f->idle);
        pthread_mutex_unlock(&f->mu);
        for (size_t i = 0; i < frees; i++) free(to_free[i]);
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    free(paths);
    return NULL;
}

/* ---- setup ----------------------------------------------------------------- */

/* Asks the master for its file tier (GetVersion's root_fs_dir, cluster_id). */
static int master_file_tier(cr_client *c, char *root, size_t root_cap, char *cluster,
                            size_t cluster_cap) {
    Crescent__Master__GetVersionRequest req = CRESCENT__MASTER__GET_VERSION_REQUEST__INIT;
    ProtobufCMessage *msg;
    int rc = cr_client_call(c, CR_METHOD_GET_VERSION, &req.base, &msg);
    if (rc != CR_OK) return rc;
    const Crescent__Master__GetVersionResponse *resp = (const void *)msg;
    snprintf(root, root_cap, "%s", resp->root_fs_dir != NULL ? resp->root_fs_dir : "");
    snprintf(cluster, cluster_cap, "%s", resp->cluster_id != NULL ? resp->cluster_id : "");
    protobuf_c_message_free_unpacked(msg, NULL);
    return CR_OK;
}

static void files_free(struct cr_client_files *f) {
    for (size_t i = 0; i < f->spares; i++) free(f->spare[i]);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->wake);
    pthread_cond_destroy(&f->idle);
    free(f);
}

static int files_start(cr_client *c, const char *root, const char *cluster) {
    struct cr_client_files *f = calloc(1, sizeof(*f));
    if (f == NULL) return cr_client_fail(c, CR_ERR_NOMEM, "out of memory");
    snprintf(f->root_fs_dir, sizeof(f->root_fs_dir), "%s", root);
    int n = snprintf(f->dir, sizeof(f->dir), "%s/%s", root, cluster);
    if (n < 0 || (size_t)n >= sizeof(f->dir) - CR_FILE_TIER_NAME_MAX - 64) {
        free(f);
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "root_fs_dir '%s' is too long", root);
    }
    f->pool_max = POOL_BYTES_DEFAULT;
    const char *pool = getenv("CRESCENT_FILE_TIER_BUFFER_BYTES");
    if (pool != NULL && pool[0] != '\0') {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(pool, &end, 10);
        if (errno != 0 || *end != '\0' || pool[0] == '-' || v > SIZE_MAX / 2) {
            free(f);
            return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "CRESCENT_FILE_TIER_BUFFER_BYTES="
                                  "'%.64s' is not a number of bytes", pool);
        }
        f->pool_max = (size_t)v;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->wake, NULL);
    pthread_cond_init(&f->idle, NULL);
    /* The cluster's directory under a root that exists; a missing root is a
     * fault the writer counts (puts still succeed in memory). */
    if (mkdir(f->dir, 0755) != 0 && errno != EEXIST)
        CR_WARN("files", "cannot make %s: %s (persists fail until it exists)", f->dir,
                strerror(errno));
    int rc = pthread_create(&f->thread, NULL, writer_main, f);
    if (rc != 0) {
        files_free(f);
        return cr_client_fail(c, CR_ERR_IO, "cannot start the file tier's writer: %s",
                              strerror(rc));
    }
    c->files = f;
    return CR_OK;
}

int cr_client_files_check(cr_client *c) {
    assert(c != NULL);
    if (c->files_state == CR_CLIENT_FILES_READY || c->files_state == CR_CLIENT_FILES_OFF)
        return CR_OK;
    if (c->files_state == CR_CLIENT_FILES_REFUSED)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "%s", c->files_refusal);
    char root[PATH_MAX], cluster[CR_FILE_TIER_TENANT_MAX + 1];
    int rc = master_file_tier(c, root, sizeof(root), cluster, sizeof(cluster));
    if (rc != CR_OK) return rc;
    if (root[0] == '\0') { /* the master has no file tier */
        c->files_state = CR_CLIENT_FILES_OFF;
        return CR_OK;
    }
    const char *view = c->root_fs_dir != NULL ? c->root_fs_dir : getenv("CRESCENT_ROOT_FS_DIR");
    if (view == NULL || view[0] == '\0') {
        snprintf(c->files_refusal, sizeof(c->files_refusal),
                 "crescentd keeps a shared file tier under --root_fs_dir %.160s, and this "
                 "client has no view of it: set CRESCENT_ROOT_FS_DIR=%.160s (or "
                 "cr_client_set_root_fs_dir) where that file system is mounted", root, root);
    } else if (strcmp(view, root) != 0) {
        snprintf(c->files_refusal, sizeof(c->files_refusal),
                 "this client's root_fs_dir is %.160s, crescentd's --root_fs_dir %.160s: every "
                 "client must mount the shared file system at the master's path", view, root);
    } else {
        rc = files_start(c, root, cluster[0] ? cluster : CR_FILE_TIER_DEFAULT_CLUSTER);
        if (rc != CR_OK) return rc;
        c->files_state = CR_CLIENT_FILES_READY;
        return CR_OK;
    }
    c->files_state = CR_CLIENT_FILES_REFUSED;
    return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "%s", c->files_refusal);
}

int cr_client_set_root_fs_dir(cr_client *c, const char *root_fs_dir) {
    assert(c != NULL);
    if (c->files_state != CR_CLIENT_FILES_UNCHECKED)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "set the root_fs_dir before the "
                              "first put or get");
    if (root_fs_dir != NULL && strlen(root_fs_dir) >= PATH_MAX / 2)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "root_fs_dir is too long");
    free(c->root_fs_dir);
    c->root_fs_dir = root_fs_dir != NULL ? strdup(root_fs_dir) : NULL;
    if (root_fs_dir != NULL && c->root_fs_dir == NULL)
        return cr_client_fail(c, CR_ERR_NOMEM, "out of memory");
    return CR_OK;
}

/* ---- puts --------------------------------------------------------------------- */

struct cr_files_job *cr_client_files_reserve(cr_client *c, const char *tenant, const char *key,
                                             size_t len, void **value) {
    struct cr_client_files *f = c->files;
    *value = NULL;
    if (f == NULL) return NULL;
    tenant = tenant != NULL && tenant[0] != '\0' ? tenant : "default";
    size_t tn = strlen(tenant), kn = strlen(key);
    size_t hlen = CR_FILE_TIER_HEADER_FIXED + tn + kn;
    size_t need = (hlen + len + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
    /* The job itself is small (a malloc from the thread's cache); the
     * buffer, the big one, comes from the pool. */
    struct cr_files_job *j = malloc(sizeof(*j) + tn + 1 + kn + 1);
    uint8_t *buf = NULL, *drop[SPARE_MAX];
    size_t cap = 0, drops = 0;
    bool grow = false, busy = false, log_busy = false, log_large = false;
    pthread_mutex_lock(&f->mu);
    if (j != NULL && need > f->pool_max) {
        log_large = !f->too_large_logged;
        f->too_large_logged = true;
    } else if (j != NULL) {
        f->last_need = need;
        buf = take_spare(f, need, &cap);
        bool idle = f->head == NULL && f->writing == 0;
        size_t bound = idle || f->pool_max < PUT_GROW_BYTES ? f->pool_max : PUT_GROW_BYTES;
        /* No free buffer fits: free ones too small make room for one that
         * does, when the buffers in use leave room for it. */
        if (buf == NULL && f->pool_bytes - f->spare_bytes + need <= bound) {
            while (f->pool_bytes + need > bound && f->spares > 0) {
                size_t last = --f->spares;
                drop[drops++] = f->spare[last];
                f->spare_bytes -= f->spare_cap[last];
                f->pool_bytes -= f->spare_cap[last];
            }
        }
        grow = buf == NULL && f->pool_bytes + need <= bound;
        if (grow) f->pool_bytes += need;
        busy = buf == NULL && !grow;
    }
    if (busy) {
        f->skipped_busy++;
        log_busy = !f->busy_logged;
        f->busy_logged = true;
    } else if (buf != NULL || grow) {
        f->queued_bytes += len;
    } else {
        f->persist_dropped++;
    }
    pthread_mutex_unlock(&f->mu);
    for (size_t i = 0; i < drops; i++) free(drop[i]);
    if (log_busy)
        CR_WARN("files", "the file tier's writer is behind (its %zu MiB of buffers are all "
                "queued): puts it has no buffer for stay in memory only and are counted "
                "persist_skipped_busy (logged once)", f->pool_max >> 20);
    if (log_large)
        CR_WARN("files", "a put of %zu bytes is larger than the file tier's buffers (%zu "
                "bytes; CRESCENT_FILE_TIER_BUFFER_BYTES): it stays in memory only, counted "
                "persist_dropped (logged once)", len, f->pool_max);
    if (buf == NULL && grow && posix_memalign((void **)&buf, DIRECT_ALIGN, need) == 0) cap = need;
    if (buf == NULL) {
        pthread_mutex_lock(&f->mu);
        if (grow) { /* out of memory */
            f->pool_bytes -= need;
            f->queued_bytes -= len;
            f->persist_dropped++;
        }
        pthread_mutex_unlock(&f->mu);
        free(j);
        return NULL;
    }
    *j = (struct cr_files_job){.tenant = (char *)(j + 1), .key_len = kn, .len = len, .buf = buf,
                      .cap = cap, .hlen = hlen};
    memcpy(j->tenant, tenant, tn + 1);
    j->key = j->tenant + tn + 1;
    memcpy(j->key, key, kn + 1);
    *value = buf + hlen;
    return j;
}

void cr_client_files_commit(cr_client *c, struct cr_files_job *j, uint64_t checksum) {
    struct cr_client_files *f = c->files;
    assert(f != NULL && j != NULL);
    size_t hlen = cr_file_tier_header_encode(j->tenant, j->key, j->key_len, j->len, checksum,
                                             j->buf, j->hlen);
    assert(hlen == 0 || hlen == j->hlen);
    /* Zeros after the value, not an earlier put's bytes, in the last block
     * an O_DIRECT write sends (cut off by ftruncate, but on the device). */
    memset(j->buf + j->hlen + j->len, 0, j->cap - j->hlen - j->len);
    j->checksum = checksum;
    pthread_mutex_lock(&f->mu);
    if (hlen == 0) { /* a key or tenant past the file tier's bounds: not persisted */
        f->queued_bytes -= j->len;
        f->persist_dropped++;
        bool kept = keep_spare(f, j->buf, j->cap);
        pthread_mutex_unlock(&f->mu);
        if (!kept) free(j->buf);
        free(j);
        return;
    }
    if (f->tail != NULL) f->tail->next = j;
    else f->head = j;
    f->tail = j;
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->mu);
}

void cr_client_files_cancel(cr_client *c, struct cr_files_job *j) {
    struct cr_client_files *f = c->files;
    if (f == NULL || j == NULL) return;
    pthread_mutex_lock(&f->mu);
    f->queued_bytes -= j->len;
    bool kept = keep_spare(f, j->buf, j->cap);
    pthread_mutex_unlock(&f->mu);
    if (!kept) free(j->buf);
    free(j);
}

void cr_client_files_enqueue(cr_client *c, const char *tenant, const char *key, const void *data,
                             size_t len, uint64_t checksum) {
    void *value;
    struct cr_files_job *j = cr_client_files_reserve(c, tenant, key, len, &value);
    if (j == NULL) return;
    /* The copy is the price of returning before the bytes are on disk: the
     * caller may reuse its buffer at once. */
    if (len > 0) memcpy(value, data, len);
    cr_client_files_commit(c, j, checksum);
}

/* ---- reports ------------------------------------------------------------------ */

/* Sends one DiskReplicaReport of n entries; statuses[i] gets each verdict
 * (all the call's status when the call itself failed). */
static int send_report(cr_client *c, Crescent__Master__DiskReplicaReportRequest__Entry **entries,
                       size_t n, const uint64_t *failed, int *statuses) {
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(c->id, &id);
    Crescent__Master__DiskReplicaReportRequest req =
        CRESCENT__MASTER__DISK_REPLICA_REPORT_REQUEST__INIT;
    req.client_id = &id;
    cr_client_secret_to_pb(c, &req.has_client_secret, &req.client_secret);
    req.root_fs_dir = c->files->root_fs_dir;
    req.n_entries = n;
    req.entries = entries;
    if (failed != NULL) { /* persists failed since the last report, by cause */
        req.has_failed_missing = req.has_failed_read_only = 1;
        req.has_failed_full = req.has_failed_other = 1;
        req.failed_missing = failed[CAUSE_MISSING];
        req.failed_read_only = failed[CAUSE_READ_ONLY];
        req.failed_full = failed[CAUSE_FULL];
        req.failed_other = failed[CAUSE_OTHER];
        req.has_skipped_busy = 1;
        req.skipped_busy = failed[CAUSE_COUNT];
    }
    ProtobufCMessage *msg;
    int rc = cr_client_call(c, CR_METHOD_DISK_REPLICA_REPORT, &req.base, &msg);
    for (size_t i = 0; i < n; i++) statuses[i] = rc;
    if (rc != CR_OK) return rc;
    const Crescent__Master__DiskReplicaReportResponse *resp = (const void *)msg;
    rc = resp->status_code;
    for (size_t i = 0; i < n; i++)
        statuses[i] = rc != CR_OK ? rc : i < resp->n_status_codes ? resp->status_codes[i]
                                                                   : CR_ERR_PROTOCOL;
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}

/* Hands a refused persist's file to the writer to remove (remove_refused);
 * after the writer has exited (close), removes it here. */
static void queue_unlink(struct cr_client_files *f, struct cr_files_job *j) {
    pthread_mutex_lock(&f->mu);
    bool joined = f->joined;
    if (!joined) {
        j->unlink_only = true;
        j->next = NULL;
        if (f->tail != NULL) f->tail->next = j;
        else f->head = j;
        f->tail = j;
        pthread_cond_signal(&f->wake);
    }
    pthread_mutex_unlock(&f->mu);
    if (joined) {
        remove_refused(f, j);
        free(j);
    }
}

/* Reports finished persists: when `force`, or enough have gathered, or the
 * oldest waited long enough. */
static void files_report(cr_client *c, bool force) {
    struct cr_client_files *f = c->files;
    if (f == NULL) return;
    uint64_t failed[CAUSE_COUNT + 1]; /* by cause, then skipped_busy */
    bool failures = false;
    pthread_mutex_lock(&f->mu);
    for (int k = 0; k < CAUSE_COUNT; k++) {
        failed[k] = f->failures_by_cause[k] - f->failures_reported[k];
        failures = failures || failed[k] > 0;
    }
    failed[CAUSE_COUNT] = f->skipped_busy - f->skipped_reported;
    failures = failures || failed[CAUSE_COUNT] > 0;
    int64_t now = now_ms();
    /* Failures alone (a writer behind skips every put of a burst) are told
     * at most every REPORT_AGE_MS: not an RPC per put. */
    bool due = force || (f->done_count > 0 ? f->done_count >= REPORT_BATCH ||
                                                 now - f->oldest_done_ms >= REPORT_AGE_MS
                                           : failures && now - f->failures_sent_ms >= REPORT_AGE_MS);
    due = due && (f->done_count > 0 || failures);
    if (due) f->failures_sent_ms = now;
    struct cr_files_job *list = due ? f->done_head : NULL;
    if (due) {
        f->done_head = f->done_tail = NULL;
        f->done_count = 0;
        memcpy(f->failures_reported, f->failures_by_cause, sizeof(f->failures_reported));
        f->skipped_reported = f->skipped_busy;
    }
    pthread_mutex_unlock(&f->mu);
    if (due && failures && list == NULL) { /* failures only: the master counts them */
        int status;
        send_report(c, NULL, 0, failed, &status);
        return;
    }
    const uint64_t *failed_once = failures ? failed : NULL;
    while (list != NULL) {
        Crescent__Master__DiskReplicaReportRequest__Entry slots[REPORT_MAX];
        Crescent__Master__DiskReplicaReportRequest__Entry *entries[REPORT_MAX];
        struct cr_files_job *jobs[REPORT_MAX];
        int statuses[REPORT_MAX];
        size_t n = 0;
        while (list != NULL && n < REPORT_MAX) {
            struct cr_files_job *j = list;
            list = j->next;
            if (!j->ok) {
                free(j);
                continue;
            }
            crescent__master__disk_replica_report_request__entry__init(&slots[n]);
            slots[n].key = j->key;
            slots[n].tenant_id = j->tenant;
            slots[n].size = j->len;
            slots[n].has_checksum_xxh3 = 1;
            slots[n].checksum_xxh3 = j->checksum;
            entries[n] = &slots[n];
            jobs[n++] = j;
        }
        if (n > 0 || failed_once != NULL) send_report(c, entries, n, failed_once, statuses);
        failed_once = NULL;
        for (size_t i = 0; i < n; i++) {
            if (statuses[i] != CR_OK) {
                /* Refused (the object was removed or replaced meanwhile):
                 * nothing would read or delete that file, so it goes.  A
                 * call that did not go through leaves it for a later put of
                 * the key to replace; the object lives on in memory. */
                pthread_mutex_lock(&f->mu);
                f->reports_refused++;
                pthread_mutex_unlock(&f->mu);
                if (statuses[i] != CR_ERR_TIMEOUT && statuses[i] != CR_ERR_IO) {
                    queue_unlink(f, jobs[i]);
                    continue;
                }
            }
            free(jobs[i]);
        }
    }
}

void cr_client_files_poll(cr_client *c) { files_report(c, false); }

int cr_client_file_tier_flush(cr_client *c, int timeout_ms) {
    assert(c != NULL);
    struct cr_client_files *f = c->files;
    if (f == NULL) return CR_OK;
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    pthread_mutex_lock(&f->mu);
    while ((f->head != NULL || f->writing > 0) && now_ms() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&f->idle, &f->mu, &ts);
    }
    bool idle = f->head == NULL && f->writing == 0;
    pthread_mutex_unlock(&f->mu);
    files_report(c, true);
    return idle ? CR_OK
                : cr_client_fail(c, CR_ERR_TIMEOUT, "the file tier's writer is still busy "
                                 "after %d ms", timeout_ms);
}

/* ---- gets --------------------------------------------------------------------- */

const struct cr_replica *cr_client_files_replica(const struct cr_replica_list *list) {
    for (size_t r = 0; list != NULL && r < list->count; r++)
        if (list->replicas[r].medium == CR_MEDIUM_DISK &&
            list->replicas[r].status == CR_REPLICA_COMPLETE)
            return &list->replicas[r];
    return NULL;
}

/* Tells the master a disk replica is unusable (gone or corrupt), so that it
 * is dropped (with a store event) and never handed out again. */
static void report_dropped(cr_client *c, const char *tenant, const char *key, uint64_t size) {
    Crescent__Master__DiskReplicaReportRequest__Entry e =
        CRESCENT__MASTER__DISK_REPLICA_REPORT_REQUEST__ENTRY__INIT;
    e.key = (char *)key;
    e.tenant_id = (char *)(tenant != NULL && tenant[0] ? tenant : "default");
    e.size = size;
    e.has_dropped = e.dropped = 1;
    Crescent__Master__DiskReplicaReportRequest__Entry *entries[1] = {&e};
    int status;
    send_report(c, entries, 1, NULL, &status);
    pthread_mutex_lock(&c->files->mu);
    c->files->corrupt_dropped++;
    pthread_mutex_unlock(&c->files->mu);
}

/* Reads the iovecs from offset `at` on: as many bytes as the file has up to
 * their total.  Returns the bytes read, or -1 (errno set). */
static ssize_t preadv_all(int fd, struct iovec *iov, int n, off_t at) {
    ssize_t total = 0;
    while (n > 0) {
        ssize_t r = preadv(fd, iov, n, at + total);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break; /* end of file */
        total += r;
        while (n > 0 && (size_t)r >= iov->iov_len) r -= (ssize_t)iov->iov_len, iov++, n--;
        if (n > 0) iov->iov_base = (uint8_t *)iov->iov_base + r, iov->iov_len -= (size_t)r;
    }
    return total;
}

/* Verdict of reading the file into buf: CR_OK, CR_ERR_CHECKSUM (the file
 * is not the object's: corrupt, torn, another key), CR_ERR_OBJECT_NOT_FOUND
 * (gone) or CR_ERR_IO (could not be read now).  The header's length follows
 * from the tenant and key the caller asks for, so no fstat: open, a pread
 * of the header alone, one preadv of the value and one byte more (there
 * must be none), close.  Two reads rather than one on purpose: on a file
 * not in the page cache the small first read starts the kernel's readahead
 * of the whole file and the value's read waits for it, where one 1 MiB read
 * of a cold file took about twice as long (bench/RESULTS.md, "Gets from the
 * tiers, hot and cold"); in the page cache the second syscall costs ~1 us. */
static int read_file(const char *path, const char *tenant, const char *key, uint64_t size,
                     bool has_sum, uint64_t sum, void *buf, char *why, size_t why_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(why, why_len, "cannot open %s: %s", path, strerror(err));
        return err == ENOENT ? CR_ERR_OBJECT_NOT_FOUND : CR_ERR_IO;
    }
    const char *t = tenant != NULL && tenant[0] != '\0' ? tenant : "default";
    size_t key_len = strlen(key);
    size_t hlen = CR_FILE_TIER_HEADER_FIXED + strlen(t) + key_len;
    uint8_t head[CR_FILE_TIER_HEADER_FIXED + CR_FILE_TIER_TENANT_MAX + CR_FILE_TIER_KEY_MAX];
    uint8_t extra;
    int rc = CR_ERR_CHECKSUM;
    struct cr_file_tier_header h;
    if (hlen > sizeof(head)) {
        snprintf(why, why_len, "key or tenant too long for the file tier");
        close(fd);
        return CR_ERR_INVALID_PARAMS;
    }
    struct iovec iov[3] = {{head, hlen}, {buf, (size_t)size}, {&extra, 1}};
    ssize_t got = preadv_all(fd, iov, 1, 0);
    if (got == (ssize_t)hlen) {
        ssize_t more = preadv_all(fd, iov + 1, 2, (off_t)hlen);
        got = more < 0 ? more : got + more;
    }
    close(fd);
    if (got < 0) {
        snprintf(why, why_len, "%s: read failed: %s", path, strerror(errno));
        return CR_ERR_IO;
    }
    if ((size_t)got < hlen || cr_file_tier_header_decode(head, hlen, &h) != CR_FILE_TIER_OK)
        snprintf(why, why_len, "%s has no whole header (torn or not a crescent file)", path);
    else if (h.header_len != hlen || !cr_file_tier_header_matches(&h, tenant, key, key_len, size) ||
             (has_sum && h.value_xxh3 != sum))
        snprintf(why, why_len, "%s holds another object or another put of it", path);
    else if ((uint64_t)got != hlen + size)
        snprintf(why, why_len, "%s is %s than its header says (torn or appended to)", path,
                 (uint64_t)got < hlen + size ? "shorter" : "longer");
    else if (XXH3_64bits(buf, size) != h.value_xxh3)
        snprintf(why, why_len, "%s: bytes do not match their checksum", path);
    else
        rc = CR_OK;
    return rc;
}

int cr_client_files_read(cr_client *c, const char *tenant, const char *key,
                         const struct cr_replica_list *list, void *buf, size_t cap,
                         size_t *len, char *why, size_t why_len) {
    const struct cr_replica *disk = cr_client_files_replica(list);
    assert(disk != NULL);
    struct cr_client_files *f = c->files;
    *len = (size_t)disk->object_size;
    if (f == NULL) {
        snprintf(why, why_len, "the object is only in the shared file tier, and this client "
                 "has no view of it (CRESCENT_ROOT_FS_DIR)");
        return CR_ERR_IO;
    }
    size_t dl = strlen(f->dir);
    if (strncmp(disk->file_path, f->dir, dl) != 0 || disk->file_path[dl] != '/' ||
        strstr(disk->file_path, "/..") != NULL) {
        snprintf(why, why_len, "the master named %s, outside %s", disk->file_path, f->dir);
        return CR_ERR_PROTOCOL;
    }
    if (disk->object_size > cap) {
        snprintf(why, why_len, "the object has %zu bytes, the buffer %zu", *len, cap);
        return CR_ERR_INVALID_PARAMS;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = read_file(disk->file_path, tenant, key, disk->object_size, list->has_checksum,
                       list->checksum_xxh3, buf, why, why_len);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t took = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec));
    if (rc == CR_OK) cr_client_read_observe(c, CR_READ_TIER_DISK, took);
    pthread_mutex_lock(&f->mu);
    f->reads++;
    if (rc == CR_OK) f->read_bytes += disk->object_size;
    else f->read_failures++;
    f->read_ns_total += took;
    pthread_mutex_unlock(&f->mu);
    if (rc == CR_ERR_CHECKSUM || rc == CR_ERR_OBJECT_NOT_FOUND)
        report_dropped(c, tenant, key, disk->object_size);
    if (rc == CR_ERR_OBJECT_NOT_FOUND) rc = CR_ERR_IO;
    return rc;
}

/* ---- stats and close ------------------------------------------------------------ */

void cr_client_file_tier_stats(cr_client *c, struct cr_file_tier_stats *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    struct cr_client_files *f = c->files;
    if (f == NULL) return;
    out->enabled = true;
    pthread_mutex_lock(&f->mu);
    out->persisted = f->persisted;
    out->persist_bytes = f->persist_bytes;
    out->persist_failed = f->persist_failed;
    out->persist_dropped = f->persist_dropped;
    out->persist_skipped_busy = f->skipped_busy;
    out->failed_missing = f->failures_by_cause[CAUSE_MISSING];
    out->failed_read_only = f->failures_by_cause[CAUSE_READ_ONLY];
    out->failed_full = f->failures_by_cause[CAUSE_FULL];
    out->reads = f->reads;
    out->read_bytes = f->read_bytes;
    out->read_failures = f->read_failures;
    out->corrupt_dropped = f->corrupt_dropped;
    out->reports_refused = f->reports_refused;
    out->read_ns_total = f->read_ns_total;
    out->queued_bytes = f->queued_bytes;
    pthread_mutex_unlock(&f->mu);
}

void cr_client_files_close(cr_client *c) {
    struct cr_client_files *f = c->files;
    if (f == NULL) return;
    /* What is queued is written (a put that returned is persisted unless the
     * process dies), then reported while the connection is still open. */
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    f->joined = true; /* no lock needed: the writer is gone */
    files_report(c, true);
    struct cr_files_job *j = f->done_head;
    while (j != NULL) {
        struct cr_files_job *next = j->next;
        free(j);
        j = next;
    }
    files_free(f);
    c->files = NULL;
}

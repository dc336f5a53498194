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

/* Bytes queued for the writer at most: past it a put is still stored in
 * memory, and its persist is counted dropped (a put never waits for the
 * file system). */
#define QUEUE_BYTES_MAX (256u << 20)
#define REPORT_BATCH 64u      /* finished persists that trigger a report */
#define REPORT_AGE_MS 50      /* or the age of the oldest unreported one */
#define REPORT_MAX 256u       /* entries per DiskReplicaReport (on the stack) */

enum cause { CAUSE_MISSING, CAUSE_READ_ONLY, CAUSE_FULL, CAUSE_OTHER, CAUSE_COUNT };
static const char *const cause_names[CAUSE_COUNT] = {"missing", "read_only", "full", "other"};

struct job {
    struct job *next;
    char *tenant;     /* points into the same allocation */
    char *key;
    size_t key_len;
    uint64_t len, checksum;
    uint8_t *data;    /* malloc'd copy, freed once written */
    bool ok;          /* done: the file is in place */
    int64_t done_ms;
};

struct cr_client_files {
    char root_fs_dir[PATH_MAX];
    char dir[PATH_MAX];           /* <root_fs_dir>/<cluster_id> */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake, idle;
    struct job *head, *tail;      /* to write */
    struct job *done_head, *done_tail;
    size_t done_count;
    size_t queued_bytes;
    size_t writing;               /* jobs taken by the writer, not done yet */
    bool stop;
    int64_t oldest_done_ms;
    /* counters (under mu) */
    uint64_t persisted, persist_bytes, persist_failed, persist_dropped;
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

static bool write_all_fd(int fd, const struct iovec *iov_in, int n) {
    struct iovec iov[2];
    memcpy(iov, iov_in, (size_t)n * sizeof(iov[0]));
    int at = 0;
    while (at < n) {
        ssize_t w = writev(fd, iov + at, n - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        size_t left = (size_t)w;
        while (at < n && left >= iov[at].iov_len) left -= iov[at++].iov_len;
        if (at < n) {
            iov[at].iov_base = (uint8_t *)iov[at].iov_base + left;
            iov[at].iov_len -= left;
        }
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

static int fsync_parent(const char *path) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t n = slash != NULL ? (size_t)(slash - path) : 0;
    if (n == 0 || n >= sizeof(dir)) return EINVAL;
    memcpy(dir, path, n);
    dir[n] = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    int rc = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

/* Writes one object's file: header and bytes to a temporary name beside
 * it, fsync, rename over the name, fsync the directory.  Returns 0 or the
 * errno of the step that failed (the temporary file is removed). */
static int persist_one(struct cr_client_files *f, const struct job *j, uint64_t seq) {
    char name[CR_FILE_TIER_NAME_MAX];
    if (cr_file_tier_name(j->tenant, j->key, j->key_len, name, sizeof(name)) == 0) return EINVAL;
    char path[PATH_MAX], tmp[PATH_MAX + 64];
    int n = snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    if (n < 0 || (size_t)n >= sizeof(path)) return ENAMETOOLONG;
    int err = make_parents(path, strlen(f->dir));
    if (err != 0) return err;
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%llu", path, (long)getpid(), (unsigned long long)seq);
    uint8_t header[CR_FILE_TIER_HEADER_FIXED + CR_FILE_TIER_TENANT_MAX + CR_FILE_TIER_KEY_MAX];
    size_t hlen = cr_file_tier_header_encode(j->tenant, j->key, j->key_len, j->len, j->checksum,
                                             header, sizeof(header));
    if (hlen == 0) return EINVAL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    struct iovec iov[2] = {{header, hlen}, {j->data, j->len}};
    err = write_all_fd(fd, iov, j->len > 0 ? 2 : 1) ? 0 : (errno != 0 ? errno : EIO);
    if (err == 0 && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && rename(tmp, path) != 0) err = errno;
    if (err != 0) {
        unlink(tmp);
        return err;
    }
    return fsync_parent(path);
}

static void note_failure(struct cr_client_files *f, int err, const struct job *j) {
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

static void *writer_main(void *arg) {
    struct cr_client_files *f = arg;
    uint64_t seq = 0;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->head == NULL && !f->stop) pthread_cond_wait(&f->wake, &f->mu);
        if (f->head == NULL) break; /* stopping, and nothing left */
        struct job *j = f->head;
        f->head = j->next;
        if (f->head == NULL) f->tail = NULL;
        f->writing++;
        pthread_mutex_unlock(&f->mu);
        int err = persist_one(f, j, ++seq);
        free(j->data);
        j->data = NULL;
        pthread_mutex_lock(&f->mu);
        f->writing--;
        f->queued_bytes -= j->len;
        j->ok = err == 0;
        if (err == 0) {
            f->persisted++;
            f->persist_bytes += j->len;
        } else {
            note_failure(f, err, j);
        }
        j->next = NULL;
        j->done_ms = now_ms();
        if (f->done_tail != NULL) f->done_tail->next = j;
        else f->done_head = j, f->oldest_done_ms = j->done_ms;
        f->done_tail = j;
        f->done_count++;
        pthread_cond_broadcast(&f->idle);
    }
    pthread_mutex_unlock(&f->mu);
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

void cr_client_files_enqueue(cr_client *c, const char *tenant, const char *key, const void *data,
                             size_t len, uint64_t checksum) {
    struct cr_client_files *f = c->files;
    if (f == NULL) return;
    tenant = tenant != NULL && tenant[0] != '\0' ? tenant : "default";
    size_t tn = strlen(tenant), kn = strlen(key);
    struct job *j = malloc(sizeof(*j) + tn + 1 + kn + 1);
    uint8_t *copy = len > 0 ? malloc(len) : NULL;
    pthread_mutex_lock(&f->mu);
    bool room = f->queued_bytes + len <= QUEUE_BYTES_MAX;
    if (j == NULL || (len > 0 && copy == NULL) || !room) {
        f->persist_dropped++;
        pthread_mutex_unlock(&f->mu);
        free(j), free(copy);
        return;
    }
    f->queued_bytes += len;
    pthread_mutex_unlock(&f->mu);
    /* The copy is the price of returning before the bytes are on disk: the
     * caller may reuse its buffer at once. */
    if (len > 0) memcpy(copy, data, len);
    *j = (struct job){.tenant = (char *)(j + 1), .key_len = kn, .len = len,
                      .checksum = checksum, .data = copy};
    memcpy(j->tenant, tenant, tn + 1);
    j->key = j->tenant + tn + 1;
    memcpy(j->key, key, kn + 1);
    pthread_mutex_lock(&f->mu);
    if (f->tail != NULL) f->tail->next = j;
    else f->head = j;
    f->tail = j;
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->mu);
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

/* Removes the file of a persist the master did not take (the object was
 * removed or replaced meanwhile): nothing would ever read or evict it. */
static void unlink_refused(struct cr_client_files *f, const struct job *j) {
    char name[CR_FILE_TIER_NAME_MAX], path[PATH_MAX];
    if (cr_file_tier_name(j->tenant, j->key, j->key_len, name, sizeof(name)) == 0) return;
    int n = snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    if (n > 0 && (size_t)n < sizeof(path)) unlink(path);
}

/* Reports finished persists: when `force`, or enough have gathered, or the
 * oldest waited long enough. */
static void files_report(cr_client *c, bool force) {
    struct cr_client_files *f = c->files;
    if (f == NULL) return;
    uint64_t failed[CAUSE_COUNT];
    bool failures = false;
    pthread_mutex_lock(&f->mu);
    for (int k = 0; k < CAUSE_COUNT; k++) {
        failed[k] = f->failures_by_cause[k] - f->failures_reported[k];
        failures = failures || failed[k] > 0;
    }
    bool due = (f->done_count > 0 || failures) &&
               (force || f->done_count >= REPORT_BATCH ||
                now_ms() - f->oldest_done_ms >= REPORT_AGE_MS);
    struct job *list = due ? f->done_head : NULL;
    if (due) {
        f->done_head = f->done_tail = NULL;
        f->done_count = 0;
        memcpy(f->failures_reported, f->failures_by_cause, sizeof(f->failures_reported));
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
        struct job *jobs[REPORT_MAX];
        int statuses[REPORT_MAX];
        size_t n = 0;
        while (list != NULL && n < REPORT_MAX) {
            struct job *j = list;
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
                if (statuses[i] != CR_ERR_TIMEOUT && statuses[i] != CR_ERR_IO)
                    unlink_refused(f, jobs[i]);
                pthread_mutex_lock(&f->mu);
                f->reports_refused++;
                pthread_mutex_unlock(&f->mu);
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

static bool pread_all(int fd, void *buf, size_t len, off_t at) {
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n, at += n, len -= (size_t)n;
    }
    return true;
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

/* Verdict of reading the file into buf: CR_OK, CR_ERR_CHECKSUM (the file
 * is not the object's: corrupt, torn, another key), CR_ERR_OBJECT_NOT_FOUND
 * (gone) or CR_ERR_IO (could not be read now). */
static int read_file(const char *path, const char *tenant, const char *key, uint64_t size,
                     bool has_sum, uint64_t sum, void *buf, char *why, size_t why_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(why, why_len, "cannot open %s: %s", path, strerror(err));
        return err == ENOENT ? CR_ERR_OBJECT_NOT_FOUND : CR_ERR_IO;
    }
    struct stat st;
    uint8_t head[CR_FILE_TIER_HEADER_FIXED + CR_FILE_TIER_TENANT_MAX + CR_FILE_TIER_KEY_MAX];
    int rc = CR_ERR_CHECKSUM;
    struct cr_file_tier_header h;
    size_t want = sizeof(head);
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_len, "cannot stat %s: %s", path, strerror(errno));
        rc = CR_ERR_IO;
    } else {
        if ((uint64_t)st.st_size < want) want = (size_t)st.st_size;
        if (!pread_all(fd, head, want, 0) ||
            cr_file_tier_header_decode(head, want, &h) != CR_FILE_TIER_OK)
            snprintf(why, why_len, "%s has no whole header (torn or not a crescent file)", path);
        else if (!cr_file_tier_header_matches(&h, tenant, key, strlen(key), size) ||
                 (uint64_t)st.st_size != h.header_len + size || (has_sum && h.value_xxh3 != sum))
            snprintf(why, why_len, "%s holds another object or another put of it", path);
        else if (size > 0 && !pread_all(fd, buf, size, h.header_len))
            snprintf(why, why_len, "%s: read failed: %s", path, strerror(errno));
        else if (XXH3_64bits(buf, size) != h.value_xxh3)
            snprintf(why, why_len, "%s: bytes do not match their checksum", path);
        else
            rc = CR_OK;
    }
    close(fd);
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
    pthread_mutex_lock(&f->mu);
    f->reads++;
    if (rc == CR_OK) f->read_bytes += disk->object_size;
    else f->read_failures++;
    f->read_ns_total +=
        (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec));
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
    files_report(c, true);
    struct job *j = f->done_head;
    while (j != NULL) {
        struct job *next = j->next;
        free(j);
        j = next;
    }
    files_free(f);
    c->files = NULL;
}

/* The shared file tier on the master's side (docs/tiers.md): crescentd's
 * --root_fs_dir, --cluster_id and --global_file_segment_size, handed to
 * GetVersion and DiskReplicaReport (rpc_methods.c), and the deletion of the
 * files whose disk replicas the store lets go of.
 *
 * Who deletes a file: the master decides when a disk replica goes (removal,
 * the file tier's eviction, a report of a corrupt file), so it deletes the
 * file, when it can see the shared directory (checked at start: crescentd
 * usually runs where the file system is mounted).  When it cannot, the file
 * is left (counted in file_tier_files_left_total and said once in the log):
 * metadata never points to it again, a later put of the same key overwrites
 * it, and a reader never serves it (its header and checksum are checked). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "actors/segments_internal.h"
#include "core/log.h"
#include "daemon/config.h"

void segments_files_init(struct segments_state *st, const struct cr_daemon_config *config) {
    struct cr_rpc_files *f = &st->files;
    memset(f, 0, sizeof(*f));
    f->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)st;
    f->quota_bytes = config->global_file_segment_size >= (uint64_t)INT64_MAX
                         ? UINT64_MAX : config->global_file_segment_size;
    if (config->root_fs_dir[0] == '\0') return;
    /* The config's strings are bounded by CR_CONFIG_ADDRESS_MAX (256). */
    snprintf(f->root, sizeof(f->root), "%s", config->root_fs_dir);
    size_t n = strlen(f->root);
    while (n > 1 && f->root[n - 1] == '/') f->root[--n] = '\0'; /* one spelling of it */
    snprintf(f->cluster, sizeof(f->cluster), "%s",
             config->cluster_id[0] ? config->cluster_id : "mooncake_cluster");
    snprintf(f->dir, sizeof(f->dir), "%s/%s", f->root, f->cluster);
}

/* Deletes path now; counts and logs the outcome (any thread). */
static void unlink_now(struct segments_state *st, const char *path, uint64_t *last_log_ns,
                       uint64_t now_ns) {
    if (unlink(path) == 0 || errno == ENOENT) {
        st->files_deleted++;
        return;
    }
    int err = errno;
    st->files_delete_failed++;
    st->files_left++;
    if (cr_log_ratelimit(last_log_ns, now_ns, 60ull * 1000000000u))
        CR_WARN("segments", "cannot delete %s of a dropped disk replica: %s (left in place)",
                path, strerror(err));
}

/* The deletes, on a thread of their own.  An unlink waits for the file
 * system's journal, which the clients' writers keep busy with their fsyncs:
 * on the store's thread every PutStart and PutEnd waited behind it (35-165
 * ms of unlinks in a round of 200 puts, up to 74 ms one: bench/RESULTS.md,
 * "Gets from the tiers, hot and cold; the put ..."). The store's thread
 * now only opens the file (O_PATH: no read, no journal) and queues it;
 * this thread deletes the name only while it still names that file: a
 * later put of the key may have renamed a new file over it meanwhile, and
 * that one stays.  Bounded: past UNLINK_QUEUE_MAX queued, or when the
 * thread could not start, the store's thread deletes as before.  One
 * allocation per deleted file, against an unlink that costs milliseconds. */
#define UNLINK_QUEUE_MAX 4096u

struct unlink_job {
    struct unlink_job *next;
    int fd; /* O_PATH of the file the name pointed to when it was dropped */
    char path[];
};

struct files_unlinker {
    struct segments_state *st; /* only its atomic counters are touched here */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stop;
    struct unlink_job *head, *tail;
    size_t queued;
    uint64_t last_log_ns; /* this thread's own rate limit */
};

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int segments_files_unlink_same(int fd, const char *path) {
    struct stat was, is;
    if (fstat(fd, &was) == 0) {
        if (stat(path, &is) != 0) return errno == ENOENT ? 1 : -1;
        if (is.st_dev != was.st_dev || is.st_ino != was.st_ino) return 0;
    }
    return unlink(path) == 0 || errno == ENOENT ? 1 : -1;
}

static void unlink_job_run(struct files_unlinker *u, struct unlink_job *j) {
    int r = segments_files_unlink_same(j->fd, j->path);
    int err = errno;
    if (r > 0) {
        u->st->files_deleted++;
    } else if (r < 0) { /* counted and logged as on the store's thread */
        u->st->files_delete_failed++;
        u->st->files_left++;
        if (cr_log_ratelimit(&u->last_log_ns, mono_ns(), 60ull * 1000000000u))
            CR_WARN("segments", "cannot delete %s of a dropped disk replica: %s (left in place)",
                    j->path, strerror(err));
    } /* r == 0: a newer file of the key, not this replica's: it stays */
    close(j->fd);
    free(j);
}

static void *unlinker_main(void *arg) {
    struct files_unlinker *u = arg;
    pthread_mutex_lock(&u->mu);
    for (;;) {
        while (u->head == NULL && !u->stop) pthread_cond_wait(&u->wake, &u->mu);
        struct unlink_job *j = u->head;
        if (j == NULL) break; /* stopping, and every queued delete done */
        u->head = j->next;
        if (u->head == NULL) u->tail = NULL;
        u->queued--;
        pthread_mutex_unlock(&u->mu);
        unlink_job_run(u, j);
        pthread_mutex_lock(&u->mu);
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

/* Queues path for the thread; false when the caller must delete it itself. */
static bool unlink_later(struct segments_state *st, struct files_unlinker *u, const char *path) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        st->files_deleted++; /* nothing to delete */
        return true;
    }
    if (fd < 0) return false;
    size_t len = strlen(path) + 1;
    struct unlink_job *j = malloc(sizeof(*j) + len);
    if (j == NULL) {
        close(fd);
        return false;
    }
    j->next = NULL;
    j->fd = fd;
    memcpy(j->path, path, len);
    pthread_mutex_lock(&u->mu);
    bool room = u->queued < UNLINK_QUEUE_MAX;
    if (room) {
        if (u->tail != NULL) u->tail->next = j;
        else u->head = j;
        u->tail = j;
        u->queued++;
        pthread_cond_signal(&u->wake);
    }
    pthread_mutex_unlock(&u->mu);
    if (!room) {
        close(fd);
        free(j);
    }
    return room;
}

/* The store's file hook, on the store's thread, once per disk replica let
 * go (removals, file-tier evictions, dropped reports): only objects of the
 * file tier pay it, never the memory-only paths. */
static void delete_file(void *ctx, const char *path) {
    struct segments_state *st = ctx;
    if (!st->files_can_delete) {
        st->files_left++;
        return;
    }
    if (st->files_unlinker != NULL && unlink_later(st, st->files_unlinker, path)) return;
    unlink_now(st, path, &st->files_last_log_ns, st->now_ms * 1000000u);
}

static void unlinker_start(struct segments_state *st) {
    struct files_unlinker *u = calloc(1, sizeof(*u));
    if (u == NULL) return;
    u->st = st;
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->wake, NULL);
    int rc = pthread_create(&u->thread, NULL, unlinker_main, u);
    if (rc != 0) {
        CR_WARN("segments", "file tier: no thread for deleting files (%s): the store's thread "
                "deletes them", strerror(rc));
        pthread_cond_destroy(&u->wake);
        pthread_mutex_destroy(&u->mu);
        free(u);
        return;
    }
    st->files_unlinker = u;
}

void segments_files_stop(struct segments_state *st) {
    struct files_unlinker *u = st->files_unlinker;
    if (u == NULL) return;
    pthread_mutex_lock(&u->mu);
    u->stop = true;
    pthread_cond_signal(&u->wake);
    pthread_mutex_unlock(&u->mu);
    pthread_join(u->thread, NULL);
    pthread_cond_destroy(&u->wake);
    pthread_mutex_destroy(&u->mu);
    free(u);
    st->files_unlinker = NULL;
}

void segments_files_start(struct segments_state *st) {
    struct cr_rpc_files *f = &st->files;
    if (f->root[0] == '\0') return;
    if (mkdir(f->dir, 0755) != 0 && errno != EEXIST)
        CR_WARN("segments", "file tier: cannot make %s: %s", f->dir, strerror(errno));
    st->files_can_delete = access(f->dir, W_OK | X_OK) == 0;
    char quota[32];
    if (f->quota_bytes == UINT64_MAX) snprintf(quota, sizeof(quota), "unlimited");
    else snprintf(quota, sizeof(quota), "%" PRIu64 " bytes", f->quota_bytes);
    if (st->files_can_delete)
        CR_INFO("segments", "file tier at %s (--global_file_segment_size %s); crescentd "
                "deletes the files of disk replicas it drops", f->dir, quota);
    else
        CR_WARN("segments", "file tier at %s (%s), which crescentd cannot write here: files "
                "of dropped disk replicas are left for a later put of their key to replace",
                f->dir, quota);
    if (st->files_can_delete) unlinker_start(st);
    /* Set after the log's restore, so that nothing restored is deleted. */
    cr_store_set_file_hook(st->store, delete_file, st);
}

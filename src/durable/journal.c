/* The journal actor: writes the store's operation log (docs/durability.md).
 *
 * Segments hands it one block of framed records per round of calls
 * (CR_MSG_DURABLE_APPEND, msgs/durable_msgs.h); the store thread itself
 * makes no system call for the log.  At the end of each of its own rounds
 * the journal writes every block it took in that round with one writev,
 * then:
 *   --durability sync:  one fdatasync for all of them (group commit: the
 *                       calls of every segments round that arrived meanwhile
 *                       share it), then SYNCED(lsn) to segments, which
 *                       answers the calls it held;
 *   --durability async: an fdatasync once 10 ms have passed since the first
 *                       byte not yet synced (a timer), so a crash loses at
 *                       most the last ~10 ms of acknowledged calls.
 * A write or sync that fails stops crescentd (SIGTERM): a master that can
 * no longer keep what it acknowledges must not go on acknowledging. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "actors/subsystems.h"
#include "core/histogram.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "durable/durable.h"
#include "durable/files.h"
#include "durable/role.h"
#include "durable/journal_internal.h"
#include "msgs/durable_msgs.h"
#include "runtime/stats_extra.h"

static void journal_fail(struct journal_state *st, const char *what, int err) {
    if (st->failed) return;
    st->failed = true;
    CR_ERROR("journal", "%s %s failed: %s; crescentd stops, since it can no longer keep what "
             "it acknowledges (free the disk, then restart: the log is replayed)",
             what, st->path, strerror(err));
    (void)raise(SIGTERM);
}

void journal_sync(struct journal_state *st) {
    if (st->unsynced_since_ns == 0 || st->failed) return;
    uint64_t t0 = cr_runtime_now_ns(cr_actor_runtime(st->self));
    if (fdatasync(st->fd) != 0) {
        journal_fail(st, "fdatasync of", errno);
        return;
    }
    uint64_t ns = cr_runtime_now_ns(cr_actor_runtime(st->self)) - t0;
    st->syncs++;
    if (ns > st->sync_ns_max) st->sync_ns_max = ns;
    cr_histogram_observe(&st->sync_hist, ns);
    st->synced_lsn = st->written_lsn;
    st->unsynced_since_ns = 0;
}

/* Writes the pending blocks with one writev (more when it writes short),
 * then frees them. */
void journal_write(struct journal_state *st) {
    if (st->pending == 0) return;
    /* Standbys get the blocks as they go to the file (repl.c). */
    if (st->repl.on && st->repl.leading)
        repl_stream(st, st->block, st->block_len, st->pending, st->pending_lsn);
    struct iovec iov_all[JOURNAL_IOV_MAX];
    for (uint32_t i = 0; i < st->pending; i++)
        iov_all[i] = (struct iovec){.iov_base = st->block[i], .iov_len = st->block_len[i]};
    struct iovec *iov = iov_all;
    int n = (int)st->pending;
    while (n > 0 && !st->failed) {
        ssize_t w = writev(st->fd, iov, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            journal_fail(st, "write of", errno);
            break;
        }
        st->bytes += (uint64_t)w;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++, n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    for (uint32_t i = 0; i < st->pending; i++) free(st->block[i]);
    st->pending = 0;
    if (st->failed) return;
    st->written_lsn = st->pending_lsn;
    if (st->unsynced_since_ns == 0)
        st->unsynced_since_ns = cr_runtime_now_ns(cr_actor_runtime(st->self));
}

/* Writes all of buf to fd.  Returns 0 or an errno. */
static int write_all(int fd, const uint8_t *buf, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* A snapshot that failed is dropped: the logs it would have replaced stay,
 * so nothing is lost, only the log keeps growing. */
static void snapshot_abandon(struct journal_state *st, const char *what, int err) {
    char tmp[CR_DURABLE_PATH_MAX];
    cr_durable_snapshot_path(st->dir, st->snap_lsn, true, tmp, sizeof(tmp));
    CR_ERROR("journal", "snapshot %s: %s failed: %s; it is dropped and the log kept whole",
             tmp, what, strerror(err));
    if (st->snap_fd >= 0) close(st->snap_fd);
    st->snap_fd = -1;
    (void)unlink(tmp);
    st->snapshot_failures++;
}

/* A snapshot begins at lsn: the log up to it is synced, the next log
 * starts after the last record written (lsn + 1 on a leader) and the
 * snapshot's file is opened.  A standby's journal is often ahead of its
 * store (it takes the stream before segments applies it): the records after
 * lsn stay in the log being closed, which recovery replays on top of the
 * snapshot (records up to its lsn are skipped), and snapshot_end keeps that
 * log.  So a standby's snapshots progress under a continuous stream. */
static void snapshot_begin(struct journal_state *st, uint64_t lsn) {
    journal_write(st);
    journal_sync(st);
    if (st->failed) return;
    /* Skipped: a cut of the state a start over dropped (sent before
     * segments emptied the store), of records this journal does not have,
     * or one no later than the leader's snapshot it received (segments may
     * have cut while that snapshot's parts were still being applied). */
    if (st->repl.reset_unseen || lsn > st->written_lsn ||
        (lsn <= st->repl.received_snap_lsn && !st->repl.leading)) {
        if (st->snap_fd >= 0) snapshot_abandon(st, "a newer one began", ECANCELED);
        st->snapshots_skipped++;
        return;
    }
    char err[512], path[CR_DURABLE_PATH_MAX];
    int fd;
    if (cr_durable_log_create(st->dir, st->written_lsn + 1, path, sizeof(path), &fd, err,
                              sizeof(err)) != CR_OK) {
        if (!st->failed) {
            st->failed = true;
            CR_ERROR("journal", "%s; crescentd stops, since it can no longer keep what it "
                     "acknowledges", err);
            (void)raise(SIGTERM);
        }
        return;
    }
    close(st->fd);
    st->fd = fd;
    snprintf(st->path, sizeof(st->path), "%s", path);
    if (st->snap_fd >= 0) snapshot_abandon(st, "a newer one began", ECANCELED);
    st->snap_lsn = lsn;
    char tmp[CR_DURABLE_PATH_MAX];
    cr_durable_snapshot_path(st->dir, lsn, true, tmp, sizeof(tmp));
    st->snap_fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    uint8_t header[CR_DURABLE_SNAPSHOT_HEADER];
    cr_durable_snapshot_header(lsn, header);
    int e = st->snap_fd < 0 ? errno : write_all(st->snap_fd, header, sizeof(header));
    if (e != 0) snapshot_abandon(st, "creating it", e);
}

/* What a snapshot at lsn replaces: older snapshots, and each log whose
 * records all precede lsn + 1 (the next log begins at or before it).  The
 * log holding records after lsn stays, even when it begins before. */
static int drop_replaced(const char *dir, uint64_t lsn, char *err, size_t err_len) {
    char **names = NULL;
    char path[CR_DURABLE_PATH_MAX + 64];
    uint32_t count = 0;
    int rc = cr_durable_list(dir, true, &names, &count, err, err_len);
    for (uint32_t i = 0; rc == CR_OK && i < count; i++) {
        if (cr_durable_name_lsn(names[i]) >= lsn) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        (void)unlink(path);
    }
    cr_durable_names_free(names, count);
    names = NULL;
    count = 0;
    if (rc == CR_OK) rc = cr_durable_list(dir, false, &names, &count, err, err_len);
    for (uint32_t i = 0; rc == CR_OK && i + 1 < count; i++) {
        if (cr_durable_name_lsn(names[i + 1]) > lsn + 1) break; /* sorted by first lsn */
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        (void)unlink(path);
    }
    cr_durable_names_free(names, count);
    return rc == CR_OK ? cr_durable_sync_dir(dir, err, err_len) : rc;
}

static void snapshot_part(struct journal_state *st, const uint8_t *block, size_t len) {
    if (st->snap_fd < 0) return;
    int e = write_all(st->snap_fd, block, len);
    if (e != 0) snapshot_abandon(st, "a write", e);
    else st->snapshot_bytes += len;
}

/* The end record: synced, renamed into place, then what it replaces goes. */
static void snapshot_end(struct journal_state *st, const uint8_t *block, size_t len) {
    snapshot_part(st, block, len);
    if (st->snap_fd < 0) return;
    char tmp[CR_DURABLE_PATH_MAX], path[CR_DURABLE_PATH_MAX], err[512];
    cr_durable_snapshot_path(st->dir, st->snap_lsn, true, tmp, sizeof(tmp));
    cr_durable_snapshot_path(st->dir, st->snap_lsn, false, path, sizeof(path));
    if (fdatasync(st->snap_fd) != 0) {
        snapshot_abandon(st, "fdatasync", errno);
        return;
    }
    close(st->snap_fd);
    st->snap_fd = -1;
    if (rename(tmp, path) != 0) {
        snapshot_abandon(st, "rename", errno);
        return;
    }
    if (cr_durable_sync_dir(st->dir, err, sizeof(err)) != CR_OK ||
        drop_replaced(st->dir, st->snap_lsn, err, sizeof(err)) != CR_OK) {
        CR_WARN("journal", "snapshot %s: %s (the older files stay)", path, err);
        return;
    }
    st->snapshots++;
    CR_INFO("journal", "snapshot %s written; the logs before it removed", path);
}

/* SYNCED to segments once the lsn it may answer calls up to moved: under
 * --durability sync what is on disk, under --replication sync (leading)
 * also what a standby acknowledged, the lower of the two. */
void journal_release(struct journal_state *st) {
    bool dsync = st->mode == CR_DURABILITY_SYNC;
    bool rsync = st->repl.on && st->repl.sync && st->repl.leading;
    if (st->peers == NULL || (!dsync && !rsync)) return;
    uint64_t lsn = dsync ? st->synced_lsn : st->written_lsn;
    if (rsync && st->repl.acked_lsn < lsn) lsn = st->repl.acked_lsn;
    if (lsn <= st->told_lsn) return;
    struct cr_msg msg = {.type = CR_MSG_DURABLE_SYNCED};
    CR_MSG_BODY(&msg, struct cr_msg_durable_synced)->lsn = lsn;
    st->told_lsn = lsn;
    /* Segments stopping: its held calls are dropped, unanswered. */
    (void)cr_send(st->peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg);
}

/* The background sync's results (syncer.h): how far the log is on disk,
 * the durations, a failure (which stops crescentd as one here would). */
static void syncer_collect(struct journal_state *st) {
    if (!st->syncer_on) return;
    uint64_t done = 0, ns[CR_SYNCER_SAMPLES];
    uint32_t n = 0;
    int err = 0;
    (void)cr_syncer_collect(&st->syncer, &done, &err, ns, &n);
    for (uint32_t i = 0; i < n; i++) {
        st->syncs++;
        if (ns[i] > st->sync_ns_max) st->sync_ns_max = ns[i];
        cr_histogram_observe(&st->sync_hist, ns[i]);
    }
    if (done > st->synced_lsn && done <= st->written_lsn) st->synced_lsn = done;
    if (err != 0 && !st->failed) journal_fail(st, "fdatasync of", err);
}

/* Async: a sync once the oldest unsynced byte is 10 ms old (on the syncer's
 * thread; when one is still under way, looked at again in a millisecond),
 * else a timer for that moment (one at a time). */
static void journal_async_due(struct journal_state *st) {
    syncer_collect(st);
    if (st->unsynced_since_ns == 0 || st->failed) return;
    uint64_t now = cr_runtime_now_ns(cr_actor_runtime(st->self));
    uint64_t age = now - st->unsynced_since_ns;
    if (age >= JOURNAL_ASYNC_SYNC_NS) {
        if (!st->syncer_on) {
            journal_sync(st);
            return;
        }
        if (cr_syncer_ask(&st->syncer, st->fd, st->written_lsn)) {
            st->unsynced_since_ns = 0; /* the next write starts the clock again */
            return;
        }
        age = JOURNAL_ASYNC_SYNC_NS - 1000000u;
    }
    if (st->tick_armed) return;
    struct cr_msg tick = {.type = CR_MSG_DURABLE_TICK};
    if (cr_actor_timer_after(st->self, JOURNAL_ASYNC_SYNC_NS - age, &tick, NULL) == CR_OK)
        st->tick_armed = true;
    else
        journal_sync(st); /* no timer slot: sync now rather than late */
}

void journal_take(struct journal_state *st, uint8_t *block, size_t len, uint64_t last_lsn) {
    if (st->fd < 0 || st->failed) {
        free(block);
        return;
    }
    if (st->pending == JOURNAL_IOV_MAX) journal_write(st);
    st->block[st->pending] = block;
    st->block_len[st->pending] = len;
    st->pending++;
    st->blocks++;
    assert(last_lsn > st->pending_lsn);
    st->pending_lsn = last_lsn;
}

static void journal_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    struct journal_state *st = arg;
    (void)self;
    switch (msg->type) {
    case CR_MSG_WIRE: st->peers = msg->body.ptr[0]; return;
    case CR_MSG_DURABLE_APPEND: {
        struct cr_msg_durable_append *a = CR_MSG_BODY(msg, struct cr_msg_durable_append);
        journal_take(st, a->block, a->len, a->last_lsn);
        return;
    }
    case CR_MSG_REPL_TICK: repl_tick(st); return;
    case CR_MSG_REPL_RESET_DONE: st->repl.reset_unseen = false; return;
    case CR_MSG_DURABLE_TICK:
        st->tick_armed = false;
        if (st->syncer_on)
            journal_async_due(st);
        else
            journal_sync(st);
        return;
    case CR_MSG_DURABLE_SNAPSHOT_BEGIN:
        if (st->fd >= 0 && !st->failed)
            snapshot_begin(st, CR_MSG_BODY(msg, struct cr_msg_durable_append)->last_lsn);
        return;
    case CR_MSG_DURABLE_SNAPSHOT_PART:
    case CR_MSG_DURABLE_SNAPSHOT_END: {
        struct cr_msg_durable_append *a = CR_MSG_BODY(msg, struct cr_msg_durable_append);
        if (msg->type == CR_MSG_DURABLE_SNAPSHOT_PART)
            snapshot_part(st, a->block, a->len);
        else
            snapshot_end(st, a->block, a->len);
        free(a->block);
        return;
    }
    case CR_MSG_ROLE_REQUEST: {
        struct cr_role_request *req = msg->body.ptr[0];
        repl_role_request(st, req);
        free(req);
        return;
    }
    default:
        if (msg->flags & CR_MSG_ASK) cr_reply(msg, CR_ERR_INVALID_PARAMS);
    }
}

/* Every block of the round is written together; sync by the mode. */
static void journal_round_end(struct cr_actor *self, void *arg) {
    (void)self;
    struct journal_state *st = arg;
    if (st->fd < 0) return;
    journal_write(st);
    if (st->mode == CR_DURABILITY_SYNC)
        journal_sync(st);
    else
        journal_async_due(st);
    /* Also what a snapshot's start synced in this round. */
    journal_release(st);
}

static int journal_start(struct cr_actor *self, void *arg) {
    struct journal_state *st = arg;
    st->self = self;
    repl_start(st);
    cr_role_attach(self);
    return CR_OK;
}

/* The replication sockets (repl.c); without replication, the wake fd. */
static void journal_wait(struct cr_actor *self, void *arg, int wake_fd, int64_t timeout_ns) {
    (void)self;
    repl_wait(arg, wake_fd, timeout_ns);
}

static uint32_t journal_poll(struct cr_actor *self, void *arg) {
    (void)self;
    return repl_poll(arg);
}

/* Last: what segments sent before it stopped is written and synced. */
static void journal_stop(struct cr_actor *self, void *arg) {
    (void)self;
    struct journal_state *st = arg;
    cr_role_attach(NULL);
    if (st->fd < 0) return;
    journal_write(st);
    journal_sync(st);
}

static void journal_discard(void *arg, struct cr_msg *msg) {
    (void)arg;
    if (msg->type == CR_MSG_DURABLE_APPEND || msg->type == CR_MSG_DURABLE_SNAPSHOT_PART ||
        msg->type == CR_MSG_DURABLE_SNAPSHOT_END)
        free(CR_MSG_BODY(msg, struct cr_msg_durable_append)->block);
    if (msg->type == CR_MSG_ROLE_REQUEST) free(msg->body.ptr[0]);
}

static void journal_stats(struct cr_actor *self, void *arg, struct cr_actor_stats *out) {
    (void)self;
    const struct journal_state *st = arg;
    cr_actor_stats_add(out, "log_bytes_total", st->bytes);
    cr_actor_stats_add(out, "log_blocks_total", st->blocks);
    cr_actor_stats_add(out, "log_syncs_total", st->syncs);
    cr_actor_stats_add(out, "log_sync_ns_max", st->sync_ns_max);
    cr_actor_stats_add(out, "log_written_lsn", st->written_lsn);
    cr_actor_stats_add(out, "log_synced_lsn", st->synced_lsn);
    cr_actor_stats_add(out, "snapshots_total", st->snapshots);
    cr_actor_stats_add(out, "snapshot_bytes_total", st->snapshot_bytes);
    cr_actor_stats_add(out, "snapshot_failures_total", st->snapshot_failures);
    cr_actor_stats_add(out, "snapshots_skipped_total", st->snapshots_skipped);
    cr_actor_stats_add(out, "diverged_kept", st->repl.diverged_kept);
    if (out->histograms != NULL && out->histogram_count < out->histograms_max) {
        out->histograms[out->histogram_count++] = (struct cr_actor_histogram){
            .name = "fsync_duration_seconds",
            .help = "fdatasync of the operation log (one per group of calls)",
            .label = "log",
            .label_value = "store",
            .h = st->sync_hist};
    }
    repl_stats(st, out);
}

static int journal_create(const struct cr_daemon_config *config, void **state_out) {
    struct journal_state *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
    st->fd = -1;
    st->snap_fd = -1;
    st->mode = cr_durability_of(config);
    snprintf(st->dir, sizeof(st->dir), "%s", config->state_dir);
    if (st->mode != CR_DURABILITY_NONE) {
        char err[512];
        int rc = cr_durable_log_open(config->state_dir, st->path, sizeof(st->path), &st->fd,
                                     &st->written_lsn, err, sizeof(err));
        if (rc != CR_OK) {
            fprintf(stderr, "crescentd: --state-dir: %s\n", err);
            free(st);
            return rc == CR_ERR_NOMEM ? rc : CR_ERR_IO;
        }
        st->synced_lsn = st->pending_lsn = st->told_lsn = st->written_lsn;
        st->repl.keep_diverged = config->keep_diverged;
        repl_diverged_prune(st);
        if (st->mode == CR_DURABILITY_ASYNC) {
            st->syncer_on = cr_syncer_start(&st->syncer) == CR_OK;
            if (!st->syncer_on)
                CR_WARN("journal", "no thread for the background fdatasync: the journal "
                        "syncs on its own thread (the replication stream waits for it)");
        }
    }
    int rc = repl_create(st, config);
    if (rc != CR_OK) {
        if (st->syncer_on) cr_syncer_stop(&st->syncer);
        if (st->fd >= 0) close(st->fd);
        free(st);
        return rc;
    }
    *state_out = st;
    return CR_OK;
}

static void journal_destroy(void *arg) {
    struct journal_state *st = arg;
    if (st == NULL) return;
    repl_destroy(st);
    if (st->syncer_on) cr_syncer_stop(&st->syncer); /* a sync under way ends first */
    for (uint32_t i = 0; i < st->pending; i++) free(st->block[i]);
    if (st->fd >= 0) close(st->fd);
    if (st->snap_fd >= 0) { /* stopped mid-snapshot: recovery removes the .tmp */
        close(st->snap_fd);
    }
    free(st);
}

static const struct cr_actor_ops journal_ops = {
    .start = journal_start,
    .handle = journal_handle,
    .stop = journal_stop,
    .discard = journal_discard,
    .round_end = journal_round_end,
    .stats = journal_stats,
    .wait = journal_wait,
    .poll = journal_poll,
    .park_fence = true,
};

const struct cr_subsystem_def cr_journal_def = {
    .name = "journal",
    .ops = &journal_ops,
    .create = journal_create,
    .destroy = journal_destroy,
};

/* The term history on the journal's thread (terms.h; docs/ha.md, "A former
 * leader comes back"): kept in DIR/terms before any record of a new term is
 * taken or made, compared with a standby's at its HELLO, and the standby's
 * start over when its log is not a prefix of its leader's. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "durable/files.h"
#include "durable/diverged.h"
#include "durable/journal_internal.h"
#include "msgs/durable_msgs.h"

static bool save(struct journal_state *st) {
    char err[512];
    if (cr_terms_store(st->dir, &st->repl.terms, err, sizeof(err)) == CR_OK) return true;
    st->repl.terms_failures++;
    CR_ERROR("journal", "%s: this master does not act on the new term until it can keep it",
             err);
    return false;
}

int repl_terms_open(struct journal_state *st, char *err, size_t err_len) {
    int rc = cr_terms_load(st->dir, &st->repl.terms, err, err_len);
    if (rc != CR_OK) return rc;
    st->repl.terms_on = true;
    /* A log kept before histories were: its records count as of the
     * highest term known, so a standby of the same age goes on from its
     * log (the check of earlier versions: lsns alone). */
    if (st->repl.terms.count == 0 && st->written_lsn > 0) {
        (void)cr_terms_note(&st->repl.terms, st->repl.terms.highest, 1);
        if (!save(st)) {
            snprintf(err, err_len, "%s/%s cannot be written", st->dir, CR_TERMS_FILE);
            return CR_ERR_IO;
        }
    }
    (void)cr_role_see_term(st->repl.terms.highest);
    if (st->repl.terms.highest > 0)
        CR_INFO("journal", "highest term seen before this start: %" PRIu64 " (%s/%s)",
                st->repl.terms.highest, st->dir, CR_TERMS_FILE);
    return CR_OK;
}

bool repl_terms_see(struct journal_state *st, uint64_t term) {
    if (!st->repl.terms_on || !cr_terms_see(&st->repl.terms, term)) return true;
    return save(st);
}

bool repl_terms_note(struct journal_state *st, uint64_t term, uint64_t first_lsn) {
    if (!st->repl.terms_on || !cr_terms_note(&st->repl.terms, term, first_lsn)) return true;
    return save(st);
}

bool repl_terms_take(struct journal_state *st, uint64_t term, uint64_t first, uint64_t last) {
    if (!st->repl.terms_on) return true;
    bool changed = st->repl.leader_terms_on
                       ? cr_terms_note_as(&st->repl.terms, &st->repl.leader_terms, term, first,
                                          last)
                       : cr_terms_note(&st->repl.terms, term, first);
    return !changed || save(st);
}

uint64_t repl_terms_agree(const struct journal_state *st, const struct cr_terms *history,
                          bool has_history, uint64_t lsn) {
    if (!has_history || !st->repl.terms_on) /* lsns alone, as before histories */
        return lsn <= st->written_lsn ? lsn : st->written_lsn;
    return cr_terms_agree(history, lsn, &st->repl.terms, st->written_lsn);
}

/* Moves every log and snapshot of dir into dir/aside (created). */
static bool move_aside(const char *dir, const char *aside, char *err, size_t err_len) {
    char path[CR_DURABLE_PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, aside);
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        snprintf(err, err_len, "mkdir %.300s: %s", path, strerror(errno));
        return false;
    }
    bool ok = true;
    for (int snaps = 0; snaps < 2 && ok; snaps++) {
        char **names = NULL;
        uint32_t count = 0;
        if (cr_durable_list(dir, snaps == 1, &names, &count, err, err_len) != CR_OK) return false;
        for (uint32_t i = 0; i < count && ok; i++) {
            char from[CR_DURABLE_PATH_MAX + 64], to[2 * CR_DURABLE_PATH_MAX + 128];
            snprintf(from, sizeof(from), "%s/%s", dir, names[i]);
            snprintf(to, sizeof(to), "%s/%s", path, names[i]);
            if (rename(from, to) != 0) {
                snprintf(err, err_len, "rename %.300s: %s", from, strerror(errno));
                ok = false;
            }
        }
        cr_durable_names_free(names, count);
    }
    return ok && cr_durable_sync_dir(path, err, err_len) == CR_OK &&
           cr_durable_sync_dir(dir, err, err_len) == CR_OK;
}

void repl_diverged_prune(struct journal_state *st) {
    if (st->dir[0] == '\0') return;
    char err[512];
    uint32_t kept = 0;
    if (cr_durable_diverged_prune(st->dir, st->repl.keep_diverged, &kept, err, sizeof(err)) !=
        CR_OK)
        CR_WARN("journal", "--keep-diverged: %s (the directories stay; remove them by hand)",
                err);
    st->repl.diverged_kept = kept;
    cr_role_note_diverged(kept);
}

void repl_note_storage(struct journal_state *st) {
    if (st->dir[0] == '\0' || st->fd < 0) return;
    uint64_t bytes = 0, snap_lsn = 0, snap_ms = 0;
    char err[256], path[CR_DURABLE_PATH_MAX + 64];
    for (int snaps = 0; snaps < 2; snaps++) {
        char **names = NULL;
        uint32_t count = 0;
        if (cr_durable_list(st->dir, snaps == 1, &names, &count, err, sizeof(err)) != CR_OK)
            return;
        for (uint32_t i = 0; i < count; i++) {
            struct stat sb;
            snprintf(path, sizeof(path), "%s/%s", st->dir, names[i]);
            if (stat(path, &sb) != 0) continue;
            if (snaps == 0) {
                bytes += (uint64_t)sb.st_size;
            } else if (i + 1 == count) {
                snap_lsn = cr_durable_name_lsn(names[i]);
                snap_ms = (uint64_t)sb.st_mtim.tv_sec * 1000u +
                          (uint64_t)sb.st_mtim.tv_nsec / 1000000u;
            }
        }
        cr_durable_names_free(names, count);
    }
    cr_role_note_storage(bytes, snap_lsn, snap_ms);
}

bool repl_terms_start_over(struct journal_state *st, const char *why) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char aside[64], err[512];
    snprintf(aside, sizeof(aside), "diverged-%" PRIu64,
             (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
    CR_WARN("journal", "replication: starting over from the leader's state: %s; this "
            "master's logs (up to lsn %" PRIu64 ") are moved to %s/%s", why, st->pending_lsn,
            st->dir, aside);
    journal_write(st);
    if (st->fd >= 0) close(st->fd);
    st->fd = -1;
    if (st->snap_fd >= 0) { /* one it was writing as a leader: of the state dropped */
        char tmp[CR_DURABLE_PATH_MAX];
        cr_durable_snapshot_path(st->dir, st->snap_lsn, true, tmp, sizeof(tmp));
        close(st->snap_fd);
        st->snap_fd = -1;
        (void)unlink(tmp);
    }
    st->repl.terms.count = 0;
    int fd = -1;
    bool ok = move_aside(st->dir, aside, err, sizeof(err));
    if (ok) repl_diverged_prune(st); /* this one counts among the kept */
    if (ok) ok = save(st);
    if (ok)
        ok = cr_durable_log_create(st->dir, 1, st->path, sizeof(st->path), &fd, err,
                                   sizeof(err)) == CR_OK;
    if (!ok) {
        CR_ERROR("journal", "replication: cannot start over in %s: %s; crescentd stops (move "
                 "the state directory away and start it again to follow empty)", st->dir, err);
        st->failed = true;
        (void)raise(SIGTERM);
        return false;
    }
    st->fd = fd;
    st->written_lsn = st->synced_lsn = st->pending_lsn = st->told_lsn = 0;
    st->unsynced_since_ns = 0;
    st->repl.acked_sent = 0;
    st->repl.received_snap_lsn = 0;
    st->repl.reset_unseen = true; /* until segments' REPL_RESET_DONE */
    st->repl.resyncs++;
    struct cr_msg msg = {.type = CR_MSG_REPL_RESET};
    if (st->peers == NULL || cr_send(st->peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg) != CR_OK) {
        /* Its store would keep the records just dropped from the log. */
        CR_ERROR("journal", "replication: segments took no reset (busy or stopping); "
                 "crescentd stops rather than keep records its leader never had");
        st->failed = true;
        (void)raise(SIGTERM);
        return false;
    }
    return true;
}

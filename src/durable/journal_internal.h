/* The journal actor's state, shared by journal.c (the log and snapshots)
 * and repl.c (the replication stream, docs/durability.md "Replication").
 * One thread: the journal's. */
#ifndef CRESCENT_DURABLE_JOURNAL_INTERNAL_H
#define CRESCENT_DURABLE_JOURNAL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "actors/subsystems.h"
#include "core/buf.h"
#include "core/histogram.h"
#include "durable/durable.h"
#include "durable/role.h"
#include "durable/syncer.h"
#include "durable/terms.h"

#define REPL_PEERS_MAX 8u
#define REPL_INFLIGHT 1024u /* lag samples per standby: sent lsn and when */

/* One connection: a standby's to this leader, or this standby's to its
 * leader (`up`). */
struct repl_peer {
    int fd;
    bool up;            /* this standby's link to its leader */
    bool connecting;    /* non-blocking connect under way */
    bool hello;         /* a leader's peer: its HELLO came and it is streamed to */
    bool watch_out;     /* EPOLLOUT asked for: out has bytes the socket did not take */
    bool closing;       /* close once out is sent (a REFUSE) */
    struct cr_buf out;
    size_t out_off;
    uint8_t *in;
    size_t in_len, in_cap;
    uint64_t acked;     /* a leader's peer: its last ACK */
    size_t catchup_len; /* bytes its catch-up queued (allowed above REPL_OUT_MAX) */
    uint64_t inflight_lsn[REPL_INFLIGHT];
    uint64_t inflight_ns[REPL_INFLIGHT];
    uint32_t inflight_head, inflight_count;
    char name[64];      /* "host:port" of the other side */
};

struct repl_state {
    bool on;               /* a listener or a leader to follow */
    bool sync;             /* --replication sync */
    bool leading;          /* this journal's log is made here and streamed */
    int epfd, listen_fd;
    bool wake_added;
    struct repl_peer *peers[REPL_PEERS_MAX];
    struct repl_peer *up;  /* a standby's link */
    char leader[CR_ROLE_ADDR_MAX];
    uint64_t term;
    uint64_t acked_lsn;    /* the highest ACK of any standby */
    uint64_t leader_lsn;   /* a standby: the leader's last lsn it knows of */
    uint64_t behind_since_ns;
    uint64_t acked_sent;   /* a standby: the last ACK it sent */
    bool tick_armed;
    uint64_t retry_at_ns;  /* a standby refused: no reconnect before */
    /* A snapshot the leader streams (a new standby): -1 none. */
    int snap_fd;
    uint64_t snap_lsn;
    bool snap_on;
    uint64_t received_snap_lsn; /* the last leader's snapshot taken whole (0: none) */
    /* A start over emptied the log; segments has not emptied its store yet
     * (REPL_RESET_DONE): its snapshot messages are of the dropped state. */
    bool reset_unseen;
    /* The terms seen and the log's term history, as DIR/terms holds them
     * (repl_terms.c; terms_on false without a state directory). */
    bool terms_on;
    struct cr_terms terms;
    struct cr_terms leader_terms; /* a standby: its leader's history (TERMS) */
    bool leader_terms_on;
    uint64_t resyncs_asked;    /* a leader: standbys told to start over */
    uint64_t resyncs;          /* a standby: times it dropped its state to start over */
    uint64_t terms_failures;   /* DIR/terms could not be written */
    uint32_t storage_ticks;    /* repl ticks since the state directory was listed */
    uint32_t keep_diverged;    /* --keep-diverged */
    uint32_t diverged_kept;    /* DIR/diverged-<ms>/ directories there now */
    /* Counters for /metrics. */
    uint64_t bytes_sent, bytes_received, frames_sent, frames_received, reconnects, accepts;
    uint64_t stale_refused, bad_frames, refused_hellos, catchups, snapshots_sent,
        snapshots_received, apply_dropped;
    struct cr_histogram lag_hist; /* a record's sending to its ACK */
    uint64_t lag_max_ns;          /* the longest of them */
};

#define JOURNAL_IOV_MAX 64u /* blocks per writev (IOV_MAX is 1024) */
#define JOURNAL_ASYNC_SYNC_NS 10000000ull

struct journal_state {
    enum cr_durability mode;
    char dir[CR_DURABLE_PATH_MAX];
    char path[CR_DURABLE_PATH_MAX];
    int fd; /* -1 when off */
    struct cr_actor *self;
    struct cr_subsystems *peers;
    uint8_t *block[JOURNAL_IOV_MAX]; /* taken this round, not written yet */
    size_t block_len[JOURNAL_IOV_MAX];
    uint32_t pending;
    uint64_t pending_lsn;     /* last lsn of the pending blocks */
    uint64_t written_lsn;     /* written, maybe not synced */
    uint64_t synced_lsn;
    uint64_t told_lsn;        /* the last SYNCED segments was sent */
    uint64_t unsynced_since_ns; /* 0: everything written is synced */
    bool tick_armed;
    bool failed;
    uint64_t bytes;
    uint64_t blocks;
    uint64_t syncs;
    uint64_t sync_ns_max;
    struct cr_histogram sync_hist;
    /* The snapshot being written (-1: none) and its lsn. */
    int snap_fd;
    uint64_t snap_lsn;
    uint64_t snapshots;
    uint64_t snapshot_bytes;
    uint64_t snapshot_failures;
    uint64_t snapshots_skipped; /* a standby's cut the log cannot take (journal.c) */
    struct repl_state repl; /* replication (repl.c); repl.on false: off */
    /* --durability async: the periodic fdatasync on a thread of its own
     * (syncer.h), so the stream is never held behind it. */
    struct cr_syncer syncer;
    bool syncer_on;
};


/* journal.c */
void journal_write(struct journal_state *st);
void journal_sync(struct journal_state *st);
/* Takes a block (malloc'd, framed records up to last_lsn) to write this
 * round. */
void journal_take(struct journal_state *st, uint8_t *block, size_t len, uint64_t last_lsn);
/* SYNCED to segments when the lsn it may answer up to moved. */
void journal_release(struct journal_state *st);

/* repl.c */
int repl_create(struct journal_state *st, const struct cr_daemon_config *config);
void repl_start(struct journal_state *st);
void repl_destroy(struct journal_state *st);
/* The blocks journal_write is about to write: streamed to the standbys. */
void repl_stream(struct journal_state *st, uint8_t *const *blocks, const size_t *lens,
                 uint32_t count, uint64_t last_lsn);
void repl_wait(struct journal_state *st, int wake_fd, int64_t timeout_ns);
uint32_t repl_poll(struct journal_state *st);
void repl_tick(struct journal_state *st);
void repl_role_request(struct journal_state *st, const struct cr_role_request *req);
void repl_stats(const struct journal_state *st, struct cr_actor_stats *out);

/* repl_terms.c: the term history (terms.h) on the journal's thread.  Each
 * returns false when DIR/terms could not be written (logged): the caller
 * then must not act on the term. */
int repl_terms_open(struct journal_state *st, char *err, size_t err_len);
bool repl_terms_see(struct journal_state *st, uint64_t term);
bool repl_terms_note(struct journal_state *st, uint64_t term, uint64_t first_lsn);
/* A standby taking records first..last of a leader at `term`: tagged with
 * the terms its leader's history (TERMS) gives them. */
bool repl_terms_take(struct journal_state *st, uint64_t term, uint64_t first, uint64_t last);
/* A leader, given a standby's HELLO: the last lsn up to which its log is
 * this leader's (== lsn: it goes on from its own log). */
uint64_t repl_terms_agree(const struct journal_state *st, const struct cr_terms *history,
                          bool has_history, uint64_t lsn);
/* A standby told to start over (RESYNC): its logs and snapshots are moved
 * to DIR/diverged-<ms>/, its history emptied, a log from lsn 1 begun and
 * segments told to empty the store.  False when the directory could not be
 * changed (crescentd stops: its state would be unknown). */
bool repl_terms_start_over(struct journal_state *st, const char *why);
/* Deletes the DIR/diverged-<ms>/ directories beyond --keep-diverged
 * (durable/diverged.h), at start and after a start over; a failure is
 * logged, never fatal (they are only kept for an operator). */
void repl_diverged_prune(struct journal_state *st);
/* The state directory's log bytes and newest snapshot, for /health (a
 * directory listing: called once a second). */
void repl_note_storage(struct journal_state *st);

#endif

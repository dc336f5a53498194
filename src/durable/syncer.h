/* The journal's background fdatasync under --durability async (docs/ha.md,
 * "Standby lag"): the journal's thread also serves the replication stream,
 * and an fdatasync on it (milliseconds, tens of them on a busy disk) held
 * every block a leader streams and every acknowledgement a standby sends for
 * that long.  So the async mode's periodic sync runs on a thread of its own,
 * one at a time, on a dup() of the log's descriptor (the journal may close
 * and replace its log meanwhile); the journal asks and collects the results
 * in its rounds.  --durability sync keeps syncing on the journal's thread:
 * there the calls wait for it anyway.
 *
 * Threads: the journal's (ask, collect, stop) and the syncer's; everything
 * shared is under `lock`. */
#ifndef CRESCENT_DURABLE_SYNCER_H
#define CRESCENT_DURABLE_SYNCER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define CR_SYNCER_SAMPLES 16u

struct cr_syncer {
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* Under lock. */
    bool stop;
    int fd;            /* asked: a dup of the log's fd, the syncer's to close; -1 none */
    uint64_t lsn;      /* what it holds up to */
    bool busy;         /* asked or syncing */
    uint64_t done_lsn; /* every record up to it is on disk */
    int err;           /* the first failure's errno (0 none) */
    uint64_t ns[CR_SYNCER_SAMPLES]; /* durations not collected yet */
    uint32_t ns_count;
};

/* Starts the thread.  Returns CR_OK or an error (then the journal syncs on
 * its own thread). */
int cr_syncer_start(struct cr_syncer *s);
/* Asks for fdatasync of fd (dup'd here) up to lsn.  False when one is still
 * under way or the dup failed (the caller asks again later). */
bool cr_syncer_ask(struct cr_syncer *s, int fd, uint64_t lsn);
/* The results since the last collect: *done_lsn (max so far), *err (0
 * none), the durations into ns[] (*count of them, at most
 * CR_SYNCER_SAMPLES).  Returns whether one is still under way. */
bool cr_syncer_collect(struct cr_syncer *s, uint64_t *done_lsn, int *err, uint64_t *ns,
                       uint32_t *count);
/* Stops and joins the thread (a sync under way ends first). */
void cr_syncer_stop(struct cr_syncer *s);

#endif

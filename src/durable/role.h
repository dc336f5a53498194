/* The master's role in a replicated setup (docs/durability.md, section
 * "Replication"), and the contract between crescentd's store master and
 * whatever decides who leads: the etcd election (--ha etcd), or an operator
 * (POST /api/v1/ha/promote, --standby-of).
 *
 *   CR_ROLE_NONE     no HA: a lone master that takes every call (term 0).
 *   CR_ROLE_LEADER   takes mutating calls and streams its operation log to
 *                    its standbys (--replication-address), each record
 *                    stamped with its term.
 *   CR_ROLE_STANDBY  follows a leader's log (applies every record to its own
 *                    store and log), answers reads and queries, and refuses
 *                    mutating calls with CR_ROLE_NOT_LEADER_STATUS and a
 *                    message starting "not the leader".
 *
 * The term is the fencing token: the etcd revision of the election that
 * made the leader (0 without HA; a manual promotion takes the highest term
 * seen + 1).  A standby refuses records of a term lower than the highest it
 * has seen; a leader that learns of a higher term (a standby's hello, or
 * cr_role_request_follow) stops taking mutating calls at once.
 *
 * Threads: every function here may be called from any thread.  The
 * requests are messages to the journal actor, which carries them out in
 * order with the log stream (so a promotion is applied after every record
 * received before it); they return once the request is queued, and
 * cr_role_get shows when it took effect. */
#ifndef CRESCENT_DURABLE_ROLE_H
#define CRESCENT_DURABLE_ROLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crescent/error.h"

/* "host:port" of a replication listener, NUL included. */
#define CR_ROLE_ADDR_MAX 256u

/* The status a standby (or a fenced leader) answers mutating calls with;
 * the message starts "not the leader" and names the leader when known. */
#define CR_ROLE_NOT_LEADER_STATUS CR_ERR_RPC_FAIL

enum cr_role {
    CR_ROLE_NONE = 0,
    CR_ROLE_LEADER = 1,
    CR_ROLE_STANDBY = 2,
};

/* A leader's standby, as /api/v1/ha shows it. */
#define CR_ROLE_STANDBYS_MAX 8u
struct cr_role_standby {
    char name[64];        /* its address as the leader sees it */
    uint64_t acked_lsn;   /* the last record it acknowledged */
    uint64_t lag_records; /* the leader's last lsn minus acked_lsn */
    uint64_t lag_ms;      /* age of the oldest record sent and not acknowledged */
};

/* What /health, /metrics and `crescentctl ha` show. */
struct cr_role_status {
    enum cr_role role;
    bool fenced;              /* a leader that saw a higher term: refuses writes */
    uint64_t term;            /* the term this master acts in (0: no HA) */
    uint64_t highest_term;    /* the highest term seen (records, hellos, requests) */
    char leader[CR_ROLE_ADDR_MAX]; /* a standby's leader ("" none known) */
    uint64_t applied_lsn;     /* the last log record in this master's store */
    /* A standby: how far behind its leader (the leader's last lsn it knows
     * of minus applied_lsn, and the age of the oldest record not applied). */
    uint64_t lag_records;
    uint64_t lag_ms;
    bool connected;           /* a standby: its stream to the leader is up */
    uint32_t standbys;        /* a leader: standbys connected now */
    /* The state directory (with replication on; refreshed every second):
     * bytes of its logs, and its newest snapshot's lsn and time (0: none). */
    uint64_t log_bytes;
    uint64_t snapshot_lsn;
    uint64_t snapshot_unix_ms;
    uint32_t diverged_kept;   /* DIR/diverged-<ms>/ directories kept (--keep-diverged) */
    struct cr_role_standby standby[CR_ROLE_STANDBYS_MAX]; /* the first `standbys` */
};

/* Asks crescentd to lead at `term` (> 0 with HA; 0 without): a standby
 * stops following, applies what it received, continues the log after its
 * last record and takes mutating calls.  A term lower than the highest seen
 * is refused (CR_ERR_INVALID_PARAMS, err says why).  Returns CR_OK once the
 * request is queued, CR_ERR_AGAIN before crescentd's journal runs,
 * CR_ERR_NOMEM. */
int cr_role_request_leader(uint64_t term, char *err, size_t err_len);

/* Asks crescentd to step down (it refuses mutating calls at once, before
 * this returns) and follow the leader whose replication listener is `addr`
 * ("host:port"), known to lead at `term` (0: unknown).  Returns as
 * cr_role_request_leader; CR_ERR_INVALID_PARAMS for an address too long or
 * empty. */
int cr_role_request_follow(const char *addr, uint64_t term, char *err, size_t err_len);

/* The role now. */
void cr_role_get(struct cr_role_status *out);

/* The hot path's question (one relaxed atomic load): may this master take
 * a mutating call now?  True for NONE, and for a LEADER not fenced. */
bool cr_role_accepts_writes(void);

/* The "not the leader; leader is ADDR" sentence for a refused call. */
void cr_role_refusal(char *out, size_t size);

const char *cr_role_name(enum cr_role role);

/* ---- crescentd's side (the journal actor and segments) ------------------- */

struct cr_actor;

/* Where requests go (the journal actor; NULL when it stops).  Set at its
 * start, before any request can be carried out. */
void cr_role_attach(struct cr_actor *journal);

/* The request a CR_MSG_ROLE_REQUEST carries (malloc'd; the receiver frees). */
enum cr_role_request_kind {
    CR_ROLE_REQUEST_LEAD = 1,
    CR_ROLE_REQUEST_FOLLOW = 2,
};
struct cr_role_request {
    enum cr_role_request_kind kind;
    uint64_t term;
    char addr[CR_ROLE_ADDR_MAX];
};

/* Sets the role (the journal, once a request is carried out, or at start
 * from the flags).  `leader` may be NULL (unchanged) or "" (none).
 * Called with CR_ROLE_STANDBY before crescentd creates its actors (the HA
 * election, before it knows who leads), it makes crescentd start as a
 * standby that follows nobody yet and refuses mutating calls, whatever
 * --standby-of says, until cr_role_request_leader or _follow. */
void cr_role_set(enum cr_role role, uint64_t term, const char *leader);

/* Notes a term seen; a LEADER of a lower term becomes fenced.  Returns the
 * highest term seen. */
uint64_t cr_role_see_term(uint64_t term);

/* Progress for cr_role_get (the journal and segments keep them current). */
void cr_role_note_applied(uint64_t lsn);
void cr_role_note_lag(uint64_t records, uint64_t ms, bool connected);
void cr_role_note_standbys(uint32_t count);
void cr_role_note_standby_list(const struct cr_role_standby *list, uint32_t count);
void cr_role_note_storage(uint64_t log_bytes, uint64_t snapshot_lsn, uint64_t snapshot_unix_ms);
/* The journal: how many DIR/diverged-<ms>/ directories it keeps now. */
void cr_role_note_diverged(uint32_t kept);

/* Back to NONE, term 0 (tests; crescentd's start). */
void cr_role_reset(void);

#endif

/* The replication stream between a leader and its standbys (docs/
 * durability.md, "Replication"): one TCP connection per standby, opened by
 * the standby to the leader's --replication-address.
 *
 * Framing, little-endian, the same both ways:
 *
 *     u32 body_len | u64 XXH3-64 of the body | body
 *     body = u8 kind | payload
 *
 * standby → leader:
 *     HELLO   u64 last_lsn | u64 highest_term   first, once; then, when
 *             [u32 n | n × (u64 term |          it keeps one, its log's term
 *              u64 first_lsn)]                  history (terms.h)
 *     ACK     u64 lsn                           every record up to lsn is
 *                                               in the standby's log
 * leader → standby:
 *     RECORDS     u64 term | u64 leader_lsn | framed log records (record.h)
 *                 (none: a heartbeat saying where the leader is)
 *     SNAP_BEGIN  u64 term | u64 lsn            a snapshot of the leader's
 *     SNAP_PART   u64 term | framed records     store as of lsn follows
 *     SNAP_END    u64 term | framed records     (its end record last)
 *     REFUSE      text                          why the leader will not
 *                                               stream; it closes next
 *     TERMS       u64 term | u32 n | n ×       the leader's term history
 *                 (u64 term | u64 first_lsn)    (terms.h), before any record
 *                                               and when it changes: the
 *                                               standby tags what it takes
 *                                               with the terms it was
 *                                               written under
 *     RESYNC      u64 term | u64 agree_lsn |    the standby's log is not a
 *                 text                          prefix of the leader's past
 *                                               agree_lsn (a former leader's
 *                                               unreplicated tail), or too
 *                                               old: it drops its state and
 *                                               says HELLO from lsn 0; the
 *                                               leader closes next
 *
 * Every record a frame carries is checked (checksum, full decode, lsns
 * increasing) before any of it is used, so a torn or damaged stream never
 * applies half a frame.  Pure code: the fuzzer drives it. */
#ifndef CRESCENT_DURABLE_REPL_WIRE_H
#define CRESCENT_DURABLE_REPL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "durable/terms.h"

#define CR_REPL_FRAME_HEADER 12u
/* The largest body: a round's records are sent in pieces below this. */
#define CR_REPL_BODY_MAX (64u << 20)
#define CR_REPL_TEXT_MAX 1024u

enum cr_repl_kind {
    CR_REPL_HELLO = 1,
    CR_REPL_ACK = 2,
    CR_REPL_RECORDS = 3,
    CR_REPL_SNAP_BEGIN = 4,
    CR_REPL_SNAP_PART = 5,
    CR_REPL_SNAP_END = 6,
    CR_REPL_REFUSE = 7,
    CR_REPL_RESYNC = 8,
    CR_REPL_TERMS = 9,
};

struct cr_repl_frame {
    enum cr_repl_kind kind;
    uint64_t lsn;  /* HELLO last_lsn, ACK, SNAP_BEGIN, RESYNC agree_lsn; RECORDS: the
                    * leader's last */
    uint64_t term; /* HELLO highest_term; leader frames' term */
    /* RECORDS, SNAP_PART, SNAP_END: the framed records, checked */
    const uint8_t *records;
    size_t records_len;
    uint64_t record_count;
    uint64_t first_lsn, last_lsn; /* of the records (0 when none) */
    char text[CR_REPL_TEXT_MAX];  /* REFUSE, RESYNC, NUL-terminated */
    /* HELLO: the standby's term history, when it sent one; TERMS: the
     * leader's (checked). */
    bool has_history;
    struct cr_terms history;
};

enum cr_repl_status {
    CR_REPL_OK = 0,
    CR_REPL_NEED_MORE = 1, /* a frame is not whole yet: read more */
    CR_REPL_BAD = 2,       /* not a valid frame: close the connection */
};

/* Decodes the frame at the start of p[0..len) and checks all of it
 * (checksum, kind, lengths, and each carried record decoded whole, with
 * lsns increasing in RECORDS).  On OK sets *out (records point into p) and
 * *used.  On BAD, err says why.  Reads nothing outside the range. */
enum cr_repl_status cr_repl_decode(const uint8_t *p, size_t len, struct cr_repl_frame *out,
                                   size_t *used, char *err, size_t err_len);

/* What a standby does with a leader's RECORDS frame (checked by
 * cr_repl_decode), given the highest term it has seen and the lsn of the
 * last record it has. */
enum cr_repl_verdict {
    CR_REPL_TAKE = 0,       /* records from *skip on are new and follow have_lsn */
    CR_REPL_HAVE_ALL = 1,   /* nothing new (a catch-up overlapping, a heartbeat) */
    CR_REPL_STALE_TERM = 2, /* a term below the highest seen: a stale leader, refused */
    CR_REPL_GAP = 3,        /* the first new record is not have_lsn + 1: refused */
};
enum cr_repl_verdict cr_repl_judge(const struct cr_repl_frame *f, uint64_t highest_term,
                                   uint64_t have_lsn, size_t *skip, char *err, size_t err_len);

/* Appends a frame.  Returns CR_OK or CR_ERR_NOMEM. */
int cr_repl_put_hello(struct cr_buf *out, uint64_t last_lsn, uint64_t highest_term);
/* HELLO with the standby's term history (history->highest is not sent). */
int cr_repl_put_hello_terms(struct cr_buf *out, uint64_t last_lsn, uint64_t highest_term,
                            const struct cr_terms *history);
int cr_repl_put_terms(struct cr_buf *out, uint64_t term, const struct cr_terms *history);
int cr_repl_put_resync(struct cr_buf *out, uint64_t term, uint64_t agree_lsn, const char *text);
int cr_repl_put_ack(struct cr_buf *out, uint64_t lsn);
int cr_repl_put_refuse(struct cr_buf *out, const char *text);
int cr_repl_put_snap_begin(struct cr_buf *out, uint64_t term, uint64_t lsn);
/* RECORDS / SNAP_PART / SNAP_END around len bytes of framed records (len <
 * CR_REPL_BODY_MAX - 17; records may be NULL with len 0). */
int cr_repl_put_records(struct cr_buf *out, enum cr_repl_kind kind, uint64_t term,
                        uint64_t leader_lsn, const uint8_t *records, size_t len);

#endif

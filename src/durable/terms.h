/* The terms a master has seen and written under: DIR/terms (docs/ha.md,
 * "Fencing" and "A former leader comes back").
 *
 * Two things must survive a restart:
 *   - the highest term seen (the fencing token, role.h): a master restarted
 *     must refuse records of an older leader and must never lead at an
 *     older term, exactly as before it stopped;
 *   - the term history of its log: for each term, the first lsn it holds
 *     that came from that term's leader (written by it while leading, or
 *     streamed from it as a standby).  Log records do not carry terms; the
 *     history says, for any lsn, which leader's log that record is from.
 *
 * Two logs whose histories give the same term to every lsn from 1 to x hold
 * the same records up to x: a term has one leader, whose log only grows
 * while it leads, and every record of that term anywhere was copied from
 * it.  That is how a leader tells whether a standby that comes back (a
 * former leader, say) can go on from its own log or holds records the
 * leader never had (cr_terms_agree).  The test is conservative: a standby
 * tags the records it is streamed with its leader's term, even old ones a
 * catch-up sends, so two logs may hold the same records under different
 * terms; then they are taken as different and the standby starts over from
 * the leader's snapshot, which costs time, never correctness.
 *
 * The file: "CRESTERM" | u32 format (1) | u32 count | u64 highest |
 * count × (u64 term | u64 first_lsn) | u64 XXH3-64 of all before it.  It
 * is replaced whole (a .tmp written and fsynced, renamed, the directory
 * fsynced), so a crash leaves the old history or the new one.
 *
 * cr_terms_* without "load"/"store" are pure (the unit tests and the
 * fuzzer drive them). */
#ifndef CRESCENT_DURABLE_TERMS_H
#define CRESCENT_DURABLE_TERMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_TERMS_FILE "terms"
#define CR_TERMS_FORMAT 1u
/* Entries kept: older ones are forgotten (their lsns count as of no known
 * term, so a standby that far behind starts over from a snapshot). */
#define CR_TERMS_MAX 64u
#define CR_TERMS_HEADER 24u
#define CR_TERMS_ENTRY 16u

struct cr_term_start {
    uint64_t term;
    uint64_t first_lsn; /* > 0; increasing along the history */
};

struct cr_terms {
    uint64_t highest; /* the highest term seen, >= every entry's term */
    uint32_t count;
    struct cr_term_start e[CR_TERMS_MAX]; /* terms and first lsns increasing */
};

/* Notes a term seen.  Returns true when `highest` grew. */
bool cr_terms_see(struct cr_terms *t, uint64_t term);

/* Notes that the log holds records of `term` from first_lsn (> 0) on:
 * entries from first_lsn on are dropped (records there were replaced), and
 * (term, first_lsn) is appended unless the last entry has that term
 * already.  Returns true when the history changed.  A term lower than the
 * last entry's changes nothing (role.h refuses such a leader first). */
bool cr_terms_note(struct cr_terms *t, uint64_t term, uint64_t first_lsn);

/* Notes that the log's records first_lsn..last_lsn (first_lsn > 0) are the
 * leader's whose history is `from`: each gets the term `from` gives it
 * (`fallback` where `from` knows none).  Returns true when t changed. */
bool cr_terms_note_as(struct cr_terms *t, const struct cr_terms *from, uint64_t fallback,
                      uint64_t first_lsn, uint64_t last_lsn);

/* The largest x <= min(a_last, b_last) such that histories a and b give
 * the same known term to every lsn in 1..x (0 when they differ at 1 or
 * either does not know the term of lsn 1). */
uint64_t cr_terms_agree(const struct cr_terms *a, uint64_t a_last, const struct cr_terms *b,
                        uint64_t b_last);

/* The bytes of t as the file holds them: at most CR_TERMS_HEADER + 8 +
 * CR_TERMS_MAX * CR_TERMS_ENTRY. */
#define CR_TERMS_FILE_MAX (CR_TERMS_HEADER + 8u + CR_TERMS_MAX * CR_TERMS_ENTRY)
size_t cr_terms_encode(const struct cr_terms *t, uint8_t out[CR_TERMS_FILE_MAX]);

/* Decodes a file's bytes, checking all of it (length, magic, format,
 * checksum, terms and lsns increasing, highest >= each term).  Returns
 * CR_OK, or CR_ERR_PROTOCOL with a sentence in err. */
int cr_terms_decode(const uint8_t *data, size_t len, struct cr_terms *out, char *err,
                    size_t err_len);

/* Entries as the replication HELLO carries them: count × (u64 term | u64
 * first_lsn), little-endian.  _put writes t's entries (count *
 * CR_TERMS_ENTRY bytes); _get checks and reads n entries (n <=
 * CR_TERMS_MAX, increasing), leaving highest 0.  _get returns false on
 * entries that are not a history. */
void cr_terms_put_entries(const struct cr_terms *t, uint8_t *out);
bool cr_terms_get_entries(const uint8_t *p, uint32_t n, struct cr_terms *out);

/* Reads DIR/terms; a missing file is a first start (empty history, highest
 * 0).  Returns CR_OK, or CR_ERR_IO / CR_ERR_PROTOCOL with err naming the
 * file and what to do. */
int cr_terms_load(const char *dir, struct cr_terms *out, char *err, size_t err_len);

/* Replaces DIR/terms with t, durably.  Returns CR_OK or CR_ERR_IO (err
 * names the file). */
int cr_terms_store(const char *dir, const struct cr_terms *t, char *err, size_t err_len);

#endif

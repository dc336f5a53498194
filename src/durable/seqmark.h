/* The event plane's sequence high-water mark: DIR/event-seq.
 *
 * The publisher numbers batches; across a restart it must never reuse a
 * number (a subscriber would take a new batch for one it already has).  It
 * therefore claims numbers in blocks: before it uses seq N it has made sure
 * that a mark above N is on disk, and at start it continues from the mark.
 * A crash skips at most one block of numbers (a gap the subscriber sees and
 * can ask the replay actor about), never reuses one.
 *
 * The file is 24 bytes: "CRESSEQ\0" | u64 mark (LE) | u64 XXH3-64 of the
 * first 16 bytes.  It is replaced whole (write a .tmp, fsync it, rename,
 * fsync the directory), so a crash leaves the old mark or the new one. */
#ifndef CRESCENT_DURABLE_SEQMARK_H
#define CRESCENT_DURABLE_SEQMARK_H

#include <stddef.h>
#include <stdint.h>

#define CR_SEQMARK_FILE "event-seq"
#define CR_SEQMARK_LEN 24u
/* Numbers claimed per write: one fsync per 65,536 batches. */
#define CR_SEQMARK_BLOCK 65536u

/* Encodes mark into out. */
void cr_seqmark_encode(uint64_t mark, uint8_t out[CR_SEQMARK_LEN]);

/* Decodes a file's bytes.  Returns CR_OK with *mark, or CR_ERR_PROTOCOL
 * with a sentence in err (wrong length, not a mark file, checksum). */
int cr_seqmark_decode(const uint8_t *data, size_t len, uint64_t *mark, char *err,
                      size_t err_len);

/* Reads DIR/event-seq.  A missing file is a first start: *mark = 0.
 * Returns CR_OK, or CR_ERR_IO / CR_ERR_PROTOCOL with err naming the file. */
int cr_seqmark_load(const char *dir, uint64_t *mark, char *err, size_t err_len);

/* Replaces DIR/event-seq with mark, durably (creates DIR when missing).
 * Returns CR_OK or CR_ERR_IO with err naming the file. */
int cr_seqmark_store(const char *dir, uint64_t mark, char *err, size_t err_len);

#endif

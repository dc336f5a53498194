/* A store server's SSD tier as its programs run it: the SSD store
 * (tier/ssd_store.h) behind one lock, with the callbacks a hosted segment
 * takes (include/crescent/host.h: ssd_read, ssd_write, ssd_remove).  Shared
 * by crescent-store, libcrescent's embedded host (cr_host_options.ssd_dir:
 * engines, Python's setup(enable_ssd_offload=True)) and crescentd's local
 * segment (--local-segment-ssd-dir).  docs/tiers.md, "Local SSD tier". */
#ifndef CRESCENT_TIER_SSD_HOST_H
#define CRESCENT_TIER_SSD_HOST_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>

#include "tier/ssd_store.h"

struct cr_client; /* crescent/client.h: not included, its enums clash with the store's */

/* The server's SSD tier: the transfer thread reads it (the "#ssd" reader
 * segment), the keep-alive thread writes it (offloads); one lock, held for a
 * file's whole read or write: a disk operation costs far more than the lock,
 * and the two sides never wait on each other for long. */
/* Files gone and not reported yet that a tier remembers (a master away for
 * long; a tier nobody reports for notes none): past it a gone
 * file is counted in gone_lost, and its stale replica fails its read
 * cleanly (checked on both ends), the get going to the next replica. */
#define CR_STORE_SSD_GONE_MAX 65536u

/* One file gone (or to re-register), noted for a report: its key and
 * tenant copied (the tier's own copies go with the file). */
struct cr_store_ssd_note {
    struct cr_store_ssd_note *next;
    uint64_t position, size, xxh3;
    char tenant[256];
    char key[]; /* NUL-terminated */
};

struct cr_store_ssd {
    pthread_mutex_t lock;
    cr_ssd_store *store; /* NULL: no SSD tier */
    uint64_t promotions_asked; /* reads that reached --promotion-hits */
    /* Reports to the master (ssd_host_sync.c): files gone since the last
     * one (under `lock`), and what the reports did. */
    bool reports; /* set by who wires cr_store_ssd_sync: gone files are noted */
    struct cr_store_ssd_note *gone;
    uint64_t gone_count; /* notes in `gone`: at most CR_STORE_SSD_GONE_MAX */
    uint64_t gone_lost, reported_gone, registered, refused;
};

/* Opens dir as an SSD tier of at most size bytes (scanning and checking
 * every file, logging what it dropped).  dir NULL or "": CR_OK with no tier
 * (ssd->store NULL).  Returns CR_OK or cr_ssd_open's failure, with a
 * sentence naming the directory and the cause in why (the caller adds its
 * flags' names). */
int cr_store_ssd_open(struct cr_store_ssd *ssd, const char *dir, uint64_t size,
                      uint32_t promotion_hits, char *why, size_t why_len);

/* cr_host_options.ssd_read: the len bytes of SSD object addr (its id), which
 * must be the object's whole value, checked before they are handed out. */
int cr_store_ssd_read(void *arg, uint64_t addr, uint64_t len, void *dst);

/* cr_host_options.ssd_open: object addr's file, opened read-only for a
 * same-host reader (its header checked; the reader checks the value's
 * XXH3), the read counted as cr_store_ssd_read's; *fd (the caller's to
 * close) and *offset, where the value starts in it.  len must be the
 * object's whole value. */
int cr_store_ssd_open_value(void *arg, uint64_t addr, uint64_t len, int *fd, uint64_t *offset);

/* cr_host_options.ssd_write: an OFFLOAD task's object, written durably
 * (checked against xxh3), evicting the least recently used files over
 * the tier's size; *position gets its id.  Returns CR_OK or cr_ssd_put's
 * failure with why. */
int cr_store_ssd_write(void *arg, const char *tenant, const char *key, const void *value,
                       uint64_t len, uint64_t xxh3, uint64_t *position, char *why,
                       size_t why_len);

/* cr_host_options.ssd_remove: deletes object `position` (the master
 * refused its offload). */
void cr_store_ssd_remove(void *arg, uint64_t position);

/* cr_ssd_evict_fn (and the drop hook): notes a file the tier let go of, for
 * the next report; arg is the cr_store_ssd, whose lock the caller holds. */
void cr_store_ssd_note_gone(void *arg, const struct cr_ssd_object *gone);

/* cr_host_options.ssd_sync: reports the files gone since the last report
 * and, with `mounted`, re-registers every file the tier holds
 * (LocalDiskReport); a file the master refuses as another put's is deleted.
 * Returns CR_OK, or the call's failure (retried at the next ping). */
int cr_store_ssd_sync(void *arg, struct cr_client *master, const char *segment, bool mounted);

/* For an owner that reports by other means than cr_store_ssd_sync
 * (crescentd's local segment: a message to its segments actor): takes up
 * to max notes of files gone off the tier (under its lock) and returns
 * them, *count set; the caller frees them with cr_store_ssd_notes_free. */
struct cr_store_ssd_note *cr_store_ssd_take_gone(struct cr_store_ssd *ssd, size_t max,
                                                 size_t *count);
void cr_store_ssd_notes_free(struct cr_store_ssd_note *n);

/* Frees the notes of files gone not reported yet. */
void cr_store_ssd_forget_gone(struct cr_store_ssd *ssd);

/* Logs the tier's counters and closes it (files stay).  No tier: no-op. */
void cr_store_ssd_close(struct cr_store_ssd *ssd);

#endif

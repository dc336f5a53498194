/* crescent-store's settings and their parser (crescent_store_options.c). */
#ifndef CRESCENT_CMD_CRESCENT_STORE_H
#define CRESCENT_CMD_CRESCENT_STORE_H

#include <stdbool.h>
#include <stdint.h>

#define CR_STORE_CPU_AUTO (-2) /* --cpu not given: one of the allowed CPUs, by pid */
#define CR_STORE_CPU_NONE (-1) /* --no-pin */

struct cr_store_options {
    char master[256];        /* ZMQ endpoint of crescentd's RPC gateway */
    char segment_name[256];  /* "": the data endpoint */
    uint64_t segment_size;   /* bytes */
    char data_address[64];   /* "host:port" the transfer server binds */
    bool no_shm;
    bool require_capability; /* --data-require-capability */
    bool no_verbs;
    int rdma_gid_index;      /* -1: picked by type */
    char rdma_devices[256];  /* "": every active device */
    int cpu;                 /* CR_STORE_CPU_AUTO, CR_STORE_CPU_NONE or a CPU number */
    uint32_t ping_interval_ms;
    uint32_t timeout_ms;     /* per RPC to the master */
    char ssd_dir[4096];      /* "": no SSD tier (docs/tiers.md, "Local SSD tier") */
    uint64_t ssd_size;       /* bytes of SSD files, > 0 with ssd_dir */
    uint32_t promotion_hits; /* SSD reads within the window that ask for promotion */
};

enum { CR_STORE_OPTIONS_RUN = 0, CR_STORE_OPTIONS_HELP = 1, CR_STORE_OPTIONS_USAGE = 2 };

/* Fills *out from argv.  Returns CR_STORE_OPTIONS_RUN, _HELP (--help printed
 * to stdout) or _USAGE (one line naming the problem printed to stderr). */
int cr_store_options_parse(int argc, char **argv, struct cr_store_options *out);


/* ---- the SSD tier (crescent_store_ssd.c) --------------------------------- */

#include <pthread.h>
#include "tier/ssd_store.h"

/* The server's SSD tier: the transfer thread reads it (the "#ssd" reader
 * segment), the keep-alive thread writes it (offloads); one lock, held for a
 * file's whole read or write: a disk operation costs far more than the lock,
 * and the two sides never wait on each other for long. */
struct cr_store_ssd {
    pthread_mutex_t lock;
    cr_ssd_store *store; /* NULL: no SSD tier */
    uint64_t promotions_asked; /* reads that reached --promotion-hits */
    /* Reports to the master (crescent_store_ssd_sync.c): files gone since
     * the last one (under `lock`), and what the reports did. */
    struct cr_store_ssd_note *gone;
    uint64_t gone_lost, reported_gone, registered, refused;
};

/* Opens opt->ssd_dir (scanning and checking every file, logging what it
 * dropped).  No --ssd-dir: CR_OK with no tier.  Returns CR_OK or the open's
 * failure, with one line on stderr naming the flag and the cause. */
int cr_store_ssd_open(struct cr_store_ssd *ssd, const struct cr_store_options *opt);

/* cr_host_options.ssd_read: the len bytes of SSD object addr (its id), which
 * must be the object's whole value, checked before they are handed out. */
int cr_store_ssd_read(void *arg, uint64_t addr, uint64_t len, void *dst);

/* cr_host_options.ssd_write: an OFFLOAD task's object, written durably
 * (checked against xxh3), evicting the least recently used files over
 * --ssd-size; *position gets its id.  Returns CR_OK or cr_ssd_put's
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
#include "crescent/client.h"
int cr_store_ssd_sync(void *arg, cr_client *master, const char *segment, bool mounted);
/* Frees the notes of files gone not reported yet. */
void cr_store_ssd_forget_gone(struct cr_store_ssd *ssd);

/* Logs the tier's counters and closes it (files stay).  No tier: no-op. */
void cr_store_ssd_close(struct cr_store_ssd *ssd);

#endif

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


/* The SSD tier (--ssd-dir) is src/tier/ssd_host.h's, shared with libcrescent's
 * embedded host and crescentd's local segment. */
#include "tier/ssd_host.h"

#endif

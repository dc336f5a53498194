/* A TEST DOUBLE of libibverbs, for unit tests only (never linked into a
 * product): see loopback_ibverbs.c.  The knobs and counters a test uses. */
#ifndef CRESCENT_TESTS_LOOPBACK_IBVERBS_H
#define CRESCENT_TESTS_LOOPBACK_IBVERBS_H

#include <stdint.h>

#include <infiniband/verbs.h>

#define LOOPBACK_IBVERBS_DEVICES_MAX 4
#define LOOPBACK_IBVERBS_GIDS_MAX 16

/* How many devices ibv_get_device_list reports from now on ("loopback0"..,
 * at most 4): 0 makes it fail with ENOSYS, as on a machine without RDMA (the
 * default is 1).  Also resets every device's port state (ACTIVE), link
 * (not failed) and GID table (the default one). */
void loopback_ibverbs_set_devices(int count);

/* Replaces device `device`'s GID table (an all-zero GID is an empty entry). */
void loopback_ibverbs_set_gids(int device, const struct ibv_gid_entry *gids, uint32_t count);

/* The state ibv_query_port reports for the device's port. */
void loopback_ibverbs_set_port_state(int device, enum ibv_port_state state);

/* The device's link fails: from now on no packet leaves or reaches its
 * port, so every request on (or to) a QP of it completes with
 * IBV_WC_RETRY_EXC_ERR, as when nobody answers, and its QPs go to error.
 * Undone by loopback_ibverbs_set_devices. */
void loopback_ibverbs_fail_device(int device);

struct loopback_ibverbs_counts {
    uint32_t contexts, pds, mrs, cqs, qps; /* alive now */
    uint64_t reads, writes;                /* work requests that moved bytes */
    uint64_t bytes;
    uint64_t errors;                       /* completions with an error status */
    uint64_t flushed;                      /* of them, flushed after an error */
    uint32_t max_sge_seen;                 /* the longest gather list posted */
    uint64_t device_wrs[LOOPBACK_IBVERBS_DEVICES_MAX];   /* of reads + writes: by the */
    uint64_t device_bytes[LOOPBACK_IBVERBS_DEVICES_MAX]; /* requester QP's device */
};

struct loopback_ibverbs_counts loopback_ibverbs_counts(void);

#endif

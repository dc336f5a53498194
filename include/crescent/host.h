/* libcrescent's embedded store server: the calling process hosts a segment
 * of its own memory in the distributed store, as Mooncake's real client does
 * when an engine passes global_segment_size (Python: setup(...,
 * global_segment_size=N)).
 *
 * cr_host_start allocates the segment (memfd, huge pages when the system has
 * them, backed lazily), starts a transfer server (src/rdma: tcp, shm for
 * same-host peers, verbs where an RDMA device exists) on its own thread,
 * mounts the segment at the master under its own client id, and starts a
 * keep-alive thread that pings the master (every ping_interval_ms, or a
 * quarter of the master's client TTL when shorter) and remounts the segment
 * when a ping says the master does not know this client (it restarted, or
 * this process missed pings for longer than the TTL).  cr_host_stop unmounts,
 * stops both threads and frees the memory: objects whose replicas lived in it
 * are gone, as in Mooncake.  A process that exits without calling it loses
 * its segment at the master after the client TTL.
 *
 * Threads: two threads per host, both created by cr_host_start and joined by
 * cr_host_stop; the host's own cr_client is used only by them (the caller's
 * clients are independent).  The functions below may be called from any one
 * thread at a time.
 *
 * Copy/move tasks whose source is this segment, and the master's offloads of
 * its evicted objects to an SSD tier (ssd_dir below), are run by the
 * keep-alive thread, handed out with its pings (unless the caller brings its
 * own heartbeat). */
#ifndef CRESCENT_HOST_H
#define CRESCENT_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crescent/client.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CR_HOST_PING_INTERVAL_MS_DEFAULT 1000u

typedef struct cr_host cr_host;

struct cr_host_options {
    const char *master;         /* the master's endpoint, as cr_client_open takes it */
    uint64_t segment_size;      /* bytes, > 0 (rounded up to a page when allocated) */
    /* NULL: the host allocates the segment (memfd; served by tcp, shm and
     * verbs).  Otherwise the caller's memory [memory, memory + segment_size)
     * (e.g. a file it mapped), which must stay mapped until cr_host_stop;
     * served by tcp and verbs (shm passes only memory the host allocated). */
    void *memory;
    const char *segment_name;   /* NULL or "": the transfer endpoint "host:port" */
    const char *data_address;   /* "host:port" to serve on; NULL: "127.0.0.1:0" */
    bool no_shm;                /* no shared-memory transport for same-host peers */
    bool no_verbs;              /* open no RDMA device even where there is one */
    const char *rdma_devices;   /* NULL or "": every active device */
    bool rdma_gid_index_set;    /* the RDMA GID index to route by; unset: picked by type */
    uint8_t rdma_gid_index;
    uint32_t ping_interval_ms;  /* 0: CR_HOST_PING_INTERVAL_MS_DEFAULT */
    int timeout_ms;             /* per RPC to the master; 0: the client's default */
    bool pin_serve_thread;      /* pin the transfer thread to CPU serve_cpu */
    int serve_cpu;
    /* false (engines): cr_host_start fails when the first mount fails.  true
     * (store programs): a master that does not answer yet is not fatal, the
     * keep-alive thread mounts once it answers; a name already mounted by
     * another client still fails the start. */
    bool mount_when_master_answers;
    /* NULL: the keep-alive thread pings with cr_client_heartbeat_tasks and
     * runs the copy/move tasks whose source is this segment that the ping
     * hands out (through a transfer client of the host's, with the transports
     * above), reporting each to the master before the next ping.  Otherwise
     * it calls this instead, on the keep-alive thread, with the host's own
     * master client, which it must fill as cr_client_heartbeat does (status,
     * *ttl_ms, *known) and may use for more calls; *again = true pings again
     * at once; no copy/move task is run unless this does it. */
    int (*heartbeat)(void *arg, cr_client *master, uint64_t *ttl_ms, bool *known, bool *again);
    void *heartbeat_arg;
    /* NULL: nothing more.  Otherwise a second, read-only segment named
     * "<segment name>" CR_HOST_SSD_SUFFIX is served (by tcp) with this
     * function's bytes: a store server's SSD tier (docs/tiers.md, "Local SSD tier"), where
     * addr is an SSD object's id.  It fills dst with len bytes and returns
     * CR_OK or the read's failure; it runs on the transfer thread. */
    int (*ssd_read)(void *arg, uint64_t addr, uint64_t len, void *dst);
    void *ssd_read_arg;
    /* The segment always has a capability key, registered with the master at
     * mount, so a capability sent is checked.  true: a transfer without one
     * is refused too (and no memfd or verbs key is handed out without one);
     * Mooncake clients, whose descriptors carry none, then cannot use this
     * segment.  Default false (docs/architecture.md, "Capabilities"). */
    bool require_capability;
    /* NULL: the master is told of no SSD tier.  Otherwise (with ssd_read,
     * the same arg) the segment is mounted with ssd_capacity_bytes, and the
     * master offloads objects it evicts from this segment to the SSD: the
     * keep-alive thread runs those OFFLOAD tasks by calling this with the
     * object's bytes (in this segment), which writes them durably, checked
     * against xxh3, returning CR_OK and the id ssd_read will serve them by
     * in *position, or a failure with a sentence in why; ssd_remove (may be
     * NULL) deletes a file the master refused.  docs/tiers.md. */
    int (*ssd_write)(void *arg, const char *tenant, const char *key, const void *value,
                     uint64_t len, uint64_t xxh3, uint64_t *position, char *why, size_t why_len);
    void (*ssd_remove)(void *arg, uint64_t position);
    uint64_t ssd_capacity_bytes;
    /* NULL: nothing.  Otherwise called on the keep-alive thread after each
     * answered heartbeat while mounted (same arg as ssd_read), `mounted`
     * true the first time after each (re)mount, until it returns CR_OK: a
     * store server re-registers what its SSD holds then, and reports the
     * files its SSD dropped since (cr_client_local_disk_report). */
    int (*ssd_sync)(void *arg, cr_client *master, const char *segment_name, bool mounted);
    /* The host's own SSD tier, for callers that do not bring theirs (ssd_read
     * NULL): NULL or "": none.  Otherwise a directory (created 0700 when
     * missing, one host per directory) the host opens at start as
     * crescent-store --ssd-dir does (files checked, the excess over ssd_size
     * evicted), serves as "<segment name>" CR_HOST_SSD_SUFFIX and announces
     * at mount, so the master offloads objects it evicts from this segment
     * there; ssd_size (bytes of files, > 0) bounds it.  Files stay at
     * cr_host_stop; a later host on the same directory finds them checked
     * (docs/tiers.md).  Python: setup(..., enable_ssd_offload=True,
     * ssd_offload_path=DIR). */
    const char *ssd_dir;
    uint64_t ssd_size;
    /* (Last, so that callers built before it keep their layout.) */
    /* NULL: same-host clients read the SSD tier by tcp too.  Otherwise they
     * may ask (over the shm socket) for the file holding object addr's len
     * bytes and read it themselves: this opens it read-only (with
     * ssd_read_arg) and returns CR_OK with *fd, which the host closes once
     * passed, and *offset, where the value starts in it; the client checks
     * the value's XXH3.  It runs on the transfer thread. */
    int (*ssd_open)(void *arg, uint64_t addr, uint64_t len, int *fd, uint64_t *offset);
};

/* Withdraws this host's SSD tier from offload (Mooncake's
 * unmount_local_disk_segment): the keep-alive thread remounts the segment
 * with no SSD capacity, so the master hands it no more OFFLOAD tasks (also
 * after a master restart's remount).  Objects already offloaded here keep
 * their local_disk replicas and are served until cr_host_stop.  *drained:
 * whether a tier was offered until this call (false: nothing to do, CR_OK at
 * once).  Waits up to timeout_ms for the remount: CR_OK, or CR_ERR_TIMEOUT
 * with a sentence in error (the keep-alive thread keeps retrying at each
 * ping while the master does not answer). */
int cr_host_drain_ssd(cr_host *h, int timeout_ms, bool *drained, char *error,
                      size_t error_size);

/* One file of a store server's SSD tier, for cr_client_local_disk_report. */
struct cr_local_disk_entry {
    const char *tenant; /* NULL: "default" */
    const char *key;    /* NUL-terminated */
    uint64_t size;      /* the value's bytes */
    uint64_t checksum;  /* the value's XXH3-64 (the put's checksum) */
    uint64_t position;  /* the file's id on the server */
    bool gone;          /* false: whole, register it; true: evicted or corrupt */
};
#define CR_LOCAL_DISK_REPORT_MAX 4096u

/* Reports n (<= CR_LOCAL_DISK_REPORT_MAX) files of the SSD tier behind the
 * segment this client mounted (LocalDiskReport, docs/rpc-native.md):
 * whole ones become (or stay) local_disk replicas, the object re-created
 * when the master no longer has it; gone ones drop the replica at that
 * position.  statuses[i] gets each verdict: CR_OK, CR_ERR_INVALID_PARAMS
 * (the master holds another put of the key: delete the file), others (kept).
 * Returns CR_OK or the call's failure (every status set to it;
 * cr_client_last_error says why). */
int cr_client_local_disk_report(cr_client *c, const char *segment_name,
                                const struct cr_local_disk_entry *entries, size_t n,
                                int *statuses);

/* The suffix of the SSD tier's segment name at the transfer server. */
#define CR_HOST_SSD_SUFFIX "#ssd"

/* Starts hosting.  Returns CR_OK and *out, or on failure (nothing left
 * running, *out NULL, `error` holding a sentence naming the cause):
 * CR_ERR_INVALID_PARAMS (no master, size 0, bad address), CR_ERR_NOMEM /
 * CR_ERR_IO (memory, socket or thread), CR_ERR_SEGMENT_ALREADY_EXISTS (the
 * name is mounted by another client), or the master's status for the mount
 * (CR_ERR_TIMEOUT when it does not answer). */
int cr_host_start(const struct cr_host_options *options, cr_host **out, char *error,
                  size_t error_size);

/* Unmounts the segment (best effort: a master that does not answer drops it
 * after the client TTL), stops the threads and frees the memory.  Returns
 * CR_OK, or the unmount's failure (everything is stopped and freed anyway).
 * NULL is a no-op returning CR_OK. */
int cr_host_stop(cr_host *host);

/* The mounted segment's name, its transfer endpoint "host:port" and protocol
 * ("tcp" or "rdma"), its memory.  Valid until cr_host_stop. */
const char *cr_host_segment_name(const cr_host *host);
const char *cr_host_endpoint(const cr_host *host);
const char *cr_host_protocol(const cr_host *host);
void *cr_host_base(const cr_host *host);
uint64_t cr_host_size(const cr_host *host);

/* Keep-alive counters (read with relaxed atomics: a snapshot). */
struct cr_host_stats {
    uint64_t pings;         /* answered pings */
    uint64_t pings_failed;  /* pings the master did not answer */
    uint64_t remounts;      /* successful remounts after the master forgot this client */
    bool mounted;           /* the last mount or remount succeeded */
    uint64_t tasks_run;     /* copy/move tasks run and reported (default heartbeat) */
};
void cr_host_get_stats(const cr_host *host, struct cr_host_stats *out);

#ifdef __cplusplus
}
#endif

#endif

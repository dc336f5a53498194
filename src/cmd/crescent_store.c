/* crescent-store: a store server (seed 004's "real client" in standalone
 * mode).  It hosts one segment of memory for the distributed KV cache:
 *
 *   1-4 are libcrescent's hosted segment (include/crescent/host.h), which
 *   engines get too:
 *   1. allocates the segment (memfd, huge pages when the system has them,
 *      reserved lazily) and registers it with a transfer server
 *      (src/rdma/xfer.h) listening on --data-address;
 *   2. mounts it at the master with the transfer endpoint and protocol;
 *   3. serves reads and writes on one thread, pinned to a CPU;
 *   4. pings the master from a keep-alive thread, and remounts when a ping says
 *      the master does not know this server (it restarted, or this server
 *      missed pings for longer than the client TTL and lost its segment);
 *   5. with each heartbeat (the host's own, as every hosted segment's), runs the
 *      copy/move tasks whose source is its segment, handed out in the Ping
 *      response (client/task_exec.h: read, verify, write, report);
 *   6. on SIGTERM or SIGINT unmounts and exits 0.
 *
 * The main thread takes the signals with sigwait, so no code runs in a
 * signal handler. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/crescent_store.h"
#include "core/log.h"
#include "crescent/client.h"
#include "crescent/error.h"
#include "crescent/host.h"
#include "rdma/xfer.h"

struct store_server {
    struct cr_store_options opt;
    cr_host *host;               /* libcrescent's hosted segment (include/crescent/host.h) */
    struct cr_store_ssd ssd;     /* --ssd-dir: the SSD tier (tier/ssd_host.h) */
};

/* The CPU the transfer thread takes when --cpu was not given: one of the
 * CPUs this process may use, spread by pid so that several store servers on
 * one machine do not all take the same one. */
static int default_cpu(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
    int allowed = CPU_COUNT(&set);
    if (allowed <= 0) return -1;
    int pick = (int)(getpid() % allowed);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set) && pick-- == 0) return cpu;
    return -1;
}

/* ---- setup and teardown ------------------------------------------------- */

static int start(struct store_server *s) {
    char why[512];
    if (cr_store_ssd_open(&s->ssd, s->opt.ssd_dir, s->opt.ssd_size, s->opt.promotion_hits, why,
                          sizeof(why)) != CR_OK) {
        fprintf(stderr, "crescent-store: %s (--ssd-dir, --ssd-size)\n", why);
        return 2;
    }
    s->ssd.reports = true; /* the host calls cr_store_ssd_sync (.ssd_sync below) */
    bool gid_set = s->opt.rdma_gid_index >= 0;
    uint8_t gid = (uint8_t)(gid_set ? s->opt.rdma_gid_index : 0);
    if (s->opt.no_verbs)
        CR_INFO("store", "verbs off (--no-verbs): the segment and its copy/move tasks move bytes "
                "by tcp%s, protocol tcp at the master", s->opt.no_shm ? "" : " (and shm on this host)");
    if (s->opt.cpu == CR_STORE_CPU_AUTO) s->opt.cpu = default_cpu();
    struct cr_host_options ho = {.master = s->opt.master,
                                 .segment_size = s->opt.segment_size,
                                 .segment_name = s->opt.segment_name,
                                 .data_address = s->opt.data_address,
                                 .no_shm = s->opt.no_shm, .no_verbs = s->opt.no_verbs,
                                 .require_capability = s->opt.require_capability,
                                 .rdma_devices = s->opt.rdma_devices,
                                 .rdma_gid_index_set = gid_set, .rdma_gid_index = gid,
                                 .ping_interval_ms = s->opt.ping_interval_ms,
                                 .timeout_ms = (int)s->opt.timeout_ms,
                                 .pin_serve_thread = s->opt.cpu >= 0, .serve_cpu = s->opt.cpu,
                                 /* a master not up yet is not fatal */
                                 .mount_when_master_answers = true,
                                 /* no heartbeat: the host's own runs the copy/move tasks */
                                 .ssd_read = s->ssd.store != NULL ? cr_store_ssd_read : NULL,
                                 .ssd_open = s->ssd.store != NULL ? cr_store_ssd_open_value : NULL,
                                 .ssd_read_arg = &s->ssd,
                                 /* the master offloads evicted objects to it */
                                 .ssd_write = s->ssd.store != NULL ? cr_store_ssd_write : NULL,
                                 .ssd_remove = cr_store_ssd_remove,
                                 .ssd_sync = s->ssd.store != NULL ? cr_store_ssd_sync : NULL,
                                 .ssd_capacity_bytes = s->opt.ssd_size};
    char error[512];
    int rc = cr_host_start(&ho, &s->host, error, sizeof(error));
    if (rc == CR_ERR_SEGMENT_ALREADY_EXISTS) {
        fprintf(stderr, "crescent-store: %s: already mounted at %s by another server "
                "(--segment-name to pick another)\n", error, s->opt.master);
        return 2;
    }
    if (rc != CR_OK) {
        fprintf(stderr, "crescent-store: %s (--segment-size, --data-address, --master)\n", error);
        return rc == CR_ERR_INVALID_PARAMS || rc == CR_ERR_IO ? 2 : 1;
    }
    return 0;
}

/* Waits for SIGTERM or SIGINT (blocked in every thread, so no code runs in a
 * signal handler). */
static int wait_for_signal(const struct store_server *s, const sigset_t *signals) {
    for (;;) {
        int sig = 0;
        int rc = sigwait(signals, &sig);
        if (rc == 0) {
            CR_INFO("store", "%s received: unmounting '%s'", strsignal(sig),
                    cr_host_segment_name(s->host));
            return sig;
        }
        if (rc != EINTR) {
            CR_ERROR("store", "sigwait: %s", strerror(rc));
            return -1;
        }
    }
}

static void stop(struct store_server *s) {
    (void)cr_host_stop(s->host); /* unmounts (logging a failure), joins, frees */
    cr_store_ssd_close(&s->ssd);
}

int main(int argc, char **argv) {
    if (!cr_log_init_from_env()) {
        fprintf(stderr, "crescent-store: CRESCENT_LOG_LEVEL='%s' is not DEBUG, INFO, WARN or "
                "ERROR\n", getenv("CRESCENT_LOG_LEVEL"));
        return 2;
    }
    struct store_server s = {0};
    int parsed = cr_store_options_parse(argc, argv, &s.opt);
    if (parsed != CR_STORE_OPTIONS_RUN) return parsed == CR_STORE_OPTIONS_HELP ? 0 : 2;

    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, NULL); /* the host's threads inherit it */
    signal(SIGPIPE, SIG_IGN);                   /* a peer gone mid-send is an error, not death */

    int status = start(&s);
    if (status == 0) status = wait_for_signal(&s, &signals) > 0 ? 0 : 1;
    stop(&s);
    if (status == 0) CR_INFO("store", "stopped cleanly");
    return status;
}

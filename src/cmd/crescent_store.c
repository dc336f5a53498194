/* crescent-store: a store server (seed 004's "real client" in standalone
 * mode).  It hosts one segment of memory for the distributed KV cache:
 *
 *   1. allocates the segment (memfd, huge pages when the system has them,
 *      reserved lazily) and registers it with a transfer server
 *      (src/rdma/xfer.h) listening on --data-address;
 *   2. mounts it at the master with the transfer endpoint and protocol;
 *   3. serves reads and writes on one thread, pinned to a CPU;
 *   4. pings the master from the main thread, and remounts when a ping says
 *      the master does not know this server (it restarted, or this server
 *      missed pings for longer than the client TTL and lost its segment);
 *   5. after each heartbeat, runs the copy/move tasks whose source is its
 *      segment, handed out in the Ping response (actors/task_exec.h: read,
 *      verify, write, report);
 *   6. on SIGTERM or SIGINT unmounts and exits 0.
 *
 * The main thread takes the signals with sigtimedwait between pings, so no
 * code runs in a signal handler. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/crescent_store.h"
#include "core/log.h"
#include "actors/task_exec.h"
#include "crescent/client.h"
#include "crescent/error.h"
#include "rdma/xfer.h"

#define TASKS_PER_ROUND 16u /* copy/move tasks taken per heartbeat */

struct store_server {
    struct cr_xfer_client *exec; /* runs the copy/move tasks this server is handed */
    struct cr_store_options opt;
    struct cr_xfer_segment segment;
    struct cr_xfer_server *xfer;
    cr_client *master;
    char segment_name[CR_XFER_SEGMENT_NAME_MAX + 1];
    pthread_t serve_thread;
    bool serving;
    atomic_bool stop;
    bool mounted;
};

/* ---- the transfer thread ------------------------------------------------ */

static void pin_to_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (rc != 0)
        CR_WARN("store", "cannot pin the transfer thread to CPU %d: %s (--cpu to choose another)",
                cpu, strerror(rc));
    else
        CR_INFO("store", "transfer thread pinned to CPU %d", cpu);
}

static void *serve(void *arg) {
    struct store_server *s = arg;
    if (s->opt.cpu >= 0) pin_to_cpu(s->opt.cpu);
    /* A short wait bounds how long SIGTERM waits for this thread. */
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        if (cr_xfer_server_run(s->xfer, 100) < 0) {
            CR_ERROR("store", "the transfer server failed (epoll); stopping");
            break;
        }
    }
    return NULL;
}

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

/* ---- the master side ------------------------------------------------------ */

static struct cr_segment_spec segment_spec(const struct store_server *s) {
    return (struct cr_segment_spec){.name = s->segment_name,
                                    .base = (uint64_t)(uintptr_t)s->segment.base,
                                    .size_bytes = s->segment.size,
                                    .transport_endpoint = cr_xfer_server_endpoint(s->xfer),
                                    .protocol = cr_xfer_server_protocol(s->xfer)};
}

static int mount(struct store_server *s, bool again) {
    struct cr_segment_spec spec = segment_spec(s);
    int rc = again ? cr_client_remount_segment(s->master, &spec)
                   : cr_client_mount_segment(s->master, &spec);
    if (rc != CR_OK) {
        CR_ERROR("store", "%s of segment '%s' at %s failed: %s", again ? "remount" : "mount",
                 s->segment_name, s->opt.master, cr_client_last_error(s->master));
        return rc;
    }
    s->mounted = true;
    CR_INFO("store", "segment '%s' (%" PRIu64 " bytes%s) %s at %s, served on %s://%s",
            s->segment_name, s->segment.size, s->segment.huge_pages ? ", huge pages" : "",
            again ? "remounted" : "mounted", s->opt.master, spec.protocol,
            spec.transport_endpoint);
    return CR_OK;
}

/* One heartbeat: remounts when the master has forgotten this server.  A
 * master that does not answer is retried at the next heartbeat; the log says
 * so once per outage.  Returns how many copy/move tasks it ran. */
static int heartbeat(struct store_server *s, bool *master_down, uint64_t *ttl_ms) {
    bool known = true;
    struct cr_task_assignments tasks;
    int rc = cr_client_heartbeat_tasks(s->master, TASKS_PER_ROUND, ttl_ms, &known, &tasks);
    if (rc != CR_OK) {
        if (!*master_down)
            CR_WARN("store", "master %s does not answer (%s); retrying every %u ms",
                    s->opt.master, cr_client_last_error(s->master), s->opt.ping_interval_ms);
        *master_down = true;
        return 0;
    }
    if (*master_down) CR_INFO("store", "master %s answers again", s->opt.master);
    *master_down = false;
    /* The copy/move tasks whose source is this segment, handed out with the
     * ping (seed 004): run and reported here, between heartbeats
     * (task_exec.h). */
    int ran = cr_task_exec_run_all(s->master, s->exec, &tasks);
    cr_client_task_assignments_free(&tasks);
    if (ran > 0) CR_INFO("store", "ran %d copy/move task(s)", ran);
    if (!known || !s->mounted) {
        if (!known)
            CR_WARN("store", "master %s does not know this server (restarted, or this "
                    "server missed pings): remounting '%s'", s->opt.master, s->segment_name);
        (void)mount(s, true);
    }
    return ran;
}

/* Pings until SIGTERM/SIGINT.  The interval is the flag's, or a quarter of
 * the TTL the master announces, whichever is shorter; after a full round of
 * tasks it pings again at once, since more may be waiting. */
static int ping_until_signal(struct store_server *s, const sigset_t *signals) {
    bool master_down = false;
    uint64_t ttl_ms = 0;
    for (;;) {
        bool full = heartbeat(s, &master_down, &ttl_ms) == (int)TASKS_PER_ROUND;
        uint64_t wait_ms = full ? 0 : s->opt.ping_interval_ms;
        if (!full && ttl_ms > 0 && ttl_ms / 4 < wait_ms) wait_ms = ttl_ms / 4 > 0 ? ttl_ms / 4 : 1;
        struct timespec ts = {.tv_sec = (time_t)(wait_ms / 1000),
                              .tv_nsec = (long)(wait_ms % 1000) * 1000000L};
        int sig = sigtimedwait(signals, NULL, &ts);
        if (sig > 0) {
            CR_INFO("store", "%s received: unmounting '%s'", strsignal(sig), s->segment_name);
            return sig;
        }
        if (sig < 0 && errno != EAGAIN && errno != EINTR) {
            CR_ERROR("store", "sigtimedwait: %s", strerror(errno));
            return -1;
        }
    }
}

/* ---- setup and teardown ------------------------------------------------- */

static int start(struct store_server *s) {
    int rc = cr_xfer_segment_alloc(s->opt.segment_size, &s->segment);
    if (rc != CR_OK) {
        fprintf(stderr, "crescent-store: cannot allocate a %" PRIu64 "-byte segment: %s "
                "(--segment-size to ask for less)\n", s->opt.segment_size, cr_strerror(rc));
        return 1;
    }
    struct cr_xfer_server_config xc = {.tcp_address = s->opt.data_address,
                                       .shm_disabled = s->opt.no_shm,
                                       .verbs_disabled = s->opt.no_verbs,
                                       .rdma_devices = s->opt.rdma_devices,
                                       .rdma_gid_index_set = s->opt.rdma_gid_index >= 0,
                                       .rdma_gid_index = (uint8_t)(s->opt.rdma_gid_index < 0
                                                                       ? 0 : s->opt.rdma_gid_index)};
    if (s->opt.no_verbs)
        CR_INFO("store", "verbs off (--no-verbs): the segment and its copy/move tasks move bytes "
                "by tcp%s, protocol tcp at the master", s->opt.no_shm ? "" : " (and shm on this host)");
    rc = cr_xfer_server_create(&xc, &s->xfer);
    if (rc != CR_OK) {
        fprintf(stderr, "crescent-store: cannot serve transfers on %s: %s (--data-address)\n",
                s->opt.data_address, cr_strerror(rc));
        return 2;
    }
    /* Default name: the endpoint, unique among live servers by construction. */
    snprintf(s->segment_name, sizeof(s->segment_name), "%s",
             s->opt.segment_name[0] != '\0' ? s->opt.segment_name
                                            : cr_xfer_server_endpoint(s->xfer));
    rc = cr_xfer_server_register_segment(s->xfer, s->segment_name, &s->segment);
    if (rc != CR_OK) {
        fprintf(stderr, "crescent-store: cannot register segment '%s': %s\n", s->segment_name,
                cr_strerror(rc));
        return 1;
    }
    char error[256];
    struct cr_client_options co = {.timeout_ms = (int)s->opt.timeout_ms};
    if (cr_client_open(s->opt.master, &co, &s->master, error, sizeof(error)) != CR_OK) {
        fprintf(stderr, "crescent-store: %s (--master)\n", error);
        return 2;
    }
    struct cr_xfer_client_config xcc = {.shm_disabled = s->opt.no_shm,
                                        .verbs_disabled = s->opt.no_verbs,
                                        .rdma_devices = s->opt.rdma_devices,
                                        .rdma_gid_index_set = xc.rdma_gid_index_set,
                                        .rdma_gid_index = xc.rdma_gid_index};
    if (cr_xfer_client_create(&xcc, &s->exec) != CR_OK) {
        fprintf(stderr, "crescent-store: cannot create the transfer client for tasks\n");
        return 1;
    }
    if (s->opt.cpu == CR_STORE_CPU_AUTO) s->opt.cpu = default_cpu();
    if (pthread_create(&s->serve_thread, NULL, serve, s) != 0) {
        fprintf(stderr, "crescent-store: cannot start the transfer thread\n");
        return 1;
    }
    s->serving = true;
    /* A master not up yet is not fatal: the heartbeat loop mounts later. */
    if (mount(s, false) == CR_ERR_SEGMENT_ALREADY_EXISTS) {
        fprintf(stderr, "crescent-store: segment '%s' is already mounted at %s by another "
                "server (--segment-name to pick another)\n", s->segment_name, s->opt.master);
        return 2;
    }
    return 0;
}

static void stop(struct store_server *s) {
    if (s->mounted && cr_client_unmount_segment(s->master, s->segment_name) != CR_OK)
        CR_WARN("store", "unmount of '%s' failed: %s (the master drops it after the client "
                "TTL)", s->segment_name, cr_client_last_error(s->master));
    atomic_store(&s->stop, true);
    if (s->serving) pthread_join(s->serve_thread, NULL);
    cr_client_close(s->master);
    cr_xfer_client_destroy(s->exec);
    cr_xfer_server_destroy(s->xfer);
    cr_xfer_segment_free(&s->segment);
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
    pthread_sigmask(SIG_BLOCK, &signals, NULL); /* the transfer thread inherits it */
    signal(SIGPIPE, SIG_IGN);                   /* a peer gone mid-send is an error, not death */

    int status = start(&s);
    if (status == 0) status = ping_until_signal(&s, &signals) > 0 ? 0 : 1;
    stop(&s);
    if (status == 0) CR_INFO("store", "stopped cleanly");
    return status;
}

/* The embedded store server (include/crescent/host.h): a segment of this
 * process's memory, served by a transfer server on its own thread and kept
 * mounted by a keep-alive thread, which also runs the copy/move tasks whose
 * source is this segment (handed out with its pings; client/task_exec.h).
 * crescent-store is this as a program (src/cmd/crescent_store.c). */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/task_exec.h"
#include "core/log.h"
#include "crescent/host.h"
#include "rdma/xfer.h"
#include "tier/ssd_host.h"

/* Copy/move tasks taken per heartbeat: a round of this many pings again at
 * once, since more may be waiting. */
#define TASKS_PER_ROUND 16u
/* SSD reads of one object within the window that ask for its promotion, in a
 * host's own SSD tier (crescent-store's --promotion-hits default). */
#define CR_HOST_PROMOTION_HITS 2u

struct cr_host {
    struct cr_xfer_segment segment;
    struct cr_xfer_server *xfer;
    struct cr_xfer_client *exec;    /* runs the tasks (NULL with a caller's heartbeat) */
    struct cr_task_exec_ssd ssd;    /* OFFLOAD tasks' SSD writer (write NULL: none) */
    uint64_t ssd_capacity;          /* told to the master at mount; 0: no SSD tier */
    struct cr_store_ssd own_ssd;    /* options.ssd_dir: the host's own SSD tier */
    bool own_ssd_open;
    int (*ssd_sync)(void *arg, cr_client *master, const char *segment_name, bool mounted);
    void *ssd_sync_arg;
    bool ssd_fresh;                 /* mounted since ssd_sync last succeeded with mounted */
    cr_client *master;              /* the keep-alive thread's after start */
    char segment_name[CR_XFER_SEGMENT_NAME_MAX + 1];
    /* The segment's capability key: set on the transfer server and sent in
     * every (re)mount; never logged. */
    bool has_cap_key;
    uint8_t cap_key[CR_CAP_KEY_BYTES];
    char master_endpoint[CR_CLIENT_ENDPOINT_MAX + 16];
    uint32_t ping_interval_ms;
    int (*heartbeat)(void *arg, cr_client *master, uint64_t *ttl_ms, bool *known, bool *again);
    void *heartbeat_arg;
    bool pin, mount_later;
    int cpu;
    pthread_t serve_thread, keepalive_thread;
    bool serving, keeping_alive;
    atomic_bool stop;
    pthread_mutex_t lock;           /* with `wake`: the keep-alive thread's sleep */
    pthread_cond_t wake;
    /* Under `lock` (cr_host_drain_ssd): the SSD tier is offered to the
     * master; drains asked for, and the last one the keep-alive thread took. */
    bool ssd_offered;
    uint32_t drains_asked, drains_taken;
    _Atomic uint64_t pings, pings_failed, remounts, tasks_run;
    atomic_bool mounted;
};

static void set_error(char *error, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_error(char *error, size_t size, const char *fmt, ...) {
    if (error == NULL || size == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error, size, fmt, ap);
    va_end(ap);
}

/* ---- the two threads ------------------------------------------------------ */

static void pin_to_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (rc != 0)
        CR_WARN("host", "cannot pin the transfer thread to CPU %d: %s", cpu, strerror(rc));
    else
        CR_INFO("host", "transfer thread pinned to CPU %d", cpu);
}

static void *serve(void *arg) {
    struct cr_host *h = arg;
    if (h->pin) pin_to_cpu(h->cpu);
    /* A short wait bounds how long cr_host_stop waits for this thread. */
    while (!atomic_load_explicit(&h->stop, memory_order_relaxed)) {
        if (cr_xfer_server_run(h->xfer, 50) < 0) {
            CR_ERROR("host", "the transfer server of segment '%s' failed (epoll); it no "
                     "longer serves", h->segment_name);
            break;
        }
    }
    return NULL;
}

static struct cr_segment_spec spec_of(const struct cr_host *h) {
    return (struct cr_segment_spec){.name = h->segment_name,
                                    .base = (uint64_t)(uintptr_t)h->segment.base,
                                    .size_bytes = h->segment.size,
                                    .transport_endpoint = cr_xfer_server_endpoint(h->xfer),
                                    .protocol = cr_xfer_server_protocol(h->xfer),
                                    .capability_key = h->has_cap_key ? h->cap_key : NULL,
                                    .ssd_capacity_bytes = h->ssd_capacity};
}

static int mount(struct cr_host *h, bool again) {
    struct cr_segment_spec spec = spec_of(h);
    int rc = again ? cr_client_remount_segment(h->master, &spec)
                   : cr_client_mount_segment(h->master, &spec);
    atomic_store_explicit(&h->mounted, rc == CR_OK, memory_order_relaxed);
    if (rc == CR_OK && again) atomic_fetch_add_explicit(&h->remounts, 1, memory_order_relaxed);
    if (rc == CR_OK) h->ssd_fresh = true; /* the SSD's files to register again */
    if (rc == CR_OK)
        CR_INFO("host", "segment '%s' (%" PRIu64 " bytes) %s at %s, served on %s://%s",
                h->segment_name, h->segment.size, again ? "remounted" : "mounted",
                h->master_endpoint, spec.protocol, spec.transport_endpoint);
    else if (again)
        CR_WARN("host", "remount of segment '%s' at %s failed: %s (retried at the next ping)",
                h->segment_name, h->master_endpoint, cr_client_last_error(h->master));
    return rc;
}

/* CLOCK_MONOTONIC's time wait_ms from now (the host's condvar waits on it). */
static struct timespec deadline_in(uint64_t wait_ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(wait_ms / 1000);
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return until;
}

/* Sleeps up to wait_ms or until cr_host_stop; returns false when stopping. */
static bool sleep_unless_stopped(struct cr_host *h, uint64_t wait_ms) {
    struct timespec until = deadline_in(wait_ms);
    pthread_mutex_lock(&h->lock);
    while (!atomic_load(&h->stop) && h->drains_asked == h->drains_taken) {
        if (pthread_cond_timedwait(&h->wake, &h->lock, &until) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&h->lock);
    return !atomic_load(&h->stop);
}

/* The default heartbeat: the ping that also hands out the copy/move tasks
 * whose source is this segment (seed 004), run and reported here, on the
 * keep-alive thread, before the next ping. */
static int heartbeat_with_tasks(struct cr_host *h, uint64_t *ttl_ms, bool *known, bool *again) {
    struct cr_task_assignments tasks;
    int rc = cr_client_heartbeat_tasks(h->master, TASKS_PER_ROUND, ttl_ms, known, &tasks);
    if (rc != CR_OK) return rc;
    int ran = cr_task_exec_run_all_ssd(h->master, h->exec, &tasks,
                                       h->ssd.write != NULL ? &h->ssd : NULL);
    cr_client_task_assignments_free(&tasks);
    if (ran > 0) {
        atomic_fetch_add_explicit(&h->tasks_run, (uint64_t)ran, memory_order_relaxed);
        CR_INFO("host", "segment '%s': ran %d copy/move task(s)", h->segment_name, ran);
    }
    *again = ran == (int)TASKS_PER_ROUND;
    return CR_OK;
}

/* cr_host_drain_ssd's request, on this thread (the master client's
 * owner): a remount with no SSD capacity.  One that fails leaves `mounted`
 * false, so the ping loop remounts (with no capacity) until one succeeds;
 * the tier counts as withdrawn once a mount without it did. */
static void drain_ssd(struct cr_host *h) {
    pthread_mutex_lock(&h->lock);
    bool asked = h->drains_asked != h->drains_taken;
    h->drains_taken = h->drains_asked;
    pthread_mutex_unlock(&h->lock);
    if (asked && h->ssd_capacity > 0) {
        h->ssd_capacity = 0;
        (void)mount(h, true);
    }
    pthread_mutex_lock(&h->lock);
    if (h->ssd_offered && h->ssd_capacity == 0 && atomic_load(&h->mounted)) {
        h->ssd_offered = false;
        CR_INFO("host", "segment '%s': SSD tier withdrawn from offload", h->segment_name);
        pthread_cond_broadcast(&h->wake);
    }
    pthread_mutex_unlock(&h->lock);
}

/* Pings; remounts when the master has forgotten this client (restarted, or
 * pings were missed past its TTL) or the last mount failed. */
static void *keepalive(void *arg) {
    struct cr_host *h = arg;
    bool down = false;
    uint64_t wait_ms = h->ping_interval_ms;
    do {
        drain_ssd(h);
        uint64_t ttl_ms = 0;
        bool known = true, again = false;
        int rc = h->heartbeat != NULL
                     ? h->heartbeat(h->heartbeat_arg, h->master, &ttl_ms, &known, &again)
                     : heartbeat_with_tasks(h, &ttl_ms, &known, &again);
        if (rc != CR_OK) {
            atomic_fetch_add_explicit(&h->pings_failed, 1, memory_order_relaxed);
            if (!down)
                CR_WARN("host", "master %s does not answer (%s); retrying every %" PRIu64 " ms",
                        h->master_endpoint, cr_client_last_error(h->master), wait_ms);
            down = true;
            continue;
        }
        atomic_fetch_add_explicit(&h->pings, 1, memory_order_relaxed);
        if (down) CR_INFO("host", "master %s answers again", h->master_endpoint);
        down = false;
        if (!known || !atomic_load_explicit(&h->mounted, memory_order_relaxed)) {
            if (!known)
                CR_WARN("host", "master %s does not know this client (restarted, or pings "
                        "were missed): remounting '%s'", h->master_endpoint, h->segment_name);
            (void)mount(h, true);
        }
        if (h->ssd_sync != NULL && atomic_load_explicit(&h->mounted, memory_order_relaxed) &&
            h->ssd_sync(h->ssd_sync_arg, h->master, h->segment_name, h->ssd_fresh) == CR_OK)
            h->ssd_fresh = false;
        wait_ms = h->ping_interval_ms;
        if (ttl_ms > 0 && ttl_ms / 4 < wait_ms) wait_ms = ttl_ms / 4 > 0 ? ttl_ms / 4 : 1;
        if (again) wait_ms = 0; /* a full round of work: more may be waiting */
    } while (wait_ms == 0 ? !atomic_load(&h->stop) : sleep_unless_stopped(h, wait_ms));
    return NULL;
}

/* ---- start and stop --------------------------------------------------------- */

static int open_transfer(struct cr_host *h, const struct cr_host_options *o, char *error,
                         size_t size) {
    int rc = CR_OK;
    if (o->memory != NULL) /* the caller's: fd -1 marks it not ours to free */
        h->segment = (struct cr_xfer_segment){.base = o->memory, .size = o->segment_size,
                                              .fd = -1};
    else
        rc = cr_xfer_segment_alloc(o->segment_size, &h->segment);
    if (rc != CR_OK) {
        set_error(error, size, "cannot allocate a %" PRIu64 "-byte segment: %s (ask for less)",
                  o->segment_size, cr_strerror(rc));
        return rc;
    }
    struct cr_xfer_server_config xc = {.tcp_address = o->data_address,
                                       .shm_disabled = o->no_shm,
                                       .verbs_disabled = o->no_verbs,
                                       .rdma_devices = o->rdma_devices,
                                       .rdma_gid_index_set = o->rdma_gid_index_set,
                                       .rdma_gid_index = o->rdma_gid_index,
                                       .require_capability = o->require_capability};
    rc = cr_xfer_server_create(&xc, &h->xfer);
    if (rc != CR_OK) {
        set_error(error, size, "cannot serve transfers on %s: %s",
                  o->data_address ? o->data_address : "127.0.0.1:0", cr_strerror(rc));
        return rc;
    }
    if (o->heartbeat == NULL) {
        struct cr_xfer_client_config cc = {.shm_disabled = o->no_shm,
                                           .verbs_disabled = o->no_verbs,
                                           .rdma_devices = o->rdma_devices,
                                           .rdma_gid_index_set = o->rdma_gid_index_set,
                                           .rdma_gid_index = o->rdma_gid_index};
        rc = cr_xfer_client_create(&cc, &h->exec);
        if (rc != CR_OK) {
            set_error(error, size, "cannot create the transfer client for copy/move tasks: %s",
                      cr_strerror(rc));
            return rc;
        }
    }
    snprintf(h->segment_name, sizeof(h->segment_name), "%s",
             o->segment_name != NULL && o->segment_name[0] != '\0'
                 ? o->segment_name : cr_xfer_server_endpoint(h->xfer));
    rc = o->memory != NULL
             ? cr_xfer_server_register(h->xfer, h->segment_name, h->segment.base, h->segment.size)
             : cr_xfer_server_register_segment(h->xfer, h->segment_name, &h->segment);
    if (rc != CR_OK) {
        set_error(error, size, "cannot register segment '%s': %s", h->segment_name,
                  cr_strerror(rc));
        return rc;
    }
    /* A fresh key per start: the master learns it at (re)mount and signs the
     * capabilities of this segment's handles with it (docs/architecture.md). */
    h->has_cap_key = cr_cap_key_generate(h->cap_key) == 0 &&
                     cr_xfer_server_set_key(h->xfer, h->segment_name, h->cap_key) == CR_OK;
    if (!h->has_cap_key && o->require_capability) {
        set_error(error, size, "cannot make a capability key for segment '%s' (libsodium did "
                  "not initialise), and require_capability is set", h->segment_name);
        return CR_ERR_IO;
    }
    if (o->ssd_read != NULL && o->ssd_write != NULL) {
        h->ssd = (struct cr_task_exec_ssd){.segment_base = h->segment.base,
                                           .segment_size = h->segment.size,
                                           .write = o->ssd_write, .remove = o->ssd_remove,
                                           .arg = o->ssd_read_arg};
        h->ssd_capacity = o->ssd_capacity_bytes;
        h->ssd_offered = h->ssd_capacity > 0;
        h->ssd_sync = o->ssd_sync;
        h->ssd_sync_arg = o->ssd_read_arg;
    }
    if (o->ssd_read != NULL) {
        char name[sizeof(h->segment_name) + sizeof(CR_HOST_SSD_SUFFIX)];
        snprintf(name, sizeof(name), "%s%s", h->segment_name, CR_HOST_SSD_SUFFIX);
        rc = cr_xfer_server_register_reader(h->xfer, name, o->ssd_read, o->ssd_read_arg);
        if (rc != CR_OK)
            set_error(error, size, "cannot register the SSD tier as '%s': %s (a segment name "
                      "of at most %zu bytes)", name, cr_strerror(rc),
                      (size_t)CR_XFER_SEGMENT_NAME_MAX - strlen(CR_HOST_SSD_SUFFIX));
        /* The segment's key checks the SSD segment's reads too: the master
         * signs local_disk replicas for "<name>#ssd" with it (rpc/rpc_caps.h),
         * so a server that requires capabilities serves its SSD to readers
         * the master sent, and to no one else. */
        if (rc == CR_OK && h->has_cap_key)
            rc = cr_xfer_server_set_key(h->xfer, name, h->cap_key);
        if (rc == CR_OK && o->ssd_open != NULL)
            rc = cr_xfer_server_set_opener(h->xfer, name, o->ssd_open);
    }
    return rc;
}

/* options.ssd_dir without the caller's own ssd_read: the host opens the tier
 * (tier/ssd_host.h, crescent-store's code) and wires its callbacks into *o. */
static int open_own_ssd(struct cr_host *h, struct cr_host_options *o, char *error, size_t size) {
    if (o->ssd_read != NULL || o->ssd_dir == NULL || o->ssd_dir[0] == '\0') return CR_OK;
    if (o->ssd_size == 0) {
        set_error(error, size, "an SSD tier in '%s' needs its size in bytes (ssd_size > 0)",
                  o->ssd_dir);
        return CR_ERR_INVALID_PARAMS;
    }
    char why[512];
    int rc = cr_store_ssd_open(&h->own_ssd, o->ssd_dir, o->ssd_size, CR_HOST_PROMOTION_HITS, why,
                               sizeof(why));
    h->own_ssd_open = true; /* its lock is made either way; closed at stop */
    if (rc != CR_OK) {
        set_error(error, size, "cannot open the SSD tier: %s (ssd_dir, ssd_size)", why);
        return rc;
    }
    o->ssd_read = cr_store_ssd_read;
    o->ssd_open = cr_store_ssd_open_value;
    o->ssd_read_arg = &h->own_ssd;
    o->ssd_write = cr_store_ssd_write;
    o->ssd_remove = cr_store_ssd_remove;
    o->ssd_sync = cr_store_ssd_sync; /* re-registers its files, reports those gone */
    h->own_ssd.reports = true;
    o->ssd_capacity_bytes = o->ssd_size;
    return CR_OK;
}

static int start_threads(struct cr_host *h, char *error, size_t size) {
    int rc = pthread_create(&h->serve_thread, NULL, serve, h);
    if (rc == 0) {
        h->serving = true;
        rc = pthread_create(&h->keepalive_thread, NULL, keepalive, h);
        h->keeping_alive = rc == 0;
    }
    if (rc != 0) {
        set_error(error, size, "cannot start the host's threads: %s", strerror(rc));
        return CR_ERR_IO;
    }
    return CR_OK;
}

int cr_host_start(const struct cr_host_options *o, cr_host **out, char *error,
                  size_t error_size) {
    assert(out != NULL);
    /* the master signs SSD reads for the name this host serves them under */
    assert(strcmp(CR_HOST_SSD_SUFFIX, CR_CAP_SSD_SUFFIX) == 0);
    *out = NULL;
    if (o == NULL || o->master == NULL || o->segment_size == 0) {
        set_error(error, error_size, "cr_host_start needs a master endpoint and a segment size "
                  "> 0");
        return CR_ERR_INVALID_PARAMS;
    }
    struct cr_host *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        set_error(error, error_size, "out of memory");
        return CR_ERR_NOMEM;
    }
    pthread_mutex_init(&h->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&h->wake, &attr);
    pthread_condattr_destroy(&attr);
    snprintf(h->master_endpoint, sizeof(h->master_endpoint), "%s", o->master);
    h->ping_interval_ms = o->ping_interval_ms ? o->ping_interval_ms
                                               : CR_HOST_PING_INTERVAL_MS_DEFAULT;
    h->heartbeat = o->heartbeat;
    h->heartbeat_arg = o->heartbeat_arg;
    h->pin = o->pin_serve_thread;
    h->cpu = o->serve_cpu;
    h->mount_later = o->mount_when_master_answers;
    struct cr_host_options with_ssd = *o;
    int rc = open_own_ssd(h, &with_ssd, error, error_size);
    if (rc == CR_OK) rc = open_transfer(h, &with_ssd, error, error_size);
    if (rc == CR_OK) {
        struct cr_client_options co = {.timeout_ms = o->timeout_ms};
        rc = cr_client_open(o->master, &co, &h->master, error, error_size);
    }
    if (rc == CR_OK) {
        rc = mount(h, false);
        if (rc != CR_OK)
            set_error(error, error_size, "mount of segment '%s' at %s failed: %s",
                      h->segment_name, o->master, cr_client_last_error(h->master));
        /* A store program outlives a master that is not up yet: the
         * keep-alive thread mounts once it answers. */
        if (rc != CR_OK && rc != CR_ERR_SEGMENT_ALREADY_EXISTS && h->mount_later) {
            CR_WARN("host", "%s; mounting when the master answers", error ? error : "");
            rc = CR_OK;
        }
    }
    if (rc == CR_OK) rc = start_threads(h, error, error_size);
    if (rc != CR_OK) {
        (void)cr_host_stop(h);
        return rc;
    }
    *out = h;
    return CR_OK;
}

int cr_host_stop(cr_host *h) {
    if (h == NULL) return CR_OK;
    pthread_mutex_lock(&h->lock);
    atomic_store(&h->stop, true);
    pthread_cond_broadcast(&h->wake);
    pthread_mutex_unlock(&h->lock);
    if (h->keeping_alive) pthread_join(h->keepalive_thread, NULL);
    /* Unmount before the server stops: readers mid-transfer finish against
     * memory that is still mapped, and no new replica lands here. */
    int rc = CR_OK;
    if (h->master != NULL && atomic_load(&h->mounted)) {
        rc = cr_client_unmount_segment(h->master, h->segment_name);
        if (rc != CR_OK)
            CR_WARN("host", "unmount of '%s' failed: %s (the master drops it after the client "
                    "TTL)", h->segment_name, cr_client_last_error(h->master));
    }
    if (h->serving) pthread_join(h->serve_thread, NULL);
    cr_client_close(h->master);
    cr_xfer_server_destroy(h->xfer);
    cr_xfer_client_destroy(h->exec);
    if (h->own_ssd_open) cr_store_ssd_close(&h->own_ssd); /* no thread reads or writes it now */
    if (h->segment.fd >= 0 && h->segment.base != NULL) cr_xfer_segment_free(&h->segment);
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->lock);
    free(h);
    return rc;
}

const char *cr_host_segment_name(const cr_host *h) {
    assert(h != NULL);
    return h->segment_name;
}

const char *cr_host_endpoint(const cr_host *h) {
    assert(h != NULL);
    return cr_xfer_server_endpoint(h->xfer);
}

const char *cr_host_protocol(const cr_host *h) {
    assert(h != NULL);
    return cr_xfer_server_protocol(h->xfer);
}

void *cr_host_base(const cr_host *h) {
    assert(h != NULL);
    return h->segment.base;
}

uint64_t cr_host_size(const cr_host *h) {
    assert(h != NULL);
    return h->segment.size;
}

int cr_host_drain_ssd(cr_host *h, int timeout_ms, bool *drained, char *error,
                      size_t error_size) {
    assert(h != NULL && drained != NULL);
    struct timespec until = deadline_in(timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
    pthread_mutex_lock(&h->lock);
    *drained = h->ssd_offered;
    if (h->ssd_offered) {
        h->drains_asked++;
        pthread_cond_broadcast(&h->wake);
        while (h->ssd_offered && !atomic_load(&h->stop)) {
            if (pthread_cond_timedwait(&h->wake, &h->lock, &until) == ETIMEDOUT) break;
        }
    }
    bool left = h->ssd_offered;
    pthread_mutex_unlock(&h->lock);
    if (left) {
        set_error(error, error_size, "segment '%s': the master %s did not take the SSD tier's "
                  "withdrawal within %d ms (%s); retried at each ping", h->segment_name,
                  h->master_endpoint, timeout_ms, atomic_load(&h->stop) ? "stopping" : "no answer");
        return CR_ERR_TIMEOUT;
    }
    return CR_OK;
}

void cr_host_get_stats(const cr_host *h, struct cr_host_stats *out) {
    assert(h != NULL && out != NULL);
    out->pings = atomic_load_explicit(&h->pings, memory_order_relaxed);
    out->pings_failed = atomic_load_explicit(&h->pings_failed, memory_order_relaxed);
    out->remounts = atomic_load_explicit(&h->remounts, memory_order_relaxed);
    out->mounted = atomic_load_explicit(&h->mounted, memory_order_relaxed);
    out->tasks_run = atomic_load_explicit(&h->tasks_run, memory_order_relaxed);
}

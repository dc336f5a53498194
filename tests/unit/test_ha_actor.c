/* The HA thread (src/ha/ha.c) against a real etcd this test starts on
 * loopback (skipped when Debian's etcd is not installed): it wins the
 * election, opens the gate a reader thread polls the way the segments actor
 * does, and on stop closes it and resigns (the key is gone at once).  Two
 * threads share the gate, so this runs under TSan too (zig build tsan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crescent/error.h"
#include "daemon/config.h"
#include "ha/etcd.h"
#include "ha/gate.h"
#include "ha/ha.h"

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct reader {
    struct cr_ha_gate *gate;
    atomic_bool stop;
    uint64_t open_seen;
};

/* Reads the gate as segments does, until told to stop. */
static void *read_gate(void *arg) {
    struct reader *r = arg;
    while (!atomic_load(&r->stop)) {
        if (cr_ha_gate_open(r->gate, mono_ms())) r->open_seen++;
        struct cr_ha_view v;
        cr_ha_gate_view(r->gate, &v);
        char why[512];
        cr_ha_gate_refusal(r->gate, why, sizeof(why));
        usleep(1000);
    }
    return NULL;
}

static pid_t start_etcd(int client_port, int peer_port, const char *dir) {
    char client[64], peer[64], cluster[96];
    snprintf(client, sizeof(client), "http://127.0.0.1:%d", client_port);
    snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", peer_port);
    snprintf(cluster, sizeof(cluster), "t=%s", peer);
    pid_t pid = fork();
    if (pid == 0) {
        int null_fd = open("/dev/null", O_WRONLY);
        if (null_fd >= 0) {
            dup2(null_fd, 1);
            dup2(null_fd, 2);
        }
        execl("/usr/bin/etcd", "etcd", "--name", "t", "--data-dir", dir, "--listen-client-urls",
              client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
              "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void test_elects_opens_gate_and_resigns(void **unused) {
    (void)unused;
    if (access("/usr/bin/etcd", X_OK) != 0) skip();
    char dir[] = "/tmp/crescent-ha-etcd-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int base = 33000 + (int)(getpid() % 4000) * 2;
    pid_t etcd = start_etcd(base, base + 1, dir);
    assert_true(etcd > 0);

    struct cr_daemon_config config;
    cr_daemon_config_default(&config);
    snprintf(config.ha, sizeof(config.ha), "etcd");
    snprintf(config.etcd_endpoints, sizeof(config.etcd_endpoints), "127.0.0.1:%d", base);
    snprintf(config.cluster_id, sizeof(config.cluster_id), "unit%d", (int)getpid());
    config.ha_lease_ttl = 2;
    char error[512];
    assert_true(cr_ha_config_check(&config, error, sizeof(error)));

    struct cr_ha_gate gate;
    assert_int_equal(cr_ha_gate_init(&gate), CR_OK);
    assert_false(cr_ha_gate_open(&gate, mono_ms())); /* closed until elected */
    struct reader r = {.gate = &gate};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_gate, &r), 0);
    struct cr_ha *ha = NULL;
    assert_int_equal(cr_ha_start(&config, &gate, &ha, error, sizeof(error)), CR_OK);
    uint64_t deadline = mono_ms() + 30000;
    while (!cr_ha_gate_open(&gate, mono_ms()) && mono_ms() < deadline) usleep(10000);
    assert_true(cr_ha_gate_open(&gate, mono_ms()));
    usleep(1500 * 1000); /* past one renewal (every 666 ms): still open */
    assert_true(cr_ha_gate_open(&gate, mono_ms()));
    struct cr_ha_view v;
    cr_ha_gate_view(&gate, &v);
    assert_true(v.leader);
    assert_true(v.term > 0);
    assert_true(v.elect.elections == 1);
    cr_ha_stop(ha);
    assert_false(cr_ha_gate_open(&gate, mono_ms()));
    atomic_store(&r.stop, true);
    pthread_join(t, NULL);
    assert_true(r.open_seen > 0);

    /* Resigned: the key is gone now, not a lease later. */
    struct cr_etcd *e = NULL;
    assert_int_equal(cr_etcd_open(config.etcd_endpoints, 2000, &e, error, sizeof(error)), CR_OK);
    char key[256];
    cr_ha_leader_key(config.cluster_id, key, sizeof(key));
    int64_t rev = 0;
    struct cr_etcd_kv kv;
    assert_int_equal(cr_etcd_get(e, key, &rev, &kv, error, sizeof(error)), CR_OK);
    assert_false(kv.found);
    cr_etcd_close(e);
    cr_ha_gate_destroy(&gate);
    kill(etcd, SIGKILL);
    waitpid(etcd, NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elects_opens_gate_and_resigns),
    };
    return cmocka_run_group_tests_name("ha_actor", tests, NULL, NULL);
}

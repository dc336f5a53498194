/* libFuzzer target for the indexer's registration file reader
 * (cr_indexer_conf_load in src/actors/indexer_conf.c): the state file
 * <state-dir>/indexer-registrations.json and --indexer-config both go
 * through it, "bind" included.
 *
 * Each input is written to a memfd and read back through its /proc path,
 * so the reader's own steps (the 1 MiB bound, NUL termination of what was
 * read, embedded NUL bytes) run as they do on a real file.
 *
 * Invariants checked besides "no crash":
 *  - a refused file yields CR_ERR_INVALID_PARAMS (or CR_ERR_NOMEM), no
 *    registrations, and a non-empty NUL-terminated message;
 *  - an accepted file has at most CR_INDEXER_SOURCES_MAX registrations, each
 *    as cr_indexer_registration_check promises: instance and endpoint
 *    non-empty, no '|' in instance or tenant, tenant and type never empty,
 *    block_size 1..CR_KV_MAX_BLOCK_SIZE, dp_rank < 64, every string
 *    NUL-terminated within its field; a "bind" registration's endpoint is
 *    tcp:// or ipc:// and never a wildcard host.
 * Build and run instructions are in tests/fuzz/README.md. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "actors/indexer_internal.h"
#include "crescent/error.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "invariant failed: %s (line %d)\n", #cond, __LINE__);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static bool terminated(const char *s, size_t size) { return memchr(s, '\0', size) != NULL; }

static void check_registration(const struct cr_indexer_registration *r) {
    CHECK(terminated(r->instance_id, sizeof(r->instance_id)));
    CHECK(terminated(r->tenant_id, sizeof(r->tenant_id)));
    CHECK(terminated(r->endpoint, sizeof(r->endpoint)));
    CHECK(terminated(r->replay_endpoint, sizeof(r->replay_endpoint)));
    CHECK(terminated(r->type, sizeof(r->type)));
    CHECK(terminated(r->model, sizeof(r->model)));
    CHECK(terminated(r->lora_name, sizeof(r->lora_name)));
    CHECK(terminated(r->salt, sizeof(r->salt)));
    CHECK(r->instance_id[0] != '\0' && r->endpoint[0] != '\0');
    CHECK(r->tenant_id[0] != '\0' && r->type[0] != '\0');
    CHECK(strchr(r->instance_id, '|') == NULL && strchr(r->tenant_id, '|') == NULL);
    CHECK(r->block_size >= 1 && r->block_size <= CR_KV_MAX_BLOCK_SIZE);
    CHECK(r->dp_rank < 64);
    if (r->bind) {
        CHECK(strncmp(r->endpoint, "tcp://", 6) == 0 || strncmp(r->endpoint, "ipc://", 6) == 0);
        CHECK(strncmp(r->endpoint, "tcp://*:", 8) != 0 &&
              strncmp(r->endpoint, "tcp://0.0.0.0:", 14) != 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_indexer_conf", 0);
        CHECK(fd >= 0);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    }
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
    struct cr_indexer_registration *regs = NULL;
    uint32_t count = 0;
    char error[CR_INDEXER_ERROR_MAX];
    memset(error, 0x5a, sizeof(error));
    int rc = cr_indexer_conf_load(path, &regs, &count, error, sizeof(error));
    if (rc != CR_OK) {
        CHECK(rc == CR_ERR_INVALID_PARAMS || rc == CR_ERR_NOMEM);
        CHECK(regs == NULL && count == 0);
        CHECK(terminated(error, sizeof(error)) && error[0] != '\0');
        return 0;
    }
    CHECK(count <= CR_INDEXER_SOURCES_MAX);
    for (uint32_t i = 0; i < count; i++) check_registration(&regs[i]);
    free(regs);
    return 0;
}

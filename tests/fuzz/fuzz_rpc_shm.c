/* libFuzzer target for crescentd's read of a same-host shm client's
 * shared memory (src/rpc/rpc_shm.c, layout msgs/rpc_shm.h): everything
 * a hostile client on the host can write there.
 *
 * One server with small rings (4 KiB) and one client set up through the
 * real socket hand-shake, once per process.  Each input is a program for
 * the client, read 1 + 8 bytes at a time: op byte, then a 64-bit argument.
 *   op % 6 == 0: write up to arg % 512 bytes of the input's tail into the
 *                request ring, as a well-behaved producer (room respected)
 *              1: set the request ring's tail to arg (any value)
 *              2: set the reply ring's head to arg (any value)
 *              3: take what the reply ring holds, as a well-behaved consumer
 *              4: set the sleeping / producer_waiting words to arg's bytes
 *              5: write arg % 4096 raw bytes of the input into the request
 *                 ring's data at arg's offset, bypassing the indices
 * and after every op the server polls and flushes, as its loop would.  The
 * echo handler answers every frame.  Checks: no crash or sanitizer report,
 * no frame shorter than the envelope's header reaches the handler, and the
 * client is freed once it leaves (each input sets up a fresh one).
 * Build and run: tests/fuzz/README.md. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/rpc_shm.h"
#include "crescent/error.h"
#include "msgs/rpc_stream.h"

#define RING 4096u

static struct cr_rpc_shm_server *srv;
static char path[64];

struct client {
    int sock, fds[3];
    void *map;
    struct cr_rpc_shm_header *h;
    struct cr_rpc_shm_ring req, rep;
} cl = {.sock = -1};

static bool echo(void *ctx, uint64_t client, const uint8_t *p, size_t len) {
    (void)ctx;
    if (len < CR_RPC_REQUEST_HEADER_BYTES) abort(); /* the framing's bounds held */
    cr_rpc_shm_server_reply(srv, client, cr_rpc_get_u64(p + 2), CR_OK,
                            p + CR_RPC_REQUEST_HEADER_BYTES, len - CR_RPC_REQUEST_HEADER_BYTES,
                            false);
    return false;
}

static void client_drop(void) {
    if (cl.map != NULL) munmap(cl.map, cr_rpc_shm_map_bytes(RING));
    if (cl.sock >= 0) close(cl.sock);
    for (int i = 0; i < 3; i++)
        if (cl.fds[i] > 0) close(cl.fds[i]);
    memset(&cl, 0, sizeof(cl));
    cl.sock = -1;
}

static void client_setup(void) {
    struct sockaddr_un addr;
    socklen_t len;
    if (!cr_rpc_shm_sockaddr(path, &addr, &len)) abort();
    cl.sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct cr_rpc_shm_hello hello = {.magic = CR_RPC_SHM_MAGIC, .version = CR_RPC_SHM_VERSION};
    if (connect(cl.sock, (struct sockaddr *)&addr, len) != 0 ||
        send(cl.sock, &hello, sizeof(hello), 0) != sizeof(hello))
        abort();
    cr_rpc_shm_server_serve(srv);
    struct cr_rpc_shm_welcome w;
    if (cr_rpc_shm_recv_welcome(cl.sock, 0, &w, cl.fds) != sizeof(w) || w.status != CR_OK ||
        cl.fds[0] < 0)
        abort();
    cl.map = mmap(NULL, cr_rpc_shm_map_bytes(RING), PROT_READ | PROT_WRITE, MAP_SHARED,
                  cl.fds[0], 0);
    if (cl.map == MAP_FAILED) abort();
    cl.h = cl.map;
    uint8_t *rings = (uint8_t *)cl.map + CR_RPC_SHM_HEADER_BYTES;
    cr_rpc_shm_ring_init(&cl.req, &cl.h->requests, rings, RING);
    cr_rpc_shm_ring_init(&cl.rep, &cl.h->replies, rings + RING, RING);
}

static bool client_closed(void) {
    struct cr_rpc_shm_stats s;
    cr_rpc_shm_server_stats(srv, &s);
    if (s.clients_open > 1) abort();
    return s.clients_open == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (srv == NULL) {
        snprintf(path, sizeof(path), "@crescent-fuzz-rpc-shm/%d", (int)getpid());
        struct cr_rpc_shm_options o = {.path = path, .clients_max = 1, .ring_bytes = RING,
                                       .queue_max = 8, .on_frame = echo};
        char why[256];
        if (cr_rpc_shm_server_open(&o, &srv, why, sizeof(why)) != CR_OK) abort();
    }
    client_setup(); /* a fresh client per input: inputs are independent */
    size_t pos = 0;
    while (pos + 9 <= size && !client_closed()) {
        uint8_t op = data[pos];
        uint64_t arg;
        memcpy(&arg, data + pos + 1, 8);
        pos += 9;
        switch (op % 6) {
        case 0: {
            int64_t room = cr_rpc_shm_ring_room(&cl.req);
            size_t n = (size_t)(arg % 512);
            if (n > size - pos) n = size - pos;
            if (room >= 0 && (size_t)room < n) n = (size_t)room;
            if (room > 0) cr_rpc_shm_ring_put(&cl.req, data + pos, n);
            pos += n;
            break;
        }
        case 1: __atomic_store_n(&cl.h->requests.tail, arg, __ATOMIC_RELEASE); break;
        case 2: __atomic_store_n(&cl.h->replies.head, arg, __ATOMIC_RELEASE); break;
        case 3: {
            static uint8_t sink[RING];
            int64_t n = cr_rpc_shm_ring_readable(&cl.rep);
            if (n > 0) cr_rpc_shm_ring_take(&cl.rep, sink, (size_t)n);
            break;
        }
        case 4:
            cl.h->requests.sleeping = (uint32_t)arg;
            cl.h->replies.producer_waiting = (uint32_t)(arg >> 32);
            break;
        case 5: {
            size_t n = (size_t)(arg % RING), at = (size_t)((arg >> 12) % RING);
            if (n > size - pos) n = size - pos;
            if (n > RING - at) n = RING - at;
            memcpy((uint8_t *)cl.map + CR_RPC_SHM_HEADER_BYTES + at, data + pos, n);
            pos += n;
            break;
        }
        }
        cr_rpc_shm_server_poll(srv);
        cr_rpc_shm_server_flush(srv);
    }
    client_drop();
    for (int i = 0; i < 100 && !client_closed(); i++) cr_rpc_shm_server_serve(srv); /* its EOF */
    if (!client_closed()) abort(); /* a client that left is freed */
    return 0;
}

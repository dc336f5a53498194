/* The heavy side of the asymmetric barrier (see runtime_internal.h). */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/runtime_internal.h"
#include "core/log.h"

bool cr_barrier_asymmetric;
static pthread_once_t barrier_once = PTHREAD_ONCE_INIT;

static long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

/* Decided once per process, before any runtime thread exists, so every
 * thread agrees on which protocol is in use. */
static void barrier_setup(void) {
#if defined(__SANITIZE_THREAD__)
    cr_barrier_asymmetric = false;
#else
    const char *off = getenv("CRESCENT_NO_MEMBARRIER");
    if (off != NULL && off[0] != '\0' && strcmp(off, "0") != 0) {
        CR_INFO("runtime", "CRESCENT_NO_MEMBARRIER set: senders use a full fence");
        return;
    }
    long supported = membarrier(MEMBARRIER_CMD_QUERY);
    if (supported < 0 || !(supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
        CR_INFO("runtime", "membarrier unavailable (%s): senders use a full fence",
                supported < 0 ? strerror(errno) : "no PRIVATE_EXPEDITED");
        return;
    }
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) {
        CR_INFO("runtime", "membarrier registration failed (%s): senders use a full fence",
                strerror(errno));
        return;
    }
    cr_barrier_asymmetric = true;
#endif
}

void cr_barrier_init(void) { pthread_once(&barrier_once, barrier_setup); }

void cr_barrier_heavy_membarrier(void) {
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
        /* Cannot happen once registered; a fence keeps this thread correct,
         * and the error is loud because senders rely on the membarrier. */
        CR_ERROR("runtime", "membarrier failed: %s", strerror(errno));
        atomic_thread_fence(memory_order_seq_cst);
    }
}

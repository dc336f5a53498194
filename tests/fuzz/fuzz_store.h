/* The store the RPC fuzzers run accepted requests on, as segments would:
 * a fresh one every FUZZ_STORE_RESET_EVERY inputs (objects put by earlier
 * inputs would otherwise grow without bound), and the arena segments'
 * methods pack their replies into. */
#ifndef CRESCENT_FUZZ_STORE_H
#define CRESCENT_FUZZ_STORE_H

#include <stdint.h>
#include <stdlib.h>

#include "rpc/rpc_methods.h"
#include "core/store.h"
#include "crescent/error.h"

#define FUZZ_STORE_RESET_EVERY 4096u

/* Makes *store fresh when none exists or `inputs` is a multiple of the
 * reset period; makes *arena once.  Aborts when either cannot be made: the
 * fuzzer would otherwise test nothing. */
static inline void fuzz_store_refresh(cr_store **store, struct cr_rpc_arena **arena,
                                      uint64_t inputs) {
    if (*store != NULL && inputs % FUZZ_STORE_RESET_EVERY != 0) return;
    cr_store_destroy(*store);
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    if (cr_store_create(&cfg, NULL, store) != CR_OK) abort();
    if (*arena == NULL && (*arena = cr_rpc_arena_new()) == NULL) abort();
}

#endif

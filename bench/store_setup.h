/* What bench/store_core.c and bench/store_slices.c share: a store core
 * with room for `objects` 4 KiB objects spread over 16 segments of one
 * client, each segment twice its share plus 1 MiB.
 *
 * Header-only, like harness.h: each benchmark is one bench/<name>.c. */
#ifndef CRESCENT_BENCH_STORE_SETUP_H
#define CRESCENT_BENCH_STORE_SETUP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/store.h"
#include "crescent/error.h"

#define SEGMENTS 16u
#define OBJECT_BYTES 4096u
#define KEY_BYTES 24u

static const struct cr_uuid CLIENT = {{0xC1}};

/* The store, its segments seg0..seg15 mounted; aborts when it cannot. */
static inline cr_store *setup(uint32_t objects) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = objects + 16;
    cfg.max_allocations_per_segment = objects / SEGMENTS * 2 + 1024;
    cr_store *store;
    if (cr_store_create(&cfg, NULL, &store) != CR_OK) abort();
    uint64_t seg_bytes = (uint64_t)objects / SEGMENTS * OBJECT_BYTES * 2 + (1u << 20);
    for (uint32_t i = 0; i < SEGMENTS; i++) {
        char name[32], ep[32];
        snprintf(name, sizeof(name), "seg%u", i);
        snprintf(ep, sizeof(ep), "10.0.0.%u:17000", i);
        struct cr_store_segment_params p = {name, (uint64_t)(i + 1) << 40, seg_bytes, ep, "tcp"};
        if (cr_store_mount_segment(store, &CLIENT, &p, 0) != CR_OK) abort();
    }
    return store;
}

#endif

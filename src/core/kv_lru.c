/* Simulated engine KV cache with LRU eviction (see kv_lru.h). */
#include "core/kv_lru.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"

#define NONE UINT32_MAX

int cr_kv_lru_init(struct cr_kv_lru *lru, uint32_t capacity) {
    assert(lru != NULL);
    memset(lru, 0, sizeof(*lru));
    if (capacity == 0 || capacity == NONE) return CR_ERR_INVALID_PARAMS;
    lru->capacity = capacity;
    lru->keys = malloc((size_t)capacity * sizeof(uint64_t));
    lru->prev = malloc((size_t)capacity * sizeof(uint32_t));
    lru->next = malloc((size_t)capacity * sizeof(uint32_t));
    if (lru->keys == NULL || lru->prev == NULL || lru->next == NULL) {
        cr_kv_lru_free(lru);
        return CR_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < capacity; i++) lru->next[i] = i + 1 < capacity ? i + 1 : NONE;
    lru->free_head = 0;
    lru->head = lru->tail = NONE;
    cr_prefix_map_init(&lru->where, &lru->bytes);
    return CR_OK;
}

void cr_kv_lru_free(struct cr_kv_lru *lru) {
    if (lru == NULL) return;
    free(lru->keys);
    free(lru->prev);
    free(lru->next);
    cr_prefix_map_free(&lru->where);
    memset(lru, 0, sizeof(*lru));
}

uint32_t cr_kv_lru_prefix(const struct cr_kv_lru *lru, const uint64_t *keys, uint32_t count) {
    assert(lru != NULL && (keys != NULL || count == 0));
    uint32_t n = 0;
    while (n < count && cr_prefix_map_get(&lru->where, keys[n], NULL)) n++;
    return n;
}

static void unlink_node(struct cr_kv_lru *lru, uint32_t node) {
    uint32_t p = lru->prev[node], n = lru->next[node];
    if (p != NONE) lru->next[p] = n;
    else lru->head = n;
    if (n != NONE) lru->prev[n] = p;
    else lru->tail = p;
}

static void push_front(struct cr_kv_lru *lru, uint32_t node) {
    lru->prev[node] = NONE;
    lru->next[node] = lru->head;
    if (lru->head != NONE) lru->prev[lru->head] = node;
    lru->head = node;
    if (lru->tail == NONE) lru->tail = node;
}

int cr_kv_lru_serve(struct cr_kv_lru *lru, const uint64_t *keys, uint32_t count,
                    struct cr_kv_lru_result *result) {
    assert(lru != NULL && result != NULL && (keys != NULL || count == 0));
    assert(result->run_start != NULL && result->run_len != NULL && result->removed != NULL);
    result->hit = result->stored = result->run_count = result->removed_count = 0;
    if (count > lru->capacity) return CR_ERR_INVALID_PARAMS;
    /* Touch what is cached, last block first, so the chain ends up at the
     * front in order and nothing of it is evicted below. */
    uint32_t missing = 0;
    for (uint32_t i = count; i-- > 0;) {
        uint64_t node;
        if (cr_prefix_map_get(&lru->where, keys[i], &node)) {
            unlink_node(lru, (uint32_t)node);
            push_front(lru, (uint32_t)node);
        } else {
            missing++;
        }
    }
    result->hit = cr_kv_lru_prefix(lru, keys, count);
    uint32_t free_nodes = lru->capacity - lru->used;
    while (free_nodes < missing) {
        uint32_t victim = lru->tail;
        assert(victim != NONE);
        unlink_node(lru, victim);
        bool had = cr_prefix_map_del(&lru->where, lru->keys[victim], NULL);
        assert(had);
        (void)had;
        result->removed[result->removed_count++] = lru->keys[victim];
        lru->next[victim] = lru->free_head;
        lru->free_head = victim;
        lru->used--;
        lru->evictions++;
        free_nodes++;
    }
    /* Store the missing blocks and touch the cached ones again, last first,
     * so the front holds the chain in order, block 0 first. */
    for (uint32_t i = count; i-- > 0;) {
        uint64_t cached;
        if (cr_prefix_map_get(&lru->where, keys[i], &cached)) {
            unlink_node(lru, (uint32_t)cached);
            push_front(lru, (uint32_t)cached);
            continue;
        }
        uint32_t node = lru->free_head;
        assert(node != NONE);
        lru->free_head = lru->next[node];
        lru->keys[node] = keys[i];
        if (cr_prefix_map_put(&lru->where, keys[i], node) != CR_OK) {
            /* The cache stays consistent (the block is simply not stored). */
            lru->next[node] = lru->free_head;
            lru->free_head = node;
            return CR_ERR_NOMEM;
        }
        push_front(lru, node);
        lru->used++;
        result->stored++;
        if (result->run_count > 0 && result->run_start[result->run_count - 1] == i + 1) {
            result->run_start[result->run_count - 1] = i;
            result->run_len[result->run_count - 1]++;
        } else {
            result->run_start[result->run_count] = i;
            result->run_len[result->run_count] = 1;
            result->run_count++;
        }
    }
    /* Runs were found last-first; callers publish them in chain order. */
    for (uint32_t a = 0, b = result->run_count; b-- > a + 1; a++) {
        uint32_t s = result->run_start[a], l = result->run_len[a];
        result->run_start[a] = result->run_start[b], result->run_len[a] = result->run_len[b];
        result->run_start[b] = s, result->run_len[b] = l;
    }
    return CR_OK;
}

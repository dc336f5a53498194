/* Standard prefix hashing (see prefix_hash.h for the rules). */
#include "core/prefix_hash.h"

#include <assert.h>
#include <string.h>
/* The state struct on the stack avoids XXH3_createState's malloc; its layout is
 * that of the installed libxxhash, which the build links against. */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

/* Tokens are converted to little-endian in chunks of this many on big-endian
 * hosts; little-endian hosts hash the caller's array in place. */
#define TOKEN_CHUNK 64

static void store_le64(uint8_t *out, uint64_t v) {
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)(v >> (8 * i));
}

static void store_le32(uint8_t *out, uint32_t v) {
    for (int i = 0; i < 4; i++) out[i] = (uint8_t)(v >> (8 * i));
}

uint64_t cr_prefix_hash_namespace_seed(uint64_t base_seed, const char *lora_name,
                                       const char *salt) {
    const char *lora = lora_name != NULL ? lora_name : "";
    const char *s = salt != NULL ? salt : "";
    size_t lora_len = strlen(lora), salt_len = strlen(s);
    if (lora_len == 0 && salt_len == 0) return base_seed;

    XXH3_state_t state;
    uint8_t len_le[4];
    /* Streaming so that names of any length need no buffer; the result equals
     * the one-shot hash of the concatenation. */
    XXH3_64bits_reset_withSeed(&state, base_seed);
    store_le32(len_le, (uint32_t)lora_len);
    XXH3_64bits_update(&state, len_le, sizeof(len_le));
    XXH3_64bits_update(&state, lora, lora_len);
    store_le32(len_le, (uint32_t)salt_len);
    XXH3_64bits_update(&state, len_le, sizeof(len_le));
    XXH3_64bits_update(&state, s, salt_len);
    return XXH3_64bits_digest(&state);
}

uint64_t cr_prefix_hash_block(const uint32_t *tokens, size_t token_count, uint64_t seed) {
    assert(tokens != NULL || token_count == 0);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return XXH3_64bits_withSeed(tokens, token_count * sizeof(uint32_t), seed);
#else
    XXH3_state_t state;
    uint8_t chunk[TOKEN_CHUNK * 4];
    XXH3_64bits_reset_withSeed(&state, seed);
    for (size_t done = 0; done < token_count;) {
        size_t n = token_count - done < TOKEN_CHUNK ? token_count - done : TOKEN_CHUNK;
        for (size_t i = 0; i < n; i++) store_le32(chunk + 4 * i, tokens[done + i]);
        XXH3_64bits_update(&state, chunk, n * 4);
        done += n;
    }
    return XXH3_64bits_digest(&state);
#endif
}

uint64_t cr_prefix_hash_roll(uint64_t parent_seq, uint64_t local, uint64_t seed) {
    uint8_t pair[16];
    store_le64(pair, parent_seq);
    store_le64(pair + 8, local);
    return XXH3_64bits_withSeed(pair, sizeof(pair), seed);
}

size_t cr_prefix_hash_chain(const uint32_t *tokens, size_t token_count, uint32_t block_size,
                            uint64_t seed, bool has_parent, uint64_t parent_seq,
                            uint64_t *seq_out, size_t seq_cap) {
    assert(block_size > 0);
    assert(tokens != NULL || token_count == 0);
    assert(seq_out != NULL || seq_cap == 0);
    size_t blocks = token_count / block_size;
    if (blocks > seq_cap) blocks = seq_cap;
    uint64_t prev = parent_seq;
    bool linked = has_parent;
    for (size_t i = 0; i < blocks; i++) {
        uint64_t local = cr_prefix_hash_block(tokens + i * block_size, block_size, seed);
        prev = linked ? cr_prefix_hash_roll(prev, local, seed) : local;
        linked = true;
        seq_out[i] = prev;
    }
    return blocks;
}

size_t cr_prefix_hash_chain_locals(const uint64_t *locals, size_t count, uint64_t seed,
                                   bool has_parent, uint64_t parent_seq, uint64_t *seq_out) {
    assert((locals != NULL && seq_out != NULL) || count == 0);
    uint64_t prev = parent_seq;
    bool linked = has_parent;
    for (size_t i = 0; i < count; i++) {
        prev = linked ? cr_prefix_hash_roll(prev, locals[i], seed) : locals[i];
        linked = true;
        seq_out[i] = prev;
    }
    return count;
}

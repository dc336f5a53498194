/* Standard prefix hashing for the prefix indexer (wire-formats.md §4).
 *
 *   local[i] = XXH3_64(tokens of block i as little-endian u32, S)
 *   seq[0]   = local[0]                      (at the root of a chain)
 *   seq[i]   = XXH3_64(le64(seq[i-1]) || le64(local[i]), S)
 *
 * Only complete blocks are hashed; a trailing partial block is ignored.
 *
 * Namespaces: the seed S separates LoRA adapters and cache salts so that two
 * namespaces never share a sequence hash.  The rule (documented for outside
 * parties that compute hashes for /query_by_hash):
 *
 *   S = base_seed                                  if lora and salt are both ""
 *   S = XXH3_64(le32(len lora) || lora || le32(len salt) || salt, base_seed)
 *                                                  otherwise
 *
 * Length prefixes (rather than a separator byte) keep ("a\0", "") and ("a", "\0")
 * apart even for names that contain NUL bytes.  base_seed defaults to 0;
 * crescentd's --prefix-hash-seed sets it (1337 is NVIDIA Dynamo's XXH3 seed,
 * with which these rules give Dynamo's tokens_hash and sequence hashes).
 *
 * Pure functions: no state, no allocation. */
#ifndef CRESCENT_CORE_PREFIX_HASH_H
#define CRESCENT_CORE_PREFIX_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_PREFIX_HASH_SEED_DEFAULT 0u

/* Returns the seed S for (base_seed, lora_name, salt) by the rule above.
 * NULL strings count as "".  Strings longer than 4096 bytes are hashed whole
 * (the length prefix is their length modulo 2^32). */
uint64_t cr_prefix_hash_namespace_seed(uint64_t base_seed, const char *lora_name,
                                       const char *salt);

/* Returns local = XXH3_64(tokens as little-endian u32, seed).  token_count may
 * be 0 (hashes the empty input). */
uint64_t cr_prefix_hash_block(const uint32_t *tokens, size_t token_count, uint64_t seed);

/* Returns XXH3_64(le64(parent_seq) || le64(local), seed): one rolling step. */
uint64_t cr_prefix_hash_roll(uint64_t parent_seq, uint64_t local, uint64_t seed);

/* Hashes the complete blocks of `tokens` into seq_out, at most seq_cap of them.
 * With has_parent false the chain starts at the root (seq[0] = local[0]); with
 * has_parent true it continues from parent_seq (seq[0] = roll(parent_seq,
 * local[0])), which is how a stored run whose first block has a parent is
 * placed in its chain.
 * Returns the number of hashes written: min(token_count / block_size, seq_cap).
 * block_size must be > 0 (asserted). */
size_t cr_prefix_hash_chain(const uint32_t *tokens, size_t token_count, uint32_t block_size,
                            uint64_t seed, bool has_parent, uint64_t parent_seq,
                            uint64_t *seq_out, size_t seq_cap);

/* Chains block hashes an engine computed itself (local[i] by the rule above,
 * e.g. Dynamo's tokens_hash) into sequence hashes: seq_out[i] for i < count,
 * rooted or continuing from parent_seq as in cr_prefix_hash_chain.  Returns
 * count. */
size_t cr_prefix_hash_chain_locals(const uint64_t *locals, size_t count, uint64_t seed,
                                   bool has_parent, uint64_t parent_seq, uint64_t *seq_out);

#endif

"""Stand-in for vllm.v1.core.kv_cache_utils (README.md in this folder):
a block hash is bytes."""
BlockHash = bytes


def maybe_convert_block_hash(block_hash):
    return block_hash

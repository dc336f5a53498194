"""Stand-in for vllm.distributed.kv_events.BlockStored (README.md in this folder)."""
from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class BlockStored:
    block_hashes: list
    parent_block_hash: Any
    token_ids: Optional[list]
    block_size: Optional[int]
    lora_id: Optional[int]
    medium: Optional[str]
    lora_name: Optional[str] = None

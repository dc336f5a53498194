"""Stand-in for sglang.srt.mem_cache.hicache_storage (README.md in this folder)."""
from abc import ABC
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class HiCacheStorageConfig:
    tp_rank: int = 0
    tp_size: int = 1
    is_mla_model: bool = False
    model_name: Optional[str] = None
    extra_config: Optional[dict] = field(default=None)


class HiCacheStorage(ABC):
    pass

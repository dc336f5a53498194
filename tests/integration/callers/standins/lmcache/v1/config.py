"""Stand-in for lmcache.v1.config (README.md in this folder)."""
from dataclasses import dataclass
from typing import Optional


@dataclass
class LMCacheEngineConfig:
    save_chunk_meta: bool = True
    extra_config: Optional[dict] = None

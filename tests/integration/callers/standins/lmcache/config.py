"""Stand-in for lmcache.config (README.md in this folder)."""
from dataclasses import dataclass

import torch


@dataclass
class LMCacheEngineMetadata:
    """The one chunk shape, dtype and memory format a test's KV chunks have."""
    chunk_shape: tuple = (2, 16, 64)
    kv_dtype: torch.dtype = torch.float16
    fmt: int = 1

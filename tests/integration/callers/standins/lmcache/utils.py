"""Stand-in for lmcache.utils.CacheEngineKey (README.md in this folder)."""
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheEngineKey:
    fmt: str
    model_name: str
    world_size: int
    worker_id: int
    chunk_hash: str

    def to_string(self):
        return (f"{self.fmt}@{self.model_name}@{self.world_size}"
                f"@{self.worker_id}@{self.chunk_hash}")

"""Stand-in for lmcache.v1.storage_backend.local_cpu_backend (README.md in
this folder): allocations are CPU tensors; a pinned buffer to register."""
from types import SimpleNamespace

import torch

from lmcache.v1.memory_management import MemoryObj


class LocalCPUBackend:
    def __init__(self, buffer_bytes=1 << 20):
        buffer = torch.zeros(buffer_bytes, dtype=torch.uint8)
        self.memory_allocator = SimpleNamespace(pin_allocator=SimpleNamespace(buffer=buffer))

    def allocate(self, shape, dtype, fmt):
        return MemoryObj(torch.empty(tuple(shape), dtype=dtype), fmt)

"""Stand-in for vLLM's kv_lookup_buffer base classes (README.md in this folder)."""
from abc import ABC, abstractmethod


class KVStoreBufferBase(ABC):
    @abstractmethod
    def put(self, key, value):
        raise NotImplementedError

    @abstractmethod
    def get(self, key):
        raise NotImplementedError

    @abstractmethod
    def close(self):
        raise NotImplementedError

"""`from mooncake.store import MooncakeDistributedStore` gets crescent's class
(python/crescent/mooncake_store.py), which speaks to crescentd.  Put
python/compat on PYTHONPATH ahead of any real `mooncake` wheel only when you
mean crescent to serve the engine (README.md says when not to)."""
from crescent.mooncake_store import (  # noqa: F401
    BufferHandle, MooncakeDistributedStore, ReplicateConfig)
from crescent.mooncake_replicas import (  # noqa: F401
    Descriptor, DiskDescriptor, MemoryDescriptor, QueryTaskResponse, ReplicaDescriptor,
    ReplicaStatus, TaskStatus, TaskType)
from crescent.mooncake_tensors import (  # noqa: F401
    _deserialize_tensor, _serialize_tensor, _tensor_metadata_size)

__all__ = ["MooncakeDistributedStore", "ReplicateConfig", "BufferHandle", "Descriptor",
           "DiskDescriptor", "MemoryDescriptor", "QueryTaskResponse", "ReplicaDescriptor",
           "ReplicaStatus", "TaskStatus", "TaskType"]

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
from crescent.mooncake_parallel import ParallelAxis, ReadTarget, TensorParallelism  # noqa: F401
from crescent.mooncake_extras import (  # noqa: F401
    MooncakeHostMemAllocator, ObjectDataType, SoftPinAction, _get_pyclient_from_wrapper,
    bind_to_numa_node, get_alloc_func_addr, get_free_func_addr)

# The reference's module also exports its enums' values by name (pybind11's
# export_values), the later enum winning a shared name, as there.
for _enum in (ReplicaStatus, TaskStatus, TaskType, ObjectDataType):
    globals().update(_enum.__members__)
del _enum

__all__ = ["MooncakeDistributedStore", "ReplicateConfig", "BufferHandle", "Descriptor",
           "DiskDescriptor", "MemoryDescriptor", "QueryTaskResponse", "ReplicaDescriptor",
           "ReplicaStatus", "TaskStatus", "TaskType", "ParallelAxis", "ReadTarget",
           "TensorParallelism", "MooncakeHostMemAllocator", "bind_to_numa_node",
           "get_alloc_func_addr", "get_free_func_addr", "ObjectDataType", "SoftPinAction"]

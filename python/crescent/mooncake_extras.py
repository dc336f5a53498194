"""The module-level helpers of Mooncake's `mooncake.store` besides the store
class (mooncake-integration/store/store_py.cpp at the commit in
../shared/mooncake/README.md): MooncakeHostMemAllocator, bind_to_numa_node,
get_alloc_func_addr / get_free_func_addr, and the store's setup_dummy and
_get_pyclient_capsule, with the reference's signatures and results.

- MooncakeHostMemAllocator.alloc(size) maps `size` bytes of anonymous shared
  memory (a memfd, MAP_SHARED | MAP_POPULATE; huge pages when
  MC_STORE_USE_HUGEPAGE is set, as the reference's ShmHelper) and returns its
  address; free(ptr) unmaps it (0) or returns -1 for an address it did not
  hand out.  A size of 0 raises RuntimeError, as the reference.
- bind_to_numa_node(node) runs the calling thread on that node and prefers it
  for allocations (Debian's libnuma1 through ctypes, the calls the reference
  makes); it warns and returns when NUMA is not available.
- get_alloc_func_addr() / get_free_func_addr(): addresses of C functions
  `void *(size_t)` and `void (void *)`; here libc's malloc and free (the
  reference's are NVMe-oF hugepage allocators, which return NULL in a build
  without NVMe-oF such as the one this was compared with).
"""
import ctypes
import ctypes.util
import enum
import logging
import mmap
import os
import threading

_log = logging.getLogger("crescent.mooncake")

_HUGE_2M = 2 << 20
INVALID_PARAMS = -600
FILE_NOT_FOUND = -1100


class _Enum(enum.Enum):
    """pybind11's enums: str() "SoftPinAction.ENABLE", int() the value."""

    def __int__(self):
        return self.value

    __index__ = __int__


class SoftPinAction(_Enum):
    """ReplicateConfig.soft_pin_action: ENABLE soft-pins the object (crescent's
    with_soft_pin); PRESERVE and DISABLE do not."""
    PRESERVE = 0
    ENABLE = 1
    DISABLE = 2


class ObjectDataType(_Enum):
    """ReplicateConfig.data_type: kept, not used by crescentd."""
    UNKNOWN = 0
    KVCACHE = 1
    TENSOR = 2
    WEIGHT = 3
    SAMPLE = 4
    ACTIVATION = 5
    GRADIENT = 6
    OPTIMIZER_STATE = 7
    METADATA = 8
    GENERAL = 9


class MooncakeHostMemAllocator:
    """Shared host memory, as the reference's (its ShmHelper)."""

    _lock = threading.Lock()
    _maps = {}  # address -> mmap, for every instance (the reference's is a singleton)

    def alloc(self, size):
        size = int(size)
        if size < 0:
            raise TypeError("alloc(): size must be a non-negative int")
        flags = os.MFD_CLOEXEC
        if os.environ.get("MC_STORE_USE_HUGEPAGE") is not None:
            flags |= os.MFD_HUGETLB
            size = (size + _HUGE_2M - 1) // _HUGE_2M * _HUGE_2M
        try:
            fd = os.memfd_create("mooncake_shm", flags)
        except OSError as e:
            raise RuntimeError(f"Failed to create anonymous shared memory: {e.strerror}")
        try:
            if size == 0:  # mmap would map the whole (empty) file: the reference's EINVAL
                raise RuntimeError("Failed to map shared memory: Invalid argument")
            os.ftruncate(fd, size)
            m = mmap.mmap(fd, size, mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                          mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            raise RuntimeError(f"Failed to map shared memory: {e.strerror}")
        finally:
            os.close(fd)  # the mapping keeps the memory
        address = ctypes.addressof(ctypes.c_char.from_buffer(m))
        with self._lock:
            self._maps[address] = m
        return address

    def free(self, ptr):
        with self._lock:
            m = self._maps.pop(int(ptr), None)
        if m is None:
            _log.error("Attempted to free unknown shared memory address: %s", ptr)
            return -1
        try:
            m.close()
        except BufferError:  # a view still exported by Python code: keep it mapped
            with self._lock:
                self._maps[int(ptr)] = m
            return -1
        return 0


_numa = None


def _libnuma():
    global _numa
    if _numa is None:
        name = ctypes.util.find_library("numa") or "libnuma.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            _numa = False
            return None
        for fn, res, args in [("numa_available", ctypes.c_int, []),
                              ("numa_max_node", ctypes.c_int, []),
                              ("numa_run_on_node", ctypes.c_int, [ctypes.c_int]),
                              ("numa_set_bind_policy", None, [ctypes.c_int]),
                              ("numa_set_preferred", None, [ctypes.c_int])]:
            getattr(lib, fn).restype, getattr(lib, fn).argtypes = res, args
        _numa = lib
    return _numa or None


def bind_to_numa_node(node):
    """Runs this thread on `node` and prefers it for allocations (None)."""
    node = int(node)
    numa = _libnuma()
    if numa is None or numa.numa_available() < 0:
        _log.warning("NUMA is not available on this system; binding skipped")
        return None
    max_node = numa.numa_max_node()
    if node < 0 or node > max_node:
        _log.warning("Invalid NUMA node: %d. Valid range: 0-%d", node, max_node)
    if numa.numa_run_on_node(node) != 0:
        _log.warning("numa_run_on_node failed for node %d", node)
    numa.numa_set_bind_policy(0)   # non-strict, as the reference
    numa.numa_set_preferred(node)
    return None


_libc = ctypes.CDLL(None)


def get_alloc_func_addr():
    return ctypes.cast(_libc.malloc, ctypes.c_void_p).value


def get_free_func_addr():
    return ctypes.cast(_libc.free, ctypes.c_void_p).value


def _get_pyclient_from_wrapper(wrapper):
    """The module-level form of _get_pyclient_capsule: refused the same way."""
    return wrapper._get_pyclient_capsule()


class _Extras:
    """Mixed into MooncakeDistributedStore."""

    def setup_dummy(self, mem_pool_size, local_buffer_size, server_address):
        """The reference's dummy client attaches to a separate Mooncake
        `mooncake_client` process over its IPC socket and returns -1 when
        none answers.  crescent has no such process (an engine hosts its own
        segment: setup(..., global_segment_size=N)), so this is always -1."""
        int(mem_pool_size), int(local_buffer_size), str(server_address)  # the reference's types
        _log.error("setup_dummy: crescent has no separate real-client process to attach "
                   "to; call setup(..., global_segment_size=N) to host a segment in this "
                   "process")
        return -1

    def get_tensor_into_cuda(self, key, tensor):
        """-600 always, as the reference with a real (non-dummy) client: its
        CUDA reads go through the dummy client's CUDA IPC ("CUDA IPC tensor
        read requires a dummy client"), and setup_dummy is -1 here."""
        return self.batch_get_tensor_into_cuda([key], [tensor])[0]

    def batch_get_tensor_into_cuda(self, keys, tensors_list):
        """[-600] per key (see get_tensor_into_cuda)."""
        _log.error("batch_get_tensor_into_cuda: CUDA IPC tensor read requires a dummy client")
        return [INVALID_PARAMS] * len(list(keys))

    def save_tensor_to_safetensor(self, key, file_name=None):
        """Writes the tensor under `key` to a safetensors file (`file_name`,
        else the key) through the `safetensors` package, as the reference:
        0; -1100 (FILE_NOT_FOUND) when the key holds no tensor; -600 when
        the package is missing or the write fails."""
        if getattr(self, "_client", None) is None:
            return INVALID_PARAMS
        tensor = self.get_tensor(key)
        if tensor is None:
            _log.error("Failed to fetch tensor for key: %s", key)
            return FILE_NOT_FOUND
        try:
            import safetensors.torch
            safetensors.torch.save_file({str(key): tensor},
                                        key if file_name is None else str(file_name))
            return 0
        except Exception as e:  # the reference catches any Python error here
            _log.error("Failed to save tensor to safetensor file: %s", e)
            return INVALID_PARAMS

    def load_tensor_from_safetensor(self, key=None, file_name=None):
        """Reads a tensor from a safetensors file and puts it under `key`
        (else the file name): the entry named `key`, else the first one, as
        the reference.  The tensor, or None (no package, no file, empty
        file, a failed put)."""
        if file_name is None:
            raise TypeError("load_tensor_from_safetensor() missing argument 'file_name'")
        if getattr(self, "_client", None) is None:
            return None
        try:
            import safetensors.torch
            loaded = safetensors.torch.load_file(str(file_name))
        except Exception as e:
            _log.error("Failed to load tensor from safetensor file: %s", e)
            return None
        if not loaded:
            return None
        target = str(file_name) if key is None else str(key)
        tensor = loaded[target] if key is not None and target in loaded \
            else loaded[next(iter(loaded))]
        return tensor if self.put_tensor(target, tensor) == 0 else None

    def alloc_from_mem_pool(self, size):
        """The dummy client's shared pool hands out memory; a real client has
        no pool and the reference returns 0 (NULL) there, as here, where
        setup_dummy never succeeds."""
        int(size)
        return 0

    def _get_pyclient_capsule(self):
        """The reference hands C++ code (its EngramStore) a capsule holding
        its PyClient; crescent's client is a libcrescent handle that this
        object serialises with a lock, so no handle is given out: C and C++
        engines link libcrescent (include/crescent/client.h) instead."""
        raise NotImplementedError(
            "_get_pyclient_capsule: crescent has no Mooncake PyClient to hand out; C/C++ "
            "code links libcrescent (include/crescent/client.h) and opens its own cr_client")

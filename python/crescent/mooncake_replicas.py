"""MooncakeDistributedStore's replica and task calls: get_replica_desc and its
batch form, batch_replica_clear, create_copy_task / create_move_task /
query_task, and put_from_with_metadata, with the reference's result types
(mooncake.store's ReplicaDescriptor, MemoryDescriptor, Descriptor,
QueryTaskResponse and the ReplicaStatus / TaskStatus / TaskType enums) so
code that inspects them runs unchanged.

Task ids are the reference's (first, second) pair of 64-bit integers: the
16 bytes of crescent's task id read as two little-endian halves."""
import ctypes
import enum
import struct

from crescent import _lib
from crescent._lib import lib, c_char_p, c_int, c_size_t, c_void_p
from crescent import mooncake_store as _ms

OK = 0
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
TASK_NOT_FOUND = -1400   # the reference's ErrorCode for a task id nobody knows
_ID = ctypes.c_uint8 * _lib.CLIENT_ID_BYTES
_TASK_MESSAGE_MAX = 256


class _IntLike(enum.Enum):
    """pybind11's enums: str() "TaskStatus.SUCCESS", int() the value."""

    def __int__(self):
        return self.value

    __index__ = __int__


class ReplicaStatus(_IntLike):
    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


class TaskStatus(_IntLike):
    PENDING = 0
    PROCESSING = 1
    FAILED = 2
    SUCCESS = 3


class TaskType(_IntLike):
    REPLICA_COPY = 0
    REPLICA_MOVE = 1


# crescent's task statuses (include/crescent/client.h) -> the reference's.
_TASK_STATUS = {0: TaskStatus.PENDING, 1: TaskStatus.PROCESSING, 2: TaskStatus.SUCCESS,
                3: TaskStatus.FAILED}


class Descriptor:
    """Where a memory replica's bytes are: address, size, the segment's endpoint."""

    def __init__(self, buffer_address, size, transport_endpoint):
        self.buffer_address = buffer_address
        self.size = size
        self.transport_endpoint = transport_endpoint

    def __repr__(self):
        return (f"<Descriptor size={self.size} buffer_address={self.buffer_address} "
                f"transport_endpoint={self.transport_endpoint}>")


class MemoryDescriptor:
    def __init__(self, buffer_descriptor):
        self.buffer_descriptor = buffer_descriptor


class DiskDescriptor:
    """A disk replica: a file of the shared file tier (--file-tier-dir)."""

    def __init__(self, file_path, object_size):
        self.file_path = file_path
        self.object_size = object_size

    def __repr__(self):
        return f"<DiskDescriptor file_path={self.file_path} object_size={self.object_size}>"


class LocalDiskDescriptor:
    """A local_disk replica: a store server's SSD (crescent-store --ssd-dir).
    The reference's Python binding has no accessor for its C++
    LocalDiskDescriptor; crescent adds get_local_disk_descriptor()."""

    def __init__(self, transport_endpoint, segment_name, object_size, position):
        self.transport_endpoint = transport_endpoint
        self.segment_name = segment_name
        self.object_size = object_size
        self.position = position

    def __repr__(self):
        return (f"<LocalDiskDescriptor transport_endpoint={self.transport_endpoint} "
                f"segment_name={self.segment_name} object_size={self.object_size}>")


class ReplicaDescriptor:
    """One replica, as the reference's: exactly one of a memory replica
    (MemoryDescriptor), a disk replica (DiskDescriptor) or a local_disk
    replica; the get_*_descriptor of another kind raises RuntimeError."""

    def __init__(self, status, descriptor):
        self.status = status
        self._descriptor = descriptor

    def is_memory_replica(self):
        return isinstance(self._descriptor, MemoryDescriptor)

    def is_disk_replica(self):
        return isinstance(self._descriptor, DiskDescriptor)

    def is_local_disk_replica(self):
        return isinstance(self._descriptor, LocalDiskDescriptor)

    def get_memory_descriptor(self):
        if not self.is_memory_replica():
            raise RuntimeError("Expected MemoryDescriptor")
        return self._descriptor

    def get_disk_descriptor(self):
        if not self.is_disk_replica():
            raise RuntimeError("Expected DiskDescriptor")
        return self._descriptor

    def get_local_disk_descriptor(self):
        if not self.is_local_disk_replica():
            raise RuntimeError("Expected LocalDiskDescriptor")
        return self._descriptor

    def __repr__(self):
        return f"<ReplicaDescriptor status={self.status} {self._descriptor!r}>"


class QueryTaskResponse:
    def __init__(self, info):
        self.id = _pair(info.id)
        self.type = TaskType(info.type)
        self.status = _TASK_STATUS.get(info.status, TaskStatus.FAILED)
        self.created_at_ms_epoch = info.created_at_ms_epoch
        self.last_updated_at_ms_epoch = info.last_updated_at_ms_epoch
        self.assigned_client = _pair(info.assigned_client)
        self.message = info.message.decode(errors="replace")


class _TaskInfo(ctypes.Structure):
    """struct cr_task_info (include/crescent/client.h)."""
    _fields_ = [("id", _ID), ("type", c_int), ("status", c_int),
                ("created_at_ms_epoch", ctypes.c_int64),
                ("last_updated_at_ms_epoch", ctypes.c_int64), ("assigned_client", _ID),
                ("message", ctypes.c_char * _TASK_MESSAGE_MAX)]


class _KeyList(ctypes.Structure):
    _fields_ = [("count", c_size_t), ("keys", ctypes.POINTER(c_char_p))]


def _declare():
    P = ctypes.POINTER
    sigs = {
        "cr_client_batch_replica_clear": (c_int, [c_void_p, c_char_p, P(c_char_p), c_size_t,
                                                  c_char_p, P(_KeyList)]),
        "cr_client_key_list_free": (None, [P(_KeyList)]),
        "cr_client_create_copy_task": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p,
                                               P(c_char_p), c_size_t, P(_ID)]),
        "cr_client_create_move_task": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p,
                                               c_char_p, P(_ID)]),
        "cr_client_query_task": (c_int, [c_void_p, P(_ID), P(_TaskInfo)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


_declare()


def _pair(raw):
    return struct.unpack("<QQ", bytes(raw))


def _task_id(pair):
    first, second = pair
    return _ID.from_buffer_copy(struct.pack("<QQ", first, second))


def _key(key):
    return key.encode() if isinstance(key, str) else bytes(key)


_MEDIUM_MEMORY, _MEDIUM_DISK, _MEDIUM_LOCAL_DISK = 0, 1, 2  # enum cr_replica_medium


def _text(raw):
    return (raw or b"").decode(errors="surrogateescape")


def _descriptor(r):
    """The replica's descriptor by its medium (None: a memory replica with no
    handle, or a medium this module does not know)."""
    if r.medium == _MEDIUM_DISK:
        return DiskDescriptor(_text(r.file_path), r.object_size)
    if r.medium == _MEDIUM_LOCAL_DISK:
        return LocalDiskDescriptor(_text(r.endpoint), _text(r.segment_name), r.object_size,
                                   r.position)
    if r.medium == _MEDIUM_MEMORY and r.handle_count >= 1:
        h = r.handles[0]
        return MemoryDescriptor(Descriptor(h.buffer, h.size_bytes, _text(h.segment_name)))
    return None


def _descriptors(rl):
    out = []
    for i in range(rl.count):
        r = rl.replicas[i]
        descriptor = _descriptor(r)
        try:
            status = ReplicaStatus(r.status)
        except ValueError:
            status = ReplicaStatus.UNDEFINED
        out.append(ReplicaDescriptor(status, descriptor))
    return out


class _Replicas:
    """Mixed into MooncakeDistributedStore."""

    def get_replica_desc(self, key):
        """The object's replicas, [] when it is missing (as the reference)."""
        return self.batch_get_replica_desc([key]).get(key, [])

    def batch_get_replica_desc(self, keys):
        """{key: [ReplicaDescriptor]} for the keys found; missing keys are left out."""
        keys = list(keys)
        out = _lib.ReplicaLists()
        found = {}
        with self._lock:
            if self._client is None or not keys:
                return found
            array = (c_char_p * len(keys))(*[_key(k) for k in keys])
            rc = lib.cr_client_batch_get_replica_list(self._client, self._tenant, array,
                                                      len(keys), ctypes.byref(out))
            try:
                if rc != OK:
                    return found
                for i in range(min(out.count, len(keys))):
                    if out.lists[i].status == OK:
                        found[keys[i]] = _descriptors(out.lists[i])
            finally:
                lib.cr_client_replica_lists_free(ctypes.byref(out))
        return found

    def batch_replica_clear(self, keys, segment_name=""):
        """Clears the keys' replicas (on segment_name, or all), once their
        leases have run out; returns the keys cleared."""
        keys = list(keys)
        out = _KeyList()
        with self._lock:
            if self._client is None or not keys:
                return []
            array = (c_char_p * len(keys))(*[_key(k) for k in keys])
            rc = lib.cr_client_batch_replica_clear(self._client, self._tenant, array, len(keys),
                                                   _key(segment_name) if segment_name else None,
                                                   ctypes.byref(out))
            try:
                if rc != OK:
                    return []
                return [out.keys[i].decode(errors="surrogateescape") for i in range(out.count)]
            finally:
                lib.cr_client_key_list_free(ctypes.byref(out))

    def create_copy_task(self, key, targets):
        """((first, second) task id, 0) or ((0, 0), negative ErrorCode)."""
        targets = list(targets)
        task = _ID()
        with self._lock:
            if self._client is None:
                return (0, 0), INVALID_PARAMS
            array = (c_char_p * len(targets))(*[_key(t) for t in targets])
            rc = lib.cr_client_create_copy_task(self._client, self._tenant, _key(key), None,
                                                array, len(targets), ctypes.byref(task))
        return (_pair(task), OK) if rc == OK else ((0, 0), _task_code(rc))

    def create_move_task(self, key, source, target):
        task = _ID()
        with self._lock:
            if self._client is None:
                return (0, 0), INVALID_PARAMS
            rc = lib.cr_client_create_move_task(self._client, self._tenant, _key(key),
                                                _key(source), _key(target), ctypes.byref(task))
        return (_pair(task), OK) if rc == OK else ((0, 0), _task_code(rc))

    def query_task(self, task_id):
        """(QueryTaskResponse, 0), or (None, negative ErrorCode)."""
        info = _TaskInfo()
        with self._lock:
            if self._client is None:
                return None, INVALID_PARAMS
            rc = lib.cr_client_query_task(self._client, ctypes.byref(_task_id(task_id)),
                                          ctypes.byref(info))
        if rc == OK:
            return QueryTaskResponse(info), OK
        return None, TASK_NOT_FOUND if rc == OBJECT_NOT_FOUND else _ms._code(rc)

    def put_from_with_metadata(self, key, buffer_ptr, metadata_buffer_ptr, size, metadata_size,
                               config=None):
        """Stores the metadata bytes followed by the data bytes (the
        reference's layout), as one object.  No data (size 0) stores nothing
        and returns 0, as the reference does (it logs "empty data")."""
        if size < 0 or metadata_size < 0:
            return INVALID_PARAMS
        if size == 0:
            return OK
        if metadata_size == 0:
            return self.put_from(key, buffer_ptr, size, config)
        return self.batch_put_from_multi_buffers([key], [[metadata_buffer_ptr, buffer_ptr]],
                                                 [[metadata_size, size]], config)[0]


def _task_code(rc):
    """A segment crescentd does not know is the reference's INVALID_PARAMS
    for a task (it checks the names before creating one)."""
    if rc == -101:   # SEGMENT_NOT_FOUND
        return INVALID_PARAMS
    return _ms._code(rc)

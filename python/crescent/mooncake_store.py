"""MooncakeDistributedStore: Mooncake's Python store class, over libcrescent.

The reference is `mooncake.store.MooncakeDistributedStore` (Mooncake's
mooncake-integration/store/store_py.cpp): the same method names, positional
and keyword arguments, return values and error codes, so that engines written
against it (SGLang HiCache, LMCache, vLLM) run unchanged.  Nothing raises for
a refused call: methods return 0 / a size / a list, or the reference's
negative ErrorCode (-704 OBJECT_NOT_FOUND, -706 OBJECT_HAS_LEASE, ...), and
`get` returns b"" and `get_buffer` None, as the reference does.  crescent.Store
is the same client with exceptions instead.

setup(..., global_segment_size=N) makes this process host an N-byte segment of
its own memory (libcrescent's embedded store server, include/crescent/host.h:
a transfer server thread over tcp, shm for same-host peers and verbs where a
device exists, a keep-alive thread that remounts when the master asks), as
Mooncake's real client does; close() (or the interpreter's exit) unmounts it.
docs/python.md lists every method of the reference with crescent's status.

Thread safety: one lock serialises the calls of one store object (libcrescent's
client is single-threaded); transfers run with the GIL released.
"""
import atexit
import ctypes
import mmap
import os
import re
import socket
import threading
import weakref

from crescent import _lib
from crescent._lib import lib
from crescent.mooncake_extras import ObjectDataType, SoftPinAction

OK = 0
INTERNAL_ERROR = -1
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
OBJECT_ALREADY_EXISTS = -705
OBJECT_HAS_LEASE = -706
TRANSFER_FAIL = -800
RPC_FAIL = -900

# Health-check answers (the reference's HC_* values).
HC_OK, HC_NOT_INITIALIZED, HC_MASTER_UNREACHABLE = 0, 1, 2

# libcrescent's own statuses (transport, local) -> the reference's ErrorCode;
# the master's statuses carry the reference's values already.
_STATUS_MAP = {-1: INTERNAL_ERROR,   # AGAIN
               -2: -901,             # TIMEOUT -> RPC_TIMEOUT
               -3: INTERNAL_ERROR,   # NOMEM
               -4: RPC_FAIL,         # SHUTDOWN
               -5: TRANSFER_FAIL,    # IO (no replica could be read or written)
               -6: RPC_FAIL,         # PROTOCOL
               -7: -801,             # CHECKSUM -> CHECKSUM_MISMATCH
               -8: -707,             # LEASE_EXPIRED
               -707: -703}           # OBJECT_NOT_READY -> REPLICA_IS_NOT_READY

DEFAULT_GLOBAL_SEGMENT_SIZE = 16 << 20   # the reference's defaults (dict form)
DEFAULT_LOCAL_BUFFER_SIZE = 16 << 20
DEFAULT_MASTER_SERVER_ADDR = "127.0.0.1:50051"


def _code(status):
    return _STATUS_MAP.get(status, status)


def _b(text):
    return text.encode() if isinstance(text, str) else bytes(text)


def _size(value):
    """An int, or text as the reference's config takes it ("1073741824",
    "1GB", "512MiB", "64 mb")."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)(i?b)?\s*", str(value), re.I)
    if not m:
        raise ValueError(f"not a size: {value!r}")
    return int(m.group(1)) << (10 * " kmgt".index((m.group(2) or " ").lower()))


def _endpoint(address):
    """Mooncake's "host:port" (or crescent's scheme://...) -> libcrescent's endpoint."""
    return address if "://" in address else f"tcp://{address}"


class ReplicateConfig:
    """The reference's ReplicateConfig.  replica_num, with_soft_pin (older
    Mooncake's name; soft_pin_action at this commit), preferred_segment and
    preferred_segments reach crescentd; the others are kept for callers that
    set them and have no effect (docs/python.md)."""

    def __init__(self):
        self.replica_num = 1
        self.nof_replica_num = 0
        self.dfs_replica_num = 0
        self.soft_pin_action = SoftPinAction.PRESERVE
        self.soft_pin_ttl_ms = 0
        self.with_soft_pin = False
        self.with_hard_pin = False
        self.preferred_segments = []
        self.preferred_nof_segments = []
        self.preferred_segment = ""
        self.prefer_alloc_in_same_node = False
        self.data_type = ObjectDataType.UNKNOWN
        self.group_ids = []

    def __str__(self):
        return (f"ReplicateConfig: {{ replica_num: {self.replica_num}, with_soft_pin: "
                f"{self._soft_pin()}, preferred_segments: "
                f"{self.preferred_segments}, preferred_segment: {self.preferred_segment} }}")

    def _soft_pin(self):
        return bool(self.with_soft_pin) or int(self.soft_pin_action) == SoftPinAction.ENABLE.value

    def _c(self, local_segment=None):
        segment = self.preferred_segment or (self.preferred_segments[0]
                                             if self.preferred_segments else "")
        if not segment and self.prefer_alloc_in_same_node and local_segment:
            segment = local_segment
        return _lib.ReplicateConfig(
            replica_num=max(1, int(self.replica_num)),
            with_soft_pin=self._soft_pin(),
            preferred_segment=_b(segment) if segment else None)


_handle_types = {}


class BufferHandle:
    """What get_buffer and batch_get_buffer return: the object's bytes in a
    ctypes array (so the buffer protocol works on every Python: memoryview,
    numpy and torch.frombuffer read it in place), with the reference's
    accessors ptr(), size() and len()."""

    def ptr(self):
        return ctypes.addressof(self)

    def size(self):
        return len(self)

    def __bytes__(self):
        return ctypes.string_at(ctypes.addressof(self), len(self))

    def __repr__(self):
        return f"<BufferHandle {len(self)} bytes at {ctypes.addressof(self):#x}>"


def _handle_type(size):
    """The BufferHandle class for `size` bytes."""
    cls = _handle_types.get(size)
    if cls is None:
        cls = type("BufferHandle", (ctypes.c_ubyte * size, BufferHandle), {})
        if len(_handle_types) < 4096:  # sizes repeat (KV blocks); bounded all the same
            _handle_types[size] = cls
    return cls


def buffer_handle(ptr, size):
    """A BufferHandle over `size` bytes that libcrescent malloc'd at `ptr`;
    freed once the handle and every view of it are gone."""
    if size == 0 or not ptr:
        if ptr:
            _lib.libc.free(ptr)
        return _handle_type(0)()
    handle = _handle_type(size).from_address(ptr)
    weakref.finalize(handle, _lib.libc.free, ptr)
    return handle


class _Host:
    """One segment this process hosts (libcrescent's cr_host)."""

    def __init__(self, master, size, address, no_shm, no_verbs, rdma_devices, memory=None,
                 name=None, ssd=None):
        ssd_dir, ssd_size = ssd if ssd else (None, 0)
        options = _lib.HostOptions(master=_b(master), segment_size=size, memory=memory,
                                   segment_name=_b(name) if name else None,
                                   data_address=_b(address), no_shm=no_shm, no_verbs=no_verbs,
                                   rdma_devices=_b(rdma_devices) if rdma_devices else None,
                                   ssd_dir=_b(ssd_dir) if ssd_dir else None, ssd_size=ssd_size)
        handle = ctypes.c_void_p()
        error = ctypes.create_string_buffer(512)
        self.status = lib.cr_host_start(ctypes.byref(options), ctypes.byref(handle), error,
                                        len(error))
        self.error = error.value.decode(errors="replace")
        self.handle = handle if self.status == OK else None
        self.memory_keep = None

    @property
    def name(self):
        return lib.cr_host_segment_name(self.handle).decode()

    @property
    def endpoint(self):
        return lib.cr_host_endpoint(self.handle).decode()

    def stats(self):
        s = _lib.HostStats()
        lib.cr_host_get_stats(self.handle, ctypes.byref(s))
        return {"pings": s.pings, "pings_failed": s.pings_failed, "remounts": s.remounts,
                "mounted": s.mounted, "tasks_run": s.tasks_run}

    def stop(self):
        rc = OK
        if self.handle is not None:
            rc = lib.cr_host_stop(self.handle)
            self.handle = None
        if self.memory_keep is not None:
            self.memory_keep.close()
            self.memory_keep = None
        return rc


# Hosts still mounted at exit are unmounted (the reference tears down in
# its resource tracker); a killed process's segments go after the client TTL.
_live = weakref.WeakSet()


@atexit.register
def _close_all():
    for store in list(_live):
        store.close()


def _ssd_offload(enabled, path, size):
    """(directory, bytes) of the hosted segment's SSD tier, None when off, or
    a sentence saying what is missing.  As the reference: the path falls back
    to $MOONCAKE_OFFLOAD_FILE_STORAGE_PATH and the size to
    $MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES; with neither size, 90% of what
    the directory's file system has free at setup."""
    if not enabled:
        return None
    path = path or os.environ.get("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", "")
    if not path:
        return ("enable_ssd_offload needs ssd_offload_path (or "
                "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH): the SSD directory")
    size = size if size is not None else os.environ.get("MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES")
    try:
        if size is not None:
            size = _size(size)
        else:
            os.makedirs(path, mode=0o700, exist_ok=True)
            st = os.statvfs(path)
            size = st.f_bavail * st.f_frsize * 9 // 10
    except (ValueError, OSError) as e:
        return f"SSD offload in {path}: {e}"
    if size <= 0:
        return f"SSD offload in {path}: no room (ssd_offload_size or " \
               "MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES)"
    return (str(path), int(size))


def _local_address(local_hostname):
    """(bind address "ip:port", host text) from Mooncake's local_hostname
    ("host" or "host:port"; port 0 or none: an ephemeral port)."""
    host, _, port = local_hostname.rpartition(":") if local_hostname.count(":") == 1 \
        else (local_hostname, "", "")
    host = host or local_hostname
    try:
        ip = socket.gethostbyname(host)
    except OSError:
        ip = host
    return f"{ip}:{int(port) if port.isdigit() else 0}", host


from crescent.mooncake_methods import _Methods  # noqa: E402  (the calls, split by size)
from crescent.mooncake_tensors import _Tensors  # noqa: E402
from crescent.mooncake_tp import _TensorParallel  # noqa: E402
from crescent.mooncake_replicas import _Replicas  # noqa: E402
from crescent.mooncake_ranges import _Ranges  # noqa: E402
from crescent.mooncake_parallel import _Parallelism  # noqa: E402
from crescent.mooncake_extras import _Extras  # noqa: E402
from crescent.mooncake_offload import _Offload  # noqa: E402


class MooncakeDistributedStore(_Methods, _Tensors, _TensorParallel, _Parallelism, _Replicas,
                               _Ranges, _Extras, _Offload):
    """Mooncake's MooncakeDistributedStore over crescentd (see the module doc)."""

    def __init__(self):
        self._client = None
        self._lock = threading.Lock()
        self._hosts = []
        self._tenant = None
        self._hostname = ""
        self._local_buffer = None
        self._registered = set()
        self._registered_sizes = {}  # address -> bytes (the _with_parallelism_into forms)
        _live.add(self)

    # ---- setup and teardown --------------------------------------------------

    def setup(self, local_hostname=None, metadata_server=None, global_segment_size=None,
              local_buffer_size=None, protocol=None, rdma_devices=None,
              master_server_addr=None, engine=None, enable_ssd_offload=False,
              ssd_offload_path="", tenant_id="default", enable_client_http_server=False,
              client_http_port=9300, *, config=None, data_no_shm=False, timeout_ms=5000,
              ssd_offload_size=None, **kwargs):
        """setup(local_hostname, metadata_server, global_segment_size,
        local_buffer_size, protocol, rdma_devices, master_server_addr, ...)
        or setup(config_dict) / setup(config=dict).  Returns 0 or the
        reference's negative ErrorCode."""
        if isinstance(local_hostname, dict) or config is not None:
            return self._setup_dict(local_hostname if config is None else config)
        if "device_name" in kwargs:  # DistributedObjectStore's older name
            rdma_devices = kwargs.pop("device_name")
        if kwargs:
            raise TypeError(f"setup() got unexpected keyword arguments {sorted(kwargs)}")
        required = (local_hostname, metadata_server, global_segment_size, local_buffer_size,
                    protocol, rdma_devices, master_server_addr)
        if any(v is None for v in required):
            raise TypeError("setup() takes local_hostname, metadata_server, global_segment_size, "
                            "local_buffer_size, protocol, rdma_devices, master_server_addr "
                            "(or one config dict)")
        ssd = _ssd_offload(enable_ssd_offload, ssd_offload_path, ssd_offload_size)
        if isinstance(ssd, str):
            self.last_error = ssd
            return INVALID_PARAMS
        return self._setup(local_hostname, int(global_segment_size), int(local_buffer_size),
                           protocol, rdma_devices, master_server_addr, tenant_id, data_no_shm,
                           timeout_ms, ssd)

    def _setup_dict(self, config):
        config = {str(k): v for k, v in dict(config).items()}
        if not config.get("local_hostname") or not config.get("metadata_server"):
            return INVALID_PARAMS  # the reference requires both
        try:
            gss = _size(config.get("global_segment_size", DEFAULT_GLOBAL_SEGMENT_SIZE))
            lbs = _size(config.get("local_buffer_size", DEFAULT_LOCAL_BUFFER_SIZE))
        except ValueError:
            return INVALID_PARAMS
        no_shm = str(config.get("data_no_shm", "false")).lower() in ("1", "true", "yes")
        ssd = _ssd_offload(str(config.get("enable_ssd_offload", "false")).lower()
                           in ("1", "true", "yes"), config.get("ssd_offload_path") or "",
                           config.get("ssd_offload_size"))
        if isinstance(ssd, str):
            self.last_error = ssd
            return INVALID_PARAMS
        return self._setup(str(config["local_hostname"]), gss, lbs,
                           str(config.get("protocol", "tcp")),
                           str(config.get("rdma_devices", config.get("device_name", ""))),
                           str(config.get("master_server_addr",
                                          config.get("master_server_address",
                                                     DEFAULT_MASTER_SERVER_ADDR))),
                           str(config.get("tenant_id", "default")), no_shm,
                           int(config.get("timeout_ms", 5000)), ssd)

    def _setup(self, local_hostname, global_segment_size, local_buffer_size, protocol,
               rdma_devices, master_server_addr, tenant_id, no_shm, timeout_ms, ssd=None):
        if not local_hostname or global_segment_size < 0 or local_buffer_size < 0:
            return INVALID_PARAMS
        if ssd and global_segment_size == 0:
            self.last_error = ("enable_ssd_offload is the SSD tier of the segment this process "
                               "hosts: it needs global_segment_size > 0")
            return INVALID_PARAMS
        if self._client is not None:
            return INVALID_PARAMS  # set up already (the reference refuses a second setup)
        self._master = _endpoint(master_server_addr)
        self._tenant = None if tenant_id in (None, "", "default") else _b(tenant_id)
        self._protocol = protocol
        self._no_shm, self._no_verbs = bool(no_shm), protocol != "rdma"
        self._rdma_devices = "" if rdma_devices in ("", "auto-discovery") else rdma_devices
        self._address, host = _local_address(local_hostname)
        self._hostname = local_hostname
        handle = ctypes.c_void_p()
        error = ctypes.create_string_buffer(256)
        options = _lib.Options(timeout_ms=timeout_ms)
        rc = lib.cr_client_open(_b(self._master), ctypes.byref(options), ctypes.byref(handle),
                                error, len(error))
        if rc != OK:
            self.last_error = error.value.decode()
            return _code(rc)
        self._client = handle
        version = _lib.Version()
        rc = lib.cr_client_get_version(self._client, ctypes.byref(version))
        if rc == OK and global_segment_size > 0:
            host = _Host(self._master, global_segment_size, self._address, self._no_shm,
                         self._no_verbs, self._rdma_devices, ssd=ssd)
            rc = host.status
            if rc == OK:
                self._hosts.append(host)
                self._hostname = host.endpoint  # as the reference: "host:port" after setup
            else:
                self.last_error = host.error
        if rc == OK and local_buffer_size > 0:
            rc = self._register_local_buffer(local_buffer_size)
        if rc != OK:
            self.last_error = getattr(self, "last_error", None) or self._error()
            self.close()
            return _code(rc)
        return OK

    def _register_local_buffer(self, size):
        """The reference's local buffer: memory registered for transfers
        (with an RDMA device its pages are pinned once), handed out by
        get_local_buffer() for zero-copy *_into / *_from calls."""
        # Faulted in now (MAP_POPULATE), not on the first reads into it.
        self._local_buffer = mmap.mmap(-1, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
        array = (ctypes.c_char * size).from_buffer(self._local_buffer)
        self._local_array = array
        return lib.cr_client_register_buffer(self._client, ctypes.addressof(array), size)

    def close(self):
        """Unmounts the segments this process hosts and closes the
        connection.  Returns 0 (also when not set up)."""
        with self._lock:
            rc = OK
            for host in self._hosts:
                status = host.stop()
                rc = rc or _code(status)
            self._hosts = []
            if self._client is not None:
                # get_offload_rpc_read_count outlives the client, as the reference's
                self._offload_reads_closed += lib.cr_client_offload_read_count(self._client)
                lib.cr_client_close(self._client)
                self._client = None
            self._registered, self._registered_sizes = set(), {}  # went with the client
            if self._local_buffer is not None:
                self._local_array = None
                try:
                    self._local_buffer.close()
                except BufferError:
                    pass  # a caller still holds a view: freed with it
                self._local_buffer = None
            return OK if rc in (OK, OBJECT_NOT_FOUND, -101) else rc

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown: modules may be gone)
            pass

    def init_all(self, protocol, device_name, mount_segment_size=16 << 20):
        """The reference's shortcut: setup("localhost:12345", ...) on the default master."""
        return self.setup("localhost:12345", "127.0.0.1:2379", mount_segment_size, 1 << 30,
                          protocol, device_name, DEFAULT_MASTER_SERVER_ADDR)

    def health_check(self):
        """0 healthy, 1 not set up / closed, 2 the master does not answer."""
        with self._lock:
            if self._client is None:
                return HC_NOT_INITIALIZED
            return HC_OK if lib.cr_client_ping(self._client, None) == OK \
                else HC_MASTER_UNREACHABLE

    def get_hostname(self):
        """This client's transfer address: "ip:port" of the segment it hosts,
        else the local_hostname given to setup."""
        return self._hostname

    def get_local_buffer(self):
        """crescent's: a memoryview of the registered local buffer (or None)."""
        return None if self._local_buffer is None else memoryview(self._local_buffer)

    # ---- segments -----------------------------------------------------------

    def allocate_and_mount_segment(self, size, protocol="tcp", location=""):
        """Hosts one more segment of `size` bytes; returns {"ret",
        "segment_ids", "allocated_size"} as the reference."""
        with self._lock:
            if self._client is None:
                return {"ret": INVALID_PARAMS, "segment_ids": [], "allocated_size": 0}
            host = _Host(self._master, int(size), self._address, self._no_shm,
                         protocol != "rdma", self._rdma_devices)
            if host.status != OK:
                self.last_error = host.error
                return {"ret": _code(host.status), "segment_ids": [], "allocated_size": 0}
            self._hosts.append(host)
            return {"ret": OK, "segment_ids": [host.name],
                    "allocated_size": lib.cr_host_size(host.handle)}

    def mount_segment(self, path, size, offset=0, protocol="tcp", location=""):
        """Maps `size` bytes of the file at `path` from `offset` (e.g. a
        /dev/shm file) and hosts them as a segment; returns {"ret",
        "segment_ids"}."""
        with self._lock:
            if self._client is None:
                return {"ret": INVALID_PARAMS, "segment_ids": []}
            try:
                with open(path, "r+b") as f:
                    mapping = mmap.mmap(f.fileno(), int(size), offset=int(offset))
            except (OSError, ValueError) as e:
                self.last_error = f"mount_segment: {path}: {e}"
                return {"ret": INVALID_PARAMS, "segment_ids": []}
            anchor = (ctypes.c_char * int(size)).from_buffer(mapping)
            host = _Host(self._master, int(size), self._address, self._no_shm,
                         protocol != "rdma", self._rdma_devices,
                         memory=ctypes.addressof(anchor))
            del anchor
            if host.status != OK:
                mapping.close()
                self.last_error = host.error
                return {"ret": _code(host.status), "segment_ids": []}
            host.memory_keep = mapping
            self._hosts.append(host)
            return {"ret": OK, "segment_ids": [host.name]}

    def unmount_segment(self, segment_ids, grace_period_seconds=0):
        """Unmounts the named segments this process hosts; 0, or -101 when
        one is not among them (the others are still unmounted)."""
        with self._lock:
            rc = OK
            wanted = set(segment_ids)
            for host in [h for h in self._hosts if h.name in wanted]:
                host.stop()
                self._hosts.remove(host)
                wanted.discard(host.name)
            return -101 if wanted else rc

    unmount_and_free_segment = unmount_segment

    def host_stats(self):
        """crescent's: keep-alive counters of each hosted segment, by name."""
        return {h.name: h.stats() for h in self._hosts}

    # ---- plumbing ------------------------------------------------------------

    def _error(self):
        return lib.cr_client_last_error(self._client).decode() if self._client else ""


__all__ = ["MooncakeDistributedStore", "ReplicateConfig", "BufferHandle"]

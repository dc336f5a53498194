"""ctypes declarations of libcrescent (include/crescent/client.h, error.h).

The library is found, in order: $CRESCENT_LIB (a path to libcrescent.so);
zig-out/lib of the checkout this package sits in; the system's library path
(ldconfig, LD_LIBRARY_PATH).  Struct layouts mirror client.h field for field.
"""
import ctypes
import ctypes.util
import os

c_char_p = ctypes.c_char_p
c_size_t = ctypes.c_size_t
c_int = ctypes.c_int
c_bool = ctypes.c_bool
c_u64 = ctypes.c_uint64
c_i64 = ctypes.c_int64
c_void_p = ctypes.c_void_p

CLIENT_ID_BYTES = 16


class Options(ctypes.Structure):
    _fields_ = [("timeout_ms", c_int), ("client_id", ctypes.POINTER(ctypes.c_uint8)),
                ("zmq_context", c_void_p),
                # NULL: CRESCENT_CURVE_SERVER_KEY / _PUBLIC_KEY / _SECRET_KEY, else plain TCP
                ("curve_server_key", c_char_p), ("curve_public_key", c_char_p),
                ("curve_secret_key", c_char_p),
                # NULL: CRESCENT_ADMIN_TOKEN, else none (crescentd's --admin-token-file)
                ("admin_token", c_char_p)]


class BufHandle(ctypes.Structure):
    _fields_ = [("segment_name", c_char_p), ("size_bytes", c_u64), ("buffer", c_u64),
                ("status", c_int), ("transport_endpoint", c_char_p),
                # the master's data-plane capability for this range (48 bytes)
                ("has_capability", c_bool), ("capability", ctypes.c_uint8 * 48)]


class Replica(ctypes.Structure):
    # medium: 0 memory (handles), 1 disk (file_path), 2 local_disk (endpoint)
    _fields_ = [("status", c_int), ("handle_count", c_size_t),
                ("handles", ctypes.POINTER(BufHandle)), ("medium", c_int),
                ("file_path", c_char_p), ("endpoint", c_char_p), ("segment_name", c_char_p),
                ("object_size", c_u64), ("position", c_u64),
                # local_disk: the read capability for "<segment_name>#ssd" (48 bytes)
                ("has_capability", c_bool), ("capability", ctypes.c_uint8 * 48)]


class ReplicaList(ctypes.Structure):
    _fields_ = [("key", c_char_p), ("status", c_int), ("count", c_size_t),
                ("replicas", ctypes.POINTER(Replica)), ("has_checksum", c_bool),
                ("checksum_xxh3", c_u64), ("lease_ttl_ms", c_u64)]


class ReplicaLists(ctypes.Structure):
    _fields_ = [("count", c_size_t), ("lists", ctypes.POINTER(ReplicaList))]


class StatusList(ctypes.Structure):
    _fields_ = [("count", c_size_t), ("statuses", ctypes.POINTER(c_int))]


class Version(ctypes.Structure):
    _fields_ = [("version", ctypes.c_char * 64), ("ready", c_bool)]


class ReplicateConfig(ctypes.Structure):
    _fields_ = [("replica_num", c_u64), ("with_soft_pin", c_bool),
                ("preferred_segment", c_char_p)]


class PutItem(ctypes.Structure):
    _fields_ = [("key", c_char_p), ("size_bytes", c_u64),
                ("config", ctypes.POINTER(ReplicateConfig)), ("block", c_void_p)]


class PutData(ctypes.Structure):
    _fields_ = [("key", c_char_p), ("data", c_void_p), ("len", c_size_t),
                ("config", ctypes.POINTER(ReplicateConfig)), ("status", c_int)]


class GetBuffer(ctypes.Structure):
    _fields_ = [("key", c_char_p), ("buf", c_void_p), ("cap", c_size_t), ("len", c_size_t),
                ("status", c_int)]


def _candidates():
    env = os.environ.get("CRESCENT_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    checkout = os.path.normpath(os.path.join(here, "..", ".."))
    yield os.path.join(checkout, "zig-out", "lib", "libcrescent.so")
    found = ctypes.util.find_library("crescent")
    if found:
        yield found
    yield "libcrescent.so"


def _load():
    errors = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            errors.append(f"{path}: no such file")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
    raise OSError("libcrescent.so not found (build it with `zig build`, or set CRESCENT_LIB "
                  "to its path): " + "; ".join(errors))


class ReadLatency(ctypes.Structure):
    """struct cr_read_latency (include/crescent/client.h): one tier's reads."""
    _fields_ = [("count", c_u64), ("sum_ns", c_u64), ("bound_ns", c_u64 * 19),
                ("buckets", c_u64 * 20)]


READ_TIERS = ("memory", "disk", "local_disk")  # enum cr_read_tier's order


class PutRetryStats(ctypes.Structure):
    """struct cr_put_retry_stats (include/crescent/client.h)."""
    _fields_ = [("deadline_ms", c_int), ("puts_retried", c_u64), ("retries", c_u64),
                ("recovered", c_u64), ("gave_up", c_u64)]


def _declare(lib):
    P = ctypes.POINTER
    sigs = {
        "cr_client_open": (c_int, [c_char_p, P(Options), P(c_void_p), c_char_p, c_size_t]),
        "cr_client_close": (None, [c_void_p]),
        "cr_client_last_error": (c_char_p, [c_void_p]),
        "cr_client_set_id": (None, [c_void_p, c_char_p]),
        "cr_client_get_id": (None, [c_void_p, ctypes.POINTER(ctypes.c_char)]),
        "cr_client_get_version": (c_int, [c_void_p, P(Version)]),
        "cr_client_ping": (c_int, [c_void_p, P(c_u64)]),
        "cr_client_put_start": (c_int, [c_void_p, c_char_p, P(PutItem), P(ReplicaList)]),
        "cr_client_put_end": (c_int, [c_void_p, c_char_p, c_char_p]),
        "cr_client_put_revoke": (c_int, [c_void_p, c_char_p, c_char_p]),
        "cr_client_exist_key": (c_int, [c_void_p, c_char_p, c_char_p, P(c_bool)]),
        "cr_client_batch_exist_key": (c_int, [c_void_p, c_char_p, P(c_char_p), c_size_t,
                                               P(StatusList)]),
        "cr_client_get_replica_list": (c_int, [c_void_p, c_char_p, c_char_p, P(ReplicaList)]),
        "cr_client_batch_get_replica_list": (c_int, [c_void_p, c_char_p, P(c_char_p), c_size_t,
                                                      P(ReplicaLists)]),
        "cr_client_remove": (c_int, [c_void_p, c_char_p, c_char_p, c_bool]),
        "cr_client_batch_remove": (c_int, [c_void_p, c_char_p, P(c_char_p), c_size_t, c_bool,
                                           P(StatusList)]),
        "cr_client_remove_by_regex": (c_int, [c_void_p, c_char_p, c_char_p, c_bool, P(c_i64)]),
        "cr_client_remove_all": (c_int, [c_void_p, c_char_p, c_bool, P(c_i64)]),
        "cr_client_put": (c_int, [c_void_p, c_char_p, c_char_p, c_void_p, c_size_t,
                                  P(ReplicateConfig)]),
        "cr_client_get": (c_int, [c_void_p, c_char_p, c_char_p, P(c_void_p), P(c_size_t)]),
        "cr_client_get_into": (c_int, [c_void_p, c_char_p, c_char_p, c_void_p, c_size_t,
                                       P(c_size_t)]),
        "cr_client_register_buffer": (c_int, [c_void_p, c_void_p, c_size_t]),
        "cr_client_unregister_buffer": (c_int, [c_void_p, c_void_p]),
        "cr_client_batch_put": (c_int, [c_void_p, c_char_p, P(PutData), c_size_t]),
        "cr_client_batch_get_into": (c_int, [c_void_p, c_char_p, P(GetBuffer), c_size_t]),
        "cr_client_replica_list_free": (None, [P(ReplicaList)]),
        "cr_client_replica_lists_free": (None, [P(ReplicaLists)]),
        "cr_client_status_list_free": (None, [P(StatusList)]),
        "cr_client_read_latency": (c_int, [c_void_p, c_int, P(ReadLatency)]),
        "cr_client_read_latency_metrics": (c_int, [c_void_p, c_char_p, c_size_t, P(c_size_t)]),
        "cr_client_offload_read_count": (c_u64, [c_void_p]),
        "cr_client_offload_shm_counts": (None, [c_void_p, P(c_u64), P(c_u64)]),
        "cr_client_set_put_retry_ms": (c_int, [c_void_p, c_int]),
        "cr_client_put_retry_stats": (None, [c_void_p, P(PutRetryStats)]),
        "cr_status_name": (c_char_p, [c_int]),
        "cr_strerror": (c_char_p, [c_int]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


lib = _declare(_load())

# cr_client_get hands back malloc'd bytes for the caller to free(): the C
# library's free, which libcrescent shares with this process.
libc = ctypes.CDLL(None)
libc.free.restype = None
libc.free.argtypes = [c_void_p]


class HostOptions(ctypes.Structure):
    """struct cr_host_options (include/crescent/host.h)."""
    _fields_ = [("master", c_char_p), ("segment_size", c_u64), ("memory", c_void_p),
                ("segment_name", c_char_p), ("data_address", c_char_p), ("no_shm", c_bool),
                ("no_verbs", c_bool), ("rdma_devices", c_char_p),
                ("rdma_gid_index_set", c_bool), ("rdma_gid_index", ctypes.c_uint8),
                ("ping_interval_ms", ctypes.c_uint32), ("timeout_ms", c_int),
                ("pin_serve_thread", c_bool), ("serve_cpu", c_int),
                ("mount_when_master_answers", c_bool),
                ("heartbeat", c_void_p), ("heartbeat_arg", c_void_p),
                ("ssd_read", c_void_p), ("ssd_read_arg", c_void_p),
                ("require_capability", c_bool),
                ("ssd_write", c_void_p), ("ssd_remove", c_void_p),
                ("ssd_capacity_bytes", c_u64),
                ("ssd_sync", c_void_p),  # a store server's reports (C callers)
                # the host's own SSD tier (setup(enable_ssd_offload=True))
                ("ssd_dir", c_char_p), ("ssd_size", c_u64),
                ("ssd_open", c_void_p)]  # same-host readers get the file (C callers)


class HostStats(ctypes.Structure):
    _fields_ = [("pings", c_u64), ("pings_failed", c_u64), ("remounts", c_u64),
                ("mounted", c_bool), ("tasks_run", c_u64)]


def _declare_host(lib):
    P = ctypes.POINTER
    sigs = {
        "cr_host_start": (c_int, [P(HostOptions), P(c_void_p), c_char_p, c_size_t]),
        "cr_host_stop": (c_int, [c_void_p]),
        "cr_host_segment_name": (c_char_p, [c_void_p]),
        "cr_host_endpoint": (c_char_p, [c_void_p]),
        "cr_host_protocol": (c_char_p, [c_void_p]),
        "cr_host_base": (c_void_p, [c_void_p]),
        "cr_host_size": (c_u64, [c_void_p]),
        "cr_host_get_stats": (None, [c_void_p, P(HostStats)]),
        "cr_host_drain_ssd": (c_int, [c_void_p, c_int, P(c_bool), c_char_p, c_size_t]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


_declare_host(lib)

"""Store: crescent's store master from Python, with the method names and
return values of Mooncake's DistributedObjectStore (setup, is_exist, remove,
remove_by_regex, remove_all, batch forms, close), over libcrescent.

Values move through libcrescent's data plane (put, get, get_into,
batch_put_from, batch_get_into, register_buffer, unregister_buffer), as
Mooncake's calls do.

Differences from the reference, on purpose: a failed call raises CrescentError
carrying the server's status and reason instead of returning a negative code
(get raises instead of returning b""; the batch forms still report per item),
get_into also takes a writable Python buffer (bytearray, memoryview, ctypes
array) in place of an address and size, and the store is also usable as a
context manager.  This process does not contribute memory: setup refuses a
nonzero global_segment_size (crescentd's local segment or crescent-store do;
MooncakeDistributedStore hosts a segment in the calling process).
"""
import ctypes
import uuid

from crescent import _lib
from crescent._lib import lib

OK = 0
OBJECT_NOT_FOUND = -704


class CrescentError(Exception):
    """A call crescentd refused or that could not reach it.

    status: the enum cr_status value (e.g. -704); name: its name
    ("OBJECT_NOT_FOUND"); reason: the sentence from crescentd or libcrescent."""

    def __init__(self, status, reason, call=None):
        self.status = status
        self.name = lib.cr_status_name(status).decode()
        self.reason = reason
        self.call = call
        where = f"{call}: " if call else ""
        text = reason or lib.cr_strerror(status).decode()
        if f"({self.name})" not in text:  # libcrescent's sentences already end with it
            text += f" ({self.name})"
        super().__init__(where + text)


def _b(text):
    return text.encode() if isinstance(text, str) else bytes(text)


def _keys(keys):
    array = (ctypes.c_char_p * len(keys))(*[_b(k) for k in keys])
    return array, len(keys)


def _endpoint(address):
    """Mooncake's "host:port" or a ZMQ endpoint."""
    return address if "://" in address else f"tcp://{address}"


def _replicas(rl):
    """A cr_replica_list as a list of replicas, each a list of handle dicts."""
    out = []
    for i in range(rl.count):
        r = rl.replicas[i]
        handles = []
        for j in range(r.handle_count):
            h = r.handles[j]
            handles.append({"segment_name": (h.segment_name or b"").decode(),
                            "size": h.size_bytes, "buffer": h.buffer, "status": h.status,
                            "transport_endpoint": (h.transport_endpoint or b"").decode(),
                            # the master's data-plane capability (48 bytes) or None
                            "capability": bytes(h.capability) if h.has_capability else None})
        tier = ("memory", "disk", "local_disk")[r.medium] if 0 <= r.medium < 3 else "?"
        entry = {"status": r.status, "handles": handles, "tier": tier}
        if r.medium == 1:
            entry["file_path"] = (r.file_path or b"").decode()
        elif r.medium == 2:
            entry["endpoint"] = (r.endpoint or b"").decode()
            entry["segment_name"] = (r.segment_name or b"").decode()
            entry["position"] = r.position
            # the master's read capability for "<segment_name>#ssd" (48 bytes) or None
            entry["capability"] = bytes(r.capability) if r.has_capability else None
        if r.medium != 0:
            entry["size"] = r.object_size
        out.append(entry)
    return out


def _config(config):
    """None, or a cr_replicate_config from an object or dict with the
    reference's ReplicateConfig fields."""
    if config is None:
        return None
    get = config.get if isinstance(config, dict) else lambda k, d: getattr(config, k, d)
    segment = get("preferred_segment", None)
    return ctypes.pointer(_lib.ReplicateConfig(
        replica_num=get("replica_num", 1), with_soft_pin=bool(get("with_soft_pin", False)),
        preferred_segment=_b(segment) if segment else None))


def _address(buffer, size=None, readonly_ok=False, keep=None):
    """(address, capacity) of an integer address with its size, or of a
    bytes-like object (writable unless readonly_ok; a read-only one other
    than bytes is copied into an array kept alive in `keep`)."""
    if isinstance(buffer, int):
        if size is None or size < 0:
            raise ValueError("an integer buffer address needs its size in bytes")
        return buffer, size
    if isinstance(buffer, bytes) and readonly_ok:  # CPython's bytes: its own memory, no copy
        if keep is not None:
            keep.append(buffer)
        cap = len(buffer) if size is None else size
        if cap > len(buffer):
            raise ValueError(f"size {cap} is larger than the buffer ({len(buffer)} bytes)")
        return ctypes.cast(ctypes.c_char_p(buffer), ctypes.c_void_p).value, cap
    view = memoryview(buffer).cast("B")
    if view.readonly:
        if not readonly_ok:
            raise TypeError("the buffer must be writable (bytearray, memoryview, ctypes array)")
        array = (ctypes.c_char * len(view)).from_buffer_copy(view)
    else:
        array = (ctypes.c_char * len(view)).from_buffer(view)
    if keep is not None:
        keep.append(array)
    cap = len(view) if size is None else size
    if cap > len(view):
        raise ValueError(f"size {cap} is larger than the buffer ({len(view)} bytes)")
    return ctypes.addressof(array), cap


class Store:
    """One connection to crescentd's store master.  Not thread-safe (one Store
    per thread, as libcrescent's client); several Stores may run concurrently."""

    def __init__(self):
        self._client = None
        self._tenant = None

    # ---- connection -------------------------------------------------------

    def setup(self, local_hostname="localhost", metadata_server="", global_segment_size=0,
              local_buffer_size=0, protocol="tcp", device_name="",
              master_server_address="127.0.0.1:50051", *, tenant=None, timeout_ms=5000,
              client_id=None):
        """Connects to the master at `master_server_address` ("host:port" as
        Mooncake writes it, or "tcp://host:port") and checks it answers.
        Returns 0.  `tenant` (crescent's; None: "default") scopes every key.

        local_hostname, metadata_server, local_buffer_size, protocol and
        device_name configure Mooncake's transfer engine, which crescent does
        not have: they are accepted for the reference's signature and unused.
        global_segment_size must be 0: this client reads and writes values but
        does not host a segment (crescentd's --local-segment-size or a
        crescent-store process contributes memory)."""
        if global_segment_size:
            raise ValueError("global_segment_size: the Python client does not host a segment; "
                             "pass 0 and give memory with crescentd --local-segment-size or "
                             "crescent-store --segment-size")
        if self._client is not None:
            raise CrescentError(-600, "setup called twice on one Store", "setup")
        options = _lib.Options(timeout_ms=timeout_ms)
        if client_id is not None:
            raw = uuid.UUID(str(client_id)).bytes
            self._id_buf = (ctypes.c_uint8 * 16)(*raw)
            options.client_id = self._id_buf
        handle = ctypes.c_void_p()
        error = ctypes.create_string_buffer(256)
        rc = lib.cr_client_open(_b(_endpoint(master_server_address)), ctypes.byref(options),
                                ctypes.byref(handle), error, len(error))
        if rc != OK:
            raise CrescentError(rc, error.value.decode(), "setup")
        self._client = handle
        self._tenant = None if tenant is None else _b(tenant)
        version = _lib.Version()
        self._check(lib.cr_client_get_version(self._client, ctypes.byref(version)), "setup")
        self.server_version = version.version.decode()
        return 0

    def close(self):
        """Closes the connection; the Store can be set up again.  Returns 0."""
        if self._client is not None:
            lib.cr_client_close(self._client)
            self._client = None
        return 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    @property
    def client_id(self):
        """This client's identity (a UUID string): the owner of its puts."""
        raw = (ctypes.c_char * 16)()
        lib.cr_client_get_id(self._need(), raw)
        return str(uuid.UUID(bytes=bytes(raw)))

    def ping(self):
        """Liveness ping; returns the server's client TTL in milliseconds."""
        ttl = ctypes.c_uint64()
        self._check(lib.cr_client_ping(self._need(), ctypes.byref(ttl)), "ping")
        return ttl.value

    # ---- queries ------------------------------------------------------------

    def is_exist(self, key):
        """1 if `key` exists (and is complete), 0 if not; raises on failure.
        Takes a read lease on an existing object, as ExistKey does."""
        exists = ctypes.c_bool()
        rc = lib.cr_client_exist_key(self._need(), self._tenant, _b(key), ctypes.byref(exists))
        self._check(rc, "is_exist")
        return 1 if exists.value else 0

    def batch_is_exist(self, keys):
        """For each key: 1 exists, 0 does not; raises when the call fails or a
        key's status is an error other than "not found"."""
        statuses = self._status_batch(lib.cr_client_batch_exist_key, keys, "batch_is_exist")
        out = []
        for key, status in zip(keys, statuses):
            if status not in (OK, OBJECT_NOT_FOUND):
                raise CrescentError(status, f"key {key!r}", "batch_is_exist")
            out.append(1 if status == OK else 0)
        return out

    def get_replica_list(self, key):
        """The object's replicas: [{"status", "handles": [{"segment_name", "size",
        "buffer", "status", "transport_endpoint"}]}].  Takes a read lease."""
        rl = _lib.ReplicaList()
        rc = lib.cr_client_get_replica_list(self._need(), self._tenant, _b(key), ctypes.byref(rl))
        try:
            self._check(rc, "get_replica_list")
            return _replicas(rl)
        finally:
            lib.cr_client_replica_list_free(ctypes.byref(rl))

    # ---- the two-phase put (metadata; the caller moves the bytes) -------------

    def put_start(self, key, size, replica_num=1, soft_pin=False, preferred_segment=None):
        """Allocates `replica_num` replicas of `size` bytes; returns them as
        get_replica_list does.  End with put_end (same Store) or put_revoke."""
        config = _lib.ReplicateConfig(replica_num=replica_num, with_soft_pin=soft_pin,
                                      preferred_segment=None if preferred_segment is None
                                      else _b(preferred_segment))
        item = _lib.PutItem(key=_b(key), size_bytes=size, config=ctypes.pointer(config))
        rl = _lib.ReplicaList()
        rc = lib.cr_client_put_start(self._need(), self._tenant, ctypes.byref(item),
                                     ctypes.byref(rl))
        try:
            self._check(rc, "put_start")
            return _replicas(rl)
        finally:
            lib.cr_client_replica_list_free(ctypes.byref(rl))

    def put_end(self, key):
        """Completes a put started by this Store.  Returns 0."""
        self._check(lib.cr_client_put_end(self._need(), self._tenant, _b(key)), "put_end")
        return 0

    def put_revoke(self, key):
        """Abandons a put started by this Store.  Returns 0."""
        self._check(lib.cr_client_put_revoke(self._need(), self._tenant, _b(key)), "put_revoke")
        return 0

    # ---- values (the data plane) ---------------------------------------------

    def put(self, key, value, config=None):
        """Stores the bytes of `value` (bytes-like; b"" stores an empty object) under `key`.
        config: None (1 replica) or an object/dict with replica_num,
        with_soft_pin, preferred_segment.  Returns 0."""
        keep = []
        addr, size = _address(value, readonly_ok=True, keep=keep)
        rc = lib.cr_client_put(self._need(), self._tenant, _b(key), addr, size, _config(config))
        self._check(rc, "put")
        return 0

    def get(self, key):
        """The object's bytes."""
        data = ctypes.c_void_p()
        size = ctypes.c_size_t()
        rc = lib.cr_client_get(self._need(), self._tenant, _b(key), ctypes.byref(data),
                               ctypes.byref(size))
        self._check(rc, "get")
        try:
            return ctypes.string_at(data, size.value)
        finally:
            _lib.libc.free(data)

    def get_into(self, key, buffer, size=None):
        """Reads the object straight into `buffer` (a writable bytes-like
        object, or the reference's integer address with `size`), no copy in
        between; returns the object's size.  A buffer too small raises
        CrescentError (INVALID_PARAMS) naming the size needed."""
        addr, cap = _address(buffer, size)
        got = ctypes.c_size_t()
        rc = lib.cr_client_get_into(self._need(), self._tenant, _b(key), addr, cap,
                                    ctypes.byref(got))
        self._check(rc, "get_into")
        return got.value

    def register_buffer(self, buffer, size=None):
        """Declares a buffer (as get_into takes it) that put/get_into will use,
        so a transport that needs registered memory moves it without a bounce
        copy; tcp and shm need none.  The buffer must outlive the Store's use
        of it.  Returns 0."""
        addr, cap = _address(buffer, size)
        self._check(lib.cr_client_register_buffer(self._need(), addr, cap), "register_buffer")
        return 0

    def unregister_buffer(self, buffer):
        """Undoes register_buffer for the buffer at that address (the same
        object or address); it may then be freed.  Raises CrescentError
        (INVALID_PARAMS) for a buffer that is not registered.  Returns 0."""
        addr = buffer if isinstance(buffer, int) else _address(buffer)[0]
        self._check(lib.cr_client_unregister_buffer(self._need(), addr), "unregister_buffer")
        return 0

    def batch_put_from(self, keys, buffer_ptrs, sizes, config=None):
        """Stores sizes[i] bytes at address buffer_ptrs[i] (or a bytes-like
        object there) under keys[i], all in one batch.  Per key 0 or the
        negative status, as the reference; raises only when the call fails whole."""
        keys, n = list(keys), len(keys)
        if not (len(buffer_ptrs) == n and len(sizes) == n):
            raise ValueError(f"batch_put_from: {n} keys, {len(buffer_ptrs)} buffers, "
                             f"{len(sizes)} sizes")
        cfg = _config(config)
        items = (_lib.PutData * n)()
        keep = []
        for i, (key, buf, size) in enumerate(zip(keys, buffer_ptrs, sizes)):
            addr, cap = _address(buf, size, readonly_ok=True, keep=keep)
            items[i] = _lib.PutData(key=_b(key), data=addr, len=size, config=cfg)
        self._check(lib.cr_client_batch_put(self._need(), self._tenant, items, n),
                    "batch_put_from")
        return [items[i].status for i in range(n)]

    def batch_get_into(self, keys, buffer_ptrs, sizes):
        """Reads keys[i] into buffer_ptrs[i] (an address, or a writable
        bytes-like object) of sizes[i] bytes, all in one batch.  Per key the
        bytes read or the negative status, as the reference; raises only when
        the call fails whole."""
        keys, n = list(keys), len(keys)
        if not (len(buffer_ptrs) == n and len(sizes) == n):
            raise ValueError(f"batch_get_into: {n} keys, {len(buffer_ptrs)} buffers, "
                             f"{len(sizes)} sizes")
        items = (_lib.GetBuffer * n)()
        for i, (key, buf, size) in enumerate(zip(keys, buffer_ptrs, sizes)):
            addr, cap = _address(buf, size)
            items[i] = _lib.GetBuffer(key=_b(key), buf=addr, cap=cap)
        self._check(lib.cr_client_batch_get_into(self._need(), self._tenant, items, n),
                    "batch_get_into")
        return [items[i].len if items[i].status == OK else items[i].status for i in range(n)]

    # ---- removal ------------------------------------------------------------

    def remove(self, key, force=False):
        """Removes `key` (force: even while a reader holds a lease).  Returns 0."""
        self._check(lib.cr_client_remove(self._need(), self._tenant, _b(key), force), "remove")
        return 0

    def batch_remove(self, keys, force=False):
        """Per key, 0 or the negative status (e.g. -704 not found), as the
        reference's batch calls report; raises only when the call fails whole."""
        fn = lambda c, t, k, n, out: lib.cr_client_batch_remove(c, t, k, n, force, out)  # noqa: E731
        return self._status_batch(fn, keys, "batch_remove")

    def remove_by_regex(self, regex, force=False):
        """Removes every key of this tenant matching the PCRE2 `regex`; returns
        how many.  Fails whole (nothing removed) when the pattern is bad or
        matches more than crescentd's --regex-max-matches keys."""
        removed = ctypes.c_int64()
        rc = lib.cr_client_remove_by_regex(self._need(), self._tenant, _b(regex), force,
                                           ctypes.byref(removed))
        self._check(rc, "remove_by_regex")
        return removed.value

    def remove_all(self, force=False):
        """Removes every object of this Store's tenant; returns how many."""
        removed = ctypes.c_int64()
        tenant = self._tenant if self._tenant is not None else b"default"
        rc = lib.cr_client_remove_all(self._need(), tenant, force, ctypes.byref(removed))
        self._check(rc, "remove_all")
        return removed.value

    # ---- plumbing -------------------------------------------------------------

    def read_latency(self):
        """This client's read latency per tier (docs/tiers.md, "Read latency"):
        {"memory"|"disk"|"local_disk": {"count": n, "sum_seconds": s,
        "buckets": [(upper bound in seconds or inf, reads up to it), ...]}},
        cumulative as Prometheus histograms."""
        out = {}
        for tier, name in enumerate(_lib.READ_TIERS):
            h = _lib.ReadLatency()
            self._check(lib.cr_client_read_latency(self._need(), tier, ctypes.byref(h)),
                        "read_latency")
            cumulative, buckets = 0, []
            for b in range(20):
                cumulative += h.buckets[b]
                buckets.append((h.bound_ns[b] / 1e9 if b < 19 else float("inf"), cumulative))
            out[name] = {"count": h.count, "sum_seconds": h.sum_ns / 1e9, "buckets": buckets}
        return out

    def read_latency_metrics(self):
        """The same as Prometheus text (crescent_client_read_latency_seconds)."""
        buf = ctypes.create_string_buffer(16384)
        n = ctypes.c_size_t()
        self._check(lib.cr_client_read_latency_metrics(self._need(), buf, len(buf),
                                                       ctypes.byref(n)), "read_latency_metrics")
        return buf.raw[:n.value].decode()

    def set_put_retry_ms(self, ms):
        """How long a put refused for room (NO_AVAILABLE_HANDLE: memory full
        while offloads to an SSD tier make room) is retried, with backoff;
        0: never.  Default 2000, or $CRESCENT_PUT_RETRY_MS (docs/tiers.md)."""
        self._check(lib.cr_client_set_put_retry_ms(self._need(), int(ms)), "set_put_retry_ms")

    def offload_shm_counts(self):
        """{"reads", "fallbacks"}: SSD-tier reads served from the file the
        store server passed over its shm socket (same host), and those asked
        for and refused (or failing a check), then read by tcp."""
        reads, fallbacks = _lib.c_u64(), _lib.c_u64()
        lib.cr_client_offload_shm_counts(self._need(), ctypes.byref(reads), ctypes.byref(fallbacks))
        return {"reads": reads.value, "fallbacks": fallbacks.value}

    def put_retry_stats(self):
        """{"deadline_ms", "puts_retried", "retries", "recovered", "gave_up"}."""
        s = _lib.PutRetryStats()
        lib.cr_client_put_retry_stats(self._need(), ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in _lib.PutRetryStats._fields_}

    def _need(self):
        if self._client is None:
            raise CrescentError(-600, "the Store is not set up (call setup first)")
        return self._client

    def _check(self, rc, call):
        if rc != OK:
            raise CrescentError(rc, lib.cr_client_last_error(self._client).decode(), call)

    def _status_batch(self, fn, keys, call):
        array, n = _keys(list(keys))
        out = _lib.StatusList()
        rc = fn(self._need(), self._tenant, array, n, ctypes.byref(out))
        try:
            self._check(rc, call)
            return [out.statuses[i] for i in range(out.count)]
        finally:
            lib.cr_client_status_list_free(ctypes.byref(out))

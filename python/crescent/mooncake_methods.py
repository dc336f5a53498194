"""The key-level calls of MooncakeDistributedStore (mooncake_store.py holds
setup, segments and teardown).  Every method returns what the reference
returns: 0 / a size / bytes / a list, or its negative ErrorCode."""
import ctypes

from crescent import _lib
from crescent._lib import lib
from crescent import mooncake_store as _ms

OK = 0
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
OBJECT_ALREADY_EXISTS = -705
OBJECT_NOT_READY = -707        # crescent's status for an object still being put

_exist_key = lib.cr_client_exist_key
_byref = ctypes.byref


def _key(key):
    return key.encode() if isinstance(key, str) else bytes(key)


def _keys(keys):
    return (ctypes.c_char_p * len(keys))(*[_key(k) for k in keys])


def _put_code(rc):
    """A put of a key that exists already is a success that keeps the first
    value, as the reference's put (its master says OBJECT_ALREADY_EXISTS)."""
    return OK if rc in (OK, OBJECT_ALREADY_EXISTS) else _ms._code(rc)


def _readable(value, keep):
    """(address, length) of a bytes-like value without copying it when it
    can be helped (bytes, writable buffers); other read-only ones copied."""
    if isinstance(value, bytes):
        keep.append(value)
        return ctypes.cast(ctypes.c_char_p(value), ctypes.c_void_p).value, len(value)
    view = memoryview(value)
    if not view.contiguous:
        raise ValueError("the value must be a contiguous buffer")
    view = view.cast("B")
    if view.readonly:
        array = (ctypes.c_char * len(view)).from_buffer_copy(view)
    else:
        array = (ctypes.c_char * len(view)).from_buffer(view)
    keep.append(array)
    return ctypes.addressof(array), len(view)


class _Methods:
    """Mixed into MooncakeDistributedStore."""

    # ---- existence and size ---------------------------------------------------

    def is_exist(self, key):
        """1 exists, 0 does not, negative ErrorCode on failure."""
        exists = ctypes.c_bool()
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            rc = _exist_key(self._client, self._tenant, _key(key), _byref(exists))
        if rc == OBJECT_NOT_READY:   # being put: not there yet, as the reference says
            return 0
        return (1 if exists.value else 0) if rc == OK else _ms._code(rc)

    def batch_is_exist(self, keys):
        """Per key 1 / 0 / negative ErrorCode."""
        statuses = self._statuses(lib.cr_client_batch_exist_key, keys)
        if isinstance(statuses, int):
            return [statuses] * len(keys)
        return [1 if s == OK else 0 if s in (OBJECT_NOT_FOUND, OBJECT_NOT_READY)
                else _ms._code(s) for s in statuses]

    def get_size(self, key):
        """The object's size in bytes, or a negative ErrorCode (-704)."""
        sizes = self._sizes([key])
        return sizes if isinstance(sizes, int) else sizes[0]

    # ---- puts -------------------------------------------------------------------

    def put(self, key, value, config=None):
        keep = []
        addr, size = _readable(value, keep)
        return self.put_from(key, addr, size, config)

    def put_from(self, key, buffer_ptr, size, config=None):
        """Stores `size` bytes at address `buffer_ptr`.  0 or negative."""
        return _put_code(self._put_raw(key, buffer_ptr, size, config))

    def _put_raw(self, key, buffer_ptr, size, config):
        cfg = self._config(config)
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            return lib.cr_client_put(self._client, self._tenant, _key(key), buffer_ptr, size,
                                     cfg)

    def put_parts(self, key, *parts, config=None):
        """Stores the parts (bytes-like, one byte per item) back to back."""
        value = b"".join(bytes(memoryview(p).cast("B")) for p in parts)
        return self.put(key, value, config)

    def put_batch(self, keys, values, config=None):
        """One int: 0 when every key was stored, else the first failure."""
        keep = []
        spans = [_readable(v, keep) for v in values]
        results = self._batch_put(keys, spans, config)
        if isinstance(results, int):
            return results
        return next((r for r in results if r != OK), OK)

    def batch_put_from(self, keys, buffer_ptrs, sizes, config=None):
        """Per key 0 or a negative ErrorCode."""
        if not (len(keys) == len(buffer_ptrs) == len(sizes)):
            return [INVALID_PARAMS] * len(keys)
        results = self._batch_put(keys, list(zip(buffer_ptrs, sizes)), config)
        return [results] * len(keys) if isinstance(results, int) else results

    def batch_put_from_multi_buffers(self, keys, all_buffer_ptrs, all_sizes, config=None):
        """keys[i]'s value is the concatenation of its buffers (gathered into
        one contiguous copy first: docs/python.md)."""
        if not (len(keys) == len(all_buffer_ptrs) == len(all_sizes)):
            return [INVALID_PARAMS] * len(keys)
        keep, spans = [], []
        for ptrs, sizes in zip(all_buffer_ptrs, all_sizes):
            if len(ptrs) == 1:
                spans.append((ptrs[0], sizes[0]))
                continue
            joined = b"".join(ctypes.string_at(p, s) for p, s in zip(ptrs, sizes))
            spans.append(_readable(joined, keep))
        results = self._batch_put(keys, spans, config)
        return [results] * len(keys) if isinstance(results, int) else results

    def upsert(self, key, value, config=None):
        keep = []
        addr, size = _readable(value, keep)
        return self.upsert_from(key, addr, size, config)

    def upsert_from(self, key, buffer_ptr, size, config=None):
        """Put, replacing an existing value (removed first, even under a
        lease: the reference's upsert replaces in place)."""
        rc = self._put_raw(key, buffer_ptr, size, config)
        if rc == OBJECT_ALREADY_EXISTS:
            rc = self.remove(key, force=True)
            if rc in (OK, OBJECT_NOT_FOUND):
                rc = self._put_raw(key, buffer_ptr, size, config)
        return _ms._code(rc)

    def upsert_parts(self, key, *parts, config=None):
        value = b"".join(bytes(memoryview(p).cast("B")) for p in parts)
        return self.upsert(key, value, config)

    def upsert_batch(self, keys, values, config=None):
        results = [self.upsert(k, v, config) for k, v in zip(keys, values)]
        return next((r for r in results if r != OK), OK)

    def batch_upsert_from(self, keys, buffer_ptrs, sizes, config=None):
        return [self.upsert_from(k, p, s, config) for k, p, s in zip(keys, buffer_ptrs, sizes)]

    # ---- gets ---------------------------------------------------------------------

    def get(self, key):
        """The object's bytes, or b"" when it cannot be read (missing, ...)."""
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        with self._lock:
            if self._client is None:
                return b""
            rc = lib.cr_client_get(self._client, self._tenant, _key(key), _byref(data),
                                   _byref(size))
        if rc != OK:
            return b""
        try:
            return ctypes.string_at(data, size.value) if size.value else b""
        finally:
            _lib.libc.free(data)

    def get_batch(self, keys):
        """Per key its bytes, b"" for one that cannot be read."""
        return [bytes(h) if h is not None else b"" for h in self.batch_get_buffer(keys)]

    def get_buffer(self, key):
        """A BufferHandle with the object's bytes, or None."""
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        with self._lock:
            if self._client is None:
                return None
            rc = lib.cr_client_get(self._client, self._tenant, _key(key), _byref(data),
                                   _byref(size))
        return _ms.buffer_handle(data.value, size.value) if rc == OK else None

    def batch_get_buffer(self, keys):
        """Per key a BufferHandle, or None: one BatchGetReplicaList for the
        sizes, then one batch read into the handles."""
        keys = list(keys)
        sizes = self._sizes(keys)
        if isinstance(sizes, int):
            return [None] * len(keys)
        handles = [_ms._handle_type(s)() if s >= 0 else None for s in sizes]
        wanted = [i for i, h in enumerate(handles) if h is not None and len(h) > 0]
        results = self._batch_get([keys[i] for i in wanted],
                                  [(ctypes.addressof(handles[i]), len(handles[i]))
                                   for i in wanted])
        for n, i in enumerate(wanted):
            if isinstance(results, int) or results[n] != len(handles[i]):
                handles[i] = None
        return handles

    def get_into(self, key, buffer_ptr, size):
        """Reads into [buffer_ptr, +size); the bytes read, or negative
        (-600 when the buffer is too small, -704 missing)."""
        got = ctypes.c_size_t()
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            rc = lib.cr_client_get_into(self._client, self._tenant, _key(key), buffer_ptr, size,
                                        _byref(got))
        return got.value if rc == OK else _ms._code(rc)

    def batch_get_into(self, keys, buffer_ptrs, sizes):
        """Per key the bytes read or a negative ErrorCode."""
        if not (len(keys) == len(buffer_ptrs) == len(sizes)):
            return [INVALID_PARAMS] * len(keys)
        results = self._batch_get(keys, list(zip(buffer_ptrs, sizes)))
        return [results] * len(keys) if isinstance(results, int) else results

    def batch_get_into_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     prefer_alloc_in_same_node=False):
        """keys[i] scattered over its buffers in order; per key the bytes read
        or negative.  A key with one buffer is read straight into it; with
        several, into one scratch buffer and copied out (docs/python.md)."""
        if not (len(keys) == len(all_buffer_ptrs) == len(all_sizes)):
            return [INVALID_PARAMS] * len(keys)
        spans, scratch = [], {}
        for i, (ptrs, sizes) in enumerate(zip(all_buffer_ptrs, all_sizes)):
            if len(ptrs) == 1:
                spans.append((ptrs[0], sizes[0]))
            else:
                buf = (ctypes.c_char * sum(sizes))()
                scratch[i] = buf
                spans.append((ctypes.addressof(buf), len(buf)))
        results = self._batch_get(keys, spans)
        if isinstance(results, int):
            return [results] * len(keys)
        for i, buf in scratch.items():
            if results[i] < 0:
                continue
            offset, left = 0, results[i]
            for ptr, size in zip(all_buffer_ptrs[i], all_sizes[i]):
                n = min(size, left)
                ctypes.memmove(ptr, ctypes.addressof(buf) + offset, n)
                offset, left = offset + n, left - n
        return results

    # ---- buffers --------------------------------------------------------------------

    def register_buffer(self, buffer_ptr, size):
        """0, or negative (-600 bad range, or already registered)."""
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            if buffer_ptr in self._registered:
                return INVALID_PARAMS
            rc = lib.cr_client_register_buffer(self._client, buffer_ptr, size)
            if rc == OK:
                self._registered.add(buffer_ptr)
                self._registered_sizes[buffer_ptr] = int(size)
        return _ms._code(rc)

    def unregister_buffer(self, buffer_ptr):
        """0, or -600 for a buffer that is not registered."""
        with self._lock:
            if self._client is None or buffer_ptr not in self._registered:
                return INVALID_PARAMS
            rc = lib.cr_client_unregister_buffer(self._client, buffer_ptr)
            if rc == OK:
                self._registered.discard(buffer_ptr)
                self._registered_sizes.pop(buffer_ptr, None)
        return _ms._code(rc)

    # ---- removal ----------------------------------------------------------------------

    def remove(self, key, force=False):
        """0, -704 missing, -706 a reader holds a lease (force: removed anyway)."""
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            rc = lib.cr_client_remove(self._client, self._tenant, _key(key), bool(force))
        return _ms._code(rc)

    def batch_remove(self, keys, force=False):
        fn = lambda c, t, k, n, out: lib.cr_client_batch_remove(c, t, k, n, bool(force), out)  # noqa: E731
        statuses = self._statuses(fn, keys)
        return [statuses] * len(keys) if isinstance(statuses, int) \
            else [_ms._code(s) for s in statuses]

    def remove_by_regex(self, regex_pattern, force=False):
        """How many objects were removed, or a negative ErrorCode."""
        removed = ctypes.c_int64()
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            rc = lib.cr_client_remove_by_regex(self._client, self._tenant, _key(regex_pattern),
                                               bool(force), _byref(removed))
        return removed.value if rc == OK else _ms._code(rc)

    def remove_all(self, force=False):
        """How many objects of this store's tenant were removed, or negative."""
        removed = ctypes.c_int64()
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            tenant = self._tenant if self._tenant is not None else b"default"
            rc = lib.cr_client_remove_all(self._client, tenant, bool(force), _byref(removed))
        return removed.value if rc == OK else _ms._code(rc)

    # ---- plumbing -----------------------------------------------------------------------

    def _config(self, config):
        if config is None:
            return None
        local = self._hosts[0].name if self._hosts else None
        if isinstance(config, dict):
            c = _ms.ReplicateConfig()
            for k, v in config.items():
                setattr(c, k, v)
            config = c
        return ctypes.pointer(config._c(local)) if hasattr(config, "_c") else \
            ctypes.pointer(_ms.ReplicateConfig._c(_copy_config(config), local))

    def _statuses(self, fn, keys):
        keys = list(keys)
        out = _lib.StatusList()
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            rc = fn(self._client, self._tenant, _keys(keys), len(keys), _byref(out))
            try:
                if rc != OK:
                    return _ms._code(rc)
                return [out.statuses[i] for i in range(out.count)]
            finally:
                lib.cr_client_status_list_free(_byref(out))

    def _sizes(self, keys):
        """Per key its size or negative status, from one BatchGetReplicaList."""
        out = _lib.ReplicaLists()
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            rc = lib.cr_client_batch_get_replica_list(self._client, self._tenant, _keys(keys),
                                                      len(keys), _byref(out))
            try:
                if rc != OK:
                    return _ms._code(rc)
                sizes = []
                for i in range(out.count):
                    rl = out.lists[i]
                    if rl.status != OK:
                        sizes.append(_ms._code(rl.status))
                    elif rl.count == 0:
                        sizes.append(OBJECT_NOT_FOUND)
                    else:
                        r = rl.replicas[0]
                        sizes.append(r.object_size if r.medium != 0 else
                                     sum(r.handles[j].size_bytes for j in range(r.handle_count)))
                return sizes
            finally:
                lib.cr_client_replica_lists_free(_byref(out))

    def _batch_put(self, keys, spans, config):
        keys = list(keys)
        if len(keys) != len(spans):
            return INVALID_PARAMS
        cfg = self._config(config)
        items = (_lib.PutData * len(keys))()
        for i, (key, (addr, size)) in enumerate(zip(keys, spans)):
            items[i] = _lib.PutData(key=_key(key), data=addr, len=size, config=cfg)
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            rc = lib.cr_client_batch_put(self._client, self._tenant, items, len(keys))
        if rc != OK:
            return _ms._code(rc)
        return [_put_code(items[i].status) for i in range(len(keys))]

    def _batch_get(self, keys, spans):
        keys = list(keys)
        if not keys:
            return []
        # One constructor call from tuples (key, buf, cap): about half the
        # Python time of filling the array item by item (bench/RESULTS.md).
        items = (_lib.GetBuffer * len(keys))(*[(_key(key), addr, size)
                                               for key, (addr, size) in zip(keys, spans)])
        with self._lock:
            if self._client is None:
                return INVALID_PARAMS
            rc = lib.cr_client_batch_get_into(self._client, self._tenant, items, len(keys))
        if rc != OK:
            return _ms._code(rc)
        return [it.len if it.status == OK else _ms._code(it.status) for it in items]


def _copy_config(config):
    """A foreign ReplicateConfig-like object (e.g. the real module's) as ours."""
    c = _ms.ReplicateConfig()
    for name in vars(c):
        if hasattr(config, name):
            setattr(c, name, getattr(config, name))
    return c

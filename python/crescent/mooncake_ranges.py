"""MooncakeDistributedStore's put and get sessions and ranged reads:
batch_put_session_start / _end / _revoke with batch_put_from_multi_buffer_ranges,
batch_get_session_start / _end with batch_get_into_multi_buffer_ranges, and
get_into_ranges, over libcrescent's byte-range calls (cr_client_write_ranges,
cr_client_read_ranges: include/crescent/client.h, "byte ranges").

A put session holds the replica lists PutStart returned for its keys until
the session ends (PutEnd: the objects become readable, without a checksum)
or is revoked; a get session holds the lists (and the leases) a
BatchGetReplicaList granted.  The reference's answers: per key the bytes a
ranged call moved, or -600 for a key with no session or a range outside its
object."""
import ctypes

from crescent import _lib
from crescent._lib import lib, c_int, c_size_t, c_void_p
from crescent import mooncake_store as _ms

OK = 0
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704


class _Range(ctypes.Structure):
    """struct cr_range (include/crescent/client.h)."""
    _fields_ = [("list", ctypes.POINTER(_lib.ReplicaList)), ("offset", ctypes.c_uint64),
                ("buf", c_void_p), ("len", c_size_t), ("status", c_int)]


def _declare():
    P = ctypes.POINTER
    for name in ("cr_client_write_ranges", "cr_client_read_ranges"):
        fn = getattr(lib, name)
        fn.restype = c_int
        fn.argtypes = [c_void_p, P(_Range), c_size_t]
    fn = lib.cr_client_batch_put_start
    fn.restype = c_int
    fn.argtypes = [c_void_p, ctypes.c_char_p, P(_lib.PutItem), c_size_t, P(_lib.ReplicaLists)]
    for name in ("cr_client_batch_put_end", "cr_client_batch_put_revoke"):
        fn = getattr(lib, name)
        fn.restype = c_int
        fn.argtypes = [c_void_p, ctypes.c_char_p, P(ctypes.c_char_p), c_size_t,
                       P(_lib.StatusList)]


_declare()


def _key(key):
    return key.encode() if isinstance(key, str) else bytes(key)


class _Lists:
    """A cr_replica_lists owned by the sessions of the keys in it; freed
    when the last of them ends."""

    def __init__(self, lists, keys):
        self.lists = lists
        self.open = set(keys)

    def entry(self, i):
        return ctypes.pointer(self.lists.lists[i])

    def close(self, key):
        self.open.discard(key)
        if not self.open and self.lists is not None:
            lib.cr_client_replica_lists_free(ctypes.byref(self.lists))
            self.lists = None


class _Ranges:
    """Mixed into MooncakeDistributedStore."""

    def _sessions(self, which):
        name = "_put_sessions" if which == "put" else "_get_sessions"
        if not hasattr(self, name):
            setattr(self, name, {})
        return getattr(self, name)

    def _end_session(self, which, key):
        entry = self._sessions(which).pop(key, None)
        if entry is not None:
            entry[0].close(key)
        return entry

    # ---- put sessions -----------------------------------------------------------

    def batch_put_session_start(self, keys, sizes, config=None):
        """Reserves each key's object (PutStart); per key 0 or a negative
        ErrorCode (-705 exists, or named twice)."""
        keys = [k if isinstance(k, str) else k.decode() for k in keys]
        if len(keys) != len(sizes):
            return [INVALID_PARAMS] * len(keys)
        sessions = self._sessions("put")
        results, wanted, seen = [OK] * len(keys), [], set()
        for i, k in enumerate(keys):
            if k in seen or k in sessions or sizes[i] < 0:
                results[i] = _ms.OBJECT_ALREADY_EXISTS if sizes[i] >= 0 else INVALID_PARAMS
            else:
                seen.add(k)
                wanted.append(i)
        if not wanted:
            return results
        cfg = self._config(config)
        items = (_lib.PutItem * len(wanted))(*[
            _lib.PutItem(key=_key(keys[i]), size_bytes=sizes[i], config=cfg) for i in wanted])
        out = _lib.ReplicaLists()
        with self._lock:
            if self._client is None:
                return [INVALID_PARAMS] * len(keys)
            rc = lib.cr_client_batch_put_start(self._client, self._tenant, items, len(wanted),
                                               ctypes.byref(out))
        if rc != OK:
            for i in wanted:
                results[i] = _ms._code(rc)
            return results
        started = [keys[i] for n, i in enumerate(wanted) if out.lists[n].status == OK]
        owner = _Lists(out, started)
        for n, i in enumerate(wanted):
            status = out.lists[n].status
            results[i] = _ms._code(status)
            if status == OK:
                sessions[keys[i]] = (owner, owner.entry(n))
        if not started:
            lib.cr_client_replica_lists_free(ctypes.byref(out))
        return results

    def batch_put_from_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes,
                                           all_dst_offsets):
        """Writes each key's buffers at their offsets into its reserved
        object; per key the bytes written, or -600 (no session, a range
        outside the object) or the transfer's ErrorCode."""
        return self._ranged("put", keys, all_buffer_ptrs, all_sizes, all_dst_offsets)

    def batch_put_session_end(self, keys):
        """Makes each key's object readable (PutEnd); per key 0 or negative."""
        return self._finish_puts(keys, lib.cr_client_batch_put_end)

    def batch_put_session_revoke(self, keys):
        """Drops each key's reservation (PutRevoke); per key 0 or negative."""
        return self._finish_puts(keys, lib.cr_client_batch_put_revoke)

    def _finish_puts(self, keys, fn):
        keys = [k if isinstance(k, str) else k.decode() for k in keys]
        sessions = self._sessions("put")
        results = [OK if k in sessions else INVALID_PARAMS for k in keys]
        ending = list(dict.fromkeys(k for k in keys if k in sessions))
        if not ending:
            return results
        out = _lib.StatusList()
        array = (ctypes.c_char_p * len(ending))(*[_key(k) for k in ending])
        with self._lock:
            if self._client is None:
                return [INVALID_PARAMS] * len(keys)
            rc = fn(self._client, self._tenant, array, len(ending), ctypes.byref(out))
        try:
            codes = {k: _ms._code(rc if rc != OK else out.statuses[n])
                     for n, k in enumerate(ending)}
        finally:
            if rc == OK:
                lib.cr_client_status_list_free(ctypes.byref(out))
        for k in ending:
            self._end_session("put", k)
        return [codes.get(k, r) if r == OK else r for k, r in zip(keys, results)]

    # ---- get sessions -----------------------------------------------------------

    def batch_get_session_start(self, keys):
        """Looks up each key's replicas once (a lease) for ranged reads; per
        key 0 or negative (-704 missing)."""
        keys = [k if isinstance(k, str) else k.decode() for k in keys]
        if not keys:
            return []
        out = _lib.ReplicaLists()
        array = (ctypes.c_char_p * len(keys))(*[_key(k) for k in keys])
        with self._lock:
            if self._client is None:
                return [INVALID_PARAMS] * len(keys)
            rc = lib.cr_client_batch_get_replica_list(self._client, self._tenant, array,
                                                      len(keys), ctypes.byref(out))
        if rc != OK:
            return [_ms._code(rc)] * len(keys)
        found = [k for n, k in enumerate(keys) if out.lists[n].status == OK]
        owner = _Lists(out, found)
        results = []
        for n, k in enumerate(keys):
            status = out.lists[n].status
            results.append(_ms._code(status))
            if status == OK:
                self._end_session("get", k)   # a session started again: the new lists
                self._sessions("get")[k] = (owner, owner.entry(n))
        if not found:
            lib.cr_client_replica_lists_free(ctypes.byref(out))
        return results

    def batch_get_into_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes,
                                           all_src_offsets):
        """Reads each key's ranges (from its get session) into the buffers;
        per key the bytes read, or -600 / the transfer's ErrorCode."""
        return self._ranged("get", keys, all_buffer_ptrs, all_sizes, all_src_offsets)

    def batch_get_session_end(self, keys):
        for k in keys:
            self._end_session("get", k if isinstance(k, str) else k.decode())
        return OK

    # ---- ranged calls -------------------------------------------------------------

    def _ranged(self, which, keys, all_buffer_ptrs, all_sizes, all_offsets):
        keys = [k if isinstance(k, str) else k.decode() for k in keys]
        if not (len(keys) == len(all_buffer_ptrs) == len(all_sizes) == len(all_offsets)):
            return [INVALID_PARAMS] * len(keys)
        sessions = self._sessions(which)
        results, spans = [], []   # spans: (key index, first range, count)
        ranges = []
        for i, k in enumerate(keys):
            ptrs, sizes, offsets = all_buffer_ptrs[i], all_sizes[i], all_offsets[i]
            if k not in sessions or not (len(ptrs) == len(sizes) == len(offsets)) \
                    or any(s < 0 or o < 0 for s, o in zip(sizes, offsets)):
                results.append(INVALID_PARAMS)
                continue
            results.append(sum(sizes))
            spans.append((i, len(ranges), len(ptrs)))
            entry = sessions[k][1]
            ranges += [_Range(list=entry, offset=o, buf=p, len=s, status=0)
                       for p, s, o in zip(ptrs, sizes, offsets)]
        if ranges:
            array = (_Range * len(ranges))(*ranges)
            fn = lib.cr_client_write_ranges if which == "put" else lib.cr_client_read_ranges
            with self._lock:
                if self._client is None:
                    return [INVALID_PARAMS] * len(keys)
                fn(self._client, array, len(ranges))
            for i, first, n in spans:
                failed = next((array[first + j].status for j in range(n)
                               if array[first + j].status != OK), OK)
                if failed != OK:
                    results[i] = _ms._code(failed)
        return results

    def get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets,
                        all_sizes):
        """For buffer b, key k of it, range r: reads sizes[b][k][r] bytes
        from offset src[b][k][r] of the object into buffer b at dst[b][k][r].
        Returns the same nesting: bytes read per range, or -704 (missing),
        -600 (outside the object) or the transfer's ErrorCode."""
        shape_ok = len(buffer_ptrs) == len(all_keys) == len(all_dst_offsets) \
            == len(all_src_offsets) == len(all_sizes)
        if not shape_ok:
            return [[[INVALID_PARAMS]] for _ in buffer_ptrs]
        unique = list(dict.fromkeys(k for keys in all_keys for k in keys))
        out = _lib.ReplicaLists()
        status = {}
        with self._lock:
            if self._client is None:
                return [[[INVALID_PARAMS] for _ in keys] for keys in all_keys]
            if unique:
                array = (ctypes.c_char_p * len(unique))(*[_key(k) for k in unique])
                rc = lib.cr_client_batch_get_replica_list(self._client, self._tenant, array,
                                                          len(unique), ctypes.byref(out))
            else:
                rc = OK
        if rc != OK:
            return [[[_ms._code(rc)] * len(r) for r in d] for d in all_sizes]
        try:
            where = {}
            for n, k in enumerate(unique):
                status[k] = out.lists[n].status
                where[k] = ctypes.pointer(out.lists[n])
            results, ranges, slots = [], [], []
            for b, keys in enumerate(all_keys):
                per_key = []
                for j, k in enumerate(keys):
                    dst, src, sizes = all_dst_offsets[b][j], all_src_offsets[b][j], \
                        all_sizes[b][j]
                    if status.get(k) != OK:
                        per_key.append([_ms._code(status.get(k, OBJECT_NOT_FOUND))] * len(sizes))
                        continue
                    row = []
                    for r, (d, s, n) in enumerate(zip(dst, src, sizes)):
                        if d < 0 or s < 0 or n < 0:
                            row.append(INVALID_PARAMS)
                            continue
                        row.append(n)
                        slots.append((b, j, r))
                        ranges.append(_Range(list=where[k], offset=s, buf=buffer_ptrs[b] + d,
                                             len=n, status=0))
                    per_key.append(row)
                results.append(per_key)
            if ranges:
                array = (_Range * len(ranges))(*ranges)
                with self._lock:
                    lib.cr_client_read_ranges(self._client, array, len(ranges))
                for (b, j, r), rg in zip(slots, array):
                    if rg.status != OK:
                        results[b][j][r] = _ms._code(rg.status)
            return results
        finally:
            if unique:
                lib.cr_client_replica_lists_free(ctypes.byref(out))

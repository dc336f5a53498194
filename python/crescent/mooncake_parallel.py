"""MooncakeDistributedStore's *_tensor_with_parallelism* forms and their
request types (ParallelAxis, TensorParallelism, ReadTarget), laid out as the
reference lays them out (mooncake-integration/store/store_py_internal.h,
store_py_parallel_write.h and _read.h at the commit in
../shared/mooncake/README.md), so objects written by either read back in the
other.

Writes (put_, upsert_; tensor, _from and batch forms), by request:
- neither `parallelism` nor `writer_partition`: the plain tensor object.
- `writer_partition` (an object with rank, size, split_dim): the full tensor
  is cut into `size` equal parts along split_dim; part `rank` is stored under
  "<key>__writer_<rank>of<size>_sd<split_dim>" as a SHARD object (one TP
  axis), and a 96-byte manifest (magic "NAMW", dtype, ndim, split_dim,
  shard count, global shape) under "<key>__writer_manifest".
- `parallelism` with a TP axis only: the tensor given is this rank's shard;
  it is stored under "<key>_tp_<rank>" with the global shape inferred
  (split_dim's length times size), plus the manifest under
  "<key>__parallelism_manifest".
- `parallelism` with a TP axis and others: the tensor given is the full
  tensor; this rank's TP part is stored under the key with one
  "__<kind>_<rank>of<size>[_sd<d>][_eid<e>][_sid<s>]" suffix per axis
  (order dp, tp, ep, pp), plus the manifest.
- `parallelism` without a TP axis: the tensor is stored as it is, as a SHARD
  object carrying the axes, under the suffixed key (no manifest).
Axes are validated as the reference does (kinds tp/dp/ep/pp, once each;
0 <= rank < size; TP needs split_dim, DP/EP/PP must not have one, EP needs
expert_id, PP stage_id; at most 4): a bad request is -600.

Reads (ReadTarget: mode "as_stored" / "shard" / "full", optional
parallelism):
- as_stored, no parallelism: the object under the key (get_tensor).
- full, no parallelism: the writer-partition parts joined along split_dim.
- shard: the object stored for exactly these axes; else (one TP axis) the
  writer part of that rank; else (a TP axis) the full tensor rebuilt from the
  stored shards and cut for the requested rank and size.
- full with a TP axis: the full tensor rebuilt from the stored shards
  (their count read from the parallelism manifest).
- anything else: None.
The _into forms write the result as a tensor object (header, then data) into
the buffer and return the tensor viewing it, or None when it does not fit.
"""
import ctypes
import struct

from crescent import mooncake_tensors as _t

INVALID_PARAMS = -600
_LAYOUT_SHARD = 1
_KINDS = {"DP": 0, "TP": 1, "EP": 2, "PP": 3}
_KIND_NAMES = {v: k.lower() for k, v in _KINDS.items()}
_MAX_AXES = 4
_AXIS = struct.Struct("<iiiiiiq")                 # LayoutAxis, 32 bytes
_AXES_AT = _t._HEADER.size + 2 * _t._SHAPE.size   # 168: axis_count, reserved, axes
_MANIFEST_HEAD = struct.Struct("<IHHiiiii4x")     # WriterShardManifestHeader + padding
_MANIFEST_MAGIC, _MANIFEST_SIZE = 0x574D414E, _MANIFEST_HEAD.size + _t._SHAPE.size  # 96


class ParallelAxis:
    """One parallel axis: kind ("tp", "dp", "ep", "pp"), rank, size and,
    per kind, split_dim, expert_id, stage_id."""

    def __init__(self):
        self.kind, self.rank, self.size = "", 0, 1
        self.split_dim = self.expert_id = self.stage_id = None


class TensorParallelism:
    def __init__(self):
        self.axes = []


class ReadTarget:
    def __init__(self):
        self._mode = "as_stored"
        self.parallelism = None

    @property
    def mode(self):
        return self._mode

    @mode.setter
    def mode(self, mode):
        m = str(mode).upper()
        if m not in ("AS_STORED", "SHARD", "FULL"):
            raise RuntimeError("Unsupported ReadTarget mode")
        self._mode = m.lower()


# ---- requests ------------------------------------------------------------------

def _axes(parallelism):
    """The validated axes as tuples (kind, rank, size, split_dim, expert_id,
    stage_id), or None."""
    if parallelism is None or not hasattr(parallelism, "axes"):
        return None
    out = []
    for a in list(parallelism.axes):
        kind = _KINDS.get(str(a.kind).upper())
        if kind is None or not 0 <= int(a.rank) < int(a.size):
            return None
        sd, eid, sid = a.split_dim, a.expert_id, a.stage_id
        if (kind == 1) != (sd is not None) or (kind == 2) != (eid is not None) \
                or (kind == 3) != (sid is not None):
            return None
        out.append((kind, int(a.rank), int(a.size), sd, eid, sid))
    kinds = [a[0] for a in out]
    if not out or len(out) > _MAX_AXES or len(set(kinds)) != len(kinds):
        return None
    return out


def _canonical(axes):
    return sorted(axes, key=lambda a: a[0])   # dp, tp, ep, pp: the kind codes' order


def _tp(axes):
    return next((i for i, a in enumerate(axes) if a[0] == 1), None)


def _with_rank(axes, i, rank, size):
    return axes[:i] + [(axes[i][0], rank, size) + axes[i][3:]] + axes[i + 1:]


def _key(base, axes):
    if len(axes) == 1 and axes[0][0] == 1:
        return f"{base}_tp_{axes[0][1]}"
    out = base
    for kind, rank, size, sd, eid, sid in _canonical(axes):
        out += f"__{_KIND_NAMES[kind]}_{rank}of{size}"
        out += "" if sd is None else f"_sd{sd}"
        out += "" if eid is None else f"_eid{eid}"
        out += "" if sid is None else f"_sid{sid}"
    return out


def _writer(obj):
    if obj is None or not all(hasattr(obj, n) for n in ("rank", "size", "split_dim")):
        return None
    rank, size, sd = int(obj.rank), int(obj.size), int(obj.split_dim)
    if size <= 0 or not 0 <= rank < size or sd < 0:
        return None
    return rank, size, sd


def _writer_key(base, rank, size, sd):
    return f"{base}__writer_{rank}of{size}_sd{sd}"


# ---- objects ---------------------------------------------------------------------

def _shard_object(dtype_code, global_shape, shard, axes):
    """Header + data of a SHARD object (bytes), or None."""
    local = list(shard.shape)
    if len(local) > _t._MAX_DIMS or len(global_shape) != len(local):
        return None
    packed = b""
    for i, (kind, rank, size, sd, eid, sid) in enumerate(axes):
        if sd is not None and not 0 <= sd < len(local):
            return None
        extra = eid if kind == 2 and eid is not None else sid if kind == 3 and sid is not None \
            else 0
        packed += _AXIS.pack(kind, i, rank, size, -1 if sd is None else sd, extra,
                             0 if sd is None else local[sd])
    shard = shard.detach().cpu().contiguous()
    nbytes = shard.numel() * shard.element_size()
    pad = lambda s: list(s) + [-1] * (_t._MAX_DIMS - len(s))  # noqa: E731
    head = _t._HEADER.pack(_t._MAGIC, _t._VERSION, _t._METADATA_SIZE, dtype_code, len(local),
                           _LAYOUT_SHARD, 0, _t._METADATA_SIZE, nbytes)
    meta = head + _t._SHAPE.pack(*pad(global_shape)) + _t._SHAPE.pack(*pad(local)) \
        + struct.pack("<II", len(axes), 0) + packed + bytes(_AXIS.size * (_MAX_AXES - len(axes)))
    return meta + (ctypes.string_at(shard.data_ptr(), nbytes) if nbytes else b"")


def _manifest(dtype_code, shape, split_dim, count):
    return _MANIFEST_HEAD.pack(_MANIFEST_MAGIC, 1, _MANIFEST_SIZE, dtype_code, len(shape),
                               split_dim, count, 0) \
        + _t._SHAPE.pack(*(list(shape) + [-1] * (_t._MAX_DIMS - len(shape))))


def _parse_manifest(data):
    """(split_dim, shard_count, global shape) or None."""
    if data is None or len(data) < _MANIFEST_SIZE:
        return None
    magic, version, size, _, ndim, sd, count, _ = _MANIFEST_HEAD.unpack_from(data, 0)
    if magic != _MANIFEST_MAGIC or version != 1 or size != _MANIFEST_SIZE \
            or not 0 <= ndim <= _t._MAX_DIMS or count <= 0 or not 0 <= sd < ndim:
        return None
    shape = list(_t._SHAPE.unpack_from(data, _MANIFEST_HEAD.size))[:ndim]
    return None if any(d < 0 for d in shape) else (sd, count, shape)


def _stored_axes(data):
    """The axes of a SHARD object's header, canonical, or None."""
    if data is None or len(data) < _t._METADATA_SIZE:
        return None
    if _t._HEADER.unpack_from(data, 0)[5] != _LAYOUT_SHARD:
        return None
    count = struct.unpack_from("<I", data, _AXES_AT)[0]
    if not 0 < count <= _MAX_AXES:
        return None
    out = []
    for i in range(count):
        kind, _, rank, size, sd, extra, _ = _AXIS.unpack_from(data, _AXES_AT + 8 + i * 32)
        if kind not in _KIND_NAMES:
            return None
        out.append((kind, rank, size, None if sd < 0 else sd, extra if kind == 2 else None,
                    extra if kind == 3 else None))
    return _canonical(out)


def _global_shape(data):
    ndim = _t._HEADER.unpack_from(data, 0)[4]
    return list(_t._SHAPE.unpack_from(data, _t._HEADER.size))[:ndim]


def _slice(tensor, split_dim, rank, size):
    if not 0 <= split_dim < tensor.dim() or tensor.shape[split_dim] % size:
        return None
    step = tensor.shape[split_dim] // size
    return tensor.narrow(split_dim, rank * step, step).contiguous()


class _Parallelism:
    """Mixed into MooncakeDistributedStore."""

    # ---- writes --------------------------------------------------------------------

    def _par_write(self, key, tensor, parallelism, config, writer_partition, upsert):
        if parallelism is not None and writer_partition is not None:
            return INVALID_PARAMS
        if tensor is None:
            return INVALID_PARAMS
        if parallelism is None and writer_partition is None:
            return (self.upsert_tensor if upsert else self.pub_tensor)(key, tensor, config)
        try:
            code = _t._dtype_code(tensor.dtype)
        except ValueError:
            return INVALID_PARAMS
        objects, manifest = [], None
        if writer_partition is not None:
            w = _writer(writer_partition)
            if w is None:
                return INVALID_PARAMS
            rank, size, sd = w
            part = _slice(tensor, sd, rank, size)
            if part is None:
                return INVALID_PARAMS
            obj = _shard_object(code, list(tensor.shape), part, [(1, rank, size, sd, None, None)])
            objects.append((_writer_key(key, rank, size, sd), obj))
            manifest = (f"{key}__writer_manifest", _manifest(code, tensor.shape, sd, size))
        else:
            axes = _axes(parallelism)
            if axes is None:
                return INVALID_PARAMS
            i = _tp(axes)
            if i is None:               # stored as given, axes recorded
                obj = _shard_object(code, list(tensor.shape), tensor, axes)
                objects.append((_key(key, axes), obj))
            else:
                kind, rank, size, sd = axes[i][:4]
                if not 0 <= sd < tensor.dim():
                    return INVALID_PARAMS
                if len(axes) == 1:      # the tensor is this rank's shard
                    full = list(tensor.shape)
                    full[sd] *= size
                    shard = tensor
                else:                   # the full tensor: cut this rank's part
                    full = list(tensor.shape)
                    shard = _slice(tensor, sd, rank, size)
                if shard is None or full[sd] % size:
                    return INVALID_PARAMS
                obj = _shard_object(code, full, shard, axes)
                objects.append((_key(key, axes), obj))
                manifest = (f"{key}__parallelism_manifest", _manifest(code, full, sd, size))
        if any(o is None for _, o in objects):
            return INVALID_PARAMS
        write = self.upsert if upsert else self.put
        for k, data in objects + ([manifest] if manifest else []):
            rc = write(k, data, config)
            if rc != 0:
                return rc
        return 0

    def _par_batch(self, keys, values, parallelisms, config, writer_partitions, one):
        keys, values = list(keys), list(values)
        n = len(keys)
        if parallelisms is not None and writer_partitions is not None or len(values) != n:
            return [INVALID_PARAMS] * n
        if parallelisms is None and writer_partitions is None:
            return [one(k, v, None, config, None) for k, v in zip(keys, values)]
        requests = parallelisms if parallelisms is not None else writer_partitions
        if not isinstance(requests, list) or len(requests) != n:
            return [INVALID_PARAMS] * n
        if parallelisms is not None:
            return [one(k, v, p, config, None) for k, v, p in zip(keys, values, requests)]
        return [one(k, v, None, config, w) for k, v, w in zip(keys, values, requests)]

    def put_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                    writer_partition=None):
        return self._par_write(key, tensor, parallelism, config, writer_partition, False)

    def upsert_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                       writer_partition=None):
        return self._par_write(key, tensor, parallelism, config, writer_partition, True)

    def batch_put_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                          config=None, writer_partitions=None):
        return self._par_batch(keys, tensors_list, parallelisms, config, writer_partitions,
                               self.put_tensor_with_parallelism)

    def batch_upsert_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                             config=None, writer_partitions=None):
        return self._par_batch(keys, tensors_list, parallelisms, config, writer_partitions,
                               self.upsert_tensor_with_parallelism)

    def _from(self, key, buffer_ptr, size, parallelism, config, writer_partition, upsert):
        if not _t._is_tensor_object(buffer_ptr, size):
            return INVALID_PARAMS
        tensor = _t._deserialize_tensor(ctypes.string_at(buffer_ptr, size))
        return self._par_write(key, tensor, parallelism, config, writer_partition, upsert)

    def put_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                         config=None, writer_partition=None):
        return self._from(key, buffer_ptr, size, parallelism, config, writer_partition, False)

    def upsert_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                            config=None, writer_partition=None):
        return self._from(key, buffer_ptr, size, parallelism, config, writer_partition, True)

    def _from_batch(self, keys, buffer_ptrs, sizes, parallelisms, config, writer_partitions,
                    one):
        keys = list(keys)
        if len(buffer_ptrs) != len(keys) or len(sizes) != len(keys):
            return [INVALID_PARAMS] * len(keys)
        pairs = list(zip(buffer_ptrs, sizes))
        return self._par_batch(keys, pairs, parallelisms, config, writer_partitions,
                               lambda k, ps, p, c, w: one(k, ps[0], ps[1], p, c, w))

    def batch_put_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes,
                                               parallelisms=None, config=None,
                                               writer_partitions=None):
        return self._from_batch(keys, buffer_ptrs, sizes, parallelisms, config,
                                writer_partitions, self.put_tensor_with_parallelism_from)

    def batch_upsert_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes,
                                                  parallelisms=None, config=None,
                                                  writer_partitions=None):
        return self._from_batch(keys, buffer_ptrs, sizes, parallelisms, config,
                                writer_partitions, self.upsert_tensor_with_parallelism_from)

    # ---- reads ---------------------------------------------------------------------

    def _joined(self, keys, split_dim, count):
        """The tensor whose `count` parts along split_dim are stored under
        keys[r], each a SHARD of rank r of count; or None."""
        import torch
        parts = []
        for rank, k in enumerate(keys):
            data = self.get(k)
            axes = _stored_axes(data)
            tp = None if axes is None else next((a for a in axes if a[0] == 1), None)
            if tp is None or tp[1] != rank or tp[2] != count or tp[3] != split_dim:
                return None
            parts.append(_t._deserialize_tensor(data))
        if any(p is None for p in parts):
            return None
        return torch.cat(parts, split_dim)

    def _full(self, key, axes):
        """The full tensor of `key`: from the writer parts (axes None; the
        object itself when there are none), or from the shards of the TP
        axis in `axes`, as many as the parallelism manifest says (or, for a
        single TP axis without one, as "<key>_tp_0" says)."""
        if axes is None:
            m = _parse_manifest(self.get(f"{key}__writer_manifest") or None)
            if m is None:
                return self.get_tensor(key)
            sd, count, _ = m
            return self._joined([_writer_key(key, r, count, sd) for r in range(count)], sd,
                                count)
        i = _tp(axes)
        if i is None:
            return None
        m = _parse_manifest(self.get(f"{key}__parallelism_manifest") or None)
        if m is None and len(axes) == 1:
            first = _stored_axes(self.get(f"{key}_tp_0") or None)
            tp = None if first is None else next((a for a in first if a[0] == 1), None)
            m = None if tp is None or tp[3] is None else (tp[3], tp[2], None)
        if m is None:
            return None
        sd, count, _ = m
        if axes[i][3] != sd:
            return None
        return self._joined([_key(key, _with_rank(axes, i, r, count)) for r in range(count)],
                            sd, count)

    def _shard(self, key, axes):
        data = self.get(_key(key, axes))
        if data and _stored_axes(data) == _canonical(axes):
            return _t._deserialize_tensor(data)
        i = _tp(axes)
        if len(axes) == 1 and i == 0:
            _, rank, size, sd = axes[0][:4]
            data = self.get(_writer_key(key, rank, size, sd))
            if data and _stored_axes(data) == axes:
                return _t._deserialize_tensor(data)
        if i is None:
            return None
        _, rank, size, sd = axes[i][:4]
        full = self._full(key, axes)
        part = None if full is None else _slice(full, sd, rank, size)
        if part is None and len(axes) == 1:  # the reference's last try: the rank's own key
            return self.get_tensor(key if size <= 1 else f"{key}_tp_{rank}")
        return part

    def get_tensor_with_parallelism(self, key, target=None):
        mode = "as_stored" if target is None else str(target.mode)
        parallelism = None if target is None else target.parallelism
        if parallelism is None:
            if mode == "as_stored":
                return self.get_tensor(key)
            return self._full(key, None) if mode == "full" else None
        axes = _axes(parallelism)
        if axes is None:
            return None
        if mode == "shard":
            return self._shard(key, axes)
        if mode == "full":
            return self._full(key, axes)
        return None

    def batch_get_tensor_with_parallelism(self, keys, targets=None):
        keys = list(keys)
        if targets is None:
            return self.batch_get_tensor(keys)
        if not isinstance(targets, list) or len(targets) != len(keys):
            return [None] * len(keys)
        return [self.get_tensor_with_parallelism(k, t) for k, t in zip(keys, targets)]

    def _store_managed(self, buffer_ptr, size):
        """Whether [buffer_ptr, +size) lies in a buffer given to
        register_buffer, as the reference requires of these _into forms."""
        return any(base <= buffer_ptr and buffer_ptr + size <= base + n
                   for base, n in self._registered_sizes.items())

    def get_tensor_with_parallelism_into(self, key, buffer_ptr, size, target=None):
        if not self._store_managed(buffer_ptr, size):
            return None
        if target is None or (target.mode == "as_stored" and target.parallelism is None):
            return self.get_tensor_into(key, buffer_ptr, size)
        tensor = self.get_tensor_with_parallelism(key, target)
        if tensor is None:
            return None
        meta, ptr, nbytes, owner = _t._serialize_tensor(tensor)
        if not buffer_ptr or len(meta) + nbytes > size:
            return None
        ctypes.memmove(buffer_ptr, meta, len(meta))
        if nbytes:
            ctypes.memmove(buffer_ptr + len(meta), ptr, nbytes)
        return self._tensor_at(buffer_ptr, len(meta) + nbytes)

    def _tensor_at(self, buffer_ptr, length):
        import torch
        parsed = _t._parse(memoryview((ctypes.c_ubyte * length).from_address(buffer_ptr)),
                           length)
        code, shape, offset, nbytes = parsed
        raw = torch.frombuffer((ctypes.c_ubyte * nbytes).from_address(buffer_ptr + offset),
                               dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
        return raw.view(getattr(torch, _t._DTYPES[code])).reshape(shape)

    def batch_get_tensor_with_parallelism_into(self, keys, buffer_ptrs, sizes, targets=None):
        keys = list(keys)
        if len(buffer_ptrs) != len(keys) or len(sizes) != len(keys):
            return [None] * len(keys)
        if targets is None:
            return self.batch_get_tensor_into(keys, buffer_ptrs, sizes)
        if not isinstance(targets, list) or len(targets) != len(keys):
            return [None] * len(keys)
        return [self.get_tensor_with_parallelism_into(k, p, s, t)
                for k, p, s, t in zip(keys, buffer_ptrs, sizes, targets)]

"""MooncakeDistributedStore's tensor-parallel forms (put_tensor_with_tp,
get_tensor_with_tp and their batch, pub, _from and _into forms), laid out as
the reference lays them out (mooncake-integration/store/store_py.cpp at the
commit in ../shared/mooncake/README.md) so shards written by either read back
in the other:

- A tensor put with tp_size > 1 is cut along split_dim into tp_size equal
  shards (a dimension that tp_size does not divide is refused with -600, as
  the reference's "only uniform sharding is supported"); shard r is stored
  under "<key>_tp_<r>" as a tensor object whose header says SHARD: the
  global shape, the shard's local shape, and one parallel axis
  {kind 1 = TP (8 bytes), rank r, size tp_size (4 bytes each), split_dim,
  the shard's length along it (8 bytes each)}.
- tp_size <= 1 stores/reads the plain key, as put_tensor/get_tensor.
- A read resolves "<key>_tp_<tp_rank>" (or the key itself when tp_size <= 1)
  and returns that object's tensor, or None.

tp_rank is ignored by the writes (every rank's shard is written), as in the
reference."""
import ctypes
import struct

from crescent import mooncake_tensors as _t

INVALID_PARAMS = -600
_LAYOUT_SHARD = 1
_AXIS_TP = 1
_AXIS = struct.Struct("<qiiqq")        # ParallelAxisSpec, 32 bytes
_AXES_AT = _t._HEADER.size + 2 * _t._SHAPE.size   # 168: axis count, then 4 axes
_AXES_MAX = 4


def tp_key(key, rank):
    return f"{key}_tp_{rank}"


def _read_key(key, tp_rank, tp_size):
    return key if tp_size <= 1 else tp_key(key, tp_rank)


def _shard_header(tensor, shard, rank, tp_size, split_dim):
    """The 304-byte header of shard `rank` of `tensor` (a SHARD object)."""
    code = _t._dtype_code(tensor.dtype)
    full, local = list(tensor.shape), list(shard.shape)
    pad = [-1] * (_t._MAX_DIMS - len(full))
    nbytes = shard.numel() * shard.element_size()
    head = _t._HEADER.pack(_t._MAGIC, _t._VERSION, _t._METADATA_SIZE, code, len(full),
                           _LAYOUT_SHARD, 0, _t._METADATA_SIZE, nbytes)
    axis = _AXIS.pack(_AXIS_TP, rank, tp_size, split_dim, local[split_dim])
    axes = struct.pack("<q", 1) + axis + bytes(_AXIS.size * (_AXES_MAX - 1))
    return head + _t._SHAPE.pack(*(full + pad)) + _t._SHAPE.pack(*(local + pad)) + axes


def _shards(tensor, tp_size, split_dim):
    """[(header, contiguous shard)] for every rank, or None when the tensor
    cannot be cut into tp_size equal shards along split_dim."""
    if tp_size <= 0 or not 0 <= split_dim < tensor.dim() or len(tensor.shape) > _t._MAX_DIMS:
        return None
    length = tensor.shape[split_dim]
    if length % tp_size != 0:
        return None
    tensor = tensor.detach().cpu()
    step = length // tp_size
    out = []
    for rank in range(tp_size):
        shard = tensor.narrow(split_dim, rank * step, step).contiguous()
        out.append((_shard_header(tensor, shard, rank, tp_size, split_dim), shard))
    return out


class _TensorParallel:
    """Mixed into MooncakeDistributedStore."""

    def put_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1, split_dim=0):
        return self.batch_put_tensor_with_tp([key], [tensor], tp_rank, tp_size, split_dim)[0]

    def pub_tensor_with_tp(self, key, tensor, config=None, tp_rank=0, tp_size=1, split_dim=0):
        return self.batch_pub_tensor_with_tp([key], [tensor], config, tp_rank, tp_size,
                                             split_dim)[0]

    def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0, tp_size=1,
                                 split_dim=0):
        return self.batch_pub_tensor_with_tp(base_keys, tensors_list, None, tp_rank, tp_size,
                                             split_dim)

    def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config=None, tp_rank=0,
                                 tp_size=1, split_dim=0):
        """Per base key 0 or a negative ErrorCode (the first failing shard's)."""
        base_keys, tensors_list = list(base_keys), list(tensors_list)
        if len(base_keys) != len(tensors_list):
            return [INVALID_PARAMS] * len(base_keys)
        if tp_size <= 1:
            return self.batch_put_tensor(base_keys, tensors_list, config)
        keys, ptrs, sizes, keep, owner_of = [], [], [], [], []
        results = [0] * len(base_keys)
        for i, (key, tensor) in enumerate(zip(base_keys, tensors_list)):
            shards = _shards(tensor, tp_size, split_dim)
            if shards is None:
                results[i] = INVALID_PARAMS
                continue
            for rank, (header, shard) in enumerate(shards):
                keep += [header, shard]
                head = ctypes.cast(ctypes.c_char_p(header), ctypes.c_void_p).value
                nbytes = shard.numel() * shard.element_size()
                keys.append(tp_key(key, rank))
                ptrs.append([head, shard.data_ptr()] if nbytes else [head])
                sizes.append([len(header), nbytes] if nbytes else [len(header)])
                owner_of.append(i)
        if keys:
            for i, rc in zip(owner_of, self.batch_put_from_multi_buffers(keys, ptrs, sizes,
                                                                         config)):
                if rc != 0 and results[i] == 0:
                    results[i] = rc
        return results

    def put_tensor_with_tp_from(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
        return self.batch_put_tensor_with_tp_from([key], [buffer_ptr], [size], tp_rank,
                                                  tp_size, split_dim)[0]

    def batch_put_tensor_with_tp_from(self, base_keys, buffer_ptrs, sizes, tp_rank=0,
                                      tp_size=1, split_dim=0):
        """Each buffer holds a whole tensor object (header + data), split here."""
        base_keys = list(base_keys)
        if not (len(base_keys) == len(buffer_ptrs) == len(sizes)):
            return [INVALID_PARAMS] * len(base_keys)
        tensors = []
        for ptr, size in zip(buffer_ptrs, sizes):
            view = (ctypes.c_ubyte * size).from_address(ptr) if size > 0 else b""
            tensors.append(_t._deserialize_tensor(bytes(view)) if size > 0 else None)
        results = [INVALID_PARAMS if t is None else 0 for t in tensors]
        good = [i for i, t in enumerate(tensors) if t is not None]
        if good:
            done = self.batch_pub_tensor_with_tp([base_keys[i] for i in good],
                                                 [tensors[i] for i in good], None, tp_rank,
                                                 tp_size, split_dim)
            for i, rc in zip(good, done):
                results[i] = rc
        return results

    def get_tensor_with_tp(self, key, tp_rank=0, tp_size=1, split_dim=0):
        """This rank's shard (the whole tensor when tp_size <= 1), or None."""
        return self.get_tensor(_read_key(key, tp_rank, tp_size))

    def batch_get_tensor_with_tp(self, base_keys, tp_rank=0, tp_size=1):
        return self.batch_get_tensor([_read_key(k, tp_rank, tp_size) for k in base_keys])

    def get_tensor_with_tp_into(self, key, buffer_ptr, size, tp_rank=0, tp_size=1,
                                split_dim=0):
        return self.get_tensor_into(_read_key(key, tp_rank, tp_size), buffer_ptr, size)

    def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes, tp_rank=0,
                                      tp_size=1):
        return self.batch_get_tensor_into([_read_key(k, tp_rank, tp_size) for k in base_keys],
                                          buffer_ptrs, sizes)

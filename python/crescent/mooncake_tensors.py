"""MooncakeDistributedStore's tensor helpers (put_tensor, get_tensor and the
batch and *_into forms), in the reference's object layout: a 304-byte
TensorMetadata header (mooncake-integration/integration_utils.h: magic
"NOOM", version 1, dtype code, ndim, shapes padded to 8 dims with -1, no
layout axes) followed by the tensor's bytes, so tensors stored by Mooncake's
module and by crescent's read back alike.  torch is imported on first use."""
import ctypes
import struct

INVALID_PARAMS = -600


_MAGIC, _VERSION, _MAX_DIMS = 0x4D4F4F4E, 1, 8
_HEADER = struct.Struct("<IHHiiIIQQ")           # TensorObjectHeader, 40 bytes
_SHAPE = struct.Struct(f"<{_MAX_DIMS}q")         # TensorShape, 64 bytes
_METADATA_SIZE = _HEADER.size + 2 * _SHAPE.size + 8 + 4 * 32   # 304
_DTYPES = ["float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
           "int64", "uint64", "bool", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
_ITEMSIZE = [4, 8, 1, 1, 2, 2, 4, 4, 8, 8, 1, 2, 2, 1, 1]


def _torch():
    import torch  # Debian's python3-torch
    return torch


def _dtype_code(dtype):
    torch = _torch()
    for code, name in enumerate(_DTYPES):
        if getattr(torch, name, None) is not None and dtype == getattr(torch, name):
            return code
    raise ValueError(f"unsupported tensor dtype {dtype} for Mooncake tensor serialization")


def _tensor_metadata_size():
    return _METADATA_SIZE


def _metadata(tensor):
    code = _dtype_code(tensor.dtype)
    shape = list(tensor.shape)
    if len(shape) > _MAX_DIMS:
        raise ValueError(f"tensors of more than {_MAX_DIMS} dimensions are not supported")
    nbytes = tensor.numel() * tensor.element_size()
    dims = _SHAPE.pack(*(shape + [-1] * (_MAX_DIMS - len(shape))))
    return (_HEADER.pack(_MAGIC, _VERSION, _METADATA_SIZE, code, len(shape), 0, 0,
                         _METADATA_SIZE, nbytes) + dims + dims + bytes(8 + 4 * 32)), nbytes


def _serialize_tensor(tensor):
    """(metadata bytes, data address, data bytes, owner) as the reference."""
    tensor = tensor.detach().contiguous().cpu()
    meta, nbytes = _metadata(tensor)
    return meta, tensor.data_ptr(), nbytes, tensor


def _parse(buf, length):
    """(dtype code, shape, data offset, data bytes) of a stored object, or None."""
    if length < _METADATA_SIZE:
        return None
    magic, version, header_size, code, ndim, _, _, offset, nbytes = _HEADER.unpack_from(buf, 0)
    if magic != _MAGIC or not 0 <= code < len(_DTYPES) or not 0 <= ndim <= _MAX_DIMS \
            or offset < _METADATA_SIZE or offset + nbytes > length:
        return None
    shape = list(_SHAPE.unpack_from(buf, _HEADER.size + _SHAPE.size))[:ndim]  # local shape
    count = 1
    for d in shape:
        if d < 0:
            return None
        count *= d
    if count * _ITEMSIZE[code] != nbytes:
        return None
    return code, shape, offset, nbytes


def _is_tensor_object(buffer_ptr, size):
    """Whether [buffer_ptr, +size) holds a whole tensor object (header + data)."""
    if not buffer_ptr or size < _METADATA_SIZE:
        return False
    return _parse(memoryview((ctypes.c_ubyte * size).from_address(buffer_ptr)), size) is not None


def _all_tensor_objects(keys, buffer_ptrs, sizes):
    return (len(keys) == len(buffer_ptrs) == len(sizes)
            and all(_is_tensor_object(p, n) for p, n in zip(buffer_ptrs, sizes)))


def _deserialize_tensor(data):
    """A CPU tensor from a stored object's bytes, or None."""
    view = memoryview(data).cast("B")
    parsed = _parse(view, len(view))
    if parsed is None:
        return None
    code, shape, offset, nbytes = parsed
    torch = _torch()
    dtype = getattr(torch, _DTYPES[code])
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(bytearray(view[offset:offset + nbytes]), dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)


class _Tensors:
    """Mixed into MooncakeDistributedStore."""

    def put_tensor(self, key, tensor):
        """0 or a negative ErrorCode."""
        return self.batch_put_tensor([key], [tensor])[0]

    def pub_tensor(self, key, tensor, config=None):
        return self.batch_put_tensor([key], [tensor], config)[0]

    def upsert_tensor(self, key, tensor, config=None):
        meta, ptr, nbytes, owner = _serialize_tensor(tensor)
        return self.upsert(key, meta + ctypes.string_at(ptr, nbytes), config)

    def batch_put_tensor(self, keys, tensors_list, config=None):
        """Per key 0 or negative: header and data gathered from the tensor's
        memory (two buffers), no intermediate bytes object."""
        keep, ptrs, sizes = [], [], []
        for tensor in tensors_list:
            meta, ptr, nbytes, owner = _serialize_tensor(tensor)
            keep += [meta, owner]
            ptrs.append([ctypes.cast(ctypes.c_char_p(meta), ctypes.c_void_p).value, ptr])
            sizes.append([len(meta), nbytes])
        return self.batch_put_from_multi_buffers(list(keys), ptrs, sizes, config)

    batch_pub_tensor = batch_put_tensor

    def upsert_pub_tensor(self, key, tensor, config=None):
        return self.upsert_tensor(key, tensor, config)

    def batch_upsert_tensor(self, keys, tensors_list):
        return self.batch_upsert_pub_tensor(keys, tensors_list)

    def batch_upsert_pub_tensor(self, keys, tensors_list, config=None):
        """Per key 0 or a negative ErrorCode (-600 for every key when the
        two lists differ in length)."""
        keys, tensors_list = list(keys), list(tensors_list)
        if len(keys) != len(tensors_list):
            return [INVALID_PARAMS] * len(keys)
        return [self.upsert_tensor(k, t, config) for k, t in zip(keys, tensors_list)]

    def upsert_tensor_from(self, key, buffer_ptr, size):
        """Upserts an object already laid out as header + data at buffer_ptr
        (-600 when it is not a tensor object)."""
        if not _is_tensor_object(buffer_ptr, size):
            return INVALID_PARAMS
        return self.upsert_from(key, buffer_ptr, size)

    def batch_upsert_tensor_from(self, keys, buffer_ptrs, sizes):
        """Per key 0 or negative; every key -600, nothing stored, when any
        buffer is not a whole tensor object (the reference checks them all
        first)."""
        keys = list(keys)
        if not _all_tensor_objects(keys, buffer_ptrs, sizes):
            return [INVALID_PARAMS] * len(keys)
        return [self.upsert_from(k, p, n) for k, p, n in zip(keys, buffer_ptrs, sizes)]

    def batch_put_tensor_from(self, keys, buffer_ptrs, sizes):
        """Puts objects already laid out as header + data; every key -600,
        nothing stored, when any buffer is not a whole tensor object."""
        keys = list(keys)
        if not _all_tensor_objects(keys, buffer_ptrs, sizes):
            return [INVALID_PARAMS] * len(keys)
        return self.batch_put_from(keys, list(buffer_ptrs), list(sizes))

    def get_tensor(self, key):
        """The tensor, or None."""
        return self.batch_get_tensor([key])[0]

    def batch_get_tensor(self, keys):
        return [None if h is None else _deserialize_tensor(h)
                for h in self.batch_get_buffer(list(keys))]

    def put_tensor_from(self, key, buffer_ptr, size, config=None):
        """Stores an object already laid out as header + data at buffer_ptr."""
        return self.put_from(key, buffer_ptr, size, config)

    def get_tensor_into(self, key, buffer_ptr, size):
        """Reads the whole object (header + data) into the buffer and returns
        the tensor viewing its data there, or None."""
        got = self.get_into(key, buffer_ptr, size)
        if got < 0:
            return None
        view = (ctypes.c_ubyte * got).from_address(buffer_ptr)
        parsed = _parse(memoryview(view), got)
        if parsed is None:
            return None
        code, shape, offset, nbytes = parsed
        torch = _torch()
        raw = torch.frombuffer((ctypes.c_ubyte * nbytes).from_address(buffer_ptr + offset),
                               dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
        return raw.view(getattr(torch, _DTYPES[code])).reshape(shape)

    def batch_get_tensor_into(self, keys, buffer_ptrs, sizes):
        return [self.get_tensor_into(k, p, s) for k, p, s in zip(keys, buffer_ptrs, sizes)]

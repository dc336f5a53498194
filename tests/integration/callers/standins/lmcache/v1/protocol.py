"""Stand-in for lmcache.v1.protocol.RemoteMetadata (README.md in this
folder): 28 bytes, seven int32 (length, format, dtype, 4 dims), as LMCache's."""
import struct

import torch

_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.uint8, torch.int64]


class RemoteMetadata:
    _S = struct.Struct("<iiiiiii")

    def __init__(self, length, shape, dtype, fmt):
        self.length, self.shape, self.dtype, self.fmt = length, torch.Size(shape), dtype, fmt

    def serialize(self):
        dims = list(self.shape) + [0] * (4 - len(self.shape))
        return self._S.pack(self.length, int(self.fmt), _DTYPES.index(self.dtype), *dims)

    @staticmethod
    def deserialize(data):
        length, fmt, dtype, *dims = RemoteMetadata._S.unpack(bytes(data))
        shape = [d for d in dims if d != 0]
        return RemoteMetadata(length, shape, _DTYPES[dtype], fmt)

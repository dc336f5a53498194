"""Stand-in for safetensors.torch's save/load (README.md in this folder):
the safetensors format, https://github.com/huggingface/safetensors: an 8-byte
little-endian header length, a JSON header naming each tensor's dtype, shape
and data_offsets, then the tensors' bytes."""
import json
import struct

import torch

_CODES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.float64: "F64", torch.int64: "I64", torch.int32: "I32", torch.int16: "I16",
          torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}
_DTYPES = {v: k for k, v in _CODES.items()}


def save(tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def load(data):
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(bytes(data[8:8 + n]))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        t = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        out[name] = t.view(_DTYPES[info["dtype"]]).reshape(info["shape"])
    return out

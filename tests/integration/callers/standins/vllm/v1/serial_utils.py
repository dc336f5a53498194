"""Stand-in for vllm.v1.serial_utils.MsgpackDecoder (README.md in this folder)."""
import msgpack


class MsgpackDecoder:
    def decode(self, frames):
        return msgpack.unpackb(bytes(frames[0]) if isinstance(frames, list) else frames)

"""Stand-in for lmcache.v1.memory_management (README.md in this folder): a
memory object is a CPU tensor and its shape, dtype and format."""


class MemoryObj:
    def __init__(self, tensor, fmt):
        self.tensor, self.fmt, self.refs = tensor, fmt, 1

    @property
    def byte_array(self):
        return memoryview(self.tensor.numpy()).cast("B")

    def get_shape(self):
        return self.tensor.shape

    def get_dtype(self):
        return self.tensor.dtype

    def get_memory_format(self):
        return self.fmt

    def ref_count_down(self):
        self.refs -= 1

"""Stand-in for lmcache's RemoteConnector base (README.md in this folder):
init_chunk_meta and reshape_partial_chunk as the connector uses them."""


class RemoteConnector:
    def init_chunk_meta(self, config, metadata):
        self.save_chunk_meta = config.save_chunk_meta if config is not None else True
        if self.save_chunk_meta or metadata is None:
            self.meta_shape = self.meta_dtype = self.meta_fmt = None
        else:
            self.meta_shape = tuple(metadata.chunk_shape)
            self.meta_dtype = metadata.kv_dtype
            self.meta_fmt = metadata.fmt

    def reshape_partial_chunk(self, memory_obj, bytes_read):
        full = memory_obj.tensor.numel() * memory_obj.tensor.element_size()
        if bytes_read != full:
            raise ValueError(f"partial chunk: {bytes_read} of {full} bytes")
        return memory_obj

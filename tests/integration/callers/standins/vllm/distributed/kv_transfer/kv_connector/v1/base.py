"""Stand-in for vLLM's KVConnectorMetadata base (README.md in this folder)."""


class KVConnectorMetadata:
    pass

"""crescent: a Python client of crescentd (pure Python over libcrescent.so).

    from crescent import Store, Indexer, CrescentError
    from crescent import MooncakeDistributedStore, ReplicateConfig   # Mooncake's class
"""
from crescent.indexer import Indexer, IndexerError
from crescent.mooncake_store import MooncakeDistributedStore, ReplicateConfig
from crescent.store import CrescentError, Store

__all__ = ["Store", "CrescentError", "Indexer", "IndexerError", "MooncakeDistributedStore",
           "ReplicateConfig"]

"""crescent: a Python client of crescentd (pure Python over libcrescent.so).

    from crescent import Store, Indexer, CrescentError
"""
from crescent.indexer import Indexer, IndexerError
from crescent.store import CrescentError, Store

__all__ = ["Store", "CrescentError", "Indexer", "IndexerError"]

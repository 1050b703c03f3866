"""Kafka's segment indexes, byte-compatible with the broker's files.

* :class:`OffsetIndex` (``.index``): sparse offset -> ``.log`` position map, memory-mapped.
* :class:`TimeIndex` (``.timeindex``): timestamp -> offset map, memory-mapped.
* :class:`TransactionIndex` (``.txnindex``): the aborted transactions of a segment, a plain file.
* :class:`LazyIndex`: opens an offset/time index on first use (Kafka's ``LazyIndex``).

Modules, lowest first: ``abstract_index`` (Kafka's ``AbstractIndex`` and the entry helpers),
``offset_index`` and ``time_index`` (both on ``abstract_index`` only), ``lazy_index`` (on both),
``transaction_index`` (on its own). The index layer imports only ``format`` and the foundation.
"""

from .abstract_index import (DEFAULT_MAX_INDEX_SIZE, AbstractIndex, IndexFullError, index_file_oversized,
                             index_oversized)
from .lazy_index import LazyIndex
from .offset_index import OffsetIndex, OffsetPosition
from .time_index import TimeIndex, TimestampOffset
from .transaction_index import AbortedTxn, TransactionIndex

__all__ = [
    "OffsetIndex", "TimeIndex", "TransactionIndex", "OffsetPosition", "TimestampOffset",
    "AbortedTxn", "AbstractIndex", "IndexFullError", "LazyIndex", "DEFAULT_MAX_INDEX_SIZE",
    "index_oversized", "index_file_oversized",
]

"""Kafka's segment indexes, byte-compatible with the broker's files (kafka_format.md §8-§10).

* :class:`OffsetIndex` (``.index``): sparse offset -> ``.log`` position map, memory-mapped.
* :class:`TimeIndex` (``.timeindex``): timestamp -> offset map, memory-mapped.
* :class:`TransactionIndex` (``.txnindex``): the aborted transactions of a segment, a plain file.
* :class:`LazyIndex`: opens an offset/time index on first use, as Kafka's segments hold them.
"""

from .abstract_index import DEFAULT_MAX_INDEX_SIZE, AbstractIndex, IndexFullError, LazyIndex
from .offset_index import OffsetIndex, OffsetPosition
from .time_index import TimeIndex, TimestampOffset
from .transaction_index import AbortedTxn, TransactionIndex

__all__ = [
    "OffsetIndex", "TimeIndex", "TransactionIndex", "OffsetPosition", "TimestampOffset",
    "AbortedTxn", "AbstractIndex", "IndexFullError", "LazyIndex", "DEFAULT_MAX_INDEX_SIZE",
]

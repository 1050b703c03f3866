"""Log compaction: the Cleaner, its offset map, LogCleanerManager and LogCleaner."""

from .cleaner import (CleanedTransactionMetadata, Cleaner, CleanerStats, LogToClean,
                      collect_aborted_transactions, last_records_of_active_producers, log_segments)
from .cleaner_manager import (IllegalCleaningStateError, LOG_CLEANING_ABORTED,
                              LOG_CLEANING_IN_PROGRESS, LogCleaner, LogCleanerManager,
                              LogCleaningPaused, PreCleanStats, calculate_cleanable_bytes,
                              cleanable_offsets)
from .offset_map import (SkimpyOffsetMap)
from .throttler import (Throttler)

__all__ = [
    "CleanedTransactionMetadata",
    "Cleaner",
    "CleanerStats",
    "IllegalCleaningStateError",
    "LOG_CLEANING_ABORTED",
    "LOG_CLEANING_IN_PROGRESS",
    "LogCleaner",
    "LogCleanerManager",
    "LogCleaningPaused",
    "LogToClean",
    "PreCleanStats",
    "SkimpyOffsetMap",
    "Throttler",
    "calculate_cleanable_bytes",
    "cleanable_offsets",
    "collect_aborted_transactions",
    "last_records_of_active_producers",
    "log_segments",
]

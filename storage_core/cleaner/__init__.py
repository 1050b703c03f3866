"""Log compaction: the Cleaner, its offset map and record filter, LogCleanerManager and LogCleaner."""

from .cleaned_transaction_metadata import CleanedTransactionMetadata
from .cleaner import (Cleaner, LogToClean, calculate_cleanable_bytes, collect_aborted_transactions,
                      last_records_of_active_producers, log_segments)
from .cleaner_manager import (IllegalCleaningStateError, LOG_CLEANING_ABORTED,
                              LOG_CLEANING_IN_PROGRESS, LogCleanerManager, LogCleaningPaused,
                              PreCleanStats, cleanable_offsets)
from .cleaner_stats import CleanerStats
from .log_cleaner import LogCleaner
from .offset_map import SkimpyOffsetMap
from .throttler import Throttler

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

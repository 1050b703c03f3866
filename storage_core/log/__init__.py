"""One partition's log: segments, their files, loading and recovery, and the `Log` facade."""

from .files import (CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX,
                    TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, TopicPartitionDir, filename_prefix, is_segment_file,
                    offset_from_filename, segment_base_offsets, segment_paths, topic_partition_dir, write_all)
from .close import close_logs
from .log import Log
from .read import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP,
                   MAX_TIMESTAMP, FetchResult, aborted_mask, is_read_committed, rows_in_range)
from .log_metrics import LogMetrics
from .segment import INT_MAX, LogSegment, TimestampAndOffset
from .segments import LogSegments, bases_in_range
from .view import LogView, OngoingTransactions, log_start_offset

__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "FetchResult",
    "INDEX_SUFFIX",
    "INT_MAX",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "LOG_SUFFIX",
    "Log",
    "LogMetrics",
    "LogSegment",
    "LogSegments",
    "LogView",
    "MAX_TIMESTAMP",
    "OngoingTransactions",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "TimestampAndOffset",
    "TopicPartitionDir",
    "aborted_mask",
    "bases_in_range",
    "close_logs",
    "filename_prefix",
    "is_read_committed",
    "is_segment_file",
    "log_start_offset",
    "offset_from_filename",
    "rows_in_range",
    "segment_base_offsets",
    "segment_paths",
    "topic_partition_dir",
    "write_all",
]

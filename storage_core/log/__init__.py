"""One partition's log: segments, their files, loading and recovery, and the `Log` facade."""

from .log import (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log, MAX_TIMESTAMP)
from .log_metrics import LogMetrics
from .segment import (CLEANED_SUFFIX, INT_MAX, LOG_SUFFIX, LogSegment, filename_prefix,
                      offset_from_filename, segment_paths, write_all)

__all__ = [
    "CLEANED_SUFFIX",
    "EARLIEST_TIMESTAMP",
    "INT_MAX",
    "LATEST_TIMESTAMP",
    "LOG_SUFFIX",
    "Log",
    "LogMetrics",
    "LogSegment",
    "MAX_TIMESTAMP",
    "filename_prefix",
    "offset_from_filename",
    "segment_paths",
    "write_all",
]

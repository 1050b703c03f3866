"""Counters a ``Log`` keeps about itself (Kafka's ``LogFlushStats``, the ``Size`` /
``NumLogSegments`` gauges and the retention activity). No registry, no reporter: a dataclass a
caller can print, compare or export; ``storage_core.server.metrics`` aggregates them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class LogMetrics:
    """Counters of one partition since it was opened. Times are nanoseconds of wall-clock time
    spent inside the call (``time.perf_counter_ns``)."""

    appends: int = 0                    # append calls that wrote batches
    appended_records: int = 0
    appended_bytes: int = 0
    append_time_ns: int = 0
    flushes: int = 0                    # fsyncs of the log (policy, roll, explicit, close)
    flush_time_ns: int = 0
    segments_deleted: int = 0           # by retention, delete-records or truncation of the start
    bytes_deleted: int = 0
    retention_runs: int = 0             # delete_old_segments calls
    segments_replaced: int = 0          # old segments swapped out by the cleaner (or a split)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

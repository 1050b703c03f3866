"""A task planned before the log cleaner swapped segments in still reads its range exactly once
(Log.replace_segments: the cleaner merges segments and keeps every surviving offset; a planned
segment file that is gone is found again by offset, never reported as data loss), while a
segment really removed by retention still is data loss. Runs the executor-side reader directly:
no SparkSession needed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from kafka_log_source.reader import DataLossError, KafkaLogInputPartition, _tables
from storage_core.config import LogConfig
from storage_core.log import Log
from storage_core.log import CLEANED_SUFFIX, LogSegment


def _records(n: int, start: int) -> pa.Table:
    return pa.table({"key": [b"k%03d" % i for i in range(start, start + n)],
                     "value": [b"v%03d" % i for i in range(start, start + n)]})


def _log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "t-0", LogConfig(file_delete_delay_ms=0))
    for i in range(4):                     # [0,5) [5,10) [10,15) and the active [15,20)
        log.append(_records(5, 5 * i))
        if i < 3:
            log.roll()
    return log


def _merge(log: Log, segs: list[LogSegment]) -> None:
    """What a clean of ``segs`` with nothing to remove writes: one segment with their batches."""
    new = LogSegment.open(log.dir, segs[0].base_offset, log.config, file_suffix=CLEANED_SUFFIX,
                          preallocate=False)
    data = b"".join(s.read_bytes(0, s.size) for s in segs)
    last = segs[-1].read_next_offset() - 1
    new.append(last, segs[-1].max_timestamp_so_far.timestamp, last, data)
    new.on_become_inactive_segment()
    new.flush()
    log.replace_segments([new], segs)


def _partition(log: Log, start: int, end: int, segments: tuple[int, ...]) -> KafkaLogInputPartition:
    return KafkaLogInputPartition(topic="t", partition=0, path=str(log.dir), start=start, end=end,
                                  segments=segments, max_bytes=64)


def _offsets(p: KafkaLogInputPartition) -> list[int]:
    return [o for t in _tables(p) for o in t.column("offset").to_pylist()]


def test_a_plan_made_before_a_swap_reads_every_offset_once(tmp_path: Path) -> None:
    log = _log(tmp_path)
    try:
        plan = _partition(log, 3, 17, (0, 5, 10, 15))
        _merge(log, log.segments[1:3])                # 5 and 10 become one segment at 5
        assert [s.base_offset for s in log.segments] == [0, 5, 15]
        assert not (log.dir / "00000000000000000010.log").exists()
        assert _offsets(plan) == list(range(3, 17))
        _merge(log, log.segments[0:2])                # now 0..14 in one segment at 0
        assert _offsets(plan) == list(range(3, 17))
        assert _offsets(_partition(log, 7, 20, (5, 10, 15))) == list(range(7, 20))
    finally:
        log.close()


def test_a_segment_removed_by_retention_is_still_data_loss(tmp_path: Path) -> None:
    log = _log(tmp_path)
    try:
        plan = _partition(log, 2, 12, (0, 5, 10))
        log.delete_records_before(10)
        with pytest.raises(DataLossError, match=r"\[2, 10\)"):
            _offsets(plan)
        lenient = KafkaLogInputPartition(**{**plan.__dict__, "fail_on_data_loss": False})
        assert _offsets(lenient) == [10, 11]
    finally:
        log.close()

"""Retention on real partition directories: ``Log.delete_old_segments`` (UnifiedLog's
deleteOldSegments: log start offset, retention.bytes, retention.ms), the asynchronous delete
through ``.deleted`` files, and delete-records, each test naming the line of
kafka_test_checklist.md §7 it covers.

Not applicable here, with the reason:
- [UnifiedLogTest.testDeleteOldSegments] "not deleted by retention until a high watermark is set"
  and [UnifiedLogTest.testCannotDeleteSegmentsAtOrAboveHighWatermark] "after each HW step":
  kafkalog has no replicas, so every appended record is committed and the high watermark is the
  log end offset, always set; the guard itself is in ``Log.deletable_segments`` and the rest of
  those tests (what remains after full expiry, the epoch cache, HW = LEO bounds) is covered below.
- The LogCleanerManagerTest lines about which logs the cleaner thread deletes from are in
  tests/storage/test_cleaner_manager.py.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from storage_core.config import LogConfig
from storage_core.errors import OffsetOutOfRangeError
from storage_core.format import encode_batches
from storage_core.log import Log

NOW = 1_800_000_000_000


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def records(n: int, start: int = 0, ts: int | None = None) -> pa.Table:
    stamps = np.full(n, ts, np.int64) if ts is not None else NOW + np.arange(start, start + n)
    return pa.table({"key": [b"k%03d" % i for i in range(start, start + n)],
                     "value": [b"v%03d" % i for i in range(start, start + n)],
                     "timestamp": pa.array(stamps, pa.int64())})


def three_segments(log: Log, per: int = 5, ts: int | None = None) -> None:
    """Segments [0, per), [per, 2 per) and the active [2 per, 3 per)."""
    for i in range(3):
        log.append(records(per, per * i, ts))
        if i < 2:
            log.roll()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def open_log(tmp_path: Path, clock: Clock, **cfg) -> Log:
    cfg.setdefault("file_delete_delay_ms", 0)
    return Log.open(tmp_path / "t-0", LogConfig(**cfg), clock=clock)


def bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def test_size_retention_deletes_whole_segments_over_the_limit(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.shouldDeleteSizeBasedSegments/shouldNotDeleteSizeBasedSegmentsWhenUnderRetentionSize]
    Size retention deletes oldest segments while the total exceeds retention.bytes by at least
    a whole segment: 15 records, 5 a segment, retention of 10 records leaves 2; of 15, 3."""
    with open_log(tmp_path, clock) as log:
        three_segments(log)
        seg = log.segments[0].size
        assert [s.size for s in log.segments] == [seg] * 3
    with open_log(tmp_path, clock, retention_bytes=3 * seg, retention_ms=-1) as log:
        assert log.delete_old_segments() == 0
        assert len(log.segments) == 3
    with open_log(tmp_path, clock, retention_bytes=2 * seg, retention_ms=-1) as log:
        assert log.delete_old_segments() == 1
        assert bases(log) == [5, 10]
        assert log.log_start_offset == 5
        assert log.read(5).column("offset").to_pylist() == list(range(5, 15))
        assert log.delete_old_segments() == 0


def test_time_retention_uses_each_segments_largest_timestamp(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.shouldDeleteTimeBasedSegmentsReadyToBeDeleted/shouldNotDeleteTimeBasedSegmentsWhenNoneReadyToBeDeleted]
    Every record at ts=10 with retention.ms 10000: all segments go (the log rolls first and
    keeps one empty segment); recent timestamps: none goes."""
    with open_log(tmp_path / "old", clock, retention_ms=10_000) as log:
        three_segments(log, ts=10)
        assert log.delete_old_segments() == 3
        assert len(log.segments) == 1 and log.segments[0].size == 0
        assert (log.log_start_offset, log.log_end_offset) == (15, 15)
    with open_log(tmp_path / "new", clock, retention_ms=10_000) as log:
        three_segments(log, ts=NOW - 5_000)
        assert log.delete_old_segments() == 0
        assert len(log.segments) == 3


def test_time_retention_is_by_largest_not_first_timestamp(tmp_path: Path, clock: Clock) -> None:
    """A segment whose first record is old but whose largest timestamp is recent stays, and the
    scan stops there: later old segments behind it stay too (oldest first, stop at the first
    that must stay)."""
    # segment.ms out of the way: Kafka rolls when a batch is segment.ms newer than the first
    with open_log(tmp_path, clock, retention_ms=1_000, segment_ms=2**62) as log:
        log.append(records(1, 0, ts=10))
        log.append(records(1, 1, ts=NOW))          # same segment, recent
        log.roll()
        log.append(records(2, 2, ts=10))           # old, but behind a segment that stays
        log.roll()
        log.append(records(1, 4, ts=NOW))
        assert bases(log) == [0, 2, 4]
        assert log.delete_old_segments() == 0
        assert bases(log) == [0, 2, 4]


def test_time_retention_falls_back_to_mtime_without_timestamps(tmp_path: Path, clock: Clock) -> None:
    """[LogCleanerParameterizedIntegrationTest.testCleansCombinedCompactAndDeleteTopic] (retention
    half) Records without timestamps (-1): a segment's age is its .log file's mtime, so
    compact,delete topics lose whole segments whose mtime is older than retention.ms."""
    clock.now = int(time.time() * 1000)          # judged against the files' real mtimes
    with open_log(tmp_path, clock, retention_ms=60_000, cleanup_policy="compact,delete") as log:
        three_segments(log, ts=-1)
        assert log.segments[0].largest_timestamp == int(os.stat(log.segments[0].log_path).st_mtime * 1000)
        old = (clock.now - 120_000) / 1000
        for seg in log.segments[:2]:
            os.utime(seg.log_path, (old, old))
        assert log.delete_old_segments() == 2
        assert bases(log) == [10]


def test_policy_decides_which_retention_applies(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete/shouldDeleteSegmentsReadyToBeDeletedWhenCleanupPolicyIsCompactAndDelete/shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete]
    cleanup.policy=compact disables time and size retention; compact,delete enables it;
    the log start offset applies whatever the policy."""
    with open_log(tmp_path / "c", clock, retention_ms=10_000, retention_bytes=1,
                  cleanup_policy="compact") as log:
        three_segments(log, ts=10)
        assert log.delete_old_segments() == 0
        assert len(log.segments) == 3
        log._maybe_increment_log_start_offset(7)       # what deleteRecords or a replica sets
        assert log.delete_old_segments() == 1          # [0, 5) lies wholly below 7
        assert bases(log) == [5, 10] and log.log_start_offset == 7
    with open_log(tmp_path / "cd", clock, retention_ms=10_000, cleanup_policy="compact,delete") as log:
        three_segments(log, ts=10)
        assert log.delete_old_segments() == 3
        assert len(log.segments) == 1


def test_retention_is_idempotent(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.testRetentionIdempotency] Advancing the log start offset to 1 unblocks time
    retention: two segments go in all, and a second run deletes nothing. (kafkalog's
    delete-records removes the breached segment at once, which Kafka leaves to the next check.)"""
    t = clock.now
    with open_log(tmp_path, clock, retention_ms=900) as log:
        log.append(records(1, 0, ts=t + 100))
        log.roll()
        log.append(records(1, 1, ts=t))
        log.roll()
        log.append(records(1, 2, ts=t + 100))
        clock.now += 901
        assert log.delete_records_before(1) == 1
        assert bases(log) == [1, 2]
        assert log.delete_old_segments() == 1          # [1]: 901 ms old; [2]: 801 ms
        assert bases(log) == [2]
        assert log.delete_old_segments() == 0


def test_expiring_everything_keeps_the_offsets(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.testThatGarbageCollectingSegmentsDoesntChangeOffset] Deleting every segment
    keeps the log end offset, leaves one empty segment, the next append gets the old LEO, and a
    second run deletes nothing."""
    with open_log(tmp_path, clock, retention_ms=1) as log:
        three_segments(log, ts=10)
        assert log.delete_old_segments() == 3
        assert (len(log.segments), log.log_end_offset) == (1, 15)
        assert log.delete_old_segments() == 0
        assert log.append(records(1, 15)).first_offset == 15
    with open_log(tmp_path, clock, retention_ms=1) as log:     # and after a reopen
        assert (log.log_start_offset, log.log_end_offset) == (15, 16)


def test_full_expiry_leaves_the_latest_epoch_at_the_end(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.testDeleteOldSegments] After full expiry one empty segment remains and the
    epoch cache holds only (latest epoch, LEO); [UnifiedLogTest.testLogDeletionAfterClose]
    delete() leaves no segment and an empty epoch cache."""
    with open_log(tmp_path, clock, retention_ms=1) as log:
        for epoch in (0, 1):
            raw = encode_batches(records(50, 50 * epoch, ts=10))
            log.append_raw(raw, leader_epoch=epoch)
            log.roll()
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(0, 0), (1, 50)]
        log.delete_old_segments()
        assert len(log.segments) == 1 and log.log_end_offset == 100
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(1, 100)]
        log.delete()
        assert log.segments == [] and len(log.leader_epoch_cache) == 0
    assert not (tmp_path / "t-0").exists()


def test_delete_records_then_segments(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.testLogDeletionAfterDeleteRecords] Log start offset 1 keeps 3 segments,
    6 deletes the first (2 left), 15 (= LEO) leaves 1."""
    with open_log(tmp_path, clock) as log:
        three_segments(log)
        for start, left in ((1, 3), (6, 2), (15, 1)):
            log.delete_records_before(start)
            assert (len(log.segments), log.log_start_offset) == (left, start)
            assert log.delete_old_segments() == 0


def test_log_start_offset_never_passes_the_high_watermark(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.testCannotIncrementLogStartOffsetPastHighWatermark] (HW = LEO here) 26 with
    the high watermark at 25 is refused with OffsetOutOfRangeError; nothing changes."""
    with open_log(tmp_path, clock) as log:
        log.append(records(25))
        assert log.high_watermark == 25
        with pytest.raises(OffsetOutOfRangeError, match="26"):
            log.delete_records_before(26)
        assert log.log_start_offset == 0
        assert log.delete_records_before(25) == 25


def test_deletable_segments_walks_in_order_and_stops(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.testDeletableSegmentsFilter/testDeletableSegmentsIteration] The predicate sees
    (segment, next segment) in order; the walk stops at the first rejected segment; the active
    segment qualifies only when it is not empty (HW = LEO here)."""
    with open_log(tmp_path, clock) as log:
        three_segments(log)
        seen = []

        def everything(seg, nxt):
            seen.append((seg.base_offset, None if nxt is None else nxt.base_offset))
            return True

        assert [s.base_offset for s in log.deletable_segments(everything)] == [0, 5, 10]
        assert seen == [(0, 5), (5, 10), (10, None)]
        assert [s.base_offset for s in log.deletable_segments(lambda s, n: s.base_offset != 5)] == [0]
        assert log.deletable_segments(lambda s, n: s.base_offset != 0) == []
        log.roll()                                   # an empty active segment never qualifies
        assert [s.base_offset for s in log.deletable_segments(lambda s, n: True)] == [0, 5, 10]


def test_async_delete_renames_now_and_removes_after_the_delay(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.testAsyncDelete] Retention renames a segment's files ".deleted" at once and
    removes them after file.delete.delay.ms; a read already holding the segment finishes."""
    with open_log(tmp_path, clock, retention_bytes=1, retention_ms=-1, file_delete_delay_ms=1000) as log:
        three_segments(log)
        old = log.segments[0]
        d = log.dir
        # retention.bytes is what stays: deleting the last segment would leave less than 1 byte
        assert log.delete_old_segments() == 2
        names = sorted(p.name for p in d.iterdir())
        assert "00000000000000000000.log" not in names
        for suffix in (".log", ".index", ".timeindex"):
            assert f"00000000000000000000{suffix}.deleted" in names
        # the renamed segment still serves a read that holds it
        assert old.read(0, 1 << 20) is not None
        clock.now += 999
        assert log.delete_expired_files() == 0
        assert (d / "00000000000000000000.log.deleted").exists()
        clock.now += 1
        assert log.delete_expired_files() >= 2
        assert not any(p.name.endswith(".deleted") for p in d.iterdir())
        assert log.metrics.segments_deleted == 2


def test_deleted_files_left_at_close_are_removed_by_the_next_open(tmp_path: Path, clock: Clock) -> None:
    """A process that stops before file.delete.delay.ms passed leaves ``.deleted`` files; the
    next load removes them (LogLoader), and the data reads as after the deletion."""
    with open_log(tmp_path, clock, retention_bytes=1, retention_ms=-1, file_delete_delay_ms=60_000) as log:
        three_segments(log)
        log.delete_old_segments()
        assert any(p.name.endswith(".deleted") for p in log.dir.iterdir())
    with open_log(tmp_path, clock) as log:
        assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())
        assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (10, 15, 1)


def test_readers_in_other_processes_survive_retention(tmp_path: Path, clock: Clock) -> None:
    """A read-only Log opened before retention keeps reading the segments it opened (its file
    descriptors), and one opened after sees the new log start offset: never a failure, never an
    offset twice."""
    with open_log(tmp_path, clock, retention_bytes=1, retention_ms=-1, file_delete_delay_ms=0) as log:
        three_segments(log)
        reader = Log.open(log.dir, read_only=True)
        try:
            log.delete_old_segments()                    # files unlinked at once (delay 0)
            assert reader.read(0, max_bytes=1 << 20).column("offset").to_pylist() == list(range(15))
        finally:
            reader.close()
        with Log.open(log.dir, read_only=True) as late:
            assert (late.log_start_offset, late.log_end_offset) == (10, 15)

"""The behaviours Kafka's LogSegmentTest, LocalLogTest, LogSegmentsTest, UnifiedLogTest and the
leader-path part of LogValidatorTest pin down (kafka_test_checklist.md §3 and §4), against
LogSegment and Log on real files.

Not tested in this file (§3/§4 lines that do not apply to kafkalog, or are tested elsewhere):
- [LogSegmentTest.testAppendFromFile]: appendFromFile exists to split segments whose offsets
  overflow 32 bits relative to their base; the split (Log._split_overflowed_segment) copies
  whole byte ranges in the kernel instead (LogSegment.copy_bytes_to). [UnifiedLogTest.testSplitOnOffsetOverflow/
  testDegenerateSegmentSplit/testDegenerateSegmentSplitWithOutOfRangeBatchLastOffset] are
  tested through recovery in tests/storage/test_log_loader.py (the split runs only there); a
  v2 append that cannot be stored relative to the active segment's base rolls (or is refused
  by the segment).
- [LogSegmentsTest.testBasicOperations/testSizeForLargeLogs] [UnifiedLogTest.testLogSegmentsCallCorrect]
  and the lowerSegment part of [LogSegmentsTest.testClosestMatchOperations]: kafkalog has no
  LogSegments sorted-map class; Log keeps a private sorted list (``Log.segments`` is a copy of it)
  with no put/remove or lowerSegment API of its own (segments come and go through roll, retention,
  truncation and the cleaner's replace_segments, each tested where it is written), and no
  total-size accessor (Python ints do not overflow anyway). What it does expose: base-offset
  order, the active segment the highest, floor reads (test_segment_collection_order_and_floor_reads),
  ``segments_in_range`` (LogSegments.values(from, to)), ``higher_segments`` (test_higher_segments)
  and ``non_active_segments_from`` (test_non_active_segments_from).
- [LogSegmentsTest.testUpdateDir] [LocalLogTest.testLogDeleteSegmentsSuccess/
  testLogDeleteDirSuccessWhenEmptyAndFailureWhenNonEmpty/testLogDirRenameToNewDir/
  testLogDirRenameToExistingDir/testRemoveAndDeleteSegmentsSync/testRemoveAndDeleteSegmentsAsync/
  testDeleteSegmentFilesAsync]: deleting and renaming log directories is the LogManager's
  (tests/storage/test_manager.py, test_delete_log_renames_then_deletes_after_delay) and
  asynchronous segment deletion after file.delete.delay.ms is retention's
  (tests/storage/test_retention.py, test_async_delete_renames_now_and_removes_after_the_delay).
- [UnifiedLogTest.testAppendToOrReadFromLogInFailedLogDir]: kafkalog has no LogDirFailureChannel
  taking a directory offline; a partition that fails to load stays unloaded, its error in
  ``LogManager.load_errors``, while the others load (test_manager.py,
  test_no_marker_when_a_partition_failed_to_load), and an append's I/O error reaches its caller.
- [UnifiedLogTest.testAppendAsLeaderWithRaftLeader]: no KRaft leader origin; the strict
  "base offset == LEO" check exists only for it. ``assign_offsets=False`` is Kafka's replication
  origin, which accepts gaps and refuses offsets below the LEO (test_append_validation_rules).
- [UnifiedLogTest.testMaybeUpdateHighWatermarkAsFollower], and the updateHighWatermark,
  "HW below the LEO" and fetchOffsetMetadata parts of the HW/fetch lines: kafkalog has no
  replicas, so the high watermark is not settable, it is the log end offset
  (test_high_watermark_is_the_log_end_offset, test_reads_bounded_by_high_watermark_across_roll,
  test_fetch_up_to_each_isolation_bound).
- [UnifiedLogTest.testLeaderEpochCacheClearedAfterDowngradeInAppendedMessages]: v0/v1 appends
  are refused (magic 2 only) and there is no message format downgrade, so nothing can clear the
  epoch cache that way.
- [LogValidatorTest.testDifferentCodecCausesRecompression/
  testDifferentLevelDoesNotCauseRecompression]: kafkalog does not recompress to the topic's codec:
  append_raw keeps the producer's codec (compression.type only picks the codec Log.append
  encodes Arrow tables with). The v0 case of checkLogAppendTimeNonCompressed: v2 appends only.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from storage_core.config import LogConfig
from storage_core.errors import (CorruptRecordError, InvalidOffsetError, OffsetOutOfRangeError,
                                 OffsetOverflowError, RecordTooLargeError)
from storage_core.format import decode_batches, encode_batches
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from storage_core.log import LogSegment


def batch(base: int, n: int = 1, ts0: int = 0, **kw) -> bytes:
    recs = [RecordInput(b"v%d" % (base + i), b"k%d" % (base + i), ts0 + 10 * (base + i)) for i in range(n)]
    return build_batch(recs, base_offset=base, **kw)


def append(seg: LogSegment, raw: bytes) -> None:
    infos = list(__import__("storage_core.format", fromlist=["iter_batches"]).iter_batches(raw))
    last = infos[-1].last_offset
    mx = max(i.max_timestamp for i in infos)
    shallow = next(i.last_offset for i in infos if i.max_timestamp == mx)
    seg.append(last, mx, shallow, raw)


@pytest.fixture
def seg(tmp_path: Path) -> LogSegment:
    s = LogSegment.open(tmp_path, 40, LogConfig(index_interval_bytes=1))
    yield s
    s.close()


def offsets_of(raw) -> list[int]:
    return decode_batches(raw).column("offset").to_pylist()


# ----------------------------------------------------------------------------- LogSegmentTest

@pytest.mark.parametrize("base,largest", [(0, -2**31), (0, 2**31), (1, 0), (100, 10), (2**31, 0),
                                          (2**31, 2**32)])
def test_append_offset_overflow(tmp_path: Path, base: int, largest: int) -> None:
    """[LogSegmentTest.testAppendForLogSegmentOffsetOverflowException]"""
    s = LogSegment.open(tmp_path, base, LogConfig())
    with pytest.raises(OffsetOverflowError):
        s.append(largest, 0, largest, batch(0))
    s.close()


def test_reads(seg: LogSegment) -> None:
    """[LogSegmentTest.testReadOnEmptySegment/testReadBeforeFirstOffset/testReadAfterLast/
    testReadFromGap/testNextOffsetCalculation]"""
    assert seg.read(40, 300) is None
    assert seg.read_next_offset() == 40
    append(seg, batch(50, 2) + batch(52, 2))
    assert offsets_of(seg.read(41, 1000)[1]) == [50, 51, 52, 53]
    assert seg.read(54, 1000) is None
    assert seg.read_next_offset() == 54
    append(seg, batch(60, 2))
    assert offsets_of(seg.read(55, 1000)[1]) == [60, 61]


def test_read_with_tiny_max_size(seg: LogSegment) -> None:
    """[LogSegmentTest.testReadWhenNoMaxPosition] maxSize 1: nothing (no whole batch fits)
    unless min_one_message; past the next offset: None."""
    first = batch(50, 2)
    append(seg, first + batch(52, 2))
    assert seg.read(48, 1, min_one_message=False) == (0, b"")
    assert seg.read(51, 1, min_one_message=False) == (0, b"")
    assert seg.read(53, 1, min_one_message=False) == (len(first), b"")
    pos, data = seg.read(53, 1, min_one_message=True)
    assert pos == len(first) and offsets_of(data) == [52, 53]
    assert seg.read(54, 1) is None


def test_truncate_cuts_whole_batches_and_index_entries(tmp_path: Path) -> None:
    """[LogSegmentTest.testTruncate/shouldTruncateEvenIfOffsetPointsToAGapInTheLog/testTruncateFull]"""
    s = LogSegment.open(tmp_path, 40, LogConfig(index_interval_bytes=1))
    for i in range(30):
        append(s, batch(40 + i))
    for cut in (69, 55, 41):
        s.truncate_to(cut)
        assert s.read_next_offset() == cut
        assert offsets_of(s.read(40, 10**6)[1])[-1] == cut - 1
        assert s.offset_index.last_offset < cut and s.time_index.last_entry.offset < cut
    s.truncate_to(40)
    assert s.size == 0 and s.read(40, 100) is None and not s.offset_index.is_full()
    append(s, batch(40))            # the same offsets can be appended again
    s.close()
    g = LogSegment.open(tmp_path / "gap", 40, LogConfig()) if (tmp_path / "gap").mkdir() is None else None
    append(g, batch(40) + batch(43))
    g.truncate_to(41)
    assert offsets_of(g.read(40, 1000)[1]) == [40]
    g.close()


def test_largest_timestamp_and_next_offset_after_truncation(tmp_path: Path) -> None:
    """[LogSegmentTest.testReloadLargestTimestampAndNextOffsetAfterTruncation]"""
    s = LogSegment.open(tmp_path, 40, LogConfig(index_interval_bytes=len(batch(40)) * 2 - 1))
    for i in range(30):
        append(s, batch(40 + i))
    assert s.time_index.entries == 14
    s.truncate_to(41)
    assert s.time_index.entries == 0
    assert s.largest_timestamp == 400
    assert s.read_next_offset() == 41
    s.close()


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    """[LogSegmentTest.testFindOffsetByTimestamp] timestamps 400..490 for offsets 40..49,
    indexed every 2 records."""
    s = LogSegment.open(tmp_path, 40, LogConfig(index_interval_bytes=len(batch(40)) * 2 - 1))
    for i in range(10):
        append(s, batch(40 + i))
    expect = {420: 42, 421: 43, 430: 43, 431: 44, 401: 41, 399: 40, 491: None}
    for ts, off in expect.items():
        got = s.find_offset_by_timestamp(ts)
        assert (None if got is None else got.offset) == off, ts
    assert s.largest_timestamp == 490
    s.close()


def test_recovery_rebuilds_corrupt_indexes(tmp_path: Path) -> None:
    """[LogSegmentTest.testRecoveryFixesCorruptIndex/testRecoveryFixesCorruptTimeIndex]"""
    s = LogSegment.open(tmp_path, 0, LogConfig(index_interval_bytes=1))
    for i in range(100):
        append(s, batch(i, ts0=0))
    # scribble over both indexes, then recover
    for idx in (s.offset_index, s.time_index):
        idx.flush()
    with open(s.offset_index.path, "r+b") as f:
        f.write(os.urandom(80))
    with open(s.time_index.path, "r+b") as f:
        f.write(os.urandom(120))
    s.close()
    s = LogSegment.open(tmp_path, 0, LogConfig(index_interval_bytes=1))
    s.offset_index.resize(LogConfig().segment_index_bytes)
    s.recover()
    for i in range(100):
        assert offsets_of(s.read(i, 1)[1])[0] == i
        assert s.find_offset_by_timestamp(i * 10).offset == i
        if i < 99:
            assert s.find_offset_by_timestamp(i * 10 + 1).offset == i + 1
    s.close()


def test_recovery_truncates_at_the_corrupt_batch(tmp_path: Path) -> None:
    """[LogSegmentTest.testRecoveryWithCorruptMessage]"""
    rng = np.random.default_rng(3)
    for trial in range(10):
        d = tmp_path / str(trial)
        d.mkdir()
        s = LogSegment.open(d, 0, LogConfig(index_interval_bytes=1))
        positions = []
        nxt = 0
        for i in range(50):
            positions.append(s.size)
            n = 3 if i % 2 else 1
            append(s, batch(nxt, n))
            nxt += n
        hit = int(rng.integers(0, len(positions)))
        pos = positions[hit] + int(rng.integers(21, 40))      # inside the CRC-covered bytes
        s.close()
        raw = bytearray((d / "00000000000000000000.log").read_bytes())
        raw[pos] ^= 0xFF
        (d / "00000000000000000000.log").write_bytes(raw)
        s = LogSegment.open(d, 0, LogConfig(index_interval_bytes=1))
        s.recover()
        assert s.size == positions[hit]
        s.close()


def test_preallocated_segment_is_trimmed_on_close(tmp_path: Path) -> None:
    """[LogSegmentTest.testCreateWithInitFileSizeClearShutdown]"""
    cfg = LogConfig(preallocate=True, segment_bytes=512 * 1024 * 1024)
    s = LogSegment.open(tmp_path, 40, cfg)
    assert s.log_path.stat().st_size == 512 * 1024 * 1024 and s.size == 0
    append(s, batch(40, 3))
    written = s.size
    s.close()
    assert s.log_path.stat().st_size == written
    s = LogSegment.open(tmp_path, 40, LogConfig())
    assert s.size == written and offsets_of(s.read(40, 1000)[1]) == [40, 41, 42]
    s.close()


def test_change_file_suffixes(tmp_path: Path) -> None:
    """[LogSegmentTest.testChangeFileSuffixes]"""
    s = LogSegment.open(tmp_path, 40, LogConfig())
    append(s, batch(40))
    s.change_file_suffixes("", ".deleted")
    assert s.log_path.name == "00000000000000000040.log.deleted"
    assert s.offset_index.path.name == "00000000000000000040.index.deleted"
    assert (tmp_path / "00000000000000000040.log.deleted").exists()
    s.delete()
    assert not any(tmp_path.iterdir())


def test_recovery_rebuilds_epoch_cache(tmp_path: Path) -> None:
    """[LogSegmentTest.testRecoveryRebuildsEpochCache] batches at 104 (e0), 106 (e1),
    108 (e1), 110 (e2) -> [(0,104), (1,106), (2,110)]"""
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.truncate_to(0)
        for base, epoch in ((104, 0), (106, 1), (108, 1), (110, 2)):
            if base == 104:
                log.truncate_to(0)
            log.append_raw(batch(base, 2), assign_offsets=False, leader_epoch=epoch)
    (part / "leader-epoch-checkpoint").unlink()
    (tmp_path / "recovery-point-offset-checkpoint").unlink()
    with Log.open(part) as log:
        got = [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries]
        assert got == [(0, 104), (1, 106), (2, 110)]


# ----------------------------------------------------------------------------- LocalLog / UnifiedLog

def table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"key": [b"k%d" % i for i in range(start, start + n)],
                     "value": [b"v%d" % i for i in range(start, start + n)],
                     "timestamp": pa.array(np.arange(start, start + n) * 10 + 1000, pa.int64())})


def test_roll_rules(tmp_path: Path) -> None:
    """[LocalLogTest.testRollEmptyActiveSegment/testNewSegmentsAfterRoll/
    testRollSegmentErrorWhenNextOffsetIsIllegal/testRollSegmentThatAlreadyExists]"""
    with Log.open(tmp_path / "t-0") as log:
        log.roll()
        assert len(log.segments) == 1
        log.append(table(1))
        log.roll()
        assert [s.base_offset for s in log.segments] == [0, 1]
        log.append(table(1, 1))
        log.roll(1)                       # below the log end offset: rolls at the LEO
        assert [s.base_offset for s in log.segments] == [0, 1, 2]


def test_append_info_first_offsets_and_recovery_point(tmp_path: Path) -> None:
    """[UnifiedLogTest.testAppendInfoFirstOffset] [LocalLogTest.testLogAppend/testLogFlush]"""
    with Log.open(tmp_path / "t-0", LogConfig(segment_bytes=200)) as log:
        firsts = [log.append(table(3, 3 * i)).first_offset for i in range(3)]
        assert firsts == [0, 3, 6]
        # no flush by policy, but every roll flushes up to the new segment's base
        assert log.recovery_point == log.active_segment.base_offset < 9
        log.flush()
        assert log.recovery_point == 9


def test_closed_log_refuses_appends_and_close_is_idempotent(tmp_path: Path) -> None:
    """[LocalLogTest.testLogCloseSuccess/testLogCloseIdempotent]"""
    log = Log.open(tmp_path / "t-0")
    log.close()
    log.close()
    with pytest.raises(Exception, match="closed"):
        log.append(table(1))


def test_truncate_to_across_segments(tmp_path: Path) -> None:
    """[LocalLogTest.testTruncateTo] [UnifiedLogTest.testTruncateTo/testIndexResizingAtTruncation]"""
    cfg = LogConfig(segment_bytes=250)
    with Log.open(tmp_path / "t-0", cfg) as log:
        for i in range(15):
            log.append(table(1, i))
        n = len(log.segments)
        assert n > 3
        log.truncate_to(log.log_end_offset)          # no-op
        log.truncate_to(log.log_end_offset + 1)      # no-op
        assert len(log.segments) == n
        log.truncate_to(7)
        assert log.log_end_offset == 7
        assert log.read(0, max_bytes=10**6).column("offset").to_pylist() == list(range(7))
        assert log.active_segment.offset_index.max_entries == cfg.segment_index_bytes // 8
        assert log.append(table(1, 7)).first_offset == 7
        log.truncate_to(0)
        assert log.log_end_offset == 0 and len(log.segments) == 1


def test_read_bounds(tmp_path: Path) -> None:
    """[UnifiedLogTest.testReadOutOfRange/testReadAtLogGap/testCompressedMessages/
    testWhenFetchOffsetHigherThanMaxOffset]"""
    with Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300)) as log:
        log.append(table(4), compression="gzip")
        assert log.read_raw(4) == b""                            # at the LEO: nothing
        with pytest.raises(OffsetOutOfRangeError):
            log.read(5)
        raw = log.read_raw(3)
        assert offsets_of(raw) == [0, 1, 2, 3]                   # the whole compressed batch
        assert log.read(3).column("offset").to_pylist() == [3]
        assert log.read(1, max_offset=3).column("offset").to_pylist() == [1, 2]
        assert log.read(3, max_offset=3).num_rows == 0
        # a gap at the end of a segment is served from the next one
        log.append_raw(batch(10, 2), assign_offsets=False)
        log.roll()
        log.append_raw(batch(20, 2), assign_offsets=False)
        assert log.read(12).column("offset").to_pylist()[0] == 20


def test_append_validation_rules(tmp_path: Path) -> None:
    """[UnifiedLogTest.testMessageSetSizeCheck/testMessageSizeCheck/testCompactedTopicConstraints/
    testAppendWithOutOfOrderOffsetsThrowsException/testAppendBelowExpectedOffsetThrowsException/
    testAppendWithNoTimestamp/testAppendMessageWithNullPayload]
    [LogValidatorTest.testControlRecordsNotAllowedFromClients/testBatchWithoutRecordsNotAllowed/
    testValidationOfBatchesWithNonSequentialInnerOffsets]"""
    from storage_core.format import end_transaction_marker_batch, write_empty_header
    from storage_core.format.control import ControlRecordType, EndTransactionMarker

    with Log.open(tmp_path / "small-0", LogConfig(segment_bytes=100)) as log:
        with pytest.raises(RecordTooLargeError, match="segment size"):
            log.append(table(10))
    with Log.open(tmp_path / "compact-0", LogConfig(cleanup_policy="compact")) as log:
        keyless = pa.table({"key": [b"a", None], "value": [b"1", b"2"]})
        with pytest.raises(CorruptRecordError, match="Compacted topic cannot accept message without key.*record 1"):
            log.append(keyless)
        log.append(pa.table({"key": [b"a"], "value": [None]}))
    with Log.open(tmp_path / "t-0") as log:
        with pytest.raises(InvalidOffsetError):
            log.append_raw(batch(0) + batch(1) + batch(3) + batch(2), assign_offsets=False)
        assert log.log_end_offset == 0
        marker = end_transaction_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 0),
                                              offset=0, timestamp=1, producer_id=1, producer_epoch=0)
        with pytest.raises(CorruptRecordError, match="Control records are not allowed"):
            log.append_raw(marker)
        with pytest.raises(CorruptRecordError, match="without records"):
            log.append_raw(write_empty_header(base_offset=0, last_offset=0, max_timestamp=1))
        gappy = build_batch([RecordInput(b"a"), RecordInput(b"b")], offset_deltas=[0, 2])
        with pytest.raises(CorruptRecordError, match="not sequential"):
            log.append_raw(gappy)
        info = log.append(pa.table({"value": [None, b"x"], "timestamp": pa.array([-1, -1], pa.int64())}))
        assert info.num_records == 2
        got = log.read(0)
        assert got.column("value").to_pylist() == [None, b"x"]
    with Log.open(tmp_path / "late-0") as log:
        log.truncate_to(0)
        log.delete_records_before(0)
        log.append_raw(batch(7, 3), assign_offsets=False)
        with pytest.raises(InvalidOffsetError, match="starts at 4"):
            log.append_raw(batch(4, 3), assign_offsets=False)


def test_time_based_roll(tmp_path: Path) -> None:
    """[UnifiedLogTest.testTimeBasedLogRollDuringAppend] no roll on an empty segment; roll once
    the incoming batch is segment.ms past the segment's first batch timestamp."""
    now = [10_000]
    cfg = LogConfig(segment_ms=3600)
    with Log.open(tmp_path / "t-0", cfg, clock=lambda: now[0]) as log:
        log.append(pa.table({"value": [b"a"], "timestamp": pa.array([1000], pa.int64())}))
        log.append(pa.table({"value": [b"b"], "timestamp": pa.array([1000 + 3600], pa.int64())}))
        assert len(log.segments) == 1
        log.append(pa.table({"value": [b"c"], "timestamp": pa.array([1000 + 3601], pa.int64())}))
        assert len(log.segments) == 2


def test_size_based_roll(tmp_path: Path) -> None:
    """[UnifiedLogTest.testSizeBasedLogRoll] 11 single-record batches into segments that hold 10."""
    one = len(encode_batches(table(1)))
    with Log.open(tmp_path / "t-0", LogConfig(segment_bytes=10 * one)) as log:
        for i in range(11):
            log.append(table(1, i))
        assert len(log.segments) == 2


def test_fetch_offset_by_timestamp_specials(tmp_path: Path) -> None:
    """[UnifiedLogTest.testFetchOffsetByTimestampIncludesLeaderEpoch/
    testFetchOffsetByTimestampWithMaxTimestampIncludesTimestamp]"""
    with Log.open(tmp_path / "t-0") as log:
        assert log.fetch_offset_by_timestamp(1000) is None
        log.append_raw(encode_batches(pa.table({"value": [b"a", b"b", b"c"],
                                                "timestamp": pa.array([5000, 5001, 5000], pa.int64())})),
                       leader_epoch=3)
        got = log.fetch_offset_by_timestamp(5001)
        assert (got.timestamp, got.offset, got.leader_epoch) == (5001, 1, 3)
        assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0
        latest = log.fetch_offset_by_timestamp(LATEST_TIMESTAMP)
        assert (latest.offset, latest.leader_epoch) == (3, 3)
        mx = log.fetch_offset_by_timestamp(MAX_TIMESTAMP)
        assert (mx.timestamp, mx.offset) == (5001, 1)


def test_log_start_offset_on_empty_reinitialised_log(tmp_path: Path) -> None:
    """[UnifiedLogTest.testLogReinitializeAfterManualDelete]"""
    part = tmp_path / "t-0"
    part.mkdir()
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nt 0 500\n")
    with Log.open(part) as log:
        assert log.log_start_offset == log.log_end_offset == 500
        assert log.append(table(1)).first_offset == 500


# ----------------------------------------------------------------------------- helpers for the tests below

def notime(base: int, n: int = 1) -> bytes:
    """Records without a timestamp (NO_TIMESTAMP): time-based rolling then measures from the
    segment's creation time."""
    return build_batch([RecordInput(b"n%d" % (base + i)) for i in range(n)], base_offset=base)


def ts_batch(base: int, timestamps: list[int], **kw) -> bytes:
    return build_batch([RecordInput(b"t%d" % (base + i), None, t) for i, t in enumerate(timestamps)],
                       base_offset=base, **kw)


def epochs(log: Log) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries]


def epochs_on_disk(part: Path) -> list[tuple[int, int]]:
    from storage_core.checkpoint import LeaderEpochCheckpointFile
    return [(e.epoch, e.start_offset) for e in LeaderEpochCheckpointFile.in_dir(part).read()]


def headers_of(raw: bytes):
    from storage_core.format import iter_batches
    return [b.header for b in iter_batches(raw)]


def start_at(tmp_path: Path, offset: int) -> Path:
    """A partition directory whose (empty) log starts at ``offset``, through the data dir's
    log-start-offset checkpoint as a broker would leave it."""
    (tmp_path / "log-start-offset-checkpoint").write_text(f"0\n1\nt 0 {offset}\n")
    part = tmp_path / "t-0"
    part.mkdir()
    return part


# ----------------------------------------------------------------------------- LogSegmentTest (more)

def test_truncate_empty_reopened_segment(tmp_path: Path) -> None:
    """[LogSegmentTest.testTruncateEmptySegment] a reopened empty segment has 0-byte (full)
    indexes; truncating it resizes them, and it never rolls on time while empty, only when the
    next offset cannot be stored relative to its base (the created-time reset is
    test_truncation_to_empty_restarts_the_roll_clock)."""
    s = LogSegment.open(tmp_path, 0, LogConfig(segment_ms=300_000))
    s.close()
    reopened = LogSegment.open(tmp_path, 0, LogConfig(segment_ms=300_000))
    assert os.path.getsize(reopened.offset_index.path) == 0
    assert os.path.getsize(reopened.time_index.path) == 0
    assert reopened.offset_index.is_full() and reopened.time_index.is_full()
    reopened.truncate_to(57)
    assert not reopened.offset_index.is_full() and not reopened.time_index.is_full()
    far_future = reopened.created_ms + 10 * 300_000
    assert not reopened.should_roll(incoming_bytes=1024, max_timestamp_in_messages=-1,
                                    max_offset_in_messages=100, now_ms=far_future)
    assert reopened.should_roll(incoming_bytes=1024, max_timestamp_in_messages=-1,
                                max_offset_in_messages=2**31 - 1 + 200, now_ms=far_future)
    reopened.close()


def test_truncation_to_empty_restarts_the_roll_clock(tmp_path: Path) -> None:
    """[LogSegmentTest.testTruncateEmptySegment/testTruncateFull] (timeWaitedForRoll = 0 after a
    truncation that empties the segment)."""
    cfg = LogConfig(segment_ms=60_000)
    part = tmp_path / "t-0"
    with Log.open(part, cfg) as log:
        log.append_raw(notime(0))
    an_hour_ago = time.time() - 3600
    os.utime(part / "00000000000000000000.log", (an_hour_ago, an_hour_ago))
    with Log.open(part, cfg) as log:
        log.truncate_to(0)
        assert log.active_segment.size == 0
        log.append_raw(notime(0))
        log.append_raw(notime(0))
        assert len(log.segments) == 1


def test_roll_time_measured_from_first_batch_timestamp(tmp_path: Path) -> None:
    """[LogSegmentTest.testGetFirstBatchTimestamp] kafkalog has no getFirstBatchTimestamp (the
    cleaner's max.compaction.lag.ms reads it); the same value drives time-based rolling: none on
    an empty segment, the first batch's max timestamp (1000) after appends, read back from the
    file after a reopen."""
    cfg = LogConfig(segment_ms=100)
    s = LogSegment.open(tmp_path, 0, cfg)
    assert s.rolling_based_timestamp is None
    append(s, ts_batch(0, [990, 1000]))
    append(s, ts_batch(2, [1050]))
    assert s.rolling_based_timestamp == 1000
    kw = dict(incoming_bytes=10, max_offset_in_messages=5, now_ms=0)
    assert not s.should_roll(max_timestamp_in_messages=1100, **kw)
    assert s.should_roll(max_timestamp_in_messages=1101, **kw)
    s.close()
    reopened = LogSegment.open(tmp_path, 0, cfg)
    for idx in (reopened.offset_index, reopened.time_index):     # as Log does for its active segment
        idx.resize(cfg.segment_index_bytes)
    assert reopened.rolling_based_timestamp is None                  # not loaded yet: read from the file
    assert not reopened.should_roll(max_timestamp_in_messages=1100, **kw)
    assert reopened.should_roll(max_timestamp_in_messages=1101, **kw)
    assert reopened.rolling_based_timestamp == 1000
    reopened.close()


def test_delete_tolerates_missing_index_files(tmp_path: Path) -> None:
    """[LogSegmentTest.testDeleteIfExistsWithGetParentIsNull]"""
    s = LogSegment.open(tmp_path, 0, LogConfig())
    append(s, batch(0, 3))
    os.unlink(s.offset_index.path)
    os.unlink(s.time_index.path)
    s.delete()
    assert not any(tmp_path.iterdir())
    s.delete()                                  # and deleting again is harmless


# ----------------------------------------------------------------------------- segment collection

def test_segment_collection_order_and_floor_reads(tmp_path: Path) -> None:
    """[LogSegmentsTest.testSegmentAccess/testClosestMatchOperations] (the parts Log exposes:
    segments in base-offset order, the active segment the highest, reads served from the floor
    segment — floorSegment(2) -> 1, floorSegment(3) -> 3 — for bases 1, 3, 5, 7)."""
    part = start_at(tmp_path, 1)
    with Log.open(part) as log:
        for base in (1, 3, 5, 7):
            if base > 1:
                log.roll()
            log.append_raw(batch(base, 2), assign_offsets=False)
        bases = [s.base_offset for s in log.segments]
        assert bases == [1, 3, 5, 7]
        assert log.active_segment.base_offset == max(bases) == 7
        assert log.active_segment is log.segments[-1]
        for offset, floor in ((1, 1), (2, 1), (3, 3), (4, 3), (6, 5), (8, 7)):
            first = headers_of(log.read_raw(offset, max_bytes=1))[0]
            assert first.base_offset == floor, offset


def log_with_bases(part_dir: Path, bases: tuple[int, ...]) -> Log:
    """A log whose segments start at ``bases`` (one record each, the last segment active)."""
    part_dir.mkdir(parents=True, exist_ok=True)
    log = Log.open(start_at(part_dir, bases[0]))
    for base in bases:
        if base > bases[0]:
            log.roll(base)
        log.append_raw(batch(base, 1), assign_offsets=False)
    assert [s.base_offset for s in log.segments] == list(bases)
    return log


def test_higher_segments(tmp_path: Path) -> None:
    """[LogSegmentsTest.testHigherSegments] and the higherSegment part of
    [LogSegmentsTest.testClosestMatchOperations]: ``Log.higher_segments(x)`` is the segments whose
    base is strictly greater than x, in order (bases 1, 3, 5, 7, 9)."""
    with log_with_bases(tmp_path, (1, 3, 5, 7, 9)) as log:
        def higher(x: int) -> list[int]:
            return [s.base_offset for s in log.higher_segments(x)]

        assert higher(0) == [1, 3, 5, 7, 9]
        assert higher(1) == higher(2) == [3, 5, 7, 9]
        assert higher(4) == [5, 7, 9] and higher(5) == [7, 9]
        assert higher(8) == [9]
        assert higher(9) == higher(100) == []
        assert log.higher_segments(0)[0] is log.segments[0]          # the log's segments, not copies


def test_non_active_segments_from(tmp_path: Path) -> None:
    """[LocalLogTest.testNonActiveSegmentsFrom] (bases 0..4 with 5 active: from 0 -> 0..4, from
    2 -> 2..4, from 5 or 6 -> none) and the nonActiveLogSegmentsFrom part of
    [LogSegmentsTest.testSegmentAccess] (bases 1..4 with 4 active: from 2 -> [2, 3], from 4 -> none);
    an offset inside a segment starts the list at that segment, one below the first at the first."""
    with log_with_bases(tmp_path / "a", (0, 1, 2, 3, 4, 5)) as log:
        def non_active(x: int) -> list[int]:
            return [s.base_offset for s in log.non_active_segments_from(x)]

        assert non_active(0) == [0, 1, 2, 3, 4]
        assert non_active(2) == [2, 3, 4]
        assert non_active(5) == non_active(6) == []
    with log_with_bases(tmp_path / "b", (1, 2, 3, 4)) as log:
        assert [s.base_offset for s in log.non_active_segments_from(2)] == [2, 3]
        assert log.non_active_segments_from(4) == []
    with log_with_bases(tmp_path / "c", (10, 20, 30)) as log:
        assert [s.base_offset for s in log.non_active_segments_from(15)] == [10, 20]
        assert [s.base_offset for s in log.non_active_segments_from(0)] == [10, 20]


def test_segment_files_are_named_by_20_digit_base_offset(tmp_path: Path) -> None:
    """[LocalLogTest.testOffsetFromFile]"""
    from storage_core.log import filename_prefix, offset_from_filename

    big = 12_345_678_901_234
    assert filename_prefix(5) == "00000000000000000005" and len(filename_prefix(big)) == 20
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        assert offset_from_filename(filename_prefix(big) + suffix) == big
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.append_raw(batch(0))
        log.append_raw(batch(big, 2), assign_offsets=False)     # cannot be stored relative to 0: rolls
        assert [s.base_offset for s in log.segments] == [0, big]
    names = sorted(p.name for p in part.iterdir() if p.suffix in (".log", ".index", ".timeindex"))
    assert names == ["00000000000000000000.index", "00000000000000000000.log",
                     "00000000000000000000.timeindex", "00000012345678901234.index",
                     "00000012345678901234.log", "00000012345678901234.timeindex"]
    assert {offset_from_filename(n) for n in names} == {0, big}


def test_truncate_below_first_segment_starts_afresh(tmp_path: Path) -> None:
    """[LocalLogTest.testCreateAndDeleteSegment] (Log.truncate_to below the first segment's base
    is UnifiedLog's truncateFullyAndStartAt: the segments are replaced by one empty segment at
    the new offset, LEO = log start = HW = it; the recovery point is not raised, only capped
    at the new LEO as Kafka's updateLogEndOffset does)."""
    part = start_at(tmp_path, 10)
    with Log.open(part) as log:
        log.append(table(3))
        assert (log.log_start_offset, log.log_end_offset) == (10, 13)
        before = log.recovery_point
        log.truncate_to(5)
        assert [s.base_offset for s in log.segments] == [5]
        assert log.active_segment.size == 0
        assert log.log_start_offset == log.log_end_offset == log.high_watermark == 5
        assert log.recovery_point == min(before, 5)
        assert log.append(table(1)).first_offset == 5
    assert sorted(p.name for p in part.glob("*.log")) == ["00000000000000000005.log"]


# ----------------------------------------------------------------------------- high watermark

def test_high_watermark_is_the_log_end_offset(tmp_path: Path) -> None:
    """[UnifiedLogTest.testHighWatermarkMaintenance] without replicas the high watermark is the
    LEO: 0 on a new log, moved by every append (Kafka's waits for replication), never above the
    LEO, lowered by truncate_to(3), and a full truncation sets log start = LEO = HW."""
    part = start_at(tmp_path, 2)
    with Log.open(part) as log:
        assert log.high_watermark == log.log_end_offset == 2
        for i in range(5):
            log.append(table(1, i))                     # batch by batch: truncation cuts whole batches
        assert log.high_watermark == log.log_end_offset == 7
        log.truncate_to(3)
        assert log.high_watermark == log.log_end_offset == 3
        log.truncate_to(1)                              # below the first base: afresh at 1
        assert log.log_start_offset == log.log_end_offset == log.high_watermark == 1
    with Log.open(tmp_path / "t-1") as log:
        assert log.high_watermark == 0


def test_reads_bounded_by_high_watermark_across_roll(tmp_path: Path) -> None:
    """[UnifiedLogTest.testHighWatermarkMetadataUpdatedAfterSegmentRoll] (HW = LEO: what is
    appended is readable at once; after a roll the data still reads from offset 0 and a read at
    the HW returns nothing)."""
    with Log.open(tmp_path / "t-0") as log:
        log.append(table(3))
        assert log.high_watermark == 3
        log.roll()
        assert [s.base_offset for s in log.segments] == [0, 3]
        assert log.high_watermark == 3
        assert log.read(0).column("offset").to_pylist() == [0, 1, 2]
        assert log.read(log.high_watermark).num_rows == 0
        assert log.read_raw(log.high_watermark) == b""
        log.append(table(1, 3))
        assert log.high_watermark == 4
        assert log.read(0).column("offset").to_pylist() == [0, 1, 2, 3]


def first_row(t: pa.Table) -> dict:
    row = t.slice(0, 1).to_pylist()[0]
    row["timestamp"] = t.column("timestamp").cast(pa.int64())[0].as_py()
    return row


def txn_batch(pid: int, seq: int, n: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([RecordInput(b"p%d-%d" % (pid, seq + i), None, now) for i in range(n)],
                       producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


def test_fetch_up_to_each_isolation_bound(tmp_path: Path) -> None:
    """[UnifiedLogTest.testFetchUpToLogEndOffset/testFetchUpToHighWatermark/
    testFetchUpToLastStableOffset] reads return every data record at or after the fetch offset
    and below the isolation's bound (LEO = HW here; the LSO for read_committed), nothing from
    the bound up to the LEO; the LSO is the first offset of the earliest open transaction: 0
    while producer 1's is open, 8 (producer 2's) once it commits, the LEO once all are done.
    (fetchOffsetMetadata has no counterpart; HW = LEO, so no "HW below the marker" phase.)"""
    with Log.open(tmp_path / "t-0") as log:
        log.append_raw(txn_batch(1, 0, 5))           # 0..4
        log.append(table(3))                         # 5..7
        log.append_raw(txn_batch(2, 0, 2))           # 8..9
        log.append_raw(txn_batch(1, 5, 4))           # 10..13
        log.append(table(2))                         # 14..15
        log.append_raw(txn_batch(1, 9, 10))          # 16..25
        data = list(range(26))

        def check(isolation: str, bound: int) -> None:
            for o in range(log.log_end_offset + 1):
                got = log.read(o, isolation=isolation).column("offset").to_pylist()
                assert got == [x for x in data if o <= x < bound], (isolation, o)

        assert log.last_stable_offset == 0
        check("read_uncommitted", log.high_watermark)
        check("read_committed", 0)
        log.append_end_txn_marker(1, 0, "commit", 0)     # 26
        assert log.last_stable_offset == 8
        check("read_committed", 8)
        log.append_end_txn_marker(2, 0, "commit", 0)     # 27
        assert log.last_stable_offset == log.log_end_offset == log.high_watermark == 28
        check("read_committed", 28)
        check("read_uncommitted", 28)


# ----------------------------------------------------------------------------- rolling and flushing

def test_time_based_roll_jitter(tmp_path: Path) -> None:
    """[UnifiedLogTest.testTimeBasedLogRollJitter] segment.ms 3600, segment.jitter.ms 1200: no
    roll at segment.ms - max jitter, a roll at segment.ms - the segment's jitter + 1."""
    segment_ms, max_jitter = 3600, 1200
    cfg = LogConfig(segment_ms=segment_ms, segment_jitter_ms=max_jitter)
    state = random.getstate()
    random.seed(20240607)                   # a fixed jitter (the segment draws it from random)
    try:
        log = Log.open(tmp_path / "t-0", cfg)
    finally:
        random.setstate(state)
    with log:
        jitter = log.active_segment.roll_jitter_ms
        assert 1 < jitter < max_jitter
        t0 = 1_000_000
        log.append_raw(ts_batch(0, [t0]))
        log.append_raw(ts_batch(0, [t0 + segment_ms - max_jitter]))
        assert len(log.segments) == 1
        log.append_raw(ts_batch(0, [t0 + segment_ms - jitter]))
        assert len(log.segments) == 1
        log.append_raw(ts_batch(0, [t0 + segment_ms - jitter + 1]))
        assert len(log.segments) == 2
    with Log.open(tmp_path / "t-1", LogConfig(segment_ms=segment_ms)) as log:
        assert log.active_segment.roll_jitter_ms == 0     # no jitter unless configured


def test_flush_with_empty_active_segment(tmp_path: Path) -> None:
    """[UnifiedLogTest.testFlushingEmptyActiveSegments] (kafkalog creates a segment's index
    files when it creates the segment, so both exist before the flush too)."""
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.append(table(1))
        log.roll()
        assert log.active_segment.size == 0
        log.flush()
        assert len(list(part.glob("*.log"))) == 2
        assert len(list(part.glob("*.index"))) == 2
        assert log.recovery_point == log.log_end_offset == 1


def test_reads_at_every_offset_across_rolls(tmp_path: Path) -> None:
    """[UnifiedLogTest.testLogRolls/testAppendAndReadWithSequentialOffsets/testReadWithMinMessage]
    100 single-record appends over many segments: a read at every offset starts with that
    record (key, value, timestamp); a read at the LEO returns nothing."""
    one = len(encode_batches(table(1)))
    with Log.open(tmp_path / "t-0", LogConfig(segment_bytes=3 * one)) as log:
        for i in range(100):
            log.append(table(1, i))
        assert len(log.segments) >= 30
        for i in range(100):
            for max_bytes in (1, 100, 1 << 20):
                got = first_row(log.read(i, max_bytes=max_bytes))
                assert (got["offset"], got["key"], got["value"], got["timestamp"]) == \
                    (i, b"k%d" % i, b"v%d" % i, 1000 + 10 * i)
        assert log.read(100).num_rows == 0 and log.read_raw(100) == b""


NON_SEQUENTIAL = list(range(50)) + list(range(50, 200, 7))


def test_reads_with_non_sequential_follower_offsets(tmp_path: Path) -> None:
    """[UnifiedLogTest.testAppendAndReadWithNonSequentialOffsets/testReadWithTooSmallMaxLength]
    follower appends at offsets 0..49 then every 7th up to 197, one segment each: a read at any
    offset starts with the next existing one; max_bytes 0 (or 1) without min_one_message returns
    nothing (kafkalog never returns a partial batch, so Kafka's 1-byte "firstEntryIncomplete"
    record set has no counterpart)."""
    one = max(len(batch(off)) for off in NON_SEQUENTIAL)
    with Log.open(tmp_path / "t-0", LogConfig(segment_bytes=one)) as log:
        for off in NON_SEQUENTIAL:
            log.append_raw(batch(off), assign_offsets=False)
        assert log.log_end_offset == NON_SEQUENTIAL[-1] + 1
        for i in range(log.log_end_offset):
            want = next(x for x in NON_SEQUENTIAL if x >= i)
            for max_bytes in (1, 100, 100_000):
                got = first_row(log.read(i, max_bytes=max_bytes))
                assert (got["offset"], got["value"]) == (want, b"v%d" % want), (i, max_bytes)
            assert log.read_raw(i, max_bytes=0, min_one_message=False) == b""
            assert log.read_raw(i, max_bytes=1, min_one_message=False) == b""
        assert len(log.segments) == len(NON_SEQUENTIAL)
        assert log.read(log.log_end_offset).num_rows == 0


def test_roll_flushes_up_to_the_new_segment(tmp_path: Path) -> None:
    """[UnifiedLogTest.testLogRolls] (rolling forces a flush: the recovery point reaches the
    active segment's base offset)."""
    one = len(encode_batches(table(1)))
    with Log.open(tmp_path / "t-0", LogConfig(segment_bytes=3 * one)) as log:
        for i in range(10):
            log.append(table(1, i))
        assert len(log.segments) > 1
        assert log.recovery_point >= log.active_segment.base_offset


def test_roll_after_close_fails(tmp_path: Path) -> None:
    """[UnifiedLogTest.testLogRollAfterLogHandlerClosed] (Kafka's KafkaStorageException is a
    KafkaLogError here)."""
    from storage_core.errors import KafkaLogError

    log = Log.open(tmp_path / "t-0")
    log.append(table(1))
    log.close()
    with pytest.raises(KafkaLogError, match="closed"):
        log.roll(1)
    with pytest.raises(KafkaLogError, match="closed"):
        log.roll()
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == ["00000000000000000000.log"]


def test_follower_appends_build_the_time_index(tmp_path: Path) -> None:
    """[UnifiedLogTest.testBuildTimeIndexWhenNotAssigningOffsets] index.interval.bytes 1, 100
    follower batches at 100.. with increasing timestamps: 99 time-index entries (a segment's
    first batch is never indexed), the last one the last batch's timestamp."""
    t0 = 1_700_000_000_000
    with Log.open(tmp_path / "t-0", LogConfig(segment_bytes=10_000, index_interval_bytes=1)) as log:
        log.truncate_to(0)
        for i in range(100):
            log.append_raw(ts_batch(100 + i, [t0 + i]), assign_offsets=False)
        assert sum(s.time_index.entries for s in log.segments) == 99
        assert log.active_segment.time_index.last_entry.timestamp == t0 + 99
        assert log.active_segment.time_index.last_entry.offset == 199


# ----------------------------------------------------------------------------- leader epochs

def test_leader_epochs_stamped_and_recorded(tmp_path: Path) -> None:
    """[UnifiedLogTest.shouldApplyEpochToMessageOnAppendIfLeader/
    followerShouldSaveEpochInformationFromReplicatedMessagesToTheEpochCache]"""
    with Log.open(tmp_path / "t-0") as log:
        raw = batch(0, 2) + batch(2, 3) + batch(5, 1)
        log.append_raw(raw, leader_epoch=72)
        assert [h.partition_leader_epoch for h in headers_of(log.read_raw(0))] == [72, 72, 72]
        assert epochs(log) == [(72, 0)]
    with Log.open(tmp_path / "t-1") as log:
        for base, epoch in ((0, 40), (2, 41), (4, 42)):
            log.append_raw(batch(base, 2, partition_leader_epoch=epoch), assign_offsets=False)
        assert log.leader_epoch_cache.latest_epoch == 42
        assert epochs(log) == [(40, 0), (41, 2), (42, 4)]
        assert [h.partition_leader_epoch for h in headers_of(log.read_raw(0))] == [40, 41, 42]
    assert epochs_on_disk(tmp_path / "t-1") == [(40, 0), (41, 2), (42, 4)]


@pytest.mark.parametrize("epoch_starts,expected", [
    ([(0, 0), (1, 5), (2, 10)], [(1, 5), (2, 10)]),
    ([(0, 0), (1, 7), (2, 10)], [(0, 5), (1, 7), (2, 10)]),
])
def test_deleting_first_segment_truncates_epochs(tmp_path: Path, epoch_starts, expected) -> None:
    """[UnifiedLogTest.shouldTruncateLeaderEpochsWhenDeletingSegments/
    shouldUpdateOffsetForLeaderEpochsWhenDeletingSegments] three segments of 5 records;
    deleting the first (log start 5) drops the epochs wholly below it or moves the one covering
    it up to 5, in memory and in the leader-epoch-checkpoint."""
    part = tmp_path / "t-0"
    starts = dict((s, e) for e, s in epoch_starts)
    with Log.open(part) as log:
        epoch = 0
        for off in range(15):
            if off and off % 5 == 0:
                log.roll()
            epoch = starts.get(off, epoch)
            log.append_raw(batch(off), leader_epoch=epoch)
        assert [s.base_offset for s in log.segments] == [0, 5, 10]
        assert epochs(log) == epoch_starts
        assert log.delete_records_before(5) == 5
        assert [s.base_offset for s in log.segments] == [5, 10]
        assert epochs(log) == expected
        assert epochs_on_disk(part) == expected
    with Log.open(part) as log:
        assert epochs(log) == expected


def test_truncation_truncates_epoch_checkpoint(tmp_path: Path) -> None:
    """[UnifiedLogTest.shouldTruncateLeaderEpochCheckpointFileWhenTruncatingLog] epochs start at
    0, 10 and 16: truncating to 11 keeps 2 entries, to 10 keeps 1, to 0 none — also on disk."""
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        for off in range(20):                       # one record a batch: truncation cuts batches
            log.append_raw(batch(off), leader_epoch=0 if off < 10 else 1 if off < 16 else 2)
        assert epochs(log) == [(0, 0), (1, 10), (2, 16)]
        for cut, kept in ((11, [(0, 0), (1, 10)]), (10, [(0, 0)]), (0, [])):
            log.truncate_to(cut)
            assert epochs(log) == kept
            assert epochs_on_disk(part) == kept
    with Log.open(part) as log:
        assert epochs(log) == []


def test_truncate_to_end_offset_clears_trailing_epoch(tmp_path: Path) -> None:
    """[UnifiedLogTest.testTruncateToEndOffsetClearsEpochCache]"""
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.truncate_to(0)
        log.append_raw(batch(27, 2, partition_leader_epoch=19), assign_offsets=False)
        assert epochs(log) == [(19, 27)] and log.log_end_offset == 29
        for epoch, cut in ((20, 29), (21, 30)):
            log.leader_epoch_cache.assign(epoch, log.log_end_offset)     # became leader at the LEO
            assert epochs(log)[-1] == (epoch, 29)
            log.truncate_to(cut)                                          # then follower again
            assert epochs(log) == [(19, 27)]
            assert log.log_end_offset == 29
    assert epochs_on_disk(part) == [(19, 27)]


# ----------------------------------------------------------------------------- LogValidator (leader path)

def test_leader_append_assigns_offsets_from_the_log_end(tmp_path: Path) -> None:
    """[LogValidatorTest.testAbsoluteOffsetAssignmentNonCompressed/
    testRelativeOffsetAssignmentNonCompressedV2] whatever base offsets the producer's batches
    carry, a leader append numbers them from the LEO (1234567), records consecutive."""
    part = start_at(tmp_path, 1_234_567)
    with Log.open(part) as log:
        info = log.append_raw(batch(0, 3) + batch(999, 2) + batch(5, 1))
        assert (info.first_offset, info.last_offset) == (1_234_567, 1_234_572)
        raw = log.read_raw(1_234_567)
        assert [(h.base_offset, h.last_offset) for h in headers_of(raw)] == \
            [(1_234_567, 1_234_569), (1_234_570, 1_234_571), (1_234_572, 1_234_572)]
        assert offsets_of(raw) == list(range(1_234_567, 1_234_573))
        assert decode_batches(raw).column("value").to_pylist() == \
            [b"v0", b"v1", b"v2", b"v999", b"v1000", b"v5"]


def test_log_append_time_stamped_in_place(tmp_path: Path) -> None:
    """[LogValidatorTest.checkLogAppendTimeNonCompressed] message.timestamp.type LogAppendTime:
    every batch gets the broker's now as its max timestamp and the LOG_APPEND_TIME attribute,
    records read back with it, CRCs valid, the uncompressed batches not resized (v0 has no
    counterpart: appends are v2 only)."""
    from storage_core.format import LOG_APPEND_TIME

    now = 1_700_000_123_456
    cfg = LogConfig(message_timestamp_type="LogAppendTime")
    with Log.open(tmp_path / "t-0", cfg, clock=lambda: now) as log:
        raw_in = ts_batch(0, [5, 6, 7]) + ts_batch(0, [8, 9])
        info = log.append_raw(raw_in)
        assert info.log_append_time == now and info.max_timestamp == now
        raw = log.read_raw(0)
        assert len(raw) == len(raw_in)
        hs = headers_of(raw)
        assert [(h.timestamp_type, h.max_timestamp) for h in hs] == [(LOG_APPEND_TIME, now)] * 2
        got = decode_batches(raw)                                     # verifies the CRCs
        assert got.column("timestamp").cast(pa.int64()).to_pylist() == [now] * 5


def test_create_time_outside_allowed_window_is_rejected(tmp_path: Path) -> None:
    """[LogValidatorTest.testRecordWithPastTimestampIsRejected/testRecordWithFutureTimestampIsRejected/
    testInvalidCreateTimeNonCompressedV2]"""
    from storage_core.errors import KafkaLogError

    now = 1_700_000_000_000
    hour = 3_600_000
    cfg = LogConfig.from_properties({"message.timestamp.before.max.ms": str(hour),
                                     "message.timestamp.after.max.ms": str(hour)})
    with Log.open(tmp_path / "t-0", cfg, clock=lambda: now) as log:
        for bad in ([now - hour - 1], [now + hour + 1], [now, now - 2 * hour, now + 2 * hour]):
            with pytest.raises(KafkaLogError, match="(?i)timestamp"):
                log.append_raw(ts_batch(0, bad))
            assert log.log_end_offset == 0
        log.append_raw(ts_batch(0, [now - hour, now, now + hour]))     # the bounds are inclusive
        assert log.log_end_offset == 3

"""The behaviours Kafka's LogSegmentTest, LocalLogTest and UnifiedLogTest pin down
(kafka_test_checklist.md §3 and §4), against LogSegment and Log on real files.

Not applicable here, or not yet built (§3/§4 lines):
- LogSegmentsTest (a sorted-map class of segments): Log keeps a sorted list; its observable
  behaviour (floor lookup, ordering) is exercised through reads and truncation below.
- appendFromFile, splitting segments on 32-bit offset overflow: legacy-only (v0/v1 logs whose
  offsets overflow a segment) and not built; appends that would overflow are refused.
- renameDir, deleteEmptyDir, async segment deletion with file.delete.delay.ms, log dirs going
  offline after an I/O failure: LogManager concerns (issue 4).
- High watermark maintenance, follower/raft append origins, epochs stamped by leaders: kafkalog
  has no replicas; the high watermark is the log end offset. ``assign_offsets=False`` is the
  follower path; ``leader_epoch=`` stamps batches and feeds the epoch cache.
- Transactions, LSO, txn-index recovery: producer state is wired in a later change.
- message.timestamp.before/after.max.ms, recompression to the topic codec, v1 downgrades: not
  built (appends are v2 only and keep the producer's codec).
"""

from __future__ import annotations

import os
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
from storage_core.segment import LogSegment


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
        assert log.recovery_point == 0
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

"""The compaction core (``storage_core.cleaner``), on real Logs in tmp_path.

Each test names, in its docstring, the bracketed Kafka test of kafka_test_checklist.md §7 it
covers (LogCleanerTest / LogCleanerParameterizedIntegrationTest).

§7 Cleaner lines not covered here, and why:
- testRecoveryAfterCrash: crash recovery of a clean (``.cleaned``/``.swap`` leftovers) is the
  crash tests' (LogLoader, log.py) and not the Cleaner's.
- testCleansCombinedCompactAndDeleteTopic, cleanerTest's checkpoint part: retention and the
  cleaner thread/checkpoint belong to cleaner_manager.py and retention's tests.
- testMarksPartitionsAsOfflineAndPopulatesUncleanableMetrics, testMaxLogCompactionLag and the
  LogCleanerManagerTest lines: the manager's.
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.cleaner import (Cleaner, CleanedTransactionMetadata, CleanerStats, LogToClean,
                                  collect_aborted_transactions, last_records_of_active_producers,
                                  log_segments)
from storage_core.config import LogConfig
from storage_core.errors import CorruptRecordError, LogCleaningAbortedError
from storage_core.format import ControlRecordType, legacy
from storage_core.format.log_input_stream import LogInputStream, batch_records
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.log import Log
from storage_core.cleaner import SkimpyOffsetMap

DAY = 86400000


def now_ms() -> int:
    return int(time.time() * 1000)


def open_log(tmp_path: Path, name: str = "topic-0", **props) -> Log:
    conf = {"cleanup.policy": "compact", "segment.bytes": 1024, "file.delete.delay.ms": 0, **props}
    config = LogConfig.from_properties({k.replace("_", "."): str(v) for k, v in conf.items()})
    return Log.open(tmp_path / name, config)


def rec(key, value=b"v", ts=None) -> RecordInput:
    k = None if key is None else (key if isinstance(key, bytes) else str(key).encode())
    v = value if value is None or isinstance(value, bytes) else str(value).encode()
    return RecordInput(v, k, now_ms() if ts is None else ts)


def put(log: Log, key, value=b"v", ts=None, **kwargs):
    """One record, one batch (offsets assigned by the log)."""
    return log.append_raw(build_batch([rec(key, value, ts)], **kwargs))


def put_batch(log: Log, pairs, *, pid=-1, epoch=0, seq=-1, transactional=False, compression=0):
    return log.append_raw(build_batch([rec(k, v) for k, v in pairs], producer_id=pid, producer_epoch=epoch,
                                      base_sequence=seq, transactional=transactional, compression=compression))


def marker(log: Log, pid: int, kind: str, epoch: int = 0, ts=None):
    return log.append_end_txn_marker(pid, epoch, kind, 0, now_ms() if ts is None else ts)


def batches(log: Log):
    """Every (header, records) of the log, control batches included."""
    out = []
    for seg in log.segments:
        data = seg.read_bytes(0, seg.size)
        for b in LogInputStream(data):
            out.append((b, batch_records(data, b)))
    return out


def data_records(log: Log):
    return [r for b, recs in batches(log) if not (b.header is not None and b.header.is_control) for r in recs]


def keys_in_log(log: Log) -> list[int]:
    return [int(r.key) for r in data_records(log) if r.value is not None]


def offsets_in_log(log: Log) -> list[int]:
    """Kafka's ``offsetsInLog``: records with a key and a value, control records included."""
    return [r.offset for _, recs in batches(log) for r in recs if r.key is not None and r.value is not None]


def last_offsets_of_batches(log: Log) -> list[int]:
    return [b.last_offset for b, _ in batches(log)]


def control_offsets(log: Log) -> list[int]:
    return [b.last_offset for b, _ in batches(log) if b.header.is_control]


def make_cleaner(capacity: int = 1 << 20, **kwargs) -> Cleaner:
    """A cleaner whose map holds ``capacity`` keys (24 bytes a slot)."""
    kwargs.setdefault("dedupe_buffer_load_factor", 0.75 if capacity < 100 else 0.9)
    return Cleaner(capacity * 24, **kwargs)


def clean(cleaner: Cleaner, log: Log, start: int = 0, end: int | None = None, now: int | None = None):
    end = log.active_segment.base_offset if end is None else end
    return cleaner.clean(LogToClean(log, start, end), now_ms=now_ms() if now is None else now)


def roll(log: Log) -> None:
    log.roll()


LARGE = 2**62      # LogCleanerTest's largeTimestamp: far past any record's horizon


class TxnProducer:
    """``appendTransactionalAsLeader``: transactional batches of one producer, sequences on."""

    def __init__(self, log: Log, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def __call__(self, keys) -> None:
        put_batch(self.log, [(k, k) for k in keys], pid=self.pid, epoch=self.epoch, seq=self.seq,
                  transactional=True)
        self.seq += len(keys)


def two_pass(cleaner: Cleaner, log: Log, *, start: int, now: int) -> int:
    """``runTwoPassClean``: one clean at ``now``, one just past the delete horizon."""
    clean(cleaner, log, start=start, now=now)
    return clean(cleaner, log, start=start, now=now + DAY + 1)[0]


# ---------------------------------------------------------------------------------- basics

def test_clean_segments(tmp_path):
    """[LogCleanerTest.testCleanSegments] keys mapped to a later offset are dropped, the rest
    stay; bytes read = the cleaned segments' sizes."""
    log = open_log(tmp_path)
    while len(log.segments) < 4:
        put(log, log.log_end_offset % 2, log.log_end_offset)
    cleaner = make_cleaner()
    offset_map = SkimpyOffsetMap(1 << 16)
    offset_map.put(b"0", 0)
    offset_map.put(b"1", 3 * log.log_end_offset)  # key 1 has a later copy beyond the segments
    segs = log.segments[:2]
    size = sum(s.size for s in segs)
    stats = CleanerStats()
    upper = log.segments[2].base_offset
    cleaner.clean_segments(log, segs, offset_map, now_ms(), stats, CleanedTransactionMetadata(), {}, upper)
    assert stats.bytes_read == size
    kept = [r for r in data_records(log) if r.offset < upper]
    assert {r.key for r in kept} == {b"0"}
    assert stats.messages_written == len(kept)


def test_size_trimmed_for_preallocated_segment(tmp_path):
    """[LogCleanerTest.testSizeTrimmedForPreallocatedAndCompactedTopic] a cleaned segment of a
    preallocated topic is trimmed to its real size."""
    log = open_log(tmp_path, preallocate="true", segment_bytes=4096)
    while len(log.segments) < 3:
        put(log, log.log_end_offset % 3, "x" * 50)
    clean(make_cleaner(), log)
    first = log.segments[0]
    assert os.stat(first.log_path).st_size == first.size < 4096


def test_concurrent_segment_deletion(tmp_path):
    """[LogCleanerTest.testCleanSegmentsWithConcurrentSegmentDeletion] segments deleted by
    retention while the clean runs are renamed .deleted once, no error."""
    log = open_log(tmp_path, file_delete_delay_ms=60000)
    while len(log.segments) < 4:
        put(log, log.log_end_offset % 5, log.log_end_offset)
    victim = log.segments[1].base_offset
    calls = []

    def check_done(log):
        if not calls:
            calls.append(1)
            log.delete_records_before(victim)        # retention removes segment 0 meanwhile
    cleaner = make_cleaner(check_done=check_done)
    clean(cleaner, log)
    names = sorted(p.name for p in log.dir.iterdir() if p.name.endswith(".log.deleted"))
    assert len(names) == len(set(names))
    assert all(s.base_offset >= victim for s in log.segments)


def test_cleaning_with_deletes(tmp_path):
    """[LogCleanerTest.testCleaningWithDeletes] a tombstone for every even key removes it."""
    log = open_log(tmp_path)
    for i in range(40):
        put(log, i % 10, i)
    for k in range(0, 10, 2):
        put(log, k, None)
    while len(log.segments) < 2 or log.active_segment.size:
        roll(log)
    clean(make_cleaner(), log, now=now_ms() + 2 * DAY)
    clean(make_cleaner(), log, now=now_ms() + 4 * DAY)
    assert sorted(set(int(r.key) for r in data_records(log))) == [1, 3, 5, 7, 9]


def test_clean_tombstone_retained_first_pass(tmp_path):
    """[LogCleanerTest.testCleanTombstone] a tombstone survives the pass that first sees it
    (delete horizon set at clean time), even with an ancient timestamp; a later pass past the
    horizon removes it."""
    log = open_log(tmp_path)
    put(log, 1, "a", ts=1)
    put(log, 1, None, ts=1)
    put(log, 2, "b", ts=1)
    roll(log)
    now = now_ms()
    clean(make_cleaner(), log, now=now)
    recs = data_records(log)
    assert [(r.key, r.value) for r in recs] == [(b"1", None), (b"2", b"b")]
    first = next(b for b, rs in batches(log) if rs and rs[0].value is None)
    assert first.header.has_delete_horizon and first.header.base_timestamp == now + DAY
    clean(make_cleaner(), log, now=now + DAY - 1)
    assert [r.key for r in data_records(log)] == [b"1", b"2"]
    clean(make_cleaner(), log, now=now + DAY)
    assert [r.key for r in data_records(log)] == [b"2"]


def test_cleaner_stats(tmp_path):
    """[LogCleanerTest.testLogCleanerStats] keys 0,1,0,1,0 cleaned from dirty offset 2."""
    log = open_log(tmp_path)
    for k in (0, 1, 0, 1, 0):
        put(log, k, k)
    roll(log)
    put(log, 9, 9)
    size = log.segments[0].size
    end, stats = clean(make_cleaner(), log, start=2)
    assert end == 5
    assert stats.messages_read == 5
    assert stats.bytes_read == size
    assert stats.messages_written == 2
    assert stats.bytes_written == log.segments[0].size
    assert stats.invalid_messages_read == 0
    assert offsets_in_log(log) == [3, 4, 5]


def test_keys_conflicting_with_txn_marker_keys(tmp_path):
    """[LogCleanerTest.testCleaningWithKeysConflictingWithTxnMarkerKeys] a data record whose
    key equals a COMMIT marker's key does not remove the real marker."""
    log = open_log(tmp_path)
    pid = 1
    put_batch(log, [(b"k", b"v")], pid=pid, seq=0, transactional=True)
    marker(log, pid, "COMMIT")
    log.append_raw(build_batch([RecordInput(b"x", ControlRecordType.COMMIT.record_key(), now_ms())]))
    roll(log)
    clean(make_cleaner(), log)
    assert 1 in control_offsets(log)
    assert [r.value for r in data_records(log)] == [b"v", b"x"]


def test_partial_segment_clean(tmp_path):
    """[LogCleanerTest.testPartialSegmentClean] a map holding one key: each clean from dirty
    offsets 2, 3, 4 removes one more duplicate."""
    log = open_log(tmp_path)
    for k in (0, 1, 0, 1, 0):
        put(log, k, k)
    roll(log)
    cleaner = make_cleaner(2)                  # 2 slots x 0.75: one key
    clean(cleaner, log, start=2)
    assert keys_in_log(log) == [1, 0, 1, 0]
    assert offsets_in_log(log) == [1, 2, 3, 4]
    clean(cleaner, log, start=3)
    assert keys_in_log(log) == [0, 1, 0]
    assert offsets_in_log(log) == [2, 3, 4]
    clean(cleaner, log, start=4)
    assert keys_in_log(log) == [1, 0]
    assert offsets_in_log(log) == [3, 4]


def test_cleaning_with_uncleanable_section(tmp_path):
    """[LogCleanerTest.testCleaningWithUncleanableSection] segments from the one holding the
    first uncleanable offset on are untouched."""
    log = open_log(tmp_path)
    while len(log.segments) < 6:
        put(log, log.log_end_offset % 3, log.log_end_offset)
    uncleanable = log.segments[3].base_offset
    before = {s.base_offset: s.log_path.read_bytes() for s in log.segments[3:]}
    end, _ = clean(make_cleaner(), log, end=uncleanable)
    assert end == uncleanable
    assert {s.base_offset: s.log_path.read_bytes() for s in log.segments if s.base_offset >= uncleanable} == before
    assert len([r for r in data_records(log) if r.offset < uncleanable]) == 3


def test_log_to_clean(tmp_path):
    """[LogCleanerTest.testLogToClean/testLogToCleanWithUncleanableSection] clean, cleanable
    and total bytes from whole segments; the active segment never counts."""
    log = open_log(tmp_path)
    while len(log.segments) < 6:
        put(log, log.log_end_offset, log.log_end_offset)
    segs = log.segments
    size = [s.size for s in segs]
    ltc = LogToClean(log, segs[2].base_offset, segs[5].base_offset)
    assert ltc.clean_bytes == sum(size[:2])
    assert ltc.cleanable_bytes == sum(size[2:5])
    assert ltc.total_bytes == sum(size[:5])
    assert ltc.cleanable_ratio == pytest.approx(sum(size[2:5]) / sum(size[:5]))
    ltc = LogToClean(log, segs[2].base_offset, segs[4].base_offset + 1)
    assert ltc.first_uncleanable_offset == segs[4].base_offset
    assert ltc.cleanable_bytes == sum(size[2:4])
    ltc = LogToClean(log, 0, log.log_end_offset)          # the active segment is never cleanable
    assert ltc.first_uncleanable_offset == segs[-1].base_offset


def test_unkeyed_messages_dropped_and_counted(tmp_path):
    """[LogCleanerTest.testCleaningWithUnkeyedMessages] unkeyed records are dropped and
    counted as invalid."""
    log = open_log(tmp_path)
    for i in range(10):
        put(log, i % 3, i)
    unkeyed = 0
    for _ in range(5):      # a replica's append: the log does not check keys there
        log.append_raw(build_batch([RecordInput(b"u", None, now_ms())], base_offset=log.log_end_offset),
                       assign_offsets=False)
        unkeyed += 1
    for i in range(3):
        put(log, i, "last")
    roll(log)
    _, stats = clean(make_cleaner(), log)
    assert stats.invalid_messages_read == unkeyed
    assert all(r.key is not None for r in data_records(log))
    assert sorted(int(r.key) for r in data_records(log)) == [0, 1, 2]


def test_clean_segments_with_abort(tmp_path):
    """[LogCleanerTest.testCleanSegmentsWithAbort] an abort during cleaning raises
    LogCleaningAbortedError and swaps nothing in (no .cleaned file left)."""
    log = open_log(tmp_path)
    while len(log.segments) < 3:
        put(log, log.log_end_offset % 2, log.log_end_offset)
    before = [s.log_path.read_bytes() for s in log.segments]
    calls = []

    def check_done(_log):
        calls.append(1)
        if len(calls) > 3:
            raise LogCleaningAbortedError("aborted")
    with pytest.raises(LogCleaningAbortedError):
        clean(make_cleaner(check_done=check_done), log)
    assert [s.log_path.read_bytes() for s in log.segments] == before
    assert not list(log.dir.glob("*.cleaned"))


def test_retaining_last_empty_batch(tmp_path):
    """[LogCleanerTest.testCleanSegmentsRetainingLastEmptyBatch] if every record of the cleaned
    range is removed, the round's last batch stays as an empty batch ending just below the
    next segment."""
    log = open_log(tmp_path)
    for i in range(3):
        put(log, i, i)
    roll(log)
    for i in range(3):
        put(log, i, "new")
    roll(log)
    cleaner = make_cleaner()
    offset_map = SkimpyOffsetMap(1 << 16)
    for i in range(3):
        offset_map.put(str(i).encode(), 3 + i)
    cleaner.clean_segments(log, log.segments[:1], offset_map, now_ms(), CleanerStats(),
                           CleanedTransactionMetadata(), {}, log.segments[1].base_offset)
    first = [(b, rs) for b, rs in batches(log) if b.last_offset < 3]
    assert [(b.last_offset, b.header.records_count) for b, _ in first] == [(2, 0)]


# ---------------------------------------------------------------------------------- grouping

def test_segment_grouping(tmp_path):
    """[LogCleanerTest.testSegmentGrouping] unlimited sizes: one group; max size or index size
    of 1: one segment a group; otherwise groups fill up to the limits, order kept."""
    log = open_log(tmp_path, segment_bytes=300, index_interval_bytes=1)
    while len(log.segments) < 20:
        put(log, log.log_end_offset % 4, "x" * 10)
    segs = log.segments[:-1]
    cleaner = make_cleaner()
    end = log.active_segment.base_offset
    assert cleaner.group_segments_by_size(segs, 2**31 - 1, 2**31 - 1, end) == [segs]
    assert cleaner.group_segments_by_size(segs, 1, 2**31 - 1, end) == [[s] for s in segs]
    assert cleaner.group_segments_by_size(segs, 2**31 - 1, 1, end) == [[s] for s in segs]
    limit = segs[0].size * 3
    groups = cleaner.group_segments_by_size(segs, limit, 2**31 - 1, end)
    assert [s for g in groups for s in g] == segs
    assert all(sum(s.size for s in g) <= limit for g in groups)
    assert all(sum(s.size for s in g) + n[0].size > limit for g, n in zip(groups, groups[1:]))
    idx_limit = segs[0].offset_index.size_in_bytes * 2
    groups = cleaner.group_segments_by_size(segs, 2**31 - 1, idx_limit, end)
    assert all(sum(s.offset_index.size_in_bytes for s in g) <= idx_limit or len(g) == 1 for g in groups)
    assert [s for g in groups for s in g] == segs


def test_segment_grouping_with_sparse_offsets(tmp_path):
    """[LogCleanerTest.testSegmentGroupingWithSparseOffsets/testSegmentGroupingFollowingLoadOfZeroIndex/
    testSegmentGroupingWithSparseOffsetsAndEmptySegments] a group never spans more than
    Int.MAX offsets, also with empty offset indexes; empty segments group together."""
    log = open_log(tmp_path, segment_bytes=1 << 20)
    imax = 2**31 - 1

    def at(offset):
        log.roll(offset)
        log.append_raw(build_batch([rec(1, "x")], base_offset=offset), assign_offsets=False)
    for offset in (0, 1, imax, imax + 1, 2 * imax):
        at(offset)
    log.roll()
    segs = log.segments[:-1]
    end = log.log_end_offset
    groups = Cleaner(1 << 20).group_segments_by_size(segs, 2**31 - 1, 2**31 - 1, end)
    assert [s for g in groups for s in g] == segs
    for g in groups:
        nxt = segs.index(g[-1]) + 1
        last = segs[nxt].base_offset - 1 if nxt < len(segs) else end - 1
        assert last - g[0].base_offset <= imax
    assert [[s.base_offset for s in g] for g in groups] == [[0, 1, imax], [imax + 1, 2 * imax]]
    for s in segs:
        assert s.offset_index.size_in_bytes == 0     # one small batch each: no index entry
    # empty segments always join: the span check is skipped for them
    for offset in (3 * imax, 4 * imax, 5 * imax):
        log.roll(offset)
    empty = log.segments[-4:-1]
    assert all(s.size == 0 for s in empty)
    assert Cleaner(1 << 20).group_segments_by_size(empty, 2**31 - 1, 2**31 - 1, 5 * imax) == [empty]


# ---------------------------------------------------------------------------------- offset map

def test_build_offset_map(tmp_path):
    """[LogCleanerTest.testBuildOffsetMap] key -> latest offset for [start, end); latest + 1 ==
    end; keys outside the range are absent."""
    log = open_log(tmp_path)
    while log.log_end_offset < 60:
        put(log, log.log_end_offset, log.log_end_offset)
    cleaner = make_cleaner()
    bases = [seg.base_offset for seg in log.segments]
    for start, end in ((0, bases[1]), (bases[1], bases[3]), (bases[3], log.log_end_offset)):
        offset_map = SkimpyOffsetMap(1 << 16)
        stats = CleanerStats()
        cleaner.build_offset_map(log, start, end, offset_map, stats)
        assert offset_map.latest_offset + 1 == end
        assert stats.map_messages_read == end - start
        for k in range(start, end):
            assert offset_map.get(str(k).encode()) == k
        assert offset_map.get(str(start - 1).encode()) == -1
        assert offset_map.get(str(end).encode()) == -1


def test_build_partial_offset_map(tmp_path):
    """[LogCleanerTest.testBuildPartialOffsetMap/testBuildOffsetMapFakeLarge] a map that fills
    stops early: 3 slots at load 0.75 from offset 2 hold keys 2 and 3, after 4 messages read;
    the latest offset is the last one put."""
    log = open_log(tmp_path)
    for i in range(10):
        put(log, i, i)
    roll(log)
    offset_map = SkimpyOffsetMap(3 * 24)
    cleaner = Cleaner(3 * 24, dedupe_buffer_load_factor=0.75)
    stats = CleanerStats()
    cleaner.build_offset_map(log, 2, log.log_end_offset, offset_map, stats)
    assert [offset_map.get(str(k).encode()) for k in range(10)] == [-1, -1, 2, 3] + [-1] * 6
    assert offset_map.latest_offset == 3
    assert stats.map_messages_read == 4


# ---------------------------------------------------------------------------------- producers

def test_duplicate_check_after_cleaning(tmp_path):
    """[LogCleanerTest.testDuplicateCheckAfterCleaning] idempotent batch boundaries survive
    cleaning, and after a reload re-sent batches are still detected as duplicates."""
    log = open_log(tmp_path, segment_bytes=2048)
    originals = [build_batch([rec(k) for k in ks], producer_id=pid, producer_epoch=0, base_sequence=0)
                 for pid, ks in ((1, (1, 2, 3)), (2, (3, 1, 4)), (3, (1, 4)))]
    for b in originals:
        log.append_raw(b)
    roll(log)
    clean(make_cleaner(), log)
    assert [b.last_offset for b, _ in batches(log)] == [2, 5, 7]
    assert offsets_in_log(log) == [1, 3, 6, 7]
    assert keys_in_log(log) == [2, 3, 1, 4]
    last_seq = {pid: e.last_seq for pid, e in log.producer_state.active_producers.items()}
    assert last_seq == {1: 2, 2: 2, 3: 1}
    directory, config = log.dir, log.config
    log.close()
    log = Log.open(directory, config)
    for b, (first, last) in zip(originals, ((0, 2), (3, 5), (6, 7))):
        info = log.append_raw(b)
        assert (info.first_offset, info.last_offset) == (first, last)
    assert log.log_end_offset == 8
    log.close()


def test_retains_producer_last_sequence(tmp_path):
    """[LogCleanerTest.testDuplicateCheckAfterCleaning/testLogCleanerRetainsProducerLastSequence]
    a producer's last batch stays as an empty batch (last offset 2, last sequence 2) when all
    its records are cleaned away."""
    log = open_log(tmp_path)
    put_batch(log, [(0, "a"), (0, "b"), (0, "c")], pid=1, seq=0)
    put(log, 0, "d")
    roll(log)
    clean(make_cleaner(), log)
    (b0, r0), (b1, r1) = batches(log)
    assert (b0.last_offset, b0.header.records_count, b0.header.last_sequence) == (2, 0, 2)
    assert b0.header.producer_id == 1
    assert [r.offset for r in r1] == [3]


# ---------------------------------------------------------------------------------- transactions

def test_basic_transaction_aware_cleaning(tmp_path):
    """[LogCleanerTest.testBasicTransactionAwareCleaning] aborted records are always removed,
    committed ones compacted normally; the txn index still answers as before."""
    log = open_log(tmp_path, segment_bytes=2048)
    put_batch(log, [(2, "p1"), (3, "p1")], pid=1, seq=0, transactional=True)
    put_batch(log, [(2, "p2"), (3, "p2")], pid=2, seq=0, transactional=True)
    marker(log, 1, "ABORT")
    marker(log, 2, "COMMIT")
    put(log, 4, "x")
    roll(log)
    before = collect_aborted_transactions(log, 0, log.log_end_offset)
    clean(make_cleaner(), log)
    assert [r.value for r in data_records(log)] == [b"p2", b"p2", b"x"]
    assert collect_aborted_transactions(log, 0, log.log_end_offset) == before


def test_multi_pass_cleaning_with_aborted_transactions(tmp_path):
    """[LogCleanerTest.testMultiPassSegmentCleaningWithAbortedTransactions] a map holding three
    keys makes progress over several passes; aborted data goes on the first, the ABORT markers
    stay (their txns indexed while data of theirs was seen) until delete.retention.ms passes."""
    log = open_log(tmp_path, segment_bytes=4096)
    p1, p2 = TxnProducer(log, 1), TxnProducer(log, 2)
    p1([1, 2])                                      # 0, 1
    p2([3])                                         # 2
    marker(log, 1, "ABORT")                         # 3
    marker(log, 2, "ABORT")                         # 4
    for i, k in enumerate((0, 1, 2, 0, 1)):
        put(log, k, 5 + i)                          # 5..9
    p1([5])                                         # 10
    marker(log, 1, "COMMIT")                        # 11
    p2([6])                                         # 12
    marker(log, 2, "COMMIT")                        # 13
    put(log, 9, 14)                                 # 14
    roll(log)
    cleaner = make_cleaner(4)                       # 4 slots x 0.75: 3 keys a pass
    end, _ = clean(cleaner, log, start=0, now=LARGE)
    assert end == 8
    assert keys_in_log(log) == [0, 1, 2, 0, 1, 5, 6, 9]
    assert control_offsets(log) == [3, 4, 11, 13]
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in collect_aborted_transactions(log, 0, log.log_end_offset)] == [(1, 0, 3), (2, 2, 4)]
    end, _ = clean(cleaner, log, start=end, now=LARGE)
    assert end == 12
    assert keys_in_log(log) == [2, 0, 1, 5, 6, 9]
    # no data of theirs is left: the markers stay, with a horizon, and leave the txn index
    assert control_offsets(log) == [3, 4, 11, 13]
    assert collect_aborted_transactions(log, 0, log.log_end_offset) == []
    ctrl = {b.last_offset: b.header for b, _ in batches(log) if b.header.is_control}
    assert ctrl[3].has_delete_horizon and ctrl[3].base_timestamp == LARGE + DAY
    end, _ = clean(cleaner, log, start=end, now=LARGE)
    assert end == log.active_segment.base_offset
    assert control_offsets(log) == [3, 4, 11, 13]
    clean(cleaner, log, start=0, now=LARGE + DAY + 1)
    assert control_offsets(log) == [11, 13]
    assert keys_in_log(log) == [2, 0, 1, 5, 6, 9]


def test_transactions_spanning_segments(tmp_path):
    """[LogCleanerTest.testCleanWithTransactionsSpanningSegments] txns across segments: data of
    aborted txns goes as soon as the txn index knows the abort, committed data is compacted;
    the second pass over the later segment leaves only pid 3's keys and the new ones."""
    log = open_log(tmp_path, segment_bytes=1024)
    p1, p2, p3 = TxnProducer(log, 1), TxnProducer(log, 2), TxnProducer(log, 3)
    p1([1, 2])
    p3([2, 3])
    p2([3, 4])
    roll(log)
    p2([5, 6])
    p3([6, 7])
    p1([7, 8])
    marker(log, 2, "ABORT")
    p3([8, 9])
    marker(log, 3, "COMMIT")
    p1([9, 10])
    marker(log, 1, "ABORT")
    dirty, _ = clean(make_cleaner(), log, start=0, now=LARGE)     # only the first segment
    assert keys_in_log(log) == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    roll(log)
    p2([11])
    p1([12])
    clean(make_cleaner(), log, start=dirty, end=log.active_segment.base_offset, now=LARGE)
    assert keys_in_log(log) == [2, 3, 6, 7, 8, 9, 11, 12]


def test_commit_marker_removal(tmp_path):
    """[LogCleanerTest.testCommitMarkerRemoval] a COMMIT marker stays while records of its txn
    remain; once they are gone it gets a horizon and goes when the clock passes it."""
    log = open_log(tmp_path, segment_bytes=256)
    p = TxnProducer(log, 1)
    p([1])
    p([2, 3])
    marker(log, 1, "COMMIT")
    p([2])
    marker(log, 1, "COMMIT")
    roll(log)
    dirty, _ = clean(make_cleaner(), log, start=0, now=LARGE)
    assert keys_in_log(log) == [1, 3, 2]
    assert offsets_in_log(log) == [0, 2, 3, 4, 5]
    p([1, 3])
    marker(log, 1, "COMMIT")
    roll(log)
    dirty, _ = clean(make_cleaner(), log, start=dirty, now=LARGE)
    assert keys_in_log(log) == [2, 1, 3]
    assert offsets_in_log(log) == [3, 4, 5, 6, 7, 8]
    dirty, _ = clean(make_cleaner(), log, start=0, now=LARGE)
    assert offsets_in_log(log) == [3, 4, 5, 6, 7, 8]
    clean(make_cleaner(), log, start=0, now=LARGE + 10 * DAY)
    assert keys_in_log(log) == [2, 1, 3]
    assert offsets_in_log(log) == [4, 5, 6, 7, 8]


def test_deleted_batches_with_no_messages_read(tmp_path):
    """[LogCleanerTest.testDeletedBatchesWithNoMessagesRead] whole batches deleted without any
    message read: cleaning goes on from the next offset."""
    log = open_log(tmp_path, segment_bytes=1000, max_message_bytes=100)
    p = TxnProducer(log, 1)
    p([1])
    marker(log, 1, "ABORT")
    p([2])
    p([2])
    marker(log, 1, "COMMIT")
    roll(log)
    cleaner = make_cleaner(io_buffer_size=100, max_io_buffer_size=100)
    clean(cleaner, log, start=0, now=LARGE)
    assert keys_in_log(log) == [2]
    assert offsets_in_log(log) == [1, 3, 4]
    two_pass(cleaner, log, start=0, now=LARGE)
    assert keys_in_log(log) == [2]
    assert offsets_in_log(log) == [3, 4]


def test_commit_marker_retention_with_empty_batch(tmp_path):
    """[LogCleanerTest.testCommitMarkerRetentionWithEmptyBatch] a producer's empty batch stays
    while it holds the last sequence; after the producer writes again it goes, and its marker
    after a two-pass clean."""
    log = open_log(tmp_path, segment_bytes=256)
    p1, p2 = TxnProducer(log, 1), TxnProducer(log, 2)
    p1([2, 3])
    roll(log)
    p2([2, 3])
    marker(log, 2, "COMMIT")
    roll(log)
    put(log, 2, 2)
    put(log, 3, 3)
    marker(log, 1, "COMMIT")
    roll(log)
    cleaner = make_cleaner()
    dirty, _ = clean(cleaner, log, start=0, now=LARGE)
    assert keys_in_log(log) == [2, 3]
    assert offsets_in_log(log) == [4, 5, 6, 7]
    assert last_offsets_of_batches(log) == [1, 3, 4, 5, 6, 7]
    dirty, _ = clean(cleaner, log, start=0, now=LARGE)
    assert last_offsets_of_batches(log) == [1, 3, 4, 5, 6, 7]
    p2([1])
    marker(log, 2, "COMMIT")
    roll(log)
    dirty, _ = clean(cleaner, log, start=dirty, now=LARGE)
    assert keys_in_log(log) == [2, 3, 1]
    assert offsets_in_log(log) == [4, 5, 6, 7, 8, 9]
    assert last_offsets_of_batches(log) == [1, 4, 5, 6, 7, 8, 9]
    two_pass(cleaner, log, start=0, now=LARGE)
    assert keys_in_log(log) == [2, 3, 1]
    assert offsets_in_log(log) == [5, 6, 7, 8, 9]
    assert last_offsets_of_batches(log) == [1, 5, 6, 7, 8, 9]


def test_abort_marker_retention_with_empty_batch(tmp_path):
    """[LogCleanerTest.testAbortMarkerRetentionWithEmptyBatch/testLogCleanerRetainsLastSequenceEvenIfTransactionAborted]
    the aborted batch stays empty (the producer's last sequence) and so does its marker, the
    txn indexed; once the producer writes again both go and the index entry with them."""
    log = open_log(tmp_path, segment_bytes=256)
    p = TxnProducer(log, 1)
    p([2, 3])
    marker(log, 1, "ABORT")
    roll(log)

    def indexed() -> list[tuple[int, int, int]]:
        return [(t.producer_id, t.first_offset, t.last_offset) for t in collect_aborted_transactions(log, 0, 100)]
    assert indexed() == [(1, 0, 2)]
    cleaner = make_cleaner()
    dirty, _ = clean(cleaner, log, start=0, now=LARGE)
    assert indexed() == [(1, 0, 2)]
    assert keys_in_log(log) == []
    assert offsets_in_log(log) == [2]
    assert last_offsets_of_batches(log) == [1, 2]
    dirty, _ = clean(cleaner, log, start=0, now=LARGE)
    assert indexed() == [(1, 0, 2)]
    assert last_offsets_of_batches(log) == [1, 2]
    p([1])
    marker(log, 1, "COMMIT")
    roll(log)
    dirty, _ = clean(cleaner, log, start=dirty, now=LARGE)
    # the marker is not gone yet (the empty batch was read this pass), the empty batch is
    assert indexed() == [(1, 0, 2)]
    assert keys_in_log(log) == [1]
    assert offsets_in_log(log) == [2, 3, 4]
    assert last_offsets_of_batches(log) == [2, 3, 4]
    two_pass(cleaner, log, start=0, now=LARGE)
    assert offsets_in_log(log) == [3, 4]
    assert last_offsets_of_batches(log) == [3, 4]
    assert indexed() == []


def test_clean_empty_control_batch(tmp_path):
    """[LogCleanerTest.testCleanEmptyControlBatch] a marker that is its producer's last entry
    stays as an empty control batch after its horizon; cleaning it again raises nothing."""
    log = open_log(tmp_path, segment_bytes=256)
    marker(log, 1, "COMMIT")
    put(log, 2, 2)
    put(log, 3, 3)
    roll(log)
    cleaner = make_cleaner()
    two_pass(cleaner, log, start=0, now=LARGE)
    assert keys_in_log(log) == [2, 3]
    assert offsets_in_log(log) == [1, 2]
    assert last_offsets_of_batches(log) == [0, 1, 2]
    clean(cleaner, log, start=0, now=LARGE + 10 * DAY)
    assert offsets_in_log(log) == [1, 2]
    assert last_offsets_of_batches(log) == [0, 1, 2]


@pytest.mark.parametrize("kind", ["COMMIT", "ABORT"])
def test_transaction_spanning_segments_committed_and_aborted(tmp_path, kind):
    """[LogCleanerTest.testCommittedTransactionSpanningSegments/testAbortedTransactionSpanningSegments]
    a committed txn across segments keeps record and marker; an aborted one keeps the empty
    data batch (the producer's last) and the marker."""
    log = open_log(tmp_path, segment_bytes=128)
    TxnProducer(log, 1)([1])
    roll(log)
    marker(log, 1, kind)
    roll(log)
    cleaner = make_cleaner()
    if kind == "COMMIT":
        two_pass(cleaner, log, start=0, now=LARGE)
        assert offsets_in_log(log) == [0, 1]
    else:
        clean(cleaner, log, start=0, now=LARGE)
        assert offsets_in_log(log) == [1]
        clean(cleaner, log, start=0, now=LARGE + 10 * DAY)
        assert offsets_in_log(log) == [1]
    assert last_offsets_of_batches(log) == [0, 1]


def test_abort_marker_removal(tmp_path):
    """[LogCleanerTest.testAbortMarkerRemoval] aborted records go, the ABORT marker stays, and
    goes in a two-pass clean (horizon set, then passed)."""
    log = open_log(tmp_path, segment_bytes=256)
    p = TxnProducer(log, 1)
    p([1])
    p([2, 3])
    marker(log, 1, "ABORT")
    p([3])
    marker(log, 1, "COMMIT")
    roll(log)
    cleaner = make_cleaner()
    dirty, _ = clean(cleaner, log, start=0, now=LARGE)
    assert keys_in_log(log) == [3]
    assert offsets_in_log(log) == [3, 4, 5]
    two_pass(cleaner, log, start=0, now=LARGE)
    assert keys_in_log(log) == [3]
    assert offsets_in_log(log) == [4, 5]


def test_empty_batch_removal_with_sequence_reuse(tmp_path):
    """[LogCleanerTest.testEmptyBatchRemovalWithSequenceReuse] txns all starting at sequence 0
    (group coordinator style): older empty batches and markers still go."""
    log = open_log(tmp_path, segment_bytes=2048)
    log.append_raw(build_batch([rec(1, 1)], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True,
                               base_offset=0), assign_offsets=False)
    marker(log, 1, "COMMIT")
    log.append_raw(build_batch([rec(2, 1)], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True,
                               base_offset=2), assign_offsets=False)
    marker(log, 1, "COMMIT")
    put(log, 1, 1)
    put(log, 2, 1)
    roll(log)
    cleaner = make_cleaner()
    clean(cleaner, log, start=0, now=LARGE)
    assert offsets_in_log(log) == [1, 3, 4, 5]
    assert last_offsets_of_batches(log) == [1, 2, 3, 4, 5]
    two_pass(cleaner, log, start=0, now=LARGE)
    assert offsets_in_log(log) == [3, 4, 5]
    assert last_offsets_of_batches(log) == [2, 3, 4, 5]


# ---------------------------------------------------------------------------------- buffers

def test_large_message(tmp_path):
    """[LogCleanerTest.testLargeMessage/testMessageLargerThanMaxMessageSize] batches larger than
    the I/O buffer (1 MiB value, 1 KiB buffer) are handled by growing it, also beyond the
    topic's current max.message.bytes."""
    log = open_log(tmp_path, segment_bytes=8 << 20, max_message_bytes=2 << 20)
    big = b"x" * (1 << 20)
    put(log, 1, big)
    put(log, 2, big)
    put(log, 1, big)
    roll(log)
    log.config = log.config.with_changes(max_message_bytes=1000)    # lowered after the writes
    end, stats = clean(make_cleaner(io_buffer_size=1024, max_io_buffer_size=1024), log)
    assert end == 3
    assert keys_in_log(log) == [2, 1]


def corrupt_log(tmp_path: Path, mutate) -> Log:
    log = open_log(tmp_path, segment_bytes=8 << 20)
    put(log, 1, b"x" * 4000)
    put(log, 1, b"y")
    roll(log)
    seg = log.segments[0]
    raw = bytearray(seg.log_path.read_bytes())
    mutate(raw)
    fd = os.open(seg.log_path, os.O_WRONLY)
    os.pwrite(fd, bytes(raw), 0)
    os.close(fd)
    return log


def test_corrupt_magic_fails(tmp_path):
    """[LogCleanerTest.testMessageLargerThanMaxMessageSizeWithCorruptHeader] a corrupt magic
    byte makes cleaning fail with CorruptRecordError naming the file."""
    log = corrupt_log(tmp_path, lambda raw: raw.__setitem__(16, 77))
    with pytest.raises(CorruptRecordError) as e:
        clean(make_cleaner(io_buffer_size=1024, max_io_buffer_size=1024), log)
    assert "00000000000000000000.log" in str(e.value)


def test_corrupt_size_larger_than_bytes_available(tmp_path):
    """[LogCleanerTest.testCorruptMessageSizeLargerThanBytesAvailable] a batch size beyond the
    bytes left in the segment fails with CorruptRecordError."""
    log = corrupt_log(tmp_path, lambda raw: struct.pack_into(">i", raw, 8, 1 << 22))
    with pytest.raises(CorruptRecordError) as e:
        clean(make_cleaner(io_buffer_size=1024, max_io_buffer_size=1024), log)
    assert "bytes left in segment" in str(e.value) and "position 0" in str(e.value)


def test_cleaning_beyond_missing_offsets(tmp_path):
    """[LogCleanerTest.testCleaningBeyondMissingOffsets] cleaning advances the next dirty
    offset over offset gaps between segments, to the active segment's base."""
    log = open_log(tmp_path, segment_bytes=1 << 20)
    for base in (0, 1, 2):
        log.append_raw(build_batch([rec(base, "x")], base_offset=base), assign_offsets=False)
    log.roll(11)
    assert log.active_segment.base_offset == 11
    end, _ = clean(make_cleaner(), log)
    assert end == 11
    log.append_raw(build_batch([rec(1, "y")], base_offset=11), assign_offsets=False)
    log.roll(30)
    end, _ = clean(make_cleaner(), log, start=11)
    assert end == 30


# ---------------------------------------------------------------------------------- legacy

def write_legacy_log(tmp_path: Path, name: str, entries: bytes) -> Log:
    d = tmp_path / name
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(entries)
    # written as a broker leaves a segment at a clean shutdown (indexes, recovery point past
    # it), so loading trusts it: this log's recovery is stricter than Kafka's with KAFKA-4298 sets
    (d / "00000000000000000000.index").write_bytes(b"")
    (d / "00000000000000000000.timeindex").write_bytes(b"")
    last = [b.last_offset for b in LogInputStream(entries)][-1]
    (tmp_path / "recovery-point-offset-checkpoint").write_text(f"0\n1\n{name[:-2]} 0 {last + 1}\n")
    log = open_log(tmp_path, name=name, segment_bytes=1 << 20)
    log.roll()
    return log


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_nested_messages(tmp_path, magic):
    """[LogCleanerParameterizedIntegrationTest.testCleanerWithMessageFormatV0/
    testCleaningNestedMessagesWithV0AndV1] v0/v1 compressed message sets are compacted."""
    ts = 1000
    parts = [legacy.build_compressed([(b"1", b"a", ts), (b"2", b"a", ts), (b"3", b"a", ts)], magic=magic,
                                     compression=1, wrapper_offset=2),
             legacy.build_message(3, b"b", b"2", magic=magic, timestamp=ts),
             legacy.build_compressed([(b"1", b"c", ts), (b"4", b"c", ts)], magic=magic, compression=1,
                                     wrapper_offset=5)]
    log = write_legacy_log(tmp_path, f"legacy{magic}-0", b"".join(parts))
    clean(make_cleaner(), log)
    got = [(r.offset, r.key, r.value) for r in data_records(log)]
    assert got == [(2, b"3", b"a"), (3, b"2", b"b"), (4, b"1", b"c"), (5, b"4", b"c")]
    assert {b.magic for b, _ in batches(log) if b.last_offset < 6} == {magic}


def test_clean_corrupt_message_set(tmp_path):
    """[LogCleanerTest.testCleanCorruptMessageSet] a v1 wrapper holding v0 inner messages
    (KAFKA-4298) is rewritten by the cleaner with correct v1 records and offsets."""
    inner = b"".join(legacy.build_message(i, f"v{i}".encode(), f"{i}".encode(), magic=0) for i in range(3))
    from storage_core.format.compression import compress
    wrapper = legacy.build_message(2, compress(1, inner, magic=1), None, magic=1, timestamp=5, compression=1)
    log = write_legacy_log(tmp_path, "corrupt-0", wrapper + legacy.build_message(3, b"x", b"0", magic=1,
                                                                                    timestamp=6))
    clean(make_cleaner(), log)
    first = batches(log)[0][0]
    assert first.magic == 1
    recs = legacy.deep_records(first.entry, max_decompressed=1 << 20)   # strict: inner magic == 1
    assert [(r.offset, r.key) for r in recs] == [(1, b"1"), (2, b"2")]
    assert [r.offset for r in data_records(log)] == [1, 2, 3]


# ---------------------------------------------------------------------------------- end to end

@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_cleaner_end_to_end(tmp_path, codec):
    """[LogCleanerParameterizedIntegrationTest.cleanerTest] 100 keys x 3 duplicates, every codec:
    the log shrinks and holds exactly the latest value of every key; a batch as large as
    max.message.bytes is still cleaned."""
    log = open_log(tmp_path, segment_bytes=8192, max_message_bytes=4000)
    latest = {}
    for dup in range(3):
        for start in range(0, 100, 10):
            pairs = [(k, f"{k}-{dup}") for k in range(start, start + 10)]
            put_batch(log, pairs, compression=codec)
            latest.update({str(k).encode(): v.encode() for k, v in pairs})
    big = b"z" * 3800
    log.append_raw(build_batch([RecordInput(big, b"big", now_ms())], compression=codec))
    latest[b"big"] = big
    roll(log)
    size = sum(s.size for s in log.segments)
    end, _ = clean(make_cleaner(), log)
    assert end == log.active_segment.base_offset
    assert sum(s.size for s in log.segments) < size
    got = {r.key: r.value for r in data_records(log)}
    assert got == latest
    assert len(data_records(log)) == len(latest)
    assert {b.header.compression for b, _ in batches(log)} == {codec}
    t = log.read(0, max_bytes=1 << 30)
    assert t.num_rows == len(latest)


def test_batch_copied_byte_for_byte(tmp_path):
    """[LogCleanerTest.testCleanSegments] batches that keep every record are copied unchanged;
    rebuilt ones keep base offset, last offset, producer fields and leader epoch."""
    log = open_log(tmp_path, segment_bytes=4096)
    keep = build_batch([rec(1, "a"), rec(2, "b")], producer_id=7, producer_epoch=3, base_sequence=0)
    log.append_raw(keep, leader_epoch=5)
    put_batch(log, [(3, "c"), (4, "d"), (3, "e")], pid=8, epoch=1, seq=0)
    put(log, 9, "z")
    roll(log)
    raw_before = log.segments[0].read_bytes(0, len(keep))
    clean(make_cleaner(), log)
    b = batches(log)
    assert log.segments[0].read_bytes(0, len(keep)) == raw_before
    h = b[1][0].header
    assert (h.base_offset, h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence) == (2, 4, 8, 1, 0)
    assert [(r.offset, r.key) for r in b[1][1]] == [(3, b"4"), (4, b"3")]


def test_helpers(tmp_path):
    """[LogCleanerTest.testLogToClean] segment ranges and active producers as Kafka reads them."""
    log = open_log(tmp_path)
    while len(log.segments) < 3:
        put(log, 1, "x")
    s = log.segments
    assert log_segments(log, 0, s[1].base_offset) == s[:1]
    assert log_segments(log, s[1].base_offset + 1, s[2].base_offset + 1) == s[1:]
    assert log_segments(log, 5, 5) == []
    put_batch(log, [(1, "a")], pid=4, seq=0)
    assert last_records_of_active_producers(log)[4].last_data_offset == log.log_end_offset - 1


def test_append_of_pyarrow_table_then_clean(tmp_path):
    """[LogCleanerParameterizedIntegrationTest.cleanerTest] records appended through the Arrow
    path are compacted too."""
    log = open_log(tmp_path)
    for i in range(30):
        log.append(pa.table({"key": [str(i % 4).encode()], "value": [str(i).encode()]}))
    roll(log)
    clean(make_cleaner(), log)
    t = log.read(0, max_bytes=1 << 30)
    assert t.column("value").to_pylist() == [b"26", b"27", b"28", b"29"]


def test_segment_with_offset_overflow_is_split_and_the_round_aborted(tmp_path: Path) -> None:
    """[LogCleanerTest.testSegmentWithOffsetOverflow] Cleaning a segment whose offsets overflow
    32-bit relative offsets (a pre-0.11 broker's segment the load did not recover: it was below
    the recovery point and ended cleanly) first splits it and aborts that round
    (LogCleaningAbortedError); afterwards each segment cleans normally."""
    from storage_core.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile

    big = 2**31 - 1
    part = tmp_path / "t-0"
    part.mkdir()
    bases = [0, 1, 2, big + 5, big + 6]
    keys = [b"a", b"a", b"b", b"b", b"c"]
    (part / f"{0:020d}.log").write_bytes(b"".join(
        build_batch([RecordInput(b"v%d" % i, k, 1_700_000_000_000 + i)], base_offset=b)
        for i, (b, k) in enumerate(zip(bases, keys))))
    active = 2 * big + 20
    (part / f"{active:020d}.log").write_bytes(
        build_batch([RecordInput(b"v5", b"d", 1_700_000_000_005)], base_offset=active))
    for base in (0, active):
        for suffix in (".index", ".timeindex"):
            (part / f"{base:020d}{suffix}").write_bytes(b"")
    OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT).write({("t", 0): active + 1})
    with Log.open(part, LogConfig(cleanup_policy="compact", file_delete_delay_ms=0)) as log:
        assert [s.base_offset for s in log.segments] == [0, active]      # not recovered, not split
        cleaner = Cleaner(1 << 20)
        with pytest.raises(LogCleaningAbortedError, match="split"):
            cleaner.clean(LogToClean(log, 0, active))
        assert [s.base_offset for s in log.segments] == [0, big + 5, active]
        assert not [p for p in part.iterdir() if p.name.endswith((".cleaned", ".swap"))]
        end, _ = cleaner.clean(LogToClean(log, 0, active))
        assert end == active
        got = log.read(0, max_bytes=1 << 20)
        assert got.column("offset").to_pylist() == [1, big + 5, big + 6, active]
        assert got.column("key").to_pylist() == [b"a", b"b", b"c", b"d"]
    with Log.open(part) as log:                                            # and it reloads
        assert log.read(0, max_bytes=1 << 20).column("offset").to_pylist() == [1, big + 5, big + 6, active]

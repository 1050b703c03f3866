"""Kafka's segment indexes (storage_core.index) against Kafka's own index tests.

Each test names, in brackets, the Apache Kafka test (storage/src/test/java/org/apache/kafka/
storage/internals/log/{OffsetIndexTest,TimeIndexTest,TransactionIndexTest,LazyIndexTest,
AbstractIndexTest}) whose behaviour it pins; together they cover every line of
../shared/kafka_test_checklist.md section 2. Beyond Kafka's tests: byte-exact file layouts
checked by hand, the preallocated sizes, reopen semantics (an untrimmed file counts every slot, a
trimmed one is full until preallocated again), read-only opens that never touch the file,
hypothesis model tests of both mmapped indexes and of the transaction index against plain Python
lists, the O(sqrt n) search against numpy's, and every real broker ``.index``/``.timeindex`` in
../shared/fixtures/pinterest-tiered-storage.

Kafka's exception types map to Python ones: IllegalArgumentException on a full index ->
IndexFullError (a ValueError); on entry(n) past the end -> IndexError; InvalidOffsetException ->
InvalidOffsetError; IllegalStateException (time index timestamp going back) -> ValueError;
CorruptIndexException and the txn index's KafkaException on an unknown version ->
CorruptIndexError; IndexOffsetOverflowException -> OffsetOverflowError.

Not applicable here
-------------------
- [LazyIndexTest.getWrapsIOExceptionAsUncheckedWhenParentDirMissing]: Java wraps the checked
  IOException in UncheckedIOException("Error loading index file"); Python has no checked
  exceptions, so the OSError itself surfaces from get() (tested as such).
- [TransactionIndexTest.testAppendAndCollectAfterInterrupted]: a Java thread interrupt closes a
  FileChannel under its reader; Python threads cannot be interrupted and os-level reads do not
  close descriptors. The observable part (reads and appends reopen a closed file) is
  testAppendAndCollectAfterClose.
- [OffsetIndexTest.forceUnmapTest]'s NullPointerException: here any use of an unmapped index
  raises ValueError naming the file (tested with close_handler()).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import struct
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_core.errors import (CorruptIndexError, InvalidConfigError, InvalidOffsetError,
                                 OffsetOverflowError)
from storage_core.index import (AbortedTxn, IndexFullError, LazyIndex, OffsetIndex,
                                OffsetPosition, TimeIndex, TimestampOffset, TransactionIndex)
from storage_core.index.abstract_index import _searchsorted

from fixture_paths import FIXTURES, PINTEREST, require_fixture

BASE = 45   # OffsetIndexTest.BASE_OFFSET / TimeIndexTest.baseOffset
MAX_ENTRIES = 30


@pytest.fixture
def oidx(tmp_path: Path):
    """OffsetIndexTest.setup: a new index of 30 entries (240 bytes) at base offset 45."""
    index = OffsetIndex(tmp_path / "00000000000000000045.index", BASE, MAX_ENTRIES * 8)
    yield index
    index.close()


@pytest.fixture
def tidx(tmp_path: Path):
    """TimeIndexTest: a new time index of 30 entries (360 bytes) at base offset 45."""
    index = TimeIndex(tmp_path / "00000000000000000045.timeindex", BASE, MAX_ENTRIES * 12)
    yield index
    index.close()


def append_time_entries(idx: TimeIndex, n: int) -> None:
    """TimeIndexTest.appendEntries: (10, 55), (20, 65), ... (10n, 10n + 45)."""
    for i in range(1, n + 1):
        idx.maybe_append(i * 10, i * 10 + BASE)


def monotonic_seq(rng: random.Random, base: int, n: int) -> list[int]:
    out, last = [], base
    for _ in range(n):
        last += rng.randint(1, 15)
        out.append(last)
    return out


# ================================================================================================
# OffsetIndex
# ================================================================================================

def test_random_lookup(oidx: OffsetIndex) -> None:
    """[OffsetIndexTest.randomLookupTest] empty -> (base, 0); exact hits; floor for the rest."""
    assert oidx.lookup(92) == OffsetPosition(BASE, 0)
    rng = random.Random(7)
    offsets = monotonic_seq(rng, BASE + 1, oidx.max_entries)
    positions = monotonic_seq(rng, 0, oidx.max_entries)
    for o, p in zip(offsets, positions):
        oidx.append(o, p)
    for o, p in zip(offsets, positions):
        assert oidx.lookup(o) == OffsetPosition(o, p)
    for target in range(BASE, offsets[-1] + 20):
        below = [i for i, o in enumerate(offsets) if o <= target]
        expected = (OffsetPosition(offsets[below[-1]], positions[below[-1]]) if below
                    else OffsetPosition(BASE, 0))
        assert oidx.lookup(target) == expected


def test_lookup_extreme_cases(oidx: OffsetIndex) -> None:
    """[OffsetIndexTest.lookupExtremeCases] lookup on an empty file, of the base offset below the
    first entry, and of the last entry of a full index."""
    assert oidx.lookup(oidx.base_offset) == OffsetPosition(BASE, 0)
    for i in range(oidx.max_entries):
        oidx.append(BASE + i + 1, i)
    assert oidx.lookup(BASE) == OffsetPosition(BASE, 0)
    assert oidx.lookup(BASE + oidx.max_entries) == OffsetPosition(BASE + 30, 29)
    assert oidx.lookup(BASE - 1_000) == OffsetPosition(BASE, 0)           # below: relative < 0
    assert oidx.lookup(BASE + 2**40) == OffsetPosition(BASE + 30, 29)     # beyond int32


def test_entry(oidx: OffsetIndex) -> None:
    """[OffsetIndexTest.testEntry] 8-byte entries; 240 bytes -> 30 entries; entry(i) is absolute."""
    assert OffsetIndex.ENTRY_SIZE == 8 and oidx.max_entries == 30 and oidx.length == 240
    for i in range(oidx.max_entries):
        oidx.append(BASE + i, i)
    for i in range(oidx.max_entries):
        assert oidx.entry(i) == OffsetPosition(BASE + i, i)


def test_entry_overflow(oidx: OffsetIndex, tidx: TimeIndex) -> None:
    """[OffsetIndexTest.testEntryOverflow, TimeIndexTest.testEntryOverflow] entry(n) past the
    entries (entry(0) on an empty index) fails, naming the file."""
    for idx in (oidx, tidx):
        with pytest.raises(IndexError, match=str(idx.path)):
            idx.entry(0)
    oidx.append(BASE, 0)
    with pytest.raises(IndexError):
        oidx.entry(1)
    with pytest.raises(IndexError):
        oidx.entry(-1)


def test_append_too_many(oidx: OffsetIndex) -> None:
    """[OffsetIndexTest.appendTooMany] appending to a full index fails (IllegalArgumentException
    -> IndexFullError, a ValueError, not InvalidOffsetError)."""
    for i in range(oidx.max_entries):
        oidx.append(BASE + i + 1, i)
    assert oidx.is_full()
    with pytest.raises(IndexFullError, match="full") as e:
        oidx.append(BASE + oidx.max_entries + 1, 1)
    assert isinstance(e.value, ValueError) and not isinstance(e.value, InvalidOffsetError)


def test_append_out_of_order(oidx: OffsetIndex) -> None:
    """[OffsetIndexTest.appendOutOfOrder] 50 after 51 (and 51 again) -> InvalidOffsetError."""
    oidx.append(51, 0)
    with pytest.raises(InvalidOffsetError, match="no larger than the last offset"):
        oidx.append(50, 1)
    with pytest.raises(InvalidOffsetError):
        oidx.append(51, 1)


def test_append_relative_offset_overflow(oidx: OffsetIndex) -> None:
    """[AbstractIndex.relativeOffset -> IndexOffsetOverflowException] the relative offset must fit
    [0, 2**31-1]: below the base or 2**31 past it fails; the limit itself fits."""
    with pytest.raises(OffsetOverflowError, match=str(oidx.path)):
        oidx.append(BASE - 1, 0)
    assert oidx.can_append_offset(BASE + 2**31 - 1) and not oidx.can_append_offset(BASE + 2**31)
    oidx.append(BASE + 2**31 - 1, 0)
    assert oidx.entries_array()["relative_offset"].tolist() == [2**31 - 1]
    oidx.truncate()
    with pytest.raises(OffsetOverflowError):
        oidx.append(BASE + 2**31, 0)
    assert oidx.entries == 0


def test_fetch_upper_bound_offset(oidx: OffsetIndex) -> None:
    """[OffsetIndexTest.testFetchUpperBoundOffset] the first entry whose position is >= start +
    size; None when there is none or the index is empty."""
    first, second = OffsetPosition(BASE, 0), OffsetPosition(BASE + 1, 10)
    third, fourth = OffsetPosition(BASE + 2, 23), OffsetPosition(BASE + 3, 37)
    assert oidx.fetch_upper_bound_offset(first.position, 5) is None
    for op in (first, second, third, fourth):
        oidx.append(op.offset, op.position)
    assert oidx.fetch_upper_bound_offset(first.position, 5) == second
    assert oidx.fetch_upper_bound_offset(first.position, 10) == second
    assert oidx.fetch_upper_bound_offset(first.position, 23) == third
    assert oidx.fetch_upper_bound_offset(first.position, 22) == third
    assert oidx.fetch_upper_bound_offset(second.position, 24) == fourth
    assert oidx.fetch_upper_bound_offset(fourth.position, 1) is None
    assert oidx.fetch_upper_bound_offset(first.position, 200) is None
    assert oidx.fetch_upper_bound_offset(second.position, 200) is None
    assert oidx.fetch_upper_bound_offset(first.position, 2**40) is None


def test_reopen(oidx: OffsetIndex) -> None:
    """[OffsetIndexTest.testReopen] close trims the file to its entries; reopened (writable with
    or without a max size, or read-only) it has entries=2 and lastOffset=52 from the length
    alone, and is full: an append fails with IndexFullError."""
    first, sec = OffsetPosition(51, 0), OffsetPosition(52, 1)
    oidx.append(first.offset, first.position)
    oidx.append(sec.offset, sec.position)
    oidx.close()
    assert oidx.path.stat().st_size == 16
    for kwargs in ({"max_index_size": -1}, {}, {"writable": False}):
        with OffsetIndex(oidx.path, BASE, **kwargs) as ro:
            assert ro.lookup(first.offset) == first
            assert ro.lookup(sec.offset) == sec
            assert ro.last_offset == sec.offset and ro.entries == 2 and ro.is_full()
            with pytest.raises(IndexFullError):
                ro.append(53, 1)
        assert oidx.path.stat().st_size == 16


def test_truncate() -> None:
    """[OffsetIndexTest.truncate] truncateTo(x) removes entries >= x and appends continue."""
    with tempfile.TemporaryDirectory() as d, OffsetIndex(Path(d) / "0.index", 0, 10 * 8) as idx:
        idx.truncate()
        for i in range(1, 10):
            idx.append(i, i)
        idx.truncate_to(12)
        assert idx.lookup(10) == OffsetPosition(9, 9) and idx.last_offset == 9
        idx.append(10, 10)
        idx.truncate_to(10)
        assert idx.lookup(10) == OffsetPosition(9, 9) and idx.last_offset == 9
        idx.append(10, 10)
        idx.truncate_to(9)
        assert idx.lookup(10) == OffsetPosition(8, 8) and idx.last_offset == 8
        idx.append(9, 9)
        idx.truncate_to(5)
        assert idx.lookup(10) == OffsetPosition(4, 4) and idx.last_offset == 4
        idx.append(5, 5)
        idx.truncate()
        assert idx.entries == 0 and idx.last_offset == 0
        idx.append(0, 0)
        idx.truncate_to(-5)          # below the base offset: everything goes
        assert idx.entries == 0


def test_truncate_to_between_sparse_entries(oidx: OffsetIndex) -> None:
    """[OffsetIndex.truncateTo] Kafka's three cases on a sparse index: no floor -> 0 entries;
    exact hit -> slot; between entries -> slot + 1; the file keeps its size."""
    for o in (50, 60, 70):
        oidx.append(o, o)
    oidx.truncate_to(65)
    assert oidx.entries == 2 and oidx.last_offset == 60
    oidx.truncate_to(60)
    assert oidx.entries == 1 and oidx.last_offset == 50
    oidx.truncate_to(49)
    assert oidx.entries == 0 and oidx.last_offset == BASE
    assert oidx.length == 240


def test_force_unmap(tmp_path: Path) -> None:
    """[OffsetIndexTest.forceUnmapTest] once unmapped (close_handler, Kafka's closeHandler), using
    the index fails (ValueError naming the file instead of Java's NPE); close stays safe."""
    idx = OffsetIndex(tmp_path / "0.index", 0, 10 * 8)
    idx.close_handler()
    with pytest.raises(ValueError, match="closed"):
        idx.lookup(1)
    idx.close()
    idx.close()   # idempotent
    assert (tmp_path / "0.index").stat().st_size == 80   # closeHandler does not trim


def test_sanity_last_offset_equal_to_base_offset(tmp_path: Path) -> None:
    """[OffsetIndexTest.testSanityLastOffsetEqualToBaseOffset] a single entry at the base offset
    (relative offset 0) passes sanityCheck."""
    with OffsetIndex(tmp_path / "20.index", 20, 10 * 8) as idx:
        idx.append(20, 0)
        idx.sanity_check()


def test_offset_index_sanity_check_failures(tmp_path: Path) -> None:
    """[OffsetIndex.sanityCheck] a negative last relative offset, or a length that is not a
    multiple of 8, is a CorruptIndexError naming the file; opening such a file does not fail."""
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", -3, 10))
    with OffsetIndex(path, 100, writable=False) as idx:
        assert idx.last_offset == 97
        with pytest.raises(CorruptIndexError, match=f"{path}.*less than the base offset 100"):
            idx.sanity_check()
    path.write_bytes(struct.pack(">ii", 1, 0) + b"\x00\x00\x00")
    with OffsetIndex(path, 100, writable=False) as idx:
        assert idx.entries == 1 and idx.length == 11 and idx.lookup(101) == OffsetPosition(101, 0)
        with pytest.raises(CorruptIndexError, match=f"{path}.*found 11 bytes"):
            idx.sanity_check()


# ================================================================================================
# TimeIndex
# ================================================================================================

def test_time_entry_size_and_parse(tidx: TimeIndex) -> None:
    """[TimeIndexTest.testEntrySize, TimeIndexTest.testParseEntry] 12-byte entries (int64
    timestamp, int32 relative offset) and parsing the first one."""
    assert TimeIndex.ENTRY_SIZE == 12 and tidx.max_entries == 30
    tidx.maybe_append(1, 1 + BASE)
    assert tidx.entry(0) == TimestampOffset(1, BASE + 1)
    assert tidx.path.read_bytes()[:12] == struct.pack(">qi", 1, 1)


def test_time_lookup(tidx: TimeIndex) -> None:
    """[TimeIndexTest.testLookUp] empty -> (-1, base); below the first -> (-1, base); between two
    entries -> the lower; equal -> that entry."""
    assert tidx.lookup(100) == TimestampOffset(-1, BASE)
    append_time_entries(tidx, MAX_ENTRIES - 1)
    assert tidx.lookup(9) == TimestampOffset(-1, BASE)
    assert tidx.lookup(25) == TimestampOffset(20, 65)
    assert tidx.lookup(30) == TimestampOffset(30, 75)
    assert tidx.lookup(2**70) == TimestampOffset(290, 335)
    assert tidx.lookup(-2**70) == TimestampOffset(-1, BASE)


def test_time_entry(tidx: TimeIndex) -> None:
    """[TimeIndexTest.testEntry]"""
    append_time_entries(tidx, MAX_ENTRIES - 1)
    assert [tidx.entry(i) for i in range(4)] == [
        TimestampOffset(10, 55), TimestampOffset(20, 65), TimestampOffset(30, 75),
        TimestampOffset(40, 85)]


def test_time_last_entry(tidx: TimeIndex) -> None:
    """[TimeIndexTest.testLastEntry] (-1, base) when empty; (1, base+1) after maybeAppend."""
    assert tidx.last_entry == TimestampOffset(-1, BASE)
    tidx.maybe_append(1, 1 + BASE)
    assert tidx.last_entry == TimestampOffset(1, BASE + 1)


def test_time_is_full(tidx: TimeIndex) -> None:
    """[TimeIndexTest.testIsFull] full at maxEntries - 1 entries (29 of 30): the last slot is kept
    for the entry written on roll/close."""
    assert not tidx.is_full()
    append_time_entries(tidx, MAX_ENTRIES - 2)
    assert not tidx.is_full()
    tidx.maybe_append(10_000, 1_000)
    assert tidx.is_full() and tidx.entries == 29


def test_time_append(tidx: TimeIndex) -> None:
    """[TimeIndexTest.testAppend] full -> IndexFullError unless skip_full_check; with the check
    skipped an offset below the last entry's -> InvalidOffsetError; a larger one fills the
    reserved slot; after that there is physically no slot left."""
    append_time_entries(tidx, MAX_ENTRIES - 1)
    with pytest.raises(IndexFullError):
        tidx.maybe_append(10_000, 1_000)
    with pytest.raises(InvalidOffsetError):
        tidx.maybe_append(10_000, (MAX_ENTRIES - 2) * 10, True)
    tidx.maybe_append(10_000, 1_000, True)
    assert tidx.entries == 30 and tidx.last_entry == TimestampOffset(10_000, 1_000)
    tidx.maybe_append(10_000, 1_000, True)   # the same entry again (close after roll): ignored
    with pytest.raises(IndexFullError):
        tidx.maybe_append(10_001, 1_001, True)


def test_time_maybe_append_rules(tidx: TimeIndex) -> None:
    """[TimeIndex.maybeAppend] only a strictly larger timestamp is appended; ts <= -1 never is
    (empty last entry is (-1, base)); a smaller timestamp -> ValueError (IllegalStateException);
    an equal offset with a larger timestamp is appended; offsets must fit 31 bits."""
    tidx.maybe_append(-1, BASE + 1)
    tidx.maybe_append(-5, BASE + 1)
    assert tidx.entries == 0
    tidx.maybe_append(100, BASE + 3)
    tidx.maybe_append(100, BASE + 4)           # equal timestamp: skipped
    assert tidx.entries == 1
    with pytest.raises(ValueError, match="no larger than the last timestamp") as e:
        tidx.maybe_append(99, BASE + 5)
    assert not isinstance(e.value, InvalidOffsetError)
    with pytest.raises(InvalidOffsetError):
        tidx.maybe_append(101, BASE + 2)      # the offset check comes first
    tidx.maybe_append(101, BASE + 3)           # same offset, larger timestamp
    assert tidx.entries == 2
    with pytest.raises(OffsetOverflowError):
        tidx.maybe_append(102, BASE + 2**31)
    assert tidx.entries == 2


def test_time_truncate(tidx: TimeIndex) -> None:
    """[TimeIndexTest.testTruncate] truncate() empties; truncateTo(base + 10), the first entry's
    offset, leaves no entries."""
    append_time_entries(tidx, MAX_ENTRIES - 1)
    tidx.truncate()
    assert tidx.entries == 0 and tidx.last_entry == TimestampOffset(-1, BASE)
    append_time_entries(tidx, MAX_ENTRIES - 1)
    tidx.truncate_to(10 + BASE)
    assert tidx.entries == 0
    append_time_entries(tidx, 5)
    tidx.truncate_to(BASE + 31)               # between entries: keeps 10, 20, 30
    assert tidx.entries == 3 and tidx.last_entry == TimestampOffset(30, BASE + 30)
    tidx.truncate_to(BASE + 30)
    assert tidx.last_entry == TimestampOffset(20, BASE + 20)


def test_time_sanity_check(tmp_path: Path, tidx: TimeIndex) -> None:
    """[TimeIndexTest.testSanityCheck] CorruptIndexError if the last offset is below the base,
    the last timestamp below the first, or the length not a multiple of 12 (here real corrupt
    files instead of Kafka's mock)."""
    tidx.sanity_check()
    append_time_entries(tidx, 5)
    tidx.sanity_check()
    tidx.close()
    good = tidx.path.read_bytes()
    assert len(good) == 60
    cases = {
        "last offset": good[:-4] + struct.pack(">i", -1),
        "last timestamp": good[:-12] + struct.pack(">qi", 9, 50),
        "multiple of 12": good + b"\x00",
    }
    for reason, data in cases.items():
        path = tmp_path / f"{reason.replace(' ', '_')}.timeindex"
        path.write_bytes(data)
        with TimeIndex(path, BASE, writable=False) as idx:
            with pytest.raises(CorruptIndexError, match=str(path)) as e:
                idx.sanity_check()
            assert reason in str(e.value)
    with TimeIndex(tidx.path, BASE, writable=False) as idx:
        idx.sanity_check()


def test_resize(tidx: TimeIndex) -> None:
    """[TimeIndexTest.testResize] resize to the current size -> False; to half or double -> True
    (file length follows; entries that fit are kept; rounded down to whole entries)."""
    assert tidx.resize(MAX_ENTRIES * 12) is False
    append_time_entries(tidx, 3)
    assert tidx.resize(MAX_ENTRIES // 2 * 12) is True
    assert tidx.path.stat().st_size == 180 and tidx.max_entries == 15 and tidx.entries == 3
    assert tidx.resize(MAX_ENTRIES * 2 * 12) is True
    assert tidx.path.stat().st_size == 720 and tidx.max_entries == 60
    assert tidx.resize(MAX_ENTRIES * 2 * 12 + 11) is False    # rounds down to the same size
    assert tidx.resize(24) is True                            # below the entries: clamped
    assert tidx.entries == 2 and tidx.last_entry == TimestampOffset(20, 65)


def test_resize_remaps(tmp_path: Path) -> None:
    """[AbstractIndexTest.testResizeInvokeUnmap] resize unmaps the old mapping (at once, not at
    garbage collection) and maps the new length."""
    idx = OffsetIndex(tmp_path / "test-index", 0, 100)
    old = idx._mm
    assert old is not None and len(old) == 96
    assert idx.resize(80)
    assert old.closed and idx._mm is not old and len(idx._mm) == 80
    idx.close()


# ================================================================================================
# File life cycle shared by both mmapped indexes
# ================================================================================================

@pytest.mark.parametrize("cls, size", [(OffsetIndex, 10485760), (TimeIndex, 10485756)])
def test_preallocated_size_and_trim(tmp_path: Path, cls: type, size: int) -> None:
    """[AbstractIndex constructor, trimToValidSize] a new index is preallocated to
    entrySize * floor(segment.index.bytes / entrySize) -- 10485760 for .index, 10485756 for
    .timeindex -- sparse and zero-filled; close() trims it to the entries."""
    path = tmp_path / f"00000000000000000000{'.index' if cls is OffsetIndex else '.timeindex'}"
    idx = cls(path, 0)
    assert path.stat().st_size == size == idx.length and idx.entries == 0
    assert path.stat().st_blocks * 512 < size    # sparse: nothing written yet
    if cls is OffsetIndex:
        idx.append(3, 0)
    else:
        idx.maybe_append(1000, 3)
    idx.flush()
    idx.close()
    assert path.stat().st_size == cls.ENTRY_SIZE


def test_invalid_max_index_size(tmp_path: Path) -> None:
    """[AbstractIndex.createAndAssignMmap] a new file needs maxIndexSize >= entry size
    (IllegalArgumentException -> InvalidConfigError); no file is left behind."""
    with pytest.raises(InvalidConfigError, match="max index size 7"):
        OffsetIndex(tmp_path / "0.index", 0, 7)
    assert not (tmp_path / "0.index").exists()
    with pytest.raises(InvalidConfigError):
        TimeIndex(tmp_path / "0.timeindex", 0, 11)


def test_byte_exact_layout(tmp_path: Path) -> None:
    """[kafka_format.md §8.2, §9] entries are big-endian (int32 relative offset, int32 position)
    and (int64 timestamp, int32 relative offset), packed with no header; checked by hand."""
    with OffsetIndex(tmp_path / "00000000000000001000.index", 1000) as idx:
        idx.append(1000, 0)
        idx.append(1005, 4096)
        idx.append(1010, 123456)
    assert (tmp_path / "00000000000000001000.index").read_bytes() == bytes.fromhex(
        "00000000 00000000" "00000005 00001000" "0000000a 0001e240")
    with TimeIndex(tmp_path / "00000000000000001000.timeindex", 1000) as tix:
        tix.maybe_append(1_700_000_000_000, 1003)
        tix.maybe_append(1_700_000_000_001, 1000 + 2**31 - 1)
    assert (tmp_path / "00000000000000001000.timeindex").read_bytes() == bytes.fromhex(
        "0000018bcfe56800 00000003" "0000018bcfe56801 7fffffff")
    with OffsetIndex(tmp_path / "00000000000000001000.index", 1000, writable=False) as ro:
        arr = ro.entries_array()
    assert arr.dtype.names == ("relative_offset", "position")
    assert arr["relative_offset"].tolist() == [0, 5, 10]
    assert arr["position"].tolist() == [0, 4096, 123456]


def test_untrimmed_file_after_crash_counts_every_slot(tmp_path: Path) -> None:
    """[kafka_format.md §8.1, §18.5] a preallocated file that was never trimmed (a crash) is read
    back with every slot as an entry -- no zero detection, as Kafka does; zero slots decode as
    (baseOffset, 0) and sanityCheck does not notice (last offset == base is allowed)."""
    path = tmp_path / "00000000000000000500.index"
    idx = OffsetIndex(path, 500, 80)
    idx.append(501, 0)
    idx.append(502, 64)
    idx.flush()
    idx.close_handler()                          # the process dies: no trim
    assert path.stat().st_size == 80
    with OffsetIndex(path, 500, writable=False) as ro:
        assert ro.entries == 10 and ro.is_full() and ro.last_offset == 500
        assert ro.entry(1) == OffsetPosition(502, 64) and ro.entry(9) == OffsetPosition(500, 0)
        ro.sanity_check()
    tpath = tmp_path / "00000000000000000500.timeindex"
    tix = TimeIndex(tpath, 500, 120)
    tix.maybe_append(7, 501)
    tix.close_handler()
    with TimeIndex(tpath, 500, writable=False) as ro:
        assert ro.entries == 10 and ro.last_entry == TimestampOffset(0, 500)
        with pytest.raises(CorruptIndexError, match="last timestamp is 0"):
            ro.sanity_check()


def test_trimmed_file_reopened_is_full_until_resized(tmp_path: Path) -> None:
    """[OffsetIndexTest.testReopen, LogLoader.resizeIndexes, LogSegment.truncateTo] opening never
    preallocates an existing file: a trimmed index reopened writable keeps its length and is
    full; resize(max_index_size) -- what the loader does for the active segment -- makes room
    (keeping the entries), appends continue, and close trims again."""
    path = tmp_path / "00000000000000000000.index"
    with OffsetIndex(path, 0, 800) as idx:
        idx.append(1, 0)
        idx.append(5, 100)
    assert path.stat().st_size == 16
    with OffsetIndex(path, 0, 800) as rw:
        assert path.stat().st_size == 16 and rw.entries == 2 and rw.is_full()
        with pytest.raises(IndexFullError):
            rw.append(9, 200)
        assert rw.resize(800) is True
        assert path.stat().st_size == 800 and rw.entries == 2 and rw.last_offset == 5
        assert not rw.is_full()
        rw.append(9, 200)
    assert path.read_bytes() == struct.pack(">iiiiii", 1, 0, 5, 100, 9, 200)
    with OffsetIndex(path, 0, 800) as rw:
        rw.reset()
        assert rw.entries == 0 and rw.length == 800
    assert path.stat().st_size == 0
    tpath = tmp_path / "00000000000000000000.timeindex"
    with TimeIndex(tpath, 0, 120) as tix:
        tix.maybe_append(10, 1)
    with TimeIndex(tpath, 0, 120) as tix:
        assert tix.entries == 1 and tix.is_full() and tix.last_entry == TimestampOffset(10, 1)
        tix.resize(120)
        tix.maybe_append(20, 2)
    assert tpath.read_bytes() == struct.pack(">qiqi", 10, 1, 20, 2)


def test_read_only_never_changes_the_file(tmp_path: Path) -> None:
    """[AbstractIndex(writable=false)] read-only: the file is mapped read-only and never changed
    (no trim on close); truncation is in memory only; writes and resizes fail; a 0-byte or a
    missing file (never created) is an index with no entries and no slots."""
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, 800)
    for o in range(1, 6):
        idx.append(o, o * 10)
    idx.flush()
    idx.close_handler()
    before = path.read_bytes()
    with OffsetIndex(path, 0, writable=False) as ro:
        assert ro.entries == 100 and not ro.writable and ro.is_full()
        ro.truncate()
        assert ro.entries == 0
        with pytest.raises(io.UnsupportedOperation, match="read-only"):
            ro.append(3, 30)
        with pytest.raises(io.UnsupportedOperation):
            ro.resize(16)
        ro.flush()
    assert path.read_bytes() == before
    trimmed = tmp_path / "00000000000000000001.index"
    trimmed.write_bytes(before[:40])
    with OffsetIndex(trimmed, 0, writable=False) as ro:
        ro.truncate_to(3)
        assert ro.entries == 2 and ro.last_offset == 2 and ro.lookup(4) == OffsetPosition(2, 20)
    assert trimmed.read_bytes() == before[:40]
    missing = tmp_path / "00000000000000000009.index"
    with OffsetIndex(missing, 9, writable=False) as ro:
        assert ro.entries == 0 and ro.is_full() and ro.lookup(20) == OffsetPosition(9, 0)
        ro.sanity_check()
        ro.rename_to(missing.with_name(missing.name + ".deleted"))   # nothing to move
        assert ro.path.name.endswith(".deleted") and ro.delete_if_exists() is False
    assert not missing.exists()
    empty = tmp_path / "00000000000000000007.timeindex"
    empty.touch()
    with TimeIndex(empty, 7, writable=False) as ro:
        assert ro.entries == 0 and ro.max_entries == 0 and ro.is_full()
        assert ro.lookup(10**12) == TimestampOffset(-1, 7)
        assert ro.entries_array().shape == (0,)
        ro.sanity_check()
    empty_offsets = tmp_path / "00000000000000000007.index"
    empty_offsets.touch()
    with OffsetIndex(empty_offsets, 7, writable=False) as ro:
        assert ro.lookup(100) == OffsetPosition(7, 0)
        assert ro.fetch_upper_bound_offset(0, 1) is None
    assert empty.stat().st_size == 0 and empty_offsets.stat().st_size == 0


def test_reader_opens_while_writer_appends(tmp_path: Path) -> None:
    """A read-only reader of the active segment counts the preallocated slots as entries (Kafka
    does too) and sees the writer's entries through the shared page cache; concurrent lookups on
    one index during appends always see a consistent floor entry."""
    path = tmp_path / "00000000000000000000.index"
    writer = OffsetIndex(path, 0, 8 * 4096)
    for o in range(1, 101):
        writer.append(o * 2, o * 100)
    with OffsetIndex(path, 0, writable=False) as reader:
        assert reader.entries == 4096
        assert reader.entry(49) == OffsetPosition(100, 5000)
        writer.append(202, 10_100)
        assert reader.entry(100) == OffsetPosition(202, 10_100)

    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                got = writer.lookup(10**6)
                assert got.offset == got.position // 50
        except BaseException as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    for o in range(102, 2000):
        writer.append(o * 2, o * 100)
    stop.set()
    for t in threads:
        t.join()
    writer.close()
    assert not errors and path.stat().st_size == 1999 * 8


def test_rename_and_delete(tmp_path: Path) -> None:
    """[AbstractIndex.renameTo/deleteIfExists/updateParentDir] renaming (the .deleted/.swap
    suffixes) moves the file and the index keeps working on it; deleteIfExists unmaps and
    deletes once (True, then False)."""
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, 80)
    idx.append(1, 0)
    idx.rename_to(path.with_name(path.name + ".deleted"))
    assert not path.exists() and idx.path.name == "00000000000000000000.index.deleted"
    idx.append(2, 10)
    idx.close()
    assert idx.path.read_bytes() == struct.pack(">iiii", 1, 0, 2, 10)
    idx2 = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 120)
    assert idx2.delete_if_exists() is True
    assert idx2.delete_if_exists() is False
    with pytest.raises(ValueError):
        idx2.lookup(0)
    other = tmp_path / "elsewhere"
    idx2.update_parent_dir(other)
    assert idx2.path == other / "00000000000000000000.timeindex"
    idx3 = OffsetIndex(tmp_path / "00000000000000000003.index", 3, 80)
    idx3.path.unlink()                    # deleted under an open index: close has nothing to trim
    idx3.close()
    assert not idx3.path.exists() and idx3.closed


# ================================================================================================
# Search: warm section + two-level searchsorted == numpy's searchsorted
# ================================================================================================

@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 40_000), seed=st.integers(0, 2**32 - 1),
       dup=st.booleans(), side=st.sampled_from(["left", "right"]))
def test_searchsorted_matches_numpy(n: int, seed: int, dup: bool, side: str) -> None:
    """The O(sqrt n) search over a strided big-endian view gives np.searchsorted's answer for
    every target (present, absent, duplicated, out of range, beyond the dtype)."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(0 if dup else 1, 6, size=n)
    keys = (np.cumsum(steps) - 3).astype(np.int64)
    rows = np.zeros(n, dtype=[("rel", ">i4"), ("pos", ">i4")])
    rows["rel"] = keys
    view = rows["rel"]
    warm = 8192 // 8
    top = int(keys[-1]) if n else 0
    targets = [-(2**40), -4, 0, top, top + 1, 2**31 - 1, 2**40]
    if n:
        targets += rng.integers(-5, top + 5, size=20).tolist() + keys[rng.integers(0, n, 10)].tolist()
    for t in targets:
        assert _searchsorted(view, t, side, warm) == np.searchsorted(keys, t, side), (t, side)


def test_large_index_lookups(tmp_path: Path) -> None:
    """Lookups on a full default-size index (1,310,720 entries, the two-level path for cold
    targets and the warm section for recent ones) agree with a brute-force search."""
    n = 10485760 // 8
    rows = np.empty(n, dtype=[("rel", ">i4"), ("pos", ">i4")])
    rows["rel"] = np.arange(n, dtype=np.int64) * 3 + 1
    rows["pos"] = np.arange(n, dtype=np.int64) * 50
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(rows.tobytes())
    rel = rows["rel"].astype(np.int64)
    with OffsetIndex(path, 1000, writable=False) as idx:
        assert idx.entries == n and idx.is_full()
        for target in [1000, 1001, 1002, 1000 + 3 * n - 2, 1000 + 3 * n, 1000 + 3 * (n - 1500),
                       *random.Random(1).sample(range(1000, 1000 + 3 * n + 5), 50)]:
            slot = int(np.flatnonzero(rel <= target - 1000)[-1]) if target > 1000 else -1
            want = OffsetPosition(1000, 0) if slot < 0 else OffsetPosition(1000 + int(rel[slot]),
                                                                           slot * 50)
            assert idx.lookup(target) == want
        assert idx.fetch_upper_bound_offset(123, 1000) == OffsetPosition(1000 + 3 * 23 + 1, 1150)


# ================================================================================================
# Hypothesis model tests: random operations against a list
# ================================================================================================

offset_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(-2, 40), st.integers(0, 300)),
    st.tuples(st.just("truncate_to"), st.integers(-5, 600)),
    st.tuples(st.just("truncate")),
    st.tuples(st.just("reopen"), st.booleans()),
    st.tuples(st.just("resize"), st.integers(0, 400)),
    st.tuples(st.just("reset")),
), max_size=60)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=offset_ops, base=st.sampled_from([0, 100, 2**40]),
       targets=st.lists(st.integers(-10, 700), min_size=5, max_size=5))
def test_offset_index_model(ops: list[tuple], base: int, targets: list[int]) -> None:
    """OffsetIndex == a sorted list of (offset, position) under appends (in order, out of order,
    past full), truncations, resizes, resets and close/reopen (full until resized); the file
    after close is exactly the packed entries."""
    max_size = 8 * 20
    model: list[tuple[int, int]] = []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.index"
        idx = OffsetIndex(path, base, max_size)
        capacity = 20
        try:
            for op in ops:
                if op[0] == "append":
                    offset = (model[-1][0] if model else base) + op[1]
                    # positions grow with offsets: each entry is a later batch of the .log
                    position = model[-1][1] + 1 + op[2] if model else op[2]
                    if len(model) >= capacity:
                        with pytest.raises(IndexFullError):
                            idx.append(offset, position)
                    elif model and offset <= model[-1][0]:
                        with pytest.raises(InvalidOffsetError):
                            idx.append(offset, position)
                    elif offset < base:
                        with pytest.raises(OffsetOverflowError):
                            idx.append(offset, position)
                    else:
                        idx.append(offset, position)
                        model.append((offset, position))
                elif op[0] == "truncate_to":
                    idx.truncate_to(base + op[1])
                    model = [e for e in model if e[0] < base + op[1]]
                elif op[0] == "truncate":
                    idx.truncate()
                    model = []
                elif op[0] == "reopen":
                    idx.close()
                    assert path.read_bytes() == b"".join(
                        struct.pack(">ii", o - base, p) for o, p in model)
                    idx = OffsetIndex(path, base, max_size)
                    capacity = len(model)                 # trimmed: full until resized
                    if op[1]:                             # made active again
                        idx.resize(max_size)
                        capacity = 20
                        model = model[:capacity]
                elif op[0] == "resize":
                    idx.resize(op[1])
                    capacity = op[1] // 8
                    model = model[:capacity]
                else:
                    idx.reset()
                    model, capacity = [], 20
                assert idx.entries == len(model) and idx.max_entries == capacity
                assert idx.last_offset == (model[-1][0] if model else base)
                for t in targets:
                    below = [e for e in model if e[0] <= base + t]
                    assert idx.lookup(base + t) == (OffsetPosition(*below[-1]) if below
                                                    else OffsetPosition(base, 0))
                    above = [e for e in model if e[1] >= t * 8]
                    assert idx.fetch_upper_bound_offset(t * 8, 0) == (
                        OffsetPosition(*above[0]) if above else None)
                idx.sanity_check()
        finally:
            idx.close()
        assert path.read_bytes() == b"".join(struct.pack(">ii", o - base, p) for o, p in model)


time_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(-3, 30), st.integers(-2, 10), st.booleans()),
    st.tuples(st.just("truncate_to"), st.integers(-5, 300)),
    st.tuples(st.just("truncate")),
    st.tuples(st.just("reopen"), st.booleans()),
), max_size=60)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=time_ops, targets=st.lists(st.integers(-5, 400), min_size=5, max_size=5))
def test_time_index_model(ops: list[tuple], targets: list[int]) -> None:
    """TimeIndex == a list of (timestamp, offset) under Kafka's maybeAppend rules (full unless
    skipped, offset back -> InvalidOffsetError, timestamp back -> ValueError, append only if the
    timestamp grows), truncations and close/reopen; the file after close is the packed entries."""
    base, cap = 1000, 12
    model: list[tuple[int, int]] = []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.timeindex"
        idx = TimeIndex(path, base, cap * 12)
        capacity = cap
        try:
            for op in ops:
                if op[0] == "append":
                    last_ts, last_off = model[-1] if model else (-1, base)
                    ts, offset, skip = last_ts + op[1], last_off + op[2], op[3]
                    if not skip and len(model) >= capacity - 1:
                        with pytest.raises(IndexFullError):
                            idx.maybe_append(ts, offset, skip)
                    elif model and offset < last_off:
                        with pytest.raises(InvalidOffsetError):
                            idx.maybe_append(ts, offset, skip)
                    elif model and ts < last_ts:
                        with pytest.raises(ValueError):
                            idx.maybe_append(ts, offset, skip)
                    elif ts <= last_ts:
                        idx.maybe_append(ts, offset, skip)
                    elif offset < base:
                        with pytest.raises(OffsetOverflowError):
                            idx.maybe_append(ts, offset, skip)
                    elif len(model) >= capacity:
                        with pytest.raises(IndexFullError):
                            idx.maybe_append(ts, offset, skip)
                    else:
                        idx.maybe_append(ts, offset, skip)
                        model.append((ts, offset))
                elif op[0] == "truncate_to":
                    idx.truncate_to(base + op[1])
                    model = [e for e in model if e[1] < base + op[1]]
                elif op[0] == "truncate":
                    idx.truncate()
                    model = []
                else:
                    idx.close()
                    assert path.read_bytes() == b"".join(
                        struct.pack(">qi", t, o - base) for t, o in model)
                    idx = TimeIndex(path, base, cap * 12)
                    capacity = len(model)
                    if op[1]:
                        idx.resize(cap * 12)
                        capacity = cap
                        model = model[:capacity]
                assert idx.entries == len(model)
                assert idx.last_entry == (TimestampOffset(*model[-1]) if model
                                          else TimestampOffset(-1, base))
                for t in targets:
                    below = [e for e in model if e[0] <= t]
                    assert idx.lookup(t) == (TimestampOffset(*below[-1]) if below
                                             else TimestampOffset(-1, base))
                idx.sanity_check()
        finally:
            idx.close()
        assert path.read_bytes() == b"".join(struct.pack(">qi", t, o - base) for t, o in model)


# ================================================================================================
# TransactionIndex
# ================================================================================================

TXNS = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25),
        AbortedTxn(3, 32, 50, 40)]


@pytest.fixture
def txn_index(tmp_path: Path):
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    yield index
    index.close()


def test_aborted_txn_serde() -> None:
    """[TransactionIndexTest.testAbortedTxnSerde] version 0, producerId, firstOffset, lastOffset,
    lastStableOffset: int16 + 4 x int64 = 34 big-endian bytes; checked by hand."""
    txn = AbortedTxn(983493, 137, 299, 200)
    raw = txn.to_bytes()
    assert raw == bytes.fromhex("0000" "00000000000f01c5" "0000000000000089" "000000000000012b"
                                "00000000000000c8")
    assert AbortedTxn.CURRENT_VERSION == 0 and AbortedTxn.SIZE == len(raw) == 34
    assert AbortedTxn.from_bytes(raw) == txn
    assert (txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset) == (
        983493, 137, 299, 200)


def test_position_set_correctly_when_opened(tmp_path: Path, txn_index: TransactionIndex) -> None:
    """[TransactionIndexTest.testPositionSetCorrectlyWhenOpened] a reopened index appends after
    the 4 entries already there."""
    for txn in TXNS:
        txn_index.append(txn)
    txn_index.close()
    reopened = TransactionIndex(txn_index.path, 0)
    another = AbortedTxn(3, 50, 60, 55)
    reopened.append(another)
    assert reopened.all_aborted_txns() == [*TXNS, another]
    assert txn_index.path.read_bytes() == b"".join(t.to_bytes() for t in [*TXNS, another])
    reopened.close()


def test_last_offset_must_increase(txn_index: TransactionIndex) -> None:
    """[TransactionIndexTest.testLastOffsetMustIncrease, testLastOffsetCannotDecrease] lastOffset
    15 after 15, or 10 after 15 -> InvalidOffsetError (a ValueError, as IllegalArgumentException);
    also across a reopen (stricter than Kafka, which forgets the last offset on open)."""
    txn_index.append(AbortedTxn(1, 5, 15, 13))
    for bad in (AbortedTxn(0, 0, 15, 11), AbortedTxn(0, 0, 10, 11)):
        with pytest.raises(InvalidOffsetError, match="must increase"):
            txn_index.append(bad)
    txn_index.close()
    with TransactionIndex(txn_index.path, 0) as reopened:
        with pytest.raises(ValueError):
            reopened.append(AbortedTxn(0, 0, 15, 11))
        reopened.append(AbortedTxn(0, 0, 16, 11))
    assert len(txn_index.all_aborted_txns()) == 2


def test_collect_aborted_transactions(txn_index: TransactionIndex) -> None:
    """[TransactionIndexTest.testCollectAbortedTransactions] lastOffset >= fetchOffset and
    firstOffset < upperBound; complete once an entry with lastStableOffset >= upperBound is seen."""
    for txn in TXNS:
        txn_index.append(txn)
    assert txn_index.collect_aborted_txns(0, 100) == (TXNS, False)
    assert txn_index.collect_aborted_txns(0, 32) == (TXNS[:3], True)
    assert txn_index.collect_aborted_txns(0, 35) == (TXNS, True)
    assert txn_index.collect_aborted_txns(10, 35) == (TXNS, True)
    assert txn_index.collect_aborted_txns(11, 35) == (TXNS[1:], True)
    assert txn_index.collect_aborted_txns(20, 41) == (TXNS[2:], False)


def test_txn_truncate(txn_index: TransactionIndex) -> None:
    """[TransactionIndexTest.testTruncate] truncateTo(51) keeps lastOffset 50, truncateTo(50)
    drops it; reset() empties the file; appends continue after each."""
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25),
            AbortedTxn(3, 32, 50, 40)]
    for txn in txns:
        txn_index.append(txn)
    txn_index.truncate_to(51)
    assert txn_index.collect_aborted_txns(0, 100)[0] == txns
    txn_index.truncate_to(50)
    assert txn_index.collect_aborted_txns(0, 100)[0] == txns[:3]
    assert txn_index.path.stat().st_size == 3 * 34
    txn_index.append(AbortedTxn(4, 40, 45, 46))          # 45 > 35: allowed after the cut
    txn_index.reset()
    assert txn_index.collect_aborted_txns(0, 100) == ([], False)
    assert txn_index.path.stat().st_size == 0
    txn_index.append(AbortedTxn(0, 0, 1, 2))             # any last offset after reset


def test_txn_sanity_check(txn_index: TransactionIndex) -> None:
    """[TransactionIndexTest.testSanityCheck] reopened with start offset 100, entries whose
    lastOffset is below it -> CorruptIndexError naming the file."""
    for txn in TXNS:
        txn_index.append(txn)
    txn_index.sanity_check()
    txn_index.close()
    with TransactionIndex(txn_index.path, 100) as reopened:
        with pytest.raises(CorruptIndexError, match=f"{txn_index.path}.*start offset 100"):
            reopened.sanity_check()
    with TransactionIndex(txn_index.path, 10) as reopened:   # lastOffset == start is fine
        reopened.sanity_check()


def test_txn_rename_flush_delete(tmp_path: Path, txn_index: TransactionIndex) -> None:
    """[TransactionIndexTest.testRenameIndex, testFlush, testDeleteIfExists, testUpdateParentDir]
    appends continue after renameTo; flush before the file exists succeeds without creating it,
    after an append + flush the file is non-empty; deleteIfExists removes it."""
    txn_index.append(AbortedTxn(0, 0, 10, 2))
    renamed = tmp_path / "renamed.txnindex"
    txn_index.rename_to(renamed)
    txn_index.append(AbortedTxn(1, 5, 15, 16))
    got = txn_index.collect_aborted_txns(0, 100)[0]
    assert [t.first_offset for t in got] == [0, 5] and txn_index.path == renamed
    assert renamed.stat().st_size == 68

    missing = tmp_path / "00000000000000000777.txnindex"
    with TransactionIndex(missing, 777) as fresh:
        fresh.flush()
        assert not missing.exists()
        fresh.append(AbortedTxn(0, 777, 780, 781))
        fresh.flush()
        assert missing.stat().st_size == 34

    assert txn_index.delete_if_exists() is True and not renamed.exists()
    assert txn_index.delete_if_exists() is False
    parent = tmp_path / "parent"
    txn_index.update_parent_dir(parent)
    assert txn_index.path == parent / "renamed.txnindex"
    # renaming an index whose file does not exist just updates the path
    txn_index.rename_to(tmp_path / "x.txnindex.deleted")
    assert txn_index.path.name == "x.txnindex.deleted"


def test_txn_file_not_created_until_needed(tmp_path: Path) -> None:
    """[TransactionIndexTest.testDoNotCreateFileUntilNeeded, testIsEmpty*] construction, reset,
    flush, reads and truncation do not create the file; the first append does."""
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path, 0)
    index.reset()
    index.flush()
    index.truncate_to(0)
    index.sanity_check()
    assert index.all_aborted_txns() == [] and index.collect_aborted_txns(0, 10) == ([], False)
    assert index.is_empty() and not path.exists()
    index.append(AbortedTxn(0, 0, 10, 2))
    assert path.exists() and not index.is_empty()
    index.close()
    path.write_bytes(b"")
    assert TransactionIndex(path, 0).is_empty()


def test_txn_append_and_collect_after_close(txn_index: TransactionIndex) -> None:
    """[TransactionIndexTest.testAppendAndCollectAfterClose] a closed index reopens its file for
    appends and reads."""
    txn_index.close()
    txn_index.append(AbortedTxn(0, 0, 10, 2))
    txn_index.close()
    txn_index.append(AbortedTxn(1, 5, 15, 16))
    txn_index.close()
    assert [t.first_offset for t in txn_index.collect_aborted_txns(0, 100)[0]] == [0, 5]


def test_txn_partial_tail_and_versions(tmp_path: Path) -> None:
    """[TransactionIndex iterator] a torn tail (< 34 bytes) is ignored; the version is the entry's
    first byte read signed: > 0 is an unknown version (CorruptIndexError naming the file and the
    byte position), a negative byte is accepted as Kafka does; a search that completes before a
    bad entry never reads it."""
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(b"".join(t.to_bytes() for t in TXNS) + b"\x00" * 20)
    with TransactionIndex(path, 0) as idx:
        assert idx.all_aborted_txns() == TXNS
        idx.truncate_to(1000)                               # nothing to cut: tail stays
        assert path.stat().st_size == 4 * 34 + 20
    raw = bytearray(b"".join(t.to_bytes() for t in TXNS))
    raw[2 * 34] = 1                                         # version byte of the third entry
    path.write_bytes(raw)
    with TransactionIndex(path, 0) as idx:
        with pytest.raises(CorruptIndexError, match=f"version 1 .*{path} at position 68"):
            idx.all_aborted_txns()
        with pytest.raises(CorruptIndexError, match="position 68"):
            idx.sanity_check()
        with pytest.raises(CorruptIndexError):
            idx.collect_aborted_txns(0, 100)
        assert idx.collect_aborted_txns(0, 12) == ([TXNS[0], TXNS[1]], True)   # stops at entry 1
        idx.truncate_to(15)                                 # cut before the bad entry
        assert idx.all_aborted_txns() == TXNS[:1]
    raw[2 * 34] = 0xFF
    raw[2 * 34 + 1] = 0x7F
    path.write_bytes(raw)
    with TransactionIndex(path, 0) as idx:
        assert len(idx.all_aborted_txns()) == 4
    raw[2 * 34], raw[2 * 34 + 1] = 0x00, 0x05              # only the first byte is read
    path.write_bytes(raw)
    with TransactionIndex(path, 0) as idx:
        assert len(idx.all_aborted_txns()) == 4


def test_txn_index_reads_a_huge_file_in_bounded_memory(tmp_path: Path, monkeypatch) -> None:
    """Found by fuzzing: a ``.txnindex`` extended (sparse) to gigabytes was read whole by every
    check, truncation and search (a writable open of a 3 GiB file peaked at 4.3 GB, then
    MemoryError). Read a chunk of entries at a time, as Kafka's iterator reads entry by entry:
    the same answers over 200 MiB of zero entries after two real ones, in a few MiB; and an
    unknown version in a later chunk is still named at its byte position in the file."""
    import tracemalloc

    path = tmp_path / "00000000000000000000.txnindex"
    real = [AbortedTxn(1, 0, 5, 5), AbortedTxn(2, 6, 9, 9)]
    path.write_bytes(b"".join(t.to_bytes() for t in real))
    with open(path, "r+b") as f:
        f.truncate(200 << 20)                       # zeros: entries (0, 0, 0, 0), version 0
    tracemalloc.start()
    try:
        with TransactionIndex(path, 0) as idx:
            idx.sanity_check()
            assert idx.collect_aborted_txns(1, 10) == (real, False)     # zero entries end before 1
            idx.truncate_to(9)
            assert path.stat().st_size == 34
            idx.append(AbortedTxn(3, 7, 8, 8))      # after the cut: the last offset is 5 again
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
    monkeypatch.setattr("storage_core.index.transaction_index._CHUNK_ENTRIES", 2)
    raw = bytearray(b"".join(t.to_bytes() for t in TXNS))
    raw[3 * 34] = 1                                 # version byte of the fourth entry: second chunk
    path.write_bytes(raw)
    with TransactionIndex(path, 0) as idx:
        with pytest.raises(CorruptIndexError, match=f"version 1 .*{path} at position 102"):
            idx.sanity_check()
        with pytest.raises(CorruptIndexError, match="position 102"):
            idx.all_aborted_txns()


@settings(max_examples=80, deadline=None)
@given(txns=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 30), st.integers(1, 10),
                               st.integers(0, 40)), max_size=12),
       cut=st.integers(-5, 400), fetch=st.integers(0, 300), upper=st.integers(0, 400),
       chunk=st.sampled_from([1, 2, 3, 5, 1 << 15]))
def test_txn_index_model(txns: list[tuple[int, int, int, int]], cut: int, fetch: int,
                         upper: int, chunk: int) -> None:
    """TransactionIndex == Kafka's iterator loops written out over a list: appends with
    increasing lastOffset, collectAbortedTxns, truncateTo, the last offset an append after the
    cut must pass, and the file bytes; the file read ``chunk`` entries at a time."""
    import storage_core.index.transaction_index as txn_module

    model: list[AbortedTxn] = []
    last = 0
    for pid, first_gap, last_gap, lso_gap in txns:
        last += last_gap
        model.append(AbortedTxn(pid, max(0, last - first_gap), last, last + lso_gap))
    saved, txn_module._CHUNK_ENTRIES = txn_module._CHUNK_ENTRIES, chunk
    try:
        _check_txn_index_model(model, cut, fetch, upper)
    finally:
        txn_module._CHUNK_ENTRIES = saved


def _check_txn_index_model(model: list[AbortedTxn], cut: int, fetch: int, upper: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        index = TransactionIndex(Path(d) / "0.txnindex", 0)
        for txn in model:
            index.append(txn)
        expected, complete = [], False
        for txn in model:
            if txn.last_offset >= fetch and txn.first_offset < upper:
                expected.append(txn)
            if txn.last_stable_offset >= upper:
                complete = True
                break
        assert index.collect_aborted_txns(fetch, upper) == (expected, complete)
        index.truncate_to(cut)
        kept = [t for t in model if t.last_offset < cut]
        assert index.all_aborted_txns() == kept
        if model:
            assert index.path.read_bytes() == b"".join(t.to_bytes() for t in kept)
        else:
            assert not index.path.exists()     # no abort, no file
        if kept:
            with pytest.raises(InvalidOffsetError):
                index.append(AbortedTxn(9, 0, kept[-1].last_offset, kept[-1].last_offset))
        index.append(AbortedTxn(9, 0, kept[-1].last_offset + 1 if kept else 0, 500))
        index.close()
        reopened = TransactionIndex(index.path, 0)
        assert reopened.all_aborted_txns()[-1].producer_id == 9
        reopened.close()


# ================================================================================================
# LazyIndex
# ================================================================================================

def test_lazy_index_loads_on_get(tmp_path: Path) -> None:
    """[LazyIndexTest.getDoesNotLoadUntilCalled, getReturnsSameInstanceOnSubsequentCalls,
    forOffsetReturnsOffsetIndexOnGet, forTimeReturnsTimeIndexOnGet] the file is not created until
    get(); get() returns the same instance each time."""
    path = tmp_path / "00000000000000000000.index"
    with LazyIndex.for_offset(path, 0, 1000) as lazy:
        assert lazy.path == path and not path.exists() and not lazy.is_loaded
        first = lazy.get()
        assert isinstance(first, OffsetIndex) and first.base_offset == 0 and path.exists()
        assert lazy.get() is first
    assert path.stat().st_size == 0           # closed through the wrapper: trimmed
    tpath = tmp_path / "00000000000000000000.timeindex"
    with LazyIndex.for_time(tpath, 0, 1500) as lazy_t:
        assert isinstance(lazy_t.get(), TimeIndex) and tpath.stat().st_size == 1500


def test_lazy_index_missing_parent_dir(tmp_path: Path) -> None:
    """[LazyIndexTest.getWrapsIOExceptionAsUncheckedWhenParentDirMissing] a missing directory
    surfaces as an OSError from get() (Java wraps it in UncheckedIOException)."""
    lazy = LazyIndex.for_offset(tmp_path / "no-such-dir" / "0.index", 0, 1000)
    with pytest.raises(OSError):
        lazy.get()


def test_lazy_index_file_operations(tmp_path: Path) -> None:
    """[LazyIndexTest.renameToToleratesAlreadyDeletedSource, renameToBeforeLoadMovesFileAndUpdatesPath,
    deleteIfExistsReturnsFalseWhenFileAbsent, deleteIfExistsRemovesFileAfterLoad,
    updateParentDirAdjustsFilePath, closeIsIdempotentBeforeAndAfterLoad]"""
    lazy = LazyIndex.for_offset(tmp_path / "a.index", 0, 1000)
    lazy.rename_to(tmp_path / "b.index")                  # never created: just the path
    assert lazy.path == tmp_path / "b.index" and not lazy.is_loaded
    assert lazy.delete_if_exists() is False
    lazy.close()
    lazy.close()
    lazy.get()
    lazy.rename_to(tmp_path / "c.index")
    assert (tmp_path / "c.index").exists() and lazy.path == tmp_path / "c.index"
    assert lazy.delete_if_exists() is True and not (tmp_path / "c.index").exists()
    unloaded = LazyIndex.for_time(tmp_path / "t.timeindex", 0, 1200)
    unloaded.update_parent_dir(tmp_path / "other")
    assert unloaded.path == tmp_path / "other" / "t.timeindex"
    # an existing file (a rolled segment) is moved before load too
    (tmp_path / "d.index").write_bytes(b"\x00" * 8)
    lazy_d = LazyIndex.for_offset(tmp_path / "d.index", 0, 1000)
    lazy_d.rename_to(tmp_path / "d.index.deleted")
    assert (tmp_path / "d.index.deleted").exists() and not lazy_d.is_loaded


# ================================================================================================
# Real broker files
# ================================================================================================

def _fixture_files(suffix: str) -> list[Path]:
    if not PINTEREST.is_dir():
        return []
    return sorted(PINTEREST.rglob(f"*{suffix}"))


def _manifest() -> dict[str, dict]:
    path = FIXTURES / "MANIFEST.json"
    return {e["path"]: e for e in json.loads(path.read_text())} if path.exists() else {}


def _require_fixtures() -> None:
    require_fixture(PINTEREST)


def test_broker_offset_indexes() -> None:
    """Every real broker ``.index`` opens read-only without touching the file, passes
    sanityCheck, has the entry count the independent checker found, and answers lookup and
    fetchUpperBoundOffset exactly as a brute-force scan of its entries does."""
    _require_fixtures()
    manifest = _manifest()
    files = _fixture_files(".index")
    assert len(files) >= 140
    rng = random.Random(42)
    for path in files:
        base = int(path.name.split(".")[0])
        digest = hashlib.sha256(path.read_bytes()).digest()
        with OffsetIndex(path, base, writable=False) as idx:
            idx.sanity_check()
            arr = idx.entries_array()
            rel = arr["relative_offset"].astype(np.int64)
            pos = arr["position"].astype(np.int64)
            assert idx.entries == len(arr) == path.stat().st_size // 8
            assert np.all(np.diff(rel) > 0) and np.all(np.diff(pos) > 0)
            entry = manifest.get(str(path.relative_to(FIXTURES).with_suffix(".log")))
            if entry is not None:
                assert idx.entries == entry["index_entries"]
                assert idx.last_offset <= entry["last_offset"]
            top = int(rel[-1]) if len(rel) else 10
            targets = {-1, 0, top, top + 1, *(rng.randint(-2, top + 2) for _ in range(25)),
                       *(int(r) + d for r in rel[:: max(1, len(rel) // 10)] for d in (-1, 0, 1))}
            for t in targets:
                hits = np.flatnonzero(rel <= t)
                want = (OffsetPosition(base + int(rel[hits[-1]]), int(pos[hits[-1]])) if hits.size
                        else OffsetPosition(base, 0))
                assert idx.lookup(base + t) == want, (path, t)
            ptop = int(pos[-1]) if len(pos) else 100
            for p in {0, ptop, ptop + 1, *(rng.randint(0, ptop + 5) for _ in range(10))}:
                hits = np.flatnonzero(pos >= p)
                want = (OffsetPosition(base + int(rel[hits[0]]), int(pos[hits[0]])) if hits.size
                        else None)
                assert idx.fetch_upper_bound_offset(p, 0) == want, (path, p)
        assert hashlib.sha256(path.read_bytes()).digest() == digest


def test_broker_time_indexes() -> None:
    """Every real broker ``.timeindex`` (including the 0-byte ones) opens read-only, passes
    sanityCheck, matches the independent checker's entry count, has the segment's max timestamp
    as its last entry (kafka_format.md §9), and answers lookup as a brute-force scan does."""
    _require_fixtures()
    manifest = _manifest()
    files = _fixture_files(".timeindex")
    assert len(files) >= 140
    rng = random.Random(43)
    for path in files:
        base = int(path.name.split(".")[0])
        size = path.stat().st_size
        with TimeIndex(path, base, writable=False) as idx:
            idx.sanity_check()
            arr = idx.entries_array()
            ts = arr["timestamp"]
            rel = arr["relative_offset"].astype(np.int64)
            assert idx.entries == len(arr) == size // 12
            assert np.all(np.diff(ts) > 0) and np.all(np.diff(rel) >= 0)
            entry = manifest.get(str(path.relative_to(FIXTURES).with_suffix(".log")))
            if entry is not None:
                assert idx.entries == entry["timeindex_entries"]
                if idx.entries:
                    assert idx.last_entry.timestamp == entry["max_ts"]
                    assert idx.last_entry.offset <= entry["last_offset"]
            if not len(ts):
                assert idx.lookup(2**62) == TimestampOffset(-1, base)
                continue
            lo, hi = int(ts[0]), int(ts[-1])
            targets = {-1, lo - 1, lo, hi, hi + 1, *(rng.randint(lo - 5, hi + 5) for _ in range(25)),
                       *(int(t) + d for t in ts[:: max(1, len(ts) // 10)] for d in (-1, 0, 1))}
            for t in targets:
                hits = np.flatnonzero(ts <= t)
                want = (TimestampOffset(int(ts[hits[-1]]), base + int(rel[hits[-1]])) if hits.size
                        else TimestampOffset(-1, base))
                assert idx.lookup(t) == want, (path, t)
        assert path.stat().st_size == size

"""Producer-state ``.snapshot`` files (kafka_format.md §13; kafka_test_checklist.md §5, the lines
about the snapshot file itself).

§5 lines covered here (file format only; the rest of §5 is producer-state logic):
* takeSnapshot's file name ``%020d.snapshot`` of the map end offset [ProducerStateManagerTest.testTakeSnapshot]
* no snapshot file at an offset -> nothing listed [ProducerStateManagerTest.testFetchSnapshotEmptySnapShot]
* round trip of every field, with and without batch metadata [ProducerStateManagerTest.testReadWriteSnapshot]
* coordinator epoch and open-transaction first offset survive a reload
  [ProducerStateManagerTest.testCoordinatorFencedAfterReload / testRecoverFromSnapshotUnfinishedTransaction /
  FinishedTransaction / testRecoverFromSnapshotEmptyTransaction]
* empty, truncated and garbage snapshot files are refused with CorruptSnapshotException (what the
  manager then deletes) [ProducerStateManagerTest.testLoadFromEmptySnapshotFile / testLoadFromTruncatedSnapshotFile /
  testLoadFromCorruptSnapshotFile]
* a snapshot renamed ``.deleted`` is no longer a snapshot
  [ProducerStateManagerTest.testRemoveAndMarkSnapshotForDeletion]
* real broker directories keep snapshots only at segment bases plus the largest one at the log
  end [ProducerStateManagerTest.testRemoveStraySnapshotsKeepCleanShutdownSnapshot, as an invariant of real data]
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import struct
import tracemalloc
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_core.errors import CorruptSnapshotError, KafkaLogError
from storage_core.format import iter_batches
from storage_core.producer import (
    ENTRY_SIZE, HEADER_SIZE, PRODUCER_SNAPSHOT_VERSION, ProducerSnapshotEntry, decode_snapshot,
    encode_snapshot, list_snapshots, read_snapshot, snapshot_path, write_snapshot)

from fixture_paths import PINTEREST, needs_fixture

needs_fixtures = needs_fixture(PINTEREST)

INT32_MAX = 2**31 - 1

# A real broker's snapshot (pinterest-tiered-storage timeindex_test/00000000000000022964.snapshot):
# idempotent producer 0, epoch 0, whose last batch is the single record at offset 22963.
BROKER_SNAPSHOT = bytes.fromhex(
    "0001e43bd571" "00000001"
    "0000000000000000" "0000" "000059b3" "00000000000059b3" "00000000" "0000019857c5e60b"
    "ffffffff" "ffffffffffffffff")
BROKER_ENTRY = ProducerSnapshotEntry(producer_id=0, producer_epoch=0, last_sequence=22963,
                                     last_offset=22963, offset_delta=0,
                                     timestamp=0x0198_57C5_E60B, coordinator_epoch=-1,
                                     current_txn_first_offset=-1)
EMPTY_SNAPSHOT = bytes.fromhex("0001" "48674bc7" "00000000")


# --- the bytes --------------------------------------------------------------------------------

def test_byte_exact_broker_snapshot():
    """kafka_format.md §13: version 1, CRC-32C, count, one 46-byte entry, as a broker wrote it."""
    assert encode_snapshot([BROKER_ENTRY]) == BROKER_SNAPSHOT
    assert decode_snapshot(BROKER_SNAPSHOT) == [BROKER_ENTRY]
    assert len(BROKER_SNAPSHOT) == HEADER_SIZE + ENTRY_SIZE == 56


def test_byte_exact_empty_snapshot():
    """A snapshot with no producers is 10 bytes (what brokers write for non-idempotent data)."""
    assert encode_snapshot([]) == EMPTY_SNAPSHOT
    assert decode_snapshot(EMPTY_SNAPSHOT) == []


def test_layout_field_by_field():
    """The entry layout written independently with struct: field order and widths of §13."""
    entry = ProducerSnapshotEntry(0x0102030405060708, 0x090A, 0x0B0C0D0E, 0x0F10111213141516,
                                  0x1718191A, 0x1B1C1D1E1F202122, 0x23242526, 0x2728292A2B2C2D2E)
    body = struct.pack(">i", 1) + bytes(range(1, 0x2F))
    expected = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert encode_snapshot([entry]) == expected
    assert decode_snapshot(expected) == [entry]


def test_crc_covers_count_and_entries_not_version_or_crc():
    """kafka_format.md §18.9: the CRC is over bytes [6, EOF), starting with the entry count."""
    data = encode_snapshot([BROKER_ENTRY, ProducerSnapshotEntry(7, 1)])
    stored = struct.unpack_from(">I", data, 2)[0]
    assert stored == crc32c.crc32c(data[6:])
    assert stored != crc32c.crc32c(data[10:]) and stored != crc32c.crc32c(data)


def test_entries_kept_in_file_order():
    """Kafka writes its HashMap's order; any order is valid, and ours is the order given."""
    a, b = ProducerSnapshotEntry(5, 0), ProducerSnapshotEntry(3, 0)
    assert decode_snapshot(encode_snapshot([a, b])) == [a, b]
    assert decode_snapshot(encode_snapshot([b, a])) == [b, a]


# --- ProducerStateManagerTest: the file side --------------------------------------------------

def test_take_snapshot_file_name(tmp_path):
    """ProducerStateManagerTest.testTakeSnapshot: after offsets 0 and 1 the snapshot is
    00000000000000000002.snapshot, and it is the only file written."""
    path = write_snapshot(tmp_path, 2, [ProducerSnapshotEntry(1, 0, 1, 1, 0, 100)])
    assert path == snapshot_path(tmp_path, 2) == tmp_path / "00000000000000000002.snapshot"
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000002.snapshot"]
    assert list_snapshots(tmp_path) == [(2, path)]
    assert snapshot_path(tmp_path, 2**63 - 1).name == "09223372036854775807.snapshot"


def test_fetch_snapshot_empty(tmp_path):
    """ProducerStateManagerTest.testFetchSnapshotEmptySnapShot: no snapshot at an offset."""
    assert list_snapshots(tmp_path) == []
    assert 1 not in dict(list_snapshots(tmp_path))
    assert list_snapshots(tmp_path / "missing") == []


def test_read_write_snapshot_round_trip(tmp_path):
    """ProducerStateManagerTest.testReadWriteSnapshot: producerId, epoch, coordinatorEpoch,
    lastTimestamp, currentTxnFirstOffset and the last batch's metadata (lastSeq, lastOffset,
    offsetDelta, timestamp) survive; an entry with no batch metadata survives too."""
    with_batch = ProducerSnapshotEntry(producer_id=1, producer_epoch=2, last_sequence=17,
                                       last_offset=1010, offset_delta=7, timestamp=1_700_000_000_123,
                                       coordinator_epoch=15, current_txn_first_offset=1003)
    without_batch = ProducerSnapshotEntry(producer_id=2, producer_epoch=5)
    write_snapshot(tmp_path, 1011, [with_batch, without_batch])
    assert read_snapshot(snapshot_path(tmp_path, 1011)) == [with_batch, without_batch]
    assert without_batch == ProducerSnapshotEntry(2, 5, -1, -1, 0, -1, -1, -1)
    assert with_batch.has_batch_metadata and not without_batch.has_batch_metadata
    assert with_batch.first_offset == 1003 and without_batch.first_offset == -1
    assert with_batch.first_sequence == 10 and without_batch.first_sequence == -1


def test_a_huge_file_is_refused_by_its_header_without_being_read(tmp_path):
    """Found by fuzzing: a snapshot whose header counts 2 producers, extended (sparse) to 3 GiB,
    was read whole to be refused: ``Log.open`` peaked at 3.2 GB. Its size is now checked
    against the header before the rest is read."""
    path = write_snapshot(tmp_path, 7, [ProducerSnapshotEntry(1, 0), ProducerSnapshotEntry(2, 0)])
    os.truncate(path, 3 << 30)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptSnapshotError, match=rf"Snapshot length {3 << 30} does not match its 2 "
                                                       rf"entries .*\({path}\)"):
            read_snapshot(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_coordinator_epoch_and_open_txn_survive_reload(tmp_path):
    """ProducerStateManagerTest.testCoordinatorFencedAfterReload /
    testRecoverFromSnapshotUnfinishedTransaction / testRecoverFromSnapshotFinishedTransaction /
    testRecoverFromSnapshotEmptyTransaction: coordinatorEpoch (1), an open transaction's first
    offset (0), no open transaction (-1) after a marker, and a marker-only producer (no batch,
    lastTimestamp = marker time) all come back as written."""
    entries = [
        ProducerSnapshotEntry(1, 0, last_sequence=1, last_offset=1, offset_delta=0,
                              timestamp=1000, coordinator_epoch=1, current_txn_first_offset=0),
        ProducerSnapshotEntry(2, 0, last_sequence=1, last_offset=1, offset_delta=0,
                              timestamp=1000, coordinator_epoch=0, current_txn_first_offset=-1),
        ProducerSnapshotEntry(3, 0, timestamp=2000, coordinator_epoch=0),
    ]
    write_snapshot(tmp_path, 3, entries)
    assert read_snapshot(snapshot_path(tmp_path, 3)) == entries


def test_sequence_wrap_first_sequence():
    """ProducerStateManagerTest.testProducerSequenceWithWrapAroundBatchRecord: a batch with
    first seq Int.MAX-10, last seq 9 over offsets 2000..2020 round-trips; the first sequence
    is rebuilt across the wrap."""
    entry = ProducerSnapshotEntry(55, 0, last_sequence=9, last_offset=2020, offset_delta=20)
    assert decode_snapshot(encode_snapshot([entry])) == [entry]
    assert entry.first_sequence == INT32_MAX - 10 and entry.first_offset == 2000


@pytest.mark.parametrize("case", ["empty", "truncated", "garbage"])
def test_load_from_bad_snapshot_file(tmp_path, case):
    """ProducerStateManagerTest.testLoadFromEmptySnapshotFile / testLoadFromTruncatedSnapshotFile /
    testLoadFromCorruptSnapshotFile: each is a CorruptSnapshotException naming the file."""
    good = encode_snapshot([BROKER_ENTRY, ProducerSnapshotEntry(9, 1, 0, 5, 0, 1)])
    data = {"empty": b"", "truncated": good[:-1], "garbage": good[:20] + b"\x00" * 5 + good[25:]}[case]
    path = snapshot_path(tmp_path, 22964)
    path.write_bytes(data)
    with pytest.raises(CorruptSnapshotError) as info:
        read_snapshot(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, KafkaLogError)


def test_deleted_suffix_is_not_a_snapshot(tmp_path):
    """ProducerStateManagerTest.testRemoveAndMarkSnapshotForDeletion: once renamed with
    ".deleted" the file is no longer listed."""
    path = write_snapshot(tmp_path, 5, [])
    path.rename(path.with_name(path.name + ".deleted"))
    assert list_snapshots(tmp_path) == []


# --- refusals ---------------------------------------------------------------------------------

def _with_crc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 2, crc32c.crc32c(bytes(data[6:])))
    return bytes(data)


@pytest.mark.parametrize("data, message", [
    (b"", "truncated: 0 bytes"),
    (b"\x00\x01\x00\x00", "truncated: 4 bytes"),
    (b"\x00\x02" + EMPTY_SNAPSHOT[2:], "unknown file version 2"),
    (b"\x00\x00" + EMPTY_SNAPSHOT[2:], "unknown file version 0"),
    (b"\xff\xff" + EMPTY_SNAPSHOT[2:], "unknown file version -1"),
    (_with_crc(bytearray(b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff")), "negative producer entry count -1"),
    (_with_crc(bytearray(EMPTY_SNAPSHOT + b"\x00")), "length 11 does not match its 0 entries"),
    (_with_crc(bytearray(BROKER_SNAPSHOT[:-1])), "length 55 does not match its 1 entries"),
    (_with_crc(bytearray(b"\x00\x01\x00\x00\x00\x00\x7f\xff\xff\xff")), "does not match its 2147483647"),
    (BROKER_SNAPSHOT[:2] + b"\x00\x00\x00\x00" + BROKER_SNAPSHOT[6:],
     "CRC is no longer valid). Stored crc: 0. Computed crc: 3829126513"),
])
def test_decode_refusals(data, message):
    """ProducerStateManager.readSnapshot refusals, each a CorruptSnapshotError with its reason
    and the file name."""
    with pytest.raises(CorruptSnapshotError, match=message.replace("(", r"\(").replace(")", r"\)")):
        decode_snapshot(data)
    with pytest.raises(CorruptSnapshotError, match="/x/00000000000000000007.snapshot"):
        decode_snapshot(data, source="/x/00000000000000000007.snapshot")


def test_entry_fields_are_range_checked():
    """Entries hold Java ints of the widths of §13; anything else is refused at construction."""
    ProducerSnapshotEntry(2**63 - 1, 2**15 - 1, INT32_MAX, 2**63 - 1, INT32_MAX, 2**63 - 1,
                          INT32_MAX, 2**63 - 1)
    ProducerSnapshotEntry(-2**63, -2**15, -2**31, -2**63, -2**31, -2**63, -2**31, -2**63)
    with pytest.raises(ValueError, match="producer_epoch 32768 does not fit in a signed 16-bit"):
        ProducerSnapshotEntry(1, 2**15)
    with pytest.raises(ValueError, match="last_sequence"):
        ProducerSnapshotEntry(1, 0, last_sequence=2**31)
    with pytest.raises(ValueError, match="producer_id"):
        ProducerSnapshotEntry(2**63, 0)
    with pytest.raises(TypeError, match="producer_id must be an int"):
        ProducerSnapshotEntry(1.0, 0)
    with pytest.raises(TypeError):
        ProducerSnapshotEntry(True, 0)


def test_snapshot_path_refuses_negative_offset(tmp_path):
    """File names are %020d of a non-negative offset (LogFileUtils.filenamePrefixFromOffset)."""
    for bad in (-1, 2**63, 1.5):
        with pytest.raises(ValueError):
            snapshot_path(tmp_path, bad)


def test_decode_accepts_any_buffer(tmp_path):
    """bytes, bytearray, memoryview (also of another item size) and mmap all decode alike."""
    import mmap
    assert decode_snapshot(bytearray(BROKER_SNAPSHOT)) == [BROKER_ENTRY]
    assert decode_snapshot(memoryview(BROKER_SNAPSHOT)) == [BROKER_ENTRY]
    assert decode_snapshot(memoryview(BROKER_SNAPSHOT[:56]).cast("H")) == [BROKER_ENTRY]
    path = tmp_path / "s"
    path.write_bytes(BROKER_SNAPSHOT)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert decode_snapshot(m) == [BROKER_ENTRY]


# --- listing ----------------------------------------------------------------------------------

def test_list_snapshots_sorted_and_filtered(tmp_path):
    """Only regular files named <digits>.snapshot, by offset: .deleted, .tmp, other suffixes,
    non-numeric names and directories are skipped."""
    for offset in (42, 5, 100, 0):
        write_snapshot(tmp_path, offset, [])
    for name in ("00000000000000000007.snapshot.deleted", "00000000000000000008.snapshot.tmp",
                 "00000000000000000009.log", "foo.snapshot", "00000000000000000010.snapshot.swap",
                 ".snapshot"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "00000000000000000011.snapshot").mkdir()
    assert [o for o, _ in list_snapshots(tmp_path)] == [0, 5, 42, 100]
    assert all(p == snapshot_path(tmp_path, o) for o, p in list_snapshots(tmp_path))
    (tmp_path / "77.snapshot").write_bytes(EMPTY_SNAPSHOT)      # Kafka parses any digits
    assert (77, tmp_path / "77.snapshot") in list_snapshots(tmp_path)


# --- crash safety -----------------------------------------------------------------------------

def test_write_is_tmp_fsync_rename_fsync_dir(tmp_path, monkeypatch):
    """write_snapshot goes through <name>.tmp, fsync, atomic rename, directory fsync."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", Path(src).name, Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_snapshot(tmp_path, 9, [BROKER_ENTRY])
    assert events == [("fsync", "file"),
                      ("replace", "00000000000000000009.snapshot.tmp",
                       "00000000000000000009.snapshot"),
                      ("fsync", "dir")]


@pytest.mark.parametrize("fail_at", ["fsync", "replace"])
def test_crash_during_write_keeps_old_snapshot(tmp_path, monkeypatch, fail_at):
    """A write dying before the rename leaves the previous file at that offset intact."""
    write_snapshot(tmp_path, 9, [BROKER_ENTRY])

    def boom(*args):
        raise OSError(errno.EIO, "simulated crash")

    monkeypatch.setattr(os, fail_at, boom)
    with pytest.raises(OSError):
        write_snapshot(tmp_path, 9, [])
    monkeypatch.undo()
    assert read_snapshot(snapshot_path(tmp_path, 9)) == [BROKER_ENTRY]
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000009.snapshot"]


def test_leftover_tmp_from_crash(tmp_path):
    """A crash (kill -9) after writing the temp file: the stray .tmp is not a snapshot, the real
    file (if any) is whole, and the next write replaces the stray."""
    (tmp_path / "00000000000000000009.snapshot.tmp").write_bytes(BROKER_SNAPSHOT[:30])
    assert list_snapshots(tmp_path) == []
    write_snapshot(tmp_path, 3, [])
    (tmp_path / "00000000000000000003.snapshot.tmp").write_bytes(b"torn")
    assert [o for o, _ in list_snapshots(tmp_path)] == [3]
    assert read_snapshot(snapshot_path(tmp_path, 3)) == []
    write_snapshot(tmp_path, 9, [BROKER_ENTRY])
    assert read_snapshot(snapshot_path(tmp_path, 9)) == [BROKER_ENTRY]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000003.snapshot", "00000000000000000003.snapshot.tmp",
        "00000000000000000009.snapshot"]


# --- properties -------------------------------------------------------------------------------

def _signed(bits: int):
    return st.integers(-(1 << bits - 1), (1 << bits - 1) - 1)


entries_strategy = st.builds(ProducerSnapshotEntry, _signed(64), _signed(16), _signed(32),
                             _signed(64), _signed(32), _signed(64), _signed(32), _signed(64))


@given(st.lists(entries_strategy, max_size=30))
def test_round_trip(entries):
    """Property: decode(encode(x)) == x, the size is 10 + 46 n, and re-encoding is identical."""
    data = encode_snapshot(entries)
    assert len(data) == HEADER_SIZE + ENTRY_SIZE * len(entries)
    assert struct.unpack_from(">hi", data, 0)[0] == PRODUCER_SNAPSHOT_VERSION
    decoded = decode_snapshot(data)
    assert decoded == entries
    assert encode_snapshot(decoded) == data


@given(st.lists(entries_strategy, min_size=0, max_size=4), st.data())
@settings(max_examples=300)
def test_any_single_byte_change_is_detected(entries, data):
    """Property: changing any one byte of a valid snapshot (version, CRC, count or entry) makes
    it a CorruptSnapshotError, never wrong entries; so does appending or cutting bytes."""
    good = encode_snapshot(entries)
    pos = data.draw(st.integers(0, len(good) - 1))
    delta = data.draw(st.integers(1, 255))
    bad = bytearray(good)
    bad[pos] = (bad[pos] + delta) % 256
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(bad))
    cut = data.draw(st.integers(0, len(good) - 1))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(good[:cut])
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(good + data.draw(st.binary(min_size=1, max_size=50)))


@given(st.binary(max_size=200))
def test_garbage_never_escapes(blob):
    """Property: arbitrary bytes decode or raise CorruptSnapshotError, nothing else."""
    try:
        decode_snapshot(blob)
    except CorruptSnapshotError:
        pass


# --- real broker files ------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _headers(log: Path) -> tuple:
    return tuple(b.header for b in iter_batches(log.read_bytes()))


def _segment_bases(directory: Path) -> set[int]:
    """Base offsets of the segments beside the snapshots, from any segment file's name (some
    fixture directories kept only the index files of old segments)."""
    return {int(p.name.split(".")[0]) for p in directory.iterdir()
            if p.suffix in (".log", ".index", ".timeindex")}


def _fixture_snapshots() -> list[Path]:
    return sorted(PINTEREST.rglob("*.snapshot"))


@needs_fixtures
def test_fixture_snapshots_decode_and_reencode_identically():
    """Every real ``.snapshot``: decodes, re-encodes to the same bytes with entries in file
    order, and is found by list_snapshots under the offset in its name."""
    files = _fixture_snapshots()
    assert len(files) == 118
    sizes = {}
    for path in files:
        data = path.read_bytes()
        entries = read_snapshot(path)
        assert encode_snapshot(entries) == data, path
        assert (int(path.name[:20]), path) in list_snapshots(path.parent)
        sizes[len(entries)] = sizes.get(len(entries), 0) + 1
    assert sizes == {0: 115, 1: 3}
    assert read_snapshot(PINTEREST / "ts-common/src/test/resources/log-files/timeindex_test/"
                         "00000000000000022964.snapshot") == [BROKER_ENTRY]


@needs_fixtures
def test_fixture_snapshot_offsets_match_segments():
    """Snapshot numbers are segment base offsets, except at most one: the largest, above every
    segment base, which is then the log end offset at shutdown (checked against the last
    segment's last batch when its .log is there). Every entry lies below its snapshot."""
    dirs = sorted({p.parent for p in _fixture_snapshots()})
    assert len(dirs) == 6
    leo_snapshots = 0
    for directory in dirs:
        bases = _segment_bases(directory)
        snapshots = list_snapshots(directory)
        offsets = [o for o, _ in snapshots]
        strays = [o for o in offsets if o not in bases]
        assert strays in ([], [max(offsets)]), (directory, strays)
        for stray in strays:
            last_base = max(bases)
            assert stray > last_base
            last_log = directory / f"{last_base:020d}.log"
            if last_log.exists():
                assert _headers(last_log)[-1].next_offset == stray, directory
                leo_snapshots += 1
        for offset, path in snapshots:
            for entry in read_snapshot(path):
                assert entry.last_offset < offset and entry.current_txn_first_offset < offset
    assert leo_snapshots == 1      # ts-segment-uploader test_topic_a-0: 00000000000000009100


@needs_fixtures
def test_fixture_snapshot_entries_match_the_log():
    """Where every segment below a snapshot is present from offset 0, the snapshot holds exactly
    the producers seen in those batches, each with its last batch: epoch, last sequence, last
    offset, offset delta and max timestamp as in that batch's header."""
    checked_entries = checked_snapshots = 0
    for path in _fixture_snapshots():
        directory, offset = path.parent, int(path.name[:20])
        below = sorted(b for b in _segment_bases(directory) if b < offset)
        logs = [directory / f"{b:020d}.log" for b in below]
        if not below or below[0] != 0 or not all(log.exists() for log in logs):
            continue
        last_batch = {}
        for log in logs:
            for header in _headers(log):
                if header.last_offset < offset and header.producer_id >= 0:
                    last_batch[header.producer_id] = header
        entries = read_snapshot(path)
        assert {e.producer_id for e in entries} == set(last_batch), path
        for entry in entries:
            header = last_batch[entry.producer_id]
            assert (entry.producer_epoch, entry.last_sequence, entry.last_offset,
                    entry.offset_delta, entry.timestamp) == (
                header.producer_epoch, header.last_sequence, header.last_offset,
                header.last_offset_delta, header.max_timestamp), path
            assert entry.coordinator_epoch == -1 and entry.current_txn_first_offset == -1
            assert not header.is_transactional
            checked_entries += 1
        checked_snapshots += 1
    assert checked_entries == 3 and checked_snapshots == 116   # all but test_topic_b-0's two

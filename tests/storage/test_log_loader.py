"""Log loading and recovery (kafka_test_checklist.md §6): Kafka's LogLoaderTest and the
loading half of UnifiedLogTest, against the real Log and LogSegment on real files.

How Kafka's notions translate here:

* "clean shutdown" is per partition: ``Log.close()`` trims the active segment's index files and
  writes the recovery-point checkpoint at the log end offset. A writer killed without closing
  leaves the active segment's ``.index``/``.timeindex`` at their preallocated length
  (``LogSegment.indexes_preallocated``) and the checkpoints as the last close wrote them.
  ``crash_copy`` takes that state from a live writer (the data directory copied while the Log is
  open); ``kill_writer_state`` puts a closed partition back into it and sets the recovery-point
  checkpoint, which is Kafka's ``createLog(recoveryPoint = X, lastShutdownClean = false)``.
* "segment recovered" is observed through its effects: a recovered segment gets its offset
  index rebuilt (tests plant a 0-byte ``.index`` that only recovery would refill) and its
  invalid tail truncated; a segment that is not recovered keeps what it had.
* Mockito call verifications (segments read, truncateAndReload arguments) become what those
  calls leave behind: the snapshot files on disk, the producer state, the map end offset.

Not applicable here:

- [LogLoaderTest.testProducerSnapshotsRecoveryAfterUncleanShutdownV1/testSkipTruncateAndReloadIfOldMessageFormat*]:
  kafkalog has no message.format.version setting and appends only v2 batches, so there is no
  "old format" mode in which producer state loading is skipped.
- [LogLoaderTest.testSkipLoadingIfEmptyProducerStateBeforeTruncation] (only its Mockito part):
  the exact calls and call counts on a mocked ProducerStateManager; their effects (map end
  offset, stray snapshots removed, the snapshot after truncation) are tested below.
- [LogLoaderTest.testOverCompactedLogRecoveryMultiRecordV1]: compressed v1 appends (first
  offset unknown) cannot be written: appends are v2 only.
- [LogLoaderTest.testLeaderEpochCacheClearedAfterStaticMessageFormatDowngrade]: no message
  format downgrade (no message.format.version, no v1 appends).
- [LogLoaderTest.testLogStartOffsetWhenRemoteStorageIsEnabled] (only the remote case): no
  tiered storage; the local rule (max of checkpoint and first segment base) is tested below.

Differences from Kafka found while translating:

- [LogLoaderTest.testCleanShutdownFile]: after a clean close with the recovery-point checkpoint
  reset to 0, Kafka skips recovery altogether (the broker-wide clean-shutdown file wins);
  kafkalog has no such file and re-validates every segment past a stale recovery point even
  when the indexes are trimmed (tests/storage/test_log.py relies on this: deleting the
  checkpoint forces recovery). Deliberate: the recovery point is the only trustworthy sign of a
  clean close at the partition level; both sides are pinned by
  test_clean_shutdown_trusts_the_recovery_point_not_a_marker.
- [LogLoaderTest.testLogRecoveryIsCalledUponBrokerCrash]: a *clean* partition whose load fails
  before the end keeps its trimmed indexes, so its next load is clean again (Kafka: unclean);
  nothing was recovered or rewritten by such a load. What matters, a crashed partition staying
  unclean through a failed load, is tested.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import time
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.errors import UnsafeFileError
from storage_core.checkpoint import (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                                      EpochEntry, OffsetCheckpointFile, log_delete_dir_name,
                                      parse_topic_partition_dir)
from storage_core.config import LogConfig
from storage_core.format import legacy
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.index import AbortedTxn, OffsetIndex
from storage_core.log import Log
from storage_core.producer import (ProducerSnapshotEntry, list_snapshots, read_snapshot,
                                            snapshot_path, write_snapshot)

RP = RECOVERY_POINT_CHECKPOINT
LSO = LOG_START_OFFSET_CHECKPOINT
INT_MAX = 2**31 - 1
TS0 = 1_700_000_000_000
# producers idle for producer.id.expiration.ms (by their batches' timestamps) are dropped at load
NOW = int(time.time() * 1000)
GZIP = 1


# ------------------------------------------------------------------------------------ helpers

def name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def set_checkpoint(part: Path, which: str, value: int | None) -> None:
    """Set (None: remove) this partition's entry in the data directory's checkpoint file."""
    cp = OffsetCheckpointFile(part.parent / which)
    try:
        entries = dict(cp.read())
    except FileNotFoundError:
        entries = {}
    key = tuple(parse_topic_partition_dir(part.name))
    entries.pop(key, None)
    if value is not None:
        entries[key] = value
    cp.write(entries)


def checkpoint(part: Path, which: str) -> int | None:
    entries = OffsetCheckpointFile(part.parent / which).read()
    return entries.get(parse_topic_partition_dir(part.name))


def kill_writer_state(part: Path, cfg: LogConfig, recovery_point: int | None) -> None:
    """Turn a cleanly closed partition into what a writer killed after writing it leaves: the
    active segment's offset and time indexes at their preallocated length (only close trims
    them) and the recovery-point checkpoint at ``recovery_point`` (None: no entry)."""
    active = max(int(p.name[:20]) for p in part.glob("*.log"))
    full = cfg.segment_index_bytes
    for suffix, entry_size in ((".index", 8), (".timeindex", 12)):
        path = part / name(active, suffix)
        with open(path, "ab"):
            pass
        os.truncate(path, full - full % entry_size)
    set_checkpoint(part, RP, recovery_point)


def crash_copy(log: Log, dest: Path) -> Path:
    """The data directory (partition + checkpoints) as it is now, with ``log`` still open: what
    a writer killed at this point leaves on disk. Returns the copied partition directory."""
    shutil.copytree(log.dir.parent, dest)
    return dest / log.dir.name


def snapshots(part: Path) -> list[int]:
    return [o for o, _ in list_snapshots(part)]


def files(part: Path) -> list[str]:
    return sorted(p.name for p in part.iterdir())


def one(value: bytes, ts: int, key: bytes | None = None, **kw) -> bytes:
    return build_batch([RecordInput(value, key, ts)], **kw)


def idempotent(pid: int, seq: int, n: int = 1, *, transactional: bool = False,
               ts: int = NOW) -> bytes:
    return build_batch([RecordInput(b"%d-%d" % (pid, seq + i), None, ts) for i in range(n)],
                       producer_id=pid, producer_epoch=0, base_sequence=seq,
                       transactional=transactional)


def all_records(log: Log) -> pa.Table:
    return log.read(log.log_start_offset, max_bytes=1 << 30)


def aborted_txns(log: Log) -> list[AbortedTxn]:
    return [t for s in log.segments for t in s.txn_index.all_aborted_txns()]


def empty_indexes(part: Path, bases) -> None:
    """Plant 0-byte offset indexes: only a recovery of the segment fills them again."""
    for b in bases:
        os.truncate(part / name(b, ".index"), 0)


def flip_byte_in_batch(part: Path, base: int, batch_no: int) -> None:
    """Flip a CRC-covered byte (a record's value) of the ``batch_no``-th batch of a segment."""
    path = part / name(base, ".log")
    data = bytearray(path.read_bytes())
    pos = 0
    for _ in range(batch_no):
        pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
    size = struct.unpack_from(">i", data, pos + 8)[0] + 12
    data[pos + size - 2] ^= 0xFF
    path.write_bytes(bytes(data))


# ------------------------------------------------------------------- clean vs unclean shutdown

def test_clean_marker_decides_whether_the_log_is_recovered(tmp_path: Path) -> None:
    """[LogLoaderTest.testLogRecoveryIsCalledUponBrokerCrash] The per-partition clean-shutdown
    marker (trimmed active indexes) is present after close: the next load validates nothing,
    so a damaged batch below the recovery point stays. Loading consumes the marker (the active
    indexes are preallocated again once Log.open returns), so a writer that dies after loading,
    without closing, leaves no marker; a load of that partition that fails does not bring the
    marker back; the next load recovers from the recovery point and truncates at the damaged
    batch."""
    cfg = LogConfig(index_interval_bytes=1, segment_index_bytes=1200)
    part = tmp_path / "live" / "t-0"
    with Log.open(part, cfg) as log:
        for i in range(10):
            log.append_raw(one(b"v%d" % i, TS0 + i))
        assert log.active_segment.indexes_preallocated()          # open: no marker
    index = part / name(0, ".index")
    assert index.stat().st_size == 9 * 8 < 1200                 # closed: trimmed = the marker
    assert checkpoint(part, RP) == 10
    log_bytes = (part / name(0, ".log")).read_bytes()

    # clean: a damaged batch (offset 3) below the recovery point is not looked at
    clean = tmp_path / "clean"
    shutil.copytree(part.parent, clean)
    flip_byte_in_batch(clean / "t-0", 0, 3)
    with Log.open(clean / "t-0", cfg) as log:
        assert log.log_end_offset == 10
        assert log.segments[0].size == len(log_bytes)
        # the marker is consumed by loading: the active indexes are preallocated again
        assert log.active_segment.indexes_preallocated()

    # the writer loads the same intact partition, then dies before close
    with Log.open(part, cfg) as log:
        crashed = crash_copy(log, tmp_path / "crashed")
    assert (crashed / name(0, ".index")).stat().st_size == 1200 - 1200 % 8
    assert checkpoint(crashed, RP) == 10
    flip_byte_in_batch(crashed, 0, 3)
    # a load that fails (here: a directory where segment 20's .log would be, refused as not a
    # regular file) restores no marker
    (crashed / name(20, ".log")).mkdir()
    with pytest.raises(UnsafeFileError, match="is a directory"):
        Log.open(crashed, cfg)
    (crashed / name(20, ".log")).rmdir()
    assert (crashed / name(0, ".index")).stat().st_size == 1200 - 1200 % 8
    with Log.open(crashed, cfg) as log:
        assert log.log_end_offset == 3                          # recovered: truncated there
        assert all_records(log).column("value").to_pylist() == [b"v0", b"v1", b"v2"]
        assert log.recovery_point == 3
    # after that clean close the partition loads cleanly again
    assert (crashed / name(0, ".index")).stat().st_size < 1200 - 1200 % 8
    assert checkpoint(crashed, RP) == 3


def test_clean_shutdown_restores_the_log_end_offset(tmp_path: Path) -> None:
    """[LogLoaderTest.testCleanShutdownFile] After a clean close the reopened log has the log end
    offset the segments hold; with the recovery point at the log end offset nothing is
    recovered (a planted shortened index is not rebuilt); with the recovery-point checkpoint
    reset to 0 the log end offset and every record are still restored (kafkalog re-validates
    the segments past that stale recovery point: see the module docstring)."""
    cfg = LogConfig(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024)
    part = tmp_path / "t-0"
    with Log.open(part, cfg) as log:
        for i in range(100):
            log.append_raw(one(b"test", TS0 + i))
        bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3
    # first segment's index cut down to its first entry: a recovery would rebuild all of them
    os.truncate(part / name(0, ".index"), 8)
    with Log.open(part, cfg) as log:
        assert log.log_end_offset == 100
        assert log.recovery_point == 100
        assert log.segments[0].offset_index.entries == 1      # not recovered
        assert [s.base_offset for s in log.segments] == bases
    set_checkpoint(part, RP, 0)
    with Log.open(part, cfg) as log:
        assert log.log_end_offset == 100
        assert [s.base_offset for s in log.segments] == bases
        assert all_records(log).column("offset").to_pylist() == list(range(100))


def test_clean_shutdown_trusts_the_recovery_point_not_a_marker(tmp_path: Path) -> None:
    """[LogLoaderTest.testCleanShutdownFile] Kafka skips recovery after a clean shutdown (its
    data-directory ``.kafka_cleanshutdown`` file) whatever the recovery point. A kafkalog
    ``Log`` has no such file of its own: a clean close moves the recovery point to the log end
    offset, which skips recovery just as well (segment 0's shortened index is not rebuilt);
    if that checkpoint is lost or reset to 0, kafkalog re-validates the segments rather than
    trust index files whose length is the only sign of a clean close (segment 0's index comes
    back whole). A deliberate divergence, on the side of the data."""
    cfg = LogConfig(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024)
    part = tmp_path / "t-0"
    with Log.open(part, cfg) as log:
        for i in range(100):
            log.append_raw(one(b"test", TS0 + i))
        full_entries = log.segments[0].offset_index.entries
    assert full_entries > 1
    os.truncate(part / name(0, ".index"), 8)
    with Log.open(part, cfg) as log:                  # clean close: recovery point = LEO
        assert log.log_end_offset == 100
        assert log.segments[0].offset_index.entries == 1
    set_checkpoint(part, RP, 0)
    with Log.open(part, cfg) as log:
        assert log.log_end_offset == 100
        assert log.segments[0].offset_index.entries == full_entries


# ------------------------------------------------------------------ producer state and snapshots

def _plant_producer(part: Path, offset: int, pid: int = 777) -> None:
    """Add a producer that exists in no batch of the log to the snapshot at ``offset``: it
    reaches the loaded state only through a chain of snapshots starting there."""
    path = snapshot_path(part, offset)
    entries = read_snapshot(path)
    entries.append(ProducerSnapshotEntry(pid, 0, last_sequence=0, last_offset=offset - 1,
                                         timestamp=NOW))
    write_snapshot(part, offset, entries)


def test_unclean_recovery_from_the_recovery_point_and_snapshots(tmp_path: Path) -> None:
    """[LogLoaderTest.testProducerSnapshotsRecoveryAfterUncleanShutdownCurrentMessageFormat]
    101 one-record idempotent batches in 640-byte segments. Unclean load with the recovery
    point in the 4th segment from the end: exactly the segments from that one on are recovered.
    (1) snapshots only for the last 2 segments (below the recovery point there is none): the
    producer state is rebuilt from the log (a producer planted in a retained later snapshot is
    gone); (2) snapshots at and after the recovery-point segment (a writer killed after that
    load): the state continues from the snapshot at the recovery-point segment's base (a
    producer planted there survives, so no earlier segment was re-read). Both times the
    snapshots end up at the last 4 segment bases plus the log end offset."""
    cfg = LogConfig(segment_bytes=640, index_interval_bytes=1)
    root = tmp_path / "data"
    part = root / "t-0"
    with Log.open(part, cfg) as log:
        assert log.producer_state.oldest_snapshot_offset is None
        for i in range(101):
            log.append_raw(idempotent(1, i))
        bases = [s.base_offset for s in log.segments]
        leo = log.log_end_offset
    assert len(bases) >= 5 and leo == 101
    rp_segment = bases[-4]
    expected_snapshots = bases[-4:] + [leo]
    recovered = [b for b in bases if b >= rp_segment]

    # (1) retain snapshots for the last 2 segments only; recovery point = base of bases[-4]
    for o, p in list_snapshots(part):
        if o < bases[-2]:
            p.unlink()
    assert snapshots(part) == bases[-2:] + [leo]
    _plant_producer(part, bases[-2])
    empty_indexes(part, bases[:-1])
    kill_writer_state(part, cfg, rp_segment)
    log = Log.open(part, cfg)
    try:
        assert [s.base_offset for s in log.segments if s.offset_index.entries > 0] == recovered
        assert snapshots(part) == expected_snapshots
        assert sorted(log.producer_state.active_producers) == [1]
        assert log.producer_state.last_entry(1).last_seq == 100
        assert log.log_end_offset == 101
        # (2) the writer dies here: snapshots at every base from the recovery-point segment on
        crashed = crash_copy(log, tmp_path / "crashed")
    finally:
        log.close()
    assert snapshots(crashed) == expected_snapshots
    _plant_producer(crashed, rp_segment)
    empty_indexes(crashed, bases[:-1])
    set_checkpoint(crashed, RP, rp_segment + 1)
    with Log.open(crashed, cfg) as log:
        assert [s.base_offset for s in log.segments if s.offset_index.entries > 0] == recovered
        assert snapshots(crashed) == expected_snapshots
        assert sorted(log.producer_state.active_producers) == [1, 777]
        assert log.producer_state.last_entry(1).last_seq == 100


def test_empty_log_load_then_truncation_snapshots(tmp_path: Path) -> None:
    """[LogLoaderTest.testSkipLoadingIfEmptyProducerStateBeforeTruncation] Loading an empty log:
    map end offset 0, stray snapshots removed, no snapshot left (truncateAndReload(0, 0)).
    Appends move the map end offset to 1 then 2; truncate_to(1) reloads to [0, 1) and writes
    the snapshot at 1."""
    part = tmp_path / "t-0"
    part.mkdir()
    write_snapshot(part, 3, [])
    with Log.open(part) as log:
        assert log.producer_state.map_end_offset == 0
        assert snapshots(part) == [] and log.producer_state.snapshot_offsets == []
        log.append_raw(one(b"a", TS0))
        assert log.producer_state.map_end_offset == 1
        log.append_raw(one(b"b", TS0))
        assert log.producer_state.map_end_offset == 2
        assert snapshots(part) == []
        log.truncate_to(1)
        assert log.log_end_offset == 1
        assert log.producer_state.map_end_offset == 1
        assert snapshots(part) == [1] and log.producer_state.snapshot_offsets == [1]


def test_recovery_accepts_a_coordinator_epoch_going_backwards(tmp_path: Path) -> None:
    """[LogLoaderTest.testRecoverAfterNonMonotonicCoordinatorEpochWrite] (KAFKA-9144) ABORT with
    coordinator epoch 5, the producer expires, ABORT with coordinator epoch 4. Recovery from
    offset 0 replays both markers without fencing and keeps the latest write: the producer's
    last timestamp is the second marker's."""
    part = tmp_path / "t-0"
    clock = [TS0]
    cfg = LogConfig(producer_id_expiration_ms=60 * 60 * 1000)
    with Log.open(part, cfg, clock=lambda: clock[0]) as log:
        first = clock[0]
        log.append_end_txn_marker(1, 0, "ABORT", 5, timestamp=first)
        assert log.producer_state.last_entry(1).last_timestamp == first
        clock[0] += 60 * 60 * 1000
        log.producer_state.remove_expired_producers(clock[0])
        assert log.producer_state.last_entry(1) is None
        second = clock[0]
        log.append_end_txn_marker(1, 0, "ABORT", 4, timestamp=second)
        assert log.log_end_offset == 2
    for p in part.glob("*.snapshot"):
        p.unlink()
    kill_writer_state(part, cfg, 0)
    with Log.open(part, cfg, clock=lambda: clock[0]) as log:
        entry = log.producer_state.last_entry(1)
        assert entry is not None
        assert entry.last_timestamp == second
        assert entry.coordinator_epoch == 4


def test_producers_after_delete_records_mid_segment(tmp_path: Path) -> None:
    """[LogLoaderTest.testLoadProducersAfterDeleteRecordsMidSegment/testLoadProducersAfterDeleteRecordsOnSegment]
    (mid segment) Two producers in one segment; moving the log start offset to 1 keeps both; an
    unclean reload (recovery point 0, log start 1) rebuilds the same state."""
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.append_raw(idempotent(1, 0))
        log.append_raw(idempotent(2, 0))
        assert sorted(log.producer_state.active_producers) == [1, 2]
        assert log.delete_records_before(1) == 1
        assert len(log.segments) == 1
        assert sorted(log.producer_state.active_producers) == [1, 2]
        assert log.producer_state.last_entry(2).last_seq == 0
    assert checkpoint(part, LSO) == 1
    kill_writer_state(part, LogConfig(), 0)
    with Log.open(part) as log:
        assert log.log_start_offset == 1
        assert sorted(log.producer_state.active_producers) == [1, 2]
        assert log.producer_state.last_entry(1).last_seq == 0
        assert log.producer_state.last_entry(2).last_seq == 0


def test_producers_after_delete_records_on_segment(tmp_path: Path) -> None:
    """[LogLoaderTest.testLoadProducersAfterDeleteRecordsMidSegment/testLoadProducersAfterDeleteRecordsOnSegment]
    (on segment) Producer 1 in segment 0, producer 2 in segment 1; moving the log start offset
    to 1 deletes segment 0 and keeps both producers in memory; the unclean reload rebuilds the
    state from the remaining segment only: producer 1 is gone, producer 2 keeps last sequence
    0."""
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.append_raw(idempotent(1, 0))
        log.roll()
        log.append_raw(idempotent(2, 0))
        assert len(log.segments) == 2
        assert log.delete_records_before(1) == 1
        assert [s.base_offset for s in log.segments] == [1]
        assert sorted(log.producer_state.active_producers) == [1, 2]
        assert log.producer_state.last_entry(2).last_seq == 0
    # Kafka's createLog(logStartOffset = 1): close leaves no entry (the log start is the first
    # segment's base), the test loads with the checkpoint at 1
    assert checkpoint(part, LSO) is None
    set_checkpoint(part, LSO, 1)
    kill_writer_state(part, LogConfig(), 0)
    with Log.open(part) as log:
        assert log.log_start_offset == 1
        assert sorted(log.producer_state.active_producers) == [2]
        assert log.producer_state.last_entry(2).last_seq == 0


def test_stray_snapshot_inside_the_log_is_removed_largest_kept(tmp_path: Path) -> None:
    """[LogLoaderTest.testLoadingLogKeepsLargestStrayProducerStateSnapshot] Segments [0], [1],
    [2, 3]: close leaves snapshots 1, 2 (rolls) and 4 (log end offset). A stray snapshot at 3
    is removed by the unclean load; 4 is kept."""
    cfg = LogConfig(segment_bytes=2048 * 5)
    part = tmp_path / "t-0"
    with Log.open(part, cfg) as log:
        log.append_raw(idempotent(1, 0))
        log.roll()
        log.append_raw(idempotent(1, 1))
        log.roll()
        log.append_raw(idempotent(1, 2, transactional=True))
        log.append_raw(idempotent(1, 3, transactional=True))
        assert len(log.segments) == 3
    assert snapshots(part) == [1, 2, 4]
    (part / name(3, ".snapshot")).touch()
    assert snapshots(part) == [1, 2, 3, 4]
    kill_writer_state(part, cfg, 0)
    with Log.open(part, cfg) as log:
        assert snapshots(part) == [1, 2, 4]
        assert log.producer_state.snapshot_offsets == [1, 2, 4]
        assert log.producer_state.last_entry(1).last_seq == 3


# ------------------------------------------------------------------------------- indexes

def test_log_recovers_to_correct_offset(tmp_path: Path) -> None:
    """[LogLoaderTest.testLogRecoversToCorrectOffset] 100 records of 100 bytes, 700-byte
    segments, index interval 300. Reopened with the recovery point at the log end offset, then
    unclean with recovery point 10: recovery point, log end offset, the active offset index's
    last offset and entry count, and the active time index's last entry (largest timestamp,
    LEO - 1, the entry close adds) and entry count are as before; the recovery point stays 10
    until a flush moves it to the log end offset."""
    cfg = LogConfig(segment_bytes=700, index_interval_bytes=300, segment_index_bytes=4096)
    part = tmp_path / "t-0"
    with Log.open(part, cfg) as log:
        for i in range(100):
            log.append(pa.table({"value": [bytes([i]) * 100],
                                 "timestamp": pa.array([TS0 + i * 10], pa.int64())}))
        assert log.log_end_offset == 100
        active = log.active_segment
        last_index_offset = active.offset_index.last_offset
        index_entries = active.offset_index.entries
        largest_ts = active.largest_timestamp
        time_entries = active.time_index.entries + (
            0 if active.time_index.last_entry.offset == 99 else 1)
    assert largest_ts == TS0 + 990
    assert index_entries > 0

    def verify(log: Log, recovery_point: int) -> None:
        active = log.active_segment
        assert log.recovery_point == recovery_point
        assert log.log_end_offset == 100
        assert active.offset_index.last_offset == last_index_offset
        assert active.offset_index.entries == index_entries
        assert active.time_index.last_entry.timestamp == largest_ts
        assert active.time_index.last_entry.offset == 99
        assert active.time_index.entries == time_entries

    kill_writer_state(part, cfg, 100)
    with Log.open(part, cfg) as log:
        verify(log, 100)
    kill_writer_state(part, cfg, 10)
    with Log.open(part, cfg) as log:
        verify(log, 10)
        log.flush()
        verify(log, 100)


@pytest.fixture(scope="module")
def two_hundred(tmp_path_factory) -> tuple[Path, LogConfig]:
    """200 one-record batches (10-byte values, timestamps TS0 + 10 i) in 200-byte segments,
    index interval 1: a closed partition tests copy and damage."""
    cfg = LogConfig(segment_bytes=200, index_interval_bytes=1)
    part = tmp_path_factory.mktemp("two_hundred") / "t-0"
    rnd = random.Random(200)
    with Log.open(part, cfg) as log:
        for i in range(200):
            log.append_raw(one(rnd.randbytes(10), TS0 + i * 10))
    return part, cfg


def _copy(source: Path, dest_root: Path) -> Path:
    shutil.copytree(source.parent, dest_root)
    return dest_root / source.name


def _check_every_offset(log: Log) -> None:
    assert log.log_end_offset == 200
    for i in range(200):
        assert log.read(i, max_bytes=100).column("offset")[0].as_py() == i
        found = log.fetch_offset_by_timestamp(TS0 + i * 10)
        assert found.offset == (log.segments[0].base_offset if i == 0 else i)


def test_deleted_indexes_are_rebuilt(two_hundred, tmp_path: Path) -> None:
    """[LogLoaderTest.testIndexRebuild] Every .index and .timeindex deleted after close: the
    unclean load rebuilds them (entries > 0); every offset is readable and
    fetch_offset_by_timestamp(t_i) finds offset i."""
    part, cfg = two_hundred
    part = _copy(part, tmp_path / "data")
    for p in [*part.glob("*.index"), *part.glob("*.timeindex")]:
        p.unlink()
    set_checkpoint(part, RP, 0)
    with Log.open(part, cfg) as log:
        assert len(log.segments) > 50
        assert log.segments[0].offset_index.entries > 0
        assert log.segments[0].time_index.entries > 0
        assert all(s.offset_index.entries > 0 for s in log.segments)
        _check_every_offset(log)


def test_garbage_indexes_are_rebuilt(two_hundred, tmp_path: Path) -> None:
    """[LogLoaderTest.testCorruptIndexRebuild] Every .index and .timeindex overwritten with two
    spaces; the unclean load (recovery point 0) rebuilds them: all 200 offsets readable and
    found by timestamp."""
    part, cfg = two_hundred
    part = _copy(part, tmp_path / "data")
    for p in [*part.glob("*.index"), *part.glob("*.timeindex")]:
        p.write_bytes(b"  ")
    set_checkpoint(part, RP, 0)
    with Log.open(part, cfg) as log:
        assert all(s.offset_index.entries > 0 and s.time_index.entries > 0 for s in log.segments)
        _check_every_offset(log)
    for p in part.glob("*.index"):
        assert p.stat().st_size % 8 == 0 and p.stat().st_size > 0


def _v0_partition(part: Path) -> None:
    """Three segments of two v0 messages each (no timestamps), as written by a broker with
    message.format.version 0.9.0, with offset indexes and no time indexes."""
    part.mkdir(parents=True)
    rnd = random.Random(0)
    for base in (0, 2, 4):
        data = b"".join(legacy.build_message(o, rnd.randbytes(10), magic=0)
                        for o in (base, base + 1))
        (part / name(base, ".log")).write_bytes(data)
        (part / name(base, ".index")).write_bytes(b"")


def test_time_index_of_old_messages_rebuilt_empty(tmp_path: Path) -> None:
    """[LogLoaderTest.testRebuildTimeIndexForOldMessages] Segments of v0 messages (no
    timestamps) whose time indexes were deleted, loaded with the recovery point past the log
    end offset: the time index of every segment but the active one has 0 entries, the
    records are all readable, and after close the files are 0 bytes."""
    part = tmp_path / "t-0"
    _v0_partition(part)
    cfg = LogConfig(segment_bytes=200, index_interval_bytes=1)
    set_checkpoint(part, RP, 7)
    with Log.open(part, cfg) as log:
        assert log.log_end_offset == 6
        for seg in log.segments[:-1]:
            assert seg.time_index.entries == 0
        assert all_records(log).column("offset").to_pylist() == list(range(6))
    for base in (0, 2):
        assert (part / name(base, ".timeindex")).stat().st_size == 0


def test_time_index_of_old_messages_is_an_empty_file_while_open(tmp_path: Path) -> None:
    """[LogLoaderTest.testRebuildTimeIndexForOldMessages] The rebuilt (missing) time index of
    every segment but the active one is a 0-byte file right after loading, as Kafka asserts."""
    part = tmp_path / "t-0"
    _v0_partition(part)
    cfg = LogConfig(segment_bytes=200, index_interval_bytes=1)
    set_checkpoint(part, RP, 7)
    with Log.open(part, cfg) as log:
        for seg in log.segments[:-1]:
            assert seg.time_index.entries == 0
            assert seg.time_index.path.stat().st_size == 0, seg.time_index.path.name


def test_missing_time_index_after_a_crash_is_not_a_full_garbage_index(tmp_path: Path) -> None:
    """[LogLoaderTest.testRebuildTimeIndexForOldMessages] The same deleted time indexes (v2
    segments), the writer killed while the log is open: the next load still sees empty time
    indexes for the segments it does not recover."""
    cfg = LogConfig(segment_bytes=200, index_interval_bytes=1)
    part = tmp_path / "live" / "t-0"
    with Log.open(part, cfg) as log:
        for i in range(6):
            log.append_raw(one(b"x", TS0 + i))
            if i % 2:
                log.roll()
    for p in part.glob("*.timeindex"):
        p.unlink()
    with Log.open(part, cfg) as log:
        crashed = crash_copy(log, tmp_path / "crashed")
    with Log.open(crashed, cfg) as log:
        assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
        assert log.offsets_for_times(TS0 + 3) == 3
        for seg in log.segments[:-1]:
            assert seg.time_index.entries <= 1, (seg.base_offset, seg.time_index.entries)


def test_orphan_index_files_are_deleted(tmp_path: Path) -> None:
    """[LogLoaderTest.testBogusIndexSegmentsAreRemoved] Empty .index/.timeindex/.txnindex files
    at offset 5 with no 5.log are deleted on load; the first segment's indexes are created
    (preallocated, > 0 bytes) and the log takes appends."""
    part = tmp_path / "t-0"
    part.mkdir()
    for kind in (".index", ".timeindex", ".txnindex"):
        (part / name(5, kind)).touch()
    record = one(b"test", TS0)
    cfg = LogConfig(segment_bytes=len(record) * 5, segment_index_bytes=1000,
                    index_interval_bytes=1)
    with Log.open(part, cfg) as log:
        assert (part / name(0, ".index")).stat().st_size == 1000
        assert (part / name(0, ".timeindex")).stat().st_size == 996
        for kind in (".index", ".timeindex", ".txnindex"):
            assert not (part / name(5, kind)).exists(), kind
        for _ in range(10):
            log.append_raw(record)
        assert log.log_end_offset == 10
        assert [s.base_offset for s in log.segments] == [0, 5]


def test_reopen_then_truncate(tmp_path: Path) -> None:
    """[LogLoaderTest.testReopenThenTruncate] 100 records over several segments, unclean reopen,
    truncate_to(3): one segment left, log end offset 3."""
    record = one(b"test", TS0)
    cfg = LogConfig(segment_bytes=len(record) * 5, segment_index_bytes=1000,
                    index_interval_bytes=10000)
    part = tmp_path / "t-0"
    with Log.open(part, cfg) as log:
        for _ in range(100):
            log.append_raw(record)
        assert len(log.segments) == 20
    kill_writer_state(part, cfg, 0)
    with Log.open(part, cfg) as log:
        log.truncate_to(3)
        assert len(log.segments) == 1
        assert log.log_end_offset == 3
    assert sorted(p.name for p in part.glob("*.log")) == [name(0, ".log")]


def test_deleted_suffix_files_are_removed_on_open(tmp_path: Path) -> None:
    """[LogLoaderTest.testOpenDeletesObsoleteFiles] Every segment but the active one deleted
    (delete_records_before the log end offset: kafkalog's retention equivalent), their files
    left behind as ``.deleted`` (an asynchronous deletion a crash interrupted): the unclean
    reopen removes every ``.deleted`` file and one segment remains."""
    record = one(b"test", TS0 - 1000)
    cfg = LogConfig(segment_bytes=len(record) * 5, segment_index_bytes=1000)
    part = tmp_path / "t-0"
    keep = tmp_path / "old"
    with Log.open(part, cfg) as log:
        for _ in range(100):
            log.append_raw(record)
        log.roll()
        assert len(log.segments) == 21
        shutil.copytree(part, keep)
        log.delete_records_before(log.log_end_offset)
        assert len(log.segments) == 1
    for p in keep.iterdir():
        if p.suffix in (".log", ".index", ".timeindex", ".snapshot") and \
                int(p.name[:20]) < 100:
            shutil.copy(p, part / (p.name + ".deleted"))
    assert len(list(part.glob("*.deleted"))) >= 60
    kill_writer_state(part, cfg, 0)
    with Log.open(part, cfg) as log:
        assert len(log.segments) == 1
        assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert not list(part.glob("*.deleted"))
    assert sorted(p.name for p in part.glob("*.log")) == [name(100, ".log")]


@pytest.mark.parametrize("seed", range(10))
def test_garbage_appended_to_active_log_and_index_is_truncated(tmp_path: Path, seed: int) -> None:
    """[LogLoaderTest.testCorruptLog] 50-99 records in 1000-byte segments, closed; 1-1024 random
    bytes appended to the active segment's .log and to its .index; unclean reopen with
    recovery point 50: the log end offset and every record's offset, key, value and timestamp
    are as before the damage."""
    rnd = random.Random(seed)
    cfg = LogConfig(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024)
    part = tmp_path / "t-0"
    n = 50 + rnd.randrange(50)
    with Log.open(part, cfg) as log:
        for i in range(n):
            log.append_raw(one(b"value-%d" % i, TS0 + i, key=b"key-%d" % i))
        before = all_records(log)
        active = log.active_segment.base_offset
    for suffix in (".index", ".log"):
        with open(part / name(active, suffix), "ab") as f:
            f.write(rnd.randbytes(rnd.randrange(1024) + 1))
    set_checkpoint(part, RP, 50)
    with Log.open(part, cfg) as log:
        assert log.log_end_offset == n
        after = all_records(log)
    for col in ("offset", "key", "value", "timestamp"):
        assert after.column(col).to_pylist() == before.column(col).to_pylist(), col


# ------------------------------------------------------------------------- offset overflow

@pytest.mark.parametrize("multi", [False, True], ids=["one-record", "multi-record-gzip"])
def test_follower_append_beyond_int_range_rolls(tmp_path: Path, multi: bool) -> None:
    """[LogLoaderTest.testOverCompactedLogRecovery/testOverCompactedLogRecoveryMultiRecord]
    A follower append (offsets kept) at Int.MAX + 2 to a segment based at 0 rolls a segment
    based at the batch's base offset, with a producer snapshot there; later batches within the
    32-bit range stay in it; both offset indexes end at an offset >= their base, and the
    reopened log reads every record."""
    cfg = LogConfig(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024)
    part = tmp_path / "t-0"
    big = INT_MAX + 2

    def batch(base: int, first_key: int) -> bytes:
        n = 2 if multi else 1
        recs = [RecordInput(b"v%d" % (first_key + i), b"k%d" % (first_key + i), TS0)
                for i in range(n)]
        return build_batch(recs, base_offset=base, compression=GZIP if multi and base else 0)

    step = 2 if multi else 1
    with Log.open(part, cfg) as log:
        log.append_raw(one(b"v1", TS0, key=b"k1"), assign_offsets=False)
        assert log.active_segment.base_offset == 0
        log.append_raw(batch(big, 3), assign_offsets=False)
        assert log.active_segment.base_offset == big
        assert (part / name(big, ".snapshot")).exists()
        log.append_raw(batch(big + step, 3 + step), assign_offsets=False)
        assert log.active_segment.base_offset == big
        log.append_raw(batch(big + 2 * step, 3 + 2 * step), assign_offsets=False)
        assert log.active_segment.base_offset == big
        assert [s.base_offset for s in log.segments] == [0, big]
    indexes = sorted(part.glob("*.index"))
    assert [p.name for p in indexes] == [name(0, ".index"), name(big, ".index")]
    for p in indexes:
        base = int(p.name[:20])
        idx = OffsetIndex(p, base, writable=False)
        try:
            assert idx.last_offset >= base >= 0
        finally:
            idx.close()
    kill_writer_state(part, cfg, 0)
    with Log.open(part, cfg) as log:
        keys = log.read(0, max_bytes=1 << 20).column("key").to_pylist()
        assert keys == [b"k1"] + [b"k%d" % k for k in range(3, 3 + 3 * step)]
        assert log.log_end_offset == big + 3 * step


OVERFLOW_BASES = [0, 1, 2, INT_MAX + 5, INT_MAX + 6, 2 * INT_MAX + 20]


def _overflowed_partition(part: Path, bases=OVERFLOW_BASES) -> None:
    """One segment file based at 0 holding one-record batches at ``bases`` (as a broker before
    0.11 could leave it), no indexes, no checkpoints: the next load recovers it."""
    part.mkdir(parents=True)
    (part / name(0, ".log")).write_bytes(b"".join(
        one(b"v%d" % i, TS0 + i, key=b"k%d" % i, base_offset=b) for i, b in enumerate(bases)))


def test_recovery_splits_a_segment_with_offset_overflow(tmp_path: Path) -> None:
    """[LogLoaderTest.testRecoveryOfSegmentWithOffsetOverflow] [UnifiedLogTest.testSplitOnOffsetOverflow]
    A segment whose offsets overflow the 32-bit relative range is split during recovery into
    segments that each fit (bases 0, Int.MAX+5, 2*Int.MAX+20), every record kept in order with
    its offset, no temporary files left, and the next load finds nothing to split."""
    part = tmp_path / "t-0"
    _overflowed_partition(part)
    with Log.open(part) as log:
        assert [s.base_offset for s in log.segments] == [0, INT_MAX + 5, 2 * INT_MAX + 20]
        got = all_records(log)
        assert got.column("offset").to_pylist() == OVERFLOW_BASES
        assert got.column("key").to_pylist() == [b"k%d" % i for i in range(6)]
        assert log.log_end_offset == 2 * INT_MAX + 21
        for seg in log.segments:
            assert seg.offset_index.entries >= 0 and seg.read_next_offset() - seg.base_offset <= INT_MAX + 1
    assert not [p for p in part.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    set_checkpoint(part, RP, 0)                       # recover everything again: no split
    with Log.open(part) as log:
        assert [s.base_offset for s in log.segments] == [0, INT_MAX + 5, 2 * INT_MAX + 20]
        assert all_records(log).column("offset").to_pylist() == OVERFLOW_BASES


def test_degenerate_split_starts_at_the_first_batch(tmp_path: Path) -> None:
    """[UnifiedLogTest.testDegenerateSegmentSplit] every batch of the segment based at 0
    overflows it: the split leaves one segment based at the first batch's base offset."""
    part = tmp_path / "t-0"
    bases = [INT_MAX + 5, INT_MAX + 6, INT_MAX + 7]
    _overflowed_partition(part, bases)
    with Log.open(part) as log:
        assert [s.base_offset for s in log.segments] == [INT_MAX + 5]
        assert all_records(log).column("offset").to_pylist() == bases
    assert sorted(p.name for p in part.glob("*.log")) == [name(INT_MAX + 5, ".log")]


@pytest.mark.parametrize("phase", ["cleaned", "half-swapped", "swapped", "old-deleted"])
def test_crash_during_split_recovers_one_whole_log(tmp_path: Path, phase: str) -> None:
    """[LogLoaderTest.testRecoveryAfterCrashDuringSplitPhase1..5] What a kill during the split
    leaves (the pieces written as .cleaned; the highest piece renamed to .swap, the others not;
    every piece .swap with the old segment still there; the old segment deleted): the next load
    ends with the same three segments and every record exactly once."""
    done = tmp_path / "done" / "t-0"
    _overflowed_partition(done)
    with Log.open(done):
        pass
    part = tmp_path / "crash" / "t-0"
    _overflowed_partition(part)
    pieces = sorted(int(p.name[:20]) for p in done.glob("*.log"))
    for i, base in enumerate(pieces):
        src = done / name(base, ".log")
        if phase == "cleaned" or (phase == "half-swapped" and i < len(pieces) - 1):
            suffix = ".log.cleaned"
        else:
            suffix = ".log.swap"
        if base == 0 and suffix == ".log.swap" and phase == "old-deleted":
            (part / name(0, ".log")).unlink()
        shutil.copy(src, part / name(base, suffix))
    with Log.open(part) as log:
        assert [s.base_offset for s in log.segments] == pieces
        assert all_records(log).column("offset").to_pylist() == OVERFLOW_BASES
    assert not [p for p in part.iterdir() if p.name.endswith((".cleaned", ".swap"))]


def test_degenerate_split_crash_after_swap_drops_the_old_segment(tmp_path: Path) -> None:
    """A degenerate split killed once its piece is a .swap: the old segment (based below the
    piece but holding its offsets) is deleted on load, not read twice."""
    bases = [INT_MAX + 5, INT_MAX + 6]
    done = tmp_path / "done" / "t-0"
    _overflowed_partition(done, bases)
    with Log.open(done):
        pass
    part = tmp_path / "crash" / "t-0"
    _overflowed_partition(part, bases)
    shutil.copy(done / name(INT_MAX + 5, ".log"), part / name(INT_MAX + 5, ".log.swap"))
    with Log.open(part) as log:
        assert [s.base_offset for s in log.segments] == [INT_MAX + 5]
        assert all_records(log).column("offset").to_pylist() == bases


# -------------------------------------------------------------- interrupted split / compaction

def _split_fixture(tmp_path: Path, cfg: LogConfig) -> tuple[Path, Path]:
    """A partition with segments [0..9] and [10..14] (keys k0..k14), closed; and a "split" of
    segment 0 into [0..4] and [5..9] (same batches) in a scratch partition. Returns both
    partition directories."""
    batches = [one(b"v%d" % i, TS0 + i, key=b"k%d" % i, base_offset=i) for i in range(15)]
    part = tmp_path / "data" / "t-0"
    with Log.open(part, cfg) as log:
        for i in range(15):
            if i == 10:
                log.roll()
            log.append_raw(batches[i], assign_offsets=False)
        assert [s.base_offset for s in log.segments] == [0, 10]
    scratch = tmp_path / "scratch" / "t-0"
    with Log.open(scratch, cfg) as log:
        for i in range(10):
            if i == 5:
                log.roll()
            log.append_raw(batches[i], assign_offsets=False)
        assert [s.base_offset for s in log.segments] == [0, 5]
    return part, scratch


def _place(scratch: Path, base: int, part: Path, suffix: str) -> None:
    for kind in (".log", ".index", ".timeindex"):
        shutil.copy(scratch / name(base, kind), part / (name(base, kind) + suffix))


KEYS = [b"k%d" % i for i in range(15)]


@pytest.mark.parametrize("phase", [1, 2, 3, 4, 5])
def test_crash_during_split_or_swap(tmp_path: Path, phase: int) -> None:
    """[LogLoaderTest.testRecoveryAfterCrashDuringSplitPhase1..5] Segment [0..9] being replaced
    by [0..4] + [5..9] when the writer dies. Phase 1: the new segments are all ``.cleaned``;
    phase 2: [0..4] ``.cleaned``, [5..9] ``.swap``: the leftovers are discarded and the
    original segment kept (2 segments). Phase 3: both ``.swap``, the old segment truncated to
    0 bytes; phase 4: both ``.swap``, the old segment gone; phase 5: [0..4] already renamed,
    [5..9] ``.swap``, the old segment as ``.deleted``: the swap is completed (3 segments).
    Every key survives, in order, and no temporary file remains."""
    cfg = LogConfig(index_interval_bytes=1)
    part, scratch = _split_fixture(tmp_path, cfg)
    old = part / name(0, ".log")
    if phase == 1:
        _place(scratch, 0, part, ".cleaned")
        _place(scratch, 5, part, ".cleaned")
    elif phase == 2:
        _place(scratch, 0, part, ".cleaned")
        _place(scratch, 5, part, ".swap")
    elif phase == 3:
        _place(scratch, 0, part, ".swap")
        _place(scratch, 5, part, ".swap")
        os.truncate(old, 0)
    elif phase == 4:
        _place(scratch, 0, part, ".swap")
        _place(scratch, 5, part, ".swap")
        for kind in (".log", ".index", ".timeindex"):
            (part / name(0, kind)).unlink()
    else:
        for kind in (".log", ".index", ".timeindex"):
            os.rename(part / name(0, kind), part / (name(0, kind) + ".deleted"))
        os.truncate(part / (name(0, ".log") + ".deleted"), 0)
        _place(scratch, 0, part, "")
        _place(scratch, 5, part, ".swap")
    kill_writer_state(part, cfg, 0)
    with Log.open(part, cfg) as log:
        assert all_records(log).column("key").to_pylist() == KEYS
        expected = [0, 10] if phase in (1, 2) else [0, 5, 10]
        assert [s.base_offset for s in log.segments] == expected
    assert not [f for f in files(part) if f.endswith((".cleaned", ".swap", ".deleted"))]


# --------------------------------------------------------------------------- leader epochs

def test_unclean_recovery_rebuilds_the_leader_epoch_cache(tmp_path: Path) -> None:
    """[LogLoaderTest.testLogRecoversForLeaderEpoch] Follower batches with leader epochs 1, 2,
    2, 3 at offsets 0-3 give the cache (1,0),(2,1),(3,3); the cache loses its last entry; the
    unclean reload from offset 0 rebuilds all three from the batches."""
    part = tmp_path / "t-0"
    full = [EpochEntry(1, 0), EpochEntry(2, 1), EpochEntry(3, 3)]
    with Log.open(part) as log:
        for offset, epoch in ((0, 1), (1, 2), (2, 2), (3, 3)):
            log.append_raw(one(b"random", TS0, base_offset=offset, partition_leader_epoch=epoch),
                           assign_offsets=False)
        assert log.leader_epoch_cache.entries == full
        log.leader_epoch_cache.truncate_from_end(2)
        assert log.leader_epoch_cache.entries == full[:2]
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n2 1\n"
    kill_writer_state(part, LogConfig(), 0)
    with Log.open(part) as log:
        assert log.leader_epoch_cache.entries == full
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n2 1\n3 3\n"


# ---------------------------------------------------------------------- transaction indexes

def _transactional_log(part: Path, cfg: LogConfig) -> list[int]:
    """Kafka's testFullTransactionIndexRecovery appends (offsets in comments); returns the
    segment bases."""
    seqs: dict[int, int] = {}
    with Log.open(part, cfg) as log:
        def txn(pid: int, n: int) -> None:
            seq = seqs.get(pid, 0)
            log.append_raw(idempotent(pid, seq, n, transactional=True))
            seqs[pid] = seq + n

        def plain(n: int) -> None:
            log.append_raw(build_batch([RecordInput(b"plain", None, NOW)] * n))

        def marker(pid: int, kind: str) -> None:
            log.append_end_txn_marker(pid, 0, kind, 0, timestamp=NOW)

        txn(1, 5)                # 5
        plain(3)                 # 8
        txn(2, 2)                # 10
        txn(1, 4)                # 14
        txn(3, 3)                # 17
        plain(2)                 # 19
        txn(1, 10)               # 29
        marker(1, "ABORT")       # 30
        txn(2, 6)                # 36
        txn(4, 3)                # 39
        plain(10)                # 49
        txn(3, 9)                # 58
        marker(3, "COMMIT")      # 59
        txn(4, 8)                # 67
        txn(2, 7)                # 74
        marker(2, "ABORT")       # 75
        plain(10)                # 85
        txn(4, 4)                # 89
        marker(4, "COMMIT")      # 90
        assert log.log_end_offset == 90
        assert aborted_txns(log) == EXPECTED_ABORTED
        return [s.base_offset for s in log.segments]


EXPECTED_ABORTED = [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]


@pytest.mark.parametrize("segment_bytes", [640, 850])
@pytest.mark.parametrize("mode", ["full", "last-segment", "last-segment-no-snapshots"])
def test_transaction_index_recovery(tmp_path: Path, mode: str, segment_bytes: int) -> None:
    """[LogLoaderTest.testFullTransactionIndexRecovery/testRecoverOnlyLastSegment/testRecoverLastSegmentWithNoSnapshots]
    Four transactional producers mixed with plain data. "full": every .index and .txnindex
    deleted, recovery from 0; "last-segment": the last segment's .index and .txnindex deleted,
    recovery point at its base (with or without the producer snapshots): the reloaded log (in
    5120-byte segments) has exactly AbortedTxn(pid 1, 0, 29, LSO 8) and AbortedTxn(pid 2, 8,
    74, LSO 36), and the last stable offset is 90. With 850-byte segments the last segment
    holds pid 2's ABORT marker, so its index entry comes from that recovery."""
    part = tmp_path / "t-0"
    bases = _transactional_log(part, LogConfig(segment_bytes=segment_bytes))
    assert len(bases) >= 3
    last = bases[-1]
    if mode == "full":
        for p in [*part.glob("*.index"), *part.glob("*.txnindex")]:
            p.unlink()
        recovery_point = 0
    else:
        (part / name(last, ".index")).unlink()
        (part / name(last, ".txnindex")).unlink(missing_ok=True)
        recovery_point = last
        if mode == "last-segment-no-snapshots":
            for p in part.glob("*.snapshot"):
                p.unlink()
    if segment_bytes == 850:
        assert last <= 74                  # the ABORT at 74 is in the recovered last segment
    set_checkpoint(part, RP, recovery_point)
    with Log.open(part, LogConfig(segment_bytes=1024 * 5)) as log:
        assert aborted_txns(log) == EXPECTED_ABORTED
        assert log.last_stable_offset == 90
        assert [s.base_offset for s in log.segments] == bases
    assert (part / name(last, ".index")).exists()


# ------------------------------------------------------------- log start offset after recovery

def _one_record_segments(part: Path, cfg: LogConfig, n: int = 9) -> None:
    """Segments [0], [1], ..., [n-1] of one record each and an empty active segment [n]."""
    with Log.open(part, cfg) as log:
        for i in range(n):
            log.append_raw(one(str(i).encode(), TS0 + i))
            log.roll()
        assert [s.base_offset for s in log.segments] == list(range(n + 1))
        assert log.log_end_offset == n


def test_log_end_below_log_start_after_recovery(tmp_path: Path) -> None:
    """[LogLoaderTest.testLogEndLessThanStartAfterReopen] Segments [0]..[4] and an empty [5],
    log start offset 4 (checkpointed), segment 1's .log overwritten with "corruptRecord":
    recovery truncates segment 1 to nothing and drops the later segments, leaving LEO 1 < 4; all
    segments are then deleted and one empty segment created at 4 with its .log, .index and
    .timeindex: log start = log end = 4."""
    cfg = LogConfig()
    part = tmp_path / "t-0"
    _one_record_segments(part, cfg, 5)
    set_checkpoint(part, LSO, 4)
    (part / name(1, ".log")).write_bytes(b"corruptRecord")
    kill_writer_state(part, cfg, 0)
    with Log.open(part, cfg) as log:
        assert log.log_start_offset == 4
        assert log.log_end_offset == 4
        assert [s.base_offset for s in log.segments] == [4]
        only = log.segments[0]
        assert only.log_path.exists() and only.size == 0
        assert only.offset_index.path.exists()
        assert only.time_index.path.exists()
    assert sorted(p.name for p in part.glob("*.log")) == [name(4, ".log")]


def test_recovery_below_log_start_keeps_no_stale_snapshots(tmp_path: Path) -> None:
    """[LogLoaderTest.testCorruptedLogRecoveryDoesNotDeleteProducerStateSnapshotsPostRecovery]
    Segments [0]..[8] and an empty [9], snapshots at 1..9, log start 4, segment 1 overwritten
    with garbage: after the unclean load (one empty segment at 4) there is no snapshot for 1..4,
    on disk or in memory. Records 4..8 appended again with rolls give snapshots at 5..9, which
    stay (no deletion is pending), and no ``.deleted`` file remains."""
    cfg = LogConfig()
    part = tmp_path / "t-0"
    _one_record_segments(part, cfg, 9)
    assert snapshots(part)[-1] == 9
    set_checkpoint(part, LSO, 4)
    (part / name(1, ".log")).write_bytes(b"corruptRecord")
    kill_writer_state(part, cfg, 0)
    with Log.open(part, cfg) as log:
        assert [s.base_offset for s in log.segments] == [4]
        assert (log.log_start_offset, log.log_end_offset) == (4, 4)
        assert [o for o in snapshots(part) if 1 <= o <= 4] == []
        assert [o for o in log.producer_state.snapshot_offsets if 1 <= o <= 4] == []
        for i in range(4, 9):
            log.append_raw(one(str(i).encode(), TS0 + i))
            log.roll()
        assert [s.base_offset for s in log.segments] == [4, 5, 6, 7, 8, 9]
        assert (log.log_start_offset, log.log_end_offset) == (4, 9)
        assert log.producer_state.snapshot_offsets == [5, 6, 7, 8, 9]
        assert snapshots(part) == [5, 6, 7, 8, 9]
        assert not list(part.glob("*.deleted"))
        assert all_records(log).column("value").to_pylist() == [b"4", b"5", b"6", b"7", b"8"]


def test_empty_rolled_active_segment_without_index_files(tmp_path: Path) -> None:
    """[LogLoaderTest.testRecoverWithEmptyActiveSegment] 100 records, then a roll to an empty
    active segment whose index files are never written (deleted after close): the unclean load
    creates them; their sanity checks pass; the time index has 0 entries; LEO stays 100 and the
    log takes appends."""
    cfg = LogConfig(segment_bytes=700, index_interval_bytes=300, segment_index_bytes=4096)
    part = tmp_path / "t-0"
    with Log.open(part, cfg) as log:
        for i in range(100):
            log.append_raw(one(bytes([i]) * 100, TS0 + i * 10))
        log.roll()
        assert log.active_segment.base_offset == 100
    for kind in (".index", ".timeindex"):
        (part / name(100, kind)).unlink()
    set_checkpoint(part, RP, 0)
    with Log.open(part, cfg) as log:
        assert log.log_end_offset == 100
        active = log.active_segment
        assert active.base_offset == 100 and active.size == 0
        assert active.offset_index.path.exists() and active.time_index.path.exists()
        active.offset_index.sanity_check()
        active.time_index.sanity_check()
        assert active.time_index.entries == 0
        assert active.offset_index.entries == 0
        log.append_raw(one(b"after", TS0 + 2000))
        assert log.log_end_offset == 101


def test_log_start_is_max_of_checkpoint_and_first_segment(tmp_path: Path) -> None:
    """[LogLoaderTest.testLogStartOffsetWhenRemoteStorageIsEnabled] (local log) Segments [0]..[8]
    and [9]; the log start moved to 5 deleted segments 0-4; loaded with a log-start checkpoint
    of 0 (and no recovery needed), the log start offset is max(0, first segment base 5) = 5."""
    cfg = LogConfig()
    part = tmp_path / "t-0"
    _one_record_segments(part, cfg, 9)
    with Log.open(part, cfg) as log:
        assert log.delete_records_before(5) == 5
        assert log.segments[0].base_offset == 5
    set_checkpoint(part, LSO, 0)
    with Log.open(part, cfg) as log:
        assert log.log_start_offset == 5
        assert log.log_end_offset == 9
        assert log.segments[0].base_offset == 5


# ------------------------------------------------------------------- UnifiedLogTest (loading)

def test_snapshots_written_when_none_exist(tmp_path: Path) -> None:
    """[UnifiedLogTest.testInitializationOfProducerSnapshotsUpgradePath] 101 plain records in
    640-byte segments, every snapshot deleted: reloading after a clean shutdown, and unclean with
    the recovery point at the log end offset, writes snapshots at the last two segment bases
    and the log end offset; unclean with recovery point 0 writes one at every segment base
    after the first and at the log end offset."""
    cfg = LogConfig(segment_bytes=64 * 10)
    part = tmp_path / "t-0"
    with Log.open(part, cfg) as log:
        assert log.producer_state.oldest_snapshot_offset is None
        for i in range(101):
            log.append_raw(one(str(i).encode(), NOW))
        assert len(log.segments) >= 2
        leo = log.log_end_offset

    def drop_snapshots() -> None:
        for p in part.glob("*.snapshot"):
            p.unlink()

    drop_snapshots()
    with Log.open(part, cfg) as log:                    # clean
        bases = [s.base_offset for s in log.segments]
        assert snapshots(part) == bases[-2:] + [leo]
    drop_snapshots()
    kill_writer_state(part, cfg, leo)
    with Log.open(part, cfg) as log:
        assert snapshots(part) == bases[-2:] + [leo]
    drop_snapshots()
    kill_writer_state(part, cfg, 0)
    with Log.open(part, cfg) as log:
        assert snapshots(part) == bases[1:] + [leo]


def test_stray_snapshot_past_the_log_end_is_deleted(tmp_path: Path) -> None:
    """[UnifiedLogTest.testLoadingLogDeletesProducerStateSnapshotsPastLogEndOffset] An empty
    partition with a stray (empty) snapshot file at 42: loading deletes it."""
    part = tmp_path / "t-0"
    part.mkdir()
    (part / name(42, ".snapshot")).touch()
    cfg = LogConfig(segment_bytes=2048 * 5)
    with Log.open(part, cfg) as log:
        assert snapshots(part) == []
        assert log.producer_state.snapshot_offsets == []
        assert log.log_end_offset == 0


def test_delete_named_dir_without_segments_loads(tmp_path: Path) -> None:
    """[UnifiedLogTest.testLoadPartitionDirWithNoSegmentsShouldNotThrow] A directory named as a
    deleted partition (foo-3.<uuid>-delete) with no segment files loads with one empty
    segment."""
    part = tmp_path / log_delete_dir_name("foo", 3)
    part.mkdir()
    with Log.open(part) as log:
        assert (log.topic, log.partition) == ("foo", 3)
        assert len(log.segments) == 1
        assert log.log_end_offset == 0

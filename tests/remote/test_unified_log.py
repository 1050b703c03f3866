"""Reads across tiers (``UnifiedLog``), on SeaweedFS (a real S3 server) and on a local folder: a log
whose older segments were copied to remote storage (RSM + RLMM, COPY_SEGMENT_STARTED then
FINISHED) and deleted locally, as local retention deletes them, reads back whole and in order
across the boundary, for both isolation levels (committed and aborted transactions in tiered
segments, one aborted by a marker in the first local segment), through ``offsets_for_times``,
and ListOffsets' special timestamps answer as Kafka's do; once a segment's indexes are cached a
random offset costs at most two object requests (counted by a counting adapter around the real
RSM: instrumentation, not a mock); offsets in neither tier are out of range; the store going
away fails a read naming the segment and the store, and local data is untouched. Sweeps: fetches
that straddle the chunks read ahead return what a single read of their offset returns; the reads
ahead cover each segment once, in aligned chunks, never past its end; a store failing while reads
are in flight ahead fails the sweep naming segment and store, which then resumes whole; a segment
deleted after it was read (its object kept open) fails as a missing object; reads ahead land in a
few kept buffers, reused without a read still running writing into one handed on; the kept
buffers are one pool for every open UnifiedLog, bounded by one log's need, shared safely by two
logs sweeping at once."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.checkpoint import EpochEntry, format_leader_epoch_checkpoint, topic_id_from_str
from storage_core.config import LogConfig
from storage_core.errors import OffsetOutOfRangeError, RemoteResourceNotFoundError, RemoteStorageError
from storage_core.format import RecordInput as Record, build_batch
from storage_core.log import Log, segment_paths
from storage_core.producer import snapshot_path
from storage_core.remote import unified_log
from storage_core.remote import (LogSegmentData, PyArrowRemoteStorageManager, RemoteIndexCache, RemoteLogSegmentId,
                                 RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
                                 TopicBasedRemoteLogMetadataManager, TopicIdPartition, UnifiedLog)

_spec = importlib.util.spec_from_file_location("kafkalog_ic_test",
                                               Path(__file__).with_name("test_remote_index_cache.py"))
_ic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ic)
CountingRemoteStorageManager = _ic.CountingRemoteStorageManager

TOPIC_ID = topic_id_from_str("jF8s79t9SrG_PNqlwv7bAA")
TIP = TopicIdPartition(TOPIC_ID, ("tieredTopic", 0))
TS0 = 1700000000000
SEGMENTS = 6
TIERED = 4                      # the first four segments go remote and are deleted locally


def _build(log_dir: Path) -> list[tuple[int, int]]:
    """Six rolled segments plus an active one: an idempotent producer's batches, and producer 77's
    transactions, committed and aborted, one of them begun in the last segment to be tiered and
    aborted in the first local one."""
    snapshots = log_dir.parent / "snapshots"
    snapshots.mkdir()
    log = Log.open(log_dir, LogConfig(index_interval_bytes=512), topic_id=TOPIC_ID)
    rnd = random.Random(19)
    bounds = []
    ts, seq, txn_seq = TS0, 0, 0
    try:
        for s in range(SEGMENTS + 1):
            base = log.log_end_offset
            for i in range(120):
                records = [Record(value=os.urandom(rnd.randint(20, 300)), timestamp=ts + k) for k in range(3)]
                ts += 3
                log.append_raw(build_batch(records, producer_id=5, producer_epoch=0, base_sequence=seq))
                seq += 3
                if i % 30 == 10 and not (s == TIERED - 1 and i > 90):
                    log.append_raw(build_batch([Record(value=f"t{s}-{i}".encode(), timestamp=ts)] * 2,
                                               producer_id=77, producer_epoch=0, base_sequence=txn_seq,
                                               transactional=True))
                    txn_seq += 2
                    log.append_end_txn_marker(77, 0, "ABORT" if i % 60 == 10 else "COMMIT", 0, timestamp=ts)
            if s == TIERED - 1:
                # begun here, aborted in the next (local) segment
                log.append_raw(build_batch([Record(value=b"spans", timestamp=ts)], producer_id=78, producer_epoch=0,
                                           base_sequence=0, transactional=True))
            if s == TIERED:
                log.append_end_txn_marker(78, 0, "ABORT", 0, timestamp=ts)
            if s == SEGMENTS:
                break
            next_base = log.roll().base_offset
            bounds.append((base, next_base))
            shutil.copy(snapshot_path(log_dir, next_base), snapshots / f"{next_base}.snapshot")
        log.flush()
    finally:
        log.close()
    return bounds


def _sweep(reader, start: int, isolation: str, max_bytes: int) -> pa.Table:
    tables, offset = [], start
    end = reader.log_end_offset
    while offset < end:
        r = reader.fetch(offset, max_bytes=max_bytes, isolation=isolation)
        assert r.next_offset > offset or r.table.num_rows, f"stuck at {offset}"
        if r.next_offset <= offset:
            break
        tables.append(r.table)
        offset = r.next_offset
    return pa.concat_tables(tables)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """The log before tiering, and what it reads (both isolation levels) and answers by timestamp."""
    log_dir = tmp_path_factory.mktemp("unified") / "tieredTopic-0"
    bounds = _build(log_dir)
    with Log.open(log_dir, read_only=True) as log:
        expected = {iso: _sweep(log, 0, iso, 1 << 30) for iso in ("read_uncommitted", "read_committed")}
        lso = log.last_stable_offset
        times = {ts: log.offsets_for_times(ts) for ts in range(TS0 - 5, TS0 + 3 * 120 * 8, 97)}
        max_timestamps = [seg.largest_timestamp for seg in log.segments]
    assert lso == bounds[-1][1] + 120 * 3 + 8 * 3 or lso > bounds[TIERED - 1][1]
    return log_dir, bounds, expected, times, max_timestamps


def _tier(source, tmp_path: Path, configs: dict, register=None):
    """A copy of the source log whose first TIERED segments are copied to the store (metadata
    STARTED, objects, FINISHED) and then deleted locally; returns (log, rlmm, rsm, metadata)."""
    src_dir, bounds, _, _, max_timestamps = source
    log_dir = tmp_path / "data" / "tieredTopic-0"
    log_dir.parent.mkdir()
    shutil.copytree(src_dir, log_dir)
    rsm = PyArrowRemoteStorageManager(configs)
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(tmp_path / "data"),
                                               "remote.log.metadata.topic.num.partitions": "1"})
    mds = []
    for n, (base, next_base) in enumerate(bounds[:TIERED]):
        paths = segment_paths(log_dir, base)
        txn = paths[".txnindex"] if paths[".txnindex"].exists() and paths[".txnindex"].stat().st_size else None
        md = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TIP), base, next_base - 1, max_timestamps[n],
                                      1, TS0, paths[".log"].stat().st_size, {0: base}, txn_idx_empty=txn is None)
        if register is None or n in register:
            rlmm.add_remote_log_segment_metadata(md)
        rsm.copy_log_segment_data(md, LogSegmentData(paths[".log"], paths[".index"], paths[".timeindex"], txn,
                                                     src_dir.parent / "snapshots" / f"{next_base}.snapshot",
                                                     format_leader_epoch_checkpoint([EpochEntry(0, 0)]).encode()))
        if register is None or n in register:
            rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
                md.remote_log_segment_id, TS0, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1))
            md = md.create_with_updates(RemoteLogSegmentMetadataUpdate(
                md.remote_log_segment_id, TS0, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1))
        mds.append(md)
    log = Log.open(log_dir)
    # local retention's part: the copied segments go
    assert log.delete_records_before(bounds[TIERED - 1][1]) == bounds[TIERED - 1][1]
    log.delete_expired_files(now_ms=1 << 62)
    assert log.segments[0].base_offset == bounds[TIERED][0]
    return log, rlmm, rsm, mds


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return {"dir": str(tmp_path / "remote")}
    seaweedfs = request.getfixturevalue("seaweedfs")
    return seaweedfs.storage_configs(f"ul-{uuid.uuid4().hex[:10]}")


@pytest.mark.parametrize("max_bytes", [3000, 1 << 20])
def test_tiered_log_reads_back_whole_across_the_boundary(source, store, tmp_path, max_bytes):
    _, bounds, expected, times, _ = source
    log, rlmm, rsm, mds = _tier(source, tmp_path, store)
    cache = RemoteIndexCache(rsm, tmp_path / "data")
    with log, UnifiedLog(log, TIP, rlmm, rsm, cache) as ulog:
        assert ulog.log_start_offset == 0 and ulog.local_log_start_offset == bounds[TIERED][0]
        for iso, table in expected.items():
            got = _sweep(ulog, 0, iso, max_bytes)
            assert got.num_rows == table.num_rows and got.equals(table), iso
        # the aborted transactions of tiered segments (and the one aborted locally) are gone
        committed = expected["read_committed"].column("value").to_pylist()
        assert b"spans" not in committed and b"spans" in expected["read_uncommitted"].column("value").to_pylist()
        # a read starting anywhere in the remote tier, mid-segment
        for iso in expected:
            middle = (mds[1].start_offset + mds[1].end_offset) // 2
            full = expected[iso]
            tail = _sweep(ulog, middle, iso, max_bytes)
            assert tail.equals(full.filter(pa.compute.greater_equal(full.column("offset"), middle)))
        for ts, offset in times.items():
            assert ulog.offsets_for_times(ts) == offset, ts
    cache.close()
    rlmm.close()


def test_list_offsets_special_timestamps(source, tmp_path):
    _, bounds, _, _, _ = source
    log, rlmm, rsm, mds = _tier(source, tmp_path, {"dir": str(tmp_path / "remote")})
    cache = RemoteIndexCache(rsm, tmp_path / "data")
    with log, UnifiedLog(log, TIP, rlmm, rsm, cache) as ulog:
        local_start = bounds[TIERED][0]
        assert ulog.fetch_offset_by_timestamp(-1).offset == log.log_end_offset
        assert ulog.fetch_offset_by_timestamp(-2).offset == 0
        assert ulog.fetch_offset_by_timestamp(-3) == log.fetch_offset_by_timestamp(-3)
        assert ulog.fetch_offset_by_timestamp(-3).offset >= local_start
        assert ulog.fetch_offset_by_timestamp(-4).offset == local_start
        tiered = ulog.fetch_offset_by_timestamp(-5)
        assert (tiered.offset, tiered.leader_epoch) == (mds[-1].end_offset, 0) == (local_start - 1, 0)
        # the local log alone: -2 is its own start, nothing tiered
        assert log.fetch_offset_by_timestamp(-2).offset == local_start
        assert log.fetch_offset_by_timestamp(-5) == type(tiered)(-1, -1, -1)
    # nothing tiered yet: -5 answers offset -1, epoch -1, as Kafka does
    empty = TopicBasedRemoteLogMetadataManager({"log.dir": str(tmp_path / "empty"),
                                                "remote.log.metadata.topic.num.partitions": "1"})
    with Log.open(source[0], read_only=True) as src, UnifiedLog(src, TIP, empty, rsm, cache) as ulog:
        none = ulog.fetch_offset_by_timestamp(-5)
        assert (none.offset, none.leader_epoch) == (-1, -1)
        assert ulog.fetch_offset_by_timestamp(-2).offset == ulog.fetch_offset_by_timestamp(-4).offset == 0
    empty.close()
    cache.close()
    rlmm.close()


def test_random_remote_offset_costs_at_most_two_requests_once_indexes_are_cached(source, seaweedfs, tmp_path):
    _, _, expected, _, _ = source
    log, rlmm, rsm, mds = _tier(source, tmp_path, seaweedfs.storage_configs(f"ul-{uuid.uuid4().hex[:10]}"))
    counting = CountingRemoteStorageManager(rsm)
    cache = RemoteIndexCache(counting, tmp_path / "data")
    full = expected["read_uncommitted"]
    offsets = full.column("offset").to_pylist()
    rnd = random.Random(405)
    with log, UnifiedLog(log, TIP, rlmm, counting, cache) as ulog:
        for md in mds:
            cache.get_index_entry(md)
        last_next = -1
        for _ in range(40):
            md = rnd.choice(mds)
            # (a read where the one before stopped continues a sweep, which reads ahead)
            target = rnd.choice([o for o in offsets if md.start_offset <= o <= md.end_offset and o != last_next])
            before = counting.requests
            r = ulog.fetch(target, max_bytes=2048)
            table, last_next = r.table, r.next_offset
            assert counting.requests - before <= 2
            assert table.column("offset")[0].as_py() == target
    cache.close()
    rlmm.close()


def test_offsets_in_neither_tier_are_out_of_range(source, tmp_path):
    _, bounds, _, _, _ = source
    # segment 1 copied but never registered: a gap in the remote tier
    log, rlmm, rsm, mds = _tier(source, tmp_path, {"dir": str(tmp_path / "remote")}, register={0, 2, 3})
    cache = RemoteIndexCache(rsm, tmp_path / "data")
    with log, UnifiedLog(log, TIP, rlmm, rsm, cache) as ulog:
        assert ulog.read(bounds[0][0]).num_rows
        for offset in (bounds[1][0], (bounds[1][0] + bounds[1][1]) // 2, -1, log.log_end_offset + 1):
            with pytest.raises(OffsetOutOfRangeError) as info:
                ulog.read(offset)
            assert str(offset) in str(info.value) and "tieredTopic-0" in str(info.value)
        # a sweep reaching the gap stops there with the error, not with skipped records
        with pytest.raises(OffsetOutOfRangeError):
            _sweep(ulog, 0, "read_uncommitted", 1 << 20)
    cache.close()
    rlmm.close()


def test_store_going_away_fails_reads_naming_segment_and_store_local_data_untouched(source, seaweedfs, tmp_path):
    log, rlmm, rsm, mds = _tier(source, tmp_path, seaweedfs.storage_configs(f"ul-{uuid.uuid4().hex[:10]}"))
    cache = RemoteIndexCache(rsm, tmp_path / "data")
    def local_files() -> dict[str, bytes | None]:
        # every file, with the bytes of the segments' data (the active segment's preallocated
        # indexes are trimmed when the log closes)
        return {p.name: p.read_bytes() if p.suffix == ".log" else None for p in log.dir.iterdir() if p.is_file()}

    local = local_files()
    with log, UnifiedLog(log, TIP, rlmm, rsm, cache) as ulog:
        cache.get_index_entry(mds[0])                       # warm: the segment read itself fails
        local_rows = ulog.read(log.log_start_offset).num_rows
        seaweedfs.stop()
        try:
            for md in (mds[0], mds[2]):                     # warm and cold indexes
                with pytest.raises(RemoteStorageError) as info:
                    ulog.read(md.start_offset + 1)
                message = str(info.value)
                assert f"offsets {md.start_offset}-{md.end_offset}" in message, message
                assert "tieredTopic-0" in message and seaweedfs.bucket in message, message
            assert ulog.read(log.log_start_offset).num_rows == local_rows      # the local tier still reads
        finally:
            seaweedfs.start()
        assert ulog.read(mds[2].start_offset + 1).num_rows
        assert local_files() == local
    cache.close()
    rlmm.close()


def test_describe_shows_the_remote_segments_of_a_tiered_partition(source, tmp_path):
    import json
    import subprocess
    import sys
    log, rlmm, rsm, mds = _tier(source, tmp_path, {"dir": str(tmp_path / "remote")})
    log.close()
    rlmm.close()
    data = tmp_path / "data"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = subprocess.run([sys.executable, "-m", "storage_core.tools", "describe", str(data), "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    part = next(p for p in doc["partitions"] if p["partition"] == "tieredTopic-0")
    remote = part["remote_segments"]
    assert [(r["start_offset"], r["end_offset"], r["size"], r["state"], r["txn_idx_empty"]) for r in remote] == [
        (m.start_offset, m.end_offset, m.segment_size_in_bytes, "COPY_SEGMENT_FINISHED", m.txn_idx_empty)
        for m in mds]
    for r in remote:
        assert (tmp_path / "remote" / "kafka-tiered-storage" / r["object"]).stat().st_size == r["size"]
    text = subprocess.run([sys.executable, "-m", "storage_core.tools", "describe", str(data / "tieredTopic-0")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert text.returncode == 0, text.stderr[-3000:]
    assert f"remote segments {len(mds)}" in text.stdout
    assert f"{mds[0].start_offset}-{mds[0].end_offset}  COPY_SEGMENT_FINISHED" in text.stdout


def test_a_read_whose_target_lies_past_the_first_ranged_read_reads_on_to_it(source, tmp_path):
    """The first ranged read of a random read covers max_bytes plus index.interval.bytes from the
    index entry; when the segment was indexed more sparsely than this log's setting says, the
    target batch lies further: the read goes on to it and still returns it first."""
    _, _, expected, _, _ = source
    log, rlmm, rsm, mds = _tier(source, tmp_path, {"dir": str(tmp_path / "remote")})
    log.update_config(LogConfig(index_interval_bytes=1))
    cache = RemoteIndexCache(rsm, tmp_path / "data")
    offsets = expected["read_uncommitted"].column("offset").to_pylist()
    rnd = random.Random(11)
    with log, UnifiedLog(log, TIP, rlmm, rsm, cache) as ulog:
        for _ in range(30):
            md = rnd.choice(mds)
            target = rnd.choice([o for o in offsets if md.start_offset <= o <= md.end_offset])
            table = ulog.read(target, max_bytes=1)
            assert table.column("offset")[0].as_py() == target
    cache.close()
    rlmm.close()


class RecordingRemoteStorageManager(PyArrowRemoteStorageManager):
    """The real RSM, recording every ranged read of a segment (instrumentation, not a mock)."""

    def __init__(self, configs: dict) -> None:
        super().__init__(configs)
        self.reads: list[tuple[object, int, int]] = []

    def fetch_log_segment(self, metadata, start_position, end_position=None):
        end = metadata.segment_size_in_bytes if end_position is None else end_position + 1
        self.reads.append((metadata.remote_log_segment_id, start_position, end))
        return super().fetch_log_segment(metadata, start_position, end_position)


def _fetches(ulog, start: int, end: int, max_bytes: int) -> list[tuple[int, pa.Table, int]]:
    """A sweep's fetches: (offset, table, next offset)."""
    out, offset = [], start
    while offset < end:
        r = ulog.fetch(offset, max_bytes=max_bytes)
        assert r.next_offset > offset, f"stuck at {offset}"
        out.append((offset, r.table, r.next_offset))
        offset = r.next_offset
    return out


@pytest.mark.parametrize("chunk_bytes", [1000, 7777])
def test_a_sweep_whose_fetches_straddle_its_read_ahead_chunks_returns_what_single_reads_return(
        source, store, tmp_path, chunk_bytes):
    """Chunks read ahead smaller than a fetch (every fetch joins pieces of two or more) and not a
    divisor of it: each fetch of the sweep returns the rows and next offset a fetch of that
    offset alone returns (one ranged read, no sweep), and the sweep the log's records."""
    _, bounds, expected, _, _ = source
    log, rlmm, rsm, mds = _tier(source, tmp_path, store)
    cache = RemoteIndexCache(rsm, tmp_path / "data")
    local_start = bounds[TIERED][0]
    with log, UnifiedLog(log, TIP, rlmm, rsm, cache, read_ahead=3, chunk_bytes=chunk_bytes) as ulog:
        fetches = _fetches(ulog, 0, local_start, 3000)
        swept = pa.concat_tables([t for _, t, _ in fetches])
        full = expected["read_uncommitted"]
        assert swept.equals(full.filter(pa.compute.less(full.column("offset"), local_start)))
        for offset, table, next_offset in fetches:
            with UnifiedLog(log, TIP, rlmm, rsm, cache, read_ahead=0) as alone:
                single = alone.fetch(offset, max_bytes=3000)
            assert table.equals(single.table) and next_offset == single.next_offset, offset
    cache.close()
    rlmm.close()


def test_read_ahead_reads_each_byte_of_a_segment_once_in_aligned_chunks_never_past_its_end(source, store, tmp_path):
    _, bounds, expected, _, _ = source
    log, rlmm, _, mds = _tier(source, tmp_path, store)
    rsm = RecordingRemoteStorageManager(store)
    cache = RemoteIndexCache(rsm, tmp_path / "data")
    for md in mds:
        cache.get_index_entry(md)
    chunk = 5000
    with log, UnifiedLog(log, TIP, rlmm, rsm, cache, read_ahead=4, chunk_bytes=chunk) as ulog:
        swept = pa.concat_tables([t for _, t, _ in _fetches(ulog, 0, bounds[TIERED][0], 3000)])
    full = expected["read_uncommitted"]
    assert swept.equals(full.filter(pa.compute.less(full.column("offset"), bounds[TIERED][0])))
    for md in mds:
        ranges = sorted((s, e) for sid, s, e in rsm.reads if sid == md.remote_log_segment_id)
        size = md.segment_size_in_bytes
        # contiguous from 0 to the segment's end: nothing read twice, nothing past the end
        assert ranges[0][0] == 0 and ranges[-1][1] == size, (ranges, size)
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), ranges
        # after the first read, chunks end on multiples of the chunk size (or at the segment end)
        assert all(e % chunk == 0 or e == size for _, e in ranges[1:]), ranges
        assert len(ranges) > 3
    cache.close()
    rlmm.close()


def test_a_store_failing_mid_read_ahead_fails_the_sweep_naming_segment_and_store_and_it_resumes(
        source, seaweedfs, tmp_path):
    """The server stops while a sweep has reads in flight ahead: a fetch fails with the segment
    and the store named (never bytes from past a failed read); once the store is back the sweep
    goes on from the same offset and returns every record once."""
    _, bounds, expected, _, _ = source
    log, rlmm, rsm, mds = _tier(source, tmp_path, seaweedfs.storage_configs(f"ul-{uuid.uuid4().hex[:10]}"))
    cache = RemoteIndexCache(rsm, tmp_path / "data")
    for md in mds:
        cache.get_index_entry(md)
    local_start = bounds[TIERED][0]
    tables, offset = [], 0
    with log, UnifiedLog(log, TIP, rlmm, rsm, cache, read_ahead=4, chunk_bytes=4096) as ulog:
        for _ in range(5):
            r = ulog.fetch(offset, max_bytes=3000)
            tables.append(r.table)
            offset = r.next_offset
        seaweedfs.stop()
        try:
            with pytest.raises(RemoteStorageError) as info:
                for _ in range(200):            # the reads received before the stop serve a few fetches
                    r = ulog.fetch(offset, max_bytes=3000)
                    tables.append(r.table)
                    offset = r.next_offset
            md = ulog.remote_segment_for(offset)
            message = str(info.value)
            assert f"offsets {md.start_offset}-{md.end_offset}" in message, message
            assert "tieredTopic-0" in message and seaweedfs.bucket in message, message
        finally:
            seaweedfs.start()
        while offset < local_start:
            r = ulog.fetch(offset, max_bytes=3000)
            tables.append(r.table)
            offset = r.next_offset
    full = expected["read_uncommitted"]
    assert pa.concat_tables(tables).equals(full.filter(pa.compute.less(full.column("offset"), local_start)))
    cache.close()
    rlmm.close()


def test_a_segment_deleted_after_it_was_read_fails_as_not_found(source, seaweedfs, tmp_path):
    """The storage manager keeps a segment object open between ranged reads: once the segment
    is deleted, a read fails as a missing object, naming the segment, as it did before it was
    ever opened."""
    log, rlmm, rsm, mds = _tier(source, tmp_path, seaweedfs.storage_configs(f"ul-{uuid.uuid4().hex[:10]}"))
    cache = RemoteIndexCache(rsm, tmp_path / "data")
    md = mds[1]
    cache.get_index_entry(md)
    with log:
        with UnifiedLog(log, TIP, rlmm, rsm, cache) as ulog:
            assert ulog.read(md.start_offset, max_bytes=2000).num_rows
        rsm.delete_log_segment_data(md)
        with UnifiedLog(log, TIP, rlmm, rsm, cache) as ulog:
            with pytest.raises(RemoteResourceNotFoundError) as info:
                ulog.read(md.start_offset + 5, max_bytes=2000)
    assert f"offsets {md.start_offset}-{md.end_offset}" in str(info.value) and seaweedfs.bucket in str(info.value)
    cache.close()
    rlmm.close()


class BufferRecordingRemoteStorageManager(RecordingRemoteStorageManager):
    """The real RSM, recording every ranged read and the buffer each ``readinto`` lands in
    (instrumentation, not a mock); fault injection: each ``readinto`` waits up to ``delay``
    seconds (at random) before it reads, so that reads ahead are still running, and finish out of
    order, when a sweep is dropped."""

    def __init__(self, configs: dict, delay: float = 0.0) -> None:
        super().__init__(configs)
        self.buffers: list[object] = []
        self.delay = delay
        self.rnd = random.Random(7)

    def fetch_log_segment(self, metadata, start_position, end_position=None):
        stream = super().fetch_log_segment(metadata, start_position, end_position)
        into = stream.readinto

        def readinto(b):
            self.buffers.append(memoryview(b).obj)
            time.sleep(self.rnd.uniform(0, self.delay))
            return into(b)

        stream.readinto = readinto
        return stream


def test_reads_ahead_land_in_kept_buffers_reused_safely_over_jumps_and_sweeps(source, store, tmp_path):
    """Reads ahead land in buffers the UnifiedLog keeps and reuses (a new buffer per read has its
    pages faulted in every time): over sweeps and random jumps that drop a sweep with reads still
    in flight, every fetch returns what a fetch of its offset alone returns (a buffer handed to a
    new read while an old one still writes into it, or to two reads at once, shows as wrong rows),
    and the reads land in a few buffers, many times each."""
    _, bounds, _, _, _ = source
    log, rlmm, plain, mds = _tier(source, tmp_path, store)
    rsm = BufferRecordingRemoteStorageManager(store, delay=0.01)
    cache = RemoteIndexCache(plain, tmp_path / "data")
    local_start = bounds[TIERED][0]
    rnd = random.Random(23)
    read_ahead, offset, jumps = 3, 0, 0
    with log, UnifiedLog(log, TIP, rlmm, rsm, cache, read_ahead=read_ahead, chunk_bytes=3000) as ulog, \
            UnifiedLog(log, TIP, rlmm, plain, cache, read_ahead=0) as alone:
        for _ in range(300):
            if rnd.random() < 0.1:
                offset, jumps = rnd.randrange(local_start), jumps + 1
            r = ulog.fetch(offset, max_bytes=2500)
            single = alone.fetch(offset, max_bytes=2500)
            assert r.table.equals(single.table) and r.next_offset == single.next_offset, offset
            offset = r.next_offset if r.next_offset < local_start else 0
    distinct = len({id(b) for b in rsm.buffers})
    assert jumps > 10 and len(rsm.buffers) > 150, (jumps, len(rsm.buffers))
    assert distinct <= 3 * (read_ahead + 2) and len(rsm.buffers) > 10 * distinct, (distinct, len(rsm.buffers))
    cache.close()
    rlmm.close()


def test_logs_kept_open_share_one_pool_of_kept_buffers_bounded_by_one_logs_need(source, store, tmp_path):
    """The buffers kept between sweeps are one pool for the process: four UnifiedLogs kept open,
    sweeping in turn, read into the buffers the first one's sweep used (a pool per log keeps a
    set per open log: memory growing with the number of logs), the pool never holds more than one
    log's need (``read_ahead + 2`` chunks) while they are open, and lets it go when the last one
    closes. Every sweep returns every record below the local log."""
    _, bounds, _, _, _ = source
    log, rlmm, plain, mds = _tier(source, tmp_path, store)
    rsm = BufferRecordingRemoteStorageManager(store)
    cache = RemoteIndexCache(plain, tmp_path / "data")
    local_start = bounds[TIERED][0]
    read_ahead, chunk = 3, 3000
    pool = unified_log._BUFFERS
    held_before = pool.held
    reads = []
    with log, contextlib.ExitStack() as stack:
        ulogs = [stack.enter_context(UnifiedLog(log, TIP, rlmm, rsm, cache, read_ahead=read_ahead, chunk_bytes=chunk))
                 for _ in range(4)]
        for ulog in ulogs:
            seen, offsets, offset = len(rsm.buffers), [], 0
            while offset < local_start:
                r = ulog.fetch(offset, max_bytes=2500, max_offset=local_start)
                offsets.extend(r.table.column("offset").to_pylist())
                offset = r.next_offset
            assert offsets[0] == 0 and offsets[-1] == local_start - 1 and offsets == sorted(set(offsets))
            reads.append(rsm.buffers[seen:])
            assert len(reads[-1]) > 20                      # it read ahead, into kept buffers
            assert pool.held <= max(held_before, (read_ahead + 2) * chunk), pool.held
        assert pool.held > held_before                      # kept for the next sweep while open
    first = {id(b) for b in reads[0]}
    every = {id(b) for r in reads for b in r}
    assert len(first) >= read_ahead and len(every) < 2 * len(first), (len(first), len(every))
    assert pool.held == held_before                         # let go with the last log
    cache.close()
    rlmm.close()


def _reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("remote-log-reader")]


class InFlightRemoteStorageManager(BufferRecordingRemoteStorageManager):
    """The real RSM counting the ranged reads running now (instrumentation), each delayed
    (fault injection) so that reads ahead are still running when a log closes."""

    def __init__(self, configs: dict, delay: float) -> None:
        super().__init__(configs, delay)
        self.running = 0
        self.lock = threading.Lock()

    def fetch_log_segment(self, metadata, start_position, end_position=None):
        stream = super().fetch_log_segment(metadata, start_position, end_position)
        into = stream.readinto

        def readinto(b):
            with self.lock:
                self.running += 1
            try:
                return into(b)
            finally:
                with self.lock:
                    self.running -= 1

        stream.readinto = readinto
        return stream


def test_logs_share_the_process_reader_threads_and_a_closed_log_has_no_read_running(source, store, tmp_path):
    """Kafka's ``remote.log.reader.threads``: the reads ahead of every UnifiedLog opened without
    ``threads`` run on one pool for the process, so twelve logs kept open, each having swept
    its remote segments with reads ahead, leave at most ``REMOTE_LOG_READER_THREADS`` reader
    threads (a pool per log: four each). Closing a log returns once none of its reads is still
    running (the caller may close the RSM next), while the shared threads stay for the others;
    every sweep returns every record below the local log."""
    _, bounds, _, _, _ = source
    log, rlmm, plain, mds = _tier(source, tmp_path, store)
    rsm = InFlightRemoteStorageManager(store, delay=0.0)
    cache = RemoteIndexCache(plain, tmp_path / "data")
    local_start = bounds[TIERED][0]
    with log, contextlib.ExitStack() as stack:
        ulogs = [stack.enter_context(UnifiedLog(log, TIP, rlmm, rsm, cache, read_ahead=6, chunk_bytes=3000))
                 for _ in range(12)]
        for ulog in ulogs:
            offsets, offset = [], 0
            while offset < local_start:
                r = ulog.fetch(offset, max_bytes=2500, max_offset=local_start)
                offsets.extend(r.table.column("offset").to_pylist())
                offset = r.next_offset
            assert offsets[0] == 0 and offsets[-1] == local_start - 1 and offsets == sorted(set(offsets))
        assert len(_reader_threads()) <= unified_log.REMOTE_LOG_READER_THREADS
        # a sweep begun, its reads ahead in flight (each delayed), then the log closed
        rsm.delay = 0.5
        last = ulogs[-1]
        r = last.fetch(0, max_bytes=2500, max_offset=local_start)
        last.fetch(r.next_offset, max_bytes=2500, max_offset=local_start)     # sequential: reads ahead
        deadline = time.monotonic() + 5
        while not rsm.running and time.monotonic() < deadline:
            time.sleep(0.005)
        assert rsm.running > 0
        last.close()
        assert rsm.running == 0
        assert _reader_threads()                 # the others' threads stay
    cache.close()
    rlmm.close()


def _sweep_in_child(log_dir: str, tmp: str, configs: dict, local_start: int, out) -> None:
    """A forked child's own sweep of the tiered log (read only), its record count sent back."""
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(Path(log_dir).parent),
                                               "remote.log.metadata.topic.num.partitions": "1"})
    rsm = PyArrowRemoteStorageManager(configs)
    cache = RemoteIndexCache(rsm, Path(tmp) / "child-cache")
    with Log.open(Path(log_dir), read_only=True) as log, UnifiedLog(log, TIP, rlmm, rsm, cache, read_ahead=4,
                                                                        chunk_bytes=3000) as ulog:
        rows, offset = 0, 0
        while offset < local_start:
            r = ulog.fetch(offset, max_bytes=2500, max_offset=local_start)
            rows += r.table.num_rows
            offset = r.next_offset
    out.put(rows)


def test_a_forked_child_sweeps_on_reader_threads_of_its_own(source, tmp_path):
    """The process's reader threads are the parent's alone: a child forked after the parent
    swept (its shared pool full of threads the child does not have) sweeps the same remote
    segments on threads of its own and gets every record (a child using the parent's pool would
    wait forever: the join times out)."""
    import multiprocessing
    _, bounds, _, _, _ = source
    configs = {"dir": str(tmp_path / "remote")}
    log, rlmm, rsm, mds = _tier(source, tmp_path, configs)
    cache = RemoteIndexCache(rsm, tmp_path / "data")
    local_start = bounds[TIERED][0]
    with log, UnifiedLog(log, TIP, rlmm, rsm, cache, read_ahead=12, chunk_bytes=3000) as ulog:
        rows, offset = 0, 0
        while offset < local_start:
            r = ulog.fetch(offset, max_bytes=2500, max_offset=local_start)
            rows += r.table.num_rows
            offset = r.next_offset
    cache.close()
    rlmm.close()                                # the child opens the metadata log itself
    # every reader thread of the parent started (reads side by side), as after a busy sweep
    barrier = threading.Barrier(unified_log.REMOTE_LOG_READER_THREADS)
    readers = unified_log._shared_readers()
    for f in [readers.submit(barrier.wait, 10) for _ in range(unified_log.REMOTE_LOG_READER_THREADS)]:
        f.result()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_sweep_in_child, args=(str(log.dir), str(tmp_path), configs, local_start, out))
    child.start()
    child.join(60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and child.exitcode == 0
    assert out.get(timeout=5) == rows > 0


def test_two_logs_sweeping_at_once_hand_buffers_between_them_safely(source, store, tmp_path):
    """Two UnifiedLogs sweeping at the same time on two threads, with random jumps that drop a
    sweep while its reads (delayed at random, fault injection) still run, take buffers from and
    give them back to the one pool: every fetch of either returns what a fetch of its offset alone
    returns (a buffer handed to two reads at once, or to a read while another still writes into
    it, shows as wrong rows)."""
    _, bounds, _, _, _ = source
    log, rlmm, plain, mds = _tier(source, tmp_path, store)
    rsm = BufferRecordingRemoteStorageManager(store, delay=0.01)
    cache = RemoteIndexCache(plain, tmp_path / "data")
    local_start = bounds[TIERED][0]

    def sweep(seed: int) -> int:
        rnd, offset, fetches = random.Random(seed), 0, 0
        with UnifiedLog(log, TIP, rlmm, rsm, cache, read_ahead=3, chunk_bytes=3000) as ulog, \
                UnifiedLog(log, TIP, rlmm, plain, cache, read_ahead=0) as alone:
            for _ in range(150):
                if rnd.random() < 0.1:
                    offset = rnd.randrange(local_start)
                r = ulog.fetch(offset, max_bytes=2500)
                single = alone.fetch(offset, max_bytes=2500)
                assert r.table.equals(single.table) and r.next_offset == single.next_offset, (seed, offset)
                fetches += 1
                offset = r.next_offset if r.next_offset < local_start else 0
        return fetches

    with log, ThreadPoolExecutor(2) as pool:
        assert [f.result() for f in [pool.submit(sweep, seed) for seed in (31, 37)]] == [150, 150]
    assert len(rsm.buffers) > 150 and len({id(b) for b in rsm.buffers}) < len(rsm.buffers) // 5
    cache.close()
    rlmm.close()

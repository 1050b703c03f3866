"""Issue 19's first acceptance point as a user runs it, on SeaweedFS (a real S3 server): a
``LogManager`` with remote storage enabled runs its scheduled tasks (``RLMCopyTask``,
``RLMExpirationTask``, ``kafka-log-retention``) on an injected clock while a topic is appended far
beyond its ``local.retention.ms`` (small segments), with plain batches and two transactional
producers (short transactions, and long ones that stay open over several segments), committed and
aborted. Then, from the same manager: the whole topic reads back through ``UnifiedLog`` from offset
0, in order, across the tier boundary, for read_uncommitted (every data record, aborted ones too)
and read_committed (exactly the committed ones); ``offsets_for_times`` for timestamps in remote
segments, local segments and between them answers as Kafka's ``UnifiedLog.fetchOffsetByTimestamp``
does (the first record, control records included, at or after the timestamp); ListOffsets -2, -4
and -5; and remote expiry by ``retention.ms`` then by ``retention.bytes`` deletes exactly the
oldest remote segments the data says, and nothing else.

Every expectation is computed from the data the test wrote (its own record of offsets, timestamps
and transaction outcomes, and the sizes of the objects in the store), not from the engine."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from storage_core.config import LogConfig
from storage_core.errors import InvalidConfigError, OffsetOutOfRangeError
from storage_core.format import RecordInput as Record, build_batch
from storage_core.log import Log
from storage_core.remote import (REMOTE_LOG_METADATA_TOPIC_NAME, RemoteIndexCache, RemoteLogManagerConfig,
                                 RemoteLogSegmentFileType, RemoteLogSegmentState, UnifiedLog, deserialize,
                                 segment_file_name)
from storage_core.server import LogManager, LogManagerConfig

T0 = 1_700_000_000_000
ROUNDS = 72
ROUND_MS = 1000
INTERVAL_MS = 1000                    # remote.log.manager.task.interval.ms and the retention check
LOCAL_RETENTION_MS = 5000
PLAIN, SHORT_TXN, LONG_TXN = -1, 1001, 1002
TOPIC = "orders"


@dataclass
class Written:
    """One offset the test wrote: a data record or a transaction marker."""

    offset: int
    timestamp: int
    producer_id: int
    value: bytes | None               # None: a control record (COMMIT/ABORT marker)
    aborted: bool = False


class Writer:
    """Appends to ``log`` and keeps its own account of every offset (what the checks expect)."""

    def __init__(self, log) -> None:
        self.log = log
        self.written: list[Written] = []
        self.seq = {SHORT_TXN: 0, LONG_TXN: 0}
        self.open: dict[int, list[Written]] = {SHORT_TXN: [], LONG_TXN: []}
        self.rnd = random.Random(405)

    def batch(self, producer_id: int, timestamps: list[int]) -> None:
        offset = len(self.written)
        rows = [Written(offset + i, ts, producer_id, f"{producer_id}:{offset + i}:".encode() +
                        bytes(self.rnd.randrange(97, 123) for _ in range(self.rnd.randint(40, 140))))
                for i, ts in enumerate(timestamps)]
        records = [Record(value=r.value, timestamp=r.timestamp) for r in rows]
        if producer_id == PLAIN:
            self.log.append_raw(build_batch(records))
        else:
            self.log.append_raw(build_batch(records, producer_id=producer_id, producer_epoch=0,
                                            base_sequence=self.seq[producer_id], transactional=True))
            self.seq[producer_id] += len(rows)
            self.open[producer_id].extend(rows)
        self.written.extend(rows)
        assert self.log.log_end_offset == len(self.written)

    def end_txn(self, producer_id: int, commit: bool, timestamp: int) -> None:
        self.log.append_end_txn_marker(producer_id, 0, "COMMIT" if commit else "ABORT", 0, timestamp=timestamp)
        for r in self.open[producer_id]:
            r.aborted = not commit
        self.open[producer_id] = []
        self.written.append(Written(len(self.written), timestamp, producer_id, None))
        assert self.log.log_end_offset == len(self.written)

    def round(self, r: int) -> None:
        """Round ``r``: its timestamps are ``T0 + r * ROUND_MS + 10 * slot``, increasing with the
        offsets (9 ms between neighbours, so a timestamp can fall between two records)."""
        slots = iter(range(T0 + r * ROUND_MS, T0 + (r + 1) * ROUND_MS, 10))

        def take(n: int) -> list[int]:
            return [next(slots) for _ in range(n)]

        self.batch(PLAIN, take(4))
        self.batch(SHORT_TXN, take(3))
        self.end_txn(SHORT_TXN, r % 3 != 1, next(slots))          # a third of them aborted
        self.batch(LONG_TXN, take(2))                               # open over eight rounds
        if r % 8 == 7:
            self.end_txn(LONG_TXN, (r // 8) % 2 == 1, next(slots))  # every other one aborted
        self.batch(PLAIN, take(3))

    def first_at_or_after(self, timestamp: int) -> int | None:
        """Kafka's answer to a ListOffsets by timestamp (FileRecords.searchForTimestamp,
        RemoteLogManager.lookupTimestamp): the first offset, control records included, whose
        timestamp reaches it (timestamps increase with offsets here)."""
        return next((w.offset for w in self.written if w.timestamp >= timestamp), None)


def _store_objects(seaweedfs, prefix: str) -> dict[str, int]:
    """The ``.log`` objects under ``prefix`` in the bucket, by name, with their sizes."""
    fs = seaweedfs.filesystem()
    infos = fs.get_file_info(pafs.FileSelector(f"{seaweedfs.bucket}/{prefix}", recursive=True, allow_not_found=True))
    return {i.base_name: i.size for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".log")}


def _name(md) -> str:
    return segment_file_name(md, RemoteLogSegmentFileType.SEGMENT)


def _sweep(ulog: UnifiedLog, start: int, isolation: str) -> list[tuple[int, bytes]]:
    out, offset = [], start
    while offset < ulog.log_end_offset:
        r = ulog.fetch(offset, max_bytes=1500, isolation=isolation)
        assert r.next_offset > offset, f"stuck at {offset} ({isolation})"
        out += list(zip(r.table.column("offset").to_pylist(), r.table.column("value").to_pylist()))
        offset = r.next_offset
    return out


def test_log_manager_tiers_far_beyond_local_retention_and_reads_back_on_seaweedfs(tmp_path: Path, seaweedfs) -> None:
    prefix = f"e2e-{uuid.uuid4().hex[:12]}"
    data = tmp_path / "data"
    props = {"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": str(INTERVAL_MS),
             "rlmm.config.remote.log.metadata.topic.num.partitions": "2",
             **{f"rsm.config.{k}": v for k, v in seaweedfs.storage_configs(prefix).items()}}
    now = [T0]
    topic_config = {"remote.storage.enable": "true", "segment.bytes": "3000", "retention.ms": "-1",
                    "local.retention.ms": str(LOCAL_RETENTION_MS), "file.delete.delay.ms": "0"}
    with LogManager.open(data, clock=lambda: now[0], default_config=LogConfig(),
                         config=LogManagerConfig(retention_check_interval_ms=INTERVAL_MS),
                         remote_log_manager_config=RemoteLogManagerConfig.from_properties(props)) as mgr:
        mgr.alter_topic_config(TOPIC, topic_config)
        log = mgr.get_or_create_log((TOPIC, 0))
        rlm = mgr.remote_log_manager
        assert rlm is not None and log.config.remote_storage_enable
        w = Writer(log)
        ran: set[str] = set()
        local_deleted = 0
        for r in range(ROUNDS):
            w.round(r)
            now[0] = T0 + (r + 1) * ROUND_MS
            before = log.segments[0].base_offset
            ran.update(mgr.run_due_tasks(now[0]))
            local_deleted += log.segments[0].base_offset > before
            highest = rlm.highest_offset_in_remote_storage(log)
            # the copier never passes the last stable offset (the long transactions pin it)
            assert highest < log.last_stable_offset
            # nothing is only local and deleted: everything below the local log start is remote
            assert log.segments[0].base_offset <= highest + 1
        # quiet time: no open transaction is left, the last rolled segments are copied
        assert not w.open[LONG_TXN] and not w.open[SHORT_TXN] and log.last_stable_offset == log.log_end_offset
        for _ in range(3):
            now[0] += INTERVAL_MS
            ran.update(mgr.run_due_tasks(now[0]))
        assert {"RLMCopyTask", "RLMExpirationTask", "kafka-log-retention"} <= ran

        remote = rlm.remote_log_segments(log)
        local_start = log.segments[0].base_offset
        assert len(remote) >= 20 and local_deleted >= 10, (len(remote), local_deleted)
        assert log.num_segments <= 1 + (LOCAL_RETENTION_MS // ROUND_MS + 2)
        # remote segments: contiguous from offset 0 to the active segment (every rolled segment
        # is below the last stable offset now); the store holds exactly their objects
        assert remote[0].start_offset == 0
        assert all(b.start_offset == a.end_offset + 1 for a, b in zip(remote, remote[1:]))
        assert remote[-1].end_offset == log.active_segment.base_offset - 1
        objects = _store_objects(seaweedfs, prefix)
        assert set(objects) == {_name(m) for m in remote}
        assert [objects[_name(m)] for m in remote] == \
            [m.segment_size_in_bytes for m in remote]
        # local retention (local.retention.ms, from the data): the remote-only segment just below
        # the local log start was over it, the first local segment is not
        ts = [x.timestamp for x in w.written]
        assert max(ts[:local_start]) < now[0] - LOCAL_RETENTION_MS
        first_local_end = log.segments[1].base_offset if log.num_segments > 1 else len(ts)
        assert max(ts[local_start:first_local_end]) >= now[0] - LOCAL_RETENTION_MS - INTERVAL_MS
        # the aborted transactions lie on both sides of the boundary, some in remote-only segments
        aborted = {x.offset for x in w.written if x.aborted}
        assert min(aborted) < local_start < max(aborted)

        cache = RemoteIndexCache(rlm.rsm, data)
        with UnifiedLog(log, rlm.topic_id_partition(log), rlm.rlmm, rlm.rsm, cache) as ulog:
            assert ulog.log_start_offset == 0 and ulog.local_log_start_offset == local_start
            # both isolation levels, from offset 0, across the tiers
            uncommitted = [(x.offset, x.value) for x in w.written if x.value is not None]
            committed = [(x.offset, x.value) for x in w.written if x.value is not None and not x.aborted]
            assert _sweep(ulog, 0, "read_uncommitted") == uncommitted
            assert _sweep(ulog, 0, "read_committed") == committed
            assert len(committed) < len(uncommitted)

            # offsets_for_times: in remote-only segments, in local ones, between the tiers
            targets = {T0 - 1, ts[0], ts[local_start - 1], ts[local_start - 1] + 5, ts[local_start],
                       ts[-1], ts[-1] + 1}
            markers = [x for x in w.written if x.value is None]
            targets |= {m.timestamp for m in markers[:4]} | {m.timestamp - 3 for m in markers[-4:]}
            rnd = random.Random(19)
            targets |= {ts[rnd.randrange(0, local_start)] + rnd.choice((0, 4)) for _ in range(12)}
            targets |= {ts[rnd.randrange(local_start, len(ts))] + rnd.choice((0, 4)) for _ in range(6)}
            assert any(w.first_at_or_after(t) in {m.offset for m in markers} and
                       w.first_at_or_after(t) < local_start for t in targets), "no marker answer in the remote tier"
            for t in sorted(targets):
                assert ulog.offsets_for_times(t) == w.first_at_or_after(t), t
            # ListOffsets: -2 earliest over both tiers, -4 earliest local, -5 latest tiered
            assert ulog.fetch_offset_by_timestamp(-2).offset == 0
            assert ulog.fetch_offset_by_timestamp(-4).offset == local_start
            assert ulog.fetch_offset_by_timestamp(-5).offset == log.active_segment.base_offset - 1
            assert ulog.fetch_offset_by_timestamp(-1).offset == len(w.written)

            # remote expiry by retention.ms: the remote segments whose every record is older than
            # now - retention.ms go, oldest first; the rest of the store, the metadata and the
            # local segments stay as they were
            locals_before = [s.base_offset for s in log.segments]
            cutoff = T0 + 20 * ROUND_MS + 500
            expect_gone = [m for m in remote if max(ts[m.start_offset:m.end_offset + 1]) < cutoff]
            assert 2 <= len(expect_gone) < len(remote) and expect_gone == remote[:len(expect_gone)]
            now[0] += INTERVAL_MS
            # (local.retention.ms -2: as retention.ms, so local retention keeps the local segments)
            mgr.alter_topic_config(TOPIC, {"retention.ms": str(now[0] - cutoff), "local.retention.ms": "-2"})
            assert "RLMExpirationTask" in mgr.run_due_tasks(now[0])
            kept = remote[len(expect_gone):]
            after = rlm.remote_log_segments(log)
            assert [m.remote_log_segment_id for m in after] == [m.remote_log_segment_id for m in kept]
            assert set(_store_objects(seaweedfs, prefix)) == \
                {_name(m) for m in kept}
            states = {m.remote_log_segment_id: m.state for m in rlm.rlmm.list_remote_log_segments(ulog.tip)}
            assert all(states.get(m.remote_log_segment_id, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)
                       is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED for m in expect_gone)
            assert [s.base_offset for s in log.segments] == locals_before
            first = kept[0].start_offset
            assert ulog.log_start_offset == first and ulog.fetch_offset_by_timestamp(-2).offset == first
            with pytest.raises(OffsetOutOfRangeError):
                ulog.fetch(0)
            assert _sweep(ulog, first, "read_committed") == [c for c in committed if c[0] >= first]
            assert ulog.offsets_for_times(T0) == first

            # remote expiry by retention.bytes (retention.ms off): the size of both tiers (remote
            # segments from the store's object sizes, plus the local segments not copied: the
            # active one) over retention.bytes; the oldest go while the excess covers their size
            objects = _store_objects(seaweedfs, prefix)
            sizes = [objects[_name(m)] for m in kept]
            local_only = sum(s.size for s in log.segments if s.base_offset > kept[-1].end_offset)
            excess = sizes[0] + sizes[1] + sizes[2] // 2                 # the first two go, not the third
            retention_bytes = sum(sizes) + local_only - excess
            now[0] += INTERVAL_MS
            mgr.alter_topic_config(TOPIC, {"retention.ms": "-1", "retention.bytes": str(retention_bytes)})
            assert "RLMExpirationTask" in mgr.run_due_tasks(now[0])
            after = rlm.remote_log_segments(log)
            assert [m.remote_log_segment_id for m in after] == [m.remote_log_segment_id for m in kept[2:]]
            assert set(_store_objects(seaweedfs, prefix)) == \
                {_name(m) for m in kept[2:]}
            assert [s.base_offset for s in log.segments] == locals_before
            first = kept[2].start_offset
            assert ulog.log_start_offset == first
            assert _sweep(ulog, first, "read_uncommitted") == [u for u in uncommitted if u[0] >= first]
        cache.close()


def _metadata_events(data: Path) -> list:
    """Every event in the data dir's ``__remote_log_metadata`` partitions, decoded from Kafka's bytes."""
    events = []
    for directory in sorted(data.glob(f"{REMOTE_LOG_METADATA_TOPIC_NAME}-*")):
        with Log.open(directory, read_only=True) as log:
            events += [deserialize(v) for v in log.read(0, max_bytes=1 << 30).column("value").to_pylist()]
    return events


def test_disabling_tiering_copy_first_then_delete_on_disable_on_seaweedfs(tmp_path: Path, seaweedfs) -> None:
    """Kafka's way out of tiered storage, on SeaweedFS: ``remote.log.copy.disable=true`` (the tier
    turns read-only: nothing more is copied, local retention falls back to ``retention.*``, the
    remote segments still read); ``remote.storage.enable=false`` alone is refused with Kafka's
    message (LogConfig.validateTurningOffRemoteStorageWithDelete) and changes nothing; with
    ``remote.log.delete.on.disable=true`` the partition's remote data is deleted
    (RemoteLogManager.deleteRemoteLogPartition: every segment DELETE_SEGMENT_STARTED, its objects
    deleted, DELETE_SEGMENT_FINISHED) and the log is its local segments alone."""
    prefix = f"off-{uuid.uuid4().hex[:12]}"
    data = tmp_path / "data"
    props = {"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": str(INTERVAL_MS),
             "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
             **{f"rsm.config.{k}": v for k, v in seaweedfs.storage_configs(prefix).items()}}
    now = [T0]
    config = LogManagerConfig(retention_check_interval_ms=INTERVAL_MS, initial_task_delay_ms=INTERVAL_MS)
    with LogManager.open(data, clock=lambda: now[0], config=config,
                         remote_log_manager_config=RemoteLogManagerConfig.from_properties(props)) as mgr:
        mgr.alter_topic_config(TOPIC, {"remote.storage.enable": "true", "segment.bytes": "3000", "retention.ms": "-1",
                                       "local.retention.ms": str(LOCAL_RETENTION_MS), "file.delete.delay.ms": "0"})
        log = mgr.get_or_create_log((TOPIC, 0))
        rlm = mgr.remote_log_manager
        w = Writer(log)

        def rounds(first: int, n: int) -> None:
            for r in range(first, first + n):
                w.round(r)
                now[0] = T0 + (r + 1) * ROUND_MS
                mgr.run_due_tasks(now[0])

        rounds(0, 24)
        tiered = rlm.remote_log_segments(log)
        local_start = log.segments[0].base_offset
        assert len(tiered) >= 5 and local_start > 0 and set(_store_objects(seaweedfs, prefix)) == \
            {_name(m) for m in tiered}

        def uncommitted() -> list[tuple[int, bytes]]:
            return [(x.offset, x.value) for x in w.written if x.value is not None]

        # read-only tier: copying stops, the remote segments still read, local retention keeps
        # everything (retention.ms -1, as local.retention.ms -2 now means)
        mgr.alter_topic_config(TOPIC, {"remote.log.copy.disable": "true", "local.retention.ms": "-2"})
        rounds(24, 16)
        assert rlm.remote_log_segments(log) == tiered and set(_store_objects(seaweedfs, prefix)) == \
            {_name(m) for m in tiered}
        assert log.segments[0].base_offset == local_start and log.num_segments > 6
        cache = RemoteIndexCache(rlm.rsm, data)
        with UnifiedLog(log, rlm.topic_id_partition(log), rlm.rlmm, rlm.rsm, cache) as ulog:
            assert _sweep(ulog, 0, "read_uncommitted") == uncommitted()
            tip = ulog.tip

            # turning it off without deleting is refused, naming both ways out; nothing changes
            with pytest.raises(InvalidConfigError, match="remote.log.delete.on.disable=true"):
                mgr.alter_topic_config(TOPIC, {"remote.storage.enable": "false"})
            assert log.config.remote_storage_enable and mgr.topic_config(TOPIC).remote_storage_enable
            assert rlm.remote_log_segments(log) == tiered

            mgr.alter_topic_config(TOPIC, {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"})
            assert not log.config.remote_storage_enable
            assert list(rlm.rlmm.list_remote_log_segments(tip)) == []
            assert _store_objects(seaweedfs, prefix) == {}
            fs = seaweedfs.filesystem()
            left = fs.get_file_info(pafs.FileSelector(f"{seaweedfs.bucket}/{prefix}", recursive=True,
                                                      allow_not_found=True))
            assert [i.path for i in left if i.type == pafs.FileType.File] == [], "objects left in the store"
            assert log.highest_offset_in_remote_storage == -1
            # the log is its local segments: offsets below them are gone
            assert ulog.log_start_offset == local_start and ulog.fetch_offset_by_timestamp(-5).offset == -1
            with pytest.raises(OffsetOutOfRangeError):
                ulog.fetch(0)
            assert _sweep(ulog, local_start, "read_uncommitted") == [u for u in uncommitted() if u[0] >= local_start]
        cache.close()
        rounds(40, 4)                                   # the tasks go on and copy nothing
        assert list(rlm.rlmm.list_remote_log_segments(tip)) == [] and _store_objects(seaweedfs, prefix) == {}
    # what the metadata topic holds, in Kafka's bytes: each copy added (STARTED), FINISHED, then
    # DELETE_SEGMENT_STARTED and DELETE_SEGMENT_FINISHED
    by_segment: dict = {}
    for e in _metadata_events(data):
        by_segment.setdefault(e.remote_log_segment_id, []).append(e.state)
    assert set(by_segment) == {m.remote_log_segment_id for m in tiered}
    assert all(states == [RemoteLogSegmentState.COPY_SEGMENT_STARTED, RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                          RemoteLogSegmentState.DELETE_SEGMENT_STARTED, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED]
               for states in by_segment.values()), by_segment

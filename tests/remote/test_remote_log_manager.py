"""Kafka's RemoteLogManager (KIP-405) in kafkalog: the tiered-storage settings and their
validation, the copier (rolled segments below the last stable offset, STARTED -> copy ->
FINISHED), local retention that deletes only what is remote, remote expiry by time and by size
over both tiers, orphans of a killed copy or deletion cleaned up, SIGKILL at random moments, the
store going away during a copy, the LogManager's scheduled tasks and ``kafkalog tier``.

Stores: a local folder, and a real S3 server (SeaweedFS from the session fixture). Crash trials:
a few by default, more with KAFKALOG_SLOW=1."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.config import LogConfig
from storage_core.errors import InvalidConfigError, RemoteStorageError
from storage_core.format import decode_batches, encode_batches
from storage_core.log import Log
from storage_core.remote import (RLM_COPY_TASK, RLM_EXPIRATION_TASK, PyArrowRemoteStorageManager,
                                 RemoteLogManager, RemoteLogManagerConfig, RemoteLogSegmentState,
                                 TopicBasedRemoteLogMetadataManager)
from storage_core.server import LogManager, LogManagerConfig
from storage_core.tools.cli import main as cli_main

sys.path.insert(0, str(Path(__file__).parent))
import tier_runner  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).parent / "tier_runner.py"
SLOW = os.environ.get("KAFKALOG_SLOW") == "1"
TRIALS = 12 if SLOW else 2


# ------------------------------------------------------------------------------------- helpers

@pytest.fixture(params=["folder", "s3"])
def rsm_configs(request, tmp_path: Path):
    """The storage manager's settings: a local folder, or a prefix of the SeaweedFS bucket."""
    if request.param == "folder":
        return {"storage.uri": str(tmp_path / "store")}
    server = request.getfixturevalue("seaweedfs")
    return server.storage_configs(prefix=f"rlm-{tmp_path.name}")


def open_rlm(data: Path, rsm_configs: dict) -> RemoteLogManager:
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(data), "remote.log.metadata.topic.num.partitions": "2"})
    return RemoteLogManager(PyArrowRemoteStorageManager(rsm_configs), rlmm)


def append(log: Log, batches: int, ts: int | None = None) -> None:
    for _ in range(batches):
        start = log.log_end_offset
        values = [tier_runner.VALUE + str(start + i).encode() for i in range(tier_runner.RECORDS_PER_BATCH)]
        cols = {"value": pa.array(values, pa.binary())}
        if ts is not None:
            cols["timestamp"] = pa.array([ts] * len(values), pa.int64())
        log.append(pa.table(cols))


def remote_objects(rlm: RemoteLogManager) -> set[str]:
    """Names of the ``.log`` objects in the store (what a reader of the store could find)."""
    import pyarrow.fs as pafs
    infos = rlm.rsm.filesystem.get_file_info(pafs.FileSelector(rlm.rsm.root, recursive=True, allow_not_found=True))
    return {i.base_name for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".log")}


def read_both_tiers(log: Log, rlm: RemoteLogManager) -> list[tuple[int, bytes]]:
    """Every record a reader gets: the finished remote segments below the local log start
    (through the store), then the local log."""
    local_start = log.segments[0].base_offset
    out: list[tuple[int, bytes]] = []
    for md in rlm.remote_log_segments(log):
        with rlm.rsm.fetch_log_segment(md, 0) as stream:
            table = decode_batches(stream.readall())
        for off, val in zip(table.column("offset").to_pylist(), table.column("value").to_pylist()):
            if off < local_start and md.start_offset <= off <= md.end_offset:
                out.append((off, val))
    offset = local_start
    while offset < log.log_end_offset:
        fetched = log.fetch(offset, max_bytes=1 << 20)
        t = fetched.table
        out += list(zip(t.column("offset").to_pylist(), t.column("value").to_pylist()))
        offset = fetched.next_offset
    return out


def check_tiers(log: Log, rlm: RemoteLogManager, first_offset: int = 0) -> None:
    """Finished remote segments and the local log cover ``[first_offset, LEO)``: every offset
    once, in order, with its own value; the store holds exactly the finished segments' objects."""
    remote = rlm.remote_log_segments(log)
    for a, b in zip(remote, remote[1:]):
        assert b.start_offset == a.end_offset + 1, f"remote segments overlap or leave a gap: {a} {b}"
    if remote:
        assert remote[0].start_offset == first_offset
        assert remote[-1].end_offset + 1 >= log.segments[0].base_offset, "gap between the tiers"
    else:
        assert log.segments[0].base_offset == first_offset
    records = read_both_tiers(log, rlm)
    assert [o for o, _ in records] == list(range(first_offset, log.log_end_offset))
    assert all(v == tier_runner.VALUE + str(o).encode() for o, v in records)
    listed = {m.remote_log_segment_id for m in rlm.rlmm.list_remote_log_segments(rlm.topic_id_partition(log))}
    assert listed == {m.remote_log_segment_id for m in remote}, "an unfinished copy or deletion is left"
    from storage_core.remote import RemoteLogSegmentFileType, segment_file_name
    assert remote_objects(rlm) == {segment_file_name(m, RemoteLogSegmentFileType.SEGMENT) for m in remote}


# ------------------------------------------------------------------------------------- config

def test_topic_settings_defaults_and_validation() -> None:
    c = LogConfig()
    assert (c.remote_storage_enable, c.local_retention_ms, c.local_retention_bytes, c.remote_log_copy_disable,
            c.remote_log_delete_on_disable) == (False, -2, -2, False, False)
    assert (c.effective_local_retention_ms, c.effective_local_retention_bytes) == (c.retention_ms, c.retention_bytes)
    c = LogConfig.from_properties({"remote.storage.enable": "true", "local.retention.ms": "1000",
                                   "retention.bytes": "5000", "local.retention.bytes": "5000"})
    assert (c.effective_local_retention_ms, c.effective_local_retention_bytes) == (1000, 5000)
    assert c.to_properties(only_changed=True)["local.retention.ms"] == "1000"
    c = LogConfig.from_properties({"remote.storage.enable": "true", "remote.log.delete.on.disable": "true"})
    assert c.remote_log_delete_on_disable and c.to_properties()["remote.log.delete.on.disable"] == "true"
    bad = [({"local.retention.ms": "-3"}, "local.retention.ms", "must be >= -2"),
           ({"remote.storage.enable": "true", "local.retention.ms": "-1"}, "local.retention.ms", "must not be -1"),
           ({"remote.storage.enable": "true", "retention.ms": "100", "local.retention.ms": "101"},
            "local.retention.ms", "must not be more than retention.ms"),
           ({"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "200"},
            "local.retention.bytes", "must not be more than retention.bytes"),
           ({"remote.storage.enable": "true", "cleanup.policy": "compact"}, "cleanup.policy", "cleanup.policy=delete"),
           ({"remote.storage.enable": "true", "remote.log.copy.disable": "true", "local.retention.ms": "5"},
            "local.retention.ms", "remote.log.copy.disable")]
    for props, key, text in bad:
        with pytest.raises(InvalidConfigError) as e:
            LogConfig.from_properties(props)
        assert key in str(e.value) and text in str(e.value), (props, str(e.value))
    # without remote storage, local values are not checked against retention.* (Kafka: only for tiered topics)
    assert LogConfig.from_properties({"retention.ms": "100", "local.retention.ms": "101"}).local_retention_ms == 101
    # unlimited total retention: any local value
    assert LogConfig(remote_storage_enable=True, retention_ms=-1, local_retention_ms=-1).local_retention_ms == -1


def test_broker_settings() -> None:
    c = RemoteLogManagerConfig.from_properties({})
    assert (c.remote_log_storage_system_enable, c.remote_log_manager_task_interval_ms,
            c.remote_log_storage_manager_impl_prefix, c.remote_log_metadata_manager_impl_prefix,
            c.remote_log_metadata_custom_metadata_max_bytes) == (False, 30000, "rsm.config.", "rlmm.config.", 128)
    c = RemoteLogManagerConfig.from_properties({
        "remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "1000", "node.id": "3",
        "remote.log.metadata.manager.class.name": "TopicBasedRemoteLogMetadataManager",
        "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
        "remote.log.metadata.custom.metadata.max.bytes": "64", "remote.log.storage.manager.class.name":
            "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
        "remote.log.storage.manager.impl.prefix": "s.", "s.storage.uri": "/x", "rsm.config.dir": "/y",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "5"})
    assert c.remote_log_storage_system_enable and c.remote_log_manager_task_interval_ms == 1000
    assert c.remote_log_metadata_custom_metadata_max_bytes == 64
    assert c.rsm_configs() == {"storage.uri": "/x", "broker.id": 3, "node.id": 3}
    assert c.rlmm_configs("/d") == {"remote.log.metadata.topic.num.partitions": "5", "broker.id": 3, "node.id": 3,
                                    "log.dir": "/d"}
    # the data directory wins over a prefixed log.dir (RemoteLogManager.configureRLMM puts it after);
    # found by fuzzing: `kafkalog tier --property rlmm.config.log.dir=/etc` wrote a metadata topic there
    prefixed = RemoteLogManagerConfig.from_properties({"rlmm.config.log.dir": "/etc"})
    assert prefixed.rlmm_configs("/d")["log.dir"] == "/d"
    for props, key in [({"remote.log.manager.task.interval.ms": "0"}, "remote.log.manager.task.interval.ms"),
                       ({"remote.log.storage.system.enable": "yes"}, "remote.log.storage.system.enable"),
                       ({"remote.log.storage.manager.class.name": "com.example.S3RSM"},
                        "remote.log.storage.manager.class.name")]:
        with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
            RemoteLogManagerConfig.from_properties(props)


# ------------------------------------------------------------------------------------- copy, local retention

def test_copy_and_local_retention_delete_only_what_is_remote(tmp_path: Path, rsm_configs: dict) -> None:
    """A topic appended far beyond its local retention: the copier tiers every rolled segment
    (in order, never the active one), local retention keeps the segments not copied yet and
    deletes the copied ones it breaches, and both tiers together hold every record once."""
    data = tmp_path / "data"
    cfg = LogConfig(segment_bytes=2000, remote_storage_enable=True, retention_ms=-1, local_retention_bytes=4000)
    with Log.open(data / "tiered-0", cfg) as log, open_rlm(data, rsm_configs) as rlm:
        append(log, 40)
        bases = [s.base_offset for s in log.segments]
        assert len(bases) > 8
        # nothing copied: local retention deletes nothing though the log is far over local.retention.bytes
        assert log.size > 3 * 4000 and log.delete_old_segments() == 0
        assert [s.base_offset for s in log.segments] == bases
        r = rlm.copy_log_segments_to_remote(log)
        remote = rlm.remote_log_segments(log)
        assert [(m.start_offset, m.end_offset) for m in remote] == [(a, b - 1) for a, b in zip(bases, bases[1:])]
        assert r.segments_copied == len(bases) - 1 and rlm.highest_offset_in_remote_storage(log) == bases[-1] - 1
        assert all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in remote)
        # more appends roll more segments that are not copied: local retention must keep them
        append(log, 12)
        uncopied = [s.base_offset for s in log.segments if s.base_offset >= bases[-1]]
        assert len(uncopied) > 2
        deleted = log.delete_old_segments()
        kept = [s.base_offset for s in log.segments]
        assert deleted == len(bases) - 1 and kept == uncopied, "only the copied segments go"
        check_tiers(log, rlm)
        # a second pass copies the new rolled segments (from the highest copied offset + 1)
        r = rlm.copy_log_segments_to_remote(log)
        assert r.segments_copied == len(uncopied) - 1 and r.orphans_deleted == 0
        log.delete_old_segments()
        assert log.size <= 4000 + log.active_segment.size + 2000
        check_tiers(log, rlm)


def test_copy_stops_at_last_stable_offset(tmp_path: Path) -> None:
    """An open transaction pins the last stable offset: segments at or above it are not copied."""
    data = tmp_path / "data"
    cfg = LogConfig(segment_bytes=2000, remote_storage_enable=True, retention_ms=-1)
    with Log.open(data / "tiered-0", cfg) as log, open_rlm(data, {"storage.uri": str(tmp_path / "s")}) as rlm:
        append(log, 10)
        values = [tier_runner.VALUE + str(log.log_end_offset + i).encode() for i in range(5)]
        log.append_raw(encode_batches(pa.table({"value": pa.array(values, pa.binary())}), producer_id=7,
                                      producer_epoch=0, base_sequence=0, transactional=True))
        lso = log.last_stable_offset
        assert lso < log.log_end_offset
        append(log, 12)
        rlm.copy_log_segments_to_remote(log)
        remote = rlm.remote_log_segments(log)
        assert remote and all(m.end_offset < lso for m in remote)
        nexts = [s.base_offset for s in log.segments if s.base_offset > remote[-1].end_offset]
        assert nexts[0] == remote[-1].end_offset + 1 and (len(nexts) < 2 or nexts[1] > lso)


# ------------------------------------------------------------------------------------- remote expiry

def test_remote_expiry_by_time(tmp_path: Path, rsm_configs: dict) -> None:
    """retention.ms over remote segments: those whose largest timestamp is older go, oldest first,
    nothing else; the log start offset moves past them."""
    data = tmp_path / "data"
    now = 10_000_000
    cfg = LogConfig(segment_bytes=2000, remote_storage_enable=True, retention_ms=100_000, local_retention_ms=1000)
    with Log.open(data / "tiered-0", cfg) as log, open_rlm(data, rsm_configs) as rlm:
        append(log, 12, ts=now - 500_000)          # expired
        old_end = log.log_end_offset
        log.roll()
        append(log, 12, ts=now - 50_000)           # within retention.ms, over local.retention.ms
        log.roll()
        append(log, 2, ts=now)
        rlm.copy_log_segments_to_remote(log)
        before = rlm.remote_log_segments(log)
        expired = [m for m in before if m.end_offset < old_end]
        assert expired and len(expired) < len(before)
        r = rlm.cleanup_expired_remote_log_segments(log, now)
        after = rlm.remote_log_segments(log)
        assert r.remote_segments_deleted == len(expired)
        assert [m.remote_log_segment_id for m in after] == [m.remote_log_segment_id for m in before[len(expired):]]
        assert log.delete_old_segments(now) > 0                # local.retention.ms: the copied ones
        assert log.segments[0].base_offset >= old_end
        check_tiers(log, rlm, first_offset=old_end)


def test_remote_expiry_by_size_over_both_tiers(tmp_path: Path, rsm_configs: dict) -> None:
    """retention.bytes counts remote segments plus local segments not copied yet (Kafka's
    RetentionSizeData): the oldest remote segments go while the excess covers their size."""
    data = tmp_path / "data"
    cfg = LogConfig(segment_bytes=2000, remote_storage_enable=True, retention_ms=-1, retention_bytes=9000,
                    local_retention_bytes=3000)
    with Log.open(data / "tiered-0", cfg) as log, open_rlm(data, rsm_configs) as rlm:
        append(log, 30)
        rlm.copy_log_segments_to_remote(log)
        append(log, 3)                                          # not copied
        before = rlm.remote_log_segments(log)
        highest = before[-1].end_offset
        local_only = sum(s.size for s in log.segments if s.base_offset > highest)
        excess = local_only + sum(m.segment_size_in_bytes for m in before) - 9000
        expected = []
        for m in before:
            if excess - m.segment_size_in_bytes < 0:
                break
            excess -= m.segment_size_in_bytes
            expected.append(m.remote_log_segment_id)
        assert 0 < len(expected) < len(before)
        r = rlm.cleanup_expired_remote_log_segments(log)
        after = rlm.remote_log_segments(log)
        assert r.remote_segments_deleted == len(expected)
        assert [m.remote_log_segment_id for m in before if m not in after] == expected
        assert local_only + sum(m.segment_size_in_bytes for m in after) <= 9000 + after[0].segment_size_in_bytes
        first = after[0].start_offset
        assert log.log_start_offset <= first or log.segments[0].base_offset >= first
        log.delete_old_segments()
        check_tiers(log, rlm, first_offset=first)


# ------------------------------------------------------------------------------------- crashes

def test_orphans_of_a_copy_and_a_deletion_are_cleaned(tmp_path: Path) -> None:
    """Fault injection (the states a process killed half way leaves, written by hand): a copy
    marked COPY_SEGMENT_STARTED with part of its objects uploaded, and a copy marked
    DELETE_SEGMENT_STARTED after its copy failed. Neither is readable; the next pass deletes both from the store, marks
    them DELETE_SEGMENT_FINISHED, and copies the segment again under a new id."""
    data = tmp_path / "data"
    cfg = LogConfig(segment_bytes=2000, remote_storage_enable=True, retention_ms=-1)
    with Log.open(data / "tiered-0", cfg) as log, open_rlm(data, {"storage.uri": str(tmp_path / "s")}) as rlm:
        append(log, 12)
        seg, nxt = log.segments[0], log.segments[1]
        tip = rlm.topic_id_partition(log)
        from storage_core.remote import (LogSegmentData, RemoteLogSegmentId, RemoteLogSegmentMetadata,
                                         RemoteLogSegmentMetadataUpdate)
        half = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), 0, nxt.base_offset - 1, 0, 0, 0,
                                        seg.size, {0: 0})
        rlm.rlmm.add_remote_log_segment_metadata(half)
        # its objects, but the .log (the copy's last object) never arrived
        rlm.rsm.copy_log_segment_data(half, LogSegmentData(seg.log_path, seg.offset_index.path, seg.time_index.path,
                                                           None, seg.offset_index.path, b"0\n0\n"))
        rlm.rsm.filesystem.delete_file(rlm.rsm.object_path(half, __import__(
            "storage_core.remote", fromlist=["RemoteLogSegmentFileType"]).RemoteLogSegmentFileType.SEGMENT))
        doomed = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), 0, nxt.base_offset - 1, 0, 0, 0,
                                          seg.size, {0: 0})
        rlm.rlmm.add_remote_log_segment_metadata(doomed)
        rlm.rsm.copy_log_segment_data(doomed, LogSegmentData(seg.log_path, seg.offset_index.path,
                                                             seg.time_index.path, None, seg.offset_index.path, b""))
        # a failed copy whose deletion was cut short (COPY_SEGMENT_STARTED -> DELETE_SEGMENT_STARTED)
        rlm.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            doomed.remote_log_segment_id, 0, None, RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 0))
        assert rlm.remote_log_segments(log) == []                    # neither is readable
        assert rlm.highest_offset_in_remote_storage(log) == -1 and log.delete_old_segments() == 0
        r = rlm.copy_log_segments_to_remote(log)
        assert r.orphans_deleted == 2 and r.segments_copied == len(log.segments) - 1
        ids = {m.remote_log_segment_id for m in rlm.remote_log_segments(log)}
        assert half.remote_log_segment_id not in ids and doomed.remote_log_segment_id not in ids
        check_tiers(log, rlm)
        import pyarrow.fs as pafs
        left = [i.base_name for i in rlm.rsm.filesystem.get_file_info(pafs.FileSelector(rlm.rsm.root, recursive=True))
                if i.type == pafs.FileType.File]
        from storage_core.checkpoint import topic_id_to_str
        for md in (half, doomed):
            assert not any(topic_id_to_str(md.remote_log_segment_id.id) in name for name in left)


def test_orphan_of_a_copy_killed_before_its_first_object(tmp_path: Path) -> None:
    """Fault injection: COPY_SEGMENT_STARTED durable, the process killed before the store saw
    anything (not even the partition's folder): the next pass cleans it up and copies."""
    data = tmp_path / "data"
    cfg = LogConfig(segment_bytes=2000, remote_storage_enable=True, retention_ms=-1)
    with Log.open(data / "tiered-0", cfg) as log, open_rlm(data, {"storage.uri": str(tmp_path / "s")}) as rlm:
        append(log, 12)
        from storage_core.remote import RemoteLogSegmentId, RemoteLogSegmentMetadata
        nxt = log.segments[1].base_offset
        rlm.rlmm.add_remote_log_segment_metadata(RemoteLogSegmentMetadata(
            RemoteLogSegmentId.generate_new(rlm.topic_id_partition(log)), 0, nxt - 1, 0, 0, 0, 100, {0: 0}))
        assert not Path(rlm.rsm.partition_path(rlm.topic_id_partition(log))).exists()
        r = rlm.copy_log_segments_to_remote(log)
        assert r.orphans_deleted == 1 and r.segments_copied == len(log.segments) - 1
        check_tiers(log, rlm)


def _trial(tmp_path: Path, rsm_configs: dict, mode: str, seed: int) -> None:
    spec = {"dir": str(tmp_path), "rsm": rsm_configs, "mode": mode}
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(RUNNER), json.dumps(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert line.startswith(b"pass"), proc.stderr.read().decode()[-3000:]
        # a random moment: copies, deletions and appends are all under way by then
        time.sleep(random.Random(seed).uniform(0.0, 1.5))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-3000:]
    log, rlm = tier_runner.open_all(spec)
    with log, rlm:
        # a reader right after the restart sees no orphan: only finished copies are listed readable
        for md in rlm.remote_log_segments(log):
            assert md.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        rlm.copy_log_segments_to_remote(log)          # cleans orphans, retries the copy
        if mode == "delete":
            rlm.cleanup_expired_remote_log_segments(log)
        first = rlm.log_start_offset(log)
        check_tiers(log, rlm, first_offset=first)
        if mode == "copy":
            assert first == 0, "nothing may be lost without remote retention"


@pytest.mark.parametrize("mode", ["copy", "delete"])
def test_sigkill_during_copy_and_deletion(tmp_path: Path, mode: str) -> None:
    """SIGKILL at a random moment of a process that appends, copies (and expires), then a
    restart: nothing lost, nothing duplicated, no orphan left in the metadata or the store."""
    for trial in range(TRIALS):
        d = tmp_path / f"t{trial}"
        _trial(d, {"storage.uri": str(d / "store")}, mode, seed=trial * 7 + len(mode))


def test_sigkill_during_copy_to_s3(tmp_path: Path, seaweedfs) -> None:
    for trial in range(max(1, TRIALS // 2)):
        d = tmp_path / f"t{trial}"
        _trial(d, seaweedfs.storage_configs(prefix=f"crash-{tmp_path.name}-{trial}"), "delete", seed=trial)


# ------------------------------------------------------------------------------------- the store goes away

def test_store_stopped_during_copy(tmp_path: Path, seaweedfs) -> None:
    """The S3 server stopped: the copy fails with an error naming the segment and the store, the
    local log is untouched, nothing unfinished is readable; back up, the next pass copies. (The
    COPY_SEGMENT_STARTED is mirrored into the store before the metadata topic records it, so a
    store that is down leaves no orphan to clean.)"""
    data = tmp_path / "data"
    cfg = LogConfig(segment_bytes=2000, remote_storage_enable=True, retention_ms=-1, local_retention_bytes=2000)
    configs = seaweedfs.storage_configs(prefix=f"stop-{tmp_path.name}")
    with Log.open(data / "tiered-0", cfg) as log, open_rlm(data, configs) as rlm:
        append(log, 20)
        files = {p.name: p.read_bytes() for p in (data / "tiered-0").iterdir() if p.suffix == ".log"}
        seaweedfs.stop()
        try:
            with pytest.raises(RemoteStorageError) as e:
                rlm.copy_log_segments_to_remote(log)
            text = str(e.value)
            assert "offsets 0-" in text and "tiered-0" in text and seaweedfs.endpoint in text, text
            assert rlm.remote_log_segments(log) == []
            assert log.delete_old_segments() == 0
            assert {p.name: p.read_bytes() for p in (data / "tiered-0").iterdir() if p.suffix == ".log"} == files
        finally:
            seaweedfs.start()
        r = rlm.copy_log_segments_to_remote(log)
        assert r.orphans_deleted == 0 and r.segments_copied == len(files) - 1
        log.delete_old_segments()
        check_tiers(log, rlm)


# ------------------------------------------------------------------------------------- LogManager, CLI

def test_log_manager_runs_the_tasks(tmp_path: Path) -> None:
    data = tmp_path / "data"
    t = [1_000_000]
    props = {"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "1000",
             "rsm.config.storage.uri": str(tmp_path / "store"),
             "rlmm.config.remote.log.metadata.topic.num.partitions": "2"}
    cfg = LogConfig(segment_bytes=2000, remote_storage_enable=True, retention_ms=-1, local_retention_bytes=4000)
    with LogManager.open(data, clock=lambda: t[0], config=LogManagerConfig(retention_check_interval_ms=1000),
                         remote_log_manager_config=RemoteLogManagerConfig.from_properties(props)) as mgr:
        assert {RLM_COPY_TASK, RLM_EXPIRATION_TASK} <= set(mgr.scheduler.tasks)
        log = mgr.get_or_create_log(("tiered", 0), cfg)
        append(log, 40)
        t[0] += 60_000
        ran = mgr.run_due_tasks(t[0])
        assert RLM_COPY_TASK in ran
        rlm = mgr.remote_log_manager
        assert rlm.highest_offset_in_remote_storage(log) == log.active_segment.base_offset - 1
        t[0] += 60_000
        mgr.run_due_tasks(t[0])                              # retention: local copies go
        assert log.size <= 4000 + log.active_segment.size + 2000
        check_tiers(log, rlm)
    # restarted: the metadata topic is the RLMM's again, nothing is copied twice
    with LogManager.open(data, clock=lambda: t[0],
                         remote_log_manager_config=RemoteLogManagerConfig.from_properties(props)) as mgr:
        assert not any(tp.topic == "__remote_log_metadata" for tp in mgr.logs)
        log = mgr.get_log(("tiered", 0))
        assert mgr.remote_log_manager.copy_log_segments_to_remote(log).segments_copied == 0
        check_tiers(log, mgr.remote_log_manager)


def test_cli_tier(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Log.open(data / "orders-0", LogConfig(segment_bytes=2000)) as log:
        append(log, 30)
        segments = log.num_segments
    assert cli_main(["config", str(data), "--topic", "orders", "--set", "remote.storage.enable=true",
                     "--set", "local.retention.bytes=4000", "--set", "segment.bytes=2000"]) == 0
    args = ["tier", str(data), "--property", f"rsm.config.storage.uri={tmp_path / 'store'}",
            "--property", "rlmm.config.remote.log.metadata.topic.num.partitions=2"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert cli_main([*args, "--json"]) == 0
    doc = json.loads(out.getvalue())
    (row,) = doc["partitions"]
    assert row["topic"] == "orders" and row["segments_copied"] == segments - 1 and row["error"] is None
    assert row["local_segments_deleted"] > 0 and doc["totals"]["segments_copied"] == segments - 1
    assert "orders-0: copied offsets 0-" in err.getvalue()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli_main(args) == 0
    assert "orders-0: copied 0 segments" in out.getvalue() and "tier: 0 segments" in out.getvalue()
    with Log.open(data / "orders-0", LogConfig(segment_bytes=2000, remote_storage_enable=True)) as log, \
            open_rlm(data, {"storage.uri": str(tmp_path / "store")}) as rlm:
        check_tiers(log, rlm)

"""LogManager on real data directories: parallel loading, the -delete/-stray/-future directories,
the clean-shutdown marker, the offset checkpoints of a whole dir, per-topic overrides, the
scheduler's tasks driven by an injected clock, asynchronous deletion, the cleaner wiring and the
metrics. Tests that mirror a line of kafka_test_checklist.md name its bracketed Kafka test; the
others name the LogManagerTest case they follow, where there is one.

Checklist §7 lines about retention and cleaning inside one log are in test_retention.py,
test_cleaner*.py; here only their LogManager-level wiring: which task runs retention for which
policy, the cleaner's checkpoint losing a deleted partition, compact,delete topics.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from storage_core.checkpoint import (CLEAN_SHUTDOWN_FILE, CLEANER_OFFSET_CHECKPOINT,
                                      LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                                      OffsetCheckpointFile, TopicPartition, log_future_dir_name,
                                      log_stray_dir_name)
from storage_core.config import CleanerConfig, LogConfig
from storage_core.server import TOPIC_CONFIG_FILE, ConfigRepository
from storage_core.errors import InvalidConfigError, LogLockedError
from storage_core.log import Log
from storage_core.server import (CLEANER_TASK, DELETE_LOGS_TASK, FLUSH_TASK, LOCK_FILE,
                                  LOG_START_OFFSET_TASK, RECOVERY_POINT_TASK, RETENTION_TASK,
                                  LogManager, LogManagerConfig)
from storage_core.server import KafkaScheduler, LogManagerSnapshot, ManagerMetrics

NOW = 1_800_000_000_000
ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def records(n: int, start: int = 0, ts: int | None = None, keys: list[bytes] | None = None,
            values: list[bytes | None] | None = None) -> pa.Table:
    stamps = np.full(n, ts, np.int64) if ts is not None else NOW + np.arange(start, start + n)
    return pa.table({"key": keys or [b"k%04d" % i for i in range(start, start + n)],
                     "value": values or [b"v%04d" % i for i in range(start, start + n)],
                     "timestamp": pa.array(stamps, pa.int64())})


def segments(log: Log, count: int, per: int = 5, ts: int | None = None) -> None:
    """``count`` segments of ``per`` records each (the last one active)."""
    for i in range(count):
        log.append(records(per, log.log_end_offset, ts))
        if i < count - 1:
            log.roll()


def open_mgr(dirs, clock: Clock, **kwargs) -> LogManager:
    kwargs.setdefault("cleaner_config", CleanerConfig(enable_cleaner=False))
    return LogManager.open(dirs if isinstance(dirs, list) else [dirs], clock=clock, **kwargs)


def checkpoint_lines(path: Path) -> list[str]:
    return path.read_text().split("\n")


# ---------------------------------------------------------------------------------- loading

def test_loads_many_partitions_in_parallel(tmp_path: Path, clock: Clock, monkeypatch) -> None:
    """``LogManager.loadLogs``: every topic-partition dir opened on a pool of
    num.recovery.threads.per.data.dir threads, each with its records and offsets."""
    with open_mgr(tmp_path, clock) as mgr:
        for p in range(24):
            mgr.get_or_create_log(("orders", p)).append(records(p + 1))
    threads: set[str] = set()
    real_open = Log.open.__func__

    def spying_open(cls, *args, **kwargs):
        threads.add(threading.current_thread().name)
        time.sleep(0.01)                  # overlap the loads so several workers take part
        return real_open(cls, *args, **kwargs)

    monkeypatch.setattr(Log, "open", classmethod(spying_open))
    with open_mgr(tmp_path, clock, config=LogManagerConfig(num_recovery_threads_per_data_dir=4)) as mgr:
        assert len(mgr.logs) == 24
        for p in range(24):
            log = mgr.get_log(("orders", p))
            assert (log.log_start_offset, log.log_end_offset) == (0, p + 1)
            assert log.read(0).column("value").to_pylist()[-1] == b"v%04d" % p
    assert len(threads) > 1 and all(t.startswith("log-recovery-") for t in threads)


def test_two_log_managers_using_the_same_dir_fail(tmp_path: Path, clock: Clock) -> None:
    """[LogManagerTest.testTwoLogManagersUsingSameDirFails] Kafka's ``.lock`` file in the data dir."""
    with open_mgr(tmp_path, clock):
        assert (tmp_path / LOCK_FILE).exists()
        with pytest.raises(LogLockedError, match="Failed to acquire lock"):
            open_mgr(tmp_path, clock)
    with open_mgr(tmp_path, clock):      # released at shutdown
        pass


def test_special_and_foreign_directories(tmp_path: Path, clock: Clock, caplog) -> None:
    """-delete dirs are deleted file.delete.delay.ms after start-up, -stray dirs left alone, -future
    dirs loaded as future logs, anything else ignored with a warning (files in the root too)."""
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        log.append(records(3))
    doomed = tmp_path / "gone-0.0123456789abcdef0123456789abcdef-delete"
    doomed.mkdir()
    (doomed / "00000000000000000000.log").write_bytes(b"")
    stray = tmp_path / log_stray_dir_name("old", 1)
    stray.mkdir()
    future = tmp_path / log_future_dir_name("t", 1)
    with Log.open(future, clock=clock) as log:
        log.append(records(2))
    (tmp_path / "not a partition").mkdir()
    (tmp_path / "lost+found").mkdir()
    (tmp_path / "README").write_text("hello")
    caplog.set_level(logging.WARNING, "storage_core.server")
    with open_mgr(tmp_path, clock) as mgr:
        assert set(mgr.logs) == {TopicPartition("t", 0)}
        assert mgr.get_log(("t", 1)) is None
        assert mgr.get_log(("t", 1), is_future=True).log_end_offset == 2
        assert mgr.stray_dirs == [stray]
        assert mgr.logs_to_be_deleted == [doomed]
        assert "lost+found" in caplog.text and "not a partition" in caplog.text
        mgr.delete_logs(NOW + 59_999)
        assert doomed.exists()
        assert mgr.delete_logs(NOW + 60_000) == [doomed]
        assert not doomed.exists() and stray.exists()
    cp = OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT).read()
    assert cp == {TopicPartition("t", 0): 3, TopicPartition("t", 1): 2}   # future logs too, as Kafka


def test_kafkas_own_directories_are_left_alone_and_odd_names_ignored(tmp_path: Path, clock: Clock,
                                                                      caplog) -> None:
    """As ``LogManager.loadLogs`` lists a log dir: KRaft's ``__cluster_metadata-0`` is not loaded
    (so no retention of kafkalog's deletes its segments) and the tiered-storage index cache is
    not a partition, both without a warning; names ``LocalLog.parseTopicPartitionName`` refuses
    (a partition beyond a Java int, "²") are ignored with one, and so are digits of other
    scripts ("t-\u0664", which Java's parseInt reads as partition 4: ``java_int`` takes ASCII
    digits only)."""
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        log.append(records(3))
    with Log.open(tmp_path / "__cluster_metadata-0", clock=clock) as log:
        segments(log, 3, ts=NOW - 30 * 86_400_000)          # older than any retention.ms below
    (tmp_path / "remote-log-index-cache").mkdir()
    odd = ["t-2147483648", "t-\u0664", "t-\u00b2", "t-1 ", "-1"]
    for name in odd:
        (tmp_path / name).mkdir()
    caplog.set_level(logging.WARNING, "storage_core.server")
    with open_mgr(tmp_path, clock, default_config=LogConfig(retention_ms=1000, file_delete_delay_ms=0)) as mgr:
        assert set(mgr.logs) == {TopicPartition("t", 0)} and not mgr.load_errors
        mgr.cleanup_logs(NOW + 86_400_000)
        mgr.delete_expired_files(NOW + 2 * 86_400_000)
    warned = [r.getMessage() for r in caplog.records]
    assert not [w for w in warned if "__cluster_metadata" in w or "remote-log-index-cache" in w], warned
    for name in odd:
        assert any(str(tmp_path / name) in w and "not a topic-partition" in w for w in warned), (name, warned)
    with Log.open(tmp_path / "__cluster_metadata-0", read_only=True) as log:
        assert len(log.segments) == 3 and log.log_start_offset == 0


def test_duplicate_partition_dir_is_refused_by_name(tmp_path: Path, clock: Clock) -> None:
    """A partition in two data dirs (LogManager.loadLog: "Duplicate log directories"): the second
    is not loaded and is reported, the first stays."""
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        with Log.open(d / "t-0", clock=clock) as log:
            log.append(records(1))
    with open_mgr([a, b], clock) as mgr:
        assert len(mgr.logs) == 1
        [(path, error)] = mgr.load_errors.items()
        assert "Duplicate log directories for t-0" in error and path.name == "t-0"


def test_least_loaded_assignment(tmp_path: Path, clock: Clock) -> None:
    """[LogManagerTest.testLeastLoadedAssignment] new logs go to the data dir with the fewest."""
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    with open_mgr(dirs, clock) as mgr:
        created = [mgr.get_or_create_log(("t", p)).dir.parent for p in range(6)]
    assert sorted(created) == sorted(dirs * 2)


# ---------------------------------------------------------------------------------- checkpoints

def test_checkpoints_written_for_the_whole_dir_in_kafkas_format(tmp_path: Path, clock: Clock) -> None:
    """[LogManagerTest.testCheckpointRecoveryPoints] recovery-point-offset-checkpoint lists every
    log (``0\\n<n>\\n<topic> <p> <offset>\\n``); log-start-offset-checkpoint only the logs whose start
    moved past their first segment. Both read back by the next start."""
    with open_mgr(tmp_path, clock) as mgr:
        for p in range(3):
            segments(mgr.get_or_create_log(("a.b", p)), 2, per=4)
        mgr.get_log(("a.b", 1)).delete_records_before(6)
        mgr.checkpoint_log_recovery_offsets()      # the recovery points of unflushed logs
        mgr.checkpoint_log_start_offsets()
        assert checkpoint_lines(tmp_path / LOG_START_OFFSET_CHECKPOINT) == ["0", "1", "a.b 1 6", ""]
    lines = checkpoint_lines(tmp_path / RECOVERY_POINT_CHECKPOINT)
    assert lines[:2] == ["0", "3"] and lines[-1] == ""
    assert sorted(lines[2:5]) == ["a.b 0 8", "a.b 1 8", "a.b 2 8"]
    assert (tmp_path / LOG_START_OFFSET_CHECKPOINT).read_bytes() == b"0\n1\na.b 1 6\n"
    assert not list(tmp_path.glob("*.tmp"))
    with open_mgr(tmp_path, clock) as mgr:
        assert mgr.get_log(("a.b", 1)).log_start_offset == 6
        assert [mgr.get_log(("a.b", p)).recovery_point for p in range(3)] == [8, 8, 8]


def test_checkpoint_task_runs_when_due(tmp_path: Path, clock: Clock) -> None:
    """kafka-recovery-point-checkpoint / kafka-log-start-offset-checkpoint: first after
    log.initial.task.delay.ms, then every 60 s (log.flush.offset.checkpoint.interval.ms)."""
    with open_mgr(tmp_path, clock) as mgr:
        log = mgr.get_or_create_log(("t", 0))
        log.append(records(5))
        log.flush()
        assert RECOVERY_POINT_TASK not in mgr.run_due_tasks(NOW + 29_999)
        assert not (tmp_path / RECOVERY_POINT_CHECKPOINT).exists()
        ran = mgr.run_due_tasks(NOW + 30_000)
        assert {RECOVERY_POINT_TASK, LOG_START_OFFSET_TASK} <= set(ran)
        assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\nt 0 5\n"
        log.append(records(5, 5))
        log.flush()
        assert RECOVERY_POINT_TASK not in mgr.run_due_tasks(NOW + 89_999)
        assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\nt 0 5\n"
        assert RECOVERY_POINT_TASK in mgr.run_due_tasks(NOW + 90_000)
        assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\nt 0 10\n"


def test_unreadable_checkpoint_is_treated_as_empty(tmp_path: Path, clock: Clock) -> None:
    """LogManager.loadLogs: a recovery-point checkpoint that cannot be read means recover from 0
    (not a failed start); the next write replaces it."""
    with open_mgr(tmp_path, clock) as mgr:
        mgr.get_or_create_log(("t", 0)).append(records(4))
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_text("7\nnonsense\n")
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    with open_mgr(tmp_path, clock) as mgr:
        assert mgr.get_log(("t", 0)).log_end_offset == 4
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\nt 0 4\n"


# ---------------------------------------------------------------------------------- clean shutdown

def test_clean_shutdown_marker_lifecycle(tmp_path: Path, clock: Clock) -> None:
    """[CleanShutdownFileHandlerTest.testCleanShutdownFileBasic] written at shutdown as Kafka 3.7+
    writes it, after the checkpoints; deleted at start-up (so a crash while running makes the
    next start unclean); a clean start skips recovery."""
    with open_mgr(tmp_path, clock) as mgr:
        assert not mgr.had_clean_shutdown(tmp_path)
        mgr.get_or_create_log(("t", 0)).append(records(3))
        assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    assert marker.read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    assert marker.stat().st_mtime_ns >= (tmp_path / RECOVERY_POINT_CHECKPOINT).stat().st_mtime_ns
    with open_mgr(tmp_path, clock) as mgr:
        assert mgr.had_clean_shutdown(tmp_path)
        assert not marker.exists()
        assert mgr.metrics().dir(tmp_path).had_clean_shutdown
    assert marker.exists()


CRASH_SCRIPT = """
import os, sys
import pyarrow as pa
from storage_core.config import CleanerConfig
from storage_core.server import LogManager
mgr = LogManager.open([sys.argv[1]], cleaner_config=CleanerConfig(enable_cleaner=False))
log = mgr.get_or_create_log(("t", 0))
log.append(pa.table({"value": [b"x"] * 5}))
log.flush()
with open(log.segments[-1].log_path, "ab") as f:      # a torn write at the crash
    f.write(b"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x09garbage")
os._exit(0)                                            # no shutdown: a crash
"""


def test_unclean_start_after_a_crash_recovers(tmp_path: Path, clock: Clock) -> None:
    """[LogLoaderTest.testLogRecoveryIsCalledUponBrokerCrash] a process that dies with the manager
    open leaves no marker (it was deleted at start-up): the next start is unclean and recovery
    truncates the torn tail."""
    with open_mgr(tmp_path, clock):
        pass
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    out = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    with open_mgr(tmp_path, clock) as mgr:
        assert not mgr.had_clean_shutdown(tmp_path)
        log = mgr.get_log(("t", 0))
        assert log.log_end_offset == 5
        assert log.segments[-1].size == log.segments[-1].log_path.stat().st_size   # tail truncated
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_partition_written_after_the_marker_is_recovered(tmp_path: Path, clock: Clock, caplog) -> None:
    """The marker vouches only for what the manager closed: a partition another process wrote
    after it (the Spark sink, say) is recovered, the others load clean."""
    with open_mgr(tmp_path, clock) as mgr:
        for p in range(2):
            mgr.get_or_create_log(("t", p)).append(records(3))
    time.sleep(0.02)
    seg = tmp_path / "t-1" / "00000000000000000000.log"
    with open(seg, "ab") as f:
        f.write(b"\x00" * 20)           # garbage after the marker was written
    caplog.set_level(logging.WARNING, "storage_core.server")
    with open_mgr(tmp_path, clock) as mgr:
        assert mgr.had_clean_shutdown(tmp_path)
        assert mgr.get_log(("t", 1)).log_end_offset == 3
    assert "t-1 was modified after the clean shutdown marker" in caplog.text
    assert "t-0 was modified" not in caplog.text
    with Log.open(tmp_path / "t-1", read_only=True) as log:
        assert log.segments[0].size == seg.stat().st_size       # the garbage was truncated


def test_no_marker_when_a_partition_failed_to_load(tmp_path: Path, clock: Clock) -> None:
    """LogManager.shutdown writes the marker only if the dir had one or loaded all its logs."""
    with open_mgr(tmp_path, clock) as mgr:
        mgr.get_or_create_log(("t", 0)).append(records(1))
        mgr.get_or_create_log(("t", 1)).append(records(1))
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    holder = Log.open(tmp_path / "t-1", clock=clock)     # another writer holds t-1
    try:
        with open_mgr(tmp_path, clock) as mgr:
            assert list(mgr.logs) == [TopicPartition("t", 0)]
            assert [p.name for p in mgr.load_errors] == ["t-1"]
    finally:
        holder.close()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    # the partition it could not load keeps its checkpoint entry
    assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT).read()[TopicPartition("t", 1)] == 1


# ---------------------------------------------------------------------------------- topic configs

def test_topic_overrides_are_kept_in_the_data_dir(tmp_path: Path, clock: Clock) -> None:
    """Per-topic overrides: validated, written atomically to kafkalog-topic-configs.json, applied
    to the topic's live logs and to logs created or loaded later; defaults + overrides."""
    defaults = LogConfig(retention_ms=1000)
    with open_mgr(tmp_path, clock, default_config=defaults) as mgr:
        log = mgr.get_or_create_log(("orders", 0))
        assert log.config.retention_ms == 1000 and log.config.cleanup_policy == "delete"
        cfg = mgr.alter_topic_config("orders", {"cleanup.policy": "compact", "segment.bytes": 4096})
        assert cfg.compact and cfg.segment_bytes == 4096 and cfg.retention_ms == 1000
        assert log.config.compact
        assert mgr.get_or_create_log(("orders", 1)).config.segment_bytes == 4096
        assert mgr.get_or_create_log(("other", 0)).config.segment_bytes == LogConfig().segment_bytes
    doc = json.loads((tmp_path / TOPIC_CONFIG_FILE).read_text())
    assert doc == {"version": 1, "topics": {"orders": {"cleanup.policy": "compact", "segment.bytes": "4096"}}}
    assert not (tmp_path / (TOPIC_CONFIG_FILE + ".tmp")).exists()
    with open_mgr(tmp_path, clock, default_config=defaults) as mgr:
        assert mgr.get_log(("orders", 0)).config.compact
        assert not mgr.get_log(("other", 0)).config.compact
        with pytest.raises(InvalidConfigError, match="'segment.byte'"):
            mgr.alter_topic_config("orders", {"segment.byte": "1"})
        with pytest.raises(InvalidConfigError, match="min.cleanable.dirty.ratio"):
            mgr.alter_topic_config("orders", {"min.cleanable.dirty.ratio": "1.2"})
        with pytest.raises(InvalidConfigError, match="cleanup.policy"):
            mgr.alter_topic_config("orders", {"cleanup.policy": "foobar"})
        assert mgr.topic_config("orders").compact           # nothing written by a refused change
        mgr.alter_topic_config("orders", delete=["cleanup.policy"])
        assert not mgr.get_log(("orders", 0)).config.compact
    assert ConfigRepository([tmp_path]).topic_overrides("orders") == {"segment.bytes": "4096"}


def test_topic_config_validation_rejects_what_kafka_rejects(tmp_path: Path) -> None:
    """[LogConfigTest.testFromPropsInvalid/testInvalidCompactionLagConfig] through the repository:
    ratio outside [0,1], a policy other than compact/delete lists, min lag > max lag."""
    repo = ConfigRepository([tmp_path])
    for props in ({"min.cleanable.dirty.ratio": "-0.1"}, {"min.cleanable.dirty.ratio": "1.2"},
                  {"cleanup.policy": "true"}, {"cleanup.policy": "foobar"},
                  {"min.compaction.lag.ms": "200", "max.compaction.lag.ms": "100"}):
        with pytest.raises(InvalidConfigError):
            repo.alter_topic_config("t", props)
    assert not (tmp_path / TOPIC_CONFIG_FILE).exists()
    assert repo.alter_topic_config("t", {"cleanup.policy": "compact,delete"}).delete


# ---------------------------------------------------------------------------------- tasks

def test_time_based_flush(tmp_path: Path, clock: Clock) -> None:
    """[LogManagerTest.testTimeBasedFlush] kafka-log-flusher flushes a log whose last flush is
    flush.ms or more ago, and only that one; the recovery point follows."""
    with open_mgr(tmp_path, clock, config=LogManagerConfig(initial_task_delay_ms=0)) as mgr:
        mgr.alter_topic_config("fast", {"flush.ms": "1000"})
        fast = mgr.get_or_create_log(("fast", 0))
        slow = mgr.get_or_create_log(("slow", 0))
        fast.append(records(3))
        slow.append(records(3))
        assert FLUSH_TASK in mgr.run_due_tasks(NOW + 999)
        assert fast.recovery_point == 0 and fast.metrics.flushes == 0
        clock.advance(1000)
        assert FLUSH_TASK in mgr.run_due_tasks()
        assert fast.recovery_point == 3 and fast.metrics.flushes == 1
        assert slow.recovery_point == 0 and slow.metrics.flushes == 0


def test_retention_task_deletes_expired_segments_then_files(tmp_path: Path, clock: Clock) -> None:
    """[LogManagerTest.testCleanupExpiredSegments] + [UnifiedLogTest.testAsyncDelete]: the retention
    task (every log.retention.check.interval.ms) renames expired segments .deleted at once; the
    files go file.delete.delay.ms later; the log start offset moves, appends go on."""
    mgr_cfg = LogManagerConfig(initial_task_delay_ms=0, retention_check_interval_ms=10_000)
    with open_mgr(tmp_path, clock, config=mgr_cfg, default_config=LogConfig(retention_ms=5000)) as mgr:
        log = mgr.get_or_create_log(("t", 0))
        segments(log, 3, ts=NOW - 10_000)
        names = {p.name for p in (tmp_path / "t-0").glob("0*.log")}
        assert len(names) == 3
        mgr.run_due_tasks(NOW)
        assert [s.base_offset for s in log.segments] == [15]       # rolled, then all 3 deleted
        assert log.log_start_offset == 15 and log.log_end_offset == 15
        deleted = sorted(p.name for p in (tmp_path / "t-0").glob("*.deleted"))
        assert {n + ".deleted" for n in names} <= set(deleted)
        assert any(n.endswith(".index.deleted") for n in deleted)
        mgr.run_due_tasks(NOW + 59_999)
        assert (tmp_path / "t-0" / "00000000000000000000.log.deleted").exists()
        mgr.run_due_tasks(NOW + 60_000)                         # kafka-delete-logs removes them
        assert not list((tmp_path / "t-0").glob("*.deleted"))
        log.append(records(1))
        assert log.log_end_offset == 16
        m = mgr.metrics()
        assert m.partition("t", 0).segments_deleted == 3 and m.retention_segments_deleted == 3
        assert m.dir(tmp_path).bytes_deleted == m.retention_bytes_deleted > 0


def test_size_retention_through_the_manager(tmp_path: Path, clock: Clock) -> None:
    """[LogManagerTest.testCleanupSegmentsToMaintainSize] cleanup_logs keeps a log within
    retention.bytes by whole segments and reports what it removed."""
    with open_mgr(tmp_path, clock) as mgr:
        log = mgr.get_or_create_log(("t", 0))
        segments(log, 4)
        seg_size = log.segments[0].size
        mgr.alter_topic_config("t", {"retention.bytes": str(2 * seg_size)})
        [result] = mgr.cleanup_logs(NOW)
        assert result.topic_partition == ("t", 0)
        assert (result.segments_deleted, result.bytes_deleted) == (2, 2 * seg_size)
        assert (result.log_start_offset_before, result.log_start_offset_after) == (0, 10)
        assert mgr.cleanup_logs(NOW) == []


def test_retention_leaves_compacted_logs_to_the_cleaner(tmp_path: Path, clock: Clock) -> None:
    """[UnifiedLogTest.shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete] at the manager:
    with a cleaner, kafka-log-retention takes only non-compacted logs
    (pauseCleaningForNonCompactedPartitions); the cleaner's round applies a compact,delete topic's
    retention [LogCleanerParameterizedIntegrationTest.testCleansCombinedCompactAndDeleteTopic]."""
    cfg = LogConfig(retention_ms=1000, file_delete_delay_ms=0)
    with open_mgr(tmp_path, clock, default_config=cfg, cleaner_config=CleanerConfig()) as mgr:
        mgr.alter_topic_config("both", {"cleanup.policy": "compact,delete"})
        mgr.alter_topic_config("comp", {"cleanup.policy": "compact"})
        for topic in ("del", "both", "comp"):
            segments(mgr.get_or_create_log((topic, 0)), 3, ts=NOW - 5000)
        assert mgr.cleaner is not None
        results = mgr.cleanup_logs(NOW)
        assert [r.topic_partition.topic for r in results] == ["del"]
        assert mgr.get_log(("both", 0)).num_segments == 3
        mgr.compact(NOW)                             # a cleaner round: compacted logs' retention
        assert mgr.get_log(("both", 0)).log_start_offset == 15
        assert mgr.get_log(("comp", 0)).log_start_offset == 0   # compact only: no time retention
        assert mgr.cleaner.cleaner_manager.cleaning_state(("del", 0)) is None   # resumed


def test_retention_without_cleaner_covers_every_policy(tmp_path: Path, clock: Clock) -> None:
    """With the cleaner disabled nothing else would apply a compact,delete topic's retention (or
    any compacted log's log-start-offset deletion): cleanup_logs takes every log, each by its
    own policy [UnifiedLogTest.shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete]."""
    cfg = LogConfig(retention_ms=1000)
    with open_mgr(tmp_path, clock, default_config=cfg) as mgr:
        mgr.alter_topic_config("both", {"cleanup.policy": "compact,delete"})
        mgr.alter_topic_config("comp", {"cleanup.policy": "compact"})
        for topic in ("both", "comp"):
            segments(mgr.get_or_create_log((topic, 0)), 3, ts=NOW - 5000)
        mgr.get_log(("comp", 0)).delete_records_before(7)
        results = {r.topic_partition.topic: r for r in mgr.cleanup_logs(NOW)}
        assert results["both"].segments_deleted == 3
        assert "comp" not in results                      # its breached segment went at delete-records
        assert mgr.get_log(("comp", 0)).num_segments == 2


def test_delete_log_renames_then_deletes_after_delay(tmp_path: Path, clock: Clock) -> None:
    """[LogManagerTest.testFileReferencesAfterAsyncDelete] asyncDelete: the dir is renamed
    <topic>-<p>.<uuid>-delete at once, leaves the checkpoints, and is removed by kafka-delete-logs
    after file.delete.delay.ms; a partition of the same name can be created meanwhile."""
    with open_mgr(tmp_path, clock, config=LogManagerConfig(initial_task_delay_ms=0)) as mgr:
        for p in range(2):
            mgr.get_or_create_log(("t", p)).append(records(2))
        mgr.get_log(("t", 1)).delete_records_before(1)
        mgr.checkpoint_log_recovery_offsets()
        renamed = mgr.delete_log(("t", 1))
        assert renamed.name.startswith("t-1.") and renamed.name.endswith("-delete") and renamed.is_dir()
        assert not (tmp_path / "t-1").exists() and mgr.get_log(("t", 1)) is None
        assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT).read() == {("t", 0): 0}
        assert (tmp_path / LOG_START_OFFSET_CHECKPOINT).read_text() == "0\n0\n"
        assert mgr.get_or_create_log(("t", 1)).log_end_offset == 0
        assert DELETE_LOGS_TASK in mgr.run_due_tasks(NOW + 59_999) and renamed.exists()
        clock.advance(60_000)
        mgr.run_due_tasks()
        assert not renamed.exists()


def test_scheduler_runs_on_a_thread(tmp_path: Path) -> None:
    """start(): the tasks run on the scheduler's thread with the real clock."""
    cfg = LogManagerConfig(initial_task_delay_ms=0, flush_recovery_offset_checkpoint_interval_ms=50)
    mgr = LogManager.open([tmp_path], config=cfg, background=True, cleaner_config=CleanerConfig(enable_cleaner=False))
    try:
        log = mgr.get_or_create_log(("t", 0))
        log.append(pa.table({"value": [b"x"] * 3}))
        log.flush()
        deadline = time.monotonic() + 10
        cp = tmp_path / RECOVERY_POINT_CHECKPOINT
        while time.monotonic() < deadline and not (cp.exists() and cp.read_text() == "0\n1\nt 0 3\n"):
            time.sleep(0.02)
        assert cp.read_text() == "0\n1\nt 0 3\n"
        assert mgr.scheduler.task(RECOVERY_POINT_TASK).runs >= 1
    finally:
        mgr.shutdown()
    assert not mgr.scheduler.is_started
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


# ---------------------------------------------------------------------------------- cleaner

def keyed(log: Log, n_keys: int, rounds: int) -> None:
    for r in range(rounds):
        keys = [b"key-%d" % k for k in range(n_keys)]
        log.append(pa.table({"key": keys, "value": [b"v%d-%d" % (r, k) for k in range(n_keys)],
                             "timestamp": pa.array([NOW] * n_keys, pa.int64())}))
        log.roll()


def test_compaction_through_the_manager(tmp_path: Path, clock: Clock) -> None:
    """[LogCleanerParameterizedIntegrationTest.cleanerTest] the manager's cleaner compacts a keyed
    topic until its checkpoint reaches the active segment; the log shrinks and holds the latest
    value per key; a deleted partition leaves cleaner-offset-checkpoint."""
    with open_mgr(tmp_path, clock, cleaner_config=CleanerConfig()) as mgr:
        mgr.alter_topic_config("k", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        for p in range(2):
            keyed(mgr.get_or_create_log(("k", p)), 20, 3)
        before = {p: mgr.get_log(("k", p)).size for p in range(2)}
        rounds = mgr.compact(NOW)
        assert sorted(r.topic_partition.partition for r in rounds) == [0, 1]
        for r in rounds:
            assert r.records_removed == 40 and r.size_after < r.size_before
        cps = OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read()
        for p in range(2):
            log = mgr.get_log(("k", p))
            assert cps[TopicPartition("k", p)] == log.active_segment.base_offset == 60
            assert log.size < before[p]
            table = log.read(log.log_start_offset, max_bytes=1 << 20)
            assert table.column("offset").to_pylist() == list(range(40, 60))
            assert set(table.column("value").to_pylist()) == {b"v2-%d" % k for k in range(20)}
        assert mgr.compact(NOW) == []            # nothing left to clean
        m = mgr.metrics()
        assert m.cleaner["manual_rounds"] == 2 and m.cleaner["manual_records_removed"] == 80
        assert m.partition("k", 0).cleaner["first_dirty_offset"] == 60
        assert "max-dirty-percent" in m.cleaner
        mgr.delete_log(("k", 1))
        assert set(OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read()) == {("k", 0)}


def test_compact_one_topic_pauses_the_others(tmp_path: Path, clock: Clock) -> None:
    """compact(topics=...): only those topics are cleaned; the others' cleaning is paused for the
    run (abortAndPauseCleaning) and resumed after."""
    with open_mgr(tmp_path, clock, cleaner_config=CleanerConfig()) as mgr:
        for topic in ("a", "b"):
            mgr.alter_topic_config(topic, {"cleanup.policy": "compact"})
            keyed(mgr.get_or_create_log((topic, 0)), 10, 3)
        rounds = mgr.compact(NOW, topics=["b"])
        assert [r.topic_partition for r in rounds] == [("b", 0)]
        assert mgr.cleaner.cleaner_manager.cleaning_state(("a", 0)) is None
        assert [r.topic_partition for r in mgr.compact(NOW)] == [("a", 0)]


def test_cleaner_task_and_max_compaction_lag(tmp_path: Path, clock: Clock) -> None:
    """[LogCleanerIntegrationTest.testMaxLogCompactionLag] driven by the scheduler: with
    min.cleanable.dirty.ratio 1.0 nothing is cleaned until max.compaction.lag.ms has passed for
    the dirty segments; then the kafka-log-cleaner task cleans them."""
    with open_mgr(tmp_path, clock, cleaner_config=CleanerConfig(backoff_ms=1000),
                  config=LogManagerConfig(initial_task_delay_ms=0)) as mgr:
        mgr.alter_topic_config("k", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1.0",
                                     "max.compaction.lag.ms": "60000"})
        log = mgr.get_or_create_log(("k", 0))
        keyed(log, 10, 3)
        size = log.size
        assert CLEANER_TASK in mgr.run_due_tasks(NOW + 1000)
        assert log.size == size
        assert CLEANER_TASK in mgr.run_due_tasks(NOW + 61_000)
        assert log.size < size
        assert log.read(log.log_start_offset).num_rows == 10


# ---------------------------------------------------------------------------------- metrics

def test_metrics_per_partition_and_dir(tmp_path: Path, clock: Clock) -> None:
    """mgr.metrics(): sizes, segment counts, offsets, append/flush counts, rates and times per
    partition; sums per data dir; the scheduler's tasks; all plain dataclasses / dicts."""
    with open_mgr(tmp_path, clock) as mgr:
        a = mgr.get_or_create_log(("a", 0))
        segments(a, 3)
        a.flush()
        mgr.get_or_create_log(("b", 0)).append(records(4))
        m = mgr.metrics()
        pa_ = m.partition("a", 0)
        assert (pa_.num_segments, pa_.log_start_offset, pa_.log_end_offset) == (3, 0, 15)
        assert pa_.size == a.size > 0 and pa_.appends == 3 and pa_.appended_records == 15
        assert pa_.flushes >= 1 and pa_.flush_time_ms_total > 0 and pa_.append_rate > 0
        d = m.dir(tmp_path)
        assert (d.partitions, d.num_segments, d.appended_records) == (2, 4, 19)
        assert d.size == a.size + mgr.get_log(("b", 0)).size
        as_dict = m.as_dict()
        json.dumps(as_dict)                        # plain data all the way down
        assert {t["name"] for t in as_dict["tasks"]} >= {RETENTION_TASK, FLUSH_TASK, RECOVERY_POINT_TASK}


def test_snapshot_is_what_metrics_read(tmp_path: Path, clock: Clock) -> None:
    """mgr.snapshot(): the public state metrics are built from (ManagerMetrics.collect reads only
    the snapshot): logs, dirs, retention totals, hand-run compaction rounds, the cleaner."""
    with open_mgr(tmp_path, clock, cleaner_config=CleanerConfig()) as mgr:
        mgr.alter_topic_config("k", {"cleanup.policy": "compact"})
        keyed(mgr.get_or_create_log(("k", 0)), 10, 3)
        mgr.get_or_create_log(("d", 0)).append(records(2))
        rounds = mgr.compact(NOW)
        snap = mgr.snapshot()
        assert isinstance(snap, LogManagerSnapshot)
        assert set(snap.logs) == {("k", 0), ("d", 0)} and snap.future_logs == {}
        assert snap.log_dirs == [tmp_path.absolute()] and snap.had_clean_shutdown == {tmp_path.absolute(): False}
        assert snap.cleaner is mgr.cleaner and snap.compaction_rounds == rounds and len(rounds) == 1
        assert snap.uncleanable_partitions == set() and snap.load_errors == {}
        assert {t.name for t in snap.tasks} >= {RETENTION_TASK, FLUSH_TASK}
        assert set(snap.opened_at) == {log.dir for log in snap.all_logs}
        snap.logs.clear()                              # a copy: the manager keeps its logs
        assert set(mgr.logs) == {("k", 0), ("d", 0)}
        from_snapshot = ManagerMetrics.collect(mgr.snapshot()).as_dict()
        direct = mgr.metrics().as_dict()
        for m in (from_snapshot, direct):          # rates and uptimes move with the clock
            for part in m["partitions"]:
                for key in [k for k in part if k.endswith("_rate") or k == "uptime_s"]:
                    part.pop(key)
            for d in m["dirs"]:
                for key in [k for k in d if k.endswith("_rate")]:
                    d.pop(key)
        assert from_snapshot == direct
        assert direct["cleaner"]["manual_rounds"] == 1
        assert direct["partitions"][1]["cleaner"]["state"] is None    # ("k", 0), sorted after "d"


# ---------------------------------------------------------------------------------- scheduler

def test_scheduler_runs_due_tasks_by_hand() -> None:
    """KafkaScheduler with an injected clock (Kafka's MockScheduler): one-shot and periodic tasks,
    each run once per run_due, a failing task logged and kept, cancel."""
    clock = Clock(0)
    s = KafkaScheduler(clock=clock)
    calls: list[str] = []
    s.schedule("periodic", lambda: calls.append("p"), delay_ms=10, period_ms=100)
    s.schedule_once("once", lambda: calls.append("o"), delay_ms=50)
    s.schedule("boom", lambda: 1 / 0, delay_ms=0, period_ms=50)
    assert s.run_due(5) == ["boom"]
    assert s.run_due(10) == ["periodic"] and calls == ["p"]
    assert s.run_due(60) == ["once", "boom"]           # both due at 50: in scheduling order
    assert s.task("once") is None and s.task("boom").failures == 2
    assert isinstance(s.task("boom").last_error, ZeroDivisionError)
    assert s.run_due(1000) == ["boom", "periodic"]     # far behind: once, not ten times
    assert s.task("periodic").next_run_ms == 1010
    assert s.cancel("boom") and s.run_due(2000) == ["periodic"]
    assert calls == ["p", "o", "p", "p"]


def test_scheduler_thread_start_and_shutdown() -> None:
    s = KafkaScheduler()
    ran = threading.Event()
    s.schedule("t", ran.set, delay_ms=0, period_ms=10)
    with s:
        s.start()
        assert ran.wait(5)
        with pytest.raises(RuntimeError):
            s.start()
    assert not s.is_started
    runs = s.task("t").runs
    time.sleep(0.05)
    assert s.task("t").runs == runs


def test_log_files_stay_in_kafkas_layout(tmp_path: Path, clock: Clock) -> None:
    """Everything the manager adds to a data dir root is a file a broker ignores: the lock, the
    checkpoints, the marker and the topic configuration file; no directories."""
    with open_mgr(tmp_path, clock) as mgr:
        mgr.alter_topic_config("t", {"retention.ms": "1000"})
        mgr.get_or_create_log(("t", 0)).append(records(1))
    entries = {p.name: p.is_dir() for p in tmp_path.iterdir()}
    assert entries == {"t-0": True, LOCK_FILE: False, RECOVERY_POINT_CHECKPOINT: False,
                       LOG_START_OFFSET_CHECKPOINT: False, CLEAN_SHUTDOWN_FILE: False, TOPIC_CONFIG_FILE: False}
    assert os.stat(tmp_path / TOPIC_CONFIG_FILE).st_size > 0


def test_truncate_to_pauses_cleaning_and_lowers_the_cleaner_checkpoint(tmp_path: Path, clock: Clock) -> None:
    """LogManager.truncateTo: cleaning of the log is paused around a truncation below its active
    segment and its cleaner checkpoint lowered to the new active segment (maybeTruncateCheckpoint);
    the recovery points are checkpointed."""
    with open_mgr(tmp_path, clock, cleaner_config=CleanerConfig()) as mgr:
        # segments too small to be grouped: the cleaner keeps one segment per segment
        mgr.alter_topic_config("k", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                     "segment.bytes": "300"})
        log = mgr.get_or_create_log(("k", 0))
        keyed(log, 10, 4)
        mgr.compact(NOW)
        assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read() == {("k", 0): 40}
        assert [s.base_offset for s in log.segments] == [0, 10, 20, 30, 40]
        # at a segment boundary (a truncation that empties a segment whose first offsets were
        # cleaned away ends the log at that segment's base offset, see the report)
        mgr.truncate_to({("k", 0): 30})
        assert log.log_end_offset == 30 and log.active_segment.base_offset == 30
        assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read() == {("k", 0): 30}
        assert mgr.cleaner.cleaner_manager.cleaning_state(("k", 0)) is None
        assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT).read()[("k", 0)] <= 30


def test_background_cleaner_threads(tmp_path: Path) -> None:
    """LogManager.open(background=True): the scheduler's thread and the cleaner's own threads
    (LogCleaner.startup); a compacted topic gets cleaned without anyone driving it; shutdown
    stops both and still writes the clean marker."""
    mgr = LogManager.open([tmp_path], background=True, cleaner_config=CleanerConfig(backoff_ms=20))
    try:
        log = mgr.get_or_create_log(("k", 0))
        keyed(log, 10, 3)
        # compacted only now, so the thread sees all three segments at once (cleaning between
        # the rounds could leave the last one below min.cleanable.dirty.ratio)
        mgr.alter_topic_config("k", {"cleanup.policy": "compact"})
        assert mgr.scheduler.task(CLEANER_TASK) is None        # the threads clean, not the task
        assert mgr.cleaner.await_cleaned(("k", 0), 30, max_wait_ms=20_000)
        assert log.read(log.log_start_offset).num_rows == 10
    finally:
        mgr.shutdown()
    assert not mgr.cleaner.cleaners and (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_corrupt_topic_config_file_stops_the_start(tmp_path: Path, clock: Clock) -> None:
    """Without readable overrides no partition's configuration is known: the start fails naming
    the file, and the dir is not left locked."""
    (tmp_path / TOPIC_CONFIG_FILE).write_text("{not json")
    with pytest.raises(Exception, match=TOPIC_CONFIG_FILE):
        open_mgr(tmp_path, clock)
    (tmp_path / TOPIC_CONFIG_FILE).write_text('{"version": 1, "topics": {"t": {"retention.ms": "x"}}}')
    with Log.open(tmp_path / "t-0", clock=clock) as log:
        log.append(records(1))
    with open_mgr(tmp_path, clock) as mgr:        # a bad value fails that topic's partitions only
        assert "retention.ms" in mgr.load_errors[tmp_path / "t-0"]

"""The cleaner service: LogCleanerManager and LogCleaner (kafka_test_checklist.md §7, the
LogCleanerManagerTest and LogCleanerIntegrationTest lines, plus the end-to-end lines of
LogCleanerParameterizedIntegrationTest that exercise the service).

Real ``Log`` directories under ``tmp_path``, real ``cleaner-offset-checkpoint`` files (Kafka's
LogCleanerManagerTest swaps them for an in-memory map; here the file is read back instead), a
``MockTime`` clock injected everywhere, and the cleaner driven round by round with
``LogCleaner.clean_once(now)`` where Kafka waits for its background threads (one test runs the
threads for real).

Checklist lines adapted or not applicable here:

* testCleanableOffsetsForNone ("bounded by the last stable offset"): kafkalog has no replicas,
  so the high watermark is the log end offset and cannot be set below it; the LSO bound is
  exercised with an open transaction in the middle of the log instead.
* testGrabFilthiestCompactedLogThrowsException: Kafka overrides a method of the log to throw;
  here the failure is real: the log was closed (as by a concurrent deletion) while still in the
  manager's map, so reading its segments fails.
* testMarksPartitionsAsOfflineAndPopulatesUncleanableMetrics: the gauges are properties
  (``uncleanable_partitions_count``/``uncleanable_bytes``), not a Yammer registry.
* testCleansCombinedCompactAndDeleteTopic: records always carry timestamps here, so time
  retention is reached by advancing the injected clock past retention.ms rather than by
  backdating segment mtimes.
* LogCleanerParameterizedIntegrationTest.testCleanerWithMessageFormatV0 /
  testCleaningNestedMessagesWithV0AndV1: kafkalog appends only magic v2 (legacy batches are read,
  never written by ``Log.append``); cleaning legacy input is the Cleaner's own test
  (tests/storage/test_cleaner.py) on fixture segments.
* LogCleanerIntegrationTest.testIsThreadFailed (not in the checklist): Python threads cannot be
  interrupted; the test makes the threads die of an unexpected error instead and checks
  ``dead_thread_count``.
"""

from __future__ import annotations

import os
import time as _time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from storage_core.checkpoint import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile, TopicPartition
from storage_core.cleaner import (LOG_CLEANING_ABORTED, LOG_CLEANING_IN_PROGRESS,
                                          IllegalCleaningStateError, LogCleaner, LogCleanerManager,
                                          LogCleaningPaused, PreCleanStats, calculate_cleanable_bytes,
                                          cleanable_offsets)
from storage_core.config import CleanerConfig, LogConfig
from storage_core.errors import LogCleaningError
from storage_core.format import encode_batches
from storage_core.log import Log

T0 = 1_400_000_000_000          # Kafka's MockTime(1400000000000L, ...)
OFFSET = 999
HOUR = 60 * 60 * 1000


class MockTime:
    """Kafka's MockTime: milliseconds that move only when told (``auto_tick_ms`` per read)."""

    def __init__(self, now: int = T0, auto_tick_ms: int = 0) -> None:
        self.now = now
        self.auto_tick_ms = auto_tick_ms

    def __call__(self) -> int:
        t = self.now
        self.now += self.auto_tick_ms
        return t

    def sleep(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def time() -> MockTime:
    return MockTime()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def log_dir2(tmp_path: Path) -> Path:
    d = tmp_path / "data2"
    d.mkdir()
    return d


@pytest.fixture
def opened():
    logs: list[Log] = []
    yield logs
    for log in logs:
        try:
            log.close()
        except Exception:           # noqa: BLE001 - a test may have closed or broken it
            pass


def low_retention_config(segment_bytes: int, policy: str, **extra) -> LogConfig:
    """``createLowRetentionLogConfig``."""
    return LogConfig(segment_bytes=segment_bytes, retention_ms=1, cleanup_policy=policy,
                     min_cleanable_dirty_ratio=0.05, **extra)


def make_log(opened: list, data_dir: Path, tp: tuple[str, int], config: LogConfig, time: MockTime) -> Log:
    log = Log.open(data_dir / f"{tp[0]}-{tp[1]}", config, clock=time)
    opened.append(log)
    return log


def records(keys, values, timestamps) -> pa.Table:
    return pa.table({"key": pa.array([str(k).encode() for k in keys], pa.binary()),
                     "value": pa.array([None if v is None else str(v).encode() for v in values], pa.binary()),
                     "timestamp": pa.array(np.asarray(timestamps, dtype=np.int64), pa.int64())})


def append_records(log: Log, n: int, time: MockTime) -> None:
    """``appendRecords``: keys ``key-<offset>``, one batch."""
    start = log.log_end_offset
    offs = range(start, start + n)
    log.append(pa.table({"key": [b"key-%d" % o for o in offs], "value": [b"value-%d" % o for o in offs],
                        "timestamp": pa.array([time()] * n, pa.int64())}))


def write_records(log: Log, num_batches: int, records_per_batch: int, batches_per_segment: int,
                  time: MockTime) -> None:
    """``writeRecords``: a roll after every ``batches_per_segment`` batches, and at the end."""
    for i in range(num_batches):
        append_records(log, records_per_batch, time)
        if i % batches_per_segment == 0:
            log.roll()
    log.roll()


def increasingly_filthy_logs(opened, data_dir: Path, partitions, start_batches: int, increment: int,
                             time: MockTime) -> dict[TopicPartition, Log]:
    """``setupIncreasinglyFilthyLogs``."""
    logs: dict[TopicPartition, Log] = {}
    n = start_batches
    for tp in partitions:
        log = make_log(opened, data_dir, tp, low_retention_config(2048, "compact"), time)
        logs[TopicPartition(*tp)] = log
        write_records(log, n, 1, 5, time)
        n += increment
    return logs


def put_checkpoints(data_dir: Path, entries: dict) -> None:
    OffsetCheckpointFile(data_dir / CLEANER_OFFSET_CHECKPOINT).write(
        {TopicPartition(*tp): o for tp, o in entries.items()})


def read_checkpoints(data_dir: Path) -> dict[TopicPartition, int]:
    return OffsetCheckpointFile(data_dir / CLEANER_OFFSET_CHECKPOINT).read()


WELL = [("wishing-well", 0), ("wishing-well", 1), ("wishing-well", 2)]
TP = TopicPartition("log", 0)
TP2 = TopicPartition("log2", 0)


def single_log_manager(opened, log_dir: Path, log_dir2: Path, policy: str, time: MockTime):
    """``createLog`` + ``createCleanerManager``: one log ``log-0`` in ``log_dir``, a manager
    of both dirs."""
    log = make_log(opened, log_dir, TP, low_retention_config(5 * 80, policy), time)
    return log, LogCleanerManager([log_dir, log_dir2], {TP: log}, clock=time)


# ------------------------------------------------------------------------------ selection

def test_grab_filthiest_returns_log_with_dirtiest_ratio(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testGrabFilthiestCompactedLogReturnsLogWithDirtiestRatio]"""
    logs = increasingly_filthy_logs(opened, log_dir, WELL, 20, 5, time)
    put_checkpoints(log_dir, {tp: 20 for tp in WELL})
    manager = LogCleanerManager([log_dir], logs, clock=time)
    filthiest = manager.grab_filthiest_compacted_log(time())
    assert filthiest is not None and filthiest.log is logs[TopicPartition(*WELL[2])]
    assert manager.cleaning_state(WELL[2]) == LOG_CLEANING_IN_PROGRESS


def test_grab_filthiest_ignores_uncleanable_partitions(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testGrabFilthiestCompactedLogIgnoresUncleanablePartitions]"""
    logs = increasingly_filthy_logs(opened, log_dir, WELL, 20, 5, time)
    put_checkpoints(log_dir, {tp: 20 for tp in WELL})
    manager = LogCleanerManager([log_dir], logs, clock=time)
    manager.mark_partition_uncleanable(logs[TopicPartition(*WELL[2])].dir.parent, WELL[2])
    assert manager.grab_filthiest_compacted_log(time()).log is logs[TopicPartition(*WELL[1])]


def test_grab_filthiest_ignores_in_progress_partitions(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testGrabFilthiestCompactedLogIgnoresInProgressPartitions]"""
    logs = increasingly_filthy_logs(opened, log_dir, WELL, 20, 5, time)
    put_checkpoints(log_dir, {tp: 20 for tp in WELL})
    manager = LogCleanerManager([log_dir], logs, clock=time)
    manager.set_cleaning_state(WELL[2], LOG_CLEANING_IN_PROGRESS)
    assert manager.grab_filthiest_compacted_log(time()).log is logs[TopicPartition(*WELL[1])]


def test_grab_filthiest_ignores_in_progress_and_uncleanable(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testGrabFilthiestCompactedLogIgnoresBothInProgressPartitionsAndUncleanablePartitions]
    The only partition left has nothing cleanable: nothing is selected."""
    logs = increasingly_filthy_logs(opened, log_dir, WELL, 20, 5, time)
    put_checkpoints(log_dir, {tp: 20 for tp in WELL})
    manager = LogCleanerManager([log_dir], logs, clock=time)
    manager.set_cleaning_state(WELL[2], LOG_CLEANING_IN_PROGRESS)
    manager.mark_partition_uncleanable(log_dir, WELL[1])
    assert manager.grab_filthiest_compacted_log(time()) is None


def test_grab_filthiest_throws_logcleaningerror_carrying_the_log(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testGrabFilthiestCompactedLogThrowsException] The log's segments
    cannot be read (it was closed under the manager): the error names that log and keeps the
    cause; the thread then marks it uncleanable and goes on with the others."""
    tp = ("A", 1)
    config = low_retention_config(10 * 80, "compact")
    log = make_log(opened, log_dir, tp, config, time)
    write_records(log, 4, 10, 2, time)
    log.close()
    broken = Log.open(log.dir, config, clock=time)      # loaded afresh: nothing cached
    broken.close()
    manager = LogCleanerManager([log_dir], {TopicPartition(*tp): broken}, clock=time)
    put_checkpoints(log_dir, {tp: 1})
    with pytest.raises(LogCleaningError) as info:
        manager.grab_filthiest_compacted_log(time())
    assert info.value.log is broken
    assert isinstance(info.value.__cause__, (OSError, ValueError))


def test_dirty_offset_reset_if_larger_than_end_offset(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testDirtyOffsetResetIfLargerThanEndOffset]"""
    logs = increasingly_filthy_logs(opened, log_dir, [("foo", 0)], 20, 5, time)
    put_checkpoints(log_dir, {("foo", 0): 200})
    manager = LogCleanerManager([log_dir], logs, clock=time)
    assert manager.grab_filthiest_compacted_log(time()).first_dirty_offset == 0


def test_dirty_offset_reset_if_smaller_than_start_offset(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testDirtyOffsetResetIfSmallerThanStartOffset]"""
    logs = increasingly_filthy_logs(opened, log_dir, [("foo", 0)], 20, 5, time)
    logs[TopicPartition("foo", 0)].delete_records_before(10)
    put_checkpoints(log_dir, {("foo", 0): 0})
    manager = LogCleanerManager([log_dir], logs, clock=time)
    assert manager.grab_filthiest_compacted_log(time()).first_dirty_offset == 10


def test_log_start_offset_larger_than_active_segment_base(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testLogStartOffsetLargerThanActiveSegmentBaseOffset]"""
    log = make_log(opened, log_dir, ("foo", 0), low_retention_config(2048, "compact"), time)
    for _ in range(3):
        append_records(log, 3, time)
    assert len(log.segments) == 1
    log.delete_records_before(2)
    put_checkpoints(log_dir, {("foo", 0): 0})
    manager = LogCleanerManager([log_dir], {TopicPartition("foo", 0): log}, clock=time)
    assert manager.grab_filthiest_compacted_log(time()) is None


def test_dirty_offset_larger_than_active_segment_base(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testDirtyOffsetLargerThanActiveSegmentBaseOffset]"""
    log = make_log(opened, log_dir, ("foo", 0), low_retention_config(2048, "compact"), time)
    append_records(log, 3, time)
    append_records(log, 3, time)
    assert len(log.segments) == 1 and log.active_segment.base_offset == 0
    put_checkpoints(log_dir, {("foo", 0): 3})
    manager = LogCleanerManager([log_dir], {TopicPartition("foo", 0): log}, clock=time)
    assert manager.grab_filthiest_compacted_log(time()) is None


@pytest.mark.parametrize("policy,expected", [("delete", 0), ("compact,delete", 1), ("compact", 1)])
def test_logs_with_segments_to_delete(opened, log_dir, log_dir2, time, policy, expected) -> None:
    """[LogCleanerManagerTest.testLogsWithSegmentsToDeleteShouldNotConsiderCleanupPolicyDeleteLogs/
    testLogsWithSegmentsToDeleteShouldConsiderCleanupPolicyCompactDeleteLogs/
    testLogsWithSegmentsToDeleteShouldConsiderCleanupPolicyCompactLogs] delete-only logs are the
    LogManager's retention job; compacted ones (also compact,delete) the cleaner thread's."""
    _, manager = single_log_manager(opened, log_dir, log_dir2, policy, time)
    assert len(manager.deletable_logs()) == expected


def test_logs_with_segments_to_delete_excludes_uncleanable(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest.testLogsWithSegmentsToDeleteShouldNotConsiderUncleanablePartitions]"""
    log, manager = single_log_manager(opened, log_dir, log_dir2, "compact", time)
    manager.mark_partition_uncleanable(log.dir.parent, TP)
    assert len(manager.deletable_logs()) == 0


def test_logs_under_cleanup_ineligible_for_compaction(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest.testLogsUnderCleanupIneligibleForCompaction] A log claimed by
    retention is not offered for compaction until resumed, and one being compacted is not
    claimed by retention until done, across cleanup.policy changes."""
    log, manager = single_log_manager(opened, log_dir, log_dir2, "delete", time)
    log.append(records(["test"], ["test"], [time()]))
    log.roll()
    log.append(records(["test"], ["test"], [time()]))
    deletable = manager.pause_cleaning_for_non_compacted_partitions()
    assert len(deletable) == 1
    log.config = log.config.with_changes(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    assert manager.grab_filthiest_compacted_log(time()) is None       # retention still on it
    manager.resume_cleaning([tp for tp, _ in deletable])
    cleanable = manager.grab_filthiest_compacted_log(time())
    assert cleanable is not None and cleanable.log is log
    log.config = log.config.with_changes(cleanup_policy="delete")
    assert len(manager.pause_cleaning_for_non_compacted_partitions()) == 0   # compaction on it
    manager.done_deleting([TP])
    assert len(manager.pause_cleaning_for_non_compacted_partitions()) == 1


# ------------------------------------------------------------------------------ checkpoints

def test_update_checkpoints_adds_offset(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest.testUpdateCheckpointsShouldAddOffsetToPartition]"""
    _, manager = single_log_manager(opened, log_dir, log_dir2, "compact", time)
    assert manager.all_cleaner_checkpoints().get(TP, 0) != OFFSET
    manager.update_checkpoints(log_dir, update=(TP, OFFSET))
    assert manager.all_cleaner_checkpoints()[TP] == OFFSET
    # Kafka's file format, in the data dir root
    assert (log_dir / "cleaner-offset-checkpoint").read_text() == f"0\n1\nlog 0 {OFFSET}\n"


def test_update_checkpoints_removes_partition(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest.testUpdateCheckpointsShouldRemovePartitionData]"""
    _, manager = single_log_manager(opened, log_dir, log_dir2, "compact", time)
    manager.update_checkpoints(log_dir, update=(TP, OFFSET))
    assert manager.all_cleaner_checkpoints()[TP] == OFFSET
    manager.update_checkpoints(log_dir, partition_to_remove=TP)
    assert TP not in manager.all_cleaner_checkpoints()


def test_handle_log_dir_failure_removes_dir_and_data(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest.testHandleLogDirFailureShouldRemoveDirAndData]"""
    _, manager = single_log_manager(opened, log_dir, log_dir2, "compact", time)
    manager.update_checkpoints(log_dir, update=(TP, OFFSET))
    manager.update_checkpoints(log_dir2, update=(TP2, OFFSET))
    assert manager.all_cleaner_checkpoints()[TP] == OFFSET
    assert manager.all_cleaner_checkpoints()[TP2] == OFFSET
    manager.handle_log_dir_failure(str(log_dir.absolute()))
    assert manager.all_cleaner_checkpoints()[TP2] == OFFSET
    assert TP not in manager.all_cleaner_checkpoints()


def test_maybe_truncate_checkpoint(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest.testMaybeTruncateCheckpointShouldTruncateData]"""
    _, manager = single_log_manager(opened, log_dir, log_dir2, "compact", time)
    manager.update_checkpoints(log_dir, update=(TP, OFFSET))
    manager.maybe_truncate_checkpoint(log_dir, TP, 1000)     # not above: untouched
    assert manager.all_cleaner_checkpoints()[TP] == OFFSET
    manager.maybe_truncate_checkpoint(log_dir, TP, 1)
    assert manager.all_cleaner_checkpoints()[TP] == 1


def test_alter_checkpoint_dir(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest.testAlterCheckpointDirShouldRemoveDataInSrcDirAndAddInNewDir]"""
    _, manager = single_log_manager(opened, log_dir, log_dir2, "compact", time)
    manager.update_checkpoints(log_dir, update=(TP, OFFSET))
    manager.mark_partition_uncleanable(log_dir, TP)
    manager.alter_checkpoint_dir(TP, log_dir, log_dir2)
    assert manager.all_cleaner_checkpoints()[TP] == OFFSET
    assert TP not in read_checkpoints(log_dir) and read_checkpoints(log_dir2)[TP] == OFFSET
    assert manager.uncleanable_partitions(log_dir) == set()
    assert manager.uncleanable_partitions(log_dir2) == {TP}
    manager.handle_log_dir_failure(log_dir2)
    assert TP not in manager.all_cleaner_checkpoints()


def test_unreadable_checkpoint_stops_cleaning_its_dir_alone(opened, log_dir, log_dir2, time, caplog) -> None:
    """[LogCleanerManager.allCleanerCheckpoints] A ``cleaner-offset-checkpoint`` Kafka cannot
    read is logged ("Failed to access checkpoint file ...") and, as its read takes the log dir
    offline, no partition of that dir is cleaned; the other dir's are. Cleaning the dir's
    partitions from their start instead would recopy each whole log every round, since the
    progress could never be written. Once the file is readable (here: removed), cleaning
    resumes and records its progress."""
    config = LogConfig(segment_bytes=2048, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    broken = make_log(opened, log_dir, ("broken", 0), config, time)
    healthy = make_log(opened, log_dir2, ("healthy", 0), config, time)
    for log in (broken, healthy):
        write_dups(log, 10, 5, time)
    checkpoint = log_dir / CLEANER_OFFSET_CHECKPOINT
    checkpoint.write_text("0\n1\nbroken 0 5\nbroken 0 6\n")
    before = [(s.base_offset, s.size) for s in broken.segments]
    cleaner = LogCleaner(cleaner_config(), [log_dir, log_dir2],
                         {TopicPartition("broken", 0): broken, TopicPartition("healthy", 0): healthy}, clock=time)
    with caplog.at_level("ERROR", logger="storage_core.cleaner.cleaner_manager"):
        for _ in range(3):
            cleaner.clean_once(time())
    assert [(s.base_offset, s.size) for s in broken.segments] == before, "the dir's log was cleaned"
    assert read_checkpoints(log_dir2)[TopicPartition("healthy", 0)] == healthy.active_segment.base_offset
    assert checkpoint.read_text() == "0\n1\nbroken 0 5\nbroken 0 6\n"      # left for the operator
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors and all(f"Failed to access checkpoint file {CLEANER_OFFSET_CHECKPOINT} in dir {log_dir.resolve()}"
                          in m and "Expected 1 entries" in m for m in errors), errors
    checkpoint.unlink()
    cleaner.clean_once(time())
    assert read_checkpoints(log_dir)[TopicPartition("broken", 0)] == broken.active_segment.base_offset


# ------------------------------------------------------------------------------ state machine

def test_concurrent_log_cleanup_and_log_truncation(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest.testConcurrentLogCleanupAndLogTruncation]"""
    _, manager = single_log_manager(opened, log_dir, log_dir2, "delete", time)
    paused = manager.pause_cleaning_for_non_compacted_partitions()    # retention starts
    manager.abort_and_pause_cleaning(TP)                               # a truncation
    manager.resume_cleaning([TP])
    manager.resume_cleaning([tp for tp, _ in paused])                  # retention done
    assert manager.cleaning_state(TP) is None


def test_concurrent_log_cleanup_and_topic_deletion(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest.testConcurrentLogCleanupAndTopicDeletion]"""
    _, manager = single_log_manager(opened, log_dir, log_dir2, "delete", time)
    paused = manager.pause_cleaning_for_non_compacted_partitions()
    manager.abort_cleaning(TP)
    manager.resume_cleaning([tp for tp, _ in paused])
    assert manager.cleaning_state(TP) is None


def test_done_cleaning(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testDoneCleaning]"""
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=1024, cleanup_policy="compact"), time)
    while len(log.segments) < 8:
        o = log.log_end_offset
        log.append(records([o], [o], [time()]))
    manager = LogCleanerManager([log_dir], {TP: log}, clock=time)
    with pytest.raises(IllegalCleaningStateError):
        manager.done_cleaning(TP, log.dir.parent, 1)
    manager.set_cleaning_state(TP, LogCleaningPaused(1))
    with pytest.raises(IllegalCleaningStateError):
        manager.done_cleaning(TP, log.dir.parent, 1)
    manager.set_cleaning_state(TP, LOG_CLEANING_IN_PROGRESS)
    manager.done_cleaning(TP, log.dir.parent, 1)
    assert manager.cleaning_state(TP) is None
    assert manager.all_cleaner_checkpoints().get(TP) == 1
    manager.set_cleaning_state(TP, LOG_CLEANING_ABORTED)
    manager.done_cleaning(TP, log.dir.parent, 1)
    assert manager.cleaning_state(TP) == LogCleaningPaused(1)
    assert TP in manager.all_cleaner_checkpoints()


def test_done_deleting(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest.testDoneDeleting]"""
    _, manager = single_log_manager(opened, log_dir, log_dir2, "compact,delete", time)
    with pytest.raises(IllegalCleaningStateError):
        manager.done_deleting([TP])
    manager.set_cleaning_state(TP, LogCleaningPaused(1))
    with pytest.raises(IllegalCleaningStateError):
        manager.done_deleting([TP])
    manager.set_cleaning_state(TP, LOG_CLEANING_IN_PROGRESS)
    manager.done_deleting([TP])
    assert manager.cleaning_state(TP) is None
    manager.set_cleaning_state(TP, LOG_CLEANING_ABORTED)
    manager.done_deleting([TP])
    assert manager.cleaning_state(TP) == LogCleaningPaused(1)


def test_pause_counts_and_resume_errors(opened, log_dir, log_dir2, time) -> None:
    """[LogCleanerManagerTest state machine] A paused partition paused again needs two resumes;
    resuming one that is not paused is refused."""
    _, manager = single_log_manager(opened, log_dir, log_dir2, "compact", time)
    with pytest.raises(IllegalCleaningStateError):
        manager.resume_cleaning([TP])
    manager.abort_and_pause_cleaning(TP)
    manager.abort_and_pause_cleaning(TP)
    assert manager.cleaning_state(TP) == LogCleaningPaused(2)
    manager.resume_cleaning([TP])
    assert manager.cleaning_state(TP) == LogCleaningPaused(1)
    manager.resume_cleaning([TP])
    assert manager.cleaning_state(TP) is None
    manager.set_cleaning_state(TP, LOG_CLEANING_ABORTED)
    with pytest.raises(IllegalCleaningStateError):
        manager.abort_and_pause_cleaning(TP)


# ------------------------------------------------------------------------------ cleanable offsets

def eight_segments(opened, log_dir, time, **config) -> Log:
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=1024, cleanup_policy="compact",
                                                 segment_index_bytes=1024, **config), time)
    while len(log.segments) < 8:
        o = log.log_end_offset
        log.append(records([o], [o], [time()]))
    return log


def test_cleanable_offsets_bounded_by_last_stable_offset(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testCleanableOffsetsForNone] The range ends at the last stable
    offset: here an open transaction from offset 30 (the high watermark is the log end offset)."""
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=1024, cleanup_policy="compact"), time)
    while log.log_end_offset < 30:
        o = log.log_end_offset
        log.append(records([o], [o], [time()]))
    log.append_raw(encode_batches(records([30], [30], [time()]), producer_id=7, producer_epoch=0,
                                 base_sequence=0, transactional=True))
    while len(log.segments) < 8:
        o = log.log_end_offset
        log.append(records([o], [o], [time()]))
    offsets = cleanable_offsets(log, 0, time())
    assert offsets.first_dirty_offset == 0
    assert log.last_stable_offset == 30
    assert offsets.first_uncleanable_dirty_offset == log.last_stable_offset


def test_cleanable_offsets_active_segment(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testCleanableOffsetsActiveSegment]"""
    log = eight_segments(opened, log_dir, time)
    offsets = cleanable_offsets(log, 0, time())
    assert offsets.first_dirty_offset == 0
    assert offsets.first_uncleanable_dirty_offset == log.active_segment.base_offset


def test_cleanable_offsets_for_time(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testCleanableOffsetsForTime]"""
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=1024, cleanup_policy="compact",
                                                 min_compaction_lag_ms=HOUR), time)
    t0 = time()
    while len(log.segments) < 4:
        o = log.log_end_offset
        log.append(records([o], [o], [t0]))
    active_at_t0 = log.active_segment
    time.sleep(HOUR + 1)
    t1 = time()
    while len(log.segments) < 8:
        o = log.log_end_offset
        log.append(records([o], [o], [t1]))
    offsets = cleanable_offsets(log, 0, time())
    assert offsets.first_dirty_offset == 0
    assert offsets.first_uncleanable_dirty_offset == active_at_t0.base_offset


def test_cleanable_offsets_for_short_time(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testCleanableOffsetsForShortTime]"""
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=1024, cleanup_policy="compact",
                                                 min_compaction_lag_ms=HOUR), time)
    t0 = time()
    while len(log.segments) < 8:
        o = log.log_end_offset
        log.append(records([o], [o], [t0]))
    time.sleep(HOUR + 1)
    offsets = cleanable_offsets(log, 0, time())
    assert offsets.first_dirty_offset == 0
    assert offsets.first_uncleanable_dirty_offset == log.active_segment.base_offset


def test_cleanable_offsets_needs_checkpoint_reset(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testCleanableOffsetsNeedsCheckpointReset]"""
    logs = increasingly_filthy_logs(opened, log_dir, [("foo", 0)], 20, 5, time)
    log = logs[TopicPartition("foo", 0)]
    log.delete_records_before(10)
    assert not cleanable_offsets(log, 15, time()).force_update_checkpoint
    log.delete_records_before(20)
    assert cleanable_offsets(log, 15, time()).force_update_checkpoint      # below the start
    assert cleanable_offsets(log, 25, time()).force_update_checkpoint      # beyond the end


def test_undecided_transactional_data_not_cleanable(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testUndecidedTransactionalDataNotCleanable]"""
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=1024, cleanup_policy="compact",
                                                 min_compaction_lag_ms=HOUR), time)
    pid, epoch = 15, 0
    log.append_raw(encode_batches(records([1, 2], ["a", "b"], [time()] * 2), producer_id=pid,
                                 producer_epoch=epoch, base_sequence=0, transactional=True))
    log.append_raw(encode_batches(records([3], ["c"], [time()]), producer_id=pid,
                                 producer_epoch=epoch, base_sequence=2, transactional=True))
    log.roll()
    time.sleep(HOUR + 1)
    # the lag has passed, but the undecided data is not cleanable
    offsets = cleanable_offsets(log, 0, time())
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 0)
    log.append_end_txn_marker(pid, epoch, "ABORT", 15, timestamp=time())
    log.roll()
    # the first segment is cleanable at once
    offsets = cleanable_offsets(log, 0, time())
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 3)
    time.sleep(HOUR + 1)
    # the marker's segment after the lag
    offsets = cleanable_offsets(log, 0, time())
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 4)


def test_checkpoint_updated_for_invalid_offset_no_cleaning(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testCheckpointUpdatedForInvalidOffsetNoCleaning]"""
    logs = increasingly_filthy_logs(opened, log_dir, [("foo", 0)], 20, 5, time)
    logs[TopicPartition("foo", 0)].delete_records_before(20)
    put_checkpoints(log_dir, {("foo", 0): 15})
    manager = LogCleanerManager([log_dir], logs, clock=time)
    assert manager.grab_filthiest_compacted_log(time()) is None
    assert read_checkpoints(log_dir)[TopicPartition("foo", 0)] == 20


def test_checkpoint_updated_for_invalid_offset_not_selected(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest.testCheckpointUpdatedForInvalidOffsetNotSelected]"""
    tp0, tp1 = ("foo", 0), ("foo", 1)
    logs = increasingly_filthy_logs(opened, log_dir, [tp0, tp1], 20, 5, time)
    logs[TopicPartition(*tp0)].delete_records_before(15)
    put_checkpoints(log_dir, {tp0: 10, tp1: 5})
    manager = LogCleanerManager([log_dir], logs, clock=time)
    assert manager.grab_filthiest_compacted_log(time()).log is logs[TopicPartition(*tp1)]
    assert read_checkpoints(log_dir)[TopicPartition(*tp0)] == 15


def test_max_compaction_lag_makes_a_log_due_below_the_ratio(opened, log_dir, time) -> None:
    """[LogCleanerManagerTest / LogCleaner.PreCleanStats] A log whose earliest dirty segment is
    older than max.compaction.lag.ms is selected whatever its ratio, and the delay is counted."""
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=1024, cleanup_policy="compact",
                                                 min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=HOUR), time)
    for _ in range(3):
        append_records(log, 5, time)
        log.roll()
    manager = LogCleanerManager([log_dir], {TP: log}, clock=time)
    stats = PreCleanStats()
    assert manager.grab_filthiest_compacted_log(time(), stats) is None
    assert stats.max_compaction_delay_ms == 0
    time.sleep(2 * HOUR)
    stats = PreCleanStats()
    picked = manager.grab_filthiest_compacted_log(time(), stats)
    assert picked is not None and picked.needs_compaction_now
    assert stats.delayed_partitions == 1 and stats.max_compaction_delay_ms == HOUR
    assert stats.cleanable_partitions == 1


# ------------------------------------------------------------------------------ the service

def cleaner_config(**kw) -> CleanerConfig:
    return CleanerConfig(dedupe_buffer_size=kw.pop("dedupe_buffer_size", 4 << 20), **kw)


def write_dups(log: Log, num_keys: int, num_dups: int, time: MockTime, *, start_key: int = 0,
               codec: str = "none", counter: list[int] | None = None, timestamp: int | None = None,
               step: int = 1) -> list[tuple[int, str, int]]:
    """``writeDups``/``writeKeyDups``: one record a batch, values from a running counter."""
    counter = counter if counter is not None else [0]
    out = []
    for _ in range(num_dups):
        for key in range(start_key, start_key + num_keys):
            value = str(counter[0])
            info = log.append(records([key], [value], [time() if timestamp is None else timestamp]),
                             compression=codec)
            counter[0] += step
            out.append((key, value, info.first_offset))
    return out


def read_log(log: Log) -> list[tuple[int, str, int]]:
    """Every (key, value, offset) left in the log, in offset order."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = log.fetch(offset, max_bytes=1 << 20)
        t = got.table
        out += [(int(k), v.decode(), o) for k, v, o in zip(t.column("key").to_pylist(),
                                                            t.column("value").to_pylist(),
                                                            t.column("offset").to_pylist())]
        offset = got.next_offset
    return out


def latest(appends) -> dict[int, tuple[str, int]]:
    return {k: (v, o) for k, v, o in appends}


def clean_until(cleaner: LogCleaner, tp, offset: int, time: MockTime, rounds: int = 20) -> None:
    for _ in range(rounds):
        if cleaner.cleaner_manager.all_cleaner_checkpoints().get(TopicPartition(*tp), -1) >= offset:
            return
        cleaner.clean_once(time())
    raise AssertionError(f"not cleaned up to {offset}: {cleaner.cleaner_manager.all_cleaner_checkpoints()}")


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_cleaner_compacts_to_latest_value_per_key(opened, log_dir, time, codec) -> None:
    """[LogCleanerParameterizedIntegrationTest.cleanerTest] 100 keys x 3 dups per codec, cleaned
    up to the active segment; the log shrinks and holds the latest value of each key at its
    offset; a record as large as max.message.bytes is cleaned too; a removed partition leaves
    the checkpoint file."""
    parts = [("log", 0), ("log", 1), ("log", 2)]
    big_value = "x" * 128
    big = encode_batches(records([20], [big_value], [T0]), compression=codec)
    config = LogConfig(segment_bytes=2048, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                       max_message_bytes=len(big), segment_index_bytes=100 * 1024, file_delete_delay_ms=1000)
    logs = {TopicPartition(*tp): make_log(opened, log_dir, tp, config, time) for tp in parts}
    log = logs[TopicPartition(*parts[0])]
    counter = [0]
    appends = write_dups(log, 100, 3, time, codec=codec, counter=counter)
    start_size = sum(s.size for s in log.segments)
    cleaner = LogCleaner(cleaner_config(max_message_size=len(big)), [log_dir], logs, clock=time)
    first_dirty = log.active_segment.base_offset
    clean_until(cleaner, parts[0], first_dirty, time)
    assert sum(s.size for s in log.segments) < start_size
    assert latest(read_log(log)) == latest(appends)
    big_offset = log.append(records([20], [big_value], [time()]), compression=codec).first_offset
    dups = write_dups(log, 100, 3, time, start_key=21, codec=codec, counter=counter)
    appends2 = appends + [(20, big_value, big_offset)] + dups
    clean_until(cleaner, parts[0], log.active_segment.base_offset, time)
    got = read_log(log)
    assert latest(got) == latest(appends2)
    cleaned = [k for k, _, o in got if o < log.active_segment.base_offset]
    assert len(cleaned) == len(set(cleaned))                      # one record per key left
    assert [o for _, _, o in got] == sorted(o for _, _, o in got)
    # the partition goes: its checkpoint entry goes with the next update
    del logs[TopicPartition(*parts[0])]
    cleaner.update_checkpoints(log_dir)
    assert TopicPartition(*parts[0]) not in read_checkpoints(log_dir)


def test_background_threads_clean_and_shut_down(opened, log_dir) -> None:
    """[LogCleanerParameterizedIntegrationTest.cleanerTest, with the cleaner threads] start()
    runs CleanerThreads that clean while the test waits (awaitCleaned); shutdown stops them."""
    tps = [("log", 0), ("log", 1)]
    config = LogConfig(segment_bytes=2048, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    wall = MockTime(int(_time.time() * 1000), auto_tick_ms=1)
    logs = {TopicPartition(*tp): make_log(opened, log_dir, tp, config, wall) for tp in tps}
    appends = {tp: write_dups(logs[tp], 50, 3, wall) for tp in logs}
    cleaner = LogCleaner(cleaner_config(num_threads=2, backoff_ms=20), [log_dir], logs, clock=wall)
    cleaner.start()
    try:
        for tp, log in logs.items():
            assert cleaner.await_cleaned(tp, log.active_segment.base_offset, max_wait_ms=30000)
    finally:
        cleaner.shutdown()
    assert all(not t.is_alive for t in cleaner.cleaners) and cleaner.dead_thread_count == 0
    for tp, log in logs.items():
        assert latest(read_log(log)) == latest(appends[tp])
    assert cleaner.max_buffer_utilization_percent >= 0 and cleaner.max_clean_time_secs >= 0


def test_cleans_combined_compact_and_delete_topic(opened, log_dir, time) -> None:
    """[LogCleanerParameterizedIntegrationTest.testCleansCombinedCompactAndDeleteTopic] A
    compact,delete topic is compacted by the cleaner and its old segments deleted by the same
    thread once older than retention.ms, leaving one segment at the log end; cleaning again
    afterwards keeps the contents."""
    retention = 100_000
    config = LogConfig(segment_bytes=2048, cleanup_policy="compact,delete", retention_ms=retention,
                       min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0)
    log = make_log(opened, log_dir, TP, config, time)
    logs = {TP: log}
    cleaner = LogCleaner(cleaner_config(backoff_ms=100), [log_dir], logs, clock=time)
    write_dups(log, 100, 3, time)
    start_size = sum(s.size for s in log.segments)
    clean_until(cleaner, TP, log.active_segment.base_offset, time)
    assert sum(s.size for s in log.segments) < start_size
    time.sleep(2 * retention)
    # segments emptied by the clean are judged by their mtime, as in Kafka's test
    old_ns = (time.now - 2 * retention) * 1_000_000
    for seg in log.segments:
        for p in (seg.log_path, seg.offset_index.path, seg.time_index.path):
            os.utime(p, ns=(old_ns, old_ns))
    cleaner.clean_once(time())
    assert len(log.segments) == 1
    assert log.log_start_offset == log.log_end_offset == log.active_segment.base_offset
    messages = write_dups(log, 20, 3, time)
    clean_until(cleaner, TP, log.active_segment.base_offset, time)
    assert latest(read_log(log)) == latest(messages)


def test_max_log_compaction_lag(opened, log_dir, time) -> None:
    """[LogCleanerIntegrationTest.testMaxLogCompactionLag] With min.cleanable.dirty.ratio 1.0
    nothing is cleaned until max.compaction.lag.ms has passed; then the first block is cleaned
    (the second, younger than min.compaction.lag.ms, is not), and after another lag only the
    second block's keys remain."""
    min_lag, max_lag = 1 * HOUR, 6 * HOUR
    tps = [("log", 0), ("log", 1), ("log", 2)]
    config = LogConfig(segment_bytes=512, cleanup_policy="compact", min_cleanable_dirty_ratio=1.0,
                       min_compaction_lag_ms=min_lag, max_compaction_lag_ms=max_lag)
    logs = {TopicPartition(*tp): make_log(opened, log_dir, tp, config, time) for tp in tps}
    log = logs[TopicPartition(*tps[0])]
    cleaner = LogCleaner(cleaner_config(backoff_ms=200), [log_dir], logs, clock=time)
    t0 = time()
    write_dups(log, 100, 3, time, timestamp=t0)
    start_size = sum(s.size for s in log.segments)
    active_at_t0 = log.active_segment
    time.sleep(max_lag // 2)
    for _ in range(3):
        assert cleaner.clean_once(time()) is None
    assert sum(s.size for s in log.segments) == start_size, "no cleaning before the max compaction lag"
    time.sleep(max_lag // 2 + 1)
    t1 = time()
    appends1 = [(k, v) for k, v, _ in write_dups(log, 100, 1, time, timestamp=t1, counter=[0], step=0)]
    log.roll()
    active_at_t1 = log.active_segment
    clean_until(cleaner, tps[0], active_at_t0.base_offset, time)
    read1 = [(k, v) for k, v, _ in read_log(log)]
    assert read1 != appends1, "the second block is younger than min.compaction.lag.ms"
    time.sleep(max_lag + 1)
    clean_until(cleaner, tps[0], active_at_t1.base_offset, time)
    assert [(k, v) for k, v, _ in read_log(log)] == appends1


def break_partition_log(log: Log, time: MockTime) -> None:
    """``breakPartitionLog``: garbage over the last segment's file, then more appends."""
    write_dups(log, 20, 3, time, codec="lz4")
    with open(log.segments[-1].log_path, "w") as f:
        f.write("jogeajgoea")
    write_dups(log, 20, 3, time, codec="lz4")


def test_marks_partitions_uncleanable_and_populates_metrics(opened, log_dir, time) -> None:
    """[LogCleanerIntegrationTest.testMarksPartitionsAsOfflineAndPopulatesUncleanableMetrics]
    Two partitions with a corrupted segment fail to clean and are marked uncleanable for their
    data dir (count and bytes gauges); the third is untouched; cleaning of healthy partitions
    goes on; a removed partition leaves the uncleanable set."""
    tps = [("log", 0), ("log", 1), ("log", 2), ("healthy", 0)]
    config = LogConfig(segment_bytes=2048, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                       segment_index_bytes=100 * 1024)
    logs = {TopicPartition(*tp): make_log(opened, log_dir, tp, config, time) for tp in tps}
    break_partition_log(logs[TopicPartition("log", 0)], time)
    break_partition_log(logs[TopicPartition("log", 1)], time)
    healthy = logs[TopicPartition("healthy", 0)]
    appends = write_dups(healthy, 10, 3, time)
    cleaner = LogCleaner(cleaner_config(backoff_ms=100), [log_dir], logs, clock=time)
    for _ in range(6):
        cleaner.clean_once(time())
    assert cleaner.uncleanable_partitions_count(log_dir) == 2
    broken = [logs[TopicPartition("log", p)] for p in (0, 1)]
    expected_bytes = sum(calculate_cleanable_bytes(b, 0, b.segments[-1].base_offset)[1] for b in broken)
    assert cleaner.uncleanable_bytes(log_dir) == expected_bytes
    marked = cleaner.cleaner_manager.uncleanable_partitions(log_dir)
    assert TopicPartition("log", 0) in marked and TopicPartition("log", 1) in marked
    assert TopicPartition("log", 2) not in marked and TopicPartition("healthy", 0) not in marked
    # the healthy partition was cleaned meanwhile
    assert cleaner.cleaner_manager.all_cleaner_checkpoints()[TopicPartition("healthy", 0)] == \
        healthy.active_segment.base_offset
    assert latest(read_log(healthy)) == latest(appends)
    assert cleaner.metrics()["uncleanable-partitions-count"] == {str(log_dir.resolve()): 2}
    del logs[TopicPartition("log", 0)]
    cleaner.clean_once(time())
    assert cleaner.cleaner_manager.uncleanable_partitions(log_dir) == {TopicPartition("log", 1)}


def test_clean_once_returns_stats_and_checkpoints(opened, log_dir, time) -> None:
    """[LogCleaner.CleanerThread.cleanLog/recordStats] One manual round cleans the filthiest log,
    returns its stats, checkpoints the end offset; a round with nothing to do returns None."""
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=1024, cleanup_policy="compact",
                                                 min_cleanable_dirty_ratio=0.0), time)
    write_dups(log, 10, 4, time)
    active_base = log.active_segment.base_offset
    cleaner = LogCleaner(cleaner_config(), [log_dir], {TP: log}, clock=time)
    stats = cleaner.clean_once(time())
    assert stats is not None and stats.messages_read == active_base and stats.bytes_written < stats.bytes_read
    assert read_checkpoints(log_dir)[TP] == log.active_segment.base_offset
    assert cleaner.clean_once(time()) is None
    assert cleaner.cleaner_manager.cleaning_state(TP) is None
    assert 0 <= cleaner.cleaner_recopy_percent <= 100


def test_abort_and_pause_keeps_a_partition_out_until_resumed(opened, log_dir, time) -> None:
    """[LogCleanerManager.abortAndPauseCleaning / resumeCleaning via LogCleaner] A paused
    partition is not cleaned (nor its segments deleted by the cleaner thread); resumed, it is."""
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=1024, cleanup_policy="compact",
                                                 min_cleanable_dirty_ratio=0.0), time)
    write_dups(log, 10, 4, time)
    cleaner = LogCleaner(cleaner_config(), [log_dir], {TP: log}, clock=time)
    cleaner.abort_and_pause_cleaning(TP)
    assert cleaner.clean_once(time()) is None
    assert TP not in read_checkpoints(log_dir)
    cleaner.resume_cleaning([TP])
    assert cleaner.clean_once(time()) is not None
    assert read_checkpoints(log_dir)[TP] == log.active_segment.base_offset


def test_abort_during_a_clean_swaps_nothing_in(opened, log_dir) -> None:
    """[LogCleanerManager.abortAndPauseCleaning while a CleanerThread cleans] The abort waits
    until the thread has given up; the log is left as it was (same segments, same records) and
    the checkpoint does not move past the first dirty offset."""
    wall = MockTime(int(_time.time() * 1000), auto_tick_ms=1)
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=64 << 10, cleanup_policy="compact",
                                                 min_cleanable_dirty_ratio=0.0), wall)
    keys = np.arange(60_000) % 2000
    for lo in range(0, len(keys), 2000):
        part = keys[lo:lo + 2000]
        log.append_raw(encode_batches(records(part, part, np.full(len(part), wall())), max_batch_bytes=16 << 10))
    log.roll()
    before = read_log(log)
    cleaner = LogCleaner(cleaner_config(backoff_ms=10), [log_dir], {TP: log}, clock=wall)
    cleaner.start()
    try:
        deadline = _time.monotonic() + 20
        while cleaner.cleaner_manager.cleaning_state(TP) != LOG_CLEANING_IN_PROGRESS:
            assert _time.monotonic() < deadline, "the thread never picked the log"
            _time.sleep(0.001)
        cleaner.abort_and_pause_cleaning(TP)
        assert cleaner.cleaner_manager.cleaning_state(TP) == LogCleaningPaused(1)
        aborted_in_time = TP not in read_checkpoints(log_dir)
    finally:
        cleaner.shutdown()
    if aborted_in_time:       # the thread noticed the abort before swapping in
        assert read_log(log) == before
    else:                     # it had finished: the clean is complete and consistent
        assert latest(read_log(log)) == latest(before)
    cleaner.resume_cleaning([TP])
    assert cleaner.cleaner_manager.cleaning_state(TP) is None


def test_time_since_last_run_and_dirty_percent(opened, log_dir, time) -> None:
    """[LogCleanerManager gauges max-dirty-percent, time-since-last-run-ms]"""
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=1024, cleanup_policy="compact",
                                                 min_cleanable_dirty_ratio=0.99), time)
    write_dups(log, 10, 4, time)
    manager = LogCleanerManager([log_dir], {TP: log}, clock=time)
    manager.update_checkpoints(log_dir, update=(TP, log.segments[1].base_offset))
    assert manager.grab_filthiest_compacted_log(time()) is None          # below the 0.99 ratio
    assert 0 < manager.max_dirty_percent < 99
    assert manager.time_of_last_run == time.now
    time.sleep(500)
    assert manager.time_since_last_run_ms == 500
    assert os.path.exists(log_dir / "cleaner-offset-checkpoint")


def test_shutdown_during_a_clean_leaves_the_log_as_it_was(opened, log_dir) -> None:
    """[LogCleaner.CleanerThread.checkDone: ThreadShutdownException] Shutting the cleaner down
    while a thread cleans abandons the clean like an abort (nothing swapped in, the state
    cleared, the checkpoint at most at the first dirty offset); a new cleaner then cleans it."""
    wall = MockTime(int(_time.time() * 1000), auto_tick_ms=1)
    log = make_log(opened, log_dir, TP, LogConfig(segment_bytes=64 << 10, cleanup_policy="compact",
                                                 min_cleanable_dirty_ratio=0.0), wall)
    keys = np.arange(60_000) % 2000
    for lo in range(0, len(keys), 2000):
        part = keys[lo:lo + 2000]
        log.append_raw(encode_batches(records(part, part, np.full(len(part), wall())), max_batch_bytes=16 << 10))
    log.roll()
    before = read_log(log)
    cleaner = LogCleaner(cleaner_config(backoff_ms=10), [log_dir], {TP: log}, clock=wall)
    cleaner.start()
    deadline = _time.monotonic() + 20
    while cleaner.cleaner_manager.cleaning_state(TP) != LOG_CLEANING_IN_PROGRESS:
        assert _time.monotonic() < deadline, "the thread never picked the log"
        _time.sleep(0.001)
    threads = list(cleaner.cleaners)
    cleaner.shutdown()
    assert all(not t.is_alive for t in threads) and not any(t.failed for t in threads)
    assert cleaner.cleaner_manager.cleaning_state(TP) is None
    if read_checkpoints(log_dir).get(TP, 0) == 0:        # abandoned before the swap
        assert read_log(log) == before
    again = LogCleaner(cleaner_config(), [log_dir], {TP: log}, clock=wall)
    while again.clean_once() is not None:
        pass
    assert latest(read_log(log)) == latest(before)
    assert len(read_log(log)) == 2000


def test_a_thread_dying_of_an_unexpected_error_is_counted(log_dir) -> None:
    """[LogCleanerIntegrationTest.testIsThreadFailed] A cleaner thread that dies of an error
    outside any log's cleaning (here the partition map itself fails) is counted by
    DeadThreadCount; shutdown still returns."""
    def broken_logs():
        raise RuntimeError("the log manager is gone")

    cleaner = LogCleaner(cleaner_config(num_threads=2, backoff_ms=10), [log_dir], broken_logs)
    cleaner.start()
    deadline = _time.monotonic() + 10
    while cleaner.dead_thread_count < 2:
        assert _time.monotonic() < deadline, "the threads did not fail"
        _time.sleep(0.01)
    assert cleaner.metrics()["DeadThreadCount"] == 2
    cleaner.shutdown()


def test_throttler_sleeps_to_the_desired_rate() -> None:
    """[ThrottlerTest / log.cleaner.io.max.bytes.per.second] Above the desired rate over a check
    interval, the throttler sleeps long enough to bring the interval back to that rate; below it,
    or at an infinite rate, it never sleeps. The cleaner's threads share one."""
    from storage_core.cleaner import Throttler

    now = [0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += int(s * 1e9)

    t = Throttler(1000.0, 100, nanoseconds=lambda: now[0], sleep=sleep)
    t.maybe_throttle(1000)              # within the interval: no check yet
    now[0] += 200_000_000
    t.maybe_throttle(0)                 # 1000 bytes in 200 ms = 5000/s: sleep 800 ms
    assert slept == [0.8]
    now[0] += 2_000_000_000
    t.maybe_throttle(100)               # 100 bytes in 2 s: below the rate
    assert slept == [0.8]
    free = Throttler(float("inf"), 100, nanoseconds=lambda: now[0], sleep=sleep)
    now[0] += 10**9
    free.maybe_throttle(10**12)
    assert slept == [0.8] and free.total_observed == 10**12
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=4 << 20, max_io_bytes_per_second=5e6), [], {})
    assert cleaner.throttler.desired_rate_per_sec == 5e6


def test_cleaning_reports_its_io_to_the_shared_throttler(tmp_path: Path) -> None:
    """[LogCleaner: Cleaner.cleanInto / buildOffsetMap call throttler.maybeThrottle] Every byte
    the cleaner reads (offset map and copy passes) and writes is reported to the threads' shared
    throttler, which is what makes log.cleaner.io.max.bytes.per.second bound a clean."""
    from storage_core.cleaner import Cleaner, LogToClean

    from storage_core.cleaner import Throttler

    log = Log.open(tmp_path / "k-0", LogConfig(cleanup_policy="compact", segment_bytes=4096,
                                              file_delete_delay_ms=0))
    try:
        for i in range(200):
            log.append(pa.table({"key": [b"k%d" % (i % 10)], "value": [b"v%05d" % i]}))
        size = log.size - log.active_segment.size
        t = Throttler(float("inf"), 100)
        _, stats = Cleaner(1 << 20, throttler=t).clean(LogToClean(log, 0, log.active_segment.base_offset))
        assert stats.bytes_written > 0
        # the dirty segments read twice (map, then copy) and the cleaned bytes written once
        assert t.total_observed == 2 * size + stats.bytes_written
    finally:
        log.close()

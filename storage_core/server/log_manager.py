"""LogManager: the partitions of one or more data directories (Kafka's ``LogManager``).

::

    with LogManager.open(["/data/kafkalog"]) as mgr:          # loads every partition
        log = mgr.get_or_create_log(TopicPartition("orders", 0))
        log.append(table)
        mgr.run_due_tasks()                                    # or mgr.start(): a thread does it

What it does, as the broker does it:

* start-up (``LogManager.loadLogs``, in ``log_dirs``): every partition of every data dir is
  loaded, recovered unless the dir was shut down cleanly.
* per-topic overrides come from ``ConfigRepository`` (a JSON file in the data dir root).
* shutdown (``LogManager.shutdown``): the cleaner stops, every log is flushed and closed, then per
  dir ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` are written for all
  its logs at once, and the clean-shutdown marker last, only if the dir had one or all its logs
  loaded.
* background tasks on a ``KafkaScheduler``, under Kafka's names: ``kafka-log-retention``
  (``cleanupLogs``), ``kafka-log-flusher`` (``flushDirtyLogs``), ``kafka-recovery-point-checkpoint``,
  ``kafka-log-start-offset-checkpoint``, ``kafka-delete-logs`` (``-delete`` directories and
  ``.deleted`` segment files past ``file.delete.delay.ms``), ``PeriodicProducerExpirationCheck``
  and, when the cleaner is driven by hand, ``kafka-log-cleaner``; with tiered storage
  (``remote_log_manager_config``) ``RLMCopyTask`` and ``RLMExpirationTask`` (``remote_log_tasks``).

The scheduler runs on a thread after ``start()``; tests and the CLI inject a clock and call
``run_due_tasks(now_ms)`` instead, or call the task methods (``cleanup_logs``, ``compact``, ...) directly.

One process at a time manages a data directory: its ``.lock`` file is locked while the manager is open.
(Over 700 lines: one Kafka class; its loading, compaction and tiering live in sibling modules.)
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common import wall_ms
from ..checkpoint import (FUTURE_DIR_SUFFIX, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                          CleanShutdownFile, TopicPartition, log_delete_dir_name, topic_partition_dir_name)
from ..config import LONG_MAX, CleanerConfig, LogConfig
from .config_repository import TOPIC_CONFIG_FILE, ConfigRepository
from .log_dirs import (LOCK_FILE, DataDir, close_logs, load_data_dir, moved_log_start_offsets, open_log,
                       recovery_points, write_dir_checkpoint)
from .compaction import CompactionRound, compact_by_hand, uncleanable_partitions
from .log_manager_config import LogManagerConfig
from .metrics import LogManagerSnapshot, ManagerMetrics
from ..errors import KafkaLogError, LogLockedError
from ..log import Log
from .scheduler import KafkaScheduler
from .remote_log_tasks import (RemoteLogManager, RemoteLogManagerConfig, maybe_update_remote_log_components,
                               start_remote_log_manager)

if TYPE_CHECKING:
    from ..cleaner import LogCleaner

logger = logging.getLogger(__name__)
Clock = Callable[[], int]

# scheduler task names (LogManager.startupWithConfigOverrides, UnifiedLog, LogCleaner)
RETENTION_TASK = "kafka-log-retention"
FLUSH_TASK = "kafka-log-flusher"
RECOVERY_POINT_TASK = "kafka-recovery-point-checkpoint"
LOG_START_OFFSET_TASK = "kafka-log-start-offset-checkpoint"
DELETE_LOGS_TASK = "kafka-delete-logs"
PRODUCER_EXPIRATION_TASK = "PeriodicProducerExpirationCheck"
CLEANER_TASK = "kafka-log-cleaner"


@dataclass(frozen=True)
class RetentionResult:
    """What ``cleanup_logs`` removed from one partition."""

    topic_partition: TopicPartition
    segments_deleted: int
    bytes_deleted: int
    log_start_offset_before: int
    log_start_offset_after: int
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic_partition.topic, "partition": self.topic_partition.partition,
                "segments_deleted": self.segments_deleted, "bytes_deleted": self.bytes_deleted,
                "log_start_offset_before": self.log_start_offset_before,
                "log_start_offset_after": self.log_start_offset_after, "error": self.error}


class LogManager:
    """The logs of ``log_dirs``. Build with ``LogManager.open`` (loads and schedules), or
    construct and call ``startup()``; ``shutdown()`` (or leaving the ``with`` block) closes it."""

    def __init__(self, log_dirs: Iterable[str | os.PathLike[str]], *,
                 default_config: LogConfig | None = None,
                 cleaner_config: CleanerConfig | None = None,
                 config: LogManagerConfig | None = None,
                 clock: Clock = wall_ms,
                 scheduler: KafkaScheduler | None = None,
                 remote_log_manager_config: RemoteLogManagerConfig | None = None) -> None:
        dirs = [Path(d).absolute() for d in log_dirs]
        if not dirs:
            raise ValueError("LogManager needs at least one data directory")
        if len(set(dirs)) != len(dirs):
            raise ValueError(f"Duplicate log directory found: {[str(d) for d in dirs]}")
        self.log_dirs = dirs
        self.default_config = default_config or LogConfig()
        self.cleaner_config = cleaner_config or CleanerConfig()
        self.config = config or LogManagerConfig()
        self.clock = clock
        self.scheduler = scheduler or KafkaScheduler(clock=clock)
        self.remote_log_manager_config = remote_log_manager_config
        self.remote_log_manager: RemoteLogManager | None = None
        self.config_repository = ConfigRepository(dirs, self.default_config)
        self._dirs = {d: DataDir(d) for d in dirs}
        self._logs: dict[TopicPartition, Log] = {}
        self._future_logs: dict[TopicPartition, Log] = {}
        self._logs_to_be_deleted: list[tuple[Path, int]] = []     # (renamed dir, when scheduled)
        self._lock = threading.RLock()       # logCreationOrDeletionLock
        self._cleaner: LogCleaner | None = None
        self._cleaner_threads = False
        self._started = False
        self._closed = False
        self._retention_totals = [0, 0]      # segments, bytes deleted by cleanup_logs
        self._compaction_history: list[CompactionRound] = []
        self._task_time = threading.local()         # run_due_tasks(now_ms)'s now, for its tasks
        self._opened_at: dict[Path, float] = {}     # log dir -> time.monotonic() at open, for rates

    # ------------------------------------------------------------------------ opening, closing

    @classmethod
    def open(cls, log_dirs: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], *,
             background: bool = False, **kwargs: Any) -> "LogManager":
        """Create the manager, lock its data dirs, load every partition and schedule the
        background tasks; ``background=True`` also starts the scheduler thread and the cleaner
        threads (otherwise drive them with ``run_due_tasks``)."""
        if isinstance(log_dirs, (str, os.PathLike)):
            log_dirs = [log_dirs]
        mgr = cls(log_dirs, **kwargs)
        try:
            mgr.startup()
            if background:
                mgr.start()
        except BaseException:
            mgr._release_dir_locks()
            raise
        return mgr

    def __enter__(self) -> "LogManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _lock_dirs(self) -> None:
        """``LogManager.lockLogDirs``: one manager per data dir."""
        try:
            for d in self._dirs.values():
                d.lock()
        except LogLockedError:
            self._release_dir_locks()
            raise

    def _release_dir_locks(self) -> None:
        for d in self._dirs.values():
            d.unlock()

    def startup(self) -> None:
        """Lock the dirs, load every log, and schedule the background tasks
        (``LogManager.startup``)."""
        if self._started:
            raise KafkaLogError("LogManager already started")
        self._lock_dirs()
        self.load_logs()
        self._schedule_tasks()
        self.remote_log_manager = start_remote_log_manager(self)
        self._started = True

    def start(self) -> None:
        """Run the background tasks on the scheduler's thread, and the cleaner on its own
        threads (Kafka's ``LogCleaner.startup``) instead of as a scheduled task."""
        cleaner = self.cleaner
        if cleaner is not None:
            self.scheduler.cancel(CLEANER_TASK)
            cleaner.start()
            self._cleaner_threads = True
        self.scheduler.start()

    def shutdown(self) -> None:
        """``LogManager.shutdown``: stop the cleaner and the scheduler, flush and close every log
        (per dir, on the recovery thread pool), write the dir's checkpoints for all its logs at
        once, then the clean-shutdown marker (only if the dir had one or loaded all its logs)."""
        if self._closed:
            return
        self._closed = True
        logger.info("Shutting down.")
        try:
            if self._cleaner is not None:
                try:
                    self._cleaner.shutdown()
                except Exception:      # CoreUtils.swallow
                    logger.warning("Error shutting down the log cleaner", exc_info=True)
            self.scheduler.shutdown()
            if self.remote_log_manager is not None:
                self.remote_log_manager.close()
            with self._lock:
                by_dir = self._logs_by_dir()
            for d in self._dirs.values():
                logs = by_dir.get(d.path, {})
                failed = close_logs(d, list(logs.values()), self.config.num_recovery_threads_per_data_dir)
                try:
                    self._write_recovery_checkpoint(d.path, logs)
                    self._write_log_start_checkpoint(d.path, logs)
                except OSError:
                    logger.error("Disk error while writing checkpoints of %s", d.path, exc_info=True)
                    failed = True
                if not failed and (d.had_clean_shutdown or d.loaded_all):
                    logger.debug("Writing clean shutdown marker at %s", d.path)
                    try:
                        CleanShutdownFile(d.path).write()
                    except OSError:
                        logger.warning("Could not write the clean shutdown marker in %s", d.path, exc_info=True)
            with self._lock:
                self._logs.clear()
                self._future_logs.clear()
        finally:
            self._release_dir_locks()
        logger.info("Shutdown complete.")

    close = shutdown

    # ------------------------------------------------------------------------ loading

    def load_logs(self) -> None:
        """``LogManager.loadLogs``: every data dir's partitions, in parallel per dir."""
        started = time.perf_counter()
        total = 0
        unclean = []
        # read once; a file that cannot be read stops the start (no partition's config is known)
        overrides = self.config_repository.read_all()
        for d in self._dirs.values():
            d.take_clean_shutdown_marker()
            candidates, marked = d.partition_dirs()
            # LogManager.addLogToBeDeleted: deleted file.delete.delay.ms from now
            self._logs_to_be_deleted.extend((p, self.clock()) for p in marked)
            total += len(candidates)
            if not candidates:
                logger.info("No logs found to be loaded in %s", d.path)
            elif d.had_clean_shutdown:
                logger.info("Skipping recovery of %d logs from %s since clean shutdown file was found",
                            len(candidates), d.path)
            else:
                logger.info("Recovering %d logs from %s since no clean shutdown file was found",
                            len(candidates), d.path)
                unclean.append(str(d.path))
            load_data_dir(d, candidates, threads=self.config.num_recovery_threads_per_data_dir,
                          repository=self.config_repository, overrides=overrides, clock=self.clock,
                          register=self._register_loaded_log)
        logger.info("Loaded %d logs in %d ms%s", total, (time.perf_counter() - started) * 1000,
                    f" (unclean log dirs = {unclean})" if unclean else "")

    def _register_loaded_log(self, tp: TopicPartition, path: Path, log: Log) -> None:
        future = path.name.endswith(FUTURE_DIR_SUFFIX)
        with self._lock:
            pool = self._future_logs if future else self._logs
            previous = pool.get(tp)
            if previous is not None:
                log.close()
                raise KafkaLogError(
                    f"Duplicate log directories for {tp} are found in both {path} and {previous.dir}. "
                    f"Recover from this failure by deleting one of the two directories.")
            pool[tp] = log
            self._opened_at[log.dir] = time.monotonic()

    # ------------------------------------------------------------------------ logs

    def get_log(self, tp: TopicPartition | tuple[str, int], *, is_future: bool = False) -> Log | None:
        tp = TopicPartition(*tp)
        with self._lock:
            return (self._future_logs if is_future else self._logs).get(tp)

    def get_or_create_log(self, tp: TopicPartition | tuple[str, int], config: LogConfig | None = None,
                          topic_id: uuid.UUID | None = None) -> Log:
        """The partition's log, created (in the data dir with the fewest logs) if it does not
        exist yet. ``config``: the configuration of a new log; by default the topic's (defaults +
        overrides from the ``ConfigRepository``). ``topic_id``: written to a new log's
        ``partition.metadata``, assigned to an existing log without one, and checked against
        the id of one that has it (``InconsistentTopicIdError``), as ``getOrCreateLog`` does."""
        self._check_open()
        tp = TopicPartition(*tp)
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                if topic_id is not None:
                    existing.assign_topic_id(topic_id)
                return existing
            name = topic_partition_dir_name(tp.topic, tp.partition)
            data_dir = self._next_log_dir()
            config = config or self.config_repository.topic_config(tp.topic)
            log = open_log(data_dir / name, config, clock=self.clock, had_clean_shutdown=False, create=True,
                           topic_id=topic_id)
            self._logs[tp] = log
            self._opened_at[log.dir] = time.monotonic()
            logger.info("Created log for partition %s in %s with properties %s", tp, data_dir,
                     config.to_properties(only_changed=True))
            return log

    def _next_log_dir(self) -> Path:
        """``LogManager.nextLogDirs``: the dir with the fewest logs (first on a tie)."""
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        counts = {d: 0 for d in self.log_dirs}
        for log in self._logs.values():
            counts[log.dir.parent] = counts.get(log.dir.parent, 0) + 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def all_logs(self) -> list[Log]:
        """Current and future logs (``LogManager.allLogs``)."""
        with self._lock:
            return [*self._logs.values(), *self._future_logs.values()]

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        """The current logs by partition (a copy)."""
        with self._lock:
            return dict(self._logs)

    def _logs_by_dir(self) -> dict[Path, dict[TopicPartition, Log]]:
        out: dict[Path, dict[TopicPartition, Log]] = {d: {} for d in self.log_dirs}
        for pool in (self._logs, self._future_logs):
            for tp, log in pool.items():
                out.setdefault(log.dir.parent, {})[tp] = log
        return out

    def delete_log(self, tp: TopicPartition | tuple[str, int]) -> Path | None:
        """``LogManager.asyncDelete``: the log leaves the manager (and the cleaner), is closed,
        its directory renamed ``<topic>-<p>.<uuid>-delete`` and removed by the
        ``kafka-delete-logs`` task once ``file.delete.delay.ms`` has passed. The data dir's
        checkpoints are rewritten without it. Returns the renamed directory."""
        self._check_open()
        tp = TopicPartition(*tp)
        with self._lock:
            removed = self._logs.pop(tp, None)
        if removed is None:
            return None
        cleaner = self._cleaner
        if cleaner is not None:
            # wait until no cleaning is running on it; the cleaner forgets its checkpoint entry
            cleaner.abort_cleaning(tp)
            cleaner.update_checkpoints(removed.dir.parent, partition_to_remove=tp)
        removed.close()
        renamed = removed.dir.with_name(log_delete_dir_name(tp.topic, tp.partition))
        os.replace(removed.dir, renamed)
        with self._lock:
            logs = self._logs_by_dir().get(removed.dir.parent, {})
        self._write_recovery_checkpoint(removed.dir.parent, logs)
        self._write_log_start_checkpoint(removed.dir.parent, logs)
        self._logs_to_be_deleted.append((renamed, self.clock()))
        logger.info("Log for partition %s is renamed to %s and is scheduled for deletion", tp, renamed)
        return renamed

    def delete_logs(self, now_ms: int | None = None) -> list[Path]:
        """``LogManager.deleteLogs``: remove the ``-delete`` directories scheduled at least
        ``file.delete.delay.ms`` ago. Returns the directories removed."""
        now = self._now(now_ms)
        delay = self.default_config.file_delete_delay_ms
        with self._lock:
            due = [p for p, t in self._logs_to_be_deleted if t + delay <= now]
            self._logs_to_be_deleted = [(p, t) for p, t in self._logs_to_be_deleted if t + delay > now]
        for path in due:
            try:
                shutil.rmtree(path)
                logger.info("Deleted log %s", path)
            except FileNotFoundError:
                pass
            except OSError:
                logger.error("Exception while deleting %s", path, exc_info=True)
        return due

    @property
    def logs_to_be_deleted(self) -> list[Path]:
        with self._lock:
            return [p for p, _ in self._logs_to_be_deleted]

    @property
    def stray_dirs(self) -> list[Path]:
        return [p for d in self._dirs.values() for p in d.stray_dirs]

    @property
    def load_errors(self) -> dict[Path, str]:
        """Partition directories that failed to load, with the reason."""
        return {d.path / name: err for d in self._dirs.values() for name, err in d.load_errors.items()}

    def had_clean_shutdown(self, log_dir: str | os.PathLike[str]) -> bool:
        return self._dirs[Path(log_dir).absolute()].had_clean_shutdown

    def truncate_to(self, offsets: Mapping[TopicPartition | tuple[str, int], int]) -> None:
        """``LogManager.truncateTo``: truncate logs (cleaning of each paused around it), then
        checkpoint the recovery points."""
        for key, offset in offsets.items():
            log = self.get_log(key)
            if log is None:
                continue
            tp = TopicPartition(*key)
            cleaner = self._cleaner if offset < log.active_segment.base_offset else None
            if cleaner is not None:
                cleaner.abort_and_pause_cleaning(tp)
            try:
                log.truncate_to(offset)
                if cleaner is not None:
                    cleaner.maybe_truncate_checkpoint(log.dir.parent, tp, log.active_segment.base_offset)
            finally:
                if cleaner is not None:
                    cleaner.resume_cleaning([tp])
        self.checkpoint_log_recovery_offsets()

    # ------------------------------------------------------------------------ configuration

    def topic_config(self, topic: str) -> LogConfig:
        return self.config_repository.topic_config(topic)

    def alter_topic_config(self, topic: str, set_props: Mapping[str, object] | None = None,
                           delete: Iterable[str] = ()) -> LogConfig:
        """Change the topic's overrides (validated, persisted in every data dir) and apply the
        new configuration to its live logs (``LogManager.updateTopicConfig``), then what the
        change means for tiering (``remote_log_tasks.maybe_update_remote_log_components``)."""
        logs = [log for log in self.all_logs() if log.topic == topic]
        was_tiered = [log.config.remote_storage_enable for log in logs]
        config = self.config_repository.alter_topic_config(topic, set_props, delete)
        for log in logs:
            self.apply_config(log, config)
        maybe_update_remote_log_components(self.remote_log_manager, logs, was_tiered)
        return config

    @staticmethod
    def apply_config(log: Log, config: LogConfig) -> None:
        """Apply ``config`` to one live log, in memory only: nothing is persisted, so the
        topic's stored configuration is untouched (``UnifiedLog.updateConfig``, as
        ``LogManager.updateTopicConfig`` applies it to each of the topic's logs).
        ``alter_topic_config`` persists a change first and then calls this for every log of
        the topic; ``kafkalog compact --force`` calls it for a one-run override."""
        log.update_config(config)

    # ------------------------------------------------------------------------ checkpoints

    def _managed(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._logs) | set(self._future_logs)

    def _write_recovery_checkpoint(self, data_dir: Path, logs: Mapping[TopicPartition, Log]) -> None:
        write_dir_checkpoint(data_dir, RECOVERY_POINT_CHECKPOINT, recovery_points(logs), self._managed())

    def _write_log_start_checkpoint(self, data_dir: Path, logs: Mapping[TopicPartition, Log]) -> None:
        write_dir_checkpoint(data_dir, LOG_START_OFFSET_CHECKPOINT, moved_log_start_offsets(logs), self._managed())

    def checkpoint_log_recovery_offsets(self) -> None:
        """``checkpointLogRecoveryOffsets``: every dir's recovery points, then each log drops the
        producer snapshots the checkpoint no longer needs."""
        with self._lock:
            by_dir = self._logs_by_dir()
        for data_dir, logs in by_dir.items():
            try:
                self._write_recovery_checkpoint(data_dir, logs)
            except OSError:
                logger.error("Disk error while writing to recovery point file in %s", data_dir, exc_info=True)
                continue
            for log in logs.values():
                try:
                    log.delete_snapshots_after_recovery_point_checkpoint()
                except (OSError, KafkaLogError):
                    logger.warning("Could not prune producer snapshots of %s", log.dir, exc_info=True)

    def checkpoint_log_start_offsets(self) -> None:
        with self._lock:
            by_dir = self._logs_by_dir()
        for data_dir, logs in by_dir.items():
            try:
                self._write_log_start_checkpoint(data_dir, logs)
            except OSError:
                logger.error("Disk error while writing to logStartOffset file in %s", data_dir, exc_info=True)

    # ------------------------------------------------------------------------ periodic work

    def _schedule_tasks(self) -> None:
        c = self.config
        s = self.scheduler
        delay = c.initial_task_delay_ms
        s.schedule(RETENTION_TASK, self.cleanup_logs, delay_ms=delay, period_ms=c.retention_check_interval_ms)
        s.schedule(FLUSH_TASK, self.flush_dirty_logs, delay_ms=delay, period_ms=c.flush_check_interval_ms)
        s.schedule(RECOVERY_POINT_TASK, self.checkpoint_log_recovery_offsets, delay_ms=delay,
                   period_ms=c.flush_recovery_offset_checkpoint_interval_ms)
        s.schedule(LOG_START_OFFSET_TASK, self.checkpoint_log_start_offsets, delay_ms=delay,
                   period_ms=c.flush_start_offset_checkpoint_interval_ms)
        # also the .deleted segment files, so they go close to file.delete.delay.ms and not only
        # at the next retention check
        s.schedule(DELETE_LOGS_TASK, self._delete_logs_and_files, delay_ms=delay,
                   period_ms=max(1, min(self.default_config.file_delete_delay_ms, c.retention_check_interval_ms)))
        s.schedule(PRODUCER_EXPIRATION_TASK, self.remove_expired_producers,
                   delay_ms=c.producer_id_expiration_check_interval_ms,
                   period_ms=c.producer_id_expiration_check_interval_ms)
        if self.cleaner_config.enable_cleaner:
            s.schedule(CLEANER_TASK, self._cleaner_task, delay_ms=delay,
                       period_ms=max(1, self.cleaner_config.backoff_ms))

    def run_due_tasks(self, now_ms: int | None = None) -> list[str]:
        """Run every scheduled task due at ``now_ms`` on this thread; returns their names."""
        self._check_open()
        # the tasks take no arguments: they read "now" from here, on this thread only
        self._task_time.now = now_ms
        try:
            return self.scheduler.run_due(now_ms)
        finally:
            self._task_time.now = None

    def _now(self, now_ms: int | None) -> int:
        if now_ms is not None:
            return now_ms
        task_now = getattr(self._task_time, "now", None)
        return self.clock() if task_now is None else task_now

    def cleanup_logs(self, now_ms: int | None = None, *, topics: Iterable[str] | None = None,
                     partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
                     include_compacted: bool | None = None) -> list[RetentionResult]:
        """``LogManager.cleanupLogs``: ``deleteOldSegments`` on every log, each by its own
        ``cleanup.policy``. As in Kafka, logs whose policy includes ``compact`` are left to the
        cleaner (it applies their retention between cleanings) when a cleaner runs;
        ``include_compacted=True`` takes them too (the CLI does, no cleaner runs there).
        ``topics`` / ``partitions`` narrow the run. Returns one entry per log that lost segments
        (or failed)."""
        now = self._now(now_ms)
        wanted = None if topics is None else set(topics)
        wanted_tps = None if partitions is None else {TopicPartition(*tp) for tp in partitions}
        cleaner = self._cleaner
        if include_compacted is None:
            include_compacted = cleaner is None
        results: list[RetentionResult] = []
        started = time.perf_counter()
        paused: list[TopicPartition] = []
        claimed: list[TopicPartition] = []
        if cleaner is not None:
            # claim the logs from the cleaner first, so that neither works on a log the other
            # has (pauseCleaningForNonCompactedPartitions; deletableLogs for compacted ones)
            paused = list(cleaner.pause_cleaning_for_non_compacted_partitions())
            if include_compacted:
                claimed = list(cleaner.cleaner_manager.deletable_logs())
            owned = set(paused) | set(claimed)
            with self._lock:
                candidates = [(tp, log) for tp, log in self._logs.items() if tp in owned]
                candidates += list(self._future_logs.items())
        else:
            with self._lock:
                candidates = [(tp, log) for pool in (self._logs, self._future_logs) for tp, log in pool.items()
                              if include_compacted or not log.config.compact]
        try:
            for tp, log in candidates:
                if (wanted is not None and tp.topic not in wanted) or \
                        (wanted_tps is not None and tp not in wanted_tps):
                    continue
                result = self._delete_old_segments(tp, log, now)
                if result.segments_deleted or result.error:
                    results.append(result)
        finally:
            if cleaner is not None and paused:
                cleaner.resume_cleaning(paused)
            if cleaner is not None and claimed:
                cleaner.cleaner_manager.done_deleting(claimed)
        total = sum(r.segments_deleted for r in results)
        self._retention_totals[0] += total
        self._retention_totals[1] += sum(r.bytes_deleted for r in results)
        logger.debug("Log cleanup completed. %d files deleted in %.3f seconds", total, time.perf_counter() - started)
        return results

    def _delete_old_segments(self, tp: TopicPartition, log: Log, now: int) -> RetentionResult:
        before_start = log.log_start_offset
        sizes_before = {s.base_offset: s.size for s in log.segments}
        try:
            deleted = log.delete_old_segments(now)
        except (OSError, KafkaLogError) as e:
            logger.error("Retention of %s failed: %s", log.dir, e)
            return RetentionResult(tp, 0, 0, before_start, log.log_start_offset, error=str(e))
        remaining = {s.base_offset for s in log.segments}
        gone = sum(size for base, size in sizes_before.items() if base not in remaining)
        return RetentionResult(tp, deleted, gone, before_start, log.log_start_offset)

    def flush_dirty_logs(self, now_ms: int | None = None) -> list[TopicPartition]:
        """``LogManager.flushDirtyLogs``: flush every log whose last flush is ``flush.ms`` or
        more ago. Returns the partitions flushed."""
        now = self._now(now_ms)
        flushed = []
        with self._lock:
            logs = [(tp, log) for pool in (self._logs, self._future_logs) for tp, log in pool.items()]
        for tp, log in logs:
            if log.config.flush_ms >= LONG_MAX:
                continue
            try:
                if now - log.last_flush_ms >= log.config.flush_ms:
                    logger.debug("Flushing %s (flush.ms %d)", log.dir.name, log.config.flush_ms)
                    log.flush()
                    flushed.append(tp)
            except (OSError, KafkaLogError):
                logger.error("Error flushing topic %s", tp, exc_info=True)
        return flushed

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Remove every log's ``.deleted`` files older than its ``file.delete.delay.ms``."""
        now = self._now(now_ms)
        removed = 0
        for log in self.all_logs():
            try:
                removed += log.delete_expired_files(now)
            except (OSError, KafkaLogError):
                logger.error("Error deleting expired files of %s", log.dir, exc_info=True)
        return removed

    def _delete_logs_and_files(self) -> None:
        now = self._now(None)
        self.delete_logs(now)
        self.delete_expired_files(now)

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        """``UnifiedLog``'s ``PeriodicProducerExpirationCheck``: producers idle for longer than
        ``producer.id.expiration.ms`` are forgotten (under the log's lock)."""
        now = self._now(now_ms)
        for log in self.all_logs():
            try:
                log.remove_expired_producers(now)
            except (OSError, KafkaLogError):
                logger.error("Error expiring producers of %s", log.dir, exc_info=True)

    # ------------------------------------------------------------------------ cleaner

    @property
    def cleaner(self) -> "LogCleaner | None":
        """The ``LogCleaner`` over this manager's logs (created on first use: the cleaner
        modules import numba kernels a manager that never compacts does not need), or ``None``
        when ``log.cleaner.enable`` is false."""
        if self._cleaner is None and self.cleaner_config.enable_cleaner:
            from ..cleaner import LogCleaner

            with self._lock:
                if self._cleaner is None:
                    self._cleaner = LogCleaner(self.cleaner_config, list(self.log_dirs),
                                               lambda: dict(self._logs), clock=self.clock)
        return self._cleaner

    def _cleaner_task(self) -> None:
        if self._cleaner_threads:
            return
        self.compact(self._now(None))

    def compact(self, now_ms: int | None = None, *, topics: Iterable[str] | None = None, max_rounds: int = 10000,
                progress: Callable[[CompactionRound], None] | None = None) -> list[CompactionRound]:
        """Run cleaning rounds by hand (``LogCleaner.clean_once``, each cleaning the filthiest
        compacted log) on this thread until no log is cleanable. ``topics``: only these (the
        others' cleaning is paused meanwhile, as Kafka's ``abortAndPauseCleaning``). A partition
        that fails is marked uncleanable by the cleaner and the rounds go on with the others.
        ``progress`` is called after each round. Returns every round."""
        self._check_open()
        cleaner = self.cleaner
        if cleaner is None:
            return []

        def record(r: CompactionRound) -> None:
            self._compaction_history.append(r)
            if progress is not None:
                progress(r)

        return compact_by_hand(cleaner, lambda: self.logs, now_ms, topics=topics, max_rounds=max_rounds,
                               progress=record)

    def uncleanable_partitions(self) -> set[TopicPartition]:
        """Partitions the cleaner set aside after an error (per data dir in Kafka)."""
        if self._cleaner is None:
            return set()
        return {tp for _, tp in uncleanable_partitions(self._cleaner.cleaner_manager)}

    # ------------------------------------------------------------------------ metrics

    def snapshot(self) -> LogManagerSnapshot:
        """What the manager holds now (copies of its maps; the logs and cleaner themselves)."""
        with self._lock:
            logs, future_logs = dict(self._logs), dict(self._future_logs)
            to_delete = [p for p, _ in self._logs_to_be_deleted]
        segments, nbytes = self._retention_totals
        return LogManagerSnapshot(
            log_dirs=list(self.log_dirs), logs=logs, future_logs=future_logs, opened_at=dict(self._opened_at),
            had_clean_shutdown={d.path: d.had_clean_shutdown for d in self._dirs.values()},
            load_errors=self.load_errors, logs_to_be_deleted=to_delete, stray_dirs=self.stray_dirs,
            tasks=list(self.scheduler.tasks.values()), retention_segments_deleted=segments,
            retention_bytes_deleted=nbytes, cleaner=self._cleaner,
            compaction_rounds=list(self._compaction_history), uncleanable_partitions=self.uncleanable_partitions())

    def metrics(self) -> ManagerMetrics:
        """Per partition and per data directory figures, as dataclasses (``as_dict()``)."""
        return ManagerMetrics.collect(self.snapshot())

    # ------------------------------------------------------------------------ misc

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaLogError("LogManager is shut down")

    def __repr__(self) -> str:
        return f"LogManager({[str(d) for d in self.log_dirs]}, logs={len(self._logs)})"


__all__ = ["LogManager", "LogManagerConfig", "RetentionResult", "CompactionRound", "TOPIC_CONFIG_FILE", "LOCK_FILE"]

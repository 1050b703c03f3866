"""LogManager: the partitions of one or more data directories (Kafka's ``LogManager``).

::

    with LogManager.open(["/data/kafkalog"]) as mgr:          # loads every partition
        log = mgr.get_or_create_log(TopicPartition("orders", 0))
        log.append(table)
        mgr.run_due_tasks()                                    # or mgr.start(): a thread does it

What it does, as the broker does it:

* start-up (``LogManager.loadLogs``): per data dir, the ``.kafka_cleanshutdown`` marker is read
  and deleted (a crash while loading makes the next start unclean, KAFKA-10471), then every
  ``topic-partition`` directory is opened on a pool of ``num_recovery_threads_per_data_dir``
  threads, with ``had_clean_shutdown`` telling ``Log.open`` whether recovery can be skipped.
  ``-delete`` directories are queued for deletion, ``-stray`` ones are kept aside untouched,
  ``-future`` ones are loaded as future logs; anything else that is not a partition is ignored
  with a warning (a broker would refuse to start).
* per-topic overrides come from ``ConfigRepository`` (a JSON file in the data dir root).
* shutdown (``LogManager.shutdown``): the cleaner stops, every log is flushed and closed, then per
  dir ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` are written for all
  its logs at once, and the clean-shutdown marker last, only if the dir had one or all its logs
  loaded.
* background tasks on a ``KafkaScheduler``, under Kafka's names: ``kafka-log-retention``
  (``cleanupLogs``), ``kafka-log-flusher`` (``flushDirtyLogs``), ``kafka-recovery-point-checkpoint``,
  ``kafka-log-start-offset-checkpoint``, ``kafka-delete-logs`` (``-delete`` directories and
  ``.deleted`` segment files past ``file.delete.delay.ms``), ``PeriodicProducerExpirationCheck``
  and, when the cleaner is driven by hand, ``kafka-log-cleaner``.

The scheduler runs on a thread after ``start()``; tests and the CLI inject a clock and call
``run_due_tasks(now_ms)`` instead, or call the task methods (``cleanup_logs``, ``compact``, ...)
directly.

One process at a time manages a data directory: Kafka's ``.lock`` file in its root is locked
(``flock``) while the manager is open.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common import wall_ms
from ..checkpoint import (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, LOG_START_OFFSET_CHECKPOINT,
                          RECOVERY_POINT_CHECKPOINT, STRAY_DIR_SUFFIX, CleanShutdownFile,
                          OffsetCheckpointFile, TopicPartition, log_delete_dir_name,
                          parse_topic_partition_dir, topic_partition_dir_name,
                          without_invalid_topics)
from ..config import LONG_MAX, CleanerConfig, LogConfig
from .config_repository import TOPIC_CONFIG_FILE, ConfigRepository, data_dir_lock
from ..errors import KafkaLogError, LogLockedError
from ..log import Log
from .scheduler import KafkaScheduler

if TYPE_CHECKING:
    from ..cleaner import LogCleaner
    from .metrics import ManagerMetrics

logger = logging.getLogger(__name__)

Clock = Callable[[], int]

LOCK_FILE = ".lock"                  # LogManager.LockFileName

# scheduler task names (LogManager.startupWithConfigOverrides, UnifiedLog, LogCleaner)
RETENTION_TASK = "kafka-log-retention"
FLUSH_TASK = "kafka-log-flusher"
RECOVERY_POINT_TASK = "kafka-recovery-point-checkpoint"
LOG_START_OFFSET_TASK = "kafka-log-start-offset-checkpoint"
DELETE_LOGS_TASK = "kafka-delete-logs"
PRODUCER_EXPIRATION_TASK = "PeriodicProducerExpirationCheck"
CLEANER_TASK = "kafka-log-cleaner"


@dataclass(frozen=True)
class LogManagerConfig:
    """The broker settings the LogManager reads (``KafkaConfig``; kafka_format.md §17).

    ``flush_check_interval_ms`` (``log.flush.scheduler.interval.ms``) defaults to 1 s where Kafka's
    default is ``Long.MAX_VALUE``: a broker relies on replication and leaves flushing to the OS,
    kafkalog has no replicas, so a topic's ``flush.ms`` should take effect on an idle log too.
    The check itself costs one comparison per log."""

    num_recovery_threads_per_data_dir: int = 1            # num.recovery.threads.per.data.dir
    retention_check_interval_ms: int = 300000             # log.retention.check.interval.ms
    flush_check_interval_ms: int = 1000                   # log.flush.scheduler.interval.ms
    flush_recovery_offset_checkpoint_interval_ms: int = 60000   # log.flush.offset.checkpoint.interval.ms
    flush_start_offset_checkpoint_interval_ms: int = 60000      # log.flush.start.offset.checkpoint.interval.ms
    producer_id_expiration_check_interval_ms: int = 600000      # producer.id.expiration.check.interval.ms
    initial_task_delay_ms: int = 30000                    # log.initial.task.delay.ms

    def __post_init__(self) -> None:
        if self.num_recovery_threads_per_data_dir < 1:
            raise ValueError("num.recovery.threads.per.data.dir must be at least 1")
        for name in ("retention_check_interval_ms", "flush_check_interval_ms",
                     "flush_recovery_offset_checkpoint_interval_ms",
                     "flush_start_offset_checkpoint_interval_ms",
                     "producer_id_expiration_check_interval_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.initial_task_delay_ms < 0:
            raise ValueError("initial_task_delay_ms must be >= 0")


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


@dataclass(frozen=True)
class CompactionRound:
    """One cleaning round of ``compact``: which partition, the dirty range cleaned
    (``[first_dirty_offset, end_offset)``), its size before and after, and the cleaner's stats."""

    topic_partition: TopicPartition | None
    first_dirty_offset: int | None
    end_offset: int | None
    size_before: int
    size_after: int
    stats: Any                       # cleaner.CleanerStats
    seconds: float

    @property
    def records_removed(self) -> int:
        return self.stats.messages_read - self.stats.messages_written

    def as_dict(self) -> dict[str, Any]:
        tp = self.topic_partition
        s = self.stats
        return {"topic": None if tp is None else tp.topic, "partition": None if tp is None else tp.partition,
                "first_dirty_offset": self.first_dirty_offset, "end_offset": self.end_offset,
                "size_before": self.size_before, "size_after": self.size_after,
                "bytes_read": s.bytes_read, "bytes_written": s.bytes_written,
                "messages_read": s.messages_read, "messages_written": s.messages_written,
                "records_removed": self.records_removed, "invalid_messages_read": s.invalid_messages_read,
                "buffer_utilization": s.buffer_utilization, "seconds": self.seconds}


@dataclass
class _DataDir:
    """Per data dir state of one manager run."""

    path: Path
    lock_fd: int = -1
    had_clean_shutdown: bool = False
    clean_marker_mtime_ns: int = 0
    loaded_all: bool = False
    load_errors: dict[str, str] = field(default_factory=dict)
    stray_dirs: list[Path] = field(default_factory=list)


def _open_log(path: Path, config: LogConfig, *, clock: Clock, had_clean_shutdown: bool,
              create: bool, topic_id: uuid.UUID | None = None) -> Log:
    return Log.open(path, config, create=create, clock=clock, had_clean_shutdown=had_clean_shutdown,
                    topic_id=topic_id)


def _newest_mtime_ns(directory: Path) -> int:
    newest = 0
    with os.scandir(directory) as it:
        for entry in it:
            try:
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime_ns)
            except FileNotFoundError:
                continue
    return newest


class LogManager:
    """The logs of ``log_dirs``. Build with ``LogManager.open`` (loads and schedules), or
    construct and call ``startup()``; ``shutdown()`` (or leaving the ``with`` block) closes it."""

    def __init__(self, log_dirs: Iterable[str | os.PathLike[str]], *,
                 default_config: LogConfig | None = None,
                 cleaner_config: CleanerConfig | None = None,
                 config: LogManagerConfig | None = None,
                 clock: Clock = wall_ms,
                 scheduler: KafkaScheduler | None = None) -> None:
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
        self.config_repository = ConfigRepository(dirs, self.default_config)
        self._dirs = {d: _DataDir(d) for d in dirs}
        self._logs: dict[TopicPartition, Log] = {}
        self._future_logs: dict[TopicPartition, Log] = {}
        self._logs_to_be_deleted: list[tuple[Path, int]] = []     # (renamed dir, when scheduled)
        self._lock = threading.RLock()       # logCreationOrDeletionLock
        self._cleaner: Any = None
        self._cleaner_threads = False
        self._started = False
        self._closed = False
        self._opened_ms = clock()
        self._retention_totals = [0, 0]      # segments, bytes deleted by cleanup_logs
        self._compaction_history: list[Any] = []
        self._task_time = threading.local()         # run_due_tasks(now_ms)'s now, for its tasks
        self._opened_at: dict[int, float] = {}      # id(log) -> time.monotonic() at open, for rates

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
        """``LogManager.lockLogDirs``: one manager per data dir, as ``.lock`` + ``FileLock``."""
        for d in self._dirs.values():
            d.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(d.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self._release_dir_locks()
                raise LogLockedError(
                    f"Failed to acquire lock on file {LOCK_FILE} in {d.path}. A Kafka instance in another "
                    f"process or thread is using this directory.") from None
            d.lock_fd = fd

    def _release_dir_locks(self) -> None:
        for d in self._dirs.values():
            if d.lock_fd >= 0:
                os.close(d.lock_fd)
                d.lock_fd = -1

    def startup(self) -> None:
        """Lock the dirs, load every log, and schedule the background tasks
        (``LogManager.startup``)."""
        if self._started:
            raise KafkaLogError("LogManager already started")
        self._lock_dirs()
        self.load_logs()
        self._schedule_tasks()
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
            with self._lock:
                by_dir = self._logs_by_dir()
            for d in self._dirs.values():
                logs = by_dir.get(d.path, {})
                failed = self._close_logs(d, list(logs.values()))
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

    def _close_logs(self, d: _DataDir, logs: list[Log]) -> bool:
        """Flush and close ``logs`` on a pool; True if any failed."""
        failed = False

        def close_one(log: Log) -> None:
            log.flush()             # the latest possible recovery point
            log.close()

        with ThreadPoolExecutor(self.config.num_recovery_threads_per_data_dir,
                                thread_name_prefix=f"log-closing-{d.path.name}") as pool:
            futures = {pool.submit(close_one, log): log for log in logs}
            for fut, log in futures.items():
                try:
                    fut.result()
                except Exception:
                    failed = True
                    logger.warning("There was an error closing %s during LogManager shutdown", log.dir,
                                exc_info=True)
        return failed

    # ------------------------------------------------------------------------ loading

    def load_logs(self) -> None:
        """``LogManager.loadLogs``: every data dir's partitions, in parallel per dir."""
        started = time.perf_counter()
        total = 0
        unclean = []
        # read once; a file that cannot be read stops the start (no partition's config is known)
        overrides = self.config_repository.read_all()
        for d in self._dirs.values():
            marker = CleanShutdownFile(d.path)
            if marker.exists():
                # cache the status, then delete the marker: a crash while loading must make the
                # next start unclean (KAFKA-10471)
                d.clean_marker_mtime_ns = marker.path.stat().st_mtime_ns
                marker.delete()
                d.had_clean_shutdown = True
            candidates = self._partition_dirs(d)
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
            with ThreadPoolExecutor(self.config.num_recovery_threads_per_data_dir,
                                    thread_name_prefix=f"log-recovery-{d.path.name}") as pool:
                futures = [(p, pool.submit(self._load_log, d, p, overrides)) for p in candidates]
                errors = 0
                for p, fut in futures:
                    try:
                        fut.result()
                    except (OSError, KafkaLogError) as e:
                        # Kafka takes the whole dir offline on an IOException; here the partition
                        # stays unloaded (and the dir gets no clean marker), the others go on
                        errors += 1
                        d.load_errors[p.name] = str(e)
                        logger.error("Error while loading log %s: %s", p, e)
                d.loaded_all = errors == 0
        logger.info("Loaded %d logs in %d ms%s", total, (time.perf_counter() - started) * 1000,
                 f" (unclean log dirs = {unclean})" if unclean else "")

    def _partition_dirs(self, d: _DataDir) -> list[Path]:
        out = []
        for entry in sorted(d.path.iterdir()):
            if not entry.is_dir():
                continue
            try:
                parse_topic_partition_dir(entry.name)
            except KafkaLogError:
                logger.warning("Ignoring %s: not a topic-partition directory", entry)
                continue
            if entry.name.endswith(STRAY_DIR_SUFFIX):
                # KRaft keeps stray logs until its metadata says they can go; kafkalog has no
                # metadata, so they stay untouched for an operator to look at
                logger.warning("Found stray log: %s (left untouched)", entry)
                d.stray_dirs.append(entry)
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                # LogManager.addLogToBeDeleted: deleted file.delete.delay.ms from now
                logger.info("Scheduling deletion of %s, marked for deletion", entry)
                self._logs_to_be_deleted.append((entry, self.clock()))
                continue
            out.append(entry)
        return out

    def _load_log(self, d: _DataDir, path: Path, overrides: Mapping[str, Mapping[str, str]]) -> Log:
        """``LogManager.loadLog``."""
        tp = parse_topic_partition_dir(path.name)
        config = self.config_repository.topic_config(tp.topic, overrides)
        clean = d.had_clean_shutdown
        if clean:
            # the marker vouches for what the manager closed; a file written after it (another
            # process appending with the manager down) would be trusted blindly by a clean load
            newest = _newest_mtime_ns(path)
            if newest > d.clean_marker_mtime_ns:
                logger.warning("%s was modified after the clean shutdown marker was written: recovering it", path)
                clean = False
        started = time.perf_counter()
        log = _open_log(path, config, clock=self.clock, had_clean_shutdown=clean, create=False)
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
            self._opened_at[id(log)] = time.monotonic()
        logger.info("Completed load of %s with %d segments, log-start-offset %d and log-end-offset %d in %d ms",
                 log.dir.name, len(log.segments), log.log_start_offset, log.log_end_offset,
                 (time.perf_counter() - started) * 1000)
        return log

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
            log = _open_log(data_dir / name, config, clock=self.clock, had_clean_shutdown=False, create=True,
                           topic_id=topic_id)
            self._logs[tp] = log
            self._opened_at[id(log)] = time.monotonic()
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
            pause = self._cleaner is not None and offset < log.active_segment.base_offset
            if pause:
                self._cleaner.abort_and_pause_cleaning(tp)
            try:
                log.truncate_to(offset)
                if pause:
                    self._cleaner.maybe_truncate_checkpoint(log.dir.parent, tp, log.active_segment.base_offset)
            finally:
                if pause:
                    self._cleaner.resume_cleaning([tp])
        self.checkpoint_log_recovery_offsets()

    # ------------------------------------------------------------------------ configuration

    def topic_config(self, topic: str) -> LogConfig:
        return self.config_repository.topic_config(topic)

    def alter_topic_config(self, topic: str, set_props: Mapping[str, object] | None = None,
                           delete: Iterable[str] = ()) -> LogConfig:
        """Change the topic's overrides (validated, persisted in every data dir) and apply the
        new configuration to its live logs (``LogManager.updateTopicConfig``)."""
        config = self.config_repository.alter_topic_config(topic, set_props, delete)
        for log in self.all_logs():
            if log.topic == topic:
                self.apply_config(log, config)
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

    def _write_offsets(self, data_dir: Path, name: str, offsets: dict[TopicPartition, int]) -> None:
        """Rewrite the dir's checkpoint ``name`` with ``offsets``: all of the manager's logs at
        once, as Kafka writes it. Entries of partitions another process holds (a directory
        exists that the manager did not load) are kept; entries of gone partitions drop out."""
        cp = OffsetCheckpointFile(data_dir / name)
        with data_dir_lock(data_dir):
            try:
                existing = without_invalid_topics(cp.read(), cp.path)
            except (OSError, KafkaLogError):
                existing = {}
            with self._lock:
                mine = set(self._logs) | set(self._future_logs)
            for tp, value in existing.items():
                if tp in offsets or tp in mine:
                    continue
                if (data_dir / str(tp)).is_dir():
                    offsets[tp] = value       # another process's partition, or one that failed to load
            cp.write_if_dir_exists(offsets)

    def _write_recovery_checkpoint(self, data_dir: Path, logs: Mapping[TopicPartition, Log]) -> None:
        self._write_offsets(data_dir, RECOVERY_POINT_CHECKPOINT,
                            {tp: log.recovery_point for tp, log in logs.items()})

    def _write_log_start_checkpoint(self, data_dir: Path, logs: Mapping[TopicPartition, Log]) -> None:
        # only logs whose start moved past their first segment (checkpointLogStartOffsetsInDir)
        self._write_offsets(data_dir, LOG_START_OFFSET_CHECKPOINT,
                            {tp: log.log_start_offset for tp, log in logs.items()
                             if log.segments and log.log_start_offset > log.segments[0].base_offset})

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
            if paused:
                cleaner.resume_cleaning(paused)
            if claimed:
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
        cm = cleaner.cleaner_manager
        wanted = None if topics is None else set(topics)
        paused: list[TopicPartition] = []
        if wanted is not None:
            for tp, log in self.logs.items():
                if log.config.compact and tp.topic not in wanted:
                    cleaner.abort_and_pause_cleaning(tp)
                    paused.append(tp)
        rounds: list[CompactionRound] = []
        try:
            for _ in range(max_rounds):
                logs = {tp: log for tp, log in self.logs.items() if log.config.compact}
                sizes = {tp: log.size for tp, log in logs.items()}
                checkpoints = cm.all_cleaner_checkpoints()
                uncleanable = self._uncleanable(cm)
                started = time.perf_counter()
                stats = cleaner.clean_once(now_ms)
                if stats is None:
                    if self._uncleanable(cm) - uncleanable:
                        continue          # one failed and was set aside: the others may still need it
                    break
                after = cm.all_cleaner_checkpoints()
                moved = [tp for tp in logs if after.get(tp) != checkpoints.get(tp)]
                # the cleaned log's checkpoint moved; a forced reset may move others' too
                moved.sort(key=lambda tp: logs[tp].size == sizes[tp])
                tp = moved[0] if moved else None
                r = CompactionRound(
                    topic_partition=tp,
                    first_dirty_offset=None if tp is None else checkpoints.get(tp, logs[tp].log_start_offset),
                    end_offset=None if tp is None else after.get(tp),
                    size_before=0 if tp is None else sizes[tp], size_after=0 if tp is None else logs[tp].size,
                    stats=stats, seconds=time.perf_counter() - started)
                rounds.append(r)
                self._compaction_history.append(r)
                if progress is not None:
                    progress(r)
        finally:
            if paused:
                cleaner.resume_cleaning(paused)
        return rounds

    @staticmethod
    def _uncleanable(cm: Any) -> set[tuple[str, TopicPartition]]:
        return {(str(d), tp) for d in cm.log_dirs for tp in cm.uncleanable_partitions(d)}

    def uncleanable_partitions(self) -> set[TopicPartition]:
        """Partitions the cleaner set aside after an error (per data dir in Kafka)."""
        if self._cleaner is None:
            return set()
        return {tp for _, tp in self._uncleanable(self._cleaner.cleaner_manager)}

    # ------------------------------------------------------------------------ metrics

    def metrics(self) -> "ManagerMetrics":
        """Per partition and per data directory figures, as dataclasses (``as_dict()``)."""
        from .metrics import ManagerMetrics

        return ManagerMetrics.collect(self)

    # ------------------------------------------------------------------------ misc

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaLogError("LogManager is shut down")

    def __repr__(self) -> str:
        return f"LogManager({[str(d) for d in self.log_dirs]}, logs={len(self._logs)})"


__all__ = ["LogManager", "LogManagerConfig", "RetentionResult", "CompactionRound", "TOPIC_CONFIG_FILE", "LOCK_FILE"]

"""Kafka's ``LogCleaner``: the cleaner service of a set of data directories, with its
``CleanerThread``s (both in Kafka's ``LogCleaner.scala``).

``start()`` runs ``CleanerConfig.num_threads`` background ``CleanerThread``s, each with its own
``Cleaner`` and offset map of ``dedupe_buffer_size / num_threads`` bytes; ``clean_once(now_ms)``
runs one round of a thread's ``doWork`` in the calling thread (tests, the CLI, a scheduler with
its own clock). Which log to clean, and the checkpoints of how far each log is cleaned, are the
``LogCleanerManager``'s.

A round (``CleanerThread.cleanFilthiestLog``): pick the compacted log with the highest
cleanable ratio (or one whose ``max.compaction.lag.ms`` is exceeded), clean it, write the end
offset to the checkpoint; then delete old segments (retention, log start offset) of every
compacted log, which is how ``compact,delete`` topics get their retention (Kafka's LogManager
leaves compacted logs to the cleaner threads). An error while evaluating or cleaning a log
becomes a ``LogCleaningError`` carrying the log; the thread marks that partition uncleanable
for its data dir and goes on with the others.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, cast

from ..checkpoint import TopicPartition
from ..common import INT_MAX, wall_ms
from ..config import CleanerConfig
from ..errors import LogCleaningAbortedError, LogCleaningError
from .cleaner import Cleaner, LogToClean
from .cleaner_manager import Clock, LogCleanerManager, LogsSource, PreCleanStats, topic_partition_of
from .cleaner_stats import CleanerStats
from .throttler import Throttler

if TYPE_CHECKING:
    from ..log import Log

logger = logging.getLogger(__name__)


class _ThreadShutdown(LogCleaningAbortedError):
    """Kafka's ``ShutdownableThread`` ``ThreadShutdownException``: the cleaner is stopping;
    the clean in progress is abandoned like an aborted one (nothing swapped in)."""


class CleanerThread:
    """Kafka's ``LogCleaner.CleanerThread``: a ``Cleaner`` with its own offset map, and the
    loop that picks the filthiest log, cleans it and deletes compacted logs' old segments.

    Not started, it serves ``LogCleaner.clean_once`` (one round in the caller's thread)."""

    def __init__(self, owner: "LogCleaner", thread_id: int) -> None:
        self.owner = owner
        self.thread_id = thread_id
        self.name = f"kafka-log-cleaner-thread-{thread_id}"
        config = owner.config
        options: dict[str, Any] = dict(
            io_buffer_size=max(1, config.io_buffer_size // config.num_threads // 2),
            max_io_buffer_size=config.max_message_size,
            dedupe_buffer_load_factor=config.dedupe_buffer_load_factor,
            clock=owner.clock,
            check_done=self._check_done)
        # log.cleaner.io.max.bytes.per.second: the threads' shared Throttler, for a Cleaner
        # (Kafka's Cleaner calls throttler.maybeThrottle after every read and write)
        options["throttler"] = owner.throttler
        self.cleaner = Cleaner(min(config.dedupe_buffer_size // config.num_threads, INT_MAX), **options)
        self.last_stats: CleanerStats | None = None
        self.last_pre_clean_stats = PreCleanStats()
        self._running = threading.Event()
        self._running.set()
        self._stopped = threading.Event()      # wakes a backoff sleep at shutdown
        self._thread: threading.Thread | None = None
        self.failed = False

    # ------------------------------------------------------------------ the loop

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        logger.info("%s: starting", self.name)
        try:
            while self._running.is_set():
                self.do_work()
        except _ThreadShutdown:
            pass
        except BaseException:                   # noqa: BLE001 - ShutdownableThread: report, die
            self.failed = True
            logger.exception("%s: error due to", self.name)
        finally:
            logger.info("%s: stopped", self.name)

    def initiate_shutdown(self) -> None:
        self._running.clear()
        self._stopped.set()

    def await_shutdown(self, timeout_s: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def is_running(self) -> bool:
        return self._running.is_set()

    @property
    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _check_done(self, log: "Log") -> None:
        """``checkDone``, the Cleaner's hook between pieces of work."""
        if not self._running.is_set():
            raise _ThreadShutdown(f"{self.name} is shutting down")
        self.owner.cleaner_manager.check_cleaning_aborted(topic_partition_of(log))

    def do_work(self, now_ms: int | None = None) -> bool:
        """``doWork``: one round, then back off ``log.cleaner.backoff.ms`` if nothing was
        cleaned."""
        cleaned = self.try_clean_filthiest_log(now_ms)
        if not cleaned and self._thread is not None:
            self._stopped.wait(self.owner.config.backoff_ms / 1000)
        self.owner.cleaner_manager.maintain_uncleanable_partitions()
        return cleaned

    def try_clean_filthiest_log(self, now_ms: int | None = None) -> bool:
        """``tryCleanFilthiestLog``: a log whose evaluation, cleaning or deletion failed is
        marked uncleanable for its data dir; the others go on."""
        try:
            return self.clean_filthiest_log(now_ms)
        except LogCleaningError as e:
            # errors.py (a foundation module) cannot name Log; clean_filthiest_log and the
            # cleaner manager raise it with the Log at fault
            bad = cast("Log | None", e.log)
            logger.warning("Unexpected exception thrown when cleaning log %s. Marking its partition "
                        "(%s) as uncleanable", bad, None if bad is None else topic_partition_of(bad),
                        exc_info=e)
            if bad is not None:
                self.owner.cleaner_manager.mark_partition_uncleanable(bad.dir.parent, topic_partition_of(bad))
            return False

    def clean_filthiest_log(self, now_ms: int | None = None) -> bool:
        """``cleanFilthiestLog``."""
        manager = self.owner.cleaner_manager
        now = self.owner.clock() if now_ms is None else now_ms
        pre_clean_stats = PreCleanStats()
        ltc = manager.grab_filthiest_compacted_log(now, pre_clean_stats)
        cleaned = False
        if ltc is not None:
            self.last_pre_clean_stats = pre_clean_stats
            try:
                self.clean_log(ltc, now)
                cleaned = True
            except _ThreadShutdown:
                raise
            except Exception as e:
                raise LogCleaningError(f"{e}", log=ltc.log) from e
        deletable = manager.deletable_logs()
        try:
            for _tp, log in deletable.items():
                try:
                    log.delete_old_segments(now)
                except Exception as e:
                    raise LogCleaningError(f"{e}", log=log) from e
        finally:
            manager.done_deleting(deletable.keys())
        return cleaned

    def clean_log(self, cleanable: LogToClean, now_ms: int) -> None:
        """``cleanLog``: clean, then checkpoint the end offset (the first dirty offset when the
        clean was aborted, so nothing is marked clean that was not)."""
        log = cleanable.log
        tp = topic_partition_of(log)
        start_offset = end_offset = cleanable.first_dirty_offset
        try:
            end_offset, stats = self.cleaner.clean(cleanable, now_ms)
            self.record_stats(log.dir.name, start_offset, end_offset, stats)
        except _ThreadShutdown:
            raise
        except LogCleaningAbortedError:
            pass                                 # an abort: let it go
        except OSError as e:
            # Kafka takes the whole log dir offline (LogDirFailureChannel); a library cannot
            # decide that for its caller: report it, and stop cleaning this partition
            data_dir = str(log.dir.parent)
            msg = f"Failed to clean up log for {tp} in dir {data_dir} due to IOException"
            handler = self.owner.log_dir_failure_handler
            if handler is not None:
                handler(data_dir, msg, e)
            else:
                logger.error("%s: %s", msg, e)
            self.owner.cleaner_manager.mark_partition_uncleanable(log.dir.parent, tp)
        finally:
            self.owner.cleaner_manager.done_cleaning(tp, log.dir.parent, end_offset)

    def record_stats(self, name: str, start: int, end: int, stats: CleanerStats) -> None:
        """``recordStats``: keep the round's stats for the gauges and log Kafka's summary."""
        self.last_stats = stats
        elapsed = max(_elapsed_secs(stats), 1e-9)
        index_secs = max(0.0, (stats.map_complete_ms - stats.start_ms) / 1000)
        mb = 1024 * 1024
        read = max(stats.bytes_read, 1)
        msgs = max(stats.messages_read, 1)
        logger.info(
            "\n\tLog cleaner thread %d cleaned log %s (dirty section = [%d, %d])\n"
            "\t%.1f MB of log processed in %.1f seconds (%.1f MB/sec).\n"
            "\tIndexed %.1f MB in %.1f seconds (%.1f%% of total time)\n"
            "\tBuffer utilization: %.1f%%\n"
            "\tStart size: %.1f MB (%d messages)\n"
            "\tEnd size: %.1f MB (%d messages)\n"
            "\t%.1f%% size reduction (%.1f%% fewer messages)",
            self.thread_id, name, start, end,
            stats.bytes_read / mb, elapsed, stats.bytes_read / mb / elapsed,
            stats.map_bytes_read / mb, index_secs, 100 * index_secs / elapsed,
            100 * stats.buffer_utilization,
            stats.bytes_read / mb, stats.messages_read,
            stats.bytes_written / mb, stats.messages_written,
            100 * (1 - stats.bytes_written / read), 100 * (1 - stats.messages_written / msgs))
        pre = self.last_pre_clean_stats
        if pre.delayed_partitions > 0:
            logger.info("\tCleanable partitions: %d, Delayed partitions: %d, max delay: %d",
                     pre.cleanable_partitions, pre.delayed_partitions, pre.max_compaction_delay_ms)
        if stats.invalid_messages_read > 0:
            logger.warning("\tFound %d invalid messages during compaction.", stats.invalid_messages_read)


def _elapsed_secs(stats: CleanerStats) -> float:
    return max(0.0, (stats.end_ms - stats.start_ms) / 1000)


class LogCleaner:
    """Kafka's ``LogCleaner``: the cleaner service of a set of data dirs.

    ``config`` is the broker-wide ``CleanerConfig`` (``log.cleaner.*``); ``logs`` the live
    partition map (or a callable returning it); ``clock`` the time the cleaner compares with
    compaction lags, delete horizons and retention. ``log_dir_failure_handler(dir, message,
    error)`` is told of I/O errors while cleaning (Kafka's ``LogDirFailureChannel``)."""

    def __init__(self, config: CleanerConfig, log_dirs: Iterable[str | os.PathLike[str]], logs: LogsSource,
                 clock: Clock = wall_ms, *,
                 log_dir_failure_handler: Callable[[str, str, BaseException], Any] | None = None) -> None:
        self.config = config
        self.clock = clock
        self.log_dir_failure_handler = log_dir_failure_handler
        self.cleaner_manager = LogCleanerManager(log_dirs, logs, clock)
        # one throttle for all the threads' I/O, checked every 300 ms (Kafka's LogCleaner)
        self.throttler = Throttler(config.max_io_bytes_per_second, 300)
        self.cleaners: list[CleanerThread] = []
        self._manual: CleanerThread | None = None
        self._lock = threading.Lock()

    @property
    def logs(self) -> Mapping[TopicPartition, "Log"]:
        return self.cleaner_manager.logs()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """``startup``: start ``num_threads`` cleaner threads (a no-op when already started)."""
        with self._lock:
            if self.cleaners:
                return
            logger.info("Starting the log cleaner")
            for i in range(self.config.num_threads):
                thread = CleanerThread(self, i)
                self.cleaners.append(thread)
                thread.start()

    startup = start

    def shutdown(self, timeout_s: float | None = 60.0) -> None:
        """Stop the threads: each finishes or abandons (as an abort) the clean it is in."""
        with self._lock:
            logger.info("Shutting down the log cleaner.")
            for thread in self.cleaners:
                thread.initiate_shutdown()
            for thread in self.cleaners:
                thread.await_shutdown(timeout_s)
            self.cleaners.clear()

    def __enter__(self) -> "LogCleaner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def clean_once(self, now_ms: int | None = None) -> CleanerStats | None:
        """One round of a cleaner thread's work in the calling thread: the filthiest log is
        cleaned (its stats returned; None if no log needed cleaning) and old segments of
        compacted logs deleted. Uses its own ``Cleaner`` (map of ``dedupe_buffer_size /
        num_threads`` bytes); safe alongside started threads (the manager hands each log to one
        of them at a time)."""
        with self._lock:
            if self._manual is None:
                self._manual = CleanerThread(self, len(self.cleaners))
            thread = self._manual
        before = thread.last_stats
        cleaned = thread.try_clean_filthiest_log(now_ms)
        self.cleaner_manager.maintain_uncleanable_partitions()
        return thread.last_stats if cleaned and thread.last_stats is not before else None

    # ------------------------------------------------------------------ delegation

    def abort_cleaning(self, topic_partition: tuple[str, int]) -> None:
        self.cleaner_manager.abort_cleaning(topic_partition)

    def abort_and_pause_cleaning(self, topic_partition: tuple[str, int]) -> None:
        self.cleaner_manager.abort_and_pause_cleaning(topic_partition)

    def resume_cleaning(self, topic_partitions: Iterable[tuple[str, int]]) -> None:
        self.cleaner_manager.resume_cleaning(topic_partitions)

    def update_checkpoints(self, data_dir: str | os.PathLike[str],
                           partition_to_remove: tuple[str, int] | None = None) -> None:
        """Rewrite ``data_dir``'s cleaner checkpoint without removed partitions."""
        self.cleaner_manager.update_checkpoints(data_dir, partition_to_remove=partition_to_remove)

    def alter_checkpoint_dir(self, topic_partition: tuple[str, int], source_log_dir: str | os.PathLike[str],
                             dest_log_dir: str | os.PathLike[str]) -> None:
        self.cleaner_manager.alter_checkpoint_dir(topic_partition, source_log_dir, dest_log_dir)

    def handle_log_dir_failure(self, directory: str | os.PathLike[str]) -> None:
        self.cleaner_manager.handle_log_dir_failure(directory)

    def maybe_truncate_checkpoint(self, data_dir: str | os.PathLike[str], topic_partition: tuple[str, int],
                                  offset: int) -> None:
        self.cleaner_manager.maybe_truncate_checkpoint(data_dir, topic_partition, offset)

    def pause_cleaning_for_non_compacted_partitions(self) -> dict[TopicPartition, "Log"]:
        return dict(self.cleaner_manager.pause_cleaning_for_non_compacted_partitions())

    def await_cleaned(self, topic_partition: tuple[str, int], offset: int, max_wait_ms: int = 15000) -> bool:
        """``awaitCleaned``: wait until the partition's checkpoint reaches ``offset``."""
        deadline = time.monotonic() + max_wait_ms / 1000
        while True:
            if self._is_cleaned(topic_partition, offset):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def _is_cleaned(self, topic_partition: tuple[str, int], offset: int) -> bool:
        got = self.cleaner_manager.all_cleaner_checkpoints().get(TopicPartition(*topic_partition))
        return got is not None and got >= offset

    # ------------------------------------------------------------------ gauges

    def _all_threads(self) -> list[CleanerThread]:
        return self.cleaners + ([self._manual] if self._manual is not None else [])

    def _stats(self) -> list[CleanerStats]:
        return [t.last_stats for t in self._all_threads() if t.last_stats is not None]

    @property
    def last_stats(self) -> list[CleanerStats | None]:
        """The last round's stats of each thread (the manual one last)."""
        return [t.last_stats for t in self._all_threads()]

    @property
    def max_buffer_utilization_percent(self) -> int:
        return int(100 * max((s.buffer_utilization for s in self._stats()), default=0.0))

    @property
    def cleaner_recopy_percent(self) -> int:
        stats = self._stats()
        return int(100 * sum(s.bytes_written for s in stats) / max(sum(s.bytes_read for s in stats), 1))

    @property
    def max_clean_time_secs(self) -> int:
        return int(max((_elapsed_secs(s) for s in self._stats()), default=0.0))

    @property
    def max_compaction_delay_secs(self) -> int:
        return int(max((t.last_pre_clean_stats.max_compaction_delay_ms for t in self._all_threads()),
                       default=0) / 1000)

    @property
    def dead_thread_count(self) -> int:
        return sum(1 for t in self.cleaners if t.failed)

    @property
    def max_dirty_percent(self) -> int:
        return self.cleaner_manager.max_dirty_percent

    @property
    def time_since_last_run_ms(self) -> int:
        return self.cleaner_manager.time_since_last_run_ms

    def uncleanable_partitions_count(self, log_dir: str | os.PathLike[str]) -> int:
        return self.cleaner_manager.uncleanable_partitions_count(log_dir)

    def uncleanable_bytes(self, log_dir: str | os.PathLike[str]) -> int:
        return self.cleaner_manager.uncleanable_bytes(log_dir)

    def metrics(self) -> dict[str, Any]:
        """Kafka's cleaner gauges by their names; the per-dir ones keyed by dir."""
        dirs = self.cleaner_manager.log_dirs
        return {
            "max-buffer-utilization-percent": self.max_buffer_utilization_percent,
            "cleaner-recopy-percent": self.cleaner_recopy_percent,
            "max-clean-time-secs": self.max_clean_time_secs,
            "max-compaction-delay-secs": self.max_compaction_delay_secs,
            "DeadThreadCount": self.dead_thread_count,
            "max-dirty-percent": self.max_dirty_percent,
            "time-since-last-run-ms": self.time_since_last_run_ms,
            "uncleanable-partitions-count": {str(d): self.uncleanable_partitions_count(d) for d in dirs},
            "uncleanable-bytes": {str(d): self.uncleanable_bytes(d) for d in dirs},
        }


__all__ = ["CleanerThread", "LogCleaner"]

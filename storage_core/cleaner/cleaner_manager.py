"""Kafka's ``LogCleanerManager``: which partition to clean next, the cleaning state of every
partition, and the ``cleaner-offset-checkpoint`` files.

One per data-dir set (a ``LogManager``): the ``cleaner-offset-checkpoint`` file in each data dir
root (``OffsetCheckpointFile``, rewritten through ``checkpoint.update_offset_checkpoint``), the
state machine of each partition (in progress, aborted, paused n times), the partitions marked
uncleanable per data dir after an unexpected error, and the gauges (max dirty percent, time since
last run, uncleanable partitions and bytes). ``Cleaner`` (``cleaner.py``) cleans one log and
``LogCleaner`` (``log_cleaner.py``) runs the threads; this module decides which log, when, and
records how far each log has been cleaned.

Locking: the manager's lock guards the states and the checkpoint files (taken before the data
directory's lock); cleaning itself runs without it. Whoever aborts a partition's cleaning
(truncation, deletion) must not hold that log's lock while waiting: the cleaner needs the log
lock to swap segments before it can notice the abort (Kafka's ``abortAndPauseCleaning`` has the
same contract).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

import numpy as np

from ..checkpoint import (CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile, TopicPartition,
                          update_offset_checkpoint, without_invalid_topics)
from ..common import LONG_MAX, wall_ms
from ..errors import KafkaLogError, LogCleaningAbortedError, LogCleaningError
from ..format.batch_header import BatchField, read_field
from .cleaner import LogToClean, calculate_cleanable_bytes

if TYPE_CHECKING:
    from ..log import Log, LogSegment

logger = logging.getLogger(__name__)

Clock = Callable[[], int]
LogsSource = Mapping[TopicPartition, "Log"] | Callable[[], Mapping[TopicPartition, "Log"]]


def _data_dir_key(path: str | os.PathLike[str]) -> Path:
    """Data dirs are compared as Kafka compares ``File``s, after making them absolute and
    resolving symlinks (a test's tmp dir, a LogManager given a relative path)."""
    return Path(path).resolve()


# --------------------------------------------------------------------------- cleaning states

class LogCleaningState:
    """Kafka's ``LogCleaningState``. A partition absent from the manager's map is in no state
    (neither being cleaned nor paused)."""


@dataclass(frozen=True)
class LogCleaningInProgress(LogCleaningState):
    """Being cleaned (or having its old segments deleted) by a cleaner thread."""


@dataclass(frozen=True)
class LogCleaningAborted(LogCleaningState):
    """An abort was requested while in progress; becomes ``LogCleaningPaused(1)`` when the
    cleaner thread notices (``check_cleaning_aborted``) and calls ``done_cleaning``."""


@dataclass(frozen=True)
class LogCleaningPaused(LogCleaningState):
    """Paused ``paused_count`` times; each ``resume_cleaning`` undoes one pause."""

    paused_count: int = 1


LOG_CLEANING_IN_PROGRESS = LogCleaningInProgress()
LOG_CLEANING_ABORTED = LogCleaningAborted()


class IllegalCleaningStateError(KafkaLogError, RuntimeError):
    """A state transition Kafka's ``LogCleanerManager`` refuses (its ``IllegalStateException``):
    resuming a partition that is not paused, finishing one that is not in progress."""


@dataclass(frozen=True)
class OffsetsToClean:
    """``LogCleanerManager.OffsetsToClean``: the cleanable range ``[first_dirty_offset,
    first_uncleanable_dirty_offset)`` of a log, and whether its checkpoint was invalid (below the
    log start offset or above the log end offset) and must be rewritten to ``first_dirty_offset``."""

    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


@dataclass
class PreCleanStats:
    """Kafka's ``PreCleanStats``: what the selection of a round saw, for the
    ``max-compaction-delay-secs`` gauge and the round's log line."""

    max_compaction_delay_ms: int = 0
    delayed_partitions: int = 0
    cleanable_partitions: int = 0

    def update_max_compaction_delay(self, delay_ms: int) -> None:
        self.max_compaction_delay_ms = max(self.max_compaction_delay_ms, delay_ms)
        if delay_ms > 0:
            self.delayed_partitions += 1

    def record_cleanable_partitions(self, n: int) -> None:
        self.cleanable_partitions = n


# --------------------------------------------------------------------------- segment helpers

def first_batch_timestamp(seg: "LogSegment") -> int:
    """``LogSegment.getFirstBatchTimestamp``: the max timestamp of the segment's first batch
    (what segment rolling measures ``segment.ms`` from), ``LONG_MAX`` when it has none. Read
    from the header of a v2 batch without walking the segment."""
    cached = seg.rolling_based_timestamp
    if cached is not None:
        return cached if cached >= 0 else LONG_MAX
    header_end = BatchField.MAX_TIMESTAMP.offset + BatchField.MAX_TIMESTAMP.size
    head = seg.read_bytes(0, header_end)
    if len(head) < header_end:
        return LONG_MAX
    at = np.zeros(1, np.int64)
    if (int(read_field(head, at, BatchField.MAGIC)[0]) & 0xFF) >= 2:      # the magic byte, unsigned
        ts = int(read_field(head, at, BatchField.MAX_TIMESTAMP)[0])
    else:
        first = next(iter(seg.batches()), None)
        ts = -1 if first is None else first.max_timestamp
    return ts if ts >= 0 else LONG_MAX


def is_compact_and_delete(log: "Log") -> bool:
    return log.config.compact and log.config.delete


def max_compaction_delay(log: "Log", first_dirty_offset: int, now: int) -> int:
    """``LogCleanerManager.maxCompactionDelay``: how long past ``max.compaction.lag.ms`` the
    earliest dirty inactive segment is (by its first batch's timestamp), 0 if not yet due."""
    stamps = [t for t in (first_batch_timestamp(s)
                          for s in log.non_active_segments_from(first_dirty_offset)) if t > 0]
    earliest = min(stamps, default=LONG_MAX)
    clean_until = now - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def _first_uncleanable_segment(log: "Log", first_dirty_offset: int, now: int,
                               min_compaction_lag_ms: int) -> int | None:
    """``findFirstUncleanableSegment``: the base of the first dirty inactive segment holding a
    record newer than ``min.compaction.lag.ms``."""
    for seg in log.non_active_segments_from(first_dirty_offset):
        uncleanable = seg.largest_timestamp > now - min_compaction_lag_ms
        logger.debug("Checking if log segment may be cleaned: log=%s segment.baseOffset=%d "
                  "segment.largestTimestamp=%d; now - compactionLag=%d; is uncleanable=%s",
                  log.dir.name, seg.base_offset, seg.largest_timestamp,
                  now - min_compaction_lag_ms, uncleanable)
        if uncleanable:
            return seg.base_offset
    return None


def cleanable_offsets(log: "Log", last_clean_offset: int | None, now: int) -> OffsetsToClean:
    """``LogCleanerManager.cleanableOffsets``: the dirty range a clean of ``log`` may cover.

    The first dirty offset is the checkpointed one, reset to the log start offset (with
    ``force_update_checkpoint``) when it lies below the log start offset or beyond the log end
    offset (a truncated log, corruption at its end). The first uncleanable offset is the
    smallest of the last stable offset (undecided transactions are never cleaned), the active
    segment's base, and the base of the first dirty segment with a record newer than
    ``min.compaction.lag.ms``; never below the first dirty offset."""
    log_start = log.log_start_offset
    checkpoint = log_start if last_clean_offset is None else last_clean_offset
    if checkpoint < log_start:
        if not is_compact_and_delete(log):     # retention moves the start: no news there
            logger.warning("Resetting first dirty offset of %s to log start offset %d since the "
                        "checkpointed offset %d is invalid.", log.dir.name, log_start, checkpoint)
        first_dirty, force = log_start, True
    elif checkpoint > log.log_end_offset:
        # corruption at the end of the log: assume the whole log needs cleaning
        logger.warning("The last checkpoint dirty offset for partition %s is %d, which is larger "
                    "than the log end offset %d. Resetting to the log start offset %d.",
                    log.dir.name, checkpoint, log.log_end_offset, log_start)
        first_dirty, force = log_start, True
    else:
        first_dirty, force = checkpoint, False
    candidates = [log.last_stable_offset, log.active_segment.base_offset]
    min_lag = max(log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        lagging = _first_uncleanable_segment(log, first_dirty, now, min_lag)
        if lagging is not None:
            candidates.append(lagging)
    first_uncleanable = min(candidates)
    logger.debug("Finding range of cleanable offsets for log=%s. Last clean offset=%s now=%d => "
              "firstDirtyOffset=%d firstUncleanableOffset=%d activeSegment.baseOffset=%d",
              log.dir.name, last_clean_offset, now, first_dirty, first_uncleanable,
              log.active_segment.base_offset)
    return OffsetsToClean(first_dirty, max(first_dirty, first_uncleanable), force)


def topic_partition_of(log: "Log") -> TopicPartition:
    return TopicPartition(log.topic, log.partition)


# --------------------------------------------------------------------------- LogCleanerManager

class LogCleanerManager:
    """Kafka's ``LogCleanerManager``: the state of each partition being cleaned and the
    ``cleaner-offset-checkpoint`` of each data dir.

    States (``LogCleaningState``): none -> ``LogCleaningInProgress`` (chosen for cleaning or
    deletion) -> none when done, or -> ``LogCleaningAborted`` (abort requested) ->
    ``LogCleaningPaused(1)`` when the thread gives up; none -> ``LogCleaningPaused(1)`` ->
    ``LogCleaningPaused(n + 1)`` on each further pause, back one step on each resume.

    ``logs`` is the live partition map (or a callable returning it): it is read afresh on every
    selection, so logs added or removed by the log manager are seen at once."""

    def __init__(self, log_dirs: Iterable[str | os.PathLike[str]], logs: LogsSource,
                 clock: Clock = wall_ms) -> None:
        self._logs_source = logs
        self.clock = clock
        self._lock = threading.RLock()
        self._paused_cleaning_cond = threading.Condition(self._lock)
        self._checkpoints: dict[Path, OffsetCheckpointFile] = {
            _data_dir_key(d): OffsetCheckpointFile(_data_dir_key(d) / CLEANER_OFFSET_CHECKPOINT)
            for d in log_dirs}
        self._log_dirs = list(self._checkpoints)
        self._in_progress: dict[TopicPartition, LogCleaningState] = {}
        self._uncleanable: dict[str, set[TopicPartition]] = {}
        self._dirtiest_log_cleanable_ratio = 0.0
        self._time_of_last_run = clock()

    # ------------------------------------------------------------------ inputs

    def logs(self) -> Mapping[TopicPartition, "Log"]:
        src = self._logs_source
        return src() if callable(src) else src

    @property
    def log_dirs(self) -> list[Path]:
        return list(self._log_dirs)

    @property
    def offset_checkpoint_file(self) -> str:
        return CLEANER_OFFSET_CHECKPOINT

    # ------------------------------------------------------------------ checkpoints

    def _read_checkpoint(self, checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        return without_invalid_topics(checkpoint.read(), checkpoint.path)

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        """Every data dir's checkpointed first dirty offsets; a file that cannot be read is
        logged and skipped (see ``_read_checkpoints``)."""
        with self._lock:
            return self._read_checkpoints()[0]

    def _read_checkpoints(self) -> tuple[dict[TopicPartition, int], set[Path]]:
        """``allCleanerCheckpoints``, and the data dirs whose checkpoint cannot be read (damaged,
        not a regular file), each logged with Kafka's error naming the file. Kafka's read of
        such a file also takes its log dir offline (``CheckpointFileWithFailureHandler``), so
        none of its partitions is cleaned; ``grab_filthiest_compacted_log`` skips them likewise
        while the file stays unreadable. Cleaning them as if never cleaned would recopy each
        whole log every round, as its progress could never be recorded."""
        out: dict[TopicPartition, int] = {}
        unreadable: set[Path] = set()
        for data_dir, checkpoint in self._checkpoints.items():
            try:
                out.update(self._read_checkpoint(checkpoint))
            except (OSError, KafkaLogError) as e:
                unreadable.add(data_dir)
                logger.error("Failed to access checkpoint file %s in dir %s: %s; its partitions are "
                             "not cleaned until it can be read", checkpoint.path.name,
                             checkpoint.path.parent, e)
        return out, unreadable

    def update_checkpoints(self, data_dir: str | os.PathLike[str],
                           update: tuple[tuple[str, int], int] | None = None,
                           partition_to_remove: tuple[str, int] | None = None) -> None:
        """``updateCheckpoints``: rewrite ``data_dir``'s checkpoint keeping only partitions
        still in ``logs``, without ``partition_to_remove``, with ``update = (tp, offset)``."""
        with self._lock:
            checkpoint = self._checkpoints.get(_data_dir_key(data_dir))
            if checkpoint is None:
                return

            def change(current: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
                live = self.logs()
                entries = {tp: o for tp, o in current.items() if tp in live}
                if partition_to_remove is not None:
                    entries.pop(TopicPartition(*partition_to_remove), None)
                if update is not None:
                    tp, offset = update
                    entries[TopicPartition(*tp)] = offset
                return entries

            try:
                update_offset_checkpoint(checkpoint.path.parent, checkpoint.path.name, change)
            except (OSError, KafkaLogError) as e:
                logger.error("Failed to access checkpoint file %s in dir %s: %s",
                          checkpoint.path.name, checkpoint.path.parent, e)

    def alter_checkpoint_dir(self, topic_partition: tuple[str, int],
                             source_log_dir: str | os.PathLike[str],
                             dest_log_dir: str | os.PathLike[str]) -> None:
        """``alterCheckpointDir``: move a partition's checkpoint entry (and its uncleanable
        mark) from one data dir to another, as after a replica moved between dirs."""
        tp = TopicPartition(*topic_partition)
        with self._lock:
            try:
                source = self._checkpoints.get(_data_dir_key(source_log_dir))
                offset = None if source is None else self._read_checkpoint(source).get(tp)
                if offset is not None:
                    logger.debug("Moving the cleaner checkpoint of %s from %s to %s", tp,
                              source_log_dir, dest_log_dir)
                    self.update_checkpoints(source_log_dir, partition_to_remove=tp)
                    self.update_checkpoints(dest_log_dir, update=(tp, offset))
            except (OSError, KafkaLogError) as e:
                logger.error("Failed to access checkpoint file in dir %s: %s", source_log_dir, e)
            marked = self._uncleanable.get(str(_data_dir_key(source_log_dir)), set())
            if tp in marked:
                marked.discard(tp)
                self.mark_partition_uncleanable(dest_log_dir, tp)

    def handle_log_dir_failure(self, directory: str | os.PathLike[str]) -> None:
        """``handleLogDirFailure``: stop using ``directory``'s checkpoint."""
        logger.warning("Stopping cleaning logs in dir %s", directory)
        with self._lock:
            self._checkpoints.pop(_data_dir_key(directory), None)

    def maybe_truncate_checkpoint(self, data_dir: str | os.PathLike[str],
                                  topic_partition: tuple[str, int], offset: int) -> None:
        """``maybeTruncateCheckpoint``: after a truncation to ``offset``, lower the partition's
        checkpoint to it if it was above (compacted logs only)."""
        tp = TopicPartition(*topic_partition)
        with self._lock:
            log = self.logs().get(tp)
            if log is None or not log.config.compact:
                return
            checkpoint = self._checkpoints.get(_data_dir_key(data_dir))
            if checkpoint is None:
                return

            def change(current: dict[TopicPartition, int]) -> dict[TopicPartition, int] | None:
                if current.get(tp, 0) > offset:
                    current[tp] = offset
                    return current
                return None

            update_offset_checkpoint(checkpoint.path.parent, checkpoint.path.name, change)

    # ------------------------------------------------------------------ selection

    def grab_filthiest_compacted_log(self, now_ms: int | None = None,
                                     pre_clean_stats: PreCleanStats | None = None) -> LogToClean | None:
        """``grabFilthiestCompactedLog``: the compacted log (not in progress, paused or
        uncleanable) with the highest cleanable ratio above its ``min.cleanable.dirty.ratio``,
        or one with cleanable bytes whose ``max.compaction.lag.ms`` has passed; it is marked in
        progress. Logs whose checkpoint is invalid get it rewritten on the way, selected or not;
        those of a data dir whose checkpoint file cannot be read are skipped. An error
        evaluating a log raises ``LogCleaningError`` carrying that log."""
        stats = pre_clean_stats if pre_clean_stats is not None else PreCleanStats()
        with self._lock:
            now = self.clock() if now_ms is None else now_ms
            self._time_of_last_run = now
            last_clean, unreadable = self._read_checkpoints()
            dirty: list[tuple[TopicPartition, LogToClean]] = []
            for tp, log in list(self.logs().items()):
                if not log.config.compact or tp in self._in_progress or \
                        self._is_uncleanable_partition(log, tp) or \
                        (unreadable and _data_dir_key(log.dir.parent) in unreadable):
                    continue
                try:
                    offsets = cleanable_offsets(log, last_clean.get(tp), now)
                    if offsets.force_update_checkpoint:
                        self.update_checkpoints(log.dir.parent, update=(tp, offsets.first_dirty_offset))
                    delay = max_compaction_delay(log, offsets.first_dirty_offset, now)
                    stats.update_max_compaction_delay(delay)
                    ltc = LogToClean(log, offsets.first_dirty_offset,
                                     offsets.first_uncleanable_dirty_offset, delay > 0)
                    total = ltc.total_bytes
                except Exception as e:
                    raise LogCleaningError(f"Failed to calculate log cleaning stats for partition "
                                           f"{tp}: {e}", log=log) from e
                if total > 0:                       # skip empty logs
                    dirty.append((tp, ltc))
            self._dirtiest_log_cleanable_ratio = max((ltc.cleanable_ratio for _, ltc in dirty), default=0.0)
            cleanable = [(tp, ltc) for tp, ltc in dirty
                         if (ltc.needs_compaction_now and ltc.cleanable_bytes > 0)
                         or ltc.cleanable_ratio > ltc.log.config.min_cleanable_dirty_ratio]
            if not cleanable:
                return None
            stats.record_cleanable_partitions(len(cleanable))
            tp, filthiest = max(cleanable, key=lambda e: e[1].cleanable_ratio)
            self._in_progress[tp] = LOG_CLEANING_IN_PROGRESS
            return filthiest

    def pause_cleaning_for_non_compacted_partitions(self) -> list[tuple[TopicPartition, "Log"]]:
        """``pauseCleaningForNonCompactedPartitions``: the retention thread's claim on the logs
        that are not compacted and not in any cleaning state (each paused once; resume them when
        retention is done). Guards against a topic switching between delete and compact while
        one of the two works on it."""
        with self._lock:
            found = [(tp, log) for tp, log in self.logs().items()
                     if not log.config.compact and tp not in self._in_progress]
            for tp, _ in found:
                self._in_progress[tp] = LogCleaningPaused(1)
            return found

    def deletable_logs(self) -> dict[TopicPartition, "Log"]:
        """``deletableLogs``: compacted logs (``compact`` or ``compact,delete``) not in any
        state nor uncleanable, marked in progress: the cleaner thread deletes their old
        segments (retention for ``compact,delete``, the log start offset for both)."""
        with self._lock:
            found = {tp: log for tp, log in self.logs().items()
                     if tp not in self._in_progress and log.config.compact
                     and not self._is_uncleanable_partition(log, tp)}
            for tp in found:
                self._in_progress[tp] = LOG_CLEANING_IN_PROGRESS
            return found

    # ------------------------------------------------------------------ state machine

    def cleaning_state(self, topic_partition: tuple[str, int]) -> LogCleaningState | None:
        with self._lock:
            return self._in_progress.get(TopicPartition(*topic_partition))

    def set_cleaning_state(self, topic_partition: tuple[str, int], state: LogCleaningState) -> None:
        """For tests: force a state (Kafka's ``setCleaningState``)."""
        with self._lock:
            self._in_progress[TopicPartition(*topic_partition)] = state

    def abort_cleaning(self, topic_partition: tuple[str, int]) -> None:
        """``abortCleaning``: abort a cleaning in progress and wait until it stopped, leaving the
        partition as it was (abort and pause, then resume)."""
        tp = TopicPartition(*topic_partition)
        with self._lock:
            self.abort_and_pause_cleaning(tp)
            self.resume_cleaning([tp])
        logger.info("The cleaning for partition %s is aborted", tp)

    def abort_and_pause_cleaning(self, topic_partition: tuple[str, int],
                                 timeout_s: float | None = None) -> None:
        """``abortAndPauseCleaning``: mark the partition paused (or aborted, if a thread cleans
        it now) and wait until it is paused: the thread notices the abort at its next check,
        swaps nothing in, and ``done_cleaning`` pauses it. A paused partition is paused once
        more. ``timeout_s`` (not Kafka's) bounds the wait: ``TimeoutError``."""
        tp = TopicPartition(*topic_partition)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            state = self._in_progress.get(tp)
            if state is None:
                self._in_progress[tp] = LogCleaningPaused(1)
            elif state == LOG_CLEANING_IN_PROGRESS:
                self._in_progress[tp] = LOG_CLEANING_ABORTED
            elif isinstance(state, LogCleaningPaused):
                self._in_progress[tp] = LogCleaningPaused(state.paused_count + 1)
            else:
                raise IllegalCleaningStateError(
                    f"Compaction for partition {tp} cannot be aborted and paused since it is in "
                    f"{state} state.")
            while not isinstance(self._in_progress.get(tp), LogCleaningPaused):
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"The cleaning of {tp} did not stop within {timeout_s} s")
                self._paused_cleaning_cond.wait(0.1)
        logger.info("The cleaning for partition %s is aborted and paused", tp)

    def resume_cleaning(self, topic_partitions: Iterable[tuple[str, int]]) -> None:
        """``resumeCleaning``: undo one pause of each partition."""
        with self._lock:
            for raw in topic_partitions:
                tp = TopicPartition(*raw)
                state = self._in_progress.get(tp)
                if state is None:
                    raise IllegalCleaningStateError(
                        f"Compaction for partition {tp} cannot be resumed since it is not paused.")
                if not isinstance(state, LogCleaningPaused):
                    raise IllegalCleaningStateError(
                        f"Compaction for partition {tp} cannot be resumed since it is in {state} state.")
                if state.paused_count == 1:
                    del self._in_progress[tp]
                else:
                    self._in_progress[tp] = LogCleaningPaused(state.paused_count - 1)

    def check_cleaning_aborted(self, topic_partition: tuple[str, int]) -> None:
        """``checkCleaningAborted``: raise ``LogCleaningAbortedError`` if an abort was asked."""
        with self._lock:
            if self._in_progress.get(TopicPartition(*topic_partition)) == LOG_CLEANING_ABORTED:
                raise LogCleaningAbortedError(f"The cleaning of {TopicPartition(*topic_partition)} was aborted")

    def is_cleaning_paused(self, topic_partition: tuple[str, int]) -> bool:
        with self._lock:
            return isinstance(self._in_progress.get(TopicPartition(*topic_partition)), LogCleaningPaused)

    def done_cleaning(self, topic_partition: tuple[str, int], data_dir: str | os.PathLike[str],
                      end_offset: int) -> None:
        """``doneCleaning``: in progress -> checkpoint ``end_offset`` and clear the state;
        aborted -> paused once (and wake the waiting ``abort_and_pause_cleaning``)."""
        tp = TopicPartition(*topic_partition)
        with self._lock:
            self._done(tp, lambda: self.update_checkpoints(data_dir, update=(tp, end_offset)))

    def done_deleting(self, topic_partitions: Iterable[tuple[str, int]]) -> None:
        """``doneDeleting``: as ``done_cleaning``, without a checkpoint."""
        with self._lock:
            for raw in topic_partitions:
                self._done(TopicPartition(*raw))

    def _done(self, tp: TopicPartition, on_completed: Callable[[], None] | None = None) -> None:
        state = self._in_progress.get(tp)
        if state is None:
            raise IllegalCleaningStateError(f"State for partition {tp} should exist.")
        if state == LOG_CLEANING_IN_PROGRESS:
            if on_completed is not None:
                on_completed()
            del self._in_progress[tp]
        elif state == LOG_CLEANING_ABORTED:
            self._in_progress[tp] = LogCleaningPaused(1)
            self._paused_cleaning_cond.notify_all()
        else:
            raise IllegalCleaningStateError(f"In-progress partition {tp} cannot be in {state} state.")

    # ------------------------------------------------------------------ uncleanable partitions

    def uncleanable_partitions(self, log_dir: str | os.PathLike[str]) -> set[TopicPartition]:
        with self._lock:
            return set(self._uncleanable.get(str(_data_dir_key(log_dir)), ()))

    def mark_partition_uncleanable(self, log_dir: str | os.PathLike[str],
                                   topic_partition: tuple[str, int]) -> None:
        with self._lock:
            self._uncleanable.setdefault(str(_data_dir_key(log_dir)), set()).add(TopicPartition(*topic_partition))

    def _is_uncleanable_partition(self, log: "Log", tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._uncleanable.get(str(_data_dir_key(log.dir.parent)), ())

    def maintain_uncleanable_partitions(self) -> None:
        """``maintainUncleanablePartitions``: forget removed partitions (and empty dirs)."""
        with self._lock:
            live = self.logs()
            for partitions in self._uncleanable.values():
                partitions.intersection_update(live.keys())
            for d in [d for d, p in self._uncleanable.items() if not p]:
                del self._uncleanable[d]

    # ------------------------------------------------------------------ gauges

    @property
    def max_dirty_percent(self) -> int:
        """``max-dirty-percent``: cleanable ratio of the dirtiest log at the last selection."""
        return int(100 * self._dirtiest_log_cleanable_ratio)

    @property
    def time_since_last_run_ms(self) -> int:
        """``time-since-last-run-ms``: since the last selection, on the manager's clock (Kafka
        reads the system clock here and the injected one at the selection)."""
        return self.clock() - self._time_of_last_run

    @property
    def time_of_last_run(self) -> int:
        return self._time_of_last_run

    def uncleanable_partitions_count(self, log_dir: str | os.PathLike[str]) -> int:
        """``uncleanable-partitions-count`` of a data dir."""
        return len(self.uncleanable_partitions(log_dir))

    def uncleanable_bytes(self, log_dir: str | os.PathLike[str], now_ms: int | None = None) -> int:
        """``uncleanable-bytes`` of a data dir: the cleanable bytes of its uncleanable
        partitions."""
        with self._lock:
            partitions = self._uncleanable.get(str(_data_dir_key(log_dir)))
            if not partitions:
                return 0
            last_clean = self.all_cleaner_checkpoints()
            now = self.clock() if now_ms is None else now_ms
            total = 0
            live = self.logs()
            for tp in partitions:
                log = live.get(tp)
                if log is None:
                    continue
                offsets = cleanable_offsets(log, last_clean.get(tp), now)
                total += calculate_cleanable_bytes(log, offsets.first_dirty_offset,
                                                   offsets.first_uncleanable_dirty_offset)[1]
            return total


__all__ = ["LogCleanerManager", "LogCleaningState", "LogCleaningInProgress",
           "LogCleaningAborted", "LogCleaningPaused", "LOG_CLEANING_IN_PROGRESS", "LOG_CLEANING_ABORTED",
           "IllegalCleaningStateError", "OffsetsToClean", "PreCleanStats", "cleanable_offsets",
           "calculate_cleanable_bytes", "max_compaction_delay",
           "first_batch_timestamp", "is_compact_and_delete"]

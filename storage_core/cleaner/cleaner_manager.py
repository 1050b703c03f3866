"""The log cleaner service: Kafka's ``LogCleanerManager`` (which partition to clean next, the
cleaning state of every partition, the ``cleaner-offset-checkpoint`` files) and ``LogCleaner``
with its ``CleanerThread``s (kafka_format.md §15.2).

``Cleaner`` (``storage_core/cleaner.py``) cleans one log; this module decides which log, when,
and records how far each log has been cleaned, as Kafka's broker does:

* ``LogCleanerManager`` -- one per data-dir set (a ``LogManager``): the ``cleaner-offset-checkpoint``
  file in each data dir root (``OffsetCheckpointFile``, kafka_format.md §12.2), the state
  machine of each partition (in progress, aborted, paused n times), the partitions marked
  uncleanable per data dir after an unexpected error, and the gauges (max dirty percent, time
  since last run, uncleanable partitions and bytes).
* ``LogCleaner`` -- the service: ``start()`` runs ``CleanerConfig.num_threads`` background
  ``CleanerThread``s, each with its own ``Cleaner`` and offset map of
  ``dedupe_buffer_size / num_threads`` bytes; ``clean_once(now_ms)`` runs one round of a
  thread's ``doWork`` in the calling thread (tests, the CLI, a scheduler with its own clock).

A round (``CleanerThread.cleanFilthiestLog``): pick the compacted log with the highest
cleanable ratio (or one whose ``max.compaction.lag.ms`` is exceeded), clean it, write the end
offset to the checkpoint; then delete old segments (retention, log start offset) of every
compacted log, which is how ``compact,delete`` topics get their retention (Kafka's LogManager
leaves compacted logs to the cleaner threads). An error while evaluating or cleaning a log
becomes a ``LogCleaningError`` carrying the log; the thread marks that partition uncleanable
for its data dir and goes on with the others.

Locking: the manager's lock guards the states and the checkpoint files; cleaning itself runs
without it. Whoever aborts a partition's cleaning (truncation, deletion) must not hold that
log's lock while waiting: the cleaner needs the log lock to swap segments before it can notice
the abort (Kafka's ``abortAndPauseCleaning`` has the same contract).
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ..common import wall_ms
from ..checkpoint import (CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile, TopicPartition,
                          without_invalid_topics)
from ..config import CleanerConfig
from ..errors import KafkaLogError, LogCleaningAbortedError, LogCleaningError
from .throttler import Throttler

if TYPE_CHECKING:                      # runtime imports of cleaner.py are deferred, see _cleaner()
    from .cleaner import Cleaner, CleanerStats, LogToClean
    from ..log import Log
    from ..log import LogSegment

logger = logging.getLogger(__name__)

Clock = Callable[[], int]
LogsSource = Mapping[TopicPartition, "Log"] | Callable[[], Mapping[TopicPartition, "Log"]]

LONG_MAX = 2**63 - 1
# v2 batch header: maxTimestamp is the int64 at byte 35 (baseOffset 8, length 4, epoch 4,
# magic 1, crc 4, attributes 2, lastOffsetDelta 4, baseTimestamp 8)
_MAGIC_AT = 16
_MAX_TIMESTAMP_AT = 35


def _cleaner():
    """``storage_core.cleaner``, imported on first use: it is the one module this depends on
    that depends back on the log machinery, and importing it lazily keeps this module (and its
    state machine) importable and testable on its own."""
    from . import cleaner
    return cleaner


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

def non_active_log_segments_from(log: "Log", from_offset: int) -> list["LogSegment"]:
    """``LogSegments.nonActiveLogSegmentsFrom``: the inactive segments from the one holding
    ``from_offset``; none when ``from_offset`` lies past the active segment's base."""
    return log.non_active_segments_from(from_offset)


def first_batch_timestamp(seg: "LogSegment") -> int:
    """``LogSegment.getFirstBatchTimestamp``: the max timestamp of the segment's first batch
    (what segment rolling measures ``segment.ms`` from), ``LONG_MAX`` when it has none. Read
    from the 61-byte header of a v2 batch without walking the segment."""
    cached = seg.rolling_based_timestamp
    if cached is not None:
        return cached if cached >= 0 else LONG_MAX
    head = seg.read_bytes(0, _MAX_TIMESTAMP_AT + 8)
    if len(head) < _MAX_TIMESTAMP_AT + 8:
        return LONG_MAX
    if head[_MAGIC_AT] >= 2:
        ts = struct.unpack_from(">q", head, _MAX_TIMESTAMP_AT)[0]
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
                          for s in non_active_log_segments_from(log, first_dirty_offset)) if t > 0]
    earliest = min(stamps, default=LONG_MAX)
    clean_until = now - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def _first_uncleanable_segment(log: "Log", first_dirty_offset: int, now: int,
                               min_compaction_lag_ms: int) -> int | None:
    """``findFirstUncleanableSegment``: the base of the first dirty inactive segment holding a
    record newer than ``min.compaction.lag.ms``."""
    for seg in non_active_log_segments_from(log, first_dirty_offset):
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


def calculate_cleanable_bytes(log: "Log", first_dirty_offset: int,
                              uncleanable_offset: int) -> tuple[int, int]:
    """``LogCleanerManager.calculateCleanableBytes``: ``(first uncleanable segment's base,
    bytes of the whole segments from the one holding the first dirty offset up to it)``."""
    rest = non_active_log_segments_from(log, uncleanable_offset)
    first_uncleanable = (rest[0] if rest else log.active_segment).base_offset
    cleanable = sum(s.size for s in log.segments_in_range(min(first_dirty_offset, first_uncleanable),
                                                 first_uncleanable))
    return first_uncleanable, cleanable


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
        logged and skipped (Kafka: the dir goes offline, its partitions are not cleaned)."""
        with self._lock:
            out: dict[TopicPartition, int] = {}
            for checkpoint in self._checkpoints.values():
                try:
                    out.update(self._read_checkpoint(checkpoint))
                except (OSError, KafkaLogError) as e:
                    logger.error("Failed to access checkpoint file %s in dir %s: %s",
                              checkpoint.path.name, checkpoint.path.parent, e)
            return out

    def _rewrite(self, checkpoint: OffsetCheckpointFile,
                 change: Callable[[dict[TopicPartition, int]], dict[TopicPartition, int] | None]) -> None:
        """Read-modify-write of one checkpoint file under the data dir's flock (the lock
        ``Log`` takes for the dir's other checkpoint files), so another process maintaining a
        different file of the same dir never sees a torn update. ``change`` returns the new
        entries, or None to leave the file as it is."""
        fd = os.open(checkpoint.path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            entries = change(self._read_checkpoint(checkpoint))
            if entries is not None:
                checkpoint.write(entries)
        finally:
            os.close(fd)

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
                self._rewrite(checkpoint, change)
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

            self._rewrite(checkpoint, change)

    # ------------------------------------------------------------------ selection

    def grab_filthiest_compacted_log(self, now_ms: int | None = None,
                                     pre_clean_stats: PreCleanStats | None = None) -> "LogToClean | None":
        """``grabFilthiestCompactedLog``: the compacted log (not in progress, paused or
        uncleanable) with the highest cleanable ratio above its ``min.cleanable.dirty.ratio``,
        or one with cleanable bytes whose ``max.compaction.lag.ms`` has passed; it is marked in
        progress. Logs whose checkpoint is invalid get it rewritten on the way, selected or not.
        An error evaluating a log raises ``LogCleaningError`` carrying that log."""
        LogToClean = _cleaner().LogToClean
        stats = pre_clean_stats if pre_clean_stats is not None else PreCleanStats()
        with self._lock:
            now = self.clock() if now_ms is None else now_ms
            self._time_of_last_run = now
            last_clean = self.all_cleaner_checkpoints()
            dirty: list[tuple[TopicPartition, LogToClean]] = []
            for tp, log in list(self.logs().items()):
                if not log.config.compact or tp in self._in_progress or \
                        self._is_uncleanable_partition(log, tp):
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
            state = self._in_progress.get(tp)
            if state is None:
                raise IllegalCleaningStateError(f"State for partition {tp} should exist.")
            if state == LOG_CLEANING_IN_PROGRESS:
                self.update_checkpoints(data_dir, update=(tp, end_offset))
                del self._in_progress[tp]
            elif state == LOG_CLEANING_ABORTED:
                self._in_progress[tp] = LogCleaningPaused(1)
                self._paused_cleaning_cond.notify_all()
            else:
                raise IllegalCleaningStateError(f"In-progress partition {tp} cannot be in {state} state.")

    def done_deleting(self, topic_partitions: Iterable[tuple[str, int]]) -> None:
        """``doneDeleting``: as ``done_cleaning``, without a checkpoint."""
        with self._lock:
            for raw in topic_partitions:
                tp = TopicPartition(*raw)
                state = self._in_progress.get(tp)
                if state is None:
                    raise IllegalCleaningStateError(f"State for partition {tp} should exist.")
                if state == LOG_CLEANING_IN_PROGRESS:
                    del self._in_progress[tp]
                elif state == LOG_CLEANING_ABORTED:
                    self._in_progress[tp] = LogCleaningPaused(1)
                    self._paused_cleaning_cond.notify_all()
                else:
                    raise IllegalCleaningStateError(
                        f"In-progress partition {tp} cannot be in {state} state.")

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


# --------------------------------------------------------------------------- LogCleaner

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
        cleaner_class = _cleaner().Cleaner
        options: dict[str, Any] = dict(
            io_buffer_size=max(1, config.io_buffer_size // config.num_threads // 2),
            max_io_buffer_size=config.max_message_size,
            dedupe_buffer_load_factor=config.dedupe_buffer_load_factor,
            clock=owner.clock,
            check_done=self._check_done)
        # log.cleaner.io.max.bytes.per.second: the threads' shared Throttler, for a Cleaner
        # (Kafka's Cleaner calls throttler.maybeThrottle after every read and write)
        options["throttler"] = owner.throttler
        self.cleaner: Cleaner = cleaner_class(
            min(config.dedupe_buffer_size // config.num_threads, 2**31 - 1), **options)
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
            bad = e.log
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

    def clean_log(self, cleanable: "LogToClean", now_ms: int) -> None:
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

    def record_stats(self, name: str, start: int, end: int, stats: "CleanerStats") -> None:
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


def _elapsed_secs(stats: "CleanerStats") -> float:
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

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def clean_once(self, now_ms: int | None = None) -> "CleanerStats | None":
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

    def _stats(self) -> list["CleanerStats"]:
        return [t.last_stats for t in self._all_threads() if t.last_stats is not None]

    @property
    def last_stats(self) -> list["CleanerStats | None"]:
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


__all__ = ["LogCleaner", "LogCleanerManager", "CleanerThread", "LogCleaningState", "LogCleaningInProgress",
           "LogCleaningAborted", "LogCleaningPaused", "LOG_CLEANING_IN_PROGRESS", "LOG_CLEANING_ABORTED",
           "IllegalCleaningStateError", "OffsetsToClean", "PreCleanStats", "cleanable_offsets",
           "calculate_cleanable_bytes", "max_compaction_delay", "non_active_log_segments_from",
           "first_batch_timestamp", "is_compact_and_delete"]

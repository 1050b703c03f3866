"""Log: one ``topic-partition`` directory (Kafka's ``UnifiedLog``), the facade composing
``LocalLog``, ``LogLoader``, ``LogAppender`` and the read and retention paths. Its API::

    with Log.open("/data/kafkalog/orders-0") as log:
        info = log.append(pa.table({"key": keys, "value": values}))
        table = log.read(log.offsets_for_times(t0), max_bytes=1 << 20)

One process at a time may write a partition (an advisory lock on the directory, a clear error
for a second writer); any number may read it, also while it is appended to, rolled or truncated.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Callable

import pyarrow as pa

from ..checkpoint import (LEADER_EPOCH_CHECKPOINT, CorruptCheckpointError, LeaderEpochCache,
                          PartitionMetadataFile, parse_topic_partition_dir, validate_topic_name)
from ..common import wall_ms
from ..config import LogConfig
from ..errors import KafkaLogError, LogInvariantError, OffsetOutOfRangeError
from ..format import empty_table, encode_batches
from ..format.control import ControlRecordType
from ..format.log_input_stream import BatchArrays
from ..producer import AppendOrigin, ProducerStateManager
from . import read, retention
from .append import AppendInfo, LogAppender
from .files import check_partition_dir
from .loader import (LogLoader, inconsistent_topic_id, initialize_topic_id, remove_partition_checkpoints,
                     write_partition_checkpoints)
from .local_log import LocalLog
from .log_metrics import LogMetrics
from .read import FetchResult
from .segment import LogSegment, TimestampAndOffset
from .view import LogView

logger = logging.getLogger(__name__)
Clock = Callable[[], int]


class Log:
    """One partition directory (Kafka's ``UnifiedLog``). Open with ``Log.open``; close (or use ``with``) when done.
    As in Kafka's split, the parts it composes do not know it: the ``LocalLog`` (``_local``: the ``LogSegments``
    ``_segments``, the log end offset, the delayed deletes), the ``LogLoader`` that fills it at open, the
    ``LogAppender`` (``_appender``), and the functions of ``read.py`` and ``retention.py``; a reader lists
    segments with ``LogView``. This class keeps the log start offset, the recovery point, the producer state and
    the leader-epoch cache, and decides reads, truncation, retention and segment replacement.

    Thread-safety: one ``RLock`` (``_lock``) guards the segment map, the offsets
    (``log_start_offset``, ``recovery_point``, the log end offset), the producer state, the
    pending deletes and the flush counters: every change takes it, and readers take it only to
    copy the segment list and the bounds, then read the segments' files without it (a segment
    read is positioned, so it never blocks an append). Across processes one writer holds an
    ``flock`` on the directory; readers open it ``read_only`` and take no lock.

    Invariant: ``log_start_offset <= recovery_point <= log_end_offset`` (after a roll past the end, the empty
    active segment's base bounds the recovery point), checked after load, truncation and segment replacement
    (``LogInvariantError`` names the directory and all three).
    """

    def __init__(self, directory: Path, config: LogConfig, *, read_only: bool = False,
                 clock: Clock = wall_ms, had_clean_shutdown: bool = False) -> None:
        self.dir = Path(directory)
        self.topic, self.partition = parse_topic_partition_dir(self.dir.name)
        validate_topic_name(self.topic)
        self.config = config
        self.read_only, self.clock = read_only, clock
        self._lock = threading.RLock()
        self.metrics = LogMetrics()
        self._local = LocalLog(self.dir, config, clock=clock, metrics=self.metrics)
        self._segments = self._local.segments       # the one map of base offset -> segment
        self.log_start_offset = 0
        self.highest_offset_in_remote_storage = -1    # UnifiedLog's; the RemoteLogManager sets it
        self.recovery_point = 0
        self._unflushed = 0
        self._last_flush_ms = clock()
        self._closed = False
        self._force_full_recovery = False
        self._had_clean_shutdown = had_clean_shutdown
        self._relists = (-1, 0)                  # (offset, re-lists in a row for a fetch at it)
        self._producer_state_pending = False     # a reader loads it on first use
        self._producer_state = ProducerStateManager(
            self.dir, producer_id_expiration_ms=config.producer_id_expiration_ms)
        # the topic id (KIP-516) from partition.metadata, None for a topic created without one
        self.topic_id: uuid.UUID | None = None
        self._partition_metadata = PartitionMetadataFile(self.dir)
        try:
            self.leader_epoch_cache = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT)
        except CorruptCheckpointError as e:
            # rebuilt from the batches' leader epochs by a full recovery
            logger.warning("Ignoring corrupt %s: %s; recovering the whole log", LEADER_EPOCH_CHECKPOINT, e)
            if not read_only:
                (self.dir / LEADER_EPOCH_CHECKPOINT).unlink(missing_ok=True)
            self.leader_epoch_cache = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT)
            self._force_full_recovery = True
        self._appender = LogAppender(self._local, self._producer_state, self.leader_epoch_cache, lock=self._lock,
                                     flush_upto=lambda upto: self._flush(data_only=False, upto=upto),
                                     flush_per_policy=self._flush_per_policy)

    # ---------------------------------------------------------------------------- opening

    @classmethod
    def open(cls, path: str | os.PathLike[str], config: LogConfig | None = None, *,
             read_only: bool = False, create: bool = True, clock: Clock = wall_ms,
             had_clean_shutdown: bool = False, topic_id: uuid.UUID | None = None) -> "Log":
        """Open (creating it if needed) the partition directory ``path`` and load it: temporary
        files of an interrupted clean or delete are resolved, missing indexes rebuilt, and
        everything after the recovery point is validated; an invalid tail is truncated.

        ``had_clean_shutdown``: the data directory's ``.kafka_cleanshutdown`` marker was present
        (the LogManager knows): the recovery point is taken to be the log end offset, as Kafka's
        LogLoader does. A segment whose indexes still have their preallocated length (a writer
        that never closed it) is recovered all the same: the marker cannot vouch for it.

        ``topic_id``: the topic's id (KIP-516). A log without ``partition.metadata`` records it
        there before anything else is written; one whose file holds another id is refused with
        ``InconsistentTopicIdError`` before anything is changed. Without it, the id on disk (if
        any) is read into ``topic_id``."""
        path = Path(path)
        parse_topic_partition_dir(path.name)           # refuse a bad name before making anything
        validate_topic_name(parse_topic_partition_dir(path.name)[0])
        if not path.exists():
            if read_only or not create:
                raise FileNotFoundError(f"No partition directory at {path}")
            path.mkdir(parents=True)
        elif not path.is_dir():
            raise KafkaLogError(f"{path} is not a directory")
        # no symlink followed by what recovery writes, no FIFO opened by a reader
        check_partition_dir(path, writer=not read_only)
        log = cls(path, config or LogConfig(), read_only=read_only, clock=clock,
                   had_clean_shutdown=had_clean_shutdown)
        try:
            if not read_only:
                log._local.lock_dir()
            log.topic_id = initialize_topic_id(log._partition_metadata, topic_id, read_only=read_only)
            log._load()
        except BaseException:
            log._local.release()
            raise
        return log

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """``UnifiedLog.assignTopicId``: give a log created without an id its topic id
        (recorded in ``partition.metadata`` at once); re-assigning the same id is a no-op,
        another id raises ``InconsistentTopicIdError``."""
        if self.topic_id is not None:
            if self.topic_id != topic_id:
                raise inconsistent_topic_id(self.dir, topic_id, self.topic_id)
            return
        self._check_writable()
        with self._lock:
            self.topic_id = initialize_topic_id(self._partition_metadata, topic_id, read_only=self.read_only)

    def _loader(self) -> LogLoader:
        return LogLoader(self._local, self._producer_state, self.leader_epoch_cache, read_only=self.read_only,
                         had_clean_shutdown=self._had_clean_shutdown, force_full_recovery=self._force_full_recovery)

    def _load(self) -> None:
        loaded = self._loader().load()
        self.log_start_offset, self.recovery_point = loaded.log_start_offset, loaded.recovery_point
        self._producer_state_pending |= loaded.producer_state_deferred
        self._check_invariant("load")

    def _relist_reader_view(self, offset: int) -> None:
        """Open the reader view afresh (the files as they are now), as ``Log.open`` does; a
        fetch at one offset whose view keeps going out of date ends in an error."""
        last, count = self._relists
        self._relists = (offset, count + 1 if last == offset else 1)
        if self._relists[1] > 100:
            raise KafkaLogError(f"{self.dir} kept changing while offset {offset} was being read")
        with self._lock:
            self._local.retire_segments()
            self._load()

    @property
    def producer_state(self) -> ProducerStateManager:
        if self._producer_state_pending:
            with self._lock:
                if self._producer_state_pending:
                    self._producer_state_pending = False
                    self._loader().load_producer_state_read_only(self.log_start_offset)
        return self._producer_state

    # ---------------------------------------------------------------------------- offsets

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def high_watermark(self) -> int:
        """No replicas here: everything appended is committed, so the high watermark is the log
        end offset."""
        return self._local.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """``UnifiedLog.lastStableOffset``: the first offset of the earliest transaction not
        yet decided (or whose marker is not below the high watermark), else the high watermark."""
        with self._lock:
            return self.producer_state.log_last_stable_offset(
                self.high_watermark, log_start_offset=self.log_start_offset)

    @property
    def segments(self) -> list[LogSegment]:
        with self._lock:
            return self._segments.values()

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    def segments_in_range(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """``LogSegments.values(from, to)``: the segments holding offsets in ``[from, to)``, from
        the one whose base is the floor of ``from`` (or the first) up to, excluding, the first
        whose base is ``>= to``."""
        try:
            with self._lock:
                return self._segments.values(from_offset, to_offset)
        except ValueError as e:
            raise ValueError(f"{e} (in {self.dir.name})") from None

    def split_overflowed_segment(self, seg: LogSegment) -> list[LogSegment]:
        """``UnifiedLog.splitOverflowedSegment`` on a live log (the cleaner found ``seg``'s
        offsets overflowing 32-bit relative offsets): the segment is split as recovery splits
        it (crash-safe through ``.cleaned``/``.swap``), each piece indexed from its batches."""
        self._check_writable()
        with self._lock:
            pieces = self._local.split_segment(seg)
            self._check_invariant("segment split")
            return pieces

    def deletable_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]
                           ) -> list[LogSegment]:
        """``LocalLog.deletableSegments`` with ``UnifiedLog``'s guard (the segment lies wholly
        below the high watermark); see ``LocalLog.deletable_segments``."""
        return self._local.deletable_segments(predicate, self.high_watermark, self._local.log_end_offset)

    def higher_segments(self, offset: int) -> list[LogSegment]:
        """``LogSegments.higherSegments``: the segments whose base offset is strictly greater
        than ``offset``, in offset order."""
        with self._lock:
            return self._segments.higher_segments(offset)

    def non_active_segments_from(self, from_offset: int) -> list[LogSegment]:
        """``LocalLog.nonActiveLogSegmentsFrom``: the segments before the active one, from the
        one holding ``from_offset`` (or the first); none when ``from_offset`` is at or past the
        active segment's base."""
        with self._lock:
            return self._segments.non_active_from(from_offset)

    @property
    def size(self) -> int:
        """Bytes of every segment's ``.log`` (``UnifiedLog.size``)."""
        return self._segments.size_in_bytes

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    def _check_invariant(self, after: str) -> None:
        """``log_start_offset <= recovery_point <= log_end_offset``, checked after a load, a
        truncation and a segment replacement (the changes that move all three)."""
        start, rp, end = self.log_start_offset, self.recovery_point, self._local.log_end_offset
        # a roll past the end (LocalLog.roll(expectedNextOffset)) flushes up to the new, empty
        # segment's base, as Kafka does: the bound is the offset the next record will take
        if not start <= rp <= max(end, self._local.active_segment.base_offset if self._segments else end):
            raise LogInvariantError(
                f"{self.dir}: after {after} the log start offset {start}, recovery point {rp} and "
                f"log end offset {end} break log_start_offset <= recovery_point <= log_end_offset")

    # ---------------------------------------------------------------------------- append

    def append(self, records: pa.Table | pa.RecordBatch, *, compression: str | None = None,
               max_batch_bytes: int | None = None) -> AppendInfo:
        """Encode an Arrow table (``value``; optional ``key``, ``timestamp``, ``headers``) into
        batches and append them with offsets from the log end offset."""
        t = self.config.compression_type
        codec = compression or ("none" if t in ("producer", "uncompressed") else t)
        limit = max_batch_bytes or min(self.config.max_message_bytes, 1 << 20)
        raw = encode_batches(records, compression=codec, max_batch_bytes=limit,
                             base_offset=self._local.log_end_offset, now_ms=self.clock())
        self._check_writable()
        return self._appender.append_batches(raw, assign_offsets=True, leader_epoch=None,
                                             origin=AppendOrigin.CLIENT, owned=True)

    def append_raw(self, batches: bytes | bytearray | memoryview, *, assign_offsets: bool = True,
                   leader_epoch: int | None = None, owned: bool = False) -> AppendInfo:
        """Append already-encoded v2 batches.

        With ``assign_offsets`` (a producer's append, Kafka's leader path) the log numbers them
        from its end offset by patching each batch's baseOffset (outside the CRC, as a broker
        does), checks each batch's records are numbered 0..n-1, refuses control batches and
        empty batches, and on a compacted topic records without a key. Without it (a replica's
        or a copy's append) their offsets must continue the log and increase. ``leader_epoch``
        is stamped into every batch and recorded in the leader-epoch cache. Every batch is
        validated first (CRC, records, ``max.message.bytes``, and for a producer's append its
        epoch and sequences: ``OutOfOrderSequenceError``, ``InvalidProducerEpochError``, ...):
        nothing is written unless all are valid. A producer's retry of one of its last five
        batches writes nothing and returns the original batch's offsets. ``owned``: ``batches``
        is a ``bytearray`` the caller hands over (patched in place instead of copied; the
        caller must not use it afterwards)."""
        origin = AppendOrigin.CLIENT if assign_offsets else AppendOrigin.REPLICATION
        self._check_writable()
        return self._appender.append_batches(batches, assign_offsets=assign_offsets, leader_epoch=leader_epoch,
                                             origin=origin, owned=owned and isinstance(batches, bytearray))

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int,
                              control_type: ControlRecordType | str | int, coordinator_epoch: int,
                              timestamp: int | None = None, *,
                              leader_epoch: int | None = None) -> AppendInfo:
        """Append a transaction's COMMIT or ABORT marker as the transaction coordinator does
        (``UnifiedLog.appendAsLeader`` with origin coordinator): the producer's epoch is
        checked (no sequence), an ABORT of a non-empty transaction adds an entry to the
        segment's ``.txnindex``, and the last stable offset moves past the transaction."""
        self._check_writable()
        return self._appender.append_end_txn_marker(producer_id, producer_epoch, control_type, coordinator_epoch,
                                                    timestamp, leader_epoch=leader_epoch)

    def append_from_file(self, fd: int, batches: BatchArrays, *, max_append_bytes: int = 8 << 20) -> AppendInfo:
        """Append whole v2 batches straight from the file ``fd`` with kernel-side copies, for a
        trusted writer that checked their CRCs and numbered them from the log end offset
        (``batches``: their header walk); see ``LogAppender.append_from_file``."""
        self._check_writable()
        return self._appender.append_from_file(fd, batches, max_append_bytes=max_append_bytes)

    def can_take_segment_file(self, path: Path, batches: BatchArrays) -> bool:
        """Whether ``append_segment_file`` can take the file at ``path`` (fits one segment, on
        this log's file system)."""
        return self._appender.can_take_segment_file(path, batches)

    def append_segment_file(self, path: Path, batches: BatchArrays) -> AppendInfo:
        """Append whole v2 batches by renaming the file at ``path`` into a new segment, for a
        trusted writer as ``append_from_file``; see ``LogAppender.append_segment_file``."""
        self._check_writable()
        return self._appender.append_segment_file(path, batches)

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log end offset)``
        (``UnifiedLog.roll``, see ``LogAppender.roll``); an empty active segment at that offset
        is kept as it is."""
        self._check_writable()
        return self._appender.roll(expected_next_offset)

    # ---------------------------------------------------------------------------- flush

    def _flush_per_policy(self, records: int, now: int) -> None:
        """``records`` were just appended: flush if ``flush.messages`` or ``flush.ms`` is due."""
        self._unflushed += records
        c = self.config
        if (c.fsync == "always" or self._unflushed >= c.flush_messages
                or now - self._last_flush_ms >= c.flush_ms):
            self._flush(data_only=True)

    def flush(self) -> None:
        """fsync every segment above the recovery point and the directory, then advance the
        recovery point to the log end offset (only a real fsync moves it)."""
        self._flush(data_only=False)

    def _flush(self, *, data_only: bool, upto: int | None = None) -> None:
        """``data_only`` (the flush policy's flush between appends): the active segment's index
        entries and an unchanged directory are not fsynced (see ``LogSegment.flush``); what a
        recovery point promises, every acknowledged byte of the log, is. ``upto``: only the
        segments below that offset (``flushUptoOffsetExclusive``), which becomes the recovery
        point; otherwise everything, up to the log end offset."""
        self._check_writable()
        started = time.perf_counter_ns()
        with self._lock:
            end = self._local.log_end_offset if upto is None else upto
            self._local.flush(self.recovery_point, end, data_only=data_only)
            self.recovery_point = max(self.recovery_point, end)
            if upto is None:
                self._unflushed = 0
                self._last_flush_ms = self.clock()
            self.metrics.flushes += 1
            self.metrics.flush_time_ns += time.perf_counter_ns() - started

    # ---------------------------------------------------------------------------- read

    def _check_in_range(self, offset: int) -> None:
        if not self.log_start_offset <= offset <= self._local.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Offset {offset} is out of range for {self.dir.name}: the log holds "
                f"[{self.log_start_offset}, {self._local.log_end_offset})")

    def read_raw(self, offset: int, *, max_bytes: int = 1 << 20,
                 min_one_message: bool = True) -> bytes:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` of them (one
        larger first batch is let through with ``min_one_message``), continuing into the next
        segments until the budget is spent; a broker's fetch stops at a segment's end, a reader
        here does not need to."""
        parts = [data for _, _, data in self._read_parts(offset, max_bytes, min_one_message)]
        return b"".join(parts) if len(parts) != 1 else bytes(parts[0])

    def _read_parts(self, offset: int, max_bytes: int, min_one_message: bool = True
                    ) -> list[tuple[LogSegment, int, bytes | memoryview]]:
        """``read_raw``'s bytes as ``(segment, file position, bytes)`` per segment read."""
        with self._lock:
            self._check_in_range(offset)
            segments = self._segments.from_floor(offset)
        return LocalLog.read_parts(segments, offset, max_bytes, min_one_message)

    def read(self, offset: int, *, max_bytes: int = 1 << 20, max_offset: int | None = None,
             isolation: str = "read_uncommitted") -> pa.Table:
        """Records from ``offset`` (up to about ``max_bytes`` of batches, at least one batch),
        as an Arrow table in ``storage_core.format.SCHEMA``, control records left out (see
        ``fetch``, which also says where the next read starts)."""
        return self.fetch(offset, max_bytes=max_bytes, max_offset=max_offset,
                          isolation=isolation).table

    def fetch(self, offset: int, *, max_bytes: int = 1 << 20, max_offset: int | None = None,
              isolation: str = "read_uncommitted") -> FetchResult:
        """``read`` plus the offset the next fetch starts from (see ``storage_core.log.read.fetched``).
        A consumer loop is ``while offset < end: r = log.fetch(offset, ...); offset = r.next_offset``;
        ``read_committed`` stops at the last stable offset and leaves out aborted transactions."""
        committed = read.is_read_committed(isolation)
        with self._lock:
            upper = self.last_stable_offset if committed else self.high_watermark
            segments = self._segments.values()
            self._check_in_range(offset)
        if max_offset is not None:
            upper = min(upper, max_offset)
        if offset >= upper:
            return FetchResult(empty_table(), offset)
        parts = self._read_parts(offset, max_bytes)
        if self.read_only and (LogView.out_of_date(segments, offset, sum(len(data) for _, _, data in parts))
                               or not parts and offset < self._local.log_end_offset):
            # (nothing at an offset below the end: the files were rewritten under the view)
            self._relist_reader_view(offset)
            if offset >= self.log_start_offset:
                # what was read may predate a truncation: read again from the files as they are
                return self.fetch(offset, max_bytes=max_bytes, max_offset=max_offset, isolation=isolation)
            # retention moved the log start past it: the records read are still the ones
            # written at those offsets (a consumer would skip forward on its next fetch)
            if not parts:
                self._check_in_range(offset)        # OffsetOutOfRangeError
        return read.fetched(parts, segments, offset, upper, max_bytes=max_bytes, committed=committed,
                            aborts_from_markers=self.read_only,
                            max_message_bytes=self.config.max_message_bytes)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """``UnifiedLog.fetchOffsetByTimestamp`` with ListOffsets' special timestamps (see
        ``storage_core.log.read.fetch_offset_by_timestamp``)."""
        with self._lock:
            segments = self._segments.values()
            start, end = self.log_start_offset, self._local.log_end_offset
        return read.fetch_offset_by_timestamp(segments, start, end, self.leader_epoch_cache, timestamp)

    def offsets_for_times(self, timestamp: int) -> int | None:
        """The first offset whose record timestamp is at or after ``timestamp``, as Kafka's
        ListOffsets answers it; None if every record is older."""
        found = self.fetch_offset_by_timestamp(timestamp)
        return None if found is None else found.offset

    # ---------------------------------------------------------------------------- truncation

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or above ``offset`` (``UnifiedLog.truncateTo``)."""
        self._check_writable()
        with self._lock:
            self._local.dir_dirty = True
            if offset < 0:
                raise OffsetOutOfRangeError(f"Cannot truncate {self.dir.name} to negative offset {offset}")
            if offset >= self._local.log_end_offset:
                # UnifiedLog.truncateTo: an epoch begun at the LEO with nothing appended goes
                self.leader_epoch_cache.truncate_from_end(self._local.log_end_offset)
                return
            if offset < self._local.first_segment.base_offset:
                self._local.truncate_fully_and_start_at(offset)
                self.log_start_offset = offset
            else:
                self._local.truncate_to(offset)
            # UnifiedLog.truncateTo: logStartOffset = min(targetOffset, logStartOffset)
            self.log_start_offset = min(self.log_start_offset, self._local.log_end_offset)
            self.recovery_point = min(self.recovery_point, self._local.log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self._local.log_end_offset)
            if self._local.log_end_offset == self.log_start_offset and len(self._segments) == 1 and \
                    self._local.first_segment.size == 0:
                self.producer_state.truncate_fully_and_start_at(self._local.log_end_offset)
            # UnifiedLog.truncateTo: snapshots above the new end dropped, state reloaded
            self._loader().rebuild_producer_state(self.log_start_offset)
            self._check_invariant("truncation")

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to ``offset`` (``deleteRecords``) and delete every
        segment wholly below it. Returns the new log start offset."""
        self._check_writable()
        with self._lock:
            self._local.dir_dirty = True
            if offset > self._local.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"Cannot advance the log start offset of {self.dir.name} to {offset}: "
                    f"the log end offset is {self._local.log_end_offset}")
            if offset <= self.log_start_offset:
                return self.log_start_offset
            self._maybe_increment_log_start_offset(offset)
            # UnifiedLog.deleteRecords: the segments wholly below the new start go at once
            # (deleteLogStartOffsetBreachedSegments), through the same asynchronous delete
            segs = self._segments.values()
            doomed = [seg for seg, nxt in zip(segs, segs[1:]) if nxt.base_offset <= offset]
            if doomed:
                self._remove_and_delete_segments(doomed, "log start offset breach")
            self._write_checkpoints()
            return offset

    @property
    def last_flush_ms(self) -> int:
        """When the log was last flushed whole (``UnifiedLog.lastFlushTime``)."""
        return self._last_flush_ms

    def last_records_of_active_producers(self) -> dict[int, tuple[int | None, int]]:
        """``UnifiedLog.lastRecordsOfActiveProducers``: for each active producer, its last data
        offset (None when its last entry is a transaction marker) and its epoch, read under
        the lock (the cleaner keeps these producers' last batches)."""
        with self._lock:
            return {pid: (e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch)
                    for pid, e in self.producer_state.active_producers.items()}

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        """``UnifiedLog.removeExpiredProducers`` (the periodic producer expiration check):
        producers idle for ``producer.id.expiration.ms`` with no open transaction are forgotten."""
        self._check_writable()
        with self._lock:
            self.producer_state.remove_expired_producers(self.clock() if now_ms is None else now_ms)

    def delete_snapshots_after_recovery_point_checkpoint(self) -> None:
        """Prune producer snapshots once the recovery point is checkpointed (the LogManager
        calls this after writing ``recovery-point-offset-checkpoint``)."""
        with self._lock:
            self._delete_snapshots_after_recovery_point_checkpoint()

    def update_config(self, config: LogConfig) -> None:
        """``UnifiedLog.updateConfig``: a topic's configuration changed; later appends, rolls,
        flushes, retention and cleaning follow ``config`` (existing index files keep their
        size until their segment rolls, as in Kafka)."""
        with self._lock:
            self.config = self._local.config = config
            for seg in self._segments:
                # an open segment keeps its index size: its preallocated length is what tells
                # an unclean stop apart after a restart (LogSegment.indexes_preallocated)
                seg.config = config.with_changes(segment_index_bytes=seg.config.segment_index_bytes)

    # ---------------------------------------------------------------------------- retention

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """``UnifiedLog.deleteOldSegments``: see ``storage_core.log.retention``. Returns how many
        segments went; their files are renamed ``.deleted`` now and removed after
        ``file.delete.delay.ms``."""
        self._check_writable()
        with self._lock:
            return retention.delete_old_segments(self._local, self.log_start_offset, now_ms,
                                                 high_watermark=self.high_watermark, roll=self.roll,
                                                 delete=self._delete_segments,
                                                 highest_remote_offset=self.highest_offset_in_remote_storage)

    def _maybe_increment_log_start_offset(self, offset: int) -> None:
        """``UnifiedLog.maybeIncrementLogStartOffset``."""
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self.producer_state.on_log_start_offset_incremented(offset)
            self.recovery_point = max(self.recovery_point, offset)

    def _delete_segments(self, segments: list[LogSegment], reason: str) -> None:
        """``UnifiedLog.deleteSegments``: the segments and their producer snapshots go, and the log
        start offset moves up to the first segment left."""
        self._remove_and_delete_segments(segments, reason)
        self._maybe_increment_log_start_offset(self._local.first_segment.base_offset)

    def _remove_and_delete_segments(self, segments: list[LogSegment], reason: str) -> None:
        """``LocalLog.removeAndDeleteSegments(asyncDelete = true)`` plus the producer snapshots
        of those segments (``deleteProducerSnapshots``)."""
        self._local.remove_and_delete_segments(segments)
        for seg in segments:
            self.metrics.segments_deleted += 1
            self.metrics.bytes_deleted += seg.size
            self._delete_producer_snapshot(seg.base_offset)

    def _delete_producer_snapshot(self, offset: int) -> None:
        snap = self.producer_state.remove_and_mark_snapshot_for_deletion(offset)
        if snap is not None:
            self._local.schedule_delete(snap)

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Remove the ``.deleted`` files whose ``file.delete.delay.ms`` has passed (the
        scheduled "delete-file" task of Kafka's LocalLog). Returns how many segments and
        snapshots were removed."""
        with self._lock:
            return self._local.delete_expired_files(self.clock() if now_ms is None else now_ms)

    @property
    def pending_deletes(self) -> int:
        """Segments and snapshots renamed ``.deleted`` and not yet removed."""
        return len(self._local.pending_deletes)

    # ---------------------------------------------------------------------------- compaction

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """``LocalLog.replaceSegments`` (and ``UnifiedLog.replaceSegments``): swap the cleaner's
        output in for the segments it was made from, crash-safe in two phases.

        ``new_segments`` are complete, flushed segments whose files carry the ``.cleaned``
        suffix. They are renamed ``.swap`` (from then on a restart completes the swap, see
        ``LogLoader``), the old segments leave the segment list and are renamed
        ``.deleted`` (removed after ``file.delete.delay.ms``; readers holding them are not
        disturbed), then the ``.swap`` suffix is dropped. Old segments already deleted by
        retention in the meantime are not deleted twice."""
        self._check_writable()
        if not new_segments:
            raise ValueError("replace_segments needs at least one new segment")
        with self._lock:
            old_sorted = self._local.replace_segments(new_segments, old_segments)
            self.metrics.segments_replaced += len(old_sorted)
            replaced = {s.base_offset for s in new_segments}
            for seg in old_sorted:
                if seg.base_offset not in replaced:
                    self._delete_producer_snapshot(seg.base_offset)
            self._check_invariant("segment replacement")

    # ---------------------------------------------------------------------------- close

    def _write_checkpoints(self) -> None:
        # the data directory's lock is taken after this log's (the caller holds it or is alone)
        write_partition_checkpoints(self.dir, self.recovery_point, self.log_start_offset,
                                    self._local.first_segment.base_offset)
        self._delete_snapshots_after_recovery_point_checkpoint()

    def _delete_snapshots_after_recovery_point_checkpoint(self) -> None:
        """``deleteSnapshotsAfterRecoveryPointCheckpoint``: keep the snapshots from the segment
        below the recovery point and from the segment below the active one."""
        def lower_base(offset: int) -> int | None:
            seg = self._segments.lower_segment(offset)
            return None if seg is None else seg.base_offset

        below_rp = lower_base(self.recovery_point)
        active = self._local.active_segment.base_offset
        below_active = lower_base(active)
        self.producer_state.delete_snapshots_before(
            min(self.recovery_point if below_rp is None else below_rp,
                active if below_active is None else below_active))

    def close(self) -> None:
        """Flush, write the recovery-point and log-start checkpoints, trim the indexes, release the writer lock."""
        if self._closed:
            return
        with self._lock:
            try:
                if not self.read_only:
                    self.flush()
                    self.producer_state.take_snapshot()      # at the LEO
                    self._write_checkpoints()
                    self.delete_expired_files()
            finally:
                self._release()

    def _release(self) -> None:
        self._closed = True
        self._local.close_pending()         # .deleted files not yet due stay on disk: the next load removes them
        self._local.release()

    def delete(self) -> None:
        """``UnifiedLog.delete``: remove every segment, snapshot and checkpoint entry of this
        partition, then its directory, and close the log. The caller (the LogManager) has taken
        it out of use."""
        self._check_writable()
        with self._lock:
            for seg in self._segments.clear():
                seg.delete()
            self._local.close_pending(delete=True)
            self.leader_epoch_cache.clear()
            remove_partition_checkpoints(self.dir)
            self._closed = True
            self._local.release()
            shutil.rmtree(self.dir, ignore_errors=True)

    def _check_writable(self) -> None:
        if self._closed:
            raise KafkaLogError(f"{self.dir} is closed")
        if self.read_only:
            raise KafkaLogError(f"{self.dir} was opened read-only")

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self.log_start_offset}, end={self._local.log_end_offset}, "
                f"segments={len(self._segments)})")

"""Log: one ``topic-partition`` directory (Kafka's ``UnifiedLog``), the facade over ``LocalLog``,
``LogLoader``, ``LogView`` and the append, read and retention paths.

The public API the rest of kafkalog and its users call::

    with Log.open("/data/kafkalog/orders-0") as log:
        info = log.append(pa.table({"key": keys, "value": values}))
        table = log.read(log.offsets_for_times(t0), max_bytes=1 << 20)

One process at a time may write a partition (an advisory lock on the directory, a clear error
for a second writer); any number may read it, also while it is appended to, rolled or truncated.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

import pyarrow as pa

from ..checkpoint import (LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                          RECOVERY_POINT_CHECKPOINT, CorruptCheckpointError, LeaderEpochCache,
                          OffsetCheckpointFile, PartitionMetadataFile, parse_topic_partition_dir,
                          validate_topic_name, without_invalid_topics)
from ..common import wall_ms
from ..config import LogConfig
from ..errors import KafkaLogError, LogInvariantError, OffsetOutOfRangeError
from ..format import encode_batches
from ..format.batch_header import HEADER_SIZE_UP_TO_MAGIC, BatchField, read_field
from ..format.control import ControlRecordType, EndTransactionMarker, end_transaction_marker_batch
from ..format.log_input_stream import BatchArrays
from ..producer import AppendOrigin, ProducerStateManager
from . import append, read, retention
from .append import AppendInfo
from .read import FetchResult
from .files import check_partition_dir
from .loader import LogLoader, inconsistent_topic_id, initialize_topic_id
from .local_log import LocalLog
from .log_metrics import LogMetrics
from .segment import LogSegment, TimestampAndOffset

logger = logging.getLogger(__name__)

Clock = Callable[[], int]


class Log:
    """One partition directory (Kafka's ``UnifiedLog``). Open with ``Log.open``; close (or use
    ``with``) when done.

    The segments and their files belong to a ``LocalLog`` (``_local``; its ``LogSegments`` is
    ``_segments``), opening is ``LogLoader``'s, a reader's listing ``LogView``'s; this class
    keeps the offsets, the producer state and the leader-epoch cache, and decides appends
    (``log/append.py``), reads (``log/read.py``), truncation and retention (``log/retention.py``).

    Thread-safety: one ``RLock`` (``_lock``) guards the segment map, the offsets
    (``log_start_offset``, ``recovery_point``, the log end offset), the producer state, the
    pending deletes and the flush counters: every change takes it, and readers take it only to
    copy the segment list and the bounds, then read the segments' files without it (a segment
    read is positioned, so it never blocks an append). Across processes one writer holds an
    ``flock`` on the directory; readers open it ``read_only`` and take no lock.

    Invariant: ``log_start_offset <= recovery_point <= log_end_offset`` (after a roll past the end,
    the empty active segment's base bounds the recovery point), checked after load, truncation and
    segment replacement (``LogInvariantError`` names the directory and all three).
    """

    def __init__(self, directory: Path, config: LogConfig, *, read_only: bool = False,
                 clock: Clock = wall_ms, had_clean_shutdown: bool = False) -> None:
        self.dir = Path(directory)
        self.topic, self.partition = parse_topic_partition_dir(self.dir.name)
        validate_topic_name(self.topic)
        self.config = config
        self.read_only = read_only
        self.clock = clock
        self._lock = threading.RLock()
        self.metrics = LogMetrics()
        self._local = LocalLog(self.dir, config, clock=clock, metrics=self.metrics)
        self._segments = self._local.segments       # the one map of base offset -> segment
        self.log_start_offset = 0
        self.recovery_point = 0
        self._log_end_offset = 0
        self._unflushed = 0
        self._last_flush_ms = clock()
        self._closed = False
        self._force_full_recovery = False
        self._had_clean_shutdown = had_clean_shutdown
        self._retired: list[LogSegment] = []     # a reader's previous view (_relist_reader_view)
        self._relists = (-1, 0)                  # (offset, re-lists in a row for a fetch at it)
        self._unsynced_snapshots: list[Path] = []
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
            initialize_topic_id(log, topic_id)
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
                raise inconsistent_topic_id(self, topic_id, self.topic_id)
            return
        self._check_writable()
        with self._lock:
            initialize_topic_id(self, topic_id)

    def _checkpoint(self, name: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(self.dir.parent / name)

    def _load(self) -> None:
        LogLoader(self).load()
        self._check_invariant("load")

    def _relist_reader_view(self, offset: int) -> None:
        LogLoader(self).relist_reader_view(offset)

    @property
    def producer_state(self) -> ProducerStateManager:
        if self._producer_state_pending:
            with self._lock:
                if self._producer_state_pending:
                    self._producer_state_pending = False
                    LogLoader(self).load_producer_state_read_only()
        return self._producer_state

    # ---------------------------------------------------------------------------- offsets

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        """No replicas here: everything appended is committed, so the high watermark is the log
        end offset."""
        return self._log_end_offset

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
        return self._local.deletable_segments(predicate, self.high_watermark, self._log_end_offset)

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
        start, rp, end = self.log_start_offset, self.recovery_point, self._log_end_offset
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
        codec = compression or self._default_compression()
        limit = max_batch_bytes or min(self.config.max_message_bytes, 1 << 20)
        raw = encode_batches(records, compression=codec, max_batch_bytes=limit,
                             base_offset=self._log_end_offset, now_ms=self.clock())
        return append.append_batches(self, raw, assign_offsets=True, leader_epoch=None,
                                     origin=AppendOrigin.CLIENT, owned=True)

    def _default_compression(self) -> str:
        t = self.config.compression_type
        return "none" if t in ("producer", "uncompressed") else t

    def append_raw(self, batches, *, assign_offsets: bool = True,
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
        return append.append_batches(self, batches, assign_offsets=assign_offsets, leader_epoch=leader_epoch,
                                     origin=origin, owned=owned and isinstance(batches, bytearray))

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int,
                              control_type: ControlRecordType | str | int, coordinator_epoch: int,
                              timestamp: int | None = None, *,
                              leader_epoch: int | None = None) -> AppendInfo:
        """Append a transaction's COMMIT or ABORT marker as the transaction coordinator does
        (``UnifiedLog.appendAsLeader`` with origin coordinator): the producer's epoch is
        checked (no sequence), an ABORT of a non-empty transaction adds an entry to the
        segment's ``.txnindex``, and the last stable offset moves past the transaction."""
        if isinstance(control_type, str):
            control_type = ControlRecordType[control_type.upper()]
        marker = EndTransactionMarker(ControlRecordType(control_type), coordinator_epoch)
        ts = self.clock() if timestamp is None else timestamp
        raw = end_transaction_marker_batch(marker, offset=self._log_end_offset, timestamp=ts,
                                           producer_id=producer_id, producer_epoch=producer_epoch)
        return append.append_batches(self, raw, assign_offsets=True, leader_epoch=leader_epoch,
                                     origin=AppendOrigin.COORDINATOR)

    def append_from_file(self, fd: int, batches: BatchArrays, *, max_append_bytes: int = 8 << 20) -> AppendInfo:
        """Append whole v2 batches straight from the file ``fd`` with kernel-side copies, for a
        trusted writer that checked their CRCs and numbered them from the log end offset
        (``batches``: their header walk); see ``storage_core.log.append.append_from_file``."""
        return append.append_from_file(self, fd, batches, max_append_bytes=max_append_bytes)

    def can_take_segment_file(self, path: Path, batches: BatchArrays) -> bool:
        """Whether ``append_segment_file`` can take the file at ``path`` (fits one segment, on
        this log's file system)."""
        return append.can_take_segment_file(self, path, batches)

    def append_segment_file(self, path: Path, batches: BatchArrays) -> AppendInfo:
        """Append whole v2 batches by renaming the file at ``path`` into a new segment, for a
        trusted writer as ``append_from_file``; see ``storage_core.log.append.append_segment_file``."""
        return append.append_segment_file(self, path, batches)

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log end offset)``
        (``LocalLog.roll``); an empty active segment at that offset is kept as it is."""
        self._check_writable()
        with self._lock:
            new_base = max(expected_next_offset or 0, self._log_end_offset)
            seg = self._local.roll(new_base)
            if seg is None:
                return self._local.active_segment
            self.producer_state.update_map_end_offset(new_base)
            path = self.producer_state.take_snapshot(sync=False)
            if path is not None:
                self._unsynced_snapshots.append(path)
            # UnifiedLog.roll: flushUptoOffsetExclusive(newSegment.baseOffset), whatever the
            # flush policy: the rolled segment, its snapshot and the new files are made durable
            # and the recovery point moves to the new segment, so a crash never re-validates a
            # segment that was complete before it
            self._flush(data_only=False, upto=new_base)
            return seg

    # ---------------------------------------------------------------------------- flush

    def _flush_per_policy(self, now: int) -> None:
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
            end = self._log_end_offset if upto is None else upto
            self._local.flush(self.recovery_point, end, data_only=data_only, files=self._unsynced_snapshots)
            self._unsynced_snapshots.clear()
            self.recovery_point = max(self.recovery_point, end)
            if upto is None:
                self._unflushed = 0
                self._last_flush_ms = self.clock()
            self.metrics.flushes += 1
            self.metrics.flush_time_ns += time.perf_counter_ns() - started

    # ---------------------------------------------------------------------------- read

    def _check_in_range(self, offset: int) -> None:
        if not self.log_start_offset <= offset <= self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"Offset {offset} is out of range for {self.dir.name}: the log holds "
                f"[{self.log_start_offset}, {self._log_end_offset})")

    def read_raw(self, offset: int, *, max_bytes: int = 1 << 20,
                 min_one_message: bool = True) -> bytes:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` of them (one
        larger first batch is let through with ``min_one_message``), continuing into the next
        segments until the budget is spent; a broker's fetch stops at a segment's end, a reader
        here does not need to."""
        parts = [data for _, _, data in self._read_parts(offset, max_bytes, min_one_message)]
        return b"".join(parts) if len(parts) != 1 else parts[0]

    def _read_parts(self, offset: int, max_bytes: int, min_one_message: bool = True
                    ) -> list[tuple[LogSegment, int, bytes]]:
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
        """``read`` plus the offset the next fetch starts from (see ``storage_core.log.read.fetch``).
        A consumer loop is ``while offset < end: r = log.fetch(offset, ...); offset = r.next_offset``;
        ``read_committed`` stops at the last stable offset and leaves out aborted transactions."""
        return read.fetch(self, offset, max_bytes=max_bytes, max_offset=max_offset, isolation=isolation)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """``UnifiedLog.fetchOffsetByTimestamp`` with ListOffsets' special timestamps (see
        ``storage_core.log.read.fetch_offset_by_timestamp``)."""
        return read.fetch_offset_by_timestamp(self, timestamp)

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
            if offset >= self._log_end_offset:
                # UnifiedLog.truncateTo: an epoch begun at the LEO with nothing appended goes
                self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
                return
            head = b""                  # the first bytes of the batch the truncation removes
            if offset < self._segments.first_segment.base_offset:
                self._local.truncate_fully_and_start_at(offset)
                self.log_start_offset = offset
            else:
                head = self._local.truncate_to(offset)
            if len(head) < HEADER_SIZE_UP_TO_MAGIC or int(read_field(head, [0], BatchField.MAGIC)[0]) < 2:
                self._log_end_offset = self._local.active_segment.read_next_offset()
            else:
                # LocalLog.truncateTo: updateLogEndOffset(targetOffset), where the batch holding
                # the target went whole (the log ends at that batch's base), so on a compacted
                # log whose offsets below the target were cleaned away the end is the target,
                # not the emptied segment's base
                self._log_end_offset = min(offset, int(read_field(head, [0], BatchField.BASE_OFFSET)[0]))
            # UnifiedLog.truncateTo: logStartOffset = min(targetOffset, logStartOffset)
            self.log_start_offset = min(self.log_start_offset, self._log_end_offset)
            self.recovery_point = min(self.recovery_point, self._log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
            if self._log_end_offset == self.log_start_offset and len(self._segments) == 1 and \
                    self._segments.first_segment.size == 0:
                self.producer_state.truncate_fully_and_start_at(self._log_end_offset)
            # UnifiedLog.truncateTo: snapshots above the new end dropped, state reloaded
            LogLoader(self).rebuild_producer_state()
            self._check_invariant("truncation")

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to ``offset`` (``deleteRecords``) and delete every
        segment wholly below it. Returns the new log start offset."""
        self._check_writable()
        with self._lock:
            self._local.dir_dirty = True
            if offset > self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"Cannot advance the log start offset of {self.dir.name} to {offset}: "
                    f"the log end offset is {self._log_end_offset}")
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
        return retention.delete_old_segments(self, now_ms)

    def _maybe_increment_log_start_offset(self, offset: int) -> None:
        """``UnifiedLog.maybeIncrementLogStartOffset``."""
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self.producer_state.on_log_start_offset_incremented(offset)
            self.recovery_point = max(self.recovery_point, offset)

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
        key = (self.topic, self.partition)
        for name, value in ((RECOVERY_POINT_CHECKPOINT, self.recovery_point),
                            (LOG_START_OFFSET_CHECKPOINT, self.log_start_offset)):
            cp = self._checkpoint(name)
            # other partitions of the data dir may be written by other processes: serialise
            # the read-modify-write of the shared file on the data directory's lock
            parent_fd = os.open(self.dir.parent, os.O_RDONLY)
            try:
                fcntl.flock(parent_fd, fcntl.LOCK_EX)
                try:
                    entries = without_invalid_topics(cp.read(), cp.path)
                except (OSError, KafkaLogError):
                    entries = {}
                if name == LOG_START_OFFSET_CHECKPOINT and value <= self._segments.first_segment.base_offset:
                    entries.pop(key, None)      # Kafka lists only logs whose start moved past
                else:
                    entries[key] = value
                cp.write(entries)
            finally:
                os.close(parent_fd)
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
        """Flush, write the recovery-point and log-start checkpoints, trim the active segment's
        indexes and release the writer lock."""
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
                self._closed = True
                # .deleted files not yet due stay on disk: the next load removes them
                self._local.close_pending()
                for seg in self._retired:
                    seg.close(final_entries=False)
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
            key = (self.topic, self.partition)
            for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
                cp = self._checkpoint(name)
                try:
                    entries = without_invalid_topics(cp.read(), cp.path)
                except (OSError, KafkaLogError):
                    continue
                if entries.pop(key, None) is not None:
                    cp.write(entries)
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

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self.log_start_offset}, end={self._log_end_offset}, "
                f"segments={len(self._segments)})")

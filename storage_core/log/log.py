"""Log: one ``topic-partition`` directory (Kafka's ``UnifiedLog`` and ``LocalLog``).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..checkpoint import (LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                          RECOVERY_POINT_CHECKPOINT, CorruptCheckpointError, LeaderEpochCache,
                          OffsetCheckpointFile, PartitionMetadataFile, parse_topic_partition_dir,
                          topic_id_to_str, validate_topic_name, without_invalid_topics)
from ..common import INT_MAX, LONG_MAX, wall_ms
from ..config import LogConfig
from ..errors import (CorruptRecordError, InconsistentTopicIdError, InvalidConfigError,
                      InvalidOffsetError, KafkaLogError, LogInvariantError, LogLockedError,
                      OffsetOutOfRangeError, RecordTooLargeError)
from ..format import decode_run, empty_table, encode_batches
from ..format.batch_header import HEADER_SIZE_UP_TO_MAGIC, BatchField, HeaderColumn, read_field
from ..format.control import ControlRecordType, EndTransactionMarker, end_transaction_marker_batch
from ..format.log_input_stream import BatchArrays, default_max_decompressed, scan_batches
from ..index import AbortedTxn
from ..producer import AppendOrigin, ProducerStateManager
from .files import check_partition_dir
from .loader import LogLoader
from .local_log import LocalLog
from .log_metrics import LogMetrics
from .segment import LogSegment, TimestampAndOffset
from .segments import floor_index
from .validator import assign_batch_offsets, validate_batches
from .view import LogView, aborted_by_markers

logger = logging.getLogger(__name__)

Clock = Callable[[], int]

# ListOffsets' special timestamps (``ListOffsetsRequest``)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append wrote (Kafka's ``LogAppendInfo``)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    num_batches: int
    num_records: int
    valid_bytes: int
    log_append_time: int = -1


@dataclass(frozen=True)
class FetchResult:
    """What one ``Log.fetch`` returns: the visible records and where the next fetch starts."""

    table: pa.Table
    next_offset: int


def _aborted_mask(table: pa.Table, aborted: list[AbortedTxn]) -> np.ndarray:
    """True for the transactional records lying inside an aborted transaction of their
    producer (``[first_offset, ABORT marker]``): one ``searchsorted`` per aborted producer over
    the whole columns, never a loop over records."""
    offsets = table.column("offset").to_numpy()
    pids = table.column("producerId").to_numpy()
    txnal = table.column("isTransactional").to_numpy(zero_copy_only=False)
    mask = np.zeros(len(offsets), dtype=bool)
    by_pid: dict[int, list[AbortedTxn]] = {}
    for t in aborted:
        by_pid.setdefault(t.producer_id, []).append(t)
    for pid, txns in by_pid.items():
        txns.sort(key=lambda t: t.first_offset)
        firsts = np.fromiter((t.first_offset for t in txns), np.int64, len(txns))
        lasts = np.fromiter((t.last_offset for t in txns), np.int64, len(txns))
        rows = np.flatnonzero((pids == pid) & txnal)
        if not rows.size:
            continue
        o = offsets[rows]
        i = np.searchsorted(firsts, o, side="right") - 1
        hit = (i >= 0) & (o <= lasts[np.maximum(i, 0)])
        mask[rows[hit]] = True
    return mask


def _max_timestamp_and_offset(max_timestamps: np.ndarray, last_offsets: np.ndarray) -> tuple[int, int]:
    """The largest batch max timestamp and the last offset of the first batch holding it
    (``shallowOffsetOfMaxTimestamp``); (-1, -1) when no batch has a timestamp."""
    top = int(np.argmax(max_timestamps))
    max_ts = int(max_timestamps[top])
    return (max_ts, int(last_offsets[top])) if max_ts >= 0 else (-1, -1)


class Log:
    """One partition directory (Kafka's ``UnifiedLog``). Open with ``Log.open``; close (or use
    ``with``) when done.

    The segments and their files belong to a ``LocalLog`` (``_local``; its ``LogSegments`` is
    ``_segments``), opening is ``LogLoader``'s, a reader's listing ``LogView``'s; this class
    keeps the offsets, the producer state and the leader-epoch cache, and decides appends,
    reads, truncation and retention.

    Thread-safety: one ``RLock`` (``_lock``) guards the segment map, the offsets
    (``log_start_offset``, ``recovery_point``, the log end offset), the producer state, the
    pending deletes and the flush counters: every change takes it, and readers take it only to
    copy the segment list and the bounds, then read the segments' files without it (a segment
    read is positioned, so it never blocks an append). Across processes one writer holds an
    ``flock`` on the directory; readers open it ``read_only`` and take no lock.

    Invariant: ``log_start_offset <= recovery_point <= log_end_offset``, checked after load,
    truncation and segment replacement (``LogInvariantError`` names the directory and all three).
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
                log._acquire_writer_lock()
            log._initialize_topic_id(topic_id)
            log._load()
        except BaseException:
            log._release()
            raise
        return log

    def _acquire_writer_lock(self) -> None:
        # flock on the directory itself: no extra file for a broker to trip over, released by
        # the kernel if the process dies.
        local = self._local
        local.dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            fcntl.flock(local.dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(local.dir_fd)
            local.dir_fd = -1
            raise LogLockedError(f"{self.dir} is already open for writing by another process "
                                 f"(open it with read_only=True to read while it writes)") from None

    def _release(self) -> None:
        try:
            self._local.close_segments()
        finally:
            if self._local.dir_fd >= 0:
                os.close(self._local.dir_fd)       # releases the writer lock whatever happened
                self._local.dir_fd = -1

    def _initialize_topic_id(self, topic_id: uuid.UUID | None) -> None:
        """``UnifiedLog.initializeTopicId``: an id on disk wins and must equal ``topic_id`` if
        one is given; with none on disk a given id is recorded and flushed. Kafka schedules that
        flush and repeats it before every append (so the file precedes any data); it is done
        here at once, before the load, so no append has to check. Run before the load: a
        refused open changes nothing. A reader never writes the file, and reads past a damaged
        one (the records do not depend on it) with a warning and no id; a writer is refused,
        as Kafka takes such a log's directory offline."""
        try:
            on_disk = self._partition_metadata.read() if self._partition_metadata.exists() else None
        except FileNotFoundError:        # a reader racing a deletion: as if never written
            on_disk = None
        except CorruptCheckpointError as e:
            if not self.read_only:
                raise
            logger.warning("Reading %s without its topic id: %s", self.dir, e)
            on_disk = None
        if on_disk is not None:
            if topic_id is not None and topic_id != on_disk:
                raise self._inconsistent_topic_id(topic_id, on_disk)
            self.topic_id = on_disk
        elif topic_id is not None:
            self.topic_id = topic_id
            if not self.read_only:
                self._partition_metadata.record(topic_id)
                self._partition_metadata.maybe_flush()      # .tmp, fsync, rename, fsync dir

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """``UnifiedLog.assignTopicId``: give a log created without an id its topic id
        (recorded in ``partition.metadata`` at once); re-assigning the same id is a no-op,
        another id raises ``InconsistentTopicIdError``."""
        if self.topic_id is not None:
            if self.topic_id != topic_id:
                raise self._inconsistent_topic_id(topic_id, self.topic_id)
            return
        self._check_writable()
        with self._lock:
            self._initialize_topic_id(topic_id)

    def _inconsistent_topic_id(self, given: uuid.UUID, recorded: uuid.UUID) -> InconsistentTopicIdError:
        return InconsistentTopicIdError(
            f"Tried to assign topic ID {topic_id_to_str(given)} to log for topic partition "
            f"{self.topic}-{self.partition} in {self.dir}, but log already contained topic ID "
            f"{topic_id_to_str(recorded)}")

    def _checkpoint(self, name: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(self.dir.parent / name)

    def _load(self) -> None:
        LogLoader(self).load()
        self._check_invariant("load")

    def _relist_reader_view(self, offset: int) -> None:
        """Open the reader view afresh (the files as they are now), as ``Log.open`` does; a
        fetch at one offset whose view keeps going out of date ends in an error."""
        last, count = self._relists
        count = count + 1 if last == offset else 1
        self._relists = (offset, count)
        if count > 100:
            raise KafkaLogError(f"{self.dir} kept changing while offset {offset} was being read")
        with self._lock:
            # the view before the last is closed now, the last one at the next re-list or close:
            # another thread may still be reading from it
            for seg in self._retired:
                seg.close(final_entries=False)
            self._retired = self._segments.clear()
            self._load()

    @property
    def producer_state(self) -> ProducerStateManager:
        if self._producer_state_pending:
            with self._lock:
                if self._producer_state_pending:
                    self._producer_state_pending = False
                    LogLoader(self).load_producer_state_read_only()
        return self._producer_state

    def split_overflowed_segment(self, seg: LogSegment) -> list[LogSegment]:
        """``UnifiedLog.splitOverflowedSegment`` on a live log (the cleaner found ``seg``'s
        offsets overflowing 32-bit relative offsets): the segment is split as recovery splits
        it (crash-safe through ``.cleaned``/``.swap``), each piece indexed from its batches."""
        self._check_writable()
        with self._lock:
            if seg not in self._segments:
                raise ValueError(f"{seg.log_path} is not a segment of {self.dir.name}")
            active = seg is self._segments.last_segment
            self._segments.remove(seg.base_offset)
            pieces = self._local.split_segment_files(seg)
            for piece in pieces:
                piece.recover()
                if not active:
                    piece.on_become_inactive_segment()
                piece.flush()
                self._segments.add(piece)
            self._check_invariant("segment split")
            return pieces

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
        if not start <= rp <= end:
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
        return self._append(raw, assign_offsets=True, leader_epoch=None,
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
        return self._append(batches, assign_offsets=assign_offsets, leader_epoch=leader_epoch,
                            origin=origin, owned=owned and isinstance(batches, bytearray))

    def append_from_file(self, fd: int, batches: BatchArrays, *, max_append_bytes: int = 8 << 20) -> AppendInfo:
        """Append whole v2 batches straight from the file ``fd`` with kernel-side copies
        (``LogSegment.append_from_file``), for a trusted writer that already checked their
        CRCs and numbered them from the log end offset (the Spark sink's staged files:
        ``batches`` is their header walk, positions in the file). What ``append_raw`` does
        after validating a producer's request is done here too, in pieces of at most
        ``max_append_bytes`` (or ``segment.bytes``): the roll rule, the producer-state checks
        of epochs, sequences and transactions (a duplicate is refused: a trusted writer never
        repeats a batch), the indexes, the log end offset and the flush policy."""
        self._check_writable()
        started = time.perf_counter_ns()
        n = len(batches)
        if n == 0:
            return AppendInfo(-1, -1, -1, -1, 0, 0, 0)
        limit = min(max_append_bytes, self.config.segment_bytes)
        ends = batches.position + batches.size
        with self._lock:
            first = self._log_end_offset
            lo = 0
            while lo < n:
                hi = max(int(np.searchsorted(ends, batches.position[lo] + limit, side="right")), lo + 1)
                self._append_group_from_file(fd, batches, lo, hi)
                lo = hi
            records = int(batches.records_count.sum())
            size = int(batches.size.sum())
            self._count_append(records, size, started)
            max_ts, shallow = _max_timestamp_and_offset(batches.max_timestamp, batches.last_offset)
            return AppendInfo(first, self._log_end_offset - 1, max_ts, shallow, n, records, size)

    def can_take_segment_file(self, path: Path, batches: BatchArrays) -> bool:
        """Whether ``append_segment_file`` can take the file at ``path``: its batches fit one
        segment (``segment.bytes``, relative offsets, index entries) and it is on this log's
        file system, so a rename moves it in."""
        n = len(batches)
        if n == 0 or batches.end > self.config.segment_bytes:
            return False
        if int(batches.last_offset[-1]) - int(batches.base_offset[0]) > INT_MAX:
            return False
        # at most one entry per batch in each index; the time index keeps one slot for the
        # entry of the roll (TimeIndex.isFull)
        if n >= self.config.segment_index_bytes // 12:
            return False
        try:
            return os.stat(path).st_dev == os.stat(self.dir).st_dev
        except OSError:
            return False

    def append_segment_file(self, path: Path, batches: BatchArrays) -> AppendInfo:
        """Append whole v2 batches by making the file at ``path`` a segment of its own: the log
        rolls at its end offset and the file is renamed into the new segment's ``.log``, so its
        bytes are neither read nor copied. For a trusted writer with a file of batches too
        large to be worth copying (the Spark sink's big staged files), checked by
        ``can_take_segment_file``; as for ``append_from_file`` the writer has checked their
        CRCs and numbered them from the log end offset, and ``batches`` is their header walk.
        The producer-state checks, the indexes, the log end offset and the flush policy are
        those of ``append_from_file``; a roll is one Kafka makes too (any offset may start a
        segment), the file only decides where the next one starts."""
        self._check_writable()
        started = time.perf_counter_ns()
        if not self.can_take_segment_file(path, batches):
            raise InvalidConfigError(f"{path} cannot become a segment of {self.dir.name}: empty, "
                                     f"larger than segment.bytes, too many batches to index, "
                                     f"or on another file system")
        lasts = batches.last_offset
        max_ts, shallow = _max_timestamp_and_offset(batches.max_timestamp, lasts)
        first, last = int(batches.base_offset[0]), int(lasts[-1])
        records = int(batches.records_count.sum())
        with self._lock:
            if first != self._log_end_offset:
                raise InvalidOffsetError(f"Batches numbered from {first} cannot be appended to "
                                         f"{self.dir.name}, which ends at {self._log_end_offset}")
            now = self.clock()
            pending = self.producer_state.analyze_append(
                ((None, batches.info(i)) for i in range(len(batches))), AppendOrigin.CLIENT,
                segment_base_offset=first, start_position=0)
            if pending.duplicate is not None:
                raise InvalidOffsetError(f"Batches appended to {self.dir.name} repeat the "
                                         f"producer's batch {pending.duplicate}: not appended")
            seg = self.roll(first)
            seg.take_log_file(path, batches.end, last, max_ts, shallow, batches)
            self._local.dir_dirty = True
            self._appended(seg, batches, pending, last, records, now)
            self._count_append(records, batches.end, started)
            return AppendInfo(first, last, max_ts, shallow, len(batches), records, batches.end)

    def _append_group_from_file(self, fd: int, scan: BatchArrays, lo: int, hi: int) -> None:
        start = int(scan.position[lo])
        size = int(scan.position[hi - 1] + scan.size[hi - 1]) - start
        if size > self.config.segment_bytes:
            raise RecordTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self.dir.name} which "
                f"exceeds the maximum configured segment size of {self.config.segment_bytes}.")
        group = BatchArrays(scan.fields[lo:hi].copy(), size)
        group.fields[:, HeaderColumn.POSITION] -= start
        lasts = group.last_offset
        max_ts, shallow = _max_timestamp_and_offset(group.max_timestamp, lasts)
        first, last = int(group.base_offset[0]), int(lasts[-1])
        if first != self._log_end_offset:
            raise InvalidOffsetError(f"Batches numbered from {first} cannot be appended to "
                                     f"{self.dir.name}, which ends at {self._log_end_offset}")
        now = self.clock()
        seg = self._maybe_roll(size, max_ts, last, first, now)
        psm = self.producer_state
        # UnifiedLog.analyzeAndValidateProducerState: epochs, sequences, the open transaction
        pending = psm.analyze_append(((None, group.info(i)) for i in range(hi - lo)),
                                     AppendOrigin.CLIENT, segment_base_offset=seg.base_offset,
                                     start_position=seg.size)
        if pending.duplicate is not None:
            raise InvalidOffsetError(f"Batches appended to {self.dir.name} repeat the producer's "
                                     f"batch {pending.duplicate}: not appended")
        seg.append_from_file(fd, start, size, last, max_ts, shallow, group)
        self._appended(seg, group, pending, last, int(group.records_count.sum()), now)

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
        return self._append(raw, assign_offsets=True, leader_epoch=leader_epoch,
                            origin=AppendOrigin.COORDINATOR)

    def _append(self, batches, *, assign_offsets: bool, leader_epoch: int | None,
                origin: AppendOrigin, owned: bool = False) -> AppendInfo:
        """The append path, over whole appends at once: one compiled walk of the batch headers
        (CRCs checked), one of the records (``LogValidator``), offsets and epochs patched into
        the headers with numpy, one write. ``owned``: ``batches`` is a writable buffer of ours
        (just encoded), patched in place instead of copied."""
        self._check_writable()
        started = time.perf_counter_ns()
        buf = batches if owned else bytearray(batches)
        with self._lock:
            scan = scan_batches(buf, verify=True)
            if scan.legacy_at_end:
                raise InvalidConfigError(
                    f"only record batches of magic 2 can be appended (found magic "
                    f"{int(read_field(buf, [scan.end], BatchField.MAGIC)[0])} at position {scan.end})")
            if scan.end != len(buf):
                raise CorruptRecordError(f"append of {len(buf)} bytes ends with "
                                         f"{len(buf) - scan.end} bytes that are not a whole batch",
                                         position=scan.end)
            n = len(scan)
            if n == 0:
                return AppendInfo(-1, -1, -1, -1, 0, 0, 0)
            if len(buf) > self.config.segment_bytes:
                raise RecordTooLargeError(
                    f"Message batch size is {len(buf)} bytes in append to partition {self.dir.name} "
                    f"which exceeds the maximum configured segment size of {self.config.segment_bytes}.")
            sizes, positions = scan.size, scan.position
            too_big = np.flatnonzero(sizes > self.config.max_message_bytes)
            if too_big.size:
                i = int(too_big[0])
                raise RecordTooLargeError(
                    f"The batch at position {int(positions[i])} is {int(sizes[i])} bytes, larger "
                    f"than max.message.bytes {self.config.max_message_bytes}")
            validate_batches(buf, scan, name=self.dir.name, client=assign_offsets,
                             allow_control=origin is AppendOrigin.COORDINATOR,
                             require_keys=assign_offsets and self.config.compact,
                             max_decompressed=default_max_decompressed(self.config.max_message_bytes),
                             timestamp_window=self._timestamp_window() if assign_offsets else None)
            now = self.clock()
            lat = self.config.message_timestamp_type == "LogAppendTime"
            bases = assign_batch_offsets(buf, scan, log_end=self._log_end_offset, assign=assign_offsets,
                                         leader_epoch=leader_epoch, log_append_time=now if lat else None,
                                         name=str(self.dir))
            lasts = bases + scan.column("last_offset_delta")
            max_ts, shallow = _max_timestamp_and_offset(scan.max_timestamp, lasts)
            records = int(scan.records_count.sum())
            first, last = int(bases[0]), int(lasts[-1])
            seg = self._maybe_roll(len(buf), max_ts, last, first, now)
            psm = self.producer_state
            pending = None
            with_pid = np.flatnonzero(scan.column("producer_id") != -1)
            if with_pid.size:
                # UnifiedLog.analyzeAndValidateProducerState, on the batches as patched
                pending = psm.analyze_append(((buf, scan.info(int(i))) for i in with_pid), origin,
                                             segment_base_offset=seg.base_offset,
                                             start_position=seg.size)
                if pending.duplicate is not None:
                    dup = pending.duplicate
                    return AppendInfo(dup.first_offset, dup.last_offset, dup.timestamp,
                                      dup.last_offset, n, records, 0,
                                      dup.timestamp if lat else -1)
            seg.append(last, max_ts, shallow, buf, batches=scan)
            self._appended(seg, scan, pending, last, records, now)
            self._count_append(records, len(buf), started)
            return AppendInfo(first, last, max_ts, shallow, n, records, len(buf),
                              now if lat else -1)

    def _appended(self, seg: LogSegment, scan: BatchArrays, pending, last: int, records: int,
                  now: int) -> None:
        """What follows the write of batches ending at ``last`` into ``seg`` (UnifiedLog.append
        after the segment append): epochs, the log end offset, producer state, the flush policy."""
        self._note_epochs(scan)
        self._log_end_offset = last + 1
        psm = self.producer_state
        if pending is not None:
            psm.finish_append(pending, next_offset=last + 1, on_aborted_txn=seg.update_txn_index)
        else:
            psm.update_map_end_offset(last + 1)
        psm.on_high_watermark_updated(self.high_watermark)
        self._unflushed += records
        self._flush_per_policy(now)

    def _count_append(self, records: int, size: int, started_ns: int) -> None:
        m = self.metrics
        m.appends += 1
        m.appended_records += records
        m.appended_bytes += size
        m.append_time_ns += time.perf_counter_ns() - started_ns

    def _note_epochs(self, scan: BatchArrays) -> None:
        """Record in the leader-epoch cache every batch that starts a higher epoch."""
        epochs = scan.column("partition_leader_epoch")
        if not epochs.size or epochs.max() < 0:
            return
        latest = self.leader_epoch_cache.latest_epoch
        running = np.maximum.accumulate(np.concatenate(([-1 if latest is None else latest],
                                                        epochs)))[:-1]
        for i in np.flatnonzero(epochs > running).tolist():
            self.leader_epoch_cache.assign(int(epochs[i]), int(scan.base_offset[i]))

    def _timestamp_window(self) -> tuple[int, int] | None:
        """The CreateTime window a producer's records must fall in, or None when unbounded."""
        c = self.config
        if c.message_timestamp_type != "CreateTime" or (
                c.message_timestamp_before_max_ms == LONG_MAX
                and c.message_timestamp_after_max_ms == LONG_MAX):
            return None
        now = self.clock()
        return now - c.message_timestamp_before_max_ms, now + c.message_timestamp_after_max_ms

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, first_offset: int,
                    now: int) -> LogSegment:
        seg = self._local.active_segment
        if seg.should_roll(incoming_bytes=size, max_timestamp_in_messages=max_ts,
                           max_offset_in_messages=last_offset, now_ms=now):
            return self.roll(first_offset)
        return seg

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
        """``read`` plus the offset the next fetch starts from: past every batch this one read,
        also when all its records were left out (control batches, aborted transactions,
        compacted-away batches), capped at the isolation level's end and ``max_offset``.
        A consumer loop is ``while offset < end: r = log.fetch(offset, ...); offset = r.next_offset``.

        ``read_committed`` stops at the last stable offset and leaves out the records of aborted
        transactions: the aborted transactions overlapping the read come from the segments' txn
        indexes (``LocalLog.collectAbortedTransactions``) and a transactional record of producer
        P is dropped when it lies between the first offset and the ABORT marker of one of P's
        aborted transactions, which is what the consumer's ``CompletedFetch`` decides batch by
        batch, computed here over whole columns."""
        if isolation not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
        committed = isolation == "read_committed"
        with self._lock:
            upper = self.last_stable_offset if committed else self.high_watermark
            segments = self._segments.values()
            self._check_in_range(offset)
        if max_offset is not None:
            upper = min(upper, max_offset)
        if offset >= upper:
            return FetchResult(empty_table(), offset)
        parts = self._read_parts(offset, max_bytes)
        read = sum(len(data) for _, _, data in parts)
        if self.read_only and (LogView.out_of_date(segments, offset, read)
                               or not parts and offset < self._log_end_offset):
            # (nothing at an offset below the end: the files were rewritten under the view)
            self._relist_reader_view(offset)
            if offset >= self.log_start_offset:
                # what was read may predate a truncation: read again from the files as they are
                return self.fetch(offset, max_bytes=max_bytes, max_offset=max_offset, isolation=isolation)
            # retention moved the log start past it: the records read are still the ones
            # written at those offsets (a consumer would skip forward on its next fetch)
            if not parts:
                self._check_in_range(offset)        # OffsetOutOfRangeError
        decoded, run_next = self._decode_parts(parts, max_bytes)
        if run_next < 0:
            return FetchResult(empty_table(), offset)
        table = decoded
        next_offset = max(offset, min(upper, run_next))
        # offsets increase through a log: the wanted rows are one slice (zero copy)
        offsets = table.column("offset").to_numpy()
        lo, hi = np.searchsorted(offsets, [offset, upper], "left").tolist()
        table = table.slice(lo, max(0, hi - lo))
        keep = None
        control = table.column("isControl")
        if pc.any(control).as_py():
            keep = pc.invert(control)
        if committed and table.num_rows and self.read_only:
            # a reader cannot tell a segment without .txnindex (no abort in it) from one whose
            # index is missing (a copy of the .log files): it takes the aborts from the
            # markers themselves, as recovery rebuilds the index, never from the index
            aborted_rows = aborted_by_markers(decoded, segments, run_next)[lo:hi]
            if aborted_rows.any():
                mask = pa.array(~aborted_rows)
                keep = mask if keep is None else pc.and_(keep, mask)
        elif committed and table.num_rows:
            fetched_end = min(upper, int(offsets[lo:hi][-1]) + 1)
            holding = segments[floor_index([s.base_offset for s in segments], offset):]
            aborted = LocalLog.collect_aborted_txns(holding, offset, fetched_end)
            if aborted:
                mask = pa.array(~_aborted_mask(table, aborted))
                keep = mask if keep is None else pc.and_(keep, mask)
        return FetchResult(table if keep is None else table.filter(keep), next_offset)

    def _decode_parts(self, parts: list[tuple[LogSegment, int, bytes]], max_bytes: int
                      ) -> tuple[pa.Table, int]:
        """The records of ``_read_parts``' bytes and the offset after the last batch decoded
        (-1: none). Decoding stops after the batch whose records take the decoded size to
        ``max_bytes``: a fetch's bytes bound its table too, whatever the compression ratio (a
        few kilobytes of zstd can hold a gigabyte of records). Errors name the segment file and
        the byte position in it."""
        tables: list[pa.Table] = []
        next_offset = -1
        budget = max_bytes
        for seg, position, data in parts:
            try:
                run = decode_run(data, max_decoded=max(budget, 0), check_order=True,
                                 max_decompressed=default_max_decompressed(self.config.max_message_bytes))
            except CorruptRecordError as e:
                raise e.located(source=str(seg.log_path), base_position=position) from e.__cause__
            if run.batches:
                tables.append(run.table)
                next_offset = run.next_offset
            budget -= run.decoded_bytes
            if budget <= 0 or run.partial:
                break
        if not tables:
            return empty_table(), next_offset
        return (tables[0] if len(tables) == 1 else pa.concat_tables(tables)), next_offset

    def offsets_for_times(self, timestamp: int) -> int | None:
        """The first offset whose record timestamp is at or after ``timestamp``, as Kafka's
        ListOffsets answers it; None if every record is older."""
        found = self.fetch_offset_by_timestamp(timestamp)
        return None if found is None else found.offset

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """``UnifiedLog.fetchOffsetByTimestamp``, with ListOffsets' special timestamps:
        -1 latest (the log end offset), -2 / -4 earliest, -3 the record with the largest
        timestamp; otherwise the first record at or after ``timestamp`` with its leader epoch."""
        with self._lock:
            segments = self._segments.values()
            start, end = self.log_start_offset, self._log_end_offset
        cache = self.leader_epoch_cache
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return TimestampAndOffset(-1, start, cache.epoch_for_offset(start))
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, end, cache.latest_epoch)
        if timestamp == MAX_TIMESTAMP:
            best = max(segments, key=lambda s: s.max_timestamp_so_far.timestamp, default=None)
            if best is None or best.max_timestamp_so_far.timestamp < 0:
                return None
            # the index keeps the batch; Kafka answers with the record carrying the maximum
            return best.find_offset_by_timestamp(best.max_timestamp_so_far.timestamp, start)
        if timestamp < 0:
            raise InvalidConfigError(f"Invalid timestamp {timestamp} for a ListOffsets lookup")
        # the first segment whose largest timestamp reaches it
        target = next((s for s in segments if s.largest_timestamp >= timestamp), None)
        if target is None:
            return None
        return target.find_offset_by_timestamp(timestamp, max(start, target.base_offset))

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
        """``UnifiedLog.deleteOldSegments``: with ``cleanup.policy`` containing ``delete``, the
        segments below the log start offset, then those over ``retention.bytes``, then those
        older than ``retention.ms`` (each judged by its largest timestamp, else its file's
        mtime); otherwise (compact only) just those below the log start offset. Oldest first,
        stopping at the first segment that must stay. Returns how many segments went; their
        files are renamed ``.deleted`` now and removed after ``file.delete.delay.ms``."""
        self._check_writable()
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            self.metrics.retention_runs += 1
            deleted = self._delete_log_start_offset_breached()
            if self.config.delete:
                deleted += self._delete_retention_size_breached()
                deleted += self._delete_retention_ms_breached(now)
            self.delete_expired_files(now)
            return deleted

    def _delete_log_start_offset_breached(self) -> int:
        start = self.log_start_offset
        return self._delete_old_segments(lambda seg, nxt: nxt is not None and nxt.base_offset <= start,
                                         "log start offset breach")

    def _delete_retention_size_breached(self) -> int:
        retention = self.config.retention_bytes
        size = self.size
        if retention < 0 or size < retention:
            return 0
        diff = size - retention

        def over(seg: LogSegment, _nxt: LogSegment | None) -> bool:
            nonlocal diff
            if diff - seg.size >= 0:
                diff -= seg.size
                return True
            return False

        return self._delete_old_segments(over, f"retention size {retention} breach")

    def _delete_retention_ms_breached(self, now: int) -> int:
        retention = self.config.retention_ms
        if retention < 0:
            return 0
        return self._delete_old_segments(lambda seg, _nxt: now - seg.largest_timestamp > retention,
                                         f"retention time {retention}ms breach")

    def deletable_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]
                           ) -> list[LogSegment]:
        """``LocalLog.deletableSegments`` with ``UnifiedLog``'s guard: from the oldest segment,
        while ``predicate(segment, next segment)`` holds and the segment lies wholly below the
        high watermark; an empty last segment never qualifies."""
        out: list[LogSegment] = []
        segs = self._segments.values()
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._log_end_offset
            # the high watermark guard first: the log start offset never passes it
            if not (self.high_watermark >= upper and predicate(seg, nxt)) or \
                    (nxt is None and seg.size == 0):
                break
            out.append(seg)
        return out

    def _delete_old_segments(self, predicate, reason: str) -> int:
        """``UnifiedLog.deleteOldSegments(predicate, reason)`` and ``deleteSegments``."""
        deletable = self.deletable_segments(predicate)
        if not deletable:
            return 0
        doomed = deletable
        if len(self._segments) == len(deletable):
            # a log always has a segment: deleting them all rolls a new one first, at the LEO
            new = self.roll()
            if deletable[-1].base_offset == new.base_offset:
                logger.warning("Empty active segment at %d of %s was kept (%s)", new.base_offset,
                            self.dir.name, reason)
                doomed = deletable[:-1]
        logger.info("Deleting %d segment(s) of %s (%s): %s", len(doomed), self.dir.name, reason,
                 ", ".join(str(s.base_offset) for s in doomed))
        self._remove_and_delete_segments(doomed, reason)
        self._maybe_increment_log_start_offset(self._segments.first_segment.base_offset)
        return len(deletable)

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
                self._release()

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
            self._release()
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

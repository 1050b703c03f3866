"""Log: one ``topic-partition`` directory (Kafka's ``UnifiedLog`` and ``LocalLog``).

The public API the rest of kafkalog and its users call::

    with Log.open("/data/kafkalog/orders-0") as log:
        info = log.append(pa.table({"key": keys, "value": values}))
        table = log.read(log.offsets_for_times(t0), max_bytes=1 << 20)

One process at a time may write a partition (an advisory lock on the directory, a clear error
for a second writer); any number may read it, also while it is appended to, rolled or truncated.
"""

from __future__ import annotations

import bisect
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

from ..common import wall_ms
from ..checkpoint import (LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                          RECOVERY_POINT_CHECKPOINT, CorruptCheckpointError, LeaderEpochCache,
                          OffsetCheckpointFile, PartitionMetadataFile, parse_topic_partition_dir,
                          topic_id_to_str, validate_topic_name, without_invalid_topics)
from ..config import INT_MAX, LONG_MAX, LogConfig
from .files import check_partition_dir
from ..errors import (CorruptRecordError, InconsistentTopicIdError, InvalidConfigError,
                     InvalidOffsetError, KafkaLogError, LogLockedError, OffsetOutOfRangeError,
                     OffsetOverflowError, RecordTooLargeError)
from ..format import decode_run, empty_table, encode_batches
from ..format.control import ControlRecordType, EndTransactionMarker, end_transaction_marker_batch
from ..format.log_input_stream import (BatchArrays, default_max_decompressed,
                                      scan_batches)
from ..format.record_batch import LOG_APPEND_TIME, set_max_timestamp
from .validator import validate_batches
from .log_metrics import LogMetrics
from ..index import AbortedTxn, OffsetIndex, TimeIndex
from ..index.abstract_index import index_file_oversized
from .segment import (CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX,
                      TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LogSegment, TimestampAndOffset,
                      offset_from_filename)
from ..producer import read_snapshot
from ..producer import AppendOrigin, ProducerStateEntry, ProducerStateManager

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


def _patch(buf: bytearray, positions: np.ndarray, at: int, values: np.ndarray, dtype: str) -> None:
    """Write ``values`` big-endian at ``positions + at`` of ``buf``, all at once (a header
    field outside the CRC: baseOffset, partitionLeaderEpoch)."""
    raw = values.astype(dtype).view(np.uint8).reshape(len(values), -1)
    arr = np.frombuffer(buf, np.uint8)
    arr[(positions + at)[:, None] + np.arange(raw.shape[1])] = raw


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
    """One partition directory. Open with ``Log.open``; close (or use ``with``) when done."""

    def __init__(self, directory: Path, config: LogConfig, *, read_only: bool = False,
                 clock: Clock = wall_ms, had_clean_shutdown: bool = False) -> None:
        self.dir = Path(directory)
        self.topic, self.partition = parse_topic_partition_dir(self.dir.name)
        validate_topic_name(self.topic)
        self.config = config
        self.read_only = read_only
        self.clock = clock
        self._lock = threading.RLock()
        self._dir_fd = -1
        self._dir_dirty = True      # a file was created, renamed or removed since the last fsync
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        self._log_end_offset = 0
        self._unflushed = 0
        self._last_flush_ms = clock()
        self._closed = False
        self._force_full_recovery = False
        self._had_clean_shutdown = had_clean_shutdown
        # segments renamed .deleted, physically removed once file.delete.delay.ms has passed
        # (LocalLog.deleteSegmentFiles' scheduled "delete-file"): (due ms, segment or file)
        self._pending_deletes: list[tuple[int, LogSegment | Path]] = []
        self._retired: list[LogSegment] = []     # a reader's previous view (_relist_reader_view)
        self._relists = (-1, 0)                  # (offset, re-lists in a row for a fetch at it)
        self.metrics = LogMetrics()
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
        self._dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            fcntl.flock(self._dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._dir_fd)
            self._dir_fd = -1
            raise LogLockedError(f"{self.dir} is already open for writing by another process "
                                 f"(open it with read_only=True to read while it writes)") from None

    def _release(self) -> None:
        try:
            for seg in self._segments:
                try:
                    seg.close()
                except (OSError, KafkaLogError, ValueError) as e:
                    logger.warning("Closing %s: %s", seg.log_path, e)
        finally:
            if self._dir_fd >= 0:
                os.close(self._dir_fd)       # releases the writer lock whatever happened
                self._dir_fd = -1

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
        """``LogLoader.load``, for one partition."""
        if not self.read_only:
            self._remove_temp_files()
        key = (self.topic, self.partition)
        recovery_point = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT, key)
        start_checkpoint = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT, key)
        logs = sorted(p for p in self.dir.iterdir() if p.name.endswith(LOG_SUFFIX))
        live = {offset_from_filename(p.name) for p in logs}
        if not self.read_only:
            for p in self.dir.iterdir():
                if p.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)) and \
                        offset_from_filename(p.name) not in live:
                    logger.info("Deleting orphaned index file %s", p)
                    p.unlink()
        if self.read_only:
            logs = []
            self._segments = self._open_reader_view()
        for p in logs:
            base = offset_from_filename(p.name)
            if not p.with_suffix(INDEX_SUFFIX).exists() and not self.read_only:
                # Kafka's sanity check: a missing offset index means recovering the segment;
                # recovering it with the rest keeps the consequences of what it truncates
                logger.info("The index of %s is missing: recovering from it", p)
                recovery_point = min(recovery_point, base)
            if not self.read_only and any(
                    index_file_oversized(p.with_suffix(suffix), self.config.segment_index_bytes, kind.ENTRY_SIZE)
                    for suffix, kind in ((INDEX_SUFFIX, OffsetIndex), (TIME_INDEX_SUFFIX, TimeIndex))):
                # longer than segment.index.bytes allows: the open empties it (AbstractIndex), the
                # recovery from this segment rebuilds it
                logger.info("An index of %s is oversized: recovering from it", p)
                recovery_point = min(recovery_point, base)
            time_index_missing = not p.with_suffix(TIME_INDEX_SUFFIX).exists()
            seg = LogSegment.open(self.dir, base, self.config, writable=not self.read_only,
                                  preallocate=False)
            if time_index_missing and not self.read_only:
                # LogSegment.sanityCheck(timeIndexFileNewlyCreated): an empty index, not one of
                # preallocated zeros that would read as entries (a recovery rebuilds it)
                seg.time_index.resize(0)
            self._segments.append(seg)
        self._bases = [s.base_offset for s in self._segments]
        if self._had_clean_shutdown and self._segments:
            recovery_point = LONG_MAX
        if self._force_full_recovery:
            recovery_point = 0
        if not self.read_only:
            self._recover_from(recovery_point, start_checkpoint)
        if not self._segments:
            if self.read_only:
                self._log_end_offset = start_checkpoint
                self.log_start_offset = start_checkpoint
                self.recovery_point = start_checkpoint
                self.producer_state.update_map_end_offset(start_checkpoint)
                return
            self._add_segment(LogSegment.open(self.dir, start_checkpoint, self.config))
        self._log_end_offset = self._segments[-1].read_next_offset()
        if self._log_end_offset < start_checkpoint and self.read_only:
            # a writer's load deletes every segment here (below): a reader sees what it would,
            # an empty log at the checkpointed start
            logger.warning("The log start offset %d of %s is past its log end offset %d: reading "
                        "it as empty, as a writer's load leaves it", start_checkpoint, self.dir,
                        self._log_end_offset)
            for seg in self._segments:
                seg.close(final_entries=False)
            self._segments, self._bases = [], []
            self._log_end_offset = self.log_start_offset = self.recovery_point = start_checkpoint
            self.producer_state.update_map_end_offset(start_checkpoint)
            return
        if self._log_end_offset < start_checkpoint and not self.read_only:
            # everything below the log start offset was deleted: start afresh there (LogLoader:
            # "Deleting all segments because logEndOffset is smaller than logStartOffset")
            for seg in list(self._segments):
                seg.delete()
            self._segments, self._bases = [], []
            self._add_segment(LogSegment.open(self.dir, start_checkpoint, self.config))
            self._log_end_offset = start_checkpoint
            self.producer_state.truncate_fully_and_start_at(start_checkpoint)
        self.log_start_offset = max(start_checkpoint, self._segments[0].base_offset)
        self.recovery_point = min(max(recovery_point, self.log_start_offset), self._log_end_offset)
        if not self.read_only:
            active = self._segments[-1]
            active.offset_index.resize(self.config.segment_index_bytes)
            active.time_index.resize(self.config.segment_index_bytes)
            # LogLoader: stray snapshots removed (this also rescans the snapshots the segment
            # recoveries wrote), then the state rebuilt from the latest snapshot up to the LEO
            self.producer_state.remove_stray_snapshots(self._bases)
            self._rebuild_producer_state()
        else:
            # a reader needs producer state only for read_committed (the last stable offset):
            # replaying a log without snapshots can take long, so it waits until asked for
            self._producer_state_pending = True

    def _open_reader_view(self, attempts: int = 200) -> list[LogSegment]:
        """The segments a reader sees, consistent even while the writer (another process)
        swaps cleaned segments in: ``.swap`` files are the segments of a swap already decided,
        and the plain files they cover (``[min swap base, last swap's next offset)``) are the
        ones they replace, which is the rule LogLoader uses to complete a swap after a crash.
        Renames during the listing are caught by listing again until two agree."""
        names = sorted(os.listdir(self.dir))
        for _ in range(attempts):
            segs: list[LogSegment] = []
            try:
                swaps = [LogSegment.open(self.dir, offset_from_filename(n), self.config, writable=False,
                                         preallocate=False, file_suffix=SWAP_SUFFIX)
                         for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
                segs.extend(swaps)
                lo = min((s.base_offset for s in swaps), default=None)
                hi = swaps[-1].read_next_offset() if swaps else None
                for n in names:
                    if not n.endswith(LOG_SUFFIX) or not n[:20].isdigit():
                        continue
                    base = offset_from_filename(n)
                    if lo is not None and lo <= base < hi:
                        continue                 # replaced by a swap in progress
                    segs.append(LogSegment.open(self.dir, base, self.config, writable=False,
                                                preallocate=False))
            except FileNotFoundError:
                pass                             # renamed under us: list again
            else:
                again = sorted(os.listdir(self.dir))
                if again == names:
                    return sorted(segs, key=lambda s: s.base_offset)
                names = again
                for seg in segs:
                    seg.close(final_entries=False)
                continue
            for seg in segs:
                seg.close(final_entries=False)
            time.sleep(0.005)
            names = sorted(os.listdir(self.dir))
        raise KafkaLogError(f"{self.dir} kept changing while it was being opened for reading")

    @staticmethod
    def _reader_view_out_of_date(segments: list[LogSegment], bases: list[int], offset: int,
                                 read: int) -> bool:
        """Whether a file this read-only view read ``read`` bytes from (from ``offset`` on) was
        removed or shortened by the writer since the view opened: a truncation (which deletes the
        later segments and shortens the one it cuts), a swap or a retention delete. One fstat a
        segment read (the read may start anywhere in the first: the next ones are checked until
        their sizes cover what was read)."""
        i = max(0, bisect.bisect_right(bases, offset) - 1)
        for k, seg in enumerate(segments[i:]):
            st = os.fstat(seg.fileno())
            if st.st_nlink == 0 or st.st_size < seg.size:
                return True
            if k:
                read -= seg.size
            if read <= 0:
                return False
        return False

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
            self._retired, self._segments, self._bases = self._segments, [], []
            self._load()

    @property
    def producer_state(self) -> ProducerStateManager:
        if self._producer_state_pending:
            with self._lock:
                if self._producer_state_pending:
                    self._producer_state_pending = False
                    self._load_producer_state_read_only()
        return self._producer_state

    # ---------------------------------------------------------------------------- producer state

    def _read_segment_batches(self, base: int, start: int):
        """``(chunk, info)`` batches of the segment at ``base`` from (at least) the one holding
        ``start``, as ``ProducerStateManager.rebuild_producer_state`` reads them."""
        seg = self._segments[self._segment_for(base)]
        pos = seg.offset_index.lookup(start).position if start > seg.base_offset else 0
        return ((chunk, b) for b, chunk, _ in seg._walk(pos))

    def _read_log_batches(self, start: int):
        for base in self._bases[self._segment_for(start):]:
            yield from self._read_segment_batches(base, start)

    def _rebuild_producer_state(self) -> None:
        """``UnifiedLog.rebuildProducerState`` up to the log end offset. Never the "clean
        shutdown without snapshots" shortcut: kafkalog's clean close always writes a snapshot
        at the LEO, so a missing one means the state must come from the log."""
        self.producer_state.rebuild_producer_state(
            log_start_offset=self.log_start_offset, last_offset=self._log_end_offset,
            now_ms=self.clock(), segment_base_offsets=list(self._bases),
            read_segment=self._read_segment_batches)
        self.producer_state.on_high_watermark_updated(self._log_end_offset)

    def _load_producer_state_read_only(self) -> None:
        """A reader writes nothing: load the latest readable snapshot in range (no deletion of
        the others) and replay the log after it in memory."""
        psm = self.producer_state
        start, end = self.log_start_offset, self._log_end_offset
        from_offset = start
        for snap in reversed(psm.snapshot_offsets):
            if not start < snap <= end:
                continue
            try:
                entries = read_snapshot(psm.fetch_snapshot(snap))
            except (KafkaLogError, OSError) as e:
                logger.warning("Ignoring unreadable producer snapshot at %d in %s: %s", snap, self.dir, e)
                continue
            now = self.clock()
            for e in entries:
                entry = ProducerStateEntry.from_snapshot_entry(e)
                if entry.current_txn_first_offset is not None or \
                        now - entry.last_timestamp < psm.producer_id_expiration_ms:
                    psm.load_producer_entry(entry)
            from_offset = snap
            break
        psm.update_map_end_offset(from_offset)
        psm.rebuild(self._read_log_batches(from_offset), from_offset, end)
        psm.on_high_watermark_updated(end)      # no replicas: every marker is "replicated"

    def _read_checkpoint(self, name: str, key: tuple[str, int]) -> int:
        """One checkpoint, read on its own as LogManager.loadLogs does: an unreadable file means
        0 for it alone (recover everything / no moved log start), never for the other."""
        try:
            return self._checkpoint(name).read().get(key, 0)
        except (OSError, KafkaLogError) as e:
            logger.warning("Ignoring unreadable %s in %s: %s", name, self.dir.parent, e)
            return 0

    def _remove_temp_files(self) -> None:
        """``removeTempFilesAndCollectSwapFiles`` and the swap completion of ``LogLoader``."""
        cleaned, swaps = [], []
        for p in list(self.dir.iterdir()):
            if p.name.endswith(DELETED_SUFFIX):
                p.unlink()
            elif p.name.endswith(CLEANED_SUFFIX):
                cleaned.append(p)
            elif p.name.endswith(SWAP_SUFFIX):
                swaps.append(p)
        min_cleaned = min((offset_from_filename(p.name) for p in cleaned), default=None)
        for p in cleaned:
            p.unlink()
        kept = []
        for p in swaps:
            if min_cleaned is not None and offset_from_filename(p.name) >= min_cleaned:
                p.unlink()                 # an incomplete split (KAFKA-6264)
            else:
                kept.append(p)
        swap_logs = [p for p in kept if p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
        if swap_logs:
            bases = [offset_from_filename(p.name) for p in swap_logs]
            ends = []
            for p in swap_logs:
                seg = LogSegment.open(self.dir, offset_from_filename(p.name), self.config,
                                      file_suffix=SWAP_SUFFIX, preallocate=False)
                ends.append(seg.read_next_offset())
                seg.close()
            lo, hi = min(bases), max(ends)
            replaced: set[int] = set()
            below = [offset_from_filename(p.name) for p in self.dir.iterdir()
                     if p.name.endswith(LOG_SUFFIX) and offset_from_filename(p.name) < lo]
            if below:
                # a degenerate split's pieces start above the segment they replace
                seg = LogSegment.open(self.dir, max(below), self.config, preallocate=False)
                try:
                    if seg.read_next_offset() > lo:
                        replaced.add(seg.base_offset)
                finally:
                    seg.close(final_entries=False)
            for p in list(self.dir.iterdir()):
                if p.name.endswith(SWAP_SUFFIX) or not p.name[:20].isdigit():
                    continue
                off = offset_from_filename(p.name)
                if lo <= off < hi or (off in replaced and p.name.endswith(
                        (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))):
                    p.unlink()           # the segments the cleaner or a split replaced
        for p in self.dir.iterdir():     # kept, and the index files opening them created
            if p.name.endswith(SWAP_SUFFIX):
                p.rename(p.with_name(p.name[:-len(SWAP_SUFFIX)]))

    def _recover_from(self, recovery_point: int, log_start_offset: int = 0) -> None:
        """``LogLoader.recoverLog``: validate every segment from the one holding the recovery
        point; the first invalid batch truncates the log there and drops every later segment."""
        if not self._segments:
            return
        i = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        while i < len(self._segments):
            seg = self._segments[i]
            end = None if seg.indexes_preallocated() else seg.clean_end()
            if end is not None and end <= recovery_point:
                i += 1
                continue                    # closed cleanly and intact: nothing to recover
            nxt = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else None
            try:
                truncated = self._recover_segment(seg, log_start_offset, nxt)
            except OffsetOverflowError as e:
                logger.warning("%s; splitting the segment", e)
                self._segments[i:i + 1] = self._split_overflowed_segment(seg)
                self._bases = [s.base_offset for s in self._segments]
                continue                    # recover the pieces, starting with the first
            if truncated > 0:
                for later in self._segments[i + 1:]:
                    logger.warning("Deleting %s after the truncation of %s", later.log_path, seg.log_path)
                    later.delete()
                del self._segments[i + 1:]
                break
            i += 1
        self._bases = [s.base_offset for s in self._segments]

    def _split_overflowed_segment(self, seg: LogSegment) -> list[LogSegment]:
        """``UnifiedLog.splitOverflowedSegment``: copy the batches of ``seg`` into new segments,
        each starting a new one where the next batch's last offset would not fit 32-bit
        relative offsets, and swap them in as the cleaner does: ``.cleaned`` files written and
        fsynced, renamed to ``.swap`` from the highest base down (a crash in between leaves only
        pieces that the next load deletes, KAFKA-6264), the old segment deleted, the swaps
        renamed into place. Their indexes are rebuilt by the recovery that follows."""
        groups: list[list[int]] = []             # [base, start position, end position]
        try:
            for b in seg.batches():
                if not groups or b.last_offset - groups[-1][0] > INT_MAX:
                    # the first piece keeps the segment's base when its first batch fits it,
                    # else (Kafka's degenerate split) starts at that batch
                    fits = not groups and b.last_offset - seg.base_offset <= INT_MAX
                    base = seg.base_offset if fits else b.base_offset
                    if b.last_offset - base > INT_MAX:
                        raise OffsetOverflowError(
                            f"Batch at position {b.position} of {seg.log_path} spans offsets "
                            f"{b.base_offset}..{b.last_offset}, more than one segment can hold")
                    groups.append([base, b.position, b.position + b.size])
                else:
                    groups[-1][2] = b.position + b.size
        except CorruptRecordError:
            pass        # the tail goes with the last piece, whose recovery truncates it
        groups[-1][2] = seg.size
        paths = []
        for base, start, stop in groups:
            path = self.dir / f"{base:020d}{LOG_SUFFIX}{CLEANED_SUFFIX}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                seg.copy_bytes_to(fd, start, stop)
                os.fsync(fd)
            finally:
                os.close(fd)
            paths.append(path)
        os.fsync(self._dir_fd)
        swaps = []
        for path in reversed(paths):
            swap = path.with_name(path.name[:-len(CLEANED_SUFFIX)] + SWAP_SUFFIX)
            path.rename(swap)
            swaps.append(swap)
        os.fsync(self._dir_fd)
        seg.delete()
        for swap in reversed(swaps):
            swap.rename(swap.with_name(swap.name[:-len(SWAP_SUFFIX)]))
        os.fsync(self._dir_fd)
        self._dir_dirty = True
        logger.info("Split %s into %d segments at %s", seg.log_path, len(groups),
                 ", ".join(str(g[0]) for g in groups))
        return [LogSegment.open(self.dir, base, self.config, preallocate=False)
                for base, _, _ in groups]

    def split_overflowed_segment(self, seg: LogSegment) -> list[LogSegment]:
        """``UnifiedLog.splitOverflowedSegment`` on a live log (the cleaner found ``seg``'s
        offsets overflowing 32-bit relative offsets): the segment is split as recovery splits
        it (crash-safe through ``.cleaned``/``.swap``), each piece indexed from its batches."""
        self._check_writable()
        with self._lock:
            i = next((i for i, s in enumerate(self._segments) if s is seg), None)
            if i is None:
                raise ValueError(f"{seg.log_path} is not a segment of {self.dir.name}")
            pieces = self._split_overflowed_segment(seg)
            for piece in pieces:
                piece.recover()
                if i < len(self._segments) - 1:
                    piece.on_become_inactive_segment()
                piece.flush()
            self._segments[i:i + 1] = pieces
            self._bases = [s.base_offset for s in self._segments]
            return pieces

    def _recover_segment(self, seg: LogSegment, log_start_offset: int,
                         next_base_offset: int | None = None) -> int:
        """``LogLoader.recoverSegment``: a fresh producer-state manager rebuilt up to the
        segment's base, fed every valid batch (which rebuilds the segment's txn index), then
        snapshotted at the segment's end."""
        tmp = ProducerStateManager(self.dir,
                                   producer_id_expiration_ms=self.config.producer_id_expiration_ms)
        tmp.rebuild_producer_state(log_start_offset=log_start_offset, last_offset=seg.base_offset,
                                   now_ms=self.clock(), segment_base_offsets=list(self._bases),
                                   read_segment=self._read_segment_batches)

        def on_batch(buf, b) -> None:
            self._note_epoch(buf, b)
            tmp.load_batch(buf, b, on_aborted_txn=seg.update_txn_index)

        truncated = seg.recover(on_batch=on_batch, next_base_offset=next_base_offset)
        tmp.take_snapshot()
        return truncated

    def _note_epoch(self, _buf, batch) -> None:
        h = batch.header
        if h is not None and h.partition_leader_epoch >= 0:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or h.partition_leader_epoch > latest:
                self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)

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
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def segments_in_range(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """``LogSegments.values(from, to)``: the segments holding offsets in ``[from, to)``, from
        the one whose base is the floor of ``from`` (or the first) up to, excluding, the first
        whose base is ``>= to``."""
        if from_offset == to_offset:
            return []
        if to_offset < from_offset:
            raise ValueError(f"Invalid log segment range: requested segments in {self.dir.name} "
                             f"from offset {from_offset} which is greater than limit offset {to_offset}")
        with self._lock:
            lo = max(0, bisect.bisect_right(self._bases, from_offset) - 1)
            hi = bisect.bisect_left(self._bases, to_offset)
            return self._segments[lo:max(lo, hi)]

    def higher_segments(self, offset: int) -> list[LogSegment]:
        """``LogSegments.higherSegments``: the segments whose base offset is strictly greater
        than ``offset``, in offset order."""
        with self._lock:
            return self._segments[bisect.bisect_right(self._bases, offset):]

    def non_active_segments_from(self, from_offset: int) -> list[LogSegment]:
        """``LocalLog.nonActiveLogSegmentsFrom``: the segments before the active one, from the
        one holding ``from_offset`` (or the first); none when ``from_offset`` is at or past the
        active segment's base."""
        with self._lock:
            active_base = self._bases[-1]
            return [] if from_offset >= active_base else self.segments_in_range(from_offset, active_base)

    @property
    def size(self) -> int:
        """Bytes of every segment's ``.log`` (``UnifiedLog.size``)."""
        return sum(s.size for s in self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    def _add_segment(self, seg: LogSegment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    def _segment_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

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
            self._dir_dirty = True
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
        group.fields[:, 0] -= start
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
                    f"{buf[scan.end + 16]} at position {scan.end})")
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
            deltas = scan.column("last_offset_delta")
            log_end = self._log_end_offset
            if assign_offsets:
                bases = log_end + np.cumsum(deltas + 1) - (deltas + 1)
                _patch(buf, positions, 0, bases, ">i8")
                scan.fields[:, 2] = bases
            else:
                bases = scan.base_offset
                prev_next = np.concatenate(([log_end], bases[:-1] + deltas[:-1] + 1))
                bad = np.flatnonzero(bases < prev_next)
                if bad.size:
                    i = int(bad[0])
                    raise InvalidOffsetError(
                        f"Out of order offsets: batch {i} at position {int(positions[i])} starts "
                        f"at {int(bases[i])}, below the expected offset {int(prev_next[i])} of "
                        f"{self.dir}")
            if leader_epoch is not None:
                _patch(buf, positions, 12, np.full(n, leader_epoch, np.int64), ">i4")
                scan.fields[:, 3] = leader_epoch
            now = self.clock()
            lat = self.config.message_timestamp_type == "LogAppendTime"
            if lat:
                for p in positions.tolist():
                    set_max_timestamp(buf, p, LOG_APPEND_TIME, now)
                scan.fields[:, 9] = now
            lasts = bases + deltas
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
        seg = self._segments[-1]
        if seg.should_roll(incoming_bytes=size, max_timestamp_in_messages=max_ts,
                           max_offset_in_messages=last_offset, now_ms=now):
            return self.roll(first_offset)
        return seg

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log end offset)``
        (``LocalLog.roll``); an empty active segment at that offset is kept as it is."""
        self._check_writable()
        with self._lock:
            self._dir_dirty = True
            new_base = max(expected_next_offset or 0, self._log_end_offset)
            active = self._segments[-1]
            if active.base_offset == new_base and active.size == 0:
                return active
            for p in (self.dir / f"{new_base:020d}{s}" for s in
                      (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                if p.exists():
                    logger.warning("Deleting %s before rolling to it", p)
                    p.unlink()
            active.on_become_inactive_segment()
            seg = LogSegment.open(self.dir, new_base, self.config)
            self._add_segment(seg)
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
            segments = [s for s in self._segments[self._segment_for(self.recovery_point):]
                        if s.base_offset < end or s is self._segments[-1]]
            for seg in segments:
                seg.flush(data_only=data_only and seg is self._segments[-1])
            for path in self._unsynced_snapshots:
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue                # deleted since (truncation, retention)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            if self._dir_dirty or not data_only:
                os.fsync(self._dir_fd)
                self._dir_dirty = False
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
            segments = self._segments[self._segment_for(offset):]
        parts: list[tuple[LogSegment, int, bytes]] = []
        budget = max_bytes
        for seg in segments:
            got = seg.read(offset, budget, min_one_message=min_one_message and not parts)
            if got is None:
                continue
            position, data = got
            parts.append((seg, position, data))
            budget -= len(data)
            if budget <= 0 or position + len(data) < seg.size:
                break                       # out of budget inside this segment: no skipping
        return parts

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
        batch (kafka_format.md §10), computed here over whole columns."""
        if isolation not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
        committed = isolation == "read_committed"
        with self._lock:
            upper = self.last_stable_offset if committed else self.high_watermark
            segments = list(self._segments)
            bases = list(self._bases)
            self._check_in_range(offset)
        if max_offset is not None:
            upper = min(upper, max_offset)
        if offset >= upper:
            return FetchResult(empty_table(), offset)
        parts = self._read_parts(offset, max_bytes)
        read = sum(len(data) for _, _, data in parts)
        if self.read_only and (self._reader_view_out_of_date(segments, bases, offset, read)
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
            aborted_rows = self._aborted_by_markers(decoded, segments, run_next)[lo:hi]
            if aborted_rows.any():
                mask = pa.array(~aborted_rows)
                keep = mask if keep is None else pc.and_(keep, mask)
        elif committed and table.num_rows:
            fetched_end = min(upper, int(offsets[lo:hi][-1]) + 1)
            aborted = self._collect_aborted_txns(segments, bases, offset, fetched_end)
            if aborted:
                mask = pa.array(~_aborted_mask(table, aborted))
                keep = mask if keep is None else pc.and_(keep, mask)
        return FetchResult(table if keep is None else table.filter(keep), next_offset)

    def _aborted_by_markers(self, table: pa.Table, segments: list[LogSegment],
                            next_offset: int) -> np.ndarray:
        """True for the rows of ``table`` (a decoded run of this log ending before
        ``next_offset``) that belong to aborted transactions, found from the transaction
        markers as ``ProducerStateManager`` does when recovery rebuilds a ``.txnindex``: a
        transactional record of producer P is aborted when P's next COMMIT/ABORT marker after
        it is an ABORT (the index entry's ``[first offset, marker]``). Markers in the run are
        read from its control rows; for producers whose transaction runs past the run, the
        batches after it are walked (headers, and the one record of a control batch) until
        each one's marker is found. Writes nothing."""
        from ..format.log_input_stream import batch_records

        pids = table.column("producerId").to_numpy()
        txnal = table.column("isTransactional").to_numpy(zero_copy_only=False)
        control = table.column("isControl").to_numpy(zero_copy_only=False)
        offsets = table.column("offset").to_numpy()
        aborted = np.zeros(len(offsets), dtype=bool)
        data = txnal & ~control
        if not data.any():
            return aborted
        markers: dict[int, list[tuple[int, bool]]] = {}
        keys = table.column("key")
        for i in np.flatnonzero(txnal & control).tolist():
            kind = ControlRecordType.parse(keys[i].as_py())
            if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                markers.setdefault(int(pids[i]), []).append(
                    (int(offsets[i]), kind is ControlRecordType.ABORT))
        last_data = {int(p): int(offsets[data & (pids == p)].max()) for p in np.unique(pids[data])}
        pending = {p for p, last in last_data.items()
                   if not markers.get(p) or markers[p][-1][0] < last}
        if pending:
            bases = [s.base_offset for s in segments]
            for seg in segments[max(0, bisect.bisect_right(bases, next_offset) - 1):]:
                start = seg.translate_offset(next_offset) if seg.base_offset <= next_offset else None
                position = start.position if start is not None else 0
                if seg.base_offset <= next_offset and start is None:
                    continue
                for b, chunk, _ in seg._walk(position):
                    h = b.header
                    if h is None or not h.is_control or h.producer_id not in pending or \
                            b.base_offset < next_offset:
                        continue
                    kind = ControlRecordType.parse(batch_records(chunk, b)[0].key)
                    if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                        markers.setdefault(h.producer_id, []).append(
                            (b.base_offset, kind is ControlRecordType.ABORT))
                        pending.discard(h.producer_id)
                        if not pending:
                            break
                if not pending:
                    break
        for pid in last_data:
            found = markers.get(pid)
            if not found:
                continue        # no decided transaction: above the last stable offset
            at = np.fromiter((o for o, _ in found), np.int64, len(found))
            is_abort = np.fromiter((a for _, a in found), bool, len(found))
            rows = np.flatnonzero(data & (pids == pid))
            nxt = np.searchsorted(at, offsets[rows], side="right")
            hit = nxt < len(at)
            aborted[rows[hit]] = is_abort[nxt[hit]]
        return aborted

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

    def _collect_aborted_txns(self, segments: list[LogSegment], bases: list[int],
                              fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """``LocalLog.collectAbortedTransactions``: from the segment holding ``fetch_offset``
        on, until an index says the search is complete."""
        if upper_bound <= fetch_offset:
            return []
        found: list[AbortedTxn] = []
        start = max(0, bisect.bisect_right(bases, fetch_offset) - 1)
        for seg in segments[start:]:          # an ABORT marker may lie in any later segment
            txns, complete = seg.txn_index.collect_aborted_txns(fetch_offset, upper_bound)
            found.extend(txns)
            if complete:
                break
        return found

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
            segments = list(self._segments)
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
            self._dir_dirty = True
            if offset < 0:
                raise OffsetOutOfRangeError(f"Cannot truncate {self.dir.name} to negative offset {offset}")
            if offset >= self._log_end_offset:
                # UnifiedLog.truncateTo: an epoch begun at the LEO with nothing appended goes
                self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
                return
            head = b""                  # the first bytes of the batch the truncation removes
            if offset < self._segments[0].base_offset:
                for seg in self._segments:
                    seg.delete()
                self._segments, self._bases = [], []
                self._add_segment(LogSegment.open(self.dir, offset, self.config))
                self.log_start_offset = offset
            else:
                keep = self._segment_for(offset)
                for seg in self._segments[keep + 1:]:
                    seg.delete()
                del self._segments[keep + 1:]
                self._bases = self._bases[:keep + 1]
                seg = self._segments[-1]
                found = seg.translate_offset(offset)
                head = seg.read_bytes(found.position, 17) if found is not None else b""
                seg.truncate_to(offset)
            if len(head) < 17 or head[16] < 2:
                self._log_end_offset = self._segments[-1].read_next_offset()
            else:
                # LocalLog.truncateTo: updateLogEndOffset(targetOffset), where the batch holding
                # the target went whole (the log ends at that batch's base), so on a compacted
                # log whose offsets below the target were cleaned away the end is the target,
                # not the emptied segment's base
                self._log_end_offset = min(offset, int.from_bytes(head[:8], "big", signed=True))
            self.recovery_point = min(self.recovery_point, self._log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
            if self._log_end_offset == self.log_start_offset and len(self._segments) == 1 and \
                    self._segments[0].size == 0:
                self.producer_state.truncate_fully_and_start_at(self._log_end_offset)
            # UnifiedLog.truncateTo: snapshots above the new end dropped, state reloaded
            self._rebuild_producer_state()

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to ``offset`` (``deleteRecords``) and delete every
        segment wholly below it. Returns the new log start offset."""
        self._check_writable()
        with self._lock:
            self._dir_dirty = True
            if offset > self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"Cannot advance the log start offset of {self.dir.name} to {offset}: "
                    f"the log end offset is {self._log_end_offset}")
            if offset <= self.log_start_offset:
                return self.log_start_offset
            self._maybe_increment_log_start_offset(offset)
            # UnifiedLog.deleteRecords: the segments wholly below the new start go at once
            # (deleteLogStartOffsetBreachedSegments), through the same asynchronous delete
            doomed = []
            for i, seg in enumerate(self._segments[:-1]):
                if self._segments[i + 1].base_offset > offset:
                    break
                doomed.append(seg)
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
            self.config = config
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
        segs = self._segments
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
        self._maybe_increment_log_start_offset(self._segments[0].base_offset)
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
        gone = {id(s) for s in segments}
        self._segments = [s for s in self._segments if id(s) not in gone]
        self._bases = [s.base_offset for s in self._segments]
        self._delete_segment_files(segments)
        for seg in segments:
            self.metrics.segments_deleted += 1
            self.metrics.bytes_deleted += seg.size
            snap = self.producer_state.remove_and_mark_snapshot_for_deletion(seg.base_offset)
            if snap is not None:
                self._schedule_delete(snap)

    def _delete_segment_files(self, segments: list[LogSegment]) -> None:
        """``LocalLog.deleteSegmentFiles(asyncDelete = true)``: every file renamed ``.deleted``
        at once (a restart removes such files), removed for good after
        ``file.delete.delay.ms``. The segment stays open until then, so a read that already
        holds it (this process) or its files (any process) finishes undisturbed."""
        self._dir_dirty = True
        for seg in segments:
            if not seg.log_path.name.endswith(DELETED_SUFFIX):
                seg.change_file_suffixes("", DELETED_SUFFIX)
            self._schedule_delete(seg)

    def _schedule_delete(self, what: "LogSegment | Path") -> None:
        self._pending_deletes.append((self.clock() + self.config.file_delete_delay_ms, what))
        if self.config.file_delete_delay_ms == 0:
            self.delete_expired_files()

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Remove the ``.deleted`` files whose ``file.delete.delay.ms`` has passed (the
        scheduled "delete-file" task of Kafka's LocalLog). Returns how many segments and
        snapshots were removed."""
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            due = [w for t, w in self._pending_deletes if t <= now]
            self._pending_deletes = [(t, w) for t, w in self._pending_deletes if t > now]
        for what in due:
            if isinstance(what, LogSegment):
                logger.info("Deleting segment files of %s", what.log_path)
                what.delete()
            else:
                what.unlink(missing_ok=True)
        return len(due)

    @property
    def pending_deletes(self) -> int:
        """Segments and snapshots renamed ``.deleted`` and not yet removed."""
        return len(self._pending_deletes)

    # ---------------------------------------------------------------------------- compaction

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """``LocalLog.replaceSegments`` (and ``UnifiedLog.replaceSegments``): swap the cleaner's
        output in for the segments it was made from, crash-safe in two phases.

        ``new_segments`` are complete, flushed segments whose files carry the ``.cleaned``
        suffix. They are renamed ``.swap`` (from then on a restart completes the swap, see
        ``_remove_temp_files``), the old segments leave the segment list and are renamed
        ``.deleted`` (removed after ``file.delete.delay.ms``; readers holding them are not
        disturbed), then the ``.swap`` suffix is dropped. Old segments already deleted by
        retention in the meantime are not deleted twice."""
        self._check_writable()
        if not new_segments:
            raise ValueError("replace_segments needs at least one new segment")
        with self._lock:
            self._dir_dirty = True
            new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
            live = {id(s) for s in self._segments}
            old_sorted = sorted((s for s in old_segments if id(s) in live), key=lambda s: s.base_offset)
            if self._segments and any(s is self._segments[-1] for s in old_sorted):
                raise ValueError(f"The active segment of {self.dir.name} cannot be replaced")
            for seg in reversed(new_sorted):
                seg.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            os.fsync(self._dir_fd)         # the swaps are durable before any old file goes
            gone = {id(s) for s in old_sorted}
            self._segments = sorted([s for s in self._segments if id(s) not in gone] + new_sorted,
                                    key=lambda s: s.base_offset)
            self._bases = [s.base_offset for s in self._segments]
            self._delete_segment_files(old_sorted)
            self.metrics.segments_replaced += len(old_sorted)
            for seg in new_sorted:
                seg.change_file_suffixes(SWAP_SUFFIX, "")
            os.fsync(self._dir_fd)
            self._dir_dirty = False
            replaced = {s.base_offset for s in new_sorted}
            for seg in old_sorted:
                if seg.base_offset not in replaced:
                    snap = self.producer_state.remove_and_mark_snapshot_for_deletion(seg.base_offset)
                    if snap is not None:
                        self._schedule_delete(snap)

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
                if name == LOG_START_OFFSET_CHECKPOINT and value <= self._segments[0].base_offset:
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
            i = bisect.bisect_left(self._bases, offset) - 1
            return self._bases[i] if i >= 0 else None

        below_rp = lower_base(self.recovery_point)
        active = self._segments[-1].base_offset
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
                for _, what in self._pending_deletes:
                    if isinstance(what, LogSegment):
                        what.close(final_entries=False)
                self._pending_deletes.clear()
                for seg in self._retired:
                    seg.close(final_entries=False)
                self._release()

    def delete(self) -> None:
        """``UnifiedLog.delete``: remove every segment, snapshot and checkpoint entry of this
        partition, then its directory, and close the log. The caller (the LogManager) has taken
        it out of use."""
        self._check_writable()
        with self._lock:
            for seg in self._segments:
                seg.delete()
            for _, what in self._pending_deletes:
                if isinstance(what, LogSegment):
                    what.delete()
            self._segments, self._bases, self._pending_deletes = [], [], []
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

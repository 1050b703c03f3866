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
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .checkpoints import (LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                          RECOVERY_POINT_CHECKPOINT, CorruptCheckpointError, LeaderEpochCache,
                          OffsetCheckpointFile, parse_topic_partition_dir, validate_topic_name)
from .config import LogConfig
from .errors import (CorruptRecordError, InvalidConfigError, InvalidOffsetError, KafkaLogError,
                     LogLockedError, OffsetOutOfRangeError, RecordTooLargeError)
from .format import decode_run, empty_table, encode_batches
from .format.control import ControlRecordType, EndTransactionMarker, end_transaction_marker_batch
from .format.log_input_stream import LogInputStream
from .format.record_batch import (LOG_APPEND_TIME, set_last_offset, set_max_timestamp,
                                  set_partition_leader_epoch)
from .index import AbortedTxn
from .segment import (CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX,
                      TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LogSegment, TimestampAndOffset,
                      offset_from_filename)
from .producer_snapshot import read_snapshot
from .producer_state import AppendOrigin, ProducerStateEntry, ProducerStateManager

log = logging.getLogger(__name__)

Clock = Callable[[], int]

# ListOffsets' special timestamps (``ListOffsetsRequest``)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


def _wall_ms() -> int:
    return int(time.time() * 1000)


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


class Log:
    """One partition directory. Open with ``Log.open``; close (or use ``with``) when done."""

    def __init__(self, directory: Path, config: LogConfig, *, read_only: bool = False,
                 clock: Clock = _wall_ms) -> None:
        self.dir = Path(directory)
        self.topic, self.partition = parse_topic_partition_dir(self.dir.name)
        validate_topic_name(self.topic)
        self.config = config
        self.read_only = read_only
        self.clock = clock
        self._lock = threading.RLock()
        self._dir_fd = -1
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        self._log_end_offset = 0
        self._unflushed = 0
        self._last_flush_ms = clock()
        self._closed = False
        self._force_full_recovery = False
        self._unsynced_snapshots: list[Path] = []
        self.producer_state = ProducerStateManager(
            self.dir, producer_id_expiration_ms=config.producer_id_expiration_ms)
        try:
            self.leader_epoch_cache = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT)
        except CorruptCheckpointError as e:
            # rebuilt from the batches' leader epochs by a full recovery
            log.warning("Ignoring corrupt %s: %s; recovering the whole log", LEADER_EPOCH_CHECKPOINT, e)
            if not read_only:
                (self.dir / LEADER_EPOCH_CHECKPOINT).unlink(missing_ok=True)
            self.leader_epoch_cache = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT)
            self._force_full_recovery = True

    # ---------------------------------------------------------------------------- opening

    @classmethod
    def open(cls, path: str | os.PathLike[str], config: LogConfig | None = None, *,
             read_only: bool = False, create: bool = True, clock: Clock = _wall_ms) -> "Log":
        """Open (creating it if needed) the partition directory ``path`` and load it: temporary
        files of an interrupted clean or delete are resolved, missing indexes rebuilt, and
        everything after the recovery point is validated; an invalid tail is truncated."""
        path = Path(path)
        parse_topic_partition_dir(path.name)           # refuse a bad name before making anything
        validate_topic_name(parse_topic_partition_dir(path.name)[0])
        if not path.exists():
            if read_only or not create:
                raise FileNotFoundError(f"No partition directory at {path}")
            path.mkdir(parents=True)
        elif not path.is_dir():
            raise KafkaLogError(f"{path} is not a directory")
        log_ = cls(path, config or LogConfig(), read_only=read_only, clock=clock)
        try:
            if not read_only:
                log_._acquire_writer_lock()
            log_._load()
        except BaseException:
            log_._release()
            raise
        return log_

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
                    log.warning("Closing %s: %s", seg.log_path, e)
        finally:
            if self._dir_fd >= 0:
                os.close(self._dir_fd)       # releases the writer lock whatever happened
                self._dir_fd = -1

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
                    log.info("Deleting orphaned index file %s", p)
                    p.unlink()
        for p in logs:
            base = offset_from_filename(p.name)
            if not p.with_suffix(INDEX_SUFFIX).exists() and not self.read_only:
                # Kafka's sanity check: a missing offset index means recovering the segment;
                # recovering it with the rest keeps the consequences of what it truncates
                log.info("The index of %s is missing: recovering from it", p)
                recovery_point = min(recovery_point, base)
            self._segments.append(LogSegment.open(self.dir, base, self.config,
                                                  writable=not self.read_only, preallocate=False))
        self._bases = [s.base_offset for s in self._segments]
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
        if self._log_end_offset < start_checkpoint and not self.read_only:
            # everything below the log start offset was deleted: start afresh there
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
            self._load_producer_state_read_only()

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
                log.warning("Ignoring unreadable producer snapshot at %d in %s: %s", snap, self.dir, e)
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

    def _read_checkpoint(self, name: str, key: tuple[str, int]) -> int:
        """One checkpoint, read on its own as LogManager.loadLogs does: an unreadable file means
        0 for it alone (recover everything / no moved log start), never for the other."""
        try:
            return self._checkpoint(name).read().get(key, 0)
        except (OSError, KafkaLogError) as e:
            log.warning("Ignoring unreadable %s in %s: %s", name, self.dir.parent, e)
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
            for p in list(self.dir.iterdir()):
                if not p.name.endswith(SWAP_SUFFIX) and p.name[:20].isdigit() and \
                        lo <= offset_from_filename(p.name) < hi:
                    p.unlink()           # the segments the cleaner replaced
        for p in kept:
            p.rename(p.with_name(p.name[:-len(SWAP_SUFFIX)]))

    def _recover_from(self, recovery_point: int, log_start_offset: int = 0) -> None:
        """``LogLoader.recoverLog``: validate every segment from the one holding the recovery
        point; the first invalid batch truncates the log there and drops every later segment."""
        if not self._segments:
            return
        start = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        for i in range(start, len(self._segments)):
            seg = self._segments[i]
            end = None if seg.indexes_preallocated() else seg.clean_end()
            if end is not None and end <= recovery_point:
                continue                    # closed cleanly and intact: nothing to recover
            nxt = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else None
            truncated = self._recover_segment(seg, log_start_offset, nxt)
            if truncated > 0:
                for later in self._segments[i + 1:]:
                    log.warning("Deleting %s after the truncation of %s", later.log_path, seg.log_path)
                    later.delete()
                del self._segments[i + 1:]
                break
        self._bases = [s.base_offset for s in self._segments]

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
        return self.append_raw(raw, assign_offsets=True)

    def _default_compression(self) -> str:
        t = self.config.compression_type
        return "none" if t in ("producer", "uncompressed") else t

    def append_raw(self, batches, *, assign_offsets: bool = True,
                   leader_epoch: int | None = None) -> AppendInfo:
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
        batches writes nothing and returns the original batch's offsets."""
        origin = AppendOrigin.CLIENT if assign_offsets else AppendOrigin.REPLICATION
        return self._append(batches, assign_offsets=assign_offsets, leader_epoch=leader_epoch,
                            origin=origin)

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
                origin: AppendOrigin) -> AppendInfo:
        self._check_writable()
        buf = bytearray(batches)
        with self._lock:
            infos = list(LogInputStream(buf, verify=True))
            consumed = infos[-1].position + infos[-1].size if infos else 0
            if consumed != len(buf):
                raise CorruptRecordError(f"append of {len(buf)} bytes ends with "
                                         f"{len(buf) - consumed} bytes that are not a whole batch",
                                         position=consumed)
            if not infos:
                return AppendInfo(-1, -1, -1, -1, 0, 0, 0)
            if len(buf) > self.config.segment_bytes:
                raise RecordTooLargeError(
                    f"Message batch size is {len(buf)} bytes in append to partition {self.dir.name} "
                    f"which exceeds the maximum configured segment size of {self.config.segment_bytes}.")
            # every record must decode (the broker's LogValidator reads them all too)
            records_table = decode_run(buf, verify_crc=False).table
            now = self.clock()
            next_offset = self._log_end_offset
            lat = self.config.message_timestamp_type == "LogAppendTime"
            max_ts, shallow, records = -1, -1, 0
            row = 0
            for i, b in enumerate(infos):
                if b.magic != 2:
                    raise InvalidConfigError(
                        f"only record batches of magic 2 can be appended (found magic {b.magic} at "
                        f"position {b.position})")
                if b.size > self.config.max_message_bytes:
                    raise RecordTooLargeError(
                        f"The batch at position {b.position} is {b.size} bytes, larger than "
                        f"max.message.bytes {self.config.max_message_bytes}")
                h = b.header
                if assign_offsets:
                    self._validate_client_batch(b, records_table, row,
                                                allow_control=origin is AppendOrigin.COORDINATOR)
                    set_last_offset(buf, b.position, next_offset + h.last_offset_delta)
                elif h.base_offset < next_offset:
                    raise InvalidOffsetError(
                        f"Out of order offsets: batch {i} at position {b.position} starts at "
                        f"{h.base_offset}, below the expected offset {next_offset} of {self.dir}")
                if leader_epoch is not None:
                    set_partition_leader_epoch(buf, b.position, leader_epoch)
                if lat:
                    set_max_timestamp(buf, b.position, LOG_APPEND_TIME, now)
                base = next_offset if assign_offsets else h.base_offset
                next_offset = base + h.last_offset_delta + 1
                ts = now if lat else h.max_timestamp
                if ts > max_ts:
                    max_ts, shallow = ts, base + h.last_offset_delta
                records += h.records_count
                row += h.records_count
            first = self._log_end_offset if assign_offsets else infos[0].header.base_offset
            last = next_offset - 1
            seg = self._maybe_roll(len(buf), max_ts, last, first, now)
            psm = self.producer_state
            # UnifiedLog.analyzeAndValidateProducerState, on the batches as patched
            pending = psm.analyze_append(((buf, b) for b in LogInputStream(buf)), origin,
                                         segment_base_offset=seg.base_offset,
                                         start_position=seg.size)
            if pending.duplicate is not None:
                dup = pending.duplicate
                return AppendInfo(dup.first_offset, dup.last_offset, dup.timestamp,
                                  dup.last_offset, len(infos), records, 0,
                                  dup.timestamp if lat else -1)
            seg.append(last, max_ts, shallow, buf)
            for b in LogInputStream(buf):
                self._note_epoch(buf, b)
            self._log_end_offset = last + 1
            psm.finish_append(pending, next_offset=last + 1, on_aborted_txn=seg.update_txn_index)
            psm.on_high_watermark_updated(self.high_watermark)
            self._unflushed += records
            self._flush_per_policy(now)
            return AppendInfo(first, last, max_ts, shallow, len(infos), records, len(buf),
                              now if lat else -1)

    def _validate_client_batch(self, b, records: pa.Table, row: int, *,
                               allow_control: bool = False) -> None:
        """``LogValidator`` for a producer's batch: no control batches, at least one record,
        records numbered 0..n-1, keys on compacted topics."""
        h = b.header
        where = f"batch at position {b.position} of the append to {self.dir.name}"
        if h.is_control and not allow_control:
            raise CorruptRecordError(f"Control records are not allowed from clients ({where})",
                                     position=b.position)
        if h.records_count == 0:
            raise CorruptRecordError(f"Batch without records is not allowed ({where})",
                                     position=b.position)
        offsets = records.column("offset").slice(row, h.records_count).to_numpy()
        if not np.array_equal(offsets - h.base_offset, np.arange(h.records_count)) or \
                h.last_offset_delta != h.records_count - 1:
            raise CorruptRecordError(
                f"Inner record offsets of the {where} are not sequential 0..{h.records_count - 1}",
                position=b.position)
        if self.config.compact:
            keys = records.column("key").slice(row, h.records_count)
            if keys.null_count:
                index = int(np.flatnonzero(keys.is_null().to_numpy(zero_copy_only=False))[0])
                raise CorruptRecordError(
                    f"Compacted topic cannot accept message without key in topic partition "
                    f"{self.dir.name} (record {index} of the {where})", position=b.position)

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
            new_base = max(expected_next_offset or 0, self._log_end_offset)
            active = self._segments[-1]
            if active.base_offset == new_base and active.size == 0:
                return active
            for p in (self.dir / f"{new_base:020d}{s}" for s in
                      (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                if p.exists():
                    log.warning("Deleting %s before rolling to it", p)
                    p.unlink()
            active.on_become_inactive_segment()
            if self.config.fsync == "always":
                active.flush()
            seg = LogSegment.open(self.dir, new_base, self.config)
            self._add_segment(seg)
            # the snapshot at the new base is fsynced with the next flush (before the recovery
            # point can pass it)
            self.producer_state.update_map_end_offset(new_base)
            path = self.producer_state.take_snapshot(sync=self.config.fsync == "always")
            if path is not None and self.config.fsync != "always":
                self._unsynced_snapshots.append(path)
            return seg

    # ---------------------------------------------------------------------------- flush

    def _flush_per_policy(self, now: int) -> None:
        c = self.config
        if (c.fsync == "always" or self._unflushed >= c.flush_messages
                or now - self._last_flush_ms >= c.flush_ms):
            self.flush()

    def flush(self) -> None:
        """fsync every segment above the recovery point and the directory, then advance the
        recovery point to the log end offset (only a real fsync moves it)."""
        self._check_writable()
        with self._lock:
            for seg in self._segments[self._segment_for(self.recovery_point):]:
                seg.flush()
            for path in self._unsynced_snapshots:
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue                # deleted since (truncation, retention)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            os.fsync(self._dir_fd)
            self._unsynced_snapshots.clear()
            self.recovery_point = self._log_end_offset
            self._unflushed = 0
            self._last_flush_ms = self.clock()

    # ---------------------------------------------------------------------------- read

    def read_raw(self, offset: int, *, max_bytes: int = 1 << 20,
                 min_one_message: bool = True) -> bytes:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` of them (one
        larger first batch is let through with ``min_one_message``), continuing into the next
        segments until the budget is spent; a broker's fetch stops at a segment's end, a reader
        here does not need to."""
        with self._lock:
            if not self.log_start_offset <= offset <= self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"Offset {offset} is out of range for {self.dir.name}: the log holds "
                    f"[{self.log_start_offset}, {self._log_end_offset})")
            segments = self._segments[self._segment_for(offset):]
        parts: list[bytes] = []
        budget = max_bytes
        for seg in segments:
            got = seg.read(offset, budget, min_one_message=min_one_message and not parts)
            if got is None:
                continue
            position, data = got
            parts.append(data)
            budget -= len(data)
            if budget <= 0 or position + len(data) < seg.size:
                break                       # out of budget inside this segment: no skipping
        return b"".join(parts) if len(parts) != 1 else parts[0]

    def read(self, offset: int, *, max_bytes: int = 1 << 20, max_offset: int | None = None,
             isolation: str = "read_uncommitted") -> pa.Table:
        """Records from ``offset`` (up to about ``max_bytes`` of batches, at least one batch),
        as an Arrow table in ``storage_core.format.SCHEMA``, control records left out.

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
        raw = self.read_raw(offset, max_bytes=max_bytes)
        if not raw:
            return empty_table()
        table = decode_run(raw, source=str(self.dir)).table
        if max_offset is not None:
            upper = min(upper, max_offset)
        offsets = table.column("offset")
        keep = pc.and_(pc.and_(pc.greater_equal(offsets, offset), pc.less(offsets, upper)),
                       pc.invert(table.column("isControl")))
        if committed and table.num_rows:
            fetched_end = min(upper, int(pc.max(offsets).as_py()) + 1)
            aborted = self._collect_aborted_txns(segments, bases, offset, fetched_end)
            if aborted:
                keep = pc.and_(keep, pa.array(~_aborted_mask(table, aborted)))
        return table.filter(keep)

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
            if offset < 0:
                raise OffsetOutOfRangeError(f"Cannot truncate {self.dir.name} to negative offset {offset}")
            if offset >= self._log_end_offset:
                return
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
                self._segments[-1].truncate_to(offset)
            self._log_end_offset = self._segments[-1].read_next_offset()
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
            if offset > self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"Cannot advance the log start offset of {self.dir.name} to {offset}: "
                    f"the log end offset is {self._log_end_offset}")
            if offset <= self.log_start_offset:
                return self.log_start_offset
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
                seg = self._segments.pop(0)
                self._bases.pop(0)
                seg.change_file_suffixes("", DELETED_SUFFIX)
                seg.delete()
                snap = self.producer_state.remove_and_mark_snapshot_for_deletion(seg.base_offset)
                if snap is not None:
                    snap.unlink(missing_ok=True)
            self.producer_state.on_log_start_offset_incremented(offset)
            self._write_checkpoints()
            return offset

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
                    entries = cp.read()
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
            finally:
                self._closed = True
                self._release()

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

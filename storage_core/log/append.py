"""LogAppender: the append paths of a ``Log`` (Kafka's ``UnifiedLog.append``): a producer's, a
replica's or a coordinator's batches validated and numbered (``LogValidator``), the producer
state checked (``analyzeAndValidateProducerState``), the segment rolled when due
(``UnifiedLog.roll``), the batches written, then the leader epochs, the log end offset, the
producer state and the flush policy. Also the two appends kafkalog adds for a trusted writer
(the Spark sink's staged files): kernel-side copies from a file, and a whole file renamed into
a new segment. ``Log`` composes one and calls it from its public methods; it is given the
parts it changes and does not know ``Log``.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..checkpoint import LeaderEpochCache
from ..common import INT_MAX, LONG_MAX
from ..errors import CorruptRecordError, InvalidConfigError, InvalidOffsetError, RecordTooLargeError
from ..format.batch_header import BatchField, HeaderColumn, read_field
from ..format.control import ControlRecordType, EndTransactionMarker, end_transaction_marker_batch
from ..format.log_input_stream import BatchArrays, default_max_decompressed, scan_batches
from ..producer import AppendOrigin, PendingAppend, ProducerStateManager
from .local_log import LocalLog
from .segment import LogSegment
from .validator import assign_batch_offsets, validate_batches


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


# the bytes of a batch appended from a file are not in memory: the producer state reads a batch's
# bytes only for a transaction marker, and a trusted writer's file holds none (the coordinator's
# markers go through append_batches)
_IN_FILE = b""


def _max_timestamp_and_offset(max_timestamps: np.ndarray, last_offsets: np.ndarray) -> tuple[int, int]:
    """The largest batch max timestamp and the last offset of the first batch holding it
    (``shallowOffsetOfMaxTimestamp``); (-1, -1) when no batch has a timestamp."""
    top = int(np.argmax(max_timestamps))
    max_ts = int(max_timestamps[top])
    return (max_ts, int(last_offsets[top])) if max_ts >= 0 else (-1, -1)


class LogAppender:
    """The append paths of one log, composed by ``Log`` (Kafka's ``UnifiedLog.append`` and
    ``appendAsLeader``/``appendAsFollower``). Given the parts an append changes: the
    ``LocalLog`` (its segments, log end offset, config, clock and metrics), the producer state,
    the leader-epoch cache and the lock guarding them, plus two steps of the log's own:
    ``roll(expected_next_offset)`` (``UnifiedLog.roll``: a new segment, a producer snapshot,
    a flush up to it) and ``flush_per_policy(records, now)`` (the records appended counted
    toward ``flush.messages``/``flush.ms``, the log flushed when due). The caller has checked
    that the log is open for writing."""

    def __init__(self, local: LocalLog, producer_state: ProducerStateManager,
                 leader_epoch_cache: LeaderEpochCache, *, lock: threading.RLock,
                 flush_upto: Callable[[int], None], flush_per_policy: Callable[[int, int], None]) -> None:
        self._local = local
        self._producer_state = producer_state
        self._leader_epoch_cache = leader_epoch_cache
        self._lock = lock
        self._flush_upto = flush_upto
        self._flush_per_policy = flush_per_policy

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """``UnifiedLog.roll``: a new active segment at ``max(expected_next_offset, log end
        offset)`` (``LocalLog.roll``), a producer snapshot at its base, and a flush up to it; an
        empty active segment at that offset is kept as it is."""
        with self._lock:
            new_base = max(expected_next_offset or 0, self._local.log_end_offset)
            seg = self._local.roll(new_base)
            if seg is None:
                return self._local.active_segment
            self._producer_state.update_map_end_offset(new_base)
            path = self._producer_state.take_snapshot(sync=False)
            if path is not None:
                self._local.unflushed_files.append(path)
            # UnifiedLog.roll: flushUptoOffsetExclusive(newSegment.baseOffset), whatever the
            # flush policy: the rolled segment, its snapshot and the new files are made durable
            # and the recovery point moves to the new segment, so a crash never re-validates a
            # segment that was complete before it
            self._flush_upto(new_base)
            return seg

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int,
                              control_type: ControlRecordType | str | int, coordinator_epoch: int,
                              timestamp: int | None = None, *, leader_epoch: int | None = None) -> AppendInfo:
        """A transaction's COMMIT or ABORT marker appended as the coordinator does
        (``UnifiedLog.appendAsLeader`` with origin coordinator), see ``Log.append_end_txn_marker``."""
        if isinstance(control_type, str):
            control_type = ControlRecordType[control_type.upper()]
        marker = EndTransactionMarker(ControlRecordType(control_type), coordinator_epoch)
        ts = self._local.clock() if timestamp is None else timestamp
        raw = end_transaction_marker_batch(marker, offset=self._local.log_end_offset, timestamp=ts,
                                           producer_id=producer_id, producer_epoch=producer_epoch)
        return self.append_batches(raw, assign_offsets=True, leader_epoch=leader_epoch,
                                   origin=AppendOrigin.COORDINATOR)

    def append_from_file(self, fd: int, batches: BatchArrays, *, max_append_bytes: int = 8 << 20) -> AppendInfo:
        """Append whole v2 batches straight from the file ``fd`` with kernel-side copies
        (``LogSegment.append_from_file``), for a trusted writer that already checked their
        CRCs and numbered them from the log end offset (the Spark sink's staged files:
        ``batches`` is their header walk, positions in the file). What ``append_raw`` does
        after validating a producer's request is done here too, in pieces of at most
        ``max_append_bytes`` (or ``segment.bytes``): the roll rule, the producer-state checks
        of epochs, sequences and transactions (a duplicate is refused: a trusted writer never
        repeats a batch), the indexes, the log end offset and the flush policy."""
        started = time.perf_counter_ns()
        n = len(batches)
        if n == 0:
            return AppendInfo(-1, -1, -1, -1, 0, 0, 0)
        limit = min(max_append_bytes, self._local.config.segment_bytes)
        ends = batches.position + batches.size
        with self._lock:
            first = self._local.log_end_offset
            lo = 0
            while lo < n:
                hi = max(int(np.searchsorted(ends, batches.position[lo] + limit, side="right")), lo + 1)
                self._append_group_from_file(fd, batches, lo, hi)
                lo = hi
            records = int(batches.records_count.sum())
            size = int(batches.size.sum())
            self._count_append(records, size, started)
            max_ts, shallow = _max_timestamp_and_offset(batches.max_timestamp, batches.last_offset)
            return AppendInfo(first, self._local.log_end_offset - 1, max_ts, shallow, n, records, size)

    def can_take_segment_file(self, path: Path, batches: BatchArrays) -> bool:
        """Whether ``append_segment_file`` can take the file at ``path``: its batches fit one
        segment (``segment.bytes``, relative offsets, index entries) and it is on this log's
        file system, so a rename moves it in."""
        n = len(batches)
        if n == 0 or batches.end > self._local.config.segment_bytes:
            return False
        if int(batches.last_offset[-1]) - int(batches.base_offset[0]) > INT_MAX:
            return False
        # at most one entry per batch in each index; the time index keeps one slot for the
        # entry of the roll (TimeIndex.isFull)
        if n >= self._local.config.segment_index_bytes // 12:
            return False
        try:
            return os.stat(path).st_dev == os.stat(self._local.dir).st_dev
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
        started = time.perf_counter_ns()
        if not self.can_take_segment_file(path, batches):
            raise InvalidConfigError(f"{path} cannot become a segment of {self._local.dir.name}: empty, "
                                     f"larger than segment.bytes, too many batches to index, "
                                     f"or on another file system")
        lasts = batches.last_offset
        max_ts, shallow = _max_timestamp_and_offset(batches.max_timestamp, lasts)
        first, last = int(batches.base_offset[0]), int(lasts[-1])
        records = int(batches.records_count.sum())
        with self._lock:
            if first != self._local.log_end_offset:
                raise InvalidOffsetError(f"Batches numbered from {first} cannot be appended to "
                                         f"{self._local.dir.name}, which ends at {self._local.log_end_offset}")
            now = self._local.clock()
            pending = self._producer_state.analyze_append(
                ((_IN_FILE, batches.info(i)) for i in range(len(batches))), AppendOrigin.CLIENT,
                segment_base_offset=first, start_position=0)
            if pending.duplicate is not None:
                raise InvalidOffsetError(f"Batches appended to {self._local.dir.name} repeat the "
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
        if size > self._local.config.segment_bytes:
            raise RecordTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self._local.dir.name} which "
                f"exceeds the maximum configured segment size of {self._local.config.segment_bytes}.")
        group = BatchArrays(scan.fields[lo:hi].copy(), size)
        group.fields[:, HeaderColumn.POSITION] -= start
        lasts = group.last_offset
        max_ts, shallow = _max_timestamp_and_offset(group.max_timestamp, lasts)
        first, last = int(group.base_offset[0]), int(lasts[-1])
        if first != self._local.log_end_offset:
            raise InvalidOffsetError(f"Batches numbered from {first} cannot be appended to "
                                     f"{self._local.dir.name}, which ends at {self._local.log_end_offset}")
        now = self._local.clock()
        seg = self._maybe_roll(size, max_ts, last, first, now)
        psm = self._producer_state
        # UnifiedLog.analyzeAndValidateProducerState: epochs, sequences, the open transaction
        pending = psm.analyze_append(((_IN_FILE, group.info(i)) for i in range(hi - lo)),
                                     AppendOrigin.CLIENT, segment_base_offset=seg.base_offset,
                                     start_position=seg.size)
        if pending.duplicate is not None:
            raise InvalidOffsetError(f"Batches appended to {self._local.dir.name} repeat the producer's "
                                     f"batch {pending.duplicate}: not appended")
        seg.append_from_file(fd, start, size, last, max_ts, shallow, group)
        self._appended(seg, group, pending, last, int(group.records_count.sum()), now)

    def append_batches(self, batches: bytes | bytearray | memoryview, *, assign_offsets: bool,
                       leader_epoch: int | None, origin: AppendOrigin, owned: bool = False) -> AppendInfo:
        """The append path, over whole appends at once: one compiled walk of the batch headers
        (CRCs checked), one of the records (``LogValidator``), offsets and epochs patched into
        the headers with numpy, one write. ``owned``: ``batches`` is a writable buffer of ours
        (just encoded, or a ``bytearray`` handed over), patched in place instead of copied."""
        started = time.perf_counter_ns()
        # bytes cannot be patched in place: copied as any buffer not handed over
        buf = batches if owned and not isinstance(batches, bytes) else bytearray(batches)
        with self._lock:
            scan = scan_batches(buf, verify=True)
            if scan.legacy_at_end:
                raise InvalidConfigError(
                    f"only record batches of magic 2 can be appended (found magic "
                    f"{int(read_field(buf, np.array([scan.end]), BatchField.MAGIC)[0])} at position {scan.end})")
            if scan.end != len(buf):
                raise CorruptRecordError(f"append of {len(buf)} bytes ends with "
                                         f"{len(buf) - scan.end} bytes that are not a whole batch",
                                         position=scan.end)
            n = len(scan)
            if n == 0:
                return AppendInfo(-1, -1, -1, -1, 0, 0, 0)
            if len(buf) > self._local.config.segment_bytes:
                raise RecordTooLargeError(
                    f"Message batch size is {len(buf)} bytes in append to partition {self._local.dir.name} "
                    f"which exceeds the maximum configured segment size of {self._local.config.segment_bytes}.")
            sizes, positions = scan.size, scan.position
            too_big = np.flatnonzero(sizes > self._local.config.max_message_bytes)
            if too_big.size:
                i = int(too_big[0])
                raise RecordTooLargeError(
                    f"The batch at position {int(positions[i])} is {int(sizes[i])} bytes, larger "
                    f"than max.message.bytes {self._local.config.max_message_bytes}")
            validate_batches(buf, scan, name=self._local.dir.name, client=assign_offsets,
                             allow_control=origin is AppendOrigin.COORDINATOR,
                             require_keys=assign_offsets and self._local.config.compact,
                             max_decompressed=default_max_decompressed(self._local.config.max_message_bytes),
                             timestamp_window=self._timestamp_window() if assign_offsets else None)
            now = self._local.clock()
            lat = self._local.config.message_timestamp_type == "LogAppendTime"
            bases = assign_batch_offsets(buf, scan, log_end=self._local.log_end_offset, assign=assign_offsets,
                                         leader_epoch=leader_epoch, log_append_time=now if lat else None,
                                         name=str(self._local.dir))
            lasts = bases + scan.column("last_offset_delta")
            max_ts, shallow = _max_timestamp_and_offset(scan.max_timestamp, lasts)
            records = int(scan.records_count.sum())
            first, last = int(bases[0]), int(lasts[-1])
            seg = self._maybe_roll(len(buf), max_ts, last, first, now)
            psm = self._producer_state
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

    def _appended(self, seg: LogSegment, scan: BatchArrays, pending: PendingAppend | None, last: int,
                  records: int, now: int) -> None:
        """What follows the write of batches ending at ``last`` into ``seg`` (UnifiedLog.append
        after the segment append): epochs, the log end offset, producer state, the flush policy."""
        self._note_epochs(scan)
        self._local.log_end_offset = last + 1
        psm = self._producer_state
        if pending is not None:
            psm.finish_append(pending, next_offset=last + 1, on_aborted_txn=seg.update_txn_index)
        else:
            psm.update_map_end_offset(last + 1)
        psm.on_high_watermark_updated(self._local.log_end_offset)
        self._flush_per_policy(records, now)

    def _count_append(self, records: int, size: int, started_ns: int) -> None:
        m = self._local.metrics
        m.appends += 1
        m.appended_records += records
        m.appended_bytes += size
        m.append_time_ns += time.perf_counter_ns() - started_ns

    def _note_epochs(self, scan: BatchArrays) -> None:
        """Record in the leader-epoch cache every batch that starts a higher epoch."""
        epochs = scan.column("partition_leader_epoch")
        if not epochs.size or epochs.max() < 0:
            return
        latest = self._leader_epoch_cache.latest_epoch
        running = np.maximum.accumulate(np.concatenate(([-1 if latest is None else latest],
                                                        epochs)))[:-1]
        for i in np.flatnonzero(epochs > running).tolist():
            self._leader_epoch_cache.assign(int(epochs[i]), int(scan.base_offset[i]))

    def _timestamp_window(self) -> tuple[int, int] | None:
        """The CreateTime window a producer's records must fall in, or None when unbounded."""
        c = self._local.config
        if c.message_timestamp_type != "CreateTime" or (
                c.message_timestamp_before_max_ms == LONG_MAX
                and c.message_timestamp_after_max_ms == LONG_MAX):
            return None
        now = self._local.clock()
        return now - c.message_timestamp_before_max_ms, now + c.message_timestamp_after_max_ms

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, first_offset: int,
                    now: int) -> LogSegment:
        seg = self._local.active_segment
        if seg.should_roll(incoming_bytes=size, max_timestamp_in_messages=max_ts,
                           max_offset_in_messages=last_offset, now_ms=now):
            return self.roll(first_offset)
        return seg

"""Kafka's ``Cleaner`` (the compaction of one log) and ``LogToClean`` (a log and its cleanable
range).

One clean (``Cleaner.clean``, Kafka's ``doClean``):

1. ``build_offset_map`` walks the dirty segments ``[first dirty, first uncleanable)`` and
   remembers each key's latest offset (MD5 of the key, ``SkimpyOffsetMap``), skipping control
   batches, aborted transactions and records without a key, until the map is as full as the
   load factor allows. ``latest_offset + 1`` is where the next clean starts.
2. ``group_segments_by_size`` groups every segment below that offset (the clean part is
   re-copied too) so that each group fits one segment.
3. ``clean_segments`` copies each group into one new ``.cleaned`` segment, batch by batch
   (``cleanInto``, and ``record_filter.filter_to`` for Kafka's ``MemoryRecords.filterTo``): a
   batch whose records all stay is copied byte for byte, one that loses records is rebuilt with
   its original header fields, base offset and last offset; transaction markers and tombstones
   stay until their delete horizon has passed; a producer's last batch stays (maybe empty) so
   that duplicate detection survives. The new segment is swapped in by ``Log.replace_segments``.

The offset map is built columnar, as the filter is (see ``record_filter``): keys are hashed a
run of batches at a time, and only the map's fill level is checked per record.
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..common import INT_MAX, wall_ms
from ..errors import CorruptRecordError, LogCleaningAbortedError, LogCleaningError, OffsetOverflowError
from ..format import legacy
from ..format.batch_header import BatchField, read_field
from ..format.log_input_stream import BatchArrays, BatchInfo, default_max_decompressed
from ..format.record_batch import CONTROL_FLAG_MASK, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, TRANSACTIONAL_FLAG_MASK
from ..index import AbortedTxn
from ..log import CLEANED_SUFFIX, Log, LogSegment, segment_paths
from .cleaned_transaction_metadata import CleanedTransactionMetadata
from .cleaner_stats import CleanerStats
from .offset_map import SkimpyOffsetMap, span_hashes
from .record_filter import (Chunk, LastRecord, LogCleanerFilter, control_type, decode_records, filter_to,
                            legacy_records, output_stats, walk_chunk)
from .throttler import Throttler

logger = logging.getLogger(__name__)


DEFAULT_IO_BUFFER_SIZE = 524288
DEFAULT_MAX_IO_BUFFER_SIZE = 1048588

def log_segments(log: Log, from_offset: int, to_offset: int) -> list[LogSegment]:
    """``LogSegments.values(from, to)`` (``Log.segments_in_range``)."""
    return log.segments_in_range(from_offset, to_offset)


def collect_aborted_transactions(log: Log, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
    """``UnifiedLog.collectAbortedTransactions(startOffset, upperBound)``: from the segment
    holding ``start_offset`` on, each txn index's entries with ``last_offset >= log start
    offset and first_offset < upper_bound``, until an index says the search is complete."""
    segs = log.segments
    bases = [s.base_offset for s in segs]
    i = bisect.bisect_right(bases, start_offset) - 1
    if i < 0:
        return []
    found: list[AbortedTxn] = []
    for seg in segs[i:]:
        txns, complete = seg.txn_index.collect_aborted_txns(log.log_start_offset, upper_bound_offset)
        found.extend(txns)
        if complete:
            break
    return found


def last_records_of_active_producers(log: Log) -> dict[int, LastRecord]:
    """``UnifiedLog.lastRecordsOfActiveProducers``."""
    return {pid: LastRecord(last_data_offset, epoch)
            for pid, (last_data_offset, epoch) in log.last_records_of_active_producers().items()}


def last_modified_ms(seg: LogSegment) -> int:
    """``LogSegment.lastModified``: the ``.log`` file's mtime in ms."""
    return os.stat(seg.log_path).st_mtime_ns // 1_000_000


def set_last_modified(seg: LogSegment, ms: int) -> None:
    """``LogSegment.setLastModified``: the mtime of the ``.log``, ``.index`` and ``.timeindex``."""
    ns = ms * 1_000_000
    for p in (seg.log_path, seg.offset_index.path, seg.time_index.path):
        if p.exists():
            os.utime(p, ns=(ns, ns))


def calculate_cleanable_bytes(log: Log, first_dirty_offset: int,
                              uncleanable_offset: int) -> tuple[int, int]:
    """``LogCleanerManager.calculateCleanableBytes``: ``(first uncleanable segment's base,
    bytes of the whole segments from the one holding the first dirty offset up to it)``."""
    rest = log.non_active_segments_from(uncleanable_offset)
    first_uncleanable = (rest[0] if rest else log.active_segment).base_offset
    cleanable = sum(s.size for s in log.segments_in_range(min(first_dirty_offset, first_uncleanable),
                                                          first_uncleanable))
    return first_uncleanable, cleanable


@dataclass
class LogToClean:
    """``LogToClean``: a log and its cleanable range, with Kafka's size arithmetic (whole
    segments, the active segment never cleanable)."""

    log: Log
    first_dirty_offset: int
    uncleanable_offset: int
    needs_compaction_now: bool = False

    def __post_init__(self) -> None:
        self.clean_bytes = sum(s.size for s in log_segments(self.log, -1, self.first_dirty_offset))
        self.first_uncleanable_offset, self.cleanable_bytes = calculate_cleanable_bytes(
            self.log, self.first_dirty_offset, self.uncleanable_offset)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else float("nan")


# ------------------------------------------------------------------- transaction tracking

# ---------------------------------------------------------------------------------- Cleaner

class Cleaner:
    """Kafka's ``Cleaner``: cleans one log at a time with its offset map and I/O buffers."""

    def __init__(self, offset_map_memory: int, *, io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
                 max_io_buffer_size: int = DEFAULT_MAX_IO_BUFFER_SIZE,
                 dedupe_buffer_load_factor: float = 0.9, clock: Callable[[], int] = wall_ms,
                 check_done: Callable[[Log], None] | None = None, throttler: Throttler | None = None) -> None:
        self.offset_map = SkimpyOffsetMap(offset_map_memory)
        # log.cleaner.io.max.bytes.per.second: Kafka's Cleaner reports every read and write
        self.throttler = throttler
        self.io_buffer_size = io_buffer_size
        self.max_io_buffer_size = max_io_buffer_size
        self.dup_buffer_load_factor = dedupe_buffer_load_factor
        self.clock = clock
        self.check_done = check_done or (lambda _log: None)
        self._read_buffer_size = io_buffer_size
        if not self.offset_map.slots * dedupe_buffer_load_factor > 1:
            raise LogCleaningError(
                "offset map is too small to fit in even a single message, so log cleaning will never make "
                "progress. You can increase log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads")

    def _throttle(self, nbytes: int) -> None:
        if self.throttler is not None and nbytes:
            self.throttler.maybe_throttle(nbytes)

    # ---------------------------------------------------------------------------- doClean

    def clean(self, to_clean: LogToClean, now_ms: int | None = None) -> tuple[int, CleanerStats]:
        """``Cleaner.doClean``: returns the first offset not cleaned (the next dirty offset)
        and the statistics of this clean."""
        log = to_clean.log
        now = self.clock() if now_ms is None else now_ms
        logger.info("Beginning cleaning of log %s", log.dir.name)
        # tombstones of legacy (v0/v1) records go by segment mtimes (KIP-534 only for v2)
        clean_part = log_segments(log, 0, to_clean.first_dirty_offset)
        legacy_delete_horizon_ms = (last_modified_ms(clean_part[-1]) - log.config.delete_retention_ms
                                    if clean_part else 0)
        stats = CleanerStats(clock=self.clock)
        upper_bound = to_clean.first_uncleanable_offset
        self.build_offset_map(log, to_clean.first_dirty_offset, upper_bound, self.offset_map, stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.index_done()
        transaction_metadata = CleanedTransactionMetadata()
        groups = self.group_segments_by_size(log_segments(log, 0, end_offset), log.config.segment_bytes,
                                             log.config.max_index_size, upper_bound)
        for group in groups:
            self.clean_segments(log, group, self.offset_map, now, stats, transaction_metadata, None,
                                upper_bound, legacy_delete_horizon_ms=legacy_delete_horizon_ms)
        stats.buffer_utilization = self.offset_map.utilization
        stats.all_done()
        logger.info("Cleaned %s up to offset %d: read %d messages (%d bytes), wrote %d (%d bytes)",
                 log.dir.name, end_offset, stats.messages_read, stats.bytes_read, stats.messages_written,
                 stats.bytes_written)
        return end_offset, stats

    # ---------------------------------------------------------------------------- grouping

    def group_segments_by_size(self, segments: Sequence[LogSegment], max_size: int, max_index_size: int,
                               first_uncleanable_offset: int) -> list[list[LogSegment]]:
        """``groupSegmentsBySize``: consecutive segments whose ``.log`` sizes add up to at most
        ``max_size``, offset and time index sizes each to at most ``max_index_size``, and whose
        offsets stay within an int of the group's base (checked on an upper bound of the next
        segment's last offset; an empty segment always joins)."""
        segs = list(segments)
        grouped: list[list[LogSegment]] = []
        i = 0
        while i < len(segs):
            group = [segs[i]]
            log_size = segs[i].size
            index_size = segs[i].offset_index.size_in_bytes
            time_index_size = segs[i].time_index.size_in_bytes
            i += 1
            while i < len(segs):
                nxt = segs[i]
                last_offset = segs[i + 1].base_offset - 1 if i + 1 < len(segs) else first_uncleanable_offset - 1
                if not (log_size + nxt.size <= max_size
                        and index_size + nxt.offset_index.size_in_bytes <= max_index_size
                        and time_index_size + nxt.time_index.size_in_bytes <= max_index_size
                        and (nxt.size == 0 or last_offset - group[0].base_offset <= INT_MAX)):
                    break
                group.append(nxt)
                log_size += nxt.size
                index_size += nxt.offset_index.size_in_bytes
                time_index_size += nxt.time_index.size_in_bytes
                i += 1
            grouped.append(group)
        return grouped

    # ---------------------------------------------------------------------------- offset map

    def build_offset_map(self, log: Log, start: int, end: int, offset_map: SkimpyOffsetMap,
                         stats: CleanerStats) -> None:
        """``buildOffsetMap``: key -> latest offset over the dirty segments ``[start, end)``,
        stopping when the map is as full as the load factor allows."""
        offset_map.clear()
        dirty = log_segments(log, start, end)
        logger.info("Building offset map for log %s for %d segments in offset range [%d, %d).",
                 log.dir.name, len(dirty), start, end)
        transaction_metadata = CleanedTransactionMetadata()
        transaction_metadata.add_aborted_transactions(collect_aborted_transactions(log, start, end))
        for i, seg in enumerate(dirty):
            nxt = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            self.check_done(log)
            if self._build_offset_map_for_segment(log, seg, offset_map, start, nxt, transaction_metadata, stats):
                logger.debug("Offset map is full, %d segments fully mapped, segment with base offset %d is "
                          "partially mapped", i, seg.base_offset)
                break
        logger.info("Offset map for log %s complete.", log.dir.name)

    def _build_offset_map_for_segment(self, log: Log, seg: LogSegment, offset_map: SkimpyOffsetMap,
                                      start: int, next_segment_start: int,
                                      txn: CleanedTransactionMetadata, stats: CleanerStats) -> bool:
        """``buildOffsetMapForSegment``: True if the map filled up in this segment."""
        position = seg.offset_index.lookup(start).position
        max_desired = int(offset_map.slots * self.dup_buffer_load_factor)
        source = str(seg.log_path)
        max_decompressed = default_max_decompressed(log.config.max_message_bytes)
        try:
            while position < seg.size:
                self.check_done(log)
                chunk = seg.read_bytes(position, self._read_buffer_size)
                self._throttle(len(chunk))
                start_position = position
                valid = 0
                for kind, item in walk_chunk(chunk, source, position):
                    if kind == "end":
                        valid = item
                    elif kind == "legacy":
                        if self._map_legacy(item, offset_map, start, max_desired, txn, stats, source, position,
                                            max_decompressed):
                            return True
                    elif self._map_v2(chunk, item, offset_map, start, max_desired, txn, stats, source, position,
                                      max_decompressed):
                        return True
                position += valid
                stats.index_bytes_read(valid)
                if position == start_position:
                    self._grow_buffers_or_fail(seg, position, log.config.max_message_bytes, chunk)
        finally:
            self._restore_buffers()
        # over an offset gap, fast forward to the last offset this segment can hold
        offset_map.update_latest_offset(next_segment_start - 1)
        return False

    def _map_v2(self, chunk: Chunk, scan: BatchArrays, offset_map: SkimpyOffsetMap, start: int, max_desired: int,
                txn: CleanedTransactionMetadata, stats: CleanerStats, source: str, base_position: int,
                max_decompressed: int) -> bool:
        n = len(scan)
        attrs = scan.column("attributes")
        is_control = (attrs & CONTROL_FLAG_MASK) != 0
        is_txn = (attrs & TRANSACTIONAL_FLAG_MASK) != 0
        pids, lasts, counts = scan.column("producer_id"), scan.last_offset, scan.records_count
        aborted = np.zeros(n, bool)
        for i in np.flatnonzero(is_control | is_txn).tolist():
            if is_control[i]:
                txn.on_control_batch_read(int(pids[i]), int(lasts[i]), control_type(chunk, scan, i))
            else:
                aborted[i] = txn.on_batch_read(int(pids[i]), int(lasts[i]), True)
        # what each batch adds to the messages read: 1 for a control batch, its count otherwise
        units = np.where(is_control, 1, counts)
        mapped = np.flatnonzero(~is_control & ~aborted)
        if mapped.size:
            recs = decode_records(chunk, scan, mapped, max_decompressed=max_decompressed, source=source,
                                   base_position=base_position)
            cand = np.flatnonzero((recs.klen >= 0) & (recs.offset >= start))
        else:
            cand = np.empty(0, np.int64)
        cut = cand.shape[0]
        hashes = np.empty((0, 2), np.uint64)
        if cand.shape[0]:
            hashes = span_hashes(recs.data, recs.kstart[cand], recs.klen[cand])
            # a put adds a slot only for a key neither in the map nor earlier in this run;
            # the map is full at the first record that finds it at the desired size. Only a run
            # that could reach that size (every key new) needs the exact count: the lookup and
            # the sort by hash cost as much as the hashing.
            if offset_map.size + cand.shape[0] > max_desired:
                new = offset_map.get_many(hashes) < 0
                if new.any():
                    _, first = np.unique(hashes[new], axis=0, return_index=True)
                    fresh = np.zeros(cand.shape[0], bool)
                    fresh[np.flatnonzero(new)[first]] = True
                else:
                    fresh = new
                size_before = offset_map.size + np.cumsum(fresh) - fresh
                over = np.flatnonzero(size_before >= max_desired)
                if over.size:
                    cut = int(over[0])
        if cut < cand.shape[0]:
            offset_map.put_many(hashes[:cut], recs.offset[cand[:cut]])
            rec = int(cand[cut])
            batch = int(recs.batch[rec])
            first_rec_of_batch = int(np.searchsorted(recs.batch, batch))
            stats.index_messages_read(int(units[:batch].sum()) + rec - first_rec_of_batch)
            done = np.flatnonzero(lasts[:batch] >= start)
            if done.size:
                offset_map.update_latest_offset(max(offset_map.latest_offset, int(lasts[done[-1]])))
            return True
        if cut:
            offset_map.put_many(hashes, recs.offset[cand])
        stats.index_messages_read(int(units.sum()))
        done = np.flatnonzero(lasts >= start)
        if done.size:
            offset_map.update_latest_offset(int(lasts[done[-1]]))
        return False

    def _map_legacy(self, info: BatchInfo, offset_map: SkimpyOffsetMap, start: int, max_desired: int,
                    txn: CleanedTransactionMetadata, stats: CleanerStats, source: str, base_position: int,
                    max_decompressed: int) -> bool:
        txn.on_batch_read(-1, info.last_offset, False)
        records = legacy_records(info.legacy_entry, max_decompressed, source, base_position)
        for offset, _ts, key, _value, _magic in records:
            if key is not None and offset >= start:
                if offset_map.size < max_desired:
                    offset_map.put(key, offset)
                else:
                    return True
            stats.index_messages_read(1)
        if info.last_offset >= start:
            offset_map.update_latest_offset(info.last_offset)
        return False

    # ---------------------------------------------------------------------------- cleaning

    def clean_segments(self, log: Log, segments: Sequence[LogSegment], offset_map: SkimpyOffsetMap,
                       current_time_ms: int, stats: CleanerStats, transaction_metadata: CleanedTransactionMetadata,
                       last_record_of_producer: dict[int, LastRecord] | None,
                       upper_bound_offset_of_clean_round: int, *, legacy_delete_horizon_ms: int = 0) -> None:
        """``cleanSegments``: clean a group of segments into one new segment (files ``.cleaned``
        until ``Log.replace_segments`` swaps it in). ``last_record_of_producer``: the active
        producers' last records (None: read from the log now, as Kafka does here);
        ``legacy_delete_horizon_ms``: tombstones of v0/v1 records in segments last modified
        before it go (``doClean`` computes it)."""
        segments = list(segments)
        base = segments[0].base_offset
        # UnifiedLog.createNewCleanedSegment: a leftover .cleaned of an earlier attempt goes first
        for p in segment_paths(log.dir, base, CLEANED_SUFFIX).values():
            p.unlink(missing_ok=True)
        cleaned = LogSegment.open(log.dir, base, log.config, file_suffix=CLEANED_SUFFIX, preallocate=False)
        transaction_metadata.cleaned_index = cleaned.txn_index
        try:
            if last_record_of_producer is None:
                last_record_of_producer = last_records_of_active_producers(log)
            for i, seg in enumerate(segments):
                # aborted transactions from the whole segment: the new txn index is rebuilt whole
                upper = segments[i + 1].base_offset if i + 1 < len(segments) else seg.read_next_offset()
                transaction_metadata.add_aborted_transactions(
                    collect_aborted_transactions(log, seg.base_offset, upper))
                retain = last_modified_ms(seg) > legacy_delete_horizon_ms
                logger.info("Cleaning %s in log %s into %d with an upper bound deletion horizon %d computed from "
                         "the segment last modified time of %d, %s deletes.", seg.log_path.name, log.dir.name,
                         base, legacy_delete_horizon_ms, last_modified_ms(seg),
                         "retaining" if retain else "discarding")
                try:
                    self._clean_into(log, seg, cleaned, offset_map, retain, transaction_metadata,
                                     last_record_of_producer, upper_bound_offset_of_clean_round, stats,
                                     current_time_ms)
                except OffsetOverflowError as e:
                    # Kafka splits the segment and aborts this round (cleanSegments); our own
                    # .cleaned files go first, the split writes pieces of the same names
                    logger.info("Caught segment overflow error during cleaning: %s", e)
                    cleaned.delete()
                    log.split_overflowed_segment(seg)
                    raise LogCleaningAbortedError(
                        f"Cleaning of {log.dir.name} aborted: {seg.log_path} was split first ({e})") from e
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            # the new files keep the last modified time of the originals (legacy tombstones and
            # time retention go by it)
            set_last_modified(cleaned, last_modified_ms(segments[-1]))
        except BaseException:
            cleaned.delete()        # nothing was swapped: the .cleaned files go
            raise
        finally:
            transaction_metadata.cleaned_index = None
        logger.info("Swapping in cleaned segment %s for segment(s) %s in log %s", cleaned.log_path.name,
                 [s.base_offset for s in segments], log.dir.name)
        log.replace_segments([cleaned], segments)

    def _clean_into(self, log: Log, source: LogSegment, dest: LogSegment, offset_map: SkimpyOffsetMap,
                    retain_legacy_deletes_and_txn_markers: bool, transaction_metadata: CleanedTransactionMetadata,
                    last_records: dict[int, LastRecord], upper_bound_offset_of_cleaning_round: int,
                    stats: CleanerStats, current_time: int) -> None:
        """``cleanInto``: copy what stays of ``source`` into ``dest``, a buffer at a time."""
        f = LogCleanerFilter(offset_map, retain_legacy_deletes_and_txn_markers, log.config.delete_retention_ms,
                              transaction_metadata, last_records, upper_bound_offset_of_cleaning_round, stats,
                              current_time, default_max_decompressed(log.config.max_message_bytes),
                              str(source.log_path))
        position = 0
        try:
            while position < source.size:
                self.check_done(log)
                chunk = source.read_bytes(position, self._read_buffer_size)
                self._throttle(len(chunk))
                result = filter_to(chunk, f, position)
                stats.read_messages(result.messages_read, result.bytes_read)
                stats.recopy_messages(result.messages_retained, result.bytes_retained)
                position += result.bytes_read
                if result.output:
                    out = b"".join(result.output)
                    largest, max_ts, shallow = output_stats(out)
                    dest.append(largest, max_ts, shallow, out)
                    self._throttle(len(out))
                if chunk and result.bytes_read == 0:
                    self._grow_buffers_or_fail(source, position, log.config.max_message_bytes, chunk)
        finally:
            self._restore_buffers()

    # ---------------------------------------------------------------------------- buffers

    def _grow_buffers_or_fail(self, seg: LogSegment, position: int, max_log_message_size: int, chunk: Chunk) -> None:
        """``growBuffersOrFail``: not even one batch fit the buffer; double it (up to the
        larger of ``max.message.bytes`` and the max I/O buffer, or the batch's own size), or
        fail on a batch that cannot be right."""
        where = f"log segment {seg.log_path} at position {position}"
        if self._read_buffer_size >= max_log_message_size:
            next_size = _first_batch_size(chunk, seg, position)
            if next_size is None:
                raise LogCleaningError(f"Could not determine next batch size for {where}", log=seg)
            if next_size <= self._read_buffer_size:
                raise LogCleaningError(f"Batch size {next_size} < buffer size {self._read_buffer_size}, but not "
                                       f"processed for {where}", log=seg)
            left = seg.size - position
            if next_size > left:
                raise CorruptRecordError(f"Log segment may be corrupt, batch size {next_size} > {left} bytes "
                                         f"left in segment for {where}", position=position, source=str(seg.log_path))
            max_size = next_size
        else:
            max_size = max_log_message_size
        self._grow_buffers(max_size)

    def _grow_buffers(self, max_log_message_size: int) -> None:
        max_buffer = max(max_log_message_size, self.max_io_buffer_size)
        if self._read_buffer_size >= max_buffer:
            raise LogCleaningError(f"This log contains a message larger than maximum allowable size of {max_buffer}.")
        new_size = min(self._read_buffer_size * 2, max_buffer)
        logger.info("Growing cleaner I/O buffers from %d bytes to %d bytes.", self._read_buffer_size, new_size)
        self._read_buffer_size = new_size

    def _restore_buffers(self) -> None:
        self._read_buffer_size = self.io_buffer_size


def _first_batch_size(chunk: Chunk, seg: LogSegment, position: int) -> int | None:
    """``ByteBufferLogInputStream.nextBatchSize``, with its checks."""
    if len(chunk) < LOG_OVERHEAD:
        return None
    at = np.zeros(1, np.int64)
    size = int(read_field(chunk, at, BatchField.LENGTH)[0])
    src = str(seg.log_path)
    if size < legacy.RECORD_OVERHEAD_V0:
        raise CorruptRecordError(f"Record size {size} is less than the minimum record overhead "
                                 f"({legacy.RECORD_OVERHEAD_V0})", position=position, source=src)
    if len(chunk) < HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = int(read_field(chunk, at, BatchField.MAGIC)[0]) & 0xFF     # unsigned: 0x80-0xFF are refused too
    if magic > 2:
        raise CorruptRecordError(f"Invalid magic found in record: {magic}", position=position, source=src)
    return size + LOG_OVERHEAD


__all__ = ["Cleaner", "LogToClean", "calculate_cleanable_bytes", "collect_aborted_transactions",
           "last_records_of_active_producers", "log_segments"]

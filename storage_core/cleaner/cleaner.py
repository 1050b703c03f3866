"""The log cleaner's compaction core (Kafka's ``Cleaner``, ``CleanerStats``, ``LogToClean``,
``CleanedTransactionMetadata`` and the cleaner's ``MemoryRecords.filterTo``).

One clean (``Cleaner.clean``, Kafka's ``doClean``):

1. ``build_offset_map`` walks the dirty segments ``[first dirty, first uncleanable)`` and
   remembers each key's latest offset (MD5 of the key, ``SkimpyOffsetMap``), skipping control
   batches, aborted transactions and records without a key, until the map is as full as the
   load factor allows. ``latest_offset + 1`` is where the next clean starts.
2. ``group_segments_by_size`` groups every segment below that offset (the clean part is
   re-copied too) so that each group fits one segment.
3. ``clean_segments`` copies each group into one new ``.cleaned`` segment, batch by batch
   (``cleanInto``/``filterTo``): a batch whose records all stay is copied byte for byte, one
   that loses records is rebuilt with its original header fields, base offset and last offset;
   transaction markers and tombstones stay until their delete horizon has passed; a producer's
   last batch stays (maybe empty) so that duplicate detection survives. The new segment is
   swapped in by ``Log.replace_segments``.

The hot path is columnar: batch headers come from the compiled header scan, every record's
fields from the compiled record walk (``format.columnar.record_fields``), and the keep/drop
decision for all records of a chunk is one numpy expression. Python loops run per *batch*
only where Kafka's decision is sequential (transaction markers, producers' last batches, the
output of rebuilt batches); keys are hashed all at once too (``offset_map.span_hashes``, a
compiled MD5 over the key spans: one ``hashlib`` call per key was half of a clean). Legacy v0/v1
entries, history by now, take a scalar path.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from dataclasses import dataclass, field
from typing import Callable, Sequence

import heapq

import numpy as np

from ..common import wall_ms
from ..errors import (CorruptRecordError, LogCleaningAbortedError, LogCleaningError,
                     OffsetOverflowError)
from ..format import kernels, legacy
from ..format.columnar import record_fields
from ..format.compression import compress, decompress
from ..format.control import ControlRecordType
from ..format.log_input_stream import (BatchArrays, LogInputStream, default_max_decompressed,
                                      scan_batches)
from ..format.record_batch import (ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK,
                                  CONTROL_FLAG_MASK, CRC_OFFSET, DELETE_HORIZON_FLAG_MASK,
                                  HEADER, HEADER_SIZE_UP_TO_MAGIC, LOG_APPEND_TIME,
                                  LOG_OVERHEAD, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD,
                                  TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK, CREATE_TIME,
                                  crc32c, write_empty_header)
from ..format.varint import varint_sizes, zigzag_array
from ..index import AbortedTxn, TransactionIndex
from ..log import Log
from .offset_map import SkimpyOffsetMap, span_hashes
from ..log import CLEANED_SUFFIX, INT_MAX, LogSegment, segment_paths

logger = logging.getLogger(__name__)


DEFAULT_IO_BUFFER_SIZE = 524288
DEFAULT_MAX_IO_BUFFER_SIZE = 1048588

# MemoryRecords.RecordFilter.BatchRetention
DELETE = 0          # drop the batch without looking at its records
RETAIN_EMPTY = 1    # keep the batch, as an empty header if no record stays
DELETE_EMPTY = 2    # drop the batch if no record stays


# ------------------------------------------------------------------------------ value types

@dataclass
class CleanerStats:
    """Kafka's ``CleanerStats``: what one clean read, kept and wrote, and when."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    invalid_messages_read: int = 0
    messages_written: int = 0
    buffer_utilization: float = 0.0
    start_ms: int = 0
    map_complete_ms: int = 0
    end_ms: int = 0
    clock: Callable[[], int] = field(default=wall_ms, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.start_ms:
            self.start_ms = self.clock()

    def read_messages(self, messages: int, size: int) -> None:
        self.messages_read += messages
        self.bytes_read += size

    def invalid_message(self, n: int = 1) -> None:
        self.invalid_messages_read += n

    def recopy_messages(self, messages: int, size: int) -> None:
        self.messages_written += messages
        self.bytes_written += size

    def index_messages_read(self, n: int) -> None:
        self.map_messages_read += n

    def index_bytes_read(self, n: int) -> None:
        self.map_bytes_read += n

    def index_done(self) -> None:
        self.map_complete_ms = self.clock()

    def all_done(self) -> None:
        self.end_ms = self.clock()

    @property
    def elapsed_secs(self) -> float:
        return (self.end_ms - self.start_ms) / 1000.0

    @property
    def elapsed_indexing_secs(self) -> float:
        return (self.map_complete_ms - self.start_ms) / 1000.0


@dataclass(frozen=True)
class LastRecord:
    """``LastRecord``: a still-active producer's last data offset (None if its last entry is
    a marker) and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


def log_segments(log: Log, from_offset: int, to_offset: int) -> list[LogSegment]:
    """``LogSegments.values(from, to)`` (``Log.segments_in_range``)."""
    return log.segments_in_range(from_offset, to_offset)


def _non_active_segments_from(log: Log, from_offset: int) -> list[LogSegment]:
    """``LocalLog.nonActiveLogSegmentsFrom``."""
    return log.non_active_segments_from(from_offset)


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
    with log._lock:
        producers = dict(log.producer_state.active_producers)
    return {pid: LastRecord(e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch)
            for pid, e in producers.items()}


def last_modified_ms(seg: LogSegment) -> int:
    """``LogSegment.lastModified``: the ``.log`` file's mtime in ms."""
    return os.stat(seg.log_path).st_mtime_ns // 1_000_000


def set_last_modified(seg: LogSegment, ms: int) -> None:
    """``LogSegment.setLastModified``: the mtime of the ``.log``, ``.index`` and ``.timeindex``."""
    ns = ms * 1_000_000
    for p in (seg.log_path, seg.offset_index.path, seg.time_index.path):
        if p.exists():
            os.utime(p, ns=(ns, ns))


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
        # LogCleanerManager.calculateCleanableBytes
        non_active = _non_active_segments_from(self.log, self.uncleanable_offset)
        first_uncleanable = non_active[0] if non_active else self.log.segments[-1]
        self.first_uncleanable_offset = first_uncleanable.base_offset
        self.cleanable_bytes = sum(
            s.size for s in log_segments(self.log, min(self.first_dirty_offset, self.first_uncleanable_offset),
                                         self.first_uncleanable_offset))

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else float("nan")


# ------------------------------------------------------------------- transaction tracking

class _AbortedTransactionMetadata:
    __slots__ = ("aborted_txn", "last_observed_batch_offset")

    def __init__(self, aborted_txn: AbortedTxn) -> None:
        self.aborted_txn = aborted_txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """``CleanedTransactionMetadata``: the transactions the cleaner walks through, deciding
    when markers can go and re-appending retained aborted transactions to the new segment's
    txn index."""

    def __init__(self) -> None:
        self.ongoing_committed_txns: set[int] = set()
        self.ongoing_aborted_txns: dict[int, _AbortedTransactionMetadata] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []     # min-heap by first offset
        self._seq = 0
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: Sequence[AbortedTxn]) -> None:
        for t in txns:
            heapq.heappush(self._aborted, (t.first_offset, self._seq, t))
            self._seq += 1

    def _consume_aborted_txns_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            txn = heapq.heappop(self._aborted)[2]
            self.ongoing_aborted_txns.setdefault(txn.producer_id, _AbortedTransactionMetadata(txn))

    def on_control_batch_read(self, producer_id: int, last_offset: int,
                              control_type: ControlRecordType | None) -> bool:
        """True if the control batch can be discarded. ``control_type`` is None for a control
        batch without records (already cleaned: discardable)."""
        self._consume_aborted_txns_up_to(last_offset)
        if control_type is None:
            return True
        if control_type is ControlRecordType.ABORT:
            meta = self.ongoing_aborted_txns.pop(producer_id, None)
            # keep the marker until every batch of its transaction is gone
            if meta is not None and meta.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta.aborted_txn)
                return False
            return True
        if control_type is ControlRecordType.COMMIT:
            # discardable if no batch of its transaction was seen in this pass
            if producer_id in self.ongoing_committed_txns:
                self.ongoing_committed_txns.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, producer_id: int, last_offset: int, transactional: bool) -> bool:
        """True if the data batch belongs to an aborted transaction (discardable)."""
        self._consume_aborted_txns_up_to(last_offset)
        if not transactional:
            return False
        meta = self.ongoing_aborted_txns.get(producer_id)
        if meta is not None:
            meta.last_observed_batch_offset = last_offset
            return True
        self.ongoing_committed_txns.add(producer_id)
        return False


# ------------------------------------------------------------------------- compiled writer

def _zz_size(values: np.ndarray, bits: int) -> np.ndarray:
    return varint_sizes(zigzag_array(values.astype(np.int64), bits)).astype(np.int64)


# ------------------------------------------------------------------------- chunk decoding

@dataclass
class _Records:
    """Every record of some v2 batches of a chunk, as columns (``data`` holds their bytes:
    the chunk itself, or the batches' decompressed payloads end to end)."""

    data: object
    batch: np.ndarray          # index of each record's batch (into the run)
    offset: np.ndarray
    timestamp: np.ndarray
    off_delta: np.ndarray
    kstart: np.ndarray
    klen: np.ndarray
    vstart: np.ndarray
    vlen: np.ndarray
    hcount: np.ndarray


def _decode_records(chunk, scan: BatchArrays, which: np.ndarray, *, max_decompressed: int,
                    source: str, base_position: int) -> _Records:
    """Decode the records of batches ``which`` of ``scan`` (compressed ones decompressed)."""
    sub = BatchArrays(scan.fields[which], 0)
    codec = sub.column("attributes") & COMPRESSION_CODEC_MASK
    pos, size = sub.position, sub.size
    if not codec.any():
        data = chunk
        lo, hi = pos + RECORD_BATCH_OVERHEAD, pos + size
    else:
        mv = memoryview(chunk)
        pieces = []
        for i, (p, s, c) in enumerate(zip(pos.tolist(), size.tolist(), codec.tolist())):
            body = mv[p + RECORD_BATCH_OVERHEAD:p + s]
            if c:
                try:
                    body = decompress(c, body, magic=2, max_size=max_decompressed)
                except CorruptRecordError as e:
                    raise CorruptRecordError(f"compressed batch: {e.reason}", position=base_position + p,
                                             source=source, offset=int(sub.base_offset[i])) from e
            pieces.append(body)
        lens = np.fromiter((len(x) for x in pieces), np.int64, len(pieces))
        hi = np.cumsum(lens)
        lo = hi - lens
        data = b"".join(pieces)
    try:
        fields = record_fields(data, sub, lo, hi, source)
    except CorruptRecordError as e:
        # positions are of the chunk (or the decompressed payload): name the batch in the file
        b_pos = e.position if e.position is not None else 0
        raise CorruptRecordError(e.reason, position=base_position + b_pos, source=source,
                                 offset=e.offset) from e
    ts_delta, off_delta, kstart, klen, vstart, vlen, hcount = fields
    counts = sub.records_count
    batch = np.repeat(which, counts)
    local = np.repeat(np.arange(len(which)), counts)
    attrs = sub.column("attributes")[local]
    lat = (attrs & TIMESTAMP_TYPE_MASK) != 0
    timestamps = sub.column("base_timestamp")[local] + ts_delta
    if lat.any():
        timestamps = np.where(lat, sub.max_timestamp[local], timestamps)
    return _Records(data, batch, sub.base_offset[local] + off_delta, timestamps, off_delta,
                    kstart, klen, vstart, vlen, hcount)


def _control_type(chunk, scan: BatchArrays, i: int) -> ControlRecordType | None:
    """The type of the control batch ``i``'s first record, None if it has none."""
    if int(scan.records_count[i]) == 0:
        return None
    recs = _decode_records(chunk, scan, np.array([i]), max_decompressed=default_max_decompressed(),
                           source="", base_position=0)
    if not len(recs.offset):
        return None
    ks, kl = int(recs.kstart[0]), int(recs.klen[0])
    key = None if kl < 0 else bytes(memoryview(recs.data)[ks:ks + kl])
    return ControlRecordType.parse(key)


def _walk_chunk(chunk, source: str, base_position: int):
    """The complete batches of ``chunk`` as runs: ``("v2", BatchArrays)`` and
    ``("legacy", BatchInfo)`` in log order; the last item is ``("end", bytes used)``."""
    pos, end = 0, len(chunk)
    while True:
        try:
            scan = scan_batches(chunk, pos, end, source=source)
        except CorruptRecordError as e:
            raise e.located(source=source, base_position=base_position) from e.__cause__
        if len(scan):
            yield "v2", scan
        pos = scan.end
        if not scan.legacy_at_end:
            break
        stream = LogInputStream(chunk, pos, end, source=source)
        try:
            info = stream.next_batch()
        except CorruptRecordError as e:
            raise e.located(source=source, base_position=base_position) from e.__cause__
        if info is None:
            break
        yield "legacy", info
        pos = info.position + info.size
    yield "end", pos


def _legacy_records(entry: legacy.LegacyEntry, max_decompressed: int, source: str, base_position: int
                    ) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
    """``(offset, timestamp, key, value, magic)`` of a legacy entry's records, read as Kafka's
    ``DeepRecordsIterator`` does, tolerating inner messages whose magic differs from the
    wrapper's (KAFKA-4298: the cleaner rewrites such sets)."""
    if entry.compression == 0:
        return [(entry.offset, entry.timestamp, entry.key, entry.value, entry.magic)]
    where = dict(position=base_position + entry.position, source=source, offset=entry.offset)
    if entry.value is None:
        raise CorruptRecordError("Found invalid compressed record set with null value", **where)
    try:
        inner_buf = decompress(entry.compression, entry.value, magic=entry.magic, max_size=max_decompressed)
        inner = list(legacy.iter_entries(inner_buf))
    except CorruptRecordError as e:
        raise CorruptRecordError(f"compressed wrapper message: {e.reason}", **where) from e
    if not inner:
        raise CorruptRecordError("Found invalid compressed record set with no inner records", **where)
    if any(m.compression != 0 for m in inner):
        raise CorruptRecordError("Compressed message set contains a compressed inner message", **where)
    if entry.magic > 0:
        last_rel = inner[-1].offset
        if entry.offset < last_rel:
            raise CorruptRecordError(
                f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                f"'{entry.offset}' is less than the last inner message offset '{last_rel}'", **where)
        base = entry.offset - last_rel
    else:
        base = 0
    wrapper_lat = entry.magic == 1 and entry.timestamp_type == LOG_APPEND_TIME
    out = []
    for m in inner:
        if m.magic == 0:
            ts = NO_TIMESTAMP
        elif wrapper_lat:
            ts = entry.timestamp
        else:
            ts = m.timestamp
        out.append((base + m.offset, ts, m.key, m.value, m.magic))
    return out


def _legacy_rebuild(entry: legacy.LegacyEntry, kept: list[tuple[int, int, bytes | None, bytes | None, int]]
                    ) -> bytes:
    """``buildRetainedRecordsInto`` for magic 0/1: the retained records re-written with the
    wrapper's magic, codec and timestamp type, base offset the first retained offset (inner
    offsets relative for v1, absolute for v0; wrapper offset the last one)."""
    magic, codec = entry.magic, entry.compression
    tst = entry.timestamp_type if magic == 1 else CREATE_TIME
    lat = magic == 1 and tst == LOG_APPEND_TIME
    if codec == 0:
        return b"".join(legacy.build_message(o, v, k, magic=magic,
                                             timestamp=(entry.timestamp if lat else ts) if magic == 1 else NO_TIMESTAMP,
                                             timestamp_type=tst)
                        for o, ts, k, v, _ in kept)
    base = kept[0][0]
    inner = b"".join(legacy.build_message((o - base) if magic > 0 else o, v, k, magic=magic,
                                          timestamp=(entry.timestamp if lat else ts) if magic == 1 else NO_TIMESTAMP,
                                          timestamp_type=tst)
                     for o, ts, k, v, _ in kept)
    if magic == 1:
        wrapper_ts = entry.timestamp if lat else max(ts for _, ts, _, _, _ in kept)
    else:
        wrapper_ts = NO_TIMESTAMP
    return legacy.build_message(kept[-1][0], compress(codec, inner, magic=magic), None, magic=magic,
                                timestamp=wrapper_ts, compression=codec, timestamp_type=tst)


# ---------------------------------------------------------------------------- the filter

@dataclass
class _FilterResult:
    """``MemoryRecords.FilterResult``."""

    output: list = field(default_factory=list)
    messages_read: int = 0
    bytes_read: int = 0
    messages_retained: int = 0
    bytes_retained: int = 0
    max_offset: int = -1


@dataclass
class _LogCleanerFilter:
    """The cleaner's ``RecordFilter`` and the state ``cleanInto`` gives it."""

    offset_map: SkimpyOffsetMap
    retain_legacy_deletes_and_txn_markers: bool
    delete_retention_ms: int
    transaction_metadata: CleanedTransactionMetadata
    last_records_of_active_producers: dict[int, LastRecord]
    upper_bound_offset_of_cleaning_round: int
    stats: CleanerStats
    current_time: int
    max_decompressed: int
    source: str


def _filter_v2(chunk, scan: BatchArrays, f: _LogCleanerFilter, result: _FilterResult, base_position: int) -> None:
    """``filterTo`` over a run of v2 batches, columnar: batch retention per batch, record
    retention for all records at once, then the output batch by batch."""
    n = len(scan)
    attrs = scan.column("attributes")
    is_control = (attrs & CONTROL_FLAG_MASK) != 0
    is_txn = (attrs & TRANSACTIONAL_FLAG_MASK) != 0
    has_horizon = (attrs & DELETE_HORIZON_FLAG_MASK) != 0
    horizon = scan.column("base_timestamp")
    pids = scan.column("producer_id")
    epochs = scan.column("producer_epoch")
    lasts = scan.last_offset
    counts = scan.records_count
    sizes = scan.size
    positions = scan.position

    # checkBatchRetention: the transaction bookkeeping is sequential, but only transactional and
    # control batches take part in it (a plain batch never is discardable)
    can_discard = np.zeros(n, bool)
    for i in np.flatnonzero(is_control | is_txn).tolist():
        pid, last = int(pids[i]), int(lasts[i])
        if is_control[i]:
            can_discard[i] = f.transaction_metadata.on_control_batch_read(pid, last, _control_type(chunk, scan, i))
        else:
            can_discard[i] = f.transaction_metadata.on_batch_read(pid, last, True)
    discard_records = np.where(is_control, can_discard & has_horizon & (horizon <= f.current_time), can_discard)
    is_last_of_producer = np.zeros(n, bool)
    if f.last_records_of_active_producers:
        active = np.fromiter(f.last_records_of_active_producers, np.int64)
        for i in np.flatnonzero((pids >= 0) & np.isin(pids, active)).tolist():
            lr = f.last_records_of_active_producers[int(pids[i])]
            if lr.last_data_offset is not None:
                is_last_of_producer[i] = int(lasts[i]) == lr.last_data_offset
            else:
                is_last_of_producer[i] = bool(is_control[i]) and int(epochs[i]) == lr.producer_epoch
    retention = np.where((pids >= 0) & is_last_of_producer, RETAIN_EMPTY,
                         np.where(lasts + 1 == f.upper_bound_offset_of_cleaning_round, RETAIN_EMPTY,
                                  np.where(discard_records, DELETE, DELETE_EMPTY)))
    marker_for_empty_txn = can_discard & is_control
    result.bytes_read += int(sizes.sum())

    inspected = np.flatnonzero(retention != DELETE)
    if not inspected.size:
        return
    recs = _decode_records(chunk, scan, inspected, max_decompressed=f.max_decompressed, source=f.source,
                           base_position=base_position)
    b = recs.batch
    result.messages_read += int(b.shape[0])

    # shouldRetainRecord, for every record at once
    offsets = recs.offset
    latest = f.offset_map.latest_offset
    rec_control = is_control[b]
    rec_discard = discard_records[b]
    past = offsets > latest
    has_key = recs.klen >= 0
    candidates = ~rec_discard & ~rec_control & ~past & has_key
    found = np.full(offsets.shape[0], -1, np.int64)
    if candidates.any():
        idx = np.flatnonzero(candidates)
        found[idx] = f.offset_map.get_many(span_hashes(recs.data, recs.kstart[idx], recs.klen[idx]))
    retain_deletes = ~has_horizon[b] | (f.current_time < horizon[b])
    keyed_keep = has_key & (offsets >= found) & ((recs.vlen >= 0) | retain_deletes)
    keep = np.where(rec_discard, False, np.where(rec_control, True, past | keyed_keep))
    f.stats.invalid_message(int(np.count_nonzero(~rec_discard & ~rec_control & ~past & ~has_key)))

    retained = np.bincount(b, weights=keep, minlength=n).astype(np.int64)
    tombstones = np.bincount(b, weights=keep & (recs.vlen < 0), minlength=n) > 0
    all_kept = retained == counts
    need_horizon = (tombstones | marker_for_empty_txn) & ~has_horizon
    rebuild = (retained > 0) & (~all_kept | need_horizon)
    rebuilt = _rebuild_batches(chunk, scan, recs, keep, np.flatnonzero(rebuild), need_horizon, f) \
        if rebuild.any() else {}
    mv = memoryview(chunk)
    out = result.output
    # only batches that write something: in a well-compacted topic most of a chunk's batches
    # lose every record and are simply left out (no Python per dropped batch)
    emitted = inspected[(retained[inspected] > 0) | (retention[inspected] == RETAIN_EMPTY)]
    for i in emitted.tolist():
        r = int(retained[i])
        if r:
            if i in rebuilt:
                data, max_off = rebuilt[i]
            else:
                p = int(positions[i])
                data, max_off = mv[p:p + int(sizes[i])], int(lasts[i])
            out.append(data)
            result.messages_retained += r
            result.bytes_retained += len(data)
            result.max_offset = max(result.max_offset, max_off)
        elif retention[i] == RETAIN_EMPTY:
            h = scan.header(i)
            out.append(write_empty_header(
                base_offset=h.base_offset, last_offset=h.last_offset, max_timestamp=h.max_timestamp,
                producer_id=h.producer_id, producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                timestamp_type=h.timestamp_type, transactional=h.is_transactional, control=h.is_control,
                partition_leader_epoch=h.partition_leader_epoch))
            result.bytes_retained += RECORD_BATCH_OVERHEAD
            result.max_offset = max(result.max_offset, h.last_offset)


def _rebuild_batches(chunk, scan: BatchArrays, recs: _Records, keep: np.ndarray, which: np.ndarray,
                     need_horizon: np.ndarray, f: _LogCleanerFilter) -> dict[int, tuple[bytes, int]]:
    """``buildRetainedRecordsInto`` for the v2 batches ``which``: the retained records under
    the original header (magic, codec at its default level, timestamp type, producer fields,
    leader epoch, base offset and last offset), the delete horizon set where needed. Records
    are re-laid out by one compiled pass; only their timestamp deltas change."""
    rebuilt = np.zeros(len(scan), bool)
    rebuilt[which] = True
    sel = np.flatnonzero(keep & rebuilt[recs.batch])
    b = recs.batch[sel]
    arr = np.frombuffer(recs.data, np.uint8)
    kstart, klen = recs.kstart[sel], recs.klen[sel]
    vstart, vlen, hcount = recs.vstart[sel], recs.vlen[sel], recs.hcount[sel]
    # where each record's key-length varint starts and where its headers end
    tail_start = kstart - _zz_size(klen, 32)
    end = vstart + np.maximum(vlen, 0) + _zz_size(hcount, 32)
    with_headers = np.flatnonzero(hcount > 0)
    if with_headers.size:
        hc = hcount[with_headers]
        spans = np.empty((4, int(hc.sum())), np.int64)
        kernels.parse_headers(arr, vstart[with_headers], vlen[with_headers], hc, spans)
        last_h = np.cumsum(hc) - 1
        end[with_headers] = spans[2, last_h] + np.maximum(spans[3, last_h], 0)
    tail_len = end - tail_start
    ts = recs.timestamp[sel]
    # the new base timestamp: the delete horizon (new, or the batch's own), else the first
    # retained record's timestamp
    attrs = scan.column("attributes")
    has_horizon = (attrs & DELETE_HORIZON_FLAG_MASK) != 0
    new_horizon = f.current_time + f.delete_retention_ms
    first_of = np.r_[0, np.flatnonzero(np.diff(b)) + 1]
    batches = b[first_of]
    base_ts = np.where(need_horizon[batches], new_horizon,
                       np.where(has_horizon[batches], scan.column("base_timestamp")[batches], ts[first_of]))
    counts = np.diff(np.r_[first_of, b.shape[0]])
    local = np.repeat(np.arange(batches.shape[0]), counts)
    ts_delta = ts - base_ts[local]
    off_delta = recs.off_delta[sel]
    body_len = 1 + _zz_size(ts_delta, 64) + _zz_size(off_delta, 32) + tail_len
    rec_size = _zz_size(body_len, 32) + body_len
    at = np.cumsum(rec_size) - rec_size + RECORD_BATCH_OVERHEAD * (local + 1)
    total = int(rec_size.sum()) + RECORD_BATCH_OVERHEAD * batches.shape[0]
    out = np.empty(total, np.uint8)
    kernels.write_rebuilt_records(out, at, body_len, ts_delta, off_delta, arr, tail_start, tail_len)
    del arr
    starts = at[first_of] - RECORD_BATCH_OVERHEAD
    ends = np.r_[starts[1:], total]
    lat = (attrs & TIMESTAMP_TYPE_MASK) != 0
    max_rec_ts = np.maximum.reduceat(ts, first_of)
    max_rec_off = np.maximum.reduceat(recs.offset[sel], first_of)
    mv = memoryview(out)
    built: dict[int, tuple[bytes, int]] = {}
    for j, i in enumerate(batches.tolist()):
        h = scan.header(i)
        payload = mv[int(starts[j]) + RECORD_BATCH_OVERHEAD:int(ends[j])]
        if h.compression:
            payload = compress(h.compression, payload, magic=2)
        horizon_set = bool(need_horizon[i] or has_horizon[i])
        new_attrs = (attrs[i] & ~DELETE_HORIZON_FLAG_MASK) | (DELETE_HORIZON_FLAG_MASK if horizon_set else 0)
        max_ts = h.max_timestamp if lat[i] else int(max_rec_ts[j])
        raw = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
        HEADER.pack_into(raw, 0, h.base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
                         h.partition_leader_epoch, 2, 0, int(new_attrs), h.last_offset_delta,
                         int(base_ts[j]), max_ts, h.producer_id, h.producer_epoch, h.base_sequence,
                         int(counts[j]))
        raw[RECORD_BATCH_OVERHEAD:] = payload
        struct.pack_into(">I", raw, CRC_OFFSET, crc32c(memoryview(raw)[ATTRIBUTES_OFFSET:]))
        built[i] = (bytes(raw), int(max_rec_off[j]))
    return built


def _filter_legacy(info, f: _LogCleanerFilter, result: _FilterResult, chunk, base_position: int) -> None:
    """``filterTo`` for one magic 0/1 entry (a message or a compressed wrapper)."""
    entry = info.entry
    # checkBatchRetention: no producer id, never transactional
    f.transaction_metadata.on_batch_read(-1, entry.offset, False)
    retention = RETAIN_EMPTY if entry.offset + 1 == f.upper_bound_offset_of_cleaning_round else DELETE_EMPTY
    result.bytes_read += info.size
    records = _legacy_records(entry, f.max_decompressed, f.source, base_position)
    result.messages_read += len(records)
    latest = f.offset_map.latest_offset
    kept = []
    write_original = True
    for rec in records:
        offset, _ts, key, value, magic = rec
        if offset > latest:
            keep = True
        elif key is None:
            f.stats.invalid_message()
            keep = False
        else:
            keep = offset >= f.offset_map.get(key) and (value is not None or f.retain_legacy_deletes_and_txn_markers)
        if keep:
            if magic != entry.magic:
                write_original = False
            kept.append(rec)
        else:
            write_original = False
    if kept:
        data = bytes(memoryview(chunk)[info.position:info.position + info.size]) if write_original \
            else _legacy_rebuild(entry, kept)
        result.output.append(data)
        result.messages_retained += len(kept)
        result.bytes_retained += len(data)
        result.max_offset = max(result.max_offset, max(o for o, *_ in kept))
    elif retention == RETAIN_EMPTY:
        raise LogCleaningError(f"Empty batches are only supported for magic v2 and above: the entry at "
                               f"position {base_position + info.position} of {f.source} (offset {entry.offset}) "
                               f"would be left empty")


def _filter_to(chunk, f: _LogCleanerFilter, base_position: int) -> _FilterResult:
    """``MemoryRecords.filterTo`` over the complete batches of a chunk."""
    result = _FilterResult()
    for kind, item in _walk_chunk(chunk, f.source, base_position):
        if kind == "v2":
            _filter_v2(chunk, item, f, result, base_position)
        elif kind == "legacy":
            _filter_legacy(item, f, result, chunk, base_position)
    return result


def _output_stats(buf) -> tuple[int, int, int]:
    """(largest offset, max timestamp, its batch's last offset) of batches to append."""
    scan = scan_batches(buf)
    if not scan.legacy_at_end and len(scan):
        mts, lasts = scan.max_timestamp, scan.last_offset
        top = int(np.argmax(mts))
        return int(lasts.max()), int(mts[top]), int(lasts[top])
    largest, max_ts, shallow = -1, NO_TIMESTAMP, -1
    for b in LogInputStream(buf):
        largest = max(largest, b.last_offset)
        if b.max_timestamp > max_ts:
            max_ts, shallow = b.max_timestamp, b.last_offset
    return largest, max_ts, shallow


# ---------------------------------------------------------------------------------- Cleaner

class Cleaner:
    """Kafka's ``Cleaner``: cleans one log at a time with its offset map and I/O buffers."""

    def __init__(self, offset_map_memory: int, *, io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
                 max_io_buffer_size: int = DEFAULT_MAX_IO_BUFFER_SIZE,
                 dedupe_buffer_load_factor: float = 0.9, clock: Callable[[], int] = wall_ms,
                 check_done: Callable[[Log], None] | None = None, throttler=None) -> None:
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
                for kind, item in _walk_chunk(chunk, source, position):
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

    def _map_v2(self, chunk, scan: BatchArrays, offset_map: SkimpyOffsetMap, start: int, max_desired: int,
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
                txn.on_control_batch_read(int(pids[i]), int(lasts[i]), _control_type(chunk, scan, i))
            else:
                aborted[i] = txn.on_batch_read(int(pids[i]), int(lasts[i]), True)
        # what each batch adds to the messages read: 1 for a control batch, its count otherwise
        units = np.where(is_control, 1, counts)
        mapped = np.flatnonzero(~is_control & ~aborted)
        if mapped.size:
            recs = _decode_records(chunk, scan, mapped, max_decompressed=max_decompressed, source=source,
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

    def _map_legacy(self, info, offset_map: SkimpyOffsetMap, start: int, max_desired: int,
                    txn: CleanedTransactionMetadata, stats: CleanerStats, source: str, base_position: int,
                    max_decompressed: int) -> bool:
        txn.on_batch_read(-1, info.last_offset, False)
        for offset, _ts, key, _value, _magic in _legacy_records(info.entry, max_decompressed, source, base_position):
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
        f = _LogCleanerFilter(offset_map, retain_legacy_deletes_and_txn_markers, log.config.delete_retention_ms,
                              transaction_metadata, last_records, upper_bound_offset_of_cleaning_round, stats,
                              current_time, default_max_decompressed(log.config.max_message_bytes),
                              str(source.log_path))
        position = 0
        try:
            while position < source.size:
                self.check_done(log)
                chunk = source.read_bytes(position, self._read_buffer_size)
                self._throttle(len(chunk))
                result = _filter_to(chunk, f, position)
                stats.read_messages(result.messages_read, result.bytes_read)
                stats.recopy_messages(result.messages_retained, result.bytes_retained)
                position += result.bytes_read
                if result.output:
                    out = b"".join(result.output)
                    largest, max_ts, shallow = _output_stats(out)
                    dest.append(largest, max_ts, shallow, out)
                    self._throttle(len(out))
                if chunk and result.bytes_read == 0:
                    self._grow_buffers_or_fail(source, position, log.config.max_message_bytes, chunk)
        finally:
            self._restore_buffers()

    # ---------------------------------------------------------------------------- buffers

    def _grow_buffers_or_fail(self, seg: LogSegment, position: int, max_log_message_size: int, chunk) -> None:
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


def _first_batch_size(chunk, seg: LogSegment, position: int) -> int | None:
    """``ByteBufferLogInputStream.nextBatchSize``, with its checks."""
    if len(chunk) < LOG_OVERHEAD:
        return None
    size = struct.unpack_from(">i", chunk, 8)[0]
    src = str(seg.log_path)
    if size < legacy.RECORD_OVERHEAD_V0:
        raise CorruptRecordError(f"Record size {size} is less than the minimum record overhead "
                                 f"({legacy.RECORD_OVERHEAD_V0})", position=position, source=src)
    if len(chunk) < HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = chunk[16]
    if magic > 2:
        raise CorruptRecordError(f"Invalid magic found in record: {magic}", position=position, source=src)
    return size + LOG_OVERHEAD


__all__ = ["Cleaner", "CleanerStats", "LogToClean", "LastRecord", "CleanedTransactionMetadata",
           "collect_aborted_transactions", "last_records_of_active_producers", "log_segments"]

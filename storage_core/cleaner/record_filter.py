"""The cleaner's ``MemoryRecords.filterTo``: what stays of a buffer of batches, and the
rebuild of the batches that lose records (``buildRetainedRecordsInto``).

Columnar: batch headers come from the compiled header scan, every record's fields from the
compiled record walk (``format.columnar.record_fields``), and the keep/drop decision for all
records of a chunk is one numpy expression. Python loops run per *batch* only where Kafka's
decision is sequential (transaction markers, producers' last batches, the output of rebuilt
batches); keys are hashed all at once (``offset_map.span_hashes``, a compiled MD5 over the key
spans). Legacy v0/v1 entries take a scalar path.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from ..errors import CorruptRecordError, LogCleaningError
from ..format import kernels, legacy
from ..format.columnar import record_fields
from ..format.compression import compress, decompress
from ..format.control import ControlRecordType
from ..format.log_input_stream import (BatchArrays, BatchInfo, LogInputStream, default_max_decompressed,
                                      scan_batches)
from ..format.record_batch import (ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK,
                                  CONTROL_FLAG_MASK, CRC_OFFSET, DELETE_HORIZON_FLAG_MASK,
                                  HEADER, LOG_APPEND_TIME, LOG_OVERHEAD, NO_TIMESTAMP,
                                  RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK,
                                  TRANSACTIONAL_FLAG_MASK, CREATE_TIME, crc32c, write_empty_header)
from ..format.varint import varint_sizes, zigzag_array
from .cleaned_transaction_metadata import CleanedTransactionMetadata
from .cleaner_stats import CleanerStats
from .offset_map import SkimpyOffsetMap, span_hashes

Chunk = Union[bytes, bytearray, memoryview]      # what a segment read returns

# MemoryRecords.RecordFilter.BatchRetention
DELETE = 0          # drop the batch without looking at its records
RETAIN_EMPTY = 1    # keep the batch, as an empty header if no record stays
DELETE_EMPTY = 2    # drop the batch if no record stays


@dataclass(frozen=True)
class LastRecord:
    """``LastRecord``: a still-active producer's last data offset (None if its last entry is
    a marker) and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


def _zz_size(values: np.ndarray, bits: int) -> np.ndarray:
    return varint_sizes(zigzag_array(values.astype(np.int64), bits)).astype(np.int64)


# ------------------------------------------------------------------------- chunk decoding

@dataclass
class Records:
    """Every record of some v2 batches of a chunk, as columns (``data`` holds their bytes:
    the chunk itself, or the batches' decompressed payloads end to end)."""

    data: Chunk
    batch: np.ndarray          # index of each record's batch (into the run)
    offset: np.ndarray
    timestamp: np.ndarray
    off_delta: np.ndarray
    kstart: np.ndarray
    klen: np.ndarray
    vstart: np.ndarray
    vlen: np.ndarray
    hcount: np.ndarray


def decode_records(chunk: Chunk, scan: BatchArrays, which: np.ndarray, *, max_decompressed: int,
                    source: str, base_position: int) -> Records:
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
            body: memoryview | bytes = mv[p + RECORD_BATCH_OVERHEAD:p + s]
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
    return Records(data, batch, sub.base_offset[local] + off_delta, timestamps, off_delta,
                    kstart, klen, vstart, vlen, hcount)


def control_type(chunk: Chunk, scan: BatchArrays, i: int) -> ControlRecordType | None:
    """The type of the control batch ``i``'s first record, None if it has none."""
    if int(scan.records_count[i]) == 0:
        return None
    recs = decode_records(chunk, scan, np.array([i]), max_decompressed=default_max_decompressed(),
                           source="", base_position=0)
    if not len(recs.offset):
        return None
    ks, kl = int(recs.kstart[0]), int(recs.klen[0])
    key = None if kl < 0 else bytes(memoryview(recs.data)[ks:ks + kl])
    return ControlRecordType.parse(key)


def walk_chunk(chunk: Chunk, source: str, base_position: int) -> Iterator[tuple[str, Any]]:
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


def legacy_records(entry: legacy.LegacyEntry, max_decompressed: int, source: str, base_position: int
                    ) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
    """``(offset, timestamp, key, value, magic)`` of a legacy entry's records, read as Kafka's
    ``DeepRecordsIterator`` does, tolerating inner messages whose magic differs from the
    wrapper's (KAFKA-4298: the cleaner rewrites such sets)."""
    if entry.compression == 0:
        return [(entry.offset, entry.timestamp, entry.key, entry.value, entry.magic)]
    def corrupt(reason: str) -> CorruptRecordError:
        return CorruptRecordError(reason, position=base_position + entry.position, source=source,
                                  offset=entry.offset)

    if entry.value is None:
        raise corrupt("Found invalid compressed record set with null value")
    try:
        inner_buf = decompress(entry.compression, entry.value, magic=entry.magic, max_size=max_decompressed)
        inner = list(legacy.iter_entries(inner_buf))
    except CorruptRecordError as e:
        raise corrupt(f"compressed wrapper message: {e.reason}") from e
    if not inner:
        raise corrupt("Found invalid compressed record set with no inner records")
    if any(m.compression != 0 for m in inner):
        raise corrupt("Compressed message set contains a compressed inner message")
    if entry.magic > 0:
        last_rel = inner[-1].offset
        if entry.offset < last_rel:
            raise corrupt(f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                          f"'{entry.offset}' is less than the last inner message offset '{last_rel}'")
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
class FilterResult:
    """``MemoryRecords.FilterResult``."""

    output: list = field(default_factory=list)
    messages_read: int = 0
    bytes_read: int = 0
    messages_retained: int = 0
    bytes_retained: int = 0
    max_offset: int = -1


@dataclass
class LogCleanerFilter:
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


def _filter_v2(chunk: Chunk, scan: BatchArrays, f: LogCleanerFilter, result: FilterResult, base_position: int) -> None:
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
            can_discard[i] = f.transaction_metadata.on_control_batch_read(pid, last, control_type(chunk, scan, i))
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
    recs = decode_records(chunk, scan, inspected, max_decompressed=f.max_decompressed, source=f.source,
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
    data: bytes | memoryview
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


def _rebuild_batches(chunk: Chunk, scan: BatchArrays, recs: Records, keep: np.ndarray, which: np.ndarray,
                     need_horizon: np.ndarray, f: LogCleanerFilter) -> dict[int, tuple[bytes, int]]:
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
    mv = out.data                       # the array's bytes as a memoryview
    built: dict[int, tuple[bytes, int]] = {}
    for j, i in enumerate(batches.tolist()):
        h = scan.header(i)
        payload: memoryview | bytes = mv[int(starts[j]) + RECORD_BATCH_OVERHEAD:int(ends[j])]
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


def _filter_legacy(info: BatchInfo, f: LogCleanerFilter, result: FilterResult, chunk: Chunk,
                   base_position: int) -> None:
    """``filterTo`` for one magic 0/1 entry (a message or a compressed wrapper)."""
    entry = info.legacy_entry
    # checkBatchRetention: no producer id, never transactional
    f.transaction_metadata.on_batch_read(-1, entry.offset, False)
    retention = RETAIN_EMPTY if entry.offset + 1 == f.upper_bound_offset_of_cleaning_round else DELETE_EMPTY
    result.bytes_read += info.size
    records = legacy_records(entry, f.max_decompressed, f.source, base_position)
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


def filter_to(chunk: Chunk, f: LogCleanerFilter, base_position: int) -> FilterResult:
    """``MemoryRecords.filterTo`` over the complete batches of a chunk."""
    result = FilterResult()
    for kind, item in walk_chunk(chunk, f.source, base_position):
        if kind == "v2":
            _filter_v2(chunk, item, f, result, base_position)
        elif kind == "legacy":
            _filter_legacy(item, f, result, chunk, base_position)
    return result


def output_stats(buf: bytes) -> tuple[int, int, int]:
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

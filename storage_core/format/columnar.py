"""The columnar codec: runs of Kafka batches <-> Arrow tables, the hot path of every read and write.

Decoding: ``scan_batches`` walks the batch headers in one compiled pass into header columns
(``BatchArrays``); compressed batches are decompressed and joined in groups of about a megabyte.
The compiled record walk (``_kernels.parse_records``: sequential by nature, each record starts
with its length varint) decodes every record's fields and copies keys and values straight into
Arrow-allocated buffers; record headers are parsed and gathered the same way
(``parse_headers``, ``gather_spans``). Per-batch fields reach their records by numpy repeats, and
the Arrow arrays are built over these buffers without another copy. Legacy (magic 0/1) entries
are decoded a message at a time by ``legacy``.

Encoding: the compiled ``_kernels.layout_records`` cuts the records into batches of at most
``max_batch_bytes`` and places each record; ``write_records`` writes every record (varint prefix,
key, value, headers) in its final place, in the caller's buffer when ``into`` gives one. Batch
headers and CRCs are then written per batch (after compressing its payload when a codec is set),
so record bytes are copied once, never by Python.

Both directions stay in this one module (a little over 700 lines) as Kafka's
``DefaultRecordBatch`` holds both: they share the schema, the kernels' field rows and the limits.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Any, Callable, Literal, NoReturn, overload
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..common import INT_MAX, LONG_MAX, LONG_MIN, wall_ms
from ..errors import CorruptRecordError, InvalidConfigError
from . import _kernels, legacy
from .buffers import ByteBuffer, as_buffer, binary_spans
from .compression import CompressionType, compress, decompress
from .log_input_stream import (MIN_RECORD_SIZE, BatchArrays, BatchInfo, LogInputStream,
                               default_max_decompressed, max_records_per_batch, scan_batches,
                               too_many_records)
from .record_batch import (ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK, CONTROL_FLAG_MASK, BatchHeader,
                           CREATE_TIME, CRC_OFFSET, HEADER, LOG_APPEND_TIME, LOG_OVERHEAD,
                           TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK,
                           NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP,
                           RECORD_BATCH_OVERHEAD, compute_attributes, crc32c,
                           decode_record, increment_sequence)
from .varint import varint_sizes, zigzag_array

HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")
SCHEMA = pa.schema([
    ("offset", pa.int64()),
    ("timestamp", TIMESTAMP_TYPE),
    ("timestampType", pa.int32()),
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("headers", pa.list_(HEADER_TYPE)),
    ("producerId", pa.int64()),
    ("isTransactional", pa.bool_()),
    ("isControl", pa.bool_()),
])
_NO_HEADERS = pa.nulls(0, HEADER_TYPE)     # (pa.array([]) would import pandas)
DEFAULT_MAX_BATCH_BYTES = 1 << 20     # stays under max.message.bytes (1048588) with the header


@dataclass(frozen=True, slots=True)
class DecodedRun:
    """What ``decode_run`` found: the records, where the complete batches end, and whether a
    trailing partial batch (a file being appended to) was left out."""

    table: pa.Table
    next_position: int
    partial: bool
    batches: int
    next_offset: int = -1       # after the last complete batch (-1: none); a fetch resumes here
    decoded_bytes: int = 0      # record bytes of the v2 batches decoded (after decompression)


def empty_table() -> pa.Table:
    return SCHEMA.empty_table()


# ------------------------------------------------------------------------------- decoding

def decode_batches(buf: ByteBuffer, **kwargs: Any) -> pa.Table:
    """Decode any run of batches (bytes, memoryview or mmap; any magic, any codec) into one
    table in ``SCHEMA``. See ``decode_run`` for options and for the partial-batch position."""
    return decode_run(buf, **kwargs).table


def decode_run(buf: ByteBuffer, *, start: int = 0, end: int | None = None, verify_crc: bool = True,
               max_batch_size: int | None = None, max_decompressed: int | None = None,
               max_decoded: int | None = None, source: str | None = None,
               check_order: bool = False) -> DecodedRun:
    """Decode the complete batches of ``buf[start:end]``.

    ``max_decompressed`` bounds every batch's uncompressed size (default 128 x
    max.message.bytes); ``max_decoded`` bounds the run's: decoding stops after the batch whose
    records take the decoded size to it or past it (at least one batch, as a Kafka fetch
    returns), ``next_position`` and ``next_offset`` then say where the rest begins. ``source``
    names the file in errors, whose positions are absolute. ``check_order``: the bytes are a
    piece of a log, whose batch offsets must increase (``check_offset_order``); batches built on
    their own may all start at 0."""
    limit = max_decompressed or default_max_decompressed()
    end = len(buf) if end is None else min(end, len(buf))
    parts: list[pa.Table] = []
    batches, pos, next_offset, decoded_bytes = 0, start, -1, 0
    while True:
        scan = scan_batches(buf, pos, end, verify=verify_crc, max_batch_size=max_batch_size,
                            source=source)
        if len(scan):
            if check_order:
                check_offset_order(scan, next_offset, source)
            table, used, decoded = _decode_v2(buf, scan, limit, source, max_decoded)
            parts.append(table)
            batches += used
            next_offset = int(scan.last_offset[used - 1]) + 1
            decoded_bytes += decoded
            if max_decoded is not None:
                max_decoded -= decoded
                if used < len(scan) or max_decoded <= 0:
                    pos = int(scan.position[used - 1] + scan.size[used - 1])
                    break
        pos = scan.end
        if not scan.legacy_at_end:
            break
        # a run of magic 0/1 entries, walked by the scalar stream up to the next v2 batch
        stream = LogInputStream(buf, pos, end, max_batch_size=max_batch_size, verify=verify_crc,
                                source=source)
        old: list[BatchInfo] = []
        while (info := stream.next_batch()) is not None and info.magic != 2:
            old.append(info)
        parts.append(_decode_legacy(old, limit, source))
        batches += len(old)
        if old:
            next_offset = old[-1].last_offset + 1
        if info is None:
            pos = stream.position
            break
        pos = info.position
    if not parts:
        table = empty_table()
    elif len(parts) == 1:
        table = parts[0]
    else:
        table = pa.concat_tables(parts)
    return DecodedRun(table, pos, pos < end, batches, next_offset, decoded_bytes)


def _decode_legacy(entries: list[BatchInfo], limit: int, source: str | None) -> pa.Table:
    # Legacy data is read-only history, decoded per message; v2 is the hot path.
    recs = []
    for info in entries:
        try:
            recs.extend(legacy.deep_records(info.legacy_entry, max_decompressed=limit))
        except CorruptRecordError as e:
            raise e.located(source=source) from e.__cause__
    n = len(recs)
    return pa.table([
        pa.array([r.offset for r in recs], pa.int64()),
        pa.array([r.timestamp for r in recs], pa.int64()).cast(TIMESTAMP_TYPE),
        pa.array([r.timestamp_type for r in recs], pa.int32()),
        pa.array([r.key for r in recs], pa.binary()),
        pa.array([r.value for r in recs], pa.binary()),
        pa.array([[] for _ in range(n)], pa.list_(HEADER_TYPE)),
        pa.array(np.full(n, -1, np.int64)),
        pa.array(np.zeros(n, bool)),
        pa.array(np.zeros(n, bool)),
    ], schema=SCHEMA)


def check_offset_order(scan: BatchArrays, after: int, source: str | None) -> None:
    """Refuse offsets that do not increase: a batch whose lastOffsetDelta is negative or that
    starts at or below the end of the one before it (``after``: the next offset expected from
    earlier batches, -1 if none), a rule of a valid batch (docs/operations.md, "What valid
    means"). A reader of an unrecovered file raises at it rather than serve offsets twice."""
    base, delta = scan.base_offset, scan.column("last_offset_delta")
    prev_next = np.empty(len(scan), np.int64)
    prev_next[0] = after if after >= 0 else LONG_MIN
    prev_next[1:] = base[:-1] + delta[:-1] + 1
    # the next offset, last + 1, must fit a long too (as ``check_stored_batches`` rules)
    bad = np.flatnonzero((delta < 0) | (base < prev_next)
                         | (base > LONG_MAX - 1 - np.maximum(delta, 0)))
    if bad.size:
        i = int(bad[0])
        if delta[i] < 0:
            reason = f"Invalid negative lastOffsetDelta {int(delta[i])}"
        elif base[i] < prev_next[i]:
            reason = (f"batch offsets {int(base[i])}..{int(base[i]) + int(delta[i])} do not "
                      f"follow offset {int(prev_next[i]) - 1}")
        else:
            reason = f"Batch offsets {int(base[i])} + {int(delta[i])} end past the largest offset"
        raise _corrupt(reason, scan.info(i), source)


def first_bad_offset_deltas(deltas: np.ndarray, scan: BatchArrays) -> int:
    """The index of the first batch whose records' offset deltas do not increase strictly
    within ``[0, lastOffsetDelta]`` (``deltas``: every record's, the batches in order), or
    ``len(scan)``: what a valid batch holds (the validator's check). A read refuses less:
    deltas that do not increase strictly from 0 (``_kernels.record_columns``; Java's
    iterators read a delta past lastOffsetDelta as it is)."""
    counts = scan.records_count
    if not deltas.size:
        return len(scan)
    batch_of = np.repeat(np.arange(len(scan)), counts)
    starts = np.zeros(deltas.size, bool)
    starts[(np.cumsum(counts) - counts)[counts > 0]] = True
    bad = (deltas < 0) | (deltas > scan.column("last_offset_delta")[batch_of])
    bad[1:] |= ~starts[1:] & (deltas[1:] <= deltas[:-1])
    hit = np.flatnonzero(bad)
    return int(batch_of[hit[0]]) if hit.size else len(scan)


def _corrupt(reason: str, info: BatchInfo, source: str | None,
             cls: type[CorruptRecordError] = CorruptRecordError) -> CorruptRecordError:
    return cls(reason, position=info.position, source=source, offset=info.v2_header.base_offset)


_GROUP_BYTES = 1 << 20   # decompressed batches smaller than this are joined before decoding


def _decode_v2(buf: ByteBuffer, scan: BatchArrays, limit: int, source: str | None,
               max_decoded: int | None = None) -> tuple[pa.Table, int, int]:
    """Decode a run of v2 batches: ``(table, batches decoded, record bytes decoded)``, stopping
    after the batch whose record bytes reach ``max_decoded``. Uncompressed batches are read in
    place; compressed ones are decompressed and decoded in groups of about a megabyte, so each
    decompressed byte is copied once more at most (into its Arrow column), and the per-call
    overhead stays small."""
    counts, size = scan.records_count, scan.size
    codec = scan.column("attributes") & COMPRESSION_CODEC_MASK
    # refuse absurd counts before allocating per-record arrays
    bad = np.flatnonzero((counts < 0) | ((codec == 0) & (
        counts * MIN_RECORD_SIZE > size - RECORD_BATCH_OVERHEAD)))
    if bad.size:
        i = int(bad[0])
        raise _corrupt(f"Batch claims {int(counts[i])} records in "
                       f"{int(size[i]) - RECORD_BATCH_OVERHEAD} bytes of records", scan.info(i),
                       source)
    bad = np.flatnonzero(codec > max(CompressionType))
    if bad.size:                # CompressionType.forId, named with the file and position
        i = int(bad[0])
        raise _corrupt(f"Unknown compression type id {int(codec[i])}", scan.info(i), source)
    dense = np.flatnonzero(counts > max_records_per_batch(limit))
    if dense.size:
        info = scan.info(int(dense[0]))
        raise too_many_records(info.v2_header.records_count, limit, position=info.position,
                               offset=info.v2_header.base_offset, source=source)
    if not codec.any():
        record_bytes = np.cumsum(size - RECORD_BATCH_OVERHEAD)
        used = len(scan)
        if max_decoded is not None:
            used = min(used, int(np.searchsorted(record_bytes, max_decoded, "left")) + 1)
            scan = BatchArrays(scan.fields[:used], 0)
        lo = scan.position + RECORD_BATCH_OVERHEAD
        return (_decode_group(buf, scan, lo, scan.position + scan.size, source), used,
                int(record_bytes[used - 1]))
    mv = memoryview(as_buffer(buf))
    tables = []
    first = 0
    pieces: list[bytes | memoryview] = []
    total = decoded = used = 0

    def flush(upto: int) -> None:
        nonlocal first, pieces, total
        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        hi = np.cumsum([len(p) for p in pieces], dtype=np.int64)
        group = BatchArrays(scan.fields[first:upto], 0)
        tables.append(_decode_group(data, group, hi - [len(p) for p in pieces], hi, source))
        first, pieces, total = upto, [], 0

    for i, (p, s, c, n) in enumerate(zip(scan.position.tolist(), size.tolist(), codec.tolist(),
                                         counts.tolist())):
        lo, hi = p + RECORD_BATCH_OVERHEAD, p + s
        piece: bytes | memoryview
        if c:
            try:
                piece = decompress(c, mv[lo:hi], magic=2, max_size=limit)
            except CorruptRecordError as e:
                raise _corrupt(f"compressed batch: {e.reason}", scan.info(i), source,
                               type(e)) from e
            if n * MIN_RECORD_SIZE > len(piece):
                raise _corrupt(f"Batch claims {n} records in {len(piece)} bytes of records",
                               scan.info(i), source)
        else:
            piece = mv[lo:hi]
        pieces.append(piece)
        total += len(piece)
        decoded += len(piece)
        used = i + 1
        if max_decoded is not None and decoded >= max_decoded:
            break           # a fetch's bound on decoded bytes (a decompression bomb's table)
        if total >= _GROUP_BYTES:
            flush(i + 1)
    if pieces:
        flush(used)
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables), used, decoded


def _decode_group(data: ByteBuffer, scan: BatchArrays, lo: np.ndarray, hi: np.ndarray,
                  source: str | None) -> pa.Table:
    fields, keys, values = record_fields(data, scan, lo, hi, source, gather=True)
    n = fields.shape[1]
    offsets, timestamps, producer_ids = np.empty((3, n), np.int64)
    timestamp_types = np.empty(n, np.int32)
    flags = np.zeros((2, (n + 7) // 8), np.uint8)          # transactional, control: Arrow bitmaps
    header_offsets = np.empty(n + 1, np.int32)
    bad = _kernels.record_columns(scan.records_count, scan.base_offset, scan.column("base_timestamp"),
                                  scan.max_timestamp, scan.column("attributes"), scan.column("producer_id"),
                                  fields, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK, CONTROL_FLAG_MASK,
                                  offsets, timestamps, timestamp_types, producer_ids, flags[0], flags[1],
                                  header_offsets)
    if bad < len(scan):        # records served out of order or twice otherwise
        raise _corrupt("Record offset deltas of the batch do not increase", scan.info(bad),
                       source)
    return pa.Table.from_arrays([
        _fixed(offsets, pa.int64()),
        _fixed(timestamps, TIMESTAMP_TYPE),
        _fixed(timestamp_types, pa.int32()),
        keys,
        values,
        _headers_column(np.frombuffer(data, np.uint8), fields[4], fields[5], fields[6], header_offsets),
        _fixed(producer_ids, pa.int64()),
        pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(flags[0])]),
        pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(flags[1])]),
    ], schema=SCHEMA)


class RecordField(IntEnum):
    """The rows of ``record_fields``' array (``_kernels.parse_records`` writes one row per
    field of a v2 record): ``fields[RecordField.OFFSET_DELTA]`` is every record's offset delta.
    A negative key or value length is a null one."""

    TIMESTAMP_DELTA = 0
    OFFSET_DELTA = 1
    KEY_START = 2
    KEY_LENGTH = 3
    VALUE_START = 4
    VALUE_LENGTH = 5
    HEADER_COUNT = 6


@overload
def record_fields(data: ByteBuffer, scan: BatchArrays, lo: np.ndarray, hi: np.ndarray,
                  source: str | None, *, gather: Literal[False] = False) -> np.ndarray: ...


@overload
def record_fields(data: ByteBuffer, scan: BatchArrays, lo: np.ndarray, hi: np.ndarray,
                  source: str | None, *,
                  gather: Literal[True]) -> tuple[np.ndarray, pa.Array, pa.Array]: ...


def record_fields(data: ByteBuffer, scan: BatchArrays, lo: np.ndarray, hi: np.ndarray,
                  source: str | None, *,
                  gather: bool = False) -> np.ndarray | tuple[np.ndarray, pa.Array, pa.Array]:
    """Every record's fields (``_kernels.parse_records``' seven rows, named by ``RecordField``:
    ``fields[k]`` is field k of every record) of the batches in ``scan``, whose records lie at ``data[lo[i]:hi[i]]``;
    the codec's error for the first record that does not decode. With ``gather``, also the
    key and value columns, copied by the same walk: ``(fields, keys, values)``."""
    counts = scan.records_count
    n = int(counts.sum())
    arr = np.frombuffer(data, np.uint8)
    fields = np.empty((7, n), np.int64)
    if gather:
        room = int((hi - lo).sum())            # a record's key or value lies within its bytes
        big = room > INT_MAX
        offs = np.empty((2, n + 1), np.int64 if big else np.int32)
        kbuf, vbuf = pa.allocate_buffer(room), pa.allocate_buffer(room)
        kdata, vdata = np.frombuffer(kbuf, np.uint8), np.frombuffer(vbuf, np.uint8)
    else:
        offs = np.empty((2, 0), np.int32)
        kdata = vdata = np.empty(0, np.uint8)
    done, b, code = _kernels.parse_records(arr, lo, hi, counts, fields, kdata, vdata, offs)
    if code != _kernels.OK:
        del arr, kdata, vdata   # the error's traceback must not keep buf exported
        infos = [scan.info(i) for i in range(len(scan))]
        _raise_fault(data, done, b, code, counts, infos, [i.v2_header for i in infos],
                     list(zip(lo.tolist(), hi.tolist())), source)
    if not gather:
        return fields
    type_ = pa.large_binary() if big else pa.binary()
    return (fields, _binary(type_, fields[3], offs[0], kbuf),
            _binary(type_, fields[5], offs[1], vbuf))


def _binary(type_: pa.DataType, lengths: np.ndarray, offsets: np.ndarray,
            data: pa.Buffer) -> pa.Array:
    """A binary column over gathered ``data`` (its used part), null where ``lengths < 0``."""
    n = lengths.shape[0]
    nulls = lengths < 0
    null_count = int(np.count_nonzero(nulls))
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(offsets),
                                            data.slice(0, int(offsets[-1]))],
                                 null_count=null_count)


def _fixed(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    """A non-null fixed-width column over ``values``' memory (no copy; ``pa.array`` of a small
    numpy array costs far more, which is what a one-batch lookup would pay)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(values)])


def _raise_fault(data: ByteBuffer, done: int, b: int, code: int, counts: np.ndarray,
                 infos: list[BatchInfo], headers: list[BatchHeader], ranges: list[tuple[int, int]],
                 source: str | None) -> NoReturn:
    """Turn a kernel fault into Kafka's message: re-read the batch with the scalar decoder."""
    info, header, (lo, hi) = infos[b], headers[b], ranges[b]
    index = done - int(counts[:b].sum())
    if code == _kernels.PREMATURE_EOF:
        raise _corrupt(f"Got premature EOF after {index} of {header.records_count} records",
                       info, source)
    if code == _kernels.RECORDS_REMAINING:
        raise _corrupt("Incorrect declared batch size, records still remaining", info, source)
    pos = lo
    reason = "record fields do not add up to the record size"
    try:
        for _ in range(index + 1):
            _, pos = decode_record(data, pos, header, limit=hi)
    except CorruptRecordError as e:
        reason = e.reason
    raise _corrupt(f"record {index}: {reason}", info, source)


def _gather(arr: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary column of the byte ranges ``(starts[i], lengths[i])`` of ``arr`` (a negative
    length is null), copied once by the compiled kernel into an Arrow-allocated buffer."""
    n = starts.shape[0]
    offsets = np.empty(n + 1, np.int32)
    total, null_count = _kernels.span_offsets(lengths, offsets, INT_MAX)
    big = total > INT_MAX
    if big:
        offsets = np.empty(n + 1, np.int64)
        total, null_count = _kernels.span_offsets(lengths, offsets, LONG_MAX)
    data = pa.allocate_buffer(total)
    if total:
        _kernels.gather_spans(arr, starts, lengths, offsets, np.frombuffer(data, np.uint8))
    validity = (pa.py_buffer(np.packbits(lengths >= 0, bitorder="little")) if null_count
                else None)
    return pa.Array.from_buffers(pa.large_binary() if big else pa.binary(), n,
                                 [validity, pa.py_buffer(offsets), data], null_count=null_count)


def _headers_column(arr: np.ndarray, vstart: np.ndarray, vlen: np.ndarray,
                    hcount: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """The headers list column; ``offsets``: the lists' offsets (the running sum of ``hcount``)."""
    total = int(offsets[-1])
    if total == 0:
        return pa.ListArray.from_arrays(_fixed(offsets, pa.int32()), _NO_HEADERS)
    spans = np.empty((4, total), np.int64)
    _kernels.parse_headers(arr, vstart, vlen, hcount, spans)
    hk, hv = _gather(arr, spans[0], spans[1]), _gather(arr, spans[2], spans[3])
    try:
        hk = hk.cast(pa.string())
    except pa.ArrowInvalid:
        # Kafka decodes header keys leniently (malformed UTF-8 becomes U+FFFD); so do we.
        hk = pa.array([None if x is None else x.decode("utf-8", "replace") for x in hk.to_pylist()],
                      pa.string())
    return pa.ListArray.from_arrays(_fixed(offsets, pa.int32()),
                                    pa.StructArray.from_arrays([hk, hv], fields=list(HEADER_TYPE)))


# ------------------------------------------------------------------------------- encoding

def _binary_column(table: pa.Table, name: str, *, required: bool) -> pa.Array | None:
    """The column as binary or large_binary (strings are viewed as their UTF-8 bytes)."""
    if name not in table.column_names:
        if required:
            raise InvalidConfigError(f"column '{name}' is required to encode records")
        return None
    col = table.column(name)
    if isinstance(col, pa.ChunkedArray):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    t = col.type
    if pa.types.is_null(t):
        return pa.nulls(len(col), pa.binary())
    if pa.types.is_string(t):
        return col.view(pa.binary())
    if pa.types.is_large_string(t):
        return col.view(pa.large_binary())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return col
    if pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        return col.cast(pa.large_binary())
    raise InvalidConfigError(f"column '{name}' must be binary or string, not {t}")


def _timestamps(table: pa.Table, n: int, now_ms: int, rows: np.ndarray | None = None) -> np.ndarray:
    """Each record's timestamp (of ``rows`` only, when given), ``now_ms`` where it has none."""
    if "timestamp" not in table.column_names:
        return np.full(n if rows is None else len(rows), now_ms, np.int64)
    col = table.column("timestamp")
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms", tz=col.type.tz)).cast(pa.int64())
    elif not pa.types.is_integer(col.type):
        raise InvalidConfigError(f"column 'timestamp' must be a timestamp or int64 milliseconds, not {col.type}")
    ts = col.cast(pa.int64()).fill_null(now_ms).to_numpy(zero_copy_only=False)
    return ts if rows is None else ts[rows]


def _arrow_bytes(col: pa.Array | None, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, start offsets, lengths with -1 for null) of a binary or large_binary array; the
    data buffer is Arrow's own, not a copy."""
    if col is None:
        return np.zeros(1, np.uint8), np.zeros(n, np.int64), np.full(n, -1, np.int64)
    data, offs = binary_spans(col)
    offs = offs.astype(np.int64)
    lens = np.diff(offs)
    if col.null_count:
        lens = np.where(col.is_null().to_numpy(zero_copy_only=False), -1, lens)
    return data, offs[:-1], lens


class BinaryBuilder:
    """A binary column built from rows of other binary or string columns: their bytes copied
    once, by the compiled kernel, into one buffer kept from one column to the next (fresh
    memory costs a page fault per 4 KiB). ``finish`` gives the column built so far and starts
    the next; that column shares the buffer, so it is valid until the next ``extend``."""

    def __init__(self) -> None:
        self._data = np.empty(0, np.uint8)
        self._used = 0
        self._lengths: list[np.ndarray] = []    # per extend; -1 is null

    @property
    def nbytes(self) -> int:
        """Bytes of values held."""
        return self._used

    @property
    def capacity(self) -> int:
        """Bytes of the buffer kept for values (held or not)."""
        return len(self._data)

    def extend(self, col: pa.Array | pa.ChunkedArray, rows: np.ndarray | None = None) -> None:
        """Append ``col``'s values (of ``rows`` only, in that order, when given)."""
        if isinstance(col, pa.ChunkedArray):
            col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        t = col.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            col = col.view(pa.large_binary() if pa.types.is_large_string(t) else pa.binary())
        elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
            col = col.cast(pa.large_binary())
        if rows is not None and not col.null_count and len(rows):
            self._gather_rows(col, rows)
            return
        data, starts, lengths = _arrow_bytes(col, len(col))
        if rows is not None:
            starts, lengths = starts[rows], lengths[rows]
        sizes = np.maximum(lengths, 0)
        at = np.cumsum(sizes)
        end = self._used + (int(at[-1]) if len(at) else 0)
        at += self._used - sizes
        self._room(end)
        _kernels.gather_spans(data, starts, lengths, at, self._data)
        self._used = end
        self._lengths.append(lengths)

    def _room(self, end: int) -> None:
        """The buffer grown (doubling) to hold ``end`` bytes, the values held kept."""
        if end > len(self._data):
            grown = np.empty(max(end, 2 * len(self._data)), np.uint8)
            grown[:self._used] = self._data[:self._used]
            self._data = grown

    def _gather_rows(self, col: pa.Array, rows: np.ndarray) -> None:
        """``extend`` of picked rows of a column without nulls: one compiled call over the
        column's own offsets (a sink task's share of each Spark batch comes this way)."""
        data, offs = binary_spans(col)
        lengths = np.empty(len(rows), np.int64)
        end = _kernels.gather_rows(data, offs, rows, self._data, self._used, lengths)
        if end < 0:
            self._room(-end)
            end = _kernels.gather_rows(data, offs, rows, self._data, self._used, lengths)
        self._used = end
        self._lengths.append(lengths)

    def finish(self) -> pa.Array:
        """The values appended since the last ``finish`` (large_binary), valid until the next
        ``extend``; the builder is empty after."""
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)
        n = len(lengths)
        offsets = np.empty(n + 1, np.int64)
        _, null_count = _kernels.span_offsets(lengths, offsets, LONG_MAX)
        validity = (pa.py_buffer(np.packbits(lengths >= 0, bitorder="little")) if null_count
                    else None)
        col = pa.Array.from_buffers(pa.large_binary(), n,
                                    [validity, pa.py_buffer(offsets), pa.py_buffer(self._data[:self._used])],
                                    null_count=null_count)
        self._used = 0
        self._lengths = []
        return col


_Spans = tuple[np.ndarray, np.ndarray, np.ndarray]         # _arrow_bytes: data, offsets, lengths


def _header_columns(table: pa.Table, n: int, rows: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, _Spans, _Spans, np.ndarray]:
    """Per record (of ``rows`` only, when given): header count and index of its first header;
    flattened header keys and values as (data, offsets, lengths); and each record's encoded
    header bytes."""
    empty = _arrow_bytes(None, 0)
    picked = n if rows is None else len(rows)
    none = (np.zeros(picked, np.int64), np.zeros(picked, np.int64), empty, empty,
            np.zeros(picked, np.int64))
    if "headers" not in table.column_names:
        return none
    col = table.column("headers")
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_null(col.type):
        return none
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        raise InvalidConfigError(f"column 'headers' must be a list of struct<key, value>, not {col.type}")
    counts = pc.list_value_length(col).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if counts.sum() == 0:
        return none
    flat = pc.list_flatten(col)
    hk = flat.field("key")
    if hk.null_count:
        raise InvalidConfigError("column 'headers': a header key is null (Kafka requires a key)")
    m = len(flat)
    keys = _arrow_bytes(hk.cast(pa.binary()).combine_chunks() if isinstance(hk, pa.ChunkedArray)
                        else hk.cast(pa.binary()), m)
    values = _arrow_bytes(flat.field("value").cast(pa.large_binary()), m)
    kl, vl = keys[2], values[2]
    size = (varint_sizes(zigzag_array(kl, 32)) + kl + varint_sizes(zigzag_array(vl, 32))
            + np.maximum(vl, 0))
    first = np.zeros(n, np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    per_record = np.bincount(np.repeat(np.arange(n), counts), weights=size, minlength=n).astype(np.int64)
    if rows is not None:
        counts, first, per_record = counts[rows], first[rows], per_record[rows]
    return counts, first, keys, values, per_record


def encode_batches(table: pa.Table | pa.RecordBatch, *, compression: str | int = "none",
                   base_offset: int = 0, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                   producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                   transactional: bool = False, timestamp_type: int = CREATE_TIME,
                   log_append_time: int | None = None,
                   partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                   compression_level: int | None = None, now_ms: int | None = None,
                   rows: np.ndarray | None = None,
                   into: Callable[[int], np.ndarray | None] | None = None) -> memoryview:
    """Encode Arrow columns ``value`` (required), ``key``, ``timestamp`` and ``headers`` into v2
    record batches of at most ``max_batch_bytes`` (a single larger record gets a batch of its
    own, as a producer does), offsets from ``base_offset``. Missing timestamps are "now".
    ``rows``: encode only these rows of ``table``, in this order (a partition's rows picked
    out of a mixed batch without copying the table). ``into``: for uncompressed batches, asked
    for a writable uint8 array of the batches' exact size to lay them out in (a staging
    file's buffer, so they are not copied there after); None from it means "allocate".

    Returns a writable ``memoryview`` of the batches: bytes-like for files, sockets, ``==`` and
    ``bytes()``, and mutable so a log can assign offsets in place as a broker does (baseOffset is
    outside the CRC). The records are laid out in their final place; nothing is copied after."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    codec = (CompressionType.from_name(compression) if isinstance(compression, str)
             else CompressionType.from_id(int(compression)))
    if transactional and producer_id < 0:
        raise InvalidConfigError(f"Cannot write transactional messages without a valid producer ID ({producer_id})")
    if producer_id >= 0 and (producer_epoch < 0 or base_sequence < 0):
        raise InvalidConfigError(
            f"an idempotent batch needs producer_epoch >= 0 and base_sequence >= 0 "
            f"(got {producer_epoch}, {base_sequence})")
    if timestamp_type == LOG_APPEND_TIME and log_append_time is None:
        raise InvalidConfigError("timestamp_type LogAppendTime needs log_append_time")
    if max_batch_bytes < RECORD_BATCH_OVERHEAD + MIN_RECORD_SIZE:
        raise InvalidConfigError(f"max_batch_bytes {max_batch_bytes} is too small for a batch")
    n = table.num_rows if rows is None else len(rows)
    if n == 0:
        return memoryview(bytearray())
    now = wall_ms() if now_ms is None else now_ms
    total = table.num_rows
    value = _binary_column(table, "value", required=True)
    key = _binary_column(table, "key", required=False)
    kdata, koffs, klen = _arrow_bytes(key, total)
    vdata, voffs, vlen = _arrow_bytes(value, total)
    ts = _timestamps(table, total, now, rows)
    hcount, hfirst, (hkdata, hkoffs, hklen), (hvdata, hvoffs, hvlen), hbytes = _header_columns(
        table, total, rows)
    if rows is not None:
        # the records' fields are read through offsets: selecting them selects the records
        koffs, klen, voffs, vlen = (a[rows] for a in (koffs, klen, voffs, vlen))

    # Batches cut and records placed in one compiled pass (_kernels.layout_records): each
    # batch's records fit max_batch_bytes by an upper bound of their sizes.
    first = np.empty(n, np.int64)
    batch_bounds = np.empty(n + 1, np.int64)
    at, body_len, ts_delta, off_delta = (np.empty(n, np.int64) for _ in range(4))
    nb = _kernels.layout_records(klen, vlen, hcount, hbytes, ts,
                                 max_batch_bytes - RECORD_BATCH_OVERHEAD, RECORD_BATCH_OVERHEAD,
                                 first, batch_bounds, at, body_len, ts_delta, off_delta)
    first = first[:nb]
    batch_start, batch_end = batch_bounds[:nb], batch_bounds[1:nb + 1]
    counts = np.diff(np.append(first, n))
    base_ts = ts[first]
    out = into(int(batch_bounds[nb])) if into is not None and not codec else None
    if out is None:
        out = np.empty(int(batch_bounds[nb]), np.uint8)   # every byte is written below
    _kernels.write_records(out, at, body_len, ts_delta, off_delta, kdata, koffs, klen, vdata, voffs,
                           vlen, hfirst, hcount, hkdata, hkoffs, hklen, hvdata, hvoffs, hvlen)

    max_ts = np.maximum(np.maximum.reduceat(ts, first), NO_TIMESTAMP)
    if timestamp_type == LOG_APPEND_TIME:
        max_ts[:] = log_append_time
    attrs = compute_attributes(compression=int(codec), timestamp_type=timestamp_type,
                               transactional=transactional)
    mv = memoryview(as_buffer(out))
    parts: list[memoryview | bytes | bytearray] = []
    for b in range(nb):
        start, end = int(batch_start[b]), int(batch_end[b])
        lo, cnt = int(first[b]), int(counts[b])
        seq = increment_sequence(base_sequence, lo) if base_sequence >= 0 else NO_SEQUENCE
        payload: memoryview | bytes = mv[start + RECORD_BATCH_OVERHEAD:end]
        if codec:
            payload = compress(codec, payload, magic=2, level=compression_level)
            if RECORD_BATCH_OVERHEAD + len(payload) > max_batch_bytes and cnt > 1:
                # incompressible data grew past the limit: encode each half on its own
                half = cnt // 2
                for sub, sub_cnt in ((lo, half), (lo + half, cnt - half)):
                    parts.append(encode_batches(
                        table.slice(sub, sub_cnt) if rows is None else table, compression=codec,
                        base_offset=base_offset + sub,
                        max_batch_bytes=max_batch_bytes, producer_id=producer_id,
                        producer_epoch=producer_epoch,
                        base_sequence=(increment_sequence(base_sequence, sub)
                                       if base_sequence >= 0 else -1),
                        transactional=transactional, timestamp_type=timestamp_type,
                        log_append_time=log_append_time,
                        partition_leader_epoch=partition_leader_epoch,
                        compression_level=compression_level, now_ms=now,
                        rows=None if rows is None else rows[sub:sub + sub_cnt]))
                continue
            head = bytearray(RECORD_BATCH_OVERHEAD)
            target: bytearray | memoryview = head
            at_ = 0
        else:
            target, at_ = mv, start
        HEADER.pack_into(target, at_, base_offset + lo,
                         RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
                         partition_leader_epoch, 2, 0, attrs, cnt - 1, int(base_ts[b]),
                         int(max_ts[b]), producer_id, producer_epoch, seq, cnt)
        tail = memoryview(target)[at_ + ATTRIBUTES_OFFSET:at_ + RECORD_BATCH_OVERHEAD]
        struct.pack_into(">I", target, at_ + CRC_OFFSET, crc32c(payload, crc32c(tail)))
        if codec:
            parts.append(head)
            parts.append(payload)
    if not codec:
        return mv                           # headers were written in place: no copy
    return memoryview(bytearray().join(parts))

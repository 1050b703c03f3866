"""Walking a run of batches in a buffer or file (``FileLogInputStream``, ``ByteBufferLogInputStream``).

The shallow walk reads only the 17 bytes up to the magic and the batch header: it is what
recovery and index building use. The deep walk yields every record, one Python object each, for
tools and tests; Spark reads go through the columnar codec instead.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ..errors import CorruptRecordError, RecordTooLargeError, UnknownMagicError
from . import _kernels, legacy
from .buffers import ByteBuffer, as_buffer
from .batch_header import HeaderColumn
from .record_batch import (ATTRIBUTES_OFFSET, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD,
                           RECORD_BATCH_OVERHEAD, BatchHeader, Record, crc32c, decode_record,
                           ensure_valid)

_PREFIX = struct.Struct(">qib")               # offset/baseOffset, size, (skip 4) magic
MIN_ENTRY_SIZE = legacy.RECORD_OVERHEAD_V0     # 14: smallest legal size field of any magic
MIN_RECORD_SIZE = 7                            # length varint + the six one-byte fields of a v2 record
DEFAULT_MAX_MESSAGE_BYTES = 1048588            # max.message.bytes


# Largest batch read from a file, whatever its header claims: max.message.bytes, but never below
# 64 MiB. Kafka's LogSegment.recover keeps any batch whose CRC holds whatever max.message.bytes
# says now (a topic's limit can be lowered after batches were written, and a copy of a broker's
# data is often opened with default configs), so a limit as low as the default would truncate
# real data; 64 MiB is far above any batch a broker writes by default and keeps the memory a
# hostile header can cost bounded. A larger claim is corruption, found before any allocation
# (ByteBufferLogInputStream's "exceeds the largest allowable message size").
MAX_BATCH_SIZE_FLOOR = 64 << 20


def max_batch_read_size(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> int:
    """The largest size field a reader of files accepts (see ``MAX_BATCH_SIZE_FLOOR``)."""
    return max(max_message_bytes, MAX_BATCH_SIZE_FLOOR)


def default_max_decompressed(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> int:
    """Largest decompressed batch accepted before refusing it as a likely decompression bomb:
    128 x max.message.bytes (about 128 MiB by default), far above real compression ratios."""
    return 128 * max_message_bytes


# What one record costs once decoded, at the least: its Arrow columns (offset, timestamp, key,
# value and header offsets, producer id, flags: about 40 bytes) or a tool's Record object (a few
# hundred). A compressed batch's record count is checked against the decompression cap with it
# before anything is decompressed: a few megabytes of zstd can hold millions of empty records,
# each far larger decoded than its bytes.
DECODED_BYTES_PER_RECORD = 128


def max_records_per_batch(max_decompressed: int) -> int:
    """The largest record count of a batch decoded under the cap ``max_decompressed``."""
    return max_decompressed // DECODED_BYTES_PER_RECORD


def too_many_records(count: int, max_decompressed: int, *, position: int | None = None,
                     offset: int | None = None, source: str | None = None) -> RecordTooLargeError:
    return RecordTooLargeError(
        f"Batch claims {count} records, more than the {max_records_per_batch(max_decompressed)} "
        f"a batch may decode to under the decompressed size limit ({max_decompressed} bytes)",
        position=position, offset=offset, source=source)


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """A batch (v2) or shallow entry (v0/v1) found at ``position``; ``size`` includes the
    12-byte log overhead."""

    position: int
    size: int
    magic: int
    header: BatchHeader | None = None         # v2
    entry: legacy.LegacyEntry | None = None   # v0/v1

    @property
    def v2_header(self) -> BatchHeader:
        """``header``, for a caller that knows the batch is v2."""
        if self.header is None:
            raise ValueError(f"the entry at position {self.position} is magic {self.magic}, not a v2 batch")
        return self.header

    @property
    def legacy_entry(self) -> legacy.LegacyEntry:
        """``entry``, for a caller that knows the batch is magic 0 or 1."""
        if self.entry is None:
            raise ValueError(f"the batch at position {self.position} is v2, not a legacy entry")
        return self.entry

    @property
    def base_offset(self) -> int:
        """v2: the header's; legacy: the entry offset (a compressed wrapper's first inner offset
        needs decompression, as in Kafka)."""
        return self.header.base_offset if self.header is not None else self.legacy_entry.offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset if self.header is not None else self.legacy_entry.offset

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp if self.header is not None else self.legacy_entry.timestamp

    @property
    def compression(self) -> int:
        return self.header.compression if self.header is not None else self.legacy_entry.compression


class LogInputStream:
    """Shallow iteration with Kafka's end-of-data rules: fewer than 18 bytes left, or a batch
    that runs past ``end``, is the end (a file being appended to); a size field below 14 or an
    unknown magic is corruption. After iteration, ``position`` is where unread bytes begin and
    ``partial`` says whether bytes were left over."""

    def __init__(self, buf: ByteBuffer, start: int = 0, end: int | None = None, *,
                 max_batch_size: int | None = None, verify: bool = False,
                 source: str | None = None) -> None:
        self.buf = buf
        self.position = start
        self.end = len(buf) if end is None else min(end, len(buf))
        self.max_batch_size = max_batch_size
        self.verify = verify
        self.source = source

    @property
    def partial(self) -> bool:
        return self.position < self.end

    def next_batch(self) -> BatchInfo | None:
        pos, end, buf = self.position, self.end, self.buf
        if pos + HEADER_SIZE_UP_TO_MAGIC >= end:
            return None
        offset, size = struct.unpack_from(">qi", as_buffer(buf), pos)
        magic = buf[pos + 16]
        if size < MIN_ENTRY_SIZE:
            raise CorruptRecordError(
                f"Found record size {size} smaller than minimum record overhead ({MIN_ENTRY_SIZE})",
                position=pos, source=self.source)
        if self.max_batch_size is not None and size > self.max_batch_size:
            raise CorruptRecordError(
                f"Found record size {size} which exceeds the largest allowable message size "
                f"({self.max_batch_size})", position=pos, source=self.source)
        if pos > end - LOG_OVERHEAD - size:
            return None                 # as FileLogInputStream: the end before the magic
        if magic > 2 or magic < 0:
            raise UnknownMagicError(f"Invalid magic found in record: {magic}", position=pos,
                                    source=self.source, offset=offset)
        total = LOG_OVERHEAD + size
        try:
            if magic == 2:
                if total < RECORD_BATCH_OVERHEAD:
                    raise CorruptRecordError(
                        f"Record batch is corrupt (the size {total} is smaller than the minimum "
                        f"allowed overhead {RECORD_BATCH_OVERHEAD})", position=pos)
                header = (ensure_valid(buf, pos, total) if self.verify
                          else BatchHeader.parse(buf, pos))
                info = BatchInfo(pos, total, 2, header=header)
            else:
                entry = legacy.parse_entry(buf, pos, verify_crc=self.verify, end=pos + total)
                info = BatchInfo(pos, total, magic, entry=entry)
        except CorruptRecordError as e:
            raise e.located(source=self.source) from e.__cause__
        self.position = pos + total
        return info

    def __iter__(self) -> Iterator[BatchInfo]:
        while (batch := self.next_batch()) is not None:
            yield batch


def iter_batches(buf: ByteBuffer, start: int = 0, end: int | None = None,
                 **kwargs: Any) -> Iterator[BatchInfo]:
    return iter(LogInputStream(buf, start, end, **kwargs))


_COLUMNS = tuple(c.name.lower() for c in HeaderColumn)


@dataclass(frozen=True)
class BatchArrays:
    """The shallow walk of a run of v2 batches as columns: ``fields`` holds one row per batch
    (see ``_COLUMNS``; positions are in the scanned buffer). ``end`` is where the walk stopped:
    the end of the last whole batch, or the first legacy (magic 0/1) entry when
    ``legacy_at_end``."""

    fields: np.ndarray
    end: int
    legacy_at_end: bool = False

    def __len__(self) -> int:
        return self.fields.shape[0]

    def column(self, name: str | HeaderColumn) -> np.ndarray:
        """The column ``name`` (a ``HeaderColumn``, or its name in lower case) as a view: writing
        into it updates ``fields``."""
        col = name if isinstance(name, HeaderColumn) else _COLUMNS.index(name)
        return self.fields[:, col]

    @property
    def position(self) -> np.ndarray:
        return self.fields[:, HeaderColumn.POSITION]

    @property
    def size(self) -> np.ndarray:
        return self.fields[:, HeaderColumn.SIZE]

    @property
    def base_offset(self) -> np.ndarray:
        return self.fields[:, HeaderColumn.BASE_OFFSET]

    @property
    def last_offset(self) -> np.ndarray:
        return self.fields[:, HeaderColumn.BASE_OFFSET] + self.fields[:, HeaderColumn.LAST_OFFSET_DELTA]

    @property
    def max_timestamp(self) -> np.ndarray:
        return self.fields[:, HeaderColumn.MAX_TIMESTAMP]

    @property
    def records_count(self) -> np.ndarray:
        return self.fields[:, HeaderColumn.RECORDS_COUNT]

    def header(self, i: int) -> BatchHeader:
        f = self.fields[i].tolist()
        return BatchHeader(f[2], f[1] - LOG_OVERHEAD, f[3], f[4], f[5], f[6], *f[7:])

    def info(self, i: int, shift: int = 0) -> BatchInfo:
        """Batch ``i`` as ``LogInputStream`` would have yielded it (position moved by ``shift``)."""
        return BatchInfo(int(self.fields[i, 0]) + shift, int(self.fields[i, 1]), 2,
                         header=self.header(i))


_SCAN_ROWS = 1024


def scan_batches(buf: ByteBuffer, start: int = 0, end: int | None = None, *, verify: bool = False,
                 max_batch_size: int | None = None, source: str | None = None) -> BatchArrays:
    """``LogInputStream``'s shallow walk of v2 batches in one compiled pass, as columns: the same
    end-of-data rules, the same errors (a fault is re-read by ``LogInputStream`` so the message
    is exactly its own), with ``verify`` every batch's CRC-32C checked. Stops before the first
    legacy entry (``legacy_at_end``); callers that accept legacy data walk on with
    ``LogInputStream``."""
    arr = np.frombuffer(buf, np.uint8)
    end = arr.shape[0] if end is None else min(end, arr.shape[0])
    # Room for the batches the bytes can hold, grown as the walk fills it: sizing it for the
    # worst case (a batch per RECORD_BATCH_OVERHEAD bytes) allocated 7 MiB per 4 MiB read, which
    # glibc hands back to the kernel and faults in again on every read.
    worst = max(0, end - start) // RECORD_BATCH_OVERHEAD + 1
    out = np.empty((min(worst, _SCAN_ROWS), _kernels.HEADER_FIELDS), np.int64)
    limit = -1 if max_batch_size is None else max_batch_size
    n, stop, code = _kernels.scan_headers(arr, start, end, limit, out)
    while n == len(out) and code == _kernels.SCAN_END and len(out) < worst:
        grown = np.empty((min(worst, 4 * len(out)), _kernels.HEADER_FIELDS), np.int64)
        grown[:n] = out
        more, stop, code = _kernels.scan_headers(arr, stop, end, limit, grown[n:])
        out, n = grown, n + more
    del arr                 # no export of buf may outlive this call (an mmap must stay closable)
    fields = out[:n]
    if verify and n:
        mv = memoryview(as_buffer(buf)).cast("B")
        try:
            for p, s, c, cnt in zip(fields[:, HeaderColumn.POSITION].tolist(),
                                    fields[:, HeaderColumn.SIZE].tolist(),
                                    fields[:, HeaderColumn.CRC].tolist(),
                                    fields[:, HeaderColumn.RECORDS_COUNT].tolist()):
                if cnt < 0 or crc32c(mv[p + ATTRIBUTES_OFFSET:p + s]) != c:
                    try:
                        ensure_valid(buf, p, s)
                    except CorruptRecordError as e:
                        raise e.located(source=source) from e.__cause__
        finally:
            mv.release()
    if code == _kernels.SCAN_FAULT:     # after the CRCs before it, in LogInputStream's order
        LogInputStream(buf, stop, end, max_batch_size=max_batch_size, verify=verify,
                       source=source).next_batch()
        raise CorruptRecordError("Corrupt batch", position=stop, source=source)  # not reached
    return BatchArrays(fields, stop, code == _kernels.SCAN_LEGACY)


def batch_payload(buf: ByteBuffer, info: BatchInfo, *, max_decompressed: int) -> bytes | memoryview:
    """The uncompressed record bytes of a v2 batch."""
    from .compression import decompress

    mv = memoryview(as_buffer(buf))[info.position + RECORD_BATCH_OVERHEAD:info.position + info.size]
    codec = info.v2_header.compression
    if codec == 0:
        return mv
    return decompress(codec, mv, magic=2, max_size=max_decompressed)


def batch_records(buf: ByteBuffer, info: BatchInfo, *, max_decompressed: int | None = None,
                  verify: bool = True) -> list[Record]:
    """Every record of one batch (any magic), validated: CRC (a v2 batch's only with ``verify``:
    ``dump`` shows the records of a batch whose CRC is bad, as Kafka's batch iterator does),
    declared count, no leftovers."""
    limit = max_decompressed or default_max_decompressed()
    if info.magic < 2:
        return legacy.deep_records(info.legacy_entry, max_decompressed=limit)
    header = ensure_valid(buf, info.position, info.size) if verify else info.v2_header
    if header.records_count > max_records_per_batch(limit):
        raise too_many_records(header.records_count, limit, position=info.position,
                               offset=header.base_offset)
    try:
        payload = batch_payload(buf, info, max_decompressed=limit)
    except CorruptRecordError as e:
        raise type(e)(f"compressed batch: {e.reason}", position=info.position,
                      offset=header.base_offset) from e
    if header.records_count * MIN_RECORD_SIZE > len(payload):
        raise CorruptRecordError(
            f"Batch claims {header.records_count} records in {len(payload)} bytes of records",
            position=info.position, offset=header.base_offset)
    records = []
    pos = 0
    for i in range(header.records_count):
        if pos >= len(payload):
            raise CorruptRecordError(f"Got premature EOF after {i} of {header.records_count} records",
                                     position=info.position, offset=header.base_offset)
        try:
            rec, pos = decode_record(payload, pos, header)
        except CorruptRecordError as e:
            raise CorruptRecordError(f"record {i}: {e.reason}", position=info.position,
                                     offset=header.base_offset) from e
        records.append(rec)
    if pos != len(payload):
        raise CorruptRecordError("Incorrect declared batch size, records still remaining",
                                 position=info.position, offset=header.base_offset)
    return records


def iter_records(buf: ByteBuffer, start: int = 0, end: int | None = None, *, source: str | None = None,
                 max_decompressed: int | None = None) -> Iterator[tuple[BatchInfo, Record]]:
    """The deep walk: every record of every complete batch, with the batch it came from. A v2
    batch whose records' offset deltas do not increase strictly from 0 is refused, as the
    columnar read refuses it (``_kernels.record_columns``): its
    records would be served out of order or twice."""
    for info in LogInputStream(buf, start, end, verify=True, source=source):
        try:
            recs = batch_records(buf, info, max_decompressed=max_decompressed)
        except CorruptRecordError as e:
            raise e.located(source=source) from e.__cause__
        if info.magic == 2:
            base = info.v2_header.base_offset
            # offsets wrap as Java longs (base + delta): the delta is their difference mod 2**64
            deltas = [(rec.offset - base + 2**63) % 2**64 - 2**63 for rec in recs]
            if any(d < 0 for d in deltas[:1]) or any(b <= a for a, b in zip(deltas, deltas[1:])):
                raise CorruptRecordError("Record offset deltas of the batch do not increase",
                                         position=info.position, source=source, offset=base)
        for rec in recs:
            yield info, rec

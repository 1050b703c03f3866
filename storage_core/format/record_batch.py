"""Record batch v2 (Kafka's ``DefaultRecordBatch`` and ``DefaultRecord``), scalar form.

The header layout (61 bytes, big-endian)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordsCount int32

CRC-32C covers ``[21, end)``: baseOffset, length, leader epoch and magic are outside it, so a log
can assign offsets and stamp epochs without recomputing it. The columnar codec
(``columnar.py``) is the hot path; these functions serve tools, tests and single batches.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence, cast

import crc32c as _crc32c
import numpy as np

from ..common import INT_MAX, LONG_MIN
from ..errors import CorruptRecordError, UnsupportedFormatError
from .batch_header import (HEADER_SIZE_UP_TO_MAGIC, HEADER_STRUCT, LOG_OVERHEAD,  # noqa: F401
                           RECORD_BATCH_OVERHEAD, BatchField)
from .buffers import ByteBuffer, as_buffer
from .varint import (decode_varint, decode_varlong, encode_varint, encode_varlong)

HEADER = HEADER_STRUCT
CRC_OFFSET = BatchField.CRC.offset
ATTRIBUTES_OFFSET = BatchField.ATTRIBUTES.offset
MAX_TIMESTAMP_OFFSET = BatchField.MAX_TIMESTAMP.offset
MAGIC_OFFSET = BatchField.MAGIC.offset
CURRENT_MAGIC = 2

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

# TimestampType ids as Kafka's consumer reports them
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

INT32_MAX = INT_MAX               # kept: tests and producer state import it from here


# crc32c's C function takes any buffer; typed once here rather than cast per call (a hot path)
_crc32c_buffer = cast("Callable[[ByteBuffer, int], int]", _crc32c.crc32c)


def crc32c(data: ByteBuffer, value: int = 0) -> int:
    return _crc32c_buffer(data, value)


def _int64(n: int) -> int:
    """Java ``long`` arithmetic: wrap to 64 bits, as the broker (and numpy) would."""
    return ((n - LONG_MIN) % 2**64) + LONG_MIN


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: sequences wrap to 0 after Int.MAX."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def base_sequences(first_sequence: int, counts: np.ndarray) -> np.ndarray:
    """The base sequences of consecutive batches of ``counts`` records each, the first numbered
    ``first_sequence``: ``incrementSequence`` over a whole array (int64, wrapped after Int.MAX)."""
    starts = first_sequence + np.cumsum(counts) - counts
    return np.where(starts > INT32_MAX, starts - (INT32_MAX + 1), starts)


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def compute_attributes(*, compression: int = 0, timestamp_type: int = CREATE_TIME,
                       transactional: bool = False, control: bool = False,
                       delete_horizon: bool = False) -> int:
    if timestamp_type == NO_TIMESTAMP_TYPE:
        raise ValueError("Timestamp type must be provided to compute attributes for message format v2 and above")
    attrs = compression & COMPRESSION_CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    if transactional:
        attrs |= TRANSACTIONAL_FLAG_MASK
    if control:
        attrs |= CONTROL_FLAG_MASK
    if delete_horizon:
        attrs |= DELETE_HORIZON_FLAG_MASK
    return attrs


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte v2 header, decoded. ``attributes`` is the low byte Kafka reads."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: ByteBuffer, pos: int = 0) -> "BatchHeader":
        f = HEADER.unpack_from(as_buffer(buf), pos)
        return cls(f[0], f[1], f[2], f[3], f[4], f[5] & 0xFF, *f[6:])

    def pack(self) -> bytes:
        return HEADER.pack(self.base_offset, self.batch_length, self.partition_leader_epoch,
                           self.magic, self.crc, self.attributes, self.last_offset_delta,
                           self.base_timestamp, self.max_timestamp, self.producer_id,
                           self.producer_epoch, self.base_sequence, self.records_count)

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


@dataclass(frozen=True, slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp_type: int = CREATE_TIME
    sequence: int = NO_SEQUENCE
    attributes: int = 0


@dataclass(slots=True)
class RecordInput:
    """What a writer supplies for one record."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)


def encode_record_body(offset_delta: int, timestamp_delta: int, key: bytes | None,
                       value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = ()) -> bytes:
    """``DefaultRecord.writeTo`` without the leading length."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    for blob in (key, value):
        if blob is None:
            parts.append(encode_varint(-1))
        else:
            parts.append(encode_varint(len(blob)))
            parts.append(bytes(blob))
    parts.append(encode_varint(len(headers)))
    for hkey, hval in headers:
        if hkey is None:
            raise ValueError("Invalid null header key found in headers")
        kb = hkey.encode("utf-8")
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        if hval is None:
            parts.append(encode_varint(-1))
        else:
            parts.append(encode_varint(len(hval)))
            parts.append(bytes(hval))
    return b"".join(parts)


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = ()) -> bytes:
    body = encode_record_body(offset_delta, timestamp_delta, key, value, headers)
    return encode_varint(len(body)) + body


def decode_record(buf: ByteBuffer, pos: int, header: BatchHeader, limit: int | None = None) -> tuple[Record, int]:
    """``DefaultRecord.readFrom``: one record at ``pos``; returns it and the next position.

    Every length is checked against the record's declared size before use, as Kafka does, so a
    hostile length never reads outside the record."""
    end = len(buf) if limit is None else limit
    start = pos
    length, pos = decode_varint(buf, pos, limit=end)
    if length < 0:
        raise CorruptRecordError(f"Invalid record size {length}", position=start)
    body_end = pos + length
    if body_end > end:
        raise CorruptRecordError(
            f"Invalid record size: expected {length} bytes in record payload, but the record "
            f"payload has only {end - pos} bytes remaining", position=start)
    if length < 1:
        raise CorruptRecordError("record body too short for its attributes", position=start)
    attributes = buf[pos]
    pos += 1
    ts_delta, pos = decode_varlong(buf, pos, limit=body_end)
    offset_delta, pos = decode_varint(buf, pos, limit=body_end)

    def blob(pos: int, what: str) -> tuple[bytes | None, int]:
        n, pos = decode_varint(buf, pos, limit=body_end)
        if n < 0:
            return None, pos
        if pos + n > body_end:
            raise CorruptRecordError(f"Invalid {what} size {n}: it runs past the record", position=start)
        return bytes(buf[pos:pos + n]), pos + n

    key, pos = blob(pos, "key")
    value, pos = blob(pos, "value")
    num_headers, pos = decode_varint(buf, pos, limit=body_end)
    if num_headers < 0:
        raise CorruptRecordError(f"Found invalid number of record headers {num_headers}", position=start)
    if num_headers > body_end - pos:
        raise CorruptRecordError(
            f"Found invalid number of record headers {num_headers}: more than the bytes remaining",
            position=start)
    headers = []
    for _ in range(num_headers):
        klen, pos = decode_varint(buf, pos, limit=body_end)
        if klen < 0:
            raise CorruptRecordError(f"Invalid negative header key size {klen}", position=start)
        if pos + klen > body_end:
            raise CorruptRecordError(f"Invalid header key size {klen}", position=start)
        hkey = bytes(buf[pos:pos + klen]).decode("utf-8", errors="replace")
        pos += klen
        hval, pos = blob(pos, "header value")
        headers.append(Header(hkey, hval))
    if pos != body_end:
        raise CorruptRecordError(
            f"Invalid record size: expected to read {length} bytes in record payload, but instead "
            f"read {pos - (body_end - length)}", position=start)
    if header.timestamp_type == LOG_APPEND_TIME:
        timestamp = header.max_timestamp
    else:
        timestamp = _int64(header.base_timestamp + ts_delta)
    seq = (increment_sequence(header.base_sequence, offset_delta)
           if header.base_sequence >= 0 else NO_SEQUENCE)
    rec = Record(_int64(header.base_offset + offset_delta), timestamp, key, value, tuple(headers),
                 header.timestamp_type, seq, attributes)
    return rec, pos


def build_batch(records: Sequence[RecordInput], *, base_offset: int = 0, compression: int = 0,
                timestamp_type: int = CREATE_TIME, log_append_time: int | None = None,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, transactional: bool = False,
                control: bool = False, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                delete_horizon_ms: int | None = None, offset_deltas: Sequence[int] | None = None,
                compression_level: int | None = None) -> bytes:
    """A complete v2 batch, as ``MemoryRecordsBuilder`` closes it. Scalar and simple: the
    columnar ``encode_batches`` is the fast path."""
    from .compression import compress  # local: compression imports errors only

    if transactional and producer_id < 0:
        raise ValueError(f"Cannot write transactional messages without a valid producer ID ({producer_id})")
    if producer_id >= 0:
        if producer_epoch < 0:
            raise ValueError(f"Invalid negative producer epoch {producer_epoch}")
        if base_sequence < 0 and not control:
            raise ValueError(f"Invalid negative sequence number used {base_sequence}")
    if not records:
        raise ValueError("a batch needs at least one record (use write_empty_header for a cleaned batch)")
    now_ts = [r.timestamp if r.timestamp is not None else NO_TIMESTAMP for r in records]
    first_ts = now_ts[0]
    base_ts = delete_horizon_ms if delete_horizon_ms is not None else first_ts
    deltas = list(offset_deltas) if offset_deltas is not None else list(range(len(records)))
    if any(b <= a for a, b in zip(deltas, deltas[1:])) or deltas[0] < 0:
        raise ValueError("offset deltas must be non-negative and strictly increasing")
    body = b"".join(encode_record(d, ts - base_ts, r.key, r.value, tuple(r.headers))
                    for d, ts, r in zip(deltas, now_ts, records))
    max_ts = NO_TIMESTAMP
    for ts in now_ts:
        if ts > max_ts:
            max_ts = ts
    if timestamp_type == LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("LogAppendTime needs log_append_time")
        max_ts = log_append_time
    if compression:
        body = compress(compression, body, magic=2, level=compression_level)
    attrs = compute_attributes(compression=compression, timestamp_type=timestamp_type,
                               transactional=transactional, control=control,
                               delete_horizon=delete_horizon_ms is not None)
    header = BatchHeader(base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body),
                         partition_leader_epoch, 2, 0, attrs, deltas[-1], base_ts, max_ts,
                         producer_id, producer_epoch, base_sequence, len(records))
    raw = bytearray(header.pack() + body)
    struct.pack_into(">I", raw, CRC_OFFSET, crc32c(memoryview(raw)[ATTRIBUTES_OFFSET:]))
    return bytes(raw)


def write_empty_header(*, base_offset: int, last_offset: int, max_timestamp: int,
                       producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                       base_sequence: int = NO_SEQUENCE, timestamp_type: int = CREATE_TIME,
                       transactional: bool = False, control: bool = False,
                       partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """``DefaultRecordBatch.writeEmptyHeader``: a 61-byte batch with no records, as the cleaner
    leaves behind to keep producer state and offsets."""
    attrs = compute_attributes(timestamp_type=timestamp_type, transactional=transactional,
                               control=control)
    header = BatchHeader(base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD, partition_leader_epoch, 2,
                         0, attrs, last_offset - base_offset, NO_TIMESTAMP, max_timestamp,
                         producer_id, producer_epoch, base_sequence, 0)
    raw = bytearray(header.pack())
    struct.pack_into(">I", raw, CRC_OFFSET, crc32c(memoryview(raw)[ATTRIBUTES_OFFSET:]))
    return bytes(raw)


def stored_crc(buf: ByteBuffer, pos: int = 0) -> int:
    return struct.unpack_from(">I", as_buffer(buf), pos + CRC_OFFSET)[0]


def compute_crc(buf: ByteBuffer, pos: int, size: int) -> int:
    return crc32c(memoryview(as_buffer(buf))[pos + ATTRIBUTES_OFFSET:pos + size])


def ensure_valid(buf: ByteBuffer, pos: int = 0, size: int | None = None) -> BatchHeader:
    """``DefaultRecordBatch.ensureValid``: header sanity and CRC. Returns the parsed header."""
    avail = len(buf) - pos
    if avail < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"Record batch is corrupt (the size {avail} is smaller than the minimum allowed overhead "
            f"{RECORD_BATCH_OVERHEAD})", position=pos)
    header = BatchHeader.parse(buf, pos)
    if header.magic != 2:
        raise UnsupportedFormatError(f"not a v2 batch: magic {header.magic} at position {pos}")
    total = header.size_in_bytes if size is None else size
    if total < RECORD_BATCH_OVERHEAD or total > avail:
        raise CorruptRecordError(f"Record batch is corrupt (batch length {header.batch_length})",
                                 position=pos)
    actual = compute_crc(buf, pos, total)
    if actual != header.crc:
        raise CorruptRecordError(
            f"Record is corrupt (stored crc = {header.crc}, computed crc = {actual})",
            position=pos, offset=header.base_offset)
    if header.records_count < 0:
        raise CorruptRecordError(f"Found invalid record count {header.records_count} in batch",
                                 position=pos, offset=header.base_offset)
    return header


def set_last_offset(buf: bytearray, pos: int, last_offset: int) -> None:
    """``setLastOffset``: rewrite baseOffset (outside the CRC) so the batch ends at ``last_offset``."""
    last_delta = struct.unpack_from(">i", buf, pos + BatchField.LAST_OFFSET_DELTA.offset)[0]
    struct.pack_into(">q", buf, pos + BatchField.BASE_OFFSET.offset, last_offset - last_delta)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    """``setPartitionLeaderEpoch``: outside the CRC, rewritten in place."""
    struct.pack_into(">i", buf, pos + BatchField.PARTITION_LEADER_EPOCH.offset, epoch)


def set_max_timestamp(buf: bytearray, pos: int, timestamp_type: int, max_timestamp: int) -> None:
    """``setMaxTimestamp``: rewrites attributes and maxTimestamp, recomputing the CRC only if
    something changed."""
    if timestamp_type == NO_TIMESTAMP_TYPE:
        raise ValueError("Timestamp type must be provided")
    header = BatchHeader.parse(buf, pos)
    if header.max_timestamp == max_timestamp and header.timestamp_type == timestamp_type:
        return
    attrs = header.attributes & ~TIMESTAMP_TYPE_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attrs)
    struct.pack_into(">q", buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    struct.pack_into(">I", buf, pos + CRC_OFFSET, compute_crc(buf, pos, header.size_in_bytes))


def with_header(header: BatchHeader, **changes: int) -> BatchHeader:
    return replace(header, **changes)

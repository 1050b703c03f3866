"""Legacy message format, magic 0 and 1 (``LegacyRecord``, ``AbstractLegacyRecordBatch``).

Read-only for logs (Kafka 4 writes only v2); the builders here exist so tests can make the
shapes old brokers wrote. Entry layout::

    offset int64 | size int32 | crc uint32 | magic int8 | attributes int8 | [timestamp int64 (v1)]
    | keyLength int32 | key | valueLength int32 | value

CRC-32 (IEEE) covers ``[16, end)``. A compressed *wrapper* holds an inner message set in its
value; its offset is the last inner offset; inner offsets are absolute in v0, relative in v1.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Iterator, Sequence

from ..errors import CorruptRecordError, UnknownMagicError
from .buffers import ByteBuffer, as_buffer
from .record_batch import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP, NO_TIMESTAMP_TYPE, Record

RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22
LOG_OVERHEAD = 12
_PREFIX = struct.Struct(">qiIbb")          # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class LegacyEntry:
    """One shallow log entry: a plain message or a compressed wrapper."""

    offset: int
    position: int
    size: int               # bytes after the 12-byte prefix
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & 0x08 else CREATE_TIME

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.size


def parse_entry(buf: ByteBuffer, pos: int, *, verify_crc: bool = True, end: int | None = None) -> LegacyEntry:
    """The legacy entry at ``pos``; checks size, CRC and field lengths against the entry."""
    end = len(buf) if end is None else end
    if end - pos < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
        raise CorruptRecordError("legacy message truncated", position=pos)
    offset, size, crc, magic, attrs = _PREFIX.unpack_from(as_buffer(buf), pos)
    if magic not in (0, 1):
        # the magic byte is CRC-covered: a bad one is corruption as much as a newer format
        raise UnknownMagicError(f"Invalid magic found in record: {magic}", position=pos, offset=offset)
    minimum = RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1
    if size < minimum:
        raise CorruptRecordError(f"Record size {size} is less than the minimum record overhead ({minimum})",
                                 position=pos, offset=offset)
    stop = pos + LOG_OVERHEAD + size
    if stop > end:
        raise CorruptRecordError(f"legacy message of {size} bytes runs past the end of the buffer",
                                 position=pos, offset=offset)
    if verify_crc:
        actual = zlib.crc32(memoryview(as_buffer(buf))[pos + 16:stop])
        if actual != crc:
            raise CorruptRecordError(f"Record is corrupt (stored crc = {crc}, computed crc = {actual})",
                                     position=pos, offset=offset)
    p = pos + 18
    timestamp = NO_TIMESTAMP
    if magic == 1:
        timestamp = _I64.unpack_from(as_buffer(buf), p)[0]
        p += 8

    def blob(p: int, what: str) -> tuple[bytes | None, int]:
        if p + 4 > stop:
            raise CorruptRecordError(f"legacy message truncated before its {what} length", position=pos, offset=offset)
        n = _I32.unpack_from(as_buffer(buf), p)[0]
        p += 4
        if n < 0:
            return None, p
        if p + n > stop:
            raise CorruptRecordError(f"legacy message {what} of {n} bytes runs past the message",
                                     position=pos, offset=offset)
        return bytes(buf[p:p + n]), p + n

    key, p = blob(p, "key")
    value, p = blob(p, "value")
    if p != stop:
        raise CorruptRecordError(f"legacy message has {stop - p} unexpected trailing bytes",
                                 position=pos, offset=offset)
    return LegacyEntry(offset, pos, size, crc, magic, attrs, timestamp, key, value)


def iter_entries(buf: ByteBuffer, start: int = 0, end: int | None = None) -> Iterator[LegacyEntry]:
    end = len(buf) if end is None else end
    pos = start
    while pos < end:
        entry = parse_entry(buf, pos, end=end)
        yield entry
        pos += entry.size_in_bytes


def deep_records(entry: LegacyEntry, *, max_decompressed: int) -> list[Record]:
    """The records of a shallow entry: itself, or the inner messages of a compressed wrapper
    with Kafka's offset and timestamp rules (``AbstractLegacyRecordBatch.DeepRecordsIterator``)."""
    if entry.compression == 0:
        return [Record(entry.offset, entry.timestamp, entry.key, entry.value, (), entry.timestamp_type)]
    from .compression import decompress

    if entry.value is None:
        raise CorruptRecordError("Found invalid compressed record set with null value",
                                 position=entry.position, offset=entry.offset)
    try:
        inner_buf = decompress(entry.compression, entry.value, magic=entry.magic, max_size=max_decompressed)
        inner = list(iter_entries(inner_buf))
    except CorruptRecordError as e:
        raise type(e)(f"compressed wrapper message: {e.reason}", position=entry.position,
                      offset=entry.offset) from e
    if not inner:
        raise CorruptRecordError("Found invalid compressed record set with no inner records",
                                 position=entry.position, offset=entry.offset)
    for msg in inner:
        if msg.compression != 0:
            raise CorruptRecordError("Compressed message set contains a compressed inner message",
                                     position=entry.position, offset=entry.offset)
        if msg.magic != entry.magic:
            raise CorruptRecordError(f"inner message magic {msg.magic} differs from its wrapper's {entry.magic}",
                                     position=entry.position, offset=entry.offset)
    if entry.magic == 0:
        base = 0
        rel = [m.offset for m in inner]
    else:
        last_rel = inner[-1].offset
        if entry.offset == 0:      # what librdkafka wrote: treat relative offsets as absolute
            base = 0
        else:
            if entry.offset < last_rel:
                raise CorruptRecordError(
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{entry.offset}' is less than the last inner message offset '{last_rel}'",
                    position=entry.position, offset=entry.offset)
            base = entry.offset - last_rel
        rel = [m.offset for m in inner]
    out = []
    wrapper_lat = entry.magic == 1 and entry.timestamp_type == LOG_APPEND_TIME
    for m, r in zip(inner, rel):
        if entry.magic == 0:
            ts, tst = NO_TIMESTAMP, NO_TIMESTAMP_TYPE
        elif wrapper_lat:
            ts, tst = entry.timestamp, LOG_APPEND_TIME
        else:
            ts, tst = m.timestamp, CREATE_TIME
        out.append(Record(base + r, ts, m.key, m.value, (), tst))
    return out


# -- builders (tests and tools) ---------------------------------------------------------------

def build_message(offset: int, value: bytes | None, key: bytes | None = None, *, magic: int = 1,
                  timestamp: int = NO_TIMESTAMP, compression: int = 0,
                  timestamp_type: int = CREATE_TIME) -> bytes:
    """One legacy entry (``LegacyRecord.write`` plus the 12-byte log prefix)."""
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    attrs = compression & 0x07
    if magic == 1 and timestamp_type == LOG_APPEND_TIME:
        attrs |= 0x08
    body = bytearray(struct.pack(">bb", magic, attrs))
    if magic == 1:
        body += _I64.pack(timestamp)
    for blob in (key, value):
        if blob is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(blob)) + bytes(blob)
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + bytes(body)


def build_compressed(messages: Sequence[tuple[bytes | None, bytes | None, int]], *, magic: int,
                     compression: int, wrapper_offset: int, timestamp_type: int = CREATE_TIME,
                     log_append_time: int | None = None) -> bytes:
    """A compressed wrapper around ``(key, value, timestamp)`` messages, as a v0/v1 producer and
    broker wrote it: inner offsets absolute (v0, ending at ``wrapper_offset``) or 0..n-1 (v1)."""
    from .compression import compress

    n = len(messages)
    inner = b"".join(
        build_message((wrapper_offset - n + 1 + i) if magic == 0 else i, v, k, magic=magic,
                      timestamp=ts if magic == 1 else NO_TIMESTAMP)
        for i, (k, v, ts) in enumerate(messages))
    if magic == 1 and timestamp_type == LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("timestamp_type LogAppendTime needs log_append_time")
        wrapper_ts = log_append_time
    elif magic == 1:
        wrapper_ts = max(m[2] for m in messages)
    else:
        wrapper_ts = NO_TIMESTAMP
    return build_message(wrapper_offset, compress(compression, inner, magic=magic), None, magic=magic,
                         timestamp=wrapper_ts, compression=compression, timestamp_type=timestamp_type)

"""Kafka's ``RemoteLogMetadataSerde``: the values of ``__remote_log_metadata`` records.

A value is framed as ``AbstractApiMessageSerde`` writes it: ``uvarint(frame version 1)``,
``uvarint(apiKey)``, ``uvarint(version 0)``, then the message in the encoding Kafka's
``MessageDataGenerator`` generates for flexible versions (big-endian fixed-width integers, compact
strings/bytes/arrays with length + 1, a tagged-field section closing every struct and every array
element). The four messages (``storage/src/main/resources/message/*.json``):

* apiKey 0 ``RemoteLogSegmentMetadataRecord`` <-> ``RemoteLogSegmentMetadata``
  (tag 0 ``TxnIndexEmpty``, written only when true: KAFKA-16780);
* apiKey 1 ``RemoteLogSegmentMetadataUpdateRecord`` <-> ``RemoteLogSegmentMetadataUpdate``;
* apiKey 2 ``RemotePartitionDeleteMetadataRecord`` <-> ``RemotePartitionDeleteMetadata``;
* apiKey 3 ``RemoteLogSegmentMetadataSnapshotRecord`` <-> ``RemoteLogSegmentMetadataSnapshot``.

Decoding is bounded by the value: every length is checked against the bytes left before anything
is allocated, and a bad value raises ``CorruptRemoteLogMetadataError`` with the byte position.
An unknown frame version, apiKey or message version raises ``UnsupportedFormatError`` naming it.
Unknown tagged fields are skipped. The serde writes what it is given, as Kafka's does: that the
topic only ever receives apiKey 0 in state ``COPY_SEGMENT_STARTED`` (``ConsumerTask`` stops on
anything else) is the metadata manager's rule, not the serde's.
"""

from __future__ import annotations

import struct
import uuid
from os import PathLike
from typing import Any

from ..checkpoint import TopicPartition
from ..common import INT_MAX
from ..errors import UnsupportedFormatError
from .metadata import (RemoteLogMetadata, RemoteLogSegmentId, RemoteLogSegmentMetadata,
                       RemoteLogSegmentMetadataSnapshot, RemoteLogSegmentMetadataUpdate,
                       RemoteLogSegmentState, RemotePartitionDeleteMetadata,
                       RemotePartitionDeleteState, TopicIdPartition)
from ..errors import CorruptRemoteLogMetadataError, InvalidRemoteLogMetadataError

FRAME_VERSION = 1                       # AbstractApiMessageSerde.DEFAULT_FRAME_VERSION
REMOTE_LOG_SEGMENT_METADATA_API_KEY = 0
REMOTE_LOG_SEGMENT_METADATA_UPDATE_API_KEY = 1
REMOTE_PARTITION_DELETE_API_KEY = 2
REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_API_KEY = 3
MESSAGE_VERSION = 0                     # validVersions "0" of all four records
TXN_INDEX_EMPTY_TAG = 0

API_KEY_NAMES = {
    REMOTE_LOG_SEGMENT_METADATA_API_KEY: "RemoteLogSegmentMetadataRecord",
    REMOTE_LOG_SEGMENT_METADATA_UPDATE_API_KEY: "RemoteLogSegmentMetadataUpdateRecord",
    REMOTE_PARTITION_DELETE_API_KEY: "RemotePartitionDeleteMetadataRecord",
    REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_API_KEY: "RemoteLogSegmentMetadataSnapshotRecord",
}

_I8, _I32, _I64 = struct.Struct(">b"), struct.Struct(">i"), struct.Struct(">q")
_MAX_STRING = 0x7FFF                    # generated readers refuse longer strings


# ----------------------------------------------------------------------------------- writing

class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def uvarint(self, value: int) -> None:
        value &= 0xFFFFFFFF
        while value >= 0x80:
            self.buf.append((value & 0x7F) | 0x80)
            value >>= 7
        self.buf.append(value)

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes                 # Uuid: most significant long, then least, big-endian

    def string(self, v: str) -> None:
        raw = v.encode("utf-8")
        if len(raw) > _MAX_STRING:
            raise InvalidRemoteLogMetadataError(f"'{v[:40]}...' is longer than {_MAX_STRING} bytes")
        self.uvarint(len(raw) + 1)
        self.buf += raw

    def nullable_bytes(self, v: bytes | None) -> None:
        if v is None:
            self.uvarint(0)
        else:
            self.uvarint(len(v) + 1)
            self.buf += v

    def no_tags(self) -> None:
        self.uvarint(0)


def _write_topic_id_partition(w: _Writer, tip: TopicIdPartition) -> None:
    # TopicIdPartitionEntry {Name string, Id uuid, Partition int32}
    w.string(tip.topic)
    w.uuid(tip.topic_id)
    w.int32(tip.partition)
    w.no_tags()


def _write_segment_id(w: _Writer, sid: RemoteLogSegmentId) -> None:
    # RemoteLogSegmentIdEntry {TopicIdPartition, Id uuid}
    _write_topic_id_partition(w, sid.topic_id_partition)
    w.uuid(sid.id)
    w.no_tags()


def _write_segment_body(w: _Writer, m: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataSnapshot) -> None:
    """The fields records 0 and 3 share after the id: StartOffset .. RemoteLogSegmentState and
    tag 0 TxnIndexEmpty (written only when true, the tagged default being false)."""
    w.int64(m.start_offset)
    w.int64(m.end_offset)
    w.int32(m.broker_id)
    w.int64(m.max_timestamp_ms)
    w.int64(m.event_timestamp_ms)
    w.uvarint(len(m.segment_leader_epochs) + 1)
    for epoch, offset in m.segment_leader_epochs:        # SegmentLeaderEpochEntry, ascending
        w.int32(epoch)
        w.int64(offset)
        w.no_tags()
    w.int32(m.segment_size_in_bytes)
    w.nullable_bytes(m.custom_metadata)
    w.int8(m.state.id)
    if m.txn_idx_empty:
        w.uvarint(1)
        w.uvarint(TXN_INDEX_EMPTY_TAG)
        w.uvarint(1)
        w.int8(1)
    else:
        w.no_tags()


def serialize(metadata: RemoteLogMetadata) -> bytes:
    """``RemoteLogMetadataSerde.serialize``: the framed record value of ``metadata``."""
    w = _Writer()
    w.uvarint(FRAME_VERSION)
    if isinstance(metadata, RemoteLogSegmentMetadata):
        w.uvarint(REMOTE_LOG_SEGMENT_METADATA_API_KEY)
        w.uvarint(MESSAGE_VERSION)
        _write_segment_id(w, metadata.remote_log_segment_id)
        _write_segment_body(w, metadata)
    elif isinstance(metadata, RemoteLogSegmentMetadataUpdate):
        w.uvarint(REMOTE_LOG_SEGMENT_METADATA_UPDATE_API_KEY)
        w.uvarint(MESSAGE_VERSION)
        _write_segment_id(w, metadata.remote_log_segment_id)
        w.int32(metadata.broker_id)
        w.int64(metadata.event_timestamp_ms)
        w.nullable_bytes(metadata.custom_metadata)
        w.int8(metadata.state.id)
        w.no_tags()
    elif isinstance(metadata, RemotePartitionDeleteMetadata):
        w.uvarint(REMOTE_PARTITION_DELETE_API_KEY)
        w.uvarint(MESSAGE_VERSION)
        _write_topic_id_partition(w, metadata.topic_id_partition)
        w.int32(metadata.broker_id)
        w.int64(metadata.event_timestamp_ms)
        w.int8(metadata.state.id)
        w.no_tags()
    elif isinstance(metadata, RemoteLogSegmentMetadataSnapshot):
        w.uvarint(REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_API_KEY)
        w.uvarint(MESSAGE_VERSION)
        w.uuid(metadata.segment_id)
        _write_segment_body(w, metadata)
    else:
        raise InvalidRemoteLogMetadataError(
            f"RemoteLogMetadataSerde cannot serialize {type(metadata).__name__}: {metadata!r}")
    return bytes(w.buf)


# ----------------------------------------------------------------------------------- reading

class _Reader:
    """Bounded reads over one value; every error names the byte position."""

    __slots__ = ("buf", "pos", "source")

    def __init__(self, data: bytes | bytearray | memoryview, source: str | PathLike[str] | None) -> None:
        self.buf = memoryview(data).cast("B")
        self.pos = 0
        self.source = source

    def corrupt(self, reason: str, position: int | None = None) -> CorruptRemoteLogMetadataError:
        return CorruptRemoteLogMetadataError(reason, position=self.pos if position is None else position,
                                             source=self.source)

    def take(self, n: int, what: str) -> memoryview:
        if n > len(self.buf) - self.pos:
            raise self.corrupt(f"{what} needs {n} bytes but the value has {len(self.buf) - self.pos} left")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def uvarint(self, what: str) -> int:
        """``ByteUtils.readUnsignedVarint``: at most 5 bytes, an unsigned 32-bit value."""
        start, value, shift = self.pos, 0, 0
        while True:
            if self.pos >= len(self.buf):
                raise self.corrupt(f"{what}: the value ends inside a varint", start)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise self.corrupt(f"{what}: varint longer than 5 bytes", start)
        if value > 0xFFFFFFFF:
            raise self.corrupt(f"{what}: varint above 32 bits", start)
        return value

    def int8(self, what: str) -> int:
        return _I8.unpack(self.take(1, what))[0]

    def int32(self, what: str) -> int:
        return _I32.unpack(self.take(4, what))[0]

    def int64(self, what: str) -> int:
        return _I64.unpack(self.take(8, what))[0]

    def uuid(self, what: str) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.take(16, what)))

    def _length(self, what: str) -> int:
        """A compact length (stored + 1): -1 for null."""
        start = self.pos
        n = self.uvarint(what)
        if n > INT_MAX:
            raise self.corrupt(f"{what}: length {n - 1} is not a Java int", start)
        return n - 1

    def string(self, what: str) -> str:
        start = self.pos
        n = self._length(what)
        if n < 0:
            raise self.corrupt(f"non-nullable field {what} was serialized as null", start)
        if n > _MAX_STRING:
            raise self.corrupt(f"string field {what} had invalid length {n}", start)
        raw = self.take(n, what)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise self.corrupt(f"{what} is not UTF-8: {e.reason}", start) from None

    def nullable_bytes(self, what: str) -> bytes | None:
        n = self._length(what)
        return None if n < 0 else bytes(self.take(n, what))

    def array_length(self, what: str) -> int:
        start = self.pos
        n = self._length(what)
        if n < 0:
            raise self.corrupt(f"non-nullable field {what} was serialized as null", start)
        if n > len(self.buf) - self.pos:
            raise self.corrupt(f"{what} claims {n} elements but the value has {len(self.buf) - self.pos} bytes left",
                               start)
        return n

    def tagged_fields(self, what: str, known: dict | None = None) -> dict[int, object]:
        """A tagged-field section: ascending tags, each ``uvarint(tag) uvarint(size) value``.
        ``known`` maps a tag to its reader; other tags are skipped."""
        found: dict[int, object] = {}
        count = self.uvarint(f"{what} tagged field count")
        prev = -1
        for _ in range(count):
            start = self.pos
            tag = self.uvarint(f"{what} tag")
            if tag <= prev:
                raise self.corrupt(f"{what}: tag {tag} after tag {prev} (tags must be ascending)", start)
            prev = tag
            size = self.uvarint(f"{what} tag {tag} size")     # a plain uvarint, not +1
            if size > len(self.buf) - self.pos:
                raise self.corrupt(f"{what} tag {tag} claims {size} bytes but the value has "
                                   f"{len(self.buf) - self.pos} left", start)
            if known and tag in known:
                body_start = self.pos
                found[tag] = known[tag](self, size)
                if self.pos - body_start != size:
                    raise self.corrupt(f"{what} tag {tag}: size {size} does not match its field", start)
            else:
                self.take(size, f"{what} unknown tag {tag}")
        return found


def _read_topic_id_partition(r: _Reader) -> TopicIdPartition:
    name = r.string("TopicIdPartition.Name")
    topic_id = r.uuid("TopicIdPartition.Id")
    partition = r.int32("TopicIdPartition.Partition")
    r.tagged_fields("TopicIdPartitionEntry")
    return TopicIdPartition(topic_id, TopicPartition(name, partition))


def _read_segment_id(r: _Reader) -> RemoteLogSegmentId:
    tip = _read_topic_id_partition(r)
    sid = r.uuid("RemoteLogSegmentId.Id")
    r.tagged_fields("RemoteLogSegmentIdEntry")
    return RemoteLogSegmentId(tip, sid)


def _read_bool_tag(r: _Reader, size: int) -> bool:
    return r.int8("TxnIndexEmpty") != 0


def _read_segment_body(r: _Reader, record: str) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "start_offset": r.int64("StartOffset"),
        "end_offset": r.int64("EndOffset"),
        "broker_id": r.int32("BrokerId"),
        "max_timestamp_ms": r.int64("MaxTimestampMs"),
        "event_timestamp_ms": r.int64("EventTimestampMs"),
    }
    epochs = []
    for _ in range(r.array_length("SegmentLeaderEpochs")):
        epoch = r.int32("SegmentLeaderEpochEntry.LeaderEpoch")
        offset = r.int64("SegmentLeaderEpochEntry.Offset")
        r.tagged_fields("SegmentLeaderEpochEntry")
        epochs.append((epoch, offset))
    fields["segment_leader_epochs"] = epochs
    fields["segment_size_in_bytes"] = r.int32("SegmentSizeInBytes")
    fields["custom_metadata"] = r.nullable_bytes("CustomMetadata")
    fields["state"] = _segment_state(r, r.int8("RemoteLogSegmentState"))
    tags = r.tagged_fields(record, {TXN_INDEX_EMPTY_TAG: _read_bool_tag})
    fields["txn_idx_empty"] = bool(tags.get(TXN_INDEX_EMPTY_TAG, False))
    return fields


def _segment_state(r: _Reader, state_id: int) -> RemoteLogSegmentState:
    try:
        return RemoteLogSegmentState.for_id(state_id)
    except InvalidRemoteLogMetadataError as e:
        raise r.corrupt(str(e), r.pos - 1) from None


def deserialize(data: bytes | bytearray | memoryview, *,
                source: str | PathLike[str] | None = None) -> RemoteLogMetadata:
    """``RemoteLogMetadataSerde.deserialize``: the metadata object of one record value.
    ``source`` (a file, a partition and offset) is named in errors."""
    if data is None:
        raise CorruptRemoteLogMetadataError("a null record value is not remote log metadata", source=source)
    r = _Reader(data, source)
    frame = r.uvarint("frame version")
    if frame != FRAME_VERSION:
        raise UnsupportedFormatError(f"Could not deserialize metadata record due to unknown frame version {frame} "
                                     f"(expected {FRAME_VERSION}){_where(source)}")
    api_key = r.uvarint("apiKey")
    version = r.uvarint("version")
    name = API_KEY_NAMES.get(api_key)
    if name is None:
        raise UnsupportedFormatError(f"Unknown remote log metadata apiKey {api_key} (known: "
                                     f"{', '.join(f'{k} {v}' for k, v in API_KEY_NAMES.items())}){_where(source)}")
    if version != MESSAGE_VERSION:
        raise UnsupportedFormatError(f"Unsupported {name} (apiKey {api_key}) version {version}: "
                                     f"only version {MESSAGE_VERSION} is known{_where(source)}")
    result: RemoteLogMetadata
    try:
        if api_key == REMOTE_LOG_SEGMENT_METADATA_API_KEY:
            sid = _read_segment_id(r)
            result = RemoteLogSegmentMetadata(sid, **_read_segment_body(r, name))
        elif api_key == REMOTE_LOG_SEGMENT_METADATA_UPDATE_API_KEY:
            sid = _read_segment_id(r)
            broker_id = r.int32("BrokerId")
            event_ts = r.int64("EventTimestampMs")
            custom = r.nullable_bytes("CustomMetadata")
            state = _segment_state(r, r.int8("RemoteLogSegmentState"))
            r.tagged_fields(name)
            result = RemoteLogSegmentMetadataUpdate(sid, event_ts, custom, state, broker_id)
        elif api_key == REMOTE_PARTITION_DELETE_API_KEY:
            tip = _read_topic_id_partition(r)
            broker_id = r.int32("BrokerId")
            event_ts = r.int64("EventTimestampMs")
            state_pos = r.pos
            state_id = r.int8("RemotePartitionDeleteState")
            try:
                delete_state = RemotePartitionDeleteState.for_id(state_id)
            except InvalidRemoteLogMetadataError as e:
                raise r.corrupt(str(e), state_pos) from None
            r.tagged_fields(name)
            result = RemotePartitionDeleteMetadata(tip, delete_state, event_ts, broker_id)
        else:
            segment_id = r.uuid("SegmentId")
            result = RemoteLogSegmentMetadataSnapshot(segment_id, **_read_segment_body(r, name))
    except InvalidRemoteLogMetadataError as e:
        # well-formed bytes that Kafka's constructors refuse (e.g. no leader epochs)
        raise CorruptRemoteLogMetadataError(f"{name}: {e}", position=r.pos, source=source) from None
    if r.pos != len(r.buf):
        raise r.corrupt(f"{len(r.buf) - r.pos} trailing bytes after {name}")
    return result


def _where(source: str | PathLike[str] | None) -> str:
    return "" if source is None else f" ({source})"


class RemoteLogMetadataSerde:
    """Kafka's ``RemoteLogMetadataSerde`` as an object (``serialize``/``deserialize``), for code
    written against Kafka's interface."""

    def serialize(self, metadata: RemoteLogMetadata) -> bytes:
        return serialize(metadata)

    def deserialize(self, data: bytes | bytearray | memoryview, *,
                    source: str | PathLike[str] | None = None) -> RemoteLogMetadata:
        return deserialize(data, source=source)

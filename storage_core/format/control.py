"""Control records (``ControlRecordType``, ``EndTransactionMarker``): transaction markers.

A control batch has attribute bit 5 set and (normally) one record whose key is
``int16 version, int16 type`` and, for COMMIT/ABORT, whose value is
``int16 version, int32 coordinatorEpoch``. Consumers never return them; the log uses them to
close transactions.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from ..errors import CorruptRecordError
from .record_batch import (CREATE_TIME, NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE, RecordInput,
                           build_batch)

CURRENT_CONTROL_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")
_END_TXN = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    def record_key(self) -> bytes:
        if self is ControlRecordType.UNKNOWN:
            raise ValueError("Cannot serialize UNKNOWN control record type")
        return _KEY.pack(CURRENT_CONTROL_KEY_VERSION, int(self))

    @classmethod
    def parse(cls, key: bytes | None) -> "ControlRecordType":
        """Kafka's ``ControlRecordType.parse``: versions above 0 are read as v0 (extra bytes
        ignored); an unknown type is UNKNOWN; a short key or negative version is invalid."""
        type_id = control_key_type_id(key)
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN


def control_key_type_id(key: bytes | None) -> int:
    """The int16 type field of a control record key (``version int16, type int16``, Kafka's
    ``ControlRecordType`` key schema), checked as ``ControlRecordType.parse`` checks it; unlike
    ``parse`` an unknown type keeps its number (``DumpLogSegments`` prints it)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(
            f"Invalid value size found for control record key: {0 if key is None else len(key)}")
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"Invalid version found for control record: {version}. "
                                 "May indicate data corruption")
    return int(type_id)


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: ControlRecordType
    coordinator_epoch: int

    def __post_init__(self) -> None:
        if self.control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise ValueError(f"Invalid control record type for end transaction marker: {self.control_type!r}")

    def value(self) -> bytes:
        return _END_TXN.pack(CURRENT_END_TXN_MARKER_VERSION, self.coordinator_epoch)

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> "EndTransactionMarker":
        control_type = ControlRecordType.parse(key)
        if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise ValueError(f"Invalid control record type for end transaction marker: {control_type!r}")
        if value is None or len(value) < _END_TXN.size:
            raise CorruptRecordError(
                f"Invalid value size found for end transaction marker: {0 if value is None else len(value)}")
        version, epoch = _END_TXN.unpack_from(value, 0)
        if version < 0:
            raise CorruptRecordError(f"Invalid version found for end transaction marker: {version}. "
                                     "May indicate data corruption")
        return cls(control_type, epoch)


def end_transaction_marker_batch(marker: EndTransactionMarker, *, offset: int, timestamp: int,
                                 producer_id: int, producer_epoch: int,
                                 partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """``MemoryRecords.withEndTransactionMarker``: the 78-byte control batch (attributes 0x30)."""
    return build_batch([RecordInput(marker.value(), marker.control_type.record_key(), timestamp)],
                       base_offset=offset, timestamp_type=CREATE_TIME, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                       transactional=True, control=True,
                       partition_leader_epoch=partition_leader_epoch)

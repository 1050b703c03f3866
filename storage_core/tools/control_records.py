"""How ``kafkalog dump`` renders a control record: transaction markers by type and coordinator
epoch, KRaft control records (``SnapshotHeader``, ``KRaftVersion``, ``KRaftVoters``, ...) as
Kafka's ``*JsonConverter.write`` prints them, anything else by its ``ControlRecordType``."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any, Callable

from ..format import ControlRecordType, EndTransactionMarker, Record, control_key_type_id


class FlexibleReader:
    """Just enough of Kafka's flexible message format for the KRaft control records."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("message truncated")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def uint16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise ValueError("null string")
        return self.take(n).decode("utf-8")

    def uuid(self) -> str:
        return base64.urlsafe_b64encode(self.take(16)).rstrip(b"=").decode("ascii")

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def compact_array(self, item: Callable[[], Any]) -> list[Any]:
        n = self.uvarint() - 1
        if n < 0:
            raise ValueError("null array")
        return [item() for _ in range(n)]


def kraft_control_json(ctype: ControlRecordType, value: bytes | None) -> str:
    """The ``*JsonConverter.write`` output (Jackson, compact) of a KRaft control record."""
    r = FlexibleReader(value or b"")
    obj: dict[str, Any] = {"version": r.int16()}
    if ctype is ControlRecordType.SNAPSHOT_HEADER:
        obj["lastContainedLogTimestamp"] = r.int64()
    elif ctype is ControlRecordType.KRAFT_VERSION:
        obj["kRaftVersion"] = r.int16()
    elif ctype is ControlRecordType.KRAFT_VOTERS:
        def endpoint() -> dict[str, Any]:
            e = {"name": r.compact_string(), "host": r.compact_string(), "port": r.uint16()}
            r.tags()
            return e

        def voter() -> dict[str, Any]:
            v: dict[str, Any] = {"voterId": r.int32(), "voterDirectoryId": r.uuid(),
                                 "endpoints": r.compact_array(endpoint)}
            feature = {"minSupportedVersion": r.int16(), "maxSupportedVersion": r.int16()}
            r.tags()
            v["kRaftVersionFeature"] = feature
            r.tags()
            return v

        obj["voters"] = r.compact_array(voter)
    r.tags()
    return json.dumps(obj, separators=(",", ":"))


_KRAFT_LABEL = {ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
                ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
                ControlRecordType.KRAFT_VERSION: "KRaftVersion",
                ControlRecordType.KRAFT_VOTERS: "KRaftVoters"}


def control_fields(r: Record) -> tuple[str, dict[str, Any]]:
    """What DumpLogSegments appends to a control record's line, and the same as JSON fields."""
    ctype = ControlRecordType.parse(r.key)          # checks the key's size and version
    type_id = control_key_type_id(r.key)
    if ctype in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        m = EndTransactionMarker.deserialize(r.key, r.value)
        return (f" endTxnMarker: {ctype.name} coordinatorEpoch: {m.coordinator_epoch}",
                {"endTxnMarker": ctype.name, "coordinatorEpoch": m.coordinator_epoch})
    if ctype in _KRAFT_LABEL:
        try:
            text = kraft_control_json(ctype, r.value)
            return f" {_KRAFT_LABEL[ctype]} {text}", {_KRAFT_LABEL[ctype]: json.loads(text)}
        except (ValueError, UnicodeDecodeError):
            pass                                     # unreadable: shown by its type, as below
    return (f" controlType: {ctype.name}({type_id})",
            {"controlType": ctype.name, "controlTypeId": type_id})



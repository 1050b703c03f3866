"""Every field of a v2 record batch header, named once: its byte offset and width, derived from
the header's struct, and the column each field has in the header arrays the kernels return.

Kafka's ``DefaultRecordBatch`` types the offsets in (``BASE_OFFSET_OFFSET = 0``, ``CRC_OFFSET =
17``, ...); here they follow from the field order and struct codes, as in kafka-python's
``kafka/record/default_records.py``. Code outside ``storage_core.format`` names a field
(``BatchField.BASE_SEQUENCE``, ``HeaderColumn.MAX_TIMESTAMP``) and never a byte position.
"""

from __future__ import annotations

import struct
from enum import Enum, IntEnum

import numpy as np
import numpy.typing as npt


class BatchField(Enum):
    """The fields of ``DefaultRecordBatch``'s header in on-disk order, each with its struct code
    (big-endian). ``offset``, ``size`` and ``dtype`` are computed from the code and the order."""

    BASE_OFFSET = "q"
    LENGTH = "i"
    PARTITION_LEADER_EPOCH = "i"
    MAGIC = "b"
    CRC = "I"
    ATTRIBUTES = "h"
    LAST_OFFSET_DELTA = "i"
    BASE_TIMESTAMP = "q"
    MAX_TIMESTAMP = "q"
    PRODUCER_ID = "q"
    PRODUCER_EPOCH = "h"
    BASE_SEQUENCE = "i"
    RECORDS_COUNT = "i"

    code: str                   # the struct code
    offset: int                 # byte offset of the field from the start of the batch
    size: int                   # its width in bytes
    dtype: np.dtype             # its big-endian numpy dtype as stored

    def __new__(cls, code: str) -> "BatchField":
        # Enum would merge members with equal values: make each value unique by position; the
        # offset, width and dtype are plain attributes (patch_field runs on every append)
        obj = object.__new__(cls)
        obj._value_ = len(cls.__members__)
        obj.code = code
        obj.offset = sum(m.size for m in cls.__members__.values())
        obj.size = struct.calcsize(">" + code)
        obj.dtype = np.dtype(">" + {"q": "i8", "i": "i4", "I": "u4", "h": "i2", "b": "i1"}[code])
        return obj


HEADER_STRUCT = struct.Struct(">" + "".join(f.code for f in BatchField))
RECORD_BATCH_OVERHEAD = HEADER_STRUCT.size                  # 61: DefaultRecordBatch.RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = BatchField.PARTITION_LEADER_EPOCH.offset       # 12: offset + length, every magic's prefix
HEADER_SIZE_UP_TO_MAGIC = BatchField.MAGIC.offset + BatchField.MAGIC.size               # 17
CRC_START = BatchField.ATTRIBUTES.offset                     # the CRC covers attributes to the end
assert RECORD_BATCH_OVERHEAD == BatchField.RECORDS_COUNT.offset + BatchField.RECORDS_COUNT.size == 61
assert LOG_OVERHEAD == 12


class HeaderColumn(IntEnum):
    """Columns of the ``(n, 14)`` int64 arrays the batch scan returns (``BatchArrays.fields``):
    where a batch starts in the scanned buffer and its whole size, then the header fields other
    than ``LENGTH`` in on-disk order."""

    POSITION = 0
    SIZE = 1
    BASE_OFFSET = 2
    PARTITION_LEADER_EPOCH = 3
    MAGIC = 4
    CRC = 5
    ATTRIBUTES = 6
    LAST_OFFSET_DELTA = 7
    BASE_TIMESTAMP = 8
    MAX_TIMESTAMP = 9
    PRODUCER_ID = 10
    PRODUCER_EPOCH = 11
    BASE_SEQUENCE = 12
    RECORDS_COUNT = 13

    @property
    def field(self) -> BatchField | None:
        """The header field the column holds (None for ``POSITION`` and ``SIZE``)."""
        return BatchField[self.name] if self.name in BatchField.__members__ else None


def patch_field(buf: bytearray | memoryview | np.ndarray, positions: np.ndarray, field: BatchField,
                values: np.ndarray | int) -> None:
    """Write ``values`` (one per batch, or one for all) into ``field`` of the batches starting at
    ``positions`` of ``buf``, in place, without touching the CRC (the caller recomputes or patches
    it: ``crc_patch``). One numpy scatter over all batches."""
    positions = np.asarray(positions, dtype=np.int64)
    if not len(positions):
        return
    raw = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf.view(np.uint8)
    width = field.size
    vals = np.asarray(values)
    vals = (np.full(len(positions), vals, field.dtype) if vals.ndim == 0
            else vals.astype(field.dtype, copy=False))
    raw[(positions + field.offset)[:, None] + np.arange(width)] = vals.view(np.uint8).reshape(-1, width)


def read_field(buf: bytes | bytearray | memoryview | np.ndarray, positions: npt.ArrayLike,
               field: BatchField) -> np.ndarray:
    """``field`` of the batches starting at ``positions`` of ``buf``, as int64."""
    positions = np.asarray(positions, dtype=np.int64)
    raw = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf.view(np.uint8)
    width = field.size
    cells = raw[(positions + field.offset)[:, None] + np.arange(width)]
    return np.ascontiguousarray(cells).view(field.dtype).reshape(-1).astype(np.int64)

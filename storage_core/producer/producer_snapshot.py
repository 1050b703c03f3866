"""Producer-state snapshot files, ``<offset:020d>.snapshot`` (Kafka's ``ProducerSnapshot``).

The bytes of Kafka's ``ProducerStateManager.writeSnapshot`` / ``readSnapshot`` (3.x hand-written
``Struct`` schema and trunk's generated ``ProducerSnapshot`` v1 are identical)::

    int16 version = 1 | uint32 crc | int32 count | count x 46-byte entry

    entry: int64 producerId | int16 epoch | int32 lastSequence | int64 lastOffset |
           int32 offsetDelta | int64 timestamp | int32 coordinatorEpoch |
           int64 currentTxnFirstOffset

The CRC is CRC-32C over ``[6, EOF)``: the entry count and the entries, not the version or the
CRC itself. The number in the file name is the producer-state map end offset (exclusive).

This module is the file format only; which snapshots to take, keep or delete is the producer
state manager's business.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Iterable, NamedTuple

import crc32c

from ..checkpoint import atomic_write
from ..common import LONG_MAX
from ..data_files import filename_prefix, open_regular_file
from ..errors import CorruptSnapshotError
from ..format.record_batch import decrement_sequence

PRODUCER_SNAPSHOT_VERSION = 1          # ProducerStateManager.PRODUCER_SNAPSHOT_VERSION
SNAPSHOT_SUFFIX = ".snapshot"          # LogFileUtils.PRODUCER_SNAPSHOT_FILE_SUFFIX
CRC_OFFSET = 2
ENTRIES_OFFSET = 6                     # PRODUCER_ENTRIES_OFFSET: where the CRC starts covering

_HEADER = struct.Struct(">hIi")        # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
HEADER_SIZE = _HEADER.size             # 10
ENTRY_SIZE = _ENTRY.size               # 46

_SNAPSHOT_NAME = re.compile(r"([0-9]+)" + re.escape(SNAPSHOT_SUFFIX))

_BITS = {"producer_id": 64, "producer_epoch": 16, "last_sequence": 32, "last_offset": 64,
         "offset_delta": 32, "timestamp": 64, "coordinator_epoch": 32,
         "current_txn_first_offset": 64}


class SnapshotHeader(NamedTuple):
    """The fixed header of a snapshot file: ``int16 version | uint32 crc | int32 count``."""

    version: int
    crc: int
    entry_count: int


def read_snapshot_header(buf: bytes | bytearray | memoryview) -> SnapshotHeader | None:
    """The header fields of a snapshot, or None when ``buf`` is shorter than the header. Checks
    nothing else (``decode_snapshot`` does): a tool uses it to say where a bad file goes wrong."""
    if len(buf) < HEADER_SIZE:
        return None
    return SnapshotHeader(*_HEADER.unpack_from(buf, 0))


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer in a snapshot, in file order. The defaults are those of a producer with no
    batch yet (``ProducerStateEntry.empty``): no sequence, offset or timestamp, no coordinator
    epoch, no open transaction."""

    producer_id: int
    producer_epoch: int
    last_sequence: int = -1             # last sequence of the producer's last data batch
    last_offset: int = -1               # last offset of that batch
    offset_delta: int = 0               # lastOffset - firstOffset of that batch
    timestamp: int = -1                 # max timestamp of that batch, or of the last marker
    coordinator_epoch: int = -1         # from the last transaction marker
    current_txn_first_offset: int = -1  # first offset of the open transaction

    def __post_init__(self) -> None:
        for name, bits in _BITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if not -(1 << bits - 1) <= value < (1 << bits - 1):
                raise ValueError(f"{name} {value} does not fit in a signed {bits}-bit integer")

    @property
    def has_batch_metadata(self) -> bool:
        """Kafka rebuilds a ``BatchMetadata`` from the entry only when ``lastOffset >= 0``."""
        return self.last_offset >= 0

    @property
    def first_offset(self) -> int:
        """First offset of the last batch (``BatchMetadata.firstOffset``); -1 without a batch."""
        return self.last_offset - self.offset_delta if self.has_batch_metadata else -1

    @property
    def first_sequence(self) -> int:
        """First sequence of the last batch, wrapping below 0 as Kafka's sequences do."""
        if not self.has_batch_metadata or self.last_sequence < 0:
            return -1
        return decrement_sequence(self.last_sequence, self.offset_delta)


def encode_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """The file bytes for ``entries``, written in the order given (Kafka writes its HashMap's
    order, so any order is valid; keeping file order reproduces a broker's file exactly)."""
    entries = list(entries)
    buf = bytearray(HEADER_SIZE + ENTRY_SIZE * len(entries))
    _HEADER.pack_into(buf, 0, PRODUCER_SNAPSHOT_VERSION, 0, len(entries))
    pos = HEADER_SIZE
    for e in entries:
        _ENTRY.pack_into(buf, pos, e.producer_id, e.producer_epoch, e.last_sequence,
                         e.last_offset, e.offset_delta, e.timestamp, e.coordinator_epoch,
                         e.current_txn_first_offset)
        pos += ENTRY_SIZE
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c.crc32c(memoryview(buf)[ENTRIES_OFFSET:]))
    return bytes(buf)


def check_snapshot_header(header: bytes | memoryview, size: int, where: str) -> None:
    """``decode_snapshot``'s checks of the header against the file's ``size`` (in bytes), which
    need nothing else of the file: a reader refuses a file of gigabytes whose header counts a
    few producers before reading it (``CorruptSnapshotError``, ``where`` ending the message)."""
    def corrupt(reason: str) -> CorruptSnapshotError:
        return CorruptSnapshotError(f"{reason}{where}")

    if size < HEADER_SIZE:
        raise corrupt(f"Snapshot is truncated: {size} bytes, shorter than its {HEADER_SIZE}-byte "
                      f"header")
    version, _, count = _HEADER.unpack_from(header, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise corrupt(f"Snapshot contained an unknown file version {version}")
    if count < 0:
        raise corrupt(f"Snapshot has a negative producer entry count {count}")
    expected = HEADER_SIZE + ENTRY_SIZE * count
    if size != expected:
        raise corrupt(f"Snapshot length {size} does not match its {count} entries "
                      f"({HEADER_SIZE} + {ENTRY_SIZE} x {count} = {expected} bytes)")


def decode_snapshot(buf: bytes | bytearray | memoryview, *,
                    source: str | PathLike[str] | None = None) -> list[ProducerSnapshotEntry]:
    """The entries of a snapshot, in file order. Anything Kafka would refuse (short header,
    version other than 1, negative count, a length other than ``10 + 46 x count``, CRC-32C
    mismatch) raises ``CorruptSnapshotError`` naming ``source`` and the reason. Kafka ignores
    bytes after the last entry as long as the CRC (which covers them) matches; we refuse them."""
    view = memoryview(buf).cast("B")     # bytes, bytearray, mmap or any C-contiguous buffer
    where = f" ({source})" if source is not None else ""

    def corrupt(reason: str) -> CorruptSnapshotError:
        return CorruptSnapshotError(f"{reason}{where}")

    check_snapshot_header(view[:HEADER_SIZE], len(view), where)
    stored_crc = _HEADER.unpack_from(view, 0)[1]
    computed = crc32c.crc32c(view[ENTRIES_OFFSET:])
    if stored_crc != computed:
        raise corrupt(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. "
                      f"Computed crc: {computed}")
    return [ProducerSnapshotEntry(*f) for f in _ENTRY.iter_unpack(view[HEADER_SIZE:])]


def snapshot_path(directory: str | PathLike[str], offset: int) -> Path:
    """``LogFileUtils.producerSnapshotFile``: ``<dir>/<offset as 20 digits>.snapshot``."""
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= LONG_MAX:
        raise ValueError(f"snapshot offset must be an int in [0, 2^63), got {offset!r}")
    return Path(directory) / f"{filename_prefix(offset)}{SNAPSHOT_SUFFIX}"


def write_snapshot(directory: str | PathLike[str], offset: int,
                   entries: Iterable[ProducerSnapshotEntry], *, sync: bool = True) -> Path:
    """Write the snapshot for map end offset ``offset`` and return its path.

    Kafka writes snapshots in place and relies on the CRC to catch a torn one at load; we go
    through ``<name>.tmp`` + fsync + rename + directory fsync instead, so a crash leaves the old
    file (or none) rather than a corrupt one. Kafka ignores the ``.tmp`` name (only names ending
    in ``.snapshot`` are snapshots)."""
    path = snapshot_path(directory, offset)
    atomic_write(path, encode_snapshot(entries), sync=sync)
    return path


def read_snapshot(path: str | PathLike[str]) -> list[ProducerSnapshotEntry]:
    """The entries of the snapshot file at ``path`` (``CorruptSnapshotError`` if invalid)."""
    path = Path(path)
    with open_regular_file(path) as f:      # a FIFO so named is refused, not waited on
        # the header against the file's size before the rest is read: a file of gigabytes (sparse,
        # or grown by a runaway writer) whose header counts 4 producers was read whole to be
        # refused (Kafka's readSnapshot reads it all too, with Files.readAllBytes)
        header = f.read(HEADER_SIZE)
        check_snapshot_header(header, os.fstat(f.fileno()).st_size, f" ({path})")
        data = header + f.read()
    return decode_snapshot(data, source=path)


def list_snapshots(directory: str | PathLike[str]) -> list[tuple[int, Path]]:
    """``(offset, path)`` of every snapshot file in ``directory``, by offset. Only regular files
    named ``<digits>.snapshot`` count: ``.snapshot.deleted``, ``.snapshot.tmp`` and other names
    are skipped (Kafka would fail the load on a non-numeric ``*.snapshot``; we skip it). A missing
    directory has no snapshots."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _SNAPSHOT_NAME.fullmatch(path.name)
        if match is None or not path.is_file():
            continue
        offset = int(match[1])
        if offset <= LONG_MAX:
            found.append((offset, path))
    found.sort()
    return found


__all__ = [
    "PRODUCER_SNAPSHOT_VERSION", "SNAPSHOT_SUFFIX", "HEADER_SIZE", "ENTRY_SIZE",
    "ProducerSnapshotEntry", "encode_snapshot", "decode_snapshot", "check_snapshot_header", "snapshot_path",
    "write_snapshot", "read_snapshot", "list_snapshots",
]

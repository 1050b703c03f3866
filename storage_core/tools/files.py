"""What ``dump``, ``verify`` and ``describe`` share to read Kafka's files without a broker: every
file is opened read-only through ``open_data_file`` (never written, never created), batches
are walked with ``LogInputStream``, and index entries are cut before a zero-filled tail, as
``DumpLogSegments`` cuts them.
"""

from __future__ import annotations

import bisect
import mmap
import os
import re
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa

from ..checkpoint import (CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                          RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                          parse_topic_partition_dir)
from ..data_files import open_data_file
from ..errors import CorruptIndexError, CorruptRecordError, KafkaLogError
from ..format import BatchInfo, LogInputStream, Record, decode_run, decompress, legacy
from ..format.log_input_stream import batch_records as v2_batch_records
from ..format.log_input_stream import default_max_decompressed, max_batch_read_size
from ..index import DEFAULT_MAX_INDEX_SIZE, OffsetIndex, TimeIndex, index_oversized
from ..log import offset_from_filename
from ..producer import HEADER_SIZE as SNAPSHOT_HEADER_SIZE
from ..producer import check_snapshot_header

# the data directory's offset checkpoints (Kafka's LogManager names)
OFFSET_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                      REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)
# AbortedTxn: version, producer id, first offset, last offset, last stable offset (34 bytes)
TXN_ENTRY = struct.Struct(">hqqqq")
TXN_READ_ENTRIES = 1 << 15          # entries of a .txnindex read at a time (1.1 MB)
# a segment's log file: LogFileUtils.filenamePrefixFromOffset + ".log"
SEGMENT_NAME = re.compile(r"[0-9]{20}\.log")
# a legacy (v0/v1) message's CRC covers everything after the offset, size and crc fields
_LEGACY_CRC_FROM = legacy.LOG_OVERHEAD + 4

# the tools read files without a topic config: Kafka's default limit, floored as any reader's is
MAX_BATCH = max_batch_read_size()

# a record of a batch as Kafka's batch iterator yields it: legacy records come with their own
# (inner) crc and whether it holds; v2 records with None
RecordWithCrc = tuple[Record, int | None, bool | None]


@contextmanager
def mapped(path: str | os.PathLike[str]) -> Iterator[mmap.mmap | bytes]:
    """The file's bytes, mapped read-only (never written, never created; a FIFO or device
    refused by ``open_data_file``, never opened for reading)."""
    fd = open_data_file(path, os.O_RDONLY, follow_symlinks=True)
    try:
        if os.fstat(fd).st_size == 0:
            yield b""
            return
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:
            yield m
    finally:
        os.close(fd)


def read_file(path: str | os.PathLike[str]) -> bytes:
    """The whole of a small file (a producer snapshot whose size was checked), regular files only."""
    with mapped(path) as buf:
        return bytes(buf)


def read_head(path: str | os.PathLike[str], n: int) -> tuple[bytes, int]:
    """The first ``n`` bytes of a regular file (fewer if it is shorter) and its size."""
    fd = open_data_file(path, os.O_RDONLY, follow_symlinks=True)
    try:
        return os.pread(fd, n, 0), os.fstat(fd).st_size
    finally:
        os.close(fd)


def read_snapshot_file(path: str | os.PathLike[str]) -> bytes:
    """A producer snapshot's bytes, read only once its header agrees with the file's size
    (``check_snapshot_header``, ``CorruptSnapshotError`` otherwise): a file of gigabytes whose
    header counts a few producers is refused without being read."""
    head, size = read_head(path, SNAPSHOT_HEADER_SIZE)
    check_snapshot_header(head, size, "")
    return read_file(path)


def txn_index_entries(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, int, int, int, int]]:
    """``aborted_txn_entries`` of a ``.txnindex`` file, read ``TXN_READ_ENTRIES`` entries at a
    time (as Kafka's iterator reads it entry by entry): a file of gigabytes is never held whole."""
    fd = open_data_file(path, os.O_RDONLY, follow_symlinks=True)
    try:
        whole = os.fstat(fd).st_size // TXN_ENTRY.size * TXN_ENTRY.size
        step = TXN_READ_ENTRIES * TXN_ENTRY.size
        for start in range(0, whole, step):
            data = os.pread(fd, min(step, whole - start), start)
            yield from aborted_txn_entries(data, start)
            if len(data) < min(step, whole - start):
                return                          # the file shrank while it was read
    finally:
        os.close(fd)


def base_offset_of(name: str) -> int:
    """``file.getName.split("\\\\.")(0).toLong``."""
    prefix = name.split(".")[0]
    if not re.fullmatch(r"[+-]?[0-9]+", prefix):
        raise KafkaLogError(f"{name} does not start with a base offset (For input string: "
                            f"\"{prefix}\")")
    return int(prefix)


def sibling(path: str | os.PathLike[str], suffix: str) -> str:
    """The file of the same segment with ``suffix`` (``.log`` of an ``.index``)."""
    path = Path(path)
    return str(path.with_name(path.name.split(".")[0] + suffix))


def segment_bases(directory: Path) -> list[int]:
    """The base offsets of the segments in ``directory``, from their ``.log`` file names."""
    return sorted(offset_from_filename(f.name) for f in directory.iterdir()
                  if SEGMENT_NAME.fullmatch(f.name))


def has_segments(directory: Path) -> bool:
    """Whether ``directory`` holds a segment (a ``.log`` named by its base offset)."""
    return any(SEGMENT_NAME.fullmatch(f.name) for f in directory.iterdir())


def first_batch(buf: Any, pos: int, end: int) -> BatchInfo | None:
    """The complete batch starting at ``pos`` (None if there is none before ``end``)."""
    if pos < 0 or pos >= min(end, len(buf)):
        return None
    try:
        return LogInputStream(buf, pos, end, max_batch_size=MAX_BATCH).next_batch()
    except CorruptRecordError:
        return None


def legacy_crc_ok(buf: Any, position: int, stop: int, crc: int) -> bool:
    """Whether the v0/v1 message at ``position`` (ending at ``stop``) holds its stored ``crc``."""
    return zlib.crc32(memoryview(buf)[position + _LEGACY_CRC_FROM:stop]) == crc


def batch_records(buf: Any, b: BatchInfo) -> list[RecordWithCrc]:
    """The records of a batch as Kafka's batch iterator yields them: the CRC is not checked (the
    batch line shows ``isvalid``). Legacy records come with their own (inner) crc and whether it
    holds; v2 records with ``None``."""
    limit = default_max_decompressed()
    if b.magic >= 2:
        return [(r, None, None) for r in v2_batch_records(buf, b, max_decompressed=limit, verify=False)]
    e = b.entry
    assert e is not None                                # a v0/v1 message
    records = legacy.deep_records(e, max_decompressed=limit)
    if e.compression == 0:
        crcs = [(e.crc, legacy_crc_ok(buf, b.position, b.position + b.size, e.crc))]
    else:
        inner = decompress(e.compression, cast(bytes, e.value), magic=e.magic, max_size=limit)
        crcs, pos = [], 0
        while pos < len(inner):
            m = legacy.parse_entry(inner, pos, verify_crc=False)
            stop = pos + m.size_in_bytes
            crcs.append((m.crc, legacy_crc_ok(inner, pos, stop, m.crc)))
            pos = stop
    return [(r, crc, ok) for r, (crc, ok) in zip(records, crcs)]


def max_record_timestamp(records: list[RecordWithCrc]) -> int:
    """The largest timestamp of a batch's records, never below -1 (``RecordBatch.NO_TIMESTAMP``,
    where DumpLogSegments starts its maximum)."""
    return max([-1, *(r.timestamp for r, _, _ in records)])


def record_offsets_and_max_timestamp(buf: Any, b: BatchInfo) -> tuple[np.ndarray, int]:
    """The offsets of a batch's records (control records included) and their largest timestamp
    (``max_record_timestamp``), the CRC not checked (as ``batch_records``). What a time-index
    check needs of every batch an entry names: a v2 batch goes through the compiled record walk
    (``decode_run``, the reads' decoder, as strict about each record) rather than a Python loop
    per record, which made ``verify`` of a gigabyte take seconds; legacy ones as
    ``batch_records`` reads them."""
    if b.magic < 2:
        records = batch_records(buf, b)
        return (np.array([r.offset for r, _, _ in records], np.int64), max_record_timestamp(records))
    table = decode_run(buf, start=b.position, end=b.position + b.size, verify_crc=False,
                       max_batch_size=MAX_BATCH).table
    stamps = table.column("timestamp").cast(pa.int64()).to_numpy()
    return table.column("offset").to_numpy(), max(-1, int(stamps.max())) if len(stamps) else -1


def batch_at_or_after(buf: Any, start: int, offset: int) -> BatchInfo | None:
    """The first batch from byte ``start`` on whose last offset is at or above ``offset``."""
    for b in LogInputStream(buf, start, len(buf), max_batch_size=MAX_BATCH):
        if b.last_offset >= offset:
            return b
    return None


# ------------------------------------------------------------------------------------ indexes

def aborted_txn_entries(data: bytes, base: int = 0) -> Iterator[tuple[int, int, int, int, int, int]]:
    """``(position, version, producer id, first offset, last offset, last stable offset)`` of
    each whole entry of ``data``, the bytes of a ``.txnindex`` from position ``base``
    (``AbortedTxn.version()`` reads the first byte)."""
    for pos in range(0, len(data) - len(data) % TXN_ENTRY.size, TXN_ENTRY.size):
        _, pid, first, last, lso = TXN_ENTRY.unpack_from(data, pos)
        yield base + pos, struct.unpack_from(">b", data, pos)[0], pid, first, last, lso


def valid_prefix(rel_offsets: list[int]) -> int:
    """How many index entries come before a zero-filled tail (a preallocated index left by a
    crash ends with zero entries: DumpLogSegments stops at the first)."""
    return next((i for i in range(1, len(rel_offsets)) if rel_offsets[i] == 0), len(rel_offsets))


def offset_entries(index: OffsetIndex) -> list[tuple[int, int]]:
    """``(relative offset, position)`` of the entries before any zero-filled tail."""
    entries = index.entries_array().tolist()
    return entries[:valid_prefix([rel for rel, _ in entries])]


def time_entries(index: TimeIndex) -> list[tuple[int, int]]:
    """``(timestamp, relative offset)`` of a time index's entries before any zero-filled tail."""
    entries = index.entries_array().tolist()
    return entries[:valid_prefix([rel for _, rel in entries])]


class IndexLookup:
    """``OffsetIndex.lookup`` over the entries before any zero-filled tail."""

    def __init__(self, index: OffsetIndex, base: int) -> None:
        entries = offset_entries(index)
        self.offsets = [base + rel for rel, _ in entries]
        self.positions = [position for _, position in entries]

    def position(self, offset: int) -> int:
        slot = bisect.bisect_right(self.offsets, offset) - 1
        # a negative position (a corrupt entry, reported by the offset index's own check) is no
        # place to start a walk: from the start of the log instead (Kafka's FileRecords.slice
        # throws on it, ending DumpLogSegments)
        return 0 if slot < 0 or self.positions[slot] < 0 else self.positions[slot]


def max_index_size_of(path: Path) -> int:
    """``segment.index.bytes`` of the topic of an index file: its override in the data
    directory's ``kafkalog-topic-configs.json``, else the default."""
    from ..server import ConfigRepository
    try:
        topic, _ = parse_topic_partition_dir(path.parent.name)
        return ConfigRepository([path.parent.parent]).topic_config(topic).segment_index_bytes
    except (KafkaLogError, OSError, ValueError):
        return DEFAULT_MAX_INDEX_SIZE


def oversized_index_problem(path: Path, entry_size: int) -> str | None:
    """Why an index file is not read (longer than its topic's ``segment.index.bytes`` allows, so
    no writer made it; a writable open rebuilds it), or None. Such a file is never loaded."""
    size = path.stat().st_size
    limit = max_index_size_of(path)
    if not index_oversized(size, limit, entry_size):
        return None
    return (f"{path} is oversized: {size} bytes, more than segment.index.bytes "
            f"({limit}) allows; not read (a writable open rebuilds it)")


def refuse_oversized_index(file: str, entry_size: int) -> None:
    """Raise ``CorruptIndexError`` for an oversized index file (see above)."""
    problem = oversized_index_problem(Path(file), entry_size)
    if problem is not None:
        raise CorruptIndexError(problem)

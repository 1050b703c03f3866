"""LogSegment: one ``.log`` file and its indexes (Kafka's ``LogSegment``, ``FileRecords``).

A segment appends whole runs of batches, indexes them with Kafka's exact interval rule, finds
offsets and timestamps through its indexes, recovers itself by validating every batch and
rebuilding its indexes, and knows when it should roll. Reads are positioned reads (``pread``) of
the file, never a map of it: they never block the writer, see exactly the bytes appended so far,
and a writer in another process that shortens the file cannot fault a reader (SIGBUS).

It holds Kafka's ``LogSegment`` and the walks of the ``.log`` that Kafka keeps in ``FileRecords``
(``batchesFrom``, ``searchForOffsetFromPosition``), which read the same descriptor under the same
size: a little over 700 lines.
"""

from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from ..common import INT_MAX, LONG_MAX
from ..config import LogConfig
from ..data_files import open_data_file_stat
from ..errors import CorruptRecordError, KafkaLogError, OffsetOverflowError, RecordTooLargeError
from ..format import kernels
from ..format.log_input_stream import (BatchArrays, BatchInfo, LogInputStream, max_batch_read_size,
                                      scan_batches)
from ..format.batch_header import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, BatchField, read_field
from ..format.record_batch import HEADER_SIZE_UP_TO_MAGIC, BatchHeader
from ..index import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex
from .files import (CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX,
                    TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, copy_all, filename_prefix,
                    offset_from_filename, segment_paths, write_all)

logger = logging.getLogger(__name__)

_FIND_WINDOW = 64 << 10     # first read when looking for an offset from its index entry

_CHUNK = 1 << 20

# read_field's positions for the one batch at the start of a buffer (read-only: shared)
AT_START = np.zeros(1, dtype=np.int64)
AT_START.setflags(write=False)


@dataclass(frozen=True, slots=True)
class LogOffsetPosition:
    """Where a batch is: the first batch whose last offset is at or above a target."""

    offset: int          # that batch's last offset
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int | None = None


class LogSegment:
    """One segment. Create with ``LogSegment.open``; not thread-safe for writers (the Log holds
    the lock), safe for concurrent readers."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, *,
                 writable: bool = True, file_suffix: str = "", preallocate: bool | None = None,
                 created_ms: int | None = None) -> None:
        # a read-only open of every segment is what planning a query costs per segment: one
        # Path per file and one fstat per open (pathlib's parsing cost as much as the opens)
        self.directory = directory if isinstance(directory, Path) else Path(directory)
        self.base_offset = base_offset
        self.config = config
        self.writable = writable
        paths = segment_paths(self.directory, base_offset, file_suffix)
        self.log_path = paths[LOG_SUFFIX]
        prealloc = config.preallocate if preallocate is None else preallocate
        exists = True
        if writable:
            exists = self.log_path.exists()
            self._fd, st = open_data_file_stat(self.log_path, os.O_RDWR | os.O_CREAT, 0o666)
            size = st.st_size
            if not exists and prealloc:
                # FileRecords.openChannel: preallocate the segment, track the logical size
                os.posix_fallocate(self._fd, 0, config.segment_bytes)
                size = 0
                st = os.fstat(self._fd)
        else:
            self._fd, st = open_data_file_stat(self.log_path, os.O_RDONLY, follow_symlinks=True)
            size = st.st_size
        self._size = size
        self._preallocated = writable and not exists and prealloc
        self._index_files_synced = False
        self.offset_index = OffsetIndex(paths[INDEX_SUFFIX], base_offset, config.segment_index_bytes,
                                        writable=writable)
        self.time_index = TimeIndex(paths[TIME_INDEX_SUFFIX], base_offset, config.segment_index_bytes,
                                    writable=writable)
        self.txn_index = TransactionIndex(paths[TXN_INDEX_SUFFIX], base_offset)
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp: int | None = None
        self.created_ms = created_ms if created_ms is not None else int(st.st_mtime * 1000)
        jitter = config.segment_jitter_ms
        self.roll_jitter_ms = 0 if jitter == 0 else random.randrange(INT_MAX + 1) % min(jitter, config.segment_ms)
        self._max_ts: tuple[int, int] | None = None    # (max timestamp so far, its shallow offset)

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig, *, writable: bool = True,
             file_suffix: str = "", preallocate: bool | None = None, created_ms: int | None = None) -> "LogSegment":
        return cls(directory, base_offset, config, writable=writable, file_suffix=file_suffix,
                   preallocate=preallocate, created_ms=created_ms)

    # -------------------------------------------------------------------------------- state

    @property
    def size(self) -> int:
        """Bytes of batches in the ``.log`` (the logical size when preallocated)."""
        return self._size

    def fileno(self) -> int:
        """The ``.log``'s descriptor (a reader checks with fstat whether the writer removed or
        shortened the file since its open)."""
        return self._fd

    def read_bytes(self, position: int, size: int) -> bytes:
        """``size`` bytes of the log from ``position`` (fewer at the end). Reads are positioned
        reads, never a map: a concurrent truncation can shorten a read, never crash it."""
        size = max(0, min(size, self._size - position))
        return os.pread(self._fd, size, position) if size else b""

    def copy_bytes_to(self, dst_fd: int, start: int, stop: int) -> None:
        """Bytes ``[start, stop)`` of the log (clipped to its size) written to ``dst_fd`` from
        its position 0, copied in the kernel (``copy_file_range``), not through Python."""
        stop = min(stop, self._size)
        if stop > start:
            copy_all(self._fd, start, dst_fd, 0, stop - start)

    def _walk(self, start: int = 0, end: int | None = None, *, verify: bool = False
              ) -> Iterator[tuple[BatchInfo, bytes, int]]:
        """Batches from ``start`` as ``(info relative to chunk, chunk, chunk's file position)``,
        read a megabyte at a time; a batch larger than that is read on its own."""
        end = self._size if end is None else min(end, self._size)
        pos = start
        # every claimed size is checked against the limit before a byte is allocated for it
        limit = max_batch_read_size(self.config.max_message_bytes)
        while pos + HEADER_SIZE_UP_TO_MAGIC < end:
            chunk = os.pread(self._fd, min(_CHUNK, end - pos), pos)
            if len(chunk) <= HEADER_SIZE_UP_TO_MAGIC:
                return                      # truncated by a writer since this (reader's) open
            stream = LogInputStream(chunk, 0, len(chunk), verify=verify, source=str(self.log_path),
                                    max_batch_size=limit)
            try:
                found = False
                for b in stream:
                    found = True
                    yield b, chunk, pos
            except CorruptRecordError as e:
                raise e.located(source=str(self.log_path), base_position=pos) from e.__cause__
            if found:
                pos += stream.position
                continue
            size = int(read_field(chunk, AT_START, BatchField.LENGTH)[0]) + LOG_OVERHEAD
            if size <= len(chunk) or pos + size > end:
                return                      # a partial batch at the end
            big = os.pread(self._fd, size, pos)
            try:
                alone = LogInputStream(big, 0, len(big), verify=verify, source=str(self.log_path),
                                       max_batch_size=limit).next_batch()
            except CorruptRecordError as e:
                raise e.located(source=str(self.log_path), base_position=pos) from e.__cause__
            if alone is None:               # the file shrank under the read (a truncation)
                return
            yield alone, big, pos
            pos += size

    def batches(self, start_position: int = 0, *, verify: bool = False) -> Iterator[BatchInfo]:
        """Shallow walk of the batches from ``start_position``, with file positions; without
        ``verify`` (no CRC to check) v2 batches are stepped over by their headers (``_headers``)."""
        if not verify:
            yield from self._headers(start_position)
            return
        for b, _, base in self._walk(start_position, verify=verify):
            yield replace(b, position=b.position + base) if base else b

    def read_batch(self, b: BatchInfo) -> tuple[bytes, BatchInfo] | None:
        """Batch ``b`` of ``batches`` read whole: its bytes and its info positioned in them, or
        None when the file no longer holds it (shortened since a reader's open)."""
        data = self.read_bytes(b.position, b.size)
        return (data, replace(b, position=0)) if len(data) == b.size else None

    def _headers(self, start: int) -> Iterator[BatchInfo]:
        """As Kafka's ``FileLogInputStream``, which reads a batch's header and not its records: a
        window walked by the compiled header scan, a batch longer than it read as its 61-byte
        header (1 MiB batches are not read whole to find an offset). Anything else (legacy, a
        size or magic the walk refuses, a partial batch) is left to the full walk (``_walk``)
        from there, which yields or raises as it always has."""
        end = self._size
        pos = start
        limit = max_batch_read_size(self.config.max_message_bytes)
        window = _FIND_WINDOW
        while pos + HEADER_SIZE_UP_TO_MAGIC < end:
            chunk = os.pread(self._fd, min(window, end - pos), pos)
            try:
                scan = scan_batches(chunk, max_batch_size=limit)
            except CorruptRecordError:
                break                   # _walk raises it, located, after the batches before it
            if len(scan):
                for i in range(len(scan)):
                    yield scan.info(i, shift=pos)
                pos += scan.end
                window = _CHUNK         # a long walk: fewer, larger reads
                continue
            if scan.legacy_at_end or len(chunk) < RECORD_BATCH_OVERHEAD:
                break
            # the scan has refused a length below a header's or above the limit: what is left
            # to tell is a magic it did not reach (after the window) and the end of the file
            header = BatchHeader.parse(chunk)
            size = LOG_OVERHEAD + header.batch_length
            if header.magic != 2 or pos + size > end:
                break
            yield BatchInfo(pos, size, 2, header=header)
            pos += size
        for b, _, base in self._walk(pos):
            yield replace(b, position=b.position + base) if base else b

    @property
    def max_timestamp_so_far(self) -> TimestampAndOffset:
        """Loaded lazily as Kafka's ``loadLargestTimestamp``: the time index's last entry, then
        a scan of the batches after it for anything larger."""
        if self._max_ts is None:
            last = self.time_index.last_entry
            ts, off = last.timestamp, last.offset
            for b in self.batches(self._index_position(last.offset)):
                if b.max_timestamp > ts:
                    ts, off = b.max_timestamp, b.last_offset
            self._max_ts = (ts, off)
        return TimestampAndOffset(*self._max_ts)

    @property
    def largest_timestamp(self) -> int:
        """The segment's largest timestamp, else the file's mtime (``LogSegment.largestTimestamp``)."""
        ts = self.max_timestamp_so_far.timestamp
        # fstat: a reader's file may have been renamed (.swap -> .log, .deleted) since its open
        return ts if ts >= 0 else int(os.fstat(self._fd).st_mtime * 1000)

    def clean_end(self) -> int | None:
        """The next offset if the segment ends cleanly (every batch from the last index entry
        readable, no bytes after the last one), else None: what decides whether a segment at
        the recovery point needs recovering."""
        try:
            start = self._index_position(LONG_MAX)
            nxt, end = self.base_offset, start
            for b in self.batches(start):
                nxt, end = b.next_offset, b.position + b.size
        except (CorruptRecordError, ValueError, OSError):
            return None                 # e.g. a garbage index entry: recovery rebuilds it
        return nxt if end == self._size else None

    def indexes_preallocated(self) -> bool:
        """True when an index file still has its preallocated length: the writer that had this
        segment active never closed it (close and roll trim the indexes), so its entry count
        cannot be trusted. Serves kafkalog as a per-partition clean-shutdown marker."""
        full = self.config.segment_index_bytes
        for idx in (self.offset_index, self.time_index):
            try:
                size = os.stat(idx.path).st_size
            except FileNotFoundError:
                continue
            if size and size == full - full % idx.ENTRY_SIZE:
                return True
        return False

    def _index_position(self, offset: int) -> int:
        """Where a walk for ``offset`` starts: the offset index's floor entry's position, never
        below 0. As ``translate_offset`` (Kafka's ``translateOffset``: ``max(mapping.position,
        startingFilePosition)``): a garbage entry's negative position (no writer makes one) made
        ``pread`` fail with an ``OSError`` naming no file; from 0 the walk finds what it looks for
        (``kafkalog verify`` reports the entry)."""
        return max(self.offset_index.lookup(offset).position, 0)

    def read_next_offset(self) -> int:
        """The offset after the last batch, found by scanning from the last index entry."""
        start = self._index_position(LONG_MAX)
        nxt = self.base_offset
        for b in self.batches(start):
            nxt = b.next_offset
        return nxt

    # -------------------------------------------------------------------------------- append

    def append(self, largest_offset: int, largest_timestamp: int, shallow_offset_of_max_timestamp: int,
               records: bytes | bytearray | memoryview, *, batches: BatchArrays | None = None) -> None:
        """``LogSegment.append``: the bytes of one or more whole batches, whose last offset is
        ``largest_offset``. Indexed when more than ``index.interval.bytes`` were appended since the
        last entry (checked before counting this append: a segment's first append is never
        indexed). ``batches``: the append's header walk, if the caller has it."""
        n = len(records) if not isinstance(records, memoryview) else records.nbytes
        if n == 0:
            return
        position = self._check_append(largest_offset, largest_timestamp, n)
        if batches is None:
            batches = scan_batches(records)
        if batches.legacy_at_end or batches.end != n:     # magic 0/1 entries (copied logs)
            walk = np.array([(b.position, b.size, b.last_offset, b.max_timestamp)
                             for b in LogInputStream(records)], np.int64).reshape(-1, 4)
            positions, sizes, lasts, max_ts = walk.T
        else:
            positions, sizes = batches.position, batches.size
            lasts, max_ts = batches.last_offset, batches.max_timestamp
        write_all(self._fd, records, position)
        self._appended(position, n, largest_timestamp, shallow_offset_of_max_timestamp,
                       positions, sizes, lasts, max_ts)

    def append_from_file(self, src_fd: int, src_position: int, size: int, largest_offset: int,
                         largest_timestamp: int, shallow_offset_of_max_timestamp: int,
                         batches: BatchArrays) -> None:
        """``append`` of the ``size`` bytes of whole v2 batches at ``src_position`` of the file
        ``src_fd``, copied by the kernel (``copy_file_range``, a positioned read and write where
        the platform or file system has none) instead of through a buffer of ours; ``batches``
        is their header walk, positions relative to ``src_position``. The caller has checked
        the bytes (CRCs) and set every field; the indexes are exactly ``append``'s."""
        if size == 0:
            return
        position = self._check_append(largest_offset, largest_timestamp, size)
        try:
            copy_all(src_fd, src_position, self._fd, position, size)
        except BaseException:
            # no partial batch left behind the segment's size for a later append to bury
            self._truncate_file(position)
            raise
        self._appended(position, size, largest_timestamp, shallow_offset_of_max_timestamp,
                       batches.position, batches.size, batches.last_offset, batches.max_timestamp)

    def take_log_file(self, src: Path, size: int, largest_offset: int, largest_timestamp: int,
                      shallow_offset_of_max_timestamp: int, batches: BatchArrays) -> None:
        """``append`` of a whole file of ``size`` bytes of v2 batches to this empty segment by
        renaming ``src`` over its ``.log`` (one atomic rename on the same file system: the
        segment is empty or whole, and no byte is copied); ``batches`` is their header walk.
        The caller has checked the bytes and set every field; the indexes are exactly
        ``append``'s. Nothing changes if the rename is refused (``EXDEV``: another file
        system)."""
        if not self.writable or self._size != 0:
            raise KafkaLogError(f"{self.log_path} is not an empty writable segment: a file "
                                f"can only become a segment of its own")
        self._check_append(largest_offset, largest_timestamp, size)
        fd = os.open(src, os.O_RDWR)
        try:
            if os.fstat(fd).st_size != size:
                raise KafkaLogError(f"{src} holds {os.fstat(fd).st_size} bytes, not the "
                                    f"{size} of its batches")
            os.rename(src, self.log_path)
        except BaseException:
            os.close(fd)
            raise
        os.close(self._fd)
        self._fd = fd
        self._preallocated = False
        self._appended(0, size, largest_timestamp, shallow_offset_of_max_timestamp,
                       batches.position, batches.size, batches.last_offset, batches.max_timestamp)

    def _check_append(self, largest_offset: int, largest_timestamp: int, n: int) -> int:
        position = self._size
        if position == 0:
            self.rolling_based_timestamp = largest_timestamp
        if not 0 <= largest_offset - self.base_offset <= INT_MAX:
            raise OffsetOverflowError(
                f"Detected offset overflow at offset {largest_offset} in segment {self.log_path}")
        if position + n > INT_MAX:
            raise RecordTooLargeError(f"Appending {n} bytes would overflow {self.log_path}")
        return position

    def _appended(self, position: int, n: int, largest_timestamp: int,
                  shallow_offset_of_max_timestamp: int, positions: np.ndarray, sizes: np.ndarray,
                  lasts: np.ndarray, max_ts: np.ndarray) -> None:
        """The bookkeeping of ``n`` bytes just written at ``position``: size, max timestamp,
        index entries."""
        # the max so far is the segment's before these bytes: read lazily (a loaded segment),
        # it must not walk what was just written (a whole renamed-in file: 0.1 s of reads)
        mts = self.max_timestamp_so_far
        self._size = position + n
        if largest_timestamp > mts.timestamp:
            self._max_ts = (largest_timestamp, shallow_offset_of_max_timestamp)
        # Index batch by batch, with the same interval rule: a multi-batch append (a whole
        # micro-batch) then gets the index a leader's one-batch appends would have, which is
        # also exactly what recovery rebuilds and what kafka-dump-log.sh verifies. The walk is
        # compiled (the rule is sequential: each entry resets the byte count) and its entries
        # go to the indexes as arrays, checked and written whole.
        count = len(positions)
        offsets = np.empty((count, 2), np.int64)
        times = np.empty((count, 2), np.int64)
        n_off, n_time, since, _, _ = kernels.index_entries(
            positions, sizes, lasts, max_ts, position, self.bytes_since_last_index_entry,
            # `since` never reaches int64's max, so a larger interval acts as that max
            min(self.config.index_interval_bytes, LONG_MAX),
            mts.timestamp, mts.offset,                  # the segment's max, batch by batch
            self.time_index.last_entry.timestamp,
            self.offset_index.max_entries - self.offset_index.entries,
            self.time_index.max_entries - 1 - self.time_index.entries,   # is_full()
            offsets, times)
        # Most small appends add no entry and a one-batch append at most one, which the scalar
        # appends take for less than the array checks cost. They raise the same: their checks
        # differ only in order, on the position, which always fits here (checked above).
        if n_off == 1:
            self.offset_index.append(int(offsets[0, 0]), int(offsets[0, 1]))
        elif n_off:
            self.offset_index.append_many(offsets[:n_off])
        if n_time == 1:
            self.time_index.maybe_append(int(times[0, 0]), int(times[0, 1]))
        elif n_time:
            self.time_index.maybe_append_many(times[:n_time])
        self.bytes_since_last_index_entry = int(since)

    def update_txn_index(self, txn: AbortedTxn) -> None:
        self.txn_index.append(txn)

    # -------------------------------------------------------------------------------- lookups

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch at or after the index's hint whose last offset is >= ``offset``.
        The hint is at most ``index.interval.bytes`` (plus a batch) before it, so a small
        positioned read from there, walked by the compiled header scan, usually holds it."""
        pos = max(self.offset_index.lookup(offset).position, starting_position)
        end = self._size
        while pos + HEADER_SIZE_UP_TO_MAGIC < end:
            chunk = os.pread(self._fd, min(_FIND_WINDOW, end - pos), pos)
            try:
                scan = scan_batches(chunk, source=str(self.log_path))
            except CorruptRecordError as e:
                raise e.located(source=str(self.log_path), base_position=pos) from e.__cause__
            if not len(scan):
                break                       # a legacy entry or a batch larger than the window
            hit = np.flatnonzero(scan.last_offset >= offset)
            if hit.size:
                i = int(hit[0])
                return LogOffsetPosition(int(scan.last_offset[i]), pos + int(scan.position[i]),
                                         int(scan.size[i]))
            pos += scan.end
        for b in self.batches(pos):
            if b.last_offset >= offset:
                return LogOffsetPosition(b.last_offset, b.position, b.size)
        return None

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = True) -> tuple[int, bytes | memoryview] | None:
        """Whole batches from the one holding ``start_offset`` (it may begin below it), at most
        ``max_size`` bytes unless ``min_one_message`` lets a single larger first batch through.
        Returns ``(position, bytes)`` or None past the end."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log_path}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        limit = self._size if max_position is None else min(max_position, self._size)
        if max_size == 0 and not min_one_message:
            return found.position, b""
        first = found.size if min_one_message else 0
        want = min(max(max_size, first), limit - found.position)
        data = os.pread(self._fd, want, found.position) if want > 0 else b""
        try:
            scan = scan_batches(data, source=str(self.log_path))
        except CorruptRecordError as e:
            raise e.located(source=str(self.log_path), base_position=found.position) \
                from e.__cause__
        if scan.legacy_at_end:                  # magic 0/1 entries: the scalar walk
            end = found.position
            for b in self.batches(found.position):
                if b.position + b.size > limit:
                    break
                if b.position + b.size - found.position > max_size and not (
                        min_one_message and end == found.position):
                    break
                end = b.position + b.size
            return found.position, self.read_bytes(found.position, end - found.position)
        # the whole batches, not a copy of them (a fetch decodes them, read_raw joins them)
        return found.position, memoryview(data)[:scan.end] if scan.end != len(data) else data

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None
                                 ) -> TimestampAndOffset | None:
        """``LogSegment.findOffsetByTimestamp``: the first record with timestamp >= ``timestamp``
        (and offset >= ``starting_offset``), via the time index, then the batch headers after
        it, then the records of the batches whose largest timestamp reaches it."""
        starting_offset = self.base_offset if starting_offset is None else starting_offset
        hint = self.time_index.lookup(timestamp)
        start = self._index_position(max(hint.offset, starting_offset))
        for b in self.batches(start):
            if b.max_timestamp >= timestamp:
                found = self._first_record_at(b, timestamp, starting_offset)
                if found is not None:
                    return found
        return None

    def _first_record_at(self, b: BatchInfo, timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
        """The first record of batch ``b`` at or after ``timestamp`` and ``starting_offset``: a v2
        batch read and decoded as a fetch decodes it (CRC checked, errors naming the file and
        position), its timestamps compared as one column."""
        from ..format import decode_run
        from ..format.log_input_stream import batch_records, default_max_decompressed

        limit = default_max_decompressed(self.config.max_message_bytes)
        if b.magic < 2:             # a legacy entry holds its message(s)
            for r in batch_records(b"", b, max_decompressed=limit):
                if r.timestamp >= timestamp and r.offset >= starting_offset:
                    return TimestampAndOffset(r.timestamp, r.offset)
            return None
        try:
            table = decode_run(self.read_bytes(b.position, b.size), max_decompressed=limit,
                               max_batch_size=max_batch_read_size(self.config.max_message_bytes)).table
        except CorruptRecordError as e:
            raise e.located(source=str(self.log_path), base_position=b.position) from e.__cause__
        times = table.column("timestamp").combine_chunks().view(pa.int64()).to_numpy()
        offsets = table.column("offset").to_numpy()
        hit = np.flatnonzero((times >= timestamp) & (offsets >= starting_offset))
        if not hit.size:
            return None
        epoch = b.v2_header.partition_leader_epoch
        return TimestampAndOffset(int(times[hit[0]]), int(offsets[hit[0]]), epoch if epoch >= 0 else None)

    # -------------------------------------------------------------------------------- recovery

    def valid_batches(self, *, next_base_offset: int | None = None
                      ) -> Iterator[tuple[BatchInfo, bytes, int]]:
        """The batches of the segment from its start, as ``_walk`` yields them, each held to the
        one definition of a valid batch (docs/operations.md, "What valid means") that recovery,
        ``kafkalog verify`` and read-only opens share: size, magic and CRC (the walk), what
        ``log_validator.check_stored_batches`` checks (codec, counts, offset bounds, every
        record), and offsets that follow the previous batch's and stay below
        ``next_base_offset``. The first invalid batch raises ``CorruptRecordError`` naming the
        file and its position; every batch yielded before it is valid. Valid, ordered offsets
        more than 2^31-1 past the base raise ``OffsetOverflowError`` (the log splits the
        segment, LogLoader's retryOnOffsetOverflow)."""
        from ..format.log_input_stream import batch_records, default_max_decompressed

        limit = default_max_decompressed(self.config.max_message_bytes)
        expected = self.base_offset
        # the chunk whose batches _check_chunk checked, up to where, and its first invalid one
        checked: tuple[bytes | None, int, int | None, CorruptRecordError | None] = (None, 0, None, None)
        for b, chunk, base in self._walk(0, verify=True):
            where = base + b.position
            if b.magic < 2:
                try:
                    batch_records(chunk, b, max_decompressed=limit)  # legacy: per message
                except CorruptRecordError as e:
                    raise e.located(source=str(self.log_path), base_position=base) from e.__cause__
            else:
                if checked[0] is not chunk or b.position >= checked[1]:
                    checked = (chunk, *self._check_chunk(chunk, b.position, limit, base))
                bad_at, error = checked[2], checked[3]
                if bad_at is not None and error is not None and b.position >= bad_at:
                    raise error
            if next_base_offset is not None and b.last_offset >= next_base_offset:
                raise CorruptRecordError(
                    f"batch offsets {b.base_offset}..{b.last_offset} reach the next segment's "
                    f"base offset {next_base_offset}", position=where, source=str(self.log_path))
            if b.base_offset < expected or b.last_offset < b.base_offset:
                raise CorruptRecordError(
                    f"batch offsets {b.base_offset}..{b.last_offset} do not follow offset "
                    f"{expected - 1}", position=where, source=str(self.log_path))
            if b.last_offset - self.base_offset > INT_MAX:
                # valid, ordered offsets too far from the base for 32-bit relative index
                # entries (segments of brokers before 0.11 could hold them): the log splits
                # the segment (LogLoader's retryOnOffsetOverflow), nothing is truncated
                raise OffsetOverflowError(
                    f"Batch at position {where} of {self.log_path} holds offset "
                    f"{b.last_offset}, more than {INT_MAX} past the segment's base offset "
                    f"{self.base_offset}")
            expected = b.last_offset + 1
            yield b, chunk, base

    def _check_chunk(self, chunk: bytes, start: int, limit: int, base: int
                     ) -> tuple[int, int | None, CorruptRecordError | None]:
        """``check_stored_batches`` over the v2 batches of ``chunk`` from ``start``, at once:
        ``(end of the batches checked, position of the first invalid one or None, its error
        located in the file)``."""
        from .validator import check_stored_batches

        scan: BatchArrays | None
        try:
            scan = scan_batches(chunk, start)
        except CorruptRecordError as e:        # the walk raises it when it gets there
            scan = (scan_batches(chunk, start, e.position)
                    if e.position is not None and e.position > start else None)
        if scan is None or not len(scan):
            return start + 1, None, None
        try:
            check_stored_batches(chunk, scan, max_decompressed=limit)
        except CorruptRecordError as e:
            return scan.end, e.position, e.located(source=str(self.log_path), base_position=base)
        return scan.end, None, None

    def recover(self, on_batch: Callable[[bytes, BatchInfo], None] | None = None,
                next_base_offset: int | None = None) -> int:
        """``LogSegment.recover``: validate every batch (``valid_batches``), rebuild the offset
        and time indexes per batch, stop at the first invalid one and truncate the log there,
        keeping every valid batch before it. ``on_batch(view, info)`` sees each valid batch
        (producer state, leader epochs). Returns the bytes truncated."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()

        valid = last_index_entry = 0
        max_ts, max_off = -1, self.base_offset

        def accept(b: BatchInfo, chunk: bytes) -> None:
            nonlocal valid, last_index_entry, max_ts, max_off
            if b.max_timestamp > max_ts:
                max_ts, max_off = b.max_timestamp, b.last_offset
            if valid - last_index_entry > self.config.index_interval_bytes and \
                    not self.offset_index.is_full() and not self.time_index.is_full():
                # per batch, recovery can want more entries than the live per-append
                # indexing made; an index is sparse, so a full one just stops growing
                self.offset_index.append(b.last_offset, valid)
                self.time_index.maybe_append(max_ts, max_off)
                last_index_entry = valid
            valid += b.size
            if on_batch is not None:
                on_batch(chunk, b)

        # baseOffset is outside the CRC: a changed one shows as offsets that do not follow
        # the previous batch's, and the batch that breaks the order is the invalid one (the
        # rule a reader can apply as it goes); the valid batches before it are all kept
        try:
            for b, chunk, _ in self.valid_batches(next_base_offset=next_base_offset):
                accept(b, chunk)
        except CorruptRecordError as e:
            logger.warning("Found invalid batch in %s after position %d: %s; truncating",
                        self.log_path, valid, e.reason)
        truncated = self._size - valid
        if truncated > 0:
            logger.warning("Truncating %s from %d to %d bytes", self.log_path, self._size, valid)
        self._truncate_file(valid)
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(max_ts, max_off, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        self._max_ts = (max_ts, max_off)
        self.bytes_since_last_index_entry = 0
        return truncated

    def _truncate_file(self, size: int) -> None:
        if self.writable:
            os.ftruncate(self._fd, size)
        self._size = size

    def truncate_to(self, offset: int) -> int:
        """Remove every batch from the one containing ``offset``; returns the bytes removed."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.config.segment_index_bytes)
        self.time_index.resize(self.config.segment_index_bytes)
        if found is None:
            return 0
        removed = self._size - found.position
        self._truncate_file(found.position)
        if self._size == 0:
            # LogSegment.truncateTo: an emptied segment starts its roll clock afresh
            self.created_ms = int(time.time() * 1000)
            self.rolling_based_timestamp = None
        self._max_ts = None                 # reloaded from the index and the remaining batches
        self.bytes_since_last_index_entry = 0
        return removed

    # -------------------------------------------------------------------------------- roll

    def should_roll(self, *, incoming_bytes: int, max_timestamp_in_messages: int,
                    max_offset_in_messages: int, now_ms: int) -> bool:
        """``LogSegment.shouldRoll``."""
        c = self.config
        max_segment_ms = c.segment_ms
        if c.compact and c.max_compaction_lag_ms > 0:
            max_segment_ms = min(c.max_compaction_lag_ms, c.segment_ms)
        reached_roll_ms = (self._size > 0 and
                           self._time_waited_for_roll(now_ms, max_timestamp_in_messages)
                           > max_segment_ms - self.roll_jitter_ms)
        return (self._size > c.segment_bytes - incoming_bytes or reached_roll_ms
                or self.offset_index.is_full() or self.time_index.is_full()
                or not 0 <= max_offset_in_messages - self.base_offset <= INT_MAX)

    def _time_waited_for_roll(self, now_ms: int, message_ts: int) -> int:
        if self.rolling_based_timestamp is None:
            first = next(iter(self.batches()), None)
            self.rolling_based_timestamp = first.max_timestamp if first is not None else -1
        if self.rolling_based_timestamp >= 0:
            return message_ts - self.rolling_based_timestamp
        return now_ms - self.created_ms

    def on_become_inactive_segment(self) -> None:
        """On roll: final time-index entry, indexes and log trimmed to their real size."""
        mts = self.max_timestamp_so_far
        self.time_index.maybe_append(mts.timestamp, mts.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_preallocation()

    def _trim_preallocation(self) -> None:
        if self.writable and self._preallocated:
            os.ftruncate(self._fd, self._size)
            self._preallocated = False

    # -------------------------------------------------------------------------------- files

    def flush(self, *, data_only: bool = False) -> None:
        """fsync the log and the indexes. ``data_only`` (the active segment between appends)
        skips the indexes once their files have been synced once at their preallocated length:
        after an unclean stop that length marks the segment for recovery, which rebuilds them
        from the log, so fsyncing their entries on every append would buy nothing."""
        if self.writable:
            os.fsync(self._fd)
        if data_only and self._index_files_synced:
            return
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()
        self._index_files_synced = True

    def close(self, *, final_entries: bool = True) -> None:
        """Close the files; a writable segment first gets its final time-index entry and loses
        its preallocation (``final_entries=False`` skips both: a segment being deleted)."""
        if self._fd < 0:
            return
        if self.writable and final_entries:
            mts = self.max_timestamp_so_far
            if mts.timestamp >= 0 and self.time_index.entries < self.time_index.max_entries:
                self.time_index.maybe_append(mts.timestamp, mts.offset, skip_full_check=True)
            self._trim_preallocation()
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        os.close(self._fd)
        self._fd = -1

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment (``.deleted``, ``.cleaned``, ``.swap``)."""
        def renamed(p: Path) -> Path:
            name = p.name[:-len(old_suffix)] if old_suffix and p.name.endswith(old_suffix) else p.name
            return p.with_name(name + new_suffix)

        if self.log_path.exists():
            target = renamed(self.log_path)
            os.rename(self.log_path, target)
            self.log_path = target
        for idx in (self.offset_index, self.time_index, self.txn_index):
            idx.rename_to(renamed(idx.path))

    def delete(self) -> None:
        self.close(final_entries=False)
        for p in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, path={self.log_path})"


__all__ = ["CLEANED_SUFFIX", "DELETED_SUFFIX", "INDEX_SUFFIX", "LOG_SUFFIX", "LogOffsetPosition", "LogSegment",
           "SWAP_SUFFIX", "TIME_INDEX_SUFFIX", "TXN_INDEX_SUFFIX", "TimestampAndOffset", "filename_prefix",
           "offset_from_filename", "segment_paths", "write_all"]

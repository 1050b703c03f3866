"""The transaction index ``.txnindex`` (Kafka's ``TransactionIndex`` and ``AbortedTxn``).

An append-only file of 34-byte big-endian entries, one per aborted (non-empty) transaction whose
ABORT marker landed in the segment: ``int16 version (0), int64 producerId, int64 firstOffset,
int64 lastOffset (the marker), int64 lastStableOffset``. No header, no preallocation, and no file
at all until the first abort. It is a plain file (read with pread, parsed with numpy), not a mapping.

Reading follows Kafka's iterator exactly: entries are read from position 0 in 34-byte steps, a
partial tail (a torn write) is ignored, and an entry whose first byte, read as a *signed* byte,
is above 0 is an unknown version (Kafka's ``KafkaException``, here CorruptIndexError naming the
file and the byte position). Like the iterator, a search that stops early never sees later
entries, so a bad version past the stopping point is not reported. As Kafka's iterator reads it
entry by entry, the file is read a chunk of entries at a time (``_CHUNK_ENTRIES``): the memory a
check, a truncation or a search takes is bounded whatever the file's size (a sparse or runaway
file of gigabytes was read whole: 4.3 GB for a 3 GiB file).
"""

from __future__ import annotations

import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Iterator, Self

import numpy as np

from ..data_files import open_data_file
from ..errors import CorruptIndexError, InvalidOffsetError

__all__ = ["AbortedTxn", "TransactionIndex"]

_ENTRY = struct.Struct(">hqqqq")
_DTYPE = np.dtype([("version", ">i2"), ("producer_id", ">i8"), ("first_offset", ">i8"),
                   ("last_offset", ">i8"), ("last_stable_offset", ">i8")])
_UNKNOWN = object()   # last offset not read from the file yet
_CHUNK_ENTRIES = 1 << 15   # entries per read (1.1 MB)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: its producer, first offset, the offset of its ABORT marker
    (``last_offset``) and the last stable offset when the abort completed."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    CURRENT_VERSION: ClassVar[int] = 0
    SIZE: ClassVar[int] = 34     # AbortedTxn.TOTAL_SIZE

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(self.CURRENT_VERSION, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> AbortedTxn:
        """Decode one entry (the version is not checked here; the index checks it)."""
        _, pid, first, last, lso = _ENTRY.unpack_from(buf, offset)
        return cls(pid, first, last, lso)


assert _DTYPE.itemsize == _ENTRY.size == AbortedTxn.SIZE


class TransactionIndex:
    """Mirrors ``org.apache.kafka.storage.internals.log.TransactionIndex``.

    The file is opened lazily (on the first append, or the first read of an existing file) and
    reopened after ``close()`` as Kafka's ``TransactionIndexFile`` does; appends go to the end of
    the file (``O_APPEND``), after any torn tail, exactly as Kafka's channel positioned at the
    file size.

    One deliberate difference: Kafka starts a reopened index with no "last offset" and so accepts
    any first append; here the last complete entry of an existing file is the bound, so an
    append can never make ``last_offset`` go backwards within a file (``truncate_to`` relies on
    that order).
    """

    def __init__(self, path: str | os.PathLike[str], start_offset: int) -> None:
        self._path = path if isinstance(path, Path) else Path(path)
        self._start_offset = int(start_offset)
        self._fd: int | None = None
        self._last_offset: int | None | object = _UNKNOWN
        self._lock = threading.RLock()

    # -- file handling ---------------------------------------------------------------------------

    def _channel(self) -> int:
        """The open descriptor, (re)opening, and creating, the file when needed."""
        if self._fd is None:
            self._fd = open_data_file(self._path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def _chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """Every complete entry in file order, ``_CHUNK_ENTRIES`` at a time: ``(number of the
        chunk's first entry, a structured big-endian array)``; a partial tail is not read."""
        if self._fd is None and not self._path.exists():
            return
        fd = self._channel()
        total = os.fstat(fd).st_size // AbortedTxn.SIZE
        for first in range(0, total, _CHUNK_ENTRIES):
            data = os.pread(fd, min(_CHUNK_ENTRIES, total - first) * AbortedTxn.SIZE, first * AbortedTxn.SIZE)
            count = len(data) // AbortedTxn.SIZE
            if count:
                yield first, np.frombuffer(data, dtype=_DTYPE, count=count)
            if count < _CHUNK_ENTRIES:
                return

    def _check_versions(self, entries: np.ndarray, first: int = 0) -> None:
        """Kafka reads the version as the entry's first byte, signed: > 0 is unknown
        (``entries`` begin with entry number ``first`` of the file)."""
        first_byte = entries["version"].astype(np.int16) >> 8
        bad = np.flatnonzero(first_byte > AbortedTxn.CURRENT_VERSION)
        if bad.size:
            raise self._bad_version(first + int(bad[0]), int(first_byte[bad[0]]))

    def _bad_version(self, n: int, version: int) -> CorruptIndexError:
        return CorruptIndexError(
            f"Unexpected aborted transaction version {version} in transaction index {self._path} "
            f"at position {n * AbortedTxn.SIZE}, current version is {AbortedTxn.CURRENT_VERSION}")

    @staticmethod
    def _txns(entries: np.ndarray) -> list[AbortedTxn]:
        return [AbortedTxn(pid, first, last, lso) for _, pid, first, last, lso in entries.tolist()]

    def _known_last_offset(self) -> int | None:
        if self._last_offset is _UNKNOWN:
            last = None
            if self._fd is not None or self._path.exists():
                fd = self._channel()
                n = os.fstat(fd).st_size // AbortedTxn.SIZE
                if n:                           # the last complete entry alone
                    last = AbortedTxn.from_bytes(os.pread(fd, AbortedTxn.SIZE, (n - 1) * AbortedTxn.SIZE)).last_offset
            self._last_offset = last
        return self._last_offset  # type: ignore[return-value]

    # -- properties ------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def start_offset(self) -> int:
        return self._start_offset

    def is_empty(self) -> bool:
        """No complete entry (the file may not even exist)."""
        with self._lock:
            try:
                size = os.fstat(self._fd).st_size if self._fd is not None else self._path.stat().st_size
            except FileNotFoundError:
                return True
            return size < AbortedTxn.SIZE

    # -- writing ---------------------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Append an entry (creating the file); ``last_offset`` must strictly increase."""
        with self._lock:
            last = self._known_last_offset()
            if last is not None and last >= txn.last_offset:
                raise InvalidOffsetError(
                    f"The last offset of appended transactions must increase sequentially, but "
                    f"{txn.last_offset} is not greater than current last offset {last} of index "
                    f"{self._path}")
            data = memoryview(txn.to_bytes())
            fd = self._channel()
            while data:
                data = data[os.write(fd, data):]
            self._last_offset = txn.last_offset

    def truncate_to(self, offset: int) -> None:
        """Cut the file at the first entry with ``last_offset >= offset``; nothing if none."""
        with self._lock:
            before: int | None = None               # last_offset of the entry before the chunk
            for first, entries in self._chunks():
                hits = np.flatnonzero(entries["last_offset"] >= offset)
                if hits.size == 0:
                    self._check_versions(entries, first)
                    before = int(entries["last_offset"][-1])
                    continue
                cut = int(hits[0])
                self._check_versions(entries[:cut + 1], first)
                os.ftruncate(self._channel(), (first + cut) * AbortedTxn.SIZE)
                self._last_offset = int(entries["last_offset"][cut - 1]) if cut else before
                return

    def reset(self) -> None:
        """Remove every entry (the file is emptied, not created if absent)."""
        with self._lock:
            if self._fd is not None or self._path.exists():
                os.ftruncate(self._channel(), 0)
            self._last_offset = None

    # -- reading ---------------------------------------------------------------------------------

    def all_aborted_txns(self) -> list[AbortedTxn]:
        with self._lock:
            found: list[AbortedTxn] = []
            for first, entries in self._chunks():
                self._check_versions(entries, first)
                found.extend(self._txns(entries))
            return found

    def collect_aborted_txns(self, fetch_offset: int,
                             upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``: entries
        with ``last_offset >= fetch_offset and first_offset < upper_bound_offset``, in order, up
        to and including the first entry whose ``last_stable_offset >= upper_bound_offset``.
        The flag says whether that entry was found (the search is complete; otherwise the
        caller continues with the next segment's index)."""
        with self._lock:
            found: list[AbortedTxn] = []
            for first, entries in self._chunks():
                stops = np.flatnonzero(entries["last_stable_offset"] >= upper_bound_offset)
                if stops.size:
                    entries = entries[:int(stops[0]) + 1]
                self._check_versions(entries, first)
                keep = ((entries["last_offset"] >= fetch_offset)
                        & (entries["first_offset"] < upper_bound_offset))
                found.extend(self._txns(entries[keep]))
                if stops.size:
                    return found, True
            return found, False

    def sanity_check(self) -> None:
        """CorruptIndexError naming the file if an entry's ``last_offset`` is below the
        segment's start offset (run for every segment at log load; the segment is then
        recovered), or an entry has an unknown version."""
        with self._lock:
            for first, entries in self._chunks():
                first_byte = entries["version"].astype(np.int16) >> 8
                bad = np.flatnonzero((first_byte > AbortedTxn.CURRENT_VERSION)
                                     | (entries["last_offset"] < self._start_offset))
                if bad.size == 0:
                    continue
                n = int(bad[0])
                if first_byte[n] > AbortedTxn.CURRENT_VERSION:
                    raise self._bad_version(first + n, int(first_byte[n]))
                txn = self._txns(entries[n:n + 1])[0]
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self._path} is less than "
                    f"start offset {self._start_offset}")

    # -- durability and file life cycle ----------------------------------------------------------

    def flush(self) -> None:
        """fsync, if the file has been opened (a never-created index has nothing to flush)."""
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)

    def close(self) -> None:
        """Close the descriptor. Idempotent; a later read or append reopens the file."""
        with self._lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)

    def rename_to(self, new_path: str | os.PathLike[str]) -> None:
        """Move the file if it exists; the path is updated in any case (an open descriptor
        follows the file)."""
        new_path = Path(new_path)
        with self._lock:
            try:
                if self._path.exists():
                    os.replace(self._path, new_path)
            finally:
                self._path = new_path

    def update_parent_dir(self, parent_dir: str | os.PathLike[str]) -> None:
        with self._lock:
            self._path = Path(parent_dir) / self._path.name

    def delete_if_exists(self) -> bool:
        with self._lock:
            self.close()
            try:
                self._path.unlink()
            except FileNotFoundError:
                return False
            return True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TransactionIndex({str(self._path)!r}, start_offset={self._start_offset})"

"""The index base shared by ``.index`` and ``.timeindex`` (Kafka's ``AbstractIndex``: memory-mapped
for the writer, positioned reads for readers), and the entry helpers both subclasses use.

An index file is a flat array of fixed-size big-endian entries. It is preallocated while its
segment is active (sparse, zero-filled) and trimmed to its entries on close, exactly as Kafka
does; on open the number of entries is the file length divided by the entry size, with no scan
for zero slots (Kafka's ``AbstractIndex`` constructor: "set position to last entry"). A
writable index is mapped with :mod:`mmap` and searched with ``np.searchsorted`` over a
big-endian field view of the mapping (no copy of the file).

A read-only index is never mapped: the writer (this or another process) trims the file on roll,
close and truncation, and touching a mapped page past the new end of file is SIGBUS. It holds the
file open and reads entries with positioned reads (``os.pread``): a binary search over single
entries down to a block of a few KiB, one read of that block, ``np.searchsorted`` inside it. The
entry count is the one seen at open; a read that comes back short (the writer trimmed the file
since) shrinks the count to what the file still holds and searches again, so a stale reader gets
a lower position to scan from, never a crash. An index file longer than its configured maximum
(``segment.index.bytes``) is emptied for a rebuild by a writable open; a reader, which does not
know the topic's configuration (the Spark source opens with the defaults) and whose positioned
reads cost the same whatever the file's size, ignores only a file longer than any Kafka
configuration allows (an int: 2 GiB - 1; 0 entries, the segment is scanned). See
:func:`index_oversized`.

Errors: a full index raises :class:`IndexFullError` (a ``ValueError``; Kafka's
``IllegalArgumentException``); an out-of-order offset :class:`~storage_core.errors.InvalidOffsetError`;
a relative offset outside ``[0, Integer.MAX_VALUE]`` :class:`~storage_core.errors.OffsetOverflowError`;
``entry(n)`` past the entries ``IndexError``; a write through an index opened read-only
``io.UnsupportedOperation``; any use of a closed index ``ValueError``. Every message names the file.
"""

from __future__ import annotations

import gc
import io
import logging
import math
import mmap
import os
import struct
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Literal, Self

import numpy as np

from ..common import INT_MAX
from ..data_files import open_data_file, open_data_file_stat
from ..errors import InvalidConfigError, KafkaLogError, OffsetOverflowError

__all__ = ["AbstractIndex", "IndexFullError", "DEFAULT_MAX_INDEX_SIZE", "index_oversized",
           "index_file_oversized", "entry_columns"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024   # segment.index.bytes (LogConfig.DEFAULT_SEGMENT_INDEX_BYTES)
_WARM_BYTES = 8192        # AbstractIndex.warmEntries(): the last 8 KiB of entries are "warm"
_DIRECT_SEARCH = 4096     # below this many entries one searchsorted over the section is cheapest
_PREAD_BLOCK = 8192       # read-only search: bytes read at once once the binary search is this close
_KEY_STRUCTS = {4: struct.Struct(">i"), 8: struct.Struct(">q")}   # one big-endian key, by size

Side = Literal["left", "right"]


class _Shrunk(Exception):
    """A read-only index's file was trimmed under a read (internal: the search starts over)."""


class IndexFullError(KafkaLogError, ValueError):
    """Append to an index with no free slot (Kafka's ``IllegalArgumentException("Attempt to
    append to a full index")``). The segment rolls when its index is full, so seeing this means
    a caller skipped ``is_full()``."""


def _round_down(number: int, factor: int) -> int:
    """AbstractIndex.roundDownToExactMultiple, with Java's truncation for negatives (-1 -> 0)."""
    return factor * (max(number, 0) // factor)


def index_oversized(size: int, max_index_size: int, entry_size: int) -> bool:
    """Whether an index file of ``size`` bytes is longer than ``segment.index.bytes`` allows (the
    preallocated length, ``max_index_size`` rounded down to whole entries): no writer of this
    configuration made it, so it is not trusted, read or mapped. A max below one entry (Kafka's
    OffsetIndexTest opens existing files with -1) sets no bound: the file is taken as it is."""
    return max_index_size >= entry_size and size > _round_down(max_index_size, entry_size)


def index_file_oversized(path: str | os.PathLike[str], max_index_size: int, entry_size: int) -> bool:
    """:func:`index_oversized` for the file at ``path`` (False when there is none)."""
    try:
        return index_oversized(os.stat(path).st_size, max_index_size, entry_size)
    except FileNotFoundError:
        return False


def entry_columns(entries: Sequence[tuple[int, int]] | np.ndarray) -> np.ndarray:
    """Index entries as an ``(n, 2)`` array: int64, or of Python ints when a value does not fit
    int64 (the checks then still report it, as they would have entry by entry)."""
    if isinstance(entries, np.ndarray) and entries.dtype == np.int64:
        return entries.reshape(-1, 2)
    if isinstance(entries, np.ndarray):
        entries = entries.tolist()          # no silent cast of other dtypes
    try:
        return np.array(entries, np.int64).reshape(-1, 2)
    except OverflowError:
        return np.array(entries, object).reshape(-1, 2)


def _searchsorted(keys: np.ndarray, target: int, side: Side, warm: int) -> int:
    """``np.searchsorted(keys, target, side)`` over a sorted, strided, big-endian field view,
    touching O(sqrt n) entries instead of byte-swapping the whole array (searchsorted copies a
    non-native view to native order first, so one plain search would byte-swap every entry).

    Like AbstractIndex.indexSlotRangeFor, the last ``warm`` entries are tried first: in-sync
    readers look up near the end, and those pages stay in the page cache.
    """
    n = len(keys)
    info = np.iinfo(keys.dtype)
    if n == 0 or target < info.min:
        return 0
    if target > info.max:
        return n
    first_hot = max(0, n - 1 - warm)
    pivot = int(keys[first_hot])
    if pivot < target or (side == "right" and pivot == target):
        # every key before first_hot is on the same side of the target as the pivot
        return first_hot + int(np.searchsorted(keys[first_hot:], target, side))
    cold = keys[:first_hot]
    m = len(cold)
    if m <= _DIRECT_SEARCH:
        return int(np.searchsorted(cold, target, side))
    # two levels: first among every step-th key, then inside the one block that can hold the answer
    step = math.isqrt(m)
    k = int(np.searchsorted(cold[::step], target, side))   # == ceil(answer / step)
    if k == 0:
        return 0
    lo, hi = (k - 1) * step + 1, min(k * step, m)
    return lo + int(np.searchsorted(cold[lo:hi], target, side))


class AbstractIndex:
    """Mirrors ``org.apache.kafka.storage.internals.log.AbstractIndex``: file life cycle
    (create/preallocate, open, resize, trim, rename, delete), the entry count and the search.

    Opening:

    * the file does not exist (``writable``): it is created with length
      ``ENTRY_SIZE * floor(max_index_size / ENTRY_SIZE)`` (sparse, zero-filled), 0 entries;
    * it exists: it is mapped as it is and ``entries = floor(length / ENTRY_SIZE)``: every slot
      counts, with no scan for zero slots. A trimmed (rolled) index is therefore full, and an
      untrimmed one left by a crash counts its zero slots as ``(base_offset, 0)`` entries. The
      file is not preallocated again here: like Kafka (``LogLoader.resizeIndexes``,
      ``LogSegment.truncateTo``), whoever makes the segment active calls
      ``resize(max_index_size)``, so rolled segments stay trimmed on disk even if the process
      dies while they are open;
    * ``writable=False``: never mapped, never changed or created; entries are read with
      positioned reads through a descriptor held from open (see the module doc). A 0-byte,
      missing or oversized file is an index with no entries and no slots.
    """

    ENTRY_SIZE: ClassVar[int]
    _DTYPE: ClassVar[np.dtype]          # big-endian structured dtype of one entry (the file layout)
    _NATIVE_DTYPE: ClassVar[np.dtype]   # the same fields in native order, for entries_array()
    _KIND: ClassVar[str] = "index"

    def __init__(self, path: str | os.PathLike[str], base_offset: int,
                 max_index_size: int = DEFAULT_MAX_INDEX_SIZE, writable: bool = True) -> None:
        self._path = path if isinstance(path, Path) else Path(path)
        self._base_offset = int(base_offset)
        self._max_index_size = int(max_index_size)
        self._writable = writable
        # one lock for mutations and remaps (Kafka has `lock` + `remapLock`): a lookup must not
        # run while resize() swaps the mapping under it
        self._lock = threading.RLock()
        self._mm: mmap.mmap | None = None
        self._fd = -1                       # read-only: the file, read with os.pread
        self._length = 0
        self._entries = 0
        self._closed = False
        self._open()
        self._refresh_last()

    # -- opening and mapping ---------------------------------------------------------------------

    def _open(self) -> None:
        es = self.ENTRY_SIZE
        if not self._writable:
            try:
                self._fd, st = open_data_file_stat(self._path, os.O_RDONLY, follow_symlinks=True)
            except FileNotFoundError:
                # nothing to read and nothing may be created: an index with no entries and no
                # slots, so readers fall back to scanning the log from its start
                self._length = self._entries = 0
                return
            self._length = st.st_size
            limit = max(self._max_index_size, INT_MAX)
            if index_oversized(self._length, limit, es):
                logger.warning("Ignoring %s %s: %d bytes, more than segment.index.bytes (at most %d) "
                               "allows; the segment is read by scanning", self._KIND, self._path,
                               self._length, limit)
                self._length = 0
            self._entries = self._length // es
            return
        if not self._path.exists() and self._max_index_size < es:
            raise InvalidConfigError(
                f"Invalid max index size {self._max_index_size} for {self._path} "
                f"(segment.index.bytes must be at least {es})")
        try:
            fd = open_data_file(self._path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
        except FileExistsError:
            fd = open_data_file(self._path, os.O_RDWR)
            created = False
        try:
            if created:
                # Kafka: raf.setLength(roundDownToExactMultiple(maxIndexSize, entrySize))
                self._length = _round_down(self._max_index_size, es)
                os.ftruncate(fd, self._length)
            else:
                # "assume it is valid and set position to last entry": every slot is an entry
                self._length = os.fstat(fd).st_size
                if index_oversized(self._length, self._max_index_size, es):
                    # not made by a writer of this configuration: emptied, so the segment is
                    # recovered (Log._load) and the index rebuilt, instead of mapping it whole
                    logger.warning("Emptying %s %s for a rebuild: %d bytes, more than "
                                   "segment.index.bytes (%d) allows", self._KIND, self._path,
                                   self._length, self._max_index_size)
                    os.ftruncate(fd, 0)
                    self._length = 0
            self._entries = 0 if created else self._length // es
            self._mm = self._map(fd, self._length)
        finally:
            os.close(fd)

    def _map(self, fd: int, length: int) -> mmap.mmap | None:
        if length == 0:
            return None   # mmap cannot map 0 bytes: an index with no slots
        access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
        return mmap.mmap(fd, length, access=access)

    def _unmap(self) -> None:
        """Kafka's forceUnmap (KAFKA-4614): release the mapping now, not at garbage collection
        (and a read-only index's descriptor)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        mm, self._mm = self._mm, None
        if mm is None:
            return
        try:
            mm.close()
        except BufferError:
            # a numpy view of the mapping is still referenced (typically from a traceback frame)
            gc.collect()
            try:
                mm.close()
            except BufferError:
                self._mm = mm
                raise BufferError(f"{self._path}: cannot unmap the index, a view of it is "
                                  f"still in use") from None

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"I/O operation on closed {self._KIND} {self._path}")

    def _check_writable(self) -> None:
        if not self._writable:
            raise io.UnsupportedOperation(f"{self._KIND} {self._path} was opened read-only")

    # -- subclass hooks --------------------------------------------------------------------------

    def _refresh_last(self) -> None:
        """Recompute the cached last entry after the entry count or the mapping changed."""
        raise NotImplementedError

    def sanity_check(self) -> None:
        raise NotImplementedError

    def truncate_to(self, offset: int) -> None:
        raise NotImplementedError

    # -- properties ------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY_SIZE

    @property
    def length(self) -> int:
        """Length of the file (and mapping) in bytes, preallocated slots included."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes actually used by entries."""
        return self._entries * self.ENTRY_SIZE

    @property
    def closed(self) -> bool:
        return self._closed

    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    # -- offsets ---------------------------------------------------------------------------------

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` fits the 32-bit relative offsets of this index."""
        return 0 <= offset - self._base_offset <= INT_MAX

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``, or OffsetOverflowError if it does not fit in 31 bits."""
        rel = offset - self._base_offset
        if not 0 <= rel <= INT_MAX:
            raise OffsetOverflowError(
                f"Integer overflow for offset: {offset} ({self._path}, base offset "
                f"{self._base_offset})")
        return rel

    # -- reading ---------------------------------------------------------------------------------

    def _view(self) -> np.ndarray:
        """The valid entries as a structured big-endian view of the mapping (no copy; read-only:
        a copy read with pread). Callers keep it local and drop it before returning: a live view
        prevents unmapping."""
        if self._entries == 0 or (self._mm is None and self._fd < 0):
            return np.empty(0, dtype=self._DTYPE)
        if self._mm is None:
            return self._read_entries(0, self._entries)
        return np.frombuffer(self._mm, dtype=self._DTYPE, count=self._entries)

    def _search(self, field: str, target: int, side: Side) -> int:
        """``searchsorted`` over one field of the valid entries: with side ``right`` the number
        of entries whose field is ``<= target``, with ``left`` the number ``< target``."""
        if self._mm is None:
            return self._search_pread(field, target, side)
        view = self._view()
        try:
            return _searchsorted(view[field], target, side, _WARM_BYTES // self.ENTRY_SIZE)
        finally:
            del view

    # -- read-only: positioned reads ---------------------------------------------------------------

    def _read_entries(self, start: int, count: int) -> np.ndarray:
        """Entries ``[start, start + count)`` read from the file (read-only indexes). A short
        read means the writer trimmed the file since this index counted its entries: the count
        shrinks to what the file holds and :class:`_Shrunk` tells the caller to start over."""
        want = count * self.ENTRY_SIZE
        data = os.pread(self._fd, want, start * self.ENTRY_SIZE) if want else b""
        if len(data) < want:
            raise self._shrunk()
        return np.frombuffer(data, dtype=self._DTYPE)

    def _entry_bytes(self, n: int) -> tuple[bytes | mmap.mmap, int]:
        """A buffer holding entry ``n`` and its offset in it (``struct.unpack_from`` arguments).
        Read-only: a positioned read; past the end of a file trimmed since open, zero bytes,
        which every index reads as its empty answer (the base offset, position 0)."""
        if self._mm is not None:
            return self._mm, n * self.ENTRY_SIZE
        data = os.pread(self._fd, self.ENTRY_SIZE, n * self.ENTRY_SIZE) if self._fd >= 0 else b""
        return data.ljust(self.ENTRY_SIZE, b"\0"), 0

    @classmethod
    def _field(cls, field: str) -> tuple[np.dtype, int]:
        """The dtype and the byte offset in an entry of one field of the entry layout."""
        fields = cls._DTYPE.fields
        assert fields is not None, cls._DTYPE     # _DTYPE is a structured dtype
        dtype, at = fields[field][:2]
        return dtype, at

    @classmethod
    def _field_struct(cls, field: str) -> struct.Struct:
        return _KEY_STRUCTS[cls._field(field)[0].itemsize]

    def _shrunk(self) -> _Shrunk:
        """The file was trimmed since open: keep the entries it still holds."""
        self._entries = min(self._entries, os.fstat(self._fd).st_size // self.ENTRY_SIZE)
        self._refresh_last()
        return _Shrunk()

    def _search_pread(self, field: str, target: int, side: Side) -> int:
        """:func:`_searchsorted` by positioned reads: one key read per step of a binary search
        until the range fits ``_PREAD_BLOCK``, then one read of the range and ``np.searchsorted``.
        Like AbstractIndex.indexSlotRangeFor the first key read bounds the warm tail (the last
        8 KiB of entries, where in-sync readers look), which is then one block. Starts over if
        the writer trimmed the file meanwhile."""
        while True:
            try:
                return self._search_pread_once(field, target, side)
            except _Shrunk:
                continue

    def _search_pread_once(self, field: str, target: int, side: Side) -> int:
        n = self._entries
        dtype, at = self._field(field)
        info = np.iinfo(dtype)
        if n == 0 or self._fd < 0 or target < info.min:
            return 0
        if target > info.max:
            return n
        es = self.ENTRY_SIZE
        key = self._field_struct(field)
        fd, size, unpack, pread = self._fd, key.size, key.unpack, os.pread
        right = side == "right"
        block = _PREAD_BLOCK // es
        lo, hi = 0, n                       # the answer is in [lo, hi]
        mid = max(0, n - 1 - _WARM_BYTES // es)
        while hi - lo > block:
            data = pread(fd, size, mid * es + at)
            if len(data) < size:
                raise self._shrunk()
            k = unpack(data)[0]
            if k < target or (right and k == target):
                lo = mid + 1
            else:
                hi = mid
            mid = (lo + hi) >> 1
        return lo + int(np.searchsorted(self._read_entries(lo, hi - lo)[field], target, side))

    def _check_slot(self, n: int) -> None:
        if not 0 <= n < self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from {self._KIND} {self._path}, "
                             f"which has size {self._entries}")

    def entries_array(self) -> np.ndarray:
        """A native-order copy of the valid entries (for dump and verify tools)."""
        with self._lock:
            self._check_open()
            while True:
                try:
                    view = self._view()
                    break
                except _Shrunk:
                    continue        # trimmed by the writer since open: what the file holds now
            try:
                return view.astype(self._NATIVE_DTYPE)
            finally:
                del view

    # -- truncation and size ---------------------------------------------------------------------

    def _truncate_to_entries(self, entries: int) -> None:
        entries = max(0, min(entries, self._entries))
        if self._mm is not None and self._writable and entries < self._entries:
            # Kafka leaves the bytes of dropped entries in the file until they are trimmed or
            # overwritten; a reader in another process counts every slot, so they are zeroed:
            # a zero slot reads as (base offset, position 0), a lower place to scan from, where
            # a dropped entry would point into the batches appended after the truncation
            self._mm[entries * self.ENTRY_SIZE:self._entries * self.ENTRY_SIZE] = \
                bytes((self._entries - entries) * self.ENTRY_SIZE)
        self._entries = entries
        self._refresh_last()

    def truncate(self) -> None:
        """Remove all entries (the file keeps its size)."""
        with self._lock:
            self._check_open()
            self._truncate_to_entries(0)

    def resize(self, new_size: int) -> bool:
        """Set the file (and mapping) length to ``new_size`` rounded down to a multiple of
        ENTRY_SIZE, keeping the entries that still fit. Returns whether the length changed."""
        with self._lock:
            self._check_open()
            rounded = _round_down(new_size, self.ENTRY_SIZE)
            if rounded == self._length:
                return False
            self._check_writable()
            fd = open_data_file(self._path, os.O_RDWR)
            try:
                self._unmap()        # unmap before shrinking: touching a page past EOF is SIGBUS
                os.ftruncate(fd, rounded)
                self._length = rounded
                self._mm = self._map(fd, rounded)
            finally:
                os.close(fd)
            self._entries = min(self._entries, rounded // self.ENTRY_SIZE)
            self._refresh_last()
            return True

    def trim_to_valid_size(self) -> None:
        """Drop the preallocated tail (on roll, close, and after recovery)."""
        with self._lock:
            self._check_open()
            self.resize(self._entries * self.ENTRY_SIZE)

    def reset(self) -> None:
        """Remove all entries and preallocate ``max_index_size`` again."""
        with self._lock:
            self.truncate()
            self.resize(self._max_index_size)

    # -- durability and file life cycle ----------------------------------------------------------

    def flush(self) -> None:
        """msync the mapping (Kafka's ``mmap.force()``)."""
        with self._lock:
            self._check_open()
            if self._mm is not None and self._writable:
                self._mm.flush()

    def close(self) -> None:
        """Trim a writable index to its entries, then unmap. Idempotent. A file already deleted
        has nothing to trim (Kafka would recreate it here; there is no reason to)."""
        with self._lock:
            if self._closed:
                return
            try:
                if self._writable:
                    self.trim_to_valid_size()
            except FileNotFoundError:
                pass
            finally:
                self._unmap()
                self._closed = True

    def close_handler(self) -> None:
        """Unmap without trimming (Kafka's ``closeHandler``)."""
        with self._lock:
            self._unmap()
            self._closed = True

    def rename_to(self, new_path: str | os.PathLike[str]) -> None:
        """Rename the file (``.deleted``/``.cleaned``/``.swap`` suffixes); the path is updated even
        if the rename fails, as Kafka's ``renameTo`` does in ``finally``. A file that does not
        exist (a read-only index opened on a missing file) just changes path, as Kafka's
        LazyIndex does before loading."""
        new_path = Path(new_path)
        with self._lock:
            try:
                os.replace(self._path, new_path)   # atomic move, replacing an existing target
            except FileNotFoundError:
                if self._path.exists():
                    raise
            finally:
                self._path = new_path

    def update_parent_dir(self, parent_dir: str | os.PathLike[str]) -> None:
        with self._lock:
            self._path = Path(parent_dir) / self._path.name

    def delete_if_exists(self) -> bool:
        """Unmap (no trim) and delete the file; False if it did not exist."""
        with self._lock:
            self.close_handler()
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
        state = "closed" if self._closed else ("rw" if self._writable else "ro")
        return (f"{type(self).__name__}({str(self._path)!r}, base_offset={self._base_offset}, "
                f"entries={self._entries}, max_entries={self.max_entries}, {state})")

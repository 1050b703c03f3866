"""The offset index ``.index`` (Kafka's ``OffsetIndex``, kafka_format.md §8).

A sparse map from offsets to byte positions in the segment's ``.log``: 8-byte big-endian entries
``(int32 offset - baseOffset, int32 position)``. An entry ``(O, P)`` says the append (or, after
recovery, the batch) starting at position ``P`` ends with offset ``O`` (the *last* offset).
Readers look up the floor entry and scan the log forward from its position.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..errors import CorruptIndexError, InvalidOffsetError
from .abstract_index import INT32_MAX, AbstractIndex, IndexFullError

__all__ = ["OffsetIndex", "OffsetPosition"]

_ENTRY = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    """An offset and the byte position in the ``.log`` of the batch that ends with it."""

    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """Mirrors ``org.apache.kafka.storage.internals.log.OffsetIndex``. See :class:`AbstractIndex`
    for opening, preallocation and the error types."""

    ENTRY_SIZE = 8
    _DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
    _NATIVE_DTYPE = np.dtype([("relative_offset", "=i4"), ("position", "=i4")])
    _KIND = "offset index"

    _last_offset: int

    def _refresh_last(self) -> None:
        self._last_offset = self._last_entry().offset

    def _parse(self, n: int) -> OffsetPosition:
        assert self._mm is not None
        rel, position = _ENTRY.unpack_from(self._mm, n * self.ENTRY_SIZE)
        return OffsetPosition(self._base_offset + rel, position)

    def _last_entry(self) -> OffsetPosition:
        if self._entries == 0:
            return OffsetPosition(self._base_offset, 0)
        return self._parse(self._entries - 1)

    @property
    def last_offset(self) -> int:
        """The last entry's offset, or the base offset when empty."""
        return self._last_offset

    def entry(self, n: int) -> OffsetPosition:
        """The n-th entry, with its absolute offset."""
        with self._lock:
            self._check_open()
            self._check_slot(n)
            return self._parse(n)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``; ``(base_offset, 0)`` if there
        is none (empty index, or target below the first entry)."""
        with self._lock:
            self._check_open()
            slot = self._search("relative_offset", target_offset - self._base_offset, "right") - 1
            return OffsetPosition(self._base_offset, 0) if slot < 0 else self._parse(slot)

    def fetch_upper_bound_offset(self, fetch_position: int,
                                 fetch_size: int) -> OffsetPosition | None:
        """The first entry whose position is >= ``fetch_position + fetch_size``: an offset surely
        past the fetched bytes (bounds the ``.txnindex`` search, §10); None if there is none."""
        with self._lock:
            self._check_open()
            slot = self._search("position", fetch_position + fetch_size, "left")
            return None if slot >= self._entries else self._parse(slot)

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``. The offset must be above the last entry's."""
        with self._lock:
            self._check_open()
            if self.is_full():
                raise IndexFullError(f"Attempt to append to a full offset index {self._path} "
                                     f"(size = {self._entries})")
            if self._entries != 0 and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset {offset} to position {self._entries} no larger "
                    f"than the last offset appended ({self._last_offset}) to {self._path}")
            rel = self.relative_offset(offset)
            if not 0 <= position <= INT32_MAX:
                raise ValueError(f"Position {position} for offset {offset} does not fit the int32 "
                                 f"positions of {self._path}")
            self._check_writable()
            assert self._mm is not None
            _ENTRY.pack_into(self._mm, self._entries * self.ENTRY_SIZE, rel, position)
            self._entries += 1
            self._last_offset = offset

    def append_many(self, entries: list[tuple[int, int]]) -> None:
        """``append`` for each ``(offset, position)`` in order (the entries of a multi-batch
        append), under one lock; nothing is written unless all are valid."""
        with self._lock:
            self._check_open()
            if not entries:
                return
            if self._entries + len(entries) > self.max_entries:
                raise IndexFullError(f"Attempt to append to a full offset index {self._path} "
                                     f"(size = {self._entries})")
            last = self._last_offset if self._entries else None
            rows = []
            for offset, position in entries:
                if last is not None and offset <= last:
                    raise InvalidOffsetError(
                        f"Attempt to append an offset {offset} to position "
                        f"{self._entries + len(rows)} no larger than the last offset appended "
                        f"({last}) to {self._path}")
                if not 0 <= position <= INT32_MAX:
                    raise ValueError(f"Position {position} for offset {offset} does not fit the "
                                     f"int32 positions of {self._path}")
                rows.append((self.relative_offset(offset), position))
                last = offset
            self._check_writable()
            assert self._mm is not None
            at = self._entries * self.ENTRY_SIZE
            self._mm[at:at + len(rows) * self.ENTRY_SIZE] = np.array(rows, self._DTYPE).tobytes()
            self._entries += len(rows)
            self._last_offset = last

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``. Kafka's rule (floor slot; an exact hit
        keeps ``slot`` entries, else ``slot + 1``; no floor keeps none) is exactly "keep the
        entries below ``offset``" on strictly increasing offsets, i.e. a left searchsorted."""
        with self._lock:
            self._check_open()
            self._truncate_to_entries(
                self._search("relative_offset", offset - self._base_offset, "left"))

    def sanity_check(self) -> None:
        """CorruptIndexError naming the file if the last entry is below the base offset (a
        negative relative offset) or the length is not a multiple of 8. Not a full check: it is
        what Kafka's DumpLogSegments ``--index-sanity-check`` and the remote index cache run."""
        with self._lock:
            self._check_open()
            if self._entries != 0 and self._last_offset < self._base_offset:
                raise CorruptIndexError(
                    f"Corrupt index found, index file {self._path} has non-zero size but the last "
                    f"offset is {self._last_offset} which is less than the base offset "
                    f"{self._base_offset}")
            if self._length % self.ENTRY_SIZE != 0:
                raise CorruptIndexError(
                    f"Index file {self._path} is corrupt, found {self._length} bytes which is "
                    f"neither positive nor a multiple of {self.ENTRY_SIZE}")

"""The offset index ``.index`` (Kafka's ``OffsetIndex``).

A sparse map from offsets to byte positions in the segment's ``.log``: 8-byte big-endian entries
``(int32 offset - baseOffset, int32 position)``. An entry ``(O, P)`` says the append (or, after
recovery, the batch) starting at position ``P`` ends with offset ``O`` (the *last* offset).
Readers look up the floor entry and scan the log forward from its position.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from ..common import INT_MAX
from ..errors import CorruptIndexError, InvalidOffsetError
from .abstract_index import AbstractIndex, IndexFullError, entry_columns

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
        rel, position = _ENTRY.unpack_from(*self._entry_bytes(n))
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
        past the fetched bytes (bounds the ``.txnindex`` search, as in Kafka's
        ``LocalLog.addAbortedTransactions``); None if there is none."""
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
            if not 0 <= position <= INT_MAX:
                raise ValueError(f"Position {position} for offset {offset} does not fit the int32 "
                                 f"positions of {self._path}")
            self._check_writable()
            assert self._mm is not None
            _ENTRY.pack_into(self._mm, self._entries * self.ENTRY_SIZE, rel, position)
            self._entries += 1
            self._last_offset = offset

    def append_many(self, entries: Sequence[tuple[int, int]] | np.ndarray) -> None:
        """``append`` for each ``(offset, position)`` in order (the entries of a multi-batch
        append), under one lock and with one write; nothing is written unless all are valid.
        ``entries``: pairs, or an ``(n, 2)`` int64 array of them (checked vectorised)."""
        with self._lock:
            self._check_open()
            cols = entry_columns(entries)
            n = cols.shape[0]
            if n == 0:
                return
            if self._entries + n > self.max_entries:
                raise IndexFullError(f"Attempt to append to a full offset index {self._path} "
                                     f"(size = {self._entries})")
            offsets, positions = cols[:, 0], cols[:, 1]
            base = self._base_offset
            first, last = int(offsets[0]), int(offsets[-1])
            # valid offsets strictly increase, so the first and last bound them all
            if not ((n == 1 or bool((offsets[1:] > offsets[:-1]).all()))
                    and (not self._entries or first > self._last_offset)
                    and base <= first and last <= base + INT_MAX
                    and positions.min() >= 0 and positions.max() <= INT_MAX):
                self._raise_first_invalid(offsets, positions)
            self._check_writable()
            assert self._mm is not None
            rows = np.empty(n, self._DTYPE)
            rows["relative_offset"] = offsets - base
            rows["position"] = positions
            at = self._entries * self.ENTRY_SIZE
            self._mm[at:at + rows.nbytes] = rows.data      # the entries as a buffer, no copy
            self._entries += n
            self._last_offset = last

    def _raise_first_invalid(self, offsets: np.ndarray, positions: np.ndarray) -> NoReturn:
        """Raise what ``append_many`` entry by entry would have: every entry's checks at once
        (bounds compared, not subtracted: no int64 wrap), then the first failing entry's, in
        order, with its numbers."""
        base = self._base_offset
        bad = ((positions < 0) | (positions > INT_MAX)
               | (offsets < base) | (offsets > base + INT_MAX))
        bad[1:] |= offsets[1:] <= offsets[:-1]
        if self._entries:
            bad[0] |= offsets[0] <= self._last_offset
        i = int(np.flatnonzero(bad)[0])
        offset, position = int(offsets[i]), int(positions[i])
        last = int(offsets[i - 1]) if i else self._last_offset if self._entries else None
        if last is not None and offset <= last:
            raise InvalidOffsetError(
                f"Attempt to append an offset {offset} to position {self._entries + i} no "
                f"larger than the last offset appended ({last}) to {self._path}")
        if not 0 <= position <= INT_MAX:
            raise ValueError(f"Position {position} for offset {offset} does not fit the int32 "
                             f"positions of {self._path}")
        self.relative_offset(offset)                    # OffsetOverflowError
        raise AssertionError(f"entry {i} of {self._path} failed only the array checks")

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

"""The time index ``.timeindex`` (Kafka's ``TimeIndex``).

12-byte big-endian entries ``(int64 timestamp, int32 offset - baseOffset)``. An entry ``(T, O)``
says the largest timestamp in the segment up to the batch ending at ``O`` is ``T``, so any
record with a timestamp above ``T`` comes after ``O``. Timestamps strictly increase along the
file; the last entry is the segment's max timestamp (written on roll/close), and the last slot
of a preallocated file is kept free for it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..common import INT_MAX
from ..errors import CorruptIndexError, InvalidOffsetError
from .abstract_index import AbstractIndex, IndexFullError, entry_columns

__all__ = ["TimeIndex", "TimestampOffset"]

NO_TIMESTAMP = -1   # RecordBatch.NO_TIMESTAMP
_ENTRY = struct.Struct(">qi")
_INT64 = np.iinfo(np.int64)


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """A timestamp and the offset at or after which records may carry larger timestamps."""

    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """Mirrors ``org.apache.kafka.storage.internals.log.TimeIndex``. See :class:`AbstractIndex`
    for opening, preallocation and the error types; a timestamp below the last entry's raises
    ``ValueError`` (Kafka's ``IllegalStateException``)."""

    ENTRY_SIZE = 12
    _DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
    _NATIVE_DTYPE = np.dtype([("timestamp", "=i8"), ("relative_offset", "=i4")])
    _KIND = "time index"

    _last_entry: TimestampOffset

    def _refresh_last(self) -> None:
        # Kafka's lastEntryFromIndexFile(); also after resize(), as TimeIndex.resize does
        if self._entries == 0:
            self._last_entry = TimestampOffset(NO_TIMESTAMP, self._base_offset)
        else:
            self._last_entry = self._parse(self._entries - 1)

    def _parse(self, n: int) -> TimestampOffset:
        timestamp, rel = _ENTRY.unpack_from(*self._entry_bytes(n))
        return TimestampOffset(timestamp, self._base_offset + rel)

    def is_full(self) -> bool:
        """One slot short of the capacity: the last one is reserved for the entry written when the
        segment rolls or closes (``maybe_append(..., skip_full_check=True)``)."""
        return self._entries >= self.max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty."""
        return self._last_entry

    def entry(self, n: int) -> TimestampOffset:
        """The n-th entry, with its absolute offset."""
        with self._lock:
            self._check_open()
            self._check_slot(n)
            return self._parse(n)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp``; ``(-1, base_offset)`` if
        there is none."""
        with self._lock:
            self._check_open()
            slot = self._search("timestamp", target_timestamp, "right") - 1
            if slot < 0:
                return TimestampOffset(NO_TIMESTAMP, self._base_offset)
            return self._parse(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if the timestamp is above the last entry's (an empty
        index's last entry is ``(-1, base)``, so ``timestamp <= -1`` is never indexed and an
        equal timestamp is silently skipped: that is the roll/close call repeating the last
        entry). Kafka's checks, in order: full (unless ``skip_full_check``) -> IndexFullError;
        offset below the last entry's -> InvalidOffsetError; timestamp below -> ValueError."""
        with self._lock:
            self._check_open()
            if not skip_full_check and self.is_full():
                raise IndexFullError(f"Attempt to append to a full time index {self._path} "
                                     f"(size = {self._entries})")
            last = self._last_entry
            if self._entries != 0 and offset < last.offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {self._entries} no larger "
                    f"than the last offset appended ({last.offset}) to {self._path}")
            if self._entries != 0 and timestamp < last.timestamp:
                raise ValueError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {self._entries} no "
                    f"larger than the last timestamp appended ({last.timestamp}) to {self._path}")
            if timestamp <= last.timestamp:
                return
            if timestamp > _INT64.max:
                raise ValueError(f"Timestamp {timestamp} does not fit the int64 timestamps of "
                                 f"{self._path}")
            rel = self.relative_offset(offset)
            if self._entries >= self.max_entries:
                # even skip_full_check needs a physical slot (Kafka: BufferOverflowException)
                raise IndexFullError(f"No slot left in time index {self._path} "
                                     f"(size = {self._entries})")
            self._check_writable()
            assert self._mm is not None
            _ENTRY.pack_into(self._mm, self._entries * self.ENTRY_SIZE, timestamp, rel)
            self._entries += 1
            self._last_entry = TimestampOffset(timestamp, offset)


    def maybe_append_many(self, entries: Sequence[tuple[int, int]] | np.ndarray) -> None:
        """``maybe_append`` for each ``(timestamp, offset)`` in order (a multi-batch append's
        entries), under one lock and with one write; nothing is written unless all are valid.
        ``entries``: pairs, or an ``(n, 2)`` int64 array of them (checked vectorised)."""
        with self._lock:
            self._check_open()
            cols = entry_columns(entries)
            n = cols.shape[0]
            if n == 0:
                return
            timestamps, offsets = cols[:, 0], cols[:, 1]
            last = self._last_entry
            base = self._base_offset
            low_off, high_off = int(offsets[0]), int(offsets[-1])
            if ((n == 1 or (bool((timestamps[1:] > timestamps[:-1]).all())
                            and bool((offsets[1:] >= offsets[:-1]).all())))
                    and int(timestamps[0]) > last.timestamp
                    and int(timestamps[-1]) <= _INT64.max
                    and (not self._entries or low_off >= last.offset)
                    and base <= low_off and high_off <= base + INT_MAX
                    and self._entries + n - 1 < self.max_entries - 1):   # last slot: not full
                # the usual case (a segment's entries): every timestamp above the one before,
                # so every entry goes in, in order and in range
                new_ts, new_off = timestamps, offsets
            else:
                new_ts, new_off = self._appended_entries(timestamps, offsets)
            m = len(new_ts)
            if m == 0:
                return
            self._check_writable()
            assert self._mm is not None
            rows = np.empty(m, self._DTYPE)
            rows["timestamp"] = new_ts
            rows["relative_offset"] = new_off - base
            at = self._entries * self.ENTRY_SIZE
            self._mm[at:at + rows.nbytes] = rows.data      # the entries as a buffer, no copy
            self._entries += m
            self._last_entry = TimestampOffset(int(new_ts[-1]), int(new_off[-1]))

    def _appended_entries(self, timestamps: np.ndarray, offsets: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
        """The entries ``maybe_append_many`` appends (timestamps and offsets), else what it
        raises appending entry by entry: every entry's checks at once, then the first failing
        entry's, in order, with its numbers."""
        last = self._last_entry
        base = self._base_offset
        # Entry by entry, an entry goes in when its timestamp is above the last entry's, which
        # is then the largest so far: ``before[i]``, the running max, is the last timestamp
        # entry i sees, and ``last_off[i]`` the offset of the last entry appended before it.
        before = np.maximum.accumulate(np.concatenate(([last.timestamp], timestamps)))[:-1]
        appended = timestamps > before
        new_ts, new_off = timestamps[appended], offsets[appended]
        done: np.ndarray = np.cumsum(appended) - appended   # entries appended before entry i
        slot = self._entries + done
        last_off = np.concatenate(([last.offset], new_off))[done]
        seen = slot > 0                     # an index with entries: the order checks apply
        bad = ((slot >= self.max_entries - 1)                           # is_full()
               | (seen & ((offsets < last_off) | (timestamps < before)))
               | (appended & ((timestamps > _INT64.max)
                              | (offsets < base) | (offsets > base + INT_MAX))))
        hit = np.flatnonzero(bad)
        if not hit.size:
            return new_ts, new_off
        i = int(hit[0])
        timestamp, offset = int(timestamps[i]), int(offsets[i])
        k, last_ts, prev_off = int(slot[i]), int(before[i]), int(last_off[i])
        if k >= self.max_entries - 1:
            raise IndexFullError(f"Attempt to append to a full time index {self._path} "
                                 f"(size = {k})")
        if k and offset < prev_off:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {k} no larger than the last "
                f"offset appended ({prev_off}) to {self._path}")
        if k and timestamp < last_ts:
            raise ValueError(
                f"Attempt to append a timestamp ({timestamp}) to slot {k} no larger than the "
                f"last timestamp appended ({last_ts}) to {self._path}")
        if timestamp > _INT64.max:
            raise ValueError(f"Timestamp {timestamp} does not fit the int64 timestamps of "
                             f"{self._path}")
        self.relative_offset(offset)                    # OffsetOverflowError
        raise AssertionError(f"entry {i} of {self._path} failed only the array checks")

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset`` (Kafka searches the offset field here).
        Offsets along a time index never decrease, but two entries may share one (a larger
        timestamp for the same last offset); this drops both, where Kafka's binary search may
        keep one."""
        with self._lock:
            self._check_open()
            self._truncate_to_entries(
                self._search("relative_offset", offset - self._base_offset, "left"))

    def sanity_check(self) -> None:
        """CorruptIndexError naming the file if the last timestamp is below the first, the last
        offset below the base offset, or the length not a multiple of 12."""
        with self._lock:
            self._check_open()
            last = self._last_entry
            if self._entries != 0:
                first_timestamp = self._parse(0).timestamp
                if last.timestamp < first_timestamp:
                    raise CorruptIndexError(
                        f"Corrupt time index found, time index file ({self._path}) has non-zero "
                        f"size but the last timestamp is {last.timestamp} which is less than the "
                        f"first timestamp {first_timestamp}")
                if last.offset < self._base_offset:
                    raise CorruptIndexError(
                        f"Corrupt time index found, time index file ({self._path}) has non-zero "
                        f"size but the last offset is {last.offset} which is less than the first "
                        f"offset {self._base_offset}")
            if self._length % self.ENTRY_SIZE != 0:
                raise CorruptIndexError(
                    f"Time index file {self._path} is corrupt, found {self._length} bytes which "
                    f"is neither positive nor a multiple of {self.ENTRY_SIZE}")

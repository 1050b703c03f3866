"""LogSegments: the segments of one log, the one sorted map of base offset -> ``LogSegment``
(Kafka's ``LogSegments``, a ``ConcurrentSkipListMap`` there).

The map's keys are kept sorted in one list beside it, changed only by ``add`` and ``remove``, so
every floor/lower/higher lookup is a ``bisect``. The range rule (the segments holding offsets
``[from, to)``) is ``bases_in_range``, which also serves callers holding only base offsets (the
Spark source's planned segment lists). Not thread-safe by itself: ``LocalLog`` and
``LogLoader`` change it under the ``Log``'s lock, which hands out lists (copies) to readers.
"""

from __future__ import annotations

import bisect
from typing import Iterator, Sequence

from .segment import LogSegment


def floor_index(bases: Sequence[int], offset: int) -> int:
    """The index of the greatest base ``<= offset`` in sorted ``bases`` (0 when all are above:
    a read below the first segment starts at the first)."""
    return max(0, bisect.bisect_right(bases, offset) - 1)


def bases_in_range(bases: Sequence[int], from_offset: int, to_offset: int) -> list[int]:
    """``LogSegments.values(from, to)`` over sorted base offsets: from the floor of
    ``from_offset`` (or the first) up to, excluding, the first base ``>= to_offset``; empty when
    ``from_offset == to_offset``."""
    if from_offset == to_offset:
        return []
    if to_offset < from_offset:
        raise ValueError(f"Invalid log segment range: requested segments from offset {from_offset} "
                         f"which is greater than limit offset {to_offset}")
    lo = floor_index(bases, from_offset)
    hi = bisect.bisect_left(bases, to_offset)
    return list(bases[lo:max(lo, hi)])


class LogSegments:
    """A log's segments by base offset. Iteration and ``values`` are in offset order."""

    def __init__(self, segments: Sequence[LogSegment] = ()) -> None:
        self._by_base: dict[int, LogSegment] = {}
        self._bases: list[int] = []
        for seg in segments:
            self.add(seg)

    # ---------------------------------------------------------------------------- changes

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Put ``segment`` under its base offset; returns the segment it replaced, if any."""
        base = segment.base_offset
        previous = self._by_base.get(base)
        if previous is None:
            bisect.insort(self._bases, base)
        self._by_base[base] = segment
        return previous

    def remove(self, base_offset: int) -> LogSegment | None:
        seg = self._by_base.pop(base_offset, None)
        if seg is not None:
            del self._bases[bisect.bisect_left(self._bases, base_offset)]
        return seg

    def remove_from(self, base_offset: int) -> list[LogSegment]:
        """Remove and return every segment whose base is ``>= base_offset``."""
        i = bisect.bisect_left(self._bases, base_offset)
        gone = [self._by_base.pop(b) for b in self._bases[i:]]
        del self._bases[i:]
        return gone

    def clear(self) -> list[LogSegment]:
        """Remove every segment; returns them in offset order."""
        gone = self.values()
        self._by_base.clear()
        self._bases.clear()
        return gone

    # ---------------------------------------------------------------------------- lookups

    def __len__(self) -> int:
        return len(self._bases)

    def __bool__(self) -> bool:
        return bool(self._bases)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.values())

    def __contains__(self, segment: object) -> bool:
        return isinstance(segment, LogSegment) and self._by_base.get(segment.base_offset) is segment

    def get(self, base_offset: int) -> LogSegment | None:
        return self._by_base.get(base_offset)

    def base_offsets(self) -> list[int]:
        return list(self._bases)

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """Every segment, or (``LogSegments.values(from, to)``) those holding offsets in
        ``[from_offset, to_offset)``: see ``bases_in_range``."""
        if from_offset is None and to_offset is None:
            return [self._by_base[b] for b in self._bases]
        if from_offset is None or to_offset is None:
            raise TypeError("LogSegments.values takes both from_offset and to_offset, or neither")
        return [self._by_base[b] for b in bases_in_range(self._bases, from_offset, to_offset)]

    @property
    def first_segment(self) -> LogSegment | None:
        return self._by_base[self._bases[0]] if self._bases else None

    @property
    def last_segment(self) -> LogSegment | None:
        """The active segment (the highest base), None for an empty map."""
        return self._by_base[self._bases[-1]] if self._bases else None

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the greatest base ``<= offset`` (the one holding ``offset``)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._by_base[self._bases[i]] if i >= 0 else None

    def floor_or_first(self, offset: int) -> LogSegment | None:
        """``floor_segment``, or the first segment when ``offset`` is below every base."""
        return self._by_base[self._bases[floor_index(self._bases, offset)]] if self._bases else None

    def lower_segment(self, offset: int) -> LogSegment | None:
        """The segment with the greatest base ``< offset``."""
        i = bisect.bisect_left(self._bases, offset) - 1
        return self._by_base[self._bases[i]] if i >= 0 else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The segment with the least base ``> offset``."""
        i = bisect.bisect_right(self._bases, offset)
        return self._by_base[self._bases[i]] if i < len(self._bases) else None

    def higher_segments(self, offset: int) -> list[LogSegment]:
        """``LogSegments.higherSegments``: every segment whose base is ``> offset``, in order."""
        return [self._by_base[b] for b in self._bases[bisect.bisect_right(self._bases, offset):]]

    def from_floor(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` (or the first) and every later one."""
        return [self._by_base[b] for b in self._bases[floor_index(self._bases, offset):]]

    def non_active_from(self, from_offset: int) -> list[LogSegment]:
        """``LocalLog.nonActiveLogSegmentsFrom``: the segments before the active one, from the
        one holding ``from_offset`` (or the first); none when ``from_offset`` is at or past the
        active segment's base."""
        if not self._bases or from_offset >= self._bases[-1]:
            return []
        return self.values(from_offset, self._bases[-1])

    @property
    def size_in_bytes(self) -> int:
        """Bytes of every segment's ``.log`` (``LogSegments.sizeInBytes``)."""
        return sum(s.size for s in self._by_base.values())

    def __repr__(self) -> str:
        return f"LogSegments({self._bases})"


__all__ = ["LogSegments", "bases_in_range", "floor_index"]

"""Kafka's ``LeaderEpochCheckpointFile`` (the ``leader-epoch-checkpoint`` of a partition dir)
and ``LeaderEpochFileCache`` (which leader epoch each offset range was written in)."""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from .checkpoint_file import (INT32_RANGE, INT64_RANGE, CheckpointFile, CorruptCheckpointError,
                              EntryFormatter, check_int, format_checkpoint, java_int,
                              java_split_whitespace, parse_checkpoint)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"              # in the partition dir
LEADER_EPOCH_CHECKPOINT_VERSION = 0  # LeaderEpochCheckpointFile.CURRENT_VERSION

UNDEFINED_EPOCH = -1                 # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH
UNDEFINED_EPOCH_OFFSET = -1          # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH_OFFSET


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """``EpochEntry``: leader ``epoch`` starts at ``start_offset``."""

    epoch: int
    start_offset: int


def format_epoch_entry(entry: EpochEntry) -> str:
    """``LeaderEpochCheckpointFile.Formatter.toString``: ``"<epoch> <startOffset>"``."""
    return f"{entry.epoch} {entry.start_offset}"


def parse_epoch_entry(line: str) -> EpochEntry | None:
    """``LeaderEpochCheckpointFile.Formatter.fromString``: exactly two tokens."""
    parts = java_split_whitespace(line)
    if len(parts) != 2:
        return None
    return EpochEntry(java_int(parts[0], INT32_RANGE), java_int(parts[1], INT64_RANGE))


EPOCH_ENTRY_FORMATTER: EntryFormatter = EntryFormatter(format_epoch_entry, parse_epoch_entry)


def _checked_epochs(entries: Iterable[EpochEntry]) -> list[EpochEntry]:
    entries = list(entries)
    for e in entries:
        check_int("epoch", e.epoch, INT32_RANGE)
        check_int("start offset", e.start_offset, INT64_RANGE)
    return entries


def format_leader_epoch_checkpoint(entries: Iterable[EpochEntry]) -> str:
    """e.g. ``[EpochEntry(0, 0), EpochEntry(3, 1500)]`` -> ``"0\\n2\\n0 0\\n3 1500\\n"``."""
    return format_checkpoint(LEADER_EPOCH_CHECKPOINT_VERSION,
                             map(format_epoch_entry, _checked_epochs(entries)))


def parse_leader_epoch_checkpoint(text: str, *, source: str | PathLike[str] | None = None
                                  ) -> list[EpochEntry]:
    return parse_checkpoint(text, LEADER_EPOCH_CHECKPOINT_VERSION, parse_epoch_entry,
                            source=source)


class LeaderEpochCheckpointFile:
    """``LeaderEpochCheckpointFile``: the ``leader-epoch-checkpoint`` of a partition dir."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self._file: CheckpointFile = CheckpointFile(path, LEADER_EPOCH_CHECKPOINT_VERSION,
                                                    EPOCH_ENTRY_FORMATTER)

    @classmethod
    def in_dir(cls, partition_dir: str | PathLike[str]) -> "LeaderEpochCheckpointFile":
        return cls(Path(partition_dir) / LEADER_EPOCH_CHECKPOINT)

    @property
    def path(self) -> Path:
        return self._file.path

    def read(self) -> list[EpochEntry]:
        return self._file.read()

    def write(self, entries: Iterable[EpochEntry], *, sync: bool = True) -> None:
        self._file.write(_checked_epochs(entries), sync=sync)

    def write_if_dir_exists(self, entries: Iterable[EpochEntry], *, sync: bool = True) -> bool:
        return self._file.write_if_dir_exists(_checked_epochs(entries), sync=sync)

    def __repr__(self) -> str:
        return f"LeaderEpochCheckpointFile({str(self.path)!r})"


class LeaderEpochCache:
    """``LeaderEpochFileCache``: which leader epoch each offset range was written in.

    Entries are kept strictly increasing in both epoch and start offset: assigning an entry
    first drops every trailing entry whose epoch or start offset is not below the new one.
    Every change is written through to the checkpoint file before the call returns (Kafka
    flushes truncations asynchronously; a synchronous flush is never staler)."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | str | PathLike[str]) -> None:
        if not isinstance(checkpoint, LeaderEpochCheckpointFile):
            checkpoint = LeaderEpochCheckpointFile(checkpoint)
        self.checkpoint = checkpoint
        self._entries: list[EpochEntry] = []   # sorted by epoch, and so by start offset
        self._lock = threading.RLock()
        # Kafka replays the file through assign(), which also repairs non-monotonic files.
        for entry in checkpoint.read():
            try:
                self._assign(entry)
            except ValueError as e:
                raise CorruptCheckpointError(str(e), source=checkpoint.path) from None

    # - changes -

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``. Kafka's rules: a negative epoch or
        offset is refused (``IllegalArgumentException``; callers skip batches without an
        epoch); re-assigning the latest epoch at a later offset is ignored (the first offset of
        an epoch never moves up); otherwise trailing entries with an epoch >= ``epoch`` or a
        start offset >= ``start_offset`` are dropped and the entry appended. Returns whether
        the cache changed (and was flushed)."""
        entry = EpochEntry(check_int("epoch", epoch, INT32_RANGE),
                           check_int("start offset", start_offset, INT64_RANGE))
        with self._lock:
            if not self._assign(entry):
                return False
            self._flush()
            return True

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry {entry}")
        latest = self._entries[-1] if self._entries else None
        if latest is not None and entry.epoch == latest.epoch \
                and entry.start_offset >= latest.start_offset:
            return False
        while self._entries and (self._entries[-1].epoch >= entry.epoch
                                 or self._entries[-1].start_offset >= entry.start_offset):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def truncate_from_end(self, end_offset: int) -> list[EpochEntry]:
        """Drop entries starting at or after ``end_offset`` (the log was truncated to it);
        ``end_offset < 0`` (undefined) changes nothing. Returns the removed entries."""
        with self._lock:
            removed: list[EpochEntry] = []
            if end_offset >= 0:
                while self._entries and self._entries[-1].start_offset >= end_offset:
                    removed.append(self._entries.pop())
            if removed:
                self.checkpoint.write_if_dir_exists(self._entries)
            return removed

    def truncate_from_start(self, start_offset: int) -> list[EpochEntry]:
        """The log now starts at ``start_offset``: drop entries wholly below it and move the
        entry that covers it to start there (exclusive: an entry at ``start_offset`` stays).
        Returns the removed entries (the last one is the entry re-added at ``start_offset``)."""
        with self._lock:
            cut = bisect_right([e.start_offset for e in self._entries], start_offset)
            removed = self._entries[:cut]
            if removed:
                self._entries[:cut] = [EpochEntry(removed[-1].epoch, start_offset)]
                self.checkpoint.write_if_dir_exists(self._entries)
            return removed

    def clear_and_flush(self) -> None:
        with self._lock:
            self._entries.clear()
            self._flush()

    def clear(self) -> None:
        """Forget every entry without touching the file (Kafka's ``clear``)."""
        with self._lock:
            self._entries.clear()

    def _flush(self) -> None:
        self.checkpoint.write(self._entries)

    # - queries -

    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        latest = self.latest_entry
        return None if latest is None else latest.epoch

    def _epochs(self) -> list[int]:
        return [e.epoch for e in self._entries]

    def previous_entry(self, epoch: int) -> EpochEntry | None:
        """The entry with the greatest epoch below ``epoch`` (``TreeMap.lowerEntry``)."""
        with self._lock:
            i = bisect_left(self._epochs(), epoch)
            return self._entries[i - 1] if i else None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The greatest epoch below ``epoch``, or below the latest epoch when ``epoch`` is
        omitted (Kafka's ``previousEpoch()`` / ``previousEpoch(int)``)."""
        with self._lock:
            if epoch is None:
                if not self._entries:
                    return None
                epoch = self._entries[-1].epoch
            entry = self.previous_entry(epoch)
            return None if entry is None else entry.epoch

    def next_epoch(self, epoch: int) -> int | None:
        """The smallest epoch above ``epoch`` (``TreeMap.higherKey``)."""
        with self._lock:
            i = bisect_right(self._epochs(), epoch)
            return self._entries[i].epoch if i < len(self._entries) else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        with self._lock:
            i = bisect_left(self._epochs(), epoch)
            if i < len(self._entries) and self._entries[i].epoch == epoch:
                return self._entries[i]
            return None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the last entry starting at or before ``offset``; ``None`` below the
        first entry."""
        with self._lock:
            i = bisect_right([e.start_offset for e in self._entries], offset)
            return self._entries[i - 1].epoch if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``endOffsetFor`` (OffsetsForLeaderEpoch): ``(epoch, end offset)`` where the epoch is
        the greatest known epoch <= ``requested_epoch`` and the end offset is the start of the
        next greater epoch, or ``log_end_offset`` for the latest epoch. Undefined cases give
        ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``; an epoch older than all known ones gives
        ``(requested_epoch, start of the first entry)``."""
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH:
                return undefined
            if self._entries and self._entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            epochs = self._epochs()
            higher = bisect_right(epochs, requested_epoch)
            if higher == len(self._entries):
                return undefined
            if higher == 0:
                return requested_epoch, self._entries[0].start_offset
            return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.checkpoint.path}, {self.entries})"


"""Kafka's ``OffsetCheckpointFile`` (partition -> offset, the format of the four log-dir
checkpoints) and ``LazyOffsetCheckpoints``; and the one locked read-modify-write every writer of
a data directory's offset checkpoint uses (``update_offset_checkpoint``).

Kafka's broker is the only writer of its log dir's checkpoints and writes each file whole from
memory. Here several processes may hold partitions of one data directory (a ``LogManager``, a
``Log`` opened on its own, a Spark writer), so each update reads the file, changes its own
entries and writes it back, serialised across processes by an exclusive ``flock`` on the data
directory itself (``data_dir_lock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from os import PathLike
from pathlib import Path

from ..errors import KafkaLogError
from .checkpoint_file import (INT32_RANGE, INT64_RANGE, CheckpointFile, EntryFormatter, check_int,
                              format_checkpoint, java_int, java_split_whitespace, parse_checkpoint)
from .topic_partition import TopicPartition, validate_topic_name, without_invalid_topics

logger = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"   # LogManager
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"      # LogManager
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # ReplicaManager (HW)
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"          # LogCleanerManager

OFFSET_CHECKPOINT_VERSION = 0        # OffsetCheckpointFile.CURRENT_VERSION

# what a writer takes: TopicPartition keys or plain (topic, partition) tuples (a Mapping's key
# type is invariant, so the two are named apart)
PartitionOffsets = Mapping[TopicPartition, int] | Mapping[tuple[str, int], int]


def format_offset_entry(entry: tuple[tuple[str, int], int]) -> str:
    """``OffsetCheckpointFile.Formatter.toString``: ``"<topic> <partition> <offset>"``."""
    (topic, partition), offset = entry
    return f"{topic} {partition} {offset}"


def parse_offset_entry(line: str) -> tuple[TopicPartition, int] | None:
    """``OffsetCheckpointFile.Formatter.fromString``: exactly three whitespace-separated tokens."""
    parts = java_split_whitespace(line)
    if len(parts) != 3:
        return None
    return TopicPartition(parts[0], java_int(parts[1], INT32_RANGE)), java_int(parts[2], INT64_RANGE)


OFFSET_ENTRY_FORMATTER: EntryFormatter = EntryFormatter(format_offset_entry, parse_offset_entry)


def _checked_offsets(offsets: PartitionOffsets) -> list[tuple[tuple[str, int], int]]:
    # Kafka's TopicPartition holds only legal names; refusing others here keeps every line we
    # write readable (a topic with a space would split into four tokens).
    checked = []
    for (topic, partition), offset in offsets.items():
        validate_topic_name(topic)
        check_int("partition", partition, INT32_RANGE)
        check_int("offset", offset, INT64_RANGE)
        checked.append(((topic, partition), offset))
    return checked


def format_offset_checkpoint(offsets: PartitionOffsets) -> str:
    """The whole file, e.g. ``{("foo", 0): 1234, ("foo", 1): 99}`` -> ``"0\\n2\\nfoo 0 1234\\nfoo 1 99\\n"``."""
    return format_checkpoint(OFFSET_CHECKPOINT_VERSION,
                             map(format_offset_entry, _checked_offsets(offsets)))


def parse_offset_checkpoint(text: str, *, source: str | PathLike[str] | None = None
                            ) -> dict[TopicPartition, int]:
    """A repeated partition keeps its last offset, as Kafka's ``HashMap.put`` does."""
    return dict(parse_checkpoint(text, OFFSET_CHECKPOINT_VERSION, parse_offset_entry,
                                 source=source))


class OffsetCheckpointFile:
    """``OffsetCheckpointFile``: partition -> offset, the format of the four log-dir checkpoints
    (``RECOVERY_POINT_CHECKPOINT``, ``LOG_START_OFFSET_CHECKPOINT``,
    ``REPLICATION_OFFSET_CHECKPOINT``, ``CLEANER_OFFSET_CHECKPOINT``)."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self._file: CheckpointFile = CheckpointFile(path, OFFSET_CHECKPOINT_VERSION,
                                                    OFFSET_ENTRY_FORMATTER)

    @property
    def path(self) -> Path:
        return self._file.path

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._file.read())

    def write(self, offsets: PartitionOffsets, *, sync: bool = True) -> None:
        self._file.write(_checked_offsets(offsets), sync=sync)

    def write_if_dir_exists(self, offsets: PartitionOffsets, *,
                            sync: bool = True) -> bool:
        return self._file.write_if_dir_exists(_checked_offsets(offsets), sync=sync)

    def __repr__(self) -> str:
        return f"OffsetCheckpointFile({str(self.path)!r})"


class LazyOffsetCheckpoints:
    """``LazyOffsetCheckpoints``: one offset checkpoint per log dir, each read at most once, on
    the first question about that dir."""

    def __init__(self, checkpoints_by_log_dir: Mapping[str, OffsetCheckpointFile]) -> None:
        self._files = dict(checkpoints_by_log_dir)
        self._offsets: dict[str, dict[TopicPartition, int]] = {}
        self._lock = threading.Lock()

    def fetch(self, log_dir: str, topic_partition: tuple[str, int]) -> int | None:
        """The checkpointed offset of ``topic_partition`` in ``log_dir``, or ``None``; a log dir
        without a checkpoint file is a programming error (``IllegalArgumentException``)."""
        if log_dir not in self._files:
            raise ValueError(f"No checkpoint file for log dir {log_dir}")
        with self._lock:
            offsets = self._offsets.get(log_dir)
            if offsets is None:
                offsets = self._offsets[log_dir] = self._files[log_dir].read()
        return offsets.get(TopicPartition(*topic_partition))



# --- the locked read-modify-write of a data directory's checkpoint ------------------------------

@contextlib.contextmanager
def data_dir_lock(data_dir: str | PathLike[str]) -> Iterator[None]:
    """An exclusive ``flock`` on the data directory itself, held for one read-modify-write of a
    file in its root (an offset checkpoint, the topic configuration). Every process writing such
    a file takes it, so none loses another's entries. Callers take their own locks (a ``Log``'s,
    the cleaner manager's) before this one, never after."""
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)          # releases the lock


def update_offset_checkpoint(data_dir: str | PathLike[str], file_name: str,
                             update: Callable[[dict[TopicPartition, int]], dict[TopicPartition, int] | None],
                             *, sync: bool = True, reset_unreadable: bool = False) -> bool:
    """Read-modify-write ``data_dir / file_name`` (an ``OffsetCheckpointFile``) under
    ``data_dir_lock``: read its entries (those naming topics Kafka refuses are dropped, see
    ``without_invalid_topics``), pass them to ``update``, and write what it returns atomically
    (``atomic_write``; ``sync=False`` skips the fsyncs). ``update`` returns ``None`` to leave the
    file as it is. A file that cannot be read (``OSError``, ``CorruptCheckpointError``) raises,
    unless ``reset_unreadable``: then ``update`` starts from no entries (and the file is
    rewritten whole), with a warning. A missing file is no entries. Returns whether the file was
    written."""
    checkpoint = OffsetCheckpointFile(Path(data_dir) / file_name)
    with data_dir_lock(data_dir):
        try:
            entries = without_invalid_topics(checkpoint.read(), checkpoint.path)
        except (OSError, KafkaLogError) as e:
            if not reset_unreadable:
                raise
            logger.warning("Rewriting unreadable checkpoint file %s: %s", checkpoint.path, e)
            entries = {}
        new_entries = update(entries)
        if new_entries is None:
            return False
        checkpoint.write(new_entries, sync=sync)
        return True

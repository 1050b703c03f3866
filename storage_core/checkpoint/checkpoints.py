"""Kafka's small text files: offset and leader-epoch checkpoints, the clean-shutdown marker,
``partition.metadata``, and the names of partition directories (kafka_format.md §1.2, §12).

Each format is a pair of small pure functions (``format_x`` / ``parse_x``) over text; the file
classes around them only add paths, locking and crash-safe writes. Reading follows Kafka's
Java readers to the letter where it matters for compatibility: lines end at ``\\n``, ``\\r`` or
``\\r\\n`` (``BufferedReader.readLine``), numbers are ``Integer.parseInt``/``Long.parseLong``
(optional sign, ASCII digits, in range), tokens are split on Java's ``\\s+``. Every error names
the file and the 1-based line at fault.

Writes are crash-safe as Kafka's ``CheckpointFile.write``: ``<file>.tmp`` is written, flushed and
fsynced, atomically renamed over the file, then the directory is fsynced
(``Utils.atomicMoveWithFallback(..., needFlushParentDir=true)``). A crash leaves either the old
file or the new one, plus at worst a stray ``.tmp`` that readers never look at.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import os
import re
import threading
import uuid
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path, PurePath
from typing import Generic, NamedTuple, TypeVar

from ..errors import InconsistentTopicIdError, InvalidTopicError, KafkaLogError

logger = logging.getLogger(__name__)

# --- file names (kafka_format.md §1.1, §1.3) -------------------------------------------------

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"   # LogManager
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"      # LogManager
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # ReplicaManager (HW)
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"          # LogCleanerManager
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"              # in the partition dir
PARTITION_METADATA_FILE = "partition.metadata"                   # in the partition dir
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"                     # in the log-dir root
TMP_SUFFIX = ".tmp"

OFFSET_CHECKPOINT_VERSION = 0        # OffsetCheckpointFile.CURRENT_VERSION
LEADER_EPOCH_CHECKPOINT_VERSION = 0  # LeaderEpochCheckpointFile.CURRENT_VERSION
PARTITION_METADATA_VERSION = 0       # PartitionMetadataFile.CURRENT_VERSION
CLEAN_SHUTDOWN_VERSION = 0           # CleanShutdownFileHandler.CURRENT_VERSION

UNDEFINED_EPOCH = -1                 # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH
UNDEFINED_EPOCH_OFFSET = -1          # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH_OFFSET

DELETE_DIR_SUFFIX = "-delete"        # LogFileUtils
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
MAX_TOPIC_NAME_LENGTH = 249          # Topic.MAX_NAME_LENGTH
MAX_DIR_NAME_LENGTH = 255            # what LocalLog caps -delete / -stray names to

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


class CorruptCheckpointError(KafkaLogError):
    """A checkpoint or metadata text file Kafka would refuse to read (its ``IOException`` /
    ``KafkaStorageException``): bad version, malformed line, wrong entry count, not UTF-8.
    ``source`` is the file (``None`` for in-memory text), ``line`` the 1-based line number."""

    def __init__(self, reason: str, *, source: str | PathLike[str] | None = None,
                 line: int | None = None) -> None:
        self.reason = reason
        self.source = None if source is None else str(source)
        self.line = line
        where = [w for w in (self.source, None if line is None else f"line {line}") if w]
        super().__init__(f"{reason} ({', '.join(where)})" if where else reason)


class TopicPartition(NamedTuple):
    """Kafka's ``TopicPartition``; a plain ``(topic, partition)`` tuple."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# --- Java text primitives ---------------------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")   # Java's \s (ASCII only, unlike Python's)
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def _java_lines(text: str) -> list[str]:
    """``BufferedReader.readLine`` until null: a final line break does not open an empty line."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def _java_split_whitespace(line: str) -> list[str]:
    """``Pattern.compile("\\\\s+").split(line)``: leading whitespace yields an empty first token,
    trailing empty tokens are dropped, and an empty line is one empty token."""
    if line == "":
        return [""]
    parts = _JAVA_WHITESPACE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _java_int(text: str, bounds: tuple[int, int] = _INT32) -> int:
    """``Integer.parseInt`` / ``Long.parseLong``: optional sign and ASCII digits, in range.
    (Python's ``int`` would also take spaces, underscores and non-ASCII digits.)"""
    if not _JAVA_INTEGER.fullmatch(text):
        raise ValueError(f"not a number: {text!r}")
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"out of range: {text}")
    return value


def _check_int(name: str, value: int, bounds: tuple[int, int]) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not bounds[0] <= value <= bounds[1]:
        bits = 32 if bounds == _INT32 else 64
        raise ValueError(f"{name} {value} does not fit in a signed {bits}-bit integer")
    return value


def _decode_utf8(data: bytes, source: str | PathLike[str] | None) -> str:
    """Kafka reads these files with a strict UTF-8 decoder (``MalformedInputException``)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise CorruptCheckpointError(f"Invalid UTF-8 at byte {e.start}", source=source,
                                     line=line) from e


# --- crash-safe writes ------------------------------------------------------------------------

def fsync_dir(directory: str | PathLike[str]) -> None:
    """``Utils.flushDir``: make creates and renames in ``directory`` durable. Kafka skips this
    on Windows, where a directory cannot be opened for fsync."""
    if os.name == "nt":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | PathLike[str], data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` as ``CheckpointFile.write`` does: write ``<path>.tmp``,
    flush, fsync, ``os.replace`` (atomic on POSIX), fsync the directory. Readers see the old
    content or the new, never a mix. The temp file is removed if this call fails; one left by
    a crash is simply overwritten by the next write."""
    path = Path(path)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if sync:
        fsync_dir(path.parent)


# --- generic checkpoint (server-common CheckpointFile) ----------------------------------------

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class EntryFormatter(Generic[T]):
    """``CheckpointFile.EntryFormatter``: one entry <-> one line. ``parse`` returns ``None`` for a
    line of the wrong shape (Kafka's ``Optional.empty()``) and raises ``ValueError`` for a bad
    number (Kafka's ``NumberFormatException``); both become a ``CorruptCheckpointError``."""

    format: Callable[[T], str]
    parse: Callable[[str], T | None]


def format_checkpoint(version: int, lines: Iterable[str]) -> str:
    """``CheckpointWriteBuffer.write``: version, entry count, one entry per line, every line
    ended by ``\\n`` (``BufferedWriter.newLine`` on Linux)."""
    lines = list(lines)
    for line in lines:
        if _LINE_BREAK.search(line):
            raise ValueError(f"checkpoint entry contains a line break: {line!r}")
    return "".join(f"{line}\n" for line in (str(version), str(len(lines)), *lines))


def parse_checkpoint(text: str, version: int, parse_entry: Callable[[str], T | None], *,
                     source: str | PathLike[str] | None = None) -> list[T]:
    """``CheckpointReadBuffer.read``: empty text -> no entries; the version line must equal
    ``version``; a missing count line -> no entries; every further line must parse; the number
    of entry lines must equal the count."""
    lines = _java_lines(text)
    if not lines:
        return []

    def number(line_no: int) -> int:
        try:
            return _java_int(lines[line_no - 1])
        except ValueError:
            raise CorruptCheckpointError(f"Malformed line in checkpoint file: {lines[line_no - 1]!r}",
                                         source=source, line=line_no) from None

    read_version = number(1)
    if read_version != version:
        raise CorruptCheckpointError(
            f"Unrecognised version: {read_version}, expected version: {version}",
            source=source, line=1)
    if len(lines) == 1:
        return []
    expected = number(2)
    entries: list[T] = []
    for line_no, line in enumerate(lines[2:], start=3):
        try:
            entry = parse_entry(line)
        except ValueError as e:
            raise CorruptCheckpointError(f"Malformed line in checkpoint file: {line!r} ({e})",
                                         source=source, line=line_no) from e
        if entry is None:
            raise CorruptCheckpointError(f"Malformed line in checkpoint file: {line!r}",
                                         source=source, line=line_no)
        entries.append(entry)
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"Expected {expected} entries in checkpoint file, but found {len(entries)}",
            source=source, line=2)
    return entries


class CheckpointFile(Generic[T]):
    """server-common's ``CheckpointFile<T>``: a versioned list of entries, one per line.

    Unlike Kafka, the constructor does not create an empty file; reading a missing file gives no
    entries, which is what Kafka would read back from the empty file it creates."""

    def __init__(self, path: str | PathLike[str], version: int,
                 formatter: EntryFormatter[T]) -> None:
        self.path = Path(path)
        self.version = version
        self.formatter = formatter
        self._lock = threading.Lock()

    def read(self) -> list[T]:
        with self._lock:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return []
        return parse_checkpoint(_decode_utf8(data, self.path), self.version,
                                self.formatter.parse, source=self.path)

    def write(self, entries: Iterable[T], *, sync: bool = True) -> None:
        text = format_checkpoint(self.version, (self.formatter.format(e) for e in entries))
        with self._lock:
            atomic_write(self.path, text.encode("utf-8"), sync=sync)

    def write_if_dir_exists(self, entries: Iterable[T], *, sync: bool = True) -> bool:
        """``CheckpointFileWithFailureHandler.writeIfDirExists``: a write racing with the
        partition directory being renamed away (deletion) is skipped, not an error. Returns
        whether the file was written."""
        try:
            self.write(entries, sync=sync)
        except FileNotFoundError:
            return False
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"


# --- offset checkpoints (OffsetCheckpointFile) ------------------------------------------------

def format_offset_entry(entry: tuple[tuple[str, int], int]) -> str:
    """``OffsetCheckpointFile.Formatter.toString``: ``"<topic> <partition> <offset>"``."""
    (topic, partition), offset = entry
    return f"{topic} {partition} {offset}"


def parse_offset_entry(line: str) -> tuple[TopicPartition, int] | None:
    """``OffsetCheckpointFile.Formatter.fromString``: exactly three whitespace-separated tokens."""
    parts = _java_split_whitespace(line)
    if len(parts) != 3:
        return None
    return TopicPartition(parts[0], _java_int(parts[1], _INT32)), _java_int(parts[2], _INT64)


OFFSET_ENTRY_FORMATTER: EntryFormatter = EntryFormatter(format_offset_entry, parse_offset_entry)


def _checked_offsets(offsets: Mapping[tuple[str, int], int]) -> list[tuple[tuple[str, int], int]]:
    # Kafka's TopicPartition holds only legal names; refusing others here keeps every line we
    # write readable (a topic with a space would split into four tokens).
    checked = []
    for (topic, partition), offset in offsets.items():
        validate_topic_name(topic)
        _check_int("partition", partition, _INT32)
        _check_int("offset", offset, _INT64)
        checked.append(((topic, partition), offset))
    return checked


def format_offset_checkpoint(offsets: Mapping[tuple[str, int], int]) -> str:
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

    def write(self, offsets: Mapping[tuple[str, int], int], *, sync: bool = True) -> None:
        self._file.write(_checked_offsets(offsets), sync=sync)

    def write_if_dir_exists(self, offsets: Mapping[tuple[str, int], int], *,
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


# --- leader epochs (LeaderEpochCheckpointFile, LeaderEpochFileCache) --------------------------

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
    parts = _java_split_whitespace(line)
    if len(parts) != 2:
        return None
    return EpochEntry(_java_int(parts[0], _INT32), _java_int(parts[1], _INT64))


EPOCH_ENTRY_FORMATTER: EntryFormatter = EntryFormatter(format_epoch_entry, parse_epoch_entry)


def _checked_epochs(entries: Iterable[EpochEntry]) -> list[EpochEntry]:
    entries = list(entries)
    for e in entries:
        _check_int("epoch", e.epoch, _INT32)
        _check_int("start offset", e.start_offset, _INT64)
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
        entry = EpochEntry(_check_int("epoch", epoch, _INT32),
                           _check_int("start offset", start_offset, _INT64))
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


# --- clean-shutdown marker (CleanShutdownFileHandler) -----------------------------------------

def format_clean_shutdown(broker_epoch: int = -1, version: int = CLEAN_SHUTDOWN_VERSION) -> str:
    """Jackson's output for ``Content(version, brokerEpoch)``: ``{"version":0,"brokerEpoch":-1}``,
    field order as declared, no spaces, no newline (Kafka 3.7+, KIP-966)."""
    _check_int("version", version, _INT32)
    _check_int("broker epoch", broker_epoch, _INT64)
    return json.dumps({"version": version, "brokerEpoch": broker_epoch}, separators=(",", ":"))


def parse_clean_shutdown(text: str) -> int | None:
    """The broker epoch, or ``None`` when there is none to read: the empty marker of Kafka <= 3.6,
    or anything Jackson would not map onto ``Content`` (Kafka logs it and returns empty).
    Unknown fields and trailing text after the object are ignored, as Jackson does."""
    try:
        content, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except ValueError:
        return None
    if not isinstance(content, dict):
        return None
    version, epoch = content.get("version", 0), content.get("brokerEpoch")
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (version, epoch))
    if not ints or not _INT32[0] <= version <= _INT32[1] or not _INT64[0] <= epoch <= _INT64[1]:
        return None
    return epoch


class CleanShutdownFile:
    """``CleanShutdownFileHandler``: ``.kafka_cleanshutdown`` in a log-dir root. Only its
    presence matters for recovery; the broker epoch inside is informational."""

    def __init__(self, log_dir: str | PathLike[str]) -> None:
        self.path = Path(log_dir) / CLEAN_SHUTDOWN_FILE

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, broker_epoch: int = -1, *, version: int = CLEAN_SHUTDOWN_VERSION) -> None:
        # Kafka writes the marker in place (no temp file): it is written last at shutdown, after
        # every log and checkpoint is flushed, so even a torn marker truthfully says "clean" and
        # the reader tolerates its content. fsync the file, then the directory entry.
        data = format_clean_shutdown(broker_epoch, version).encode("utf-8")
        with open(self.path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(self.path.parent)

    def read(self) -> int | None:
        """The recorded broker epoch; ``None`` if the file is absent, empty (<= 3.6) or unreadable."""
        try:
            data = self.path.read_bytes()
        except OSError:
            return None
        try:
            return parse_clean_shutdown(data.decode("utf-8"))
        except UnicodeDecodeError:
            return None

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"CleanShutdownFile({str(self.path)!r})"


# --- partition.metadata (PartitionMetadataFile, Uuid) -----------------------------------------

_BASE64_URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")
_ZERO_UUID = uuid.UUID(int=0)


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """``Uuid.toString``: URL-safe base64 of the 16 bytes (most significant first), no padding:
    22 characters, e.g. ``Uuid(0, 1)`` -> ``"AAAAAAAAAAAAAAAAAAAAAQ"``."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def topic_id_from_str(text: str) -> uuid.UUID:
    """``Uuid.fromString``: at most 24 characters of URL-safe base64 (padding optional) that
    decode to exactly 16 bytes; anything else raises ``ValueError``."""
    if len(text) > 24:
        raise ValueError(f"Input string with prefix `{text[:24]}` is too long to be decoded as "
                         f"a base64 UUID")
    if not _BASE64_URL.fullmatch(text):
        raise ValueError(f"Input string `{text}` is not URL-safe base64")
    # Java's decoder takes the padding or not, but not a partial one ("xx=" for "xx==")
    padded = text if "=" in text else text + "=" * (-len(text) % 4)
    try:
        # non-strict, like Java: unused low bits of the last character are not checked
        raw = base64.urlsafe_b64decode(padded)
    except binascii.Error as e:
        raise ValueError(f"Input string `{text}` is not valid base64: {e}") from None
    if len(raw) != 16:
        raise ValueError(f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal "
                         f"to the expected 16 bytes of a base64-encoded UUID")
    return uuid.UUID(bytes=raw)


def random_topic_id() -> uuid.UUID:
    """``Uuid.randomUuid``: a random (version 4) id, never one of the reserved ids (all zeros,
    ``Uuid.ONE_UUID``) nor one whose string form starts with "-" (it would read as a
    command-line option)."""
    while True:
        topic_id = uuid.uuid4()
        if topic_id.int > 1 and not topic_id_to_str(topic_id).startswith("-"):
            return topic_id


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """``PartitionMetadata``: the content of ``partition.metadata``."""

    version: int
    topic_id: uuid.UUID


def format_partition_metadata(topic_id: uuid.UUID,
                              version: int = PARTITION_METADATA_VERSION) -> str:
    """``PartitionMetadata.encode``: ``"version: 0\\ntopic_id: <id>"``, no trailing newline."""
    if topic_id == _ZERO_UUID:
        raise ValueError("the all-zero topic id (Uuid.ZERO_UUID) is reserved and never written")
    return f"version: {version}\ntopic_id: {topic_id_to_str(topic_id)}"


_KEY_SEPARATOR = re.compile(r":[ \t\n\x0b\f\r]+")   # PartitionMetadataReadBuffer's ":\\s+"


def parse_partition_metadata(text: str, *, source: str | PathLike[str] | None = None
                             ) -> PartitionMetadata:
    """``PartitionMetadataReadBuffer.read``: line 1 ``version: <int>`` with version >= 0 (newer
    versions are accepted, for downgrades); line 2 ``topic_id: <Uuid>``, not all zeros. Each
    line splits once on ``":\\s+"`` into the expected key and a value; later lines are ignored."""
    lines = _java_lines(text)

    def value(line_no: int, key: str) -> str:
        line = lines[line_no - 1] if len(lines) >= line_no else None
        parts = _KEY_SEPARATOR.split(line, maxsplit=1) if line is not None else []
        if len(parts) != 2 or parts[0] != key:
            shown = "end of file" if line is None else repr(line)
            raise CorruptCheckpointError(
                f"Malformed line in partition metadata file (expected '{key}: ...'): {shown}",
                source=source, line=line_no)
        return parts[1]

    raw_version = value(1, "version")
    try:
        version = _java_int(raw_version)
    except ValueError:
        raise CorruptCheckpointError(f"Malformed line in partition metadata file: {lines[0]!r}",
                                     source=source, line=1) from None
    if version < PARTITION_METADATA_VERSION:
        raise CorruptCheckpointError(
            f"Unrecognized version of partition metadata file: {version}", source=source, line=1)
    try:
        topic_id = topic_id_from_str(value(2, "topic_id"))
    except ValueError as e:
        raise CorruptCheckpointError(f"Malformed line in partition metadata file: {e}",
                                     source=source, line=2) from e
    if topic_id == _ZERO_UUID:
        raise CorruptCheckpointError("Invalid topic ID in partition metadata file (all zeros)",
                                     source=source, line=2)
    return PartitionMetadata(version, topic_id)


class PartitionMetadataFile:
    """``PartitionMetadataFile``: the topic id of a partition dir, in ``partition.metadata``.

    As in Kafka, ``record`` remembers a topic id to flush and ``maybe_flush`` writes it (crash
    safely) if one is pending; ``write`` does both."""

    def __init__(self, partition_dir: str | PathLike[str]) -> None:
        self.path = Path(partition_dir) / PARTITION_METADATA_FILE
        self._dirty: uuid.UUID | None = None
        self._lock = threading.Lock()

    def record(self, topic_id: uuid.UUID) -> None:
        """Remember ``topic_id`` for the next flush; a different id than one still pending is
        refused (``InconsistentTopicIdException``)."""
        if topic_id == _ZERO_UUID:
            raise ValueError("the all-zero topic id (Uuid.ZERO_UUID) is reserved")
        with self._lock:
            if self._dirty is not None and self._dirty != topic_id:
                raise InconsistentTopicIdError(
                    f"Tried to record topic ID {topic_id_to_str(topic_id)} to file {self.path} "
                    f"but had already recorded {topic_id_to_str(self._dirty)}")
            self._dirty = topic_id

    def maybe_flush(self) -> bool:
        """Write the recorded topic id, if any; returns whether a write happened."""
        with self._lock:
            if self._dirty is None:
                return False
            atomic_write(self.path, format_partition_metadata(self._dirty).encode("utf-8"))
            self._dirty = None
            return True

    def write(self, topic_id: uuid.UUID) -> None:
        self.record(topic_id)
        self.maybe_flush()

    def read_metadata(self) -> PartitionMetadata:
        with self._lock:
            data = self.path.read_bytes()
        return parse_partition_metadata(_decode_utf8(data, self.path), source=self.path)

    def read(self) -> uuid.UUID:
        return self.read_metadata().topic_id

    def exists(self) -> bool:
        return self.path.exists()

    def delete(self) -> None:
        self.path.unlink()

    def __repr__(self) -> str:
        return f"PartitionMetadataFile({str(self.path)!r})"


# --- topic names and partition directory names (Topic.validate, LocalLog) ---------------------

_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
_NON_WS = r"[^ \t\n\x0b\f\r]+"                       # Java's \S
_SUFFIX_PATTERNS = {
    suffix: re.compile(rf"({_NON_WS})-({_NON_WS})\.({_NON_WS}){re.escape(suffix)}")
    for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
}


def validate_topic_name(name: str) -> None:
    """``org.apache.kafka.common.internals.Topic.validate``: non-empty, not ``.`` or ``..``, at
    most 249 characters, only ASCII letters, digits, ``.``, ``_`` and ``-``."""
    if not isinstance(name, str):
        raise InvalidTopicError(f"Topic name must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than "
                                f"{MAX_TOPIC_NAME_LENGTH} characters, Topic name: {name}")
    if not _TOPIC_CHARS.fullmatch(name):
        raise InvalidTopicError(f'Topic name "{name}" is illegal, it contains a character other '
                                f"than ASCII alphanumerics, '.', '_' and '-'")


def without_invalid_topics(offsets: Mapping[TopicPartition, int], source: str | PathLike[str]
                           ) -> dict[TopicPartition, int]:
    """The entries of an offset checkpoint read from ``source`` whose topic names Kafka accepts
    (``Topic.validate``); the others (``../x`` would name a path outside the data dir) are
    ignored, with one warning for the file, never used to build a path or written back."""
    kept, dropped = {}, []
    for tp, offset in offsets.items():
        try:
            validate_topic_name(tp[0])
        except InvalidTopicError:
            dropped.append(tp)
            continue
        kept[tp] = offset
    if dropped:
        logger.warning("Ignoring %d entries of %s naming topics Kafka would refuse: %s",
                        len(dropped), source, ", ".join(repr(t) for t, _ in dropped[:5]))
    return kept


def _validate_partition(partition: int) -> None:
    if not isinstance(partition, int) or isinstance(partition, bool) \
            or not 0 <= partition <= _INT32[1]:
        raise InvalidTopicError(f"Partition must be an int in [0, {_INT32[1]}], got {partition!r}")


def topic_partition_dir_name(topic: str, partition: int) -> str:
    """``LocalLog.logDirName``: ``<topic>-<partition>``, for a valid topic and partition >= 0."""
    validate_topic_name(topic)
    _validate_partition(partition)
    return f"{topic}-{partition}"


def _suffixed_dir_name(topic: str, partition: int, suffix: str, unique_id: str | None,
                       capped: bool) -> str:
    validate_topic_name(topic)
    _validate_partition(partition)
    # UUID.randomUUID().toString() without the dashes: 32 lowercase hex digits
    unique_id = uuid.uuid4().hex if unique_id is None else unique_id
    full_suffix = f"-{partition}.{unique_id}{suffix}"
    if capped:   # logDirNameWithSuffixCappedLength: shorten the topic, never the suffix
        topic = topic[:max(0, min(len(topic), MAX_DIR_NAME_LENGTH - len(full_suffix)))]
    return topic + full_suffix


def log_delete_dir_name(topic: str, partition: int, unique_id: str | None = None) -> str:
    """``LocalLog.logDeleteDirName``: ``<topic>-<p>.<uuid32hex>-delete``, at most 255 characters
    (the topic is truncated)."""
    return _suffixed_dir_name(topic, partition, DELETE_DIR_SUFFIX, unique_id, capped=True)


def log_future_dir_name(topic: str, partition: int, unique_id: str | None = None) -> str:
    """``LocalLog.logFutureDirName``: ``<topic>-<p>.<uuid32hex>-future`` (not capped)."""
    return _suffixed_dir_name(topic, partition, FUTURE_DIR_SUFFIX, unique_id, capped=False)


def log_stray_dir_name(topic: str, partition: int, unique_id: str | None = None) -> str:
    """``LocalLog.logStrayDirName``: ``<topic>-<p>.<uuid32hex>-stray``, at most 255 characters."""
    return _suffixed_dir_name(topic, partition, STRAY_DIR_SUFFIX, unique_id, capped=True)


def parse_topic_partition_dir(name: str | PathLike[str]) -> TopicPartition:
    """``LocalLog.parseTopicPartitionName``: the ``(topic, partition)`` of a partition directory
    name (or path; its last component is used). A ``-delete``/``-future``/``-stray`` name must
    match ``^(\\S+)-(\\S+)\\.(\\S+)<suffix>`` and loses everything from its last ``.``; the topic is
    what precedes the last ``-`` and the partition the decimal int after it. As in Kafka, the
    topic itself is not validated (an existing directory is taken as it is)."""
    if name is None:
        raise InvalidTopicError("dir should not be null")
    dir_name = PurePath(name).name

    def refuse() -> InvalidTopicError:
        return InvalidTopicError(
            f"Found directory {str(name)!r}, {dir_name!r} is not in the form of topic-partition "
            f"or topic-partition.uniqueId-delete (if marked for deletion). Kafka's log "
            f"directories (and children) should only contain Kafka topic data.")

    if not dir_name or "-" not in dir_name:
        raise refuse()
    suffix = next((s for s in _SUFFIX_PATTERNS if dir_name.endswith(s)), None)
    if suffix is not None:
        if not _SUFFIX_PATTERNS[suffix].fullmatch(dir_name):
            raise refuse()
        dir_name = dir_name[:dir_name.rindex(".")]
    topic, _, partition = dir_name.rpartition("-")
    if not topic or not partition:
        raise refuse()
    try:
        return TopicPartition(topic, _java_int(partition))
    except ValueError:
        raise refuse() from None

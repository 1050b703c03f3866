"""server-common's ``CheckpointFile``: a versioned list of entries, one per line, and the Java
text rules every checkpoint and metadata reader here follows.

Each format is a pair of small pure functions (``format_x`` / ``parse_x``) over text; the file
classes around them only add paths, locking and crash-safe writes (``atomic.atomic_write``).
Reading follows Kafka's Java readers to the letter where it matters for compatibility: lines end
at ``\\n``, ``\\r`` or ``\\r\\n`` (``BufferedReader.readLine``), numbers are
``Integer.parseInt``/``Long.parseLong`` (optional sign, ASCII digits, in range), tokens are split
on Java's ``\\s+``. Every error names the file and the 1-based line at fault.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Generic, TypeVar

from ..common import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN
from ..errors import KafkaLogError
from .atomic import atomic_write

INT32_RANGE = (INT_MIN, INT_MAX)      # Java int
INT64_RANGE = (LONG_MIN, LONG_MAX)    # Java long


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



# --- Java text primitives ---------------------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")   # Java's \s (ASCII only, unlike Python's)
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def java_lines(text: str) -> list[str]:
    """``BufferedReader.readLine`` until null: a final line break does not open an empty line."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def java_split_whitespace(line: str) -> list[str]:
    """``Pattern.compile("\\\\s+").split(line)``: leading whitespace yields an empty first token,
    trailing empty tokens are dropped, and an empty line is one empty token."""
    if line == "":
        return [""]
    parts = _JAVA_WHITESPACE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def java_int(text: str, bounds: tuple[int, int] = INT32_RANGE) -> int:
    """``Integer.parseInt`` / ``Long.parseLong``: optional sign and ASCII digits, in range.
    (Python's ``int`` would also take spaces, underscores and non-ASCII digits.)"""
    if not _JAVA_INTEGER.fullmatch(text):
        raise ValueError(f"not a number: {text!r}")
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"out of range: {text}")
    return value


def check_int(name: str, value: int, bounds: tuple[int, int]) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not bounds[0] <= value <= bounds[1]:
        bits = 32 if bounds == INT32_RANGE else 64
        raise ValueError(f"{name} {value} does not fit in a signed {bits}-bit integer")
    return value


def decode_utf8(data: bytes, source: str | PathLike[str] | None) -> str:
    """Kafka reads these files with a strict UTF-8 decoder (``MalformedInputException``)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise CorruptCheckpointError(f"Invalid UTF-8 at byte {e.start}", source=source,
                                     line=line) from e



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
    lines = java_lines(text)
    if not lines:
        return []

    def number(line_no: int) -> int:
        try:
            return java_int(lines[line_no - 1])
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
        return parse_checkpoint(decode_utf8(data, self.path), self.version,
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


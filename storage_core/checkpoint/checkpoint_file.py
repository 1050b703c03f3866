"""server-common's ``CheckpointFile``: a versioned list of entries, one per line, and the Java
text rules every checkpoint and metadata reader here follows.

Each format is a pair of small pure functions (``format_x`` / ``parse_x``) over text; the file
classes around them only add paths, locking and crash-safe writes (``atomic.atomic_write``).
Reading follows Kafka's Java readers to the letter where it matters for compatibility: lines end
at ``\\n``, ``\\r`` or ``\\r\\n`` (``BufferedReader.readLine``), numbers are
``Integer.parseInt``/``Long.parseLong`` (optional sign, ASCII digits, in range), tokens are split
on Java's ``\\s+``. Every error names the file and the 1-based line at fault.

Files are read as Kafka's ``CheckpointReadBuffer`` reads them, line by line (``read_java_lines``),
never whole: a line longer than any valid line (``MAX_LINE_BYTES``) is refused where it passes
that bound, and a checkpoint stops at the first entry line beyond its count, so memory follows
the entries the file really holds, whatever its size or its count line claims. Only regular
files are opened (``data_files.open_regular_file``): a FIFO cannot block a read.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

from ..common import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN
from ..data_files import open_regular_file
from ..errors import KafkaLogError
from .atomic import atomic_write

INT32_RANGE = (INT_MIN, INT_MAX)      # Java int
INT64_RANGE = (LONG_MIN, LONG_MAX)    # Java long


class CorruptCheckpointError(KafkaLogError):
    """A checkpoint, metadata or other small state file Kafka (or kafkalog) would refuse to
    read (Kafka's ``IOException`` / ``KafkaStorageException``): bad version, malformed line,
    wrong entry count, not UTF-8, a line or file longer than its format allows. ``source`` is
    the file (``None`` for in-memory text), ``line`` the 1-based line number, ``position`` the
    byte position in the file, when known."""

    def __init__(self, reason: str, *, source: str | PathLike[str] | None = None,
                 line: int | None = None, position: int | None = None) -> None:
        self.reason = reason
        self.source = None if source is None else str(source)
        self.line = line
        self.position = position
        where = [w for w in (self.source, None if line is None else f"line {line}",
                             None if position is None else f"position {position}") if w]
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
    (Python's ``int`` would also take spaces, underscores and non-ASCII digits.) Narrower than
    Java on purpose: its ``Character.digit`` also takes other scripts' decimal digits
    (``Integer.parseInt("\u0664")`` is 4), which no Kafka writer produces; they are refused."""
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


# --- reading files: bounded, line by line -----------------------------------------------------

# The longest line Kafka writes in any of these files is an offset checkpoint entry: a topic of
# at most 249 characters (Topic.MAX_NAME_LENGTH), a space, an int (11 characters with its sign),
# a space and a long (20): 282 bytes; a leader-epoch entry is at most 32, a partition.metadata
# line 34. Java's readers would also take leading zeros and runs of whitespace no writer
# produces, so the bound leaves room for them; a longer line is no line of these formats, and is
# refused where it passes the bound rather than read on (Kafka's BufferedReader would read it
# whole: a file of gigabytes without a newline).
MAX_LINE_BYTES = 1024
READ_CHUNK = 64 << 10                # bytes read at a time: a whole small checkpoint in one read

_LINE_BREAK_BYTES = re.compile(rb"\r\n|\r|\n")


def _decode_line(raw: bytes, position: int, line_no: int, source: str | PathLike[str] | None) -> str:
    # strict, as Kafka's reader (MalformedInputException); no UTF-8 sequence holds a \r or \n
    # byte, so decoding line by line refuses exactly what decoding the whole file would
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        at = position + e.start
        raise CorruptCheckpointError(f"Invalid UTF-8 at byte {at}", source=source, line=line_no,
                                     position=at) from e


def read_java_lines(f: BinaryIO, source: str | PathLike[str] | None, *,
                    max_line: int = MAX_LINE_BYTES, chunk: int = READ_CHUNK) -> Iterator[tuple[int, str]]:
    """``BufferedReader.readLine`` until null over the binary stream ``f``, lazily: ``(line
    number, text)`` of each line (ended by ``\\n``, ``\\r`` or ``\\r\\n``; a final line break opens
    no empty line), decoded as strict UTF-8. A line of more than ``max_line`` bytes raises
    ``CorruptCheckpointError`` naming ``source``, the line and the byte position where it passed
    the bound, having read at most ``chunk + max_line`` bytes past the line's start: the
    memory held is bounded whatever the file holds."""
    buf = b""
    start = 0            # where the next line starts in buf
    base = 0             # the file position of buf[0]
    line_no = 1
    eof = False
    while True:
        m = _LINE_BREAK_BYTES.search(buf, start)
        # a \r that ends what was read so far may be the first half of a \r\n: read on first
        if m is not None and (eof or m.end() < len(buf) or m.group() != b"\r"):
            if m.start() - start > max_line:
                raise _line_too_long(source, line_no, base + start, max_line)
            yield line_no, _decode_line(buf[start:m.start()], base + start, line_no, source)
            line_no += 1
            start = m.end()
            continue
        if (len(buf) if m is None else m.start()) - start > max_line:
            raise _line_too_long(source, line_no, base + start, max_line)
        if eof:
            if start < len(buf):
                yield line_no, _decode_line(buf[start:], base + start, line_no, source)
            return
        data = f.read(chunk)
        eof = not data
        buf = buf[start:] + data
        base += start
        start = 0


def _line_too_long(source: str | PathLike[str] | None, line_no: int, line_start: int,
                   max_line: int) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"Line longer than {max_line} bytes (it starts at byte {line_start}), longer than any "
        f"valid line of the file", source=source, line=line_no, position=line_start + max_line)


def read_small_file(path: str | PathLike[str], limit: int) -> bytes:
    """The bytes of the small state file at ``path``, which its format bounds to ``limit``
    bytes: only a regular file is opened (``UnsafeFileError`` otherwise, see
    ``open_regular_file``), and at most ``limit + 1`` bytes are read: a longer file raises
    ``CorruptCheckpointError`` naming it and the byte position ``limit`` where it passed the
    bound, without being read further. ``FileNotFoundError`` if there is no file."""
    with open_regular_file(path) as f:
        # the size first: a sparse file of gigabytes is refused without a read; the bounded
        # read still holds for a file growing meanwhile (or /proc's, which claim no size)
        too_long = os.fstat(f.fileno()).st_size > limit
        data = b"" if too_long else f.read(limit + 1)
    if too_long or len(data) > limit:
        raise CorruptCheckpointError(f"File longer than {limit} bytes, more than its format holds",
                                     source=path, position=limit)
    return data



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
    """``CheckpointReadBuffer.read`` over in-memory text: see ``parse_checkpoint_lines``."""
    return parse_checkpoint_lines(enumerate(java_lines(text), start=1), version, parse_entry,
                                  source=source)


def parse_checkpoint_lines(lines: Iterable[tuple[int, str]], version: int,
                           parse_entry: Callable[[str], T | None], *,
                           source: str | PathLike[str] | None = None) -> list[T]:
    """``CheckpointReadBuffer.read`` over ``(line number, text)`` pairs (``read_java_lines`` of
    a file): no lines -> no entries; the version line must equal ``version``; a missing count
    line -> no entries; every further line must parse; the number of entry lines must equal
    the count. Unlike Kafka, which reads every line before comparing, the first entry line
    beyond the count ends the read with the count's error: nothing past it is read."""
    it = iter(lines)

    def number(line_no: int, line: str) -> int:
        try:
            return java_int(line)
        except ValueError:
            raise CorruptCheckpointError(f"Malformed line in checkpoint file: {line!r}",
                                         source=source, line=line_no) from None

    first = next(it, None)
    if first is None:
        return []
    read_version = number(*first)
    if read_version != version:
        raise CorruptCheckpointError(
            f"Unrecognised version: {read_version}, expected version: {version}",
            source=source, line=first[0])
    second = next(it, None)
    if second is None:
        return []
    count_line = second[0]
    expected = number(*second)
    entries: list[T] = []
    for line_no, line in it:
        try:
            entry = parse_entry(line)
        except ValueError as e:
            raise CorruptCheckpointError(f"Malformed line in checkpoint file: {line!r} ({e})",
                                         source=source, line=line_no) from e
        if entry is None:
            raise CorruptCheckpointError(f"Malformed line in checkpoint file: {line!r}",
                                         source=source, line=line_no)
        entries.append(entry)
        if len(entries) > expected:
            raise CorruptCheckpointError(
                f"Expected {expected} entries in checkpoint file, but found {len(entries)} or "
                f"more (stopped reading at line {line_no})", source=source, line=count_line)
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"Expected {expected} entries in checkpoint file, but found {len(entries)}",
            source=source, line=count_line)
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
        """The entries, read line by line (``read_java_lines``): a missing file has none; a
        FIFO, directory or device at the path raises ``UnsafeFileError``, a damaged file
        ``CorruptCheckpointError`` naming its line."""
        with self._lock:
            try:
                f = open_regular_file(self.path)
            except FileNotFoundError:
                return []
            with f:
                return parse_checkpoint_lines(read_java_lines(f, self.path), self.version,
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


"""Kafka's ``PartitionMetadataFile``: the topic id of a partition directory, in
``partition.metadata``, and the string form of a topic id (``Uuid.toString`` / ``fromString``)."""

from __future__ import annotations

import base64
import binascii
import re
import threading
import uuid
from dataclasses import dataclass
from itertools import islice
from os import PathLike
from pathlib import Path

from ..errors import InconsistentTopicIdError
from .atomic import atomic_write
from ..data_files import open_regular_file
from .checkpoint_file import CorruptCheckpointError, java_int, java_lines, read_java_lines

PARTITION_METADATA_FILE = "partition.metadata"                   # in the partition dir
PARTITION_METADATA_VERSION = 0       # PartitionMetadataFile.CURRENT_VERSION

_CHUNK = 4096                        # a whole valid file in one read, a few lines of any other
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
    return parse_partition_metadata_lines(java_lines(text)[:2], source=source)


def parse_partition_metadata_lines(lines: list[str], *, source: str | PathLike[str] | None = None
                                   ) -> PartitionMetadata:
    """``parse_partition_metadata`` of the file's first two lines (fewer if it has fewer)."""

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
        version = java_int(raw_version)
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
        """The file's content. Kafka's reader reads two lines and ignores the rest, so only
        those are read: at most two lines of ``MAX_LINE_BYTES`` (a valid line is at most 34
        bytes) and one read ahead, whatever the file's size; a FIFO, directory or device at
        the path raises ``UnsafeFileError``, a missing file ``FileNotFoundError``."""
        with self._lock:
            with open_regular_file(self.path) as f:
                lines = [line for _, line in islice(read_java_lines(f, self.path, chunk=_CHUNK), 2)]
        return parse_partition_metadata_lines(lines, source=self.path)

    def read(self) -> uuid.UUID:
        return self.read_metadata().topic_id

    def exists(self) -> bool:
        return self.path.exists()

    def delete(self) -> None:
        self.path.unlink()

    def __repr__(self) -> str:
        return f"PartitionMetadataFile({str(self.path)!r})"


"""What ``dump`` and ``verify`` share to read a partition's remote tier (KIP-405): the remote
storage configured as for ``kafkalog tier`` (``--config FILE`` and ``--property KEY=VALUE``,
the storage manager's settings under ``rsm.config.``), the partition's
``COPY_SEGMENT_FINISHED`` segments from the ``__remote_log_metadata`` topic of its data
directory (read-only, as ``describe`` reads it), and a segment's objects fetched into a
temporary folder under their local names (``<start offset>.log``, ``.index``, ...), so that the
local code paths read them. A fetch is ranged reads of at most ``FETCH_CHUNK`` bytes
(``RemoteStorageManager.fetch_log_segment`` / ``fetch_index``), so memory stays bounded whatever
a segment's size; the folder holds one segment at a time and is removed after it.

Objects are named by their path in the store (``s3://bucket/prefix/kafka-tiered-storage/
<topic>-<partition>-<topic id>/<start offset>-<segment id>.log``): credentials are never part of
a path.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..checkpoint import (PARTITION_METADATA_FILE, CorruptCheckpointError, PartitionMetadataFile,
                          parse_topic_partition_dir, read_small_file)
from ..errors import KafkaLogError, RemoteResourceNotFoundError, RemoteStorageError, UnsafeFileError
from ..log import filename_prefix
from ..remote import (REMOTE_LOG_METADATA_TOPIC_NAME, IndexType, PyArrowRemoteStorageManager, RemoteInputStream,
                      RemoteLogManagerConfig, RemoteLogSegmentFileType, RemoteLogSegmentMetadata,
                      RemoteLogSegmentState, TopicBasedRemoteLogMetadataManager, TopicIdPartition)
from .java_properties import PropertiesSyntaxError, load_properties
from .output import UsageError

FETCH_CHUNK = 8 << 20          # one ranged read
MAX_CONFIG_BYTES = 1 << 20     # --config: a server.properties is a few KiB

# the objects of a segment, with the local suffix each is fetched under and the index type
# ``fetch_index`` takes (None: the .log, through ``fetch_log_segment``)
SEGMENT_OBJECTS: tuple[tuple[RemoteLogSegmentFileType, str, IndexType | None], ...] = (
    (RemoteLogSegmentFileType.SEGMENT, ".log", None),
    (RemoteLogSegmentFileType.OFFSET_INDEX, ".index", IndexType.OFFSET),
    (RemoteLogSegmentFileType.TIME_INDEX, ".timeindex", IndexType.TIMESTAMP),
    (RemoteLogSegmentFileType.TRANSACTION_INDEX, ".txnindex", IndexType.TRANSACTION),
    (RemoteLogSegmentFileType.PRODUCER_SNAPSHOT, ".snapshot", IndexType.PRODUCER_SNAPSHOT),
    (RemoteLogSegmentFileType.LEADER_EPOCH_CHECKPOINT, ".leader_epoch_checkpoint", IndexType.LEADER_EPOCH),
)


def read_config_file(path: Path) -> str:
    """The text of ``--config``: a regular file (a FIFO would block the read forever, a
    directory or device is no properties file), at most ``MAX_CONFIG_BYTES`` (``read_small_file``),
    strict UTF-8. Anything else is a ``UsageError`` naming the file (and the line and byte of
    bad UTF-8)."""
    try:
        data = read_small_file(path, MAX_CONFIG_BYTES)      # follows a link to a server.properties
    except (UnsafeFileError, CorruptCheckpointError, OSError, ValueError) as e:   # ValueError: a NUL
        raise UsageError(f"cannot read --config {path}: {e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UsageError(f"cannot read --config {path}: line {line} (byte {e.start}) is not UTF-8: "
                         f"{e.reason}") from None


def broker_properties(args: argparse.Namespace) -> dict[str, str]:
    """The properties of ``--config``, read as Kafka reads a ``server.properties``
    (``java.util.Properties.load``: ``=``, ``:`` or whitespace separators, continuation lines,
    escapes; ``load_properties``), then the ``--property`` overrides."""
    props: dict[str, str] = {}
    if args.config:
        path = Path(args.config)
        try:
            props.update(load_properties(read_config_file(path)))
        except PropertiesSyntaxError as e:
            raise UsageError(f"--config {path} line {e.line}: {e.reason}") from None
    for item in args.property or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--property expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    return props


@dataclass
class FetchedSegment:
    """A remote segment's objects in a temporary folder: the local path of each object fetched,
    and why each one that could not be (missing, truncated) was not, by file type."""

    metadata: RemoteLogSegmentMetadata
    folder: Path
    paths: dict[RemoteLogSegmentFileType, Path] = field(default_factory=dict)
    problems: dict[RemoteLogSegmentFileType, tuple[int, str]] = field(default_factory=dict)  # (position, why)


class RemoteTier:
    """The remote storage of ``dump``/``verify``: the storage manager from the broker
    properties, and a read-only metadata manager per data directory."""

    def __init__(self, properties: dict[str, str]) -> None:
        self.config = RemoteLogManagerConfig.from_properties(properties)
        self.rsm = PyArrowRemoteStorageManager(self.config.rsm_configs())
        self._rlmms: dict[Path, TopicBasedRemoteLogMetadataManager] = {}

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "RemoteTier | None":
        """The remote tier the command line configures (None: no ``--config``/``--property``)."""
        if not getattr(args, "config", None) and not getattr(args, "property", None):
            return None
        return cls(broker_properties(args))

    @property
    def store(self) -> str:
        """The store's name, credentials left out."""
        return self.rsm.store

    def object_name(self, md: RemoteLogSegmentMetadata, file_type: RemoteLogSegmentFileType) -> str:
        """Where the object is: its path, with the file system's scheme where it is not local."""
        path = self.rsm.object_path(md, file_type)
        kind = self.rsm.filesystem.type_name
        return path if kind == "local" else f"{kind}://{path}"

    def _rlmm(self, data_dir: Path) -> TopicBasedRemoteLogMetadataManager:
        if data_dir not in self._rlmms:
            if not any(data_dir.glob(f"{REMOTE_LOG_METADATA_TOPIC_NAME}-*")):
                raise KafkaLogError(f"{data_dir} holds no {REMOTE_LOG_METADATA_TOPIC_NAME} topic: the remote "
                                    f"segments of its partitions are unknown")
            self._rlmms[data_dir] = TopicBasedRemoteLogMetadataManager(self.config.rlmm_configs(data_dir),
                                                                       read_only=True)
        return self._rlmms[data_dir]

    def topic_id_partition(self, partition_dir: Path) -> TopicIdPartition:
        """The partition's topic id (its ``partition.metadata``) and topic-partition (its name)."""
        meta = partition_dir / PARTITION_METADATA_FILE
        if not meta.exists():
            raise KafkaLogError(f"{partition_dir} has no {PARTITION_METADATA_FILE}: its topic id, which names its "
                                f"remote segments, is unknown")
        # PartitionMetadataFile.read: bytes that are not UTF-8 a CorruptCheckpointError naming the
        # file and byte position (read_text raised UnicodeDecodeError), a bad line naming the file
        return TopicIdPartition(PartitionMetadataFile(partition_dir).read(),
                                parse_topic_partition_dir(partition_dir.name))

    def segments(self, partition_dir: Path) -> list[RemoteLogSegmentMetadata]:
        """The partition's ``COPY_SEGMENT_FINISHED`` (readable) remote segments, by start offset."""
        if partition_dir.name.startswith(f"{REMOTE_LOG_METADATA_TOPIC_NAME}-"):
            return []
        tip = self.topic_id_partition(partition_dir)
        mds = self._rlmm(partition_dir.parent).list_remote_log_segments(tip)
        return sorted((m for m in mds if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
                      key=lambda m: (m.start_offset, m.end_offset))

    @contextmanager
    def fetched(self, md: RemoteLogSegmentMetadata,
                types: tuple[RemoteLogSegmentFileType, ...] | None = None) -> Iterator[FetchedSegment]:
        """The segment's objects (``types``, default all) fetched into a temporary folder, named
        as a local segment's files; removed on exit. A missing object (an optional one, the
        transaction index, aside) or a truncated one is recorded in ``problems``; a truncated
        one keeps what the store has. A store that does not answer raises
        ``RemoteStorageError``."""
        with tempfile.TemporaryDirectory(prefix="kafkalog-", suffix="-remote-segment") as tmp:
            fetched = FetchedSegment(md, Path(tmp))
            for file_type, suffix, index_type in SEGMENT_OBJECTS:
                if types is not None and file_type not in types:
                    continue
                path = Path(tmp) / (filename_prefix(md.start_offset) + suffix)
                try:
                    self._fetch_object(md, index_type, path)
                    fetched.paths[file_type] = path
                except RemoteResourceNotFoundError as e:
                    path.unlink(missing_ok=True)
                    if not file_type.optional:
                        fetched.problems[file_type] = (0, f"missing from {self.store} ({e})")
                except RemoteStorageError as e:
                    if "ends before byte" not in str(e):
                        raise
                    written = path.stat().st_size
                    fetched.paths[file_type] = path
                    fetched.problems[file_type] = (
                        written, f"the object ends at byte {written}, before the {md.segment_size_in_bytes} bytes "
                                 f"the metadata gives the segment (truncated)")
            yield fetched

    def _fetch_object(self, md: RemoteLogSegmentMetadata, index_type: IndexType | None, path: Path) -> None:
        """Copy one object to ``path`` in ranged reads of at most ``FETCH_CHUNK`` bytes."""
        with open(path, "wb") as out:
            if index_type is None:
                size = md.segment_size_in_bytes
                while out.tell() < size:
                    with self.rsm.fetch_log_segment(md, out.tell(), min(out.tell() + FETCH_CHUNK, size) - 1) as s:
                        _copy(s, out)
            else:
                with self.rsm.fetch_index(md, index_type) as s:
                    _copy(s, out)

    def close(self) -> None:
        for rlmm in self._rlmms.values():
            rlmm.close()
        self._rlmms.clear()
        self.rsm.close()

    def __enter__(self) -> "RemoteTier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _copy(stream: RemoteInputStream, out: BinaryIO) -> None:
    """Copy a stream into a file, ``FETCH_CHUNK`` bytes at a time."""
    while data := stream.read(FETCH_CHUNK):
        out.write(data)

"""Remote log metadata kept in the object store itself, beside the segments, so that a topic can
be read from the store alone (no ``__remote_log_metadata`` topic anywhere: a Spark cluster whose
machines reach the store but not the writer's disk).

Kafka has no class for this: a broker's ``RemoteLogMetadataManager`` keeps the metadata in the
``__remote_log_metadata`` topic, which only the cluster reads. kafkalog mirrors every event its
``TopicBasedRemoteLogMetadataManager`` publishes for a user partition as one immutable object, in
Kafka's own serialized form (``RemoteLogMetadataSerde``, the bytes of the topic's record value)::

    <root>/kafka-remote-log-metadata/<topic>-<partition>-<topic id>/<sequence, 20 digits>.metadata

``<root>`` is the store root (the storage manager's ``storage.uri``; the segments are under
``<root>/kafka-tiered-storage``), the directory is named as ``RemoteTopicPartitionDirectory``
names the segments' one, and the sequence numbers the partition's events from 0 in the order
they were published. Each event is mirrored before it is appended to the metadata topic, and the
topic's write returns only after both: a ``COPY_SEGMENT_STARTED`` is in the store before the
upload starts, ``COPY_SEGMENT_FINISHED`` after it ended, a deletion's events around the delete.
A failed mirror write fails the publish (the copy is then retried by the ``RemoteLogManager``
under a new segment id), so the store holds every event the topic holds, in the topic's order.
An object is written under a temporary name in ``<root>/.kafkalog-uploads`` and moved to its
name (atomic on a local file system; one small ``PUT`` on S3).

A reader (``RemoteLogMetadataStoreReader``) lists a partition's prefix, decodes the objects in
sequence order and folds them with ``RemoteLogMetadataCache``, as ``ConsumerTask`` folds the
topic; only ``COPY_SEGMENT_FINISHED`` segments are readable. It reads only the objects new since
its last call. An object whose name is not a sequence (20 ASCII digits), larger than
``MAX_OBJECT_BYTES``, not a file (a directory or FIFO under an event's name), or whose bytes do not
decode fails the read, naming the object (and the byte position, for bytes); so does any entry
of the metadata root that is not a ``<topic>-<partition>-<topic id>`` prefix. A gap in the
sequence fails the read, naming the missing objects. Events of deleted segments stay (immutable
objects): one object per state change, a few hundred bytes each.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow.fs as pafs

from ..checkpoint import TopicPartition, java_int, topic_id_from_str, validate_topic_name
from ..errors import (CorruptRemoteLogMetadataError, InvalidRemoteLogMetadataError, KafkaLogError,
                      RemoteStorageError)
from .metadata import (RemoteLogMetadata, RemoteLogSegmentMetadata, RemoteLogSegmentState, TopicIdPartition)
from .metadata_serde import deserialize, serialize
from .remote_log_metadata_cache import RemoteLogMetadataCache, RemotePartitionMetadataStore
from .storage_manager import (UPLOADS_DIR_NAME, PyArrowRemoteStorageManager, describe_segment, open_store,
                              partition_dir_name)
from .remote_input_stream import storage_error

logger = logging.getLogger(__name__)

METADATA_DIR_NAME = "kafka-remote-log-metadata"
METADATA_SUFFIX = ".metadata"
MAX_OBJECT_BYTES = 1 << 20          # far above any event (custom metadata is capped at 128 bytes by default)
# ASCII digits only: \d would also take other scripts' digits, which int() reads as numbers
_NAME = re.compile(r"([0-9]{20})" + re.escape(METADATA_SUFFIX))
_PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>[0-9]+)-(?P<id>[A-Za-z0-9_-]{22})")
_READERS = 8                         # objects fetched in parallel


def metadata_root(root: str) -> str:
    return f"{root}/{METADATA_DIR_NAME}" if root else METADATA_DIR_NAME


def event_object_name(sequence: int) -> str:
    return f"{sequence:020d}{METADATA_SUFFIX}"


def parse_partition_dir_name(name: str) -> TopicIdPartition | None:
    """``<topic>-<partition>-<topic id>`` back to its partition, None for another name."""
    m = _PARTITION_DIR.fullmatch(name)
    if m is None:
        return None
    try:
        # what the writer names: a topic Kafka accepts (Topic.validate), a partition in [0, 2^31)
        validate_topic_name(m.group("topic"))
        partition = java_int(m.group("partition"))
        if partition < 0:
            return None
        return TopicIdPartition(topic_id_from_str(m.group("id")), TopicPartition(m.group("topic"), partition))
    except (ValueError, KafkaLogError):
        return None


class RemoteLogMetadataStore:
    """The writer: mirrors each published event of a user partition as the next object of its
    prefix. ``filesystem`` and ``root`` are the store's (``open_store``), ``store`` its name for
    messages. Thread-safe."""

    def __init__(self, filesystem: pafs.FileSystem, root: str, store: str) -> None:
        self.filesystem, self.root, self.store = filesystem, root, store
        self._local = isinstance(filesystem, pafs.LocalFileSystem)
        self._next: dict[TopicIdPartition, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_storage_manager(cls, rsm: PyArrowRemoteStorageManager) -> "RemoteLogMetadataStore":
        """Beside the manager's segments: ``<root>/kafka-remote-log-metadata``."""
        root = rsm.root.rsplit("/", 1)[0] if "/" in rsm.root else ""
        return cls(rsm.filesystem, root, rsm.store)

    def partition_path(self, tip: TopicIdPartition) -> str:
        return f"{metadata_root(self.root)}/{partition_dir_name(tip)}"

    def _next_sequence(self, tip: TopicIdPartition) -> int:
        n = self._next.get(tip)
        if n is None:
            names = _list_names(self.filesystem, self.partition_path(tip), self.store)
            n = self._next[tip] = (max(names) + 1) if names else 0
        return n

    def publish(self, tip: TopicIdPartition, event: RemoteLogMetadata) -> None:
        """Write ``event`` as the partition's next object; returns once it is in the store."""
        value = serialize(event)
        what = describe_segment(event) if isinstance(event, RemoteLogSegmentMetadata) else str(tip)
        with self._lock:
            try:
                sequence = self._next_sequence(tip)
            except RemoteStorageError as e:
                raise type(e)(f"Writing remote log metadata {type(event).__name__} of {what}: {e}") from e
            final = f"{self.partition_path(tip)}/{event_object_name(sequence)}"
            temp = f"{self.root}/{UPLOADS_DIR_NAME}/{METADATA_DIR_NAME}.{partition_dir_name(tip)}." \
                   f"{sequence:020d}.{secrets.token_hex(8)}"
            try:
                if self._local:
                    self.filesystem.create_dir(self.partition_path(tip), recursive=True)
                    self.filesystem.create_dir(temp.rsplit("/", 1)[0], recursive=True)
                with self.filesystem.open_output_stream(temp) as out:
                    out.write(value)
                if self._local:
                    _fsync(temp)
                self.filesystem.move(temp, final)
                if self._local:
                    _fsync(self.partition_path(tip), directory=True)
            except OSError as e:
                self._next.pop(tip, None)        # unknown outcome: list again before the next write
                try:
                    self.filesystem.delete_file(temp)
                except OSError:
                    pass
                raise storage_error(f"Writing remote log metadata {type(event).__name__} of {what} to object "
                                    f"{final} in {self.store}", e) from e
            self._next[tip] = sequence + 1


    def delete_partition(self, tip: TopicIdPartition) -> None:
        """Removes the partition's events once all its remote data is gone (remote storage turned
        off with ``remote.log.delete.on.disable``): a reader then finds no such partition, as
        Kafka's metadata cache forgets a deleted partition."""
        with self._lock:
            try:
                self.filesystem.delete_dir(self.partition_path(tip))
            except FileNotFoundError:
                pass
            except OSError as e:
                raise storage_error(f"Deleting the remote log metadata of {tip} ({self.partition_path(tip)}) "
                                    f"in {self.store}", e) from e
            finally:
                self._next.pop(tip, None)

def _fsync(path: str, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _list_names(fs: pafs.FileSystem, prefix: str, store: str) -> dict[int, str]:
    """The event objects under ``prefix``: {sequence: path}. Any other object fails loudly."""
    try:
        infos = fs.get_file_info(pafs.FileSelector(prefix, allow_not_found=True))
    except OSError as e:
        raise storage_error(f"Listing remote log metadata {prefix} in {store}", e) from e
    out: dict[int, str] = {}
    for info in infos:
        m = _NAME.fullmatch(info.base_name)
        if info.type != pafs.FileType.File:
            if m is None and info.type == pafs.FileType.Directory:
                continue            # a prefix under the partition's (S3 lists "directories" of deeper keys)
            # an event's name on a directory, FIFO or device: never opened (a FIFO would block the
            # read), never skipped (the partition's state would silently lack that event)
            raise CorruptRemoteLogMetadataError(
                f"Remote log metadata object {info.path} in {store} is not a file "
                f"({info.type.name.lower()}): an event object was expected there")
        if m is None:
            raise CorruptRemoteLogMetadataError(
                f"Unknown object {info.path} in {store}: remote log metadata objects are named "
                f"<sequence, 20 digits>{METADATA_SUFFIX}")
        if info.size is not None and info.size > MAX_OBJECT_BYTES:
            raise CorruptRemoteLogMetadataError(
                f"Remote log metadata object {info.path} in {store} is {info.size} bytes, more than the "
                f"{MAX_OBJECT_BYTES} any event takes")
        out[int(m.group(1))] = info.path
    return out


def _first_missing(start: int, present: list[int], limit: int) -> list[int]:
    """The first ``limit`` sequences from ``start`` below ``present[-1]`` absent from ``present``
    (sorted): a walk over the names, never over the range, which a name like
    ``99999999999999999999.metadata`` makes astronomically long."""
    out: list[int] = []
    expected = start
    for s in present:
        while expected < s and len(out) < limit:
            out.append(expected)
            expected += 1
        if len(out) >= limit:
            break
        expected = s + 1
    return out


@dataclass(frozen=True)
class RemotePartitionState:
    """What a reader knows of one partition: its readable segments by start offset, the
    highest offset any finished copy reached (-1 if none; deleted segments count), and whether
    the partition was deleted (``DELETE_PARTITION_*``)."""

    tip: TopicIdPartition
    segments: tuple[RemoteLogSegmentMetadata, ...]
    highest_offset: int
    deleted: bool = False


class RemoteLogMetadataStoreReader:
    """Reads the mirrored metadata of a store (``configs``: the storage manager's settings),
    following each partition incrementally (only new objects are fetched)."""

    def __init__(self, configs: Mapping[str, object]) -> None:
        self.filesystem, self.root, self.store = open_store(configs)
        self._folded: dict[TopicIdPartition, RemotePartitionMetadataStore] = {}
        self._seen: dict[TopicIdPartition, int] = {}
        self._highest: dict[TopicIdPartition, int] = {}

    def partitions(self) -> list[TopicIdPartition]:
        """Every partition with a metadata prefix, sorted by topic, partition and id."""
        base = metadata_root(self.root)
        try:
            infos = self.filesystem.get_file_info(pafs.FileSelector(base, allow_not_found=True))
        except OSError as e:
            raise storage_error(f"Listing {base} in {self.store}", e) from e
        out = []
        for info in infos:
            if info.type != pafs.FileType.Directory:
                raise CorruptRemoteLogMetadataError(
                    f"Unknown object {info.path} in {self.store}: {base} holds only "
                    f"<topic>-<partition>-<topic id> prefixes")
            tip = parse_partition_dir_name(info.base_name)
            if tip is None:
                raise CorruptRemoteLogMetadataError(
                    f"Unknown prefix {info.path} in {self.store}: expected <topic>-<partition>-<topic id> "
                    f"(a topic name Kafka accepts, a partition in [0, 2147483647], a 22-character topic id)")
            out.append(tip)
        return sorted(out, key=lambda t: (t.topic, t.partition, str(t.topic_id)))

    def state(self, tip: TopicIdPartition) -> RemotePartitionState:
        """The partition's state after every event in the store now."""
        store = self._folded.get(tip)
        if store is None:
            store = self._folded[tip] = RemotePartitionMetadataStore()
            store.maybe_load_partition(tip)
        names = _list_names(self.filesystem, f"{metadata_root(self.root)}/{partition_dir_name(tip)}", self.store)
        seen = self._seen.get(tip, -1)
        new = sorted(s for s in names if s > seen)
        if new and new[0] != seen + 1 or any(b != a + 1 for a, b in zip(new, new[1:])):
            missing = _first_missing(seen + 1, new, 5)
            raise InvalidRemoteLogMetadataError(
                f"Remote log metadata of {tip} in {self.store} lacks event objects "
                f"{', '.join(event_object_name(s) for s in missing)}: the events must be folded in order")
        highest = self._highest.get(tip, -1)
        for sequence, event in zip(new, self._fetch([names[s] for s in new])):
            if getattr(event, "topic_id_partition", None) != tip:
                raise InvalidRemoteLogMetadataError(
                    f"Remote log metadata object {names[sequence]} in {self.store} holds an event of "
                    f"{getattr(event, 'topic_id_partition', None)}, not of {tip}")
            try:
                store.handle(event)
            except InvalidRemoteLogMetadataError as e:
                raise InvalidRemoteLogMetadataError(f"{e} (object {names[sequence]} in {self.store})") from None
            if new and getattr(event, "state", None) is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
                md = store.cache(tip).id_to_segment_metadata.get(event.remote_log_segment_id)  # type: ignore[union-attr]
                if md is not None:
                    highest = max(highest, md.end_offset)
            self._seen[tip] = sequence
        self._highest[tip] = highest
        cache: RemoteLogMetadataCache = store.cache(tip)
        finished = sorted((m for m in cache.list_all_remote_log_segments()
                           if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
                          key=lambda m: (m.start_offset, m.end_offset))
        return RemotePartitionState(tip, tuple(finished), highest, tip in store.partition_delete_metadata)

    def _fetch(self, paths: list[str]) -> Iterator[RemoteLogMetadata]:
        """The decoded events of ``paths``, in order, fetched a few at a time in parallel."""
        def one(path: str) -> bytes:
            try:
                with self.filesystem.open_input_file(path) as f:
                    data = f.read(MAX_OBJECT_BYTES + 1)
            except OSError as e:
                raise storage_error(f"Reading remote log metadata object {path} in {self.store}", e) from e
            if len(data) > MAX_OBJECT_BYTES:
                raise CorruptRemoteLogMetadataError(
                    f"Remote log metadata object {path} in {self.store} is larger than {MAX_OBJECT_BYTES} bytes")
            return data

        if not paths:
            return
        with ThreadPoolExecutor(max_workers=min(_READERS, len(paths))) as pool:
            for path, data in zip(paths, pool.map(one, paths)):
                yield deserialize(data, source=f"object {path} in {self.store}")


__all__ = ["METADATA_DIR_NAME", "MAX_OBJECT_BYTES", "RemoteLogMetadataStore", "RemoteLogMetadataStoreReader",
           "RemotePartitionState", "RemoteStorageError", "event_object_name", "parse_partition_dir_name"]

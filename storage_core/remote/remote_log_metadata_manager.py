"""Kafka's ``RemoteLogMetadataManager`` (KIP-405) and its default implementation,
``TopicBasedRemoteLogMetadataManager``: remote segment metadata kept as the records of the topic
``__remote_log_metadata``, here a kafkalog topic in a data directory.

Writing (``ProducerManager``): each event is serialized by ``RemoteLogMetadataSerde``, with a
null key, into the metadata partition ``RemoteLogMetadataTopicPartitioner`` picks for its user
partition, appended through ``storage_core.log.Log`` and fsynced before the call returns: a
``COPY_SEGMENT_STARTED`` is durable before the caller uploads anything, so a copy killed half way
is always known (an orphan, listed for cleanup, never readable). Kafka's RLMM completes a write
once its own consumer has read the record back; so does this one: every write returns after the
record was read back from the log and applied, through the same code that rebuilds the state.

Reading (``ConsumerTask``): the state of a user partition is the fold, from the first offset, of
its metadata partition's records into a ``RemoteLogMetadataCache``
(``remote_log_metadata_cache``). The same code reads the ``__remote_log_metadata-<n>``
directories a broker wrote (``read_only=True``: opened read-only, never locked nor changed;
its producer's idempotent, possibly compressed batches are read as any batches are). Null
values (KIP-1266 tombstones, not in Kafka yet) are skipped; a value that does not decode, or an
event Kafka's ``ConsumerTask`` would stop on, raises an error naming the partition directory and
offset. Without a cluster there is no partition assignment: a user partition is followed from its
first use (or ``on_partition_leadership_changes``) until ``on_stop_partitions``.

Configuration, as Kafka passes it to the plugin (``rlmm.config.`` stripped, plus ``log.dir``):
``log.dir`` (the data directory holding the topic), ``remote.log.metadata.topic.num.partitions``
(default 50; a topic already on disk with another count is refused, as
``TopicBasedRemoteLogMetadataManager.initializeResources`` refuses it) and
``remote.log.metadata.topic.retention.ms`` (default -1, unlimited).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import pyarrow as pa

from ..config import LogConfig
from ..errors import (InvalidConfigError, InvalidRemoteLogMetadataError, KafkaLogError,
                      RemoteResourceNotFoundError)
from ..log import Log
from .metadata import (RemoteLogMetadata, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
                       RemoteLogSegmentState, RemotePartitionDeleteMetadata, RemotePartitionDeleteState,
                       TopicIdPartition)
from .metadata_serde import deserialize, serialize
from .remote_log_metadata_cache import RemoteLogMetadataCache, RemotePartitionMetadataStore
from .remote_log_metadata_store import RemoteLogMetadataStore
from .topic_partitioner import (DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS, REMOTE_LOG_METADATA_TOPIC_NAME,
                                RemoteLogMetadataTopicPartitioner)

logger = logging.getLogger(__name__)

REMOTE_LOG_METADATA_MANAGER_IMPL_PREFIX_PROP = "remote.log.metadata.manager.impl.prefix"
DEFAULT_REMOTE_LOG_METADATA_MANAGER_IMPL_PREFIX = "rlmm.config."
REMOTE_LOG_METADATA_TOPIC_PARTITIONS_PROP = "remote.log.metadata.topic.num.partitions"
REMOTE_LOG_METADATA_TOPIC_RETENTION_MS_PROP = "remote.log.metadata.topic.retention.ms"
DEFAULT_REMOTE_LOG_METADATA_TOPIC_RETENTION_MS = -1
_READ_BYTES = 1 << 20                  # one fetch of metadata records
_PARTITION_DIR = re.compile(re.escape(REMOTE_LOG_METADATA_TOPIC_NAME) + r"-(\d+)")


@runtime_checkable
class RemoteLogMetadataManager(Protocol):
    """Kafka's ``RemoteLogMetadataManager``. Kafka's writes return futures; these return once
    the event is durable and visible to this manager's reads. Reads return None where Kafka
    returns ``Optional.empty()``."""

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        """A new copy, in state ``COPY_SEGMENT_STARTED`` (anything else is refused)."""
        ...

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """A state change of a known copy (never to ``COPY_SEGMENT_STARTED``)."""
        ...

    def put_remote_partition_delete_metadata(self, metadata: RemotePartitionDeleteMetadata) -> None:
        ...

    def remote_log_segment_metadata(self, tip: TopicIdPartition, epoch_for_offset: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        """The ``COPY_SEGMENT_FINISHED`` segment holding ``offset`` written in ``epoch_for_offset``."""
        ...

    def highest_offset_for_epoch(self, tip: TopicIdPartition, leader_epoch: int) -> int | None:
        ...

    def list_remote_log_segments(self, tip: TopicIdPartition,
                                 leader_epoch: int | None = None) -> Iterator[RemoteLogSegmentMetadata]:
        """Every segment not deleted (any order), or those of ``leader_epoch`` by start offset."""
        ...

    def next_segment_with_txn_index(self, tip: TopicIdPartition, epoch: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        ...

    def remote_log_size(self, tip: TopicIdPartition, leader_epoch: int) -> int:
        ...

    def on_partition_leadership_changes(self, leaders: Iterable[TopicIdPartition],
                                        followers: Iterable[TopicIdPartition]) -> None:
        ...

    def on_stop_partitions(self, partitions: Iterable[TopicIdPartition]) -> None:
        ...

    def is_ready(self, tip: TopicIdPartition) -> bool:
        ...

    def close(self) -> None:
        ...


@dataclass(frozen=True, slots=True)
class TopicBasedRemoteLogMetadataManagerConfig:
    """``TopicBasedRemoteLogMetadataManagerConfig``, the settings that mean something without a
    cluster. ``num_metadata_topic_partitions`` None: as many as the topic has on disk, else 50."""

    log_dir: Path
    num_metadata_topic_partitions: int | None = None
    retention_ms: int = DEFAULT_REMOTE_LOG_METADATA_TOPIC_RETENTION_MS

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_dir", Path(self.log_dir))
        n = self.num_metadata_topic_partitions
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n <= 0):
            raise InvalidConfigError(f"{REMOTE_LOG_METADATA_TOPIC_PARTITIONS_PROP} must be a positive integer, "
                                     f"not {n!r}")
        if isinstance(self.retention_ms, bool) or not isinstance(self.retention_ms, int) or self.retention_ms < -1:
            raise InvalidConfigError(f"{REMOTE_LOG_METADATA_TOPIC_RETENTION_MS_PROP} must be an integer >= -1, "
                                     f"not {self.retention_ms!r}")

    @classmethod
    def from_configs(cls, configs: Mapping[str, object]) -> "TopicBasedRemoteLogMetadataManagerConfig":
        """From the plugin's configuration (the ``rlmm.config.`` keys, prefix stripped, and
        ``log.dir``), as ``RemoteLogManager.configAndWrapRlmmPlugin`` passes it."""
        if not configs.get("log.dir"):
            raise InvalidConfigError("log.dir must be set: the data directory of the __remote_log_metadata topic")

        def integer(key: str, default: int | None) -> int | None:
            raw = configs.get(key)
            if raw is None:
                return default
            try:
                return int(str(raw).strip())
            except ValueError:
                raise InvalidConfigError(f"{key} must be an integer, not {raw!r}") from None

        retention = integer(REMOTE_LOG_METADATA_TOPIC_RETENTION_MS_PROP, None)
        return cls(Path(str(configs["log.dir"])), integer(REMOTE_LOG_METADATA_TOPIC_PARTITIONS_PROP, None),
                   DEFAULT_REMOTE_LOG_METADATA_TOPIC_RETENTION_MS if retention is None else retention)

    @classmethod
    def from_broker_properties(cls, properties: Mapping[str, object]) -> "TopicBasedRemoteLogMetadataManagerConfig":
        """From broker properties: the keys under ``remote.log.metadata.manager.impl.prefix``
        (default ``rlmm.config.``), prefix stripped, and ``log.dir`` (the first of ``log.dirs``)."""
        prefix = str(properties.get(REMOTE_LOG_METADATA_MANAGER_IMPL_PREFIX_PROP,
                                    DEFAULT_REMOTE_LOG_METADATA_MANAGER_IMPL_PREFIX))
        configs: dict[str, object] = {k[len(prefix):]: v for k, v in properties.items() if k.startswith(prefix)}
        log_dirs = properties.get("log.dirs") or properties.get("log.dir")
        if log_dirs:
            configs["log.dir"] = str(log_dirs).split(",")[0].strip()
        return cls.from_configs(configs)


def metadata_partition_dirs(log_dir: Path) -> dict[int, Path]:
    """The ``__remote_log_metadata-<n>`` directories under ``log_dir``, by partition."""
    found: dict[int, Path] = {}
    try:
        entries = list(os.scandir(log_dir))
    except FileNotFoundError:
        return found
    for entry in entries:
        m = _PARTITION_DIR.fullmatch(entry.name)
        if m and entry.is_dir(follow_symlinks=False):
            found[int(m.group(1))] = Path(entry.path)
    return found


class TopicBasedRemoteLogMetadataManager:
    """``TopicBasedRemoteLogMetadataManager`` over a kafkalog ``__remote_log_metadata`` topic.

    ``read_only``: the topic is read, never created, locked or written (a broker's directories,
    or another process's); ``refresh()`` reads what was appended since. Otherwise this manager
    is the topic's writer: it creates the topic's partition directories and holds each metadata
    partition's writer lock from its first write until ``close()`` (a second writer gets
    ``LogLockedError``). Thread-safe: one lock around every operation."""

    def __init__(self, config: TopicBasedRemoteLogMetadataManagerConfig | Mapping[str, object], *,
                 read_only: bool = False) -> None:
        if not isinstance(config, TopicBasedRemoteLogMetadataManagerConfig):
            config = TopicBasedRemoteLogMetadataManagerConfig.from_configs(config)
        self.config = config
        self.read_only = read_only
        self.log_dir = config.log_dir
        self._lock = threading.RLock()
        self._store = RemotePartitionMetadataStore()
        self._writers: dict[int, Log] = {}
        self._positions: dict[int, int] = {}          # metadata partition -> next offset to fold
        self._closed = False
        # the store's copy of every event (remote_log_metadata_store), when there is one: set by
        # RemoteLogManager over a PyArrowRemoteStorageManager
        self.mirror: RemoteLogMetadataStore | None = None
        self._log_config = LogConfig(retention_ms=config.retention_ms)
        existing = metadata_partition_dirs(self.log_dir)
        count = self._partition_count(existing)
        self.partitioner = RemoteLogMetadataTopicPartitioner(count)
        self._dirs = {n: self.log_dir / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{n}" for n in range(count)}
        if not read_only and len(existing) < count:
            self._create_topic()

    def _partition_count(self, existing: dict[int, Path]) -> int:
        configured = self.config.num_metadata_topic_partitions
        if not existing:
            if self.read_only and configured is None:
                logger.info("No %s topic in %s: no remote log metadata", REMOTE_LOG_METADATA_TOPIC_NAME, self.log_dir)
            return configured or DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS
        count = max(existing) + 1
        missing = sorted(set(range(count)) - set(existing))
        if missing:
            raise KafkaLogError(f"The {REMOTE_LOG_METADATA_TOPIC_NAME} topic in {self.log_dir} lacks partition "
                                f"directories {', '.join(f'{REMOTE_LOG_METADATA_TOPIC_NAME}-{n}' for n in missing)} "
                                f"(it has {len(existing)} of {count}): the metadata partition of a user partition "
                                f"depends on the count")
        if configured is not None and configured != count:
            # TopicBasedRemoteLogMetadataManager.initializeResources refuses it too
            raise InvalidConfigError(f"Existing topic partition count {count} of {REMOTE_LOG_METADATA_TOPIC_NAME} in "
                                     f"{self.log_dir} is not matching with {REMOTE_LOG_METADATA_TOPIC_PARTITIONS_PROP} "
                                     f"value {configured}")
        return count

    def _create_topic(self) -> None:
        """All partition directories at once, as Kafka creates the topic with all its partitions:
        a reader counts them to find a user partition's metadata partition."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for path in self._dirs.values():
            path.mkdir(exist_ok=True)
        fd = os.open(self.log_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        logger.info("Created %s with %d partitions in %s", REMOTE_LOG_METADATA_TOPIC_NAME, len(self._dirs),
                    self.log_dir)

    # -- the topic --------------------------------------------------------------------------------

    def metadata_partition(self, tip: TopicIdPartition) -> int:
        return self.partitioner.metadata_partition(tip)

    def _writer(self, partition: int) -> Log:
        log = self._writers.get(partition)
        if log is None:
            log = self._writers[partition] = Log.open(self._dirs[partition], self._log_config)
        return log

    def _publish(self, tip: TopicIdPartition, event: RemoteLogMetadata) -> None:
        """``ProducerManager.publishMessage``: append (null key), fsync, then read it back."""
        if self.read_only:
            raise KafkaLogError(f"The remote log metadata manager of {self.log_dir} is read-only: cannot write "
                                f"{type(event).__name__} of {tip}")
        value = serialize(event)
        if self.mirror is not None:
            self.mirror.publish(tip, event)      # first: the store holds every event the topic holds
        partition = self.metadata_partition(tip)
        log = self._writer(partition)
        log.append(pa.table({"value": pa.array([value], pa.binary())}))
        log.flush()
        self._catch_up(partition)

    def _fold(self, partition: int, start: int, end: int | None,
              only: set[TopicIdPartition] | None = None) -> int:
        """Apply the records of metadata partition ``partition`` from ``start`` to ``end``
        (default: its end) to the followed user partitions (``only``: to these); returns the
        offset after the last record read (``ConsumerTask.processConsumerRecord``)."""
        opened = None
        if not self.read_only:
            log = self._writer(partition)        # a writer's open recovers a torn tail first
        else:
            if not self._dirs[partition].is_dir():
                return start
            log = opened = Log.open(self._dirs[partition], self._log_config, read_only=True)
        try:
            stop = log.high_watermark if end is None else min(end, log.high_watermark)
            offset = max(start, log.log_start_offset)
            while offset < stop:
                fetched = log.fetch(offset, max_bytes=_READ_BYTES, max_offset=stop)
                table = fetched.table
                for record_offset, value in zip(table.column("offset").to_pylist(), table.column("value").to_pylist()):
                    self._apply(log, record_offset, value, only)
                if fetched.next_offset <= offset:
                    break
                offset = fetched.next_offset
            return max(offset, start)
        finally:
            if opened is not None:
                opened.close()

    def _apply(self, log: Log, offset: int, value: bytes | None, only: set[TopicIdPartition] | None) -> None:
        where = f"{log.dir} at offset {offset}"
        if value is None:
            logger.debug("Skipping the null value at %s (a tombstone)", where)
            return
        event = deserialize(value, source=where)
        tip = event.topic_id_partition if hasattr(event, "topic_id_partition") else None
        if tip is None:
            raise InvalidRemoteLogMetadataError(f"{type(event).__name__} at {where}: a record Kafka's brokers never "
                                                f"write to {REMOTE_LOG_METADATA_TOPIC_NAME} (ConsumerTask stops on it)")
        if (only is not None and tip not in only) or tip not in self._store.caches:
            return
        if self.metadata_partition(tip) != int(log.dir.name.rsplit("-", 1)[1]):
            logger.warning("Record of %s at %s is not in its metadata partition %d", tip, where,
                           self.metadata_partition(tip))
        try:
            self._store.handle(event)
        except InvalidRemoteLogMetadataError as e:
            raise InvalidRemoteLogMetadataError(f"{e} (record at {where})") from None

    def _catch_up(self, partition: int) -> None:
        self._positions[partition] = self._fold(partition, self._positions.get(partition, 0), None)

    def _follow(self, tips: Iterable[TopicIdPartition]) -> None:
        """Start following user partitions: fold their metadata partition from the first offset
        (``ConsumerTask``: newly assigned partitions are read from the beginning)."""
        new: dict[int, set[TopicIdPartition]] = {}
        for tip in tips:
            if not isinstance(tip, TopicIdPartition):
                raise InvalidRemoteLogMetadataError(f"not a TopicIdPartition: {tip!r}")
            if tip not in self._store.caches:
                new.setdefault(self.metadata_partition(tip), set()).add(tip)
        for partition, added in new.items():
            for tip in added:
                self._store.maybe_load_partition(tip)
            position = self._positions.get(partition)
            if position:
                self._fold(partition, 0, position, only=added)
            self._catch_up(partition)
            for tip in added:
                self._store.mark_initialized(tip)

    def _cache(self, tip: TopicIdPartition) -> RemoteLogMetadataCache:
        self._check_open()
        self._follow([tip])
        return self._store.cache(tip)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaLogError(f"The remote log metadata manager of {self.log_dir} is closed")

    # -- RemoteLogMetadataManager -----------------------------------------------------------------

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        if not isinstance(metadata, RemoteLogSegmentMetadata):
            raise InvalidRemoteLogMetadataError(f"not a RemoteLogSegmentMetadata: {metadata!r}")
        if metadata.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise InvalidRemoteLogMetadataError(
                f"Given remoteLogSegmentMetadata should have state as "
                f"{RemoteLogSegmentState.COPY_SEGMENT_STARTED.name} but it contains state as: {metadata.state.name}")
        with self._lock:
            cache = self._cache(metadata.topic_id_partition)
            existing = cache.id_to_segment_metadata.get(metadata.remote_log_segment_id)
            if existing is not None and existing.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
                raise InvalidRemoteLogMetadataError(
                    f"{metadata.remote_log_segment_id} is already in state {existing.state.name}: it can not be added "
                    f"again as {RemoteLogSegmentState.COPY_SEGMENT_STARTED.name}")
            self._publish(metadata.topic_id_partition, metadata)

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """Refused before anything is written (where Kafka writes it and its cache drops it):
        an unknown segment (``RemoteResourceNotFoundError``) or a transition
        ``RemoteLogSegmentState`` does not allow (``InvalidRemoteLogMetadataError``)."""
        if not isinstance(update, RemoteLogSegmentMetadataUpdate):
            raise InvalidRemoteLogMetadataError(f"not a RemoteLogSegmentMetadataUpdate: {update!r}")
        if update.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise InvalidRemoteLogMetadataError(
                f"Given remoteLogSegmentMetadataUpdate should not have the state as: {update.state.name}")
        with self._lock:
            cache = self._cache(update.topic_id_partition)
            existing = cache.id_to_segment_metadata.get(update.remote_log_segment_id)
            if existing is None:
                raise RemoteResourceNotFoundError(
                    f"No remote log segment metadata found for :{update.remote_log_segment_id}")
            if not RemoteLogSegmentState.is_valid_transition(existing.state, update.state):
                raise InvalidRemoteLogMetadataError(
                    f"Current state: {existing.state.name} can not be transitioned to target state: "
                    f"{update.state.name}, segmentId: {update.remote_log_segment_id}")
            self._publish(update.topic_id_partition, update)

    def put_remote_partition_delete_metadata(self, metadata: RemotePartitionDeleteMetadata) -> None:
        if not isinstance(metadata, RemotePartitionDeleteMetadata):
            raise InvalidRemoteLogMetadataError(f"not a RemotePartitionDeleteMetadata: {metadata!r}")
        with self._lock:
            self._cache(metadata.topic_id_partition)
            existing = self._store.partition_delete_metadata.get(metadata.topic_id_partition)
            current = existing.state if existing else None
            if not RemotePartitionDeleteState.is_valid_transition(current, metadata.state):
                raise InvalidRemoteLogMetadataError(
                    f"Current state: {current and current.name} can not be transitioned to target state: "
                    f"{metadata.state.name} for partition {metadata.topic_id_partition}")
            self._publish(metadata.topic_id_partition, metadata)

    def remote_log_segment_metadata(self, tip: TopicIdPartition, epoch_for_offset: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        with self._lock:
            return self._cache(tip).remote_log_segment_metadata(epoch_for_offset, offset)

    def highest_offset_for_epoch(self, tip: TopicIdPartition, leader_epoch: int) -> int | None:
        with self._lock:
            return self._cache(tip).highest_offset_for_epoch(leader_epoch)

    def list_remote_log_segments(self, tip: TopicIdPartition,
                                 leader_epoch: int | None = None) -> Iterator[RemoteLogSegmentMetadata]:
        with self._lock:
            cache = self._cache(tip)
            if leader_epoch is None:
                return iter(cache.list_all_remote_log_segments())
            return iter(cache.list_remote_log_segments(leader_epoch))

    def next_segment_with_txn_index(self, tip: TopicIdPartition, epoch: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        with self._lock:
            return self._cache(tip).next_segment_with_txn_index(epoch, offset)

    def remote_log_size(self, tip: TopicIdPartition, leader_epoch: int) -> int:
        """The bytes of the epoch's segments (states 0-2), as ``remoteLogSize`` sums them."""
        with self._lock:
            return sum(m.segment_size_in_bytes for m in self._cache(tip).list_remote_log_segments(leader_epoch))

    def remote_partition_delete_metadata(self, tip: TopicIdPartition) -> RemotePartitionDeleteMetadata | None:
        with self._lock:
            self._cache(tip)
            return self._store.partition_delete_metadata.get(tip)

    def on_partition_leadership_changes(self, leaders: Iterable[TopicIdPartition],
                                        followers: Iterable[TopicIdPartition]) -> None:
        """Follow these partitions (their state is folded from the metadata topic now)."""
        with self._lock:
            self._check_open()
            self._follow([*leaders, *followers])

    def on_stop_partitions(self, partitions: Iterable[TopicIdPartition]) -> None:
        """Forget these partitions' state (read again from the topic on their next use)."""
        with self._lock:
            for tip in partitions:
                self._store.clear_topic_partition(tip)

    def is_ready(self, tip: TopicIdPartition) -> bool:
        with self._lock:
            return not self._closed and self._store.is_initialized(tip)

    def refresh(self) -> None:
        """Fold what was appended to the topic since the last read (another process's writes)."""
        with self._lock:
            self._check_open()
            for partition in {self.metadata_partition(tip) for tip in self._store.caches}:
                self._catch_up(partition)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            writers, self._writers = self._writers, {}
            for log in writers.values():
                log.close()

    def __enter__(self) -> "TopicBasedRemoteLogMetadataManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "writer"
        return f"TopicBasedRemoteLogMetadataManager({self.log_dir}, {len(self._dirs)} partitions, {mode})"

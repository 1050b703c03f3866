"""Kafka's remote log metadata objects (KIP-405), with Kafka's names and constructor checks:
``TopicIdPartition``, ``RemoteLogSegmentId``, ``RemoteLogSegmentState``,
``RemoteLogSegmentMetadata``, ``RemoteLogSegmentMetadataUpdate``, ``RemotePartitionDeleteState``
and ``RemotePartitionDeleteMetadata`` (package ``org.apache.kafka.server.log.remote.storage``).

Ids are ``uuid.UUID`` (Kafka's ``Uuid``: most significant 8 bytes first), written as Kafka's
22-character URL-safe base64 (``topic_id_to_str``). Every object is a frozen dataclass; a value
Kafka's constructor would refuse raises ``InvalidRemoteLogMetadataError`` naming the field.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Self

from ..checkpoint import TopicPartition, random_topic_id, topic_id_to_str
from ..common import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN
from ..errors import InvalidRemoteLogMetadataError


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRemoteLogMetadataError(f"{name} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise InvalidRemoteLogMetadataError(f"{name} = {value} is outside [{low}, {high}]")


def _check_long(name: str, value: object) -> None:
    _check_int(name, value, LONG_MIN, LONG_MAX)


def _check_type(name: str, value: object, kind: type) -> None:
    if value is None:
        raise InvalidRemoteLogMetadataError(f"{name} can not be null")
    if not isinstance(value, kind):
        raise InvalidRemoteLogMetadataError(f"{name} must be a {kind.__name__}, not {value!r}")


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    """Kafka's ``TopicIdPartition``: a topic id and a ``TopicPartition``."""

    topic_id: uuid.UUID
    topic_partition: TopicPartition

    def __post_init__(self) -> None:
        _check_type("topicId", self.topic_id, uuid.UUID)
        if not isinstance(self.topic_partition, TopicPartition):
            tp = self.topic_partition
            if isinstance(tp, tuple) and len(tp) == 2:
                object.__setattr__(self, "topic_partition", TopicPartition(*tp))
            else:
                raise InvalidRemoteLogMetadataError(f"topicPartition must be (topic, partition), not {tp!r}")
        topic, partition = self.topic_partition
        _check_type("topic", topic, str)
        _check_int("partition", partition, INT_MIN, INT_MAX)

    @property
    def topic(self) -> str:
        return self.topic_partition.topic

    @property
    def partition(self) -> int:
        return self.topic_partition.partition

    def __str__(self) -> str:
        # TopicIdPartition.toString
        return f"{topic_id_to_str(self.topic_id)}:{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    """Kafka's ``RemoteLogSegmentId``: the partition and a random id, new for every copy attempt."""

    topic_id_partition: TopicIdPartition
    id: uuid.UUID

    def __post_init__(self) -> None:
        _check_type("topicIdPartition", self.topic_id_partition, TopicIdPartition)
        _check_type("id", self.id, uuid.UUID)

    @classmethod
    def generate_new(cls, topic_id_partition: TopicIdPartition) -> "RemoteLogSegmentId":
        """``RemoteLogSegmentId.generateNew``: a fresh ``Uuid.randomUuid()``."""
        return cls(topic_id_partition, random_topic_id())

    def __str__(self) -> str:
        return f"RemoteLogSegmentId{{topicIdPartition={self.topic_id_partition}, id={topic_id_to_str(self.id)}}}"


class _StateEnum(enum.IntEnum):
    """A Kafka state enum: ``id()`` is the byte written in the records, ``forId`` looks one up."""

    @property
    def id(self) -> int:
        return int(self)

    @classmethod
    def for_id(cls, state_id: int) -> Self:
        try:
            return cls(state_id)
        except ValueError:
            raise InvalidRemoteLogMetadataError(f"unknown {cls.__name__} id {state_id}") from None


class RemoteLogSegmentState(_StateEnum):
    """``RemoteLogSegmentState`` with Kafka's ids (the int8 written in the metadata records)."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @staticmethod
    def is_valid_transition(src: "RemoteLogSegmentState | None", target: "RemoteLogSegmentState") -> bool:
        """``RemoteLogSegmentState.isValidTransition``: none -> STARTED; STARTED -> FINISHED or
        DELETE_STARTED; FINISHED -> DELETE_STARTED; DELETE_STARTED -> DELETE_FINISHED; a state
        to itself. Everything else is refused."""
        if target is None:
            raise InvalidRemoteLogMetadataError("targetState can not be null")
        if src is None:
            return target is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        if src is target:
            return True
        return (src, target) in _SEGMENT_TRANSITIONS


_SEGMENT_TRANSITIONS = frozenset({
    (RemoteLogSegmentState.COPY_SEGMENT_STARTED, RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
    (RemoteLogSegmentState.COPY_SEGMENT_STARTED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED),
    (RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED),
    (RemoteLogSegmentState.DELETE_SEGMENT_STARTED, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED),
})


class RemotePartitionDeleteState(_StateEnum):
    """``RemotePartitionDeleteState`` with Kafka's ids."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @staticmethod
    def is_valid_transition(src: "RemotePartitionDeleteState | None", target: "RemotePartitionDeleteState") -> bool:
        """``RemotePartitionDeleteState.isValidTransition``: none -> MARKED -> STARTED ->
        FINISHED, and a state to itself."""
        if target is None:
            raise InvalidRemoteLogMetadataError("targetState can not be null")
        if src is None:
            return target is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        return src is target or target.id == src.id + 1


def _epochs(value: Mapping[int, int] | Iterable[tuple[int, int]] | None) -> tuple[tuple[int, int], ...]:
    """Kafka keeps ``segmentLeaderEpochs`` as a ``TreeMap``: ascending epochs, one offset each."""
    if value is None:
        raise InvalidRemoteLogMetadataError("segmentLeaderEpochs can not be null or empty")
    items = dict(value.items() if isinstance(value, Mapping) else value)
    if not items:
        raise InvalidRemoteLogMetadataError("segmentLeaderEpochs can not be null or empty")
    for epoch, offset in items.items():
        _check_int("segmentLeaderEpochs epoch", epoch, INT_MIN, INT_MAX)
        _check_long(f"segmentLeaderEpochs offset of epoch {epoch}", offset)
    return tuple(sorted(items.items()))


def _custom(value: bytes | bytearray | memoryview | None) -> bytes | None:
    """``Optional<CustomMetadata>``: ``None`` is absent (written as null), else opaque bytes."""
    if value is None:
        return None
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidRemoteLogMetadataError(f"customMetadata must be bytes or None, not {value!r}")
    return bytes(value)


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """Kafka's ``RemoteLogSegmentMetadata``: one copy of a segment in the remote tier.

    ``start_offset``/``end_offset`` are inclusive; ``segment_leader_epochs`` maps each leader
    epoch of the segment to its first offset in it (ascending; given as a mapping or pairs);
    ``custom_metadata`` is what the ``RemoteStorageManager`` returned from the copy (or None);
    ``txn_idx_empty`` says the segment's transaction index was empty (KAFKA-16780)."""

    remote_log_segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    custom_metadata: bytes | None = None
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    txn_idx_empty: bool = False

    def __post_init__(self) -> None:
        # the order of Kafka's constructor, so that the same bad input names the same field
        _check_type("remoteLogSegmentId", self.remote_log_segment_id, RemoteLogSegmentId)
        _check_type("state", self.state, RemoteLogSegmentState)
        _check_long("startOffset", self.start_offset)
        if self.start_offset < 0:
            raise InvalidRemoteLogMetadataError(
                f"Unexpected start offset = {self.start_offset}. StartOffset for a remote segment cannot be negative")
        _check_long("endOffset", self.end_offset)
        if self.end_offset < self.start_offset:
            raise InvalidRemoteLogMetadataError(
                f"endOffset: {self.end_offset} cannot be less than startOffset: {self.start_offset}")
        _check_long("maxTimestampMs", self.max_timestamp_ms)
        _check_int("brokerId", self.broker_id, INT_MIN, INT_MAX)
        _check_long("eventTimestampMs", self.event_timestamp_ms)
        _check_int("segmentSizeInBytes", self.segment_size_in_bytes, INT_MIN, INT_MAX)
        object.__setattr__(self, "custom_metadata", _custom(self.custom_metadata))
        object.__setattr__(self, "segment_leader_epochs", _epochs(self.segment_leader_epochs))
        if not isinstance(self.txn_idx_empty, bool):
            raise InvalidRemoteLogMetadataError(f"txnIdxEmpty must be a bool, not {self.txn_idx_empty!r}")

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition

    @property
    def leader_epochs(self) -> dict[int, int]:
        """``segmentLeaderEpochs`` as a dict (epoch -> first offset), ascending."""
        return dict(self.segment_leader_epochs)

    def create_with_updates(self, update: "RemoteLogSegmentMetadataUpdate") -> "RemoteLogSegmentMetadata":
        """``createWithUpdates``: offsets, max timestamp, size, epochs and ``txn_idx_empty`` stay;
        broker, event time, custom metadata and state come from ``update``."""
        if update.remote_log_segment_id != self.remote_log_segment_id:
            raise InvalidRemoteLogMetadataError(
                f"Given rlsmUpdate does not have this instance's remoteLogSegmentId. "
                f"({update.remote_log_segment_id} is not {self.remote_log_segment_id})")
        return RemoteLogSegmentMetadata(
            self.remote_log_segment_id, self.start_offset, self.end_offset, self.max_timestamp_ms,
            update.broker_id, update.event_timestamp_ms, self.segment_size_in_bytes,
            self.segment_leader_epochs, update.custom_metadata, update.state, self.txn_idx_empty)


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataUpdate:
    """Kafka's ``RemoteLogSegmentMetadataUpdate``: a state change of a segment copy."""

    remote_log_segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    custom_metadata: bytes | None
    state: RemoteLogSegmentState
    broker_id: int

    def __post_init__(self) -> None:
        _check_type("remoteLogSegmentId", self.remote_log_segment_id, RemoteLogSegmentId)
        _check_long("eventTimestampMs", self.event_timestamp_ms)
        object.__setattr__(self, "custom_metadata", _custom(self.custom_metadata))
        _check_type("state", self.state, RemoteLogSegmentState)
        _check_int("brokerId", self.broker_id, INT_MIN, INT_MAX)

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition


@dataclass(frozen=True, slots=True)
class RemotePartitionDeleteMetadata:
    """Kafka's ``RemotePartitionDeleteMetadata``: the deletion state of a whole partition."""

    topic_id_partition: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int

    def __post_init__(self) -> None:
        _check_type("topicIdPartition", self.topic_id_partition, TopicIdPartition)
        _check_type("state", self.state, RemotePartitionDeleteState)
        _check_long("eventTimestampMs", self.event_timestamp_ms)
        _check_int("brokerId", self.broker_id, INT_MIN, INT_MAX)


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataSnapshot:
    """Kafka's ``RemoteLogSegmentMetadataSnapshot`` (apiKey 3): a segment's metadata without its
    partition. Only a serde type now: brokers never write it (its file went in KAFKA-16161)."""

    segment_id: uuid.UUID
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    custom_metadata: bytes | None = None
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    txn_idx_empty: bool = False

    def __post_init__(self) -> None:
        _check_type("segmentId", self.segment_id, uuid.UUID)
        for name in ("start_offset", "end_offset", "max_timestamp_ms", "event_timestamp_ms"):
            _check_long(name, getattr(self, name))
        _check_int("brokerId", self.broker_id, INT_MIN, INT_MAX)
        _check_int("segmentSizeInBytes", self.segment_size_in_bytes, INT_MIN, INT_MAX)
        _check_type("state", self.state, RemoteLogSegmentState)
        object.__setattr__(self, "custom_metadata", _custom(self.custom_metadata))
        object.__setattr__(self, "segment_leader_epochs", _epochs(self.segment_leader_epochs))


RemoteLogMetadata = (RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate | RemotePartitionDeleteMetadata
                     | RemoteLogSegmentMetadataSnapshot)

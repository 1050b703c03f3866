"""Kafka's ``RemoteLogMetadataTopicPartitioner``: which ``__remote_log_metadata`` partition holds
a user partition's metadata records.

``metadataPartition`` hashes the 4 big-endian bytes of ``Objects.hash(lsb, msb, partition)`` of
the topic id (``Long.hashCode`` of each half, Java's 31-based int hash) with the producer's
``Utils.murmur2`` and takes it modulo the metadata topic's partition count. Not the key and not
the id's bytes: the records' keys are null.
"""

from __future__ import annotations

from ..errors import InvalidConfigError
from ..format import murmur2_bytes
from .metadata import TopicIdPartition

REMOTE_LOG_METADATA_TOPIC_NAME = "__remote_log_metadata"   # TopicBasedRemoteLogMetadataManagerConfig
DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS = 50          # remote.log.metadata.topic.num.partitions

_MASK = 0xFFFFFFFF


def _java_int(v: int) -> int:
    v &= _MASK
    return v - (1 << 32) if v >= 1 << 31 else v


def _long_hash(v: int) -> int:
    """``Long.hashCode``: ``(int) (v ^ (v >>> 32))``."""
    v &= (1 << 64) - 1
    return _java_int(v ^ (v >> 32))


def topic_id_partition_hash(tip: TopicIdPartition) -> int:
    """``Objects.hash(lsb, msb, partition)`` as ``RemoteLogMetadataTopicPartitioner`` takes it."""
    value = tip.topic_id.int
    msb, lsb = value >> 64, value & ((1 << 64) - 1)
    acc = 1
    for x in (_long_hash(lsb), _long_hash(msb), tip.partition):
        acc = _java_int(31 * acc + x)
    return acc


class RemoteLogMetadataTopicPartitioner:
    """``RemoteLogMetadataTopicPartitioner(numMetadataTopicPartitions)``."""

    def __init__(self, num_metadata_topic_partitions: int = DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS) -> None:
        if isinstance(num_metadata_topic_partitions, bool) or not isinstance(num_metadata_topic_partitions, int) \
                or num_metadata_topic_partitions <= 0:
            raise InvalidConfigError(f"remote.log.metadata.topic.num.partitions must be a positive integer, "
                                     f"not {num_metadata_topic_partitions!r}")
        self.num_metadata_topic_partitions = num_metadata_topic_partitions

    def metadata_partition(self, tip: TopicIdPartition) -> int:
        h = topic_id_partition_hash(tip)
        return (murmur2_bytes((h & _MASK).to_bytes(4, "big")) & 0x7FFFFFFF) % self.num_metadata_topic_partitions

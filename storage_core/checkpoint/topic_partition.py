"""Kafka's ``TopicPartition``, topic-name validation (``Topic.validate``) and the names of
partition directories (``LocalLog.logDirName``, ``logDeleteDirName``, ``parseTopicPartitionName``)."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping
from os import PathLike
from pathlib import PurePath
from typing import NamedTuple

from ..errors import InvalidTopicError
from .checkpoint_file import INT32_RANGE, java_int

logger = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"        # LogFileUtils
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
MAX_TOPIC_NAME_LENGTH = 249          # Topic.MAX_NAME_LENGTH
MAX_DIR_NAME_LENGTH = 255            # what LocalLog caps -delete / -stray names to


class TopicPartition(NamedTuple):
    """Kafka's ``TopicPartition``; a plain ``(topic, partition)`` tuple."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


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
            or not 0 <= partition <= INT32_RANGE[1]:
        raise InvalidTopicError(f"Partition must be an int in [0, {INT32_RANGE[1]}], got {partition!r}")


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
        return TopicPartition(topic, java_int(partition))
    except ValueError:
        raise refuse() from None

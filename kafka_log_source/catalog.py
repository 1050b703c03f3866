"""What a data directory holds: its ``topic-partition`` directories, the partitions a
subscription covers, and each partition's offsets, read through the storage engine opened
read-only (the driver's side of what Spark's ``KafkaOffsetReaderAdmin`` asks a broker).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from storage_core.checkpoint import topic_id_to_str
from storage_core.log import Log, bases_in_range, topic_partition_dir

from .offsets import TopicPartition
from .options import Assign, Strategy, Subscribe

logger = logging.getLogger(__name__)


def partition_dirs(root: Path) -> dict[TopicPartition, Path]:
    """Every ``topic-partition`` directory directly under ``root``. Directories a broker marks
    for deletion or moving (``-delete``, ``-future``, ``-stray``) and anything that is not a
    partition directory are left out."""
    found: dict[TopicPartition, Path] = {}
    try:
        entries = list(root.iterdir())
    except FileNotFoundError:
        return found
    for p in entries:
        named = topic_partition_dir(p.name)
        if named is not None and named.is_live and p.is_dir():
            found[(named.topic_partition.topic, named.topic_partition.partition)] = p
    return found


def assigned(strategy: Strategy, root: Path) -> dict[TopicPartition, Path]:
    """The partitions ``strategy`` covers that exist now, sorted by topic and partition.
    ``assign`` drops listed partitions that do not exist (``AssignStrategy``); a pattern skips
    Kafka's internal topics."""
    dirs = partition_dirs(root)
    if isinstance(strategy, Assign):
        wanted = set(strategy.partitions)
        picked = {tp: p for tp, p in dirs.items() if tp in wanted}
    elif isinstance(strategy, Subscribe):
        topics = set(strategy.topics)
        picked = {tp: p for tp, p in dirs.items() if tp[0] in topics}
    else:
        picked = {tp: p for tp, p in dirs.items()
                  if not tp[0].startswith("__") and strategy.matches(tp[0])}
    return dict(sorted(picked.items()))


@contextmanager
def open_partition(path: Path) -> Iterator[Log]:
    """The partition opened read-only (no lock: a writer may be appending)."""
    log = Log.open(path, read_only=True)
    try:
        yield log
    finally:
        log.close()


@dataclass(frozen=True)
class PartitionInfo:
    earliest: int                 # the log start offset
    latest: int                   # the log end offset, or the last stable offset (read_committed)
    segments: tuple[int, ...]     # base offsets of the segment files, in order
    topic_id: str | None = None   # from partition.metadata (string form), None without one
    # offsets below it are read from the object store (remote_tier); None: a local topic
    tiered_below: int | None = None
    # the local log's ListOffsets answers (``offset_for_timestamp``) for the timestamps asked
    # when it was opened: timestamp -> the first offset at or after it, None if every record is older
    timestamp_offsets: Mapping[int, int | None] = field(default_factory=dict, compare=False)


def partition_info(path: Path, isolation: str, timestamps: Iterable[int] = ()) -> PartitionInfo:
    """The partition's offsets and segments; with ``timestamps``, their offsets too
    (``timestamp_offsets``), looked up in the same open: planning a query by timestamp opens
    every segment of a partition once, not once for its offsets and again per timestamp."""
    with open_partition(path) as log:
        return info_of(log, isolation, timestamps)


def info_of(log: Log, isolation: str, timestamps: Iterable[int] = ()) -> PartitionInfo:
    """``partition_info`` of a partition already open."""
    latest = log.last_stable_offset if isolation == "read_committed" else log.log_end_offset
    return PartitionInfo(log.log_start_offset, latest,
                         tuple(s.base_offset for s in log.segments), topic_id_str(log),
                         timestamp_offsets={ts: log.offsets_for_times(ts) for ts in sorted(set(timestamps))})


def topic_id_str(log: Log) -> str | None:
    return None if log.topic_id is None else topic_id_to_str(log.topic_id)


def segments_for(info: PartitionInfo, start: int, end: int) -> tuple[int, ...]:
    """The base offsets of the segments holding ``[start, end)`` (``LogSegments.values``'s
    range), at least the one holding ``start`` even when the range is empty."""
    return tuple(bases_in_range(info.segments, start, max(end, start + 1)))


def offset_for_timestamp(path: Path, timestamp: int) -> int | None:
    """The first offset whose timestamp is at or after ``timestamp`` (ListOffsets), or None."""
    with open_partition(path) as log:
        return log.offsets_for_times(timestamp)

"""Kafka's in-memory remote log metadata state: ``RemoteLogLeaderEpochState``,
``RemoteLogMetadataCache`` (one user partition) and ``RemotePartitionMetadataStore`` (every
partition a metadata manager follows), the fold of ``__remote_log_metadata`` records that
``ConsumerTask`` feeds them.

What each segment state makes visible (``RemoteLogMetadataCache``'s table):

* ``COPY_SEGMENT_STARTED``: listed (so that an orphan of a killed copy can be cleaned up),
  never returned by ``remote_log_segment_metadata`` and not counted by ``highest_offset_for_epoch``;
* ``COPY_SEGMENT_FINISHED``: listed and readable: mapped from its start offset in each of its
  leader epochs' offset maps;
* ``DELETE_SEGMENT_STARTED``: listed (the deletion can be retried), not readable;
* ``DELETE_SEGMENT_FINISHED``: forgotten.

Lookups go by leader epoch first (segments copied by different leaders may overlap: the epoch
lineage decides, ``RemoteLogLeaderEpochState.handleSegmentWithCopySegmentFinishedState``).
Records that Kafka's cache drops (an update of an unknown segment, an invalid transition) are
dropped here too, with the same log levels; records that stop Kafka's ``ConsumerTask`` (a
segment record in a state other than ``COPY_SEGMENT_STARTED``, an update to that state)
raise ``InvalidRemoteLogMetadataError``.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import InvalidRemoteLogMetadataError, RemoteResourceNotFoundError
from .metadata import (RemoteLogMetadata, RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
                       RemoteLogSegmentState, RemotePartitionDeleteMetadata, RemotePartitionDeleteState,
                       TopicIdPartition)

logger = logging.getLogger(__name__)

_STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
_DELETE_STARTED = RemoteLogSegmentState.DELETE_SEGMENT_STARTED
_DELETE_FINISHED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED


def epoch_end_offset(metadata: RemoteLogSegmentMetadata, leader_epoch: int) -> int:
    """The last offset of ``leader_epoch`` inside the segment: the next epoch's first offset - 1,
    or the segment's end offset (``RemoteLogMetadataCache.highestOffsetForEpoch``)."""
    epochs = metadata.segment_leader_epochs
    i = bisect.bisect_right(epochs, (leader_epoch, float("inf")))
    return epochs[i][1] - 1 if i < len(epochs) else metadata.end_offset


@dataclass
class RemoteLogLeaderEpochState:
    """``RemoteLogLeaderEpochState``: one leader epoch's segments. ``offset_to_id`` maps the
    start offset (of this epoch in the segment) of every ``COPY_SEGMENT_FINISHED`` segment to
    its id, ascending; ``unreferenced`` holds the epoch's segments being copied, being deleted,
    or replaced by a later copy of the same offsets."""

    starts: list[int] = field(default_factory=list)                  # sorted keys of offset_to_id
    offset_to_id: dict[int, RemoteLogSegmentId] = field(default_factory=dict)
    unreferenced: set[RemoteLogSegmentId] = field(default_factory=set)
    highest_log_offset: int | None = None

    def _remove(self, start: int) -> RemoteLogSegmentId:
        self.starts.pop(bisect.bisect_left(self.starts, start))
        return self.offset_to_id.pop(start)

    def copy_segment_started(self, segment_id: RemoteLogSegmentId) -> None:
        self.unreferenced.add(segment_id)

    def copy_segment_finished(self, start_offset: int, segment_id: RemoteLogSegmentId, epoch_end: int) -> None:
        # a new leader's copy covering what an earlier copy of this epoch held (a leader that
        # lagged in tiering): the entries it supersedes become unreferenced
        while self.starts and self.starts[-1] >= start_offset and self.highest_log_offset is not None \
                and self.highest_log_offset <= epoch_end:
            self.unreferenced.add(self._remove(self.starts[-1]))
        if start_offset in self.offset_to_id:
            self.unreferenced.add(self._remove(start_offset))
        bisect.insort(self.starts, start_offset)
        self.offset_to_id[start_offset] = segment_id
        self.unreferenced.discard(segment_id)
        if self.highest_log_offset is None or epoch_end > self.highest_log_offset:
            self.highest_log_offset = epoch_end

    def delete_segment_started(self, start_offset: int, segment_id: RemoteLogSegmentId) -> None:
        if self.offset_to_id.get(start_offset) == segment_id:
            self._remove(start_offset)
        self.unreferenced.add(segment_id)

    def delete_segment_finished(self, segment_id: RemoteLogSegmentId) -> None:
        self.unreferenced.discard(segment_id)

    def floor_entry(self, offset: int) -> RemoteLogSegmentId | None:
        i = bisect.bisect_right(self.starts, offset)
        return self.offset_to_id[self.starts[i - 1]] if i else None

    def segment_ids(self) -> list[RemoteLogSegmentId]:
        return [self.offset_to_id[s] for s in self.starts] + list(self.unreferenced)


class RemoteLogMetadataCache:
    """``RemoteLogMetadataCache``: the segments of one user partition that have not reached
    ``DELETE_SEGMENT_FINISHED``, and their leader-epoch lineage."""

    def __init__(self) -> None:
        self.id_to_segment_metadata: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = {}
        self.leader_epoch_entries: dict[int, RemoteLogLeaderEpochState] = {}
        self.initialized = False

    def _epoch(self, leader_epoch: int) -> RemoteLogLeaderEpochState:
        state = self.leader_epoch_entries.get(leader_epoch)
        if state is None:
            state = self.leader_epoch_entries[leader_epoch] = RemoteLogLeaderEpochState()
        return state

    # -- reads ------------------------------------------------------------------------------------

    def remote_log_segment_metadata(self, leader_epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """The ``COPY_SEGMENT_FINISHED`` segment holding ``offset`` in ``leader_epoch``: the floor
        entry of the epoch's offset map, if ``offset`` is not past the epoch's end in it."""
        state = self.leader_epoch_entries.get(leader_epoch)
        if state is None:
            return None
        segment_id = state.floor_entry(offset)
        if segment_id is None:
            return None
        metadata = self.id_to_segment_metadata[segment_id]
        return None if offset > epoch_end_offset(metadata, leader_epoch) else metadata

    def highest_offset_for_epoch(self, leader_epoch: int) -> int | None:
        state = self.leader_epoch_entries.get(leader_epoch)
        return None if state is None else state.highest_log_offset

    def list_all_remote_log_segments(self) -> list[RemoteLogSegmentMetadata]:
        """Every segment not deleted, in any order (Kafka's iteration order is a hash map's)."""
        return list(self.id_to_segment_metadata.values())

    def list_remote_log_segments(self, leader_epoch: int) -> list[RemoteLogSegmentMetadata]:
        """The epoch's segments in states 0-2, by start offset."""
        state = self.leader_epoch_entries.get(leader_epoch)
        if state is None:
            return []
        result = []
        for segment_id in state.segment_ids():
            metadata = self.id_to_segment_metadata.get(segment_id)
            if metadata is None:
                raise RemoteResourceNotFoundError(f"No remote log segment metadata found for :{segment_id}")
            result.append(metadata)
        result.sort(key=lambda m: m.start_offset)
        return result

    def next_segment_with_txn_index(self, leader_epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """The first readable segment of ``leader_epoch`` ending at or after ``offset`` whose
        transaction index is not empty (``RemoteLogMetadataCache.nextSegmentWithTxnIndex``,
        KAFKA-16780)."""
        state = self.leader_epoch_entries.get(leader_epoch)
        if state is None:
            return None
        i = max(0, bisect.bisect_right(state.starts, offset) - 1)
        for start in state.starts[i:]:
            metadata = self.id_to_segment_metadata[state.offset_to_id[start]]
            if epoch_end_offset(metadata, leader_epoch) >= offset and not metadata.txn_idx_empty:
                return metadata
        return None

    # -- updates ----------------------------------------------------------------------------------

    def _check_transition(self, existing: RemoteLogSegmentState | None, target: RemoteLogSegmentState,
                          segment_id: RemoteLogSegmentId) -> bool:
        if RemoteLogSegmentState.is_valid_transition(existing, target):
            return True
        logger.error("Current state: %s can not be transitioned to target state: %s, segmentId: %s. "
                     "Dropping the event", existing and existing.name, target.name, segment_id)
        return False

    def add_copy_in_progress_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        """``addCopyInProgressSegment``: a new copy, unreferenced under each of its epochs."""
        if metadata.state is not _STARTED:
            raise InvalidRemoteLogMetadataError(
                f"Given remoteLogSegmentMetadata {metadata.remote_log_segment_id} should have state as "
                f"{_STARTED.name} but it contains state as: {metadata.state.name}")
        segment_id = metadata.remote_log_segment_id
        existing = self.id_to_segment_metadata.get(segment_id)
        if not self._check_transition(existing.state if existing else None, _STARTED, segment_id):
            return
        for epoch, _ in metadata.segment_leader_epochs:
            self._epoch(epoch).copy_segment_started(segment_id)
        self.id_to_segment_metadata[segment_id] = metadata

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """``updateRemoteLogSegmentMetadata``. An unknown segment raises
        ``RemoteResourceNotFoundError`` once the cache is initialized (dropped while it is
        being rebuilt); an invalid transition is dropped."""
        segment_id = update.remote_log_segment_id
        existing = self.id_to_segment_metadata.get(segment_id)
        if existing is None:
            if not self.initialized:
                logger.debug("Dropping the event %s: the metadata of the segment was already removed", update)
                return
            raise RemoteResourceNotFoundError(f"No remote log segment metadata found for :{segment_id}")
        if not self._check_transition(existing.state, update.state, segment_id):
            return
        if update.state is _STARTED:
            raise InvalidRemoteLogMetadataError(
                f"metadataUpdate of {segment_id} with state {_STARTED.name} can not be updated")
        metadata = existing.create_with_updates(update)
        if update.state is _FINISHED:
            for epoch, start in metadata.segment_leader_epochs:
                self._epoch(epoch).copy_segment_finished(start, segment_id, epoch_end_offset(metadata, epoch))
            self.id_to_segment_metadata[segment_id] = metadata
        elif update.state is _DELETE_STARTED:
            for epoch, start in metadata.segment_leader_epochs:
                self._epoch(epoch).delete_segment_started(start, segment_id)
            self.id_to_segment_metadata[segment_id] = metadata
        else:
            for epoch, _ in metadata.segment_leader_epochs:
                self._epoch(epoch).delete_segment_finished(segment_id)
            del self.id_to_segment_metadata[segment_id]

    def mark_initialized(self) -> None:
        self.initialized = True


class RemotePartitionMetadataStore:
    """``RemotePartitionMetadataStore``: a ``RemoteLogMetadataCache`` per followed user
    partition (``TopicIdPartition``: topic id *and* partition) and the partitions' deletion
    state. Events of partitions not followed are ignored (``ConsumerTask`` skips them)."""

    def __init__(self) -> None:
        self.caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        self.partition_delete_metadata: dict[TopicIdPartition, RemotePartitionDeleteMetadata] = {}

    def maybe_load_partition(self, tip: TopicIdPartition) -> None:
        self.caches.setdefault(tip, RemoteLogMetadataCache())

    def mark_initialized(self, tip: TopicIdPartition) -> None:
        self.caches[tip].mark_initialized()

    def is_initialized(self, tip: TopicIdPartition) -> bool:
        cache = self.caches.get(tip)
        return cache is not None and cache.initialized

    def clear_topic_partition(self, tip: TopicIdPartition) -> None:
        self.caches.pop(tip, None)

    def handle(self, event: RemoteLogMetadata) -> None:
        """Apply one decoded record (``RemotePartitionMetadataEventHandler.handleRemoteLogMetadata``)."""
        if isinstance(event, RemoteLogSegmentMetadata):
            cache = self.caches.get(event.topic_id_partition)
            if cache is not None:
                cache.add_copy_in_progress_segment(event)
        elif isinstance(event, RemoteLogSegmentMetadataUpdate):
            cache = self.caches.get(event.topic_id_partition)
            if cache is not None:
                try:
                    cache.update_remote_log_segment_metadata(event)
                except RemoteResourceNotFoundError as e:
                    logger.warning("Error occurred while updating the remote log segment: %s", e)
        elif isinstance(event, RemotePartitionDeleteMetadata):
            if event.topic_id_partition not in self.caches:
                return
            self.partition_delete_metadata[event.topic_id_partition] = event
            if event.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                # Kafka drops the partition's cache; one stays followed here, empty: its remote
                # data is gone, and later records (a re-created partition) fold into a new cache
                initialized = self.caches[event.topic_id_partition].initialized
                self.caches[event.topic_id_partition] = RemoteLogMetadataCache()
                self.caches[event.topic_id_partition].initialized = initialized
                del self.partition_delete_metadata[event.topic_id_partition]
        else:
            raise InvalidRemoteLogMetadataError(
                f"Remote log metadata of type {type(event).__name__} is not supported in the metadata topic "
                f"(RemotePartitionMetadataEventHandler)")

    def cache(self, tip: TopicIdPartition) -> RemoteLogMetadataCache:
        cache = self.caches.get(tip)
        if cache is None:
            raise RemoteResourceNotFoundError(f"No resource found for partition: {tip}")
        return cache

    def segments(self, tip: TopicIdPartition) -> Iterator[RemoteLogSegmentMetadata]:
        return iter(self.cache(tip).list_all_remote_log_segments())

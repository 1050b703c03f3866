"""Kafka's ``RemoteLogManager`` (KIP-405) for one process: per tiered partition, the copier
(``RLMCopyTask``), the remote expiration (``RLMExpirationTask``) and the highest offset in remote
storage that local retention waits for.

A partition is tiered when its topic has ``remote.storage.enable=true`` (``LogConfig`` refuses it
with another ``cleanup.policy`` than ``delete``) and is not an internal topic
(``UnifiedLog.isRemoteLogEnabled``). A log without a topic id gets a random one (written to its
``partition.metadata``): remote objects and metadata are keyed by it.

Copy (``copyLogSegmentsToRemote``): the rolled segments wholly below the last stable offset, from
the highest offset already copied + 1 (or the log start offset), one at a time in offset order.
Each copy is crash-ordered as Kafka orders it: ``COPY_SEGMENT_STARTED`` durable in the metadata
manager, then the ``RemoteStorageManager`` copy (``.log``, offset/time/transaction indexes, the
producer snapshot at the next segment's base, the leader-epoch checkpoint of every cached epoch
below it), then ``COPY_SEGMENT_FINISHED``. A copy that a failure (or SIGKILL) left in
``COPY_SEGMENT_STARTED``, and a deletion left in ``DELETE_SEGMENT_STARTED``, is an orphan: never
readable (only finished segments are), deleted from the store and marked
``DELETE_SEGMENT_FINISHED`` at the start of the next pass, and the segment copied again under a
new id. One process writes the metadata (the metadata manager holds its partitions' writer
locks), and this manager runs its passes one at a time, so an unfinished copy seen at the start of
a pass is never one in progress.

Expiration (``cleanupExpiredRemoteLogSegments``): finished remote segments, oldest first, go while
their largest timestamp is older than ``retention.ms``, or while the size of both tiers (remote
segments + local segments not yet copied, as Kafka counts it) exceeds ``retention.bytes`` by at
least the segment's size, or while they lie wholly below a log start offset that
``delete_records_before`` moved inside the local log; the first segment that stays ends the walk.
The log start offset moves past them first (``updateLogStartOffsetFromRemoteTier``: local
segments below it go too), then each is deleted: ``DELETE_SEGMENT_STARTED``, the store's delete,
``DELETE_SEGMENT_FINISHED``.

Disabling (``delete_remote_log_partition``, run by the ``LogManager`` when a topic's
``remote.storage.enable`` turns false with ``remote.log.delete.on.disable``): every segment of the
partition ``DELETE_SEGMENT_STARTED``, deleted, ``DELETE_SEGMENT_FINISHED``, as Kafka's
``deleteRemoteLogPartition`` does (Kafka 4 writes no ``RemotePartitionDeleteMetadata`` there).
With ``remote.log.copy.disable`` the copier skips the log and expiry goes on.

Kafka's leader-epoch lineage checks (``isRemoteSegmentWithinLeaderEpochs``) guard against copies
of a former leader; here one process is the only writer, so every finished segment is in the
lineage, and the local leader-epoch cache (truncated with the local log) is not consulted for
expiry. kafkalog's own appends carry no leader epoch: a segment without cached epochs is tiered
under epoch 0.

``Log.log_start_offset`` stays the local log's start (local retention moves it, as without
tiering); the earliest offset over both tiers is ``log_start_offset(log)`` here.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from ..checkpoint import TopicPartition, format_leader_epoch_checkpoint, random_topic_id
from ..common import wall_ms
from ..errors import KafkaLogError, RemoteStorageError, RetriableRemoteStorageError
from ..log import Log, LogSegment
from ..producer import write_snapshot
from .metadata import (RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
                       RemoteLogSegmentState, TopicIdPartition)
from .remote_log_manager_config import RemoteLogManagerConfig
from .remote_log_metadata_manager import RemoteLogMetadataManager, TopicBasedRemoteLogMetadataManager
from .remote_log_metadata_store import RemoteLogMetadataStore
from .storage_manager import LogSegmentData, PyArrowRemoteStorageManager, RemoteStorageManager, describe_segment
from .topic_partitioner import REMOTE_LOG_METADATA_TOPIC_NAME

logger = logging.getLogger(__name__)

RLM_COPY_TASK = "RLMCopyTask"
RLM_EXPIRATION_TASK = "RLMExpirationTask"
# Topic.isInternal, plus the two UnifiedLog.isRemoteLogEnabled names
_NOT_TIERED_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state",
                                REMOTE_LOG_METADATA_TOPIC_NAME, "__cluster_metadata"})
_STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
_DELETE_STARTED = RemoteLogSegmentState.DELETE_SEGMENT_STARTED
_DELETE_FINISHED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED


class Scheduler(Protocol):
    def schedule(self, name: str, fn: Callable[[], object], *, delay_ms: int = 0, period_ms: int = -1) -> Any:
        ...


@dataclass
class TierResult:
    """What one pass did to one partition."""

    topic: str
    partition: int
    segments_copied: int = 0
    bytes_copied: int = 0
    orphans_deleted: int = 0
    remote_segments_deleted: int = 0
    remote_bytes_deleted: int = 0
    highest_offset_in_remote_storage: int = -1
    log_start_offset: int = 0
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


Progress = Callable[[str, Log, RemoteLogSegmentMetadata], None]


def is_remote_log_enabled(log: Log) -> bool:
    """``UnifiedLog.isRemoteLogEnabled`` (the broker flag is the manager's existence)."""
    c = log.config
    return c.remote_storage_enable and not c.compact and log.topic not in _NOT_TIERED_TOPICS


class RemoteLogManager:
    """Tiering of the logs handed to it. Thread-safe: passes run one at a time."""

    def __init__(self, rsm: RemoteStorageManager, rlmm: RemoteLogMetadataManager, *, broker_id: int = 0,
                 custom_metadata_max_bytes: int = 128, task_interval_ms: int = 30000,
                 clock: Callable[[], int] = wall_ms) -> None:
        self.rsm, self.rlmm = rsm, rlmm
        if isinstance(rsm, PyArrowRemoteStorageManager) and isinstance(rlmm, TopicBasedRemoteLogMetadataManager) \
                and rlmm.mirror is None:
            # the metadata beside the segments too, for readers of the store alone
            rlmm.mirror = RemoteLogMetadataStore.for_storage_manager(rsm)
        self.broker_id = broker_id
        self.custom_metadata_max_bytes = custom_metadata_max_bytes
        self.task_interval_ms = task_interval_ms
        self.clock = clock
        self._lock = threading.RLock()
        self._highest: dict[TopicPartition, int] = {}
        self._closed = False

    @classmethod
    def from_config(cls, config: RemoteLogManagerConfig, log_dir: str | Path, *,
                    clock: Callable[[], int] = wall_ms) -> "RemoteLogManager":
        """The plugins configured from broker properties; the metadata topic lives in ``log_dir``."""
        if not config.remote_log_storage_system_enable:
            raise KafkaLogError("remote.log.storage.system.enable is false: there is no remote log manager")
        rsm = config.create_remote_storage_manager()
        rlmm = config.create_remote_log_metadata_manager(log_dir)
        return cls(rsm, rlmm, broker_id=config.broker_id,
                   custom_metadata_max_bytes=config.remote_log_metadata_custom_metadata_max_bytes,
                   task_interval_ms=config.remote_log_manager_task_interval_ms, clock=clock)

    # ------------------------------------------------------------------------------ partitions

    def topic_id_partition(self, log: Log) -> TopicIdPartition:
        if log.topic_id is None:
            log.assign_topic_id(random_topic_id())
            logger.info("Assigned topic id %s to %s for tiered storage", log.topic_id, log.dir)
        assert log.topic_id is not None
        return TopicIdPartition(log.topic_id, TopicPartition(log.topic, log.partition))

    def _lead(self, log: Log) -> TopicIdPartition:
        """The partition's id with its metadata loaded, as a new leader loads it
        (``onPartitionLeadershipChanges``) before a pass; the caller holds the lock."""
        self._check_open()
        tip = self.topic_id_partition(log)
        self.rlmm.on_partition_leadership_changes([tip], [])
        return tip

    def _segments(self, tip: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        return sorted(self.rlmm.list_remote_log_segments(tip), key=lambda m: (m.start_offset, m.end_offset))

    def remote_log_segments(self, log: Log) -> list[RemoteLogSegmentMetadata]:
        """The partition's finished (readable) remote segments, by start offset."""
        with self._lock:
            return [m for m in self._segments(self.topic_id_partition(log)) if m.state is _FINISHED]

    def highest_offset_in_remote_storage(self, log: Log) -> int:
        """The last offset copied (``UnifiedLog.highestOffsetInRemoteStorage``), -1 if none;
        also set on the log, where local retention reads it."""
        with self._lock:
            return self._refresh_highest(log, self.topic_id_partition(log))

    def log_start_offset(self, log: Log) -> int:
        """The earliest offset over both tiers (``UnifiedLog.logStartOffset``)."""
        remote = self.remote_log_segments(log)
        return min(remote[0].start_offset, log.log_start_offset) if remote else log.log_start_offset

    def _find_highest_remote_offset(self, log: Log, tip: TopicIdPartition) -> int:
        """``findHighestRemoteOffset``: the cached epochs from the latest back, the first one the
        metadata knows, capped at that epoch's end; epoch 0 stands for a log without epochs."""
        entries = log.leader_epoch_cache.entries
        epochs = [(e.epoch, entries[i + 1].start_offset - 1 if i + 1 < len(entries) else None)
                  for i, e in enumerate(entries)][::-1]
        if not any(epoch == 0 for epoch, _ in epochs):
            epochs.append((0, entries[0].start_offset - 1 if entries else None))
        for epoch, end in epochs:
            highest = self.rlmm.highest_offset_for_epoch(tip, epoch)
            if highest is not None:
                return highest if end is None else min(highest, end)
        return -1

    def _refresh_highest(self, log: Log, tip: TopicIdPartition) -> int:
        highest = self._find_highest_remote_offset(log, tip)
        self._update_highest(log, highest)
        return highest

    def _update_highest(self, log: Log, offset: int) -> None:
        """``UnifiedLog.updateHighestOffsetInRemoteStorage``: never backwards."""
        key = TopicPartition(log.topic, log.partition)
        offset = max(offset, self._highest.get(key, -1))
        self._highest[key] = offset
        # an attribute of the log's own, read by its retention (storage_core.log.retention)
        log.highest_offset_in_remote_storage = offset

    # ------------------------------------------------------------------------------ orphans

    def _delete_remote_segment(self, md: RemoteLogSegmentMetadata, reason: str) -> None:
        """``deleteRemoteLogSegment``: ``DELETE_SEGMENT_STARTED``, the store's delete,
        ``DELETE_SEGMENT_FINISHED``."""
        sid = md.remote_log_segment_id
        if md.state is not _DELETE_STARTED:
            self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
                sid, self.clock(), md.custom_metadata, _DELETE_STARTED, self.broker_id))
        self.rsm.delete_log_segment_data(md)
        self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            sid, self.clock(), md.custom_metadata, _DELETE_FINISHED, self.broker_id))
        logger.info("Deleted remote %s (%s)", describe_segment(md), reason)

    def _delete_unfinished(self, tip: TopicIdPartition) -> int:
        """Orphans of a killed copy (``COPY_SEGMENT_STARTED``) or deletion
        (``DELETE_SEGMENT_STARTED``): deleted from the store and marked deleted."""
        n = 0
        for md in self._segments(tip):
            if md.state in (_STARTED, _DELETE_STARTED):
                self._delete_remote_segment(md, "unfinished copy" if md.state is _STARTED else "unfinished deletion")
                n += 1
        return n

    def delete_remote_log_partition(self, log: Log) -> int:
        """``stopPartitions`` with ``deleteRemoteLog`` (``deleteRemoteLogPartition``), as Kafka
        runs it when a topic's ``remote.storage.enable`` turns false with
        ``remote.log.delete.on.disable``: every listed segment of the partition marked
        ``DELETE_SEGMENT_STARTED``, then its objects deleted, then all marked
        ``DELETE_SEGMENT_FINISHED``; the highest offset in remote storage is forgotten (local
        retention no longer waits for it). Returns how many segments went."""
        with self._lock:
            tip = self._lead(log)
            segments = self._segments(tip)
            for md in segments:
                if md.state is not _DELETE_STARTED:
                    self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
                        md.remote_log_segment_id, self.clock(), md.custom_metadata, _DELETE_STARTED, self.broker_id))
            for md in segments:
                self.rsm.delete_log_segment_data(md)
            for md in segments:
                self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
                    md.remote_log_segment_id, self.clock(), md.custom_metadata, _DELETE_FINISHED, self.broker_id))
            mirror = getattr(self.rlmm, "mirror", None)
            if mirror is not None:
                mirror.delete_partition(tip)
            self._highest.pop(TopicPartition(log.topic, log.partition), None)
            log.highest_offset_in_remote_storage = -1
            logger.info("Deleted the %d remote segments of %s (remote storage disabled)", len(segments), log.dir)
            return len(segments)

    # ------------------------------------------------------------------------------ copy

    def copy_log_segments_to_remote(self, log: Log, progress: Progress | None = None) -> TierResult:
        """One ``RLMCopyTask`` pass over ``log``; raises on the first failed copy (what was
        copied before it stays copied)."""
        result = TierResult(log.topic, log.partition)
        if not is_remote_log_enabled(log) or log.config.remote_log_copy_disable:
            return result
        with self._lock:
            tip = self._lead(log)
            result.orphans_deleted = self._delete_unfinished(tip)
            copied = self._refresh_highest(log, tip)
            lso = log.last_stable_offset
            if lso > 0 and copied < lso:
                from_offset = max(copied + 1, log.log_start_offset)
                segments = log.segments
                for seg, nxt in zip(segments, segments[1:]):
                    if nxt.base_offset <= from_offset:
                        continue                          # wholly copied already
                    if nxt.base_offset > lso:
                        break                             # not wholly below the last stable offset
                    md = self._copy_log_segment(log, tip, seg, nxt.base_offset, progress)
                    result.segments_copied += 1
                    result.bytes_copied += md.segment_size_in_bytes
            result.highest_offset_in_remote_storage = self._highest.get(TopicPartition(log.topic, log.partition), -1)
            result.log_start_offset = log.log_start_offset
            return result

    def _segment_leader_epochs(self, log: Log, base: int, next_base: int) -> tuple[tuple[int, int], ...]:
        """``LeaderEpochFileCache.epochEntriesInRange(base, next_base)``, the first clamped to
        ``base``; epoch 0 from ``base`` for a log without epochs."""
        entries = log.leader_epoch_cache.entries
        epochs: dict[int, int] = {}
        for i, e in enumerate(entries):
            if e.start_offset >= next_base:
                break
            if i + 1 < len(entries) and entries[i + 1].start_offset <= base:
                continue
            epochs[e.epoch] = max(e.start_offset, base)
        return tuple(sorted(epochs.items())) or ((0, base),)

    def _copy_log_segment(self, log: Log, tip: TopicIdPartition, seg: LogSegment, next_base: int,
                          progress: Progress | None) -> RemoteLogSegmentMetadata:
        """``copyLogSegment``: STARTED, the copy, FINISHED (in that order, each durable)."""
        md = RemoteLogSegmentMetadata(
            RemoteLogSegmentId.generate_new(tip), seg.base_offset, next_base - 1, seg.largest_timestamp,
            self.broker_id, self.clock(), seg.size, self._segment_leader_epochs(log, seg.base_offset, next_base),
            txn_idx_empty=seg.txn_index.is_empty())
        epochs = [e for e in log.leader_epoch_cache.entries if e.start_offset < next_base]
        with tempfile.TemporaryDirectory(prefix="kafkalog-rlm-") as tmp:
            snapshot = log.producer_state.fetch_snapshot(next_base)
            if snapshot is None or not snapshot.exists():
                # pruned after its recovery-point checkpoint: Kafka's copy needs one, the state at
                # the segment's end is not kept any more, so an empty snapshot stands in
                logger.info("No producer snapshot at %d in %s: copying an empty one with %s", next_base, log.dir,
                            describe_segment(md))
                snapshot = write_snapshot(tmp, next_base, [], sync=False)
            txn = seg.txn_index.path
            data = LogSegmentData(seg.log_path, seg.offset_index.path, seg.time_index.path,
                                  txn if txn.exists() else None, snapshot,
                                  format_leader_epoch_checkpoint(epochs).encode())
            for path in (data.offset_index, data.time_index):
                if not path.exists():
                    raise KafkaLogError(f"Cannot copy {seg.log_path} to remote storage: its index {path} is missing")
            self.rlmm.add_remote_log_segment_metadata(md)
            if progress is not None:
                progress("copying", log, md)
            try:
                custom = self.rsm.copy_log_segment_data(md, data)
            except RetriableRemoteStorageError:
                # Kafka: the copy stays COPY_SEGMENT_STARTED; the next pass deletes it and copies again
                raise
            except Exception as e:
                try:
                    self._delete_remote_segment(md, f"failed copy: {e}")
                except RemoteStorageError as cleanup:
                    logger.warning("Failed copy of %s could not be deleted now (next pass): %s", describe_segment(md),
                                   cleanup)
                raise
        if custom is not None and len(custom) > self.custom_metadata_max_bytes:
            self._delete_remote_segment(md, "custom metadata too large")
            raise RemoteStorageError(f"Custom metadata of {len(custom)} bytes for {describe_segment(md)} exceeds "
                                     f"remote.log.metadata.custom.metadata.max.bytes {self.custom_metadata_max_bytes}")
        self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            md.remote_log_segment_id, self.clock(), custom, _FINISHED, self.broker_id))
        self._update_highest(log, md.end_offset)
        if progress is not None:
            progress("copied", log, md)
        logger.info("Copied %s from %s", describe_segment(md), seg.log_path)
        return md

    # ------------------------------------------------------------------------------ expiry

    def cleanup_expired_remote_log_segments(self, log: Log, now_ms: int | None = None,
                                            progress: Progress | None = None) -> TierResult:
        """One ``RLMExpirationTask`` pass over ``log``."""
        result = TierResult(log.topic, log.partition)
        if not is_remote_log_enabled(log):
            return result
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            tip = self._lead(log)
            result.orphans_deleted = self._delete_unfinished(tip)
            highest = self._refresh_highest(log, tip)
            finished = [m for m in self._segments(tip) if m.state is _FINISHED]
            doomed = self._expired(log, finished, highest, now)
            if doomed:
                new_start = max(m.end_offset for m in doomed) + 1
                # updateLogStartOffsetFromRemoteTier, before deleting: local segments below go too
                if new_start > log.log_start_offset:
                    log.delete_records_before(min(new_start, log.log_end_offset))
                for md in doomed:
                    if progress is not None:
                        progress("deleting", log, md)
                    self._delete_remote_segment(md, "retention")
                    result.remote_segments_deleted += 1
                    result.remote_bytes_deleted += md.segment_size_in_bytes
            result.highest_offset_in_remote_storage = highest
            result.log_start_offset = log.log_start_offset
            return result

    @staticmethod
    def _expired(log: Log, finished: list[RemoteLogSegmentMetadata], highest: int,
                 now: int) -> list[RemoteLogSegmentMetadata]:
        c = log.config
        segments = log.segments
        # a log start offset inside the local log was moved there by delete_records_before
        # (local retention leaves it at a segment's base): everything below it goes
        start = log.log_start_offset if segments and log.log_start_offset > segments[0].base_offset else -1
        breach = None
        if c.retention_bytes > -1:
            # RetentionSizeData: local segments not yet copied + remote segments
            local_only = sum(s.size for s in segments if s.base_offset > highest)
            breach = local_only + sum(m.segment_size_in_bytes for m in finished) - c.retention_bytes
        doomed = []
        for md in finished:
            by_start = md.end_offset < start
            by_time = c.retention_ms > -1 and md.max_timestamp_ms < now - c.retention_ms
            by_size = breach is not None and breach - md.segment_size_in_bytes >= 0
            if not (by_start or by_time or by_size):
                break
            if breach is not None:
                breach = max(0, breach - md.segment_size_in_bytes)
            doomed.append(md)
        return doomed

    # ------------------------------------------------------------------------------ passes

    def run_once(self, logs: Iterable[Log], now_ms: int | None = None, *, copy: bool = True, expire: bool = True,
                 progress: Progress | None = None) -> list[TierResult]:
        """A copy pass then an expiration pass over every tiered log; a partition that fails is
        reported in its result (and logged) and the others go on."""
        results = []
        for log in logs:
            if not is_remote_log_enabled(log):
                if expire and self._disable_pending(log):
                    results.append(self._finish_disable(log))
                continue
            result = TierResult(log.topic, log.partition)
            try:
                if copy:
                    c = self.copy_log_segments_to_remote(log, progress)
                    result.segments_copied, result.bytes_copied = c.segments_copied, c.bytes_copied
                    result.orphans_deleted += c.orphans_deleted
                if expire:
                    e = self.cleanup_expired_remote_log_segments(log, now_ms, progress)
                    result.remote_segments_deleted = e.remote_segments_deleted
                    result.remote_bytes_deleted = e.remote_bytes_deleted
                    result.orphans_deleted += e.orphans_deleted
            except (OSError, KafkaLogError) as e:
                logger.error("Tiering of %s failed: %s", log.dir, e)
                result.error = str(e)
            result.highest_offset_in_remote_storage = self._highest.get(TopicPartition(log.topic, log.partition), -1)
            result.log_start_offset = log.log_start_offset
            results.append(result)
        return results

    def _disable_pending(self, log: Log) -> bool:
        """A log whose ``remote.storage.enable`` is false with ``remote.log.delete.on.disable``
        that still has remote segments: the change was made without a manager acting on it (the
        configuration file edited by ``kafkalog config``, or a deletion that failed). Kafka acts
        only on the change itself (``TopicConfigHandler``); a pass finishing it here is ours."""
        c = log.config
        if c.remote_storage_enable or not c.remote_log_delete_on_disable or log.topic_id is None \
                or log.topic in _NOT_TIERED_TOPICS:
            return False
        with self._lock:
            tip = self._lead(log)
            return any(md.state is not _DELETE_FINISHED for md in self._segments(tip))

    def _finish_disable(self, log: Log) -> TierResult:
        result = TierResult(log.topic, log.partition)
        try:
            result.remote_segments_deleted = self.delete_remote_log_partition(log)
        except (OSError, KafkaLogError) as e:
            logger.error("Deleting the remote data of %s (remote storage disabled) failed: %s", log.dir, e)
            result.error = str(e)
        result.log_start_offset = log.log_start_offset
        return result

    def schedule(self, scheduler: Scheduler, logs: Callable[[], Iterable[Log]]) -> None:
        """``RLMCopyTask`` and ``RLMExpirationTask`` every ``remote.log.manager.task.interval.ms``."""
        interval = self.task_interval_ms
        scheduler.schedule(RLM_COPY_TASK, lambda: self.run_once(logs(), expire=False), delay_ms=interval,
                           period_ms=interval)
        scheduler.schedule(RLM_EXPIRATION_TASK, lambda: self.run_once(logs(), copy=False), delay_ms=interval,
                           period_ms=interval)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaLogError("The remote log manager is closed")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self.rsm.close()
            finally:
                self.rlmm.close()

    def __enter__(self) -> "RemoteLogManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""LogLoader: what opening a partition does before the first append or read (Kafka's
``LogLoader``): the temporary files of an interrupted clean, split or delete resolved
(``.deleted`` and ``.cleaned`` removed, ``.swap`` completed), orphaned indexes removed, the
segments opened, every segment after the recovery point validated (an invalid tail truncated,
an overflowed segment split), the log end offset set in the ``LocalLog``, the log start
offset and recovery point returned (``LoadedLogOffsets``), and the producer state rebuilt
(``UnifiedLog.rebuildProducerState``). As Kafka's, ``LogLoader`` is handed the parts it loads
(the ``LocalLog``, the ``ProducerStateManager``, the ``LeaderEpochCache``) and knows nothing
of ``Log``. A reader (``Log.open(read_only=True)``) writes nothing: it takes the segments
through ``LogView`` and replays producer state in memory on first use.

Also the partition's files around the load: its entries in the data directory's
recovery-point and log-start-offset checkpoints (read here, written at close by
``write_partition_checkpoints``, dropped at delete), and the topic id checked against
``partition.metadata`` before the load (``UnifiedLog.initializeTopicId``).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..checkpoint import (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, CorruptCheckpointError,
                          LeaderEpochCache, OffsetCheckpointFile, PartitionMetadataFile, TopicPartition,
                          parse_topic_partition_dir, topic_id_to_str, update_offset_checkpoint)
from ..common import LONG_MAX
from ..errors import InconsistentTopicIdError, KafkaLogError, OffsetOverflowError
from ..format.log_input_stream import BatchInfo
from ..index import OffsetIndex, TimeIndex, index_file_oversized
from ..producer import ProducerStateEntry, ProducerStateManager, read_snapshot
from .files import (CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SEGMENT_FILE_SUFFIXES,
                    SWAP_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, is_offset_named,
                    is_segment_file, offset_from_filename)
from .local_log import LocalLog
from .segment import LogSegment
from .view import LogView, log_start_offset

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedLogOffsets:
    """What ``LogLoader.load`` found (Kafka's ``LoadedLogOffsets``); the log end offset is the
    ``LocalLog``'s. ``producer_state_deferred``: a reader's producer state is left to be loaded
    on first use (``load_producer_state_read_only``)."""

    log_start_offset: int
    recovery_point: int
    producer_state_deferred: bool = False


class LogLoader:
    """Loads a partition into ``local`` (a ``LocalLog`` just made, its writer lock taken unless
    ``read_only``): fills its segments and log end offset, recovers them, rebuilds
    ``producer_state`` and ``leader_epoch_cache`` from the batches, and returns the other
    offsets (``LoadedLogOffsets``). As Kafka's ``LogLoader``, it is given the parts of the
    log it loads and knows nothing of ``Log`` (Kafka's ``UnifiedLog``)."""

    def __init__(self, local: LocalLog, producer_state: ProducerStateManager,
                 leader_epoch_cache: LeaderEpochCache, *, read_only: bool,
                 had_clean_shutdown: bool = False, force_full_recovery: bool = False) -> None:
        self.local = local
        self.dir = local.dir
        self.config = local.config
        self.clock = local.clock
        self.producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache
        self.read_only = read_only
        self.had_clean_shutdown = had_clean_shutdown
        self.force_full_recovery = force_full_recovery

    def _read_checkpoint(self, name: str) -> int:
        """One checkpoint, read on its own as LogManager.loadLogs does: an unreadable file means
        0 for it alone (recover everything / no moved log start), never for the other."""
        try:
            return OffsetCheckpointFile(self.dir.parent / name).read().get(
                parse_topic_partition_dir(self.dir.name), 0)
        except (OSError, KafkaLogError) as e:
            logger.warning("Ignoring unreadable %s in %s: %s", name, self.dir.parent, e)
            return 0

    def load(self) -> LoadedLogOffsets:
        """``LogLoader.load``, for one partition."""
        local, segments, psm = self.local, self.local.segments, self.producer_state
        read_only, config = self.read_only, self.config
        if not read_only:
            self.remove_temp_files_and_complete_swaps()
        recovery_point = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        start_checkpoint = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        if read_only:
            for seg in LogView(self.dir, config).open_segments():
                segments.add(seg)
        else:
            # named by a 20-digit offset, as the read-only view lists them: another file ending in
            # .log ("notes.log", "0000000000000000000².log") is not a segment (int() refused it)
            logs = sorted(p for p in self.dir.iterdir() if is_segment_file(p.name))
            live = {offset_from_filename(p.name) for p in logs}
            for p in self.dir.iterdir():
                if p.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)) and \
                        is_offset_named(p.name) and offset_from_filename(p.name) not in live:
                    logger.info("Deleting orphaned index file %s", p)
                    p.unlink()
            for p in logs:
                recovery_point = min(recovery_point, self._open_segment(p))
        if self.had_clean_shutdown and segments:
            recovery_point = LONG_MAX
        if self.force_full_recovery:
            recovery_point = 0
        if not read_only:
            self.recover_from(recovery_point, start_checkpoint)
        if not segments:
            if read_only:
                local.log_end_offset = start_checkpoint
                psm.update_map_end_offset(start_checkpoint)
                return LoadedLogOffsets(start_checkpoint, start_checkpoint)
            segments.add(LogSegment.open(self.dir, start_checkpoint, config))
        local.log_end_offset = local.active_segment.read_next_offset()
        if local.log_end_offset < start_checkpoint and read_only:
            # a writer's load deletes every segment here (below): a reader sees what it would,
            # an empty log at the checkpointed start
            logger.warning("The log start offset %d of %s is past its log end offset %d: reading "
                           "it as empty, as a writer's load leaves it", start_checkpoint, self.dir,
                           local.log_end_offset)
            for seg in segments.clear():
                seg.close(final_entries=False)
            local.log_end_offset = start_checkpoint
            psm.update_map_end_offset(start_checkpoint)
            return LoadedLogOffsets(start_checkpoint, start_checkpoint)
        if local.log_end_offset < start_checkpoint and not read_only:
            # everything below the log start offset was deleted: start afresh there (LogLoader:
            # "Deleting all segments because logEndOffset is smaller than logStartOffset")
            local.truncate_fully_and_start_at(start_checkpoint)
            psm.truncate_fully_and_start_at(start_checkpoint)
        start = log_start_offset(start_checkpoint, local.first_segment.base_offset)
        loaded = LoadedLogOffsets(start, min(max(recovery_point, start), local.log_end_offset),
                                  producer_state_deferred=read_only)
        if not read_only:
            active = local.active_segment
            active.offset_index.resize(config.segment_index_bytes)
            active.time_index.resize(config.segment_index_bytes)
            # LogLoader: stray snapshots removed (this also rescans the snapshots the segment
            # recoveries wrote), then the state rebuilt from the latest snapshot up to the LEO
            psm.remove_stray_snapshots(segments.base_offsets())
            self.rebuild_producer_state(start)
        # else a reader needs producer state only for read_committed (the last stable offset):
        # replaying a log without snapshots can take long, so it waits until asked for
        return loaded

    def _open_segment(self, p: Path) -> int:
        """Open the writer's segment of the ``.log`` file ``p``; returns the offset recovery
        must start from for it (its base when an index is missing or oversized, else
        ``LONG_MAX``)."""
        config = self.config
        base = offset_from_filename(p.name)
        recover_from = LONG_MAX
        if not p.with_suffix(INDEX_SUFFIX).exists():
            # Kafka's sanity check: a missing offset index means recovering the segment;
            # recovering it with the rest keeps the consequences of what it truncates
            logger.info("The index of %s is missing: recovering from it", p)
            recover_from = base
        if any(index_file_oversized(p.with_suffix(suffix), config.segment_index_bytes, kind.ENTRY_SIZE)
               for suffix, kind in ((INDEX_SUFFIX, OffsetIndex), (TIME_INDEX_SUFFIX, TimeIndex))):
            # longer than segment.index.bytes allows: the open empties it (AbstractIndex), the
            # recovery from this segment rebuilds it
            logger.info("An index of %s is oversized: recovering from it", p)
            recover_from = base
        time_index_missing = not p.with_suffix(TIME_INDEX_SUFFIX).exists()
        seg = LogSegment.open(self.dir, base, config, writable=True, preallocate=False)
        if time_index_missing:
            # LogSegment.sanityCheck(timeIndexFileNewlyCreated): an empty index, not one of
            # preallocated zeros that would read as entries (a recovery rebuilds it)
            seg.time_index.resize(0)
        self.local.segments.add(seg)
        return recover_from

    def remove_temp_files_and_complete_swaps(self) -> None:
        """``removeTempFilesAndCollectSwapFiles`` and the swap completion of ``LogLoader``."""
        config = self.config
        cleaned: list[Path] = []
        swaps: list[Path] = []
        for p in list(self.dir.iterdir()):
            # Kafka removes any *.deleted; only its own, offset-named, are removed here: a
            # stranger's "notes.deleted" (or a folder so named) is left alone as any other
            if p.name.endswith(DELETED_SUFFIX) and is_offset_named(p.name):
                p.unlink()
            elif p.name.endswith(CLEANED_SUFFIX) and is_offset_named(p.name):
                cleaned.append(p)
            elif p.name.endswith(SWAP_SUFFIX) and is_offset_named(p.name):
                swaps.append(p)
        min_cleaned = min((offset_from_filename(p.name) for p in cleaned), default=None)
        for p in cleaned:
            p.unlink()
        kept = []
        for p in swaps:
            if min_cleaned is not None and offset_from_filename(p.name) >= min_cleaned:
                p.unlink()                 # an incomplete split (KAFKA-6264)
            else:
                kept.append(p)
        swap_logs = [p for p in kept if p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
        if swap_logs:
            bases = [offset_from_filename(p.name) for p in swap_logs]
            ends = []
            for p in swap_logs:
                seg = LogSegment.open(self.dir, offset_from_filename(p.name), config,
                                      file_suffix=SWAP_SUFFIX, preallocate=False)
                ends.append(seg.read_next_offset())
                seg.close()
            lo, hi = min(bases), max(ends)
            replaced: set[int] = set()
            below = [offset_from_filename(p.name) for p in self.dir.iterdir()
                     if is_segment_file(p.name) and offset_from_filename(p.name) < lo]
            if below:
                # a degenerate split's pieces start above the segment they replace
                seg = LogSegment.open(self.dir, max(below), config, preallocate=False)
                try:
                    if seg.read_next_offset() > lo:
                        replaced.add(seg.base_offset)
                finally:
                    seg.close(final_entries=False)
            for p in list(self.dir.iterdir()):
                if p.name.endswith(SWAP_SUFFIX) or not is_offset_named(p.name):
                    continue
                off = offset_from_filename(p.name)
                if lo <= off < hi or (off in replaced and p.name.endswith(SEGMENT_FILE_SUFFIXES)):
                    p.unlink()           # the segments the cleaner or a split replaced
        for p in self.dir.iterdir():     # kept, and the index files opening them created
            if p.name.endswith(SWAP_SUFFIX) and is_offset_named(p.name):
                p.rename(p.with_name(p.name[:-len(SWAP_SUFFIX)]))

    def recover_from(self, recovery_point: int, log_start_offset: int = 0) -> None:
        """``LogLoader.recoverLog``: validate every segment from the one holding the recovery
        point; the first invalid batch truncates the log there and drops every later segment."""
        segments = self.local.segments
        seg = segments.floor_or_first(recovery_point)
        while seg is not None:
            end = None if seg.indexes_preallocated() else seg.clean_end()
            nxt = segments.higher_segment(seg.base_offset)
            if end is not None and end <= recovery_point:
                seg = nxt
                continue                    # closed cleanly and intact: nothing to recover
            try:
                truncated = self.recover_segment(seg, log_start_offset,
                                                 None if nxt is None else nxt.base_offset)
            except OffsetOverflowError as e:
                logger.warning("%s; splitting the segment", e)
                segments.remove(seg.base_offset)
                pieces = self.local.split_segment_files(seg)
                for piece in pieces:
                    segments.add(piece)
                seg = pieces[0]
                continue                    # recover the pieces, starting with the first
            if truncated > 0:
                for later in segments.remove_from(seg.base_offset + 1):
                    logger.warning("Deleting %s after the truncation of %s", later.log_path, seg.log_path)
                    later.delete()
                break
            seg = nxt

    def recover_segment(self, seg: LogSegment, log_start_offset: int,
                        next_base_offset: int | None = None) -> int:
        """``LogLoader.recoverSegment``: a fresh producer-state manager rebuilt up to the
        segment's base, fed every valid batch (which rebuilds the segment's txn index), then
        snapshotted at the segment's end."""
        tmp = ProducerStateManager(self.dir, producer_id_expiration_ms=self.config.producer_id_expiration_ms)
        tmp.rebuild_producer_state(log_start_offset=log_start_offset, last_offset=seg.base_offset,
                                   now_ms=self.clock(), segment_base_offsets=self.local.segments.base_offsets(),
                                   read_segment=self.read_segment_batches)

        def on_batch(buf: bytes, b: BatchInfo) -> None:
            self._note_epoch(b)
            tmp.load_batch(buf, b, on_aborted_txn=seg.update_txn_index)

        truncated = seg.recover(on_batch=on_batch, next_base_offset=next_base_offset)
        tmp.take_snapshot()
        return truncated

    def _note_epoch(self, batch: BatchInfo) -> None:
        h = batch.header
        cache = self.leader_epoch_cache
        if h is not None and h.partition_leader_epoch >= 0:
            latest = cache.latest_epoch
            if latest is None or h.partition_leader_epoch > latest:
                cache.assign(h.partition_leader_epoch, h.base_offset)

    # ---------------------------------------------------------------------------- producer state

    def read_segment_batches(self, base: int, start: int) -> Iterator[tuple[bytes, BatchInfo]]:
        """``(bytes, info)`` batches of the segment at ``base`` from (at least) the one holding
        ``start``, as ``ProducerStateManager.rebuild_producer_state`` reads them: headers, and the
        bytes of control batches only (``_with_control_bytes``)."""
        seg = self.local.segments.floor_or_first(base)
        assert seg is not None, "a loaded log always has a segment"
        pos = seg.offset_index.lookup(start).position if start > seg.base_offset else 0
        return _with_control_bytes(seg, seg.batches(pos))

    def _read_log_batches(self, start: int) -> Iterator[tuple[bytes, BatchInfo]]:
        for seg in self.local.segments.from_floor(start):
            yield from self.read_segment_batches(seg.base_offset, start)

    def rebuild_producer_state(self, log_start_offset: int) -> None:
        """``UnifiedLog.rebuildProducerState`` up to the log end offset. Never the "clean
        shutdown without snapshots" shortcut: kafkalog's clean close always writes a snapshot
        at the LEO, so a missing one means the state must come from the log."""
        end = self.local.log_end_offset
        self.producer_state.rebuild_producer_state(
            log_start_offset=log_start_offset, last_offset=end,
            now_ms=self.clock(), segment_base_offsets=self.local.segments.base_offsets(),
            read_segment=self.read_segment_batches)
        self.producer_state.on_high_watermark_updated(end)

    def load_producer_state_read_only(self, log_start_offset: int) -> None:
        """A reader writes nothing: load the latest readable snapshot in range (no deletion of
        the others) and replay the log after it in memory."""
        psm = self.producer_state
        start, end = log_start_offset, self.local.log_end_offset
        from_offset = start
        for snap in reversed(psm.snapshot_offsets):
            path = psm.fetch_snapshot(snap)
            if not start < snap <= end or path is None:
                continue
            try:
                entries = read_snapshot(path)
            except (KafkaLogError, OSError) as e:
                logger.warning("Ignoring unreadable producer snapshot at %d in %s: %s", snap, self.dir, e)
                continue
            now = self.clock()
            for snapshot_entry in entries:
                entry = ProducerStateEntry.from_snapshot_entry(snapshot_entry)
                if entry.current_txn_first_offset is not None or \
                        now - entry.last_timestamp < psm.producer_id_expiration_ms:
                    psm.load_producer_entry(entry)
            from_offset = snap
            break
        psm.update_map_end_offset(from_offset)
        psm.rebuild(self._read_log_batches(from_offset), from_offset, end)
        psm.on_high_watermark_updated(end)      # no replicas: every marker is "replicated"


# ---------------------------------------------------------------------------- checkpoints

def _with_control_bytes(seg: LogSegment, batches: Iterator[BatchInfo]) -> Iterator[tuple[bytes, BatchInfo]]:
    """``(bytes, info)`` as the producer state replays them (``UnifiedLog.loadProducersFromRecords``
    reads batch headers, and a control batch's marker record): a control batch read whole,
    any other one its header alone (no bytes; ``info`` at its file position)."""
    for b in batches:
        if b.header is None or not b.header.is_control:
            yield b"", b
        elif (got := seg.read_batch(b)) is not None:
            yield got
        else:
            return


def write_partition_checkpoints(directory: Path, recovery_point: int, log_start_offset: int,
                                first_base_offset: int) -> None:
    """The entries of the partition ``directory`` in its data directory's recovery-point and
    log-start-offset checkpoints (the ones ``LogLoader`` reads), through
    ``update_offset_checkpoint``: other processes may write other partitions' entries, so it
    takes the data directory's lock (after the log's own). An unreadable file is rewritten as
    if empty. As in Kafka, only a log whose start moved past its first segment is listed in
    the log-start-offset checkpoint."""
    write_partitions_checkpoints(directory.parent, [(directory, recovery_point, log_start_offset,
                                                     first_base_offset)])


def write_partitions_checkpoints(data_dir: Path, partitions: list[tuple[Path, int, int, int]]) -> None:
    """``write_partition_checkpoints`` for several partitions of ``data_dir`` at once, each
    ``(directory, recovery point, log start offset, first segment's base offset)``: each file is
    read and rewritten once for all of them, as Kafka's LogManager checkpoints a directory's logs
    in one write, where one update per partition reads and rewrites every entry each time."""
    keys = [parse_topic_partition_dir(d.name) for d, _, _, _ in partitions]
    recovery: list[int | None] = [rp for _, rp, _, _ in partitions]
    starts: list[int | None] = [start if start > first else None for _, _, start, first in partitions]
    for name, values in ((RECOVERY_POINT_CHECKPOINT, recovery), (LOG_START_OFFSET_CHECKPOINT, starts)):
        def update(entries: dict[TopicPartition, int], values: list[int | None] = values) -> dict[TopicPartition, int]:
            for key, value in zip(keys, values):
                if value is None:
                    entries.pop(key, None)
                else:
                    entries[key] = value
            return entries

        update_offset_checkpoint(data_dir, name, update, reset_unreadable=True)


def remove_partition_checkpoints(directory: Path) -> None:
    """Drop the partition ``directory``'s entries from its data directory's checkpoints (the
    log is deleted); an unreadable file is left as it is."""
    key = parse_topic_partition_dir(directory.name)

    def without_key(entries: dict[TopicPartition, int]) -> dict[TopicPartition, int] | None:
        return entries if entries.pop(key, None) is not None else None

    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
        try:
            update_offset_checkpoint(directory.parent, name, without_key)
        except (OSError, KafkaLogError):
            continue


# ---------------------------------------------------------------------------- topic id

def initialize_topic_id(metadata: PartitionMetadataFile, topic_id: uuid.UUID | None, *,
                        read_only: bool) -> uuid.UUID | None:
    """``UnifiedLog.initializeTopicId``: returns the log's topic id. An id on disk wins and must
    equal ``topic_id`` if one is given; with none on disk a given id is recorded and flushed.
    Kafka schedules that flush and repeats it before every append (so the file precedes any
    data); it is done here at once, before the load, so no append has to check. Run before the
    load: a refused open changes nothing. A reader never writes the file, and reads past a
    damaged one (the records do not depend on it) with a warning and no id; a writer is
    refused, as Kafka takes such a log's directory offline."""
    directory = metadata.path.parent
    try:
        on_disk = metadata.read() if metadata.exists() else None
    except FileNotFoundError:        # a reader racing a deletion: as if never written
        on_disk = None
    except CorruptCheckpointError as e:
        if not read_only:
            raise
        logger.warning("Reading %s without its topic id: %s", directory, e)
        on_disk = None
    if on_disk is not None:
        if topic_id is not None and topic_id != on_disk:
            raise inconsistent_topic_id(directory, topic_id, on_disk)
        return on_disk
    if topic_id is not None and not read_only:
        metadata.record(topic_id)
        metadata.maybe_flush()      # .tmp, fsync, rename, fsync dir
    return topic_id


def inconsistent_topic_id(directory: Path, given: uuid.UUID, recorded: uuid.UUID) -> InconsistentTopicIdError:
    """The error of a topic id that is not the one ``directory``'s ``partition.metadata`` holds."""
    tp = parse_topic_partition_dir(directory.name)
    return InconsistentTopicIdError(
        f"Tried to assign topic ID {topic_id_to_str(given)} to log for topic partition "
        f"{tp.topic}-{tp.partition} in {directory}, but log already contained topic ID "
        f"{topic_id_to_str(recorded)}")

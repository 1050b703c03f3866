"""The remote tier of a topic, for the source (issue 20): topics whose older segments, or all of
them, are in an object store (tiered storage, KIP-405) that every executor reaches.

Driver side (``RemoteTier``): the partitions, their offsets and readable segments come from the
remote log metadata kept in the store (``storage_core.remote.RemoteLogMetadataStoreReader``:
only ``COPY_SEGMENT_FINISHED`` segments); the start byte of a range from the segment's remote
offset index and timestamps from its time index, both through a ``RemoteIndexCache`` in a
driver-local temporary folder; ``read_committed``'s aborted transactions from the remote
``.txnindex`` files (then the local log's, as ``RemoteLogManager.collectAbortedTransactions``
goes on into it). Each range below the local tier becomes ``KafkaLogRemoteInputPartition``s: the
objects, byte positions and offsets a task needs, and the store's settings. No record passes
through the driver.

Executor side (``read_remote_partition``): the task opens the store itself and reads its byte
range in ranged reads of ``remoteReadBytes`` (the next one in flight, on a small thread pool,
while the last is decoded: two buffers a task, bounded memory), decoding them with the same code
as local reads (``reader``'s decoding and filtering). A segment deleted by remote retention
since planning is data loss, as a deleted local segment is (``failOnDataLoss``).

The store's settings (``rsm.config.*``, credentials included) travel in the input partition
inside ``StoreSettings``, whose ``repr`` hides them: they are never logged nor shown.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import weakref
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generator, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from storage_core.checkpoint import TopicPartition as StorageTopicPartition
from storage_core.checkpoint import topic_id_from_str, topic_id_to_str
from storage_core.common import settle_reused_worker
from storage_core.errors import CorruptRecordError, KafkaLogError, RemoteStorageError
from storage_core.format import decode_run
from storage_core.format.log_input_stream import max_batch_read_size
from storage_core.index import AbortedTxn
from storage_core.log import aborted_mask
from storage_core.remote import (PyArrowRemoteStorageManager, RemoteIndexCache, RemoteLogMetadataStoreReader,
                                 RemoteLogSegmentFileType, RemoteLogSegmentMetadata, RemotePartitionState,
                                 TopicIdPartition, open_store, partition_dir_name)

from . import catalog
from .offsets import OffsetRange, TopicPartition
from .options import Assign, StoreSettings, Strategy, Subscribe
from .reader import (KafkaLogInputPartition, _data_lost, _visible, arrow_schema, read_partition,
                     to_spark_batches)

logger = logging.getLogger(__name__)

CHUNK = 32 << 20           # remoteReadBytes' default: one ranged read (aligned to its size)
READ_AHEAD = 1             # ranged reads in flight while a task decodes the last one
HEADROOM = 1 << 20         # room before a read's bytes for the batch the read before cut
_SEARCH_CHUNK = 256 << 10  # the first read of a timestamp search


@dataclass(frozen=True)
class RemoteSegmentRead:
    """One remote segment's part of a task's range: the ``.log`` object, the byte to start at
    (from the offset index), the object's size and the segment's offsets."""

    object_path: str
    position: int
    size: int
    start_offset: int
    end_offset: int


@dataclass(frozen=True)
class KafkaLogRemoteInputPartition(KafkaLogInputPartition):
    """``[start, end)`` of a partition read from the store: ``path`` is the store's name (for
    messages), ``reads`` the segments holding the range, in offset order, ``aborted`` the
    aborted transactions over it (``read_committed``), ``read_bytes`` the size of one ranged
    read (``remoteReadBytes``)."""

    reads: tuple[RemoteSegmentRead, ...] = ()
    aborted: tuple[AbortedTxn, ...] = ()
    read_bytes: int = CHUNK
    store: StoreSettings = field(default_factory=lambda: StoreSettings(()), repr=False)


class RemoteTier:
    """The driver's view of a store (``configs``: the storage manager's settings).
    ``remote_only``: no local data directory (``path`` is the store)."""

    def __init__(self, settings: StoreSettings, *, remote_only: bool) -> None:
        self.settings = settings
        self.remote_only = remote_only
        self.metadata = RemoteLogMetadataStoreReader(settings.configs())
        self.name = settings.name
        self._rsm: PyArrowRemoteStorageManager | None = None
        self._cache: RemoteIndexCache | None = None
        self._cache_dir: str | None = None
        self._tips: dict[TopicPartition, TopicIdPartition] = {}
        self._states: dict[TopicIdPartition, RemotePartitionState] = {}

    # -------------------------------------------------------------------------- partitions

    def assigned(self, strategy: Strategy) -> dict[TopicPartition, Path]:
        """The partitions ``strategy`` covers among those in the store (remote-only topics); the
        paths only label them. A partition found under two topic ids (a topic deleted and
        recreated) is the one whose events are newest."""
        found: dict[TopicPartition, list[TopicIdPartition]] = {}
        for tip in self.metadata.partitions():
            found.setdefault((tip.topic, tip.partition), []).append(tip)
        picked: dict[TopicPartition, Path] = {}
        for tp, tips in found.items():
            if isinstance(strategy, Assign):
                if tp not in set(strategy.partitions):
                    continue
            elif isinstance(strategy, Subscribe):
                if tp[0] not in strategy.topics:
                    continue
            elif tp[0].startswith("__") or not strategy.matches(tp[0]):
                continue
            tip = tips[0]
            if len(tips) > 1:
                live = [t for t in tips if not self.refresh(t).deleted]
                tip = max(live or tips, key=lambda t: max((m.event_timestamp_ms for m in self._states[t].segments),
                                                          default=-1))
            self._tips[tp] = tip
            picked[tp] = Path(f"{self.name}/{partition_dir_name(tip)}")
        return dict(sorted(picked.items()))

    def topics(self) -> set[str]:
        """The topics of which the store holds a partition."""
        return {tip.topic for tip in self.metadata.partitions()}

    def tip(self, tp: TopicPartition, topic_id: str | None) -> TopicIdPartition | None:
        if topic_id is not None:
            tip = TopicIdPartition(topic_id_from_str(topic_id), StorageTopicPartition(tp[0], tp[1]))
            self._tips[tp] = tip
        return self._tips.get(tp)

    def refresh(self, tip: TopicIdPartition) -> RemotePartitionState:
        state = self._states[tip] = self.metadata.state(tip)
        return state

    def segments(self, tp: TopicPartition) -> tuple[RemoteLogSegmentMetadata, ...]:
        tip = self._tips.get(tp)
        if tip is None:
            return ()
        state = self._states.get(tip) or self.refresh(tip)
        return state.segments

    def info(self, tp: TopicPartition, local: catalog.PartitionInfo | None) -> catalog.PartitionInfo:
        """The partition's offsets over both tiers: ``local`` (None for a remote-only topic)
        extended down to the first remote segment; a remote-only partition ends after its
        highest remote offset. Offsets below ``tiered_below`` are read from the store."""
        tip = self.tip(tp, local.topic_id if local is not None else None)
        if tip is None:
            assert local is not None
            return local
        state = self.refresh(tip)
        first = state.segments[0].start_offset if state.segments else None
        if local is None:
            latest = state.highest_offset + 1
            earliest = first if first is not None else latest
            return catalog.PartitionInfo(earliest, latest, (), topic_id_to_str(tip.topic_id), tiered_below=latest)
        if first is None or first >= local.earliest:
            return local
        return catalog.PartitionInfo(first, local.latest, local.segments, local.topic_id, tiered_below=local.earliest,
                                     timestamp_offsets=local.timestamp_offsets)

    # -------------------------------------------------------------------------- indexes

    def _index_cache(self) -> RemoteIndexCache:
        if self._cache is None:
            self._rsm = PyArrowRemoteStorageManager(self.settings.configs())
            self._cache_dir = tempfile.mkdtemp(prefix="kafkalog-remote-index-")
            self._cache = RemoteIndexCache(self._rsm, self._cache_dir)
            weakref.finalize(self, shutil.rmtree, self._cache_dir, True)
        return self._cache

    def object_path(self, md: RemoteLogSegmentMetadata) -> str:
        self._index_cache()
        assert self._rsm is not None
        return self._rsm.object_path(md, RemoteLogSegmentFileType.SEGMENT)

    def offset_for_timestamp(self, tp: TopicPartition, timestamp: int, below: int) -> int | None:
        """The first offset below ``below`` whose timestamp is at or after ``timestamp``: the
        first remote segment reaching it (``maxTimestampMs``), through its time index, then its
        records from that position (``UnifiedLog.fetchOffsetByTimestamp``'s remote part)."""
        fs = None
        for md in self.segments(tp):
            if md.start_offset >= below or md.max_timestamp_ms < timestamp:
                continue
            position = self._index_cache().lookup_timestamp(md, timestamp, md.start_offset)
            if fs is None:
                fs = open_store(self.settings.configs())[0]
            found = _first_at_or_after(fs, self.object_path(md), md.segment_size_in_bytes, position, timestamp)
            if found is not None and found < below:
                return found
        return None

    def aborted(self, tp: TopicPartition, start: int, end: int, local_dir: Path | None) -> tuple[AbortedTxn, ...]:
        """``collectAbortedTransactions`` over ``[start, end)``: the remote transaction indexes
        from the segment holding ``start`` on, then the local log's, until one says complete."""
        found: list[AbortedTxn] = []
        for md in self.segments(tp):
            if md.end_offset < start or md.txn_idx_empty:
                continue
            txns, complete = self._index_cache().get_index_entry(md).txn_index.collect_aborted_txns(start, end)
            found.extend(txns)
            if complete:
                return tuple(found)
        if local_dir is not None and not self.remote_only:
            with catalog.open_partition(local_dir) as log:
                for seg in log.segments:
                    txns, complete = seg.txn_index.collect_aborted_txns(start, end)
                    found.extend(txns)
                    if complete:
                        break
        return tuple(found)

    # -------------------------------------------------------------------------- planning

    def input_partitions(self, base: KafkaLogInputPartition, piece: OffsetRange, local_dir: Path | None,
                         committed: bool, read_bytes: int = CHUNK) -> list[KafkaLogInputPartition]:
        """``piece`` (resolved offsets, all below the local tier) as one input partition reading
        the remote segments that hold it in ranged reads of ``read_bytes``; ``base`` carries the
        options."""
        reads = []
        offset = piece.start
        for md in self.segments(piece.topic_partition):
            if md.end_offset < offset or md.start_offset >= piece.end:
                continue
            position = self._index_cache().lookup_offset(md, offset) if offset > md.start_offset else 0
            reads.append(RemoteSegmentRead(self.object_path(md), position, md.segment_size_in_bytes,
                                           md.start_offset, md.end_offset))
            offset = md.end_offset + 1
            if offset >= piece.end:
                break
        aborted = self.aborted(piece.topic_partition, piece.start, piece.end, local_dir) if committed else ()
        return [KafkaLogRemoteInputPartition(
            topic=piece.topic, partition=piece.partition, path=self.name, start=piece.start, end=piece.end,
            segments=(), earliest=base.earliest, isolation=base.isolation, include_headers=base.include_headers,
            fail_on_data_loss=base.fail_on_data_loss, max_bytes=base.max_bytes, topic_id=base.topic_id,
            reads=tuple(reads), aborted=aborted, store=self.settings, read_bytes=read_bytes)]

    def __getstate__(self) -> dict:
        # the reader may be pickled to the tasks: only the settings travel, caches are rebuilt
        return {"settings": self.settings, "remote_only": self.remote_only}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["settings"], remote_only=state["remote_only"])  # type: ignore[misc]

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        if self._cache_dir is not None:
            shutil.rmtree(self._cache_dir, ignore_errors=True)
            self._cache_dir = None


def _first_at_or_after(fs: pafs.FileSystem, path: str, size: int, position: int, timestamp: int) -> int | None:
    """The first record at or after ``timestamp`` from ``position`` of ``path`` (control records
    count, as in ``LogSegment.findOffsetByTimestamp``: a local read answers the same)."""
    with fs.open_input_file(path) as f:
        pending, step = b"", _SEARCH_CHUNK
        while position < size:
            data = pending + f.read_at(min(step, size - position), position)
            position += len(data) - len(pending)
            run = decode_run(data, max_batch_size=max_batch_read_size())
            table = run.table
            if table.num_rows:
                stamps = table.column("timestamp").cast(pa.int64()).to_numpy()
                hit = np.flatnonzero(stamps >= timestamp)
                if hit.size:
                    return int(table.column("offset")[int(hit[0])].as_py())
            pending = data[run.next_position:]
            if run.batches == 0:
                step = min(CHUNK, step * 2)
    return None


# ------------------------------------------------------------------------------ executors

def read_any_partition(p: KafkaLogInputPartition) -> Iterator[pa.RecordBatch]:
    """A task's read: from the store (``KafkaLogRemoteInputPartition``) or the local tier; at its
    end the kernels it loaded settle with the rest (``settle_reused_worker``)."""
    try:
        if isinstance(p, KafkaLogRemoteInputPartition):
            yield from read_remote_partition(p)
        else:
            yield from read_partition(p)
    finally:
        settle_reused_worker()


def read_remote_partition(p: KafkaLogRemoteInputPartition, chunk: int | None = None,
                          headroom: int = HEADROOM) -> Iterator[pa.RecordBatch]:
    """The task's read of ``p`` from the store, in ranged reads of ``chunk`` bytes (default
    ``p.read_bytes``); ``headroom``: room kept before each for the batch the read before cut
    (a longer one is joined by a copy)."""
    schema = arrow_schema(p.include_headers)
    for table in _remote_tables(p, chunk or p.read_bytes, headroom):
        if table.num_rows:
            yield from to_spark_batches(table, p.topic, p.partition, schema, p.include_headers)


def _remote_tables(p: KafkaLogRemoteInputPartition, chunk: int, headroom: int) -> Iterator[pa.Table]:
    if p.start >= p.end:
        return
    fs, _, _ = open_store(p.store.configs())
    buffers = _take_buffers(READ_AHEAD + 1, headroom + chunk)
    try:
        with ThreadPoolExecutor(max_workers=READ_AHEAD + 1, thread_name_prefix="kafkalog-remote-read") as pool:
            yield from _range_tables(p, fs, pool, buffers, chunk, headroom)
    finally:
        _give_buffers(buffers)


def _range_tables(p: KafkaLogRemoteInputPartition, fs: pafs.FileSystem, pool: ThreadPoolExecutor,
                  buffers: list[np.ndarray], chunk: int, headroom: int) -> Iterator[pa.Table]:
    offset = p.start
    aborted = list(p.aborted)
    for read in p.reads:
        if offset < read.start_offset:     # below the first segment, or between two: gone
            offset = _data_lost(p, offset, min(read.start_offset, p.end), "no remote segment holds it")
        if offset >= p.end:
            return
        tables = _segment_tables(fs, pool, buffers, read, p, chunk, headroom)
        try:
            for raw in tables:
                table = _visible(raw, offset, p.end)
                if aborted and table.num_rows:
                    table = table.filter(pa.array(~aborted_mask(table, aborted)))
                yield table
                offset = max(offset, int(raw.column("offset")[-1].as_py()) + 1)
                if offset >= p.end:
                    return
        except FileNotFoundError:
            offset = _data_lost(p, offset, min(read.end_offset + 1, p.end), "its remote segment was deleted")
            continue
        finally:
            tables.close()                 # its reads in flight done before the buffers are reused
        offset = max(offset, min(read.end_offset + 1, p.end))
    if offset < p.end:
        _data_lost(p, offset, p.end, "the store ends before it")


_buffers_lock = threading.Lock()
_free_buffers: list[np.ndarray] = []


def _take_buffers(n: int, size: int) -> list[np.ndarray]:
    """``n`` receive buffers of ``size`` bytes: those the last task in this process gave back
    (a Spark Python worker runs task after task), new ones for the rest. Memory written for the
    first time costs a page fault per page (the kernel zeroes it): reused, a buffer pays that
    once per process rather than once per task. A worker keeps one task's buffers between tasks."""
    with _buffers_lock:
        kept = [b for b in _free_buffers if len(b) == size][:n]
        _free_buffers.clear()
    return kept + [np.empty(size, np.uint8) for _ in range(n - len(kept))]


def _give_buffers(buffers: list[np.ndarray]) -> None:
    with _buffers_lock:
        _free_buffers[:] = buffers


def _open_object(fs: pafs.FileSystem, read: RemoteSegmentRead, p: KafkaLogRemoteInputPartition) -> pa.NativeFile:
    try:
        return fs.open_input_file(read.object_path)
    except OSError as e:
        if isinstance(e, FileNotFoundError) or "NoSuchKey" in str(e) or "does not exist" in str(e):
            raise FileNotFoundError(read.object_path) from e
        raise RemoteStorageError(f"Opening object {read.object_path} in the store for {p.topic}-{p.partition}: "
                                 f"{e}") from e


def _read_into(f: pa.NativeFile, into: np.ndarray, position: int) -> int:
    # straight into the task's buffer (the S3 client writes the response there): no allocation
    f.seek(position)
    return f.readinto(into)


def _segment_tables(fs: pafs.FileSystem, pool: ThreadPoolExecutor, buffers: list[np.ndarray],
                    read: RemoteSegmentRead, p: KafkaLogRemoteInputPartition, chunk: int,
                    headroom: int) -> Generator[pa.Table, None, None]:
    """The decoded batches of ``read``'s object from its position, chunk by chunk: a ranged read
    lands in one of ``buffers`` after ``headroom`` bytes, the next ones are issued into the others
    while it is decoded, and the batch a chunk's end cuts is copied in front of the next chunk
    and decoded with it (each batch decoded once, in one table with its neighbours). Raw storage
    rows (control records included)."""
    what = f"object {read.object_path} in the store"
    # a slot is a buffer and the handle its reads use (a handle's position is its own); it is
    # free again once its chunk is decoded and the cut batch copied out
    handles: list[pa.NativeFile | None] = [None] * len(buffers)
    handles[0] = _open_object(fs, read, p)
    free = list(range(len(buffers) - 1, -1, -1))
    inflight: deque[tuple[Future[int], int, int]] = deque()
    position = issued = read.position
    ahead_end = _read_ahead_end(read, p)
    limit = max_batch_read_size()
    pending = np.empty(0, np.uint8)
    try:
        while issued < read.size or inflight:
            while free and issued < read.size and (issued < ahead_end or not inflight):
                n = min(chunk - issued % chunk, read.size - issued)   # aligned: the store serves them cheaper
                if issued < ahead_end:
                    n = min(n, ahead_end - issued)
                slot = free.pop()
                if handles[slot] is None:
                    try:
                        handles[slot] = _open_object(fs, read, p)
                    except FileNotFoundError as e:      # deleted since the first open
                        raise RemoteStorageError(f"Opening {what} for {p.topic}-{p.partition}: {e}") from e
                inflight.append((pool.submit(_read_into, handles[slot], buffers[slot][headroom:headroom + n],
                                             issued), slot, n))
                issued += n
            done, slot, n = inflight.popleft()
            try:
                got = done.result()
            except OSError as e:
                raise RemoteStorageError(f"Reading {what} for {p.topic}-{p.partition}: {e}") from e
            if got != n:
                raise KafkaLogError(f"{what} ends at byte {position + got}, before the {read.size} bytes its "
                                    f"metadata gives: a truncated or replaced object")
            buf, cut = buffers[slot], len(pending)
            if cut <= headroom:
                buf[headroom - cut:headroom] = pending
                data = buf[headroom - cut:headroom + n]
            else:                                       # a batch longer than the headroom
                data = np.concatenate((pending, buf[headroom:headroom + n]))
            start = position - cut
            position += n
            used = yield from _decode_chunk(data, start, p, what, limit)
            pending = data[used:].copy()
            free.append(slot)
        if len(pending):
            raise KafkaLogError(f"{what} ends inside a batch at byte {position - len(pending)} (its size is "
                                f"{read.size} bytes): a truncated or replaced object")
    finally:
        for fut, _, _ in inflight:
            fut.cancel()
        for fut, _, _ in inflight:
            if not fut.cancelled():
                fut.exception()        # wait: a read still running writes into its buffer
        for h in handles:
            if h is not None:
                h.close()


def _read_ahead_end(read: RemoteSegmentRead, p: KafkaLogRemoteInputPartition) -> int:
    """Where reads of ``read``'s object stop going ahead: the object's end, or, when the range
    ends inside it (a micro-batch, a split range), twice the bytes up to the range's end as its
    bytes per offset estimate them (plus 64 KiB). Past it, a read is issued only once the last
    is decoded and the range goes on: a task does not read the rest of a segment it stops in."""
    if p.end > read.end_offset:
        return read.size
    first = max(p.start, read.start_offset)
    estimate = (p.end - first) * read.size // (read.end_offset - read.start_offset + 1)
    return min(read.size, read.position + 2 * estimate + (64 << 10))


def _decode_chunk(data: np.ndarray, start: int, p: KafkaLogRemoteInputPartition, what: str,
                  limit: int) -> Generator[pa.Table, None, int]:
    """The complete batches of ``data`` (the object's bytes from ``start``), decoded about
    ``max_bytes`` at a time, as a local fetch reads (``decode_run`` CRC-checks every batch up
    to its ``end``: a whole chunk at each call would check the bytes past its ``max_decoded``
    stop again at the next); returns how many bytes they took. The tables copy what they keep
    (keys, values, headers): nothing refers to ``data`` once decoded."""
    used = 0
    while used < len(data):
        rest = data[used:]
        window = min(len(rest), p.max_bytes)
        try:
            run = decode_run(rest, end=window, max_decoded=p.max_bytes, check_order=True, max_batch_size=limit)
            if run.batches == 0 and window < len(rest):     # a batch longer than the window
                run = decode_run(rest, max_decoded=p.max_bytes, check_order=True, max_batch_size=limit)
        except CorruptRecordError as e:
            raise e.located(source=what, base_position=start + used) from e.__cause__
        if run.batches == 0:
            break
        if run.table.num_rows:
            yield run.table
        used += run.next_position
    return used

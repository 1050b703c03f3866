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
range with ranged reads issued ahead (``READ_AHEAD`` chunks in flight on a small thread pool,
bounded memory), decoding them with the same code as local reads (``reader``'s decoding and
filtering). A segment deleted by remote retention since planning is data loss, as a deleted
local segment is (``failOnDataLoss``).

The store's settings (``rsm.config.*``, credentials included) travel in the input partition
inside ``StoreSettings``, whose ``repr`` hides them: they are never logged nor shown.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import weakref
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from storage_core.checkpoint import TopicPartition as StorageTopicPartition
from storage_core.checkpoint import topic_id_from_str, topic_id_to_str
from storage_core.errors import CorruptRecordError, KafkaLogError, RemoteStorageError
from storage_core.format import decode_run
from storage_core.format.batch_header import LOG_OVERHEAD, BatchField, read_field
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

CHUNK = 8 << 20            # one ranged read (aligned to its size)
READ_AHEAD = 4             # ranged reads in flight per task
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
    aborted transactions over it (``read_committed``)."""

    reads: tuple[RemoteSegmentRead, ...] = ()
    aborted: tuple[AbortedTxn, ...] = ()
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
        return catalog.PartitionInfo(first, local.latest, local.segments, local.topic_id, tiered_below=local.earliest)

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
                         committed: bool) -> list[KafkaLogInputPartition]:
        """``piece`` (resolved offsets, all below the local tier) as one input partition reading
        the remote segments that hold it; ``base`` carries the options."""
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
            reads=tuple(reads), aborted=aborted, store=self.settings)]

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
    """A task's read: from the store (``KafkaLogRemoteInputPartition``) or the local tier."""
    if isinstance(p, KafkaLogRemoteInputPartition):
        return read_remote_partition(p)
    return read_partition(p)


def read_remote_partition(p: KafkaLogRemoteInputPartition, chunk: int | None = None) -> Iterator[pa.RecordBatch]:
    """The task's read of ``p`` from the store, in ranged reads of ``chunk`` bytes (default
    ``CHUNK``, at least the partition's ``max_bytes``)."""
    schema = arrow_schema(p.include_headers)
    for table in _remote_tables(p, chunk or max(CHUNK, p.max_bytes)):
        if table.num_rows:
            yield from to_spark_batches(table, p.topic, p.partition, schema, p.include_headers)


def _remote_tables(p: KafkaLogRemoteInputPartition, chunk: int) -> Iterator[pa.Table]:
    offset = p.start
    if p.start >= p.end:
        return
    fs, _, _ = open_store(p.store.configs())
    aborted = list(p.aborted)
    with ThreadPoolExecutor(max_workers=READ_AHEAD, thread_name_prefix="kafkalog-remote-read") as pool:
        for read in p.reads:
            if offset < read.start_offset:     # below the first segment, or between two: gone
                offset = _data_lost(p, offset, min(read.start_offset, p.end), "no remote segment holds it")
            if offset >= p.end:
                return
            try:
                for raw in _segment_tables(fs, pool, read, p, chunk):
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
            offset = max(offset, min(read.end_offset + 1, p.end))
    if offset < p.end:
        _data_lost(p, offset, p.end, "the store ends before it")


def _rest_of_batch(pending: bytes | memoryview, data: bytes | memoryview, limit: int) -> int | None:
    """How many bytes of ``data`` complete the batch that ``pending`` begins; None when its
    header claims an impossible size (the whole-buffer decode then names the problem)."""
    if len(pending) < LOG_OVERHEAD:
        head = bytes(pending) + bytes(memoryview(data)[:LOG_OVERHEAD - len(pending)])
        if len(head) < LOG_OVERHEAD:
            return None
    else:
        head = bytes(memoryview(pending)[:LOG_OVERHEAD])
    size = int(read_field(head, [0], BatchField.LENGTH)[0]) + LOG_OVERHEAD
    if size <= len(pending) or size > limit:
        return None
    return size - len(pending)


def _read_buffer(f: pa.NativeFile, n: int, position: int) -> pa.Buffer:
    f.seek(position)
    return f.read_buffer(n)


def _segment_tables(fs: pafs.FileSystem, pool: ThreadPoolExecutor, read: RemoteSegmentRead,
                    p: KafkaLogRemoteInputPartition, chunk: int) -> Iterator[pa.Table]:
    """The decoded batches of ``read``'s object from its position, chunk by chunk: the next
    ranged reads are issued ahead while a chunk is decoded; a batch cut by a chunk's end is
    completed by the next one. Raw storage rows (control records included)."""
    what = f"object {read.object_path} in the store"
    try:
        f = fs.open_input_file(read.object_path)
    except OSError as e:
        if isinstance(e, FileNotFoundError) or "NoSuchKey" in str(e) or "does not exist" in str(e):
            raise FileNotFoundError(read.object_path) from e
        raise RemoteStorageError(f"Opening {what} for {p.topic}-{p.partition}: {e}") from e
    inflight: deque[Future[pa.Buffer]] = deque()
    position = read.position
    issued = position
    limit = max_batch_read_size()
    # one handle per read in flight, each read as a seek and read_buffer: an Arrow buffer, not
    # the copy into bytes that read_at makes (a handle's position is its own, so one at a time)
    handles = [f]
    issued_count = 0
    try:
        pending: bytes | memoryview = b""
        while issued < read.size or inflight:
            while len(inflight) < READ_AHEAD and issued < read.size:
                n = min(chunk - issued % chunk, read.size - issued)   # aligned: the store serves them cheaper
                slot = issued_count % READ_AHEAD
                if slot == len(handles):
                    try:
                        handles.append(fs.open_input_file(read.object_path))
                    except OSError as e:
                        raise RemoteStorageError(f"Opening {what} for {p.topic}-{p.partition}: {e}") from e
                inflight.append(pool.submit(_read_buffer, handles[slot], n, issued))
                issued += n
                issued_count += 1
            try:
                data = memoryview(inflight.popleft().result())
            except OSError as e:
                raise RemoteStorageError(f"Reading {what} for {p.topic}-{p.partition}: {e}") from e
            start = position - len(pending)
            position += len(data)
            buf: bytes | memoryview = data
            if pending:
                # the batch cut by the last chunk's end, completed from this chunk's front: only
                # that batch is copied, the rest of the chunk is decoded where it lies
                need = _rest_of_batch(pending, data, limit)
                if need is None or need > len(data):
                    buf = bytes(pending) + data            # a batch longer than a chunk (or a bad header)
                else:
                    joined = bytes(pending) + memoryview(data)[:need]
                    try:
                        run = decode_run(joined, max_decoded=p.max_bytes, check_order=True, max_batch_size=limit)
                    except CorruptRecordError as e:
                        raise e.located(source=what, base_position=start) from e.__cause__
                    if run.table.num_rows:
                        yield run.table
                    buf = memoryview(data)[need:]
                    start += len(joined)
            while True:
                # a window of about max_bytes at a time, as a local fetch reads: decode_run scans
                # (and CRC-checks) every batch up to its end, so a whole chunk at each call would
                # check the bytes past the max_decoded stop again at the next call
                window = min(len(buf), p.max_bytes)
                try:
                    run = decode_run(buf, end=window, max_decoded=p.max_bytes, check_order=True,
                                     max_batch_size=limit)
                    if run.batches == 0 and window < len(buf):     # a batch longer than the window
                        run = decode_run(buf, max_decoded=p.max_bytes, check_order=True, max_batch_size=limit)
                except CorruptRecordError as e:
                    raise e.located(source=what, base_position=start) from e.__cause__
                if run.batches == 0:
                    break
                if run.table.num_rows:
                    yield run.table
                buf = memoryview(buf)[run.next_position:]
                start += run.next_position
                if len(buf) == 0:
                    break
            pending = buf
        if pending:
            raise KafkaLogError(f"{what} ends inside a batch at byte {position - len(pending)} (its size is "
                                f"{read.size} bytes): a truncated or replaced object")
    finally:
        for fut in inflight:
            fut.cancel()
        for fut in inflight:
            if not fut.cancelled():
                fut.exception()        # wait: a read still running uses its handle
        for h in handles:
            h.close()

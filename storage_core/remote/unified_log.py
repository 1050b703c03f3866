"""One partition's log across both tiers, as Kafka's ``UnifiedLog`` serves it with tiered storage:
offsets at or above the local log start offset (``localLogStartOffset``) are the local ``Log``'s;
offsets in ``[logStartOffset, localLogStartOffset)`` are read from the remote tier
(``RemoteLogManager.read``, ``RemoteLogReader``): the segment holding the offset from the
``RemoteLogMetadataManager`` (by leader epoch and offset, else from the listing), the start
position from the ``RemoteIndexCache``, the bytes by ranged reads of the ``RemoteStorageManager``.

Why a wrapper in ``remote`` rather than a hook in ``Log``: ``log`` may not import ``remote``
(the layering), and ``Log`` stays the local log it is (Kafka's ``LocalLog`` plus what
``UnifiedLog`` does locally); what spans both tiers lives here, beside the RLMM, RSM and index
cache it needs. A caller (the CLI, the Spark source) that reads a tiered partition opens this.

Remote reads return whole batches of one remote segment (as Kafka's remote fetch does), decoded
by the same code as local reads (``decode_run``) and filtered the same way (control records,
``read_committed``'s aborted transactions from the remote ``.txnindex`` files through the index
cache, skipping segments whose metadata says ``txnIdxEmpty``, then the local ones; the last
stable offset bounds ``read_committed``). A random read costs one ranged read (two when its
first batch is larger than ``max_bytes``); a sequential sweep keeps the bytes past the last
whole batch and issues the next ranged reads ahead, in parallel on the process's reader threads
(shared by every log, as a broker's ``remote.log.reader.threads``), at most ``read_ahead``
chunks per sweep (bounded memory). The chunks read ahead are whole multiples of
the chunk size in the object (whatever offset the sweep began at: the store serves the same
aligned ranges), several fetches long, so that most fetches lie in one chunk and decode a slice
of it without a copy; only a fetch that straddles two chunks joins its bytes. The chunks land in
kept buffers, reused (``_Buffers``, one pool for the process, so that what is kept between sweeps
is bounded however many logs are open): a buffer goes back once the sweep has moved past its
chunk and its read is done.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from dataclasses import dataclass, field
from types import TracebackType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptRecordError, InvalidConfigError, OffsetOutOfRangeError, RemoteStorageError
from ..format import decode_run, empty_table
from ..format.batch_header import LOG_OVERHEAD, BatchField
from ..format.log_input_stream import default_max_decompressed
from ..index import AbortedTxn
from ..log import (EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, FetchResult, Log, TimestampAndOffset, aborted_mask,
                   is_read_committed, rows_in_range)
from .metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentState, TopicIdPartition
from .remote_index_cache import RemoteIndexCache
from .remote_log_metadata_manager import RemoteLogMetadataManager
from .storage_manager import RemoteStorageManager, describe_segment

logger = logging.getLogger(__name__)

MIN_CHUNK = 256 << 10
MAX_CHUNK = 8 << 20
FETCHES_PER_CHUNK = 4           # a chunk read ahead holds this many fetches of max_bytes
DEFAULT_READ_AHEAD = 8
REMOTE_LOG_READER_THREADS = 10  # Kafka's remote.log.reader.threads default

# [start, end) of a segment's .log: its bytes, or the ranged read that brings them
_Piece = tuple[int, int, "Future[memoryview] | bytes"]


class _Buffers:
    """The chunk buffers reads ahead land in, kept and reused: a new ``bytes`` per read is memory
    the allocator hands back to the system once freed (chunks of megabytes), so the client
    faults in every page of every chunk again (about a tenth of a sweep's CPU).

    One pool for every ``UnifiedLog`` of the process (``_BUFFERS``), so that the memory kept
    between sweeps is bounded however many logs are open: a buffer is its read's until the read is
    done and its sweep past it (a sweep's reads ahead are bounded by ``read_ahead``); the buffers
    no read holds are kept up to the largest need of an open log (``(read_ahead + 2) x chunk``),
    and let go when the last log closes.
    Thread-safe (reads take, sweeps give back, logs open and close)."""

    def __init__(self) -> None:
        self._free: list[bytearray] = []
        self._held = 0                          # bytes in _free
        self._needs: list[int] = []             # of each open log
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Bytes kept that no read holds."""
        return self._held

    @property
    def limit(self) -> int:
        return max(self._needs, default=0)

    def open(self, need: int) -> None:
        with self._lock:
            self._needs.append(need)

    def close(self, need: int) -> None:
        with self._lock:
            self._needs.remove(need)
            while self._free and self._held > self.limit:
                self._held -= len(self._free.pop(0))

    def take(self, n: int, size: int) -> memoryview:
        """``n`` bytes of a kept buffer, or of a new one of ``size`` (>= ``n``) bytes."""
        with self._lock:
            while self._free:
                buf = self._free.pop()
                self._held -= len(buf)
                if len(buf) >= n:
                    return memoryview(buf)[:n]
        return memoryview(bytearray(max(n, size)))[:n]

    def give(self, view: memoryview) -> None:
        with self._lock:
            buf = view.obj
            assert isinstance(buf, bytearray)
            if self._held + len(buf) <= self.limit and not any(b is buf for b in self._free):
                self._free.append(buf)
                self._held += len(buf)

    def recycle(self, read: "Future[memoryview]") -> None:
        """Give the buffer of ``read`` back once it is done (a read still running writes into
        it; one cancelled before it began never took one)."""
        def done(f: "Future[memoryview]") -> None:
            if not f.cancelled() and f.exception() is None:
                self.give(f.result())
        read.add_done_callback(done)


_BUFFERS = _Buffers()

_READERS: ThreadPoolExecutor | None = None
_READERS_LOCK = threading.Lock()


def _forget_readers() -> None:
    """In a forked child: the parent's reader threads do not exist here, and a pool that counts
    them would never start one (its reads would wait forever); the child makes its own. The
    locks a parent's thread may have held at the fork are made anew."""
    global _READERS, _READERS_LOCK
    _READERS, _READERS_LOCK = None, threading.Lock()
    _BUFFERS._lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_readers)


def _shared_readers() -> ThreadPoolExecutor:
    """The process's remote-log reader threads, ``REMOTE_LOG_READER_THREADS`` of them, made on
    first use and shared by every ``UnifiedLog`` opened without ``threads`` (Kafka's
    ``RemoteLogReader`` pool, ``remote.log.reader.threads``, one for the broker): however many
    logs a process keeps open, their reads ahead run on these."""
    global _READERS
    with _READERS_LOCK:
        if _READERS is None:
            _READERS = ThreadPoolExecutor(max_workers=REMOTE_LOG_READER_THREADS,
                                          thread_name_prefix="remote-log-reader")
        return _READERS


@dataclass
class _Sweep:
    """A sequential read of one remote segment: its ranged reads, received or in flight,
    contiguous and in order from the first not yet wholly returned."""

    segment: RemoteLogSegmentMetadata
    start: int                                  # where the next fetch of the sweep begins
    chunk: int
    pieces: deque[_Piece] = field(default_factory=deque)
    issued_to: int = 0                          # end position of the last read issued
    next_offset: int = -1                       # the offset whose batch starts at ``start``
    following: "_Sweep | None" = None           # the next remote segment, read ahead near the end
    # where a fetch that straddles pieces is joined, reused (decoding copies what it returns,
    # so no table keeps it): a fresh buffer per fetch would cost the allocator's page faults
    scratch: bytearray | None = None

    def covers(self, md: RemoteLogSegmentMetadata, position: int) -> bool:
        """``position`` of segment ``md`` lies in the bytes read or issued (or just after)."""
        first = self.pieces[0][0] if self.pieces else self.issued_to
        return self.segment.remote_log_segment_id == md.remote_log_segment_id and first <= position <= self.issued_to

    def drop_before(self, position: int) -> None:
        """Forget the pieces that end at or before ``position`` (returned already)."""
        while self.pieces and self.pieces[0][1] <= position:
            _let_go(self.pieces.popleft()[2])


def _let_go(data: "Future[memoryview] | bytes") -> None:
    """A piece the sweep is done with: its read cancelled if it has not begun, its buffer given
    back once the read is done."""
    if isinstance(data, Future):
        data.cancel()
        _BUFFERS.recycle(data)


def read_ahead_chunk(max_bytes: int) -> int:
    """The size of the ranged reads a sweep of fetches of ``max_bytes`` issues ahead (by default)."""
    return min(MAX_CHUNK, max(MIN_CHUNK, FETCHES_PER_CHUNK * max_bytes))


def _cancel(sweep: _Sweep) -> None:
    """Cancel the reads issued ahead that have not started (those running finish unused)."""
    for _, _, data in sweep.pieces:
        _let_go(data)
    sweep.pieces.clear()                        # each buffer given back once
    if sweep.following is not None:
        _cancel(sweep.following)


def _field(data: bytes | memoryview, pos: int, field: BatchField) -> int:
    """One header field of the batch at ``pos`` (a scalar read: this walk looks at a few
    headers per fetch)."""
    return int(struct.unpack_from(">" + field.code, data, pos + field.offset)[0])


def _last_offset(data: bytes | memoryview, pos: int) -> int:
    base = _field(data, pos, BatchField.BASE_OFFSET)
    if _field(data, pos, BatchField.MAGIC) >= 2:
        return base + _field(data, pos, BatchField.LAST_OFFSET_DELTA)
    return base                             # a legacy entry's offset is its last


def _skip_batches_below(data: bytes | memoryview, offset: int) -> int:
    """The position in ``data`` of the first batch whose last offset reaches ``offset`` (a walk
    over the few batch headers between an index entry and the target; a truncated header
    ends it)."""
    pos, n = 0, len(data)
    while pos + BatchField.LAST_OFFSET_DELTA.offset + BatchField.LAST_OFFSET_DELTA.size <= n:
        size = LOG_OVERHEAD + _field(data, pos, BatchField.LENGTH)
        if _last_offset(data, pos) >= offset or pos + size > n:
            break
        pos += size
    return pos


class UnifiedLog:
    """``Log`` ``log`` plus its remote tier: ``rlmm`` and ``rsm`` for partition ``tip``, ``cache``
    the ``RemoteIndexCache``. ``read``/``fetch``/``offsets_for_times``/``fetch_offset_by_timestamp``
    span both tiers; closing waits for the log's reads still running (the log, RLMM, RSM and
    cache are the caller's). A sweep keeps at most ``read_ahead`` ranged reads of ``chunk_bytes``
    ahead (default ``chunk_bytes``: four fetches' ``max_bytes``, 256 KiB to 8 MiB), each into a
    buffer of a chunk, on the process's reader threads (``REMOTE_LOG_READER_THREADS``, shared by
    every log, as a broker's) or, with ``threads``, on a pool of the log's own. Between sweeps
    the buffers are kept in one pool for the process, up to the largest need of an open
    ``UnifiedLog`` (``read_ahead + 2`` chunks: 80 MiB at the defaults), whatever the number of
    logs, and let go when the last one closes. Remote fetches take turns (one sweep at a time)."""

    def __init__(self, log: Log, tip: TopicIdPartition, rlmm: RemoteLogMetadataManager, rsm: RemoteStorageManager,
                 cache: RemoteIndexCache, *, read_ahead: int = DEFAULT_READ_AHEAD, threads: int | None = None,
                 chunk_bytes: int | None = None) -> None:
        if chunk_bytes is not None and chunk_bytes <= 0:
            raise InvalidConfigError(f"chunk_bytes must be positive, not {chunk_bytes}")
        self.log, self.tip, self.rlmm, self.rsm, self.cache = log, tip, rlmm, rsm, cache
        self.read_ahead = read_ahead
        self.chunk_bytes = chunk_bytes
        self._own_pool = threads is not None
        self._pool = (ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="remote-log-reader")
                      if threads is not None else _shared_readers())
        self._reads: set[Future[memoryview]] = set()    # this log's reads not done yet
        self._reads_lock = threading.Lock()
        # the buffers of a sweep's reads ahead (and of the next segment's first ones)
        self._buffer_need = (read_ahead + 2) * (chunk_bytes or MAX_CHUNK)
        _BUFFERS.open(self._buffer_need)
        self._sweep: _Sweep | None = None
        self._lock = threading.Lock()            # one sweep: remote fetches take turns
        self._next_offset = -1                   # where the last remote fetch said to go on
        self._described: tuple[RemoteLogSegmentId, str] | None = None
        self._closed = False

    # ------------------------------------------------------------------------------ offsets

    def remote_segments(self) -> list[RemoteLogSegmentMetadata]:
        """The readable (``COPY_SEGMENT_FINISHED``) remote segments, by start offset."""
        return sorted((m for m in self.rlmm.list_remote_log_segments(self.tip)
                       if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED), key=lambda m: m.start_offset)

    @property
    def local_log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_start_offset(self) -> int:
        """The earliest offset in either tier (``UnifiedLog.logStartOffset``)."""
        remote = self.remote_segments()
        local = self.log.log_start_offset
        return min(remote[0].start_offset, local) if remote else local

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """The last offset copied to remote storage, -1 if none (``highestOffsetInRemoteStorage``)."""
        return max((m.end_offset for m in self.remote_segments()), default=-1)

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def remote_segment_for(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The finished remote segment holding ``offset``: by the leader epoch of the offset
        (``RemoteLogManager.read``: ``epochForOffset`` then ``remoteLogSegmentMetadata``), else,
        where the local epoch cache no longer reaches that far, the listing's latest copy."""
        epoch = self.log.leader_epoch_cache.epoch_for_offset(offset)
        if epoch is not None:
            found = self.rlmm.remote_log_segment_metadata(self.tip, epoch, offset)
            if found is not None:
                return found
        holding = [m for m in self.remote_segments() if m.start_offset <= offset <= m.end_offset]
        return max(holding, key=lambda m: (m.segment_leader_epochs[-1][0], m.event_timestamp_ms), default=None)

    def _out_of_range(self, offset: int) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
            f"Offset {offset} is out of range for {self.log.dir.name}: the log holds [{self.log_start_offset}, "
            f"{self.log.log_end_offset}), offsets below {self.local_log_start_offset} in remote storage "
            f"({len(self.remote_segments())} segments, highest offset {self.highest_offset_in_remote_storage})")

    # ------------------------------------------------------------------------------ reads

    def read(self, offset: int, *, max_bytes: int = 1 << 20, max_offset: int | None = None,
             isolation: str = "read_uncommitted") -> pa.Table:
        return self.fetch(offset, max_bytes=max_bytes, max_offset=max_offset, isolation=isolation).table

    def fetch(self, offset: int, *, max_bytes: int = 1 << 20, max_offset: int | None = None,
              isolation: str = "read_uncommitted") -> FetchResult:
        """``Log.fetch`` over both tiers: below the local log start, whole batches of the remote
        segment holding ``offset``; ``next_offset`` continues into the next segment or the local
        log."""
        committed = is_read_committed(isolation)
        if offset >= self.log.log_start_offset:
            return self.log.fetch(offset, max_bytes=max_bytes, max_offset=max_offset, isolation=isolation)
        if offset < 0:
            raise self._out_of_range(offset)
        md = self.remote_segment_for(offset)
        if md is None:
            raise self._out_of_range(offset)
        upper = self.log.last_stable_offset if committed else self.log.high_watermark
        if max_offset is not None:
            upper = min(upper, max_offset)
        if offset >= upper:
            return FetchResult(empty_table(), offset)
        with self._lock:
            try:
                return self._fetch_remote(md, offset, upper, max_bytes, committed)
            except BaseException:
                # a failed ranged read (issued ahead or not) ends the sweep: a later fetch reads
                # afresh rather than past a hole in the bytes
                self._drop_sweep()
                raise

    def _fetch_remote(self, md: RemoteLogSegmentMetadata, offset: int, upper: int, max_bytes: int,
                      committed: bool) -> FetchResult:
        max_bytes = max(1, max_bytes)
        sweep = self._sweep
        sequential = sweep is not None and sweep.next_offset == offset \
            and sweep.segment.remote_log_segment_id == md.remote_log_segment_id
        if not sequential and offset == md.start_offset and self._next_offset == offset:
            # the sweep went on from the previous segment into this one: its reads ahead may
            # have begun there already
            following = sweep.following if sweep is not None else None
            if sweep is not None:
                sweep.following = None
            self._drop_sweep()
            if following is None or following.segment.remote_log_segment_id != md.remote_log_segment_id:
                if following is not None:
                    _cancel(following)
                following = _Sweep(md, 0, self._chunk(max_bytes), next_offset=offset)
            self._sweep = sweep = following
            sequential = True
        if sequential:
            assert sweep is not None
            position, slack = sweep.start, 0    # where the last fetch of this sweep stopped
        else:
            # the index entry may lie up to index.interval.bytes and a batch before the target
            position, slack = self.cache.lookup_offset(md, offset), self.log.config.index_interval_bytes
        data, start = self._bytes(md, position, max_bytes + slack, sequential)
        size, header = md.segment_size_in_bytes, BatchField.LAST_OFFSET_DELTA.offset + BatchField.LAST_OFFSET_DELTA.size
        while True:
            skip = _skip_batches_below(data, offset)
            data, start = memoryview(data)[skip:], start + skip
            if start + len(data) >= size or len(data) >= header and _last_offset(data, 0) >= offset:
                break
            # the target batch lies past the bytes read (batches larger than the slack): read on
            self._drop_sweep()
            more = min(size, start + len(data) + max(max_bytes, MIN_CHUNK))
            data = bytes(data) + self._range(md, start + len(data), more)
        data, decode_end = self._whole_first_batch(md, data, start, max_bytes)
        if not data:
            # endOffset may lie past the segment's last batch: the next read starts after it
            self._next_offset = min(upper, md.end_offset + 1)
            return FetchResult(empty_table(), self._next_offset)
        source = self._describe(md)
        try:
            run = decode_run(data, end=decode_end, check_order=True,
                             max_decoded=max_bytes, source=source,
                             max_decompressed=default_max_decompressed(self.log.config.max_message_bytes))
        except CorruptRecordError as e:
            raise e.located(source=source, base_position=start) from e.__cause__
        self._consumed(md, start + run.next_position, run.next_offset)
        if run.next_offset < 0:
            self._next_offset = min(upper, md.end_offset + 1)
            return FetchResult(empty_table(), self._next_offset)
        next_offset = run.next_offset
        if start + run.next_position >= md.segment_size_in_bytes:
            next_offset = max(next_offset, md.end_offset + 1)
        next_offset = max(offset, min(upper, next_offset))
        self._next_offset = next_offset
        table, _, _, keep = rows_in_range(run.table, offset, upper)
        if committed and table.num_rows:
            fetched_end = min(upper, int(table.column("offset")[-1].as_py()) + 1)
            aborted = self.collect_aborted_txns(md, offset, fetched_end)
            if aborted:
                mask = pa.array(~aborted_mask(table, aborted))
                keep = mask if keep is None else pc.and_(keep, mask)
        return FetchResult(table if keep is None else table.filter(keep), next_offset)

    def _describe(self, md: RemoteLogSegmentMetadata) -> str:
        """``describe_segment(md)``, kept for the segment being swept (a sweep's fetches would
        otherwise format the same name, topic id and segment id in base64, every time)."""
        key = md.remote_log_segment_id
        if self._described is None or self._described[0] != key:
            self._described = (key, describe_segment(md))
        return self._described[1]

    def collect_aborted_txns(self, md: RemoteLogSegmentMetadata, fetch_offset: int,
                             upper_bound: int) -> list[AbortedTxn]:
        """``RemoteLogManager.collectAbortedTransactions``: the remote transaction indexes from
        ``md`` on (segments whose metadata says ``txnIdxEmpty`` are not fetched), then the local
        log's, until an index says the search is complete (an ABORT marker may lie in any later
        segment, remote or local)."""
        found: list[AbortedTxn] = []
        for m in self.remote_segments():
            if m.end_offset < md.start_offset or m.txn_idx_empty:
                continue
            txns, complete = self.cache.get_index_entry(m).txn_index.collect_aborted_txns(fetch_offset, upper_bound)
            found.extend(txns)
            if complete:
                return found
        for seg in self.log.segments:
            txns, complete = seg.txn_index.collect_aborted_txns(fetch_offset, upper_bound)
            found.extend(txns)
            if complete:
                break
        return found

    # ------------------------------------------------------------------------------ ranged reads

    def _range(self, md: RemoteLogSegmentMetadata, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the segment's ``.log``: one ranged read."""
        with self.rsm.fetch_log_segment(md, start, end - 1) as stream:
            return bytes(stream.readall())      # one ranged read, no copy through a buffer

    def _range_into(self, md: RemoteLogSegmentMetadata, start: int, end: int, size: int) -> memoryview:
        """Bytes ``[start, end)`` of the segment's ``.log`` in a kept buffer (``size`` bytes if
        new): one ranged read straight into it."""
        view = _BUFFERS.take(end - start, size)
        try:
            with self.rsm.fetch_log_segment(md, start, end - 1) as stream:
                got = 0
                while got < len(view):
                    n = stream.readinto(view[got:])
                    if not n:
                        raise RemoteStorageError(f"{describe_segment(md)} ends at byte {start + got}, before "
                                                 f"byte {end}")
                    got += n
        except BaseException:
            _BUFFERS.give(view)
            raise
        return view

    def _bytes(self, md: RemoteLogSegmentMetadata, position: int, max_bytes: int,
               sequential: bool) -> tuple[bytes | memoryview, int]:
        """At least ``max_bytes`` (or to the segment's end) from ``position``, and ``position``:
        from the sweep's bytes when the read lands in them (``sequential``: it continues the
        sweep, whose next ranged reads are then issued ahead), else one ranged read."""
        size = md.segment_size_in_bytes
        if position >= size:
            return b"", position
        sweep = self._sweep
        want = min(size, position + max_bytes)
        if sweep is not None and sweep.covers(md, position):
            if sequential:
                sweep.drop_before(position)
                self._issue_ahead(sweep)
            return self._view(sweep, position, want), position
        self._drop_sweep()
        data = self._range(md, position, want)
        self._sweep = _Sweep(md, position, self._chunk(max_bytes), deque([(position, want, data)]), issued_to=want)
        return data, position

    def _view(self, sweep: _Sweep, position: int, end: int) -> bytes | memoryview:
        """Bytes ``[position, end)`` of the sweep's segment: a slice of one piece (no copy), the
        pieces joined in the sweep's scratch buffer where it straddles them (valid until the next
        call); what lies past the reads issued is read now."""
        if sweep.issued_to < end:
            sweep.pieces.append((sweep.issued_to, end, self._range(sweep.segment, sweep.issued_to, end)))
            sweep.issued_to = end
        sweep.drop_before(position)
        parts = []
        for first, last, piece in sweep.pieces:
            if first >= end:
                break
            got = piece.result() if isinstance(piece, Future) else piece
            parts.append(memoryview(got)[max(position, first) - first:min(end, last) - first])
        if len(parts) == 1:
            return parts[0]
        n = end - position
        if sweep.scratch is None or len(sweep.scratch) < n:
            sweep.scratch = bytearray(n)
        joined, at = memoryview(sweep.scratch), 0
        for part in parts:
            joined[at:at + len(part)] = part
            at += len(part)
        return joined[:n]

    def _chunk(self, max_bytes: int) -> int:
        return self.chunk_bytes or read_ahead_chunk(max_bytes)

    def _issue_ahead(self, sweep: _Sweep) -> None:
        """Keep ``read_ahead`` ranged reads ahead of the piece being read: the segment's next
        chunks, then, near its end, the first chunks of the remote segment that follows it (below
        the local log)."""
        limit = self.read_ahead + 1
        size = sweep.segment.segment_size_in_bytes
        while len(sweep.pieces) < limit and sweep.issued_to < size:
            self._issue(sweep)
        room = limit - len(sweep.pieces)
        if room <= 0 or sweep.issued_to < size:
            return
        if sweep.following is None:
            after = sweep.segment.end_offset + 1
            md = self.remote_segment_for(after) if after < self.log.log_start_offset else None
            if md is None or md.start_offset != after:
                return
            sweep.following = _Sweep(md, 0, sweep.chunk, next_offset=after)
        following = sweep.following
        size = following.segment.segment_size_in_bytes
        while len(following.pieces) < room and following.issued_to < size:
            self._issue(following)

    def _issue(self, sweep: _Sweep) -> None:
        """One ranged read ahead, on the pool: up to the next multiple of the chunk size."""
        start = sweep.issued_to
        end = min(sweep.segment.segment_size_in_bytes, (start // sweep.chunk + 1) * sweep.chunk)
        read = self._pool.submit(self._range_into, sweep.segment, start, end, sweep.chunk)
        with self._reads_lock:
            self._reads.add(read)
        read.add_done_callback(self._read_done)
        sweep.pieces.append((start, end, read))
        sweep.issued_to = end

    def _read_done(self, read: "Future[memoryview]") -> None:
        with self._reads_lock:
            self._reads.discard(read)

    def _whole_first_batch(self, md: RemoteLogSegmentMetadata, data: bytes | memoryview, start: int,
                           max_bytes: int) -> tuple[bytes | memoryview, int]:
        """``data`` with its first batch whole (a fetch returns at least one batch: one larger
        than ``max_bytes`` is completed by a second ranged read, or from the sweep's reads ahead),
        and where decoding stops."""
        if len(data) < LOG_OVERHEAD:
            return data, max_bytes
        first = LOG_OVERHEAD + _field(data, 0, BatchField.LENGTH)
        size = md.segment_size_in_bytes
        if first > len(data) and start + len(data) < size:
            end = min(size, start + first)
            sweep = self._sweep
            if sweep is not None and sweep.covers(md, start):
                return self._view(sweep, start, end), max(max_bytes, first)
            data = bytes(data) + self._range(md, start + len(data), end)
            self._drop_sweep()
            self._sweep = _Sweep(md, start, self._chunk(max_bytes), deque([(start, end, data)]), issued_to=end)
        return data, max(max_bytes, first)

    def _consumed(self, md: RemoteLogSegmentMetadata, position: int, next_offset: int) -> None:
        """The sweep goes on from ``position`` (after the last batch returned), where a fetch of
        ``next_offset`` continues without an index lookup."""
        sweep = self._sweep
        if sweep is not None and sweep.covers(md, position):
            sweep.drop_before(position)
            sweep.start = position
            sweep.next_offset = next_offset

    def _drop_sweep(self) -> None:
        sweep, self._sweep = self._sweep, None
        if sweep is not None:
            _cancel(sweep)

    # ------------------------------------------------------------------------------ timestamps

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """``UnifiedLog.fetchOffsetByTimestamp`` over both tiers: -2 the log start offset over
        both tiers, -5 the highest offset in remote storage (-1, epoch -1 if none), -1, -3 (the
        local segments' max timestamp, as Kafka answers it) and -4 (the local log start) from the
        local log; a timestamp: the first remote segment (from the log start, by offset) whose
        ``maxTimestampMs`` reaches it, through its time index, else the local log."""
        if timestamp == EARLIEST_TIMESTAMP:
            remote = self.remote_segments()
            if remote and remote[0].start_offset < self.log.log_start_offset:
                md = remote[0]
                return TimestampAndOffset(-1, md.start_offset, md.segment_leader_epochs[0][0])
            return self.log.fetch_offset_by_timestamp(timestamp)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            remote = self.remote_segments()
            if not remote:
                return TimestampAndOffset(-1, -1, -1)
            md = max(remote, key=lambda m: m.end_offset)
            return TimestampAndOffset(-1, md.end_offset, md.segment_leader_epochs[-1][0])
        if timestamp < 0:
            return self.log.fetch_offset_by_timestamp(timestamp)
        local_start = self.log.log_start_offset
        for md in self.remote_segments():
            if md.start_offset >= local_start or md.max_timestamp_ms < timestamp:
                continue
            found = self._search_remote(md, timestamp)
            if found is not None:
                return found
        return self.log.fetch_offset_by_timestamp(timestamp)

    def offsets_for_times(self, timestamp: int) -> int | None:
        """The first offset (either tier) whose record timestamp is at or after ``timestamp``."""
        found = self.fetch_offset_by_timestamp(timestamp)
        return None if found is None else found.offset

    def _search_remote(self, md: RemoteLogSegmentMetadata, timestamp: int) -> TimestampAndOffset | None:
        """``RemoteLogOffsetReader``: from the time index's position, the first record at or
        after ``timestamp`` in the segment."""
        position = self.cache.lookup_timestamp(md, timestamp, md.start_offset)
        size = md.segment_size_in_bytes
        step = MIN_CHUNK
        pending = b""
        while position < size:
            end = min(size, position + step)
            data = pending + self._range(md, position, end)
            run = decode_run(data, source=describe_segment(md))
            table = run.table
            if table.num_rows:
                stamps = table.column("timestamp").cast(pa.int64()).to_numpy()
                # control records count, as in lookupTimestamp (and the local FileRecords.searchForTimestamp)
                hit = np.flatnonzero(stamps >= timestamp)
                if hit.size:
                    i = int(hit[0])
                    offset = int(table.column("offset")[i].as_py())
                    epochs = [e for e, first in md.segment_leader_epochs if first <= offset]
                    return TimestampAndOffset(int(stamps[i]), offset, epochs[-1] if epochs else None)
            pending = data[run.next_position:]
            position = end
            if run.batches == 0:
                step = min(MAX_CHUNK, step * 2)
        return None

    # ------------------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._drop_sweep()                      # its reads not begun are cancelled
        with self._reads_lock:
            running = list(self._reads)
        wait_all(running)                       # the running ones end before the caller's RSM closes
        if self._own_pool:
            self._pool.shutdown()
        if not self._closed:
            self._closed = True
            _BUFFERS.close(self._buffer_need)

    def __enter__(self) -> "UnifiedLog":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"UnifiedLog({self.log.dir}, {self.tip}, {self.rsm!r})"


__all__ = ["UnifiedLog", "read_ahead_chunk"]

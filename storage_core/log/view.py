"""LogView: a read-only view of one partition directory, for readers in another process than the
writer (``Log.open(read_only=True)``, whose ``LogLoader`` lists segments through it, and the
Spark source). Kafka has no counterpart: its readers share the broker's ``UnifiedLog``.

What a reader needs without taking the writer's lock or writing anything: a listing of the
segments that stays consistent while the writer swaps cleaned segments in (``.swap`` files are
the segments of a swap already decided, and the live files they cover are the ones they
replace: the rule ``LogLoader`` completes a swap by), the log start offset (the data
directory's ``log-start-offset-checkpoint`` and the first segment, as ``LogLoader`` finds it), a
check whether files read from were shortened or removed since, and the last stable offset of
a tail followed from batch headers (``OngoingTransactions``), and the aborted transactions of
what it read, from the markers themselves (``aborted_by_markers``: a reader cannot tell a
segment without ``.txnindex`` from one whose index is missing). Segments are opened read-only
with positioned reads, never mapped: a writer may trim a file under a reader (SIGBUS).
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..checkpoint import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile, parse_topic_partition_dir
from ..config import LogConfig
from ..errors import KafkaLogError
from ..format.control import ControlRecordType
from ..format.log_input_stream import BatchArrays, batch_records
from ..format.record_batch import CONTROL_FLAG_MASK, TRANSACTIONAL_FLAG_MASK
from .files import LOG_SUFFIX, SWAP_SUFFIX, is_segment_file, offset_from_filename, segment_base_offsets
from .segment import LogSegment
from .segments import floor_index

logger = logging.getLogger(__name__)


def log_start_offset(checkpointed: int, first_base: int | None) -> int:
    """The log start offset a load finds: the one the data directory's
    ``log-start-offset-checkpoint`` records (0 without an entry), raised to the first segment's
    base (``LogLoader``: ``max(logStartOffsetCheckpoint, segments.firstSegment.baseOffset)``)."""
    return checkpointed if first_base is None else max(checkpointed, first_base)


class LogView:
    """The partition directory ``directory`` as a reader sees it now; every method looks at the
    files afresh (nothing is cached) and writes nothing."""

    def __init__(self, directory: str | os.PathLike[str], config: LogConfig | None = None) -> None:
        self.dir = Path(directory)
        self.config = config or LogConfig()

    def segment_base_offsets(self) -> list[int]:
        """The base offsets of the live segment files, sorted."""
        return segment_base_offsets(os.listdir(self.dir))

    def log_start_offset(self) -> int:
        """The log start offset, without opening the log: the data directory's
        log-start-offset checkpoint and the first segment file, whichever is later (``LogLoader``'s
        rule); an unreadable checkpoint counts as 0."""
        tp = parse_topic_partition_dir(self.dir.name)
        try:
            checkpoint = OffsetCheckpointFile(self.dir.parent / LOG_START_OFFSET_CHECKPOINT).read().get(tp, 0)
        except (OSError, KafkaLogError):
            checkpoint = 0
        return log_start_offset(checkpoint, min(self.segment_base_offsets(), default=0))

    def segments_holding(self, offset: int, *, attempts: int = 50) -> list[int] | None:
        """The segment base offsets now, if ``offset`` is still in the log (at or above the log
        start offset, some segment at or below it), else None (retention removed it). A
        cleaner's swap renames the old files ``.deleted`` a moment before its ``.swap`` files
        take their names: while ``.swap`` files are present, look again shortly."""
        for _ in range(attempts):
            names = os.listdir(self.dir)
            bases = segment_base_offsets(names)
            swapping = any(n.endswith(SWAP_SUFFIX) for n in names)
            if bases and bases[0] <= offset and self.log_start_offset() <= offset and not swapping:
                return bases
            if not swapping:
                return None
            time.sleep(0.02)
        return None

    def open_segment(self, base_offset: int) -> LogSegment:
        """The segment at ``base_offset`` opened read-only (``FileNotFoundError`` if it is gone);
        the caller closes it with ``close(final_entries=False)``."""
        return LogSegment.open(self.dir, base_offset, self.config, writable=False)

    @contextmanager
    def segment(self, base_offset: int) -> Iterator[LogSegment]:
        """``open_segment`` as a context manager."""
        seg = self.open_segment(base_offset)
        try:
            yield seg
        finally:
            seg.close(final_entries=False)

    def open_segments(self, attempts: int = 200) -> list[LogSegment]:
        """Every segment opened read-only, consistent even while the writer (another process)
        swaps cleaned segments in: ``.swap`` segments replace the live ones they cover
        (``[min swap base, last swap's next offset)``). Renames during the listing are caught
        by listing again until two listings agree. The caller closes them."""
        names = sorted(os.listdir(self.dir))
        for _ in range(attempts):
            segs: list[LogSegment] = []
            try:
                swaps = [LogSegment.open(self.dir, offset_from_filename(n), self.config, writable=False,
                                         preallocate=False, file_suffix=SWAP_SUFFIX)
                         for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
                segs.extend(swaps)
                lo = min((s.base_offset for s in swaps), default=None)
                hi = swaps[-1].read_next_offset() if swaps else None
                for n in names:
                    if not is_segment_file(n):
                        continue
                    base = offset_from_filename(n)
                    if lo is not None and hi is not None and lo <= base < hi:
                        continue                 # replaced by a swap in progress
                    segs.append(LogSegment.open(self.dir, base, self.config, writable=False,
                                                preallocate=False))
            except FileNotFoundError:
                pass                             # renamed under us: list again
            else:
                again = sorted(os.listdir(self.dir))
                if again == names:
                    return sorted(segs, key=lambda s: s.base_offset)
                names = again
                for seg in segs:
                    seg.close(final_entries=False)
                continue
            for seg in segs:
                seg.close(final_entries=False)
            time.sleep(0.005)
            names = sorted(os.listdir(self.dir))
        raise KafkaLogError(f"{self.dir} kept changing while it was being opened for reading")

    @staticmethod
    def out_of_date(segments: list[LogSegment], offset: int, read: int) -> bool:
        """Whether a file of ``segments`` (a view opened earlier) that ``read`` bytes were read
        from (from ``offset`` on) was removed or shortened by the writer since: a truncation
        (which deletes the later segments and shortens the one it cuts), a swap or a retention
        delete. One fstat a segment read (the read may start anywhere in the first: the next
        ones are checked until their sizes cover what was read)."""
        i = floor_index([s.base_offset for s in segments], offset)
        for k, seg in enumerate(segments[i:]):
            st = os.fstat(seg.fileno())
            if st.st_nlink == 0 or st.st_size < seg.size:
                return True
            if k:
                read -= seg.size
            if read <= 0:
                return False
        return False


class OngoingTransactions:
    """The open transactions of a log followed from its batch headers alone (a tail read by
    another process than the writer): producer id -> first offset of its open transaction, as
    ``ProducerStateManager.ongoingTxns`` keeps them; the last stable offset is the first of
    them, else the high watermark (``UnifiedLog.lastStableOffset``)."""

    def __init__(self, ongoing: dict[int, int] | None = None) -> None:
        self.first_offsets: dict[int, int] = dict(ongoing or {})

    def follow(self, scan: BatchArrays) -> None:
        """Take in the batches of ``scan`` (headers, in offset order)."""
        attrs = scan.column("attributes")
        txn = np.flatnonzero(attrs & TRANSACTIONAL_FLAG_MASK)
        pids = scan.column("producer_id")
        for i in txn.tolist():                    # transactional batches only: few per append
            pid = int(pids[i])
            if attrs[i] & CONTROL_FLAG_MASK:
                self.first_offsets.pop(pid, None)     # COMMIT or ABORT: the transaction is decided
            else:
                self.first_offsets.setdefault(pid, int(scan.base_offset[i]))

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(high_watermark, min(self.first_offsets.values(), default=high_watermark))



def aborted_by_markers(table: pa.Table, segments: list[LogSegment], next_offset: int) -> np.ndarray:
    """True for the rows of ``table`` (a decoded run of the log of ``segments`` ending before
    ``next_offset``) that belong to aborted transactions, found from the transaction
    markers as ``ProducerStateManager`` does when recovery rebuilds a ``.txnindex``: a
    transactional record of producer P is aborted when P's next COMMIT/ABORT marker after
    it is an ABORT (the index entry's ``[first offset, marker]``). Markers in the run are
    read from its control rows; for producers whose transaction runs past the run, the
    batches after it are walked (headers, and the one record of a control batch) until
    each one's marker is found. Writes nothing."""
    pids = table.column("producerId").to_numpy()
    txnal = table.column("isTransactional").to_numpy(zero_copy_only=False)
    control = table.column("isControl").to_numpy(zero_copy_only=False)
    offsets = table.column("offset").to_numpy()
    aborted = np.zeros(len(offsets), dtype=bool)
    data = txnal & ~control
    if not data.any():
        return aborted
    markers: dict[int, list[tuple[int, bool]]] = {}
    keys = table.column("key")
    for i in np.flatnonzero(txnal & control).tolist():
        kind = ControlRecordType.parse(keys[i].as_py())
        if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            markers.setdefault(int(pids[i]), []).append(
                (int(offsets[i]), kind is ControlRecordType.ABORT))
    last_data = {int(p): int(offsets[data & (pids == p)].max()) for p in np.unique(pids[data])}
    pending = {p for p, last in last_data.items()
               if not markers.get(p) or markers[p][-1][0] < last}
    if pending:
        for seg in segments[floor_index([s.base_offset for s in segments], next_offset):]:
            start = seg.translate_offset(next_offset) if seg.base_offset <= next_offset else None
            position = start.position if start is not None else 0
            if seg.base_offset <= next_offset and start is None:
                continue
            for b in seg.batches(position):        # headers; only a marker's batch is read
                h = b.header
                if h is None or not h.is_control or h.producer_id not in pending or \
                        b.base_offset < next_offset:
                    continue
                got = seg.read_batch(b)
                if got is None:
                    break                                # shortened since this reader's open
                kind = ControlRecordType.parse(batch_records(*got)[0].key)
                if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                    markers.setdefault(h.producer_id, []).append(
                        (b.base_offset, kind is ControlRecordType.ABORT))
                    pending.discard(h.producer_id)
                    if not pending:
                        break
            if not pending:
                break
    for pid in last_data:
        found = markers.get(pid)
        if not found:
            continue        # no decided transaction: above the last stable offset
        at = np.fromiter((o for o, _ in found), np.int64, len(found))
        is_abort = np.fromiter((a for _, a in found), bool, len(found))
        rows = np.flatnonzero(data & (pids == pid))
        nxt = np.searchsorted(at, offsets[rows], side="right")
        hit = nxt < len(at)
        aborted[rows[hit]] = is_abort[nxt[hit]]
    return aborted


__all__ = ["LogView", "OngoingTransactions", "aborted_by_markers", "log_start_offset"]

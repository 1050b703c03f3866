"""Reads of a ``Log``: records from an offset as an Arrow table (Kafka's ``LocalLog.read``, and
the filtering a consumer's ``CompletedFetch`` does: control records and, for
``read_committed``, the records of aborted transactions, decided over whole columns), and
``UnifiedLog.fetchOffsetByTimestamp``. Functions over what ``Log`` hands them: the segment list
and the bounds it copied under its lock; they read the segments' files without it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..checkpoint import LeaderEpochCache
from ..errors import CorruptRecordError, InvalidConfigError
from ..format import decode_run, empty_table
from ..format.log_input_stream import default_max_decompressed
from ..index import AbortedTxn
from .local_log import LocalLog
from .segment import LogSegment, TimestampAndOffset
from .segments import floor_index
from .view import aborted_by_markers

# ListOffsets' special timestamps (``ListOffsetsRequest``)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@dataclass(frozen=True)
class FetchResult:
    """What one ``Log.fetch`` returns: the visible records and where the next fetch starts."""

    table: pa.Table
    next_offset: int


def aborted_mask(table: pa.Table, aborted: list[AbortedTxn]) -> np.ndarray:
    """True for the transactional records lying inside an aborted transaction of their
    producer (``[first_offset, ABORT marker]``): one ``searchsorted`` per aborted producer over
    the whole columns, never a loop over records."""
    offsets = table.column("offset").to_numpy()
    pids = table.column("producerId").to_numpy()
    txnal = table.column("isTransactional").to_numpy(zero_copy_only=False)
    mask = np.zeros(len(offsets), dtype=bool)
    by_pid: dict[int, list[AbortedTxn]] = {}
    for t in aborted:
        by_pid.setdefault(t.producer_id, []).append(t)
    for pid, txns in by_pid.items():
        txns.sort(key=lambda t: t.first_offset)
        firsts = np.fromiter((t.first_offset for t in txns), np.int64, len(txns))
        lasts = np.fromiter((t.last_offset for t in txns), np.int64, len(txns))
        rows = np.flatnonzero((pids == pid) & txnal)
        if not rows.size:
            continue
        o = offsets[rows]
        i = np.searchsorted(firsts, o, side="right") - 1
        hit = (i >= 0) & (o <= lasts[np.maximum(i, 0)])
        mask[rows[hit]] = True
    return mask


def rows_in_range(decoded: pa.Table, offset: int, upper: int) -> tuple[pa.Table, int, int, pa.Array | None]:
    """The rows of a decoded run at offsets ``[offset, upper)`` (offsets increase through a log:
    one zero-copy slice), where they lie in the run (``lo``, ``hi``), and the mask that leaves out
    the control records among them (None when there are none)."""
    offsets = decoded.column("offset").to_numpy()
    lo, hi = np.searchsorted(offsets, [offset, upper], "left").tolist()
    table = decoded.slice(lo, max(0, hi - lo))
    control = table.column("isControl")
    return table, lo, hi, pc.invert(control) if pc.any(control).as_py() else None


def is_read_committed(isolation: str) -> bool:
    """Whether ``isolation`` (``read_uncommitted`` or ``read_committed``) is ``read_committed``."""
    if isolation not in ("read_uncommitted", "read_committed"):
        raise InvalidConfigError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
    return isolation == "read_committed"


def fetched(parts: list[tuple[LogSegment, int, bytes | memoryview]], segments: list[LogSegment], offset: int,
            upper: int, *, max_bytes: int, committed: bool, aborts_from_markers: bool,
            max_message_bytes: int) -> FetchResult:
    """What ``Log.fetch`` returns for the bytes ``parts`` read from ``offset`` (``segments``: the
    log's segments when they were read): the records below ``upper`` (the isolation level's
    end, capped at the caller's ``max_offset``), and the offset the next fetch starts from:
    past every batch this one read, also when all its records were left out (control
    batches, aborted transactions, compacted-away batches), capped at ``upper``.

    ``committed`` (``read_committed``) leaves out the records of aborted transactions: the
    aborted transactions overlapping the read come from the segments' txn indexes
    (``LocalLog.collectAbortedTransactions``) and a transactional record of producer P is
    dropped when it lies between the first offset and the ABORT marker of one of P's aborted
    transactions, which is what the consumer's ``CompletedFetch`` decides batch by batch,
    computed here over whole columns. ``aborts_from_markers`` (a reader in another process):
    a reader cannot tell a segment without ``.txnindex`` (no abort in it) from one whose index
    is missing (a copy of the ``.log`` files): it takes the aborts from the markers
    themselves, as recovery rebuilds the index, never from the index."""
    decoded, run_next = _decode_parts(parts, max_bytes, max_message_bytes)
    if run_next < 0:
        return FetchResult(empty_table(), offset)
    next_offset = max(offset, min(upper, run_next))
    table, lo, hi, keep = rows_in_range(decoded, offset, upper)
    if committed and table.num_rows and aborts_from_markers:
        aborted_rows = aborted_by_markers(decoded, segments, run_next)[lo:hi]
        if aborted_rows.any():
            mask = pa.array(~aborted_rows)
            keep = mask if keep is None else pc.and_(keep, mask)
    elif committed and table.num_rows:
        fetched_end = min(upper, int(table.column("offset")[-1].as_py()) + 1)
        holding = segments[floor_index([s.base_offset for s in segments], offset):]
        aborted = LocalLog.collect_aborted_txns(holding, offset, fetched_end)
        if aborted:
            mask = pa.array(~aborted_mask(table, aborted))
            keep = mask if keep is None else pc.and_(keep, mask)
    return FetchResult(table if keep is None else table.filter(keep), next_offset)


def _decode_parts(parts: list[tuple[LogSegment, int, bytes | memoryview]], max_bytes: int, max_message_bytes: int
                  ) -> tuple[pa.Table, int]:
    """The records of ``_read_parts``' bytes and the offset after the last batch decoded
    (-1: none). Decoding stops after the batch whose records take the decoded size to
    ``max_bytes``: a fetch's bytes bound its table too, whatever the compression ratio (a
    few kilobytes of zstd can hold a gigabyte of records). Errors name the segment file and
    the byte position in it."""
    tables: list[pa.Table] = []
    next_offset = -1
    budget = max_bytes
    for seg, position, data in parts:
        try:
            run = decode_run(data, max_decoded=max(budget, 0), check_order=True,
                             max_decompressed=default_max_decompressed(max_message_bytes))
        except CorruptRecordError as e:
            raise e.located(source=str(seg.log_path), base_position=position) from e.__cause__
        if run.batches:
            tables.append(run.table)
            next_offset = run.next_offset
        budget -= run.decoded_bytes
        if budget <= 0 or run.partial:
            break
    if not tables:
        return empty_table(), next_offset
    return (tables[0] if len(tables) == 1 else pa.concat_tables(tables)), next_offset


def fetch_offset_by_timestamp(segments: list[LogSegment], start: int, end: int, cache: LeaderEpochCache,
                              timestamp: int) -> TimestampAndOffset | None:
    """``UnifiedLog.fetchOffsetByTimestamp`` over a log's ``segments`` (its log start offset
    ``start``, end offset ``end``, leader-epoch ``cache``), with ListOffsets' special
    timestamps: -1 latest (the log end offset), -2 / -4 earliest, -3 the record with the
    largest timestamp; -5 latest tiered: offset -1, epoch -1 (nothing of this log is in remote
    storage; ``storage_core.remote.UnifiedLog`` answers it for a tiered one); otherwise the first
    record at or after ``timestamp`` with its leader epoch."""
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return TimestampAndOffset(-1, -1, -1)
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return TimestampAndOffset(-1, start, cache.epoch_for_offset(start))
    if timestamp == LATEST_TIMESTAMP:
        return TimestampAndOffset(-1, end, cache.latest_epoch)
    if timestamp == MAX_TIMESTAMP:
        best = max(segments, key=lambda s: s.max_timestamp_so_far.timestamp, default=None)
        if best is None or best.max_timestamp_so_far.timestamp < 0:
            return None
        # the index keeps the batch; Kafka answers with the record carrying the maximum
        return best.find_offset_by_timestamp(best.max_timestamp_so_far.timestamp, start)
    if timestamp < 0:
        raise InvalidConfigError(f"Invalid timestamp {timestamp} for a ListOffsets lookup")
    # the first segment whose largest timestamp reaches it
    target = next((s for s in segments if s.largest_timestamp >= timestamp), None)
    if target is None:
        return None
    return target.find_offset_by_timestamp(timestamp, max(start, target.base_offset))

"""``LogValidator``: what a broker checks in the batches of an append before it writes them.

Every record of every batch must decode (a broker reads them all too); a producer's batches
(Kafka's leader path) must also be data batches with records numbered ``0..n-1``, and on a
compacted topic every record needs a key. The checks run over whole appends at once: one
compiled walk of the record fields of every batch (``_kernels.parse_records``) and numpy over
the results, so validating a megabyte of small batches costs tens of microseconds, not a Python
loop per batch or record.
"""

from __future__ import annotations

from typing import Iterator, cast

import numpy as np

from ..common import LONG_MAX
from ..errors import CorruptRecordError, InvalidOffsetError, InvalidTimestampError
from ..format.batch_header import BatchField, HeaderColumn, patch_field
from ..format.columnar import RecordField, first_bad_offset_deltas, record_fields
from ..format.compression import CompressionType, decompress
from ..format.log_input_stream import MIN_RECORD_SIZE, BatchArrays, max_records_per_batch, too_many_records
from ..format.record_batch import (CONTROL_FLAG_MASK, COMPRESSION_CODEC_MASK, LOG_APPEND_TIME,
                                   RECORD_BATCH_OVERHEAD, set_max_timestamp)

_MAX_CODEC = max(CompressionType)


def _where(batches: BatchArrays, i: int, name: str) -> tuple[str, int]:
    pos = int(batches.position[i])
    return f"batch at position {pos} of the append to {name}", pos


def validate_batches(buf: bytes | bytearray | memoryview, batches: BatchArrays, *, name: str, client: bool,
                     allow_control: bool = False, require_keys: bool = False,
                     max_decompressed: int,
                     timestamp_window: tuple[int, int] | None = None) -> None:
    """Raise ``CorruptRecordError`` (position = the batch's position in ``buf``) for the first
    batch a broker would refuse. ``client``: a producer's append (``LogValidator`` with
    ``AppendOrigin.CLIENT``); ``allow_control``: the coordinator's markers; ``require_keys``:
    a compacted topic; ``timestamp_window``: the inclusive ``(lowest, highest)`` CreateTime a
    record may carry (``message.timestamp.before/after.max.ms`` around now), else
    ``InvalidTimestampError``. ``name`` (the partition) is used in messages."""
    n = len(batches)
    if n == 0:
        return
    attrs = batches.column("attributes")
    counts = batches.records_count
    if client:
        bad = np.flatnonzero(((attrs & CONTROL_FLAG_MASK) != 0) & (not allow_control))
        if bad.size:
            where, pos = _where(batches, int(bad[0]), name)
            raise CorruptRecordError(f"Control records are not allowed from clients ({where})",
                                     position=pos)
        bad = np.flatnonzero(counts == 0)
        if bad.size:
            where, pos = _where(batches, int(bad[0]), name)
            raise CorruptRecordError(f"Batch without records is not allowed ({where})",
                                     position=pos)
    fields, ok = _record_fields(buf, batches, max_decompressed)
    if client:
        # inner offset deltas must be 0..n-1 in every batch, and lastOffsetDelta n-1
        firsts = np.cumsum(counts) - counts
        expected = np.arange(fields.shape[1]) - np.repeat(firsts, counts)
        bad_rec = np.flatnonzero(fields[RecordField.OFFSET_DELTA] != expected)
        bad = np.flatnonzero(batches.column("last_offset_delta") != counts - 1)
        first_bad = min([int(np.searchsorted(firsts, bad_rec[0], "right")) - 1] if bad_rec.size
                        else [], default=n)
        first_bad = min(first_bad, int(bad[0]) if bad.size else n)
        if first_bad < n:
            where, pos = _where(batches, first_bad, name)
            raise CorruptRecordError(
                f"Inner record offsets of the {where} are not sequential "
                f"0..{int(counts[first_bad]) - 1}", position=pos)
    if timestamp_window is not None:
        _check_timestamps(batches, fields, timestamp_window, name)
    if require_keys:
        nulls = np.flatnonzero((fields[RecordField.KEY_LENGTH] < 0) & ok)
        if nulls.size:
            firsts = np.cumsum(counts) - counts
            b = int(np.searchsorted(firsts, nulls[0], "right")) - 1
            where, pos = _where(batches, b, name)
            raise CorruptRecordError(
                f"Compacted topic cannot accept message without key in topic partition {name} "
                f"(record {int(nulls[0] - firsts[b])} of the {where})", position=pos)


def assign_batch_offsets(buf: bytearray | memoryview, batches: BatchArrays, *, log_end: int, assign: bool,
                   leader_epoch: int | None, log_append_time: int | None, name: str) -> np.ndarray:
    """The last step of ``LogValidator.validateMessagesAndAssignOffsets``, on validated
    ``batches`` of ``buf``, in place and in ``batches.fields``: with ``assign`` (a producer's
    append) the base offsets numbered on from ``log_end``, else checked to continue it and
    increase; ``leader_epoch`` stamped into every batch; with ``log_append_time`` (ms) every
    batch's max timestamp set to it with the LogAppendTime flag (CRC patched). Header fields
    outside the CRC are patched with one numpy scatter each. Returns the base offsets."""
    deltas = batches.column("last_offset_delta")
    positions = batches.position
    if assign:
        bases = log_end + np.cumsum(deltas + 1) - (deltas + 1)
        patch_field(buf, positions, BatchField.BASE_OFFSET, bases)
        batches.fields[:, HeaderColumn.BASE_OFFSET] = bases
    else:
        bases = batches.base_offset
        prev_next = np.concatenate(([log_end], bases[:-1] + deltas[:-1] + 1))
        bad = np.flatnonzero(bases < prev_next)
        if bad.size:
            i = int(bad[0])
            raise InvalidOffsetError(
                f"Out of order offsets: batch {i} at position {int(positions[i])} starts "
                f"at {int(bases[i])}, below the expected offset {int(prev_next[i])} of {name}")
    if leader_epoch is not None:
        patch_field(buf, positions, BatchField.PARTITION_LEADER_EPOCH, leader_epoch)
        batches.fields[:, HeaderColumn.PARTITION_LEADER_EPOCH] = leader_epoch
    if log_append_time is not None:
        for p in positions.tolist():
            # set_max_timestamp writes with struct.pack_into: any writable buffer will do,
            # its annotation names the bytearray of the format layer's own builders
            set_max_timestamp(cast(bytearray, buf), p, LOG_APPEND_TIME, log_append_time)
        batches.fields[:, HeaderColumn.MAX_TIMESTAMP] = log_append_time
    return bases


def _check_timestamps(batches: BatchArrays, fields: np.ndarray, window: tuple[int, int],
                      name: str) -> None:
    """``LogValidator.validateTimestamp`` for CreateTime: every record's timestamp (records
    without one, -1, pass) within the window, bounds included."""
    counts = batches.records_count
    ts = np.repeat(batches.column("base_timestamp"), counts) + fields[RecordField.TIMESTAMP_DELTA]
    lo, hi = window
    bad = np.flatnonzero((ts != -1) & ((ts < lo) | (ts > hi)))
    if bad.size:
        r = int(bad[0])
        firsts = np.cumsum(counts) - counts
        b = int(np.searchsorted(firsts, r, "right")) - 1
        where, _ = _where(batches, b, name)
        raise InvalidTimestampError(
            f"Timestamp {int(ts[r])} of record {r - int(firsts[b])} of the {where} is out of "
            f"range. The timestamp should be within [{lo}, {hi}] "
            f"(message.timestamp.before.max.ms / message.timestamp.after.max.ms)")


# decompressed bytes a stored-batch check holds at once (besides one batch bigger than this):
# a few kilobytes of zstd can claim hundreds of megabytes, so a chunk's batches are checked in
# groups instead of decompressed together
_CHECK_GROUP_BYTES = 32 << 20


def _record_fields(buf: bytes | bytearray | memoryview, batches: BatchArrays, limit: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Every record's fields (``parse_records``' seven rows), the batches in order, and a
    mask of the records that belong to data batches (control records have no keys to check).
    Raises the codec's error for the first record that does not decode."""
    ((_, _, fields),) = _record_field_groups(buf, batches, limit, None)
    data_records = np.repeat((batches.column("attributes") & CONTROL_FLAG_MASK) == 0,
                             batches.records_count)
    return fields, data_records


def _record_field_groups(buf: bytes | bytearray | memoryview, batches: BatchArrays, limit: int, group_bytes: int | None
                         ) -> Iterator[tuple[int, int, np.ndarray]]:
    """Every record's fields, as ``(first batch, end batch, fields)`` for consecutive groups of
    ``batches`` whose decompressed records take about ``group_bytes`` (None: one group; a group
    holds at least one batch). Uncompressed records are read in place."""
    counts = batches.records_count
    pos, size = batches.position, batches.size
    codec = batches.column("attributes") & COMPRESSION_CODEC_MASK
    room = size - RECORD_BATCH_OVERHEAD
    bad = np.flatnonzero((counts < 0) | ((codec == 0) & (counts * MIN_RECORD_SIZE > room)))
    if bad.size:
        i = int(bad[0])
        raise CorruptRecordError(f"Batch claims {int(counts[i])} records in {int(room[i])} bytes "
                                 f"of records", position=int(pos[i]),
                                 offset=int(batches.base_offset[i]))
    if not codec.any():
        yield 0, len(batches), record_fields(buf, batches, pos + RECORD_BATCH_OVERHEAD, pos + size, None)
        return
    # decompressed pieces and uncompressed record bytes laid end to end, a group at a time
    mv = memoryview(buf).cast("B")
    try:
        pieces: list[bytes | memoryview] = []
        lo_l: list[int] = []
        hi_l: list[int] = []
        at = first = 0
        for i, (p, s, c, cnt) in enumerate(zip(pos.tolist(), size.tolist(), codec.tolist(),
                                               counts.tolist())):
            piece: bytes | memoryview = mv[p + RECORD_BATCH_OVERHEAD:p + s]
            if c:
                try:
                    piece = decompress(c, piece, magic=2, max_size=limit)
                except CorruptRecordError as e:
                    raise CorruptRecordError(f"compressed batch: {e.reason}", position=p,
                                             offset=int(batches.base_offset[i])) from e
                if cnt * MIN_RECORD_SIZE > len(piece):
                    raise CorruptRecordError(f"Batch claims {cnt} records in {len(piece)} bytes "
                                             f"of records", position=p,
                                             offset=int(batches.base_offset[i]))
            pieces.append(piece)
            lo_l.append(at)
            at += len(piece)
            hi_l.append(at)
            if i == len(batches) - 1 or (group_bytes is not None and at >= group_bytes):
                data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                group = BatchArrays(batches.fields[first:i + 1], 0)
                yield first, i + 1, record_fields(data, group, np.array(lo_l, np.int64),
                                                  np.array(hi_l, np.int64), None)
                pieces, lo_l, hi_l, at, first = [], [], [], 0, i + 1
    finally:
        mv.release()


def check_stored_batches(buf: bytes | bytearray | memoryview, batches: BatchArrays, *, max_decompressed: int) -> None:
    """What makes a v2 batch found on disk valid, beyond the size, magic and CRC the header
    walk checked: the one definition ``kafkalog verify``, recovery (``LogSegment.recover``) and
    reads hold stored batches to (docs/operations.md, "What valid means"). A batch is valid when

    * its codec id is known (0-4: ``CompressionType.forId``);
    * ``lastOffsetDelta >= 0``, ``0 <= recordsCount <= lastOffsetDelta + 1`` (every record has an
      offset delta of its own) and its last offset + 1, the next offset, fits a long;
    * every record decodes, decompressed within ``max_decompressed`` bytes, with no bytes left
      over (``DefaultRecordBatch``'s iterators, what ``validate_batches`` checks on append);
    * its records' offset deltas increase strictly within ``[0, lastOffsetDelta]``, so its
      records' offsets increase and end at the batch's last offset at most.

    Raises ``CorruptRecordError`` (position = the batch's position in ``buf``) for the first
    batch of ``batches`` that is not valid; the batches before it are valid."""
    n = len(batches)
    if n == 0:
        return
    codec = batches.column("attributes") & COMPRESSION_CODEC_MASK
    delta = batches.column("last_offset_delta")
    counts = batches.records_count
    room = batches.size - RECORD_BATCH_OVERHEAD
    # base + delta in Python ints would be exact; in int64 "last + 1 > LONG_MAX" is
    # "base > LONG_MAX - 1 - delta", which cannot overflow for delta >= 0
    header_bad = ((codec > _MAX_CODEC) | (delta < 0) | (counts < 0) | (counts > delta + 1)
                  | (batches.base_offset > LONG_MAX - 1 - np.maximum(delta, 0))
                  | ((codec == 0) & (counts * MIN_RECORD_SIZE > room))
                  | (counts > max_records_per_batch(max_decompressed)))
    bad = np.flatnonzero(header_bad)
    first = int(bad[0]) if bad.size else n
    # the records of the batches before the first bad header: decoding stops at the first
    # error it meets, which can be a later batch than the first bad one (a compressed batch is
    # decompressed before the records of those before it are walked), so look again below it
    err: CorruptRecordError | None = None
    upto = first
    while upto:
        sub = BatchArrays(batches.fields[:upto], 0)
        j = upto
        try:
            for g0, g1, fields in _record_field_groups(buf, sub, max_decompressed, _CHECK_GROUP_BYTES):
                k = first_bad_offset_deltas(fields[RecordField.OFFSET_DELTA], BatchArrays(sub.fields[g0:g1], 0))
                if k < g1 - g0:
                    j = g0 + k
                    break
        except CorruptRecordError as e:
            at_position = int(sub.position[-1]) if e.position is None else e.position
            err = e if e.position is not None else CorruptRecordError(
                e.reason, position=at_position, offset=int(sub.base_offset[-1]))
            upto = int(np.searchsorted(sub.position, at_position, "left"))
            continue
        if j < upto:
            raise CorruptRecordError(
                f"Record offset deltas of the batch are not increasing within "
                f"[0, lastOffsetDelta {int(sub.column('last_offset_delta')[j])}]",
                position=int(sub.position[j]), offset=int(sub.base_offset[j]))
        break
    if err is not None:
        raise err
    if first < n:
        i = first
        if codec[i] > _MAX_CODEC:
            reason = f"Unknown compression type id {int(codec[i])}"
        elif delta[i] < 0:
            reason = f"Invalid negative lastOffsetDelta {int(delta[i])}"
        elif counts[i] < 0 or counts[i] > delta[i] + 1:
            reason = (f"Found invalid record count {int(counts[i])} in a batch of "
                      f"lastOffsetDelta {int(delta[i])}")
        elif counts[i] * MIN_RECORD_SIZE > room[i]:
            reason = f"Batch claims {int(counts[i])} records in {int(room[i])} bytes of records"
        elif counts[i] > max_records_per_batch(max_decompressed):
            raise too_many_records(int(counts[i]), max_decompressed, position=int(batches.position[i]),
                                   offset=int(batches.base_offset[i]))
        else:
            reason = (f"Batch offsets {int(batches.base_offset[i])} + {int(delta[i])} end past "
                      f"the largest offset {LONG_MAX - 1}")
        raise CorruptRecordError(reason, position=int(batches.position[i]),
                                 offset=int(batches.base_offset[i]))


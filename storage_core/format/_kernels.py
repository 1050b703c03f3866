"""Compiled kernels for the two walks numpy cannot express.

Finding where each record starts is inherently sequential (each record's length says where the
next begins), and so is walking a record's fields. Done in Python this walk is the floor of
decoding; vectorised numpy workarounds cost more than they save. These
kernels do exactly that walk, compiled by numba, and leave everything else (gathering keys and
values, building columns) to numpy and Arrow. They read only inside ``[lo, hi)`` of each batch,
check every length against its record before using it, and stop at the first fault, returning
its record index and a reason code; the caller re-reads that record with the scalar decoder to
report Kafka's exact message.
"""

from __future__ import annotations

from typing import Callable, cast

import numba as nb
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

OK = 0
BAD_LENGTH = 1
BAD_FIELD = 2
BAD_HEADERS = 3
SIZE_MISMATCH = 4
RECORDS_REMAINING = 5
PREMATURE_EOF = 6

_njit = nb.njit(cache=True, nogil=True, boundscheck=False)


@intrinsic
def _memcpy(typingctx, dst, dst_at, src, src_at, n):
    """``memcpy(dst + dst_at, src + src_at, n)`` over uint8 arrays. A slice assignment compiles
    to a byte loop; moving keys and values is the one place where that shows."""
    sig = types.void(dst, dst_at, src, src_at, n)

    def codegen(context, builder, signature, args):
        d = context.make_array(signature.args[0])(context, builder, args[0])
        s = context.make_array(signature.args[2])(context, builder, args[2])
        cgutils.raw_memcpy(builder, builder.gep(d.data, [args[1]]),
                           builder.gep(s.data, [args[3]]), args[4], 1)
        return context.get_dummy_value()

    return sig, codegen


# how kernels call it (numba's stubs type an intrinsic's call with the typing context first)
_copy = cast(Callable[[np.ndarray, int, np.ndarray, int, int], None], _memcpy)


@_njit
def gather_spans(arr: np.ndarray, starts: np.ndarray, lengths: np.ndarray, offsets: np.ndarray,
                 out: np.ndarray) -> None:
    """Copy ``arr[starts[i] : starts[i] + lengths[i]]`` to ``out[offsets[i]:]`` for every i with
    a positive length: the data buffer of an Arrow binary column."""
    for i in range(starts.shape[0]):
        n = lengths[i]
        if n > 0:
            _copy(out, offsets[i], arr, starts[i], n)


@_njit
def group_rows(keys: np.ndarray, count: int, order: np.ndarray, starts: np.ndarray) -> int:
    """A stable counting sort of rows by ``keys``: ``order`` gets the row numbers grouped by
    key, in row order within a group, and the rows of key ``k`` are
    ``order[starts[k]:starts[k + 1]]`` (``starts``: ``count + 1`` zeros on entry). Returns -1,
    or the first row whose key is outside ``[0, count)`` (nothing grouped then). Linear in the
    rows, where numpy's stable argsort and the diffs that find the groups cost several passes."""
    for i in range(keys.shape[0]):
        if keys[i] < 0 or keys[i] >= count:
            starts[:] = 0
            return i
        starts[keys[i] + 1] += 1
    for k in range(count):
        starts[k + 1] += starts[k]
    for i in range(keys.shape[0]):
        k = keys[i]
        # starts[k] moves along the group as it fills, then is set back below
        order[starts[k]] = i
        starts[k] += 1
    for k in range(count, 0, -1):
        starts[k] = starts[k - 1]
    starts[0] = 0
    return -1


@_njit
def gather_rows(arr: np.ndarray, offsets: np.ndarray, rows: np.ndarray, out: np.ndarray, at: int,
                lengths: np.ndarray) -> int:
    """Copy the values of ``rows`` (in that order) of a binary column without nulls (``arr``
    its data, ``offsets`` its Arrow offsets, int32 or int64, already sliced to the column) to
    ``out[at:]``, one after another, each one's length to ``lengths``; returns where they end.
    When ``out`` is too small nothing is copied and the end they need is returned negated, so
    the caller grows ``out`` and calls again (one call when it fits, instead of numpy's
    index, maximum, cumsum and a gather)."""
    end = at
    for i in range(rows.shape[0]):
        r = rows[i]
        if r < 0 or r >= offsets.shape[0] - 1:          # compiled without bounds checks
            raise IndexError("a picked row is outside the column")
        end += offsets[r + 1] - offsets[r]
    if end > out.shape[0]:
        return -end
    for i in range(rows.shape[0]):
        r = rows[i]
        start = offsets[r]
        n = offsets[r + 1] - start
        lengths[i] = n
        if n > 0:
            _copy(out, at, arr, start, n)
            at += n
    return end


@_njit
def span_offsets(lengths: np.ndarray, offsets: np.ndarray, limit: int) -> tuple[int, int]:
    """Arrow offsets of a binary column whose values have ``lengths`` (negative = null):
    ``offsets`` (n + 1 entries, int32 or int64) filled, returns ``(total bytes, nulls)``; one
    pass instead of numpy's maximum, cumsum, cast and count. An int32 ``offsets`` is left
    incomplete when the total passes ``limit`` (the caller retries with int64)."""
    total = 0
    nulls = 0
    offsets[0] = 0
    for i in range(lengths.shape[0]):
        n = lengths[i]
        if n < 0:
            nulls += 1
        else:
            total += n
            if total > limit:
                return total, nulls
        offsets[i + 1] = total
    return total, nulls


@_njit
def _varint(arr, pos, end, max_bytes):
    """Zig-zag varint (max_bytes 5) or varlong (10) at pos, not reading at or past end.
    Returns (value, next position), next position -1 when invalid."""
    # int64 throughout (numba's uint64/int64 mixing costs a conversion per byte); the shift
    # past bit 63 of a tenth byte wraps as Java's does, and the zig-zag shift is logical
    v = np.int64(0)
    shift = np.int64(0)
    p = pos
    stop = min(end, pos + max_bytes)
    while p < stop:
        b = np.int64(arr[p])
        p += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            if max_bytes == 5:
                v &= 0xFFFFFFFF
            return ((v >> 1) & 0x7FFFFFFFFFFFFFFF) ^ -(v & 1), p
        shift += 7
    return np.int64(0), np.int64(-1)


@_njit
def _blob(arr, pos, end):
    """A length-prefixed byte string (negative length = null): (length, start, next), next -1
    when the varint or the bytes run past end."""
    n, p = _varint(arr, pos, end, 5)
    if p < 0:
        return n, p, p
    start = p
    if n > 0:
        p += n
        if p > end:
            return n, start, np.int64(-1)
    return n, start, p


@_njit
def parse_records(arr: np.ndarray, lo: np.ndarray, hi: np.ndarray, counts: np.ndarray,
                  out: np.ndarray, kdata: np.ndarray, vdata: np.ndarray,
                  offs: np.ndarray) -> tuple[int, int, int]:
    """Walk every record of every batch. ``out`` is ``(7, sum(counts))`` int64 (one contiguous
    row per field, so each column is a plain array) and receives per record: timestamp delta,
    offset delta, key start, key length, value start, value length, header count (a negative
    length is null, as in ``DefaultRecord.readFrom``). Returns ``(records done, batch, reason
    code)``.

    With ``offs`` of shape ``(2, sum(counts) + 1)`` (a gather; an empty array skips it) every
    key and value is also copied while its bytes are at hand, keys to ``kdata`` and values to
    ``vdata`` end to end, their Arrow offsets in ``offs[0]`` / ``offs[1]`` (each buffer must
    hold the records' bytes: a record's key or value never exceeds it)."""
    gather = offs.shape[1] > 0
    if gather:
        offs[0, 0] = 0
        offs[1, 0] = 0
    kat = 0
    vat = 0
    r = 0
    for b in range(lo.shape[0]):
        pos = lo[b]
        end = hi[b]
        for _i in range(counts[b]):
            if pos >= end:
                return r, b, PREMATURE_EOF
            length, p = _varint(arr, pos, end, 5)
            if p < 0 or length < 6 or p + length > end:
                return r, b, BAD_LENGTH
            rend = p + length
            p += 1                                   # attributes, unused
            tsd, p = _varint(arr, p, rend, 10)
            if p < 0:
                return r, b, BAD_FIELD
            od, p = _varint(arr, p, rend, 5)
            if p < 0:
                return r, b, BAD_FIELD
            kl, ks, p = _blob(arr, p, rend)
            if p < 0:
                return r, b, BAD_FIELD
            vl, vs, p = _blob(arr, p, rend)
            if p < 0:
                return r, b, BAD_FIELD
            hc, p = _varint(arr, p, rend, 5)
            if p < 0 or hc < 0 or hc > rend - p:
                return r, b, BAD_HEADERS
            for _ in range(hc):
                hk, p = _varint(arr, p, rend, 5)
                if p < 0 or hk < 0 or p + hk > rend:
                    return r, b, BAD_HEADERS
                _, _, p = _blob(arr, p + hk, rend)
                if p < 0:
                    return r, b, BAD_HEADERS
            if p != rend:
                return r, b, SIZE_MISMATCH
            out[0, r] = tsd
            out[1, r] = od
            out[2, r] = ks
            out[3, r] = kl
            out[4, r] = vs
            out[5, r] = vl
            out[6, r] = hc
            if gather:
                if kl > 0:
                    _copy(kdata, kat, arr, ks, kl)
                    kat += kl
                if vl > 0:
                    _copy(vdata, vat, arr, vs, vl)
                    vat += vl
                offs[0, r + 1] = kat
                offs[1, r + 1] = vat
            r += 1
            pos = rend
        if pos != end:
            return r, b, RECORDS_REMAINING
    return r, lo.shape[0], OK


@_njit
def record_columns(counts: np.ndarray, base_offset: np.ndarray, base_timestamp: np.ndarray,
                   max_timestamp: np.ndarray, attributes: np.ndarray, producer_id: np.ndarray,
                   fields: np.ndarray, lat_mask: int, txn_mask: int, control_mask: int,
                   offsets: np.ndarray, timestamps: np.ndarray, timestamp_types: np.ndarray,
                   producer_ids: np.ndarray, transactional: np.ndarray, control: np.ndarray,
                   header_offsets: np.ndarray) -> int:
    """The per-record columns of ``parse_records``' ``fields`` in one pass over the batches of
    ``counts`` records: offset (base + delta), timestamp (the batch's max under log-append
    time, ``DefaultRecordBatch``'s rule, else base + delta), timestamp type (0/1), producer id,
    the transactional and control flags as Arrow bitmaps (``transactional`` and ``control``
    zeroed, a bit per record) and the header list offsets (``header_offsets[0]`` = 0). Returns
    the first batch whose offset deltas do not increase strictly from 0 (``len(counts)`` if
    none), which the caller refuses."""
    header_offsets[0] = 0
    bad = counts.shape[0]
    i = 0
    for b in range(counts.shape[0]):
        attrs = attributes[b]
        lat = (attrs & lat_mask) != 0
        txn = (attrs & txn_mask) != 0
        ctl = (attrs & control_mask) != 0
        base, pid, maxts, basets = base_offset[b], producer_id[b], max_timestamp[b], base_timestamp[b]
        prev = np.int64(-1)
        for _ in range(counts[b]):
            d = fields[1, i]
            if d <= prev and bad == counts.shape[0]:   # prev starts at -1: a negative first delta too
                bad = b
            prev = d
            offsets[i] = base + d
            timestamps[i] = maxts if lat else basets + fields[0, i]
            timestamp_types[i] = 1 if lat else 0
            producer_ids[i] = pid
            if txn:
                transactional[i >> 3] |= np.uint8(1 << (i & 7))
            if ctl:
                control[i >> 3] |= np.uint8(1 << (i & 7))
            header_offsets[i + 1] = header_offsets[i] + fields[6, i]
            i += 1
    return bad


@_njit
def parse_headers(arr: np.ndarray, vstart: np.ndarray, vlen: np.ndarray, hcount: np.ndarray,
                  out: np.ndarray) -> int:
    """Header boundaries of records already validated by ``parse_records``: ``out`` is
    ``(4, sum(hcount))`` int64 of key start, key length, value start, value length."""
    h = 0
    for r in range(vstart.shape[0]):
        n = hcount[r]
        if n == 0:
            continue
        p = vstart[r] + max(vlen[r], 0)
        _, p = _varint(arr, p, arr.shape[0], 5)     # the header count itself
        for _ in range(n):
            kl, p = _varint(arr, p, arr.shape[0], 5)
            out[0, h] = p
            out[1, h] = kl
            p += kl
            vl, p = _varint(arr, p, arr.shape[0], 5)
            out[2, h] = p
            out[3, h] = vl
            p += max(vl, 0)
            h += 1
    return h


@_njit
def _put_varint(out, p, zz):
    """Write an already zig-zagged value as LEB128 at p; return the next position."""
    while zz >= np.uint64(0x80):
        out[p] = np.uint8((zz & np.uint64(0x7F)) | np.uint64(0x80))
        zz >>= np.uint64(7)
        p += 1
    out[p] = np.uint8(zz)
    return p + 1


@_njit
def _zz32(v):
    return np.uint64(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


@_njit
def _zz64(v):
    return np.uint64((v << 1) ^ (v >> 63))


@_njit
def put_record_prefix(out: np.ndarray, at: int, body_len: int, ts_delta: int, off_delta: int) -> int:
    """A v2 record's head at ``out[at:]``: length, attributes 0, timestamp delta, offset delta
    (``DefaultRecord.writeTo``); returns where the key's length goes."""
    p = _put_varint(out, at, _zz32(body_len))
    out[p] = 0
    p = _put_varint(out, p + 1, _zz64(ts_delta))
    return _put_varint(out, p, _zz32(off_delta))


@_njit
def _varint_size(zz):
    n = 1
    while zz >= np.uint64(0x80):
        zz >>= np.uint64(7)
        n += 1
    return n


@_njit
def layout_records(klen: np.ndarray, vlen: np.ndarray, hcount: np.ndarray, hbytes: np.ndarray,
                   ts: np.ndarray, room: int, overhead: int, first: np.ndarray,
                   batch_start: np.ndarray, at: np.ndarray, body_len: np.ndarray,
                   ts_delta: np.ndarray, off_delta: np.ndarray) -> int:
    """Cut records into batches and place them, in two passes over the columns.

    Batches are cut greedily with an upper bound of each record's size (its timestamp delta
    bounded by the span of all timestamps, its offset delta by its index), so no batch's
    records exceed ``room`` bytes (a record larger than that gets a batch of its own); then
    each record's exact body length (``DefaultRecord.sizeInBytes``), timestamp and offset
    deltas, and its position in the output, each batch's ``overhead``-byte header left open
    before its first record. Fills ``first[:nb]`` (each batch's first record),
    ``batch_start[:nb + 1]`` (each batch's first byte, then the total size) and the per-record
    arrays; returns ``nb``."""
    n = ts.shape[0]
    lo = ts.min()
    hi = ts.max()
    nb = 0
    used = 0
    for i in range(n):
        k, v = klen[i], vlen[i]
        fixed = (1 + _varint_size(_zz32(k)) + max(k, 0) + _varint_size(_zz32(v)) + max(v, 0)
                 + _varint_size(_zz32(hcount[i])) + hbytes[i])
        body_len[i] = fixed
        span = max(abs(ts[i] - lo), abs(ts[i] - hi))
        bound = fixed + _varint_size(_zz64(span)) + _varint_size(_zz32(np.int64(i)))
        bound += _varint_size(_zz32(bound))
        if nb == 0 or used + bound > room:
            first[nb] = i
            nb += 1
            used = 0
        used += bound
    pos = 0
    b = -1
    for i in range(n):
        if b + 1 < nb and first[b + 1] == i:
            b += 1
            batch_start[b] = pos
            pos += overhead
        d = ts[i] - ts[first[b]]
        o = i - first[b]
        body = body_len[i] + _varint_size(_zz64(d)) + _varint_size(_zz32(o))
        body_len[i] = body
        ts_delta[i] = d
        off_delta[i] = o
        at[i] = pos
        pos += _varint_size(_zz32(body)) + body
    batch_start[nb] = pos
    return nb


@_njit
def write_records(out: np.ndarray, at: np.ndarray, body_len: np.ndarray, ts_delta: np.ndarray,
                  off_delta: np.ndarray, kdata: np.ndarray, koffs: np.ndarray, klen: np.ndarray,
                  vdata: np.ndarray, voffs: np.ndarray, vlen: np.ndarray, hfirst: np.ndarray,
                  hcount: np.ndarray, hkdata: np.ndarray, hkoffs: np.ndarray, hklen: np.ndarray,
                  hvdata: np.ndarray, hvoffs: np.ndarray, hvlen: np.ndarray) -> None:
    """Lay every record out at ``out[at[i]:]`` (``DefaultRecord.writeTo``): length, attributes
    0, timestamp delta, offset delta, key, value, header count and headers (record i owns
    headers ``hfirst[i] .. hfirst[i] + hcount[i]``). Key, value and header bytes are copied
    once, from the Arrow buffers to their place in the batch."""
    for i in range(at.shape[0]):
        p = put_record_prefix(out, at[i], body_len[i], ts_delta[i], off_delta[i])
        n = klen[i]
        p = _put_varint(out, p, _zz32(n))
        if n > 0:
            _copy(out, p, kdata, koffs[i], n)
            p += n
        n = vlen[i]
        p = _put_varint(out, p, _zz32(n))
        if n > 0:
            _copy(out, p, vdata, voffs[i], n)
            p += n
        p = _put_varint(out, p, _zz32(hcount[i]))
        for h in range(hfirst[i], hfirst[i] + hcount[i]):
            n = hklen[h]
            p = _put_varint(out, p, _zz32(n))
            _copy(out, p, hkdata, hkoffs[h], n)
            p += n
            n = hvlen[h]
            p = _put_varint(out, p, _zz32(n))
            if n > 0:
                _copy(out, p, hvdata, hvoffs[h], n)
                p += n


# ------------------------------------------------------------------------- batch header walk

SCAN_END = 0          # fewer than a batch's bytes left (or none): the end of the data
SCAN_FAULT = 1        # something LogInputStream raises for: let it say what
SCAN_LEGACY = 2       # a magic 0/1 entry: the caller decides
HEADER_FIELDS = 14    # columns of scan_headers' out


@_njit
def _be(arr, p, n):
    v = np.int64(0)
    for i in range(n):
        v = (v << np.int64(8)) | np.int64(arr[p + i])
    if n < 8 and v >= np.int64(1) << np.int64(8 * n - 1):
        v -= np.int64(1) << np.int64(8 * n)
    return v


@_njit
def scan_headers(arr: np.ndarray, start: int, end: int, max_batch_size: int,
                 out: np.ndarray) -> tuple[int, int, int]:
    """The shallow walk of ``LogInputStream`` over v2 batches, compiled: ``out`` is
    ``(capacity, 14)`` int64 and receives per batch position, total size, baseOffset,
    partitionLeaderEpoch, magic, crc (unsigned), attributes, lastOffsetDelta, baseTimestamp,
    maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount. Returns
    ``(batches, position where it stopped, SCAN_END | SCAN_FAULT | SCAN_LEGACY)``."""
    pos = start
    n = 0
    while True:
        if pos + 17 >= end or n == out.shape[0]:
            return n, pos, SCAN_END
        size = _be(arr, pos + 8, 4)
        magic = _be(arr, pos + 16, 1)
        if size < 14 or (max_batch_size >= 0 and size > max_batch_size):
            return n, pos, SCAN_FAULT
        if pos > end - 12 - size:
            return n, pos, SCAN_END
        if magic < 0 or magic > 2:
            return n, pos, SCAN_FAULT
        if magic != 2:
            return n, pos, SCAN_LEGACY
        total = size + 12
        if total < 61:
            return n, pos, SCAN_FAULT
        out[n, 0] = pos
        out[n, 1] = total
        out[n, 2] = _be(arr, pos, 8)
        out[n, 3] = _be(arr, pos + 12, 4)
        out[n, 4] = magic
        out[n, 5] = _be(arr, pos + 17, 4) & np.int64(0xFFFFFFFF)
        out[n, 6] = _be(arr, pos + 21, 2) & np.int64(0xFF)
        out[n, 7] = _be(arr, pos + 23, 4)
        out[n, 8] = _be(arr, pos + 27, 8)
        out[n, 9] = _be(arr, pos + 35, 8)
        out[n, 10] = _be(arr, pos + 43, 8)
        out[n, 11] = _be(arr, pos + 51, 2)
        out[n, 12] = _be(arr, pos + 53, 4)
        out[n, 13] = _be(arr, pos + 57, 4)
        n += 1
        pos += total


# ------------------------------------------------------------------------- segment index entries

@_njit
def index_entries(position: np.ndarray, size: np.ndarray, last_offset: np.ndarray,
                  max_timestamp: np.ndarray, base_position: int, since: int, interval: int,
                  running_ts: int, running_off: int, indexed_ts: int, offset_room: int,
                  time_room: int, offsets_out: np.ndarray,
                  times_out: np.ndarray) -> tuple[int, int, int, int, int]:
    """Kafka's ``LogSegment.append`` indexing rule over one append's batches (columns of the
    header walk, positions relative to ``base_position``), as Kafka applies it per batch::

        if (batchMaxTimestamp > maxTimestampSoFar()) maxTimestampAndOffsetSoFar = (ts, lastOffset)
        if (bytesSinceLastIndexEntry > indexIntervalBytes) {
            offsetIndex().append(batchLastOffset, physicalPosition);
            timeIndex().maybeAppend(maxTimestampSoFar(), shallowOffsetOfMaxTimestampSoFar());
            bytesSinceLastIndexEntry = 0;
        }
        bytesSinceLastIndexEntry += batch.sizeInBytes();

    with ``maybeAppend``'s "only above the last indexed timestamp" and kafkalog's "no entry once
    either index is full" (``offset_room`` / ``time_room``: free slots, the time index's last
    one kept for the roll; the segment rolls on a full index, a sparse index just stops
    growing). Writes the offset entries ``(last offset, position)`` to ``offsets_out`` and the
    time entries ``(max timestamp so far, its offset)`` to ``times_out``, both
    ``(len(position), 2)`` int64. Returns ``(offset entries, time entries, bytes since the last
    entry, max timestamp so far, its offset)``."""
    n_off = 0
    n_time = 0
    for i in range(position.shape[0]):
        ts = max_timestamp[i]
        if ts > running_ts:
            running_ts = ts
            running_off = last_offset[i]
        if since > interval and offset_room > 0 and time_room > 0:
            offsets_out[n_off, 0] = last_offset[i]
            offsets_out[n_off, 1] = base_position + position[i]
            n_off += 1
            offset_room -= 1
            if running_ts > indexed_ts:
                times_out[n_time, 0] = running_ts
                times_out[n_time, 1] = running_off
                n_time += 1
                indexed_ts = running_ts
                time_room -= 1
            since = 0
        since += size[i]
    return n_off, n_time, since, running_ts, running_off


# ------------------------------------------------------------------------- the cleaner's writer

@_njit
def write_rebuilt_records(out: np.ndarray, at: np.ndarray, body_len: np.ndarray,
                          ts_delta: np.ndarray, off_delta: np.ndarray, src: np.ndarray,
                          tail_start: np.ndarray, tail_len: np.ndarray) -> None:
    """Lay retained records out at ``out[at[i]:]`` (``DefaultRecord.writeTo``): a new length,
    attributes 0, a new timestamp delta, the offset delta, then the record's key, value and
    headers copied as they were (``src[tail_start[i]:][:tail_len[i]]``)."""
    for i in range(at.shape[0]):
        p = put_record_prefix(out, at[i], body_len[i], ts_delta[i], off_delta[i])
        n = tail_len[i]
        if n > 0:
            _copy(out, p, src, tail_start[i], n)

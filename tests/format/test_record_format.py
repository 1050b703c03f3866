"""Kafka's record format (v2 batches and records, control records, legacy v0/v1 messages, the
batch walk) against the behaviours Apache Kafka's own tests pin down.

Every test names, in brackets, the Kafka test (``Class.method``) of the checklist line it covers
(../shared/kafka_test_checklist.md, section 1); the numbers are the checklist's. The format
itself is ../shared/kafka_format.md sections 2-7. Varints live in tests/format/test_varint.py.

Malformed records are checked against every decoder we have: the scalar ``decode_record``, the
deep walk (``batch_records`` / ``iter_records``) and the columnar ``decode_batches`` (the path
Spark reads take), so a check missing in any one of them fails a test.

Not applicable here
-------------------
- [ByteUtilsTest.testReadUnsignedIntLEFromArray]: no general ByteUtils; little-endian ints occur
  only in LZ4 framing (compression module, tests/format/test_compression.py).
- [DefaultRecordTest.testInvalidKeySizePartial/testInvalidValueSizePartial] (stream and
  skip-key/value variants): there is no stream or skip-key/value record reader; the same inputs
  are run through all three buffer decoders instead.
- [MemoryRecordsTest.testHasRoomForMethod] (true before, false after close()): no builder object,
  ``build_batch``/``encode_batches`` are pure functions; the header-accounting half is tested
  through ``encode_batches(max_batch_bytes=)``.
- [MemoryRecordsTest.testFilterTo / testFilterToPreservesPartitionLeaderEpoch /
  testFilterToPreservesLogAppendTime / testFilterToEmptyBatchRetention / testEmptyBatchRetention /
  testEmptyBatchDeletion / testFilterToBatchDiscard / testFilterToAlreadyCompactedLog /
  testFilterToPreservesProducerInfo / testFilterToWithUndersizedBuffer /
  testBaseTimestampToDeleteHorizonConversion]: filterTo is the log cleaner's (storage_core/cleaner.py,
  columnar over runs of batches) and is tested with it in tests/storage/test_cleaner.py
  (test_retaining_last_empty_batch, test_retains_producer_last_sequence,
  test_commit_marker_retention_with_empty_batch, test_empty_batch_removal_with_sequence_reuse, ...).
  The output shapes filterTo leaves (empty batches, offset gaps, delete horizons) are tested here
  as inputs.
- [MemoryRecordsTest.testFilterToPreservesProducerInfo, the "idempotent/transactional batch with
  magic < 2 fails" half]: the legacy builders take no producer fields at all, so the state cannot
  be expressed.
- [MemoryRecordsBuilderTest.testEstimatedSizeInBytes]: no size estimate; sizes are exact (see
  the testSizeInBytes test).
- [MemoryRecordsBuilderTest.shouldThrowIllegalStateExceptionOn*] (abort/close/append after
  build): no builder state.
- [MemoryRecordsBuilderTest.buildUsingLogAppendTime/buildUsingCreateTime, the
  shallowOffsetOfMaxTimestamp half]: that is append bookkeeping of the log layer (issue for
  LogSegment/UnifiedLog), not a property of the bytes; the timestamp halves are tested here.
- [MemoryRecordsBuilderTest.convertV2ToV1UsingMixedCreateAndLogAppendTime]: kafkalog never
  down-converts (it writes v2 only).
- [FileRecordsTest.testFileSize / testOpenOversizeFile / testAppendProtectsFromOverflow /
  testSearch / testTruncate / testTruncateNotCalledIfSizeIs* / testPreallocateTrue/False/
  ClearShutdown / testSearchForTimestamp / testBytesLengthOfWriteTo]: FileRecords channel, size,
  search, truncate and preallocation belong to the LogSegment/FileRecords layer of the storage
  engine, not to the format codec.
- [FileRecordsTest.testOutOfRangeSlice, "slice start > size fails"]: there is no slice object;
  ``decode_run(start=, end=)`` ranges are tested for clamping and relative positions only.
- [MemoryRecordsTest.testNextBatchSize, "returns the full size even if payload is truncated"]:
  there is no firstBatchSize; a truncated batch is reported by the walk as ``partial`` with the
  position of its start, which is tested.
"""

from __future__ import annotations

import dataclasses
import mmap
import struct
import zlib

import crc32c
import lz4.frame
import pyarrow as pa
import pytest

from storage_core.errors import (CorruptRecordError, InvalidConfigError, KafkaLogError,
                                 UnknownMagicError, UnsupportedFormatError)
from storage_core.format import (CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, BatchHeader,
                                 CompressionType, ControlRecordType, EndTransactionMarker, Header,
                                 LogInputStream, RecordInput, batch_records, build_batch,
                                 decode_batches, decode_run, encode_batches,
                                 end_transaction_marker_batch, iter_records, legacy,
                                 write_empty_header)
from storage_core.format.compression import compress, decompress
from storage_core.format.record_batch import (compute_attributes, decode_record,
                                              decrement_sequence, encode_record,
                                              encode_record_body, ensure_valid,
                                              increment_sequence, set_last_offset,
                                              set_max_timestamp, set_partition_leader_epoch)
from storage_core.format.varint import encode_varint, encode_varlong

C = CompressionType
INT_MAX = 2**31 - 1
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
BIG = 1 << 30


# ================================================================================ helpers

def vsize(n: int, bits: int = 32) -> int:
    """Length of the zig-zag varint of ``n`` (our own arithmetic, not the library's)."""
    u = ((n << 1) ^ (n >> (bits - 1))) & ((1 << bits) - 1)
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def record_size(ts_delta, off_delta, key, value, headers=()) -> int:
    """DefaultRecord.sizeInBytes, computed from the field list of kafka_format.md section 3."""
    body = 1 + vsize(ts_delta, 64) + vsize(off_delta)
    for blob in (key, value):
        body += vsize(-1) if blob is None else vsize(len(blob)) + len(blob)
    body += vsize(len(headers))
    for hk, hv in headers:
        kb = hk.encode()
        body += vsize(len(kb)) + len(kb)
        body += vsize(-1) if hv is None else vsize(len(hv)) + len(hv)
    return vsize(body) + body


def fix_crc(buf: bytearray, pos: int = 0) -> None:
    """Recompute a v2 batch's CRC-32C over [21, end) after a deliberate edit."""
    size = 12 + struct.unpack_from(">i", buf, pos + 8)[0]
    struct.pack_into(">I", buf, pos + 17, crc32c.crc32c(bytes(buf[pos + 21:pos + size])))


def wrap_records(payload: bytes, *, count: int, base_offset: int = 0, attributes: int = 0,
                 base_ts: int = 1000, max_ts: int = 1000) -> bytes:
    """A v2 batch with a correct CRC around arbitrary (possibly malformed) record bytes."""
    head = HEADER.pack(base_offset, 49 + len(payload), -1, 2, 0, attributes, max(count - 1, 0),
                       base_ts, max_ts, -1, -1, -1, count)
    raw = bytearray(head + payload)
    fix_crc(raw)
    return bytes(raw)


def make_header(*, base_offset=0, base_timestamp=0, max_timestamp=0, base_sequence=-1,
                attributes=0, producer_id=-1, producer_epoch=-1) -> BatchHeader:
    return BatchHeader(base_offset, 49, -1, 2, 0, attributes, 0, base_timestamp, max_timestamp,
                       producer_id, producer_epoch, base_sequence, 1)


def assert_every_decoder_rejects(batch: bytes) -> None:
    """The deep walk and the columnar codec both refuse the batch as corrupt."""
    infos = list(LogInputStream(batch, verify=True))   # the header and CRC are fine
    assert len(infos) == 1
    with pytest.raises(CorruptRecordError):
        batch_records(batch, infos[0])
    with pytest.raises(CorruptRecordError):
        list(iter_records(batch))
    with pytest.raises(CorruptRecordError):
        decode_batches(batch)


def rows(table: pa.Table) -> list[tuple]:
    """Decoded rows as plain tuples (timestamp as int ms, headers as (key, value) pairs)."""
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    out = []
    for i, r in enumerate(table.to_pylist()):
        out.append((r["offset"], ts[i], r["timestampType"], r["key"], r["value"],
                    [(h["key"], h["value"]) for h in r["headers"]], r["producerId"],
                    r["isTransactional"], r["isControl"]))
    return out


def deep_rows(buf) -> list[tuple]:
    """The same tuples from the record-at-a-time walk."""
    out = []
    for info, r in iter_records(buf):
        h = info.header
        out.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                    [(x.key, x.value) for x in r.headers],
                    h.producer_id if h is not None else -1,
                    h.is_transactional if h is not None else False,
                    h.is_control if h is not None else False))
    return out


def table_of(records, with_headers=True) -> pa.Table:
    """(ts, key, value, headers) tuples as an encode_batches input table."""
    cols = {
        "key": pa.array([r[1] for r in records], pa.binary()),
        "value": pa.array([r[2] for r in records], pa.binary()),
        "timestamp": pa.array([r[0] for r in records], pa.int64()),
    }
    if with_headers:
        cols["headers"] = pa.array([[{"key": k, "value": v} for k, v in r[3]] for r in records],
                                   pa.list_(HEADER_TYPE))
    return pa.table(cols)


def inputs_of(records):
    return [RecordInput(r[2], r[1], r[0], r[3]) for r in records]


# A mixed record set: null/empty keys and values, null header values, timestamps going back
# (negative deltas), multi-byte varints (a 300-byte value).
MIXED = [
    (1_700_000_000_000, b"k0", b"v0", [("h", b"x")]),
    (1_700_000_000_005, None, b"v1", []),
    (1_699_999_999_000, b"k2", None, [("a", None), ("b", b"")]),
    (1_700_000_000_001, None, None, []),
    (1_700_000_000_002, b"", b"", [("", b"e")]),
    (1_700_000_100_000, b"k5", b"z" * 300, [("long", b"y" * 200)]),
] * 4


# ================================================================================ records

SERDE_HEADERS = [("foo", b"value"), ("bar", None), ("", b"")]


@pytest.mark.parametrize("key,value", [(b"hi", b"there"), (None, b"there"), (b"hi", None),
                                       (None, None), (b"", b"")])
def test_record_round_trip(key, value):
    """[DefaultRecordTest.testBasicSerde] offset = baseOffset + offsetDelta (37+10), sequence =
    baseSequence + offsetDelta (723+10), timestamp = baseTimestamp + timestampDelta; null key,
    null value and null header values survive; the size equals the computed size."""
    base_ts = 1_600_000_000_000
    raw = encode_record(10, 2345, key, value, SERDE_HEADERS)
    assert len(raw) == record_size(2345, 10, key, value, SERDE_HEADERS)
    hdr = make_header(base_offset=37, base_timestamp=base_ts, base_sequence=723)
    buf = b"\x99\x99\x99" + raw + b"\x77"      # the record sits inside a larger buffer
    rec, nxt = decode_record(buf, 3, hdr)
    assert nxt == 3 + len(raw)
    assert rec.offset == 47
    assert rec.sequence == 733
    assert rec.timestamp == base_ts + 2345
    assert rec.timestamp_type == CREATE_TIME
    assert rec.key == key
    assert rec.value == value
    assert rec.headers == tuple(Header(k, v) for k, v in SERDE_HEADERS)


def test_record_with_no_sequence_reports_no_sequence():
    """[DefaultRecordTest.testSerdeNoSequence] with batch baseSequence -1 a record's sequence is
    -1, not -1 + offsetDelta."""
    raw = encode_record(10, 0, b"k", b"v")
    rec, _ = decode_record(raw, 0, make_header(base_offset=100, base_sequence=-1))
    assert rec.offset == 110
    assert rec.sequence == -1


def test_record_sequence_wraps_past_int_max():
    """[DefaultRecordBatchTest.buildDefaultRecordBatchWithSequenceWrapAround] at record level:
    baseSequence Int.MAX-5 plus offsetDelta 10 is 4."""
    rec, _ = decode_record(encode_record(10, 0, b"k", b"v"), 0,
                           make_header(base_sequence=INT_MAX - 5))
    assert rec.sequence == 4


def test_log_append_time_record_reports_batch_max_timestamp():
    """kafka_format.md 2.3: under LogAppendTime every record reports the batch maxTimestamp,
    whatever its delta says."""
    hdr = make_header(base_timestamp=1000, max_timestamp=77, attributes=0x08)
    rec, _ = decode_record(encode_record(0, 500, b"k", b"v"), 0, hdr)
    assert rec.timestamp == 77
    assert rec.timestamp_type == LOG_APPEND_TIME


def _patch_header_count(key, value, headers, new_count) -> bytes:
    body = bytearray(encode_record_body(0, 0, key, value, headers))
    at = len(encode_record_body(0, 0, key, value, ())) - 1   # the count follows the value
    assert body[at] == 2 * len(headers)                       # zig-zag of a small count
    body[at] = 2 * new_count
    return encode_varint(len(body)) + bytes(body)


@pytest.mark.parametrize("present,claimed", [(3, 8), (4, 2)])
def test_header_count_not_matching_headers_is_rejected(present, claimed):
    """[DefaultRecordTest.testBasicSerdeInvalidHeaderCountTooHigh/TooLow] a header count of 8
    over 3 real headers, or 2 over 4, leaves missing or trailing bytes against the record
    length -> InvalidRecordException (CorruptRecordError)."""
    headers = [(f"h{i}", b"value%d" % i) for i in range(present)]
    raw = _patch_header_count(b"key", b"value", headers, claimed)
    with pytest.raises(CorruptRecordError):
        decode_record(raw, 0, make_header())
    assert_every_decoder_rejects(wrap_records(raw, count=1))


def _body_of_100(*fields: bytes) -> bytes:
    """A record whose length varint says 100, its fields, zero padding up to 100 bytes."""
    body = b"".join(fields)
    assert len(body) <= 100
    return encode_varint(100) + body + bytes(100 - len(body))


def _exact(*fields: bytes) -> bytes:
    """A record whose length varint is exactly the length of its fields (nothing to pad)."""
    body = b"".join(fields)
    return encode_varint(len(body)) + body


PREFIX = b"\x00" + encode_varlong(2) + encode_varint(1)      # attributes, tsDelta, offsetDelta
NULL = encode_varint(-1)

MALFORMED_BODIES = {
    # [DefaultRecordTest.testInvalidKeySize]
    "key length 105 > 100-byte body": _body_of_100(PREFIX, encode_varint(105)),
    # [DefaultRecordTest.testInvalidValueSize]
    "value length 105 > 100-byte body": _body_of_100(PREFIX, NULL, encode_varint(105)),
    # [DefaultRecordTest.testInvalidNumHeaders]
    "header count -1": _body_of_100(PREFIX, NULL, NULL, encode_varint(-1)),
    "header count > remaining bytes": _body_of_100(PREFIX, NULL, NULL, encode_varint(101)),
    # ... and with the body ending right after the count, so no later check can catch it
    "header count -1, body ends there": _exact(PREFIX, NULL, NULL, encode_varint(-1)),
    # [DefaultRecordTest.testInvalidHeaderKey]
    "header key length 105": _body_of_100(PREFIX, NULL, NULL, encode_varint(1), encode_varint(105)),
    # [DefaultRecordTest.testNullHeaderKey]
    "null header key": _body_of_100(PREFIX, NULL, NULL, encode_varint(1), NULL),
    # a reader skipping -1 key bytes would step back onto the -1 and read it as a null value,
    # ending exactly at the body's end: only the key-length check can refuse this one
    "null header key, body ends there": _exact(PREFIX, NULL, NULL, encode_varint(1), NULL),
    # [DefaultRecordTest.testInvalidHeaderValue]
    "header value length 105": _body_of_100(PREFIX, NULL, NULL, encode_varint(1), encode_varint(3),
                                            b"foo", encode_varint(105)),
}


@pytest.mark.parametrize("name", sorted(MALFORMED_BODIES))
def test_lengths_inside_record_are_checked(name):
    """[DefaultRecordTest.testInvalidKeySize/testInvalidValueSize/testInvalidNumHeaders/
    testInvalidHeaderKey/testNullHeaderKey/testInvalidHeaderValue] a key, value, header key or
    header value length past the 100-byte body, a negative or too-large header count, or a null
    header key (length -1) -> InvalidRecordException, from every decoder."""
    raw = MALFORMED_BODIES[name]
    with pytest.raises(CorruptRecordError):
        decode_record(raw, 0, make_header())
    assert_every_decoder_rejects(wrap_records(raw, count=1))


TRUNCATED_BODIES = {
    # [DefaultRecordTest.testUnderflowReadingTimestamp]: the body ends after the attributes
    "ends before timestampDelta": encode_varint(1) + b"\x00",
    # [DefaultRecordTest.testUnderflowReadingVarlong]: the body ends inside the varlong
    "ends mid-varlong": encode_varint(2) + b"\x00\x80",
    # [DefaultRecordTest.testInvalidVarlong]: an 11-byte varlong inside the body
    "11-byte varlong": encode_varint(12) + b"\x00" + b"\xff" * 10 + b"\x01",
}


@pytest.mark.parametrize("name", sorted(TRUNCATED_BODIES))
def test_truncated_record_body_is_invalid_record(name):
    """[DefaultRecordTest.testUnderflowReadingTimestamp/testUnderflowReadingVarlong/
    testInvalidVarlong] a body that ends before the timestamp delta, inside it, or holds an
    11-byte varlong -> InvalidRecordException, never a buffer underflow - even when more bytes
    follow the record (the body's end is the limit, not the buffer's)."""
    raw = TRUNCATED_BODIES[name]
    follower = encode_record(1, 0, b"next", b"record")
    for buf in (raw, raw + follower):
        with pytest.raises(CorruptRecordError):
            decode_record(buf, 0, make_header())
    assert_every_decoder_rejects(wrap_records(raw + follower, count=2))


def test_record_length_past_available_bytes():
    """[DefaultRecordTest.testInvalidSizeOfBodyInBytes] a length varint of 10 with only 5 bytes
    after it -> InvalidRecordException (from the record and from a batch holding it)."""
    raw = encode_varint(10) + b"\x00" * 5
    with pytest.raises(CorruptRecordError):
        decode_record(raw, 0, make_header())
    with pytest.raises(CorruptRecordError):     # ... even if the buffer is longer than the limit
        decode_record(raw + bytes(10), 0, make_header(), limit=len(raw))
    assert_every_decoder_rejects(wrap_records(raw, count=1))
    # the last record of a batch claiming more than is left, with enough bytes for the count
    # check to pass, and (as a huge length) at the very end of the buffer
    good = encode_record(0, 0, b"key", b"value")
    for tail in (encode_varint(50) + bytes(10), encode_varint(2**30)):
        assert_every_decoder_rejects(wrap_records(good + tail, count=2))


def test_over_wide_varint_in_record_reads_like_java():
    """[ByteUtilsTest.testVarintSerde] (in a record) a key length written as the 5-byte varint
    82 80 80 80 70 is 1 for Java (bits above 32 dropped); every decoder reads key b"k"."""
    raw = _exact(PREFIX, bytes.fromhex("8280808070"), b"k", encode_varint(1), b"v",
                 encode_varint(0))
    rec, _ = decode_record(raw, 0, make_header())
    assert (rec.key, rec.value) == (b"k", b"v")
    batch = wrap_records(raw, count=1)
    assert [r[3:5] for r in deep_rows(batch)] == [(b"k", b"v")]
    assert [r[3:5] for r in rows(decode_batches(batch))] == [(b"k", b"v")]


def test_skip_style_walk_over_compressed_batch_reports_record_sizes():
    """[DefaultRecordBatchTest.testSkipKeyValueIteratorCorrectness] (closest equivalent: no
    skip-key/value iterator) walking the decompressed payload of a compressed batch gives each
    record's size, offset, timestamp, sequence -1 and key/value presence; the first record
    ("a", "1", ts 1) is 9 bytes."""
    recs = [(1, b"a", b"1"), (2, b"b", b"2"), (3, b"c", b"3"), (1000, None, b"4"),
            (10000, b"e", None), (20000, None, None)]
    batch = build_batch([RecordInput(v, k, ts) for ts, k, v in recs], base_offset=0,
                        compression=C.LZ4)
    hdr = ensure_valid(batch, 0)
    payload = decompress(hdr.compression, batch[61:], max_size=BIG)
    pos, sizes = 0, []
    for i, (ts, k, v) in enumerate(recs):
        rec, nxt = decode_record(payload, pos, hdr)
        sizes.append(nxt - pos)
        assert (rec.offset, rec.timestamp, rec.sequence, rec.attributes) == (i, ts, -1, 0)
        assert (rec.key, rec.value) == (k, v)
        pos = nxt
    assert pos == len(payload)
    assert sizes[0] == 9
    assert sizes == [record_size(ts - 1, i, k, v) for i, (ts, k, v) in enumerate(recs)]


# ================================================================================ batches

@pytest.mark.parametrize("ts_type", [CREATE_TIME, LOG_APPEND_TIME])
@pytest.mark.parametrize("transactional", [False, True])
@pytest.mark.parametrize("control", [False, True])
def test_write_empty_header(ts_type, transactional, control):
    """[DefaultRecordBatchTest.testWriteEmptyHeader] an empty batch written with base offset 15,
    last offset 37, sequence 983 reads back with lastSequence 983+22, baseTimestamp -1, the given
    maxTimestamp and the transactional/control/timestamp-type flags (all 8 combinations); it is
    61 bytes, valid, and readers skip it gracefully."""
    ts = 1_700_000_123_456
    raw = write_empty_header(base_offset=15, last_offset=37, max_timestamp=ts,
                             producer_id=23423, producer_epoch=145, base_sequence=983,
                             timestamp_type=ts_type, transactional=transactional,
                             control=control, partition_leader_epoch=293)
    assert len(raw) == 61
    h = ensure_valid(raw, 0)
    assert (h.base_offset, h.last_offset, h.last_offset_delta) == (15, 37, 22)
    assert h.batch_length == 49
    assert h.records_count == 0
    assert h.base_sequence == 983
    assert h.last_sequence == 983 + 22
    assert h.base_timestamp == -1
    assert h.max_timestamp == ts
    assert (h.producer_id, h.producer_epoch, h.partition_leader_epoch) == (23423, 145, 293)
    assert h.timestamp_type == ts_type
    assert h.is_transactional == transactional
    assert h.is_control == control
    assert h.compression == 0
    assert raw[22] == (0x08 * ts_type) | (0x10 * transactional) | (0x20 * control)
    (info,) = LogInputStream(raw, verify=True)
    assert batch_records(raw, info) == []
    run = decode_run(raw)
    assert (run.table.num_rows, run.batches, run.next_position, run.partial) == (0, 1, 61, False)


def _two_records(**kw) -> bytes:
    return build_batch([RecordInput(b"1", b"a", 1), RecordInput(b"2", b"b", 2)],
                       base_offset=1234567, **kw)


def test_non_idempotent_batch_has_no_producer_fields():
    """[DefaultRecordBatchTest.buildDefaultRecordBatch] a plain batch has producerId -1,
    producerEpoch -1, baseSequence -1, lastSequence -1, maxTimestamp 2 (its largest)."""
    raw = _two_records()
    h = ensure_valid(raw, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)
    assert h.last_sequence == -1
    assert h.max_timestamp == 2
    assert (h.base_offset, h.last_offset, h.records_count) == (1234567, 1234568, 2)
    (info,) = LogInputStream(raw)
    assert [r.sequence for r in batch_records(raw, info)] == [-1, -1]


def test_idempotent_batch_last_sequence():
    """[DefaultRecordBatchTest.buildDefaultRecordBatchWithProducerId] baseSequence 983 and two
    records give lastSequence 984; the records carry sequences 983 and 984."""
    raw = _two_records(producer_id=23423, producer_epoch=145, base_sequence=983)
    h = ensure_valid(raw, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (23423, 145, 983)
    assert h.last_sequence == 984
    (info,) = LogInputStream(raw)
    assert [r.sequence for r in batch_records(raw, info)] == [983, 984]


def test_sequence_wraps_around_in_batch():
    """[DefaultRecordBatchTest.buildDefaultRecordBatchWithSequenceWrapAround] baseSequence
    Int.MAX-1 with 3 records: sequences Int.MAX-1, Int.MAX, 0; lastSequence 0. The columnar
    encoder, splitting into one batch per record, starts the batches at the same sequences."""
    recs = [RecordInput(b"%d" % i, None, 10 + i) for i in range(3)]
    raw = build_batch(recs, producer_id=5, producer_epoch=0, base_sequence=INT_MAX - 1)
    h = ensure_valid(raw, 0)
    assert h.last_sequence == 0
    (info,) = LogInputStream(raw)
    assert [r.sequence for r in batch_records(raw, info)] == [INT_MAX - 1, INT_MAX, 0]

    many = encode_batches(table_of([(10 + i, None, b"%d" % i, []) for i in range(3)]),
                          producer_id=5, producer_epoch=0, base_sequence=INT_MAX - 1,
                          max_batch_bytes=68)
    infos = list(LogInputStream(many, verify=True))
    assert [i.header.base_sequence for i in infos] == [INT_MAX - 1, INT_MAX, 0]


@pytest.mark.parametrize("fn,args,expected", [
    (increment_sequence, (5, 5), 10), (increment_sequence, (INT_MAX, 1), 0),
    (increment_sequence, (INT_MAX - 5, 10), 4), (decrement_sequence, (5, 5), 0),
    (decrement_sequence, (0, 1), INT_MAX)])
def test_sequence_arithmetic(fn, args, expected):
    """[DefaultRecordBatchTest.testIncrementSequence/testDecrementSequence]"""
    assert fn(*args) == expected


SIZE_CASES = {
    "key+value": [(1000, b"key", b"value", [])],
    "no key": [(1000, None, b"value", [])],
    "no value": [(1000, b"key", None, [])],
    "neither": [(1000, None, None, [])],
    "headers": [(1000, b"k", b"v", [("a", b"1"), ("bb", None), ("ccc", b"x" * 200)])],
    "mixed": MIXED,
}


@pytest.mark.parametrize("case", sorted(SIZE_CASES))
def test_batch_size_equals_computed_size(case):
    """[DefaultRecordBatchTest.testSizeInBytes] 61 bytes of header plus each record's computed
    size equals the serialized batch, with or without key, value and headers; the columnar
    encoder writes the very same bytes."""
    recs = SIZE_CASES[case]
    raw = build_batch(inputs_of(recs))
    base_ts = recs[0][0]
    computed = 61 + sum(record_size(ts - base_ts, i, k, v, hs)
                        for i, (ts, k, v, hs) in enumerate(recs))
    assert len(raw) == computed
    assert ensure_valid(raw, 0).size_in_bytes == computed
    assert encode_batches(table_of(recs)) == raw


def test_overwritten_batch_length_is_invalid():
    """[DefaultRecordBatchTest.testInvalidRecordSize] the length field overwritten with 10
    makes the batch invalid: ensureValid and every reader raise CorruptRecordException."""
    raw = bytearray(build_batch([RecordInput(b"v%d" % i, b"k", 10 + i) for i in range(3)]))
    struct.pack_into(">i", raw, 8, 10)
    with pytest.raises(CorruptRecordError):
        ensure_valid(raw, 0)
    with pytest.raises(CorruptRecordError):
        list(LogInputStream(bytes(raw)))
    with pytest.raises(CorruptRecordError):
        decode_batches(bytes(raw))


def test_overwritten_crc_covered_field_is_invalid():
    """[DefaultRecordBatchTest.testInvalidCrc] lastOffsetDelta rewritten without recomputing the
    CRC: ensureValid and every verifying reader raise CorruptRecordException."""
    raw = bytearray(build_batch([RecordInput(b"v%d" % i, b"k", 10 + i) for i in range(3)]))
    struct.pack_into(">i", raw, 23, 23)
    raw = bytes(raw)
    with pytest.raises(CorruptRecordError):
        ensure_valid(raw, 0)
    with pytest.raises(CorruptRecordError):
        list(LogInputStream(raw, verify=True))
    with pytest.raises(CorruptRecordError):
        list(iter_records(raw))
    with pytest.raises(CorruptRecordError):
        decode_batches(raw)


@pytest.mark.parametrize("codec", [C.NONE, C.GZIP])
@pytest.mark.parametrize("claimed", [5, 2, INT_MAX])
def test_records_count_not_matching_records(codec, claimed):
    """[DefaultRecordBatchTest.testInvalidRecordCountTooManyNonCompressedV2/
    TooLittleNonCompressedV2/TooManyCompressedV2/TooLittleCompressedV2] a count of 5 or 2 over
    3 real records (CRC recomputed, so only the count is wrong) -> InvalidRecordException on
    iteration, uncompressed and gzip; a hostile Int.MAX count is refused the same way (before
    anything is sized by it)."""
    raw = bytearray(build_batch([RecordInput(b"v%d" % i, b"k", 10 + i) for i in range(3)],
                                compression=codec))
    struct.pack_into(">i", raw, 57, claimed)
    fix_crc(raw)
    assert ensure_valid(raw, 0).records_count == claimed
    assert_every_decoder_rejects(bytes(raw))


def test_negative_records_count_is_invalid():
    """kafka_format.md 2.3: recordsCount < 0 -> InvalidRecordException, from every reader."""
    raw = bytearray(build_batch([RecordInput(b"v", b"k", 10)]))
    struct.pack_into(">i", raw, 57, -1)
    fix_crc(raw)
    raw = bytes(raw)
    with pytest.raises(CorruptRecordError):
        ensure_valid(raw, 0)
    (info,) = LogInputStream(raw)          # the shallow walk does not look at the count
    with pytest.raises(CorruptRecordError):
        batch_records(raw, info)
    with pytest.raises(CorruptRecordError):
        list(iter_records(raw))
    with pytest.raises(CorruptRecordError):
        decode_batches(raw)


def test_set_last_offset_keeps_batch_valid():
    """[DefaultRecordBatchTest.testSetLastOffset] setLastOffset(500) on a 3-record batch makes
    baseOffset 498 and the records 498..500; baseOffset is outside the CRC, so the CRC is
    untouched and still valid. Works on a batch that is not the first in the buffer."""
    first = build_batch([RecordInput(b"x", None, 5)])
    second = build_batch([RecordInput(b"v%d" % i, b"k", 10 + i) for i in range(3)])
    buf = bytearray(first + second)
    crc_before = BatchHeader.parse(buf, len(first)).crc
    set_last_offset(buf, len(first), 500)
    h = ensure_valid(buf, len(first))
    assert (h.base_offset, h.last_offset, h.crc) == (498, 500, crc_before)
    assert buf[:len(first)] == first
    assert decode_batches(bytes(buf)).column("offset").to_pylist() == [0, 498, 499, 500]
    assert [r.offset for _, r in iter_records(bytes(buf))] == [0, 498, 499, 500]


def test_set_partition_leader_epoch_keeps_batch_valid():
    """[DefaultRecordBatchTest.testSetPartitionLeaderEpoch] the epoch is outside the CRC."""
    buf = bytearray(build_batch([RecordInput(b"v%d" % i, b"k", 10 + i) for i in range(3)]))
    crc_before = BatchHeader.parse(buf, 0).crc
    set_partition_leader_epoch(buf, 0, 500)
    h = ensure_valid(buf, 0)
    assert (h.partition_leader_epoch, h.crc) == (500, crc_before)


@pytest.mark.parametrize("codec", [C.NONE, C.GZIP])
def test_set_log_append_time(codec):
    """[DefaultRecordBatchTest.testSetLogAppendTime] setMaxTimestamp(LOG_APPEND_TIME, 15) flips
    the timestamp-type bit, recomputes the CRC (batch still valid) and every record then reports
    timestamp 15; switching back to CreateTime restores the record timestamps (deltas kept)."""
    recs = [RecordInput(b"v%d" % i, b"k", 1000 + i) for i in range(3)]
    buf = bytearray(build_batch(recs, compression=codec))
    crc_before = BatchHeader.parse(buf, 0).crc
    set_max_timestamp(buf, 0, LOG_APPEND_TIME, 15)
    h = ensure_valid(buf, 0)
    assert h.crc != crc_before
    assert (h.timestamp_type, h.max_timestamp, h.compression) == (LOG_APPEND_TIME, 15, codec)
    got = [(r.timestamp, r.timestamp_type) for _, r in iter_records(bytes(buf))]
    assert got == [(15, LOG_APPEND_TIME)] * 3
    table = decode_batches(bytes(buf))
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [15, 15, 15]
    assert table.column("timestampType").to_pylist() == [LOG_APPEND_TIME] * 3

    set_max_timestamp(buf, 0, CREATE_TIME, 1002)
    assert bytes(buf) == build_batch(recs, compression=codec)


def test_set_max_timestamp_refuses_no_timestamp_type():
    """[DefaultRecordBatchTest.testSetNoTimestampTypeNotAllowed] NO_TIMESTAMP_TYPE is refused
    (IllegalArgumentException) and the batch is left as it was; v2 attributes cannot encode it."""
    buf = bytearray(build_batch([RecordInput(b"v", b"k", 10)]))
    before = bytes(buf)
    with pytest.raises(ValueError):
        set_max_timestamp(buf, 0, NO_TIMESTAMP_TYPE, 15)
    assert bytes(buf) == before
    with pytest.raises(ValueError):
        compute_attributes(timestamp_type=NO_TIMESTAMP_TYPE)
    with pytest.raises(ValueError):
        build_batch([RecordInput(b"v")], timestamp_type=NO_TIMESTAMP_TYPE)


def test_control_batch_round_trip():
    """[DefaultRecordBatchTest.testReadAndWriteControlBatch] a control batch holding a COMMIT
    marker with coordinatorEpoch 15 is a control batch with one record whose marker
    deserializes back equal; the columnar decoder flags the row as control."""
    marker = EndTransactionMarker(ControlRecordType.COMMIT, 15)
    raw = end_transaction_marker_batch(marker, offset=0, timestamp=1_700_000_000_000,
                                       producer_id=1, producer_epoch=0)
    h = ensure_valid(raw, 0)
    assert h.is_control and h.is_transactional
    assert h.records_count == 1
    (info,) = LogInputStream(raw)
    (rec,) = batch_records(raw, info)
    assert ControlRecordType.parse(rec.key) is ControlRecordType.COMMIT
    assert EndTransactionMarker.deserialize(rec.key, rec.value) == marker
    table = decode_batches(raw)
    assert table.column("isControl").to_pylist() == [True]
    assert table.column("isTransactional").to_pylist() == [True]


@pytest.mark.parametrize("codec", list(C))
def test_streaming_and_eager_decoders_agree(codec):
    """[DefaultRecordBatchTest.testStreamingIteratorConsistency] for every compression type the
    columnar decoder and the record-at-a-time walk yield the same records, equal to what was
    written (batches from build_batch and from encode_batches, several per buffer)."""
    one = build_batch(inputs_of(MIXED), base_offset=100, compression=codec,
                      producer_id=7, producer_epoch=1, base_sequence=0, transactional=True)
    many = encode_batches(table_of(MIXED), compression=codec.name_kafka, base_offset=124,
                          max_batch_bytes=600)
    buf = one + many
    assert len(list(LogInputStream(buf, verify=True))) > 2
    expected = ([(100 + i, ts, 0, k, v, [tuple(h) for h in hs], 7, True, False)
                 for i, (ts, k, v, hs) in enumerate(MIXED)]
                + [(124 + i, ts, 0, k, v, [tuple(h) for h in hs], -1, False, False)
                   for i, (ts, k, v, hs) in enumerate(MIXED)])
    assert rows(decode_batches(buf)) == expected
    assert deep_rows(buf) == expected


NEGATIVE_LENGTHS = {
    "key length -2": _exact(PREFIX, encode_varint(-2), encode_varint(1), b"v", encode_varint(0)),
    "value length -2": _exact(PREFIX, NULL, encode_varint(-2), encode_varint(0)),
    "header value length -2": _exact(PREFIX, NULL, NULL, encode_varint(1), encode_varint(1),
                                     b"h", encode_varint(-2)),
}


@pytest.mark.parametrize("name", sorted(NEGATIVE_LENGTHS))
def test_negative_lengths_read_as_null_by_every_decoder(name):
    """[DefaultRecordBatchTest.testStreamingIteratorConsistency] + DefaultRecord.readFrom: a
    negative key, value or header-value length other than -1 still means null; the columnar
    decoder must read the batch exactly as the record walk does."""
    batch = wrap_records(NEGATIVE_LENGTHS[name], count=1)
    deep = deep_rows(batch)
    assert len(deep) == 1 and deep[0][3] is None
    assert rows(decode_batches(batch)) == deep


# ================================================================================ control records

def test_control_record_type_parse_unknown_type():
    """[ControlRecordTypeTest.testParseUnknownType] type 337 parses as UNKNOWN."""
    assert ControlRecordType.parse(struct.pack(">hh", 0, 337)) is ControlRecordType.UNKNOWN


def test_control_record_type_parse_newer_version():
    """[ControlRecordTypeTest.testParseUnknownVersion] version 5 with extra trailing bytes still
    parses its type (ABORT)."""
    key = struct.pack(">hhi", 5, 0, 0x12345678) + b"more"
    assert ControlRecordType.parse(key) is ControlRecordType.ABORT


@pytest.mark.parametrize("ctype", [t for t in ControlRecordType if t is not ControlRecordType.UNKNOWN])
def test_control_record_type_round_trip(ctype):
    """[ControlRecordTypeTest.testRoundTrip] every known type's key (version 0, type) parses
    back to the same type."""
    key = ctype.record_key()
    assert key == struct.pack(">hh", 0, int(ctype))
    assert ControlRecordType.parse(key) is ctype


def test_control_record_key_invalid_forms():
    """kafka_format.md 5: a key shorter than 4 bytes or with a negative version is invalid; the
    UNKNOWN type cannot be written."""
    for bad in (b"", b"\x00\x00\x00", None, struct.pack(">hh", -1, 1)):
        with pytest.raises(CorruptRecordError):
            ControlRecordType.parse(bad)
    with pytest.raises(ValueError):
        ControlRecordType.UNKNOWN.record_key()


@pytest.mark.parametrize("ctype", [ControlRecordType.UNKNOWN, ControlRecordType.LEADER_CHANGE])
def test_end_txn_marker_refuses_non_marker_types(ctype):
    """[EndTransactionMarkerTest.testUnknownControlTypeNotAllowed/
    testCannotDeserializeUnknownControlType] a marker of type UNKNOWN (or any non ABORT/COMMIT)
    can neither be built nor deserialized (IllegalArgumentException)."""
    with pytest.raises(ValueError):
        EndTransactionMarker(ctype, 24)
    key = struct.pack(">hh", 0, 337 if ctype is ControlRecordType.UNKNOWN else int(ctype))
    with pytest.raises(ValueError):
        EndTransactionMarker.deserialize(key, struct.pack(">hi", 0, 24))


@pytest.mark.parametrize("value", [struct.pack(">hi", -1, 79), b"", None, b"\x00\x00\x00\x00\x01"])
def test_end_txn_marker_invalid_values(value):
    """[EndTransactionMarkerTest.testIllegalNegativeVersion/testNotEnoughBytes] version -1, or
    fewer than 6 bytes (empty, 5 bytes, none) -> InvalidRecordException."""
    with pytest.raises(CorruptRecordError):
        EndTransactionMarker.deserialize(ControlRecordType.COMMIT.record_key(), value)


@pytest.mark.parametrize("ctype", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
def test_end_txn_marker_serde(ctype):
    """[EndTransactionMarkerTest.testSerde/testDeserializeNewerVersion] value = version int16 +
    coordinatorEpoch int32; coordinatorEpoch 79 round-trips; a version-5 value with trailing
    bytes still yields 79."""
    marker = EndTransactionMarker(ctype, 79)
    assert marker.value() == bytes.fromhex("0000 0000004F")
    assert EndTransactionMarker.deserialize(ctype.record_key(), marker.value()) == marker
    newer = struct.pack(">hi", 5, 79) + b"\x01\x02\x03 trailing"
    assert EndTransactionMarker.deserialize(ctype.record_key(), newer) == marker


# ================================================================================ legacy

LEGACY_KEYS = [None, b"", b"key", bytes(range(256)) * 4]
LEGACY_VALUES = [None, b"", b"value", b"\xab" * 1000]


def _own_legacy_crc(magic, attrs, ts, key, value) -> int:
    """CRC-32 over magic..end, packed by hand from kafka_format.md 6."""
    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += struct.pack(">q", ts)
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    return zlib.crc32(body)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_fields(magic):
    """[LegacyRecordTest.testFields] magic 0 reports timestamp -1 and NO_TIMESTAMP_TYPE; magic 1
    the given timestamp (-1, 0, 1) and CREATE_TIME; null and empty key/value are told apart; the
    codec attribute and the CRC (recomputed from the fields) are as written."""
    for ts in (-1, 0, 1):
        for key in LEGACY_KEYS:
            for value in LEGACY_VALUES:
                for codec in (0, 1, 2, 3):
                    raw = legacy.build_message(42, value, key, magic=magic, timestamp=ts,
                                               compression=codec)
                    e = legacy.parse_entry(raw, 0)
                    assert (e.offset, e.magic, e.compression) == (42, magic, codec)
                    assert e.size_in_bytes == len(raw)
                    assert e.key == key and e.value == value
                    assert (e.key is None) == (key is None)
                    if magic == 0:
                        assert (e.timestamp, e.timestamp_type) == (-1, NO_TIMESTAMP_TYPE)
                    else:
                        assert (e.timestamp, e.timestamp_type) == (ts, CREATE_TIME)
                    assert e.crc == _own_legacy_crc(magic, codec, ts, key, value)
                    if codec == 0:
                        (r,) = legacy.deep_records(e, max_decompressed=BIG)
                        assert (r.offset, r.key, r.value) == (42, key, value)
                        assert (r.timestamp, r.timestamp_type) == (e.timestamp, e.timestamp_type)


def _flip(raw: bytes, i: int) -> bytes:
    b = bytearray(raw)
    b[i] = 69 if b[i] != 69 else 70          # Kafka's test writes 69 into the byte
    return bytes(b)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_crc_catches_any_corrupted_byte(magic):
    """[LegacyRecordTest.testChecksum] the CRC matches a recomputation from the fields, and
    overwriting any single byte after the CRC field (here: all but the magic byte, see the next
    test) makes the message invalid -> CorruptRecordException, directly and through the walk."""
    raw = legacy.build_message(3, b"value", b"key", magic=magic, timestamp=12345)
    assert legacy.parse_entry(raw, 0).crc == _own_legacy_crc(magic, 0, 12345, b"key", b"value")
    for i in range(17, len(raw)):
        bad = _flip(raw, i)
        with pytest.raises(CorruptRecordError):
            legacy.parse_entry(bad, 0)
        with pytest.raises(CorruptRecordError):
            decode_batches(bad)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_corrupted_magic_byte_is_corruption(magic):
    """[LegacyRecordTest.testChecksum] byte 16 (the magic, covered by the CRC) overwritten with
    69 -> CorruptRecordException, for a message and for a message inside a compressed wrapper."""
    raw = legacy.build_message(3, b"value", b"key", magic=magic, timestamp=12345)
    with pytest.raises(CorruptRecordError):
        legacy.parse_entry(_flip(raw, 16), 0)
    inner = bytearray(legacy.build_message(0, b"v", b"k", magic=magic, timestamp=1))
    inner[16] = 69
    size = struct.unpack_from(">i", inner, 8)[0]
    struct.pack_into(">I", inner, 12, zlib.crc32(bytes(inner[16:12 + size])))  # CRC "fixed" too
    wrapper = legacy.build_message(0, compress(C.GZIP, bytes(inner), magic=magic), None,
                                   magic=magic, timestamp=1, compression=C.GZIP)
    with pytest.raises(CorruptRecordError):
        decode_batches(wrapper)


def test_legacy_too_small_or_bad_checksum():
    """[SimpleLegacyRecordTest.testIsValidWithTooSmallBuffer/testIsValidWithChecksumMismatch]
    two bytes of a message, a size field below the 14-byte minimum, or a wrong stored CRC ->
    CorruptRecordException."""
    with pytest.raises(CorruptRecordError):
        legacy.parse_entry(b"\x00\x01", 0)
    raw = legacy.build_message(0, b"value", b"key", magic=1, timestamp=5)
    with pytest.raises(CorruptRecordError):
        legacy.parse_entry(raw[:20], 0)
    small = bytearray(raw)
    struct.pack_into(">i", small, 8, 2)
    with pytest.raises(CorruptRecordError):
        legacy.parse_entry(bytes(small), 0)
    wrong = bytearray(raw)
    struct.pack_into(">I", wrong, 12, legacy.parse_entry(raw, 0).crc ^ 1)
    with pytest.raises(CorruptRecordError):
        legacy.parse_entry(bytes(wrong), 0)
    assert legacy.parse_entry(bytes(wrong), 0, verify_crc=False).value == b"value"
    with pytest.raises(CorruptRecordError):
        decode_batches(bytes(wrong))


@pytest.mark.parametrize("value", [None, "empty"], ids=["null-value", "no-inner-records"])
def test_legacy_compressed_wrapper_without_records(value):
    """[SimpleLegacyRecordTest.testCompressedIterationWithNullValue/
    testCompressedIterationWithEmptyRecords] a gzip wrapper whose value is null, or whose
    compressed payload holds no inner message -> InvalidRecordException on iteration."""
    payload = None if value is None else compress(C.GZIP, b"", magic=1)
    raw = legacy.build_message(0, payload, None, magic=1, timestamp=1, compression=C.GZIP)
    e = legacy.parse_entry(raw, 0)
    with pytest.raises(CorruptRecordError):
        legacy.deep_records(e, max_decompressed=BIG)
    with pytest.raises(CorruptRecordError):
        list(iter_records(raw))
    with pytest.raises(CorruptRecordError):
        decode_batches(raw)


# ================================================================================ MemoryRecords

ITER_RECS = [(1, b"a", b"1"), (2, b"b", b"2"), (3, b"c", b"3"), (4, None, b"4"),
             (5, b"d", None), (6, None, None)]
PID, EPOCH, SEQ, LEADER_EPOCH = 134234, 28, 777, 998


def _built_run(magic, codec, base) -> bytes:
    if magic == 2:
        return build_batch([RecordInput(v, k, ts) for ts, k, v in ITER_RECS], base_offset=base,
                           compression=codec, producer_id=PID, producer_epoch=EPOCH,
                           base_sequence=SEQ, partition_leader_epoch=LEADER_EPOCH)
    if codec == C.NONE:
        return b"".join(legacy.build_message(base + i, v, k, magic=magic, timestamp=ts)
                        for i, (ts, k, v) in enumerate(ITER_RECS))
    return legacy.build_compressed([(k, v, ts) for ts, k, v in ITER_RECS], magic=magic,
                                   compression=codec, wrapper_offset=base + len(ITER_RECS) - 1)


@pytest.mark.parametrize("base", [0, 57])
@pytest.mark.parametrize("magic,codec", [(m, c) for m in (0, 1, 2) for c in C
                                         if not (c is C.ZSTD and m < 2)])
def test_iterate_built_batches(magic, codec, base):
    """[MemoryRecordsTest.testIterator] batches built with magic 0/1/2, any codec, base offset 0
    or 57: a v2 batch carries producerId/epoch/baseSequence, partitionLeaderEpoch 998, count 6,
    maxTimestamp = the last record's; legacy records report producer id -1 (v0 also timestamp
    type NO_TIMESTAMP_TYPE and timestamp -1); lastOffset = baseOffset + count - 1."""
    buf = _built_run(magic, codec, base)
    infos = list(LogInputStream(buf, verify=True))
    last = base + len(ITER_RECS) - 1
    if magic == 2:
        (info,) = infos
        h = info.header
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (PID, EPOCH, SEQ)
        assert h.partition_leader_epoch == LEADER_EPOCH
        assert h.records_count == 6
        assert h.max_timestamp == 6
        assert (info.base_offset, info.last_offset) == (base, last)
        assert [r.sequence for r in batch_records(buf, info)] == list(range(SEQ, SEQ + 6))
    else:
        assert all(i.header is None and i.entry.magic == magic for i in infos)
        if codec == C.NONE:
            assert [i.last_offset for i in infos] == list(range(base, last + 1))
        else:
            (info,) = infos
            assert info.last_offset == last
            assert info.compression == codec
    ts_type = NO_TIMESTAMP_TYPE if magic == 0 else CREATE_TIME
    expected = [(base + i, -1 if magic == 0 else ts, ts_type, k, v, [],
                 PID if magic == 2 else -1, False, False)
                for i, (ts, k, v) in enumerate(ITER_RECS)]
    assert rows(decode_batches(buf)) == expected
    assert deep_rows(buf) == expected


# -- golden checksums (MemoryRecordsTest.testChecksum)

GOLDEN_RECS = [(283843, b"key1", b"value1"), (1234, b"key2", b"value2")]
# Kafka's LZ4 frame header (kafka_format.md 4.3): v0 carries the "broken" HC byte 0x1A
KAFKA_LZ4_HEADER = {0: bytes.fromhex("04224D1860401A"), 1: bytes.fromhex("04224D18604082")}
GOLDEN_LEGACY_LZ4 = {0: 66944826, 1: 1407303399}


@pytest.mark.parametrize("codec,expected", [(C.NONE, 3851219455), (C.LZ4, 2745969314)])
def test_golden_checksum_v2(codec, expected):
    """[MemoryRecordsTest.testChecksum] v2 (CRC-32C) checksums of the batch of
    (283843,"key1","value1"),(1234,"key2","value2") at offset 0, CreateTime, no producer,
    leader epoch -1: none 3851219455, lz4 2745969314. (The LZ4 block of this 36-byte payload is
    stored raw by Kafka's rule "compressed >= raw", so this case does not exercise the block
    compressor; see the legacy LZ4 tests.)"""
    raw = build_batch([RecordInput(v, k, ts) for ts, k, v in GOLDEN_RECS], compression=codec)
    h = ensure_valid(raw, 0)
    assert h.crc == expected
    assert h.crc == crc32c.crc32c(raw[21:])     # read unsigned, computed over [21, end)


@pytest.mark.parametrize("magic,expected", [(0, 1978725405), (1, 109425508)])
def test_golden_checksum_legacy_uncompressed(magic, expected):
    """[MemoryRecordsTest.testChecksum] an uncompressed legacy "batch" is its first message
    (offset 0, key1/value1, v1 timestamp 283843): v0 1978725405, v1 109425508."""
    buf = b"".join(legacy.build_message(i, v, k, magic=magic, timestamp=ts)
                   for i, (ts, k, v) in enumerate(GOLDEN_RECS))
    first = next(iter(LogInputStream(buf, verify=True)))
    assert first.entry.crc == expected


def _legacy_inner(magic) -> bytes:
    return b"".join(legacy.build_message(i, v, k, magic=magic, timestamp=ts)
                    for i, (ts, k, v) in enumerate(GOLDEN_RECS))


def _kafka_lz4(magic, data: bytes) -> bytes:
    """What Kafka's Lz4BlockOutputStream writes: its header, then the block of lz4-java's
    fastCompressor (= liblz4 LZ4_compress_default, which liblz4's frame API with independent
    blocks also uses), then the 0 end mark. Only the block comes from lz4.frame."""
    frame = lz4.frame.compress(data, block_linked=False, store_size=False,
                               content_checksum=False, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    assert frame[4:7] == KAFKA_LZ4_HEADER[1][4:] and frame[-4:] == bytes(4)
    return KAFKA_LZ4_HEADER[magic] + frame[7:]


@pytest.mark.parametrize("magic", [0, 1])
def test_golden_checksum_legacy_lz4_wrapper_layout(magic):
    """[MemoryRecordsTest.testChecksum] with Kafka's own LZ4 bytes as the value, our legacy
    wrapper (offset = last inner offset 1, v1 timestamp = max 283843, CreateTime, codec 3, null
    key) has exactly Kafka's CRC: v0 66944826, v1 1407303399; and our reader decodes it."""
    value = _kafka_lz4(magic, _legacy_inner(magic))
    raw = legacy.build_message(1, value, None, magic=magic,
                               timestamp=283843 if magic == 1 else -1, compression=C.LZ4)
    (info,) = LogInputStream(raw, verify=True)
    assert info.entry.crc == GOLDEN_LEGACY_LZ4[magic]
    assert rows(decode_batches(raw)) == [
        (i, ts if magic == 1 else -1, CREATE_TIME if magic == 1 else NO_TIMESTAMP_TYPE, k, v,
         [], -1, False, False) for i, (ts, k, v) in enumerate(GOLDEN_RECS)]


@pytest.mark.parametrize("magic", [0, 1])
def test_golden_checksum_legacy_lz4(magic):
    """[MemoryRecordsTest.testChecksum] v0 lz4 66944826, v1 lz4 1407303399 from our builder."""
    raw = legacy.build_compressed([(k, v, ts) for ts, k, v in GOLDEN_RECS], magic=magic,
                                  compression=C.LZ4, wrapper_offset=1)
    assert legacy.parse_entry(raw, 0).crc == GOLDEN_LEGACY_LZ4[magic]


def test_uint32_fields_are_unsigned_big_endian():
    """[ByteUtilsTest.testReadUnsignedInt] (closest equivalent) the uint32 CRC fields are read
    and written big-endian and unsigned: 133444 and 3851219455 (> Int.MAX) round-trip through
    the v2 header, and a legacy CRC above Int.MAX is reported unsigned."""
    h = ensure_valid(build_batch([RecordInput(v, k, ts) for ts, k, v in GOLDEN_RECS]), 0)
    for crc in (133444, 3851219455):
        packed = dataclasses.replace(h, crc=crc).pack()
        assert packed[17:21] == crc.to_bytes(4, "big")
        assert BatchHeader.parse(packed).crc == crc
    assert legacy.parse_entry(legacy.build_message(0, b"value1", b"key1", magic=0), 0).crc \
        == 1978725405


# -- the spec's worked examples (byte-exact)

def test_worked_example_single_record_batch():
    """kafka_format.md 2.4 (verified against kafka-python): offset 0, leader epoch 0,
    CreateTime 1700000000000, value "hello": these 73 bytes, CRC 0xE641A44B."""
    expected = bytes.fromhex(
        "0000000000000000 0000003d 00000000 02 e641a44b 0000 00000000"
        "0000018bcfe56800 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001"
        "16 00 00 00 01 0a 68656c6c6f 00".replace(" ", ""))
    raw = build_batch([RecordInput(b"hello", None, 1_700_000_000_000)], partition_leader_epoch=0)
    assert raw == expected
    assert rows(decode_batches(expected)) == [
        (0, 1_700_000_000_000, 0, None, b"hello", [], -1, False, False)]


def test_worked_example_commit_marker():
    """kafka_format.md 5: the 78-byte COMMIT marker batch (offset 5, pid 1000, epoch 0,
    coordinatorEpoch 7, ts 1700000000000, attributes 0x30), byte for byte."""
    expected = bytes.fromhex(
        "0000000000000005 00000042 00000000 02 dbc180da 0030 00000000 0000018bcfe56800"
        "0000018bcfe56800 00000000000003e8 0000 ffffffff 00000001 20 00 00 00 08 00000001"
        "0c 000000000007 00".replace(" ", ""))
    raw = end_transaction_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 7),
                                       offset=5, timestamp=1_700_000_000_000, producer_id=1000,
                                       producer_epoch=0, partition_leader_epoch=0)
    assert raw == expected


# -- builders

def test_header_bytes_count_against_max_batch_bytes():
    """[MemoryRecordsTest.testHasRoomForMethodWithHeaders] (closest equivalent: the columnar
    encoder's batch limit) two small records share a 120-byte batch, but records carrying 10
    headers each do not fit together and are split; no multi-record batch exceeds the limit."""
    plain = [(1000, b"key", b"value", [])] * 2
    tagged = [(1000, b"key", b"value", [("hello", b"world.world")] * 10)] * 2
    for recs, n_batches in ((plain, 1), (tagged, 2)):
        buf = encode_batches(table_of(recs), max_batch_bytes=120)
        infos = list(LogInputStream(buf, verify=True))
        assert len(infos) == n_batches
        assert all(i.size <= 120 or i.header.records_count == 1 for i in infos)
        assert rows(decode_batches(buf)) == [
            (i, 1000, 0, b"key", b"value", [tuple(h) for h in hs], -1, False, False)
            for i, (_, _, _, hs) in enumerate(recs)]


def test_build_end_txn_marker():
    """[MemoryRecordsTest.testBuildEndTxnMarker] withEndTransactionMarker(983, leaderEpoch 29,
    pid 73, epoch 13, COMMIT/347): one exactly-sized (78-byte) valid control batch at base
    offset 983 whose single record decodes back to COMMIT/347."""
    marker = EndTransactionMarker(ControlRecordType.COMMIT, 347)
    raw = end_transaction_marker_batch(marker, offset=983, timestamp=1_700_000_000_000,
                                       producer_id=73, producer_epoch=13, partition_leader_epoch=29)
    assert len(raw) == 78
    h = ensure_valid(raw, 0)
    assert (h.base_offset, h.last_offset, h.partition_leader_epoch) == (983, 983, 29)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (73, 13, -1)
    assert h.attributes == 0x30
    assert h.base_timestamp == h.max_timestamp == 1_700_000_000_000
    (info,) = LogInputStream(raw)
    (rec,) = batch_records(raw, info)
    assert rec.offset == 983
    assert EndTransactionMarker.deserialize(rec.key, rec.value) == marker


def test_end_txn_marker_needs_a_transactional_producer():
    """[MemoryRecordsBuilderTest.testWriteEndTxnMarkerNonTransactionalBatch/NonControlBatch]
    (closest equivalent: a marker can only be written as its own transactional control batch)
    without a producer id the marker batch is refused."""
    marker = EndTransactionMarker(ControlRecordType.ABORT, 1)
    with pytest.raises(ValueError):
        end_transaction_marker_batch(marker, offset=0, timestamp=0, producer_id=-1,
                                     producer_epoch=0)


def test_next_batch_size_rules():
    """[MemoryRecordsTest.testNextBatchSize] no batch while the 17 bytes up to the magic are not
    all there (the bytes are reported as a partial tail at position 0); a complete batch is
    found with its full size; magic 10 or a size field below the minimum is corruption even
    when the payload is cut short."""
    raw = build_batch([RecordInput(b"a", None, 10)], timestamp_type=LOG_APPEND_TIME,
                      log_append_time=99, producer_id=1, producer_epoch=0, base_sequence=0)
    for cut in (1, 12, 17, len(raw) - 1):
        s = LogInputStream(raw[:cut])
        assert list(s) == []
        assert (s.position, s.partial) == (0, True)
    (info,) = LogInputStream(raw)
    assert info.size == len(raw)
    bad_magic = bytearray(raw)
    bad_magic[16] = 10
    bad_size = bytearray(raw)
    bad_size[11] = 0                      # SIZE_OFFSET + 3: the size field becomes < 14
    for bad in (bytes(bad_magic), bytes(bad_size), bytes(bad_size[:20])):
        with pytest.raises(CorruptRecordError):
            list(LogInputStream(bad))
    # FileLogInputStream's order (kafka_format.md 7): a batch running past the end is the end
    # of the data before its magic is read, so a torn tail is never reported as a bad magic
    s = LogInputStream(bytes(bad_magic[:20]))
    assert list(s) == [] and s.partial
    with pytest.raises(UnknownMagicError):
        list(LogInputStream(bytes(bad_magic)))
    # kafka_format.md 7: the size check comes before the "runs past the end" check, so a size
    # field of 9 is corruption even in an 18-byte buffer too short for the batch it claims
    tiny = bytearray(raw[:18])
    struct.pack_into(">i", tiny, 8, 9)
    with pytest.raises(CorruptRecordError):
        list(LogInputStream(bytes(tiny)))


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_refused_below_magic_2(magic):
    """[MemoryRecordsTest.testUnsupportedCompress] "ZStandard compression is not supported for
    magic N" for v0/v1, from the codec and the legacy builder."""
    msg = f"ZStandard compression is not supported for magic {magic}"
    with pytest.raises(UnsupportedFormatError, match=msg):
        compress(C.ZSTD, b"data", magic=magic)
    with pytest.raises(UnsupportedFormatError, match=msg):
        legacy.build_compressed([(b"k", b"v", 1)], magic=magic, compression=C.ZSTD,
                                wrapper_offset=0)
    # a legacy message claiming zstd (hand-made) is refused by the reader, not decoded
    bogus = legacy.build_message(0, compress(C.ZSTD, b"x"), None, magic=magic, timestamp=1,
                                 compression=C.ZSTD)
    with pytest.raises(KafkaLogError):
        decode_batches(bogus)


def test_write_empty_record_set():
    """[MemoryRecordsBuilderTest.testWriteEmptyRecordSet] no records -> 0 bytes from the
    columnar encoder; the scalar builder refuses an empty batch (write_empty_header is the way
    to write one)."""
    assert encode_batches(table_of([])) == b""
    with pytest.raises(ValueError):
        build_batch([])


@pytest.mark.parametrize("kw", [
    dict(transactional=True, producer_id=-1, producer_epoch=0, base_sequence=0),
    dict(producer_id=10, producer_epoch=-1, base_sequence=0),
    dict(producer_id=10, producer_epoch=0, base_sequence=-1)],
    ids=["transactional-without-pid", "idempotent-epoch-1", "idempotent-sequence-1"])
def test_invalid_producer_state_refused(kw):
    """[MemoryRecordsBuilderTest.testWriteTransactionalWithInvalidPID/
    testWriteIdempotentWithInvalidEpoch/testWriteIdempotentWithInvalidBaseSequence] refused by
    build_batch and by encode_batches (IllegalArgumentException)."""
    with pytest.raises(ValueError):
        build_batch([RecordInput(b"v", None, 1)], **kw)
    with pytest.raises(InvalidConfigError):
        encode_batches(table_of([(1, None, b"v", [])]), **kw)
    ok = {**kw, "producer_id": 10, "producer_epoch": 0, "base_sequence": 0}
    h = ensure_valid(build_batch([RecordInput(b"v", None, 1)], **ok), 0)
    assert h.is_transactional == kw.get("transactional", False)


@pytest.mark.parametrize("codec", list(C))
def test_log_append_time_stamps_every_record(codec):
    """[MemoryRecordsBuilderTest.buildUsingLogAppendTime] with LogAppendTime every record reports
    the append time and maxTimestamp is the append time (record timestamps 0, 2, 1 ignored);
    the columnar encoder does the same; the append time is required."""
    t = 1_700_000_000_999
    recs = [(0, b"a", b"1", []), (2, b"b", b"2", []), (1, b"c", b"3", [])]
    raw = build_batch(inputs_of(recs), compression=codec, timestamp_type=LOG_APPEND_TIME,
                      log_append_time=t)
    enc = encode_batches(table_of(recs), compression=codec.name_kafka,
                         timestamp_type=LOG_APPEND_TIME, log_append_time=t)
    for buf in (raw, enc):
        (info,) = LogInputStream(buf, verify=True)
        assert (info.header.max_timestamp, info.header.timestamp_type) == (t, LOG_APPEND_TIME)
        assert [(r.timestamp, r.timestamp_type) for _, r in iter_records(buf)] == \
            [(t, LOG_APPEND_TIME)] * 3
        assert rows(decode_batches(buf)) == [(i, t, LOG_APPEND_TIME, k, v, [], -1, False, False)
                                             for i, (_, k, v, _) in enumerate(recs)]
    with pytest.raises(ValueError):
        build_batch(inputs_of(recs), timestamp_type=LOG_APPEND_TIME)
    with pytest.raises(InvalidConfigError):
        encode_batches(table_of(recs), timestamp_type=LOG_APPEND_TIME)


def test_legacy_log_append_time():
    """[MemoryRecordsBuilderTest.buildUsingLogAppendTime] v1: a LogAppendTime wrapper stamps its
    inner records with its own timestamp and type."""
    t = 777
    raw = legacy.build_compressed([(b"a", b"1", 0), (b"b", b"2", 2), (b"c", b"3", 1)], magic=1,
                                  compression=C.GZIP, wrapper_offset=2,
                                  timestamp_type=LOG_APPEND_TIME, log_append_time=t)
    (info,) = LogInputStream(raw, verify=True)
    assert (info.entry.timestamp, info.entry.timestamp_type) == (t, LOG_APPEND_TIME)
    assert [(r.timestamp, r.timestamp_type) for _, r in iter_records(raw)] == \
        [(t, LOG_APPEND_TIME)] * 3


@pytest.mark.parametrize("codec", list(C))
def test_create_time_max_timestamp(codec):
    """[MemoryRecordsBuilderTest.buildUsingCreateTime] record timestamps 0, 2, 1 give
    maxTimestamp 2 and each record keeps its own; with no timestamps at all maxTimestamp stays
    -1 (kafka_format.md 2.3)."""
    recs = [(0, b"a", b"1", []), (2, b"b", b"2", []), (1, b"c", b"3", [])]
    for buf in (build_batch(inputs_of(recs), compression=codec),
                encode_batches(table_of(recs), compression=codec.name_kafka)):
        (info,) = LogInputStream(buf, verify=True)
        assert info.header.max_timestamp == 2
        assert [r.timestamp for _, r in iter_records(buf)] == [0, 2, 1]
    none = build_batch([RecordInput(b"x"), RecordInput(b"y")], compression=codec)
    assert ensure_valid(none, 0).max_timestamp == -1


@pytest.mark.parametrize("magic,expected", [(1, 2), (0, -1)])
def test_legacy_create_time_wrapper_timestamp(magic, expected):
    """[MemoryRecordsBuilderTest.buildUsingCreateTime] a v1 wrapper's timestamp is the max inner
    timestamp (2); v0 has none (-1)."""
    raw = legacy.build_compressed([(b"a", b"1", 0), (b"b", b"2", 2), (b"c", b"3", 1)],
                                  magic=magic, compression=C.GZIP, wrapper_offset=2)
    (info,) = LogInputStream(raw, verify=True)
    assert info.max_timestamp == expected


def test_small_write_limit_still_takes_one_record():
    """[MemoryRecordsBuilderTest.testSmallWriteLimit] (closest equivalent) with the smallest
    allowed max_batch_bytes every record larger than the limit still gets a batch of its own,
    none is lost; a limit too small for any batch is a config error."""
    recs = [(5, b"key%d" % i, b"value" * 10, []) for i in range(4)]
    buf = encode_batches(table_of(recs), max_batch_bytes=68)
    infos = list(LogInputStream(buf, verify=True))
    assert [i.header.records_count for i in infos] == [1, 1, 1, 1]
    assert [i.base_offset for i in infos] == [0, 1, 2, 3]
    assert decode_batches(buf).column("key").to_pylist() == [r[1] for r in recs]
    with pytest.raises(InvalidConfigError):
        encode_batches(table_of(recs), max_batch_bytes=67)


@pytest.mark.parametrize("deltas", [[0, 0], [1, 0], [-1, 0]])
def test_non_increasing_offsets_refused(deltas):
    """[MemoryRecordsBuilderTest.testAppendAtInvalidOffset] offsets must strictly increase from
    the base (IllegalArgumentException)."""
    with pytest.raises(ValueError):
        build_batch([RecordInput(b"a"), RecordInput(b"b")], base_offset=10, offset_deltas=deltas)


def _record_at(delta: int, value: bytes) -> bytes:
    return _exact(b"\x00" + encode_varlong(0) + encode_varint(delta), NULL,
                  encode_varint(len(value)), value, encode_varint(0))


@pytest.mark.parametrize("deltas, refused", [
    ([0, 1, 2], False), ([0, 5, 9], False), ([3, 4], False),     # gaps, a first delta above 0
    ([0, 0], True), ([1, 0], True), ([-1, 0], True), ([0, 2, 2], True), ([0, -3], True)])
def test_reads_refuse_offset_deltas_that_do_not_increase(deltas, refused):
    """A batch whose records' offset deltas do not increase strictly from 0 would serve offsets
    out of order or twice: the columnar read refuses it naming the batch (in whichever batch of
    a run it lies), as the record-at-a-time walk does; gaps and a first delta above 0 (a
    compacted batch) are read as they are."""
    good = wrap_records(_record_at(0, b"a") + _record_at(1, b"b"), count=2)
    batch = wrap_records(b"".join(_record_at(d, b"v%d" % i) for i, d in enumerate(deltas)),
                         count=len(deltas), base_offset=10)
    buf = good + batch + good
    if not refused:
        assert decode_batches(buf).column("offset").to_pylist() == [0, 1] + [10 + d for d in deltas] + [0, 1]
        assert [r.offset for _, r in iter_records(buf)] == [0, 1] + [10 + d for d in deltas] + [0, 1]
        return
    with pytest.raises(CorruptRecordError, match="offset deltas of the batch do not increase") as e:
        decode_batches(buf)
    assert e.value.position == len(good) and e.value.offset == 10
    with pytest.raises(CorruptRecordError, match="do not increase"):
        list(iter_records(buf))


def test_offset_gaps_are_kept():
    """kafka_format.md 18.12 (the shape testFilterToAlreadyCompactedLog leaves): records 5, 8,
    10 of a batch based at 0 keep their offsets; lastOffset is 10."""
    raw = build_batch([RecordInput(b"a"), RecordInput(b"b"), RecordInput(b"c")],
                      offset_deltas=[5, 8, 10])
    assert ensure_valid(raw, 0).last_offset == 10
    assert decode_batches(raw).column("offset").to_pylist() == [5, 8, 10]
    assert [r.offset for _, r in iter_records(raw)] == [5, 8, 10]


def test_delete_horizon_keeps_record_timestamps():
    """[MemoryRecordsBuilderTest.testRecordTimestampsWithDeleteHorizon] a delete horizon of 100
    sets the flag and baseTimestamp 100 while records 50, 100, 150 still report their own
    timestamps (50 is a negative delta)."""
    raw = build_batch([RecordInput(b"a", b"k", 50), RecordInput(b"b", b"k", 100),
                       RecordInput(b"c", b"k", 150)], delete_horizon_ms=100)
    h = ensure_valid(raw, 0)
    assert h.has_delete_horizon and h.attributes & 0x40
    assert (h.delete_horizon_ms, h.base_timestamp, h.max_timestamp) == (100, 100, 150)
    assert [r.timestamp for _, r in iter_records(raw)] == [50, 100, 150]
    assert decode_batches(raw).column("timestamp").cast(pa.int64()).to_pylist() == [50, 100, 150]


# ================================================================================ the walk

def _three_batches() -> list[bytes]:
    return [build_batch([RecordInput(b"v%d" % (3 * b + i), b"k", 100 + i) for i in range(3)],
                        base_offset=3 * b) for b in range(3)]


@pytest.mark.parametrize("zeros", [0, 2, 4, 5, 6, 17])
def test_trailing_zero_bytes_end_the_walk(zeros):
    """[FileRecordsTest.testIterationOverPartialAndTruncation] 0, 2, 4, 5, 6 (up to 17) zero
    bytes after the last complete batch: every batch is still returned; fewer than 18 bytes left
    is the end; leftover bytes are reported as a partial tail after the last batch."""
    batches = _three_batches()
    end = sum(map(len, batches))
    buf = b"".join(batches) + bytes(zeros)
    run = decode_run(buf)
    assert run.table.column("offset").to_pylist() == list(range(9))
    assert (run.batches, run.next_position, run.partial) == (3, end, zeros > 0)
    s = LogInputStream(buf, verify=True)
    assert len(list(s)) == 3
    assert (s.position, s.partial) == (end, zeros > 0)


def test_eighteen_zero_bytes_are_corruption():
    """kafka_format.md 7.3: with 18 or more zero bytes left the size field (0) is read and is
    below 14 -> CorruptRecordException (what an untrimmed preallocated file produces)."""
    buf = b"".join(_three_batches()) + bytes(18)
    with pytest.raises(CorruptRecordError):
        decode_run(buf)


def test_batch_cut_short_is_left_out():
    """[FileLogInputStreamTest.testBatchIterationIncompleteBatch] a last batch missing its last
    13 bytes is not returned; the run is partial and resumes at that batch's start;
    [ByteBufferLogInputStreamTest.iteratorIgnoresIncompleteEntries] the same with 5 bytes cut."""
    batches = _three_batches()
    whole = b"".join(batches)
    start_of_last = len(whole) - len(batches[-1])
    for cut in (13, 5, 1):
        run = decode_run(whole[:-cut])
        assert run.table.column("offset").to_pylist() == list(range(6))
        assert (run.batches, run.next_position, run.partial) == (2, start_of_last, True)
        resumed = decode_run(whole, start=run.next_position)
        assert resumed.table.column("offset").to_pylist() == [6, 7, 8]


def test_walk_edges_yield_nothing():
    """[FileLogInputStreamTest.testNextBatchSelectionWithMaxedParams/WithZeroedParams] no batch
    at start position Int.MAX, with end 0, or over an empty buffer."""
    whole = b"".join(_three_batches())
    assert list(LogInputStream(whole, start=INT_MAX)) == []
    assert list(LogInputStream(whole, end=0)) == []
    empty = LogInputStream(b"")
    assert list(empty) == []
    assert (empty.position, empty.partial) == (0, False)
    run = decode_run(b"")
    assert (run.table.num_rows, run.batches, run.next_position, run.partial) == (0, 0, 0, False)


def test_ranges_select_batches():
    """[FileRecordsTest.testIteratorWithLimits/testRead] a range one byte shorter than a batch
    yields no batch (partial); a range from a later batch's position reads only the rest; an
    end past the buffer is clamped to it."""
    batches = _three_batches()
    whole = b"".join(batches)
    a, b = len(batches[0]), len(batches[0]) + len(batches[1])
    short = decode_run(whole, end=a - 1)
    assert (short.table.num_rows, short.next_position, short.partial) == (0, 0, True)
    assert decode_run(whole, start=a, end=b).table.column("offset").to_pylist() == [3, 4, 5]
    assert decode_run(whole, start=a, end=b - 1).batches == 0
    clamped = decode_run(whole, start=b, end=len(whole) + 1000)
    assert clamped.table.column("offset").to_pylist() == [6, 7, 8]
    assert (clamped.next_position, clamped.partial) == (len(whole), False)


def test_file_backed_batches_match_in_memory(tmp_path):
    """[FileLogInputStreamTest.testBatchIterationV2/testBatchIterationWithMultipleRecordsPerBatch]
    batches read from a file (mmap) expose the same base/last offset, count, maxTimestamp (the
    max of 238423489, 897839, 8234020), producer fields and leader epoch as in memory."""
    recs = [RecordInput(b"v%d" % i, b"k", ts) for i, ts in enumerate((238423489, 897839, 8234020))]
    buf = (build_batch(recs, base_offset=0, producer_id=83, producer_epoch=15, base_sequence=10,
                       partition_leader_epoch=77)
           + build_batch(recs[:1], base_offset=3, partition_leader_epoch=78))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(buf)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        from_file = list(LogInputStream(mm, verify=True))
        assert rows(decode_batches(mm)) == rows(decode_batches(buf))
    in_memory = list(LogInputStream(buf, verify=True))
    assert from_file == in_memory
    h = in_memory[0].header
    assert (h.base_offset, h.last_offset, h.records_count, h.max_timestamp) == (0, 2, 3, 238423489)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == \
        (83, 15, 10, 77)


def _good_then(second: bytes) -> bytes:
    return build_batch([RecordInput(b"1", b"a", 1)]) + second


def test_walk_raises_on_bad_second_batch():
    """[ByteBufferLogInputStreamTest.iteratorRaisesOnTooSmallRecords/InvalidMagic/
    TooLargeRecords] after a good batch, a size field of 9 (< 14), magic 37, or a size above the
    walk's maximum (60) raises CorruptRecordException when reached."""
    second = bytearray(build_batch([RecordInput(b"2" * 40, b"b", 2)], base_offset=1))
    small = bytearray(second)
    struct.pack_into(">i", small, 8, 9)
    magic37 = bytearray(second)
    magic37[16] = 37
    for bad, kw, err in ((small, {}, CorruptRecordError), (magic37, {}, UnknownMagicError),
                         (second, {"max_batch_size": 60}, CorruptRecordError)):
        buf = _good_then(bytes(bad))
        it = iter(LogInputStream(buf, **kw))
        assert next(it).base_offset == 0          # the good batch comes first
        with pytest.raises(err):
            next(it)
        with pytest.raises(err):
            decode_run(buf, **kw)
    assert len(list(LogInputStream(_good_then(bytes(second)), max_batch_size=100))) == 2


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_encoding_picked_rows_is_encoding_the_taken_rows(codec):
    """``encode_batches(table, rows=r)`` (the sink encodes each partition's rows straight out
    of a mixed Arrow batch) writes byte for byte what encoding ``table.take(r)`` writes: null
    keys and values, headers, timestamps out of order, batches cut by max_batch_bytes, and
    for a codec incompressible records that make a compressed batch split in halves."""
    import os
    import random

    rng = random.Random(7)
    records = [(1_700_000_000_000 + rng.randrange(-10**6, 10**6),
                None if i % 7 == 0 else b"k%d" % i,
                None if i % 11 == 0 else os.urandom(rng.randrange(0, 300)),
                [("h%d" % j, b"x" * j) for j in range(i % 3)])
               for i in range(1500)]
    table = table_of(records)
    rows = [i for i in range(1500) if i % 3 != 1]
    rng.shuffle(rows)
    import numpy as np

    picked = np.array(rows, np.int64)
    for limit in (1 << 20, 2000):
        ours = bytes(encode_batches(table, rows=picked, compression=codec, max_batch_bytes=limit,
                                    base_offset=5, now_ms=1))
        taken = bytes(encode_batches(table.take(pa.array(picked)), compression=codec,
                                     max_batch_bytes=limit, base_offset=5, now_ms=1))
        assert ours == taken
        assert decode_run(ours).table.column("value").to_pylist() == [records[i][2] for i in rows]

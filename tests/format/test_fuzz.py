"""Fuzzing the decoders with damaged batches of every kind, plus hand-made hostile inputs.

Valid seeds (v2 in every codec with headers, idempotent/transactional, LogAppendTime, a control
batch, an empty cleaned batch, multi-batch runs, legacy v0/v1 plain messages and compressed
wrappers) are mutated: bits flipped, 1-8 bytes overwritten, truncated, extended with garbage,
ranges duplicated, length/count/offset fields set to extreme values, extreme varints written
into the records. Every mutated buffer goes through ``decode_run`` with ``verify_crc=True`` and
``verify_crc=False`` (the latter drives the record parser over garbage) and through the scalar
``iter_records``. Each call must finish within 2 s using under 64 MiB (tracemalloc) and either
return well-formed output or raise ``CorruptRecordError`` (``RecordTooLargeError`` and
``UnknownMagicError`` included); the only ``UnsupportedFormatError`` accepted is Kafka's
"unknown codec id" / "zstd below magic 2" refusal. With CRC verification, output must consist of
whole original batches (only baseOffset/wrapper offsets, which are outside the CRC, may move).

A second mode recomputes the CRCs after mutating, so that the CRC-verified paths reach the record
parsers too; there the columnar and scalar decoders must agree with each other.

Bracketed names point at the apache/kafka test whose behaviour a test mirrors
(../shared/kafka_test_checklist.md §1).
"""

from __future__ import annotations

import struct
import time
import tracemalloc
import zlib

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_core.errors import (CorruptRecordError, RecordTooLargeError, UnknownMagicError,
                                 UnsupportedFormatError)
from storage_core.format import (LOG_APPEND_TIME, SCHEMA, ControlRecordType, EndTransactionMarker,
                                 RecordInput, build_batch, decode_batches, decode_run,
                                 encode_batches, end_transaction_marker_batch, iter_records,
                                 write_empty_header)
from storage_core.format.compression import compress
from storage_core.format.legacy import build_compressed, build_message
from storage_core.format.record_batch import BatchHeader, crc32c
from storage_core.format.varint import encode_varint, encode_varlong

LIMIT = 1 << 20                 # max_decompressed for every call
TIME_LIMIT = 2.0                # seconds per call
MEMORY_LIMIT = 64 << 20         # tracemalloc peak per call
T0 = 1_700_000_000_000
INT64 = 1 << 64


# ------------------------------------------------------------------ seeds

def _records(n, *, big=False):
    out = []
    for i in range(n):
        key = None if i % 4 == 1 else (b"" if i % 4 == 2 else b"key-%d" % i)
        value = None if i % 5 == 3 else b"value %d " % i * (40 if big and i == 2 else 3)
        heads = ((("h\u00e9", b"v"), ("null", None)) if i % 3 == 0 else ())
        out.append(RecordInput(value, key, T0 + (i * 37) % 11 - 5, heads))
    return out


def _legacy_msgs(n):
    return [(None if i % 3 == 0 else b"k%d" % i, None if i == 2 else b"legacy value %d" % i,
             T0 + i) for i in range(n)]


def _seeds() -> dict[str, bytes]:
    s: dict[str, bytes] = {}
    for codec, name in enumerate(("none", "gzip", "snappy", "lz4", "zstd")):
        s[f"v2-{name}"] = build_batch(_records(6, big=True), base_offset=100, compression=codec)
    s["v2-txn-zstd"] = build_batch(_records(4), base_offset=7, compression=4, producer_id=42,
                                   producer_epoch=3, base_sequence=2**31 - 2, transactional=True)
    s["v2-idempotent"] = build_batch(_records(3), producer_id=5, producer_epoch=0,
                                     base_sequence=10, partition_leader_epoch=17)
    s["v2-logappend-gzip"] = build_batch(_records(4), compression=1,
                                         timestamp_type=LOG_APPEND_TIME, log_append_time=T0 + 99)
    s["v2-offset-gaps"] = build_batch(_records(3), base_offset=50, offset_deltas=[0, 3, 10])
    s["control"] = end_transaction_marker_batch(EndTransactionMarker(ControlRecordType.ABORT, 5),
                                                offset=30, timestamp=T0, producer_id=42,
                                                producer_epoch=3)
    s["empty"] = write_empty_header(base_offset=15, last_offset=37, max_timestamp=T0,
                                    producer_id=9, producer_epoch=1, base_sequence=983,
                                    transactional=True)
    table = pa.table({"key": pa.array([b"k%d" % i for i in range(24)], pa.binary()),
                      "value": pa.array([b"v" * (i % 9) for i in range(24)], pa.binary()),
                      "timestamp": pa.array([T0 - i for i in range(24)], pa.int64())})
    s["multi-lz4"] = encode_batches(table, compression="lz4", max_batch_bytes=200, base_offset=3)
    s["multi-none"] = encode_batches(table, max_batch_bytes=160)
    for magic in (0, 1):
        s[f"v{magic}-plain"] = b"".join(
            build_message(60 + i, v, k, magic=magic, timestamp=ts if magic else -1)
            for i, (k, v, ts) in enumerate(_legacy_msgs(3)))
        for codec, name in ((1, "gzip"), (2, "snappy"), (3, "lz4")):
            s[f"v{magic}-{name}"] = build_compressed(_legacy_msgs(4), magic=magic,
                                                     compression=codec, wrapper_offset=63)
    s["v1-logappend-snappy"] = build_compressed(_legacy_msgs(3), magic=1, compression=2,
                                                wrapper_offset=9, timestamp_type=LOG_APPEND_TIME,
                                                log_append_time=T0 + 5)
    s["mixed"] = s["v0-gzip"] + s["v1-plain"] + s["v2-snappy"] + s["empty"]
    return s


SEEDS = _seeds()
SEED_NAMES = sorted(SEEDS)


def batch_spans(buf) -> list[tuple[int, int, int]]:
    """(position, size, magic) of each complete entry, by the 12-byte prefix alone."""
    spans, pos = [], 0
    while pos + 17 <= len(buf):
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if size < 14 or pos + 12 + size > len(buf):
            break
        spans.append((pos, 12 + size, buf[pos + 16]))
        pos += 12 + size
    return spans


def fix_crcs(buf: bytearray) -> None:
    """Recompute every entry's CRC (CRC-32C for v2, CRC-32 for v0/v1) so that CRC-verified
    decoding reaches the record parser."""
    for pos, size, magic in batch_spans(buf):
        if magic == 2 and size >= 61:
            struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21:pos + size])))
        elif magic in (0, 1):
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16:pos + size])))


def _wrap(v: int) -> int:
    return (v + (1 << 63)) % INT64 - (1 << 63)


def table_rows(table: pa.Table) -> list[tuple]:
    cols = [table.column(n) for n in ("offset", "timestamp", "timestampType", "key", "value",
                                      "headers", "producerId", "isTransactional", "isControl")]
    cols[1] = cols[1].cast(pa.int64())
    py = [c.to_pylist() for c in cols]
    py[5] = [tuple((h["key"], h["value"]) for h in hs) for hs in py[5]]
    return [tuple(r) for r in zip(*py)]


def scalar_rows(pairs) -> list[tuple]:
    out = []
    for info, r in pairs:
        h = info.header
        out.append((_wrap(r.offset), _wrap(r.timestamp), r.timestamp_type, r.key, r.value,
                    tuple((x.key, x.value) for x in r.headers),
                    h.producer_id if h else -1, h.is_transactional if h else False,
                    h.is_control if h else False))
    return out


# Decoding every seed here also compiles the numba record kernels before any guarded call.
ORIGINAL_BATCHES = {
    name: [table_rows(decode_batches(buf[p:p + n])) for p, n, _ in batch_spans(buf)]
    for name, buf in SEEDS.items()
}


def test_seeds_are_valid_and_decoders_agree():
    """Every seed decodes the same way with both decoders, in one piece and batch by batch."""
    for name, buf in SEEDS.items():
        spans = batch_spans(buf)
        assert sum(n for _, n, _ in spans) == len(buf), name
        rows = table_rows(decode_batches(buf))
        assert rows == scalar_rows(iter_records(buf)), name
        assert rows == [r for b in ORIGINAL_BATCHES[name] for r in b], name
    assert len(batch_spans(SEEDS["multi-lz4"])) > 2 and len(batch_spans(SEEDS["mixed"])) == 6


# ------------------------------------------------------------------ guarded calls

# Kafka's own refusals of a codec id 5-7 or of zstd below magic 2 (IllegalArgumentException /
# UnsupportedCompressionTypeException there, not corruption).
ALLOWED_UNSUPPORTED = ("Unknown compression type id", "ZStandard compression is not supported")


class Outcome:
    def __init__(self, value=None, error=None):
        self.value = value
        self.error = error

    @property
    def ok(self) -> bool:
        return self.error is None


def guarded(fn, what: str) -> Outcome:
    """Run one decoder call under the time and memory guard; classify its outcome."""
    tracemalloc.start()
    t = time.perf_counter()
    try:
        out = Outcome(value=fn())
    except CorruptRecordError as e:            # RecordTooLargeError, UnknownMagicError too
        out = Outcome(error=e)
    except UnsupportedFormatError as e:
        if not any(s in str(e) for s in ALLOWED_UNSUPPORTED):
            raise AssertionError(f"{what}: unexpected UnsupportedFormatError {e!r}") from e
        out = Outcome(error=e)
    except Exception as e:
        raise AssertionError(
            f"{what}: {type(e).__name__} is not a CorruptRecordError: {e!r}") from e
    finally:
        elapsed = time.perf_counter() - t
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < TIME_LIMIT, f"{what} took {elapsed:.2f} s"
    assert peak < MEMORY_LIMIT, f"{what} peaked at {peak >> 20} MiB"
    return out


def check_run(run, buf, what):
    """A DecodedRun is well-formed: schema, equal column lengths, valid Arrow arrays, sane
    positions."""
    table = run.table
    assert table.schema == SCHEMA, what
    assert table.schema.field("offset").type == pa.int64()
    assert len({len(c) for c in table.columns}) <= 1, what
    table.validate(full=True)
    assert 0 <= run.next_position <= len(buf), what
    assert run.partial == (run.next_position < len(buf)), what
    assert run.batches >= 0
    return table_rows(table)


def check_records(pairs, what):
    for info, r in pairs:
        assert isinstance(r.offset, int) and isinstance(r.timestamp, int), what
        assert r.key is None or isinstance(r.key, bytes), what
        assert r.value is None or isinstance(r.value, bytes), what
        assert all(isinstance(h.key, str) and (h.value is None or isinstance(h.value, bytes))
                   for h in r.headers), what
        assert info.magic in (0, 1, 2)
    return scalar_rows(pairs)


def decode_all(buf) -> dict[str, Outcome]:
    outs = {
        "verified": guarded(lambda: decode_run(buf, verify_crc=True, max_decompressed=LIMIT),
                            "decode_run(verify_crc=True)"),
        "unverified": guarded(lambda: decode_run(buf, verify_crc=False, max_decompressed=LIMIT),
                              "decode_run(verify_crc=False)"),
        "scalar": guarded(lambda: list(iter_records(buf, max_decompressed=LIMIT)),
                          "iter_records"),
    }
    for key in ("verified", "unverified"):
        if outs[key].ok:
            outs[key].value = check_run(outs[key].value, buf, key)
    if outs["scalar"].ok:
        outs["scalar"].value = check_records(outs["scalar"].value, "iter_records")
    return outs


def assert_decoders_agree(buf, outs):
    """CRC-verified columnar and scalar decoding succeed or fail together, with the same rows;
    whatever decodes with CRC checks decodes identically without them."""
    v, s, u = outs["verified"], outs["scalar"], outs["unverified"]
    assert v.ok == s.ok, (f"columnar {'ok' if v.ok else repr(v.error)} vs "
                          f"scalar {'ok' if s.ok else repr(s.error)}")
    if v.ok:
        assert v.value == s.value, "columnar and scalar decoders disagree"
    if v.ok:
        assert u.ok and u.value == v.value, "verify_crc=False changed a CRC-valid result"


def assert_whole_original_batches(rows, originals):
    """``rows`` is a concatenation of complete original batches, each possibly moved to other
    offsets as a block (baseOffset and legacy offsets are outside the CRC)."""
    chunks = [b for b in originals if b]
    n = len(rows)
    reachable = [False] * (n + 1)
    reachable[0] = True
    for i in range(n):
        if not reachable[i]:
            continue
        for chunk in chunks:
            m = len(chunk)
            if i + m > n:
                continue
            shift = _wrap(rows[i][0] - chunk[0][0])
            if all(r[1:] == c[1:] and _wrap(r[0] - c[0]) == shift
                   for r, c in zip(rows[i:i + m], chunk)):
                reachable[i + m] = True
    assert reachable[n], "CRC-verified decoding produced records that are not original batches"


# ------------------------------------------------------------------ mutations

EXTREMES = [0, -1, 1, 2, 13, 14, 49, 61, 127, 128, 2**15 - 1, -2**15, 2**31 - 1, -2**31,
            2**63 - 1, -2**63]
FIELD_OFFSETS = [0, 8, 12, 16, 17, 18, 21, 22, 23, 26, 27, 30, 35, 43, 51, 53, 57, 61, 62]
NASTY_VARINTS = [b"\xff" * 10, b"\x80" * 5 + b"\x01", b"\xff\xff\xff\xff\x0f",
                 b"\xfe\xff\xff\xff\x0f", encode_varint(2**30), encode_varint(-2),
                 encode_varint(-1), encode_varint(0), encode_varlong(-2**63), b"\x80"]


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(SEED_NAMES))
    buf = bytearray(SEEDS[name])
    starts = [p for p, _, _ in batch_spans(SEEDS[name])]
    ops = []
    for _ in range(draw(st.integers(1, 3))):
        if not buf:
            break
        kind = draw(st.sampled_from(["flip", "overwrite", "truncate", "extend", "duplicate",
                                     "field", "field", "varint"]))
        n = len(buf)
        if kind == "flip":
            pos, bit = draw(st.integers(0, n - 1)), draw(st.integers(0, 7))
            buf[pos] ^= 1 << bit
            ops.append((kind, pos, bit))
        elif kind == "overwrite":
            pos = draw(st.integers(0, n - 1))
            data = draw(st.binary(min_size=1, max_size=8))[:n - pos]
            buf[pos:pos + len(data)] = data
            ops.append((kind, pos, data))
        elif kind == "truncate":
            cut = draw(st.integers(0, n - 1))
            del buf[cut:]
            ops.append((kind, cut))
        elif kind == "extend":
            data = draw(st.binary(min_size=1, max_size=64))
            buf += data
            ops.append((kind, data))
        elif kind == "duplicate":
            a = draw(st.integers(0, n - 1))
            b = draw(st.integers(a + 1, n))
            at = draw(st.integers(0, n))
            buf[at:at] = buf[a:b]
            ops.append((kind, a, b, at))
        elif kind == "field":
            start = draw(st.sampled_from(starts))
            off = draw(st.sampled_from(FIELD_OFFSETS))
            width = draw(st.sampled_from([1, 2, 4, 8]))
            value = draw(st.sampled_from(EXTREMES))
            pos = start + off
            if pos + width <= n:
                fmt = {1: ">B", 2: ">H", 4: ">I", 8: ">Q"}[width]
                struct.pack_into(fmt, buf, pos, value % (1 << (8 * width)))
                ops.append((kind, pos, width, value))
        else:
            pos = draw(st.integers(0, n - 1))
            v = draw(st.sampled_from(NASTY_VARINTS))
            if draw(st.booleans()):
                buf[pos:pos] = v
            else:
                buf[pos:pos + len(v)] = v
            ops.append((kind, pos, v))
    return name, bytes(buf), ops


FUZZ = settings(deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


@settings(FUZZ, max_examples=130)
@given(case=mutated())
def test_fuzz_mutated_batches(case):
    """Mutations without CRC repair: every outcome is well-formed output or a CorruptRecordError;
    with CRC verification the output can only be whole original batches (a change to CRC-covered
    bytes never yields different records) [DefaultRecordBatchTest.testInvalidCrc,
    LegacyRecordTest.testChecksum, ByteBufferLogInputStreamTest.iteratorIgnoresIncompleteEntries/
    iteratorRaisesOnTooSmallRecords/iteratorRaisesOnInvalidMagic,
    FileRecordsTest.testIterationOverPartialAndTruncation]."""
    name, buf, _ops = case
    outs = decode_all(buf)
    assert_decoders_agree(buf, outs)
    if outs["verified"].ok:
        assert_whole_original_batches(outs["verified"].value, ORIGINAL_BATCHES[name])
    if buf == SEEDS[name]:
        assert outs["verified"].ok and outs["verified"].value == \
            [r for b in ORIGINAL_BATCHES[name] for r in b]


@settings(FUZZ, max_examples=110)
@given(case=mutated())
def test_fuzz_mutated_batches_with_repaired_crcs(case):
    """The same mutations with every CRC recomputed afterwards, so CRC-verified decoding parses
    the damaged records: outcomes are well-formed or CorruptRecordError, and the columnar and
    scalar decoders agree [DefaultRecordTest.testInvalid*, DefaultRecordBatchTest.
    testInvalidRecordCountTooManyNonCompressedV2/TooLittle*]."""
    _name, buf, _ops = case
    fixed = bytearray(buf)
    fix_crcs(fixed)
    outs = decode_all(bytes(fixed))
    assert_decoders_agree(bytes(fixed), outs)


@settings(FUZZ, max_examples=40)
@given(data=st.binary(min_size=0, max_size=400), magic=st.sampled_from([None, 0, 1, 2]),
       size=st.one_of(st.none(), st.integers(-2**31, 2**31 - 1)))
def test_fuzz_random_bytes(data, magic, size):
    """Arbitrary bytes (optionally with a plausible magic and size field, CRCs repaired) never
    escape as anything but a CorruptRecordError."""
    buf = bytearray(data)
    if len(buf) >= 17 and magic is not None:
        buf[16] = magic
    if len(buf) >= 12 and size is not None:
        struct.pack_into(">i", buf, 8, size)
    fix_crcs(buf)
    outs = decode_all(bytes(buf))
    assert_decoders_agree(bytes(buf), outs)


# ------------------------------------------------------------------ hand-made hostile inputs

def v2_batch(body: bytes, count: int, *, compression: int = 0, base_offset: int = 0,
             base_ts: int = T0, last_delta: int | None = None) -> bytes:
    """A v2 batch around raw (possibly hostile) record bytes, with a correct CRC."""
    payload = compress(compression, body) if compression else body
    h = BatchHeader(base_offset, 49 + len(payload), -1, 2, 0, compression,
                    max(count - 1, 0) if last_delta is None else last_delta, base_ts, base_ts,
                    -1, -1, -1, count)
    raw = bytearray(h.pack() + payload)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def v2_raw_payload(payload: bytes, count: int, compression: int) -> bytes:
    """A v2 batch whose payload bytes are given already compressed (or hand-made)."""
    h = BatchHeader(0, 49 + len(payload), -1, 2, 0, compression, max(count - 1, 0), T0, T0,
                    -1, -1, -1, count)
    raw = bytearray(h.pack() + payload)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def record(*fields: bytes, length: bytes | None = None) -> bytes:
    body = b"".join(fields)
    return (encode_varint(len(body)) if length is None else length) + body


def simple_record(i=0, key=None, value=b"v", headers=b"\x00") -> bytes:
    k = encode_varint(-1) if key is None else encode_varint(len(key)) + key
    return record(b"\x00", encode_varlong(0), encode_varint(i), k,
                  encode_varint(len(value)) + value, headers)


def expect_corrupt(buf, error=CorruptRecordError, *, max_decompressed=LIMIT):
    """Both decoders, with and without CRC checks, refuse ``buf`` with ``error`` inside the
    time and memory guard."""
    calls = {
        "verified": lambda: decode_run(buf, verify_crc=True, max_decompressed=max_decompressed),
        "unverified": lambda: decode_run(buf, verify_crc=False, max_decompressed=max_decompressed),
        "scalar": lambda: list(iter_records(buf, max_decompressed=max_decompressed)),
    }
    errors = {}
    for what, fn in calls.items():
        out = guarded(fn, what)
        assert not out.ok, f"{what} accepted hostile input"
        assert isinstance(out.error, error), f"{what}: {out.error!r}"
        errors[what] = out.error
    return errors


def expect_too_large(buf):
    """Refused by the decompression limit (a RecordTooLargeError, see the tests below)."""
    for what, error in expect_corrupt(buf).items():
        assert "exceeds the limit" in str(error), f"{what}: {error!r}"


def test_records_count_int_max_with_tiny_payload():
    """recordsCount 2**31-1 over a one-record payload is refused up front, not by trying to
    allocate or loop 2**31 times; also for gzip [DefaultRecordBatchTest.
    testInvalidRecordCountTooManyNonCompressedV2/TooManyCompressedV2]."""
    for compression in (0, 1):
        buf = v2_batch(simple_record(), 2**31 - 1, compression=compression)
        expect_corrupt(buf)


@pytest.mark.parametrize("count", [0, 2, 5])
@pytest.mark.parametrize("compression", [0, 1])
def test_records_count_mismatch(count, compression):
    """A count that does not match the records (one record present) fails on iteration
    [DefaultRecordBatchTest.testInvalidRecordCountTooLittleNonCompressedV2/CompressedV2,
    TooMany*]."""
    expect_corrupt(v2_batch(simple_record(), count, compression=compression))


def test_record_length_claiming_2_pow_30():
    """A record length varint of 2**30 with a few bytes behind it
    [DefaultRecordTest.testInvalidSizeOfBodyInBytes]."""
    buf = v2_batch(record(b"\x00", encode_varlong(0), encode_varint(0), encode_varint(-1),
                          encode_varint(1), b"v", b"\x00", length=encode_varint(2**30)), 1)
    expect_corrupt(buf)


def test_header_count_int_max():
    """A header count of 2**31-1 in a small record [DefaultRecordTest.testInvalidNumHeaders]."""
    buf = v2_batch(simple_record(headers=encode_varint(2**31 - 1)), 1)
    expect_corrupt(buf)
    buf = v2_batch(simple_record(headers=encode_varint(-1)), 1)
    expect_corrupt(buf)


@pytest.mark.parametrize("where", ["length", "offset_delta", "key_length", "header_count"])
def test_ten_byte_varint_where_five_is_the_limit(where):
    """A varint with continuation bits past its 5th byte is invalid; so is an 11-byte varlong
    [ByteUtilsTest.testInvalidVarint/testInvalidVarlong, DefaultRecordTest.testInvalidVarlong]."""
    bad = b"\xff" * 9 + b"\x01"
    fields = {"attr": b"\x00", "ts": encode_varlong(0), "offset_delta": encode_varint(0),
              "key_length": encode_varint(-1), "value": encode_varint(1) + b"v",
              "header_count": b"\x00"}
    if where == "length":
        body = bad + b"".join(fields.values())
    else:
        fields[where] = bad
        body = record(*fields.values())
    expect_corrupt(v2_batch(body, 1))
    eleven = record(b"\x00", b"\xff" * 10 + b"\x01", encode_varint(0), encode_varint(-1),
                    encode_varint(1) + b"v", b"\x00")
    expect_corrupt(v2_batch(eleven, 1))


def test_record_underflow_and_overflowing_fields():
    """Key/value/header lengths past the record, records cut mid-varint
    [DefaultRecordTest.testInvalidKeySize/testInvalidValueSize/testInvalidHeaderKey/
    testNullHeaderKey/testInvalidHeaderValue/testUnderflowReadingTimestamp/
    testUnderflowReadingVarlong, testBasicSerdeInvalidHeaderCountTooHigh/TooLow]."""
    cases = [
        record(b"\x00", encode_varlong(0), encode_varint(0), encode_varint(105), b"k",
               encode_varint(1), b"v", b"\x00"),                              # key too long
        record(b"\x00", encode_varlong(0), encode_varint(0), encode_varint(-1),
               encode_varint(105), b"v", b"\x00"),                            # value too long
        simple_record(headers=encode_varint(1) + encode_varint(105) + b"h" + encode_varint(-1)),
        simple_record(headers=encode_varint(1) + encode_varint(-1) + encode_varint(-1)),
        simple_record(headers=encode_varint(1) + encode_varint(1) + b"h" + encode_varint(105)),
        simple_record(headers=encode_varint(8) + encode_varint(1) + b"h" + encode_varint(-1)),
        simple_record(headers=encode_varint(1) + encode_varint(1) + b"h" + encode_varint(-1)
                      + encode_varint(1) + b"x" + encode_varint(-1)),          # count too low
        record(b"\x00"),                                                       # ends at ts
        record(b"\x00", b"\x80\x80"),                                          # mid-varlong
    ]
    for body in cases:
        expect_corrupt(v2_batch(body, 1))


def test_batch_length_extremes():
    """Batch length below the 14-byte minimum (0, -1, 9) is corruption; a length running past
    the buffer end (2**31-1) is a partial batch, reported but not an error; a v2 length between
    14 and 49 is a corrupt v2 batch [ByteBufferLogInputStreamTest.iteratorRaisesOnTooSmallRecords/
    iteratorIgnoresIncompleteEntries, DefaultRecordBatchTest.testInvalidRecordSize]."""
    good = SEEDS["v2-none"]
    for size in (0, -1, 9, -2**31):
        buf = bytearray(good)
        struct.pack_into(">i", buf, 8, size)
        expect_corrupt(bytes(buf))
    buf = bytearray(good)
    struct.pack_into(">i", buf, 8, 2**31 - 1)
    for verify in (True, False):
        run = guarded(lambda: decode_run(bytes(buf), verify_crc=verify, max_decompressed=LIMIT),
                      "partial").value
        assert run.table.num_rows == 0 and run.partial and run.next_position == 0
    assert guarded(lambda: list(iter_records(bytes(buf))), "scalar").value == []
    buf = bytearray(good[:40])
    struct.pack_into(">i", buf, 8, 28)
    expect_corrupt(bytes(buf))


def test_unknown_magic_is_corruption():
    """Magic 3 or -1 at byte 16 raises UnknownMagicError, a CorruptRecordError
    [ByteBufferLogInputStreamTest.iteratorRaisesOnInvalidMagic,
    MemoryRecordsTest.testNextBatchSize]."""
    for magic in (3, 37, 0xFF):
        buf = bytearray(SEEDS["v2-gzip"])
        buf[16] = magic
        expect_corrupt(bytes(buf), UnknownMagicError)


def test_crc_covered_change_is_refused_and_outside_change_is_not():
    """Overwriting lastOffsetDelta without recomputing the CRC is corruption; baseOffset and the
    partition leader epoch are outside the CRC and only move the offsets
    [DefaultRecordBatchTest.testInvalidCrc/testSetLastOffset/testSetPartitionLeaderEpoch]."""
    buf = bytearray(SEEDS["v2-lz4"])
    struct.pack_into(">i", buf, 23, 10)
    verified = guarded(lambda: decode_run(bytes(buf), verify_crc=True), "verified")
    assert not verified.ok and "crc" in str(verified.error).lower()
    with pytest.raises(CorruptRecordError):
        list(iter_records(bytes(buf)))
    buf = bytearray(SEEDS["v2-lz4"])
    struct.pack_into(">q", buf, 0, 5000)
    struct.pack_into(">i", buf, 12, 77)
    rows = table_rows(decode_batches(bytes(buf)))
    orig = ORIGINAL_BATCHES["v2-lz4"][0]
    assert [r[0] for r in rows] == [r[0] - 100 + 5000 for r in orig]
    assert [r[1:] for r in rows] == [r[1:] for r in orig]


# -- decompression bombs

@pytest.fixture(scope="module")
def bombs():
    """Each codec's compression of 200 MB of zeros, made with our compression module."""
    zeros = bytes(200 << 20)
    made = {codec: compress(codec, zeros) for codec in (1, 2, 3, 4)}
    del zeros
    return made


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_decompression_bomb_is_refused_quickly(bombs, codec):
    """A batch whose payload expands to 200 MB is refused with RecordTooLargeError under
    max_decompressed=1 MiB, in well under 2 s and 64 MiB, by every decoder."""
    buf = v2_raw_payload(bombs[codec], 1, codec)
    assert len(buf) < 16 << 20
    expect_too_large(buf)


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_legacy_wrapper_bomb_is_refused(bombs, codec):
    """The same bomb inside a v1 compressed wrapper message."""
    payload = bombs[codec]
    body = struct.pack(">bbq", 1, codec, T0) + struct.pack(">i", -1) + \
        struct.pack(">i", len(payload)) + payload
    buf = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    expect_too_large(buf)


def test_lz4_block_claiming_huge_size():
    """LZ4 frames that lie about sizes: a block size word of 0x7FFFFFFF (and with the raw bit),
    a 4 MiB-max frame whose blocks add up past the limit, and a truncated block."""
    header = bytes.fromhex("04224D18604082")
    for word in (0x7FFFFFFF, 0xFFFFFFFF, 0x00010001):
        payload = header + struct.pack("<I", word) + b"\x00" * 64 + b"\x00\x00\x00\x00"
        expect_corrupt(v2_raw_payload(payload, 1, 3))
    # BD 0x70 = 4 MiB blocks; each raw (stored) block of 1 MiB: 2 of them pass the 1 MiB limit
    bd = 0x70
    from storage_core.format.compression import _lz4_hc
    frame = b"\x04\x22\x4d\x18" + bytes((0x60, bd, _lz4_hc(bytes((0x60, bd)))))
    block = struct.pack("<I", (1 << 20) | 0x80000000) + bytes(1 << 20)
    payload = frame + block + block + b"\x00\x00\x00\x00"
    expect_too_large(v2_raw_payload(payload, 1, 3))


def test_snappy_and_zstd_lying_about_sizes():
    """A raw snappy block (no xerial header) whose preamble claims 4 GiB, a xerial chunk that
    claims 2 GiB, and a zstd frame header declaring 2**40 bytes are refused before decoding."""
    raw_snappy = b"\xff\xff\xff\xff\x0f" + b"\x00" * 20
    expect_too_large(v2_raw_payload(raw_snappy, 1, 2))
    xerial = bytes.fromhex("82534E41505059000000000100000001") + struct.pack(">i", 2**31 - 1) + \
        b"\x00" * 32
    expect_corrupt(v2_raw_payload(xerial, 1, 2))
    # zstd: magic, FHD 0xC0 (8-byte content size, not single segment), window byte, size, block
    zstd = struct.pack("<I", 0xFD2FB528) + bytes((0xC0, 0x50)) + struct.pack("<Q", 2**40) + \
        bytes((0x01, 0x00, 0x00))
    expect_too_large(v2_raw_payload(zstd, 1, 4))


def _small_bomb_v2(codec):
    return v2_raw_payload(compress(codec, bytes(4 << 20)), 1, codec)


def _small_bomb_legacy(codec):
    payload = compress(codec, bytes(4 << 20), magic=1)
    body = struct.pack(">bbqii", 1, codec, T0, -1, len(payload)) + payload
    return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body


def test_scalar_v2_bomb_error_is_record_too_large():
    """iter_records keeps the RecordTooLargeError class for a v2 batch over the limit."""
    for codec in (1, 2, 3, 4):
        with pytest.raises(RecordTooLargeError):
            list(iter_records(_small_bomb_v2(codec), max_decompressed=LIMIT))


def test_columnar_v2_bomb_error_is_record_too_large():
    for codec in (1, 2, 3, 4):
        with pytest.raises(RecordTooLargeError):
            decode_run(_small_bomb_v2(codec), max_decompressed=LIMIT)


def test_legacy_bomb_error_is_record_too_large():
    for codec in (1, 2, 3):
        buf = _small_bomb_legacy(codec)
        with pytest.raises(RecordTooLargeError):
            decode_run(buf, max_decompressed=LIMIT)
        with pytest.raises(RecordTooLargeError):
            list(iter_records(buf, max_decompressed=LIMIT))


# -- legacy hostile cases

def _legacy_entry(offset, body):
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def test_legacy_wrapper_with_null_or_empty_payload():
    """A compressed wrapper with a null value, or whose payload holds no inner message, is
    corrupt [SimpleLegacyRecordTest.testCompressedIterationWithNullValue/
    testCompressedIterationWithEmptyRecords]."""
    null_value = _legacy_entry(0, struct.pack(">bbqii", 1, 1, T0, -1, -1))
    expect_corrupt(null_value)
    empty = compress(1, b"", magic=1)
    no_inner = _legacy_entry(0, struct.pack(">bbqii", 1, 1, T0, -1, len(empty)) + empty)
    expect_corrupt(no_inner)


def test_legacy_inner_message_with_unknown_magic_is_corruption():
    """An inner message with magic 3 inside a CRC-valid gzip v1 wrapper is corruption, as
    Kafka's DeepRecordsIterator reports it (InvalidRecordException 'Compressed message magic 3
    does not match wrapper magic 1'), not an unsupported format."""
    inner_body = struct.pack(">bbqii", 3, 0, T0, -1, 1) + b"x"
    inner = _legacy_entry(0, inner_body)
    payload = compress(1, inner, magic=1)
    wrapper = _legacy_entry(0, struct.pack(">bbqi", 1, 1, T0, -1)
                            + struct.pack(">i", len(payload)) + payload)
    expect_corrupt(wrapper)


def test_columnar_reads_lengths_below_minus_one_as_null():
    """A key, value or header-value length below -1 (-2, -7) is read as null by Kafka's
    DefaultRecord.readFrom (any negative size is null) and by both of our decoders alike
    [DefaultRecordTest.testBasicSerde null handling]."""
    bodies = [
        record(b"\x00", encode_varlong(0), encode_varint(0), encode_varint(-2),
               encode_varint(1), b"v", b"\x00"),
        record(b"\x00", encode_varlong(0), encode_varint(0), encode_varint(-1),
               encode_varint(-7), b"\x00"),
        simple_record(headers=encode_varint(1) + encode_varint(1) + b"h" + encode_varint(-2)),
    ]
    for body in bodies:
        buf = v2_batch(body, 1)
        scalar = scalar_rows(iter_records(buf))
        assert scalar[0][3] is None or scalar[0][4] is None or scalar[0][5][0][1] is None
        assert table_rows(decode_batches(buf)) == scalar


def test_scalar_offsets_stay_int64_like_columnar():
    buf = bytearray(build_batch([RecordInput(b"a", None, T0)] * 3, base_offset=0))
    struct.pack_into(">q", buf, 0, 2**63 - 1)            # baseOffset is outside the CRC
    buf = bytes(buf)
    columnar = decode_batches(buf).column("offset").to_pylist()
    scalar = [r.offset for _, r in iter_records(buf)]
    assert all(-2**63 <= o < 2**63 for o in scalar)
    assert scalar == columnar


# ------------------------------------------------------------------ scan_batches == LogInputStream

def _scalar_walk(buf, verify, max_batch_size):
    """LogInputStream's shallow walk as scan_batches reports it: the v2 batches before the
    first legacy entry, where that entry starts (or None), and the error (class, position,
    message) that ended the walk, if any."""
    from storage_core.format.log_input_stream import LogInputStream

    rows, legacy_at = [], None
    stream = LogInputStream(buf, 0, len(buf), verify=verify, max_batch_size=max_batch_size)
    try:
        for b in stream:
            if b.magic < 2:
                legacy_at = b.position
                break
            h = b.header
            rows.append((b.position, b.size, h.base_offset, h.partition_leader_epoch, h.crc,
                         h.attributes, h.last_offset_delta, h.base_timestamp, h.max_timestamp,
                         h.producer_id, h.producer_epoch, h.base_sequence, h.records_count))
    except CorruptRecordError as e:
        pos = e.position
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if buf[pos + 16] in (0, 1) and size >= 14 and pos + 12 + size <= len(buf) and \
                (max_batch_size is None or size <= max_batch_size):
            return rows, pos, None      # the legacy entry itself is bad: scan stops before it
        return rows, legacy_at, (type(e), e.position, str(e))
    return rows, legacy_at, None


def _compiled_walk(buf, verify, max_batch_size):
    from storage_core.format.log_input_stream import scan_batches

    try:
        scan = scan_batches(buf, verify=verify, max_batch_size=max_batch_size)
    except CorruptRecordError as e:
        return None, None, (type(e), e.position, str(e))
    names = ("position", "size", "base_offset", "partition_leader_epoch", "crc", "attributes",
             "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
             "producer_epoch", "base_sequence", "records_count")
    cols = [scan.column(n).tolist() for n in names]
    rows = [tuple(c[i] for c in cols) for i in range(len(scan))]
    return rows, (scan.end if scan.legacy_at_end else None), None


def assert_same_walk(buf, verify, limit, what=""):
    want_rows, want_legacy, want_err = _scalar_walk(buf, verify, limit)
    rows, legacy_at, err = _compiled_walk(buf, verify, limit)
    if want_err is not None:
        assert err == want_err, what
    else:
        assert err is None, (what, err)
        assert (rows, legacy_at) == (want_rows, want_legacy), what


@settings(FUZZ, max_examples=300)
@given(case=mutated(), verify=st.booleans(), limit=st.sampled_from([None, 200, 1 << 20]))
def test_fuzz_compiled_header_walk_matches_log_input_stream(case, verify, limit):
    """The compiled header walk that appends, segment reads and decoding use (scan_batches)
    finds the same batches with the same header fields as the scalar LogInputStream, stops
    before the same legacy entry, and fails with the same error at the same position
    [ByteBufferLogInputStreamTest.iteratorRaisesOnTooSmallRecords/iteratorRaisesOnInvalidMagic/
    iteratorIgnoresIncompleteEntries]."""
    _name, buf, _ops = case
    assert_same_walk(buf, verify, limit)


def test_compiled_header_walk_over_thousands_of_batches():
    """A buffer of 6000 one-record batches walks as LogInputStream walks it: the compiled walk
    starts with room for fewer batches and grows it (sizing it for the worst case cost every
    read megabytes of fresh memory), so every batch is found, a bad CRC or a truncated batch
    far past the first room fails at its own position, and a legacy entry there stops it."""
    table = pa.table({"key": pa.array([b"k%d" % i for i in range(6000)], pa.binary()),
                      "value": pa.array([b"v" * (i % 7) for i in range(6000)], pa.binary()),
                      "timestamp": pa.array([T0 + i for i in range(6000)], pa.int64())})
    buf = bytes(encode_batches(table, max_batch_bytes=80))  # a batch per record
    from storage_core.format.log_input_stream import scan_batches

    scan = scan_batches(buf, verify=True)
    assert len(scan) == 6000 and scan.end == len(buf)
    assert scan.base_offset.tolist() == list(range(6000))
    assert_same_walk(buf, True, None, "whole")
    at = int(scan.position[5000])
    bad = bytearray(buf)
    bad[at + 30] ^= 0xFF                                    # inside batch 5000's CRC'd bytes
    assert_same_walk(bytes(bad), True, None, "bad CRC")
    with pytest.raises(CorruptRecordError) as e:
        scan_batches(bytes(bad), verify=True)
    assert e.value.position == at
    assert_same_walk(buf[:at + 40], False, None, "truncated")
    legacy = buf[:at] + build_message(5000, b"v", b"k", magic=1, timestamp=T0)
    assert_same_walk(legacy, False, None, "legacy")
    assert scan_batches(legacy).legacy_at_end and len(scan_batches(legacy)) == 5000


def test_compiled_header_walk_matches_on_fixtures():
    """Every segment file of ../shared/fixtures walks the same both ways (real broker data)."""
    from fixture_paths import FIXTURES, require_fixture

    files = sorted(require_fixture(FIXTURES).rglob("*.log"))
    assert files, f"no segment files under {FIXTURES}"
    for path in files:
        buf = path.read_bytes()
        for verify in (False, True):
            assert_same_walk(buf, verify, None, str(path))

"""Round trips of whole record batches against two independent Kafka client codecs.

* kafka-python (pure Python): ``kafka.record.default_records``, ``legacy_records`` and
  ``memory_records``;
* aiokafka, both its C extension (``aiokafka.record._crecords``) and its pure-Python classes
  (``aiokafka.record.default_records._DefaultRecordBatchPy`` ...), which are separate code.

Directions: batches built by them are decoded by our columnar ``decode_batches`` and our scalar
``iter_records``/``iter_batches``; batches built by our ``encode_batches``/``build_batch``/
``end_transaction_marker_batch`` are decoded by theirs, with their CRC check passing. Where the
bytes are fully determined by the inputs (uncompressed v2) ours must equal theirs byte for byte.

Bracketed names point at the apache/kafka test whose behaviour a test mirrors
(../shared/kafka_test_checklist.md §1).

kafka-python finds its snappy codec through ``python-snappy`` and its magic-0 LZ4 header
checksum through ``xxhash``, neither of which is a dependency here: a module fixture plugs
cramjam's raw snappy block codec (kafka-python still does its own xerial framing) and an XXH32
into ``kafka.codec``.
"""

from __future__ import annotations

import math
import random
import struct
import types
import warnings
import zlib

import cramjam
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    # kafka-python's protocol package calls deprecated importlib.resources APIs on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec as kp_codec
    from kafka.record.default_records import DefaultRecordBatch as KPBatch
    from kafka.record.default_records import DefaultRecordBatchBuilder as KPBuilder
    from kafka.record.legacy_records import LegacyRecordBatchBuilder as KPLegacyBuilder
    from kafka.record.memory_records import MemoryRecords as KPMemoryRecords
    from kafka.record.memory_records import MemoryRecordsBuilder as KPMemoryRecordsBuilder

    import aiokafka.record.default_records as aio_default
    import aiokafka.record.legacy_records as aio_legacy
    import aiokafka.record.memory_records as aio_memory

from storage_core.format import (CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, SCHEMA,
                                 ControlRecordType, EndTransactionMarker, RecordInput,
                                 build_batch, decode_batches, encode_batches,
                                 end_transaction_marker_batch, iter_batches, iter_records,
                                 write_empty_header)
from storage_core.format import compression as comp
from storage_core.format.legacy import build_compressed, build_message
from storage_core.format.record_batch import (BatchHeader, crc32c, set_last_offset,
                                              set_max_timestamp, set_partition_leader_epoch)

# kafka-python's protocol package uses deprecated importlib.resources calls on import.
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_ID = {name: i for i, name in enumerate(CODECS)}
LEGACY_CODECS = ("none", "gzip", "snappy", "lz4")          # zstd needs magic 2
T0 = 1_700_000_000_000

HEADERS_TYPE = SCHEMA.field("headers").type


# ------------------------------------------------------------------ their implementations

class AioImpl:
    def __init__(self, name, builder, batch, legacy_builder, legacy_batch, memory_records):
        self.name = name
        self.builder = builder
        self.batch = batch
        self.legacy_builder = legacy_builder
        self.legacy_batch = legacy_batch
        self.memory_records = memory_records

    def __repr__(self) -> str:
        return f"aiokafka-{self.name}"


AIO_IMPLS = [AioImpl("py", aio_default._DefaultRecordBatchBuilderPy,
                     aio_default._DefaultRecordBatchPy, aio_legacy._LegacyRecordBatchBuilderPy,
                     aio_legacy._LegacyRecordBatchPy, aio_memory._MemoryRecordsPy)]
try:
    from aiokafka.record import _crecords
except ImportError:  # pragma: no cover - the wheel normally ships the extension
    _crecords = None
else:
    AIO_IMPLS.insert(0, AioImpl("c", _crecords.DefaultRecordBatchBuilder,
                                _crecords.DefaultRecordBatch, _crecords.LegacyRecordBatchBuilder,
                                _crecords.LegacyRecordBatch, _crecords.MemoryRecords))
AIO_IDS = [repr(i) for i in AIO_IMPLS]


def _xxh32_shim(data):
    h = comp._xxh32(bytes(data))
    return types.SimpleNamespace(digest=lambda: struct.pack(">I", h), intdigest=lambda: h)


@pytest.fixture(scope="module", autouse=True)
def kafka_python_codecs():
    """Give kafka-python a raw snappy block codec and an XXH32 when their packages are absent."""
    with pytest.MonkeyPatch.context() as mp:
        if kp_codec.snappy is None:
            mp.setattr(kp_codec, "snappy", types.SimpleNamespace(
                compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
                decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b)))))
        if kp_codec.xxhash is None:
            mp.setattr(kp_codec, "xxhash", types.SimpleNamespace(xxh32=_xxh32_shim))
        yield


# ------------------------------------------------------------------ normal forms

def row(offset, ts, tstype, key, value, headers=()):
    return (offset, ts, tstype, None if key is None else bytes(key),
            None if value is None else bytes(value),
            tuple((k, None if v is None else bytes(v)) for k, v in headers))


def expected_rows(recs, base_offset=0, tstype=CREATE_TIME, log_append_time=None):
    """recs: (key, value, ts, headers) tuples."""
    return [row(base_offset + i, log_append_time if tstype == LOG_APPEND_TIME else ts, tstype,
                k, v, h) for i, (k, v, ts, h) in enumerate(recs)]


def table_rows(table: pa.Table) -> list[tuple]:
    cols = {name: table.column(name) for name in table.column_names}
    ts = cols["timestamp"].cast(pa.int64()).to_pylist()
    heads = cols["headers"].to_pylist()
    return [row(o, t, tt, k, v, [(h["key"], h["value"]) for h in hs])
            for o, t, tt, k, v, hs in zip(cols["offset"].to_pylist(), ts,
                                          cols["timestampType"].to_pylist(),
                                          cols["key"].to_pylist(), cols["value"].to_pylist(),
                                          heads)]


def ours_columnar(buf) -> list[tuple]:
    table = decode_batches(buf, verify_crc=True)
    assert table.schema == SCHEMA
    return table_rows(table)


def ours_scalar(buf) -> list[tuple]:
    return [row(r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                [(h.key, h.value) for h in r.headers]) for _, r in iter_records(buf)]


def ours_both(buf) -> list[tuple]:
    a, b = ours_columnar(buf), ours_scalar(buf)
    assert a == b, "columnar and scalar decoders disagree"
    return a


def slices(buf):
    """Split a run of batches with nothing but the 12-byte log prefix (test-local walker)."""
    pos = 0
    while pos + 12 <= len(buf):
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        yield bytes(buf[pos:pos + 12 + size])
        pos += 12 + size
    assert pos == len(buf)


def _their_row(r):
    """Their record in our normal form; v0's missing timestamp (None) is Kafka's -1 and
    NoTimestampType."""
    ts = -1 if r.timestamp is None else r.timestamp
    tstype = NO_TIMESTAMP_TYPE if r.timestamp_type is None else r.timestamp_type
    return row(r.offset, ts, tstype, r.key, r.value, list(r.headers or ()))


def kp_decode(buf) -> tuple[list[tuple], list]:
    """kafka-python's MemoryRecords: every batch CRC-checked, then iterated."""
    rows, batches = [], []
    records = KPMemoryRecords(bytes(buf))
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc(), "kafka-python rejects the CRC"
        batches.append(batch)
        rows.extend(_their_row(r) for r in batch)
    return rows, batches


def aio_decode(impl: AioImpl, buf) -> tuple[list[tuple], list]:
    rows, batches = [], []
    for piece in slices(buf):
        magic = piece[16]
        batch = impl.batch(piece) if magic == 2 else impl.legacy_batch(piece, magic)
        assert batch.validate_crc(), f"{impl!r} rejects the CRC"
        batches.append(batch)
        rows.extend(_their_row(r) for r in batch)
    return rows, batches


def aio_memory_decode(impl: AioImpl, buf) -> list[tuple]:
    """The same through aiokafka's MemoryRecords (its own batch walker)."""
    rows = []
    records = impl.memory_records(bytes(buf))
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        rows.extend(_their_row(r) for r in batch)
    return rows


def headers_of(buf) -> list[BatchHeader]:
    return [info.header for info in iter_batches(buf, verify=True)]


def kp_build(recs, codec="none", *, producer_id=-1, producer_epoch=-1, base_sequence=-1,
             transactional=False, batch_size=1 << 24) -> bytes:
    b = KPBuilder(magic=2, compression_type=CODEC_ID[codec], is_transactional=transactional,
                  producer_id=producer_id, producer_epoch=producer_epoch,
                  base_sequence=base_sequence, batch_size=batch_size)
    for i, (k, v, ts, h) in enumerate(recs):
        assert b.append(i, ts, k, v, list(h)) is not None
    return bytes(b.build())


def aio_build(impl: AioImpl, recs, codec="none", *, producer_id=-1, producer_epoch=-1,
              base_sequence=-1, transactional=False, batch_size=1 << 24) -> bytes:
    b = impl.builder(2, CODEC_ID[codec], int(transactional), producer_id, producer_epoch,
                     base_sequence, batch_size)
    for i, (k, v, ts, h) in enumerate(recs):
        assert b.append(i, ts, k, v, list(h)) is not None
    return bytes(b.build())


def to_table(recs) -> pa.Table:
    return pa.table({
        "key": pa.array([k for k, _, _, _ in recs], pa.binary()),
        "value": pa.array([v for _, v, _, _ in recs], pa.binary()),
        "timestamp": pa.array([ts for _, _, ts, _ in recs], pa.int64()),
        "headers": pa.array([[{"key": hk, "value": hv} for hk, hv in h] for _, _, _, h in recs],
                            HEADERS_TYPE),
    })


def to_inputs(recs) -> list[RecordInput]:
    return [RecordInput(v, k, ts, tuple(h)) for k, v, ts, h in recs]


# A record set with every awkward shape: null / empty keys and values, headers with null values
# and non-ASCII keys, timestamps that go down (negative deltas), values that compress well.
RICH = [
    (None, b"hello", T0, ()),
    (b"", b"", T0 + 5, ()),
    (b"key-2", None, T0 - 1000, ()),                                    # tombstone, ts goes down
    (None, None, T0 - 2000, (("h", None),)),
    (b"k" * 300, b"v" * 5000, T0 + 10**9, (("tr\u00e4ce-\u65e5\u672c", b"\x00\xff"),
                                            ("empty", b""), ("null", None))),
    (b"\x00\x01\x02", b"x" * 200, T0 - 10**9, (("", b"no key name"),)),
] + [(b"key-%d" % i, b"value %d " % i * 20, T0 + (i % 7) * 3 - 10, (("i", b"%d" % i),))
     for i in range(40)]


# ------------------------------------------------------------------ the C extension

def test_aiokafka_public_classes_are_the_c_extension():
    """aiokafka's public record classes are the C ones when the extension is importable, so the
    'c' and 'py' parametrisations below exercise two different decoders."""
    if _crecords is None:
        pytest.skip("aiokafka C extension not built")
    assert aio_default.DefaultRecordBatch is _crecords.DefaultRecordBatch
    assert aio_default.DefaultRecordBatchBuilder is _crecords.DefaultRecordBatchBuilder
    assert aio_legacy.LegacyRecordBatch is _crecords.LegacyRecordBatch
    assert aio_default._DefaultRecordBatchPy is not _crecords.DefaultRecordBatch
    assert [i.name for i in AIO_IMPLS] == ["c", "py"]


# ------------------------------------------------------------------ byte identity

WORKED_2_4 = bytes.fromhex(
    "0000000000000000" "0000003d" "00000000" "02" "e641a44b" "0000" "00000000"
    "0000018bcfe56800" "0000018bcfe56800" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
    "16000000010a68656c6c6f00")

CONTROL_5 = bytes.fromhex(
    "00 00 00 00 00 00 00 05 00 00 00 42 00 00 00 00 02 db c1 80 da 00 30 00 00 00 00"
    "00 00 01 8b cf e5 68 00 00 00 01 8b cf e5 68 00 00 00 00 00 00 00 03 e8 00 00 ff"
    "ff ff ff 00 00 00 01 20 00 00 00 08 00 00 00 01 0c 00 00 00 00 00 07 00")


def test_worked_example_2_4_is_byte_identical_everywhere():
    """../shared/kafka_format.md §2.4: 73 bytes, batchLength 61, CRC 0xE641A44B; kafka-python's
    builder (leader epoch 0) writes exactly these bytes and so must ours
    [DefaultRecordBatchTest.testSizeInBytes, .buildDefaultRecordBatch]."""
    recs = [(None, b"hello", T0, ())]
    ours = build_batch(to_inputs(recs), partition_leader_epoch=0)
    assert len(WORKED_2_4) == 73
    assert ours == WORKED_2_4
    assert BatchHeader.parse(ours).crc == 0xE641A44B == crc32c(ours[21:])
    assert encode_batches(to_table(recs), partition_leader_epoch=0) == WORKED_2_4
    assert kp_build(recs) == WORKED_2_4
    # aiokafka writes NO_PARTITION_LEADER_EPOCH (-1), the field outside the CRC
    for impl in AIO_IMPLS:
        theirs = aio_build(impl, recs)
        assert theirs[12:16] == b"\xff\xff\xff\xff"
        assert theirs == build_batch(to_inputs(recs))
    assert ours_both(WORKED_2_4) == expected_rows(recs)
    h = headers_of(WORKED_2_4)[0]
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (-1, -1, -1, -1)
    assert h.max_timestamp == T0 and h.batch_length == 61


def test_golden_v2_checksums_of_memory_records_test():
    """Records (283843,"key1","value1"), (1234,"key2","value2") at offset 0 have the v2 batch CRC
    3851219455 uncompressed (and 2745969314 with lz4, written by lz4-java's fast compressor)
    [MemoryRecordsTest.testChecksum]."""
    recs = [(b"key1", b"value1", 283843, ()), (b"key2", b"value2", 1234, ())]
    plain = build_batch(to_inputs(recs))
    assert BatchHeader.parse(plain).crc == 3851219455
    assert BatchHeader.parse(encode_batches(to_table(recs))).crc == 3851219455
    assert BatchHeader.parse(kp_build(recs)).crc == 3851219455
    lz4 = build_batch(to_inputs(recs), compression=3)
    assert BatchHeader.parse(lz4).crc == 2745969314
    assert kp_decode(lz4)[0] == expected_rows(recs)


def test_control_batch_example_5_is_byte_identical_and_readable_by_theirs():
    """../shared/kafka_format.md §5: the 78-byte COMMIT marker (offset 5, pid 1000, epoch 0,
    coordinatorEpoch 7) [MemoryRecordsTest.testBuildEndTxnMarker,
    DefaultRecordBatchTest.testReadAndWriteControlBatch]."""
    marker = EndTransactionMarker(ControlRecordType.COMMIT, 7)
    ours = end_transaction_marker_batch(marker, offset=5, timestamp=T0, producer_id=1000,
                                        producer_epoch=0, partition_leader_epoch=0)
    assert len(CONTROL_5) == 78
    assert ours == CONTROL_5
    rows, batches = kp_decode(ours)
    (batch,) = batches
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1000, 0, -1)
    (rec,) = list(KPBatch(ours))
    assert rec.commit and not rec.abort and rec.version == 0 and rec.offset == 5
    assert struct.unpack(">hi", rec.value) == (0, 7)


@pytest.mark.parametrize("kind", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
def test_control_batches_ours_to_theirs_and_scalar(kind):
    """End-transaction markers built by us: kafka-python and aiokafka (C and Python) validate
    the CRC and read the control key/value; our scalar parser and the columnar decoder read the
    marker back [DefaultRecordBatchTest.testReadAndWriteControlBatch,
    EndTransactionMarkerTest.testSerde]."""
    marker = EndTransactionMarker(kind, 79)
    buf = end_transaction_marker_batch(marker, offset=983, timestamp=T0 - 5, producer_id=73,
                                       producer_epoch=13, partition_leader_epoch=29)
    assert len(buf) == 78
    key = struct.pack(">hh", 0, int(kind))
    value = struct.pack(">hi", 0, 79)
    want = [row(983, T0 - 5, CREATE_TIME, key, value)]
    rows, (kb,) = kp_decode(buf)
    assert rows == want
    assert kb.is_control_batch and kb.is_transactional
    (krec,) = list(KPBatch(buf))
    assert krec.type == int(kind) and krec.abort == (kind is ControlRecordType.ABORT)
    for impl in AIO_IMPLS:
        arows, (ab,) = aio_decode(impl, buf)
        assert arows == want
        assert ab.is_control_batch and ab.is_transactional
        assert (ab.producer_id, ab.producer_epoch, ab.base_sequence) == (73, 13, -1)
    assert ours_both(buf) == want
    (info, rec), = list(iter_records(buf))
    assert info.header.is_control and info.header.is_transactional
    assert info.header.partition_leader_epoch == 29
    assert EndTransactionMarker.deserialize(rec.key, rec.value) == marker
    table = decode_batches(buf)
    assert table.column("isControl").to_pylist() == [True]
    assert table.column("isTransactional").to_pylist() == [True]
    assert table.column("producerId").to_pylist() == [73]


BYTE_IDENTITY_CASES = {
    "rich": dict(recs=RICH),
    "one-null-everything": dict(recs=[(None, None, T0, (("n", None),))]),
    "decreasing": dict(recs=[(b"a", b"1", T0, ()), (b"b", b"2", T0 - 1, ()),
                             (b"c", b"3", T0 - 10**6, ()), (b"d", b"4", 0, ())]),
    "idempotent": dict(recs=RICH[:5], producer_id=12345, producer_epoch=7, base_sequence=983),
    "transactional": dict(recs=RICH[:5], producer_id=2**40, producer_epoch=32767,
                          base_sequence=0, transactional=True),
    "seq-wrap": dict(recs=RICH[:3], producer_id=1, producer_epoch=0,
                     base_sequence=2**31 - 2),
}


@pytest.mark.parametrize("case", list(BYTE_IDENTITY_CASES), ids=list(BYTE_IDENTITY_CASES))
def test_uncompressed_bytes_identical_to_theirs(case):
    """With the same inputs (base timestamp, producer fields, attributes) an uncompressed v2
    batch is a pure function of them: build_batch, encode_batches, kafka-python's builder
    (leader epoch 0) and aiokafka's builders (leader epoch -1) agree byte for byte
    [DefaultRecordBatchTest.testSizeInBytes]."""
    spec = dict(BYTE_IDENTITY_CASES[case])
    recs = spec.pop("recs")
    txn = spec.pop("transactional", False)
    kw = dict(producer_id=spec.get("producer_id", -1),
              producer_epoch=spec.get("producer_epoch", -1),
              base_sequence=spec.get("base_sequence", -1))
    theirs_kp = kp_build(recs, transactional=txn, **kw)
    ours0 = build_batch(to_inputs(recs), transactional=txn, partition_leader_epoch=0, **kw)
    assert ours0 == theirs_kp
    assert encode_batches(to_table(recs), transactional=txn, partition_leader_epoch=0,
                          max_batch_bytes=1 << 24, **kw) == theirs_kp
    ours_m1 = build_batch(to_inputs(recs), transactional=txn, **kw)
    for impl in AIO_IMPLS:
        assert aio_build(impl, recs, transactional=txn, **kw) == ours_m1, impl
    # and the MemoryRecordsBuilder path of kafka-python (what its producer uses)
    mb = KPMemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 24,
                                transactional=txn, **kw)
    for k, v, ts, h in recs:
        assert mb.append(ts, k, v, list(h)) is not None
    mb.close()
    assert bytes(mb.buffer()) == ours0


# ------------------------------------------------------------------ theirs -> ours

THEIR_BUILDERS = ["kafka-python"] + AIO_IDS


def their_build(builder, recs, codec="none", **kw) -> bytes:
    if builder == "kafka-python":
        return kp_build(recs, codec, **kw)
    impl = AIO_IMPLS[AIO_IDS.index(builder)]
    return aio_build(impl, recs, codec, **kw)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder", THEIR_BUILDERS)
def test_theirs_to_ours_every_codec(builder, codec):
    """A batch built by kafka-python / aiokafka (null and empty keys/values, headers with null
    values and non-ASCII keys, decreasing timestamps) decodes to the same records with our
    columnar and scalar decoders, CRC verified [DefaultRecordBatchTest.
    testStreamingIteratorConsistency, DefaultRecordTest.testBasicSerde]."""
    buf = their_build(builder, RICH, codec)
    (h,) = headers_of(buf)
    assert h.compression == CODEC_ID[codec], "their builder fell back to no compression"
    assert h.records_count == len(RICH) and h.last_offset_delta == len(RICH) - 1
    assert h.base_timestamp == RICH[0][2]
    assert h.max_timestamp == max(ts for _, _, ts, _ in RICH)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)
    assert not h.is_transactional and not h.is_control and h.timestamp_type == CREATE_TIME
    assert ours_both(buf) == expected_rows(RICH)


@pytest.mark.parametrize("codec", ["none", "zstd"])
@pytest.mark.parametrize("builder", THEIR_BUILDERS)
@pytest.mark.parametrize("txn", [False, True], ids=["idempotent", "transactional"])
def test_theirs_to_ours_producer_fields(builder, codec, txn):
    """Idempotent and transactional batches: producer id/epoch/base sequence and the
    transactional flag survive; record sequences are baseSequence + offsetDelta
    [DefaultRecordBatchTest.buildDefaultRecordBatchWithProducerId,
    DefaultRecordTest.testBasicSerde]."""
    recs = RICH[:6]
    buf = their_build(builder, recs, codec, producer_id=2**33 + 5, producer_epoch=4,
                      base_sequence=723, transactional=txn)
    (h,) = headers_of(buf)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (2**33 + 5, 4, 723)
    assert h.last_sequence == 723 + len(recs) - 1
    assert h.is_transactional == txn and not h.is_control
    assert ours_both(buf) == expected_rows(recs)
    assert [r.sequence for _, r in iter_records(buf)] == [723 + i for i in range(len(recs))]
    table = decode_batches(buf)
    assert set(table.column("producerId").to_pylist()) == {2**33 + 5}
    assert set(table.column("isTransactional").to_pylist()) == {txn}


def test_theirs_to_ours_sequence_wrap_around():
    """baseSequence Int.MAX-1 with 3 records: sequences Int.MAX-1, Int.MAX, 0, lastSequence 0
    [DefaultRecordBatchTest.buildDefaultRecordBatchWithSequenceWrapAround]."""
    buf = kp_build(RICH[:3], producer_id=9, producer_epoch=1, base_sequence=2**31 - 2)
    assert [r.sequence for _, r in iter_records(buf)] == [2**31 - 2, 2**31 - 1, 0]
    assert headers_of(buf)[0].last_sequence == 0
    assert KPBatch(buf).last_sequence == 0


@pytest.mark.parametrize("codec", CODECS)
def test_their_batch_restamped_log_append_time(codec):
    """A client batch turned into LogAppendTime the way a broker does (setMaxTimestamp rewrites
    attributes and maxTimestamp and the CRC): their CRC check still passes and every record, in
    every decoder, reports the append time [DefaultRecordBatchTest.testSetLogAppendTime]."""
    buf = bytearray(kp_build(RICH[:8], codec))
    set_max_timestamp(buf, 0, LOG_APPEND_TIME, T0 + 15)
    buf = bytes(buf)
    want = expected_rows(RICH[:8], tstype=LOG_APPEND_TIME, log_append_time=T0 + 15)
    assert ours_both(buf) == want
    assert kp_decode(buf)[0] == want
    for impl in AIO_IMPLS:
        assert aio_decode(impl, buf)[0] == want


@pytest.mark.parametrize("builder", THEIR_BUILDERS)
def test_their_batch_with_broker_offsets_and_epoch(builder):
    """baseOffset and partitionLeaderEpoch are outside the CRC: setLastOffset(500) on a
    3-record batch gives offsets 498..500 and setPartitionLeaderEpoch(500) keeps it valid, for
    their CRC check and ours [DefaultRecordBatchTest.testSetLastOffset,
    .testSetPartitionLeaderEpoch]."""
    buf = bytearray(their_build(builder, RICH[:3], "gzip"))
    set_last_offset(buf, 0, 500)
    set_partition_leader_epoch(buf, 0, 500)
    buf = bytes(buf)
    want = expected_rows(RICH[:3], base_offset=498)
    assert ours_both(buf) == want
    assert kp_decode(buf)[0] == want
    for impl in AIO_IMPLS:
        assert aio_decode(impl, buf)[0] == want
    (h,) = headers_of(buf)
    assert (h.base_offset, h.last_offset, h.partition_leader_epoch) == (498, 500, 500)


def test_theirs_many_batches_concatenated():
    """A fetch-like run of several of their batches (different codecs and producers) decodes as
    one table with the batches' offsets [MemoryRecordsTest.testIterator]."""
    parts, want, base = [], [], 0
    for i, codec in enumerate(CODECS):
        recs = RICH[i * 5:i * 5 + 5]
        b = bytearray(their_build(THEIR_BUILDERS[i % len(THEIR_BUILDERS)], recs, codec))
        set_last_offset(b, 0, base + len(recs) - 1)
        parts.append(bytes(b))
        want += expected_rows(recs, base_offset=base)
        base += len(recs) + 3          # gaps between batches, as after compaction
    buf = b"".join(parts)
    assert ours_both(buf) == want
    assert kp_decode(buf)[0] == want
    for impl in AIO_IMPLS:
        assert aio_memory_decode(impl, buf) == want


# ------------------------------------------------------------------ ours -> theirs

def check_theirs(buf, want, **batch_fields):
    """kafka-python and both aiokafka implementations validate the CRC of every batch and read
    ``want``; every batch has the given attribute values."""
    rows, batches = kp_decode(buf)
    assert rows == want, "kafka-python"
    decoders = [("kafka-python", batches)]
    for impl in AIO_IMPLS:
        arows, abatches = aio_decode(impl, buf)
        assert arows == want, repr(impl)
        decoders.append((repr(impl), abatches))
        assert aio_memory_decode(impl, buf) == want, repr(impl)
    for name, bs in decoders:
        for b in bs:
            for field, value in batch_fields.items():
                assert getattr(b, field) == value, (name, field)
    return batches


def our_encode(encoder, recs, codec="none", **kw) -> bytes:
    if encoder == "encode_batches":
        return encode_batches(to_table(recs), compression=codec, **kw)
    kw.pop("max_batch_bytes", None)
    return build_batch(to_inputs(recs), compression=CODEC_ID[codec], **kw)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("encoder", ["encode_batches", "build_batch"])
def test_ours_to_theirs_every_codec(encoder, codec):
    """Our batches, every codec, read identically by kafka-python and aiokafka (C and Python)
    with their CRC check passing [DefaultRecordBatchTest.testStreamingIteratorConsistency]."""
    buf = our_encode(encoder, RICH, codec, base_offset=1000)
    (h,) = headers_of(buf)
    assert h.compression == CODEC_ID[codec]
    batches = check_theirs(buf, expected_rows(RICH, base_offset=1000),
                           compression_type=CODEC_ID[codec], is_transactional=False,
                           is_control_batch=False, base_offset=1000, timestamp_type=0)
    assert batches[0].max_timestamp == max(ts for _, _, ts, _ in RICH)
    assert batches[0].first_timestamp == RICH[0][2]
    first = batches[0]
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (-1, -1, -1)


@pytest.mark.parametrize("shape", ["sliced", "chunked", "chunked-sliced"])
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_ours_from_sliced_and_chunked_tables_to_theirs(shape, codec):
    """Arrow inputs with non-zero array offsets and several chunks (what Spark hands over)
    encode the selected rows only, readable by every decoder."""
    full = to_table(RICH)
    table, recs = {
        "sliced": (full.slice(3, 20), RICH[3:23]),
        "chunked": (pa.concat_tables([full.slice(0, 10), full.slice(10)]), RICH),
        "chunked-sliced": (pa.concat_tables([full.slice(2, 5), full.slice(20, 7)]),
                           RICH[2:7] + RICH[20:27]),
    }[shape]
    buf = encode_batches(table, compression=codec, base_offset=7)
    want = expected_rows(recs, base_offset=7)
    check_theirs(buf, want)
    assert ours_both(buf) == want


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("encoder", ["encode_batches", "build_batch"])
def test_ours_log_append_time_to_theirs(encoder, codec):
    """A LogAppendTime batch of ours: attribute bit 3 set, every record reports the batch's
    maxTimestamp in every decoder [MemoryRecordsBuilderTest.buildUsingLogAppendTime]."""
    buf = our_encode(encoder, RICH[:10], codec, timestamp_type=LOG_APPEND_TIME,
                     log_append_time=T0 + 777)
    (h,) = headers_of(buf)
    assert h.timestamp_type == LOG_APPEND_TIME and h.max_timestamp == T0 + 777
    want = expected_rows(RICH[:10], tstype=LOG_APPEND_TIME, log_append_time=T0 + 777)
    check_theirs(buf, want, timestamp_type=1, max_timestamp=T0 + 777)
    assert ours_both(buf) == want


@pytest.mark.parametrize("codec", ["none", "lz4"])
@pytest.mark.parametrize("encoder", ["encode_batches", "build_batch"])
@pytest.mark.parametrize("txn", [False, True], ids=["idempotent", "transactional"])
def test_ours_producer_fields_to_theirs(encoder, codec, txn):
    """Idempotent / transactional batches of ours carry producer id, epoch and base sequence to
    their decoders; kafka-python's lastSequence agrees with ours
    [DefaultRecordBatchTest.buildDefaultRecordBatchWithProducerId]."""
    buf = our_encode(encoder, RICH[:7], codec, producer_id=2**40 + 1, producer_epoch=32767,
                     base_sequence=2**31 - 3, transactional=txn)
    batches = check_theirs(buf, expected_rows(RICH[:7]), producer_id=2**40 + 1,
                           producer_epoch=32767, base_sequence=2**31 - 3, is_transactional=txn)
    assert batches[0].last_sequence == headers_of(buf)[0].last_sequence == 3   # wrapped


def test_ours_empty_batch_to_theirs():
    """A cleaned (empty, 61-byte) batch from write_empty_header: their CRC check passes and it
    yields no records; header fields as written [DefaultRecordBatchTest.testWriteEmptyHeader]."""
    for txn, ctrl, tstype in [(False, False, CREATE_TIME), (True, True, LOG_APPEND_TIME),
                              (True, False, CREATE_TIME)]:
        buf = write_empty_header(base_offset=15, last_offset=37, max_timestamp=T0,
                                 producer_id=9, producer_epoch=3, base_sequence=983,
                                 timestamp_type=tstype, transactional=txn, control=ctrl)
        assert len(buf) == 61
        batches = check_theirs(buf, [], base_offset=15, is_transactional=txn,
                               is_control_batch=ctrl, timestamp_type=tstype)
        assert batches[0].last_offset_delta == 22
        assert batches[0].last_sequence == 983 + 22
        assert batches[0].first_timestamp == -1
        assert ours_both(buf) == []


def test_ours_single_record_batch_to_their_memory_records_builder_roundtrip():
    """kafka-python's MemoryRecordsBuilder output appended after ours forms one readable run."""
    mb = KPMemoryRecordsBuilder(magic=2, compression_type=4, batch_size=1 << 20)
    for k, v, ts, h in RICH[:4]:
        mb.append(ts, k, v, list(h))
    mb.close()
    theirs = bytearray(mb.buffer())
    set_last_offset(theirs, 0, 13)
    ours = build_batch(to_inputs(RICH[4:8]), base_offset=6, compression=1)
    buf = ours + bytes(theirs)
    want = expected_rows(RICH[4:8], base_offset=6) + expected_rows(RICH[:4], base_offset=10)
    assert ours_both(buf) == want
    check_theirs(buf, want)


# ------------------------------------------------------------------ max_batch_bytes split

def _record_size(k, v, ts_delta, off_delta, headers) -> int:
    from storage_core.format.record_batch import encode_record
    return len(encode_record(off_delta, ts_delta, k, v, headers))


@pytest.mark.parametrize("codec", CODECS)
def test_split_across_max_batch_bytes(codec):
    """2000 records of varied size encoded with max_batch_bytes 16 KiB: every batch (measured
    before compression, so also after for these compressible values) is at most 16 KiB, the
    count is close to the tight packing, offsets and base sequences continue across batches,
    and every decoder reads them all [MemoryRecordsBuilderTest.testSmallWriteLimit]."""
    limit = 16 * 1024
    recs = [(b"k%05d" % i if i % 3 else None, (b"%06d" % i) * (1 + (i * 37) % 90),
             T0 + ((i * 7919) % 5000) - 2500, (("n", b"%d" % i),) if i % 4 == 0 else ())
            for i in range(2000)]
    buf = encode_batches(to_table(recs), compression=codec, max_batch_bytes=limit,
                         base_offset=50, producer_id=5, producer_epoch=0, base_sequence=100)
    heads = headers_of(buf)
    raw_sizes = [61 + sum(_record_size(k, v, ts - recs[h.base_offset - 50][2],
                                       i - (h.base_offset - 50), hd)
                          for i, (k, v, ts, hd) in
                          enumerate(recs[h.base_offset - 50:h.last_offset - 50 + 1],
                                    start=h.base_offset - 50)) for h in heads]
    assert all(s <= limit for s in raw_sizes), raw_sizes
    assert all(h.size_in_bytes <= limit for h in heads)
    total = sum(raw_sizes) - 61 * len(heads)
    tight = math.ceil(total / (limit - 61))
    assert tight <= len(heads) <= tight + max(2, tight // 10), (len(heads), tight)
    # each batch but the last was full: the next record would not have fit
    for h, size in zip(heads[:-1], raw_sizes[:-1]):
        nxt = h.last_offset - 50 + 1
        k, v, ts, hd = recs[nxt]
        assert size + _record_size(k, v, ts - recs[h.base_offset - 50][2],
                                   nxt - (h.base_offset - 50), hd) > limit - 64
    # offsets and sequences continue across batches
    assert heads[0].base_offset == 50 and heads[-1].last_offset == 50 + len(recs) - 1
    for a, b in zip(heads, heads[1:]):
        assert b.base_offset == a.last_offset + 1
        assert b.base_sequence == a.last_sequence + 1
    want = expected_rows(recs, base_offset=50)
    assert ours_both(buf) == want
    check_theirs(buf, want, compression_type=CODEC_ID[codec], producer_id=5)


def test_split_oversized_record_gets_its_own_batch():
    """A record larger than max_batch_bytes is written alone in a batch (as a producer does);
    the records around it still respect the limit."""
    limit = 4096
    recs = [(None, b"a" * 100, T0, ())] * 10 + [(b"big", b"B" * 10_000, T0, ())] + \
           [(None, b"c" * 100, T0 + 1, ())] * 10
    buf = encode_batches(to_table(recs), max_batch_bytes=limit)
    heads = headers_of(buf)
    big = [h for h in heads if h.size_in_bytes > limit]
    assert len(big) == 1 and big[0].records_count == 1 and big[0].base_offset == 10
    assert all(h.size_in_bytes <= limit for h in heads if h is not big[0])
    check_theirs(buf, expected_rows(recs))


@pytest.mark.parametrize("n, size, limit", [(1100, 1000, 1 << 20), (200, 100, 4096)])
def test_split_limit_holds_after_compression(n, size, limit):
    rnd = random.Random(7)
    table = pa.table({"value": pa.array([rnd.randbytes(size) for _ in range(n)], pa.binary()),
                      "timestamp": pa.array([T0] * n, pa.int64())})
    buf = encode_batches(table, compression="snappy", max_batch_bytes=limit)
    sizes = [h.size_in_bytes for h in headers_of(buf) if h.records_count > 1]
    assert max(sizes) <= limit, max(sizes)


# ------------------------------------------------------------------ legacy v0 / v1 (read only)

def _kp_legacy(magic, codec, recs, wrapper_offset=None):
    b = KPLegacyBuilder(magic=magic, compression_type=CODEC_ID[codec], batch_size=1 << 24)
    for i, (k, v, ts) in enumerate(recs):
        assert b.append(i, ts if magic else None, k, v) is not None
    return bytes(b.build())


def _aio_legacy(impl, magic, codec, recs):
    b = impl.legacy_builder(magic, CODEC_ID[codec], 1 << 24)
    for i, (k, v, ts) in enumerate(recs):
        assert b.append(i, ts if magic else None, k, v) is not None
    return bytes(b.build())


LEGACY_RECS = [(None, b"first", T0), (b"", b"", T0 - 5), (b"key", None, T0 + 9),
               (b"k" * 50, b"v" * 3000, T0 + 1)] + [(b"%d" % i, b"val %d" % i * 30, T0 + i)
                                                   for i in range(20)]


def _legacy_expected(magic, recs, base, log_append_time=None):
    if magic == 0:
        return [row(base + i, -1, NO_TIMESTAMP_TYPE, k, v) for i, (k, v, _) in enumerate(recs)]
    if log_append_time is not None:
        return [row(base + i, log_append_time, LOG_APPEND_TIME, k, v)
                for i, (k, v, _) in enumerate(recs)]
    return [row(base + i, ts, CREATE_TIME, k, v) for i, (k, v, ts) in enumerate(recs)]


LEGACY_BUILDERS = ["kafka-python"] + AIO_IDS


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("builder", LEGACY_BUILDERS)
def test_legacy_theirs_to_ours(builder, magic, codec):
    """Message sets v0/v1, plain and compressed wrappers, as their producers build them, are read
    by our decoders: v0 records have timestamp -1 and type NoTimestampType, v1 records keep their
    CreateTime; null and empty keys/values stay distinct [LegacyRecordTest.testFields,
    MemoryRecordsTest.testIterator]."""
    if builder != "kafka-python" and magic == 0 and codec == "lz4":
        pytest.skip("aiokafka refuses LZ4 for magic 0 (KAFKA-3160)")
    if builder == "kafka-python":
        buf = _kp_legacy(magic, codec, LEGACY_RECS)
    else:
        buf = _aio_legacy(AIO_IMPLS[AIO_IDS.index(builder)], magic, codec, LEGACY_RECS)
    # Producers write relative offsets 0..n-1; a v1 wrapper at offset 0 is read with the
    # librdkafka rule (inner offsets taken as absolute).
    want = _legacy_expected(magic, LEGACY_RECS, 0)
    assert ours_both(buf) == want
    assert kp_decode(buf)[0] == want
    if codec != "none":
        # The broker assigns the wrapper the last offset; inner v1 offsets become absolute.
        moved = bytearray(buf)
        last = 1000 + len(LEGACY_RECS) - 1
        struct.pack_into(">q", moved, 0, last if magic == 1 else len(LEGACY_RECS) - 1)
        moved = bytes(moved)
        base = 1000 if magic == 1 else 0       # v0 inner offsets are absolute already
        want = _legacy_expected(magic, LEGACY_RECS, base)
        assert ours_both(moved) == want
        assert kp_decode(moved)[0] == want
        infos = list(iter_batches(moved, verify=True))
        assert len(infos) == 1 and infos[0].magic == magic
        assert infos[0].compression == CODEC_ID[codec]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_our_builders_readable_by_theirs(magic, codec):
    """Our legacy test builders (used by the fuzz tests) write what kafka-python and aiokafka
    read, CRC-32 included; v1 LogAppendTime wrappers stamp every inner record
    [AbstractLegacyRecordBatch deep iteration, LegacyRecordTest.testChecksum]."""
    recs = LEGACY_RECS[:8]
    if codec == "none":
        buf = b"".join(build_message(70 + i, v, k, magic=magic, timestamp=ts if magic else -1)
                       for i, (k, v, ts) in enumerate(recs))
    else:
        buf = build_compressed(recs, magic=magic, compression=CODEC_ID[codec],
                               wrapper_offset=70 + len(recs) - 1)
    want = _legacy_expected(magic, recs, 70)
    assert ours_both(buf) == want
    assert kp_decode(buf)[0] == want
    for impl in AIO_IMPLS:
        if magic == 0 and codec == "lz4":
            continue                   # aiokafka refuses LZ4 for magic 0
        assert aio_decode(impl, buf)[0] == want, impl
    if magic == 1 and codec != "none":
        lat = build_compressed(recs, magic=1, compression=CODEC_ID[codec],
                               wrapper_offset=70 + len(recs) - 1,
                               timestamp_type=LOG_APPEND_TIME, log_append_time=T0 + 42)
        want = _legacy_expected(1, recs, 70, log_append_time=T0 + 42)
        assert ours_both(lat) == want
        assert kp_decode(lat)[0] == want
        for impl in AIO_IMPLS:
            assert aio_decode(impl, lat)[0] == want, impl


def test_legacy_v0_lz4_uses_the_broken_header_checksum():
    """kafka-python writes magic-0 LZ4 with the 'broken' HC over magic||FLG||BD (KAFKA-3160);
    we read it (HC ignored for magic 0), our writer emits the same HC byte 0x1A, and kafka-python
    (which recomputes the HC before decoding) reads ours. The XXH32 plugged into kafka-python is
    first checked against liblz4's own frame header."""
    import lz4.frame
    liblz4_header = lz4.frame.compress(b"x", block_linked=False, store_size=False)[:7]
    assert liblz4_header == bytes.fromhex("04224D18604082")
    assert _xxh32_shim(b"\x60\x40").digest()[-2:-1] == liblz4_header[6:7]
    theirs = _kp_legacy(0, "lz4", LEGACY_RECS[:3])
    value_at = 12 + 4 + 2 + 4 + 4                   # offset, size, crc, magic+attrs, key, vlen
    assert theirs[value_at:value_at + 7] == bytes.fromhex("04224D1860401A")
    assert ours_both(theirs) == _legacy_expected(0, LEGACY_RECS[:3], 0)
    ours = build_compressed(LEGACY_RECS[:3], magic=0, compression=3, wrapper_offset=2)
    assert ours[value_at:value_at + 7] == bytes.fromhex("04224D1860401A")
    assert kp_decode(ours)[0] == _legacy_expected(0, LEGACY_RECS[:3], 0)


def test_mixed_magic_run():
    """v0, v1 and v2 batches in one buffer (a log written across a message-format upgrade)
    decode in order with their own timestamp rules [MemoryRecordsTest.testIterator]."""
    v0 = build_compressed(LEGACY_RECS[:3], magic=0, compression=1, wrapper_offset=2)
    v1 = build_message(3, b"v1", b"k1", magic=1, timestamp=T0)
    v2 = build_batch(to_inputs(RICH[:4]), base_offset=4, compression=2)
    buf = v0 + v1 + v2
    want = (_legacy_expected(0, LEGACY_RECS[:3], 0) + [row(3, T0, CREATE_TIME, b"k1", b"v1")]
            + expected_rows(RICH[:4], base_offset=4))
    assert ours_both(buf) == want
    assert kp_decode(buf)[0] == want
    assert [i.magic for i in iter_batches(buf)] == [0, 1, 2]


def test_legacy_crc_is_crc32_ieee():
    """v0/v1 messages use CRC-32 (IEEE) over magic..end; kafka-python agrees with zlib
    [LegacyRecordTest.testChecksum]."""
    buf = _kp_legacy(1, "none", LEGACY_RECS[:1])
    assert struct.unpack_from(">I", buf, 12)[0] == zlib.crc32(buf[16:])
    assert ours_both(buf) == _legacy_expected(1, LEGACY_RECS[:1], 0)


# ------------------------------------------------------------------ hypothesis

header_keys = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
blobs = st.one_of(st.none(), st.binary(max_size=64))
records_strategy = st.lists(
    st.tuples(blobs, blobs,
              st.integers(min_value=T0 - 10**10, max_value=T0 + 10**10),
              st.lists(st.tuples(header_keys, st.one_of(st.none(), st.binary(max_size=16))),
                       max_size=3).map(tuple)),
    min_size=1, max_size=40)

HYP = settings(max_examples=50, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@HYP
@given(recs=records_strategy, codec=st.sampled_from(CODECS),
       base_offset=st.integers(min_value=0, max_value=2**40),
       max_batch_bytes=st.sampled_from([256, 1024, 1 << 20]),
       producer=st.sampled_from([(-1, -1, -1, False), (77, 2, 0, False), (78, 0, 2**31 - 5, True)]))
def test_hypothesis_ours_to_theirs(recs, codec, base_offset, max_batch_bytes, producer):
    """Random records (null/empty/binary keys and values, any-order timestamps, 0-3 headers with
    str keys and nullable values), random codec and batch limit: encode_batches' output is read
    identically by kafka-python and aiokafka (C and Python), CRCs passing."""
    pid, epoch, seq, txn = producer
    buf = encode_batches(to_table(recs), compression=codec, base_offset=base_offset,
                         max_batch_bytes=max_batch_bytes, producer_id=pid,
                         producer_epoch=epoch, base_sequence=seq, transactional=txn)
    want = expected_rows(recs, base_offset=base_offset)
    heads = headers_of(buf)
    if codec == "none":
        assert all(h.size_in_bytes <= max_batch_bytes for h in heads if h.records_count > 1)
    assert sum(h.records_count for h in heads) == len(recs)
    check_theirs(buf, want, producer_id=pid, producer_epoch=epoch, is_transactional=txn)
    assert ours_both(buf) == want
    if codec == "none" and len(heads) == 1:
        # one uncompressed batch: build_batch writes the very same bytes
        assert build_batch(to_inputs(recs), base_offset=base_offset, producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq, transactional=txn) == buf


@HYP
@given(recs=records_strategy, codec=st.sampled_from(CODECS),
       builder=st.sampled_from(THEIR_BUILDERS))
def test_hypothesis_theirs_to_ours(recs, codec, builder):
    """Random records built by kafka-python's (or aiokafka's) builder decode to the same records
    with our columnar and scalar decoders; for uncompressed batches our encoder writes the same
    bytes."""
    buf = their_build(builder, recs, codec)
    want = expected_rows(recs)
    assert ours_both(buf) == want
    (h,) = headers_of(buf)
    assert h.max_timestamp == max(ts for _, _, ts, _ in recs)
    if h.compression == 0 and builder == "kafka-python":
        assert build_batch(to_inputs(recs), partition_leader_epoch=0) == buf

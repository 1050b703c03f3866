"""The ``kafkalog`` sink (``df.write.format("kafkalog")`` / ``df.writeStream.format("kafkalog")``,
``kafka_log_sink``) with a real local SparkSession over real partition directories: written
records are read back through the ``kafkalog`` source (``read_committed``, headers included),
decoded by two independent Kafka client codecs (kafka-python's ``MemoryRecords``, aiokafka's C
and pure-Python ``MemoryRecords``) and checked by the storage engine's ``verify`` command.

Each docstring names the line of ../shared/spark_kafka_test_checklist.md §8 it covers by its
bracketed Spark test name (``[code: ...]`` where the checklist gives none), or the issue's
acceptance criterion / sink option it covers.

Queries are few and grouped: a batch write costs about a second, a streaming query a few.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import struct
import subprocess
import sys
import time
import types
import warnings
from pathlib import Path

import cramjam
import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.datasource import CaseInsensitiveDict

with warnings.catch_warnings():
    # kafka-python's protocol package calls deprecated importlib.resources APIs on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec as kp_codec
    from kafka.record.memory_records import MemoryRecords as KPMemoryRecords

    import aiokafka.record.memory_records as aio_memory

from kafka_log_sink.partitioner import partitions_for_keys
from kafka_log_source.datasource import KafkaLogDataSource
from storage_core.format import murmur2
from storage_core.format.columnar import HEADER_TYPE
from storage_core.log import Log

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")

REPO = Path(__file__).resolve().parents[2]
QUERY_TIMEOUT = 180          # seconds; a healthy query here takes 1-5 s
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_ID = {name: i for i, name in enumerate(CODECS)}
HEADERS_DDL = "array<struct<key:string,value:binary>>"

AIO_MEMORY_RECORDS = [("aiokafka-py", aio_memory._MemoryRecordsPy)]
try:
    from aiokafka.record import _crecords
except ImportError:  # pragma: no cover - the wheel normally ships the extension
    pass
else:
    AIO_MEMORY_RECORDS.insert(0, ("aiokafka-c", _crecords.MemoryRecords))


# ====================================================================== helpers

def now_ms() -> int:
    return int(time.time() * 1000)


def ref_murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` written out in plain Python (the test's own reference), as a
    Java int."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail, rest = length & ~3, length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_partition(key: bytes, n: int) -> int:
    """``BuiltInPartitioner.partitionForKey``: ``toPositive(murmur2(key)) % n``."""
    return (ref_murmur2(key) & 0x7FFFFFFF) % n


def write(df, root: Path, options: dict | None = None, mode: str = "append") -> None:
    w = df.write.format("kafkalog").option("path", str(root))
    for k, v in (options or {}).items():
        w = w.option(k, str(v))
    w.mode(mode).save()


def write_fails(df, root: Path, options: dict | None = None, mode: str = "append") -> str:
    """The text of the error a batch write fails with."""
    with pytest.raises(Exception) as ei:
        write(df, root, options, mode)
    return str(ei.value)


def setup_fails(make: str, schema, options: dict) -> str:
    """The error the data source's ``writer`` (batch) or ``streamWriter`` raises on the driver
    for ``schema`` and ``options``, called as Spark calls it (case-insensitive options)."""
    ds = KafkaLogDataSource(CaseInsensitiveDict({k: str(v) for k, v in options.items()}))
    with pytest.raises(Exception) as ei:
        getattr(ds, make)(schema, False)
    return str(ei.value)


def read_back(spark, root: Path, topics: str) -> list[tuple]:
    """Every committed record of ``topics`` (comma separated) as ``(topic, partition, offset, key,
    value, timestamp ms, timestampType, headers)``, headers a tuple of (key, value) or None;
    sorted by topic, partition, offset."""
    df = (spark.read.format("kafkalog").option("path", str(root)).option("subscribe", topics)
          .option("isolationLevel", "read_committed").option("includeHeaders", "true").load())
    rows = df.selectExpr("topic", "partition", "offset", "key", "value",
                         "unix_millis(timestamp) AS ts", "timestampType", "headers").collect()
    out = []
    for r in rows:
        heads = None if r.headers is None else tuple(
            (h.key, None if h.value is None else bytes(h.value)) for h in r.headers)
        out.append((r.topic, r.partition, r.offset, None if r.key is None else bytes(r.key),
                    None if r.value is None else bytes(r.value), r.ts, r.timestampType, heads))
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


def partition_dirs(root: Path) -> list[str]:
    """Names of the topic-partition directories under ``root`` (nothing else)."""
    if not root.exists():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def verify_cli(*roots: Path) -> None:
    """The storage engine's own checker over everything the sink wrote."""
    res = subprocess.run([sys.executable, "-m", "storage_core.tools", "verify",
                          *(str(r) for r in roots)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


def segment_logs(part_dir: Path) -> list[Path]:
    return sorted(part_dir.glob("*.log"), key=lambda p: int(p.stem))


def batch_slices(buf: bytes):
    """The record batches of a log file by their 12-byte prefix (offset, length)."""
    pos = 0
    while pos + 12 <= len(buf):
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        yield buf[pos:pos + 12 + size]
        pos += 12 + size
    assert pos == len(buf)


def is_control(batch: bytes) -> bool:
    """The control flag of a v2 batch's attributes (offset 21)."""
    return bool(struct.unpack_from(">h", batch, 21)[0] & 0x20)


def run_stream(df, root: Path, chk: Path, options: dict, output_mode: str = "append"):
    """An ``availableNow`` query into the sink; returns its progress reports."""
    w = (df.writeStream.format("kafkalog").outputMode(output_mode)
         .option("path", str(root)).option("checkpointLocation", str(chk))
         .trigger(availableNow=True))
    for k, v in options.items():
        w = w.option(k, str(v))
    q = w.start()
    try:
        assert q.awaitTermination(QUERY_TIMEOUT), "query did not finish"
    finally:
        if q.isActive:
            q.stop()
    return q.recentProgress


def source_stream(spark, root: Path, topic: str, **options):
    r = (spark.readStream.format("kafkalog").option("path", str(root))
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("includeHeaders", "true"))
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def append_input(path: Path, keys, values, timestamps, headers) -> None:
    """One producer append to a source partition directory."""
    with Log.open(path) as log:
        log.append(pa.table({
            "key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
            "timestamp": pa.array(timestamps, pa.int64()),
            "headers": pa.array(headers, pa.list_(HEADER_TYPE))}))


@pytest.fixture
def kafka_python_snappy(monkeypatch):
    """kafka-python finds snappy through python-snappy, not a dependency here: plug cramjam's
    raw block codec in (kafka-python still does its own xerial framing)."""
    if kp_codec.snappy is None:
        monkeypatch.setattr(kp_codec, "snappy", types.SimpleNamespace(
            compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
            decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b)))))


# ====================================================================== the partitioner

def test_murmur2_is_kafkas():
    """[KafkaSinkSuite "batch - partition column and partitioner priorities"] the default
    partitioner's hash is Kafka's ``Utils.murmur2`` (Kafka's UtilsTest vectors), over whole
    columns, sliced arrays and string keys; ``partitions_for_keys`` is
    ``toPositive(murmur2) % n`` with -1 for null keys."""
    vectors = {b"21": -973932308, b"foobar": -790332482,
               b"a-little-bit-long-string": -985981536, b"abc": 479470107}
    for k, v in vectors.items():
        assert ref_murmur2(k) == v              # the test's own reference is right
    keys = list(vectors)
    assert murmur2(pa.array(keys, pa.binary())).tolist() == list(vectors.values())
    assert murmur2(pa.array([k.decode() for k in keys], pa.string())).tolist() == \
        list(vectors.values())
    # a slice of a larger array (non-zero Arrow offset) hashes the same
    padded = pa.array([b"zz", b"yyyyy"] + keys, pa.binary()).slice(2)
    assert murmur2(padded).tolist() == list(vectors.values())
    assert murmur2(pa.array([], pa.binary())).tolist() == []
    assert murmur2(pa.array([b""], pa.binary())).tolist() == [ref_murmur2(b"")]
    # every tail length (0-3) and longer keys, against the reference
    rnd = random.Random(7)
    many = [bytes(rnd.randrange(256) for _ in range(n)) for n in range(0, 40)] * 2
    assert murmur2(pa.array(many, pa.binary())).tolist() == [ref_murmur2(k) for k in many]

    parts = partitions_for_keys(pa.array([b"21", None, b"foobar", b"abc",
                                          b"a-little-bit-long-string"], pa.binary()), 4)
    assert parts.tolist() == [1173551340 % 4, -1, 1357151166 % 4, 479470107 % 4,
                              1161502112 % 4] == [0, -1, 2, 3, 0]
    # over large types and string keys, sliced, with nulls, against the reference
    expected = [(ref_murmur2(k) & 0x7FFFFFFF) % 7 for k in many]
    for t in (pa.binary(), pa.large_binary()):
        assert partitions_for_keys(pa.array(many, t), 7).tolist() == expected
        assert partitions_for_keys(pa.array(many, t).slice(5), 7).tolist() == expected[5:]
    text = [k.hex() for k in many]
    for t in (pa.string(), pa.large_string()):
        assert partitions_for_keys(pa.array(text, t), 7).tolist() == \
            [(ref_murmur2(k.encode()) & 0x7FFFFFFF) % 7 for k in text]
    holes = pa.array(many[:10] + [None] + many[10:20], pa.large_binary()).slice(3)
    assert partitions_for_keys(holes, 7).tolist() == expected[3:10] + [-1] + expected[10:20]


# ====================================================================== schema checks

def test_schema_errors_before_anything_is_written(spark, tmp_path):
    """[KafkaSinkSuite "streaming - write data with bad schema"] no topic anywhere / no value
    column; [KafkaSinkSuite "streaming - write data with valid schema but wrong types"] with
    the exact "<col> attribute unsupported type <type>. <col> must be a(n) <allowed>" wording;
    partition from Python ints is bigint and refused, the cast makes it acceptable
    [code: KafkaWriter]; headers type, struct<_1,_2> from tuples does not match, nullability
    does not matter [code: KafkaWriter.headersExpression]; [code: KafkaWriter.validateQuery]
    every one raised when the write is set up (batch writer and stream writer alike), before
    any record or directory is written. Two cases go through ``save()`` (AnalysisException
    PYTHON_DATA_SOURCE_ERROR); all go through the data source's ``writer`` / ``streamWriter``,
    the driver calls Spark makes, with the schemas of real DataFrames."""
    root = tmp_path / "data"
    cases = [
        (spark.createDataFrame([("v",)], "value string"), {},
         "topic option required when no 'topic' attribute is present. "
         "Use the topic option for setting a topic."),
        (spark.createDataFrame([("k",)], "key string"), {"topic": "t"},
         "Required attribute 'value' not found"),
        (spark.createDataFrame([(1, "v")], "topic int, value string"), {},
         "topic attribute unsupported type int. topic must be a(n) string"),
        (spark.createDataFrame([(1,)], "value int"), {"topic": "t"},
         "value attribute unsupported type int. value must be a(n) string or binary"),
        (spark.createDataFrame([(1, "v")], "key int, value string"), {"topic": "t"},
         "key attribute unsupported type int. key must be a(n) string or binary"),
        # Python ints are inferred as bigint: Kafka's partition must be a 32-bit int
        (spark.createDataFrame([("v", 0)], ["value", "partition"]), {"topic": "t"},
         "partition attribute unsupported type bigint. partition must be a(n) int"),
        (spark.createDataFrame([("v", [("a", b"1")])], ["value", "headers"]), {"topic": "t"},
         "headers attribute unsupported type array<struct<_1:string,_2:binary>>. "
         "headers must be a(n) array<struct<key:string,value:binary>>"),
        (spark.createDataFrame([("v", [("a", "1")])],
                               "value string, headers array<struct<key:string,value:string>>"),
         {"topic": "t"},
         "headers attribute unsupported type array<struct<key:string,value:string>>. "
         "headers must be a(n) array<struct<key:string,value:binary>>"),
        (spark.createDataFrame([("v", "2024")], "value string, timestamp string"),
         {"topic": "t"},
         "timestamp attribute unsupported type string. timestamp must be a(n) timestamp or double"),
    ]
    for df, opts, message in cases:
        for make in ("writer", "streamWriter"):
            text = setup_fails(make, df.schema, {"path": str(root), **opts})
            assert message in text, (make, message, text)
    for i in (0, 5):                                         # and through Spark's save()
        df, opts, message = cases[i]
        text = write_fails(df, root, opts)
        assert message in text and "PYTHON_DATA_SOURCE_ERROR" in text, (message, text)
    assert not root.exists()

    # the cast the checklist asks for makes the same partition column acceptable; headers
    # match by name and type (here non-nullable fields), not nullability
    ok = spark.createDataFrame([("v", 0)], ["value", "partition"]).select(
        "value", F.col("partition").cast("int").alias("partition"),
        F.expr("array(named_struct('key', 'h', 'value', cast('1' as binary)))").alias("headers"))
    assert not ok.schema["headers"].dataType.containsNull
    write(ok, root, {"topic": "t"})
    assert partition_dirs(root) == ["t-0"]
    assert [(r[1], r[4], r[7]) for r in read_back(spark, root, "t")] == [(0, b"v", (("h", b"1"),))]


def test_streaming_schema_error_fails_at_start(spark, tmp_path):
    """[KafkaSinkSuite "streaming - write data with bad schema"] a streaming query without a
    value column fails as it starts ("Required attribute 'value' not found"), nothing written
    [code: KafkaWriter.validateQuery]."""
    src, out = tmp_path / "src", tmp_path / "out"
    append_input(src / "in-0", [b"k"], [b"v"], [now_ms()], [None])
    df = source_stream(spark, src, "in").select("key")
    with pytest.raises(Exception) as ei:
        run_stream(df, out, tmp_path / "chk", {"topic": "o"})
    assert "Required attribute 'value' not found" in str(ei.value)
    assert not out.exists()


# ====================================================================== topics

def test_topic_column_option_both_and_trimmed(spark, tmp_path):
    """[KafkaSinkSuite "streaming - write to kafka with topic field"] rows go to the topic of
    their column; [KafkaSinkSuite "streaming - write w/o topic field, with topic option"] /
    [KafkaSinkSuite "streaming - topic field and topic option"] with the option set it wins
    over a column saying 'foo'; [code: KafkaSourceProvider.createSink] the option is trimmed;
    no key column means null keys."""
    root = tmp_path / "data"
    write(spark.createDataFrame([("a", "1"), ("b", "2"), ("a", "3")], "topic string, value string"),
          root)
    write(spark.createDataFrame([("foo", "x"), ("foo", "y")], "topic string, value string"),
          root, {"topic": "  opt \t"})
    assert partition_dirs(root) == ["a-0", "b-0", "opt-0"]
    got = [(t, p, o, k, v) for t, p, o, k, v, *_ in read_back(spark, root, "a,b,opt")]
    assert got == [("a", 0, 0, None, b"1"), ("a", 0, 1, None, b"3"),
                   ("b", 0, 0, None, b"2"),
                   ("opt", 0, 0, None, b"x"), ("opt", 0, 1, None, b"y")]


def test_topic_names_from_options_validated(spark, tmp_path):
    """Topic names given as the option are checked as Kafka does (``Topic.validate``) before
    any directory is made: a name that would leave ``path`` ("../x", "a/b", "..") is refused,
    so are ".", a blank name (after trimming) and one over 249 characters; one case through
    ``save()``, all through the data source's ``writer`` / ``streamWriter``."""
    root = tmp_path / "base" / "data"
    df = spark.createDataFrame([("v",)], "value string")
    cases = [("../x", "Invalid topic '../x'"), ("a/b", "Invalid topic 'a/b'"),
             ("..", "Topic name cannot be \".\" or \"..\""), (".", "Invalid topic '.'"),
             ("   ", "Topic name is illegal, it can't be empty"),
             ("t" * 250, "can't be longer than 249 characters")]
    for topic, message in cases:
        for make in ("writer", "streamWriter"):
            text = setup_fails(make, df.schema, {"path": str(root), "topic": topic})
            assert message in text, (topic, text)
    assert "Invalid topic '../x'" in write_fails(df, root, {"topic": "../x"})
    assert sorted(p.name for p in tmp_path.rglob("*")) == []


def test_topic_names_and_null_topic_from_data(spark, tmp_path):
    """Topic names from the data are checked before any directory is made (a '../x' row fails
    the write, a valid row beside it is not written either); [KafkaSinkSuite "batch - null
    topic field value, and no topic option"] a null topic fails with KAFKA_NULL_TOPIC_IN_DATA."""
    root = tmp_path / "base" / "data"
    bad = spark.createDataFrame([("ok", "1"), ("../x", "2"), ("ok", "3")],
                                "topic string, value string")
    text = write_fails(bad, root)
    assert "Invalid topic '../x'" in text
    null = spark.createDataFrame([("ok", "1"), (None, "2")], "topic string, value string")
    text = write_fails(null, root)
    assert ("[KAFKA_NULL_TOPIC_IN_DATA] The Kafka message data sent to the producer contains "
            "a null topic. Use the `topic` option for setting a default topic.") in text
    assert partition_dirs(root) == []
    assert not (tmp_path / "base" / "x-0").exists()


def test_topic_names_colliding_by_dot_and_underscore_refused(spark, tmp_path):
    """Kafka refuses to create a topic that differs from an existing one only by '.' against
    '_' (``Topic.hasCollision``; "Topic 'a_b' collides with existing topic: a.b"): the sink
    created both. Refused at the commit before any directory of the new topic is made, whether
    the other topic exists or comes in the same write; the existing topic keeps its records."""
    root = tmp_path / "data"
    df = spark.createDataFrame([("v",)], "value string")
    write(df, root, {"topic": "a.b"})
    assert "Topic 'a_b' collides with existing topic: a.b" in write_fails(df, root, {"topic": "a_b"})
    both = spark.createDataFrame([("x.y", "1"), ("x_y", "2")], "topic string, value string")
    assert "collides with existing topic" in write_fails(both, root)
    assert partition_dirs(root) == ["a.b-0"]
    write(df, root, {"topic": "a.b"})                  # the existing topic itself is no collision
    assert len(read_back(spark, root, "a.b")) == 2
    # a topic being deleted (LocalLog.logDeleteDirName) is gone from the cluster: no collision
    (root / "c.d-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    write(df, root, {"topic": "c_d"})
    assert len(read_back(spark, root, "c_d")) == 1


def test_collisions_and_partition_counts_read_directory_names_as_kafka(tmp_path):
    """The commit's collision check counts live and ``-future`` directories only (a ``-delete`` or
    ``-stray`` one's topic is gone); a topic's partition count comes from its live directories
    named as ``LocalLog.parseTopicPartitionName`` reads them ("t-²": str.isdigit took it, then
    int() raised a bare ValueError)."""
    from kafka_log_sink.commit import _check_collisions
    from kafka_log_sink.writer import topic_partition_count
    from storage_core.checkpoint import log_delete_dir_name, log_future_dir_name, log_stray_dir_name
    from storage_core.errors import InvalidTopicError

    root = tmp_path / "data"
    for name in (log_delete_dir_name("a.b", 0), log_stray_dir_name("c.d", 0), log_future_dir_name("e.f", 0),
                 "t-0", "t-\u00b2", "t-\u0664", "t-7.0123456789abcdef0123456789abcdef-delete", "t-x"):
        (root / name).mkdir(parents=True)
    _check_collisions(root, {"a_b", "c_d"})
    with pytest.raises(InvalidTopicError, match="'e_f' collides with existing topic: e.f"):
        _check_collisions(root, {"e_f"})
    assert topic_partition_count(root, "t", 5) == 1
    assert topic_partition_count(root, "a.b", 5) == 5


# ====================================================================== records

def test_keys_values_headers_and_other_columns(spark, tmp_path):
    """[KafkaSinkSuite "streaming - write w/o topic field, with topic option"; code:
    KafkaWriteTask] string keys/values stored as UTF-8 bytes, binary as-is, null keys;
    [code: KafkaWriteTask; KafkaMicroBatchSourceSuite "SPARK-27494: read kafka record containing
    null key/values."] a null value is a tombstone read back as null; [KafkaSinkSuite "batch -
    write to kafka"] headers 1 / 2 with the same key / 3 (one null value) / null read back
    identically in order; [code: KafkaWriter.expression; ACCEPT_ANY_SCHEMA] other columns
    (offset, timestampType, extra) ignored; [code: KafkaWriter.timestampExpression,
    KafkaWriteTask] without a timestamp column records get CreateTime at the write
    (timestampType 0)."""
    root = tmp_path / "data"
    rows = [
        ("k1", "é", [("a", b"1")], "x", 100, 1),
        ("k1", "v2", [("a", b"1"), ("a", b"2")], "x", 100, 1),
        ("k3", "v3", [("x", b"1"), ("y", None), ("z", b"3")], "x", 100, 1),
        (None, "v4", None, "x", 100, 1),
        ("k5", None, None, "x", 100, 1),
    ]
    df = spark.createDataFrame(rows, f"key string, value string, headers {HEADERS_DDL}, "
                                     f"extra string, offset bigint, timestampType int")
    binary = spark.createDataFrame([(b"\xff\x00", b"\x00\x01\xfe"), (None, b"")],
                                   "key binary, value binary")
    before = now_ms()
    write(df.coalesce(1), root, {"topic": "g"})
    write(binary.coalesce(1), root, {"topic": "gb"})
    after = now_ms()
    got = read_back(spark, root, "g,gb")
    for *_, ts, tstype, _h in got:
        assert before <= ts <= after and tstype == 0
    assert [(t, p, o, k, v, h) for t, p, o, k, v, _ts, _tt, h in got] == [
        ("g", 0, 0, b"k1", "é".encode(), (("a", b"1"),)),
        ("g", 0, 1, b"k1", b"v2", (("a", b"1"), ("a", b"2"))),
        ("g", 0, 2, b"k3", b"v3", (("x", b"1"), ("y", None), ("z", b"3"))),
        ("g", 0, 3, None, b"v4", None),
        ("g", 0, 4, b"k5", None, None),
        ("gb", 0, 0, b"\xff\x00", b"\x00\x01\xfe", None),
        ("gb", 0, 1, None, b"", None),
    ]


def test_timestamp_column(spark, tmp_path):
    """[code: KafkaWriter.timestampExpression, KafkaWriteTask] a timestamp column (timestamp or
    double seconds) is the record's CreateTime in ms; a null one means the write's time."""
    root = tmp_path / "data"
    t1 = dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)
    t2 = dt.datetime(1999, 12, 31, 23, 59, 59, 1000, tzinfo=dt.timezone.utc)
    ts_df = spark.createDataFrame([("a", t1), ("b", t2), ("c", None)],
                                  "value string, timestamp timestamp").coalesce(1)
    dbl_df = spark.createDataFrame([("d", 1704164645.5), ("e", 2.0)],
                                   "value string, timestamp double").coalesce(1)
    before = now_ms()
    write(ts_df, root, {"topic": "ts"})
    write(dbl_df, root, {"topic": "tsd"})
    after = now_ms()
    got = {v: (ts, tt) for _t, _p, _o, _k, v, ts, tt, _h in read_back(spark, root, "ts,tsd")}
    now_ts, now_type = got.pop(b"c")
    assert before <= now_ts <= after and now_type == 0
    assert got == {b"a": (1704164645678, 0), b"b": (946684799001, 0),
                   b"d": (1704164645500, 0), b"e": (2000, 0)}


def test_timestamp_column_with_microseconds(spark, tmp_path):
    """[code: KafkaWriter.timestampExpression, KafkaWriteTask] Spark timestamps carry
    microseconds (current_timestamp(), parsed strings): the record gets the ms part."""
    root = tmp_path / "data"
    df = spark.createDataFrame([("a",)], "value string").select(
        "value", F.expr("timestamp'2024-01-02 03:04:05.678901'").alias("timestamp"))
    write(df, root, {"topic": "ts"})
    assert [(r[4], r[5]) for r in read_back(spark, root, "ts")] == [(b"a", 1704164645678)]


def test_timestamp_double_truncates_like_spark(spark, tmp_path):
    """[code: KafkaWriter.timestampExpression] a double timestamp column is Spark's cast to
    timestamp, which truncates below the microsecond, then micros to millis."""
    root = tmp_path / "data"
    df = spark.createDataFrame([("a", 1704164645.6789)], "value string, timestamp double")
    expected = spark.createDataFrame([(1704164645.6789,)], "d double").selectExpr(
        "unix_millis(cast(d as timestamp)) AS ms").collect()[0].ms
    write(df, root, {"topic": "ts"})
    assert [(r[4], r[5]) for r in read_back(spark, root, "ts")] == [(b"a", expected)]


# ====================================================================== partitions

def test_partition_column_and_default_partitioner(spark, tmp_path):
    """[KafkaSinkSuite "streaming - write to non-existing topic"] (our decision: a missing
    topic is created with ``numPartitions`` partitions, all directories at once);
    [KafkaSinkSuite "batch - partition column and partitioner priorities"] keys spread over
    partitions by Kafka's murmur2 ``toPositive(murmur2(key)) % n``; a non-null partition
    column beats the partitioner, a null one leaves the row to it. The second write names no
    numPartitions: the existing topic's 4 partitions are used."""
    root = tmp_path / "data"
    keys = [b"21", b"foobar", b"a-little-bit-long-string", b"abc", b"0", b"1", b"2", b"3", b"4"]
    df = spark.createDataFrame([(k, b"v" + k) for k in keys], "key binary, value binary")
    write(df, root, {"topic": "p", "numPartitions": 4})
    assert partition_dirs(root) == ["p-0", "p-1", "p-2", "p-3"]
    first = {k: p for _t, p, _o, k, *_ in read_back(spark, root, "p")}
    assert first == {k: kafka_partition(k, 4) for k in keys}
    assert [first[k] for k in keys[:4]] == [0, 2, 0, 3]       # from Kafka's hash vectors
    assert len({first[k] for k in keys[4:]}) > 1              # keys "0".."4" spread

    with_col = spark.createDataFrame(
        [(k, b"w" + k, None if k == b"foobar" else 3) for k in keys],
        "key binary, value binary, partition int")
    write(with_col, root, {"topic": "p"})
    assert partition_dirs(root) == ["p-0", "p-1", "p-2", "p-3"]
    second = {k: p for _t, p, _o, k, v, *_ in read_back(spark, root, "p") if v[:1] == b"w"}
    assert second == {k: (kafka_partition(k, 4) if k == b"foobar" else 3) for k in keys}
    assert second[b"foobar"] == 2


# ====================================================================== modes

def test_batch_overwrite_and_ignore_refused(spark, tmp_path):
    """[KafkaSinkSuite "batch - unsupported save modes"] Overwrite and Ignore fail ('cannot be
    written in the "Overwrite" mode'), nothing written; Append works."""
    root = tmp_path / "data"
    df = spark.createDataFrame([("v",)], "value string")
    assert 'cannot be written in the "Overwrite" mode' in write_fails(df, root, {"topic": "t"},
                                                                      "overwrite")
    assert 'cannot be written in the "Ignore" mode' in write_fails(df, root, {"topic": "t"},
                                                                   "ignore")
    assert not root.exists()
    write(df, root, {"topic": "t"}, "append")
    assert [(r[0], r[2], r[4]) for r in read_back(spark, root, "t")] == [("t", 0, b"v")]


def test_to_json_struct_999_rows(spark, tmp_path):
    """[KafkaSinkSuite "SPARK-20496: batch - enforce analyzed plans"] a derived DataFrame
    (to_json(struct(*)) as value over 999 rows) is written whole."""
    root = tmp_path / "data"
    df = spark.range(999).select(F.to_json(F.struct("*")).alias("value"))
    write(df, root, {"topic": "j"})
    got = read_back(spark, root, "j")
    assert sorted(r[4] for r in got) == sorted(f'{{"id":{i}}}'.encode() for i in range(999))
    assert [r[2] for r in got] == list(range(999))



def test_write_whole_with_sparks_arrow_batch_bytes_unbounded(spark, tmp_path):
    """docs/options.md's write-throughput setting: with
    ``spark.sql.execution.arrow.maxBytesPerBatch`` at Int.MaxValue Spark cuts the Arrow batches
    it hands the sink by row count alone (10,000 rows here: three batches and a part); every row
    is written once, in order, and the key's partitioner is unchanged."""
    key = "spark.sql.execution.arrow.maxBytesPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "2147483647")
    try:
        root = tmp_path / "data"
        df = spark.range(0, 35_000, 1, 2).select(F.col("id").cast("string").alias("key"),
                                                  F.col("id").cast("string").alias("value"))
        write(df, root, {"topic": "u", "numPartitions": "3"})
    finally:
        spark.conf.set(key, before)
    got = read_back(spark, root, "u")
    assert sorted(int(r[4]) for r in got) == list(range(35_000))
    for p in range(3):
        values = [int(r[4]) for r in got if r[1] == p]
        assert [r[2] for r in got if r[1] == p] == list(range(len(values)))
        for task in (range(0, 17_500), range(17_500, 35_000)):   # each task's rows in order
            mine = [v for v in values if v in task]
            assert mine == sorted(mine)
    want = partitions_for_keys(pa.array([str(i) for i in range(35_000)]), 3)
    assert all(r[1] == want[int(r[4])] for r in got)

# ====================================================================== options

def test_invalid_option_values_named(spark, tmp_path):
    """Invalid option values (the sink's own and the topic configurations it passes to the
    partitions) fail the write naming the option, before anything is written; one case through
    ``save()``, all through the data source's ``writer`` / ``streamWriter``."""
    root = tmp_path / "data"
    df = spark.createDataFrame([("v",)], "value string")
    cases = [
        ({"compression": "brotli"}, "Invalid value 'brotli' for option 'compression'"),
        ({"batch.size": "1k"}, "Invalid value '1k' for option 'batch.size'"),
        ({"batch.size": "0"}, "Option 'batch.size' must be positive"),
        ({"numPartitions": "0"}, "Option 'numPartitions' must be positive"),
        ({"numPartitions": "two"}, "Invalid value 'two' for option 'numPartitions'"),
        ({"segment.bytes": "10"}, "Invalid value 10 for configuration segment.bytes"),
        ({"index.interval.bytes": "-1"},
         "Invalid value -1 for configuration index.interval.bytes"),
        ({"max.message.bytes": "abc"},
         "Invalid value 'abc' for configuration max.message.bytes"),
        ({"fsync": "sometimes"}, "Invalid value 'sometimes' for option 'fsync'"),
        ({"stagedSegmentMinBytes": "0"}, "Option 'stagedSegmentMinBytes' must be positive"),
        ({"stagedSegmentMinBytes": "32M"},
         "Invalid value '32M' for option 'stagedSegmentMinBytes'"),
        ({"path": " "}, "Option 'path' must be specified"),
    ]
    for opts, message in cases:
        for make in ("writer", "streamWriter"):
            text = setup_fails(make, df.schema, {"path": str(root), "topic": "t", **opts})
            assert message in text, (make, opts, text)
    text = write_fails(df, root, {"topic": "t", "compression": "brotli"})
    assert "Invalid value 'brotli' for option 'compression'" in text
    assert not root.exists()


def test_unusable_paths_and_numbers_named_before_anything_is_written(tmp_path):
    """A location with a NUL byte (``path``, ``checkpointLocation``, ``stagingLocation``,
    ``remotePath``, a ``file:`` URI too) raised a bare ``ValueError: embedded null byte``;
    ``numPartitions`` beyond an int32 (a partition is one in Kafka) passed, to fail at the first
    commit; ``1_000`` passed as 1000 (Java's ``parseInt`` refuses it). Each is refused naming
    the option, from the data source's ``writer`` / ``streamWriter`` as Spark calls them."""
    from pyspark.sql.types import StringType, StructField, StructType

    from storage_core.errors import InvalidConfigError

    root = tmp_path / "data"
    schema = StructType([StructField("value", StringType())])
    base = {"path": str(root), "topic": "t", "remote.storage.enable": "true",
            "remotePath": str(tmp_path / "remote")}
    cases = [
        ({"path": "a\0b"}, "Option 'path'"),
        ({"path": "file:///tmp/a%00b"}, "Option 'path'"),
        ({"checkpointLocation": "c\0"}, "Option 'checkpointLocation'"),
        ({"stagingLocation": "\0"}, "Option 'stagingLocation'"),
        ({"remotePath": "r\0"}, "Option 'remotePath'"),
        ({"numPartitions": str(2**31)}, "option 'numPartitions': at most 2147483647"),
        ({"numPartitions": str(10**30)}, "option 'numPartitions'"),
        ({"numPartitions": "1_000"}, "Invalid value '1_000' for option 'numPartitions'"),
        ({"batch.size": "64_000"}, "Invalid value '64_000' for option 'batch.size'"),
    ]
    for opts, message in cases:
        # a batch write has no checkpoint: the batch writer drops checkpointLocation
        for make in ("streamWriter",) if "checkpointLocation" in opts else ("writer", "streamWriter"):
            ds = KafkaLogDataSource(CaseInsensitiveDict({**base, **opts}))
            with pytest.raises(InvalidConfigError, match=re.escape(message)):
                getattr(ds, make)(schema, False)
    assert not root.exists() and list(tmp_path.iterdir()) == []
    ds = KafkaLogDataSource(CaseInsensitiveDict({"path": str(root), "topic": "t",
                                                 "numPartitions": str(2**31 - 1)}))
    ds.writer(schema, False)                   # the largest int32 is a partition count


def test_segment_batch_and_index_options_shape_the_partition(spark, tmp_path):
    """Options segment.bytes (small: several segments, none larger), batch.size (every record
    batch within it), index.interval.bytes (1: an offset index entry for every batch after a
    segment's first, as Kafka's LogSegment.append) reach the partitions the sink creates; the
    files pass the engine's verification and read back whole."""
    root = tmp_path / "data"
    values = [f"record-{i:04d}-".encode() * 2 for i in range(200)]
    df = spark.createDataFrame([(v,) for v in values], "value binary").coalesce(1)
    write(df, root, {"topic": "seg", "segment.bytes": 2048, "batch.size": 300,
                     "index.interval.bytes": 1})
    logs = segment_logs(root / "seg-0")
    assert len(logs) >= 5
    batches = 0
    for i, log_file in enumerate(logs):
        buf = log_file.read_bytes()
        assert 0 < len(buf) <= 2048
        kinds = [is_control(b) for b in batch_slices(buf)]
        sizes = [len(b) for b in batch_slices(buf)]
        assert max(sizes) <= 300, sizes
        batches += len(sizes)
        entries = (log_file.with_suffix(".index").stat().st_size) // 8
        if i < len(logs) - 1:
            assert kinds == [False] * len(kinds) and entries == len(sizes) - 1, log_file.name
        else:
            # the last segment ends with the COMMIT marker, appended by a second opening of
            # the log (whose bytes-since-last-entry count starts at 0, as a broker's after a
            # restart): an entry for it is not required
            assert kinds[-1] is True and kinds.count(True) == 1
            assert len(sizes) - 2 <= entries <= len(sizes) - 1, log_file.name
    # 200 records of 32-byte values cannot fit fewer than 6400 / 300 batches
    assert batches >= 200 * len(values[0]) // 300 + 1
    got = read_back(spark, root, "seg")
    assert [(r[2], r[4]) for r in got] == list(enumerate(values))
    verify_cli(root)


def test_max_message_bytes_fails_and_leaves_logs_unchanged(spark, tmp_path):
    """Option max.message.bytes: a record larger than it fails the write with a message naming
    max.message.bytes, and no partition log changes (the small records of the same write are
    not appended either)."""
    root = tmp_path / "data"
    write(spark.createDataFrame([("k", "before")], "key string, value string"), root,
          {"topic": "big", "numPartitions": 2})
    snapshot = tree(root)
    df = spark.createDataFrame([("a", "small"), ("b", "x" * 2000), ("c", "small too")],
                               "key string, value string")
    text = write_fails(df, root, {"topic": "big", "max.message.bytes": 1000})
    assert "max.message.bytes 1000" in text
    assert tree(root) == snapshot
    assert [r[4] for r in read_back(spark, root, "big")] == [b"before"]


def test_small_batch_size_one_record_per_batch(spark, tmp_path):
    """Option batch.size smaller than a record: one record per batch (Kafka producer)."""
    root = tmp_path / "data"
    df = spark.createDataFrame([("a",), ("b",), ("c",)], "value string").coalesce(1)
    write(df, root, {"topic": "t", "batch.size": 10})
    buf = segment_logs(root / "t-0")[0].read_bytes()
    data = [b for b in batch_slices(buf) if not is_control(b)]
    assert len(data) == 3
    assert [r[4] for r in read_back(spark, root, "t")] == [b"a", b"b", b"c"]


# ====================================================================== interop

def decode_with_libraries(part_dir: Path) -> dict[str, tuple[list, list, list]]:
    """Every ``.log`` of a partition decoded by kafka-python and both aiokafka implementations:
    per library (data records (offset, key, value, headers), codec ids of data batches,
    control batch kinds as (version, type))."""
    raw = b"".join(p.read_bytes() for p in segment_logs(part_dir))
    out = {}
    readers = [("kafka-python", KPMemoryRecords)] + AIO_MEMORY_RECORDS
    for name, memory_records in readers:
        records, codecs, controls = [], [], []
        mr = memory_records(raw)
        while mr.has_next():
            batch = mr.next_batch()
            assert batch.validate_crc(), name
            assert batch.is_transactional, name
            if batch.is_control_batch:
                for r in batch:
                    controls.append(struct.unpack(">hh", bytes(r.key)))
                continue
            codecs.append(batch.compression_type)
            for r in batch:
                heads = tuple((k, None if v is None else bytes(v)) for k, v in r.headers)
                records.append((r.offset, None if r.key is None else bytes(r.key),
                                None if r.value is None else bytes(r.value), heads or None))
        out[name] = (records, codecs, controls)
    return out


def test_every_compression_verifies_and_decodes_with_kafka_clients(spark, tmp_path,
                                                                   kafka_python_snappy):
    """Issue acceptance: files the sink writes pass the storage engine's verification and
    decode with aiokafka's and kafka-python's codecs for every compression type (none, gzip,
    snappy, lz4, zstd): the data records they decode (transactional batches, CRC checked) are
    exactly what Spark wrote and reads back, the control batches are COMMIT markers."""
    root = tmp_path / "data"
    rows = []
    for i in range(60):
        key = None if i % 10 == 0 else f"key-{i % 7}".encode()
        value = None if i == 13 else (f"value-{i} " * 6).encode()
        heads = None if i % 3 == 0 else [("h", str(i).encode()), ("n", None)]
        rows.append((key, value, heads))
    df = spark.createDataFrame(rows, f"key binary, value binary, headers {HEADERS_DDL}")
    for codec in CODECS:
        write(df, root, {"topic": f"c-{codec}", "compression": codec, "numPartitions": 2,
                         "batch.size": 512})
    verify_cli(root)
    got = read_back(spark, root, ",".join(f"c-{c}" for c in CODECS))
    expected = sorted(((k, v, None if h is None else tuple(h)) for k, v, h in rows), key=repr)
    for codec in CODECS:
        topic = f"c-{codec}"
        mine = [r for r in got if r[0] == topic]
        assert sorted(((k, v, h) for _t, _p, _o, k, v, _ts, _tt, h in mine), key=repr) == expected
        for partition in (0, 1):
            spark_rows = [(o, k, v, h) for _t, p, o, k, v, _ts, _tt, h in mine if p == partition]
            decoded = decode_with_libraries(root / f"{topic}-{partition}")
            for lib, (records, codecs, controls) in decoded.items():
                assert records == spark_rows, (codec, partition, lib)
                assert codecs and set(codecs) == {CODEC_ID[codec]}, (codec, lib)
                # one COMMIT (version 0, type 1) per transaction touching the partition
                assert controls and set(controls) == {(0, 1)}, (codec, lib)
            # several batches per partition: batch.size 512 split the records
            assert len(decoded["kafka-python"][1]) > 1, (codec, partition)


# ====================================================================== streaming

def test_streaming_round_trip_two_micro_batches(spark, tmp_path):
    """Issue acceptance: a streaming query writes, a second query reads back every record with
    keys, values, headers, timestamps (the timestamp column is the record's CreateTime, ms)
    and partitions (the partition column) intact; the source's own DataFrame is written as is
    (its topic column loses to the option, offset / timestampType are ignored).
    [KafkaSinkSuite streaming round-trip tests] two successive micro-batches (1..5, then
    1..10 after a restart from the checkpoint: nothing twice); [KafkaSinkSuite "streaming -
    sink progress is produced"] numOutputRows is the rows written; each micro-batch is one
    Kafka transaction (data, then a COMMIT marker per partition); the files verify."""
    src, out, chk = tmp_path / "src", tmp_path / "out", tmp_path / "chk"
    t0 = 1_700_000_000_123

    def rec(v: int):
        key = None if v == 4 else f"k{v}".encode()
        heads = (None if v % 3 == 0 else [{"key": "h", "value": str(v).encode()}] if v % 3 == 1
                 else [{"key": "h", "value": b"a"}, {"key": "h", "value": None}])
        return key, str(v).encode(), t0 + 1000 * v + v, heads

    def feed(part: int, vs: list[int]) -> None:
        ks, vals, ts, hs = zip(*(rec(v) for v in vs))
        append_input(src / f"in-{part}", list(ks), list(vals), list(ts), list(hs))

    def expected(vs_by_part: dict[int, list[list[int]]]) -> list[tuple]:
        rows = []
        for part, batches in vs_by_part.items():
            offset = 0
            for vs in batches:
                for v in vs:
                    k, val, ts, hs = rec(v)
                    rows.append(("o", part, offset, k, val, ts, 0, None if hs is None else
                                 tuple((h["key"], h["value"]) for h in hs)))
                    offset += 1
                offset += 1                  # the COMMIT marker of the micro-batch
        return sorted(rows)

    feed(0, [1, 2, 3])
    feed(1, [4, 5])
    opts = {"topic": "o", "numPartitions": 2}
    progress = run_stream(source_stream(spark, src, "in"), out, chk, opts)
    assert [p["sink"]["numOutputRows"] for p in progress if p["numInputRows"]] == [5]
    assert partition_dirs(out) == ["o-0", "o-1"]
    assert read_back(spark, out, "o") == expected({0: [[1, 2, 3]], 1: [[4, 5]]})

    feed(0, [6, 7])
    feed(1, [8, 9, 10])
    progress = run_stream(source_stream(spark, src, "in"), out, chk, opts)
    assert [(p["batchId"], p["sink"]["numOutputRows"]) for p in progress
            if p["numInputRows"]] == [(1, 5)]
    got = read_back(spark, out, "o")
    assert got == expected({0: [[1, 2, 3], [6, 7]], 1: [[4, 5], [8, 9, 10]]})
    assert sorted(int(r[4]) for r in got) == list(range(1, 11))
    verify_cli(out)


def test_streaming_complete_mode_appends_and_update_refused(spark, tmp_path):
    """[KafkaSinkSuite "streaming - write aggregation w/o topic field, with topic option"] an
    aggregation's output is appended as new records each micro-batch, never upserted
    (complete mode, accepted as append as Spark's Kafka sink does); [KafkaSinkSuite
    "streaming - sink progress is produced"] numOutputRows 3 per batch. Update mode is refused
    by Spark itself for Python sinks (pyspark_datasource.md G11), and writes nothing."""
    src, out = tmp_path / "src", tmp_path / "out"
    append_input(src / "in-0", [None] * 6, [b"1", b"2", b"3", b"1", b"2", b"3"],
                 [now_ms()] * 6, [None] * 6)
    agg = (source_stream(spark, src, "in", maxOffsetsPerTrigger=3)
           .groupBy(F.col("value").cast("string").alias("v")).count()
           .select(F.concat_ws(",", "v", F.col("count").cast("string")).alias("value")))
    progress = run_stream(agg, out, tmp_path / "chk", {"topic": "agg"}, "complete")
    assert [(p["batchId"], p["sink"]["numOutputRows"]) for p in progress] == [(0, 3), (1, 3)]
    got = [(r[2], r[4]) for r in read_back(spark, out, "agg")]
    assert [o for o, _ in got] == [0, 1, 2, 4, 5, 6]         # a COMMIT marker after each batch
    assert sorted(v for o, v in got if o < 3) == [b"1,1", b"2,1", b"3,1"]
    assert sorted(v for o, v in got if o > 3) == [b"1,2", b"2,2", b"3,2"]

    with pytest.raises(Exception) as ei:
        run_stream(agg, out, tmp_path / "chk-update", {"topic": "upd"}, "update")
    assert "kafkalog does not support Update mode" in str(ei.value)
    assert partition_dirs(out) == ["agg-0"]

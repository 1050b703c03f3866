"""The ``kafkalog`` source through a real SparkSession: option validation (checklist §1), offset
JSON formats as they travel through real queries and checkpoints (§2) and the record schema and
headers (§7) of ../shared/spark_kafka_test_checklist.md.

Each test's docstring names the checklist line(s) it covers by their bracketed Spark test name.
Pure JSON parsing is covered by test_offsets.py and not repeated here.

Where errors surface (found out with PySpark 4.3 and asserted below):
- ``load()`` (batch and streaming) calls only ``DataSource.schema()``, which checks the
  subscription, the path and includeHeaders: those fail at ``load()`` with ``AnalysisException
  [PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance``, as Spark's Kafka
  source fails at load() (``sourceSchema``). ``schema()`` cannot tell a stream from a batch, so
  it leaves the subscription to the readers when an ending option is given (for a stream,
  "ending offset not valid in streaming queries" must win).
- everything else is checked in ``reader()`` / ``streamReader()``: a batch read fails at its first
  action (``AnalysisException ... Failed to initialize Python data source reader``; Spark's own
  V2 Kafka scan also validates in ``toBatch``), a streaming query when it starts
  (``StreamingQueryException [STREAM_FAILED]`` from ``awaitTermination()``).
- a user-supplied schema bypasses ``schema()``: nothing of the source runs at ``load()``, so the
  refusal can only come from ``reader()``/``streamReader()``.

Every error surface is exercised through Spark at least once per checklist line; further
variants of the same message are checked on the source built as Spark's Python worker builds it
(``make_source``: the options in a CaseInsensitiveDict), because each failing Spark action costs
a fresh Python worker (~1.3 s of imports) and each streaming query ~3 s. Error messages are
matched as case-insensitive substrings, as Spark's suites do.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException, PythonException, StreamingQueryException
from pyspark.sql import functions as F
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from kafka_log_source import KafkaLogDataSource
from storage_core.config import LogConfig
from storage_core.errors import InvalidConfigError, KafkaLogError
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.log import Log

LONG_MAX = str(2 ** 63 - 1)
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
OFFSETS_EXAMPLE = 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got '
ASSIGN_EXAMPLE = 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got '

KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("timestamp", TimestampType(), True),
    StructField("timestampType", IntegerType(), True),
])
HEADERS_FIELD = StructField(
    "headers", ArrayType(StructType([StructField("key", StringType(), True),
                                     StructField("value", BinaryType(), True)]), True), True)


# ====================================================================== helpers

def write(root: Path, topic: str, partition: int, values, *, keys=None, timestamps=None,
          headers=None, config: LogConfig | None = None, clock=None) -> None:
    """Append records to ``root/topic-partition`` (created if needed; ``values=[]`` makes an
    empty partition)."""
    cols = {"value": pa.array(values, pa.binary())}
    if keys is not None:
        cols["key"] = pa.array(keys, pa.binary())
    if timestamps is not None:
        cols["timestamp"] = pa.array(timestamps, pa.timestamp("ms", tz="UTC"))
    if headers is not None:
        cols["headers"] = pa.array(headers, HEADERS)
    extra = {} if clock is None else {"clock": clock}
    with Log.open(root / f"{topic}-{partition}", config or LogConfig(), **extra) as log:
        if values:
            log.append(pa.table(cols))


def batch_reader(spark, options: dict, schema: str | None = None):
    r = spark.read
    if schema is not None:
        r = r.schema(schema)
    r = r.format("kafkalog")
    for k, v in options.items():
        r = r.option(k, v)
    return r


def stream_reader(spark, options: dict, schema: str | None = None):
    r = spark.readStream
    if schema is not None:
        r = r.schema(schema)
    r = r.format("kafkalog")
    for k, v in options.items():
        r = r.option(k, v)
    return r


def batch_error(spark, options: dict) -> str:
    """The message of the error a batch read with ``options`` raises at ``load()`` or at its first
    action (Spark's Kafka relation: "at load/first action")."""
    with pytest.raises(AnalysisException) as e:
        batch_reader(spark, options).load().collect()
    message = str(e.value)
    assert "PYTHON_DATA_SOURCE_ERROR" in message
    return message


def assert_mentions(message: str, *parts: str) -> None:
    low = message.lower()
    for part in parts:
        assert part.lower() in low, f"{part!r} not in message:\n{message}"


def rows(df) -> list[tuple]:
    return sorted((r.topic, r.partition, r.offset, r.value)
                  for r in df.select("topic", "partition", "offset", "value").collect())


def expected(topic: str, partition: int, offsets) -> list[tuple]:
    return [(topic, partition, o, f"{topic}{partition}-{o}".encode()) for o in offsets]


def vals(topic: str, partition: int, offsets) -> list[bytes]:
    return [f"{topic}{partition}-{o}".encode() for o in offsets]


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


# ====================================================================== shared data

@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """t-0, t-1: 5 records each, CreateTime 1000+i / 2000+i; a-0, b-0, c-0, ab-0: one record;
    hundred-0: 100 records; topicA-0..2, topicB-4..6: one record; __internal-0: one record.
    Every value is b"<topic><partition>-<offset>"."""
    root = tmp_path_factory.mktemp("kafkalog_options")
    write(root, "t", 0, vals("t", 0, range(5)), timestamps=[1000 + i for i in range(5)])
    write(root, "t", 1, vals("t", 1, range(5)), timestamps=[2000 + i for i in range(5)])
    for topic in ("a", "b", "c", "ab", "__internal"):
        write(root, topic, 0, vals(topic, 0, [0]))
    write(root, "hundred", 0, vals("hundred", 0, range(100)))
    for p in (0, 1, 2):
        write(root, "topicA", p, vals("topicA", p, [0]))
    for p in (4, 5, 6):
        write(root, "topicB", p, vals("topicB", p, [0]))
    return root


ALL_T = expected("t", 0, range(5)) + expected("t", 1, range(5))


@pytest.fixture(scope="module")
def stream_runs(spark, root, tmp_path_factory) -> dict[str, tuple[str, object]]:
    """Streaming queries (memory sink, Trigger.AvailableNow), run one after the other (each costs
    a Python runner start-up of ~3 s; started together on two cores they time out connecting
    back): {case: ("error", message) | ("rows", rows)}. An error raised at load() or start() is
    recorded the same way as one from awaitTermination()."""
    ck = tmp_path_factory.mktemp("stream_ck")
    p = str(root)
    cases = {
        # no path and no subscribe: the streaming-only check must come first
        "ending_offsets": ({"endingOffsets": "latest"}, None),
        "min_gt_max": ({"path": p, "subscribe": "t", "minOffsetsPerTrigger": "20",
                        "maxOffsetsPerTrigger": "15"}, None),
        # endingTimestamp=0 would end every partition at offset 0 if it were honoured
        "accepted": ({"path": p, "subscribe": "t", "startingOffsets": "earliest",
                      "endingTimestamp": "0", "minOffsetsPerTrigger": LONG_MAX,
                      "maxOffsetsPerTrigger": LONG_MAX, "maxTriggerDelay": "1111"}, None),
        # -3: t-0's record with the largest timestamp (its last), -1: t-1's end; endingTimestamp
        # is never read by a stream, not even a value a batch refuses
        "special_timestamps": ({"path": p, "subscribe": "t", "endingTimestamp": "-7",
                                "startingOffsetsByTimestamp": '{"t":{"0":-3,"1":-1}}'}, None),
        "missing_topic": ({"path": p, "subscribe": "t,nosuch", "failOnDataLoss": "false"}, None),
        "delay_beyond_a_long": ({"path": p, "subscribe": "t", "minOffsetsPerTrigger": "1",
                                 "maxTriggerDelay": "9223372036854775808ms"}, None),
    }
    results: dict[str, tuple[str, object]] = {}
    for name, (options, schema) in cases.items():
        qname = unique(f"opts_{name}")
        try:
            q = (stream_reader(spark, options, schema).load().writeStream.format("memory")
                 .queryName(qname).option("checkpointLocation", str(ck / name))
                 .trigger(availableNow=True).start())
        except Exception as e:            # noqa: BLE001 - recorded, asserted by the tests
            results[name] = ("error", f"{type(e).__name__}: {e}")
            continue
        try:
            if not q.awaitTermination(300):
                q.stop()
                results[name] = ("timeout", None)
            else:
                results[name] = ("rows", rows(spark.table(qname)))
        except StreamingQueryException as e:
            results[name] = ("error", f"StreamingQueryException: {e}")
    return results


def make_source(options: dict) -> KafkaLogDataSource:
    """The source as Spark's Python worker creates it: options in a CaseInsensitiveDict."""
    return KafkaLogDataSource(CaseInsensitiveDict(options))


def source_error(options: dict, *, streaming: bool) -> str:
    """The message of the error the source raises for ``options`` when Spark's Python worker
    builds its reader: the DataSource made from a CaseInsensitiveDict (what Spark hands over),
    then schema() (load()) and reader()/streamReader() (first action / query start). Used for
    the variants of an error already checked through Spark, each of which would cost a Python
    worker start-up (~1.3 s) through Spark."""
    source = make_source(options)
    with pytest.raises(InvalidConfigError) as e:
        schema = source.schema()
        source.streamReader(schema) if streaming else source.reader(schema)
    return str(e.value)


def planning_error(options: dict) -> str:
    """The message of the error a batch read with ``options`` raises when planned (what Spark
    runs at its first action), taken on the source as Spark's Python worker builds it."""
    source = make_source(options)
    reader = source.reader(source.schema())
    with pytest.raises(KafkaLogError) as e:
        reader.partitions()
    return str(e.value)


def stream_error(stream_runs, case: str) -> str:
    kind, value = stream_runs[case]
    assert kind == "error", f"{case}: expected an error, got {kind} {value!r}"
    return value


# ============================================================ §1 strategy options

def test_no_strategy_option(spark, root):
    """[KafkaMicroBatchSourceSuite "bad source options"; KafkaRelationSuite "bad batch query
    options"]: with none of subscribe, subscribePattern, assign, batch and streaming reads fail
    (at load()) with "One of the following options must be specified for Kafka source: ..."."""
    for make in (batch_reader, stream_reader):
        with pytest.raises(AnalysisException) as e:
            make(spark, {"path": str(root)}).load()
        assert_mentions(str(e.value), "One of the following options must be specified for Kafka "
                                      "source: subscribe, subscribePattern, assign. See the docs "
                                      "for more details.")


def test_two_strategy_options(spark, root):
    """[KafkaMicroBatchSourceSuite "bad source options"; KafkaRelationSuite "bad batch query
    options"]: subscribe + subscribePattern and subscribe + assign fail with "Only one of the
    following options can be specified for Kafka source" (one batch read through Spark; the
    other pairs and the streaming reader checked on the source as Spark's worker builds it)."""
    p = str(root)
    for message in (
            batch_error(spark, {"path": p, "subscribe": "t", "subscribePattern": "t.*"}),
            source_error({"path": p, "subscribe": "t", "assign": '{"t":[0]}'}, streaming=False),
            source_error({"path": p, "subscribe": "t", "subscribePattern": "t.*"}, streaming=True),
            source_error({"path": p, "subscribe": "t", "assign": '{"t":[0]}'}, streaming=True),
            source_error({"path": p, "assign": '{"t":[0]}', "subscribePattern": "t"},
                         streaming=False)):
        assert_mentions(message, "only one", "options can be specified", "subscribe",
                        "subscribePattern", "assign")


def test_assign_not_starting_with_brace(spark, root):
    """[KafkaMicroBatchSourceSuite "bad source options"; code:
    KafkaSourceProvider.validateGeneralOptions]: assign="" fails with "No topicpartitions to
    assign as specified value for option 'assign' is ''"; so does a value whose trimmed form does
    not start with "{"."""
    assert_mentions(batch_error(spark, {"path": str(root), "assign": ""}),
                    "No topicpartitions to assign as specified value for option 'assign' is ''")
    for streaming in (False, True):
        assert_mentions(source_error({"path": str(root), "assign": " t-0 "}, streaming=streaming),
                        "No topicpartitions to assign as specified value for option 'assign' is "
                        "' t-0 '")


def test_assign_malformed_json(spark, root):
    """[code: JsonUtils.partitions]: assign starting with "{" that is not {"topic":[ints]} fails
    with "Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got <value>"."""
    value = '{"t":{"0":1}}'
    assert_mentions(batch_error(spark, {"path": str(root), "assign": value}),
                    ASSIGN_EXAMPLE + value)
    value = ' {"t":[0, "1"]}'
    assert_mentions(source_error({"path": str(root), "assign": value}, streaming=True),
                    ASSIGN_EXAMPLE + value)


def test_subscribe_empty(spark, root):
    """[KafkaMicroBatchSourceSuite "bad source options"]: subscribe="" (and a value of only commas
    and blanks) fails with "No topics to subscribe to as specified value for option 'subscribe'
    is ''"."""
    assert_mentions(batch_error(spark, {"path": str(root), "subscribe": ""}),
                    "No topics to subscribe to as specified value for option 'subscribe' is ''")
    for streaming in (False, True):
        assert_mentions(source_error({"path": str(root), "subscribe": " , ,"},
                                     streaming=streaming),
                        "No topics to subscribe to as specified value for option 'subscribe' "
                        "is ' , ,'")


def test_subscribe_list_is_split_and_trimmed(spark, root):
    """[code: KafkaSourceProvider.strategy]: the subscribe value is split on commas, entries
    trimmed, empty ones dropped: " a, ,b " reads topics a and b (not c, not ab)."""
    df = batch_reader(spark, {"path": str(root), "subscribe": " a, ,b "}).load()
    assert rows(df) == expected("a", 0, [0]) + expected("b", 0, [0])


def test_subscribe_pattern_empty_and_trimmed(spark, root):
    """[KafkaMicroBatchSourceSuite "bad source options"]: subscribePattern "" or blank fails with
    "Pattern to subscribe is empty as specified value for option 'subscribePattern' is ''"; a
    non-empty pattern is trimmed before use (" ^[ab]$ " matches a and b only)."""
    assert_mentions(batch_error(spark, {"path": str(root), "subscribePattern": "  "}),
                    "Pattern to subscribe is empty as specified value for option "
                    "'subscribePattern' is '  '")
    assert_mentions(source_error({"path": str(root), "subscribePattern": ""}, streaming=True),
                    "Pattern to subscribe is empty as specified value for option "
                    "'subscribePattern' is ''")
    df = batch_reader(spark, {"path": str(root), "subscribePattern": " ^[ab]$ "}).load()
    assert rows(df) == expected("a", 0, [0]) + expected("b", 0, [0])


def test_strategy_and_path_errors_raise_at_load(spark, root):
    """[KafkaRelationSuite "bad batch query options"; KafkaMicroBatchSourceSuite "bad source
    options"]: the same strategy errors are raised for batch reads and for streaming reads, at
    load() (found on a first version of the source that checked them only in the readers, i.e.
    when a streaming query started); the missing path too."""
    p = str(root)
    cases = [(stream_reader, {"path": p, "subscribe": "t", "subscribePattern": "t"}, "only one"),
             (stream_reader, {"subscribe": "t"}, "Option 'path' must be specified"),
             (batch_reader, {"path": p, "subscribe": ""}, "No topics to subscribe to")]
    for make, options, text in cases:
        with pytest.raises(AnalysisException) as e:
            make(spark, options).load()
        assert_mentions(str(e.value), text)


# ============================================================ §1 path (bootstrap servers)

def test_path_option(spark, root, tmp_path):
    """[code: validateGeneralOptions] (Spark's "Option 'kafka.bootstrap.servers' must be
    specified", n/a without a broker; its counterpart here is ``path``): a missing path fails
    naming 'path'; a path that does not exist, or is a file, fails naming that path;
    ``load(path)`` is the same as ``option("path", ...)``."""
    assert_mentions(batch_error(spark, {"subscribe": "a"}), "Option 'path' must be specified")
    missing = tmp_path / "no" / "such" / "dir"
    assert_mentions(batch_error(spark, {"subscribe": "a", "path": str(missing)}),
                    f"{missing} does not exist")
    afile = tmp_path / "afile"
    afile.write_bytes(b"")
    assert_mentions(source_error({"subscribe": "a", "path": str(afile)}, streaming=False),
                    f"{afile} is not a directory")
    for options in ({"subscribe": "a"}, {"subscribe": "a", "path": "  "}):
        assert_mentions(source_error(options, streaming=True), "Option 'path' must be specified")
    df = spark.read.format("kafkalog").option("subscribe", "a").load(str(root))
    assert rows(df) == expected("a", 0, [0])


# ============================================================ §1 streaming-only options

def test_streaming_ending_offsets_rejected_before_strategy(stream_runs):
    """[KafkaMicroBatchSourceSuite "bad source options"]: streaming with endingOffsets fails with
    "ending offset not valid in streaming queries", before the strategy (and path) checks: this
    query has neither subscribe nor path."""
    message = stream_error(stream_runs, "ending_offsets")
    assert_mentions(message, "ending offset not valid in streaming queries")
    assert "must be specified" not in message


def test_streaming_ending_offsets_by_timestamp_rejected(root):
    """[KafkaMicroBatchSourceSuite "bad source options"]: streaming with endingOffsetsByTimestamp
    fails with "ending timestamp not valid in streaming queries" (the stream reader's check; the
    way such errors reach a streaming query is shown with endingOffsets above)."""
    assert_mentions(source_error({"path": str(root), "subscribe": "t",
                                  "endingOffsetsByTimestamp": '{"t":{"0":1000,"1":1000}}'},
                                 streaming=True),
                    "ending timestamp not valid in streaming queries")


def test_streaming_accepts_ending_timestamp_and_extreme_limits(stream_runs):
    """[code: validateStreamOptions] streaming with endingTimestamp is not rejected, it is
    ignored (endingTimestamp=0 would otherwise end at offset 0); [KafkaMicroBatchSourceSuite
    "bad source options"] minOffsetsPerTrigger equal to maxOffsetsPerTrigger is allowed;
    [KafkaMicroBatchSourceSuite "SPARK-26718 Rate limit set to Long.Max should not overflow
    integer during end offset calculation"] maxOffsetsPerTrigger=9223372036854775807 reads
    everything; [code] a bare maxTriggerDelay number ("1111") is accepted."""
    assert stream_runs["accepted"] == ("rows", ALL_T)


def test_batch_ignores_trigger_options(spark, root):
    """[code: validateBatchOptions]: a batch read with maxOffsetsPerTrigger, minOffsetsPerTrigger
    and maxTriggerDelay succeeds and ignores them (every record is read)."""
    df = batch_reader(spark, {"path": str(root), "subscribe": "t", "maxOffsetsPerTrigger": "1",
                              "minOffsetsPerTrigger": "1", "maxTriggerDelay": "5s"}).load()
    assert rows(df) == ALL_T


def test_batch_ignores_unparsable_trigger_options(spark, root):
    """[code: validateBatchOptions]: batch ignores maxOffsetsPerTrigger and maxTriggerDelay, so
    values that are not numbers/time strings do not fail the read either (a first version of the
    source parsed them in batch too)."""
    df = batch_reader(spark, {"path": str(root), "subscribe": "t", "maxOffsetsPerTrigger": "lots",
                              "maxTriggerDelay": "soon"}).load()
    assert rows(df) == ALL_T


# ============================================================ §1 numeric and enum options

def test_min_offsets_above_max_offsets(stream_runs):
    """[KafkaMicroBatchSourceSuite "bad source options"]: minOffsetsPerTrigger 20 >
    maxOffsetsPerTrigger 15 fails with "The value of minOffsetPerTrigger(20) is higher than the
    maxOffsetsPerTrigger(15)." (singular "minOffsetPerTrigger"); this check runs after the path
    check, so without a path the path error wins."""
    assert_mentions(stream_error(stream_runs, "min_gt_max"),
                    "The value of minOffsetPerTrigger(20) is higher than the "
                    "maxOffsetsPerTrigger(15).")
    message = source_error({"subscribe": "t", "minOffsetsPerTrigger": "20",
                            "maxOffsetsPerTrigger": "15"}, streaming=True)
    assert_mentions(message, "Option 'path' must be specified")
    assert "minOffsetPerTrigger" not in message


def test_min_offsets_above_max_offsets_in_a_batch(spark, root):
    """[code: validateBatchOptions -> validateGeneralOptions]: a batch ignores the trigger
    options, except that with both minOffsetsPerTrigger and maxOffsetsPerTrigger given Spark
    parses the two (``toLong``) and refuses min > max, as a stream does; each alone is ignored."""
    base = {"path": str(root), "subscribe": "t"}
    assert_mentions(batch_error(spark, {**base, "minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "15"}),
                    "The value of minOffsetPerTrigger(20) is higher than the maxOffsetsPerTrigger(15).")
    assert_mentions(source_error({**base, "minOffsetsPerTrigger": "x", "maxOffsetsPerTrigger": "15"},
                                 streaming=False), "minOffsetsPerTrigger")
    assert rows(batch_reader(spark, {**base, "minOffsetsPerTrigger": "15",
                                     "maxOffsetsPerTrigger": "20"}).load()) == ALL_T
    assert rows(batch_reader(spark, {**base, "minOffsetsPerTrigger": "20"}).load()) == ALL_T


def test_min_partitions_validation(spark, root):
    """[KafkaMicroBatchSourceSuite "minPartitions is supported"]: minPartitions "a" and "1.0"
    fail with a number-format error naming the option; "0" and "-1" fail with "minPartitions
    must be positive"."""
    base = {"path": str(root), "subscribe": "t"}
    assert_mentions(batch_error(spark, {**base, "minPartitions": "a"}),
                    "option 'minPartitions'", 'For input string: "a"')
    assert_mentions(source_error({**base, "minPartitions": "1.0"}, streaming=True),
                    "option 'minPartitions'", 'For input string: "1.0"')
    assert_mentions(batch_error(spark, {**base, "minPartitions": "0"}),
                    "minPartitions must be positive")
    assert_mentions(source_error({**base, "minPartitions": "-1"}, streaming=True),
                    "minPartitions must be positive")


def test_min_partitions_plans_input_partitions(spark, root):
    """[KafkaMicroBatchSourceSuite "minPartitions is supported"] (through a batch read, which
    plans with the same calculator): one range [0,100) gives a single input partition with
    minPartitions unset or "1", and exactly 4 with "4" ([0,25), [25,50), [50,75), [75,100))."""
    def layout(extra: dict) -> list[tuple[int, int, int]]:
        """(first offset, last offset, rows) of each input partition"""
        df = batch_reader(spark, {"path": str(root), "subscribe": "hundred", **extra}).load()
        by_pid: dict[int, list[int]] = {}
        for r in df.select(F.spark_partition_id().alias("pid"), "offset").collect():
            by_pid.setdefault(r.pid, []).append(r.offset)
        return sorted((min(o), max(o), len(o)) for o in by_pid.values())

    assert layout({}) == [(0, 99, 100)]
    assert layout({"minPartitions": "1"}) == [(0, 99, 100)]
    assert layout({"minPartitions": "4"}) == [(0, 24, 25), (25, 49, 25), (50, 74, 25),
                                              (75, 99, 25)]


def test_max_records_per_partition_validation(spark, root):
    """[code: validateGeneralOptions] (newer): maxRecordsPerPartition <= 0 fails with
    "maxRecordsPerPartition must be positive"; a non-integer fails with a number-format error
    naming the option."""
    base = {"path": str(root), "subscribe": "t"}
    assert_mentions(batch_error(spark, {**base, "maxRecordsPerPartition": "0"}),
                    "maxRecordsPerPartition must be positive")
    assert_mentions(source_error({**base, "maxRecordsPerPartition": "2.5"}, streaming=True),
                    "option 'maxRecordsPerPartition'", 'For input string: "2.5"')
    assert_mentions(source_error({**base, "maxRecordsPerPartition": "-3"}, streaming=False),
                    "maxRecordsPerPartition must be positive")


def test_max_trigger_delay_values(root):
    """[KafkaSourceProviderSuite "micro-batch mode - options should be handled as
    case-insensitive"; code]: maxTriggerDelay takes time strings with units ("5s", "15m"), a bare
    number is milliseconds ("1111"), default 15m. Checked on the source's stream reader built
    from options as Spark hands them over (a CaseInsensitiveDict), since a trigger delay is only
    visible through timing.
    [code: JavaUtils.timeStringAs, what Spark 4.2's Kafka source did in a query]: the number is
    a long and the conversion saturates (TimeUnit.convert): "1000000000000d" and "9223372036854775807ms"
    are Long.MAX_VALUE ms, "-1000000000000d" Long.MIN_VALUE; negatives are taken (no delay);
    "us" truncates toward zero; case and surrounding blanks do not matter."""
    def delay(value: str | None) -> int:
        options = {"path": str(root), "subscribe": "t"}
        if value is not None:
            options["maxTriggerDelay"] = value
        source = make_source(options)
        return source.streamReader(source.schema()).opts.max_trigger_delay_ms

    assert [delay(v) for v in (None, "5s", "15m", "1111", "100ms")] == [
        15 * 60_000, 5_000, 15 * 60_000, 1111, 100]
    assert [delay(v) for v in ("1000000000000d", "9223372036854775807ms", "106751991167d",
                               "106751991168d", "-1000000000000d", "-5s", "500us", "-1500us",
                               " 15M ")] == [
        2**63 - 1, 2**63 - 1, 106751991167 * 86_400_000, 2**63 - 1, -2**63, -5000, 0, -1, 900_000]


@pytest.mark.parametrize("value, detail", [
    ("9223372036854775808ms", 'For input string: "9223372036854775808"'),
    ("99999999999999999999999d", 'For input string: "99999999999999999999999"'),
    ("5 s", "Failed to parse time string: 5 s"),
    ("1.5s", "Failed to parse time string: 1.5s"),
    ("", "Failed to parse time string: "),
    ("5sec", 'Invalid suffix: "sec"'),
])
def test_max_trigger_delay_refused_as_spark_refuses_it(root, value, detail):
    """[code: JavaUtils.timeStringAs; Spark 4.2's Kafka source failed each of these queries with
    "Time must be specified as seconds (s), ..."]: a number beyond a long, a space before the
    unit, a fraction, nothing, or an unknown unit fail naming the option (Python's int took
    2**63 and more, which no Spark delay can be). Through Spark: stream_runs' case below."""
    assert_mentions(source_error({"path": str(root), "subscribe": "t", "maxTriggerDelay": value},
                                 streaming=True),
                    f"Invalid value {value!r} for option 'maxTriggerDelay'",
                    "Time must be specified as seconds (s)", detail)


def test_max_trigger_delay_beyond_a_long_fails_the_query(stream_runs):
    """The same refusal as a streaming query meets it: the query fails to start, naming the
    option and the number Long.parseLong refused."""
    assert_mentions(stream_error(stream_runs, "delay_beyond_a_long"),
                    "option 'maxTriggerDelay'", 'For input string: "9223372036854775808"')


def test_starting_offsets_by_timestamp_strategy(spark, root):
    """[KafkaMicroBatchSourceSuite "subscribing topic by name from specific timestamps with
    non-matching starting offset"; code: getKafkaOffsetRangeLimit]: the strategy accepts "error"
    or "latest" in any case, default "error" (a start timestamp after every record fails with
    "No offset matched"), "LaTeSt" starts at the log end (nothing read); anything else fails
    naming the option."""
    base = {"path": str(root), "subscribe": "t", "startingTimestamp": "9999999"}
    assert_mentions(batch_error(spark, base), "No offset matched from request of "
                                              "topic-partition t-0 and timestamp 9999999")
    df = batch_reader(spark, {**base, "startingOffsetsByTimestampStrategy": "LaTeSt"}).load()
    assert rows(df) == []
    df = batch_reader(spark, {**base, "startingTimestamp": "1003",
                              "startingOffsetsByTimestampStrategy": "ERROR"}).load()
    # t-0 from its record at 1003; every t-1 timestamp (2000+) is after 1003
    assert rows(df) == expected("t", 0, [3, 4]) + expected("t", 1, range(5))
    assert_mentions(source_error({**base, "startingOffsetsByTimestampStrategy": "never"},
                                 streaming=True),
                    "'never'", "option 'startingOffsetsByTimestampStrategy'")


def test_global_timestamps_must_be_longs(spark, root):
    """[code: getKafkaOffsetRangeLimit]: startingTimestamp / endingTimestamp must parse as a long
    after trimming, else "Expected a single long value, got <value>"."""
    base = {"path": str(root), "subscribe": "t"}
    df = batch_reader(spark, {**base, "startingTimestamp": " 1004 ",
                              "endingTimestamp": "\t2002\n"}).load()
    # start: t-0 at 1004, t-1 at 2000; end: t-0 has no record at/after 2002 -> latest, t-1 at 2002
    assert rows(df) == expected("t", 0, [4]) + expected("t", 1, [0, 1])
    assert_mentions(batch_error(spark, {**base, "startingTimestamp": "soon"}),
                    "Expected a single long value, got soon")


def test_global_timestamps_beyond_a_long_are_refused(root):
    """[code: getKafkaOffsetRangeLimit]: ``ts.toLong`` (``Long.parseLong``) refuses a number
    beyond a long and ``1_000``; Python's ``int`` took both, so ``endingTimestamp=2**63`` was
    "no record at or after it" and read the whole topic. The numeric options likewise."""
    base = {"path": str(root), "subscribe": "t"}
    for key in ("startingTimestamp", "endingTimestamp"):
        for value in (str(2**63), str(-2**63 - 1), str(10**30), "1_000"):
            assert_mentions(source_error({**base, key: value}, streaming=False),
                            f"Expected a single long value, got {value}")
    for value in (str(2**63), "1_000"):
        assert_mentions(source_error({**base, "minPartitions": value}, streaming=False),
                        f"Invalid value '{value}' for option 'minPartitions'")
    source = make_source({**base, "endingTimestamp": str(2**63 - 1)})
    assert source.reader(source.schema()).partitions()          # the largest long is a timestamp


def test_offsets_below_earliest_are_refused(root):
    """startingOffsets / endingOffsets JSON: -2 (earliest) and -1 (latest) are the only negative
    values; a consumer refuses any other (``KafkaConsumer.seek``). Taken as offsets, a starting
    -3 planned [-3, end) (read from the log start with failOnDataLoss=false) and an ending -7
    planned nothing, silently. Refused naming the option, batch and stream."""
    base = {"path": str(root), "assign": '{"t":[0]}'}
    for streaming in (False, True):
        text = source_error({**base, "startingOffsets": '{"t":{"0":-3}}', "failOnDataLoss": "false"},
                            streaming=streaming)
        assert_mentions(text, "option 'startingOffsets'", "offset -3 for t-0")
    text = source_error({**base, "startingOffsets": '{"t":{"0":0}}', "endingOffsets": '{"t":{"0":-7}}'},
                        streaming=False)
    assert_mentions(text, "option 'endingOffsets'", "offset -7 for t-0")
    source = make_source({**base, "startingOffsets": '{"t":{"0":-2}}', "endingOffsets": '{"t":{"0":-1}}'})
    assert source.reader(source.schema()).partitions()


# ============================================================ §1 special (negative) timestamps

def special_root(tmp_path: Path) -> Path:
    """m-0, m-1, m-2: four records each at CreateTime 10, 50, 20, 30 (the largest at offset 1)."""
    for p in range(3):
        write(tmp_path, "m", p, vals("m", p, range(4)), timestamps=[10, 50, 20, 30])
    return tmp_path


def test_special_timestamps_in_a_batch(spark, tmp_path):
    """[chain: KafkaOffsetReaderAdmin.fetchSpecificTimestampBasedOffsets -> OffsetSpec.forTimestamp
    -> ListOffsets -> UnifiedLog.fetchOffsetByTimestamp; what Spark 4.2's Kafka source read from
    a Kafka 4.4 broker]: a negative timestamp is a ListOffsets special one, per partition or
    global: -1 the end, -2 and -4 (no remote tier) the log start, -3 the record with the largest
    timestamp (a start there includes it, an end there stops before it); -5 (the highest offset
    in remote storage) finds nothing without a tier: a start fails with "No offset matched" as
    any unmatched start does (or, with strategy latest, starts at the end), an end is latest."""
    p = str(special_root(tmp_path))
    base = {"path": p, "subscribe": "m"}
    df = batch_reader(spark, {**base, "startingOffsetsByTimestamp": '{"m":{"0":-3,"1":-2,"2":-4}}',
                              "endingOffsetsByTimestamp": '{"m":{"0":-1,"1":-3,"2":-1}}'}).load()
    assert rows(df) == expected("m", 0, [1, 2, 3]) + expected("m", 1, [0]) + expected("m", 2, range(4))
    assert_mentions(batch_error(spark, {**base, "startingTimestamp": "-5"}),
                    "No offset matched from request of topic-partition m-0 and timestamp -5")

    def planned(options: dict) -> list[tuple[str, int, int, int]]:
        source = make_source({**base, **options})
        return sorted((r.topic, r.partition, r.start, r.end) for r in source.reader(source.schema()).plan())

    everything = [("m", q, 0, 4) for q in range(3)]
    assert planned({"startingTimestamp": "-2", "endingTimestamp": "-1"}) == everything
    assert planned({"startingTimestamp": "-4", "endingTimestamp": "-5"}) == everything
    assert planned({"startingTimestamp": "-1", "endingTimestamp": "-1"}) == [("m", q, 4, 4) for q in range(3)]
    assert planned({"startingTimestamp": "-5", "startingOffsetsByTimestampStrategy": "latest"}) == \
        [("m", q, 4, -1) for q in range(3)]
    assert planned({"startingTimestamp": "-3", "endingTimestamp": "-3"}) == [("m", q, 1, 1) for q in range(3)]


def test_special_timestamps_start_a_stream(stream_runs):
    """The same values start a stream (its initial offsets): t-0 (CreateTime 1000..1004) from
    -3, its last record; t-1 from -1, its end, so nothing of it. endingTimestamp -7, which a
    batch refuses, is not read by a stream at all (validateStreamOptions)."""
    assert stream_runs["special_timestamps"] == ("rows", expected("t", 0, [4]))


@pytest.mark.parametrize("key, value, where", [
    ("startingTimestamp", "-6", ""), ("endingTimestamp", "-7", ""),
    ("startingTimestamp", " -9223372036854775808 ", ""),
    ("startingOffsetsByTimestamp", '{"t":{"0":1000,"1":-100}}', " for t-1"),
    ("endingOffsetsByTimestamp", '{"t":{"0":-8,"1":-1}}', " for t-0"),
])
def test_timestamps_below_minus_five_are_refused(spark, root, key, value, where):
    """[KafkaApis/ReplicaManager.isListOffsetsTimestampUnsupported, Kafka 3.9+; Spark 4.2's
    Kafka source failed each such query with UnsupportedVersionException "The version of API is
    not supported."]: a broker answers UNSUPPORTED_VERSION for a negative timestamp that is not
    -1..-5 (-6 needs ListOffsets v11, newer than the kafka-clients Spark ships), whatever
    startingOffsetsByTimestampStrategy says. Refused at load naming the option, the value and
    the partition; through Spark once, the variants on the source as Spark's worker builds it
    (the engine used to fail on them without naming the option)."""
    options = {"path": str(root), "subscribe": "t", key: value,
               "startingOffsetsByTimestampStrategy": "latest"}
    streaming = key.startswith("starting") and "-6" in value
    message = (batch_error(spark, options) if key == "endingTimestamp"
               else source_error(options, streaming=streaming))
    number = value.strip() if "{" not in value else ("-100" if "-100" in value else "-8")
    assert_mentions(message, f"Invalid value for option '{key}'", f"timestamp {number}{where} is neither",
                    "-1 (latest), -2 (earliest), -3", "-5 (latest tiered)")


def test_read_committed_lookup_past_the_last_stable_offset_is_no_match(tmp_path):
    """[ReplicaManager.fetchOffset]: under read_committed a timestamp lookup (or -3) that lands
    at or past the last stable offset answers no offset: a start fails with "No offset
    matched" (strategy error) or starts at the last stable offset (latest); -1 is the last
    stable offset itself."""
    with Log.open(tmp_path / "x-0") as log:
        log.append(pa.table({"value": pa.array([b"a", b"b"], pa.binary()),
                             "timestamp": pa.array([10, 20], pa.timestamp("ms", tz="UTC"))}))
        log.append_raw(build_batch([RecordInput(b"open", None, 99)], producer_id=5, producer_epoch=0,
                                   base_sequence=0, transactional=True))       # never ended
    base = {"path": str(tmp_path), "subscribe": "x", "isolationLevel": "read_committed"}

    def plan(**options):
        source = make_source({**base, **options})
        return [(r.start, r.end) for r in source.reader(source.schema()).plan()]

    assert plan(startingTimestamp="-1") == [(2, -1)]
    assert plan(startingTimestamp="15") == [(1, -1)]
    for ts in ("-3", "50"):
        assert_mentions(planning_error({**base, "startingTimestamp": ts}),
                        f"No offset matched from request of topic-partition x-0 and timestamp {ts}")
        assert plan(startingTimestamp=ts, startingOffsetsByTimestampStrategy="latest") == [(2, -1)]


# ============================================================ §1 topics and partitions that do not exist

def test_subscribe_or_assign_of_a_missing_topic_fails(spark, root):
    """[ConsumerStrategy.retrieveAllPartitions: Admin.describeTopics; Spark 4.2's Kafka source
    failed these batch and streaming queries with UnknownTopicOrPartitionException, with
    failOnDataLoss true or false]: a subscribed or assigned topic that does not exist fails the
    query, naming the option and the topic, even next to one that exists."""
    p = str(root)
    assert_mentions(batch_error(spark, {"path": p, "subscribe": "nosuch"}),
                    "Option 'subscribe' names topic(s) that do not exist", "nosuch", "UnknownTopicOrPartition")
    for options in ({"path": p, "subscribe": " t , nosuch,zz", "failOnDataLoss": "false"},
                    {"path": p, "assign": '{"t":[0],"nosuch":[0,1],"zz":[3]}'}):
        option = "subscribe" if "subscribe" in options else "assign"
        for streaming in (False, True):
            source = make_source(options)
            schema = source.schema()
            with pytest.raises(InvalidConfigError) as e:
                if streaming:
                    source.streamReader(schema).initialOffset()
                else:
                    source.reader(schema).partitions()
            assert_mentions(str(e.value), f"Option '{option}' names topic(s) that do not exist in {p}: nosuch, zz")


def test_a_missing_topic_fails_a_stream_at_start(stream_runs):
    """The same as a streaming query meets it (failOnDataLoss=false): it fails to start."""
    assert_mentions(stream_error(stream_runs, "missing_topic"),
                    "Option 'subscribe' names topic(s) that do not exist", "nosuch")


def test_a_topic_gone_from_a_running_or_restarted_stream_is_warned_about_once(tmp_path, caplog):
    """A subscribed topic deleted after the query began (or while it was stopped: a restart
    resumes from its checkpoint, no initial offsets) is not an error here, the query waits for
    it, where Spark's Kafka source fails the trigger; it is warned about once per change of the
    missing set, never silently: a restarted query on a deleted topic would otherwise sit idle
    saying nothing."""
    import shutil

    from pyspark.sql.streaming.datasource import ReadAllAvailable

    for topic in ("t", "u"):
        with Log.open(tmp_path / f"{topic}-0", LogConfig()) as log:
            log.append(pa.table({"value": [b"x"] * 3}))
    source = make_source({"path": str(tmp_path), "subscribe": "t,u"})
    reader = source.streamReader(source.schema())
    start = reader.initialOffset()
    caplog.set_level(logging.WARNING, logger="kafka_log_source")
    reader.latestOffset(start, ReadAllAvailable())
    assert "do not exist" not in caplog.text
    shutil.rmtree(tmp_path / "u-0")
    for _ in range(3):
        reader.latestOffset(start, ReadAllAvailable())
    warned = [r.getMessage() for r in caplog.records if "do not exist" in r.getMessage()]
    assert len(warned) == 1, warned
    assert_mentions(warned[0], f"Option 'subscribe' names topic(s) that do not exist in {tmp_path}: u",
                    "UnknownTopicOrPartitionException")
    shutil.rmtree(tmp_path / "t-0")                 # the set changes: warned again
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    warned = [r.getMessage() for r in caplog.records if "do not exist" in r.getMessage()]
    assert len(warned) == 2 and ": t, u;" in warned[1], warned


def test_missing_partitions_of_an_existing_topic_are_skipped(spark, root, caplog):
    """[ConsumerStrategySuite "AssignStrategy.assignedTopicPartitions must skip invalid
    partitions"; Spark 4.2's Kafka source read only t-0 of assign {"t":[0,5]}, nothing of
    {"t":[5]}, and nothing of a pattern matching no topic, without an error]: a listed partition
    that does not exist is not read (logged); only a startingOffsets JSON naming it fails, as it
    does in Spark ("don't match what are assigned")."""
    p = str(root)
    df = batch_reader(spark, {"path": p, "assign": '{"t":[0,5]}'}).load()
    assert rows(df) == expected("t", 0, range(5))
    caplog.set_level(logging.INFO, logger="kafka_log_source")
    for options in ({"path": p, "assign": '{"t":[5]}'}, {"path": p, "subscribePattern": "^nosuch"}):
        source = make_source(options)
        assert source.reader(source.schema()).partitions() == []
        assert source.streamReader(source.schema()).initialOffset() == {}
    assert "Option 'assign': partitions Set(t-5) do not exist" in caplog.text
    assert_mentions(planning_error({"path": p, "assign": '{"t":[0,5]}', "startingOffsets": '{"t":{"0":0,"5":0}}'}),
                    "don't match what are assigned", "Specified: Set(t-0, t-5) Assigned: Set(t-0)")


def test_boolean_options(spark, root, tmp_path):
    """[code: KafkaSourceProvider]: failOnDataLoss defaults to true (reading offsets that were
    deleted fails the task; "FALSE" skips them) and must be "true"/"false"; includeHeaders
    defaults to false (seven columns) and must be a boolean string; an invalid includeHeaders
    fails at load() already, since it decides the schema."""
    with pytest.raises(AnalysisException) as e:
        batch_reader(spark, {"path": str(root), "subscribe": "t", "includeHeaders": "yes"}).load()
    assert_mentions(str(e.value), "Invalid value 'yes' for option 'includeHeaders'")
    assert batch_reader(spark, {"path": str(root), "subscribe": "t"}).load().columns == [
        f.name for f in KAFKA_SCHEMA.fields]
    assert_mentions(source_error({"path": str(root), "subscribe": "t", "failOnDataLoss": "maybe"},
                                 streaming=False),
                    "Invalid value 'maybe' for option 'failOnDataLoss'")

    # default true: offsets 0..4 were deleted, an explicit start at 0 is data loss
    data = tmp_path / "data"
    data.mkdir()
    write(data, "gone", 0, vals("gone", 0, range(10)))
    with Log.open(data / "gone-0") as log:
        assert log.delete_records_before(5) == 5
    options = {"path": str(data), "subscribe": "gone", "startingOffsets": '{"gone":{"0":0}}'}
    with pytest.raises(PythonException) as e:       # raised by the task reading the range
        batch_reader(spark, options).load().collect()
    assert_mentions(str(e.value), "Could not read records in offset [0, 5)", "gone-0",
                    "failOnDataLoss")
    df = batch_reader(spark, {**options, "failOnDataLoss": "FALSE"}).load()
    assert rows(df) == expected("gone", 0, range(5, 10))


def test_user_schema_is_refused(spark, root):
    """[code: KafkaSourceProvider.sourceSchema]: a user-supplied read schema is rejected with
    "Kafka source has a fixed schema and cannot be set with a custom one". With a user schema
    Spark does not consult the source at load(), so the batch DataFrame has the user's columns
    and the read fails at the first action; the stream reader refuses it the same way (so a
    streaming query fails when it starts)."""
    df = batch_reader(spark, {"path": str(root), "subscribe": "t"}, schema="a int").load()
    assert df.columns == ["a"]
    with pytest.raises(AnalysisException) as e:
        df.collect()
    assert_mentions(str(e.value), "Kafka source has a fixed schema and cannot be set with a "
                                  "custom one")
    source = make_source({"path": str(root), "subscribe": "t"})
    with pytest.raises(InvalidConfigError) as e:
        source.streamReader(StructType.fromDDL("a int"))
    assert_mentions(str(e.value), "Kafka source has a fixed schema and cannot be set with a "
                                  "custom one")


# ============================================================ §1 case-insensitivity, defaults

def test_option_keys_and_offset_words_are_case_insensitive(spark, root):
    """[KafkaSourceProviderSuite "batch mode - options should be handled as case-insensitive"]
    option keys in any case; [KafkaMicroBatchSourceSuite "get offsets from case insensitive
    parameters"] "earLiEst"/"laTest" values, also as topic-level JSON values ("eArLiEst",
    "LATEST")."""
    df = batch_reader(spark, {"PATH": str(root), "SubScribe": "t", "STARTINGOFFSETS": "earLiEst",
                              "endingoffsets": "laTest", "INCLUDEHEADERS": "TRUE",
                              "MinPartitions": "4", "FAILONDATALOSS": "False"}).load()
    assert df.columns[-1] == "headers"
    got = df.select(F.spark_partition_id().alias("pid"), "topic", "partition", "offset",
                    "value").collect()
    assert sorted((r.topic, r.partition, r.offset, r.value) for r in got) == ALL_T
    assert len({r.pid for r in got}) == 4
    df = batch_reader(spark, {"path": str(root), "subscribe": "t",
                              "startingOffsets": '{"t":"eArLiEst"}',
                              "endingOffsets": '{"t":"LATEST"}'}).load()
    assert rows(df) == ALL_T


def test_trigger_option_keys_are_case_insensitive(root):
    """[KafkaSourceProviderSuite "micro-batch mode - options should be handled as
    case-insensitive"]: upper- and lower-case maxOffsetsPerTrigger, minOffsetsPerTrigger and
    maxTriggerDelay give the same values (read back from the stream reader built from a
    CaseInsensitiveDict, as Spark builds it)."""
    def opts(**kw):
        source = make_source({"path": str(root), "subscribe": "t", **kw})
        o = source.streamReader(source.schema()).opts
        return o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms

    upper = opts(MAXOFFSETSPERTRIGGER="1234", MINOFFSETSPERTRIGGER="5", MAXTRIGGERDELAY="5s")
    lower = opts(maxoffsetspertrigger="1234", minoffsetspertrigger="5", maxtriggerdelay="5s")
    assert upper == lower == (1234, 5, 5000)


def test_default_offsets_batch(spark, root):
    """[KafkaRelationSuite "default starting and ending offsets"; KafkaMicroBatchSourceSuite "get
    offsets from case insensitive parameters"]: without startingOffsets/endingOffsets a batch
    reads earliest -> latest (the streaming default, latest, is covered by
    test_checkpoint_offsets_through_real_queries)."""
    assert rows(batch_reader(spark, {"path": str(root), "subscribe": "t"}).load()) == ALL_T


# ============================================================ §2 offset JSON through queries

def test_checkpoint_offsets_through_real_queries(spark, tmp_path):
    """[KafkaSourceOffsetSuite "basic serialization - deserialization"] each checkpointed offset
    is {"topic":{"partition":nextOffset}} (the json.dumps text, topics sorted, partitions in
    numeric order: "2" before "10"); [KafkaSourceOffsetSuite "OffsetSeqLog serialization -
    deserialization"] several topics and partitions go through the offset log as batch 0, then
    1, and a restart continues from them; [KafkaSourceOffsetSuite compare cases] "T" and "t" are
    different topics; [code: KafkaSourceProvider; docs] the streaming default start is latest
    (records present when the query starts are skipped)."""
    data = tmp_path / "data"
    data.mkdir()
    write(data, "t", 0, vals("t", 0, [0, 1]))
    write(data, "t", 1, vals("t", 1, [0]))
    write(data, "t", 2, [])
    write(data, "t", 10, vals("t", 10, [0]))
    write(data, "T", 0, vals("T", 0, [0]))
    write(data, "u", 0, vals("u", 0, [0]))          # not subscribed
    ck = tmp_path / "ck"

    def offset_line(batch: int) -> str:
        lines = (ck / "offsets" / str(batch)).read_text().splitlines()
        assert len(lines) == 3 and lines[0] == "v1"
        return lines[2]

    out = tmp_path / "out"

    def run() -> list[tuple]:
        """One Trigger.AvailableNow run on the checkpoint (a file sink, since the memory sink
        cannot restart from a checkpoint); every row the sink holds."""
        q = (stream_reader(spark, {"path": str(data), "subscribe": "t,T"}).load()
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
        q.awaitTermination()
        return rows(spark.read.schema(KAFKA_SCHEMA).parquet(str(out)))

    # first run: batch 0 (empty) starts and ends at the offsets resolved for "latest"
    assert run() == []
    assert offset_line(0) == '{"T": {"0": 1}, "t": {"0": 2, "1": 1, "2": 0, "10": 1}}'
    write(data, "t", 0, vals("t", 0, [2, 3, 4]))
    write(data, "t", 2, vals("t", 2, [0, 1]))
    write(data, "T", 0, vals("T", 0, [1]))
    # second run, same checkpoint: batch 1 goes on from batch 0's offsets
    assert run() == sorted(
        expected("T", 0, [1]) + expected("t", 0, [2, 3, 4]) + expected("t", 2, [0, 1]))
    assert offset_line(1) == '{"T": {"0": 2}, "t": {"0": 5, "1": 1, "2": 2, "10": 1}}'
    assert sorted(p.name for p in (ck / "offsets").iterdir() if not p.name.startswith(".")) == [
        "0", "1"]
    assert json.loads(offset_line(1)) == {"T": {"0": 2}, "t": {"0": 5, "1": 1, "2": 2, "10": 1}}


def test_specific_offsets_json_in_a_query(spark, root):
    """[JsonUtilsSuite "parsing partitionOffsets", "parsing specificOffsets"] through a query:
    specific offsets, -2 (earliest) and -1 (latest); [KafkaRelationSuite "topic-partition for
    start offset and end offset must match" (multi-line JSON input)] JSON with surrounding
    newlines and inner spaces is accepted."""
    df = batch_reader(spark, {
        "path": str(root), "subscribe": "t",
        "startingOffsets": '\n  {\n    "t": { "0": 3, "1" : -2 }\n  }\n',
        "endingOffsets": ' {"t":{"0":-1,\n "1":2}} '}).load()
    assert rows(df) == expected("t", 0, [3, 4]) + expected("t", 1, [0, 1])


def test_malformed_offsets_json_echoes_input(spark, root):
    """[code: JsonUtils.partitionOffsets]; [JsonUtilsSuite "parsing specificOffsets rejects
    malformed json"] (newer): malformed startingOffsets fail the query with "Expected e.g.
    {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got <input>"."""
    value = '{"t":{"0":"first"}}'
    assert_mentions(batch_error(spark, {"path": str(root), "subscribe": "t",
                                        "startingOffsets": value}),
                    OFFSETS_EXAMPLE + value)


def test_assign_json_in_a_query(spark, root):
    """[JsonUtilsSuite "parsing partitions"]: assign {"topicA":[0,1],"topicB":[4,6]} reads
    exactly A-0, A-1, B-4, B-6."""
    df = batch_reader(spark, {"path": str(root),
                              "assign": '{"topicA":[0,1],"topicB":[4,6]}'}).load()
    assert rows(df) == (expected("topicA", 0, [0]) + expected("topicA", 1, [0])
                        + expected("topicB", 4, [0]) + expected("topicB", 6, [0]))


def test_timestamp_json_in_a_query(spark, root):
    """[code: JsonUtils.partitionTimestamps]: per-partition timestamps use the offsets' shape,
    {"t":{"0":1003,"1":2000}}, and start each partition at its first record at/after them."""
    df = batch_reader(spark, {"path": str(root), "subscribe": "t",
                              "startingOffsetsByTimestamp": '{"t":{"0":1003,"1":2000}}'}).load()
    assert rows(df) == expected("t", 0, [3, 4]) + expected("t", 1, range(5))


def test_topic_level_offsets_in_a_query(spark, root):
    """[JsonUtilsSuite "parsing specificOffsets mixing topic-level and partition-level values"]
    and [KafkaOffsetRangeLimitSuite "resolving topic-level offsets against the assigned
    partitions"] (newer): {"t":"earliest","topicB":{"4":0,"5":1,"6":-2}} expands "earliest" to
    both partitions of t; [KafkaOffsetRangeLimitSuite "resolving a topic-level offset of a topic
    without assigned partitions fails"] a topic-level value for a topic with no assigned
    partition fails with KAFKA_TOPIC_OFFSET_DOES_NOT_MATCH_ASSIGNED naming it."""
    df = batch_reader(spark, {"path": str(root), "subscribe": "t,topicB",
                              "startingOffsets": '{"t":"earliest","topicB":{"4":0,"5":1,"6":-2}}',
                              "endingOffsets": '{"t":"latest","topicB":{"4":1,"5":1,"6":-1}}',
                              }).load()
    assert rows(df) == ALL_T + expected("topicB", 4, [0]) + expected("topicB", 6, [0])
    message = batch_error(spark, {"path": str(root), "subscribe": "t",
                                  "startingOffsets": '{"t":"earliest","zz":"earliest"}'})
    assert_mentions(message, "KAFKA_TOPIC_OFFSET_DOES_NOT_MATCH_ASSIGNED", "Set(zz)")


# ============================================================ §7 record schema and headers

@pytest.fixture(scope="module")
def records(tmp_path_factory) -> Path:
    """rec-0 (CreateTime, the log's clock fixed at 1700000000123):
    0: no key, value v0, no timestamp given, no headers
    1: key k1, value v1, timestamp 1600000000456, headers [(a,b),(c,d)]
    2: key k2, value v2, timestamp 1600000000789, headers [(e,f),(e,g)]
    3: empty key, value v3, timestamp 1600000001000, a null headers cell
    4: key k4, value v4, timestamp 1600000002000, headers [(n, null)]
    lat-0 (LogAppendTime, the log's clock fixed at 1650000000321): one record stamped 5 by
    its producer."""
    data = tmp_path_factory.mktemp("records")
    write(data, "rec", 0, [b"v0", b"v1", b"v2", b"v3", b"v4"],
          keys=[None, b"k1", b"k2", b"", b"k4"],
          timestamps=[None, 1_600_000_000_456, 1_600_000_000_789, 1_600_000_001_000,
                      1_600_000_002_000],
          headers=[[], [{"key": "a", "value": b"b"}, {"key": "c", "value": b"d"}],
                   [{"key": "e", "value": b"f"}, {"key": "e", "value": b"g"}], None,
                   [{"key": "n", "value": None}]],
          clock=lambda: 1_700_000_000_123)
    write(data, "lat", 0, [b"x"], timestamps=[5],
          config=LogConfig(message_timestamp_type="LogAppendTime"),
          clock=lambda: 1_650_000_000_321)
    return data


def test_schema_without_and_with_headers(spark, records):
    """[code: KafkaRecordToRowConverter; docs] without includeHeaders the schema is exactly key
    binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int, all nullable, in that order (batch and streaming);
    [KafkaMicroBatchSourceSuite "Kafka column types"] with includeHeaders=true headers
    array<struct<key:string,value:binary>> is appended as the eighth column."""
    base = {"path": str(records), "subscribe": "rec"}
    with_headers = StructType(KAFKA_SCHEMA.fields + [HEADERS_FIELD])
    assert batch_reader(spark, base).load().schema == KAFKA_SCHEMA
    assert stream_reader(spark, base).load().schema == KAFKA_SCHEMA
    assert batch_reader(spark, {**base, "includeHeaders": "true"}).load().schema == with_headers
    assert stream_reader(spark, {**base, "includeHeaders": "true"}).load().schema == with_headers
    assert (batch_reader(spark, {**base, "includeHeaders": "false"}).load().schema
            == KAFKA_SCHEMA)


def test_record_columns_and_headers(spark, records):
    """[KafkaMicroBatchSourceSuite "Kafka column types"] a record with no key reads key=null with
    the right value, topic, partition 0, offset 0, timestamp (the append time when the producer
    gave none) and timestampType 0; [KafkaMicroBatchSourceSuite "Kafka column types";
    KafkaRelationSuite "default starting and ending offsets with headers"] headers keep their
    order and duplicate keys; [KafkaRelationSuite "default starting and ending offsets with
    headers"] a record with no headers reads headers=null, not an empty array; [KafkaSinkSuite
    "batch - write to kafka"] (the reading half; the sink's is tests/spark/test_sink.py) a null headers cell
    reads back as null; a header with a null value keeps it; the timestamp column is the
    record's millisecond timestamp."""
    df = batch_reader(spark, {"path": str(records), "subscribe": "rec",
                              "includeHeaders": "true"}).load()
    got = [(r.key, r.value, r.topic, r.partition, r.offset, r.ts_us, r.timestampType,
            None if r.headers is None else [(h.key, h.value) for h in r.headers])
           for r in df.withColumn("ts_us", F.unix_micros("timestamp")).orderBy("offset")
           .collect()]
    assert got == [
        (None, b"v0", "rec", 0, 0, 1_700_000_000_123_000, 0, None),
        (b"k1", b"v1", "rec", 0, 1, 1_600_000_000_456_000, 0, [("a", b"b"), ("c", b"d")]),
        (b"k2", b"v2", "rec", 0, 2, 1_600_000_000_789_000, 0, [("e", b"f"), ("e", b"g")]),
        (b"", b"v3", "rec", 0, 3, 1_600_000_001_000_000, 0, None),     # empty key is not null
        (b"k4", b"v4", "rec", 0, 4, 1_600_000_002_000_000, 0, [("n", None)]),
    ]


def test_timestamp_type_log_append_time(spark, records):
    """[code: KafkaRecordToRowConverter; docs] (the timestampType column: Java
    TimestampType.id): a topic with message.timestamp.type=LogAppendTime reads timestampType 1
    and the broker's append time (not the producer's 5) as timestamp; CreateTime reads 0."""
    df = batch_reader(spark, {"path": str(records), "subscribe": "lat,rec"}).load()
    got = sorted((r.topic, r.offset, r.timestampType, r.ts_ms) for r in
                 df.withColumn("ts_ms", F.unix_millis("timestamp")).collect())
    assert got == [("lat", 0, 1, 1_650_000_000_321),
                   ("rec", 0, 0, 1_700_000_000_123),
                   ("rec", 1, 0, 1_600_000_000_456),
                   ("rec", 2, 0, 1_600_000_000_789),
                   ("rec", 3, 0, 1_600_000_001_000),
                   ("rec", 4, 0, 1_600_000_002_000)]

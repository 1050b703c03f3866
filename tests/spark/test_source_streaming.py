"""Streaming reads of the ``kafkalog`` source (``spark.readStream.format("kafkalog")``) with a
real local SparkSession over real partition directories written by the storage engine, plus
unit tests of the source's admission control that drive ``KafkaLogStreamReader`` directly
(real directories, an injected clock, no Spark).

Each docstring names the line of ../shared/spark_kafka_test_checklist.md it covers by its
bracketed Spark test name (or ``[code: ...]`` where the checklist has no test name).

Queries write through ``foreachBatch`` into a ``Batches`` sink (rows by batch id; Spark's memory
sink cannot restart from a checkpoint in append mode) or, where no restart is needed, the memory
sink. Planned batch ends are read back from the checkpoint's ``offsets/<batchId>`` files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from kafka_log_source.datasource import KafkaLogStreamReader
from kafka_log_source.options import parse_source_options
from kafka_log_source.reader import DataLossError
from storage_core.config import LogConfig
from storage_core.errors import InvalidConfigError, LogLockedError
from storage_core.format import ControlRecordType
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.log import Log

REPO = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).resolve().parent / "append_writer.py"
LONG_MAX = 2 ** 63 - 1
QUERY_TIMEOUT = 120          # seconds; a healthy query here takes 1-5 s
DATA_LOSS_HINT = "set the source option failOnDataLoss to false"
NOW = int(time.time() * 1000)
TS1, TS2, TS3 = NOW - 30_000, NOW - 20_000, NOW - 10_000


# ====================================================================== helpers: data

def append(root: Path, tp: str, values: list[str], *, timestamps: list[int] | None = None,
           config: LogConfig | None = None) -> None:
    """Append records valued ``values`` to the partition directory ``root/tp`` (e.g. "t-0"),
    one producer append, offsets from the log end."""
    cols = {"value": pa.array([v.encode() for v in values], pa.binary())}
    if timestamps is not None:
        cols["timestamp"] = pa.array(timestamps, pa.int64())
    with Log.open(root / tp, config) as log:
        log.append(pa.table(cols))


def rec(topic: str, partition: int, offset: int, value: str) -> tuple[str, int, int, str]:
    return (topic, partition, offset, value)


def recs(topic: str, partition: int, values: list[str], first: int = 0) -> list[tuple]:
    """Rows of consecutive offsets from ``first``."""
    return [rec(topic, partition, first + i, v) for i, v in enumerate(values)]


PID = 4242


class Txn:
    """Writes transactional data of one producer (epoch 0) to one partition: data batches
    whose values are their offsets, and COMMIT / ABORT markers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seq = 0

    def data(self, n: int) -> None:
        with Log.open(self.path) as log:
            first = log.log_end_offset
            now = int(time.time() * 1000)
            log.append_raw(build_batch(
                [RecordInput(str(first + i).encode(), None, now) for i in range(n)],
                producer_id=PID, producer_epoch=0, base_sequence=self.seq, transactional=True))
        self.seq += n

    def end(self, commit: bool) -> None:
        with Log.open(self.path) as log:
            log.append_end_txn_marker(PID, 0, ControlRecordType.COMMIT if commit
                                      else ControlRecordType.ABORT, 0)


# ====================================================================== helpers: queries

class Batches:
    """A ``foreachBatch`` sink keeping every micro-batch's rows ``(topic, partition, offset,
    value)`` by batch id (a replayed batch replaces its earlier rows)."""

    def __init__(self, on_batch=None) -> None:
        self.by_id: dict[int, list[tuple]] = {}
        self.on_batch = on_batch

    def __call__(self, df, batch_id: int) -> None:
        self.by_id[batch_id] = sorted(
            (r[0], r[1], r[2], r[3]) for r in
            df.selectExpr("topic", "partition", "offset", "cast(value as string)").collect())
        if self.on_batch is not None:
            self.on_batch(batch_id)

    def rows(self) -> list[tuple]:
        return sorted(r for rows in self.by_id.values() for r in rows)


def source(spark, root: Path, **options):
    reader = spark.readStream.format("kafkalog").option("path", str(root))
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def start(spark, root: Path, chk: Path, sink: Batches, trigger: dict, **options):
    return (source(spark, root, **options).writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(chk)).trigger(**trigger).start())


def run(spark, root: Path, chk: Path, *, once: bool = False, sink: Batches | None = None,
        **options) -> dict[int, list[tuple]]:
    """One Trigger.AvailableNow (or Trigger.Once) run to its end: the rows of the batches it
    ran, by batch id. A query failure raises its StreamingQueryException."""
    sink = sink or Batches()
    q = start(spark, root, chk, sink, {"once": True} if once else {"availableNow": True},
              **options)
    try:
        assert q.awaitTermination(QUERY_TIMEOUT), "the query did not stop by itself"
    finally:
        q.stop()
    return sink.by_id


def offset_log(chk: Path) -> dict[int, dict]:
    """``offsets/<batchId>`` of a checkpoint: the source's end offset of each planned batch."""
    d = chk / "offsets"
    if not d.exists():
        return {}
    return {int(p.name): json.loads(p.read_text().splitlines()[-1])
            for p in d.iterdir() if p.name.isdigit()}


def wait_for(pred, what: str, q=None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if q is not None and q.exception() is not None:
            raise q.exception()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


# ====================================================================== helpers: the reader alone

class Clock:
    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        return self.ms


def stream_reader(root: Path, clock=None, **options) -> KafkaLogStreamReader:
    opts = {"path": str(root), **{k: str(v) for k, v in options.items()}}
    return KafkaLogStreamReader(parse_source_options(opts, streaming=True), clock=clock)


def read_range(r: KafkaLogStreamReader, start: dict, end: dict) -> list[tuple]:
    """What the executors would read for the batch ``(start, end)``: ``partitions`` planned on
    the driver, then ``read`` of every input partition."""
    out = []
    for part in r.partitions(start, end):
        for rb in r.read(part):
            d = rb.to_pydict()
            out += [(t, p, o, None if v is None else v.decode())
                    for t, p, o, v in zip(d["topic"], d["partition"], d["offset"], d["value"])]
    return sorted(out)


def offs(topic: str, **parts: int) -> dict:
    """``offs("t", p0=3, p1=5)`` -> ``{"t": {"0": 3, "1": 5}}`` (the source offset JSON)."""
    return {topic: {k[1:]: v for k, v in parts.items()}}


# ====================================================================== §3 starting offsets

def test_earliest_start_then_restart_neither_rereads_nor_skips(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "subscribing topic by name from earliest offsets
    (failOnDataLoss: true/false)"]: earliest reads every existing record of every partition of
    the subscribed topic (and nothing of another topic); a restart on the same checkpoint
    neither re-reads nor skips, and reads the records added while the query was stopped.
    [KafkaMicroBatchSourceSuite "deserialization of initial offset written by Spark 2.1.0
    (SPARK-19517)"]: startingOffsets applies only to a brand-new query: the restart below asks
    for offsets 0 everywhere and still continues from the checkpointed offsets."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    append(root, "t-0", ["a0", "a1", "a2"])
    append(root, "t-1", ["b0", "b1"])
    (root / "t-2").mkdir()
    Log.open(root / "t-2").close()                    # an empty partition
    append(root, "u-0", ["other"])

    first = run(spark, root, chk, subscribe="t", startingOffsets="earliest")
    assert first == {0: recs("t", 0, ["a0", "a1", "a2"]) + recs("t", 1, ["b0", "b1"])}
    assert offset_log(chk) == {0: offs("t", p0=3, p1=2, p2=0)}

    append(root, "t-0", ["a3"])
    append(root, "t-1", ["b2", "b3"])
    append(root, "t-2", ["c0"])
    second = run(spark, root, chk, subscribe="t",
                 startingOffsets='{"t":{"0":0,"1":0,"2":0}}')
    assert second == {1: [rec("t", 0, 3, "a3"), rec("t", 1, 2, "b2"), rec("t", 1, 3, "b3"),
                          rec("t", 2, 0, "c0")]}
    assert offset_log(chk)[1] == offs("t", p0=4, p1=4, p2=1)


def test_latest_start_reads_only_records_added_later(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "subscribing topic by name from latest offsets
    (failOnDataLoss: ...)"]: latest skips the records present when the offsets were first
    resolved and reads only records added later, after a restart too.
    [code: KafkaSourceProvider; docs] "Streaming default start is latest": the first run sets no
    startingOffsets.
    [KafkaMicroBatchSourceSuite "(de)serialization of initial offsets"]: start/stop with latest
    and no new data succeeds; the initial offsets resolved by the first start are kept (Spark
    logs the first, empty, batch with them), so the second start reads the records written in
    between instead of re-resolving latest (and ignores its own startingOffsets=latest)."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    append(root, "t-0", ["-1"])
    append(root, "t-1", ["-2", "-3"])
    assert run(spark, root, chk, subscribe="t") == {0: []}
    assert offset_log(chk) == {0: offs("t", p0=1, p1=2)}
    append(root, "t-0", ["1", "2"])
    append(root, "t-1", ["3"])
    again = run(spark, root, chk, subscribe="t", startingOffsets="latest")
    assert again == {1: [rec("t", 0, 1, "1"), rec("t", 0, 2, "2"), rec("t", 1, 2, "3")]}
    assert offset_log(chk)[1] == offs("t", p0=3, p1=3)


def test_specific_offsets_start(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "subscribing topic by name from specific offsets
    (failOnDataLoss: ...)"]: {p0:-2, p1:-1, p2:0, p3:1, p4:2} over three records per partition
    yields -20,-21,-22,0,1,2,11,12,22; the restart re-reads nothing and reads the new data of
    several partitions (p1 included: its start was its log end).
    [KafkaMicroBatchSourceSuite "SPARK-26718 Rate limit set to Long.Max should not overflow
    integer during end offset calculation"]: the restart runs with maxOffsetsPerTrigger =
    Long.MaxValue and reads everything new."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    for p, vals in enumerate([["-20", "-21", "-22"], ["-10", "-11", "-12"], ["0", "1", "2"],
                              ["10", "11", "12"], ["20", "21", "22"]]):
        append(root, f"t-{p}", vals)
    first = run(spark, root, chk, subscribe="t",
                startingOffsets='{"t":{"0":-2,"1":-1,"2":0,"3":1,"4":2}}')
    # -20,-21,-22 (all of p0), none of p1, 0,1,2 (all of p2), 11,12 (p3 from 1), 22 (p4 from 2)
    assert first == {0: recs("t", 0, ["-20", "-21", "-22"]) + recs("t", 2, ["0", "1", "2"])
                     + recs("t", 3, ["11", "12"], first=1) + [rec("t", 4, 2, "22")]}

    append(root, "t-0", ["-23"])
    append(root, "t-1", ["-13"])
    append(root, "t-4", ["23", "24"])
    second = run(spark, root, chk, subscribe="t", maxOffsetsPerTrigger=LONG_MAX,
                 startingOffsets='{"t":{"0":-2,"1":-2,"2":-2,"3":-2,"4":-2}}')
    assert second == {1: [rec("t", 0, 3, "-23"), rec("t", 1, 3, "-13"), rec("t", 4, 3, "23"),
                          rec("t", 4, 4, "24")]}
    assert offset_log(chk)[1] == offs("t", p0=4, p1=4, p2=3, p3=3, p4=5)


def test_specific_offsets_must_name_every_assigned_partition(tmp_path):
    """[code: KafkaOffsetReaderAdmin.fetchSpecificOffsets]: streaming specific offsets that
    leave out an assigned partition fail when the starting offsets are resolved (the query's
    first trigger), naming what was specified and what is assigned."""
    append(tmp_path, "t-0", ["a"])
    append(tmp_path, "t-1", ["b"])
    r = stream_reader(tmp_path, subscribe="t", startingOffsets='{"t":{"0":0}}')
    with pytest.raises(InvalidConfigError, match=r"Specified: Set\(t-0\) Assigned: "
                                                 r"Set\(t-0, t-1\)"):
        r.initialOffset()


def test_specific_offsets_incomplete_streaming_message(tmp_path):
    """[code: KafkaOffsetReaderAdmin.fetchSpecificOffsets]: the streaming message is Spark's
    "If startingOffsets contains specific offsets, you must specify all TopicPartitions..."."""
    append(tmp_path, "t-0", ["a"])
    append(tmp_path, "t-1", ["b"])
    r = stream_reader(tmp_path, subscribe="t", startingOffsets='{"t":{"0":0}}')
    with pytest.raises(InvalidConfigError) as e:
        r.initialOffset()
    assert ("If startingOffsets contains specific offsets, you must specify all "
            "TopicPartitions.") in str(e.value)
    assert "Use -1 for latest, -2 for earliest, if you don't care." in str(e.value)


def test_start_beyond_log_end_is_data_loss(spark, tmp_path):
    """[code: getOffsetRangesFromResolvedOffsets; KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED]: a
    specific start beyond a partition's log end makes the first batch fail with "Partition t-0
    offset was changed from 10 to 3..." when failOnDataLoss=true (planning, driven directly);
    with false (a Spark query) that partition is skipped for the batch, the other is read, and
    its offset becomes its log end."""
    root = tmp_path / "data"
    append(root, "t-0", ["a0", "a1", "a2"])
    append(root, "t-1", ["b0", "b1"])
    start_json = '{"t":{"0":10,"1":0}}'
    r = stream_reader(root, subscribe="t", startingOffsets=start_json)
    s = r.initialOffset()
    assert s == offs("t", p0=10, p1=0)
    e = r.latestOffset(s, ReadAllAvailable())
    assert e == offs("t", p0=3, p1=2)
    with pytest.raises(DataLossError) as err:
        r.partitions(s, e)
    assert ("Partition t-0 offset was changed from 10 to 3. This could either be a user error "
            "that the start offset is set too high and this is the first batch") in str(err.value)
    assert DATA_LOSS_HINT in str(err.value)

    lenient = run(spark, root, tmp_path / "chk", subscribe="t", startingOffsets=start_json,
                  failOnDataLoss="false")
    assert lenient == {0: recs("t", 1, ["b0", "b1"])}
    assert offset_log(tmp_path / "chk") == {0: offs("t", p0=3, p1=2)}


def test_default_start_is_latest(tmp_path):
    """[code: KafkaSourceProvider; docs] "Streaming default start is latest": without
    startingOffsets a new query starts at the log ends. kafkalog binds "latest" late, as Spark
    does for planned sentinels: initialOffset keeps -1 (the same answer however often Spark
    asks, also for a batch 0 replayed after a crash), the first trigger binds it to the log ends
    of that moment (batch 0 reads nothing), and later records are read."""
    append(tmp_path, "t-0", ["a", "b"])
    append(tmp_path, "t-1", ["c"])
    r = stream_reader(tmp_path, subscribe="t")
    start = r.initialOffset()
    assert start == offs("t", p0=-1, p1=-1)
    append(tmp_path, "t-0", ["d"])                     # before the first trigger: not read
    assert r.initialOffset() == start
    end0 = r.latestOffset(start, ReadAllAvailable())
    assert end0 == offs("t", p0=3, p1=1)
    assert r.partitions(start, end0) == []
    append(tmp_path, "t-0", ["e"])
    end1 = r.latestOffset(end0, ReadAllAvailable())
    assert end1 == offs("t", p0=4, p1=1)
    assert [(p.topic, p.partition, p.start, p.end) for p in r.partitions(end0, end1)] == \
        [("t", 0, 3, 4)]


def test_topic_level_starting_offsets(tmp_path):
    """(newer) [KafkaMicroBatchSourceSuite "subscribing topics from topic-level offsets"]:
    {"t1":"earliest","t2":"latest"} reads all of t1 but only t2 records written after the start
    ("11" skipped, "12" read). (newer) [KafkaMicroBatchSourceSuite "topic-level offsets tolerate
    a new topic matching subscribePattern after the start"]: a topic created later that matches
    the pattern is read from its earliest offset."""
    append(tmp_path, "t1-0", ["1", "2"])
    append(tmp_path, "t2-0", ["11"])
    r = stream_reader(tmp_path, subscribePattern="^t[0-9]",
                      startingOffsets='{"t1":"earliest","t2":"LATEST"}')
    s = r.initialOffset()
    assert s == {"t1": {"0": 0}, "t2": {"0": -1}}       # latest binds at the first trigger
    e0 = r.latestOffset(s, ReadAllAvailable())
    assert e0 == {"t1": {"0": 2}, "t2": {"0": 1}}
    assert read_range(r, s, e0) == recs("t1", 0, ["1", "2"])
    append(tmp_path, "t2-0", ["12"])
    append(tmp_path, "t3-0", ["31", "32"])
    e = r.latestOffset(e0, ReadAllAvailable())
    assert e == {"t1": {"0": 2}, "t2": {"0": 2}, "t3": {"0": 2}}
    assert read_range(r, e0, e) == [rec("t2", 0, 1, "12")] + recs("t3", 0, ["31", "32"])


def test_topic_level_starting_offsets_across_a_restart(spark, tmp_path):
    """(newer) [KafkaMicroBatchSourceSuite "subscribing topics from topic-level offsets"], the
    query and its recovery: {"t1":"earliest","t2":"latest"} reads all of t1 and none of t2's
    existing records ("11"); restarted on the checkpoint (startingOffsets applies only to a new
    query), it reads exactly what was added while it was stopped, t2's "12" included, and
    re-reads nothing."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    append(root, "t1-0", ["1", "2"])
    append(root, "t2-0", ["11"])
    topic_level = '{"t1":"earliest","t2":"latest"}'
    first = run(spark, root, chk, subscribe="t1,t2", startingOffsets=topic_level)
    assert first == {0: recs("t1", 0, ["1", "2"])}
    assert offset_log(chk)[0] == {"t1": {"0": 2}, "t2": {"0": 1}}
    append(root, "t1-0", ["3"])
    append(root, "t2-0", ["12"])
    second = run(spark, root, chk, subscribe="t1,t2", startingOffsets=topic_level)
    assert second == {1: [rec("t1", 0, 2, "3"), rec("t2", 0, 1, "12")]}


def test_replayed_first_batch_uses_the_same_start(spark, tmp_path):
    """[code: KafkaMicroBatchStream.getOrCreateInitialPartitionOffsets]: a crash after batch 0
    was planned (offsets/0 written) but before it committed: the retried batch 0 uses the same
    start offsets, and the records appended meanwhile are read by the next batch."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    append(root, "t-0", ["o0", "o1", "o2"])
    assert run(spark, root, chk, subscribe="t") == {0: []}
    assert offset_log(chk) == {0: offs("t", p0=3)}
    (chk / "commits" / "0").unlink()                   # the crash: batch 0 never committed
    (chk / "commits" / ".0.crc").unlink(missing_ok=True)
    append(root, "t-0", ["n3", "n4"])
    replay = run(spark, root, chk, subscribe="t")
    assert replay == {0: [], 1: recs("t", 0, ["n3", "n4"], first=3)}


# ====================================================================== §4 timestamps

def test_starting_offsets_by_timestamp(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "subscribing topic by name from specific timestamps
    (failOnDataLoss: ...)"]: each partition starts at its first offset, in log order, whose
    timestamp is >= its timestamp (p0, p1 from ts2, p2 from ts1); the restart re-reads nothing,
    reads data added while stopped (whatever its timestamp) and a partition added meanwhile from
    its earliest offset."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    append(root, "t-0", ["p0a", "p0b", "p0c"], timestamps=[TS1, TS2, TS2])
    append(root, "t-1", ["p1a", "p1b", "p1c", "p1d"], timestamps=[TS1, TS3, TS1, TS2])
    append(root, "t-2", ["p2a", "p2b"], timestamps=[TS1, TS2])
    by_ts = json.dumps({"t": {"0": TS2, "1": TS2, "2": TS1}})
    first = run(spark, root, chk, subscribe="t", startingOffsetsByTimestamp=by_ts)
    assert first == {0: recs("t", 0, ["p0b", "p0c"], first=1)
                     + recs("t", 1, ["p1b", "p1c", "p1d"], first=1)
                     + recs("t", 2, ["p2a", "p2b"])}

    append(root, "t-0", ["p0d"], timestamps=[TS1])
    append(root, "t-3", ["p3a", "p3b"], timestamps=[TS1, TS1])
    second = run(spark, root, chk, subscribe="t", startingOffsetsByTimestamp=by_ts)
    assert second == {1: [rec("t", 0, 3, "p0d")] + recs("t", 3, ["p3a", "p3b"])}


def test_starting_timestamp_applies_to_every_partition(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "subscribing topic by name from global timestamp per topic
    (failOnDataLoss: ...)"]: startingTimestamp=ts2 starts every partition at its first record
    at or after ts2, with no partition-set check ([code: fetchGlobalTimestampBasedOffsets])."""
    root = tmp_path / "data"
    append(root, "t-0", ["a", "b", "c"], timestamps=[TS1, TS2, TS3])
    append(root, "t-1", ["d", "e"], timestamps=[TS1, TS3])
    append(root, "t-2", ["f"], timestamps=[TS2])
    got = run(spark, root, tmp_path / "chk", subscribe="t", startingTimestamp=TS2)
    assert got == {0: recs("t", 0, ["b", "c"], first=1) + [rec("t", 1, 1, "e"),
                                                          rec("t", 2, 0, "f")]}


def test_starting_timestamp_across_a_restart_and_a_new_partition(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "subscribing topic by name from global timestamp per topic
    (failOnDataLoss: ...)"], the restart half: after a first run from startingTimestamp=ts2, the
    restarted query reads what was added while it was stopped whatever its timestamp (ts1 is
    before ts2), and a partition added meanwhile from its earliest offset (all its records are
    before ts2: the global timestamp binds only the partitions of the first start), re-reading
    nothing."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    append(root, "t-0", ["a", "b", "c"], timestamps=[TS1, TS2, TS3])
    append(root, "t-1", ["d", "e"], timestamps=[TS1, TS3])
    first = run(spark, root, chk, subscribe="t", startingTimestamp=TS2)
    assert first == {0: recs("t", 0, ["b", "c"], first=1) + [rec("t", 1, 1, "e")]}
    append(root, "t-1", ["f"], timestamps=[TS1])
    append(root, "t-2", ["g", "h"], timestamps=[TS1, TS1])
    second = run(spark, root, chk, subscribe="t", startingTimestamp=TS2)
    assert second == {1: [rec("t", 1, 2, "f")] + recs("t", 2, ["g", "h"])}


def test_unmatched_start_timestamp_fails_by_default(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "subscribing topic by name from global timestamp per topic
    with non-matching starting offset"]: a start timestamp matching no record of a partition
    fails the query at start (default strategy)."""
    root = tmp_path / "data"
    append(root, "t-0", ["a"], timestamps=[TS3])
    append(root, "t-1", ["b"], timestamps=[TS1])
    with pytest.raises(StreamingQueryException) as e:
        run(spark, root, tmp_path / "chk", subscribe="t", startingTimestamp=TS2)
    assert f"No offset matched from request of topic-partition t-1 and timestamp {TS2}." \
        in str(e.value)


def test_unmatched_start_timestamp_fails_with_error_strategy(tmp_path):
    """[KafkaMicroBatchSourceSuite "subscribing topic by name from specific timestamps with
    non-matching starting offset"]: startingOffsetsByTimestampStrategy=error (any case) also
    fails when the starting offsets are resolved."""
    append(tmp_path, "t-0", ["a"], timestamps=[TS3])
    append(tmp_path, "t-1", ["b"], timestamps=[TS1])
    r = stream_reader(tmp_path, subscribe="t", startingOffsetsByTimestampStrategy="ErRoR",
                      startingOffsetsByTimestamp=json.dumps({"t": {"0": TS2, "1": TS2}}))
    with pytest.raises(InvalidConfigError, match="No offset matched from request of "
                                                 f"topic-partition t-1 and timestamp {TS2}"):
        r.initialOffset()


def test_unmatched_start_timestamp_with_latest_strategy(tmp_path):
    """[KafkaMicroBatchSourceSuite "subscribing topic by name from specific timestamps with
    non-matching starting offset"] (strategy "latest"): the unmatched partition starts at its
    log end, so its existing records are not read, and records appended to it later are read
    even though they carry the old timestamp."""
    append(tmp_path, "t-0", ["a", "b"], timestamps=[TS1, TS3])
    append(tmp_path, "t-1", ["c", "d"], timestamps=[TS1, TS1])
    r = stream_reader(tmp_path, subscribe="t", startingOffsetsByTimestampStrategy="latest",
                      startingOffsetsByTimestamp=json.dumps({"t": {"0": TS2, "1": TS2}}))
    s = r.initialOffset()
    assert s == offs("t", p0=1, p1=2)
    e1 = r.latestOffset(s, ReadAllAvailable())
    assert read_range(r, s, e1) == [rec("t", 0, 1, "b")]
    append(tmp_path, "t-1", ["e", "f"], timestamps=[TS1, TS1])
    e2 = r.latestOffset(e1, ReadAllAvailable())
    assert e2 == offs("t", p0=2, p1=4)
    assert read_range(r, e1, e2) == recs("t", 1, ["e", "f"], first=2)


# ====================================================================== §5 discovery, assign

def test_pattern_discovers_new_partitions_and_topics_mid_query(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "subscribing topic by pattern from latest offsets
    (failOnDataLoss: ...)"]: partitions added while the query runs, of a subscribed topic and of
    a new topic matching the pattern, are discovered and read from their earliest offset (all
    their records), while the existing partition starts at latest; a topic not matching the
    pattern is never read ([ConsumerStrategySuite "SubscribePatternStrategy.
    assignedTopicPartitions must give back all assigned"])."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    append(root, "ev_a-0", ["old0", "old1"])
    append(root, "other-0", ["x0"])
    sink = Batches()
    q = start(spark, root, chk, sink, {"processingTime": "100 milliseconds"},
              subscribePattern="^ev_", startingOffsets="latest")
    try:
        q.processAllAvailable()
        append(root, "ev_a-0", ["new0"])
        append(root, "ev_a-1", ["a1-0", "a1-1", "a1-2"])
        append(root, "ev_b-0", ["b0-0", "b0-1"])
        append(root, "other-0", ["x1"])
        append(root, "other-1", ["y0"])
        wait_for(lambda: len(sink.rows()) >= 6, "six records of ev_a and ev_b", q)
        q.processAllAvailable()
    finally:
        q.stop()
    assert sink.rows() == ([rec("ev_a", 0, 2, "new0")] + recs("ev_a", 1, ["a1-0", "a1-1", "a1-2"])
                           + recs("ev_b", 0, ["b0-0", "b0-1"]))
    last = offset_log(chk)[max(offset_log(chk))]
    assert last == {"ev_a": {"0": 3, "1": 3}, "ev_b": {"0": 2}}


def test_assign_reads_only_listed_existing_partitions(spark, tmp_path):
    """[ConsumerStrategySuite "AssignStrategy.assignedTopicPartitions must give back all
    assigned", "AssignStrategy.assignedTopicPartitions must skip invalid partitions"]: assign
    reads only the listed partitions; a listed partition that does not exist is dropped."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    append(root, "t-0", ["a0", "a1"])
    append(root, "t-1", ["b0"])
    append(root, "t-2", ["c0"])
    append(root, "u-0", ["d0"])
    got = run(spark, root, chk, assign='{"t":[0,2,7]}', startingOffsets="earliest")
    assert got == {0: recs("t", 0, ["a0", "a1"]) + [rec("t", 2, 0, "c0")]}
    assert offset_log(chk) == {0: offs("t", p0=2, p2=1)}


def test_added_and_deleted_partitions_reader(tmp_path):
    """[code: getOffsetRangesFromResolvedOffsets] KAFKA_DATA_LOSS.
    ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO: a partition discovered after the start whose
    earliest offset is 5 fails with "Added partition t-1 starts from 5 instead of 0." (true) or
    is read from its earliest (false). [code] PARTITIONS_DELETED: a partition of the end offsets
    gone when planning fails with "Partitions Set(t-1) have been deleted."."""
    append(tmp_path, "t-0", ["a"])
    strict = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest")
    lenient = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest",
                            failOnDataLoss="false")
    s = strict.initialOffset()
    assert s == lenient.initialOffset() == offs("t", p0=0)
    append(tmp_path, "t-1", [str(i) for i in range(8)])
    with Log.open(tmp_path / "t-1") as log:
        assert log.delete_records_before(5) == 5
    end = strict.latestOffset(s, ReadAllAvailable())
    assert end == lenient.latestOffset(s, ReadAllAvailable()) == offs("t", p0=1, p1=8)
    with pytest.raises(DataLossError, match=r"Added partition t-1 starts from 5 instead of 0\."):
        strict.partitions(s, end)
    assert read_range(lenient, s, end) == [rec("t", 0, 0, "a"), rec("t", 1, 5, "5"),
                                           rec("t", 1, 6, "6"), rec("t", 1, 7, "7")]
    for f in (tmp_path / "t-1").iterdir():
        f.unlink()
    (tmp_path / "t-1").rmdir()
    with pytest.raises(DataLossError, match=r"Partitions Set\(t-1\) have been deleted\."):
        strict.partitions(s, end)


# ====================================================================== §5 data loss and gaps

def _retention(root: Path) -> None:
    """50 one-record appends over small segments, then everything below 23 deleted."""
    cfg = LogConfig(segment_bytes=300)
    with Log.open(root / "t-0", cfg) as log:
        for i in range(50):
            log.append(pa.table({"value": pa.array([str(i).encode()], pa.binary())}))
        assert len(log.segments) > 5
        assert log.delete_records_before(23) == 23
        assert log.segments[0].base_offset > 0        # whole segments went


def test_retention_data_loss_fails_the_query(spark, tmp_path):
    """[code: KafkaDataConsumer; KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE]: records removed
    by retention, start {"t":{"0":0}}, failOnDataLoss=true: the read fails with "Could not read
    records in offset [0, 23) for topic partition t-0" and the data-loss hint."""
    root = tmp_path / "data"
    _retention(root)
    with pytest.raises(StreamingQueryException) as e:
        run(spark, root, tmp_path / "chk", subscribe="t", startingOffsets='{"t":{"0":0}}')
    msg = str(e.value)
    assert "Could not read records in offset [0, 23) for topic partition t-0" in msg
    assert DATA_LOSS_HINT in msg


def test_retention_with_fail_on_data_loss_false_reads_survivors_once(spark, tmp_path):
    """[KafkaDontFailOnDataLossSuite "failOnDataLoss=false should not return duplicated
    records: microbatch v2"]: only the surviving records 23..49, each once.
    [code: KafkaDataConsumer.getEarliestAvailableOffsetBetween]: with maxOffsetsPerTrigger=20
    the batch [0, 20) lies wholly below the earliest offset (no rows, no error) and [20, 40)
    resumes at 23."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    _retention(root)
    got = run(spark, root, chk, subscribe="t", startingOffsets='{"t":{"0":0}}',
              failOnDataLoss="false", maxOffsetsPerTrigger=20)
    assert got == {0: [], 1: recs("t", 0, [str(i) for i in range(23, 40)], first=23),
                   2: recs("t", 0, [str(i) for i in range(40, 50)], first=40)}
    assert offset_log(chk) == {0: offs("t", p0=20), 1: offs("t", p0=40), 2: offs("t", p0=50)}


def test_compaction_gaps_are_not_data_loss(spark, tmp_path):
    """[code: KafkaDataConsumer.fetchRecord] "Compaction gap": offsets missing inside
    [earliest, latest) are not data loss, even with failOnDataLoss=true; "A gap running up to
    the range end ends the batch cleanly at the end offset without extra rows": with records at
    0-4, 10-14, 20-24 and maxOffsetsPerTrigger=7 the batches [0,7) [7,14) [14,21) [21,25)
    (ending in a gap, starting in one, holding one) read exactly their offsets. [KafkaMicro
    BatchSourceSuite "read Kafka transactional messages: read_committed"] "The budget counts
    offsets, not visible rows"."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    with Log.open(root / "g-0") as log:
        for base in (0, 10, 20):
            log.append_raw(build_batch([RecordInput(str(base + i).encode(), None, NOW + i)
                                        for i in range(5)], base_offset=base),
                           assign_offsets=False)
            if base == 10:
                log.roll()                  # the second gap also crosses a segment boundary
        assert log.log_end_offset == 25
        assert [seg.base_offset for seg in log.segments] == [0, 15]
    got = run(spark, root, chk, subscribe="g", startingOffsets="earliest",
              maxOffsetsPerTrigger=7)

    def g(*o):
        return [rec("g", 0, x, str(x)) for x in o]
    assert got == {0: g(0, 1, 2, 3, 4), 1: g(10, 11, 12, 13), 2: g(14, 20), 3: g(21, 22, 23, 24)}
    assert offset_log(chk) == {0: offs("g", p0=7), 1: offs("g", p0=14), 2: offs("g", p0=21),
                               3: offs("g", p0=25)}


def test_batch_contents_are_exactly_start_to_end(tmp_path):
    """[KafkaMicroBatchSourceSuite "SPARK-25495: FetchedData.reset should reset all fields"]:
    records appended after a batch's end was chosen (while it runs) are not in it and come in
    the next batch."""
    append(tmp_path, "t-0", [f"v{i}" for i in range(10)])
    r = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest")
    s = r.initialOffset()
    e = r.latestOffset(s, r.getDefaultReadLimit())
    assert e == offs("t", p0=10)
    append(tmp_path, "t-0", [f"v{i}" for i in range(10, 15)])
    assert read_range(r, s, e) == recs("t", 0, [f"v{i}" for i in range(10)])
    e2 = r.latestOffset(e, r.getDefaultReadLimit())
    assert e2 == offs("t", p0=15)
    assert read_range(r, e, e2) == recs("t", 0, [f"v{i}" for i in range(10, 15)], first=10)


# ====================================================================== §5 triggers and rate limits

def test_rate_limit_split_restart_continuity_and_once(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "maxOffsetsPerTrigger"]: backlog 101/11/1 with limit 10 gives
    a first batch of 8/1/1 (offsets/0), and after a restart on the same checkpoint the
    rate-limited sequence continues exactly with 9/1/0 (offsets/1); then Trigger.Once ignores
    maxOffsetsPerTrigger and reads the remaining 93 records in one batch. Over the three runs
    every record is read exactly once (issue acceptance: a query stopped and restarted from its
    checkpoint continues exactly where it left off)."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    sizes = {0: 101, 1: 11, 2: 1}
    for p, n in sizes.items():
        append(root, f"t-{p}", [f"{p}:{i}" for i in range(n)])
    opts = dict(subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger=10)

    def one_batch(batch_id: int) -> dict[int, list[tuple]]:
        # the first trigger runs at once, the next one would come an hour later
        sink = Batches()
        q = start(spark, root, chk, sink, {"processingTime": "1 hour"}, **opts)
        try:
            wait_for(lambda: (chk / "commits" / str(batch_id)).exists(),
                     f"batch {batch_id} committed", q)
        finally:
            q.stop()
        return sink.by_id

    def rows(p: int, lo: int, hi: int) -> list[tuple]:
        return [rec("t", p, i, f"{p}:{i}") for i in range(lo, hi)]

    assert one_batch(0) == {0: rows(0, 0, 8) + rows(1, 0, 1) + rows(2, 0, 1)}
    assert offset_log(chk) == {0: offs("t", p0=8, p1=1, p2=1)}
    assert one_batch(1) == {1: rows(0, 8, 17) + rows(1, 1, 2)}
    assert offset_log(chk)[1] == offs("t", p0=17, p1=2, p2=1)
    last = run(spark, root, chk, once=True, **opts)
    assert last == {2: rows(0, 17, 101) + rows(1, 2, 11)}
    assert offset_log(chk)[2] == offs("t", p0=101, p1=11, p2=1)


def test_available_now_exact_batches_and_fixed_target(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "Trigger.AvailableNow"]: 15 records (5 partitions x 3) with
    maxOffsetsPerTrigger=5 run exactly 3 batches of 5 and the query stops by itself (issue
    acceptance: maxOffsetsPerTrigger gives the expected number of micro-batches).
    [code: prepareForTriggerAvailableNow]: the target is the latest offsets when the run begins:
    records appended during the first batch are not read by this run."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    for p in range(5):
        append(root, f"t-{p}", [f"{p}:{i}" for i in range(3)])

    def append_late(batch_id: int) -> None:
        if batch_id == 0:
            for p in range(5):
                append(root, f"t-{p}", [f"{p}:late"])

    sink = Batches(on_batch=append_late)
    got = run(spark, root, chk, sink=sink, subscribe="t", startingOffsets="earliest",
              maxOffsetsPerTrigger=5)
    assert got == {b: [rec("t", p, b, f"{p}:{b}") for p in range(5)] for b in range(3)}
    assert offset_log(chk) == {b: {"t": {str(p): b + 1 for p in range(5)}} for b in range(3)}
    for p in range(5):                             # the late records are there, left unread
        with Log.open(root / f"t-{p}", read_only=True) as log:
            assert log.log_end_offset == 4


def test_available_now_lost_partition_fails_whatever_fail_on_data_loss(tmp_path):
    """[KafkaMicroBatchSourceSuite "Query with Trigger.AvailableNow should throw error when
    topic partitions got unavailable during subsequent batches"]: a partition of the
    AvailableNow snapshot gone before a later batch fails it, even with failOnDataLoss=false."""
    append(tmp_path, "t-0", ["a", "b", "c"])
    append(tmp_path, "t-1", ["d", "e", "f"])
    r = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest",
                      failOnDataLoss="false", maxOffsetsPerTrigger=2)
    s = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    b1 = r.latestOffset(s, r.getDefaultReadLimit())
    assert b1 == offs("t", p0=1, p1=1)
    for f in (tmp_path / "t-1").iterdir():
        f.unlink()
    (tmp_path / "t-1").rmdir()
    with pytest.raises(Exception, match="have been lost during running query with "
                                        "Trigger.AvailableNow"):
        b2 = r.latestOffset(b1, r.getDefaultReadLimit())
        r.partitions(b1, b2)


def test_available_now_offsets_below_snapshot_fail(tmp_path):
    """[KafkaMicroBatchSourceSuite "Query with Trigger.AvailableNow should throw error when
    offset(s) in planned topic partitions got unavailable during subsequent batches"]: the
    partition recreated with fewer records (2 < the snapshot's 5) fails the next batch."""
    append(tmp_path, "t-0", [str(i) for i in range(5)])
    r = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest",
                      failOnDataLoss="false", maxOffsetsPerTrigger=2)
    s = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    b1 = r.latestOffset(s, r.getDefaultReadLimit())
    assert b1 == offs("t", p0=2)
    for f in (tmp_path / "t-0").iterdir():
        f.unlink()
    (tmp_path / "t-0").rmdir()
    append(tmp_path, "t-0", ["x", "y"])                 # recreated, fewer records
    with pytest.raises(Exception, match="report available offset which is less than end "
                                        "offset during running query with Trigger.AvailableNow"):
        b2 = r.latestOffset(b1, r.getDefaultReadLimit())
        r.partitions(b1, b2)


def test_min_offsets_per_trigger_skips_a_trigger_in_a_real_query(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "minOffsetsPerTrigger"] in a running query:
    minOffsetsPerTrigger=15 (maxTriggerDelay 1h): the first batch runs (16 rows); 6 new offsets
    give triggers without a batch (progress reports latest 22 while the end stays 16); after
    12 more (18 >= 15) one batch takes all 18."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    append(root, "t-0", [str(i) for i in range(16)])
    sink = Batches()
    key = "spark.sql.streaming.noDataProgressEventInterval"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "0")                 # a progress event for every trigger without data
    try:
        q = start(spark, root, chk, sink, {"processingTime": "100 milliseconds"},
                  subscribe="t", startingOffsets="earliest", minOffsetsPerTrigger=15,
                  maxTriggerDelay="1h")
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)

    def skipped_trigger_seen() -> bool:
        for p in q.recentProgress:
            src = p["sources"][0]
            if (p["numInputRows"] == 0 and src.get("latestOffset")
                    and json.loads(src["latestOffset"]) == offs("t", p0=22)
                    and json.loads(src["endOffset"]) == offs("t", p0=16)):
                return True
        return False

    try:
        wait_for(lambda: 0 in sink.by_id, "the first batch", q)
        append(root, "t-0", [str(i) for i in range(16, 22)])
        wait_for(skipped_trigger_seen, "a trigger that saw 22 and ran no batch", q)
        assert list(sink.by_id) == [0]
        append(root, "t-0", [str(i) for i in range(22, 34)])
        wait_for(lambda: 1 in sink.by_id, "the second batch", q)
    finally:
        q.stop()
    assert sink.by_id == {0: recs("t", 0, [str(i) for i in range(16)]),
                          1: recs("t", 0, [str(i) for i in range(16, 34)], first=16)}
    assert offset_log(chk) == {0: offs("t", p0=16), 1: offs("t", p0=34)}


def test_min_offsets_and_max_trigger_delay_with_injected_clock(tmp_path):
    """[KafkaMicroBatchSourceSuite "minOffsetsPerTrigger"]: minOffsetsPerTrigger=15,
    maxTriggerDelay=5s: the first batch runs (16); 6 new offsets give no batch; after 12 more
    (18 >= 15) one batch takes everything; once the delay has passed since the last batch that
    ran, a batch runs with fewer (10 < 15).
    [code: KafkaMicroBatchStream.delayBatch]: a skipped trigger returns the start offsets
    unchanged, and the delay clock restarts at every trigger that is not skipped (here: each one
    that runs a batch; see the next test for one that finds nothing).
    The first batch runs whatever its size (3 < 15 on a fresh reader): Spark's lastTriggerMillis
    starts at 0, so the time since 1970 has passed the delay; not with maxTriggerDelay
    1000000000000d (Long.MAX_VALUE ms, JavaUtils.timeStringAs saturating), whose first trigger
    waits for minOffsetsPerTrigger as every later one does."""
    append(tmp_path, "t-0", [str(i) for i in range(16)])
    clock = Clock()
    r = stream_reader(tmp_path, clock, subscribe="t", startingOffsets="earliest",
                      minOffsetsPerTrigger=15, maxTriggerDelay="5s")
    limit = r.getDefaultReadLimit()
    assert isinstance(limit, ReadMinRows) and limit.min_rows == 15
    s = r.initialOffset()
    b1 = r.latestOffset(s, limit)
    assert b1 == offs("t", p0=16)

    append(tmp_path, "t-0", [str(i) for i in range(16, 22)])
    clock.ms = 1_000
    assert r.latestOffset(b1, limit) == b1                       # 6 < 15: skipped
    assert r.reportLatestOffset() == offs("t", p0=22)
    append(tmp_path, "t-0", [str(i) for i in range(22, 34)])
    clock.ms = 2_000
    b2 = r.latestOffset(b1, limit)
    assert b2 == offs("t", p0=34)                                # 18 >= 15

    append(tmp_path, "t-0", [str(i) for i in range(34, 44)])
    clock.ms = 6_999                                             # 4.999 s after the last batch
    assert r.latestOffset(b2, limit) == b2
    clock.ms = 7_000                                             # 5 s after it (not after the skip)
    assert r.latestOffset(b2, limit) == offs("t", p0=44)

    append(tmp_path, "u-0", ["a", "b", "c"])
    wall = Clock()
    wall.ms = 1_700_000_000_000                                  # a wall clock's time since 1970
    fresh = stream_reader(tmp_path, wall, subscribe="u", startingOffsets="earliest",
                          minOffsetsPerTrigger=15)
    assert fresh.latestOffset(fresh.initialOffset(), ReadMinRows(15)) == offs("u", p0=3)
    forever = stream_reader(tmp_path, wall, subscribe="u", startingOffsets="earliest",
                            minOffsetsPerTrigger=4, maxTriggerDelay="1000000000000d")
    assert forever.opts.max_trigger_delay_ms == 2**63 - 1
    start = forever.initialOffset()
    assert forever.latestOffset(start, ReadMinRows(4)) == start   # 3 < 4: even the first waits
    append(tmp_path, "u-0", ["d"])
    assert forever.latestOffset(start, ReadMinRows(4)) == offs("u", p0=4)


def test_the_delay_clock_restarts_at_every_trigger_that_is_not_delayed(tmp_path):
    """[code: KafkaMicroBatchStream.delayBatch]: Spark sets lastTriggerMillis whenever a trigger
    is not delayed (the delay passed, or enough offsets are new), whether or not that trigger
    then finds anything to read. A stream started at latest on a quiet topic (the streaming
    default): its first trigger finds nothing, yet restarts the clock, so a record arriving a
    second later waits for minOffsetsPerTrigger or the delay, as every later trigger does.
    Likewise after the delay passed on a trigger that found nothing new, or no partition at all
    (a pattern matching no topic yet)."""
    append(tmp_path, "t-0", ["a"])
    wall = Clock()
    wall.ms = 1_700_000_000_000
    r = stream_reader(tmp_path, wall, subscribe="t", minOffsetsPerTrigger=15, maxTriggerDelay="5s")
    limit = r.getDefaultReadLimit()
    start = r.initialOffset()
    first = r.latestOffset(start, limit)
    assert first == offs("t", p0=1)                         # nothing new: no batch to run
    append(tmp_path, "t-0", ["b"])
    wall.ms += 1_000
    assert r.latestOffset(first, limit) == first             # 1 < 15 and 1 s < 5 s: delayed
    wall.ms += 4_000                                         # 5 s after the first trigger
    b1 = r.latestOffset(first, limit)
    assert b1 == offs("t", p0=2)
    wall.ms += 10_000                                        # the delay passed, nothing new:
    assert r.latestOffset(b1, limit) == b1                   # no batch, yet the clock restarts
    append(tmp_path, "t-0", ["c"])
    wall.ms += 1_000
    assert r.latestOffset(b1, limit) == b1                   # 1 s since that trigger: delayed
    wall.ms += 4_000
    assert r.latestOffset(b1, limit) == offs("t", p0=3)

    # a pattern that matches nothing yet: that trigger too restarts the clock
    pattern = stream_reader(tmp_path, wall, subscribePattern="^v", minOffsetsPerTrigger=15,
                            maxTriggerDelay="5s")
    empty = pattern.initialOffset()
    assert pattern.latestOffset(empty, limit) == empty
    append(tmp_path, "v-0", ["x"])
    wall.ms += 1_000
    assert pattern.latestOffset(empty, limit) == empty       # 1 < 15 and 1 s < 5 s: delayed
    wall.ms += 4_000
    assert pattern.latestOffset(empty, limit) == offs("v", p0=1)


def test_composite_limits_with_injected_clock(tmp_path):
    """[KafkaMicroBatchSourceSuite "compositeReadLimit"]: min 15 / max 20 / delay 5s over
    backlog 21/11/1: the first batch takes 12/6/1 (19); 14 pending (< 15) gives no batch; after
    19 more arrive (on p2) a batch runs capped by the max split (5/3/11); the 14 left wait for
    the delay, then are read.
    [KafkaMicroBatchSourceSuite "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "compositeReadLimit"] (Trigger.Once part): with ReadAllAvailable, as Trigger.Once passes,
    neither limit applies."""
    for p, n in enumerate((21, 11, 1)):
        append(tmp_path, f"t-{p}", [str(i) for i in range(n)])
    clock = Clock()
    r = stream_reader(tmp_path, clock, subscribe="t", startingOffsets="earliest",
                      minOffsetsPerTrigger=15, maxOffsetsPerTrigger=20, maxTriggerDelay="5s")
    limit = r.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows) and limit.max_rows == 20
    s = r.initialOffset()
    b1 = r.latestOffset(s, limit)
    assert b1 == offs("t", p0=12, p1=6, p2=1)
    clock.ms = 1_000
    assert r.latestOffset(b1, limit) == b1
    append(tmp_path, "t-2", [str(i) for i in range(1, 20)])
    clock.ms = 2_000
    b2 = r.latestOffset(b1, limit)
    assert b2 == offs("t", p0=17, p1=9, p2=12)
    clock.ms = 6_999
    assert r.latestOffset(b2, limit) == b2
    clock.ms = 7_000
    b3 = r.latestOffset(b2, limit)
    assert b3 == offs("t", p0=21, p1=11, p2=20)

    append(tmp_path, "t-0", ["x"])                               # 1 new offset, no delay passed
    clock.ms = 7_001
    assert r.latestOffset(b3, limit) == b3
    assert r.latestOffset(b3, ReadAllAvailable()) == offs("t", p0=22, p1=11, p2=20)
    assert r.latestOffset(s, ReadAllAvailable()) == offs("t", p0=22, p1=11, p2=20)


# ====================================================================== §6 read_committed

def test_read_committed_streaming_query(spark, tmp_path):
    """[KafkaMicroBatchSourceSuite "read Kafka transactional messages: read_committed"] through
    Spark, maxOffsetsPerTrigger=10 over Spark's data (0-4 committed by marker 5; 6-10 aborted
    by 11; 12-16 committed by 17; 18, 20, 22-23 committed by 19, 21, 24) plus a transaction left
    open at 25-26: the batches [0,10) [10,20) [20,25) give 0-4, then 12-16 and 18, then 20, 22,
    23 and the run stops at the LSO 25, the open transaction's records invisible. Markers are
    never rows, aborted records never appear, the budget counts offsets, and none of it is data
    loss with failOnDataLoss=true ([code: KafkaDataConsumer.fetchRecord])."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    t = Txn(root / "tx-0")
    for n, commit in ((5, True), (5, False), (5, True), (1, True), (1, True), (2, True)):
        t.data(n)
        t.end(commit)
    t.data(2)
    with Log.open(root / "tx-0", read_only=True) as log:
        assert (log.log_end_offset, log.last_stable_offset) == (27, 25)

    def tx(*o):
        return [rec("tx", 0, x, str(x)) for x in o]
    got = run(spark, root, chk, subscribe="tx", startingOffsets="earliest",
              isolationLevel="read_committed", maxOffsetsPerTrigger=10)
    assert got == {0: tx(0, 1, 2, 3, 4), 1: tx(12, 13, 14, 15, 16, 18), 2: tx(20, 22, 23)}
    assert offset_log(chk) == {0: offs("tx", p0=10), 1: offs("tx", p0=20), 2: offs("tx", p0=25)}


def test_read_committed_batches_with_reader(tmp_path):
    """[KafkaMicroBatchSourceSuite "read Kafka transactional messages: read_committed"] batch by
    batch, maxOffsetsPerTrigger=3: 5 uncommitted records give no batch (latest = LSO = 0); after
    the commit [0,3) gives 0,1,2 and [3,6) gives 3,4 (5 is the marker); the aborted transaction
    gives two empty batches that still advance ([6,9), [9,12)); the next committed one gives
    12,13,14 then 15,16; three small transactions give 18,20 then 22,23 then an empty batch over
    the trailing marker at 24 (a batch of only invisible offsets, one starting on a marker, one
    ending on a marker, a gap in the middle of a batch)."""
    path = tmp_path / "tx-0"
    t = Txn(path)
    t.data(5)
    r = stream_reader(tmp_path, subscribe="tx", startingOffsets="earliest",
                      isolationLevel="read_committed", maxOffsetsPerTrigger=3)
    limit = r.getDefaultReadLimit()
    s = r.initialOffset()
    assert s == offs("tx", p0=0)
    assert r.latestOffset(s, limit) == s
    assert read_range(r, s, s) == []

    def tx(*o):
        return [rec("tx", 0, x, str(x)) for x in o]

    def batches(start: dict, until: int) -> list[tuple[int, int, list]]:
        out = []
        cur = start
        while True:
            nxt = r.latestOffset(cur, limit)
            if nxt == cur:
                break
            out.append((cur["tx"]["0"], nxt["tx"]["0"], read_range(r, cur, nxt)))
            cur = nxt
        assert cur == offs("tx", p0=until)
        return out

    t.end(True)
    assert batches(s, 6) == [(0, 3, tx(0, 1, 2)), (3, 6, tx(3, 4))]
    t.data(5)
    t.end(False)
    assert batches(offs("tx", p0=6), 12) == [(6, 9, []), (9, 12, [])]
    t.data(5)
    assert batches(offs("tx", p0=12), 12) == []                  # open again: LSO 12
    t.end(True)
    assert batches(offs("tx", p0=12), 18) == [(12, 15, tx(12, 13, 14)), (15, 18, tx(15, 16))]
    for n in (1, 1, 2):
        t.data(n)
        t.end(True)
    assert batches(offs("tx", p0=18), 25) == [(18, 21, tx(18, 20)), (21, 24, tx(22, 23)),
                                              (24, 25, [])]


def test_read_uncommitted_batches_with_reader(tmp_path):
    """[KafkaMicroBatchSourceSuite "read Kafka transactional messages: read_uncommitted"]:
    uncommitted records are visible at once (0-4 before the commit), aborted records are
    visible (6-10), control markers (5, 11) are never rows."""
    t = Txn(tmp_path / "tx-0")
    t.data(5)
    r = stream_reader(tmp_path, subscribe="tx", startingOffsets="earliest")
    s = r.initialOffset()
    e1 = r.latestOffset(s, r.getDefaultReadLimit())
    assert e1 == offs("tx", p0=5)
    assert [x[2] for x in read_range(r, s, e1)] == [0, 1, 2, 3, 4]
    t.end(True)
    t.data(5)
    t.end(False)
    e2 = r.latestOffset(e1, r.getDefaultReadLimit())
    assert e2 == offs("tx", p0=12)
    assert [x[2] for x in read_range(r, e1, e2)] == [6, 7, 8, 9, 10]


# ====================================================================== issue acceptance

def test_records_appended_by_another_process_arrive_in_later_batches(spark, tmp_path):
    """Issue acceptance: records appended by ANOTHER PROCESS (holding the partition's writer
    lock) while a processing-time query runs arrive in later micro-batches, each record exactly
    once; every batch holds exactly its [start, end) ([KafkaMicroBatchSourceSuite "SPARK-25495:
    FetchedData.reset should reset all fields"]) and each batch starts where the last ended."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    append(root, "w-0", [f"init{i}" for i in range(10)])
    name = f"kl_{uuid.uuid4().hex[:12]}"
    q = (source(spark, root, subscribe="w", startingOffsets="earliest").writeStream
         .format("memory").queryName(name).option("checkpointLocation", str(chk))
         .trigger(processingTime="200 milliseconds").start())
    proc = None

    def rows_read() -> int:
        return sum(p["numInputRows"] for p in q.recentProgress)

    try:
        wait_for(lambda: rows_read() >= 10, "the first batch", q)
        proc = subprocess.Popen([sys.executable, str(WRITER), str(root / "w-0"), "4", "10",
                                 "0.3", "w"], cwd=REPO, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.stdout.readline().split() == ["locked", "10"]
        wait_for(lambda: rows_read() >= 50, "the 40 records of the other process", q)
        assert proc.stdout.readline().split() == ["appended", "50"]
        with pytest.raises(LogLockedError):               # the other process still holds it
            Log.open(root / "w-0")
        progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
        table = sorted(tuple(r) for r in spark.table(name).selectExpr(
            "topic", "partition", "offset", "cast(value as string)").collect())
    finally:
        q.stop()
        if proc is not None:
            proc.communicate("\n", timeout=30)
    assert proc.returncode == 0
    assert table == (recs("w", 0, [f"init{i}" for i in range(10)])
                     + recs("w", 0, [f"w{i}" for i in range(40)], first=10))
    assert len(progress) >= 2
    assert json.loads(progress[0]["sources"][0]["endOffset"]) == offs("w", p0=10)
    assert progress[0]["numInputRows"] == 10
    prev_end = 0
    for p in progress:
        src = p["sources"][0]
        start_offset = json.loads(src["startOffset"] or "null")   # null for the first batch
        begin = 0 if start_offset is None else start_offset["w"]["0"]
        end = json.loads(src["endOffset"])["w"]["0"]
        assert begin == prev_end
        assert p["numInputRows"] == end - begin
        prev_end = end
    assert prev_end == 50

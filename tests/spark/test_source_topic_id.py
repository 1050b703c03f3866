"""Topic ids (``partition.metadata``, KIP-516) in the Spark layer: the sink gives every topic it
creates a new random id, and the streaming source records the ids it reads in its offsets, so a
topic deleted and recreated between micro-batches (also while the query is stopped) is data
loss, handled per ``failOnDataLoss``: ``true`` fails the query naming the topic and both ids,
``false`` warns and reads the new topic from its earliest offset. Topics without ids keep
Spark's offset-only behaviour and Spark's offset JSON.

Covers spark_kafka_test_checklist.md §5 "A topic recreated with fewer records between runs ..."
[KafkaMicroBatchSourceSuite "subscribe topic by pattern with topic recreation between batches"]
and goes further: with ids a recreated topic is recognised whatever its offsets are (Spark's
source sees only offsets, so a recreated topic with more records goes unnoticed there). Real
directories, the real engine and, for the queries, a real local SparkSession.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming.datasource import ReadAllAvailable

from kafka_log_sink.commit import SinkCoordinator
from kafka_log_sink.options import parse_sink_options
from kafka_log_source.datasource import KafkaLogStreamReader
from kafka_log_source.offsets import (TOPIC_IDS_KEY, offsets_from_json, offsets_to_json,
                                      topic_ids_from_json)
from kafka_log_source.options import parse_source_options
from kafka_log_source.reader import DataLossError
from storage_core.checkpoint import PartitionMetadataFile, random_topic_id, topic_id_to_str
from storage_core.errors import InvalidConfigError
from storage_core.log import Log
from storage_core.server import LogManager

QUERY_TIMEOUT = 120
DATA_LOSS_HINT = "set the source option failOnDataLoss to false"


# ====================================================================== helpers

def append(root: Path, tp: str, values: list[str], topic_id: uuid.UUID | None = None) -> None:
    with Log.open(root / tp, topic_id=topic_id) as log:
        log.append(pa.table({"value": pa.array([v.encode() for v in values], pa.binary())}))


def delete_topic(root: Path, topic: str, partitions: int) -> None:
    """Delete a topic as a broker does (LogManager.asyncDelete: ``-delete`` directories, the data
    dir's checkpoints rewritten without it)."""
    with LogManager.open([root]) as mgr:
        for p in range(partitions):
            assert mgr.delete_log((topic, p)) is not None


def topic_ids(root: Path, topic: str, partitions: int) -> list[str]:
    return [topic_id_to_str(PartitionMetadataFile(root / f"{topic}-{p}").read())
            for p in range(partitions)]


def stream_reader(root: Path, **options) -> KafkaLogStreamReader:
    opts = {"path": str(root), **{k: str(v) for k, v in options.items()}}
    return KafkaLogStreamReader(parse_source_options(opts, streaming=True))


def read_range(r: KafkaLogStreamReader, start: dict, end: dict) -> list[tuple]:
    out = []
    for part in r.partitions(start, end):
        for rb in r.read(part):
            d = rb.to_pydict()
            out += [(t, p, o, v.decode())
                    for t, p, o, v in zip(d["topic"], d["partition"], d["offset"], d["value"])]
    return sorted(out)


def recs(topic: str, partition: int, values: list[str], first: int = 0) -> list[tuple]:
    return [(topic, partition, first + i, v) for i, v in enumerate(values)]


# ====================================================================== the sink

def test_sink_gives_each_new_topic_one_new_id(tmp_path):
    """The sink's topic creation (``SinkCoordinator._create_topics``): every partition of a new
    topic gets the same new random id; partitions filled in after a kill half way get the id of
    the existing ones; a topic deleted and created again gets another id; a topic written
    before topic ids keeps having none."""
    root = tmp_path / "data"
    sink = SinkCoordinator(parse_sink_options({"path": str(root), "topic": "o",
                                               "numPartitions": "3"}))
    sink._create_topics({"o"})
    first = topic_ids(root, "o", 3)
    assert len(set(first)) == 1

    half = random_topic_id()                      # what a commit killed after o2-2 leaves
    Log.open(root / "h-2", topic_id=half).close()
    sink._create_topics({"h"})
    assert topic_ids(root, "h", 3) == [topic_id_to_str(half)] * 3

    delete_topic(root, "o", 3)
    sink._create_topics({"o"})
    second = topic_ids(root, "o", 3)
    assert len(set(second)) == 1 and second[0] != first[0]

    Log.open(root / "old-1").close()              # an older topic, no partition.metadata
    sink._create_topics({"old"})
    assert sorted(p.name for p in root.glob("old-*")) == ["old-0", "old-1"]
    assert not any(PartitionMetadataFile(root / f"old-{p}").exists() for p in (0, 1))


# ====================================================================== the offset JSON

def test_offset_json_carries_topic_ids_and_stays_sparks_without_them():
    """The source offset: without ids exactly Spark's ``KafkaSourceOffset`` JSON; with ids one
    "$topicIds" entry per topic (per partition where the partitions disagree), read back by
    ``topic_ids_from_json`` and ignored by ``offsets_from_json``."""
    offsets = {("t", 1): 5, ("t", 0): 3, ("u", 0): 7, ("v", 0): 1}
    assert json.dumps(offsets_to_json(offsets)) == '{"t": {"0": 3, "1": 5}, "u": {"0": 7}, "v": {"0": 1}}'
    a, b = topic_id_to_str(random_topic_id()), topic_id_to_str(random_topic_id())
    ids = {("t", 0): a, ("t", 1): a, ("u", 0): b, ("v", 0): a}
    obj = offsets_to_json(offsets, ids)
    assert list(obj) == ["t", "u", "v", TOPIC_IDS_KEY]
    assert obj[TOPIC_IDS_KEY] == {"t": a, "u": b, "v": a}
    text = json.dumps(obj)
    for form in (obj, json.loads(text), text):
        assert offsets_from_json(form) == offsets
        assert topic_ids_from_json(form) == ids
    mixed = {("t", 0): a, ("t", 1): b}            # mid-recreation: partitions disagree
    obj = offsets_to_json(offsets, mixed)
    assert obj[TOPIC_IDS_KEY] == {"t": {"0": a, "1": b}}
    assert topic_ids_from_json(obj) == mixed
    assert offsets_to_json(offsets, {("t", 0): a})[TOPIC_IDS_KEY] == {"t": {"0": a}}
    assert topic_ids_from_json(offsets_to_json(offsets)) == {}
    with pytest.raises(InvalidConfigError, match=r"Malformed \$topicIds"):
        topic_ids_from_json({"t": {"0": 1}, TOPIC_IDS_KEY: {"t": 5}})


# ====================================================================== the reader, no Spark

def test_recreated_topic_between_batches_reader(tmp_path):
    """A topic deleted and recreated with MORE records than the old one had (offsets alone,
    as Spark's Kafka source sees them, cannot tell it happened): failOnDataLoss=true fails in
    latestOffset naming the topic and both ids; false reads every record of the new topic from
    offset 0 and records the new id in the end offset."""
    old, new = random_topic_id(), random_topic_id()
    for p in (0, 1):
        append(tmp_path, f"t-{p}", [f"old{p}-{i}" for i in range(3)], old)
    strict = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest")
    lenient = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest",
                            failOnDataLoss="false")
    s = strict.initialOffset()
    assert s == lenient.initialOffset()
    assert topic_ids_from_json(s) == {("t", 0): topic_id_to_str(old), ("t", 1): topic_id_to_str(old)}
    end1 = strict.latestOffset(s, ReadAllAvailable())
    assert end1 == lenient.latestOffset(s, ReadAllAvailable())
    assert offsets_from_json(end1) == {("t", 0): 3, ("t", 1): 3}
    assert len(read_range(strict, s, end1)) == 6

    delete_topic(tmp_path, "t", 2)
    assert strict.latestOffset(end1, ReadAllAvailable()) == end1        # gone: no batch
    # what a writer creating the topic again shows before it records the id: an empty
    # directory without partition.metadata, not a partition whose offsets fell to 0
    (tmp_path / "t-0").mkdir()
    assert strict.latestOffset(end1, ReadAllAvailable()) == end1
    (tmp_path / "t-0").rmdir()
    for p in (0, 1):
        append(tmp_path, f"t-{p}", [f"new{p}-{i}" for i in range(5)], new)

    with pytest.raises(DataLossError) as info:
        strict.latestOffset(end1, ReadAllAvailable())
    msg = str(info.value)
    assert (f"Topic t was deleted and recreated: partitions [0, 1] had topic id "
            f"{topic_id_to_str(old)}, now topic id {topic_id_to_str(new)}.") in msg
    assert DATA_LOSS_HINT in msg

    end2 = lenient.latestOffset(end1, ReadAllAvailable())
    assert offsets_from_json(end2) == {("t", 0): 5, ("t", 1): 5}
    assert end2[TOPIC_IDS_KEY] == {"t": topic_id_to_str(new)}
    assert read_range(lenient, end1, end2) == (recs("t", 0, [f"new0-{i}" for i in range(5)])
                                               + recs("t", 1, [f"new1-{i}" for i in range(5)]))
    # the same batch re-planned by a restarted query with failOnDataLoss=true (Spark replays
    # the last planned batch through partitions() only) reads the same records
    assert read_range(stream_reader(tmp_path, subscribe="t"), end1, end2) == \
        read_range(lenient, end1, end2)
    append(tmp_path, "t-0", ["new0-5"])
    end3 = strict.latestOffset(end2, ReadAllAvailable())            # the new topic goes on
    assert read_range(strict, end2, end3) == [("t", 0, 5, "new0-5")]


def test_topic_recreated_after_a_batch_was_planned_reader(tmp_path):
    """Recreated between latestOffset and partitions (or while a planned batch waited for a
    restart): the planned range is not on disk any more. true: partitions() fails naming the
    ids; false: the batch skips the partition with a warning and the next batch reads the new
    topic from offset 0; the other partitions are read as planned."""
    old, new = random_topic_id(), random_topic_id()
    append(tmp_path, "t-0", ["a0", "a1"], old)
    append(tmp_path, "u-0", ["u0"], random_topic_id())
    strict = stream_reader(tmp_path, subscribePattern="[tu]", startingOffsets="earliest")
    lenient = stream_reader(tmp_path, subscribePattern="[tu]", startingOffsets="earliest",
                            failOnDataLoss="false")
    s = lenient.initialOffset()
    end1 = lenient.latestOffset(s, ReadAllAvailable())
    assert strict.initialOffset() == s
    delete_topic(tmp_path, "t", 1)
    append(tmp_path, "t-0", ["b0", "b1", "b2"], new)
    with pytest.raises(DataLossError, match=f"had topic id {topic_id_to_str(old)}, now topic id "
                                            f"{topic_id_to_str(new)}"):
        strict.partitions(s, end1)
    assert read_range(lenient, s, end1) == [("u", 0, 0, "u0")]
    end2 = lenient.latestOffset(end1, ReadAllAvailable())
    assert read_range(lenient, end1, end2) == recs("t", 0, ["b0", "b1", "b2"])


def test_topic_recreated_while_tasks_read_it(tmp_path):
    """[KafkaMicroBatchSourceSuite "delete a topic when a Spark job is running"], by topic id:
    input partitions planned for the old topic, read after the topic was recreated with as many
    records: a task never returns the new topic's records for the old offsets. true: the task
    fails naming both ids; false: it returns nothing (and warns), and the next batch reads the
    new topic from offset 0."""
    old, new = random_topic_id(), random_topic_id()
    append(tmp_path, "t-0", ["a0", "a1", "a2"], old)
    strict = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest")
    lenient = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest",
                            failOnDataLoss="false")
    s = lenient.initialOffset()
    end1 = lenient.latestOffset(s, ReadAllAvailable())
    strict_parts, lenient_parts = strict.partitions(s, end1), lenient.partitions(s, end1)
    assert [p.topic_id for p in lenient_parts] == [topic_id_to_str(old)]
    delete_topic(tmp_path, "t", 1)
    append(tmp_path, "t-0", ["b0", "b1", "b2"], new)
    with pytest.raises(DataLossError, match=f"deleted and recreated: topic id {topic_id_to_str(old)} "
                                            f"when planned, {topic_id_to_str(new)} now"):
        list(strict.read(strict_parts[0]))
    assert [rb.num_rows for part in lenient_parts for rb in lenient.read(part)] == []
    end2 = lenient.latestOffset(end1, ReadAllAvailable())
    assert read_range(lenient, end1, end2) == recs("t", 0, ["b0", "b1", "b2"])


def test_available_now_fails_when_a_topic_is_recreated_mid_run(tmp_path):
    """[KafkaMicroBatchSourceSuite "Query with Trigger.AvailableNow should throw error when
    offset(s) in planned topic partitions got unavailable during subsequent batches"], by topic
    id: a topic recreated after the AvailableNow snapshot fails the run whatever failOnDataLoss
    says, even when its offsets are not below the snapshot's."""
    old, new = random_topic_id(), random_topic_id()
    append(tmp_path, "t-0", ["a0", "a1"], old)
    r = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest",
                      failOnDataLoss="false", maxOffsetsPerTrigger=1)
    s = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    end1 = r.latestOffset(s, ReadAllAvailable())
    delete_topic(tmp_path, "t", 1)
    append(tmp_path, "t-0", ["b0", "b1", "b2"], new)
    with pytest.raises(DataLossError, match="have been recreated during running query with "
                                            "Trigger.AvailableNow") as info:
        r.latestOffset(end1, ReadAllAvailable())
    assert topic_id_to_str(old) in str(info.value) and topic_id_to_str(new) in str(info.value)


def test_topics_without_ids_keep_offset_only_behaviour(tmp_path):
    """Older data without partition.metadata: no "$topicIds" in the offsets (Spark's JSON), and a
    recreated topic is seen through its offsets only, as by Spark's Kafka source: with more
    records it continues at the old offset, with fewer it is "changed from 3 to 1"."""
    append(tmp_path, "t-0", ["a0", "a1", "a2"])
    r = stream_reader(tmp_path, subscribe="t", startingOffsets="earliest")
    s = r.initialOffset()
    end1 = r.latestOffset(s, ReadAllAvailable())
    assert end1 == {"t": {"0": 3}}
    delete_topic(tmp_path, "t", 1)
    append(tmp_path, "t-0", [f"b{i}" for i in range(5)])
    end2 = r.latestOffset(end1, ReadAllAvailable())
    assert end2 == {"t": {"0": 5}}
    assert read_range(r, end1, end2) == [("t", 0, 3, "b3"), ("t", 0, 4, "b4")]
    delete_topic(tmp_path, "t", 1)
    append(tmp_path, "t-0", ["c0"])
    end3 = r.latestOffset(end2, ReadAllAvailable())
    with pytest.raises(DataLossError, match="offset was changed from 5 to 1"):
        r.partitions(end2, end3)


# ====================================================================== real streaming queries

class Batches:
    """foreachBatch sink: rows (topic, partition, offset, value) by batch id."""

    def __init__(self) -> None:
        self.by_id: dict[int, list[tuple]] = {}

    def __call__(self, df, batch_id: int) -> None:
        self.by_id[batch_id] = sorted(tuple(r) for r in df.selectExpr(
            "topic", "partition", "offset", "cast(value as string)").collect())

    def rows(self) -> list[tuple]:
        return sorted(r for rows in self.by_id.values() for r in rows)


def sink_write(spark, root: Path, values: list[tuple[int, str]]) -> None:
    """The kafkalog sink (a batch write) into topic "r", created with 2 partitions if missing."""
    df = spark.createDataFrame(values, "partition int, value string")
    (df.write.format("kafkalog").option("path", str(root)).option("topic", "r")
     .option("numPartitions", "2").mode("append").save())


def start_query(spark, root: Path, chk: Path, sink: Batches, fail_on_data_loss: bool):
    return (spark.readStream.format("kafkalog").option("path", str(root))
            .option("subscribe", "r").option("startingOffsets", "earliest")
            .option("failOnDataLoss", str(fail_on_data_loss).lower()).load()
            .writeStream.foreachBatch(sink).option("checkpointLocation", str(chk))
            .trigger(processingTime="200 milliseconds").start())


def wait_for(pred, what: str, q, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if q.exception() is not None:
            raise q.exception()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def last_offset(chk: Path) -> dict:
    files = sorted((chk / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    return json.loads(files[-1].read_text().splitlines()[-1])


OLD_ROWS = [(0, "old-a"), (0, "old-b"), (1, "old-c")]
NEW_ROWS = [(0, "new-a"), (0, "new-b"), (0, "new-c"), (1, "new-d"), (1, "new-e")]


def test_query_reads_a_recreated_topic_from_earliest_without_fail_on_data_loss(spark, tmp_path):
    """A running query (processing-time trigger, failOnDataLoss=false) over a topic the sink
    created; the topic is deleted and the sink creates it again (a new id, MORE records per
    partition than before) between micro-batches: the query keeps running and reads every new
    record from offset 0, each once; its last checkpointed offset holds the new id."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    sink_write(spark, root, OLD_ROWS)
    old_ids = topic_ids(root, "r", 2)
    assert len(set(old_ids)) == 1
    sink = Batches()
    q = start_query(spark, root, chk, sink, fail_on_data_loss=False)
    try:
        wait_for(lambda: len(sink.rows()) == 3, "the old topic's 3 records", q)
        delete_topic(root, "r", 2)
        sink_write(spark, root, NEW_ROWS)
        new_ids = topic_ids(root, "r", 2)
        assert len(set(new_ids)) == 1 and new_ids[0] != old_ids[0]
        wait_for(lambda: len(sink.rows()) == 8, "the new topic's 5 records", q)
        time.sleep(1)                              # a few more triggers: nothing read twice
        assert q.exception() is None and q.isActive
    finally:
        q.stop()
    assert sink.rows() == sorted([("r", 0, 0, "old-a"), ("r", 0, 1, "old-b"), ("r", 1, 0, "old-c"),
                                  ("r", 0, 0, "new-a"), ("r", 0, 1, "new-b"), ("r", 0, 2, "new-c"),
                                  ("r", 1, 0, "new-d"), ("r", 1, 1, "new-e")])
    # each sink commit ends with a COMMIT marker (one offset): 3 + 1 and 2 + 1
    assert last_offset(chk) == {"r": {"0": 4, "1": 3}, TOPIC_IDS_KEY: {"r": new_ids[0]}}


def test_query_fails_on_a_recreated_topic_and_again_after_restart(spark, tmp_path):
    """The same with failOnDataLoss=true: the running query fails with a data-loss error naming
    the topic and both ids; restarted on its checkpoint it fails the same way (the old id is in
    the checkpointed offset), and nothing of the new topic was read."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    sink_write(spark, root, OLD_ROWS)
    old_id = topic_ids(root, "r", 2)[0]
    sink = Batches()
    q = start_query(spark, root, chk, sink, fail_on_data_loss=True)
    try:
        wait_for(lambda: len(sink.rows()) == 3, "the old topic's 3 records", q)
        delete_topic(root, "r", 2)
        sink_write(spark, root, NEW_ROWS)
        new_id = topic_ids(root, "r", 2)[0]
        with pytest.raises(StreamingQueryException) as failed:
            q.awaitTermination(QUERY_TIMEOUT)
    finally:
        q.stop()
    # the sink makes r-1, then r-0: a trigger in between sees one partition recreated
    assert re.search(rf"Topic r was deleted and recreated: partitions \[(0, 1|0|1)\] had topic id "
                     rf"{re.escape(old_id)}, now topic id {re.escape(new_id)}\.", str(failed.value))
    assert DATA_LOSS_HINT in str(failed.value)
    expected = (f"Topic r was deleted and recreated: partitions [0, 1] had topic id {old_id}, "
                f"now topic id {new_id}.")
    assert sorted(r[3] for r in sink.rows()) == ["old-a", "old-b", "old-c"]
    assert last_offset(chk) == {"r": {"0": 3, "1": 2}, TOPIC_IDS_KEY: {"r": old_id}}

    q = start_query(spark, root, chk, Batches(), fail_on_data_loss=True)
    try:
        with pytest.raises(StreamingQueryException) as info:
            q.awaitTermination(QUERY_TIMEOUT)
    finally:
        q.stop()
    assert expected in str(info.value)

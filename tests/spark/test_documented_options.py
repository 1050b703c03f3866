"""Options the README documents that no other test exercised (found by tests/test_docs.py):
each one's documented effect, on real files and a real SparkSession."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from kafka_log_sink.options import parse_sink_options
from storage_core.config import LONG_MAX, LogConfig
from storage_core.log import Log

OLD = datetime(2001, 1, 1, tzinfo=timezone.utc)


def write(df, root: Path, **options) -> None:
    w = df.write.format("kafkalog").option("path", str(root))
    for k, v in options.items():
        w = w.option(k, str(v))
    w.mode("append").save()


def rows(spark, root: Path, topic: str = "t", **options) -> list:
    r = spark.read.format("kafkalog").option("path", str(root)).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load().orderBy("partition", "offset").collect()


def values(df_rows) -> list[tuple[int, int, bytes]]:
    return [(r.partition, r.offset, bytes(r.value)) for r in df_rows]


# ---------------------------------------------------------------------------- source

def test_max_bytes_per_fetch_smaller_than_a_batch_reads_everything(spark, tmp_path):
    """``maxBytesPerFetch``: bytes of segment read per step in a task. Far below one batch, each
    step still reads a whole batch (as a Kafka fetch returns at least one), so the rows are the
    same as with the 4 MiB default, only in more steps."""
    with Log.open(tmp_path / "t-0", LogConfig(segment_bytes=16 * 1024)) as log:
        for i in range(20):
            log.append(pa.table({"value": [f"{i}-{j}-".encode() * 10 for j in range(100)]}),
                       max_batch_bytes=8 * 1024)
        assert len(log.segments) > 3
    default = values(rows(spark, tmp_path))
    small = values(rows(spark, tmp_path, maxBytesPerFetch=512))
    assert len(default) == 2000 and small == default
    mid = values(rows(spark, tmp_path, maxBytesPerFetch=20_000, startingOffsets='{"t":{"0":777}}'))
    assert mid == default[777:]


@pytest.mark.parametrize("bad", ["0", "-5", "lots"])
def test_max_bytes_per_fetch_must_be_a_positive_number(spark, tmp_path, bad):
    with Log.open(tmp_path / "t-0") as log:
        log.append(pa.table({"value": [b"x"]}))
    with pytest.raises(Exception, match="maxBytesPerFetch"):
        rows(spark, tmp_path, maxBytesPerFetch=bad)


# ---------------------------------------------------------------------------- sink

def test_staging_location_is_where_tasks_stage(spark, tmp_path):
    """``stagingLocation``: the tasks' encoded batches go there (not beside the checkpoint, not
    in the data directory), and the commit appends them."""
    staging = tmp_path / "my-staging"
    chk = tmp_path / "chk"
    src = tmp_path / "src"
    with Log.open(src / "in-0") as log:
        log.append(pa.table({"value": [f"v{i}".encode() for i in range(50)]}))
    stream = (spark.readStream.format("kafkalog").option("path", str(src)).option("subscribe", "in")
              .option("startingOffsets", "earliest").load().select("value"))
    q = (stream.writeStream.format("kafkalog").option("path", str(tmp_path / "out")).option("topic", "t")
         .option("stagingLocation", str(staging)).option("checkpointLocation", str(chk))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert [bytes(r.value) for r in rows(spark, tmp_path / "out")] == [f"v{i}".encode() for i in range(50)]
    assert staging.is_dir()
    assert not (chk / "kafkalog-sink" / "staging").exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == ["t-0"]


def test_segment_ms_rolls_by_record_time(spark, tmp_path):
    """``segment.ms``: a segment is rolled by an append whose timestamp is more than this past
    the segment's first batch timestamp (Kafka's ``timeWaitedForRoll``). Two writes of records
    stamped 2 h and 1 h ago (each closed by a commit marker stamped now): one segment with
    Kafka's default (7 days), a roll with segment.ms = 10 minutes."""
    from pyspark.sql import functions as F

    now = int(time.time() * 1000)

    def two_writes(root: Path, **opts) -> int:
        for hours_ago in (2, 1):
            df = spark.range(10).select(F.col("id").cast("string").alias("value"),
                                        F.timestamp_millis(F.lit(now - hours_ago * 3_600_000)
                                                           + F.col("id")).alias("timestamp"))
            write(df.coalesce(1), root, topic="t", **opts)
        return len(list((root / "t-0").glob("*.log")))

    assert two_writes(tmp_path / "default") == 1
    assert two_writes(tmp_path / "rolled", **{"segment.ms": 600_000}) >= 2
    assert len(rows(spark, tmp_path / "rolled")) == 20


def test_message_timestamp_type_log_append_time(spark, tmp_path):
    """``message.timestamp.type=LogAppendTime``: the log stamps records with the append time
    (timestampType 1), whatever the timestamp column says, as a broker does for such a topic."""
    from pyspark.sql import functions as F

    before = datetime.now(timezone.utc).replace(microsecond=0)
    df = spark.range(5).select(F.col("id").cast("string").alias("value"), F.lit(OLD).alias("timestamp"))
    write(df, tmp_path / "lat", topic="t", **{"message.timestamp.type": "LogAppendTime"})
    write(df, tmp_path / "ct", topic="t")
    lat, ct = rows(spark, tmp_path / "lat"), rows(spark, tmp_path / "ct")
    assert {r.timestampType for r in lat} == {1} and len(lat) == 5
    assert all(before <= r.timestamp.astimezone(timezone.utc) <= datetime.now(timezone.utc) for r in lat)
    assert {r.timestampType for r in ct} == {0}
    assert {r.timestamp.astimezone(timezone.utc) for r in ct} == {OLD}


def test_flush_messages_with_fsync_policy(tmp_path):
    """``flush.messages`` (with ``fsync=policy``) reaches the partitions' LogConfig, and the log
    honours it: the recovery point (what an fsync made durable) moves every N messages. With
    ``fsync=policy`` and no flush.* option, flushing is left to the OS, as on a broker."""
    opts = parse_sink_options({"path": str(tmp_path), "fsync": "policy", "flush.messages": "3"})
    assert opts.fsync == "policy" and opts.log_config.flush_messages == 3
    assert parse_sink_options({"path": str(tmp_path), "fsync": "policy"}).log_config.flush_messages == LONG_MAX
    with Log.open(tmp_path / "t-0", opts.log_config) as log:
        points = []
        for i in range(7):
            log.append(pa.table({"value": [str(i).encode()]}))
            points.append(log.recovery_point)
    assert points == [0, 0, 3, 3, 3, 6, 6]


def test_flush_messages_through_the_sink_keeps_data(spark, tmp_path):
    """The same options on a Spark write: accepted, and everything committed is readable."""
    from pyspark.sql import functions as F

    df = spark.range(100).select(F.col("id").cast("string").alias("value"))
    write(df, tmp_path, topic="t", fsync="policy", **{"flush.messages": 1, "flush.ms": 1000})
    got = rows(spark, tmp_path)
    assert sorted(int(bytes(r.value)) for r in got) == list(range(100))


def test_segment_index_bytes_rolls_when_an_index_is_full(spark, tmp_path):
    """``segment.index.bytes`` on a Spark write: a segment whose offset or time index is full is
    rolled by the next append (Kafka's ``LogSegment.shouldRoll``). With 64 bytes (8 offset
    entries) and an index entry for every batch (``index.interval.bytes`` 1, one record per
    batch), four tasks' staged runs of 25 batches each (one append each) and the commit marker
    take a segment each, and no ``.index`` grows past the limit; with Kafka's default (10 MiB)
    everything shares one segment. Every record reads back."""
    from pyspark.sql import functions as F

    df = spark.range(100).select(F.col("id").cast("string").alias("value")).repartition(4)
    per_batch = {"index.interval.bytes": 1, "batch.size": 1}
    write(df, tmp_path / "small", topic="t", **per_batch, **{"segment.index.bytes": 64})
    write(df, tmp_path / "default", topic="t", **per_batch)
    assert len(list((tmp_path / "default" / "t-0").glob("*.log"))) == 1
    part = tmp_path / "small" / "t-0"
    assert len(list(part.glob("*.log"))) == 5, sorted(p.name for p in part.iterdir())
    assert max(p.stat().st_size for p in part.glob("*.index")) == 64
    assert sorted(int(bytes(r.value)) for r in rows(spark, tmp_path / "small")) == list(range(100))

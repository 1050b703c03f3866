"""A topic created by the sink keeps its topic configuration as overrides in the data directory,
so the LogManager and ``kafkalog retention`` / ``compact`` apply it later (as a broker keeps
``kafka-topics.sh --create --config`` values)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import functions as F

from storage_core.server import ConfigRepository
from storage_core.server import LogManager


def _write(df, root: Path, **options) -> None:
    w = df.write.format("kafkalog").option("path", str(root)).option("topic", "users")
    for k, v in options.items():
        w = w.option(k, str(v))
    w.mode("append").save()


def test_created_topic_keeps_its_config_and_compacts_by_it(spark, tmp_path: Path) -> None:
    df = spark.range(200).select((F.col("id") % 10).cast("string").alias("key"),
                                 F.col("id").cast("string").alias("value")).coalesce(1)
    _write(df, tmp_path, **{"cleanup.policy": "compact", "segment.bytes": 2048, "batch.size": 200})
    repo = ConfigRepository([tmp_path])
    assert repo.topic_overrides("users") == {"cleanup.policy": "compact", "segment.bytes": "2048"}
    # a later write with other options does not change a topic that exists
    _write(df, tmp_path, **{"retention.ms": 1000})
    assert repo.topic_overrides("users") == {"cleanup.policy": "compact", "segment.bytes": "2048"}
    with LogManager.open(tmp_path) as mgr:
        log = mgr.get_log(("users", 0))
        assert log.config.compact and log.config.segment_bytes == 2048
        before = log.size
        rounds = mgr.compact()
        assert rounds and log.size < before
        values = {}
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            got = log.fetch(offset, max_bytes=1 << 20)
            for k, v in zip(got.table.column("key").to_pylist(), got.table.column("value").to_pylist()):
                values[k] = v
            offset = got.next_offset
        # the latest value of every key survives compaction (the second write's 190..199)
        assert values == {str(k).encode(): str(190 + k).encode() for k in range(10)}
    # a topic written without topic options gets no overrides
    _write(df.limit(5), tmp_path / "plain")
    assert ConfigRepository([tmp_path / "plain"]).topic_overrides("users") == {}

"""Opening a partition read-only opens each of its segments' three files, so a partition of many
segments is opened once where once is enough (no SparkSession: the planner and a task's read,
in this process, the real ``open_partition`` counted).

* Planning a batch query by timestamp (the driver's side of a time-travel read): the offsets of
  every timestamp the options and a pushed ``timestamp`` filter ask for are looked up at the
  open that reads the partition's offsets, and the plan is the one a lookup per timestamp gives.
* A ``read_committed`` task binding ``earliest``/``latest`` does so at the open it reads through."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.datasource import GreaterThanOrEqual

from kafka_log_source import catalog
from kafka_log_source import reader as task_reader
from kafka_log_source.batch_reader import KafkaLogBatchReader
from kafka_log_source.options import parse_source_options
from kafka_log_source.pushdown import KafkaLogPushdownReader
from storage_core.config import LogConfig
from storage_core.errors import InvalidConfigError
from storage_core.format import encode_batches
from storage_core.log import Log

TS0 = 1_700_000_000_000
PER_BATCH = 50


def write_partition(root: Path, partition: int, batches: int) -> None:
    """Records whose timestamps step by 10 ms (offset i at TS0 + 10 * i + partition), in
    one-batch runs over segments of a few batches each."""
    with Log.open(root / f"t-{partition}", LogConfig(segment_bytes=1500)) as log:
        for _ in range(batches):
            first = log.log_end_offset
            offsets = np.arange(first, first + PER_BATCH)
            table = pa.table({"offset": pa.array(offsets, pa.int64()),
                              "timestamp": pa.array(TS0 + 10 * offsets + partition, pa.int64()).cast(
                                  pa.timestamp("ms")),
                              "value": pa.array([b"v%d" % o for o in offsets.tolist()], pa.binary())})
            log.append_raw(encode_batches(table, base_offset=first))
        assert len(log.segments) > 3


@pytest.fixture
def topic(tmp_path: Path) -> Path:
    for p in (0, 1):
        write_partition(tmp_path, p, batches=12)
    return tmp_path


@pytest.fixture
def opens(monkeypatch) -> list[Path]:
    """The partitions the planner opens, in order (the real ``open_partition``, counted)."""
    seen: list[Path] = []
    real = catalog.open_partition

    def counted(path: Path):
        seen.append(Path(path))
        return real(path)

    monkeypatch.setattr(catalog, "open_partition", counted)
    monkeypatch.setattr(task_reader, "open_partition", counted)
    return seen


def first_at(path: Path, timestamp: int) -> int | None:
    with Log.open(path, read_only=True) as log:
        return log.offsets_for_times(timestamp)


def test_a_plan_by_timestamps_opens_each_partition_once(topic: Path, opens: list[Path]):
    start, end = TS0 + 10 * 123, TS0 + 10 * 456 + 1      # partition 1 has a record at end
    options = {"path": str(topic), "subscribe": "t", "startingTimestamp": str(start),
               "endingOffsetsByTimestamp": json.dumps({"t": {"0": end, "1": end}})}
    ranges = KafkaLogBatchReader(parse_source_options(options, streaming=False)).plan()
    assert sorted(opens) == [topic / "t-0", topic / "t-1"]
    expected = [("t", p, first_at(topic / f"t-{p}", start), first_at(topic / f"t-{p}", end)) for p in (0, 1)]
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == expected
    assert expected == [("t", 0, 123, 457), ("t", 1, 123, 456)]


def test_a_pushed_timestamp_filter_is_looked_up_at_the_same_open(topic: Path, opens: list[Path]):
    options = {"path": str(topic), "subscribe": "t", "startingTimestamp": str(TS0 + 10 * 100),
               "endingOffsets": "latest"}
    reader = KafkaLogPushdownReader(parse_source_options(options, streaming=False))
    pushed = TS0 + 10 * 300 + 1                          # after partition 0's offset 300
    as_datetime = dt.datetime.fromtimestamp(pushed / 1000, dt.timezone.utc)   # as Spark pushes it
    list(reader.pushFilters([GreaterThanOrEqual(("timestamp",), as_datetime)]))
    ranges = reader.plan()
    assert sorted(opens) == [topic / "t-0", topic / "t-1"]
    assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 301, 600), (1, 300, 600)]
    assert [r.start for r in ranges] == [first_at(topic / f"t-{p}", pushed) for p in (0, 1)]


def test_a_timestamp_after_every_record_is_answered_from_the_same_open(topic: Path, opens: list[Path]):
    """None from the lookup (every record older) is an answer too: ``startingOffsetsByTimestamp
    Strategy=latest`` starts at the end without another open, the default fails as Spark does."""
    late = TS0 + 10 ** 9
    options = {"path": str(topic), "subscribe": "t", "startingTimestamp": str(late),
               "startingOffsetsByTimestampStrategy": "latest"}
    ranges = KafkaLogBatchReader(parse_source_options(options, streaming=False)).plan()
    assert len(opens) == 2 and [(r.start, r.end) for r in ranges] == [(600, -1), (600, -1)]
    with pytest.raises(InvalidConfigError, match="No offset matched from request of topic-partition t-0"):
        KafkaLogBatchReader(parse_source_options({**options, "startingOffsetsByTimestampStrategy": "error"},
                                                 streaming=False)).plan()


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_a_task_binds_earliest_and_latest_at_the_open_it_reads_through(topic: Path, opens: list[Path],
                                                                      isolation: str):
    """``read_committed`` reads through the partition's ``Log`` (opened once, the bounds read
    from it); ``read_uncommitted`` opens it once to bind them, then reads segment by segment."""
    reader = KafkaLogBatchReader(parse_source_options(
        {"path": str(topic), "assign": json.dumps({"t": [1]}), "kafka.isolation.level": isolation},
        streaming=False))
    (part,) = reader.partitions()
    assert (part.start, part.end) == (-2, -1)            # late binding: resolved by the task
    assert opens == [topic / "t-1"]                      # the plan's own open
    opens.clear()
    got = [o for b in reader.read(part) for o in b.column("offset").to_pylist()]
    assert got == list(range(600))
    assert opens == [topic / "t-1"]

"""kafkalog against a real Kafka broker (issue 7, build point 4): the official ``apache/kafka``
image in KRaft mode, one node, through testcontainers (conftest.py). Skipped where no Docker
engine is reachable.

1. Broker -> kafkalog: records produced through the broker (plain batches in every codec the
   clients have, headers, explicit timestamps; committed and aborted transactions) are consumed
   back from the broker by a real consumer; the broker is shut down cleanly, its log directory
   copied out of the container, and kafkalog (``Log``, the Spark source, ``kafkalog verify``)
   must read from the files exactly what the consumer got from the broker, for
   read_committed and read_uncommitted, and answer offsetsForTimes as the broker did.
2. kafkalog -> broker: a topic is created through the broker (so it exists in the KRaft
   metadata, with its topic id), the broker is killed, the partition's segment files are
   replaced by files kafkalog wrote (``Log.append`` in every codec over several segments; the
   Spark sink's transactional micro-batch), and the restarted broker recovers them as after a
   crash (every batch validated) and serves them to a real consumer: the same offsets, keys,
   values, headers and timestamps. The broker then appends after kafkalog's records.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.config import LogConfig
from storage_core.log import Log

pytestmark = pytest.mark.interop

BASE_TS = 1_700_000_000_000
CODECS = ("gzip", "snappy", "lz4", "zstd", None)
PARTITION_FILES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    timestamp_type: int


# ------------------------------------------------------------------------------ clients

def create_topic(broker, name: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()
    deadline = time.monotonic() + 60
    wanted = {f"{name}-{p}" for p in range(partitions)}
    while not wanted <= set(broker.ls()):                  # the broker made the directories
        assert time.monotonic() < deadline, f"no partition directories for {name}: {broker.ls()}"
        time.sleep(0.2)
    for d in wanted:
        while "partition.metadata" not in broker.ls(f"/tmp/kraft-combined-logs/{d}"):
            assert time.monotonic() < deadline
            time.sleep(0.2)


def consume(broker, topic: str, partitions: int, isolation: str = "read_committed",
            timeout: float = 60) -> list[Rec]:
    """Everything a real consumer (kafka-python) gets from the broker, to the end offsets."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation, group_id=None,
                      enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)                  # read_committed: the last stable offsets
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, f"consumer stuck: {[(tp, c.position(tp), end[tp]) for tp in tps]}"
            for tp, recs in c.poll(timeout_ms=1000).items():
                out.extend(Rec(tp.partition, r.offset, r.key, r.value, tuple((k, bytes(v)) for k, v in r.headers),
                               r.timestamp, r.timestamp_type) for r in recs)
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        c.close()


def broker_offsets_for_times(broker, topic: str, partitions: int, ts: int) -> dict[int, int | None]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        found = c.offsets_for_times({TopicPartition(topic, p): ts for p in range(partitions)})
        return {tp.partition: (None if o is None else o.offset) for tp, o in found.items()}
    finally:
        c.close()


def produce_plain(broker, topic: str, partitions: int, per_codec: int = 300) -> int:
    """kafka-python producers, one per codec the client supports; returns the records sent."""
    from kafka import KafkaProducer

    sent = 0
    for ci, codec in enumerate(CODECS):
        try:
            p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20,
                              batch_size=16 * 1024)
        except Exception as e:                    # a codec the client cannot load here
            print(f"skipping codec {codec}: {e}", file=sys.stderr)
            continue
        for i in range(per_codec):
            n = ci * per_codec + i
            p.send(topic, key=None if n % 11 == 0 else f"k{n % 17}".encode(), value=f"{codec}-{n}".encode() * 3,
                   headers=[("h", str(n).encode()), ("codec", str(codec).encode())] if n % 5 else [],
                   partition=n % partitions, timestamp_ms=BASE_TS + n)
        p.flush()
        p.close()
        sent += per_codec
    return sent


def produce_transactions(broker, topic: str) -> None:
    """aiokafka's transactional producer: a committed, an aborted and a committed transaction
    on partition 0 (COMMIT/ABORT markers, a .txnindex entry for the aborted one)."""
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kafkalog-interop",
                             enable_idempotence=True)
        await p.start()
        try:
            for name, commit in (("t1", True), ("t2", False), ("t3", True)):
                await p.begin_transaction()
                for i in range(20):
                    await p.send_and_wait(topic, f"{name}-{i}".encode(), key=b"txn", partition=0,
                                          timestamp_ms=BASE_TS + 10_000 + i)
                if commit:
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(go())


# ------------------------------------------------------------------------------ kafkalog side

def read_with_log(partition_dir: Path, isolation: str) -> list[Rec]:
    out: list[Rec] = []
    partition = int(partition_dir.name.rsplit("-", 1)[1])
    with Log.open(partition_dir, read_only=True) as log:
        offset = log.log_start_offset
        end = log.last_stable_offset if isolation == "read_committed" else log.high_watermark
        while offset < end:
            r = log.fetch(offset, max_bytes=1 << 20, isolation=isolation)
            t = r.table
            ts = t.column("timestamp").cast(pa.int64()).to_pylist()
            for i, row in enumerate(t.select(["offset", "key", "value", "headers", "timestampType"]).to_pylist()):
                headers = tuple((h["key"], h["value"]) for h in (row["headers"] or []))
                out.append(Rec(partition, row["offset"], row["key"], row["value"], headers, ts[i],
                               row["timestampType"]))
            offset = r.next_offset
    return out


def read_with_spark(spark, data: Path, topic: str, isolation: str) -> list[Rec]:
    df = (spark.read.format("kafkalog").option("path", str(data)).option("subscribe", topic)
          .option("includeHeaders", "true").option("isolationLevel", isolation).load())
    return sorted((Rec(r.partition, r.offset, None if r.key is None else bytes(r.key),
                       None if r.value is None else bytes(r.value),
                       tuple((h.key, bytes(h.value)) for h in (r.headers or [])),
                       int(r.timestamp.timestamp() * 1000 + 0.5), r.timestampType) for r in df.collect()),
                  key=lambda r: (r.partition, r.offset))


def verify(paths: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage_core.cli", "verify", *map(str, paths)],
                          capture_output=True, text=True)


# ------------------------------------------------------------------------------ 1. broker -> kafkalog

def test_kafkalog_reads_what_a_real_broker_wrote(broker, spark, tmp_path):
    create_topic(broker, "from_broker", 3)
    sent = produce_plain(broker, "from_broker", 3)
    produce_transactions(broker, "from_broker")
    committed = consume(broker, "from_broker", 3, "read_committed")
    everything = consume(broker, "from_broker", 3, "read_uncommitted")
    assert len(committed) == sent + 40 and len(everything) == sent + 60
    probes = [BASE_TS + 1, BASE_TS + 450, BASE_TS + 10_005, BASE_TS + 99_999]
    answers = {ts: broker_offsets_for_times(broker, "from_broker", 3, ts) for ts in probes}

    broker.stop()                                          # clean shutdown, then copy the files out
    data = broker.copy_out(tmp_path)
    parts = [data / f"from_broker-{p}" for p in range(3)]
    assert all(p.is_dir() for p in parts), sorted(x.name for x in data.iterdir())

    v = verify(parts)
    assert v.returncode == 0, v.stdout[-3000:] + v.stderr[-3000:]
    got_committed = sorted((r for p in parts for r in read_with_log(p, "read_committed")),
                           key=lambda r: (r.partition, r.offset))
    got_all = sorted((r for p in parts for r in read_with_log(p, "read_uncommitted")),
                     key=lambda r: (r.partition, r.offset))
    assert got_committed == committed
    assert got_all == everything
    for ts, per_partition in answers.items():
        for p, expected in per_partition.items():
            with Log.open(parts[p], read_only=True) as log:
                assert log.offsets_for_times(ts) == expected, (ts, p)
    assert read_with_spark(spark, data, "from_broker", "read_committed") == committed
    assert read_with_spark(spark, data, "from_broker", "read_uncommitted") == everything


# ------------------------------------------------------------------------------ 2. kafkalog -> broker

def write_engine_log(path: Path) -> list[Rec]:
    """Several segments of batches in every codec, written by ``Log.append``."""
    expected: list[Rec] = []
    with Log.open(path, LogConfig(segment_bytes=4096, index_interval_bytes=256)) as log:
        n = 0
        for codec in ("none", "gzip", "snappy", "lz4", "zstd") * 2:
            keys = [None if (n + i) % 7 == 0 else f"key-{(n + i) % 13}".encode() for i in range(60)]
            values = [f"{codec}-{n + i}-".encode() * 4 for i in range(60)]
            headers = [[{"key": "i", "value": str(n + i).encode()}] if (n + i) % 3 else [] for i in range(60)]
            stamps = [BASE_TS + n + i for i in range(60)]
            table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                              "headers": pa.array(headers, pa.list_(pa.struct([("key", pa.string()),
                                                                                ("value", pa.binary())]))),
                              "timestamp": pa.array(stamps, pa.int64())})
            info = log.append(table, compression=codec, max_batch_bytes=1024)
            first = info.first_offset
            for i in range(60):
                expected.append(Rec(0, first + i, keys[i], values[i],
                                    tuple((h["key"], h["value"]) for h in headers[i]), stamps[i], 0))
            n += 60
        assert len(log.segments) >= 3
    return expected


def replace_partition_files(broker, src: Path, partition: str) -> None:
    files = sorted(f for f in src.iterdir() if f.suffix in PARTITION_FILES)
    assert any(f.suffix == ".log" for f in files)
    broker.put_files(partition, files)


def test_a_real_broker_serves_what_kafkalog_wrote(broker, spark, tmp_path):
    create_topic(broker, "kl_engine", 1)
    create_topic(broker, "kl_sink", 2)

    local = tmp_path / "kafkalog"
    expected_engine = write_engine_log(local / "kl_engine-0")
    from pyspark.sql import functions as F
    df = spark.range(500).select(F.format_string("k%d", F.col("id") % 9).alias("key"),
                                 F.format_string("sink-%d", F.col("id")).alias("value"),
                                 (F.col("id") % 2).cast("int").alias("partition"),
                                 F.timestamp_millis(F.lit(BASE_TS) + F.col("id")).alias("timestamp"))
    (df.write.format("kafkalog").option("path", str(local)).option("topic", "kl_sink")
     .option("numPartitions", 2).option("compression", "zstd").mode("append").save())
    expected_sink = sorted((r for p in range(2) for r in read_with_log(local / f"kl_sink-{p}", "read_committed")),
                           key=lambda r: (r.partition, r.offset))
    assert len(expected_sink) == 500
    assert read_with_log(local / "kl_engine-0", "read_committed") == expected_engine

    broker.kill()                          # no clean shutdown: the restart recovers (validates) every log
    replace_partition_files(broker, local / "kl_engine-0", "kl_engine-0")
    for p in range(2):
        replace_partition_files(broker, local / f"kl_sink-{p}", f"kl_sink-{p}")
    broker.restart()

    assert consume(broker, "kl_engine", 1) == expected_engine
    assert consume(broker, "kl_sink", 2) == expected_sink
    assert consume(broker, "kl_sink", 2, "read_uncommitted") == expected_sink

    # the broker goes on where kafkalog's log ends
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    meta = p.send("kl_engine", b"from the broker", partition=0).get(timeout=30)
    p.close()
    assert meta.offset == expected_engine[-1].offset + 1
    broker.stop()
    copy = broker.copy_out(tmp_path / "after")
    back = read_with_log(copy / "kl_engine-0", "read_uncommitted")
    assert back[:-1] == expected_engine and back[-1].value == b"from the broker"

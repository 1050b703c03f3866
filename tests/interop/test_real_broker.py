"""kafkalog against a real Apache Kafka broker (issue 18): a single-node KRaft broker+controller
from Maven Central's jars as a local JVM process (conftest.py; the official Docker image where
only Docker is available), real Python clients (kafka-python, aiokafka) and Kafka's own
DumpLogSegments as the judges.

1. Broker -> kafkalog: records produced through the broker (every codec, headers, null keys and
   values, an idempotent producer, committed and aborted transactions; a compacted topic after
   the broker's cleaner ran; a topic after time retention deleted segments) are read back by a
   real consumer, and kafkalog (``Log``, ``kafkalog verify``, ``format("kafkalog")``) must read
   exactly those records from the broker's log dir, while the broker runs and after it stopped,
   for read_uncommitted and read_committed; ``offsets_for_times`` answers as the broker's
   ListOffsets; the indexes kafkalog rebuilds equal the broker's byte for byte; ``kafkalog dump``
   prints what DumpLogSegments prints for the same files.
2. kafkalog -> broker: topics created through the broker (so the KRaft metadata has their topic
   ids), the broker stopped, the partitions' files replaced by what kafkalog wrote (the engine
   with transactions, producer snapshots and indexes; the Spark sink), the broker restarted: its
   log end offsets are kafkalog's, nothing is truncated, a real consumer reads every record for
   both isolation levels, DumpLogSegments accepts every file, and the broker appends after; an
   idempotent producer continues from kafkalog's producer snapshot as from the broker's own.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.config import LogConfig
from storage_core.format.columnar import encode_batches
from storage_core.log import Log

pytestmark = pytest.mark.interop

# Recent timestamps: a broker rolls a segment whose first timestamp is older than segment.ms (7
# days) on every append, and applies retention.ms to them; minute-aligned for readable probes.
BASE_TS = (int(time.time() * 1000) // 60_000 - 30) * 60_000
CODECS = ("gzip", "snappy", "lz4", "zstd", None)
PARTITION_FILES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
SMALL_SEGMENTS = {"internal.segment.bytes": "4096", "index.interval.bytes": "512"}


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    timestamp_type: int


def wait_until(predicate, what: str, timeout: float = 60, broker=None):
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            tail = broker.log_tail(3000) if hasattr(broker, "log_tail") else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{tail}")
        time.sleep(0.2)


# ------------------------------------------------------------------------------ clients

def create_topic(broker, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                      topic_configs=configs or {})])
    finally:
        admin.close()
    wanted = {f"{name}-{p}" for p in range(partitions)}
    wait_until(lambda: wanted <= set(broker.ls()), f"the partition directories of {name}", broker=broker)
    wait_until(lambda: all("partition.metadata" in broker.ls(d) for d in wanted), "partition.metadata",
               broker=broker)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:                                          # a leader for every partition
        wait_until(lambda: len(c.partitions_for_topic(name) or ()) == partitions, f"{name}'s leaders",
                   broker=broker)
    finally:
        c.close()


def consume(broker, topic: str, partitions: int, isolation: str = "read_committed",
            timeout: float = 60) -> list[Rec]:
    """Everything a real consumer (aiokafka: the client here with every codec) gets from the
    broker, from the earliest offsets to the end offsets (read_committed: the last stable ones)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go() -> list[Rec]:
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            end = await c.end_offsets(tps)
            out: list[Rec] = []
            deadline = time.monotonic() + timeout
            while any([await c.position(tp) < end[tp] for tp in tps]):
                assert time.monotonic() < deadline, f"consumer stuck: {end}, {len(out)} records read"
                for tp, recs in (await c.getmany(timeout_ms=1000)).items():
                    out.extend(Rec(tp.partition, r.offset, r.key, r.value,
                                   tuple((k, bytes(v)) for k, v in r.headers), r.timestamp, r.timestamp_type)
                               for r in recs if r.offset < end[tp])
            return sorted(out, key=lambda r: (r.partition, r.offset))
        finally:
            await c.stop()

    return asyncio.run(go())


def list_offsets(broker, topic: str, partitions: int) -> tuple[dict[int, int], dict[int, int]]:
    """The broker's ListOffsets answers for EARLIEST and LATEST (read_uncommitted): (start, end)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return ({tp.partition: o for tp, o in c.beginning_offsets(tps).items()},
                {tp.partition: o for tp, o in c.end_offsets(tps).items()})
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
    """aiokafka producers, one per codec (the only client here with all five), keys, null keys,
    null values, headers and explicit timestamps; returns the records sent."""
    from aiokafka import AIOKafkaProducer

    async def go() -> int:
        sent = 0
        for ci, codec in enumerate(CODECS):
            p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20,
                                 max_batch_size=4096, enable_idempotence=False, acks=1)
            await p.start()
            try:
                futures = []
                for i in range(per_codec):
                    n = ci * per_codec + i
                    futures.append(await p.send(
                        topic, key=None if n % 11 == 0 else f"k{n % 17}".encode(),
                        value=None if n % 13 == 0 and n % 11 else f"{codec}-{n}".encode() * 3,
                        headers=[("h", str(n).encode()), ("codec", str(codec).encode())] if n % 5 else None,
                        partition=n % partitions, timestamp_ms=BASE_TS + n))
                await asyncio.gather(*futures)
            finally:
                await p.stop()
            sent += per_codec
        return sent

    return asyncio.run(go())


def produce_idempotent(broker, topic: str, partitions: int, n: int = 200) -> int:
    """kafka-python's idempotent producer (producer id, epoch and sequences in every batch)."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all",
                      compression_type="lz4", linger_ms=10, batch_size=4096)
    try:
        for i in range(n):
            p.send(topic, key=f"idem{i % 7}".encode(), value=f"idempotent-{i}".encode(), partition=i % partitions,
                   timestamp_ms=BASE_TS + 2_000 + i)
        p.flush()
    finally:
        p.close()
    return n


def produce_transactions(broker, topic: str, tag: str = "t", partitions: int = 1) -> None:
    """aiokafka's transactional producer: committed, aborted and committed transactions
    (COMMIT/ABORT markers, a .txnindex entry for each aborted one)."""
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"kafkalog-interop-{tag}",
                             enable_idempotence=True, compression_type="zstd")
        await p.start()
        try:
            for name, commit in ((f"{tag}1", True), (f"{tag}2", False), (f"{tag}3", True), (f"{tag}4", False)):
                await p.begin_transaction()
                for i in range(20):
                    await p.send(topic, f"{name}-{i}".encode(), key=b"txn", partition=i % partitions,
                                 timestamp_ms=BASE_TS + 10_000 + i, headers=[("txn", name.encode())])
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
                if row["offset"] >= end:
                    break
                headers = tuple((h["key"], h["value"]) for h in (row["headers"] or []))
                out.append(Rec(partition, row["offset"], row["key"], row["value"], headers, ts[i],
                               row["timestampType"]))
            offset = r.next_offset
    return out


def read_all_with_log(parts: list[Path], isolation: str) -> list[Rec]:
    return sorted((r for p in parts for r in read_with_log(p, isolation)), key=lambda r: (r.partition, r.offset))


def read_with_spark(spark, data: Path, topic: str, isolation: str) -> list[Rec]:
    df = (spark.read.format("kafkalog").option("path", str(data)).option("subscribe", topic)
          .option("includeHeaders", "true").option("isolationLevel", isolation).load())
    return rows_to_recs(df.collect())


def rows_to_recs(rows) -> list[Rec]:
    return sorted((Rec(r.partition, r.offset, None if r.key is None else bytes(r.key),
                       None if r.value is None else bytes(r.value),
                       tuple((h.key, bytes(h.value)) for h in (r.headers or [])),
                       int(r.timestamp.timestamp() * 1000 + 0.5), r.timestampType) for r in rows),
                  key=lambda r: (r.partition, r.offset))


def verify(paths: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage_core.tools", "verify", *map(str, paths)],
                          capture_output=True, text=True)


def log_end_offset(partition_dir: Path) -> int:
    with Log.open(partition_dir, read_only=True) as log:
        return log.log_end_offset


# ------------------------------------------------------------------------------ 1. broker -> kafkalog

@dataclass
class BrokerTopic:
    parts: list[Path]               # a copy of the partitions, taken after the broker's clean shutdown
    data: Path                      # the copied log dir
    committed: list[Rec]
    everything: list[Rec]
    answers: dict[int, dict[int, int | None]]


@pytest.fixture(scope="module")
def broker_topic(_session_broker, tmp_path_factory) -> BrokerTopic:
    """'from_broker', 3 partitions of small segments, written through the broker by every kind
    of producer; read back by real consumers; read by kafkalog in place while the broker runs;
    then the broker is shut down cleanly and its log dir copied."""
    broker = _session_broker
    if not broker.running:
        broker.start()
    create_topic(broker, "from_broker", 3, SMALL_SEGMENTS)
    sent = produce_plain(broker, "from_broker", 3)
    sent += produce_idempotent(broker, "from_broker", 3)
    produce_transactions(broker, "from_broker", partitions=3)
    committed = consume(broker, "from_broker", 3, "read_committed")
    everything = consume(broker, "from_broker", 3, "read_uncommitted")
    assert len(committed) == sent + 40 and len(everything) == sent + 80
    assert any(r.value is None for r in everything) and any(r.key is None for r in everything)
    probes = [BASE_TS - 1, BASE_TS + 1, BASE_TS + 450, BASE_TS + 2_100, BASE_TS + 10_005, BASE_TS + 99_999]
    answers = {ts: broker_offsets_for_times(broker, "from_broker", 3, ts) for ts in probes}

    if broker.log_dir is not None:              # the live log dir, read in place while the broker serves it
        live = [broker.log_dir / f"from_broker-{p}" for p in range(3)]
        assert read_all_with_log(live, "read_committed") == committed
        assert read_all_with_log(live, "read_uncommitted") == everything

    broker.stop()
    data = broker.copy_out(tmp_path_factory.mktemp("from_broker"))
    parts = [data / f"from_broker-{p}" for p in range(3)]
    assert all(p.is_dir() for p in parts), sorted(x.name for x in data.iterdir())
    assert all(len(list(p.glob("*.log"))) >= 2 for p in parts), "the broker rolled no segment"
    return BrokerTopic(parts, data, committed, everything, answers)


def test_engine_reads_the_brokers_log_as_a_consumer_does(broker_topic):
    """Kafka's fetch path (FetchRequest, both isolation levels: aborted transactions dropped by
    the .txnindex, control batches skipped) against the same files read by ``Log.fetch``."""
    v = verify(broker_topic.parts)
    assert v.returncode == 0, v.stdout[-3000:] + v.stderr[-3000:]
    assert read_all_with_log(broker_topic.parts, "read_committed") == broker_topic.committed
    assert read_all_with_log(broker_topic.parts, "read_uncommitted") == broker_topic.everything


def test_offsets_for_times_answers_as_the_brokers_list_offsets(broker_topic):
    """ListOffsets by timestamp (the time index, then a scan of the segment) per partition."""
    for ts, per_partition in broker_topic.answers.items():
        for p, expected in per_partition.items():
            with Log.open(broker_topic.parts[p], read_only=True) as log:
                assert log.offsets_for_times(ts) == expected, (ts, p)


def test_spark_source_reads_the_brokers_log_as_a_consumer_does(broker_topic, spark):
    assert read_with_spark(spark, broker_topic.data, "from_broker", "read_committed") == broker_topic.committed
    assert read_with_spark(spark, broker_topic.data, "from_broker", "read_uncommitted") == broker_topic.everything


def test_sparks_kafka_source_returns_what_format_kafkalog_returns(broker_topic, broker, spark):
    """Spark's own Kafka source (spark-sql-kafka-0-10, through the broker) and ``format("kafkalog")``
    (the broker's files) on the same topic: the same rows, every column, headers included."""
    if not spark.conf.get("spark.jars", ""):
        why = ("the shared SparkSession has no spark.jars: Spark's Kafka connector was not resolved "
               "(ci/interop/resolve.sh)")
        if shutil.which("mvn"):
            pytest.fail(why)
        pytest.skip(why)                          # the Docker path, on a machine without Maven
    for isolation in ("read_committed", "read_uncommitted"):
        theirs = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("subscribe", "from_broker").option("startingOffsets", "earliest")
                  .option("endingOffsets", "latest").option("includeHeaders", "true")
                  .option("kafka.isolation.level", isolation).load())
        ours = (spark.read.format("kafkalog").option("path", str(broker_topic.data)).option("subscribe", "from_broker")
                .option("includeHeaders", "true").option("isolationLevel", isolation).load())
        assert theirs.schema == ours.schema
        expected = broker_topic.committed if isolation == "read_committed" else broker_topic.everything
        assert rows_to_recs(theirs.collect()) == expected
        assert rows_to_recs(ours.collect()) == expected


def test_rebuilt_indexes_equal_the_brokers(broker_topic, tmp_path):
    """LogSegment.recover rebuilds the offset and time indexes (index.interval.bytes=512) as the
    broker built them while appending: byte for byte, every segment."""
    for part in broker_topic.parts:
        copy = Path(shutil.copytree(part, tmp_path / part.name))
        for f in list(copy.glob("*.index")) + list(copy.glob("*.timeindex")):
            f.unlink()
        cfg = LogConfig(index_interval_bytes=512)
        with Log.open(copy, cfg):
            pass
        for suffix in (".index", ".timeindex"):
            theirs = sorted(part.glob(f"*{suffix}"))
            assert theirs and any(f.stat().st_size for f in theirs), (part, suffix)   # entries to compare
            for f in theirs:
                ours = (copy / f.name).read_bytes()
                assert ours == f.read_bytes(), (f.name, len(ours), f.stat().st_size)


def kafkalog_dump(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage_core.tools", "dump", *args], capture_output=True, text=True,
                          timeout=300)


def stderr_reports(text: str, *, kafka: bool) -> list[tuple[str, str]]:
    """DumpLogSegments' end-of-run reports on stderr as sorted (heading, line) pairs.

    Normalised, and only this: (1) the order: Kafka keeps the reports in a HashMap by file and the
    non-consecutive pairs in a TreeMap, kafkalog in the order it found them; (2) Kafka's own log4j
    lines (a JVM's warnings), which kafkalog has no counterpart of; (3) Kafka 4.3+'s Java tool starts
    each file's "last offset" at -1 (``dumpBatchRecords``), so it reports "-1 is followed by <first
    offset>" for every file whose first record is not at offset 0 (any segment but a log's first,
    a cleaned first segment), a gap that is not one (the Scala tool before it took the first record
    as the start, as kafkalog does): those pairs are dropped from Kafka's report."""
    out, heading = [], ""
    for line in text.splitlines():
        if line.startswith("[") or not line.strip():
            continue
        if line.startswith("  ") or line.startswith(("Indexed offset:", "Index offset:")):
            if kafka and heading.startswith("Non-consecutive offsets in ") and line.startswith("  -1 is followed by "):
                continue
            out.append((heading, line))
        else:
            heading = line
            out.append((heading, ""))
    kept = {h for h, line in out if line}
    return sorted((h, line) for h, line in out if line or h in kept or not h.startswith("Non-consecutive"))


def assert_dumps_agree(broker, files: list[Path], *flag_sets: list[str]) -> dict[tuple[str, ...], str]:
    """``kafkalog dump`` and Kafka's DumpLogSegments on the same files with the same flags: the
    same exit code, stdout equal line for line (the "Dumping", batch, record and index lines: no
    normalisation), the same stderr reports (see ``stderr_reports``). Returns Kafka's stdout per flag set."""
    names = ",".join(map(str, files))
    kafka_out = {}
    for flags in flag_sets:
        theirs = broker.dump_log_segments("--files", names, *flags)
        ours = kafkalog_dump("--files", names, *flags)
        assert theirs.returncode == 0, (flags, theirs.stderr[-3000:])
        assert ours.returncode == theirs.returncode, (flags, ours.stderr[-3000:])
        t_lines, o_lines = theirs.stdout.splitlines(), ours.stdout.splitlines()
        diff = next((i for i, (a, b) in enumerate(zip(t_lines, o_lines)) if a != b), min(len(t_lines), len(o_lines)))
        assert t_lines == o_lines, (flags, f"first difference at line {diff}", t_lines[diff:diff + 3],
                                    o_lines[diff:diff + 3], len(t_lines), len(o_lines))
        assert stderr_reports(ours.stderr, kafka=False) == stderr_reports(theirs.stderr, kafka=True), \
            (flags, theirs.stderr[-3000:], ours.stderr[-3000:])
        kafka_out[tuple(flags)] = theirs.stdout
    return kafka_out


def test_kafkalog_dump_prints_what_dump_log_segments_prints(broker_topic, local_broker):
    """Kafka's DumpLogSegments (kafka-dump-log.sh) is the judge of ``kafkalog dump`` on the broker's
    own files (every codec, null keys and values, headers, idempotent and transactional batches,
    COMMIT/ABORT markers; .log, .index, .timeindex, .snapshot, .txnindex): the batch and record
    lines with --deep-iteration --print-data-log (also with --skip-record-metadata), and the index
    checks of --verify-index-only and --index-sanity-check, which also accept every file."""
    files = sorted(f for p in broker_topic.parts for f in p.iterdir() if f.suffix in PARTITION_FILES)
    assert {f.suffix for f in files} >= {".log", ".index", ".timeindex", ".snapshot"}, files
    out = assert_dumps_agree(local_broker, files, ["--deep-iteration", "--print-data-log"],
                             ["--print-data-log", "--skip-record-metadata"], ["--verify-index-only"],
                             ["--index-sanity-check"])
    deep = out[("--deep-iteration", "--print-data-log")]
    assert deep.count("| offset: ") == len(broker_topic.everything) + deep.count("endTxnMarker: ")
    for codec in ("gzip", "snappy", "lz4", "zstd", "none"):
        assert f"compresscodec: {codec} " in deep, codec
    assert "endTxnMarker: ABORT" in deep and "isTransactional: true" in deep and "headerKeys: [h,codec]" in deep
    for text in out.values():
        assert "Mismatches in :" not in text and "not the same" not in text, text[-3000:]


def test_kafkalog_dump_of_a_legacy_segment_prints_what_dump_log_segments_prints(local_broker, tmp_path):
    """Magic 0/1 (a 4.x broker writes none, its DumpLogSegments still reads them): a real broker's
    magic-1 gzip message set from the shared fixtures, dumped by both with --print-data-log."""
    from fixture_paths import FIXTURES

    src = FIXTURES / "kafka-go" / "derived" / "v1c-v1c.recordset.log"
    if not src.exists():
        pytest.skip(f"{src} is absent (the shared fixtures, ../shared relative to the repository)")
    seg = tmp_path / "legacy-0" / "00000000000000000000.log"       # Kafka parses the base offset from the name
    seg.parent.mkdir()
    shutil.copyfile(src, seg)
    out = assert_dumps_agree(local_broker, [seg], ["--deep-iteration", "--print-data-log"])
    assert "magic: 1 compresscodec: gzip" in out[("--deep-iteration", "--print-data-log")]


def test_compacted_topic_after_the_brokers_cleaner(broker, local_broker, spark):
    """The broker's LogCleaner (cleanup.policy=compact, tiny segments, min.cleanable.dirty.ratio
    0.01) rewrote the rolled segments; kafkalog reads what a consumer reads from them."""
    topic = "compacted"
    create_topic(broker, topic, 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                    "internal.segment.bytes": "4096", "segment.ms": "600000"})
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip", linger_ms=5, batch_size=1024)
    n = 1500
    for i in range(n):
        p.send(topic, key=f"key-{i % 40}".encode(), value=None if i % 97 == 0 else f"v{i}".encode() * 4,
               partition=0, timestamp_ms=BASE_TS + i)
    p.flush()
    p.close()
    part = broker.log_dir / f"{topic}-0"

    def cleaned_to_active_segment() -> bool:
        checkpoint = broker.log_dir / "cleaner-offset-checkpoint"
        done = {}
        if checkpoint.exists():
            for line in checkpoint.read_text().splitlines()[2:]:
                t, pn, off = line.split()
                done[(t, int(pn))] = int(off)
        active = max(int(f.stem) for f in part.glob("*.log"))
        return done.get((topic, 0), 0) >= active > 0

    wait_until(cleaned_to_active_segment, "the broker's cleaner to clean up to the active segment", broker=broker)
    committed = consume(broker, topic, 1, "read_committed")
    everything = consume(broker, topic, 1, "read_uncommitted")
    assert committed == everything and len(everything) < n // 2, len(everything)   # it did compact
    broker.stop()
    assert read_with_log(part, "read_uncommitted") == everything
    assert read_with_spark(spark, broker.log_dir, topic, "read_committed") == committed
    # the cleaned segments' offset gaps: DumpLogSegments' non-consecutive report, and kafkalog dump's
    files = sorted(f for f in part.iterdir() if f.suffix in PARTITION_FILES)
    out = assert_dumps_agree(broker, files, ["--deep-iteration", "--print-data-log"])
    assert out[("--deep-iteration", "--print-data-log")].count("| offset: ") == len(everything)


def test_retention_deleted_segments(broker, local_broker):
    """retention.ms: the broker deletes every segment whose largest timestamp is older (its
    log start offset moves to the first kept segment); kafkalog starts where the broker does."""
    topic = "retained"
    create_topic(broker, topic, 1, {"retention.ms": "3600000", **SMALL_SEGMENTS})
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5, batch_size=2048)
    old = BASE_TS - 48 * 3600_000               # older than retention.ms and than segment.ms (7 days: no)
    for i in range(600):
        p.send(topic, key=str(i).encode(), value=f"old-{i}".encode() * 8, partition=0, timestamp_ms=old + i)
    p.flush()
    for i in range(300):
        p.send(topic, key=str(i).encode(), value=f"new-{i}".encode() * 8, partition=0,
               timestamp_ms=int(time.time() * 1000))
    p.flush()
    p.close()
    part = broker.log_dir / f"{topic}-0"
    # every segment up to the one that holds the first new record goes; that one and later ones stay
    wait_until(lambda: list_offsets(broker, topic, 1)[0][0] > 0 and all(
        b"new-" in f.read_bytes() for f in part.glob("*.log")), "retention to delete the old segments",
        broker=broker)
    start, end = list_offsets(broker, topic, 1)
    everything = consume(broker, topic, 1, "read_uncommitted")
    assert everything[0].offset == start[0] and everything[-1].offset == end[0] - 1
    broker.stop()
    with Log.open(part, read_only=True) as log:
        assert log.log_start_offset == start[0] and log.log_end_offset == end[0]
    assert read_with_log(part, "read_uncommitted") == everything


# ------------------------------------------------------------------------------ 2. kafkalog -> broker

PID = 1_000_000          # far above the controller's producer-id blocks (granted upward from 0)


def write_engine_log(path: Path) -> tuple[list[Rec], list[Rec]]:
    """Several segments of batches in every codec written by ``Log.append``, plus a committed
    and an aborted transaction (``append_raw`` + ``append_end_txn_marker``: a .txnindex entry,
    producer snapshots at the rolls and at close). Returns (committed, everything)."""
    everything: list[Rec] = []
    aborted: set[int] = set()
    with Log.open(path, LogConfig(segment_bytes=4096, index_interval_bytes=256)) as log:
        n = 0
        seq = 0
        for round_, codec in enumerate(("none", "gzip", "snappy", "lz4", "zstd") * 2):
            keys = [None if (n + i) % 7 == 0 else f"key-{(n + i) % 13}".encode() for i in range(60)]
            values = [None if (n + i) % 19 == 0 else f"{codec}-{n + i}-".encode() * 4 for i in range(60)]
            headers = [[{"key": "i", "value": str(n + i).encode()}] if (n + i) % 3 else [] for i in range(60)]
            stamps = [BASE_TS + n + i for i in range(60)]
            table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                              "headers": pa.array(headers, pa.list_(pa.struct([("key", pa.string()),
                                                                                ("value", pa.binary())]))),
                              "timestamp": pa.array(stamps, pa.int64())})
            if round_ in (3, 6):                 # a transaction of producer PID: commit, then abort
                raw = encode_batches(table, compression=codec, base_offset=log.log_end_offset, producer_id=PID,
                                     producer_epoch=0, base_sequence=seq, transactional=True)
                info = log.append_raw(bytearray(raw))
                seq += 60
                first = info.first_offset
                if round_ == 6:
                    aborted.update(range(first, first + 60))
                log.append_end_txn_marker(PID, 0, "commit" if round_ == 3 else "abort", coordinator_epoch=0,
                                          timestamp=BASE_TS + n + 60)
            else:
                first = log.append(table, compression=codec, max_batch_bytes=1024).first_offset
            for i in range(60):
                everything.append(Rec(0, first + i, keys[i], values[i],
                                      tuple((h["key"], h["value"]) for h in headers[i]), stamps[i], 0))
            n += 60
        assert len(log.segments) >= 3
    committed = [r for r in everything if r.offset not in aborted]
    return committed, everything


def replace_partition_files(broker, src: Path, partition: str) -> None:
    """Recipe B of the broker-local notes: the broker's own segment files go, kafkalog's files
    (segments, indexes, .txnindex, producer snapshots) are served as they are."""
    files = sorted(f for f in src.iterdir() if f.suffix in PARTITION_FILES)
    assert any(f.suffix == ".log" for f in files)
    if broker.log_dir is not None:
        for f in (broker.log_dir / partition).iterdir():
            if f.suffix in PARTITION_FILES:
                f.unlink()
    broker.put_files(partition, files)


def test_a_real_broker_serves_what_kafkalog_wrote(broker, spark, tmp_path):
    create_topic(broker, "kl_engine", 1)
    create_topic(broker, "kl_sink", 2)

    local = tmp_path / "kafkalog"
    engine_committed, engine_all = write_engine_log(local / "kl_engine-0")
    from pyspark.sql import functions as F
    df = spark.range(500).select(F.format_string("k%d", F.col("id") % 9).alias("key"),
                                 F.format_string("sink-%d", F.col("id")).alias("value"),
                                 (F.col("id") % 2).cast("int").alias("partition"),
                                 F.timestamp_millis(F.lit(BASE_TS) + F.col("id")).alias("timestamp"))
    (df.write.format("kafkalog").option("path", str(local)).option("topic", "kl_sink")
     .option("numPartitions", 2).option("compression", "zstd").mode("append").save())
    expected_sink = read_all_with_log([local / f"kl_sink-{p}" for p in range(2)], "read_committed")
    assert len(expected_sink) == 500
    assert read_with_log(local / "kl_engine-0", "read_committed") == engine_committed
    assert read_with_log(local / "kl_engine-0", "read_uncommitted") == engine_all

    broker.stop()                        # clean: the restart trusts the files as they are (no recovery)
    replace_partition_files(broker, local / "kl_engine-0", "kl_engine-0")
    for p in range(2):
        replace_partition_files(broker, local / f"kl_sink-{p}", f"kl_sink-{p}")
    broker.restart()

    if hasattr(broker, "log_text"):
        log_text = broker.log_text()
        for bad in ("Found invalid messages", "Corruption", "CorruptRecordException", "truncat"):
            assert not any(bad in line and ("kl_engine" in line or "kl_sink" in line)
                           for line in log_text.splitlines()), (bad, broker.log_tail())
    start, end = list_offsets(broker, "kl_engine", 1)
    assert (start[0], end[0]) == (0, log_end_offset(local / "kl_engine-0"))
    start, end = list_offsets(broker, "kl_sink", 2)
    assert end == {p: log_end_offset(local / f"kl_sink-{p}") for p in range(2)}
    assert consume(broker, "kl_engine", 1, "read_committed") == engine_committed
    assert consume(broker, "kl_engine", 1, "read_uncommitted") == engine_all
    assert consume(broker, "kl_sink", 2) == expected_sink
    assert consume(broker, "kl_sink", 2, "read_uncommitted") == expected_sink

    # the broker goes on where kafkalog's log ends
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    meta = p.send("kl_engine", b"from the broker", partition=0).get(timeout=30)
    p.close()
    assert meta.offset == log_end_offset(local / "kl_engine-0")
    broker.stop()
    copy = broker.copy_out(tmp_path / "after")
    back = read_with_log(copy / "kl_engine-0", "read_uncommitted")
    assert back[:-1] == engine_all and back[-1].value == b"from the broker"


def test_dump_log_segments_accepts_what_kafkalog_wrote(local_broker, tmp_path):
    """Kafka's DumpLogSegments over every file kafkalog writes: deep iteration of every batch
    (CRCs, records), the offset/time index checks against their segment and the broker's own
    startup sanity check of the indexes, and the producer snapshots."""
    local = tmp_path / "kafkalog"
    write_engine_log(local / "kl_dump-0")
    files = sorted(f for f in (local / "kl_dump-0").iterdir() if f.suffix in PARTITION_FILES)
    assert {f.suffix for f in files} == set(PARTITION_FILES), files
    names = ",".join(map(str, files))
    for flags in (["--deep-iteration"], ["--verify-index-only"], ["--index-sanity-check"]):
        done = local_broker.dump_log_segments("--files", names, *flags)
        assert done.returncode == 0, (flags, done.stderr[-3000:])
        out = done.stdout
        for bad in ("Mismatches in :", "not the same", "Found", "Exception", "failed", "corrupt"):
            assert bad not in out, (flags, bad, out[-3000:])
    deep = local_broker.dump_log_segments("--files", names, "--deep-iteration").stdout
    assert deep.count("isTransactional: true") >= 2 and "endTxnMarker: COMMIT" in deep and "ABORT" in deep


def test_a_killed_broker_recovers_what_kafkalog_wrote(local_broker, tmp_path):
    """No clean-shutdown marker: the restarted broker recovers the partition from its recovery
    point (0 for a topic that had no data), i.e. ``LogSegment.recover`` validates every batch
    kafkalog wrote and rebuilds the indexes, and truncates nothing (LogLoader)."""
    broker = local_broker
    create_topic(broker, "kl_recovered", 1)
    local = tmp_path / "kafkalog"
    committed, everything = write_engine_log(local / "kl_recovered-0")
    broker.kill()
    replace_partition_files(broker, local / "kl_recovered-0", "kl_recovered-0")
    for f in (broker.log_dir / "kl_recovered-0").glob("*.index"):     # recovered even were the marker there
        f.unlink()
    broker.restart()
    recovered = [line for line in broker.log_text().splitlines() if "kl_recovered-0" in line]
    assert any("rebuilding producer state from offset 0" in line for line in recovered), "\n".join(recovered)
    assert not any("Found invalid messages" in line or "truncat" in line.lower() for line in recovered), \
        "\n".join(recovered)
    start, end = list_offsets(broker, "kl_recovered", 1)
    assert (start[0], end[0]) == (0, log_end_offset(local / "kl_recovered-0"))
    assert consume(broker, "kl_recovered", 1, "read_committed") == committed
    assert consume(broker, "kl_recovered", 1, "read_uncommitted") == everything


IDEMPOTENT_PID = 1_000_001   # an idempotent (non-transactional) producer only kafkalog has written for


def produce_raw(broker, topic: str, seqs: tuple[int, int], tag: str) -> tuple[int, int]:
    """One magic-2 batch of producer IDEMPOTENT_PID (epoch 0) with the sequences seqs[0]..seqs[1],
    built by kafka-python's MemoryRecordsBuilder and sent in a ProduceRequest (acks=-1) exactly as
    its idempotent producer sends one, with the producer id and sequence chosen here (no Python
    client lets a caller choose them otherwise). Returns the partition's (error code, base offset)."""
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder

    first, last = seqs
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, producer_id=IDEMPOTENT_PID,
                                   producer_epoch=0, base_sequence=first)
    for i in range(last - first + 1):
        builder.append(timestamp=BASE_TS + 50_000 + first + i, key=b"idem", value=f"{tag}-{first + i}".encode(),
                       headers=[])
    builder.close()
    topic_data = ProduceRequest.TopicProduceData
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[topic_data(
        name=topic, partition_data=[topic_data.PartitionProduceData(index=0, records=builder.buffer())])],
        min_version=3, max_version=9)
    client = KafkaNetClient(bootstrap_servers=broker.bootstrap)
    try:
        client.check_version()                                  # bootstraps: the metadata names node 1
        response = client.send_and_receive(1, request)         # node 1: the single broker, every leader
    finally:
        client.close()
    (part,) = response.responses[0].partition_responses
    return part.error_code, part.base_offset



def write_idempotent_log(path: Path) -> tuple[list[Rec], int]:
    """Eight batches of 30 records of producer IDEMPOTENT_PID, epoch 0, sequences 0..239, in
    segments of 2 KiB: kafkalog's ProducerStateManager snapshots them at every roll and at close.
    Returns (the records, the base offset of the last batch)."""
    out: list[Rec] = []
    with Log.open(path, LogConfig(segment_bytes=2048, index_interval_bytes=256)) as log:
        for b in range(8):
            values = [f"kafkalog-{b * 30 + i}".encode() for i in range(30)]
            stamps = [BASE_TS + 40_000 + b * 30 + i for i in range(30)]
            table = pa.table({"key": pa.array([b"idem"] * 30, pa.binary()), "value": pa.array(values, pa.binary()),
                              "timestamp": pa.array(stamps, pa.int64())})
            raw = encode_batches(table, compression="none", base_offset=log.log_end_offset,
                                 producer_id=IDEMPOTENT_PID, producer_epoch=0, base_sequence=b * 30)
            last_base = log.append_raw(bytearray(raw)).first_offset
            out.extend(Rec(0, last_base + i, b"idem", values[i], (), stamps[i], 0) for i in range(30))
        assert len(log.segments) >= 3
    return out, last_base


def test_an_idempotent_producer_continues_from_kafkalogs_producer_snapshot(local_broker, tmp_path):
    """Kafka's idempotence (ProducerStateManager, ProducerAppendInfo.checkSequence) on a producer only
    kafkalog wrote for: the broker's clean restart loads kafkalog's producer snapshot at the log end
    offset and scans nothing, and then treats the producer as it treats its own: the duplicate of the
    last batch is answered with that batch's offset and not appended, a stale sequence and a gap are
    rejected with OUT_OF_ORDER_SEQUENCE_NUMBER, the next sequence is appended at the log end, and its
    own duplicate is answered as the last one was."""
    broker = local_broker                            # its log is read below
    create_topic(broker, "kl_idempotent", 1)
    local = tmp_path / "kafkalog" / "kl_idempotent-0"
    written, last_base = write_idempotent_log(local)
    leo = log_end_offset(local)
    assert (local / f"{leo:020d}.snapshot").exists()
    broker.stop()
    replace_partition_files(broker, local, "kl_idempotent-0")
    broker.restart()
    loaded = [line for line in broker.log_text().splitlines() if "kl_idempotent-0" in line]
    assert any(f"{leo:020d}.snapshot" in line and "Loading producer state from snapshot file" in line
               for line in loaded), "\n".join(loaded)
    assert any(f"rebuilding producer state from offset {leo}" in line for line in loaded), "\n".join(loaded)

    none, out_of_order = 0, 45                       # Kafka's error codes NONE, OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce_raw(broker, "kl_idempotent", (210, 239), "again") == (none, last_base)
    assert produce_raw(broker, "kl_idempotent", (0, 29), "stale")[0] == out_of_order
    assert produce_raw(broker, "kl_idempotent", (241, 250), "gap")[0] == out_of_order
    assert list_offsets(broker, "kl_idempotent", 1)[1] == {0: leo}          # nothing of those appended
    assert produce_raw(broker, "kl_idempotent", (240, 249), "broker") == (none, leo)
    assert produce_raw(broker, "kl_idempotent", (240, 249), "broker") == (none, leo)
    assert list_offsets(broker, "kl_idempotent", 1)[1] == {0: leo + 10}
    got = consume(broker, "kl_idempotent", 1, "read_uncommitted")
    assert got[:leo] == written
    assert [r.value for r in got[leo:]] == [f"broker-{240 + i}".encode() for i in range(10)]


def test_a_real_broker_serves_what_kafkalogs_cleaner_and_retention_left(broker, tmp_path):
    """The other writers of kafkalog's files (issue 18, Build 4): a keyed partition compacted by
    kafkalog's log cleaner (cleaned segments swapped in, offset gaps, tombstones kept within
    delete.retention.ms) and then cut by size retention (whole segments deleted, the log start
    moved to the first remaining base offset). Served by the restarted broker as they are: its
    log start and end offsets are kafkalog's (LogLoader: the log start is the first segment's
    base when no checkpoint says more), nothing is truncated or reported corrupt, and a real
    consumer reads exactly what kafkalog reads."""
    from storage_core.server import LogManager

    create_topic(broker, "kl_cleaned", 1, {"retention.ms": "-1"})
    local = tmp_path / "kafkalog"
    part = local / "kl_cleaned-0"
    written = 0
    with Log.open(part, LogConfig(segment_bytes=4096)) as log:
        for round_, codec in enumerate(("none", "gzip", "lz4", "zstd", "snappy", "none") * 2):
            keys = [f"key-{(round_ * 37 + i) % 25}".encode() for i in range(40)]
            values = [None if i % 11 == 0 else f"v{round_}-{i}-".encode() * 5 for i in range(40)]
            log.append(pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                                 "timestamp": pa.array([BASE_TS + written + i for i in range(40)], pa.int64())}),
                       compression=codec, max_batch_bytes=1024)
            written += 40
    with LogManager.open(local) as mgr:
        mgr.alter_topic_config("kl_cleaned", {"cleanup.policy": "compact", "segment.bytes": 4096,
                                              "min.cleanable.dirty.ratio": 0.01})
        assert sum(r.records_removed for r in mgr.compact()) > 0
        with Log.open(part, read_only=True) as log:
            sizes = [seg.size for seg in log.segments]
        assert len(sizes) >= 3, sizes
        mgr.alter_topic_config("kl_cleaned", {"cleanup.policy": "compact,delete",
                                              "retention.bytes": sum(sizes) - sizes[0] // 2})
        assert mgr.cleanup_logs(include_compacted=True)       # segments deleted
    mgr_seen = read_with_log(part, "read_uncommitted")
    with Log.open(part, read_only=True) as log:
        start, end = log.log_start_offset, log.log_end_offset
    assert 0 < start and end == written                     # retention cut, nothing lost at the end
    assert len(mgr_seen) < end - start                      # compacted: offset gaps
    assert any(r.value is None for r in mgr_seen)           # tombstones kept (delete.retention.ms)

    broker.stop()
    replace_partition_files(broker, part, "kl_cleaned-0")
    broker.restart()
    if hasattr(broker, "log_text"):
        for line in broker.log_text().splitlines():
            assert not ("kl_cleaned" in line and any(bad in line for bad in (
                "Found invalid messages", "Corruption", "CorruptRecordException", "truncat"))), line
    assert list_offsets(broker, "kl_cleaned", 1) == ({0: start}, {0: end})
    assert consume(broker, "kl_cleaned", 1, "read_uncommitted") == mgr_seen


def test_option_edge_cases_as_sparks_kafka_source_meets_them(broker, local_broker, spark):
    """Spark's own Kafka source (its admin-based offset reader, through the broker) and
    ``format("kafkalog")`` (the broker's live log dir) on the same options: special timestamps
    -1..-5 give the same rows or the same "No offset matched", a timestamp below -5 fails both
    (Spark: UnsupportedVersionException from the broker; kafkalog: naming the option), a missing
    assigned partition is skipped by both, a missing subscribed topic fails both."""
    if not spark.conf.get("spark.jars", ""):
        pytest.skip("the shared SparkSession has no spark.jars: Spark's Kafka connector was not resolved")
    topic = "edges"
    create_topic(broker, topic, 2)
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for part in (0, 1):
        for i, dt in enumerate((0, 50, 20, 30, 40)):           # the largest timestamp at offset 1
            p.send(topic, value=f"{part}-{i}".encode(), partition=part, timestamp_ms=BASE_TS + dt)
    p.flush()
    p.close()

    def both(options: dict) -> tuple[object, object]:
        out = []
        for fmt, where in (("kafka", {"kafka.bootstrap.servers": broker.bootstrap}),
                           ("kafkalog", {"path": str(broker.log_dir)})):
            r = spark.read.format(fmt)
            for k, v in {**where, **options}.items():
                r = r.option(k, v)
            try:
                out.append(sorted((x.partition, x.offset) for x in r.load().select("partition", "offset").collect()))
            except Exception as e:                  # noqa: BLE001 - compared below
                out.append(f"error: {e}")
        return out[0], out[1]

    sub = {"subscribe": topic}
    for options in ({"startingOffsetsByTimestamp": f'{{"{topic}":{{"0":-3,"1":-2}}}}',
                     "endingOffsetsByTimestamp": f'{{"{topic}":{{"0":-1,"1":-3}}}}'},
                    {"startingTimestamp": "-4", "endingTimestamp": "-5"},
                    {"startingTimestamp": "-5", "startingOffsetsByTimestampStrategy": "latest"},
                    {"startingTimestamp": "-1"}):
        theirs, ours = both({**sub, **options})
        assert theirs == ours and not isinstance(theirs, str), (options, theirs, ours)
    theirs, ours = both({**sub, "startingTimestamp": "-5"})     # Spark names the partition its map gives first
    expected = rf"No offset matched from request of topic-partition {topic}-[01] and timestamp -5\."
    assert re.search(expected, theirs) and re.search(expected, ours), (theirs, ours)
    theirs, ours = both({**sub, "startingTimestamp": "-7"})
    assert "UnsupportedVersionException" in theirs and "option 'startingTimestamp'" in ours
    theirs, ours = both({"assign": f'{{"{topic}":[1,5]}}'})
    assert theirs == ours == [(1, o) for o in range(5)]
    theirs, ours = both({"subscribe": f"{topic},nosuch", "failOnDataLoss": "false"})
    assert "UnknownTopicOrPartitionException" in theirs and "do not exist" in ours and "nosuch" in ours

"""A real broker's tiered topic read without the broker: a single-node KRaft Apache Kafka broker
(tests/interop's LocalBroker, Maven Central's jars) with remote storage on Kafka's own
``LocalTieredStorage`` tiers a topic (plain records, and transactions: one aborted, larger than a
segment); then, from its log directory alone, the read-only
TopicBasedRemoteLogMetadataManager folds the broker's ``__remote_log_metadata`` partitions (its
producer's idempotent batches) into the same events Kafka's DumpLogSegments decodes there, every
finished copy's objects are where LocalTieredStorage put them, lookups by epoch and offset land
in the right copy, the RemoteIndexCache over those objects points reads at the right batch, and
UnifiedLog reads what read_committed and read_uncommitted consumers read from the broker."""

from __future__ import annotations

import asyncio
import importlib.util
import random
import sys
import time
from pathlib import Path

import pytest

from storage_core.checkpoint import PartitionMetadataFile
from storage_core.format import decode_batches
from storage_core.log import Log
from storage_core.remote import (REMOTE_LOG_METADATA_TOPIC_NAME, PyArrowRemoteStorageManager, RemoteIndexCache,
                                 RemoteLogSegmentFileType, RemoteLogSegmentState, TopicBasedRemoteLogMetadataManager,
                                 TopicIdPartition, UnifiedLog, deserialize)


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module              # (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


HERE = Path(__file__).resolve().parent
interop = _load("kafkalog_interop_broker", HERE.parent / "interop" / "conftest.py")
dump = _load("kafkalog_rlmm_interop", HERE / "test_remote_log_metadata_interop.py")
real_broker = _load("kafkalog_real_broker_consume", HERE.parent / "interop" / "test_real_broker.py")

TOPIC = "tieredTopic"
PARTITIONS = 2
METADATA_PARTITIONS = 3
SEGMENT_BYTES = 1 << 20             # the smallest segment.bytes Kafka 4 accepts
WAIT = 180.0                        # seconds the broker may take to tier (a copy task runs every 500 ms)


class TieredBroker(interop.LocalBroker):
    """LocalBroker with remote storage: LocalTieredStorage (kafka-storage's test fixtures) under
    ``<workdir>/remote``, the default topic-based RLMM, short task intervals."""

    def __init__(self, workdir: Path, rsm_jar: Path) -> None:
        self.rsm_jar = rsm_jar
        self.remote_dir = Path(workdir) / "remote"
        super().__init__(workdir)

    def _write_properties(self) -> None:
        super()._write_properties()
        with open(self.properties, "a") as f:
            f.write(f"""\
remote.log.storage.system.enable=true
remote.log.storage.manager.class.name=org.apache.kafka.server.log.remote.storage.LocalTieredStorage
remote.log.storage.manager.class.path={self.rsm_jar}
rsm.config.dir={self.remote_dir}
remote.log.metadata.manager.listener.name=PLAINTEXT
rlmm.config.remote.log.metadata.topic.replication.factor=1
rlmm.config.remote.log.metadata.topic.min.isr=1
rlmm.config.remote.log.metadata.topic.num.partitions={METADATA_PARTITIONS}
remote.log.manager.task.interval.ms=500
""")


@pytest.fixture(scope="module")
def tiered_broker(kafka_jars, local_tiered_storage_classpath, tmp_path_factory):
    """The broker's log dir and LocalTieredStorage folder once it copied segments of both
    partitions and deleted the first ones locally, stopped cleanly; ``consumed``: what a real
    consumer read from it before it stopped."""
    jar = next(Path(local_tiered_storage_classpath.split(":")[0].rstrip("*")).glob("kafka-storage-*test*.jar"))
    broker = TieredBroker(tmp_path_factory.mktemp("tiered-broker"), jar)
    try:
        broker.start()
        broker.tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", broker.bootstrap, "--create",
                    "--topic", TOPIC, "--partitions", str(PARTITIONS), "--replication-factor", "1",
                    "--config", "remote.storage.enable=true", "--config", f"segment.bytes={SEGMENT_BYTES}",
                    "--config", "local.retention.ms=1000", "--config", "retention.ms=-1")
        # ~5 MiB over two partitions: two rolled segments or more each
        perf = ("org.apache.kafka.tools.ProducerPerformance", "--topic", TOPIC, "--record-size", "1000",
                "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=all",
                "batch.size=65536", "linger.ms=5")
        broker.tool(*perf, "--num-records", "5000", timeout=300)
        # transactions, an aborted one larger than a segment in each partition with plain records
        # between its own, then enough plain records to roll, tier and delete locally every
        # segment holding them
        ends = produce_transactions_across_segments(broker)
        broker.tool(*perf, "--num-records", "5000", timeout=300)
        deadline = time.monotonic() + WAIT
        while True:
            with TopicBasedRemoteLogMetadataManager({"log.dir": str(broker.log_dir)}, read_only=True) as m:
                finished = [sum(s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
                                for s in m.list_remote_log_segments(tip))
                            for tip in tips(broker.log_dir)] if _has_topic(broker.log_dir) else []
            if len(finished) == PARTITIONS and min(finished) >= 2 and _local_retention_deleted(broker.log_dir, ends):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the broker tiered {finished} segments and deleted the local segments below "
                                     f"{ends} within {WAIT:.0f} s\n{broker.log_tail()}")
            time.sleep(0.5)
        # what real consumers get (the broker serves the tiered offsets from LocalTieredStorage)
        broker.consumed = {isolation: real_broker.consume(broker, TOPIC, PARTITIONS, isolation, timeout=120)
                           for isolation in ("read_uncommitted", "read_committed")}
        broker.transactions_end = ends
        broker.stop()
        yield broker
    finally:
        broker.remove()


def _local_retention_deleted(log_dir: Path, ends: dict[int, int]) -> bool:
    """Local retention (local.retention.ms, checked every 500 ms) deleted, once they were copied,
    each partition's segments below ``ends[partition]`` (its log end offset after the
    transactions): their offsets are only in remote storage."""
    return all(int(min(p.stem for p in (log_dir / f"{TOPIC}-{n}").glob("*.log"))) > ends[n] for n in range(PARTITIONS))


def produce_transactions_across_segments(broker) -> dict[int, int]:
    """aiokafka's transactional producer: a committed transaction, an aborted one of 1300 records
    of 1000 bytes per partition (more than a segment: it spans a roll), with a plain producer's
    records between its own, and a committed one. Returns each partition's log end offset after."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    rnd = random.Random(405)

    def value(tag: str, i: int) -> bytes:
        return f"{tag}-{i}-".encode() + rnd.randbytes(980)

    async def go() -> dict[int, int]:
        txn = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kafkalog-tiered-txn",
                               enable_idempotence=True, max_batch_size=65536, linger_ms=5)
        plain = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
        await txn.start()
        await plain.start()
        try:
            for tag, n, commit in (("committed-1", 100, True), ("aborted", 1300, False), ("committed-2", 100, True)):
                await txn.begin_transaction()
                sent = []
                for i in range(n):
                    for p in range(PARTITIONS):
                        sent.append(await txn.send(TOPIC, value(tag, i), key=tag.encode(), partition=p))
                        if i % 50 == 25:
                            sent.append(await plain.send(TOPIC, value(f"plain-{tag}", i), partition=p))
                await asyncio.gather(*sent)
                await (txn.commit_transaction() if commit else txn.abort_transaction())
        finally:
            await txn.stop()
            await plain.stop()
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
        await c.start()
        try:
            tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
            return {tp.partition: o for tp, o in (await c.end_offsets(tps)).items()}
        finally:
            await c.stop()

    return asyncio.run(go())


def _has_topic(log_dir: Path) -> bool:
    return all((log_dir / f"{TOPIC}-{p}" / "partition.metadata").exists() for p in range(PARTITIONS)) \
        and (log_dir / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-0").is_dir()


def tips(log_dir: Path) -> list[TopicIdPartition]:
    return [TopicIdPartition(PartitionMetadataFile(log_dir / f"{TOPIC}-{p}").read(), (TOPIC, p))
            for p in range(PARTITIONS)]


def test_brokers_metadata_topic_folds_to_what_kafka_decodes_and_what_its_rsm_holds(tiered_broker):
    log_dir = tiered_broker.log_dir
    m = TopicBasedRemoteLogMetadataManager({"log.dir": str(log_dir)}, read_only=True)
    assert m.partitioner.num_metadata_topic_partitions == METADATA_PARTITIONS
    # every record the broker wrote, decoded by us, is what Kafka's DumpLogSegments prints
    files, events = [], []
    for n in range(METADATA_PARTITIONS):
        directory = log_dir / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{n}"
        with Log.open(directory, read_only=True) as log:
            table = log.read(0, max_bytes=1 << 30)
            ours = [deserialize(v) for v in table.column("value").to_pylist()]
            assert table.column("key").null_count == table.num_rows                  # null keys
            # the broker's RLMM producer is idempotent: every batch carries a producer id
            assert all(pid >= 0 for pid in table.column("producerId").to_pylist())
        segments = sorted(directory.glob("*.log"))
        if ours:
            files.extend(segments)
            events.append((segments, [dump.kafka_to_string(e) for e in ours]))
    done = tiered_broker.dump_log_segments("--remote-log-metadata-decoder", "--print-data-log", "--files",
                                           ",".join(map(str, files)))
    assert done.returncode == 0, done.stderr[-3000:]
    payloads = [line.split(" payload: ", 1)[1] for line in done.stdout.splitlines() if " payload: " in line]
    assert len(events) >= 1 and payloads == [p for _, expected in events for p in expected]

    rsm = PyArrowRemoteStorageManager({"dir": str(tiered_broker.remote_dir)})
    for tip in tips(log_dir):
        segments = sorted(m.list_remote_log_segments(tip), key=lambda s: s.start_offset)
        finished = [s for s in segments if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
        assert len(finished) >= 2
        for s in segments:
            if s.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:       # a copy cut short by the stop
                assert m.remote_log_segment_metadata(tip, s.segment_leader_epochs[0][0], s.start_offset) != s
        for s in finished:
            # the objects LocalTieredStorage wrote, where and as large as the metadata says
            path = Path(rsm.object_path(s, RemoteLogSegmentFileType.SEGMENT))
            assert path.stat().st_size == s.segment_size_in_bytes
            for epoch, first in s.segment_leader_epochs:
                for offset in (first, s.end_offset):
                    assert m.remote_log_segment_metadata(tip, epoch, offset) == s
        assert m.highest_offset_for_epoch(tip, finished[-1].segment_leader_epochs[-1][0]) == finished[-1].end_offset
        assert m.remote_log_segment_metadata(tip, 0, finished[-1].end_offset + 10**9) is None
        # the index cache over the broker's objects points a read at the batch holding the offset
        cache = RemoteIndexCache(rsm, log_dir.parent / "kafkalog-data")
        for s in finished:
            target = (s.start_offset + s.end_offset) // 2
            position = cache.lookup_offset(s, target)
            end = min(s.segment_size_in_bytes - 1, position + (256 << 10))
            with rsm.fetch_log_segment(s, position, end) as stream:
                offsets = decode_batches(stream.read(end - position + 1)).column("offset").to_pylist()
            assert offsets[0] <= target <= offsets[-1]
        cache.close()



def test_brokers_tiered_topic_reads_across_both_tiers_as_a_real_consumer_does(tiered_broker, tmp_path):
    """Build 6: every partition read through UnifiedLog from the broker's directories alone (its
    log dir read-only, metadata from its ``__remote_log_metadata``, segments from
    LocalTieredStorage's folder) returns what a real consumer got from the running broker, for
    both isolation levels, including the offsets that were only in remote storage: there, an
    aborted transaction spanning tiered segments (read_committed leaves it out through the remote
    transaction indexes, read_uncommitted keeps it) and the COMMIT/ABORT markers neither returns."""
    log_dir = tiered_broker.log_dir
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(log_dir)}, read_only=True)
    rsm = PyArrowRemoteStorageManager({"dir": str(tiered_broker.remote_dir)})
    cache = RemoteIndexCache(rsm, tmp_path)                 # outside the broker's directories
    for tip in tips(log_dir):
        consumed = {iso: [r for r in recs if r.partition == tip.partition]
                    for iso, recs in tiered_broker.consumed.items()}
        committed = {r.offset for r in consumed["read_committed"]}
        aborted = [r.offset for r in consumed["read_uncommitted"] if r.offset not in committed]
        # what the consumers saw: 1300 aborted records of this partition, all in remote-only
        # segments, plain records between them that read_committed keeps
        assert len(aborted) == 1300 and all(r.key == b"aborted" for r in consumed["read_uncommitted"]
                                            if r.offset not in committed)
        assert any(aborted[0] < r.offset < aborted[-1] for r in consumed["read_committed"])
        with Log.open(log_dir / f"{TOPIC}-{tip.partition}", read_only=True) as log, \
                UnifiedLog(log, tip, rlmm, rsm, cache) as ulog:
            assert ulog.log_start_offset == 0 < ulog.local_log_start_offset       # local retention deleted some
            assert aborted[-1] < tiered_broker.transactions_end[tip.partition] < ulog.local_log_start_offset
            assert ulog.highest_offset_in_remote_storage >= ulog.local_log_start_offset - 1
            holding = [m for m in ulog.remote_segments() if m.start_offset <= aborted[-1] and
                       m.end_offset >= aborted[0]]
            assert len(holding) >= 2, "the aborted transaction spans tiered segments"
            for isolation, expected in consumed.items():
                rows, offset = [], 0
                while offset < log.log_end_offset:
                    r = ulog.fetch(offset, max_bytes=256 << 10, isolation=isolation)
                    assert r.next_offset > offset, f"stuck at {offset}"
                    rows.extend(zip(*(r.table.column(c).to_pylist() for c in ("offset", "key", "value", "timestamp"))))
                    offset = r.next_offset
                assert len(rows) == len(expected) < log.log_end_offset, (tip, isolation)
                assert [(o, k, v) for o, k, v, _ in rows] == [(e.offset, e.key, e.value) for e in expected]
                assert [int(t.timestamp() * 1000) if hasattr(t, "timestamp") else t for *_, t in rows] == \
                    [e.timestamp for e in expected]
            # ListOffsets across the tiers
            assert ulog.fetch_offset_by_timestamp(-2).offset == 0
            assert ulog.fetch_offset_by_timestamp(-4).offset == ulog.local_log_start_offset
            assert ulog.fetch_offset_by_timestamp(-5).offset == ulog.highest_offset_in_remote_storage
            first_ts = consumed["read_uncommitted"][0].timestamp
            assert ulog.offsets_for_times(first_ts) == 0
    cache.close()
    rlmm.close()

"""Interop with Kafka's own ``RemoteLogMetadataSerde`` and ``RemoteLogMetadataTopicPartitioner``
(kafka-storage from Maven Central, run by tests/remote/SerdeProbe.java, compiled here with javac):
values kafkalog writes decode in Kafka's serde to the same fields, values Kafka's serde writes
decode in kafkalog's, byte for byte the same values, and both pick the same metadata partition."""

from __future__ import annotations

import random
import subprocess
import uuid
from pathlib import Path

import pytest

from storage_core.checkpoint import random_topic_id, topic_id_to_str
from storage_core.remote import (RemoteLogMetadataTopicPartitioner, RemoteLogSegmentId,
                                 RemoteLogSegmentMetadata, RemoteLogSegmentMetadataSnapshot,
                                 RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
                                 RemotePartitionDeleteMetadata, RemotePartitionDeleteState,
                                 TopicIdPartition, deserialize, serialize)

PROBE = Path(__file__).with_name("SerdeProbe.java")


@pytest.fixture(scope="module")
def probe(kafka_jars, tmp_path_factory):
    """A function running SerdeProbe <mode> over lines, returning its output lines."""
    out = tmp_path_factory.mktemp("serde-probe")
    classpath = f"{kafka_jars}/*"
    done = subprocess.run(["javac", "-cp", classpath, "-d", str(out), str(PROBE)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr

    def run(mode: str, lines: list[str]) -> list[str]:
        infile = out / f"{mode}.in"
        infile.write_text("".join(line + "\n" for line in lines))
        done = subprocess.run(["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
                               f"{out}:{classpath}", "SerdeProbe", mode, str(infile)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"SerdeProbe {mode} failed:\n{done.stderr[-4000:]}"
        return done.stdout.splitlines()

    return run


def _custom(value: bytes | None) -> str:
    return "-" if value is None else "x" + value.hex()


def _tip(tip: TopicIdPartition) -> list[str]:
    return [topic_id_to_str(tip.topic_id), tip.topic, str(tip.partition)]


def _epochs(pairs) -> str:
    return ",".join(f"{e}:{o}" for e, o in pairs)


def canonical(md) -> str:
    """The line SerdeProbe prints for a decoded record (and parses to build one)."""
    if isinstance(md, RemoteLogSegmentMetadata):
        f = ["SEG", *_tip(md.topic_id_partition), topic_id_to_str(md.remote_log_segment_id.id), md.start_offset,
             md.end_offset, md.max_timestamp_ms, md.broker_id, md.event_timestamp_ms, md.segment_size_in_bytes,
             _epochs(md.segment_leader_epochs), _custom(md.custom_metadata), md.state.id,
             str(md.txn_idx_empty).lower()]
    elif isinstance(md, RemoteLogSegmentMetadataUpdate):
        f = ["UPD", *_tip(md.topic_id_partition), topic_id_to_str(md.remote_log_segment_id.id),
             md.event_timestamp_ms, _custom(md.custom_metadata), md.state.id, md.broker_id]
    elif isinstance(md, RemotePartitionDeleteMetadata):
        f = ["DEL", *_tip(md.topic_id_partition), md.state.id, md.event_timestamp_ms, md.broker_id]
    else:
        f = ["SNAP", topic_id_to_str(md.segment_id), md.start_offset, md.end_offset, md.max_timestamp_ms,
             md.broker_id, md.event_timestamp_ms, md.segment_size_in_bytes, _epochs(md.segment_leader_epochs),
             _custom(md.custom_metadata), md.state.id, str(md.txn_idx_empty).lower()]
    return "\t".join(map(str, f))


def records(seed: int = 19) -> list:
    """Every record type, every state, null/empty/long custom metadata, ids with '-' and '_',
    topic names with every legal character class, extreme offsets and timestamps."""
    rnd = random.Random(seed)
    topics = ["tieredTopic", "a", "orders.v2-eu_west", "x" * 249, "-lead-dash", "__remote_log_metadata"]
    out = []
    for i in range(40):
        tip = TopicIdPartition(uuid.UUID(int=rnd.getrandbits(128)) if i % 3 else random_topic_id(),
                               (rnd.choice(topics), rnd.choice([0, 1, 49, 2**31 - 1])))
        sid = RemoteLogSegmentId(tip, uuid.UUID(int=rnd.getrandbits(128)))
        start = rnd.choice([0, 1, 2**31, 2**62])
        end = start + rnd.choice([0, 99, 2**20])
        epochs = {e: start + k for k, e in enumerate(sorted(rnd.sample(range(0, 2**31 - 1), rnd.randint(1, 6))))}
        custom = rnd.choice([None, b"", bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 300)))])
        state = RemoteLogSegmentState(i % 4)
        ts = rnd.choice([-1, 0, 1700000000000, 2**63 - 1])
        out.append(RemoteLogSegmentMetadata(sid, start, end, ts, rnd.choice([-1, 0, 1, 2**31 - 1]), ts,
                                            rnd.choice([0, 1048576, 2**31 - 1]), epochs, custom, state, i % 2 == 0))
        out.append(RemoteLogSegmentMetadataUpdate(sid, ts, custom, RemoteLogSegmentState((i + 1) % 4), i))
        out.append(RemotePartitionDeleteMetadata(tip, RemotePartitionDeleteState(i % 3), ts, i))
        out.append(RemoteLogSegmentMetadataSnapshot(sid.id, start, end, ts, i, ts, 4096, epochs, custom, state,
                                                    i % 2 == 1))
    return out


def test_kafkas_serde_decodes_what_kafkalog_writes(probe):
    recs = records()
    decoded = probe("decode", [serialize(r).hex() for r in recs])
    assert decoded == [canonical(r) for r in recs]


def test_kafkalog_decodes_what_kafkas_serde_writes_byte_for_byte(probe):
    recs = records(seed=405)
    values = [bytes.fromhex(line) for line in probe("encode", [canonical(r) for r in recs])]
    assert len(values) == len(recs)
    for value, record in zip(values, recs):
        assert deserialize(value) == record
        assert serialize(record) == value              # the same bytes, not only the same fields


def test_same_metadata_partition_as_kafkas_partitioner(probe):
    rnd = random.Random(7)
    cases = [(uuid.UUID(int=rnd.getrandbits(128)), rnd.choice([0, 1, 5, 2**31 - 1]), rnd.choice([1, 3, 50, 97]))
             for _ in range(200)]
    lines = [f"PART\t{topic_id_to_str(t)}\tt\t{p}\t{n}" for t, p, n in cases]
    ours = [RemoteLogMetadataTopicPartitioner(n).metadata_partition(TopicIdPartition(t, ("t", p)))
            for t, p, n in cases]
    assert probe("partition", lines) == [str(x) for x in ours]

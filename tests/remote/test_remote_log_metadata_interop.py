"""Kafka's own tools read the ``__remote_log_metadata`` topic our metadata manager writes: Kafka's
``DumpLogSegments --remote-log-metadata-decoder`` (kafka-tools from Maven Central, the oracle
``kafka-dump-log.sh`` runs) validates every batch of every metadata partition's segment and
decodes every value with ``RemoteLogMetadataSerde`` to the event we wrote, in order."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

from storage_core.checkpoint import topic_id_to_str
from storage_core.remote import (REMOTE_LOG_METADATA_TOPIC_NAME, RemoteLogSegmentId, RemoteLogSegmentMetadata,
                                 RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
                                 RemotePartitionDeleteMetadata, RemotePartitionDeleteState,
                                 TopicBasedRemoteLogMetadataManager)
from storage_core.log import Log

RUNNER = Path(__file__).resolve().with_name("rlmm_runner.py")
_spec = importlib.util.spec_from_file_location("kafkalog_rlmm_runner", RUNNER)
rlmm_runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rlmm_runner)


def _custom(value: bytes | None) -> str:
    return "Optional.empty" if value is None else f"Optional[CustomMetadata{{{len(value)} bytes}}]"


def kafka_to_string(event) -> str:
    """The ``toString`` of Kafka's metadata classes, which DumpLogSegments prints as the payload."""
    if isinstance(event, RemoteLogSegmentMetadata):
        sid = event.remote_log_segment_id
        epochs = ", ".join(f"{e}={o}" for e, o in event.segment_leader_epochs)
        return (f"RemoteLogSegmentMetadata{{remoteLogSegmentId=RemoteLogSegmentId{{topicIdPartition="
                f"{sid.topic_id_partition}, id={topic_id_to_str(sid.id)}}}, startOffset={event.start_offset}, "
                f"endOffset={event.end_offset}, brokerId={event.broker_id}, maxTimestampMs={event.max_timestamp_ms}, "
                f"eventTimestampMs={event.event_timestamp_ms}, segmentLeaderEpochs={{{epochs}}}, "
                f"segmentSizeInBytes={event.segment_size_in_bytes}, customMetadata={_custom(event.custom_metadata)}, "
                f"state={event.state.name}, txnIdxEmpty={str(event.txn_idx_empty).lower()}}}")
    if isinstance(event, RemoteLogSegmentMetadataUpdate):
        sid = event.remote_log_segment_id
        return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId=RemoteLogSegmentId{{topicIdPartition="
                f"{sid.topic_id_partition}, id={topic_id_to_str(sid.id)}}}, "
                f"customMetadata={_custom(event.custom_metadata)}, state={event.state.name}, "
                f"eventTimestampMs={event.event_timestamp_ms}, brokerId={event.broker_id}}}")
    assert isinstance(event, RemotePartitionDeleteMetadata)
    return (f"RemotePartitionDeleteMetadata{{topicPartition={event.topic_id_partition}, state={event.state.name}, "
            f"eventTimestampMs={event.event_timestamp_ms}, brokerId={event.broker_id}}}")


def test_kafkas_dump_log_segments_decodes_every_record_our_manager_wrote(kafka_jars, tmp_path):
    ops = rlmm_runner.operations(405, count=60)
    written: list = []
    with TopicBasedRemoteLogMetadataManager({"log.dir": str(tmp_path),
                                             "remote.log.metadata.topic.num.partitions": "5"}) as m:
        for op in ops:
            rlmm_runner.apply(m, op)
            written.append(op)
        # custom metadata, a transaction-index flag, and a partition's deletion records
        tip = rlmm_runner.TIPS[0]
        md = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), 10**6, 10**6 + 9,
                                      1700000000000, 3, 1700000000001, 777, {9: 10**6}, txn_idx_empty=True)
        m.add_remote_log_segment_metadata(md)
        u = RemoteLogSegmentMetadataUpdate(md.remote_log_segment_id, 1700000000002, b"\x00" * 17,
                                           RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 3)
        m.update_remote_log_segment_metadata(u)
        written += [md, u]
        for state in RemotePartitionDeleteState:
            d = RemotePartitionDeleteMetadata(tip, state, 1700000000003, 3)
            m.put_remote_partition_delete_metadata(d)
            written.append(d)
        partitions = {p: [kafka_to_string(e) for e in written if m.metadata_partition(e.topic_id_partition) == p]
                      for p in range(5)}
    files = []
    for p, expected in partitions.items():
        directory = tmp_path / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{p}"
        with Log.open(directory, read_only=True) as log:
            assert log.log_end_offset == len(expected)
        if expected:
            files.append((directory / "00000000000000000000.log", expected))
    assert len(files) >= 2
    done = subprocess.run(["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", f"{kafka_jars}/*",
                           "org.apache.kafka.tools.DumpLogSegments", "--remote-log-metadata-decoder",
                           "--print-data-log", "--files", ",".join(str(f) for f, _ in files)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    sections = done.stdout.split("Dumping ")[1:]
    assert len(sections) == len(files), done.stdout[:2000]
    for section, (path, expected) in zip(sections, files):
        assert section.startswith(str(path)), section[:200]
        batches = [line for line in section.splitlines() if line.startswith("baseOffset:")]
        records = [line for line in section.splitlines() if line.startswith("| offset:")]
        assert len(batches) == len(expected) and all("isvalid: true" in b for b in batches)
        assert all(" keySize: -1 " in r for r in records)                # null keys, as Kafka's producer writes
        assert [r.split(" payload: ", 1)[1] for r in records] == expected

"""TopicBasedRemoteLogMetadataManager over a real kafkalog ``__remote_log_metadata`` topic: every
state transition, what each state makes visible, lookups by leader epoch and offset as Kafka's
RemoteLogSegmentLifecycleTest and RemoteLogLeaderEpochState pin them, the state rebuilt by a new
instance (writer and read-only) from the topic alone, records a broker's producer would write
(idempotent, compressed, several a batch, a tombstone), bad records named by directory and offset,
and a writer process killed with SIGKILL mid-update (the topic's torn tail recovered by Log)."""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from storage_core.errors import (CorruptRemoteLogMetadataError, InvalidConfigError, InvalidRemoteLogMetadataError,
                                 KafkaLogError, LogLockedError, RemoteResourceNotFoundError)
from storage_core.format import RecordInput as Record, build_batch
from storage_core.log import Log
from storage_core.remote import (REMOTE_LOG_METADATA_TOPIC_NAME, RemoteLogMetadataManager,
                                 RemoteLogMetadataTopicPartitioner, RemoteLogSegmentId, RemoteLogSegmentMetadata,
                                 RemoteLogSegmentMetadataSnapshot, RemoteLogSegmentMetadataUpdate,
                                 RemoteLogSegmentState as S, RemotePartitionDeleteMetadata,
                                 RemotePartitionDeleteState as P, RemotePartitionMetadataStore,
                                 TopicBasedRemoteLogMetadataManager as Manager, TopicIdPartition, serialize)

RUNNER = Path(__file__).resolve().with_name("rlmm_runner.py")
_spec = importlib.util.spec_from_file_location("kafkalog_rlmm_runner", RUNNER)
rlmm_runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rlmm_runner)
TIP = TopicIdPartition(uuid.UUID(int=0x8C5F2CEFDB7D4AB1BF3CDAA5C2FEDB00), ("foo", 0))
REPO = Path(__file__).resolve().parents[2]
SEG_SIZE = 1024 * 1024


def writer(data_dir: Path, partitions: int | None = None) -> Manager:
    configs = {"log.dir": str(data_dir)}
    if partitions is not None:
        configs["remote.log.metadata.topic.num.partitions"] = str(partitions)
    return Manager(configs)


def reader(data_dir: Path) -> Manager:
    return Manager({"log.dir": str(data_dir)}, read_only=True)


def segment(start: int, end: int, epochs: dict[int, int], tip: TopicIdPartition = TIP,
            **kw) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), start, end, -1, 0, 1, SEG_SIZE, epochs, **kw)


def update(md: RemoteLogSegmentMetadata, state: S, custom: bytes | None = None) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(md.remote_log_segment_id, 2, custom, state, 1)


def upsert(m: Manager, md: RemoteLogSegmentMetadata, *states: S) -> RemoteLogSegmentMetadata:
    """Add ``md`` (COPY_SEGMENT_STARTED) then apply ``states``; the metadata Kafka then holds."""
    m.add_remote_log_segment_metadata(md)
    for state in states:
        u = update(md, state)
        m.update_remote_log_segment_metadata(u)
        md = md.create_with_updates(u)
    return md


def snapshot(m: Manager, tips, epochs=range(6), probe_offsets=()) -> dict:
    """Everything a caller can observe of the managers' state for ``tips``."""
    out = {}
    for tip in tips:
        listed = sorted(m.list_remote_log_segments(tip), key=lambda x: (x.start_offset, x.remote_log_segment_id.id))
        out[tip] = {
            "all": listed,
            "by_epoch": {e: list(m.list_remote_log_segments(tip, e)) for e in epochs},
            "highest": {e: m.highest_offset_for_epoch(tip, e) for e in epochs},
            "size": {e: m.remote_log_size(tip, e) for e in epochs},
            "lookup": {(e, o): m.remote_log_segment_metadata(tip, e, o) for e in epochs for o in probe_offsets},
            "deleted": m.remote_partition_delete_metadata(tip),
        }
    return out


def topic_end_offsets(data_dir: Path) -> dict[int, int]:
    ends = {}
    for path in sorted(data_dir.glob(f"{REMOTE_LOG_METADATA_TOPIC_NAME}-*")):
        with Log.open(path, read_only=True) as log:
            ends[int(path.name.rsplit("-", 1)[1])] = log.log_end_offset
    return ends


def topic_values(data_dir: Path, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
    with Log.open(data_dir / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{partition}", read_only=True) as log:
        t = log.read(0, max_bytes=1 << 30)
        return list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(), t.column("value").to_pylist()))


# ------------------------------------------------------------------------------ the protocol, the topic

def test_protocol_and_topic_layout(tmp_path):
    with writer(tmp_path) as m:
        assert isinstance(m, RemoteLogMetadataManager)
        md = segment(0, 99, {0: 0})
        m.add_remote_log_segment_metadata(md)
        dirs = sorted(p.name for p in tmp_path.glob(f"{REMOTE_LOG_METADATA_TOPIC_NAME}-*"))
        assert dirs == sorted(f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{n}" for n in range(50))     # Kafka's default
        # the record is in the partitioner's partition, with a null key and Kafka's serialized value
        partition = RemoteLogMetadataTopicPartitioner(50).metadata_partition(TIP)
        assert {p for p, end in topic_end_offsets(tmp_path).items() if end} == {partition}
        assert topic_values(tmp_path, partition) == [(0, None, serialize(md))]


def test_existing_topic_with_another_partition_count_or_a_missing_partition_is_refused(tmp_path):
    writer(tmp_path, partitions=3).close()
    with pytest.raises(InvalidConfigError, match="partition count 3 .*remote.log.metadata.topic.num.partitions"):
        writer(tmp_path, partitions=50)
    assert reader(tmp_path).partitioner.num_metadata_topic_partitions == 3       # read-only: counted on disk
    (tmp_path / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-1").rmdir()
    with pytest.raises(KafkaLogError, match=f"lacks partition directories {REMOTE_LOG_METADATA_TOPIC_NAME}-1"):
        reader(tmp_path)


def test_read_only_manager_writes_nothing_and_a_second_writer_is_locked_out(tmp_path):
    empty = reader(tmp_path / "nothing")
    assert list(empty.list_remote_log_segments(TIP)) == [] and empty.highest_offset_for_epoch(TIP, 0) is None
    assert not (tmp_path / "nothing").exists()
    with pytest.raises(KafkaLogError, match="read-only"):
        empty.add_remote_log_segment_metadata(segment(0, 9, {0: 0}))
    with writer(tmp_path) as m:
        m.add_remote_log_segment_metadata(segment(0, 9, {0: 0}))
        with pytest.raises(LogLockedError):
            writer(tmp_path).add_remote_log_segment_metadata(segment(10, 19, {0: 10}))


# ------------------------------------------------------------------------------ the state machine

VISIBLE_AFTER = {
    # state reached -> (readable by lookup, listed, highest offset of the epoch once FINISHED was passed)
    S.COPY_SEGMENT_STARTED: (False, True),
    S.COPY_SEGMENT_FINISHED: (True, True),
    S.DELETE_SEGMENT_STARTED: (False, True),
    S.DELETE_SEGMENT_FINISHED: (False, False),
}
PATHS = {None: (), S.COPY_SEGMENT_STARTED: (), S.COPY_SEGMENT_FINISHED: (S.COPY_SEGMENT_FINISHED,),
         S.DELETE_SEGMENT_STARTED: (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED),
         S.DELETE_SEGMENT_FINISHED: (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED)}


def check_visibility(m: Manager, md: RemoteLogSegmentMetadata, state: S | None, finished_once: bool) -> None:
    readable, listed = VISIBLE_AFTER[state] if state is not None else (False, False)
    assert m.remote_log_segment_metadata(TIP, 0, md.start_offset + 5) == (md if readable else None)
    assert (md in list(m.list_remote_log_segments(TIP))) is listed
    assert (md in list(m.list_remote_log_segments(TIP, 0))) is listed
    assert m.remote_log_size(TIP, 0) == (SEG_SIZE if listed else 0)
    # highestOffsetForEpoch counts only copies that finished, and never goes back
    assert m.highest_offset_for_epoch(TIP, 0) == (md.end_offset if finished_once else None)


@pytest.mark.parametrize("source", list(PATHS), ids=lambda s: "none" if s is None else s.name)
def test_every_transition_is_applied_or_refused_as_kafka_allows(tmp_path, source):
    for target in S:
        data_dir = tmp_path / target.name
        with writer(data_dir, partitions=1) as m:
            md = segment(100, 199, {0: 100})
            if source is not None:
                md = upsert(m, md, *PATHS[source])
            finished_once = S.COPY_SEGMENT_FINISHED in PATHS[source]
            ends = topic_end_offsets(data_dir)
            u = update(md, target)
            if target is S.COPY_SEGMENT_STARTED:
                with pytest.raises(InvalidRemoteLogMetadataError, match="should not have the state"):
                    m.update_remote_log_segment_metadata(u)
                expected, written = source, False
            elif source in (None, S.DELETE_SEGMENT_FINISHED):
                # never added, or forgotten once deleted
                with pytest.raises(RemoteResourceNotFoundError, match="No remote log segment metadata found"):
                    m.update_remote_log_segment_metadata(u)
                expected, written = source, False
            elif S.is_valid_transition(source, target):
                m.update_remote_log_segment_metadata(u)
                md = md.create_with_updates(u)
                expected, written = target, True
                finished_once = finished_once or target is S.COPY_SEGMENT_FINISHED
            else:
                with pytest.raises(InvalidRemoteLogMetadataError, match="can not be transitioned"):
                    m.update_remote_log_segment_metadata(u)
                expected, written = source, False
            after = topic_end_offsets(data_dir)
            assert after[0] == ends[0] + written          # a refused event writes nothing
            if expected is S.DELETE_SEGMENT_FINISHED:
                expected = None
            check_visibility(m, md, expected, finished_once)
            before = snapshot(m, [TIP], probe_offsets=(100, 150, 199, 200))
        # and a new instance reading the topic sees exactly the same
        assert snapshot(reader(data_dir), [TIP], probe_offsets=(100, 150, 199, 200)) == before


def test_add_is_only_for_copy_segment_started_and_not_over_a_later_state(tmp_path):
    with writer(tmp_path, partitions=1) as m:
        md = segment(0, 9, {0: 0})
        for state in (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED):
            with pytest.raises(InvalidRemoteLogMetadataError, match="should have state as COPY_SEGMENT_STARTED"):
                m.add_remote_log_segment_metadata(md.create_with_updates(update(md, state)))
        m.add_remote_log_segment_metadata(md)
        m.add_remote_log_segment_metadata(md)                     # STARTED -> STARTED: a state to itself
        finished = upsert(m, segment(10, 19, {0: 10}), S.COPY_SEGMENT_FINISHED)
        with pytest.raises(InvalidRemoteLogMetadataError, match="already in state COPY_SEGMENT_FINISHED"):
            m.add_remote_log_segment_metadata(RemoteLogSegmentMetadata(
                finished.remote_log_segment_id, 10, 19, -1, 0, 1, SEG_SIZE, {0: 10}))
        assert topic_end_offsets(tmp_path)[0] == 4


def test_orphan_copy_started_entries_are_listed_for_cleanup_but_never_readable(tmp_path):
    with writer(tmp_path) as m:
        done = upsert(m, segment(0, 99, {0: 0}), S.COPY_SEGMENT_FINISHED)
        orphan = segment(100, 199, {0: 100, 1: 150})                   # a copy killed half way
        m.add_remote_log_segment_metadata(orphan)
        retry = upsert(m, segment(100, 199, {0: 100, 1: 150}), S.COPY_SEGMENT_FINISHED)   # the copy retried
        for m2 in (m, reader(tmp_path)):
            for offset in (100, 149):
                assert m2.remote_log_segment_metadata(TIP, 0, offset) == retry
            assert m2.remote_log_segment_metadata(TIP, 1, 160) == retry
            assert {x.remote_log_segment_id for x in m2.list_remote_log_segments(TIP)} == {
                done.remote_log_segment_id, orphan.remote_log_segment_id, retry.remote_log_segment_id}
            assert [x.start_offset for x in m2.list_remote_log_segments(TIP, 1)] == [100, 100]
            assert m2.highest_offset_for_epoch(TIP, 1) == 199
        # an orphan alone: nothing of it readable, nothing counted as copied
        lone = segment(200, 299, {2: 200})
        m.add_remote_log_segment_metadata(lone)
        assert m.remote_log_segment_metadata(TIP, 2, 250) is None
        assert m.highest_offset_for_epoch(TIP, 2) is None
        assert list(m.list_remote_log_segments(TIP, 2)) == [lone]
        # cleaned up as the RemoteLogManager does: DELETE_STARTED, delete objects, DELETE_FINISHED
        upsert(m, lone, S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED)
        m.update_remote_log_segment_metadata(update(orphan, S.DELETE_SEGMENT_STARTED))
        m.update_remote_log_segment_metadata(update(orphan, S.DELETE_SEGMENT_FINISHED))
        assert sorted(x.start_offset for x in m.list_remote_log_segments(TIP)) == [0, 100]
        assert list(m.list_remote_log_segments(TIP, 2)) == []


# ------------------------------------------------------------------------------ lookups as Kafka pins them

def test_lookup_by_epoch_and_offset_as_kafkas_lifecycle_test(tmp_path):
    """RemoteLogSegmentLifecycleTest.testRemoteLogSegmentLifeCycle, in our words: four segments
    over epochs 0-4, one overlapping its predecessor; lookups inside and outside each epoch's
    range; deletion of the first; the highest offset per epoch."""
    probes = {(1, 40): 0, (2, 110): 1, (3, 240): 2, (3, 250): 3, (4, 375): 3,
              (1, 110): None, (4, 401): None, (5, 301): None, (0, 20): None, (2, 79): None}
    with writer(tmp_path) as m:
        s0 = segment(0, 100, {0: 0, 1: 20, 2: 80})
        m.add_remote_log_segment_metadata(s0)
        # still being copied: not readable, not counted
        assert m.remote_log_segment_metadata(TIP, 1, 40) is None
        assert all(m.highest_offset_for_epoch(TIP, e) is None for e in range(3))
        u = update(s0, S.COPY_SEGMENT_FINISHED)
        m.update_remote_log_segment_metadata(u)
        segs = [s0.create_with_updates(u),
                upsert(m, segment(101, 200, {2: 101}), S.COPY_SEGMENT_FINISHED),
                upsert(m, segment(201, 300, {2: 201, 3: 240}), S.COPY_SEGMENT_FINISHED),
                upsert(m, segment(250, 400, {3: 250, 4: 370}), S.COPY_SEGMENT_FINISHED)]
        for m2 in (m, reader(tmp_path)):
            for (epoch, offset), expected in probes.items():
                assert m2.remote_log_segment_metadata(TIP, epoch, offset) == (
                    None if expected is None else segs[expected]), (epoch, offset)
            assert [x.start_offset for x in m2.list_remote_log_segments(TIP, 3)] == [201, 250]
            assert m2.remote_log_size(TIP, 2) == 3 * SEG_SIZE
        m.update_remote_log_segment_metadata(update(segs[0], S.DELETE_SEGMENT_STARTED))
        assert m.remote_log_segment_metadata(TIP, 0, 10) is None
        assert segs[0].remote_log_segment_id in {x.remote_log_segment_id for x in m.list_remote_log_segments(TIP, 0)}
        m.update_remote_log_segment_metadata(update(segs[0], S.DELETE_SEGMENT_FINISHED))
        for m2 in (m, reader(tmp_path)):
            assert m2.remote_log_segment_metadata(TIP, 0, 10) is None
            assert list(m2.list_remote_log_segments(TIP, 0)) == []
            # highest offsets survive the deletion: they never go back
            assert {e: m2.highest_offset_for_epoch(TIP, e) for e in range(6)} == {
                0: 19, 1: 79, 2: 239, 3: 369, 4: 400, 5: None}


def test_a_new_leaders_copy_supersedes_an_earlier_copy_of_the_same_offsets(tmp_path):
    """RemoteLogLeaderEpochState's two cases: a duplicate copy (L0 copied 0-100, L1 copied 0-200
    of the same epoch) and overlapping copies (L0 10-90; L1 5-100 and 101-200)."""
    with writer(tmp_path) as m:
        tip = TopicIdPartition(TIP.topic_id, ("foo", 1))
        s0 = upsert(m, segment(0, 100, {0: 0}, tip), S.COPY_SEGMENT_FINISHED)
        s1 = upsert(m, segment(0, 200, {0: 0}, tip), S.COPY_SEGMENT_FINISHED)
        t0 = upsert(m, segment(10, 90, {5: 10}), S.COPY_SEGMENT_FINISHED)
        t1 = upsert(m, segment(5, 100, {5: 5}), S.COPY_SEGMENT_FINISHED)
        t2 = upsert(m, segment(101, 200, {5: 101}), S.COPY_SEGMENT_FINISHED)
        for m2 in (m, reader(tmp_path)):
            assert m2.remote_log_segment_metadata(tip, 0, 50) == s1
            assert m2.remote_log_segment_metadata(tip, 0, 150) == s1
            assert sorted(x.end_offset for x in m2.list_remote_log_segments(tip, 0)) == [100, 200]   # s0 kept
            assert m2.remote_log_segment_metadata(TIP, 5, 95) == t1
            assert m2.remote_log_segment_metadata(TIP, 5, 50) == t1
            assert m2.remote_log_segment_metadata(TIP, 5, 150) == t2
            assert t0 in list(m2.list_remote_log_segments(TIP, 5))     # unreferenced, still to clean up
            assert m2.highest_offset_for_epoch(TIP, 5) == 200
        assert s0 in list(m.list_remote_log_segments(tip))


def test_next_segment_with_txn_index_skips_segments_whose_index_is_empty(tmp_path):
    with writer(tmp_path) as m:
        a = upsert(m, segment(0, 99, {0: 0}, txn_idx_empty=True), S.COPY_SEGMENT_FINISHED)
        b = upsert(m, segment(100, 199, {0: 100}), S.COPY_SEGMENT_FINISHED)
        assert a.txn_idx_empty and not b.txn_idx_empty
        assert m.next_segment_with_txn_index(TIP, 0, 10) == b
        assert m.next_segment_with_txn_index(TIP, 0, 150) == b
        assert m.next_segment_with_txn_index(TIP, 0, 200) is None
        assert m.next_segment_with_txn_index(TIP, 1, 0) is None


def test_partition_deletion_states_and_what_it_leaves(tmp_path):
    with writer(tmp_path) as m:
        other = TopicIdPartition(TIP.topic_id, ("foo", 7))
        kept = upsert(m, segment(0, 9, {0: 0}, other), S.COPY_SEGMENT_FINISHED)
        segs = [upsert(m, segment(i * 10, i * 10 + 9, {0: i * 10}), S.COPY_SEGMENT_FINISHED) for i in range(3)]
        with pytest.raises(InvalidRemoteLogMetadataError, match="can not be transitioned"):
            m.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_STARTED, 3, 1))
        marked = RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_MARKED, 3, 1)
        m.put_remote_partition_delete_metadata(marked)
        assert m.remote_partition_delete_metadata(TIP) == marked
        with pytest.raises(InvalidRemoteLogMetadataError, match="can not be transitioned"):
            m.put_remote_partition_delete_metadata(
                RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_FINISHED, 4, 1))
        m.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_STARTED, 4, 1))
        for s in segs:
            m.update_remote_log_segment_metadata(update(s, S.DELETE_SEGMENT_STARTED))
        mid = snapshot(m, [TIP, other], probe_offsets=(0, 15))
        assert snapshot(reader(tmp_path), [TIP, other], probe_offsets=(0, 15)) == mid
        m.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_FINISHED, 5, 1))
        for m2 in (m, reader(tmp_path)):
            assert list(m2.list_remote_log_segments(TIP)) == [] and m2.remote_partition_delete_metadata(TIP) is None
            assert m2.highest_offset_for_epoch(TIP, 0) is None
            assert list(m2.list_remote_log_segments(other)) == [kept]       # another partition untouched


def test_partitions_sharing_a_metadata_partition_keep_their_own_state(tmp_path):
    """With one metadata partition every user partition's records interleave in it; a partition
    followed later, or stopped and followed again, is read from the first offset."""
    tips = [TopicIdPartition(uuid.UUID(int=i + 1), (f"t{i % 2}", i)) for i in range(4)]
    with writer(tmp_path, partitions=1) as m:
        m.on_partition_leadership_changes(tips[:2], [])
        assert all(m.is_ready(t) for t in tips[:2]) and not m.is_ready(tips[3])
        made = {t: [upsert(m, segment(k * 10, k * 10 + 9, {0: k * 10}, t), S.COPY_SEGMENT_FINISHED)
                    for k in range(3)] for t in tips[:3]}
        for t in tips[:3]:
            assert sorted(m.list_remote_log_segments(t), key=lambda x: x.start_offset) == made[t]
        assert list(m.list_remote_log_segments(tips[3])) == []
        m.on_stop_partitions([tips[0]])
        assert not m.is_ready(tips[0])
        assert m.remote_log_segment_metadata(tips[0], 0, 25) == made[tips[0]][2]     # read again from the topic
        ro = reader(tmp_path)
        ro.on_partition_leadership_changes([], [tips[1]])
        assert snapshot(ro, tips, probe_offsets=(5, 25)) == snapshot(m, tips, probe_offsets=(5, 25))


def test_refresh_reads_what_another_process_appended(tmp_path):
    with writer(tmp_path) as m:
        first = upsert(m, segment(0, 9, {0: 0}), S.COPY_SEGMENT_FINISHED)
        ro = reader(tmp_path)
        assert list(ro.list_remote_log_segments(TIP)) == [first]
        second = upsert(m, segment(10, 19, {0: 10}), S.COPY_SEGMENT_FINISHED)
        assert list(ro.list_remote_log_segments(TIP)) == [first]
        ro.refresh()
        assert sorted(ro.list_remote_log_segments(TIP), key=lambda x: x.start_offset) == [first, second]


# ------------------------------------------------------------------------------ a broker's records

def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def append_as_broker(data_dir: Path, partition: int, values: list[bytes | None], compression: int,
                     per_batch: int = 3) -> None:
    """What a broker's RLMM producer appends: idempotent batches (producer id, epoch,
    sequences), several records a batch, compressed, null keys."""
    with Log.open(data_dir / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{partition}") as log:
        seq = 0
        for i in range(0, len(values), per_batch):
            chunk = values[i:i + per_batch]
            log.append_raw(build_batch([Record(value=v, timestamp=1700000000000 + i) for v in chunk],
                                       compression=compression, producer_id=4000, producer_epoch=0,
                                       base_sequence=seq, partition_leader_epoch=0))
            seq += len(chunk)


@pytest.mark.parametrize("compression", [0, 1, 3, 4], ids=["none", "gzip", "lz4", "zstd"])
def test_reads_a_brokers_metadata_partitions_the_same_way(tmp_path, compression):
    reference = tmp_path / "ours"
    broker = tmp_path / "broker"
    events = []
    with writer(reference, partitions=3) as m:
        for k in range(4):
            md = segment(k * 100, k * 100 + 99, {k: k * 100})
            events.append(md)
            m.add_remote_log_segment_metadata(md)
            for state in (S.COPY_SEGMENT_FINISHED,) + ((S.DELETE_SEGMENT_STARTED,) if k == 0 else ()):
                events.append(update(md, state))
                m.update_remote_log_segment_metadata(events[-1])
        expected = snapshot(m, [TIP], probe_offsets=(0, 150, 399))
    for n in range(3):
        (broker / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{n}").mkdir(parents=True)
    partition = RemoteLogMetadataTopicPartitioner(3).metadata_partition(TIP)
    other = TopicIdPartition(uuid.UUID(int=99), ("bar", 0))
    noise = [serialize(segment(0, 5, {0: 0}, other))]
    # a tombstone (KIP-1266's, should a broker write them) is skipped
    values = noise + [serialize(events[0]), None] + [serialize(e) for e in events[1:]]
    append_as_broker(broker, partition, values, compression)
    before = tree(broker)
    ro = reader(broker)
    assert snapshot(ro, [TIP], probe_offsets=(0, 150, 399)) == expected
    # another partition's record in this metadata partition is skipped, not folded into TIP's
    # state; that partition's own state comes from its own metadata partition, where it is not
    assert RemoteLogMetadataTopicPartitioner(3).metadata_partition(other) != partition
    assert list(ro.list_remote_log_segments(other)) == []
    assert tree(broker) == before                 # read-only: nothing created, changed or removed


def test_records_kafka_drops_are_dropped_and_records_that_stop_kafka_fail_naming_where(tmp_path):
    partition = RemoteLogMetadataTopicPartitioner(1).metadata_partition(TIP)
    writer(tmp_path, partitions=1).close()
    md = segment(0, 9, {0: 0})
    unknown = segment(10, 19, {0: 10})
    dropped = [serialize(md), serialize(update(unknown, S.COPY_SEGMENT_FINISHED)),       # unknown segment
               serialize(update(md, S.DELETE_SEGMENT_FINISHED))]                         # STARTED -> DELETE_FINISHED
    append_as_broker(tmp_path, partition, dropped, 0)
    ro = reader(tmp_path)
    assert list(ro.list_remote_log_segments(TIP)) == [md]
    assert ro.remote_log_segment_metadata(TIP, 0, 5) is None

    directory = tmp_path / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{partition}"
    append_as_broker(tmp_path, partition, [serialize(md.create_with_updates(update(md, S.COPY_SEGMENT_FINISHED)))], 0)
    with pytest.raises(InvalidRemoteLogMetadataError, match=f"should have state as COPY_SEGMENT_STARTED.*{directory} "
                                                            f"at offset 3"):
        reader(tmp_path).list_remote_log_segments(TIP)

    bad = tmp_path / "bad"
    writer(bad, partitions=1).close()
    append_as_broker(bad, 0, [serialize(md), serialize(md)[:-3]], 0)
    with pytest.raises(CorruptRemoteLogMetadataError, match=f"{bad / (REMOTE_LOG_METADATA_TOPIC_NAME + '-0')} at "
                                                            f"offset 1"):
        reader(bad).list_remote_log_segments(TIP)

    snap = tmp_path / "snapshot-record"
    writer(snap, partitions=1).close()
    append_as_broker(snap, 0, [serialize(RemoteLogSegmentMetadataSnapshot(uuid.uuid4(), 0, 9, -1, 0, 1, 10, {0: 0}))],
                     0)
    with pytest.raises(InvalidRemoteLogMetadataError, match="RemoteLogSegmentMetadataSnapshot at .* offset 0"):
        reader(snap).list_remote_log_segments(TIP)


# ------------------------------------------------------------------------------ restart and SIGKILL

def fold(ops) -> RemotePartitionMetadataStore:
    """The state ``ops`` make, folded in memory (the reference for the crash test)."""
    store = RemotePartitionMetadataStore()
    for tip in rlmm_runner.TIPS:
        store.maybe_load_partition(tip)
        store.mark_initialized(tip)
    for op in ops:
        store.handle(op)
    return store


def store_view(store: RemotePartitionMetadataStore) -> dict:
    out = {}
    for tip in rlmm_runner.TIPS:
        cache = store.cache(tip)
        out[tip] = (sorted(cache.list_all_remote_log_segments(), key=lambda x: x.start_offset),
                    {e: cache.highest_offset_for_epoch(e) for e in range(4)},
                    {e: [x.remote_log_segment_id for x in cache.list_remote_log_segments(e)] for e in range(4)})
    return out


def manager_view(m: Manager) -> dict:
    out = {}
    for tip in rlmm_runner.TIPS:
        out[tip] = (sorted(m.list_remote_log_segments(tip), key=lambda x: x.start_offset),
                    {e: m.highest_offset_for_epoch(tip, e) for e in range(4)},
                    {e: [x.remote_log_segment_id for x in m.list_remote_log_segments(tip, e)] for e in range(4)})
    return out


def test_restart_rebuilds_the_same_state(tmp_path):
    ops = rlmm_runner.operations(7, count=120)
    with writer(tmp_path, partitions=5) as m:
        for op in ops:
            rlmm_runner.apply(m, op)
        live = manager_view(m)
    assert live == store_view(fold(ops))
    assert manager_view(writer(tmp_path, partitions=5)) == live
    assert manager_view(reader(tmp_path)) == live


def run_and_kill(data_dir: Path, seed: int, kill_after: int) -> int:
    """Start the writer process, SIGKILL it once it acknowledged ``kill_after`` operations;
    returns how many it acknowledged. It is let start ``kill_after + 1`` operations, so the kill
    lands before, in or after the one past the last acknowledged, never later."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, str(RUNNER), str(data_dir), str(seed)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    acked = 0
    try:
        proc.stdin.write("go\n" * (kill_after + 1))     # stdin stays open: the writer then waits
        proc.stdin.flush()
        for line in proc.stdout:
            assert line.startswith("acked "), line
            acked = int(line.split()[1]) + 1
            if acked >= kill_after:
                os.kill(proc.pid, signal.SIGKILL)       # mid-way through the next append and fsync
                break
    finally:
        if proc.poll() is None and acked < kill_after:
            proc.kill()
        proc.wait(timeout=60)
        proc.stdin.close()
        err = proc.stderr.read()
    assert proc.returncode == -signal.SIGKILL, err[-3000:]
    return acked


@pytest.mark.parametrize("trial", range(4))
def test_writer_killed_mid_update_then_rebuild_gives_the_last_durable_state(tmp_path, trial):
    rnd = random.Random(1900 + trial)
    seed = rnd.randrange(1 << 30)
    ops = rlmm_runner.operations(seed)
    acked = run_and_kill(tmp_path, seed, rnd.randint(5, 150))
    if trial % 2:
        # fault injection: a torn tail, as a write cut short by a crash leaves it (the first
        # half of a copy of the partition's last batch, appended to its active segment)
        partition = max(topic_end_offsets(tmp_path).items(), key=lambda kv: kv[1])[0]
        directory = tmp_path / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{partition}"
        log_file = max(directory.glob("*.log"))
        data = log_file.read_bytes()
        with Log.open(directory, read_only=True) as log:
            last = log.read_raw(log.log_end_offset - 1)
        with open(log_file, "ab") as f:
            f.write(last[:len(last) // 2])
        torn_size = len(data) + len(last) // 2
    m = writer(tmp_path, partitions=5)
    try:
        rebuilt = manager_view(m)
        if trial % 2:
            # the writer's open of the partition (Log's recovery) truncated the torn tail
            assert log_file.stat().st_size == len(data) < torn_size
        # every acknowledged update is there; the one in flight at most in addition
        candidates = {n: store_view(fold(ops[:n])) for n in (acked, acked + 1)}
        assert rebuilt in candidates.values(), f"acked {acked}: the rebuilt state is no prefix of the updates"
        # and the manager goes on writing after the recovery
        applied = next(n for n, view in candidates.items() if view == rebuilt)
        for op in ops[applied:applied + 10]:
            rlmm_runner.apply(m, op)
        assert manager_view(m) == store_view(fold(ops[:applied + 10]))
    finally:
        m.close()
    assert manager_view(reader(tmp_path)) == store_view(fold(ops[:applied + 10]))


# ------------------------------------------------------------------------------ configuration

def test_configured_as_kafka_configures_the_plugin(tmp_path):
    from storage_core.remote import TopicBasedRemoteLogMetadataManagerConfig as Config
    config = Config.from_broker_properties({
        "log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}", "rlmm.config.remote.log.metadata.topic.num.partitions": "7",
        "rlmm.config.remote.log.metadata.topic.retention.ms": "-1", "remote.log.metadata.topic.num.partitions": "9"})
    assert (config.log_dir, config.num_metadata_topic_partitions, config.retention_ms) == (tmp_path / "a", 7, -1)
    custom = Config.from_broker_properties({"remote.log.metadata.manager.impl.prefix": "x.", "log.dir": str(tmp_path),
                                            "x.remote.log.metadata.topic.num.partitions": "2"})
    assert custom.num_metadata_topic_partitions == 2
    with writer(tmp_path / "a", partitions=7):
        pass
    assert len(list((tmp_path / "a").glob(f"{REMOTE_LOG_METADATA_TOPIC_NAME}-*"))) == 7
    for bad, key in (({}, "log.dir"),
                     ({"log.dir": "d", "remote.log.metadata.topic.num.partitions": "x"},
                      "remote.log.metadata.topic.num.partitions"),
                     ({"log.dir": "d", "remote.log.metadata.topic.num.partitions": "0"},
                      "remote.log.metadata.topic.num.partitions"),
                     ({"log.dir": "d", "remote.log.metadata.topic.retention.ms": "-5"},
                      "remote.log.metadata.topic.retention.ms")):
        with pytest.raises(InvalidConfigError, match=key):
            Config.from_configs(bad)

"""Kafka's remote log metadata objects, RemoteLogMetadataSerde's bytes and the metadata topic's
partitioner: the worked vectors of Kafka's generated code, Kafka's constructor checks, and
hostile values (bounded, failing loudly with the byte position)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_core.checkpoint import topic_id_from_str
from storage_core.errors import KafkaLogError, UnsupportedFormatError
from storage_core.remote import (CorruptRemoteLogMetadataError, InvalidRemoteLogMetadataError,
                                 RemoteLogMetadataSerde, RemoteLogMetadataTopicPartitioner,
                                 RemoteLogSegmentId, RemoteLogSegmentMetadata,
                                 RemoteLogSegmentMetadataSnapshot, RemoteLogSegmentMetadataUpdate,
                                 RemoteLogSegmentState, RemotePartitionDeleteMetadata,
                                 RemotePartitionDeleteState, TopicIdPartition, deserialize,
                                 serialize)

S = RemoteLogSegmentState
D = RemotePartitionDeleteState
TOPIC_ID = topic_id_from_str("jF8s79t9SrG_PNqlwv7bAA")
SEGMENT_ID = topic_id_from_str("knnxbs3FSRyKdPcSAOQC-w")
TIP = TopicIdPartition(TOPIC_ID, ("tieredTopic", 0))
SID = RemoteLogSegmentId(TIP, SEGMENT_ID)


def worked_metadata(txn_idx_empty: bool = True) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(SID, 0, 99, 1700000000000, 1, 1700000001000, 1048576, {0: 0}, None,
                                    S.COPY_SEGMENT_STARTED, txn_idx_empty)


def h(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts).replace(" ", ""))


# the worked example, line by line as the reference lays it out
TIP_ENTRY = h("0c 746965726564546f706963", "8c5f2cefdb7d4ab1 bf3cdaa5c2fedb00", "00000000 00")
SEGMENT_ID_ENTRY = TIP_ENTRY + h("9279f16ecdc5491c 8a74f71200e402fb 00")
WORKED = (h("01 00 00") + SEGMENT_ID_ENTRY
          + h("0000000000000000 0000000000000063", "00000001", "0000018bcfe56800 0000018bcfe56be8",
              "02 00000000 0000000000000000 00", "00100000 00 00", "01 00 01 01"))


# ------------------------------------------------------------------------------ the objects

def test_segment_state_ids_and_every_transition_as_kafka_allows():
    assert [(s.name, s.id) for s in S] == [("COPY_SEGMENT_STARTED", 0), ("COPY_SEGMENT_FINISHED", 1),
                                           ("DELETE_SEGMENT_STARTED", 2), ("DELETE_SEGMENT_FINISHED", 3)]
    allowed = {(None, 0), (0, 1), (0, 2), (1, 2), (2, 3), (0, 0), (1, 1), (2, 2), (3, 3)}
    for src in (None, *S):
        for dst in S:
            key = (None if src is None else src.id, dst.id)
            assert S.is_valid_transition(src, dst) == (key in allowed), key
    with pytest.raises(InvalidRemoteLogMetadataError, match="unknown RemoteLogSegmentState id 4"):
        S.for_id(4)


def test_partition_delete_state_ids_and_transitions():
    assert [(s.name, s.id) for s in D] == [("DELETE_PARTITION_MARKED", 0), ("DELETE_PARTITION_STARTED", 1),
                                           ("DELETE_PARTITION_FINISHED", 2)]
    allowed = {(None, 0), (0, 1), (1, 2), (0, 0), (1, 1), (2, 2)}
    for src in (None, *D):
        for dst in D:
            key = (None if src is None else src.id, dst.id)
            assert D.is_valid_transition(src, dst) == (key in allowed), key


def test_segment_metadata_checks_as_kafkas_constructor():
    def make(**kw):
        args = dict(remote_log_segment_id=SID, start_offset=0, end_offset=9, max_timestamp_ms=1, broker_id=1,
                    event_timestamp_ms=2, segment_size_in_bytes=10, segment_leader_epochs={0: 0})
        args.update(kw)
        return RemoteLogSegmentMetadata(**args)

    with pytest.raises(InvalidRemoteLogMetadataError, match="Unexpected start offset = -1"):
        make(start_offset=-1)
    with pytest.raises(InvalidRemoteLogMetadataError, match="endOffset: 4 cannot be less than startOffset: 5"):
        make(start_offset=5, end_offset=4)
    with pytest.raises(InvalidRemoteLogMetadataError, match="segmentLeaderEpochs can not be null or empty"):
        make(segment_leader_epochs={})
    with pytest.raises(InvalidRemoteLogMetadataError, match="remoteLogSegmentId can not be null"):
        make(remote_log_segment_id=None)
    with pytest.raises(InvalidRemoteLogMetadataError, match="segmentSizeInBytes"):
        make(segment_size_in_bytes=2**31)
    with pytest.raises(InvalidRemoteLogMetadataError, match="state can not be null"):
        make(state=None)
    assert issubclass(InvalidRemoteLogMetadataError, KafkaLogError)
    # a TreeMap: ascending epochs whatever order they came in
    m = make(segment_leader_epochs={5: 7, 2: 3, 3: 5})
    assert m.segment_leader_epochs == ((2, 3), (3, 5), (5, 7)) and m.leader_epochs == {2: 3, 3: 5, 5: 7}
    assert m == make(segment_leader_epochs=[(2, 3), (5, 7), (3, 5)])
    assert hash(m) == hash(make(segment_leader_epochs=[(2, 3), (5, 7), (3, 5)]))


def test_create_with_updates_takes_state_broker_time_and_custom_metadata_from_the_update():
    m = worked_metadata()
    u = RemoteLogSegmentMetadataUpdate(SID, 1700000002000, b"\x01\x02", S.COPY_SEGMENT_FINISHED, 7)
    n = m.create_with_updates(u)
    assert (n.state, n.broker_id, n.event_timestamp_ms, n.custom_metadata) == (S.COPY_SEGMENT_FINISHED, 7,
                                                                              1700000002000, b"\x01\x02")
    assert (n.start_offset, n.end_offset, n.max_timestamp_ms, n.segment_size_in_bytes, n.segment_leader_epochs,
            n.txn_idx_empty) == (0, 99, 1700000000000, 1048576, ((0, 0),), True)
    other = RemoteLogSegmentId(TIP, uuid.UUID(int=5))
    with pytest.raises(InvalidRemoteLogMetadataError, match="does not have this instance's remoteLogSegmentId"):
        m.create_with_updates(RemoteLogSegmentMetadataUpdate(other, 1, None, S.COPY_SEGMENT_FINISHED, 1))


def test_generate_new_gives_a_fresh_id_per_copy_attempt():
    ids = {RemoteLogSegmentId.generate_new(TIP).id for _ in range(50)}
    assert len(ids) == 50 and all(i.int > 1 for i in ids)


# ------------------------------------------------------------------------------ the serde

def test_worked_example_byte_exact():
    assert len(WORKED) == 113
    assert serialize(worked_metadata()) == WORKED
    assert deserialize(WORKED) == worked_metadata()
    assert RemoteLogMetadataSerde().deserialize(RemoteLogMetadataSerde().serialize(worked_metadata())) == \
        worked_metadata()


def test_worked_example_without_txn_index_empty_update_and_partition_delete():
    not_empty = serialize(worked_metadata(txn_idx_empty=False))
    assert len(not_empty) == 110 and not_empty == WORKED[:-4] + h("00")
    assert deserialize(not_empty).txn_idx_empty is False

    update = RemoteLogSegmentMetadataUpdate(SID, 1700000002000, None, S.COPY_SEGMENT_FINISHED, 1)
    expected = h("010100") + SEGMENT_ID_ENTRY + h("00000001 0000018bcfe56fd0 00 01 00")
    assert len(SEGMENT_ID_ENTRY) == 50 and len(expected) == 68
    assert serialize(update) == expected and deserialize(expected) == update

    delete = RemotePartitionDeleteMetadata(TIP, D.DELETE_PARTITION_MARKED, 1700000003000, 1)
    expected = h("010200") + TIP_ENTRY + h("00000001 0000018bcfe573b8 00 00")
    assert len(TIP_ENTRY) == 33 and len(expected) == 50
    assert serialize(delete) == expected and deserialize(expected) == delete


def test_every_record_type_round_trips_with_custom_metadata_and_many_epochs():
    m = RemoteLogSegmentMetadata(RemoteLogSegmentId(TopicIdPartition(uuid.UUID(int=2**127 + 3), ("a.b_c-d", 17)),
                                                    uuid.UUID(int=2**128 - 1)),
                                 100, 2**40, -1, -5, 2**62, 2**31 - 1, {3: 100, 4: 150, 9: 2**39}, b"\x00" * 200,
                                 S.DELETE_SEGMENT_FINISHED, False)
    snap = RemoteLogSegmentMetadataSnapshot(SEGMENT_ID, 5, 9, 11, 2, 12, 300, [(1, 5), (2, 7)], b"",
                                            S.COPY_SEGMENT_FINISHED, True)
    upd = RemoteLogSegmentMetadataUpdate(m.remote_log_segment_id, 77, b"abc", S.DELETE_SEGMENT_STARTED, 3)
    dele = RemotePartitionDeleteMetadata(m.topic_id_partition, D.DELETE_PARTITION_FINISHED, 78, 4)
    for record in (m, snap, upd, dele):
        assert deserialize(serialize(record)) == record
    assert serialize(snap)[:3] == h("010300")
    # empty custom metadata is not absent: compact bytes length 1 against 0 for null
    assert deserialize(serialize(snap)).custom_metadata == b""


@settings(max_examples=30, deadline=None)
@given(start=st.integers(0, 2**62), length=st.integers(0, 2**20), size=st.integers(-2**31, 2**31 - 1),
       epochs=st.dictionaries(st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1), min_size=1,
                              max_size=20),
       custom=st.none() | st.binary(max_size=300), state=st.sampled_from(list(S)), txn=st.booleans(),
       topic=st.text(min_size=1, max_size=40), partition=st.integers(-2**31, 2**31 - 1))
def test_segment_metadata_round_trip_property(start, length, size, epochs, custom, state, txn, topic, partition):
    tip = TopicIdPartition(uuid.UUID(int=start * 7 + 1), (topic, partition))
    m = RemoteLogSegmentMetadata(RemoteLogSegmentId(tip, uuid.UUID(int=length + 2)), start, start + length, length,
                                 partition, start, size, epochs, custom, state, txn)
    data = serialize(m)
    assert deserialize(data) == m


def test_unknown_frame_api_key_and_version_fail_naming_them():
    with pytest.raises(UnsupportedFormatError, match="unknown frame version 0"):
        deserialize(h("00") + WORKED[1:])
    with pytest.raises(UnsupportedFormatError, match="apiKey 7"):
        deserialize(h("010700") + WORKED[3:])
    with pytest.raises(UnsupportedFormatError, match=r"RemoteLogSegmentMetadataRecord \(apiKey 0\) version 1"):
        deserialize(h("010001") + WORKED[3:])
    with pytest.raises(UnsupportedFormatError, match="apiKey 200"):
        deserialize(h("01c80100"))                       # a two-byte varint apiKey


def test_every_truncation_fails_with_its_position_and_trailing_bytes_are_refused():
    for cut in range(len(WORKED)):
        with pytest.raises((CorruptRemoteLogMetadataError, UnsupportedFormatError)) as e:
            deserialize(WORKED[:cut], source="__remote_log_metadata-30 offset 4")
        if isinstance(e.value, CorruptRemoteLogMetadataError):
            assert e.value.position is not None and e.value.position <= cut
            assert "__remote_log_metadata-30 offset 4" in str(e.value)
    with pytest.raises(CorruptRemoteLogMetadataError, match="1 trailing bytes") as e:
        deserialize(WORKED + b"\x00")
    assert e.value.position == 113
    with pytest.raises(CorruptRemoteLogMetadataError, match="null record value"):
        deserialize(None)


def test_claimed_lengths_beyond_the_value_are_refused_before_any_allocation():
    # Name claims 2**32 - 2 bytes: one uvarint of 5 bytes at position 3
    huge = h("010000") + h("ffffffff0f") + WORKED[15:]
    with pytest.raises(CorruptRemoteLogMetadataError, match="position 3") as e:
        deserialize(huge)
    assert "not a Java int" in str(e.value) or "needs" in str(e.value)
    big_string = h("010000") + h("feff03") + b"x" * 10      # 65533 bytes claimed, 10 there
    with pytest.raises(CorruptRemoteLogMetadataError, match="invalid length 65533.*position 3"):
        deserialize(big_string)
    short = h("010000") + h("ff7f") + b"x" * 10              # 16382 bytes claimed
    with pytest.raises(CorruptRemoteLogMetadataError, match="needs 16382 bytes but the value has 10 left"):
        deserialize(short)
    # SegmentLeaderEpochs claims 100 million entries
    epochs_at = len(h("010000") + SEGMENT_ID_ENTRY) + 8 + 8 + 4 + 8 + 8
    bad = WORKED[:epochs_at] + h("81c2d72f") + WORKED[epochs_at + 1:]
    with pytest.raises(CorruptRemoteLogMetadataError, match=f"claims 100000000 elements.*position {epochs_at}"):
        deserialize(bad)
    with pytest.raises(CorruptRemoteLogMetadataError, match="varint longer than 5 bytes"):
        deserialize(h("010000") + h("ffffffffff01"))
    # CustomMetadata claims 1 GiB
    custom_at = len(WORKED) - 6
    with pytest.raises(CorruptRemoteLogMetadataError, match="CustomMetadata needs 1073741824 bytes"):
        deserialize(WORKED[:custom_at] + h("8180808004") + WORKED[custom_at + 1:])


def test_unknown_tagged_fields_are_skipped_everywhere_and_a_bad_known_one_is_refused():
    # an unknown tag 5 (3 bytes) in the TopicIdPartitionEntry, and tag 9 after TxnIndexEmpty at the end
    tagged_tip = TIP_ENTRY[:-1] + h("01 05 03 aabbcc")
    data = (h("010000") + tagged_tip + SEGMENT_ID_ENTRY[len(TIP_ENTRY):] + WORKED[3 + len(SEGMENT_ID_ENTRY):-4]
            + h("02 00 01 01 09 02 ffff"))
    assert deserialize(data) == worked_metadata()
    with pytest.raises(CorruptRemoteLogMetadataError, match="tag 0: size 2 does not match"):
        deserialize(WORKED[:-4] + h("01 00 02 0101"))
    with pytest.raises(CorruptRemoteLogMetadataError, match="tags must be ascending"):
        deserialize(WORKED[:-4] + h("02 00 01 01 00 01 01"))
    with pytest.raises(CorruptRemoteLogMetadataError, match="claims 200 bytes"):
        deserialize(WORKED[:-4] + h("01 07 c801 00"))


def test_values_kafkas_constructors_refuse_are_corrupt_records():
    state_at = len(WORKED) - 5
    with pytest.raises(CorruptRemoteLogMetadataError, match=f"RemoteLogSegmentState id 9.*position {state_at}"):
        deserialize(WORKED[:state_at] + h("09") + WORKED[state_at + 1:])
    epochs_at = len(h("010000") + SEGMENT_ID_ENTRY) + 36
    no_epochs = WORKED[:epochs_at] + h("01") + WORKED[epochs_at + 14:]
    with pytest.raises(CorruptRemoteLogMetadataError, match="segmentLeaderEpochs can not be null or empty"):
        deserialize(no_epochs)
    with pytest.raises(CorruptRemoteLogMetadataError, match="non-nullable field TopicIdPartition.Name"):
        deserialize(h("010000 00") + WORKED[4:])


# ------------------------------------------------------------------------------ the partitioner

def test_metadata_partition_vectors():
    partitioner = RemoteLogMetadataTopicPartitioner(50)
    assert [partitioner.metadata_partition(TopicIdPartition(TOPIC_ID, ("tieredTopic", p))) for p in range(3)] == \
        [30, 24, 13]
    # the topic name plays no part: only the id and the partition
    assert partitioner.metadata_partition(TopicIdPartition(TOPIC_ID, ("other", 0))) == 30
    assert RemoteLogMetadataTopicPartitioner(1).metadata_partition(TIP) == 0
    with pytest.raises(KafkaLogError, match="remote.log.metadata.topic.num.partitions"):
        RemoteLogMetadataTopicPartitioner(0)

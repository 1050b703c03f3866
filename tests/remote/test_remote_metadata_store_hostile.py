"""Hostile objects in the remote log metadata mirrored into a store (a local folder here, opened
as ``storage.uri`` is): truncated, empty, huge, wrong frame/apiKey/version bytes, garbage, a
directory or FIFO under an event's name, names and prefixes that do not parse. Every case fails
the read with an error of the project's hierarchy naming the object (and the byte position for
bytes), never a raw Python exception, never a hang, never memory sized by a name or a claim."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_core.checkpoint import TopicPartition
from storage_core.errors import CorruptRemoteLogMetadataError, KafkaLogError, UnsupportedFormatError
from storage_core.remote import (METADATA_DIR_NAME, RemoteLogMetadataStoreReader, RemoteLogSegmentId,
                                 RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
                                 TopicIdPartition)
from storage_core.remote.remote_log_metadata_store import MAX_OBJECT_BYTES, RemoteLogMetadataStore

SEGMENTS = 2                 # objects 0..3: STARTED, FINISHED of each segment


def build_store(root: Path) -> tuple[TopicIdPartition, Path]:
    """A partition's metadata as the writer mirrors it: (the partition, its prefix folder)."""
    store = RemoteLogMetadataStore(pafs.LocalFileSystem(), str(root), str(root))
    tip = TopicIdPartition(uuid.UUID(int=0x1234), TopicPartition("t", 0))
    for i in range(SEGMENTS):
        sid = RemoteLogSegmentId(tip, uuid.UUID(int=i + 1))
        store.publish(tip, RemoteLogSegmentMetadata(sid, i * 10, i * 10 + 9, 1, 0, 1, 100, ((0, i * 10),)))
        store.publish(tip, RemoteLogSegmentMetadataUpdate(sid, 2, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                                                          0))
    return tip, Path(store.partition_path(tip))


def event(prefix: Path, sequence: int) -> Path:
    return prefix / f"{sequence:020d}.metadata"


def read_state(root: Path, tip: TopicIdPartition):
    return RemoteLogMetadataStoreReader({"storage.uri": str(root)}).state(tip)


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    tip, prefix = build_store(root)
    assert len(read_state(root, tip).segments) == SEGMENTS
    return root, tip, prefix


def _sparse(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def _swap_for_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _swap_for_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


# (name, damage(prefix) -> the object the error must name, error class, text the error must hold)
DAMAGES = [
    ("empty", lambda p: (event(p, 1).write_bytes(b""), event(p, 1))[1],
     CorruptRemoteLogMetadataError, "position 0"),
    ("truncated", lambda p: (event(p, 2).write_bytes(event(p, 2).read_bytes()[:30]), event(p, 2))[1],
     CorruptRemoteLogMetadataError, "position "),
    ("trailing bytes", lambda p: (event(p, 0).write_bytes(event(p, 0).read_bytes() + b"\0"), event(p, 0))[1],
     CorruptRemoteLogMetadataError, "trailing"),
    ("garbage", lambda p: (event(p, 1).write_bytes(b"\x01\x00\x00\xff\xff\xff\xff\x0f"), event(p, 1))[1],
     CorruptRemoteLogMetadataError, "position 3"),
    ("frame version", lambda p: (event(p, 1).write_bytes(b"\x02" + event(p, 1).read_bytes()[1:]), event(p, 1))[1],
     UnsupportedFormatError, "frame version 2"),
    ("apiKey", lambda p: (event(p, 1).write_bytes(b"\x01\x09" + event(p, 1).read_bytes()[2:]), event(p, 1))[1],
     UnsupportedFormatError, "apiKey 9"),
    ("message version", lambda p: (event(p, 1).write_bytes(b"\x01\x01\x01" + event(p, 1).read_bytes()[3:]),
                                   event(p, 1))[1],
     UnsupportedFormatError, "version 1"),
    ("huge sparse", lambda p: (_sparse(event(p, 2), 1 << 40), event(p, 2))[1],
     CorruptRemoteLogMetadataError, str(1 << 40)),
    ("one byte too large", lambda p: (_sparse(event(p, 2), MAX_OBJECT_BYTES + 1), event(p, 2))[1],
     CorruptRemoteLogMetadataError, str(MAX_OBJECT_BYTES)),
    # skipped, the directory would leave the state silently without its last event
    ("directory as the last event", lambda p: (_swap_for_dir(event(p, 3)), event(p, 3))[1],
     CorruptRemoteLogMetadataError, "not a file (directory)"),
    ("directory as an event", lambda p: (_swap_for_dir(event(p, 1)), event(p, 1))[1],
     CorruptRemoteLogMetadataError, "not a file"),
    # opened, a FIFO would block the reader forever
    ("FIFO as the last event", lambda p: (_swap_for_fifo(event(p, 3)), event(p, 3))[1],
     CorruptRemoteLogMetadataError, "not a file"),
    ("non-ASCII digits", lambda p: ((p / ("\u0664" * 20 + ".metadata")).write_bytes(b"x"),
                                    p / ("\u0664" * 20 + ".metadata"))[1],
     CorruptRemoteLogMetadataError, "Unknown object"),
    ("21 digits", lambda p: ((p / ("1" * 21 + ".metadata")).write_bytes(b"x"), p / ("1" * 21 + ".metadata"))[1],
     CorruptRemoteLogMetadataError, "Unknown object"),
    ("other name", lambda p: ((p / "00000000000000000004.metadata.tmp").write_bytes(b"x"),
                              p / "00000000000000000004.metadata.tmp")[1],
     CorruptRemoteLogMetadataError, "Unknown object"),
    # the gap up to a far sequence is named by its first missing objects, never built as a range
    ("far sequence", lambda p: (event(p, 3).rename(event(p, 10 ** 20 - 1)), event(p, 3))[1],
     KafkaLogError, "lacks event objects"),
]


@pytest.mark.parametrize("name, damage, error, text", DAMAGES, ids=[d[0] for d in DAMAGES])
def test_a_damaged_event_object_fails_the_read_naming_it(store, name, damage, error, text):
    root, tip, prefix = store
    bad = damage(prefix)
    with pytest.raises(error) as e:
        read_state(root, tip)
    message = str(e.value)
    assert bad.name in message and text in message, message
    if error is not KafkaLogError:
        assert isinstance(e.value, KafkaLogError)


@pytest.mark.parametrize("entry, kind", [
    ("t-99999999999-AAAAAAAAAAAAAAAAAAAAAA", "dir"),        # partition beyond a Java int
    ("t-\u0664-AAAAAAAAAAAAAAAAAAAAAA", "dir"),              # a non-ASCII digit
    ("t-+1-AAAAAAAAAAAAAAAAAAAAAA", "dir"),
    ("..-1-AAAAAAAAAAAAAAAAAAAAAA", "dir"),                  # a topic Kafka refuses
    ("t\u00e9-1-AAAAAAAAAAAAAAAAAAAAAA", "dir"),
    ("t-1-AAAA", "dir"),                                     # no topic id
    ("t-1-AAAAAAAAAAAAAAAAAAAAAA", "file"),                  # an object where a prefix should be
    ("notes.txt", "file"),
])
def test_an_entry_of_the_metadata_root_that_is_no_partition_prefix_fails_naming_it(store, entry, kind):
    root, _, _ = store
    path = root / METADATA_DIR_NAME / entry
    if kind == "dir":
        path.mkdir()
    else:
        path.write_bytes(b"x")
    with pytest.raises(CorruptRemoteLogMetadataError) as e:
        RemoteLogMetadataStoreReader({"storage.uri": str(root)}).partitions()
    assert entry in str(e.value)


def test_a_prefix_that_is_a_file_fails_naming_it(store):
    root, tip, prefix = store
    shutil.rmtree(prefix)
    prefix.write_bytes(b"x")
    with pytest.raises(KafkaLogError, match=prefix.name):
        read_state(root, tip)


def test_a_sub_prefix_with_another_name_is_not_an_event(store):
    """S3 lists a deeper key's prefix as a directory: not an event, not in the way."""
    root, tip, prefix = store
    (prefix / "archive").mkdir()
    assert len(read_state(root, tip).segments) == SEGMENTS


# ------------------------------------------------------------------------------ fuzz

@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz") / "store"
    tip, prefix = build_store(root)
    return root, tip, prefix, {s: event(prefix, s).read_bytes() for s in range(2 * SEGMENTS)}


@st.composite
def damaged(draw):
    sequence = draw(st.integers(0, 2 * SEGMENTS - 1))
    return sequence, draw(st.one_of(
        st.binary(max_size=80),                                               # garbage
        st.tuples(st.just("cut"), st.integers(0, 200)),
        st.tuples(st.just("set"), st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1,
                                           max_size=4)),
        st.tuples(st.just("insert"), st.integers(0, 200), st.binary(min_size=1, max_size=6)),
    ))


def apply(original: bytes, change) -> bytes:
    if isinstance(change, bytes):
        return change
    data = bytearray(original)
    if change[0] == "cut":
        return bytes(data[:change[1] % (len(data) + 1)])
    if change[0] == "set":
        for pos, value in change[1]:
            data[pos % len(data)] = value
        return bytes(data)
    pos = change[1] % (len(data) + 1)
    return bytes(data[:pos] + change[2] + data[pos:])


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=damaged())
def test_fuzz_event_bytes_give_a_state_or_an_error_naming_the_object(pristine, case):
    root, tip, prefix, originals = pristine
    sequence, change = case
    target = event(prefix, sequence)
    target.write_bytes(apply(originals[sequence], change))
    try:
        state = read_state(root, tip)
    except KafkaLogError as e:
        assert target.name in str(e), str(e)
    else:
        assert len(state.segments) <= SEGMENTS
    finally:
        target.write_bytes(originals[sequence])

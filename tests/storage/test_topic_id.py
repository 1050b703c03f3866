"""Topic ids (KIP-516) in ``partition.metadata``, as ``UnifiedLog`` and ``LogManager`` keep them:
written when a log is created with an id (before any data), read back on every open, refused
when another id is given for the same directory, carried along when the directory is renamed
``-delete`` or ``-future``, never written by a reader.

The file format itself (bytes, parser refusals) is tested in test_checkpoints.py; each test here
names the Kafka test it mirrors (kafka_test_checklist.md, "partition.metadata" lines).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.checkpoint import (PARTITION_METADATA_FILE, CorruptCheckpointError,
                                      PartitionMetadataFile, log_future_dir_name, random_topic_id,
                                      topic_id_from_str, topic_id_to_str)
from storage_core.config import LogConfig
from storage_core.errors import InconsistentTopicIdError, KafkaLogError
from storage_core.log import Log
from storage_core.server import LogManager

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures"
BROKER_DIR = (FIXTURES / "pinterest-tiered-storage" / "ts-common" / "src" / "test" / "resources"
              / "log-files" / "timeindex_test")
BROKER_TOPIC_ID = "p59PN4qkR8y176nhuDDPPA"      # that directory's partition.metadata


def tree(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def append(log: Log, *values: bytes) -> None:
    log.append(pa.table({"value": pa.array(list(values), pa.binary())}))


def expected_file(topic_id) -> bytes:
    return f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}".encode()


def test_created_with_topic_id_writes_partition_metadata_before_any_data(tmp_path):
    """UnifiedLogTest.testLogFlushesPartitionMetadataOnAppend: a log created with a topic id has
    partition.metadata (exactly "version: 0\\ntopic_id: <id>", kafka_format.md §12.5) on disk
    before its first append, and appends and close leave it as it is."""
    topic_id = random_topic_id()
    part = tmp_path / "orders-0"
    log = Log.open(part, topic_id=topic_id)
    try:
        assert log.topic_id == topic_id
        assert (part / PARTITION_METADATA_FILE).read_bytes() == expected_file(topic_id)
        assert not (part / (PARTITION_METADATA_FILE + ".tmp")).exists()
        assert log.log_end_offset == 0
        append(log, b"a", b"b")
    finally:
        log.close()
    assert (part / PARTITION_METADATA_FILE).read_bytes() == expected_file(topic_id)


def test_created_without_topic_id_writes_no_file(tmp_path):
    """PartitionMetadataFileTest.testMaybeFlushWithNoTopicIdPresent, at the log level: a log
    created without an id has none and writes no partition.metadata (older data keeps working)."""
    part = tmp_path / "orders-0"
    with Log.open(part) as log:
        append(log, b"a")
        assert log.topic_id is None
    with Log.open(part) as log:
        assert log.topic_id is None
    assert not (part / PARTITION_METADATA_FILE).exists()


def test_topic_id_recovered_on_reopen(tmp_path):
    """UnifiedLogTest.testLogRecoversTopicId: reopened without an id (writable or read-only), the
    log has the id of its partition.metadata; reopened with the same id, nothing changes."""
    topic_id = random_topic_id()
    part = tmp_path / "orders-0"
    with Log.open(part, topic_id=topic_id) as log:
        append(log, b"a")
    with Log.open(part) as log:
        assert log.topic_id == topic_id
    with Log.open(part, read_only=True) as log:
        assert log.topic_id == topic_id
    with Log.open(part, topic_id=topic_id) as log:
        assert log.topic_id == topic_id and log.log_end_offset == 1
    assert (part / PARTITION_METADATA_FILE).read_bytes() == expected_file(topic_id)


@pytest.mark.parametrize("read_only", [False, True])
def test_inconsistent_topic_id_on_reopen_fails_and_changes_nothing(tmp_path, read_only):
    """UnifiedLogTest.testLogFailsWhenInconsistentTopicIdSet: reopening with another id fails
    with InconsistentTopicIdError (a KafkaLogError) naming the directory and both ids; the
    refused open changes no file (the check runs before recovery) and releases the lock."""
    topic_id, other = random_topic_id(), random_topic_id()
    part = tmp_path / "orders-0"
    with Log.open(part, topic_id=topic_id) as log:
        append(log, b"a", b"b")
    (tmp_path / "recovery-point-offset-checkpoint").unlink()       # an unclean open would recover
    before = tree(tmp_path)
    with pytest.raises(InconsistentTopicIdError) as info:
        Log.open(part, read_only=read_only, topic_id=other)
    msg = str(info.value)
    assert isinstance(info.value, KafkaLogError)
    assert str(part) in msg
    assert f"Tried to assign topic ID {topic_id_to_str(other)}" in msg
    assert f"already contained topic ID {topic_id_to_str(topic_id)}" in msg
    assert tree(tmp_path) == before
    with Log.open(part) as log:                     # not left locked
        assert log.topic_id == topic_id and log.log_end_offset == 2


def test_read_only_open_never_writes_partition_metadata(tmp_path):
    """A reader given an id for a log without partition.metadata keeps it in memory only: the
    directory is left byte for byte as it was (readers never write)."""
    part = tmp_path / "orders-0"
    with Log.open(part) as log:
        append(log, b"a")
    before = tree(tmp_path)
    topic_id = random_topic_id()
    with Log.open(part, read_only=True, topic_id=topic_id) as log:
        assert log.topic_id == topic_id
    assert tree(tmp_path) == before
    with Log.open(part, read_only=True) as log:
        assert log.topic_id is None


def test_assign_topic_id_to_a_log_without_one(tmp_path):
    """UnifiedLog.assignTopicId (PartitionMetadataFileTest.testSetRecordWithSameTopicId /
    testSetRecordWithDifferentTopicId at the log level): an id assigned to a log that has none is
    written at once; the same id again is a no-op, another one raises InconsistentTopicIdError;
    a read-only log refuses to be given one."""
    part = tmp_path / "orders-0"
    topic_id = random_topic_id()
    with Log.open(part) as log:
        append(log, b"a")
        log.assign_topic_id(topic_id)
        assert (part / PARTITION_METADATA_FILE).read_bytes() == expected_file(topic_id)
        log.assign_topic_id(topic_id)
        with pytest.raises(InconsistentTopicIdError, match=topic_id_to_str(topic_id)):
            log.assign_topic_id(random_topic_id())
    assert PartitionMetadataFile(part).read() == topic_id
    other = tmp_path / "orders-1"
    with Log.open(other):
        pass
    with Log.open(other, read_only=True) as log, pytest.raises(KafkaLogError, match="read-only"):
        log.assign_topic_id(topic_id)
    assert not (other / PARTITION_METADATA_FILE).exists()


def test_corrupt_partition_metadata_refused_for_writers_warned_for_readers(tmp_path, caplog):
    """PartitionMetadataFileTest.testReadMalformedFileThrowsKafkaStorageException...: a damaged
    partition.metadata fails a writable open (Kafka takes the log dir offline) with an error
    naming the file and line, leaving the log's files alone; a reader opens the log with a
    warning naming the file, no topic id, and every record."""
    part = tmp_path / "orders-0"
    with Log.open(part, topic_id=random_topic_id()) as log:
        append(log, b"a")
    (part / PARTITION_METADATA_FILE).write_bytes(b"version: 0\ntopic_id: not-a-uuid")
    before = tree(tmp_path)
    with pytest.raises(CorruptCheckpointError) as info:
        Log.open(part)
    assert str(part / PARTITION_METADATA_FILE) in str(info.value) and "line 2" in str(info.value)
    assert tree(tmp_path) == before
    with caplog.at_level("WARNING", logger="storage_core.log"), Log.open(part, read_only=True) as log:
        assert log.topic_id is None
        assert log.read(0).column("value").to_pylist() == [b"a"]
    assert any(str(part / PARTITION_METADATA_FILE) in r.getMessage() for r in caplog.records)
    assert tree(tmp_path) == before


def test_manager_creates_checks_and_assigns_topic_ids(tmp_path):
    """LogManager.getOrCreateLog with a topic id: a new log gets the id; an existing log without
    one is assigned it; an existing log with another id raises InconsistentTopicIdError; a
    restarted manager loads every id back."""
    t1, t2 = random_topic_id(), random_topic_id()
    with LogManager.open([tmp_path]) as mgr:
        created = mgr.get_or_create_log(("orders", 0), topic_id=t1)
        assert created.topic_id == t1
        assert mgr.get_or_create_log(("orders", 0), topic_id=t1) is created
        with pytest.raises(InconsistentTopicIdError, match=topic_id_to_str(t2)):
            mgr.get_or_create_log(("orders", 0), topic_id=t2)
        older = mgr.get_or_create_log(("events", 0))
        assert older.topic_id is None
        mgr.get_or_create_log(("events", 0), topic_id=t2)
        assert older.topic_id == t2
    assert PartitionMetadataFile(tmp_path / "orders-0").read() == t1
    assert PartitionMetadataFile(tmp_path / "events-0").read() == t2
    with LogManager.open([tmp_path]) as mgr:
        assert mgr.get_log(("orders", 0)).topic_id == t1
        assert mgr.get_log(("events", 0)).topic_id == t2


def test_topic_id_survives_delete_and_future_directory_renames(tmp_path):
    """UnifiedLogTest.testTopicIdTransfersAfterDirectoryRename: the id moves with the
    directory. LogManager.delete_log renames the partition ``<topic>-<p>.<uuid>-delete``: its
    partition.metadata is there, readable, with the id (also through a read-only Log). A
    ``-future`` directory (a log being moved between data dirs) is loaded as the partition's
    future log with its own id."""
    topic_id, future_id = random_topic_id(), random_topic_id()
    with LogManager.open([tmp_path]) as mgr:
        log = mgr.get_or_create_log(("orders", 0), topic_id=topic_id)
        append(log, b"a", b"b")
        renamed = mgr.delete_log(("orders", 0))
        assert renamed is not None and renamed.name.endswith("-delete")
        assert not (tmp_path / "orders-0").exists()
        assert PartitionMetadataFile(renamed).read() == topic_id
        with Log.open(renamed, read_only=True) as moved:
            assert moved.topic_id == topic_id and moved.log_end_offset == 2
    future = tmp_path / log_future_dir_name("orders", 1)
    with Log.open(future, topic_id=future_id) as log:
        append(log, b"c")
    with LogManager.open([tmp_path]) as mgr:
        assert mgr.get_log(("orders", 1), is_future=True).topic_id == future_id
        assert mgr.get_log(("orders", 1)) is None


@pytest.mark.skipif(not BROKER_DIR.is_dir(), reason=f"broker fixture not found at {BROKER_DIR}")
def test_broker_written_partition_metadata(tmp_path):
    """A broker-written partition directory: its topic id is read byte for byte, reopening it
    with that id leaves partition.metadata as the broker wrote it, another id is refused."""
    part = tmp_path / "topic-0"
    shutil.copytree(BROKER_DIR, part)
    for p in part.iterdir():
        os.chmod(p, 0o644)
    written = (part / PARTITION_METADATA_FILE).read_bytes()
    assert written == f"version: 0\ntopic_id: {BROKER_TOPIC_ID}".encode()
    broker_id = topic_id_from_str(BROKER_TOPIC_ID)
    with Log.open(part, read_only=True) as log:
        assert log.topic_id == broker_id
    with Log.open(part, LogConfig(), topic_id=broker_id) as log:
        assert log.topic_id == broker_id
    assert (part / PARTITION_METADATA_FILE).read_bytes() == written
    with pytest.raises(InconsistentTopicIdError, match=BROKER_TOPIC_ID):
        Log.open(part, topic_id=random_topic_id())


def test_random_topic_id_respects_kafkas_reserved_ids():
    """Uuid.randomUuid: never ZERO_UUID or ONE_UUID (METADATA_TOPIC_ID), never a string form
    starting with "-"; 22 URL-safe characters that parse back to the same id."""
    ids = {random_topic_id() for _ in range(2000)}
    assert len(ids) == 2000
    for topic_id in ids:
        text = topic_id_to_str(topic_id)
        assert topic_id.int > 1 and len(text) == 22 and not text.startswith("-")
        assert topic_id_from_str(text) == topic_id

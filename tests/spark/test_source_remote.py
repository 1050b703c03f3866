"""Issue 20, the source over an object store, on one machine: the store options (errors name the
option; credentials never appear in an error, a log line, Spark's plan or an input partition), the
remote log metadata mirrored into the store (order, crash ordering, corrupt or unknown objects
named) and data lost to remote retention (``failOnDataLoss``). The cluster queries are
tests/cluster/test_cluster_read.py."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from kafka_log_source.batch_reader import KafkaLogBatchReader
from kafka_log_source.options import parse_source_options
from storage_core.config import LogConfig
from storage_core.errors import (CorruptRemoteLogMetadataError, InvalidConfigError, KafkaLogError,
                                 RemoteStorageError)
from storage_core.log import Log
from storage_core.remote import (METADATA_DIR_NAME, PyArrowRemoteStorageManager, RemoteLogManager,
                                 RemoteLogMetadataStoreReader, RemoteLogSegmentMetadata, RemoteLogSegmentState,
                                 TopicBasedRemoteLogMetadataManager, deserialize)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))
import make_read_topics  # noqa: E402

SECRET = "Sup3r-S3cret-Value-42"


def store_options(configs: dict) -> dict:
    return {f"rsm.config.{k}": v for k, v in configs.items() if k != "storage.uri"}


def remote_topic(tmp_path: Path, seaweedfs, name: str, batches: int = 6) -> tuple[dict, dict]:
    """A remote-only topic ``t`` (2 partitions) in the store: (its store settings, source options)."""
    configs = seaweedfs.storage_configs(prefix=f"{name}-{tmp_path.name}")
    make_read_topics.build(tmp_path, "t", 2, batches, 20, configs, remote_only=True)
    return configs, {"subscribe": "t", "path": configs["storage.uri"], **store_options(configs)}


# ------------------------------------------------------------------------------ options

@pytest.mark.parametrize("options, names", [
    ({"rsm.config.s3.endpoint": "http://127.0.0.1:1"}, ["rsm.config.s3.endpoint", "remotePath"]),
    ({"path": "s3://b/p", "remotePath": "s3://b/q"}, ["remotePath"]),
    ({"remotePath": " "}, ["remotePath"]),
    ({"path": "s3://b/p", "rsm.config.s3.bogus": "1"}, ["'path'", "s3.bogus"]),
    ({"remotePath": "s3://b/p", "rsm.config.storage.uri": "s3://b/x"}, ["rsm.config.storage.uri", "remotePath"]),
    ({"path": "s3://b/p", "rsm.config.s3.endpoint": "ftp://host"}, ["'path'", "s3.endpoint"]),
    ({"path": "s3://b/p", "rsm.config.s3.access.key.id": "AKIA"}, ["'path'", "s3.secret.access.key"]),
    ({"path": "s3://b/p", "rsm.config.s3.request.timeout.ms": "soon"}, ["'path'", "s3.request.timeout.ms"]),
])
def test_store_option_errors_name_the_option_and_never_a_secret(tmp_path, options, names):
    base = {"subscribe": "t", "path": str(tmp_path), "rsm.config.s3.session.token": SECRET}
    if "rsm.config.s3.access.key.id" not in options:
        base["rsm.config.s3.secret.access.key"] = SECRET
        base["rsm.config.s3.access.key.id"] = "AKIAEXAMPLE"
    with pytest.raises(InvalidConfigError) as e:
        parse_source_options({**base, **options}, streaming=False)
    for name in names:
        assert name in str(e.value)
    assert SECRET not in str(e.value)


def test_file_uri_and_plain_path_are_local_directories(tmp_path):
    for path in (str(tmp_path), f"file://{tmp_path}"):
        opts = parse_source_options({"subscribe": "t", "path": path}, streaming=False)
        assert opts.path == tmp_path.resolve() and opts.store is None and not opts.remote_only


# ------------------------------------------------------------------------------ secrets

def test_secrets_never_in_plans_partitions_errors_or_logs(spark, tmp_path, seaweedfs, caplog):
    configs, options = remote_topic(tmp_path, seaweedfs, "secrets")
    assert configs["s3.secret.access.key"] == seaweedfs.secret_key
    secret = seaweedfs.secret_key
    caplog.set_level(logging.DEBUG)
    df = spark.read.format("kafkalog").options(**options).load()
    assert df.count() == 2 * 6 * 20
    shown_plan = io.StringIO()
    with contextlib.redirect_stdout(shown_plan):
        df.explain(mode="extended")
    plan = shown_plan.getvalue() + df._jdf.queryExecution().toString()
    assert "kafkalog" in plan.lower() and secret not in plan
    reader = KafkaLogBatchReader(parse_source_options(options, streaming=False))
    parts = reader.partitions()
    assert parts and all(type(p).__name__ == "KafkaLogRemoteInputPartition" for p in parts)
    shown = " ".join(repr(p) + str(p) for p in parts) + repr(reader.opts) + repr(reader.tier.settings)
    assert secret not in shown and "settings hidden" in shown
    assert all(p.store.configs()["s3.secret.access.key"] == secret for p in parts)   # the tasks get it
    # a wrong key: the store refuses, the error names the store, not the secret
    wrong = {**options, "rsm.config.s3.secret.access.key": SECRET}
    with pytest.raises(Exception) as e:
        spark.read.format("kafkalog").options(**wrong).load().count()
    assert SECRET not in str(e.value) and secret not in str(e.value)
    # the library's own log lines (py4j's client logs every command it sends at DEBUG: not ours)
    logged = " ".join(r.getMessage() for r in caplog.records
                      if r.name.startswith(("kafka_log_source", "storage_core")))
    assert secret not in logged and SECRET not in logged


# ------------------------------------------------------------------------------ the mirrored metadata

def test_metadata_mirrored_in_publish_order_and_readable_from_the_store_alone(tmp_path):
    store = {"storage.uri": str(tmp_path / "store")}
    make_read_topics.build(tmp_path, "t", 1, 12, 20, store)
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(tmp_path / "rlmm")}, read_only=True)
    with Log.open(tmp_path / "tiered" / "t-0", read_only=True) as log:
        tip = RemoteLogManager(PyArrowRemoteStorageManager(store), rlmm).topic_id_partition(log)
    (prefix,) = (tmp_path / "store" / METADATA_DIR_NAME).iterdir()
    assert prefix.name.startswith("t-0-")
    names = sorted(p.name for p in prefix.iterdir())
    assert names == [f"{i:020d}.metadata" for i in range(len(names))]
    events = [deserialize(p.read_bytes()) for p in sorted(prefix.iterdir())]
    # per segment: COPY_SEGMENT_STARTED, then its COPY_SEGMENT_FINISHED, one segment at a time
    states = [e.state for e in events]
    assert states == [RemoteLogSegmentState.COPY_SEGMENT_STARTED, RemoteLogSegmentState.COPY_SEGMENT_FINISHED] \
        * (len(events) // 2)
    assert all(isinstance(e, RemoteLogSegmentMetadata) for e in events[::2])
    from_topic = sorted(rlmm.list_remote_log_segments(tip), key=lambda m: m.start_offset)
    state = RemoteLogMetadataStoreReader(store).state(tip)
    assert [(m.remote_log_segment_id, m.start_offset, m.end_offset, m.state) for m in state.segments] == \
        [(m.remote_log_segment_id, m.start_offset, m.end_offset, m.state) for m in from_topic]
    assert state.highest_offset == from_topic[-1].end_offset
    rlmm.close()


def test_a_failed_mirror_write_fails_the_copy_before_the_topic_records_it(tmp_path):
    """Fault injection: the partition's metadata prefix is a file, so no event object can be
    written: the copy fails, the metadata topic records nothing and the store no segment."""
    store = tmp_path / "store"
    rsm = PyArrowRemoteStorageManager({"storage.uri": str(store)})
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(tmp_path / "rlmm"),
                                               "remote.log.metadata.topic.num.partitions": "2"})
    rlm = RemoteLogManager(rsm, rlmm)
    config = LogConfig(segment_bytes=2048, remote_storage_enable=True)
    with Log.open(tmp_path / "data" / "t-0", config) as log:
        for _ in range(5):
            log.append(pa.table({"value": [b"x" * 100] * 10}))
        log.roll()
        tip = rlm.topic_id_partition(log)
        blocker = store / METADATA_DIR_NAME / rlmm.mirror.partition_path(tip).rsplit("/", 1)[1]
        blocker.parent.mkdir(parents=True)
        blocker.write_bytes(b"not a directory")
        result = rlm.run_once([log])[0]
        assert result.error is not None and result.segments_copied == 0
        assert list(rlmm.list_remote_log_segments(tip)) == []
        assert rlm.remote_log_segments(log) == []
        blocker.unlink()
        assert rlm.run_once([log])[0].segments_copied > 0       # the store back: copied, mirrored
        mirrored = RemoteLogMetadataStoreReader({"storage.uri": str(store)}).state(tip).segments
        assert [m.remote_log_segment_id for m in mirrored] == [m.remote_log_segment_id
                                                             for m in rlm.remote_log_segments(log)]
    rlm.close()


@pytest.mark.parametrize("damage", ["garbage", "unknown name", "too large", "gap"])
def test_corrupt_or_unknown_metadata_objects_fail_naming_the_object(tmp_path, damage):
    store = {"storage.uri": str(tmp_path / "store")}
    make_read_topics.build(tmp_path, "t", 1, 12, 20, store)
    prefix = next((tmp_path / "store" / METADATA_DIR_NAME).iterdir())
    objects = sorted(prefix.iterdir())
    if damage == "garbage":
        bad = objects[1]
        bad.write_bytes(b"\x00\x07garbage")
    elif damage == "unknown name":
        bad = prefix / "notes.txt"
        bad.write_bytes(b"hello")
    elif damage == "too large":
        bad = objects[2]
        with open(bad, "ab") as f:
            f.truncate((1 << 20) + 1)
    else:
        bad = objects[0]
        bad.unlink()
        bad = Path(bad.name)
    reader = RemoteLogMetadataStoreReader(store)
    (tip,) = reader.partitions()
    with pytest.raises(KafkaLogError) as e:
        reader.state(tip)
    assert isinstance(e.value, (CorruptRemoteLogMetadataError, KafkaLogError))
    assert str(bad.name) in str(e.value)


# ------------------------------------------------------------------------------ data loss

def test_remote_segments_deleted_below_a_planned_offset_are_data_loss(spark, tmp_path, seaweedfs):
    """Remote retention deleted the first segments after a range was planned from them (as a
    checkpointed offset would be): failOnDataLoss=true fails naming the offsets; false skips to
    what is left, as for a local log."""
    configs, options = remote_topic(tmp_path, seaweedfs, "loss", batches=40)
    reader = KafkaLogBatchReader(parse_source_options({**options, "startingOffsets": json.dumps(
        {"t": {"0": 0, "1": 0}}), "endingOffsets": "latest"}, streaming=False))
    parts = reader.partitions()
    first = parts[0].reads[0]
    fs = pafs.S3FileSystem(access_key=seaweedfs.access_key, secret_key=seaweedfs.secret_key, region="us-east-1",
                           endpoint_override=seaweedfs.endpoint.split("://")[1], scheme="http")
    fs.delete_file(first.object_path)                 # the store deleted it (remote retention)
    with pytest.raises(KafkaLogError) as e:
        list(reader.read(parts[0]))
    assert f"[0, {first.end_offset + 1})" in str(e.value) and "failOnDataLoss" in str(e.value)
    lenient = KafkaLogBatchReader(parse_source_options({**options, "failOnDataLoss": "false"}, streaming=False))
    part = lenient.partitions()[0]
    assert part.start == 0
    got = [o for b in lenient.read(part) for o in b.column("offset").to_pylist()]
    assert got and got[0] == first.end_offset + 1 and got == sorted(got)


def test_a_store_that_does_not_answer_fails_the_read_naming_the_store(tmp_path, seaweedfs):
    configs, options = remote_topic(tmp_path, seaweedfs, "down")
    reader = KafkaLogBatchReader(parse_source_options(options, streaming=False))
    parts = reader.partitions()
    seaweedfs.stop()
    try:
        with pytest.raises((RemoteStorageError, KafkaLogError, OSError)) as e:
            list(reader.read(parts[0]))
        assert "t-0" in str(e.value) or parts[0].reads[0].object_path in str(e.value)
        assert seaweedfs.secret_key not in str(e.value)
    finally:
        seaweedfs.start()


def test_store_settings_are_the_storage_managers_keys(tmp_path):
    """Every documented ``rsm.config.*`` option reaches the store's settings, prefix stripped,
    with the URI of ``path`` (remote-only) or ``remotePath`` (tiered) as ``storage.uri``."""
    settings = {"rsm.config.s3.endpoint": "http://127.0.0.1:9", "rsm.config.s3.region": "eu-west-1",
                "rsm.config.s3.access.key.id": "AKIAEXAMPLE", "rsm.config.s3.secret.access.key": SECRET,
                "rsm.config.s3.session.token": "token", "rsm.config.s3.connect.timeout.ms": "2000",
                "rsm.config.s3.request.timeout.ms": "20000", "rsm.config.s3.retry.max.attempts": "5"}
    remote = parse_source_options({"subscribe": "t", "path": "s3a://bucket/topics", **settings}, streaming=True)
    tiered = parse_source_options({"subscribe": "t", "path": str(tmp_path), "remotePath": "s3://bucket/tiers",
                                   **settings}, streaming=False)
    expected = {k[len("rsm.config."):]: v for k, v in settings.items()}
    assert remote.remote_only and remote.store.configs() == {**expected, "storage.uri": "s3a://bucket/topics"}
    assert not tiered.remote_only and tiered.path == tmp_path.resolve()
    assert tiered.store.configs() == {**expected, "storage.uri": "s3://bucket/tiers"}
    assert SECRET not in repr(remote) + repr(tiered) and "s3://bucket/tiers" in repr(tiered.store)


def test_streaming_offsets_below_what_remote_retention_left_are_data_loss(tmp_path, seaweedfs):
    """A streaming query's offsets (as in its checkpoint) below the first remote segment that
    remote retention left: the micro-batch's task fails with failOnDataLoss=true, naming the
    offsets, and with false skips to the first offset still in the store, as for a local log."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from kafka_log_source.datasource import KafkaLogStreamReader
    from kafka_log_source.reader import DataLossError

    configs = seaweedfs.storage_configs(prefix=f"retention-{tmp_path.name}")
    make_read_topics.build(tmp_path, "t", 1, 40, 20, configs)
    options = {"subscribe": "t", "path": configs["storage.uri"], **store_options(configs),
               "startingOffsets": "earliest"}
    reader = KafkaLogStreamReader(parse_source_options(options, streaming=True))
    start = reader.initialOffset()
    assert json.loads(json.dumps(start))["t"] == {"0": 0}
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(tmp_path / "rlmm"),
                                               "remote.log.metadata.topic.num.partitions": "2"})
    with RemoteLogManager(PyArrowRemoteStorageManager(configs), rlmm) as rlm:
        config = LogConfig(segment_bytes=4096, remote_storage_enable=True, local_retention_bytes=1,
                           retention_bytes=8000, retention_ms=-1)
        with Log.open(tmp_path / "tiered" / "t-0", config) as log:
            expired = rlm.cleanup_expired_remote_log_segments(log)
            first_left = rlm.remote_log_segments(log)[0].start_offset
    assert expired.remote_segments_deleted > 0 and first_left > 0
    end = reader.latestOffset(start, ReadAllAvailable())
    (part,) = reader.partitions(start, end)
    assert part.start == 0
    with pytest.raises(DataLossError) as e:
        list(reader.read(part))
    assert f"[0, {first_left})" in str(e.value)
    lenient = KafkaLogStreamReader(parse_source_options({**options, "failOnDataLoss": "false"}, streaming=True))
    lenient.initialOffset()
    (part,) = lenient.partitions(start, lenient.latestOffset(start, ReadAllAvailable()))
    offsets = [o for b in lenient.read(part) for o in b.column("offset").to_pylist()]
    assert offsets[0] == first_left and offsets[-1] == end["t"]["0"] - 1


@pytest.mark.parametrize("chunk", [61, 1000, 7777, 1 << 16])
def test_a_task_reads_the_same_rows_whatever_its_chunks_cut(tmp_path, seaweedfs, chunk):
    """A task's ranged reads end anywhere in a batch: a batch cut by a chunk's end is completed
    from the next chunk's front (or, longer than a chunk, joined whole); the rows are those of a
    read in one piece, in order, for every partition (fault-free; chunk sizes well below a batch,
    around a batch and above it)."""
    from kafka_log_source.remote_tier import read_remote_partition

    _, options = remote_topic(tmp_path, seaweedfs, f"chunks{chunk}")
    reader = KafkaLogBatchReader(parse_source_options(options, streaming=False))
    parts = reader.partitions()
    assert parts and all(p.reads for p in parts)
    for part in parts:
        whole = pa.Table.from_batches(list(read_remote_partition(part, chunk=64 << 20)))
        cut = pa.Table.from_batches(list(read_remote_partition(part, chunk=chunk)))
        assert whole.num_rows > 0 and cut.equals(whole)
        assert cut.column("offset").to_pylist() == list(range(part.start, part.end))


@pytest.mark.parametrize("max_bytes", [100, 1500])
def test_a_task_decodes_its_chunks_a_fetch_size_at_a_time(tmp_path, seaweedfs, max_bytes):
    """A chunk is decoded ``maxBytesPerFetch`` bytes at a time (as a local fetch reads), a batch
    longer than that whole: the rows are those of one whole read, in tables of a few batches
    (100 bytes: below one batch, so one batch per table)."""
    from kafka_log_source.remote_tier import read_remote_partition

    _, options = remote_topic(tmp_path, seaweedfs, f"window{max_bytes}")
    whole_parts = KafkaLogBatchReader(parse_source_options(options, streaming=False)).partitions()
    parts = KafkaLogBatchReader(parse_source_options({**options, "maxBytesPerFetch": str(max_bytes)},
                                                     streaming=False)).partitions()
    assert len(parts) == len(whole_parts) and all(p.max_bytes == max_bytes for p in parts)
    for whole_part, part in zip(whole_parts, parts):
        whole = pa.Table.from_batches(list(read_remote_partition(whole_part, chunk=64 << 20)))
        batches = list(read_remote_partition(part, chunk=1 << 16))
        assert pa.Table.from_batches(batches).equals(whole) and whole.num_rows > 0
        assert len(batches) > 1
        if max_bytes == 100:
            assert all(len(set(b.column("offset").to_numpy() // 20)) == 1 for b in batches)


@pytest.mark.parametrize("headroom", [0, 100, 1 << 20], ids=["no-room", "room-below-a-batch", "room-for-a-batch"])
def test_a_batch_cut_by_a_read_is_decoded_once_in_front_of_the_next(tmp_path, seaweedfs, headroom):
    """A batch a ranged read cuts is copied in front of the next read's bytes (``headroom``)
    and decoded there with them, once; longer than the room (none, or below one batch) it is
    joined by a copy instead. Either way the rows are those of one whole read, every offset
    once and in order, with no table holding only the cut batch."""
    from kafka_log_source.remote_tier import read_remote_partition

    _, options = remote_topic(tmp_path, seaweedfs, f"headroom{headroom}", batches=30)
    for part in KafkaLogBatchReader(parse_source_options(options, streaming=False)).partitions():
        whole = pa.Table.from_batches(list(read_remote_partition(part, chunk=64 << 20)))
        batches = list(read_remote_partition(part, chunk=1500, headroom=headroom))
        cut = pa.Table.from_batches(batches)
        assert whole.num_rows > 0 and cut.equals(whole)
        assert cut.column("offset").to_pylist() == list(range(part.start, part.end))
        reads = sum(-(-(r.size - r.position) // 1500) for r in part.reads)
        assert len(batches) <= reads      # one table a read (a few batches): none of the cut batch alone


def test_receive_buffers_are_reused_by_the_next_task_and_never_seen_in_its_rows(tmp_path, seaweedfs):
    """A task's receive buffers go to the next task in the same process (no fresh memory per
    task); the tables a task yielded copy what they keep, so rows held from one task are not
    changed when the next task reads into the same buffers."""
    from kafka_log_source import remote_tier
    from kafka_log_source.remote_tier import read_remote_partition

    _, options = remote_topic(tmp_path, seaweedfs, "reuse")
    first, second = KafkaLogBatchReader(parse_source_options(options, streaming=False)).partitions()
    held = list(read_remote_partition(first, chunk=4096))
    buffers = [id(b) for b in remote_tier._free_buffers]
    assert len(buffers) == remote_tier.READ_AHEAD + 1
    other = list(read_remote_partition(second, chunk=4096))
    assert [id(b) for b in remote_tier._free_buffers] == buffers      # the same buffers, read into again
    assert pa.Table.from_batches(held).equals(pa.Table.from_batches(list(read_remote_partition(first, chunk=4096))))
    assert pa.Table.from_batches(held).column("offset").to_pylist() == list(range(first.start, first.end))
    assert pa.Table.from_batches(other).column("offset").to_pylist() == list(range(second.start, second.end))


def test_an_object_shorter_than_its_metadata_fails_naming_it(tmp_path, seaweedfs):
    """Fault injection: a segment object replaced in the store by a shorter copy (its metadata
    still gives the old size). The read fails naming the object and where it ends, whatever
    read the end falls in, instead of returning fewer records."""
    configs, options = remote_topic(tmp_path, seaweedfs, "short")
    part = KafkaLogBatchReader(parse_source_options(options, streaming=False)).partitions()[0]
    obj = part.reads[0].object_path
    fs = seaweedfs.filesystem()
    with fs.open_input_file(obj) as f:
        data = f.read()
    keep = len(data) // 2
    with fs.open_output_stream(obj) as out:
        out.write(data[:keep])
    from kafka_log_source.remote_tier import read_remote_partition
    for chunk in (1000, 64 << 20):
        with pytest.raises(KafkaLogError, match="truncated or replaced") as e:
            list(read_remote_partition(part, chunk=chunk))
        assert obj in str(e.value) and f"ends at byte {keep}" in str(e.value)


@pytest.mark.parametrize("value, message", [("0", "must be positive"), ("-3", "must be positive"),
                                            ("lots", "remoteReadBytes"), (str(2 << 30), "at most")])
def test_remote_read_bytes_is_checked(tmp_path, value, message):
    with pytest.raises(InvalidConfigError, match=message) as e:
        parse_source_options({"subscribe": "t", "path": str(tmp_path), "remoteReadBytes": value}, streaming=False)
    assert "remoteReadBytes" in str(e.value)


def test_remote_read_bytes_sizes_a_tasks_ranged_reads(tmp_path, seaweedfs):
    """``remoteReadBytes`` travels in the remote input partitions and is the size of their
    ranged reads; the rows do not depend on it."""
    from kafka_log_source.remote_tier import read_remote_partition

    _, options = remote_topic(tmp_path, seaweedfs, "readbytes")
    default = KafkaLogBatchReader(parse_source_options(options, streaming=False)).partitions()
    small = KafkaLogBatchReader(parse_source_options({**options, "remoteReadBytes": "1500"},
                                                     streaming=False)).partitions()
    assert {p.read_bytes for p in default} == {32 << 20} and {p.read_bytes for p in small} == {1500}
    for a, b in zip(default, small):
        assert pa.Table.from_batches(list(read_remote_partition(a))).equals(
            pa.Table.from_batches(list(read_remote_partition(b))))


def _requests(monkeypatch) -> list[tuple[int, int]]:
    """Every ranged read a task issues, as (position, bytes): an observer around the real read."""
    from kafka_log_source import remote_tier

    seen: list[tuple[int, int]] = []
    real = remote_tier._read_into

    def observed(f, into, position):
        seen.append((position, len(into)))
        return real(f, into, position)

    monkeypatch.setattr(remote_tier, "_read_into", observed)
    return seen


def test_a_range_ending_inside_a_segment_reads_little_past_it(tmp_path, seaweedfs, monkeypatch):
    """A range that ends early in a big segment (a micro-batch, a split range) reads ahead only
    about twice the bytes its offsets need, not the rest of the segment; when that estimate is
    short (here: the segment's offsets made to look ten times sparser), the reads go on one at a
    time until the range is read, so the rows are right either way."""
    from dataclasses import replace

    from kafka_log_source.remote_tier import read_remote_partition

    configs = seaweedfs.storage_configs(prefix=f"early-{tmp_path.name}")
    make_read_topics.build(tmp_path, "t", 1, 1000, 20, configs, segment_bytes=8 << 20, remote_only=True)

    def planned(start: int, end: int):
        (part,) = KafkaLogBatchReader(parse_source_options({
            "subscribe": "t", "path": configs["storage.uri"], **store_options(configs),
            "startingOffsets": json.dumps({"t": {"0": start}}), "endingOffsets": json.dumps({"t": {"0": end}})},
            streaming=False)).partitions()
        (read,) = part.reads
        return part, read, (end - start) * read.size // (read.end_offset - read.start_offset + 1)

    part, read, needed = planned(2000, 3000)
    assert read.size - read.position > 4 * (2 * needed + (64 << 10))      # the segment's rest is most of it
    seen = _requests(monkeypatch)
    rows = pa.Table.from_batches(list(read_remote_partition(part)))
    assert rows.column("offset").to_pylist() == list(range(2000, 3000))
    assert sum(n for _, n in seen) <= 2 * needed + (64 << 10) and seen[0][0] == read.position
    part, read, needed = planned(2000, 6000)
    sparse = replace(part, reads=(replace(read, end_offset=read.start_offset + 10 * (read.end_offset -
                                                                                      read.start_offset)),))
    seen.clear()
    rows = pa.Table.from_batches(list(read_remote_partition(sparse, chunk=16 << 10)))
    assert rows.column("offset").to_pylist() == list(range(2000, 6000))
    assert sum(n for _, n in seen) > 2 * needed / 10 + (64 << 10)        # read on past the short estimate


# ------------------------------------------------------------------------------ special timestamps

def _starts(options: dict) -> dict[int, int]:
    """Each partition's planned start of a batch read with ``options``."""
    reader = KafkaLogBatchReader(parse_source_options(options, streaming=False))
    return {r.partition: r.start for r in reader.plan()}


def test_special_timestamps_over_a_tiered_topic(tmp_path):
    """ListOffsets' special timestamps on a topic with a remote tier (``remotePath``), as a broker
    with tiered storage answers them (``UnifiedLog.fetchOffsetByTimestamp``): -2 the log start
    over both tiers, -4 the local log start, -5 the highest offset in remote storage, -3 the
    record with the largest timestamp of the local segments, -1 the end. (The remote tier used
    to be searched first for every timestamp, so -1 started at the first remote offset.)"""
    store = {"storage.uri": str(tmp_path / "store")}
    built = make_read_topics.build(tmp_path, "t", 1, 6, 20, store, tail_batches=2)["t-0"]
    local_start, end = built["local_start"], built["end"]
    assert built["remote_segments"] >= 1 and 0 < local_start < end
    base = {"path": str(tmp_path / "tiered"), "remotePath": store["storage.uri"], "subscribe": "t"}
    got = {ts: _starts({**base, "startingTimestamp": str(ts)})[0] for ts in (-1, -2, -3, -4, -5)}
    # rolled segments were copied, then deleted locally: the store ends right below the local start
    assert got == {-1: end, -2: 0, -3: end - 1, -4: local_start, -5: local_start - 1}
    plain = {"path": str(tmp_path / "local"), "subscribe": "t"}
    assert _starts({**plain, "startingTimestamp": "-4"}) == {0: 0}
    with pytest.raises(KafkaLogError, match="No offset matched from request of topic-partition t-0 and timestamp -5"):
        _starts({**plain, "startingTimestamp": "-5"})


def test_special_timestamps_and_missing_topics_from_the_store_alone(tmp_path, seaweedfs):
    """A topic read from the store alone: -2 its first remote offset, -5 its highest, -3 the
    record with the largest timestamp of its remote segments (timestamps grow with offsets: the
    highest), -4 and -1 the end (nothing of it is local); a subscribed topic missing from the
    store fails naming the option and the store."""
    configs, options = remote_topic(tmp_path, seaweedfs, "special")
    got = {ts: _starts({**options, "startingTimestamp": str(ts)}) for ts in (-1, -2, -3, -4, -5)}
    for p in (0, 1):
        highest = got[-1][p] - 1
        assert {ts: got[ts][p] for ts in got} == {-1: highest + 1, -2: 0, -3: highest, -4: highest + 1,
                                                  -5: highest}
    with pytest.raises(InvalidConfigError, match=r"Option 'subscribe' names topic\(s\) that do not exist in the "
                                                 r"store .*: nosuch"):
        _starts({**options, "subscribe": "t,nosuch"})

"""The sink with its staging, its checkpoint state and its tiered storage in a store (SeaweedFS
on loopback, the ``seaweedfs`` fixture): option errors naming the option and never a secret,
staged files streamed to the store by tasks and fetched by the commit, a failed task's upload
removed, a killed one's swept, the sink's transaction log in a store checkpoint, and a tiering
pass that fails while the store is down without undoing the commit, then catches up."""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from kafka_log_sink.commit import SinkCoordinator, load_producer
from kafka_log_sink.options import parse_sink_options
from kafka_log_sink import staging_file, staging_store
from kafka_log_sink.staging_store import StagingStore
from kafka_log_sink.tiering import SinkTiering
from kafka_log_sink.writer import stage_all
from storage_core.errors import CorruptRecordError, InvalidConfigError, KafkaLogError
from storage_core.format import encode_batches
from storage_core.format.log_input_stream import scan_batches
from storage_core.log import Log


def store_options(seaweedfs) -> dict[str, str]:
    cfg = seaweedfs.storage_configs()
    return {f"rsm.config.{k}": v for k, v in cfg.items() if k != "storage.uri"}


def prefix() -> str:
    return f"sink-{uuid.uuid4().hex[:10]}"


def objects(seaweedfs, folder: str) -> list[str]:
    infos = seaweedfs.filesystem().get_file_info(
        pafs.FileSelector(f"{seaweedfs.bucket}/{folder}", recursive=True, allow_not_found=True))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File)


def table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"key": [f"k{i}".encode() for i in range(start, start + n)],
                     "value": [f"v{i}".encode() for i in range(start, start + n)]})


def committed_values(data: Path, topic: str = "t") -> list[str]:
    got = []
    for d in sorted(data.glob(f"{topic}-*")):
        with Log.open(d, read_only=True) as log:
            offset = log.log_start_offset
            while True:
                r = log.fetch(offset, isolation="read_committed")
                got += [v.decode() for v in r.table.column("value").to_pylist()]
                if r.next_offset == offset:
                    break
                offset = r.next_offset
    return got


# ---------------------------------------------------------------------------- options

SECRET = "s3cr3t-never-shown"


@pytest.mark.parametrize("option, value, named", [
    ("stagingLocation", "nosuchscheme://bucket/x", "stagingLocation"),
    ("checkpointLocation", "nosuchscheme://bucket/x", "checkpointLocation"),
    ("remotePath", "nosuchscheme://bucket/x", "remotePath"),
    ("path", "s3://bucket/data", "path"),
])
def test_a_location_the_sink_cannot_use_is_refused_naming_the_option(tmp_path, option, value, named):
    opts = {"path": str(tmp_path / "data"), "remote.storage.enable": "true", "remotePath": str(tmp_path / "r"),
            "rsm.config.s3.secret.access.key": SECRET, "rsm.config.s3.access.key.id": "id", option: value}
    with pytest.raises(InvalidConfigError, match=f"Option '{named}'") as e:
        parse_sink_options(opts)
    assert SECRET not in str(e.value)


def test_store_settings_errors_name_the_setting_and_never_the_secret(tmp_path):
    base = {"path": str(tmp_path), "stagingLocation": f"s3://user:{SECRET}@bucket/x"}
    with pytest.raises(InvalidConfigError, match="s3.bogus") as e:
        parse_sink_options({**base, "rsm.config.s3.bogus": "1"})
    assert SECRET not in str(e.value)
    with pytest.raises(InvalidConfigError, match="stagingLocation.*s3.access.key.id and s3.secret.access.key") as e:
        parse_sink_options({"path": str(tmp_path), "stagingLocation": "s3://bucket/x",
                            "rsm.config.s3.secret.access.key": SECRET})
    assert SECRET not in str(e.value)
    opts = parse_sink_options({"path": str(tmp_path), "stagingLocation": "s3://bucket/x",
                               "rsm.config.s3.access.key.id": "id", "rsm.config.s3.secret.access.key": SECRET,
                               "rsm.config.s3.endpoint": "http://127.0.0.1:1"})
    assert SECRET not in repr(opts) and SECRET not in str(opts)
    assert opts.store["s3.secret.access.key"] == SECRET          # kept for the tasks, only not shown
    assert SECRET not in StagingStore(opts.staging_uri, opts.store).name


def test_remote_path_and_remote_storage_enable_go_together(tmp_path):
    with pytest.raises(InvalidConfigError, match="'remotePath'.*'remote.storage.enable'"):
        parse_sink_options({"path": str(tmp_path), "remotePath": str(tmp_path / "r")})
    with pytest.raises(InvalidConfigError, match="'remote.storage.enable'.*'remotePath'"):
        parse_sink_options({"path": str(tmp_path), "remote.storage.enable": "true"})
    with pytest.raises(InvalidConfigError, match="local.retention.bytes"):
        parse_sink_options({"path": str(tmp_path), "remotePath": str(tmp_path / "r"),
                            "remote.storage.enable": "true", "retention.bytes": "100",
                            "local.retention.bytes": "1000"})


def test_file_uris_are_local_folders_and_the_default_staging_follows_a_store_checkpoint(tmp_path):
    opts = parse_sink_options({"path": f"file://{tmp_path}/data", "checkpointLocation": f"file://{tmp_path}/chk"})
    assert opts.path == tmp_path / "data" and opts.checkpoint == tmp_path / "chk"
    assert opts.staging_uri is None and opts.checkpoint_uri is None
    from kafka_log_sink.options import staging_store_uri
    opts = parse_sink_options({"path": str(tmp_path), "checkpointLocation": "s3a://bucket/chk/q1/",
                               "rsm.config.s3.endpoint": "http://127.0.0.1:1", "rsm.config.s3.region": "us-east-1"})
    assert opts.checkpoint is None and staging_store_uri(opts) == "s3a://bucket/chk/q1/kafkalog-sink/staging"
    opts = parse_sink_options({"path": str(tmp_path), "checkpointLocation": "s3a://bucket/chk",
                               "stagingLocation": str(tmp_path / "stage")})
    assert staging_store_uri(opts) is None and opts.staging == tmp_path / "stage"


# ---------------------------------------------------------------------------- staging in the store

def test_tasks_stage_in_the_store_and_the_commit_fetches_appends_and_deletes(seaweedfs, tmp_path):
    where = prefix()
    opts = parse_sink_options({"path": str(tmp_path / "data"), "topic": "t", "numPartitions": "3",
                               "stagingLocation": f"s3://{seaweedfs.bucket}/{where}/stage",
                               "checkpointLocation": f"s3a://{seaweedfs.bucket}/{where}/chk",
                               **store_options(seaweedfs)})
    producer = load_producer(opts)
    assert load_producer(opts) == producer                         # read back from the store
    m1 = stage_all(opts, producer, "stream", None, iter(table(600).to_batches(max_chunksize=100)))
    m2 = stage_all(opts, producer, "stream", None, iter(table(400, 600).to_batches(max_chunksize=100)))
    runs = m1.runs + m2.runs
    assert all(r.in_store for r in runs) and len(runs) == 6
    assert objects(seaweedfs, f"{where}/stage") == sorted(f"{seaweedfs.bucket}/" + r.path.split("/", 1)[1]
                                                           for r in runs)
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").glob("*/*.batches"))
    SinkCoordinator(opts).commit(runs, 0, producer)
    assert sorted(committed_values(tmp_path / "data")) == sorted(f"v{i}" for i in range(1000))
    assert objects(seaweedfs, f"{where}/stage") == []             # taken by the commit
    assert objects(seaweedfs, f"{where}/chk") == [f"{seaweedfs.bucket}/{where}/chk/kafkalog-sink/producer.json",
                                                  f"{seaweedfs.bucket}/{where}/chk/kafkalog-sink/txn.json"]
    # Spark replays the last batch after a restart: the transaction log in the store says complete
    again = stage_all(opts, producer, "stream", None, iter(table(1000).to_batches()))
    SinkCoordinator(opts).commit(again.runs, 0, producer)
    assert len(committed_values(tmp_path / "data")) == 1000
    assert objects(seaweedfs, f"{where}/stage") == []             # the replay's files discarded


def _entries(seaweedfs, folder: str) -> list[str]:
    """Everything under ``folder``: objects and directory entries."""
    infos = seaweedfs.filesystem().get_file_info(
        pafs.FileSelector(f"{seaweedfs.bucket}/{folder}", recursive=True, allow_not_found=True))
    return sorted(i.path for i in infos)


def test_a_commit_deletes_its_writes_folder_whole_and_nothing_of_another_write(seaweedfs, tmp_path):
    """A commit deletes the staging folder of the writer its runs came from, whole (files and
    folders: nothing left per micro-batch), and nothing else: the staged file of another query
    sharing the staging location, not yet committed, stays and commits after."""
    where = prefix()
    opts = parse_sink_options({"path": str(tmp_path / "data"), "topic": "t", "numPartitions": "2",
                               "stagingLocation": f"s3://{seaweedfs.bucket}/{where}", **store_options(seaweedfs)})
    other = parse_sink_options({"path": str(tmp_path / "other"), "topic": "t", "numPartitions": "2",
                                "stagingLocation": f"s3://{seaweedfs.bucket}/{where}", **store_options(seaweedfs)})
    producer, other_producer = load_producer(opts), load_producer(other)
    mine = [r for t in range(3) for r in
            stage_all(opts, producer, "stream-a", None, iter(table(100, 100 * t).to_batches())).runs]
    theirs = stage_all(other, other_producer, "stream-b", None, iter(table(50).to_batches())).runs
    assert {r.path.split("/")[-4] for r in mine} == {"stream-a"} and len(mine) == 6
    SinkCoordinator(opts).commit(mine, 0, producer)
    assert sorted(committed_values(tmp_path / "data")) == sorted(f"v{i}" for i in range(300))
    left = _entries(seaweedfs, where)
    assert not [e for e in left if "/stream-a" in e]
    assert objects(seaweedfs, where) == sorted(f"{seaweedfs.bucket}/" + r.path.split("/", 1)[1] for r in theirs)
    SinkCoordinator(other).commit(theirs, 0, other_producer)
    assert sorted(committed_values(tmp_path / "other")) == sorted(f"v{i}" for i in range(50))
    assert not [e for e in _entries(seaweedfs, where) if "/stream-" in e]


def test_local_staging_leaves_no_folder_of_a_committed_write(tmp_path):
    """With local staging the commit removes the write's files, then its task, batch and write
    folders once empty: none pile up per query or per write, and another write's stay."""
    opts = parse_sink_options({"path": str(tmp_path / "data"), "topic": "t", "numPartitions": "2",
                               "stagingLocation": str(tmp_path / "stage")})
    producer = load_producer(opts)
    mine = [r for t in range(2) for r in
            stage_all(opts, producer, "write-a", None, iter(table(100, 100 * t).to_batches())).runs]
    theirs = stage_all(opts, producer, "write-b", None, iter(table(50).to_batches())).runs
    SinkCoordinator(opts).commit(mine, 0, producer)
    assert sorted(committed_values(tmp_path / "data")) == sorted(f"v{i}" for i in range(200))
    assert sorted(p.name for p in (tmp_path / "stage").iterdir()) == ["write-b"]
    assert all(Path(r.path).exists() for r in theirs)


def test_a_failed_task_leaves_nothing_and_a_killed_ones_files_are_swept(seaweedfs, tmp_path):
    where = prefix()
    opts = parse_sink_options({"path": str(tmp_path / "data"), "topic": "t", "numPartitions": "2",
                               "stagingLocation": f"s3://{seaweedfs.bucket}/{where}", **store_options(seaweedfs)})
    producer = load_producer(opts)

    def failing():
        yield from table(300).to_batches(max_chunksize=100)
        raise RuntimeError("the task fails half way")

    with pytest.raises(RuntimeError, match="half way"):
        stage_all(opts, producer, "stream", None, failing())
    assert objects(seaweedfs, where) == []
    # a killed attempt: its files are whole objects no commit message names
    stage_all(opts, producer, "stream", None, iter(table(50).to_batches()))
    left = objects(seaweedfs, where)
    assert left
    coordinator = SinkCoordinator(opts)
    assert coordinator.store is not None
    assert coordinator.store.sweep(older_than_s=3600) == 0 and objects(seaweedfs, where) == left
    assert coordinator.store.sweep(older_than_s=-1) == len(left) and objects(seaweedfs, where) == []


def test_a_staged_object_changed_after_its_task_fails_the_commit_naming_it(seaweedfs, tmp_path):
    where = prefix()
    opts = parse_sink_options({"path": str(tmp_path / "data"), "topic": "t",
                               "stagingLocation": f"s3://{seaweedfs.bucket}/{where}", **store_options(seaweedfs)})
    producer = load_producer(opts)
    m = stage_all(opts, producer, "stream", None, iter(table(100).to_batches()))
    with seaweedfs.filesystem().open_output_stream(m.runs[0].path) as out:
        out.write(b"short")
    with pytest.raises(KafkaLogError, match=f"{m.runs[0].path}.*holds 5 bytes"):
        SinkCoordinator(opts).commit(m.runs, 0, producer)
    assert committed_values(tmp_path / "data") == []


def test_a_damaged_object_among_many_partitions_fails_the_commit_and_leaves_no_fetched_copy(seaweedfs, tmp_path):
    """The commit fetches partitions ahead of their appends: when one object is damaged, the
    commit fails naming it, nothing is committed, no fetched copy stays on the driver's disk, and
    the batch staged again commits whole; every staged object is gone after."""
    where = prefix()
    opts = parse_sink_options({"path": str(tmp_path / "data"), "topic": "t", "numPartitions": "12",
                               "stagingLocation": f"s3://{seaweedfs.bucket}/{where}",
                               "checkpointLocation": str(tmp_path / "chk"), **store_options(seaweedfs)})
    producer = load_producer(opts)
    runs = [r for start in (0, 3000) for r in
            stage_all(opts, producer, "stream", None, iter(table(3000, start).to_batches(max_chunksize=500))).runs]
    assert len({r.partition for r in runs}) == 12
    victim = min(runs, key=lambda r: r.partition)       # appended first: the others fetched ahead
    with seaweedfs.filesystem().open_output_stream(victim.path) as out:
        out.write(b"short")
    with pytest.raises(KafkaLogError, match=f"{victim.path}.*holds 5 bytes"):
        SinkCoordinator(opts).commit(runs, 0, producer)
    assert committed_values(tmp_path / "data") == []
    SinkCoordinator(opts).abort(runs)                   # as Spark aborts the failed batch
    fetched = tmp_path / "chk" / "kafkalog-sink" / "staging" / "fetched"
    assert fetched.exists() and [p for p in fetched.rglob("*") if p.is_file()] == []
    again = [r for start in (0, 3000) for r in
             stage_all(opts, producer, "stream", None, iter(table(3000, start).to_batches(max_chunksize=500))).runs]
    SinkCoordinator(opts).commit(again, 0, producer)
    assert sorted(committed_values(tmp_path / "data")) == sorted(f"v{i}" for i in range(6000))
    assert [p for p in fetched.rglob("*") if p.is_file()] == []
    assert objects(seaweedfs, where) == []      # the committed batch's by its commit, the failed one's by abort


def _object(store: StagingStore, name: str, data: bytes) -> str:
    path = store.path("w", "batch-0", "task", name)
    f = store.open(path)
    f.write(data)
    f.finish()
    return path


def test_the_commits_fetch_checks_each_batch_as_it_arrives_and_names_a_damaged_one(tmp_path, monkeypatch):
    """The commit's fetch of a staged object copies it whole and checks every batch's CRC as
    its bytes arrive, batches cut between two reads included (so the commit reads only their
    headers back): a damaged batch fails it naming the object, the store and the batch's
    position in the object; an object whose last batch is cut fails it; neither leaves a local
    copy. A batch larger than one read is copied unchecked, and the fetch says so: the commit
    checks that file itself."""
    monkeypatch.setattr(staging_store, "FETCH_CHUNK", 64 << 10)
    store = StagingStore(f"file://{tmp_path}/stage", {})
    values = [bytes([i % 251]) * (100 + i % 900) for i in range(2000)]
    data = bytes(encode_batches(pa.table({"key": [b"k%d" % i for i in range(2000)], "value": values}),
                                max_batch_bytes=20_000))
    positions = scan_batches(data).position
    assert len(data) > 10 * (64 << 10) and len(positions) > 40
    path = _object(store, "ok.batches", data)
    assert store.fetch(path, len(data), tmp_path / "ok") is True
    assert (tmp_path / "ok").read_bytes() == data

    victim = int(positions[np.searchsorted(positions, 300_000)])      # in a later read than the first
    damaged = bytearray(data)
    damaged[victim + 100] ^= 0xFF
    path = _object(store, "damaged.batches", bytes(damaged))
    with pytest.raises(CorruptRecordError) as e:
        store.fetch(path, len(data), tmp_path / "damaged")
    assert e.value.position == victim
    assert path in str(e.value) and store.name in str(e.value) and f"position {victim}" in str(e.value)
    assert not (tmp_path / "damaged").exists()

    path = _object(store, "cut.batches", data[:victim + 100])
    with pytest.raises(KafkaLogError, match=f"ends with 100 bytes that are not a whole batch after {victim} bytes"):
        store.fetch(path, victim + 100, tmp_path / "cut")
    assert not (tmp_path / "cut").exists()

    big = bytes(encode_batches(pa.table({"key": [b"big"], "value": [b"v" * (100 << 10)]}))) + data
    path = _object(store, "big.batches", big)
    assert store.fetch(path, len(big), tmp_path / "big") is False
    assert (tmp_path / "big").read_bytes() == big


def _resident_pages(path: Path) -> tuple[int, int]:
    """(pages of ``path`` in the page cache, pages of ``path``), from ``mincore``."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size, page = path.stat().st_size, mmap.PAGESIZE
    pages = (size + page - 1) // page
    vec = (ctypes.c_ubyte * pages)()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value)
        try:
            assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(v & 1 for v in vec), pages


def test_under_fsync_per_commit_a_fetched_file_goes_to_the_disk_directly(tmp_path):
    """With a writer (the commit gives one under fsync per commit) a big fetched file is sent
    to the disk directly, as a task's local staged file is: none of its pages are in the page
    cache after, but the unaligned tail's; without one it is written through the page cache.
    Both copies are the object's bytes."""
    probe = tmp_path / "probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600))
    except OSError as e:
        pytest.skip(f"no O_DIRECT on {tmp_path}'s file system: {e}")
    store = StagingStore(f"file://{tmp_path}/stage", {})
    values = [bytes([i % 251]) * 1000 for i in range(12_000)]
    data = bytes(encode_batches(pa.table({"key": [b"k%d" % i for i in range(12_000)], "value": values})))
    assert len(data) > 2 * staging_file.DIRECT_CHUNK
    path = _object(store, "t-0.batches", data)
    with ThreadPoolExecutor(2) as writer:
        assert store.fetch(path, len(data), tmp_path / "direct", writer) is True
    assert store.fetch(path, len(data), tmp_path / "buffered") is True
    resident, pages = _resident_pages(tmp_path / "direct")
    assert resident <= 1 and pages > 2000           # at most the unaligned tail's page
    resident, pages = _resident_pages(tmp_path / "buffered")
    assert resident == pages
    assert (tmp_path / "direct").read_bytes() == data == (tmp_path / "buffered").read_bytes()


# ---------------------------------------------------------------------------- tiering

def test_tiering_fails_while_the_store_is_down_and_catches_up_at_the_next_commit(seaweedfs, tmp_path, caplog):
    where = prefix()
    opts = parse_sink_options({"path": str(tmp_path / "data"), "topic": "t", "segment.bytes": "4096",
                               "batch.size": "1024",
                               "remote.storage.enable": "true", "local.retention.bytes": "1",
                               "remotePath": f"s3://{seaweedfs.bucket}/{where}", **store_options(seaweedfs)})
    producer = load_producer(opts)
    coordinator = SinkCoordinator(opts)
    tiering = SinkTiering(opts)
    m = stage_all(opts, producer, "stream", None, iter(table(2000).to_batches(max_chunksize=100)))
    coordinator.commit(m.runs, 0, producer)
    with Log.open(tmp_path / "data" / "t-0", read_only=True) as log:
        segments = len(log.segments)
    assert segments > 3
    seaweedfs.stop()
    try:
        with caplog.at_level(logging.ERROR, logger="kafka_log_sink.tiering"):
            assert tiering.after_commit([("t", 0)], coordinator.open_partition) == 1
        failed = [r.getMessage() for r in caplog.records if r.name == "kafka_log_sink.tiering"]
        assert failed and f"s3://{seaweedfs.bucket}/{where}" in failed[0] and "t-0" in failed[0]
        assert "retried at the next commit" in failed[0]
        assert sorted(committed_values(tmp_path / "data")) == sorted(f"v{i}" for i in range(2000))
        with Log.open(tmp_path / "data" / "t-0", read_only=True) as log:
            assert len(log.segments) == segments and log.log_start_offset == 0     # nothing deleted locally
    finally:
        seaweedfs.start()
    # the next commit's pass (another partition list: the failed one is carried over)
    assert tiering.after_commit([], coordinator.open_partition) == 0
    with Log.open(tmp_path / "data" / "t-0", read_only=True) as log:
        assert len(log.segments) == 1 and log.log_start_offset > 0               # local retention applied
    assert any(p.endswith(".log") for p in objects(seaweedfs, where))


# ---------------------------------------------------------------------------- through Spark

def test_spark_stream_with_staging_in_the_store_never_shows_the_secret(spark, seaweedfs, tmp_path):
    """A streaming query (local[2]) staging in the store writes every input row once; its plan,
    progress and the error of a write whose store is unreachable never show the secret key."""
    with Log.open(tmp_path / "in" / "in-0") as log:
        log.append(pa.table({"value": [f"r{i}".encode() for i in range(500)]}))
    where = prefix()
    store = store_options(seaweedfs)
    secret = store["rsm.config.s3.secret.access.key"]
    q = (spark.readStream.format("kafkalog").option("path", str(tmp_path / "in")).option("subscribe", "in")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "200").load().selectExpr("value")
         .writeStream.format("kafkalog").option("path", str(tmp_path / "out")).option("topic", "t")
         .option("checkpointLocation", str(tmp_path / "chk"))
         .option("stagingLocation", f"s3://{seaweedfs.bucket}/{where}").options(**store)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None
    shown = q._jsq.explainInternal(True) + json_dumps(q.recentProgress)
    assert "kafkalog" in shown.lower() or "python" in shown.lower()
    assert secret not in shown
    assert sorted(committed_values(tmp_path / "out")) == sorted(f"r{i}" for i in range(500)), (
        [p["numInputRows"] for p in q.recentProgress], sorted(str(p) for p in tmp_path.rglob("*")))
    assert objects(seaweedfs, where) == []
    df = spark.range(10).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception) as e:
        (df.write.format("kafkalog").option("path", str(tmp_path / "out2")).option("topic", "t")
         .option("stagingLocation", f"s3://{seaweedfs.bucket}/{where}")
         .options(**dict(store, **{"rsm.config.s3.endpoint": "http://127.0.0.1:9",
                                   "rsm.config.s3.retry.max.attempts": "1",
                                   "rsm.config.s3.connect.timeout.ms": "500"}))
         .mode("append").save())
    assert "127.0.0.1:9" in str(e.value) and secret not in str(e.value)
    assert committed_values(tmp_path / "out2") == []


def json_dumps(value) -> str:
    import json
    return json.dumps(value, default=str)


def test_on_a_file_system_without_atomic_uploads_a_staged_file_is_moved_to_its_name_when_whole(tmp_path):
    """A store that is not S3 (here pyarrow's local file system behind a URI, as hdfs:// or gs://
    would be): the task writes ``.<name>.uploading`` and moves it to its name at the end; a
    failed task's is deleted; the state file is replaced whole."""
    store = StagingStore(f"file://{tmp_path}/stage", {})
    assert not store.atomic_uploads
    data = bytes(encode_batches(table(100)))
    f = store.open(store.path("w", "batch-0", "task", "t-0.batches"))
    f.write(data)
    folder = tmp_path / "stage" / "w" / "batch-0" / "task"
    assert sorted(p.name for p in folder.iterdir()) == [".t-0.batches.uploading"]
    f.finish()
    assert sorted(p.name for p in folder.iterdir()) == ["t-0.batches"]
    assert (folder / "t-0.batches").read_bytes() == data
    local = tmp_path / "fetched"
    assert store.fetch(store.path("w", "batch-0", "task", "t-0.batches"), len(data), local)
    assert local.read_bytes() == data
    with pytest.raises(KafkaLogError, match=f"holds {len(data)} bytes, its task wrote {len(data) - 1}"):
        store.fetch(store.path("w", "batch-0", "task", "t-0.batches"), len(data) - 1, tmp_path / "again")
    assert not (tmp_path / "again").exists()
    failed = store.open(store.path("w", "batch-0", "task", "t-1.batches"))
    failed.write(b"y" * 10)
    failed.close()                                  # a failed task: never finished
    assert sorted(p.name for p in folder.iterdir()) == ["t-0.batches"]
    store.delete([store.path("w", "batch-0", "task", "t-0.batches")])
    assert not folder.exists()                      # the task folder goes with its last file
    store.write(store.path("state", "txn.json"), b"{}")
    store.write(store.path("state", "txn.json"), b'{"a": 1}')
    assert store.read(store.path("state", "txn.json")) == b'{"a": 1}'
    assert [p.name for p in (tmp_path / "stage" / "state").iterdir()] == ["txn.json"]


def test_spark_stream_with_remote_path_tiers_the_rolled_segments_after_its_commits(spark, seaweedfs, tmp_path):
    """A streaming query (3 micro-batches) with ``remotePath``: after the commits the rolled
    segments are in the store as finished remote segments, local retention left the active
    segment, and the remote segments plus the local log hold every record once, in order."""
    from storage_core.checkpoint import PartitionMetadataFile, TopicPartition
    from storage_core.remote import RemoteLogSegmentState, TopicBasedRemoteLogMetadataManager, TopicIdPartition

    with Log.open(tmp_path / "in" / "in-0") as log:
        log.append(pa.table({"value": [f"r{i:04d}".encode() * 8 for i in range(900)]}))
    where = prefix()
    q = (spark.readStream.format("kafkalog").option("path", str(tmp_path / "in")).option("subscribe", "in")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "300").load().selectExpr("value")
         .writeStream.format("kafkalog").option("path", str(tmp_path / "out")).option("topic", "t")
         .option("checkpointLocation", str(tmp_path / "chk"))
         .option("segment.bytes", "8192").option("batch.size", "2048")
         .option("remote.storage.enable", "true").option("local.retention.bytes", "1")
         .option("remotePath", f"s3://{seaweedfs.bucket}/{where}").options(**store_options(seaweedfs))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None and len(q.recentProgress) == 3
    d = tmp_path / "out" / "t-0"
    tip = TopicIdPartition(PartitionMetadataFile(d).read(), TopicPartition("t", 0))
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(tmp_path / "out")}, read_only=True)
    try:
        remote = sorted((m.start_offset, m.end_offset) for m in rlmm.list_remote_log_segments(tip)
                        if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    finally:
        rlmm.close()
    with Log.open(d, read_only=True) as log:
        assert len(log.segments) == 1 and remote                  # local retention: the active segment only
        assert remote[0][0] == 0 and remote[-1][1] + 1 == log.log_start_offset
        assert all(b[0] == a[1] + 1 for a, b in zip(remote, remote[1:]))
        # 900 records and a COMMIT marker per micro-batch
        assert log.log_end_offset == 903
    assert any(p.endswith(".log") for p in objects(seaweedfs, where))

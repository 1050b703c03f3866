"""PyArrowRemoteStorageManager on a local folder and on a real S3 server (SeaweedFS): real
segments made by ``Log`` are copied in LocalTieredStorage's layout, read back byte-equal (ranges
and every index), deleted idempotently and copied again; a failed copy leaves no fileset a reader
takes for complete; the store going away gives errors naming the segment and the store, and the
local files are untouched."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from storage_core.checkpoint import (EpochEntry, format_leader_epoch_checkpoint, topic_id_from_str,
                                     topic_id_to_str)
from storage_core.config import LogConfig
from storage_core.errors import InvalidConfigError
from storage_core.format import RecordInput as Record, build_batch
from storage_core.log import Log, segment_paths
from storage_core.producer import snapshot_path
from storage_core.remote import (IndexType, LogSegmentData, PyArrowRemoteStorageManager,
                                 RemoteLogSegmentId, RemoteLogSegmentMetadata,
                                 RemotePositionError, RemoteResourceNotFoundError, RemoteStorageError,
                                 RemoteStorageManager,
                                 RetriableRemoteStorageError, TopicIdPartition, serialize)

TOPIC_ID = topic_id_from_str("jF8s79t9SrG_PNqlwv7bAA")
TIP = TopicIdPartition(TOPIC_ID, ("tieredTopic", 0))
REPO = Path(__file__).resolve().parents[2]
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".leader_epoch_checkpoint", ".snapshot")


# ------------------------------------------------------------------------------ a real log

class Segment:
    """One rolled segment of a real log and what copying it needs."""

    def __init__(self, log_dir: Path, base: int, next_base: int, epochs: list[EpochEntry]) -> None:
        paths = segment_paths(log_dir, base)
        self.base, self.next_base = base, next_base
        txn = paths[".txnindex"] if paths[".txnindex"].exists() else None
        self.data = LogSegmentData(paths[".log"], paths[".index"], paths[".timeindex"], txn,
                                   snapshot_path(log_dir, next_base),
                                   format_leader_epoch_checkpoint(epochs).encode())
        self.size = paths[".log"].stat().st_size

    def metadata(self, segment_id: uuid.UUID | None = None) -> RemoteLogSegmentMetadata:
        sid = RemoteLogSegmentId(TIP, segment_id) if segment_id else RemoteLogSegmentId.generate_new(TIP)
        return RemoteLogSegmentMetadata(sid, self.base, self.next_base - 1, 1700000000000, 1, 1700000001000,
                                        self.size, {0: self.base}, txn_idx_empty=self.data.transaction_index is None)

    def local_bytes(self) -> dict[str, bytes]:
        d = self.data
        out = {".log": d.log_segment.read_bytes(), ".index": d.offset_index.read_bytes(),
               ".timeindex": d.time_index.read_bytes(), ".snapshot": d.producer_snapshot_index.read_bytes(),
               ".leader_epoch_checkpoint": d.leader_epoch_index}
        if d.transaction_index is not None:
            out[".txnindex"] = d.transaction_index.read_bytes()
        return out

    def fingerprint(self) -> str:
        return hashlib.sha256(b"".join(self.local_bytes().values())).hexdigest()


@pytest.fixture(scope="module")
def segments(tmp_path_factory) -> list[Segment]:
    """Two rolled segments of ``tieredTopic-0``: the first with an aborted transaction (so a
    ``.txnindex``), the second without one; indexes with many entries."""
    log_dir = tmp_path_factory.mktemp("log") / "tieredTopic-0"
    log = Log.open(log_dir, LogConfig(index_interval_bytes=512), topic_id=TOPIC_ID)
    try:
        pid = 4242
        for i in range(300):
            value = os.urandom(100 + i % 50)
            log.append_raw(build_batch([Record(value=value, key=b"k%d" % i, timestamp=1700000000000 + i)]))
            if i == 100:
                log.append_raw(build_batch([Record(value=b"aborted", timestamp=1700000000100)], producer_id=pid,
                                           producer_epoch=0, base_sequence=0, transactional=True))
                log.append_end_txn_marker(pid, 0, "ABORT", 0, timestamp=1700000000101)
        first_next = log.roll().base_offset
        for i in range(200):
            log.append_raw(build_batch([Record(value=os.urandom(300), timestamp=1700000001000 + i)]))
        second_next = log.roll().base_offset
        log.flush()
        epochs = [EpochEntry(0, 0)]
        segs = [Segment(log_dir, 0, first_next, epochs), Segment(log_dir, first_next, second_next, epochs)]
    finally:
        log.close()
    assert segs[0].data.transaction_index is not None and segs[1].data.transaction_index is None
    assert all(s.data.producer_snapshot_index.exists() for s in segs)
    assert all(len(s.local_bytes()[".index"]) >= 8 * 20 for s in segs)        # many index entries
    return segs


# ------------------------------------------------------------------------------ the stores

@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    """(manager settings, the store's root in its file system, that file system)."""
    if request.param == "local":
        root = tmp_path / "remote"
        return {"dir": str(root)}, str(root), pafs.LocalFileSystem()
    seaweedfs = request.getfixturevalue("seaweedfs")
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    return seaweedfs.storage_configs(prefix), f"{seaweedfs.bucket}/{prefix}", seaweedfs.filesystem()


def objects(fs: pafs.FileSystem, root: str) -> dict[str, int]:
    """Every object under ``root``: relative name -> size."""
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return {i.path[len(root) + 1:]: i.size for i in infos if i.type == pafs.FileType.File}


def expected_names(md: RemoteLogSegmentMetadata, with_txn: bool) -> set[str]:
    name = (f"kafka-tiered-storage/tieredTopic-0-jF8s79t9SrG_PNqlwv7bAA/{md.start_offset:020d}-"
            f"{topic_id_to_str(md.remote_log_segment_id.id)}")
    return {name + s for s in SUFFIXES if with_txn or s != ".txnindex"}


def small_segment_data(folder: Path) -> LogSegmentData:
    """Side files of a few bytes: for tests of the configuration, not of the layout."""
    names = {}
    for name, content in [("log", b"data"), ("index", b""), ("timeindex", b""), ("snapshot", b"s")]:
        names[name] = folder / f"small.{name}"
        names[name].write_bytes(content)
    return LogSegmentData(names["log"], names["index"], names["timeindex"], None, names["snapshot"], b"0\n0\n")


def read_all(stream, chunk: int | None = None) -> bytes:
    with stream:
        if chunk is None:
            return stream.read()
        parts = []
        while part := stream.read(chunk):
            parts.append(part)
        return b"".join(parts)


def read_into_all(stream, chunk: int) -> bytes:
    """The stream read with ``readinto`` into one reused buffer of ``chunk`` bytes."""
    buf, parts = bytearray(chunk), []
    with stream:
        while n := stream.readinto(buf):
            parts.append(bytes(buf[:n]))
    return b"".join(parts)


# ------------------------------------------------------------------------------ tests

def test_copy_writes_localtieredstorage_layout_and_everything_reads_back_byte_equal(segments, store):
    configs, root, fs = store
    rsm = PyArrowRemoteStorageManager(configs)
    assert isinstance(rsm, RemoteStorageManager)
    mds = []
    for seg in segments:
        md = seg.metadata()
        assert rsm.copy_log_segment_data(md, seg.data) is None
        mds.append(md)
    listing = objects(fs, root)
    assert set(listing) == expected_names(mds[0], True) | expected_names(mds[1], False)   # and no temporaries
    for seg, md in zip(segments, mds):
        local = seg.local_bytes()
        log = local[".log"]
        assert read_all(rsm.fetch_log_segment(md, 0)) == log
        assert read_all(rsm.fetch_log_segment(md, 0), chunk=997) == log
        assert read_into_all(rsm.fetch_log_segment(md, 0), 1000) == log
        for start, end in [(0, 0), (1, 61), (len(log) // 3, len(log) // 2), (len(log) - 1, None),
                           (len(log) - 70, len(log) - 1), (len(log), None)]:
            want = log[start:None if end is None else end + 1]
            assert read_all(rsm.fetch_log_segment(md, start, end)) == want
            # straight into a buffer larger than the range: the range's bytes, then 0 at its end
            assert read_into_all(rsm.fetch_log_segment(md, start, end), len(log) + 10) == want
        # streams of one object (on S3 they share its open file) read in turns, by read and
        # readinto, each from its own position
        with rsm.fetch_log_segment(md, 0) as a, rsm.fetch_log_segment(md, 500) as b:
            buf = bytearray(100)
            assert a.readinto(buf) == 100 and bytes(buf) == log[:100]
            assert b.read(100) == log[500:600]
            assert a.read(50) == log[100:150]
            assert b.readinto(buf) == 100 and bytes(buf) == log[600:700]
            assert a.readinto(memoryview(buf)[10:30]) == 20 and bytes(buf[10:30]) == log[150:170]
        for index_type, suffix in [(IndexType.OFFSET, ".index"), (IndexType.TIMESTAMP, ".timeindex"),
                                   (IndexType.PRODUCER_SNAPSHOT, ".snapshot"),
                                   (IndexType.LEADER_EPOCH, ".leader_epoch_checkpoint")]:
            assert read_all(rsm.fetch_index(md, index_type)) == local[suffix], index_type
    assert read_all(rsm.fetch_index(mds[0], IndexType.TRANSACTION)) == segments[0].local_bytes()[".txnindex"]
    with pytest.raises(RemoteResourceNotFoundError, match="TRANSACTION not found") as e:
        rsm.fetch_index(mds[1], IndexType.TRANSACTION)
    assert str(segments[1].base) in str(e.value) and rsm.store in str(e.value)
    with pytest.raises(RemotePositionError, match=r"End position \d+ is beyond segment .* of \d+ bytes"):
        rsm.fetch_log_segment(mds[0], 0, segments[0].size)
    with pytest.raises(RemotePositionError, match="beyond"):
        rsm.fetch_log_segment(mds[0], segments[0].size + 1)
    with pytest.raises(RemotePositionError, match="Start position must be positive"):
        rsm.fetch_log_segment(mds[0], -1)
    with pytest.raises(RemotePositionError, match="End position 4 cannot be less than start position 5"):
        rsm.fetch_log_segment(mds[0], 5, 4)


def test_delete_is_idempotent_and_a_copy_is_repeatable(segments, store):
    configs, root, fs = store
    rsm = PyArrowRemoteStorageManager(configs)
    seg = segments[0]
    md = seg.metadata()
    rsm.copy_log_segment_data(md, seg.data)
    rsm.copy_log_segment_data(md, seg.data)            # a retry of the same copy overwrites
    assert set(objects(fs, root)) == expected_names(md, True)
    other = segments[1].metadata()
    rsm.copy_log_segment_data(other, segments[1].data)
    rsm.delete_log_segment_data(md)
    assert set(objects(fs, root)) == expected_names(other, False)          # the other segment stays
    rsm.delete_log_segment_data(md)                                         # idempotent
    with pytest.raises(RemoteResourceNotFoundError):
        read_all(rsm.fetch_log_segment(md, 0))
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_index(md, IndexType.OFFSET)
    rsm.copy_log_segment_data(md, seg.data)
    assert read_all(rsm.fetch_log_segment(md, 0)) == seg.local_bytes()[".log"]
    assert set(objects(fs, root)) == expected_names(md, True) | expected_names(other, False)
    keep = PyArrowRemoteStorageManager({**configs, "delete.enable": "false"})
    keep.delete_log_segment_data(md)                                        # LocalTieredStorage's no-op
    assert expected_names(md, True) <= set(objects(fs, root))


def test_a_failed_copy_leaves_no_object_and_names_segment_and_store(segments, store, tmp_path):
    """Fault injection: the ``.log`` the copy is given is gone, after the side files went up."""
    configs, root, fs = store
    rsm = PyArrowRemoteStorageManager(configs)
    seg = segments[0]
    d = seg.data
    broken = LogSegmentData(tmp_path / "missing.log", d.offset_index, d.time_index, d.transaction_index,
                            d.producer_snapshot_index, d.leader_epoch_index)
    md = seg.metadata()
    with pytest.raises(RemoteStorageError) as e:
        rsm.copy_log_segment_data(md, broken)
    text = str(e.value)
    assert "tieredTopic-0" in text and "offsets 0-" in text and rsm.store in text and "missing.log" in text
    assert objects(fs, root) == {}


def _sigterm_store_after(rsm: PyArrowRemoteStorageManager, seaweedfs, n: int) -> None:
    """Fault injection: the server is stopped after ``n`` objects of a copy went up."""
    put = rsm._put
    done = []

    def put_then_stop(*args):
        put(*args)
        done.append(args[1])
        if len(done) == n:
            seaweedfs.stop()

    rsm._put = put_then_stop


def test_s3_store_going_away_mid_copy_and_mid_read_names_segment_and_store(segments, seaweedfs, caplog):
    prefix = f"gone-{uuid.uuid4().hex[:8]}"
    root = f"{seaweedfs.bucket}/{prefix}"
    rsm = PyArrowRemoteStorageManager(seaweedfs.storage_configs(prefix))
    seg = segments[0]
    before = seg.fingerprint()
    md = seg.metadata()

    # a copy during which the server stops: the error names the segment and the store
    _sigterm_store_after(rsm, seaweedfs, 2)
    with caplog.at_level(logging.WARNING), pytest.raises(RemoteStorageError) as e:
        rsm.copy_log_segment_data(md, seg.data)
    assert isinstance(e.value, RetriableRemoteStorageError), e.value
    text = str(e.value)
    assert "segment" in text and "tieredTopic-0" in text and "offsets 0-" in text
    assert f"s3://{root}" in text and seaweedfs.endpoint in text
    assert seaweedfs.secret_key not in text and seaweedfs.secret_key not in caplog.text
    assert seg.fingerprint() == before                  # local data untouched

    seaweedfs.start()
    left = objects(seaweedfs.filesystem(), root)
    log_name = next(iter(n for n in expected_names(md, True) if n.endswith(".log")))
    assert log_name not in left                         # no .log: the fileset is not complete
    rsm = PyArrowRemoteStorageManager(seaweedfs.storage_configs(prefix))
    rsm.delete_log_segment_data(md)                     # what the copy left, the metadata manager deletes
    assert objects(seaweedfs.filesystem(), root) == {}

    # a read during which the server stops
    rsm.copy_log_segment_data(md, seg.data)
    stream = rsm.fetch_log_segment(md, 0)
    assert stream.read(100) == seg.local_bytes()[".log"][:100]
    seaweedfs.stop()
    with pytest.raises(RetriableRemoteStorageError) as e:
        stream.read()
    text = str(e.value)
    assert "tieredTopic-0" in text and f"s3://{root}" in text and "at byte 100" in text
    with pytest.raises(RetriableRemoteStorageError) as e:
        stream.readinto(bytearray(64))
    text = str(e.value)
    assert "tieredTopic-0" in text and f"s3://{root}" in text and "at byte 100" in text
    with pytest.raises(RemoteStorageError) as e:
        rsm.fetch_index(md, IndexType.OFFSET)
    assert "OFFSET index" in str(e.value) and f"s3://{root}" in str(e.value)
    assert seg.fingerprint() == before
    seaweedfs.start()
    assert read_all(rsm.fetch_log_segment(md, 0)) == seg.local_bytes()[".log"]


def test_broker_style_configuration_and_no_secret_shown(seaweedfs, caplog, tmp_path):
    settings = seaweedfs.storage_configs("cfg")
    props = {f"rsm.config.{k}": v for k, v in settings.items()}
    props.update({"broker.id": "3", "remote.log.storage.system.enable": "true"})
    with caplog.at_level(logging.DEBUG):
        rsm = PyArrowRemoteStorageManager.from_broker_properties(props)
    assert rsm.root == f"{seaweedfs.bucket}/cfg/kafka-tiered-storage"
    assert rsm.configs["broker.id"] == "3" and "s3.secret.access.key" not in rsm.configs
    for shown in (repr(rsm), rsm.store, caplog.text, str(rsm.configs)):
        assert seaweedfs.secret_key not in shown
    custom = {"remote.log.storage.manager.impl.prefix": "tier.", **{f"tier.{k}": v for k, v in settings.items()}}
    assert PyArrowRemoteStorageManager.from_broker_properties(custom).root == rsm.root
    # credentials in the URI work and are not shown either
    uri_creds = {"storage.uri": f"s3://{seaweedfs.access_key}:{seaweedfs.secret_key}@{seaweedfs.bucket}/cfg",
                 "s3.endpoint": seaweedfs.endpoint}
    other = PyArrowRemoteStorageManager(uri_creds)
    for shown in (repr(other), other.store, str(other.configs)):
        assert seaweedfs.secret_key not in shown
    other.copy_log_segment_data(md := RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TIP), 0, 1, 0, 1, 0,
                                                               4, {0: 0}), small_segment_data(tmp_path))
    assert read_all(other.fetch_log_segment(md, 0)) == b"data"
    # a wrong secret: refused by the server, the error names the store and not the secret
    wrong = PyArrowRemoteStorageManager({**settings, "s3.secret.access.key": "not-the-secret"})
    md = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TIP), 0, 1, 0, 1, 0, 10, {0: 0})
    with pytest.raises(RemoteStorageError) as e:
        wrong.fetch_index(md, IndexType.OFFSET)
    assert "not-the-secret" not in str(e.value) and f"s3://{seaweedfs.bucket}/cfg" in str(e.value)


@pytest.mark.parametrize("configs, match", [
    ({}, "storage.uri"),
    ({"storage.uri": "s3://b/p", "s3.endpont": "http://x:1"}, "s3.endpont"),
    ({"storage.uri": "s3://b/p", "s3.access.key.id": "k"}, "s3.secret.access.key"),
    ({"storage.uri": "s3://b/p", "s3.endpoint": "ftp://x"}, "s3.endpoint"),
    ({"storage.uri": "s3://b/p", "s3.retry.max.attempts": "0"}, "s3.retry.max.attempts"),
    ({"storage.uri": "/tmp/x", "s3.region": "eu"}, "not an s3:// URI"),
    ({"storage.uri": "s3:///p"}, "names no bucket"),
    ({"storage.uri": "s3://b/p", "s3.session.token": "t"}, "s3.session.token is given without"),
])
def test_bad_settings_are_refused_naming_the_key(configs, match):
    with pytest.raises(InvalidConfigError, match=match):
        PyArrowRemoteStorageManager(configs)


def test_log_segment_data_requires_its_files():
    with pytest.raises(InvalidConfigError, match="log_segment"):
        LogSegmentData(None, Path("a"), Path("b"), None, Path("c"), b"")


# ------------------------------------------------------------------------------ Kafka's LocalTieredStorage

@pytest.fixture(scope="module")
def tiered_probe(local_tiered_storage_classpath, tmp_path_factory):
    """Runs tests/remote/TieredStorageProbe.java: Kafka's own LocalTieredStorage over a folder."""
    out = tmp_path_factory.mktemp("tiered-probe")
    source = Path(__file__).with_name("TieredStorageProbe.java")
    done = subprocess.run(["javac", "-cp", local_tiered_storage_classpath, "-d", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    def run(*args: str) -> str:
        done = subprocess.run(["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
                               f"{out}:{local_tiered_storage_classpath}", "TieredStorageProbe", *map(str, args)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"TieredStorageProbe {args[0]} failed:\n{done.stderr[-4000:]}"
        return done.stdout

    return run


def test_kafkas_local_tiered_storage_reads_what_we_write_and_we_read_what_it_writes(segments, tiered_probe,
                                                                                   tmp_path):
    """The layout is LocalTieredStorage's own: Kafka's class fetches every object we copied (and
    says the transaction index of a segment without one is not found), lists every fileset
    (its traverse parses every name under kafka-tiered-storage/), and what it copies we fetch."""
    root = tmp_path / "shared"
    rsm = PyArrowRemoteStorageManager({"dir": str(root)})
    ours = [seg.metadata() for seg in segments]
    for seg, md in zip(segments, ours):
        rsm.copy_log_segment_data(md, seg.data)
    # a copy that failed half way leaves nothing Kafka's listing trips over
    with pytest.raises(RemoteStorageError):
        rsm.copy_log_segment_data(segments[1].metadata(), LogSegmentData(
            tmp_path / "gone.log", *[getattr(segments[1].data, f) for f in
                                     ("offset_index", "time_index", "transaction_index", "producer_snapshot_index",
                                      "leader_epoch_index")]))
    for seg, md in zip(segments, ours):
        out = tmp_path / f"kafka-read-{seg.base}"
        out.mkdir()
        tiered_probe("fetch", root, serialize(md).hex(), out)
        local = seg.local_bytes()
        assert (out / "SEGMENT").read_bytes() == local[".log"]
        for index_type, suffix in [("OFFSET", ".index"), ("TIMESTAMP", ".timeindex"),
                                   ("PRODUCER_SNAPSHOT", ".snapshot"), ("LEADER_EPOCH", ".leader_epoch_checkpoint")]:
            assert (out / index_type).read_bytes() == local[suffix], index_type
        if ".txnindex" in local:
            assert (out / "TRANSACTION").read_bytes() == local[".txnindex"]
        else:
            assert (out / "TRANSACTION.missing").exists() and not (out / "TRANSACTION").exists()

    # the other way: Kafka copies, we fetch
    theirs = segments[0].metadata()
    d = segments[0].data
    epochs = tmp_path / "epochs"
    epochs.write_bytes(d.leader_epoch_index)
    tiered_probe("copy", root, serialize(theirs).hex(), d.log_segment, d.offset_index, d.time_index,
                 d.transaction_index or "-", d.producer_snapshot_index, epochs)
    assert read_all(rsm.fetch_log_segment(theirs, 0)) == segments[0].local_bytes()[".log"]
    for index_type, suffix in [(IndexType.OFFSET, ".index"), (IndexType.TIMESTAMP, ".timeindex"),
                               (IndexType.TRANSACTION, ".txnindex"), (IndexType.PRODUCER_SNAPSHOT, ".snapshot"),
                               (IndexType.LEADER_EPOCH, ".leader_epoch_checkpoint")]:
        assert read_all(rsm.fetch_index(theirs, index_type)) == segments[0].local_bytes()[suffix]

    listed = tiered_probe("traverse", root).split()
    ids = {topic_id_to_str(md.remote_log_segment_id.id) for md in (*ours, theirs)}
    assert {w for w in listed if w in ids} == ids and "tieredTopic" in listed


# ------------------------------------------------------------------------------ SIGKILL during copies

@pytest.fixture(scope="module")
def big_segment(tmp_path_factory) -> Segment:
    """One rolled segment of about 8 MiB, so that a copy takes a while."""
    log_dir = tmp_path_factory.mktemp("biglog") / "tieredTopic-0"
    with Log.open(log_dir, LogConfig(), topic_id=TOPIC_ID) as log:
        for _ in range(8):
            log.append(pa.table({"value": [os.urandom(1024) for _ in range(1024)]}))
        next_base = log.roll().base_offset
        log.flush()
    return Segment(log_dir, 0, next_base, [EpochEntry(0, 0)])


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_sigkill_during_copies_never_leaves_a_wrong_object_under_a_final_name(big_segment, kind, tmp_path, request):
    """Real processes killed with SIGKILL at random moments of repeated copies: every object under
    kafka-tiered-storage/ is a whole, byte-equal copy of its local file, and every fileset with a
    ``.log`` is complete; what a killed copy left, deleting its segment removes."""
    if kind == "local":
        configs, root, fs = {"dir": str(tmp_path / "remote")}, str(tmp_path / "remote"), pafs.LocalFileSystem()
    else:
        seaweedfs = request.getfixturevalue("seaweedfs")
        prefix = f"kill-{uuid.uuid4().hex[:8]}"
        configs, root, fs = seaweedfs.storage_configs(prefix), f"{seaweedfs.bucket}/{prefix}", seaweedfs.filesystem()
    d = big_segment.data
    spec = {"configs": configs, "topic_id": str(TOPIC_ID), "topic": "tieredTopic", "start": big_segment.base,
            "end": big_segment.next_base - 1, "size": big_segment.size,
            "data": {"log": str(d.log_segment), "index": str(d.offset_index), "timeindex": str(d.time_index),
                     "snapshot": str(d.producer_snapshot_index), "epochs": d.leader_epoch_index.decode()}}
    local = big_segment.local_bytes()
    rnd = random.Random(405)
    started: list[str] = []
    for _ in range(4):
        child = subprocess.Popen([sys.executable, str(Path(__file__).with_name("copy_runner.py")), json.dumps(spec)],
                                 stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
        try:
            first = child.stdout.readline().split()
            assert first[:1] == ["copying"], f"the copier did not start: {first}"
            started.append(first[1])
            time.sleep(rnd.uniform(0, 0.5))          # a random moment of the copies, not a timing assertion
        finally:
            child.kill()
            rest = child.communicate()[0]
        started += [line.split()[1] for line in rest.splitlines() if line.startswith("copying")]

    listing = objects(fs, root)
    filesets: dict[str, set[str]] = {}
    for name in listing:
        if not name.startswith("kafka-tiered-storage/"):
            continue                                  # .kafkalog-uploads: never read
        base = name.rsplit("/", 1)[1]
        stem, suffix = base.split(".", 1)
        filesets.setdefault(stem, set()).add("." + suffix)
        with fs.open_input_file(f"{root}/{name}") as f:
            assert f.read() == local["." + suffix], f"{name} is not a whole copy of its local file"
    for stem, suffixes in filesets.items():
        if ".log" in suffixes:
            assert suffixes == set(SUFFIXES) - {".txnindex"}, f"{stem} has a .log but not all its files"
    # the metadata manager deletes a copy that never finished: nothing of it remains
    rsm = PyArrowRemoteStorageManager(configs)
    for segment_id in started:
        rsm.delete_log_segment_data(RemoteLogSegmentMetadata(
            RemoteLogSegmentId(TIP, uuid.UUID(segment_id)), big_segment.base, big_segment.next_base - 1, 0, 1, 0,
            big_segment.size, {0: 0}))
    assert objects(fs, root) == {}


def test_store_configs_take_one_namespace_and_open_the_store(seaweedfs, tmp_path):
    from storage_core.remote import open_store, store_configs

    options = {f"rsm.config.{k}": v for k, v in seaweedfs.storage_configs().items() if k != "storage.uri"}
    options["path"] = "ignored: not in the namespace"
    configs = store_configs(options, uri=f"s3a://{seaweedfs.bucket}/ns-test")
    assert "path" not in configs and configs["s3.endpoint"] == seaweedfs.endpoint
    fs, root, name = open_store(configs)
    assert fs.type_name == "s3" and root == f"{seaweedfs.bucket}/ns-test"
    assert seaweedfs.secret_key not in name
    with fs.open_output_stream(f"{root}/probe") as out:
        out.write(b"x")
    assert fs.open_input_file(f"{root}/probe").read() == b"x"
    local_fs, local_root, _ = open_store(store_configs({}, uri=str(tmp_path)))
    assert local_fs.type_name == "local" and local_root == str(tmp_path)


def test_a_manager_that_only_reads_creates_nothing_in_its_folder(tmp_path):
    """A reader pointed at the wrong folder (kafkalog dump/verify, the Spark source) must not
    create anything there: the folders come with the first copy."""
    from storage_core.remote import PyArrowRemoteStorageManager

    target = tmp_path / "not-a-store"
    rsm = PyArrowRemoteStorageManager({"storage.uri": str(target)})
    assert str(target) in rsm.store and not target.exists()


def test_a_fifo_under_an_objects_name_in_a_folder_store_is_refused_not_waited_on(segments, tmp_path):
    """A local-folder store (LocalTieredStorage's layout) whose ``.log`` or index object is
    replaced by a FIFO: pyarrow opens files without ``O_NONBLOCK``, which would wait for a
    writer forever; the manager refuses the FIFO before opening it, naming it."""
    from fifo_guard import promptly
    from storage_core.errors import RemoteStorageError
    from storage_core.remote import IndexType, PyArrowRemoteStorageManager, RemoteLogSegmentFileType

    rsm = PyArrowRemoteStorageManager({"dir": str(tmp_path / "remote")})
    seg = segments[1]
    md = seg.metadata()
    rsm.copy_log_segment_data(md, seg.data)
    for file_type, fetch in ((RemoteLogSegmentFileType.SEGMENT, lambda: rsm.fetch_log_segment(md, 0).read(10)),
                             (RemoteLogSegmentFileType.OFFSET_INDEX, lambda: rsm.fetch_index(md, IndexType.OFFSET))):
        path = rsm.object_path(md, file_type)
        os.unlink(path)
        os.mkfifo(path)
        with pytest.raises(RemoteStorageError) as raised:
            promptly(fetch, path, what=f"a fetch of a FIFO as {file_type.name}")
        assert path in str(raised.value) and "FIFO" in str(raised.value), raised.value

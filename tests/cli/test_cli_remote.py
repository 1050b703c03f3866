"""``kafkalog dump`` and ``kafkalog verify`` over both tiers (KIP-405), run as real subprocesses,
on a local-folder store and on SeaweedFS (a real S3 server, the session fixture): a partition
tiered by ``kafkalog tier`` (the RemoteLogManager copies the rolled segments, then local
retention deletes what is remote), the store given as broker properties in a ``--config`` file.
``dump --partition`` prints every offset once, in order, the old ones from the remote objects it
names; ``verify`` passes on the good store and names the object and byte position after fault
injection: one byte of a remote ``.log`` object flipped (the object rewritten), one object
deleted, one truncated; the S3 secret never shows."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from storage_core.config import LogConfig
from storage_core.log import Log

BATCHES = 60
RECORDS = 5
TS0 = int(time.time() * 1000)          # within retention.ms (7 days) of the tier run


def kafkalog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage_core.tools", *args],
                          capture_output=True, text=True, timeout=300)


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


@dataclass
class Tiered:
    part: Path                    # the partition directory
    config: Path                  # broker properties naming the store
    fs: pafs.FileSystem           # the store, for fault injection
    secret: str | None

    def store_path(self, name: str) -> str:
        """An object's path in ``fs`` from the name the CLI gives it."""
        return name.split("://", 1)[-1]


@pytest.fixture(params=["folder", "s3"])
def tiered(request, tmp_path: Path) -> Tiered:
    if request.param == "folder":
        rsm = {"storage.uri": str(tmp_path / "store")}
        fs: pafs.FileSystem = pafs.LocalFileSystem()
    else:
        server = request.getfixturevalue("seaweedfs")
        rsm = server.storage_configs(prefix=f"cli-{uuid.uuid4().hex[:10]}")
        fs = server.filesystem()
    config = tmp_path / "broker.properties"
    config.write_text("# the store of the tiered topic\n" + "".join(f"rsm.config.{k}={v}\n" for k, v in rsm.items())
                      + "rlmm.config.remote.log.metadata.topic.num.partitions=2\n")
    data = tmp_path / "data"
    with Log.open(data / "orders-0", LogConfig(segment_bytes=2000, index_interval_bytes=300)) as log:
        for _ in range(BATCHES):
            start = log.log_end_offset
            log.append(pa.table({"value": pa.array([f"v{start + i}".encode() * 8 for i in range(RECORDS)]),
                                 "timestamp": pa.array([TS0 + start + i for i in range(RECORDS)], pa.int64())}))
    r = kafkalog("config", str(data), "--topic", "orders", "--set", "remote.storage.enable=true",
                 "--set", "local.retention.bytes=4000", "--set", "segment.bytes=2000",
                 "--set", "index.interval.bytes=300")
    assert r.returncode == 0, r.stderr
    r = kafkalog("tier", str(data), "--config", str(config), "--json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["partitions"]
    assert row["segments_copied"] >= 5 and row["local_segments_deleted"] >= 3, row
    return Tiered(data / "orders-0", config, fs, rsm.get("s3.secret.access.key"))


def _no_secret(t: Tiered, *runs: subprocess.CompletedProcess) -> None:
    if t.secret:
        assert not any(t.secret in r.stdout or t.secret in r.stderr for r in runs)


def test_dump_of_a_partition_prints_every_offset_from_both_tiers(tiered: Tiered) -> None:
    local_start = min(int(f.name[:20]) for f in tiered.part.glob("*.log"))
    assert local_start > 0, "local retention deleted nothing: the test would not read the remote tier"
    r = kafkalog("dump", "--partition", str(tiered.part), "--config", str(tiered.config), "--deep-iteration",
                 "--json")
    assert r.returncode == 0, r.stderr
    lines = json_lines(r.stdout)
    offsets = [x["offset"] for x in lines if x["type"] == "record"]
    assert offsets == list(range(BATCHES * RECORDS))
    remote = [x for x in lines if x["type"] == "dumping" and x.get("remote")]
    assert remote and remote[0]["startOffset"] == 0 and remote[-1]["endOffset"] == local_start - 1
    # each remote record came from the object the dumping line names, in LocalTieredStorage's layout
    by_file: dict[str, list[int]] = {}
    for x in lines:
        if x["type"] == "record":
            by_file.setdefault(x["file"], []).append(x["offset"])
    for d in remote:
        assert "/kafka-tiered-storage/orders-0-" in d["file"] and d["file"].endswith(".log")
        assert by_file[d["file"]] == list(range(d["startOffset"], d["endOffset"] + 1))
        assert tiered.fs.get_file_info(tiered.store_path(d["file"])).type == pafs.FileType.File
    text = kafkalog("dump", "--partition", str(tiered.part), "--config", str(tiered.config))
    assert text.returncode == 0, text.stderr
    assert f"Dumping {remote[0]['file']}\nLog starting offset: 0\nbaseOffset: 0 lastOffset: 4 count: 5" in text.stdout
    assert "remote segment 0-" in text.stderr                     # progress
    _no_secret(tiered, r, text)


def _verify(t: Tiered) -> tuple[subprocess.CompletedProcess, dict]:
    r = kafkalog("verify", str(t.part.parent), "--config", str(t.config), "--json")
    return r, json.loads(r.stdout)


def test_verify_checks_the_remote_segments_and_names_a_corrupt_or_missing_object(tiered: Tiered) -> None:
    r, doc = _verify(tiered)
    assert r.returncode == 0, r.stdout + r.stderr
    remote = [f for f in doc["files"] if f["remote"]]
    logs = [f["file"] for f in remote if f["file"].endswith(".log")]
    assert len(logs) >= 5 and all(f["status"] == "ok" for f in remote)
    assert {f["file"].rsplit(".", 1)[1] for f in remote} >= {"log", "index", "timeindex", "snapshot",
                                                            "leader_epoch_checkpoint"}
    assert doc["totals"]["corrupt"] == 0 and doc["totals"]["checked"] == len(doc["files"])

    # fault injection: one byte of the second batch of a remote .log flipped, the object rewritten
    victim = logs[1]
    dumped = json_lines(kafkalog("dump", "--partition", str(tiered.part), "--config", str(tiered.config),
                                 "--json").stdout)
    second = [x for x in dumped if x["type"] == "batch" and x["file"] == victim][1]
    path = tiered.store_path(victim)
    with tiered.fs.open_input_stream(path) as f:
        data = bytearray(f.read())
    data[second["position"] + 70] ^= 0x01                         # inside the CRC'd records
    with tiered.fs.open_output_stream(path) as f:
        f.write(bytes(data))
    r, doc = _verify(tiered)
    assert r.returncode == 1
    (bad,) = [f for f in doc["files"] if f["status"] != "ok"]
    assert bad["file"] == victim and bad["status"] == "corrupt"
    assert any(f"{victim}, position {second['position']}" in p and "crc" in p for p in bad["problems"])
    text = kafkalog("verify", str(tiered.part.parent), "--config", str(tiered.config))
    assert text.returncode == 1 and "CORRUPT Record is corrupt" in text.stdout and victim in text.stdout

    # another .log object deleted from the store, a third one truncated: each named, not a crash;
    # dump goes on past them
    gone, cut = logs[3], logs[2]
    tiered.fs.delete_file(tiered.store_path(gone))
    with tiered.fs.open_input_stream(tiered.store_path(cut)) as f:
        data = f.read()
    with tiered.fs.open_output_stream(tiered.store_path(cut)) as f:
        f.write(data[:len(data) // 2])
    r, doc = _verify(tiered)
    assert r.returncode == 1
    missing = [f for f in doc["files"] if f["file"] == gone]
    assert missing[0]["status"] == "corrupt" and "missing from" in missing[0]["problems"][0]
    (truncated,) = [f for f in doc["files"] if f["file"] == cut and f["status"] != "ok"]
    assert any(f"{cut}: position {len(data) // 2}: " in p and "truncated" in p
               for p in truncated["problems"]), truncated
    assert {f["file"].rsplit(".", 1)[0] for f in doc["files"] if f["status"] != "ok"} == {
        victim.rsplit(".", 1)[0], gone.rsplit(".", 1)[0], cut.rsplit(".", 1)[0]}
    d = kafkalog("dump", "--partition", str(tiered.part), "--config", str(tiered.config), "--deep-iteration",
                 "--json")
    assert d.returncode == 1 and "Traceback" not in d.stderr and gone in d.stderr and cut in d.stderr
    lines = json_lines(d.stdout)
    assert any(x["type"] == "error" and x["file"] == gone for x in lines)
    assert max(x["offset"] for x in lines if x["type"] == "record") == BATCHES * RECORDS - 1
    _no_secret(tiered, r, text, d)


def test_without_a_metadata_topic_remote_dump_is_a_clear_error(tmp_path: Path) -> None:
    part = tmp_path / "data" / "plain-0"
    with Log.open(part, LogConfig(), topic_id=uuid.uuid4()) as log:
        log.append(pa.table({"value": pa.array([b"x"])}))
    r = kafkalog("dump", "--partition", str(part), "--property", f"rsm.config.storage.uri={tmp_path / 'store'}")
    assert r.returncode == 1 and "__remote_log_metadata" in r.stderr and "Traceback" not in r.stderr
    assert kafkalog("dump").returncode == 2


@pytest.mark.parametrize("content", [b"version: 0\ntopic_id: \xff\xfeAAAAAAAAAAAAAAAAAAAA\n",
                                     b"version: 0\ntopic_id: xx\n"], ids=["not-utf8", "bad-id"])
def test_a_damaged_partition_metadata_in_a_remote_dump_is_named(tmp_path: Path, content: bytes) -> None:
    """Found by fuzzing: the remote tier read ``partition.metadata`` (the topic id naming the
    remote segments) with ``read_text``, so bytes that are not UTF-8 ended ``dump --partition``
    in a ``UnicodeDecodeError`` traceback, and a bad line was reported without the file. Now it
    reads it as the log does (``PartitionMetadataFile``): the file named, with the byte position."""
    part = tmp_path / "data" / "plain-0"
    with Log.open(part, LogConfig(), topic_id=uuid.uuid4()) as log:
        log.append(pa.table({"value": pa.array([b"x"])}))
    (part / "partition.metadata").write_bytes(content)
    r = kafkalog("dump", "--partition", str(part), "--property", f"rsm.config.storage.uri={tmp_path / 'store'}")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{part / 'partition.metadata'}, line 2" in r.stderr, r.stderr
    if content.startswith(b"version: 0\ntopic_id: \xff"):
        assert "Invalid UTF-8 at byte 21" in r.stderr


def test_turning_tiering_off_from_the_cli_deletes_the_remote_data_at_the_next_tier_pass(tiered: Tiered) -> None:
    """``kafkalog config`` only edits the topic's configuration file (no manager acts on the
    change, as Kafka's TopicConfigHandler would); the next ``kafkalog tier`` pass finds the
    partition's remote segments of a topic turned off with ``remote.log.delete.on.disable`` and
    deletes them as ``deleteRemoteLogPartition`` does; the local segments stay, and a further pass
    has nothing left to do."""
    data = tiered.part.parent
    local_before = sorted(f.name for f in tiered.part.glob("*.log"))
    r, doc = _verify(tiered)
    objects = [f for f in _store_files(tiered) if "/kafka-tiered-storage/" in f]
    assert r.returncode == 0 and objects, r.stderr
    r = kafkalog("config", str(data), "--topic", "orders", "--set", "remote.storage.enable=false")
    assert r.returncode == 2 and "remote.log.delete.on.disable" in r.stderr     # Kafka's refusal
    r = kafkalog("config", str(data), "--topic", "orders", "--set", "remote.storage.enable=false",
                 "--set", "remote.log.delete.on.disable=true")
    assert r.returncode == 0, r.stderr
    assert [f for f in _store_files(tiered) if "/kafka-tiered-storage/" in f] == objects   # nothing yet
    r = kafkalog("tier", str(data), "--config", str(tiered.config), "--json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["partitions"]
    assert row["remote_segments_deleted"] >= 5 and row["error"] is None, row
    assert [f for f in _store_files(tiered) if "/kafka-tiered-storage/" in f] == []
    assert sorted(f.name for f in tiered.part.glob("*.log")) == local_before
    r = kafkalog("tier", str(data), "--config", str(tiered.config), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["partitions"] == [], r.stdout


def _store_files(t: Tiered) -> list[str]:
    infos = t.fs.get_file_info(pafs.FileSelector(_store_root(t), recursive=True, allow_not_found=True))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File)


def _store_root(t: Tiered) -> str:
    for line in t.config.read_text().splitlines():
        if line.startswith("rsm.config.storage.uri="):
            return line.split("=", 1)[1].split("://", 1)[-1]
    raise AssertionError("no storage.uri in the test's properties")


@pytest.mark.parametrize("tiered", ["s3"], indirect=True)
def test_dump_and_verify_with_the_store_gone_fail_clearly_and_touch_nothing(tiered: Tiered, seaweedfs) -> None:
    """The S3 server stopped: ``dump`` and ``verify`` of the remote tier exit 2 (an I/O error,
    not a finding about the data) with a message naming the store, no traceback, no secret; the
    partition's local files are byte-identical afterwards."""
    before = {f.name: f.read_bytes() for f in tiered.part.iterdir() if f.is_file()}
    seaweedfs.stop()
    try:
        dump = kafkalog("dump", "--partition", str(tiered.part), "--config", str(tiered.config))
        verify = kafkalog("verify", str(tiered.part.parent), "--config", str(tiered.config))
    finally:
        seaweedfs.start()
    for r in (dump, verify):
        assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
        assert f"s3://{seaweedfs.bucket}/" in r.stdout + r.stderr and "Traceback" not in r.stderr, r.stdout[-3000:]
    _no_secret(tiered, dump, verify)
    assert {f.name: f.read_bytes() for f in tiered.part.iterdir() if f.is_file()} == before

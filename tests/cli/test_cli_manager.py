"""``kafkalog retention``, ``kafkalog compact`` and ``kafkalog config`` on real data directories:
output wording, JSON, exit codes (0 done, 1 a partition failed, 2 usage or I/O error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from fifo_guard import promptly

from storage_core.checkpoint import CLEANER_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from storage_core.tools.cli import main
from storage_core.config import CleanerConfig
from storage_core.server import TOPIC_CONFIG_FILE
from storage_core.log import Log
from storage_core.server import LogManager

NOW = 1_800_000_000_000
DAY = 86_400_000
ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def plain(topic_dir: Path, batches: int, ts: int, per: int = 10) -> None:
    """``batches`` segments of ``per`` unkeyed records stamped ``ts``."""
    with Log.open(topic_dir) as log:
        for _ in range(batches):
            log.append(pa.table({"value": [b"x" * 50] * per, "timestamp": pa.array([ts] * per, pa.int64())}))
            log.roll()


def keyed(data: Path, topic: str, partitions: int = 2, keys: int = 20, updates: int = 4) -> None:
    with LogManager.open([data], cleaner_config=CleanerConfig(enable_cleaner=False)) as mgr:
        for p in range(partitions):
            log = mgr.get_or_create_log((topic, p))
            for u in range(updates):
                log.append(pa.table({"key": [b"key-%d" % k for k in range(keys)],
                                    "value": [b"value-%d-%d" % (u, k) for k in range(keys)],
                                    "timestamp": pa.array([NOW] * keys, pa.int64())}))
                log.roll()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


# ---------------------------------------------------------------------------------- retention

def test_retention_deletes_by_each_topics_config(data: Path, capsys) -> None:
    plain(data / "old-0", 3, NOW - 10 * DAY)       # past the default 7 days
    plain(data / "new-0", 3, NOW - DAY)
    code, out, err = run(capsys, "config", str(data), "--topic", "new", "--set", "retention.ms=3600000")
    assert code == 0
    code, out, err = run(capsys, "retention", str(data), "--now", str(NOW))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("new-0: deleted 3 of 4 segments (")
    assert "log start offset 0 -> 30 (cleanup.policy=delete, retention.ms=3600000" in lines[0]
    assert lines[1].startswith("old-0: deleted 3 of 4 segments (") and "retention.ms=604800000" in lines[1]
    assert lines[2].startswith("retention: 6 segments (") and lines[2].endswith("deleted from 2 of 2 partitions")
    assert "renamed .deleted" in lines[3] and "--purge" in lines[3]
    assert "[1/2] new-0" in err and "[2/2] old-0" in err
    assert len(list((data / "old-0").glob("*.log.deleted"))) == 3
    code, out, _ = run(capsys, "retention", str(data), "--now", str(NOW))
    assert code == 0
    assert out.splitlines()[0].startswith("new-0: nothing to delete, 1 segments, log start offset 30")
    assert "retention: 0 segments (0 B) deleted from 0 of 2 partitions" in out


def test_retention_topic_filter_purge_and_json(data: Path, capsys) -> None:
    plain(data / "a-0", 2, NOW - 10 * DAY)
    plain(data / "b-0", 2, NOW - 10 * DAY)
    code, out, _ = run(capsys, "retention", str(data), "--now", str(NOW), "--topic", "a", "--purge", "--json")
    assert code == 0
    doc = json.loads(out)
    assert [(p["topic"], p["segments_deleted"]) for p in doc["partitions"]] == [("a", 2)]
    assert doc["totals"]["segments_deleted"] == 2 and doc["totals"]["files_purged"] >= 2   # + snapshots
    assert doc["totals"]["pending_deletes"] == 0 and doc["now"] == NOW
    assert not list((data / "a-0").glob("*.deleted"))
    assert len(list((data / "b-0").glob("*.log"))) == 3           # untouched


def test_retention_reports_a_partition_it_cannot_open(data: Path, capsys) -> None:
    """A partition another process writes (its writer lock is held) is reported FAILED, exit 1;
    the others are done."""
    plain(data / "a-0", 2, NOW - 10 * DAY)
    plain(data / "b-0", 2, NOW - 10 * DAY)
    with Log.open(data / "b-0"):
        code, out, _ = run(capsys, "retention", str(data), "--now", str(NOW))
    assert code == 1
    assert "b-0: FAILED: " in out and "already open for writing" in out
    assert out.splitlines()[-2].endswith("deleted from 1 of 1 partitions, 1 failed")


def test_retention_usage_errors(data: Path, capsys) -> None:
    plain(data / "a-0", 1, NOW)
    code, _, err = run(capsys, "retention", str(data / "a-0"))
    assert code == 2 and "is a partition directory: give its data directory" in err
    code, _, err = run(capsys, "retention", str(data / "nope"))
    assert code == 2 and "No such file or directory" in err
    with LogManager.open([data]):
        code, _, err = run(capsys, "retention", str(data))
    assert code == 2 and "Failed to acquire lock" in err


def test_an_empty_directory_argument_is_a_usage_error(data: Path, capsys, monkeypatch) -> None:
    """``kafkalog recover "$DATA_DIR"`` with the variable unset: ``Path("")`` is the working
    directory, which recover / retention / compact opened as a data directory, writing a lock
    and checkpoints there (and segments into any ``name-N`` folder in it). Refused, exit 2,
    nothing written; a NUL in ``--config`` is a usage error too, not a traceback."""
    cwd = data / "cwd"
    (cwd / "notes-1").mkdir(parents=True)
    monkeypatch.chdir(cwd)
    for argv in (["recover", ""], ["retention", " "], ["compact", ""], ["config", "", "--topic", "t"],
                 ["describe", ""], ["verify", str(data), ""], ["dump", "--partition", ""],
                 ["tier", ""]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and "is empty: give a directory" in err, (argv, code, err)
    assert sorted(p.name for p in cwd.rglob("*")) == ["notes-1"]
    code, _, err = run(capsys, "dump", "--files", str(data), "--config", "a\0b")
    assert code == 2 and "cannot read --config" in err


def test_a_directory_that_is_not_a_data_directory_is_refused_and_left_as_it_was(data: Path, capsys) -> None:
    """``kafkalog recover /etc`` (a typo one level too high, a home directory): a lock and
    checkpoints were written into it and segments created in every folder named like a partition
    (``dbus-1``). The writing commands now refuse a non-empty directory with no data directory
    file and no partition folder with a segment, exit 2, naming it, every file as it was; a data
    directory with only a checkpoint, and an empty one, are still taken."""
    etc = data / "etc"
    (etc / "dbus-1").mkdir(parents=True)
    (etc / "ssh").mkdir()
    (etc / "passwd").write_text("root:x:0:0\n")
    (etc / "dbus-1" / "system.conf").write_text("<busconfig/>\n")
    before = {p: (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None) for p in etc.rglob("*")}
    for argv in (["recover", str(etc)], ["retention", str(etc)], ["compact", str(etc)],
                 ["config", str(etc), "--topic", "t", "--set", "retention.ms=1"], ["tier", str(etc)]):
        code, _, err = run(capsys, *argv)
        assert code == 2 and f"{etc} does not look like a Kafka data directory" in err, (argv, code, err)
    assert {p: (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None) for p in etc.rglob("*")} == before
    # a data directory whose partitions are gone but whose checkpoint is there: recovered as before
    (etc / RECOVERY_POINT_CHECKPOINT).write_text("0\n0\n")
    code, out, err = run(capsys, "recover", str(etc))
    assert code == 0 and "dbus-1: ok" in out, (out, err)
    empty = data / "new-data-dir"
    empty.mkdir()
    code, _, err = run(capsys, "retention", str(empty))
    assert code == 0, err


# ---------------------------------------------------------------------------------- compact

def test_compact_keeps_the_latest_value_per_key(data: Path, capsys) -> None:
    keyed(data, "users")
    plain(data / "logs-0", 2, NOW)
    assert run(capsys, "config", str(data), "--topic", "users", "--set", "cleanup.policy=compact")[0] == 0
    code, out, err = run(capsys, "compact", str(data), "--now", str(NOW))
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 4
    for p, line in enumerate(lines[:2]):
        assert line.startswith(f"users-{p}: cleaned offsets [0, 80): ")
        assert "60 of 80 records removed in " in line
    assert lines[2].startswith("compacted 2 of 2 partitions in 2 rounds: ")
    assert "% smaller), 120 records removed in " in lines[2]
    assert "replaced segment files renamed .deleted" in lines[3]
    with Log.open(data / "users-1", read_only=True) as log:
        table = log.read(0, max_bytes=1 << 20)
        assert table.column("offset").to_pylist() == list(range(60, 80))
        assert table.column("value").to_pylist() == [b"value-3-%d" % k for k in range(20)]
    assert OffsetCheckpointFile(data / CLEANER_OFFSET_CHECKPOINT).read() == {("users", 0): 80, ("users", 1): 80}
    assert len(list((data / "logs-0").glob("*.log"))) == 3       # a delete topic: untouched
    code, out, _ = run(capsys, "compact", str(data), "--now", str(NOW))
    assert code == 0 and out.startswith("compacted 0 of 2 partitions in 0 rounds")


def test_compact_topic_filter_force_and_json(data: Path, capsys) -> None:
    keyed(data, "a", partitions=1)
    keyed(data, "b", partitions=1)
    for topic in ("a", "b"):
        run(capsys, "config", str(data), "--topic", topic, "--set", "cleanup.policy=compact")
    code, out, _ = run(capsys, "compact", str(data), "--topic", "b", "--json", "--purge")
    assert code == 0
    doc = json.loads(out)
    assert [(r["topic"], r["partition"], r["records_removed"]) for r in doc["rounds"]] == [("b", 0, 60)]
    assert [p["topic"] for p in doc["partitions"]] == ["b"]
    assert doc["totals"]["bytes_after"] < doc["totals"]["bytes_before"]
    assert doc["totals"]["pending_deletes"] == 0 and not list((data / "b-0").glob("*.deleted"))
    # a little new dirt on a: below min.cleanable.dirty.ratio it waits, --force cleans it
    run(capsys, "compact", str(data), "--topic", "a")
    with Log.open(data / "a-0") as log:
        log.append(pa.table({"key": [b"key-1"], "value": [b"new"]}))
        log.roll()
    code, out, _ = run(capsys, "compact", str(data), "--topic", "a")
    assert "in 0 rounds" in out
    code, out, _ = run(capsys, "compact", str(data), "--topic", "a", "--force")
    assert code == 0 and out.startswith("a-0: cleaned offsets [80, 81): ") and "1 of 21 records removed" in out


def test_compact_without_compacted_topics_and_bad_buffer(data: Path, capsys) -> None:
    """Nothing to compact is not an error; [KafkaConfigTest.testFromPropsInvalid] a
    log.cleaner.dedupe.buffer.size of 1024 is refused (must be > 1 MiB per cleaner thread)."""
    plain(data / "a-0", 1, NOW)
    code, out, _ = run(capsys, "compact", str(data))
    assert code == 0 and out == f"no compacted partitions in {data} (cleanup.policy=compact); nothing to do\n"
    code, _, err = run(capsys, "compact", str(data), "--dedupe-buffer-size", "1024")
    assert code == 2 and "log.cleaner.dedupe.buffer.size" in err


# ---------------------------------------------------------------------------------- config

def test_config_set_list_delete(data: Path, capsys) -> None:
    plain(data / "t-0", 1, NOW)
    code, out, err = run(capsys, "config", str(data), "--topic", "t", "--set", "cleanup.policy=compact",
                         "--set", "segment.bytes=1048576")
    assert code == 0
    assert out.splitlines() == [
        "Completed updating config for topic t.",
        f"Configs for topic 't' in {data / TOPIC_CONFIG_FILE}:",
        "  cleanup.policy=compact (override; default delete)",
        "  segment.bytes=1048576 (override; default 1073741824)"]
    code, out, _ = run(capsys, "config", str(data), "--topic", "t", "--list")
    assert "  retention.ms=604800000 (default)" in out and "  cleanup.policy=compact (override" in out
    code, out, _ = run(capsys, "config", str(data), "--topic", "t", "--delete", "segment.bytes", "--json")
    assert json.loads(out) == {"dir": str(data), "topic": "t", "overrides": {"cleanup.policy": "compact"},
                               "config": None}
    code, out, err = run(capsys, "config", str(data), "--topic", "fresh")
    assert code == 0 and "(no overrides: every value is the default)" in out
    assert "holds no partition of topic 'fresh' yet" in err
    with LogManager.open([data], cleaner_config=CleanerConfig(enable_cleaner=False)) as mgr:
        assert mgr.get_log(("t", 0)).config.compact


@pytest.mark.parametrize("argv, message", [
    (["--set", "segment.byte=1"], "Unknown configuration 'segment.byte'"),
    (["--set", "retention.ms=soon"], "Invalid value 'soon' for configuration retention.ms"),
    (["--set", "min.cleanable.dirty.ratio=1.5"], "min.cleanable.dirty.ratio"),
    (["--set", "retention.ms"], "--set expects key=value"),
    (["--delete", "no.such.key"], "Unknown configuration 'no.such.key'"),
])
def test_config_refuses_with_the_key_named(data: Path, capsys, argv: list[str], message: str) -> None:
    code, out, err = run(capsys, "config", str(data), "--topic", "t", *argv)
    assert code == 2 and message in err and out == ""
    assert not (data / TOPIC_CONFIG_FILE).exists()


def test_config_bad_topic_name(data: Path, capsys) -> None:
    code, _, err = run(capsys, "config", str(data), "--topic", "a b", "--set", "retention.ms=1")
    assert code == 2 and "illegal" in err


def test_commands_through_the_installed_entry_point(data: Path) -> None:
    """The real ``kafkalog`` process: config then compact then retention on one data dir."""
    keyed(data, "k", partitions=1)

    def kafkalog(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "storage_core.tools", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)

    out = kafkalog("config", str(data), "--topic", "k", "--set", "cleanup.policy=compact,delete")
    assert out.returncode == 0, out.stderr
    out = kafkalog("compact", str(data))
    assert out.returncode == 0, out.stderr
    assert "k-0: cleaned offsets [0, 80)" in out.stdout
    out = kafkalog("retention", str(data), "--now", str(NOW + 30 * DAY))
    assert out.returncode == 0, out.stderr
    assert "k-0: deleted " in out.stdout and "cleanup.policy=compact,delete" in out.stdout


# ---------------------------------------------------------------------------------- --config FILE

def _hostile_config(tmp_path: Path, kind: str) -> tuple[Path, list[str]]:
    """A ``--config`` file of ``kind``: (its path, what the error must say besides the path)."""
    path = tmp_path / f"broker-{kind}.properties"
    if kind == "fifo":
        os.mkfifo(path)
        return path, ["FIFO"]
    if kind == "directory":
        path.mkdir()
        return path, ["directory"]
    if kind == "huge":
        with open(path, "wb") as f:                 # sparse: no disk, and no memory when read bounded
            f.truncate(1 << 40)
        return path, ["longer than 1048576 bytes"]
    if kind == "invalid utf-8":
        path.write_bytes(b"# the store\nrsm.config.storage.uri=/tmp/x\nrsm.config.s3.region=eu\xff\n")
        return path, ["line 3", "byte 65", "not UTF-8"]
    # Properties.load's one syntax error; a line without a separator is a key with an empty value
    path.write_bytes(b"# the store\nrsm.config.storage.uri=/tmp/\\u12g4\n")
    return path, ["line 2", "Malformed \\uxxxx encoding."]


@pytest.mark.parametrize("kind", ["fifo", "directory", "huge", "invalid utf-8", "malformed escape"])
@pytest.mark.parametrize("command", ["tier", "verify", "dump"])
def test_a_config_file_that_is_not_a_properties_file_is_a_usage_error_naming_it(
        data: Path, tmp_path: Path, capsys, kind: str, command: str) -> None:
    """A FIFO must not block the command (it is never opened for a blocking read), a directory
    or a huge file is refused naming it (read at most ``MAX_CONFIG_BYTES``), bad UTF-8 names its
    line and byte; exit 2, a message, no traceback."""
    path, words = _hostile_config(tmp_path, kind)
    argv = {"tier": ["tier", str(data)], "verify": ["verify", str(data)],
            "dump": ["dump", "--partition", str(data / "t-0")]}[command] + ["--config", str(path)]
    plain(data / "t-0", 1, NOW)
    code, _, err = promptly(lambda: run(capsys, *argv), path if kind == "fifo" else None, timeout=60,
                            what=f"kafkalog {command} --config {kind}")
    assert code == 2, err
    assert f"--config {path}" in err and all(w in err for w in words), err
    assert "Traceback" not in err

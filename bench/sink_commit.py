"""The sink driver's commit rate: partitions committed per second, with staging on the local disk and
in an object store (SeaweedFS on loopback, started by the script), and where a commit's time goes
per partition (cProfile over every thread of the commit).

No SparkSession: the script calls the streaming writer Spark calls (``kafka_log_sink.sink``'s
``stream_writer(options, schema)``), its ``write`` once per task with that task's Arrow batches
(``stage_all``: the tasks' real encoding and staging, run one after the other in this process) and
its ``commit(messages, batch_id)`` (the driver's ``SinkCoordinator.commit``, the staging sweep):
exactly the code Spark runs, without the JVM's job around it. Each micro-batch writes ``--records``
records (100-byte values) to each of ``--partitions`` partitions from each of ``--tasks`` tasks
(a ``partition`` column), so every commit appends ``--tasks`` staged files to every partition.

The first micro-batch creates the topic (a directory, its checkpoints and ``partition.metadata``
per partition) and is reported apart; the next ``--batches`` are the steady state of a streaming
query. Reported per staging side and partition count: the median commit's wall time, partitions
per second, this process's CPU seconds and the ``weed`` server's during the commits, and the tasks'
staging time. Every micro-batch's records are read back (``read_committed``) and counted. With
``--profile`` one steady commit per side runs under cProfile (every thread) and the functions with
the most own time are printed, in microseconds per partition.

    .venv/bin/python bench/sink_commit.py [--partitions 64,256,1024] [--records 100] [--tasks 2] \
        [--batches 5] [--profile] [--dir /tmp/kafkalog-commit-bench]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType  # noqa: E402

from kafka_log_sink.sink import stream_writer  # noqa: E402
from storage_core.log import Log  # noqa: E402

SCHEMA = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                     StructField("partition", IntegerType())])


def server_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) of process ``pid`` so far (Linux ``/proc``; 0 without one)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def task_batches(task: int, batch: int, partitions: int, records: int) -> list[pa.RecordBatch]:
    """One task's input for one micro-batch: ``records`` rows for each partition, in Spark's Arrow
    batches of at most 10,000 rows."""
    n = partitions * records
    ids = np.arange(n, dtype=np.int64) + (batch * 1000 + task) * n
    keys = pa.array([f"key-{i}" for i in ids.tolist()], pa.string())
    values = pa.array([i.to_bytes(8, "big") * 12 + b"xxxx" for i in ids.tolist()], pa.binary())
    parts = pa.array((ids % partitions).astype(np.int32))
    table = pa.table([keys, values, parts], names=["key", "value", "partition"])
    return table.to_batches(max_chunksize=10_000)


class ThreadProfiles:
    """cProfile in the main thread and in every thread started while it runs (the commit's
    worker pools): ``threading.setprofile`` starts a profile in each new thread."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _start(self, *_: object) -> None:
        sys.setprofile(None)
        p = cProfile.Profile()
        with self._lock:
            self.profiles.append(p)
        p.enable()

    def __enter__(self) -> "ThreadProfiles":
        threading.setprofile(self._start)
        main = cProfile.Profile()
        self.profiles.append(main)
        main.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self.profiles[0].disable()
        threading.setprofile(None)

    def stats(self) -> pstats.Stats:
        st = pstats.Stats(self.profiles[0])
        for p in self.profiles[1:]:
            st.add(p)
        return st


def print_profile(stats: pstats.Stats, partitions: int, top: int, cumulative: bool = False) -> None:
    # own time, or time including callees (over every thread: a pool's wait and its workers' work
    # both count)
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][3 if cumulative else 2], reverse=True)[:top]
    total = sum(v[2] for v in stats.stats.values())
    print(f"    cProfile, all threads: {total / partitions * 1e6:,.0f} us of own time per partition; the top by "
          f"{'cumulative' if cumulative else 'own'} time:")
    for (file, line, name), (_, calls, tt, ct, _) in rows:
        where = f"{Path(file).name}:{line}({name})" if line else name
        print(f"      {tt / partitions * 1e6:>8,.0f} us/partition own  {ct / partitions * 1e6:>8,.0f} cum  "
              f"{calls / partitions:>6.1f} calls/partition  {where}")


def run_side(root: Path, side: str, partitions: int, args, store: dict[str, str], pid: int | None) -> dict:
    data = root / f"data-{side}-{partitions}"
    options = {"path": str(data), "topic": "bench", "numPartitions": str(partitions),
               "checkpointLocation": str(root / f"ckpt-{side}-{partitions}")}
    if side == "store":
        options["stagingLocation"] = f"s3://{store['bucket']}/commit-{uuid.uuid4().hex[:8]}/staging"
        options.update({f"rsm.config.{k}": v for k, v in store.items() if k not in ("bucket", "storage.uri")})
    writer = stream_writer(options, SCHEMA)
    inputs = [[task_batches(t, b, partitions, args.records) for t in range(args.tasks)]
              for b in range(args.batches + 1)]
    first = None
    commits, client, server, staging = [], [], [], []
    profile = None
    for b, tasks in enumerate(inputs):
        t = time.perf_counter()
        messages = [writer.write(iter(batches)) for batches in tasks]
        staging.append(time.perf_counter() - t)
        profiled = args.profile and b == args.batches
        w, c, s = time.perf_counter(), time.process_time(), server_cpu(pid)
        if profiled:
            with ThreadProfiles() as profile:
                writer.commit(messages, b)
        else:
            writer.commit(messages, b)
        wall, cpu, srv = time.perf_counter() - w, time.process_time() - c, server_cpu(pid) - s
        if b == 0:
            first = wall
        elif not profiled:
            commits.append(wall)
            client.append(cpu)
            server.append(srv)
    want = (args.batches + 1) * args.tasks * args.records
    for p in range(partitions):            # every partition holds every micro-batch's records
        with Log.open(data / f"bench-{p}", read_only=True) as log:
            got = log.log_end_offset - (args.batches + 1)          # one COMMIT marker per batch
        assert got == want, f"bench-{p}: {got} records, wrote {want}"
    shutil.rmtree(data, ignore_errors=True)
    return {"first": first, "commit": statistics.median(commits), "client": statistics.median(client),
            "server": statistics.median(server), "staging": statistics.median(staging[1:]), "profile": profile}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="64,256,1024")
    ap.add_argument("--records", type=int, default=100, help="records per partition per task per micro-batch")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--batches", type=int, default=5,
                    help="steady-state micro-batches after the first (--profile: the last, not counted; at least 2)")
    ap.add_argument("--sides", default="local,store")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=18)
    ap.add_argument("--cumulative", action="store_true", help="profile sorted by time including callees")
    ap.add_argument("--dir", default="/tmp/kafkalog-commit-bench")
    args = ap.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    sides = args.sides.split(",")
    server = None
    store: dict[str, str] = {}
    if "store" in sides:
        from seaweedfs import start_server          # the tests' server (tests/seaweedfs.py)
        server = start_server(root / "seaweedfs")
        store = dict(server.storage_configs(), bucket=server.bucket)
    try:
        pid = server.proc.pid if server is not None else None
        print(f"{args.tasks} tasks x {args.records} records of 100 bytes per partition per micro-batch; "
              f"commit medians over {args.batches} micro-batches after the first (which creates the topic); "
              f"CPU seconds of this process and of the weed server per commit")
        for n in [int(x) for x in args.partitions.split(",")]:
            for side in sides:
                r = run_side(root, side, n, args, store, pid if side == "store" else None)
                print(f"  {side:5s} staging, {n:5d} partitions: commit {r['commit']:.3f} s = "
                      f"{n / r['commit']:>7,.0f} partitions/s  (cpu {r['client']:.2f} s + weed {r['server']:.2f} s; "
                      f"first commit, creating the topic, {r['first']:.2f} s; tasks' staging {r['staging']:.2f} s)")
                if r["profile"] is not None:
                    print_profile(r["profile"].stats(), n, args.top, args.cumulative)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()

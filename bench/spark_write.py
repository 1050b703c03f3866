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

Both DataFrames are cached and materialised first so every writer starts from the same memory.
Each side writes ``--repeat`` times (the sides alternating); best time, rows/s, and the ratios
kafkalog / no-op of the same shape (goals: >= 0.7 with compression off, >= 0.5 with zstd),
with every round's times and ratios beside them (median, range), which show how far the host's
load moved the bests.
After each timed kafkalog write (outside the timing) the topic is read back through the
``kafkalog`` source and its committed record count checked against ``--rows``.

    .venv/bin/python bench/spark_write.py [--rows 4000000] [--tasks 2] [--partitions 4] [--repeat 3] \
        [--dir /tmp/kafkalog-write-bench]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/kafkalog-write-bench")
    args = ap.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")

    import pyspark.sql.functions as F
    from pyspark.sql import SparkSession

    import kafka_log_source

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
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


if __name__ == "__main__":
    main()

"""Spark sink benchmark: the same DataFrame written through ``kafkalog``, through a no-op Python
Arrow sink (the ceiling any Python sink can reach: Spark hands it the Arrow batches and it drops
them) and through Spark's Parquet writer for context, in one script and one SparkSession.

The DataFrame: ``--rows`` rows of a string key and a 100-byte binary value over ``--tasks``
partitions, cached and materialised first so every writer starts from the same memory. Each
side writes it ``--repeat`` times (alternating); best time, rows/s, and the ratios kafkalog /
no-op (goals: >= 0.7 with compression off, >= 0.5 with zstd).

    .venv/bin/python bench/spark_write.py [--rows 4000000] [--tasks 2] [--repeat 3] [--dir /tmp/kafkalog-write-bench]
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
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/kafkalog-write-bench")
    args = ap.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")

    import pyspark.sql.functions as F
    from pyspark.sql import SparkSession

    import kafka_log_source

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafka_log_source.register(spark)
    spark.dataSource.register(noop_sink())
    df = (spark.range(0, args.rows, 1, args.tasks)
          .select(F.concat(F.lit("key-"), F.col("id").cast("string")).alias("key"),
                  F.expr("unhex(concat(sha2(cast(id as string), 256), repeat('78', 68)))").alias("value"))
          .cache())
    assert df.count() == args.rows
    root = Path(args.dir)

    # Each writer's output of the previous round is removed before its clock starts: deleting
    # a run's files (hundreds of MB of page cache freed) is housekeeping, not writing.
    def kafkalog(compression):
        out = root / f"kafkalog-{compression}"

        def run():
            (df.write.format("kafkalog").option("path", str(out)).option("topic", "bench")
             .option("numPartitions", str(args.tasks)).option("compression", compression)
             .mode("append").save())
        return run, out

    def parquet():
        df.write.parquet(str(root / "parquet"))

    sides = {
        "noop-arrow": (lambda: df.write.format("noop_arrow").mode("append").save(), None),
        "kafkalog none": kafkalog("none"),
        "kafkalog zstd": kafkalog("zstd"),
        "parquet": (parquet, root / "parquet"),
    }
    for run, out in sides.values():         # warm-up: Python workers, JIT caches
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)
        run()
    best = {k: float("inf") for k in sides}
    for _ in range(args.repeat):
        for name, (run, out) in sides.items():
            if out is not None:
                shutil.rmtree(out, ignore_errors=True)
            t = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - t)
    print(f"{args.rows:,} rows (string key, 100-byte value), {args.tasks} tasks, best of {args.repeat}")
    for name, secs in best.items():
        print(f"  {name:15s} {args.rows / secs:>12,.0f} rows/s  ({secs:.2f} s)")
    print(f"  kafkalog none / noop-arrow: {best['noop-arrow'] / best['kafkalog none']:.2f}   (goal >= 0.70)")
    print(f"  kafkalog zstd / noop-arrow: {best['noop-arrow'] / best['kafkalog zstd']:.2f}   (goal >= 0.50)")
    spark.stop()


if __name__ == "__main__":
    main()

"""kafkalog time travel: read a time window of a topic straight through Kafka's time index.

A topic ``readings`` (3 partitions, small segments) gets 9,000 records, one a second from
2024-01-01 09:00:00 UTC, each carrying its Kafka timestamp. Then:

1. ``startingTimestamp`` / ``endingTimestamp``: 09:30 to 10:00 on every partition;
2. ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: a different window per partition;
3. ``startingTimestamp`` with a streaming query (replay from a point in time).

Each read is planned through the partitions' ``.timeindex`` files (Kafka's ``offsetsForTimes``),
so only the segments of the window are opened; each result is checked against a full scan
filtered by Spark.

    .venv/bin/python examples/time_travel.py [--workdir DIR]

``run(spark, workdir)`` is what the tests call, with their own SparkSession.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)      # workers must see this venv

N = 9000
PARTITIONS = 3
T0 = int(datetime(2024, 1, 1, 9, 0, tzinfo=timezone.utc).timestamp() * 1000)   # epoch ms


def make_spark(app: str):
    """A small local SparkSession with the ``kafkalog`` format registered."""
    from pyspark.sql import SparkSession

    import kafka_log_source

    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafka_log_source.register(spark)
    return spark


def hhmm(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%S")


def run(spark, workdir: Path) -> dict:
    from pyspark.sql import functions as F

    import kafka_log_source
    from storage_core import Log

    kafka_log_source.register(spark)
    workdir = Path(workdir)
    topics = workdir / "topics"

    # --- the data: one reading a second; row i goes to partition i % 3. One Spark task writes
    # them in order (coalesce(1)), so every partition's timestamps rise with its offsets, as a
    # producer stamping CreateTime gives them.
    rows = (spark.range(N).coalesce(1)
            .select(F.col("id"),
                    F.format_string("sensor-%d", F.col("id") % 7).alias("key"),
                    F.to_json(F.struct(F.col("id").alias("reading"),
                                       (F.col("id") % 100).alias("celsius"))).alias("value"),
                    (F.col("id") % PARTITIONS).cast("int").alias("partition"),
                    F.timestamp_millis(F.lit(T0) + F.col("id") * 1000).alias("timestamp"))
            .orderBy("id").drop("id"))
    (rows.write.format("kafkalog").option("path", str(topics)).option("topic", "readings")
     .option("numPartitions", PARTITIONS)
     .option("segment.bytes", 8 * 1024)           # small segments: the window is a few of many
     .option("index.interval.bytes", 1024)        # an index entry every KiB of batches
     .option("batch.size", 4096)
     .mode("append").save())
    segments = {d.name: len(list(d.glob("*.log"))) for d in sorted(topics.glob("readings-*"))}
    print(f"1. wrote {N:,} readings from {hhmm(T0)} to {hhmm(T0 + (N - 1) * 1000)} UTC into {topics}")
    print(f"   segments per partition: {segments}")

    def load(**options):
        r = spark.read.format("kafkalog").option("path", str(topics)).option("subscribe", "readings")
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    full = load()

    def keys(df) -> set[tuple[int, int]]:
        return {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}

    # --- 1. one window for every partition
    t1, t2 = T0 + 30 * 60_000, T0 + 60 * 60_000                   # 09:30 .. 10:00
    window = load(startingTimestamp=t1, endingTimestamp=t2)
    scan = full.where((F.col("timestamp") >= F.timestamp_millis(F.lit(t1)))
                      & (F.col("timestamp") < F.timestamp_millis(F.lit(t2))))
    got, expected = keys(window), keys(scan)
    with Log.open(topics / "readings-0", read_only=True) as log:
        first0, end0 = log.offsets_for_times(t1), log.offsets_for_times(t2)
        bases = [s.base_offset for s in log.segments]
    touched = [b for i, b in enumerate(bases)
               if b < end0 and (i + 1 == len(bases) or bases[i + 1] > first0)]
    print(f"2. startingTimestamp={t1} ({hhmm(t1)}), endingTimestamp={t2} ({hhmm(t2)}):")
    print(f"   {len(got):,} records; a full scan filtered by Spark finds "
          f"{'the same' if got == expected else f'{len(expected):,} (differs!)'}")
    print(f"   readings-0: the time index gives offsets {first0}..{end0 - 1}: "
          f"{len(touched)} of its {len(bases)} segments read, from {touched[0]:020d}.log")

    # --- 2. a window per partition (Spark's JSON, epoch ms)
    per_partition = {str(p): (T0 + (10 + 20 * p) * 60_000, T0 + (25 + 20 * p) * 60_000)
                     for p in range(PARTITIONS)}
    starting = json.dumps({"readings": {p: w[0] for p, w in per_partition.items()}})
    ending = json.dumps({"readings": {p: w[1] for p, w in per_partition.items()}})
    by_ts = load(startingOffsetsByTimestamp=starting, endingOffsetsByTimestamp=ending)
    cond = None
    for p, (lo, hi) in per_partition.items():
        c = ((F.col("partition") == int(p)) & (F.col("timestamp") >= F.timestamp_millis(F.lit(lo)))
             & (F.col("timestamp") < F.timestamp_millis(F.lit(hi))))
        cond = c if cond is None else cond | c
    got2, expected2 = keys(by_ts), keys(full.where(cond))
    print("3. startingOffsetsByTimestamp / endingOffsetsByTimestamp, one window per partition:")
    for p, (lo, hi) in per_partition.items():
        n = sum(1 for q, _ in got2 if q == int(p))
        print(f"   readings-{p}: {hhmm(lo)}..{hhmm(hi)}  {n:,} records")
    print(f"   a full scan filtered by Spark finds {'the same' if got2 == expected2 else 'something else (differs!)'}")

    # --- 3. streaming replay from a point in time
    t3 = T0 + 120 * 60_000                                           # 11:00
    stream = (spark.readStream.format("kafkalog").option("path", str(topics))
              .option("subscribe", "readings").option("startingTimestamp", t3).load())
    q = (stream.select("partition", "offset").writeStream.format("memory")
         .queryName("time_travel_replay")
         .option("checkpointLocation", str(workdir / "checkpoints" / "replay"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    got3 = keys(spark.table("time_travel_replay"))
    spark.catalog.dropTempView("time_travel_replay")
    expected3 = keys(full.where(F.col("timestamp") >= F.timestamp_millis(F.lit(t3))))
    print(f"4. streaming from startingTimestamp={t3} ({hhmm(t3)}): {len(got3):,} records, "
          f"{'the same as' if got3 == expected3 else 'not the same as (differs!)'} a filtered full scan")

    return {"topics": str(topics), "segments": segments,
            "window": len(got), "window_ok": got == expected,
            "by_timestamp": len(got2), "by_timestamp_ok": got2 == expected2,
            "stream": len(got3), "stream_ok": got3 == expected3}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, help="where to put the data (default: a new temporary directory)")
    args = ap.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kafkalog-time-travel-"))
    if (workdir / "topics").exists():
        raise SystemExit(f"{workdir}/topics exists already: pick an empty --workdir")
    spark = make_spark("kafkalog-time-travel")
    try:
        result = run(spark, workdir)
    finally:
        spark.stop()
    ok = result["window_ok"] and result["by_timestamp_ok"] and result["stream_ok"]
    kl = Path(sys.executable).parent / "kafkalog"
    print(f"\n{'OK' if ok else 'MISMATCH'}: the data is in {result['topics']}")
    print("Try next:")
    print(f"  {kl} dump --files {result['topics']}/readings-0/00000000000000000000.timeindex   # the time index")
    print(f"  {kl} describe {result['topics']}          # each segment's time range")
    print("  README.md, 'Source options': endingTimestamp and transaction markers")
    print(f"  rm -rf {workdir}     # when done")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

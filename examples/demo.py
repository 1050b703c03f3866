"""kafkalog demo: a Spark pipeline over Kafka topic directories, no broker anywhere.

1. A streaming query turns a generated event stream into the Kafka topic ``orders`` (3
   partitions, keyed by user, zstd), exactly once per micro-batch.
2. A second streaming query reads ``orders`` back, as Spark's Kafka source would, and counts
   orders and revenue per 5-second window of record time (when each order was written).
3. A time-travel batch query reads one window straight through Kafka's time index.
4. ``kafkalog describe`` shows the directory a Kafka broker could serve as it is.

Run with ``make demo``; data goes to ``demo-data/`` (override with ``KAFKALOG_DEMO_DIR``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)      # workers must see this venv

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("KAFKALOG_DEMO_DIR", ROOT / "demo-data"))
RUN_SECONDS = int(os.environ.get("KAFKALOG_DEMO_SECONDS", "12"))


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def main() -> int:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kafka_log_source

    shutil.rmtree(DATA, ignore_errors=True)
    topics, checkpoints = DATA / "topics", DATA / "checkpoints"
    print(f"kafkalog demo: Kafka topic directories under {topics}, written and read by Spark")
    started = time.perf_counter()
    spark = (SparkSession.builder.master("local[2]").appName("kafkalog-demo")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafka_log_source.register(spark)                # one line: format("kafkalog") exists

    step(f"1. Streaming {RUN_SECONDS} s of generated orders into topic 'orders' (3 partitions, zstd)")
    # No timestamp column: each record gets its Kafka timestamp when it is written (CreateTime,
    # as a producer sets it), and the commit marker closing each micro-batch is stamped later
    # still, so every partition's timestamps rise with its offsets and a time-index lookup
    # bounds a window exactly. (Event times from the data would not: a batch's marker is
    # stamped at commit, after the next batch's first events happened.) The event time stays
    # in the value.
    events = (spark.readStream.format("rate").option("rowsPerSecond", 2000)
              .option("numPartitions", 1).load()
              .select(F.format_string("user-%d", F.col("value") % 500).alias("key"),
                      F.to_json(F.struct(F.col("value").alias("order"),
                                         (F.col("value") % 500).alias("user"),
                                         ((F.col("value") * 7919) % 10_000).alias("amount_cents"),
                                         F.col("timestamp").alias("event_time")))
                      .alias("value")))
    writer = (events.writeStream.format("kafkalog")
              .option("path", str(topics)).option("topic", "orders")
              .option("numPartitions", "3").option("compression", "zstd")
              .option("checkpointLocation", str(checkpoints / "orders-in"))
              .trigger(processingTime="2 seconds").start())
    t_start = time.monotonic()
    while (time.monotonic() - t_start < RUN_SECONDS
           or sum(1 for p in writer.recentProgress if p["numInputRows"]) < 3):
        if writer.exception() is not None or time.monotonic() - t_start > 120:
            raise SystemExit(f"the writing query did not make progress: {writer.exception()}")
        time.sleep(0.5)
    writer.stop()
    written = sum(p["numInputRows"] for p in writer.recentProgress)
    print(f"   {len(writer.recentProgress)} micro-batches committed, each one Kafka transaction; "
          f"about {written:,} orders written")

    step("2. Streaming read back: orders and revenue per 5-second window (read_committed)")
    orders = (spark.readStream.format("kafkalog").option("path", str(topics))
              .option("subscribe", "orders").option("startingOffsets", "earliest")
              .option("isolationLevel", "read_committed").option("maxOffsetsPerTrigger", 10_000)
              .load())
    schema = "order long, user long, amount_cents long"
    per_window = (orders.select(F.from_json(F.col("value").cast("string"), schema).alias("o"),
                                "timestamp")
                  .groupBy(F.window("timestamp", "5 seconds"))
                  .agg(F.count("*").alias("orders"), F.sum("o.amount_cents").alias("cents")))
    reader = (per_window.writeStream.format("memory").queryName("per_window")
              .outputMode("complete")
              .option("checkpointLocation", str(checkpoints / "orders-out"))
              .trigger(availableNow=True).start())
    reader.awaitTermination()
    batches = [p["numInputRows"] for p in reader.recentProgress]
    print(f"   {sum(batches):,} records in {len(batches)} micro-batches of at most 10,000 "
          f"(maxOffsetsPerTrigger)")
    windows = spark.sql("SELECT window.start AS start, orders, cents / 100.0 AS revenue "
                        "FROM per_window ORDER BY start").collect()
    for w in windows[:6]:
        print(f"   {w.start:%H:%M:%S}  {w.orders:6,d} orders  {w.revenue:12,.2f} revenue")
    if len(windows) > 6:
        print(f"   ... {len(windows) - 6} more windows")

    step("3. Time travel: one window, found through each partition's .timeindex")
    middle = windows[len(windows) // 2].start.replace(tzinfo=timezone.utc)
    t0 = int(middle.timestamp() * 1000)
    window = (spark.read.format("kafkalog").option("path", str(topics))
              .option("subscribe", "orders").option("isolationLevel", "read_committed")
              .option("startingTimestamp", t0).option("endingTimestamp", t0 + 5000).load())
    by_partition = window.groupBy("partition").agg(F.min("offset").alias("first"),
                                                    F.max("offset").alias("last"),
                                                    F.count("*").alias("n")).orderBy("partition")
    for r in by_partition.collect():
        print(f"   orders-{r.partition}: offsets {r.first}..{r.last} ({r.n:,} records)")
    full_scan = (spark.read.format("kafkalog").option("path", str(topics))
                 .option("subscribe", "orders").option("isolationLevel", "read_committed").load()
                 .where((F.col("timestamp") >= middle)
                        & (F.col("timestamp") < datetime.fromtimestamp((t0 + 5000) / 1000,
                                                                       timezone.utc))))
    n_window, n_scan = window.count(), full_scan.count()
    same = "the same" if n_window == n_scan else f"{n_scan:,} (differs!)"
    print(f"   {n_window:,} records from {middle:%H:%M:%S} to +5 s; a full scan filtered "
          f"by Spark finds {same}")
    spark.stop()

    step("4. kafkalog describe: the directory a Kafka broker could serve as it is")
    out = subprocess.run([sys.executable, "-m", "storage_core.tools", "describe", str(topics)],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    print("\n".join("   " + line for line in lines[:14]))
    if len(lines) > 14:
        print(f"   ... {len(lines) - 14} more lines (the other partitions): kafkalog describe, below")
    verify = subprocess.run([sys.executable, "-m", "storage_core.tools", "verify", str(topics)],
                            capture_output=True, text=True)
    print(f"   kafkalog verify: {(verify.stdout.strip().splitlines() or ['?'])[-1]}")

    print(f"\nDone in {time.perf_counter() - started:.0f} s. The data is in {topics}.")
    kl = Path(sys.executable).parent / "kafkalog"
    seg = sorted((topics / "orders-0").glob("*.log"))[0]
    print("Try next:")
    print(f"  {kl} dump --files {seg} --print-data-log | head")
    print(f"  {kl} describe {topics}")
    print(f"  {kl} config {topics} --topic orders --set retention.ms=60000 && {kl} retention {topics}")
    print("  examples/: quickstart, time travel, exactly-once ETL, a broker's log dir, compaction")
    return 0 if verify.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""kafkalog quickstart: write a DataFrame into a Kafka topic directory, read it back with Spark
(batch and streaming), then read the same files with the engine alone, no Spark.

    .venv/bin/python examples/quickstart.py                    # data in a new temporary directory
    .venv/bin/python examples/quickstart.py --workdir /tmp/qs  # ... or where you say

``run(spark, workdir)`` is what the tests call, with their own SparkSession.
"""

from __future__ import annotations

import argparse
from collections import Counter
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)      # workers must see this venv

N = 1000


def make_spark(app: str):
    """A small local SparkSession with the ``kafkalog`` format registered."""
    from pyspark.sql import SparkSession

    import kafka_log_source

    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafka_log_source.register(spark)                  # one line: format("kafkalog") exists
    return spark


def run(spark, workdir: Path) -> dict:
    from pyspark.sql import functions as F

    import kafka_log_source

    kafka_log_source.register(spark)
    workdir = Path(workdir)
    topics = workdir / "topics"

    # 1. Write: any DataFrame with a `value` column (and optionally key, partition, headers,
    #    timestamp) becomes Kafka records. A batch write is all or nothing.
    df = spark.range(N).select(F.format_string("user-%d", F.col("id") % 10).alias("key"),
                               F.format_string("hello %d", F.col("id")).alias("value"))
    (df.write.format("kafkalog").option("path", str(topics)).option("topic", "greetings")
     .option("numPartitions", 2).option("compression", "lz4").mode("append").save())
    print(f"1. wrote {N} records into topic 'greetings' (2 partitions, lz4) under {topics}")
    for d in sorted(topics.glob("greetings-*")):
        print(f"   {d.name}/: {', '.join(sorted(p.name for p in d.iterdir()))}")

    # 2. Batch read: Spark's Kafka schema (key, value, topic, partition, offset, timestamp, ...)
    batch = (spark.read.format("kafkalog").option("path", str(topics))
             .option("subscribe", "greetings").load())
    rows = batch.collect()                                       # 1000 rows: fine to collect
    per_partition = dict(sorted(Counter(r.partition for r in rows).items()))
    first = sorted((r for r in rows if r.partition == 0), key=lambda r: r.offset)[:3]
    print(f"2. batch read: {sum(per_partition.values())} records, per partition {per_partition}")
    for r in first:
        print(f"   greetings-{r.partition}@{r.offset}: key={bytes(r.key).decode()} value={bytes(r.value).decode()}")

    # 3. Streaming read: the same files as a stream, from the earliest offset, until caught up
    stream = (spark.readStream.format("kafkalog").option("path", str(topics))
              .option("subscribe", "greetings").option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", 400).load())
    query = (stream.selectExpr("CAST(value AS STRING) AS value").writeStream.format("memory")
             .queryName("quickstart_greetings")
             .option("checkpointLocation", str(workdir / "checkpoints" / "quickstart"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    streamed = spark.sql("SELECT count(*) AS n FROM quickstart_greetings").first().n
    batches = len([p for p in query.recentProgress if p["numInputRows"]])
    spark.catalog.dropTempView("quickstart_greetings")
    print(f"3. streaming read: {streamed} records in {batches} micro-batches (maxOffsetsPerTrigger=400)")

    # 4. The engine alone, no Spark: three lines
    from storage_core import Log
    with Log.open(topics / "greetings-0", read_only=True) as log:
        table = log.read(log.log_start_offset, max_bytes=1 << 20)
    print(f"4. storage_core alone: Log.open(...).read(0) gave {table.num_rows} records of greetings-0 "
          f"as an Arrow table ({', '.join(table.column_names[:5])}, ...)")

    return {"written": N, "batch": sum(per_partition.values()), "per_partition": per_partition,
            "streamed": streamed, "micro_batches": batches, "engine_rows": table.num_rows,
            "topics": str(topics)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, help="where to put the data (default: a new temporary directory)")
    args = ap.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kafkalog-quickstart-"))
    if (workdir / "topics").exists():
        raise SystemExit(f"{workdir}/topics exists already: pick an empty --workdir")
    spark = make_spark("kafkalog-quickstart")
    try:
        result = run(spark, workdir)
    finally:
        spark.stop()
    ok = result["batch"] == result["streamed"] == N
    kl = Path(sys.executable).parent / "kafkalog"
    print(f"\n{'OK' if ok else 'MISMATCH'}: the data is in {result['topics']}")
    print("Try next:")
    print(f"  {kl} describe {result['topics']}")
    print(f"  {kl} dump --files {result['topics']}/greetings-0/00000000000000000000.log --print-data-log | head")
    print("  examples/time_travel.py, examples/exactly_once_etl.py, examples/read_broker_copy.py")
    print(f"  rm -rf {workdir}     # when done")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""kafkalog exactly-once ETL: a streaming query from topic ``orders`` to topic ``orders_eur``,
stopped in the middle and restarted from its checkpoint, with every input record in the output
exactly once.

1. ``orders`` (3 partitions) gets 3,000 orders.
2. The ETL query reads ``orders`` (read_committed, at most 400 offsets a micro-batch), converts
   cents to euros and writes ``orders_eur``; each micro-batch is one Kafka transaction.
3. The query is stopped while it works; 1,000 more orders arrive.
4. The query restarts from its checkpoint and catches up (``Trigger.AvailableNow``).
5. ``orders_eur`` read as a ``read_committed`` consumer sees it: every order once, none twice,
   none missing. A micro-batch cut off by the stop was aborted (its records stay in the log,
   invisible) or finished by the restart, as Kafka's transaction coordinator would.

    .venv/bin/python examples/exactly_once_etl.py [--workdir DIR]

``run(spark, workdir)`` is what the tests call, with their own SparkSession.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)      # workers must see this venv

FIRST, MORE = 3000, 1000
SCHEMA = "order long, user long, amount_cents long"


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


def produce(spark, topics: Path, first: int, n: int) -> None:
    """Orders ``first .. first+n-1`` into topic ``orders``, keyed by user (a batch write: one
    transaction, all or nothing)."""
    from pyspark.sql import functions as F

    df = (spark.range(first, first + n)
          .select(F.format_string("user-%d", F.col("id") % 50).alias("key"),
                  F.to_json(F.struct(F.col("id").alias("order"), (F.col("id") % 50).alias("user"),
                                     ((F.col("id") * 7919) % 10_000).alias("amount_cents")))
                  .alias("value")))
    (df.write.format("kafkalog").option("path", str(topics)).option("topic", "orders")
     .option("numPartitions", 3).mode("append").save())


def start_etl(spark, topics: Path, checkpoint: Path, *, available_now: bool):
    """The ETL query: orders -> orders_eur, exactly once through the checkpoint."""
    from pyspark.sql import functions as F

    orders = (spark.readStream.format("kafkalog").option("path", str(topics))
              .option("subscribe", "orders").option("startingOffsets", "earliest")
              .option("isolationLevel", "read_committed")
              .option("maxOffsetsPerTrigger", 400).load())
    o = F.from_json(F.col("value").cast("string"), SCHEMA).alias("o")
    eur = (orders.select("key", o)
           .select("key", F.to_json(F.struct("o.order", "o.user",
                                             (F.col("o.amount_cents") / 100).alias("amount_eur")))
                   .alias("value")))
    w = (eur.writeStream.format("kafkalog").option("path", str(topics)).option("topic", "orders_eur")
         .option("numPartitions", 3).option("compression", "zstd")
         .option("checkpointLocation", str(checkpoint)))
    return (w.trigger(availableNow=True) if available_now else w.trigger(processingTime="0 seconds")).start()


def committed_orders(spark, topics: Path, isolation: str = "read_committed") -> list[int]:
    from pyspark.sql import functions as F

    if not (topics / "orders_eur-0").exists():
        return []
    df = (spark.read.format("kafkalog").option("path", str(topics)).option("subscribe", "orders_eur")
          .option("isolationLevel", isolation).load())
    return [r.order for r in df.select(F.get_json_object(F.col("value").cast("string"), "$.order")
                                        .cast("long").alias("order")).collect()]


def run(spark, workdir: Path) -> dict:
    import kafka_log_source

    kafka_log_source.register(spark)
    workdir = Path(workdir)
    topics, checkpoint = workdir / "topics", workdir / "checkpoints" / "orders-eur"

    produce(spark, topics, 0, FIRST)
    print(f"1. topic 'orders': {FIRST:,} orders in 3 partitions under {topics}")

    query = start_etl(spark, topics, checkpoint, available_now=False)
    deadline = time.monotonic() + 120
    while sum(1 for p in query.recentProgress if p["numInputRows"]) < 2:
        if query.exception() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the ETL query made no progress: {query.exception()}")
        time.sleep(0.05)
    query.stop()                               # mid-way: more micro-batches were still to come
    done_first = len(committed_orders(spark, topics))
    print(f"2. ETL query orders -> orders_eur started, stopped after "
          f"{sum(1 for p in query.recentProgress if p['numInputRows'])} micro-batches: "
          f"orders_eur holds {done_first:,} of {FIRST:,} orders (read_committed)")

    produce(spark, topics, FIRST, MORE)
    print(f"3. {MORE:,} more orders arrived in 'orders' while the query was down")

    query = start_etl(spark, topics, checkpoint, available_now=True)
    query.awaitTermination()
    batches = sum(1 for p in query.recentProgress if p["numInputRows"])
    print(f"4. restarted from the checkpoint {checkpoint}: {batches} more micro-batches, caught up")

    seen = committed_orders(spark, topics)
    everything = committed_orders(spark, topics, "read_uncommitted")
    total = FIRST + MORE
    duplicates = len(seen) - len(set(seen))
    missing = total - len(set(seen) & set(range(total)))
    print(f"5. orders_eur as a read_committed consumer sees it: {len(seen):,} records for {total:,} orders, "
          f"{duplicates} duplicates, {missing} missing")
    if len(everything) != len(seen):
        print(f"   (read_uncommitted sees {len(everything):,}: the records of a micro-batch the stop "
              f"cut off, aborted and invisible to read_committed)")
    return {"topics": str(topics), "checkpoint": str(checkpoint), "expected": total,
            "after_stop": done_first, "records": len(seen), "distinct": len(set(seen)),
            "duplicates": duplicates, "missing": missing, "uncommitted": len(everything)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, help="where to put the data (default: a new temporary directory)")
    args = ap.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kafkalog-etl-"))
    if (workdir / "topics").exists():
        raise SystemExit(f"{workdir}/topics exists already: pick an empty --workdir")
    spark = make_spark("kafkalog-exactly-once-etl")
    try:
        result = run(spark, workdir)
    finally:
        spark.stop()
    ok = result["duplicates"] == 0 and result["missing"] == 0 and result["records"] == result["expected"]
    kl = Path(sys.executable).parent / "kafkalog"
    print(f"\n{'OK: exactly once' if ok else 'NOT exactly once'}: the data is in {result['topics']}")
    print("Try next:")
    print(f"  {kl} dump --files {result['topics']}/orders_eur-0/00000000000000000000.log | grep -c 'isControl: true'"
          "   # one COMMIT marker per micro-batch")
    print(f"  ls {result['checkpoint']}/kafkalog-sink      # the sink's transaction log beside Spark's checkpoint")
    print("  tests/spark/test_sink_exactly_once.py: the same guarantee under SIGKILL at every commit phase")
    print(f"  rm -rf {workdir}     # when done")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

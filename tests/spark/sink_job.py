"""A whole streaming ETL job in its own process, for tests/spark/test_sink_exactly_once.py: its
own local SparkSession (``local[2]``, no UI, Python workers on this interpreter) reads the
``kafkalog`` topic ``in`` under SRC and writes it, unchanged, to the topic ``out`` (3 partitions)
under OUT with the ``kafkalog`` sink, checkpointed in CHK, with ``Trigger.AvailableNow`` and a
small ``maxOffsetsPerTrigger`` (many micro-batches). The test SIGKILLs the whole process session
at a random moment and runs the job again on the same checkpoint.

Prints ``ready <seconds since start>`` once the query is started (the JVM and the Python
workers are up) and ``done <batches> <seconds since start>`` when the query ended by itself;
exits 0 then, 1 if the query failed. A query that fails only because a Python worker of Spark's
did not connect back in time (Spark's fixed 10 s, run out on a loaded machine) is started again
on its checkpoint (tests/spark_jvm.py: a pause first, at most START_ATTEMPTS starts in all), with a
``restarted <seconds since start> <reason>`` line.

    python sink_job.py SRC OUT CHK MAX_OFFSETS_PER_TRIGGER [STAGED_SEGMENT_MIN_BYTES]

With STAGED_SEGMENT_MIN_BYTES (the sink option ``stagedSegmentMinBytes``; 1: every staged file)
the commits rename staged files into the logs as segments instead of copying them.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    t0 = time.monotonic()
    src, out, chk, max_offsets = argv[1], argv[2], argv[3], argv[4]
    segment_min = argv[5] if len(argv) > 5 else None
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "tests"))
    from pyspark.sql import SparkSession
    from spark_jvm import CONNECT_BACK, RESTART_PAUSE, SHORT_LIVED_JVM, START_ATTEMPTS

    import kafka_log_source

    spark = (SparkSession.builder.master("local[2]").appName("kafkalog-sink-job")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             # a short-lived JVM (tests/spark_jvm.py): the job is killed and restarted dozens
             # of times, and C1 only with the serial collector start it about twice as fast
             .config("spark.driver.extraJavaOptions", SHORT_LIVED_JVM)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafka_log_source.register(spark)
    w = (spark.readStream.format("kafkalog").option("path", src).option("subscribe", "in")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", max_offsets)
         .load().selectExpr("key", "value")
         .writeStream.format("kafkalog").option("path", out).option("topic", "out")
         .option("numPartitions", "3").option("checkpointLocation", chk)
         .trigger(availableNow=True))
    if segment_min is not None:
        w = w.option("stagedSegmentMinBytes", segment_min)
    q = w.start()
    print(f"ready {time.monotonic() - t0:.3f}", flush=True)
    batches = 0
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            q.awaitTermination()
            break
        except Exception as e:      # StreamingQueryException: reported, exit status 1
            batches += len(q.recentProgress)
            if CONNECT_BACK in str(e) and attempt < START_ATTEMPTS:
                # Spark's own start-up timeout on a loaded machine, not a failure of kafkalog:
                # the query starts again on its checkpoint, as an operator would restart it
                time.sleep(RESTART_PAUSE)
                print(f"restarted {time.monotonic() - t0:.3f} {CONNECT_BACK}", flush=True)
                q = w.start()
                continue
            print(f"failed {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            return 1
    print(f"done {batches + len(q.recentProgress)} {time.monotonic() - t0:.3f}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

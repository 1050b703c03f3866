"""Driver script (tests/cluster/test_cluster_read.py): the same queries on a topic in an object
store and on a local directory holding the same records, in one driver run; prints one JSON line,
with where the executors' tasks ran (process, working directory) and the driver's own.

argv[1]: a JSON file {"sources": {name: {"remote": options, "local": options}}, "topic": name,
"partitions": n, "checkpoints": dir, "max_per_trigger": n, "timestamps": [start, end]}. Every
query runs on each source's remote and local options.
"""

import json
import os
import sys

from cluster_session import cluster_session

spec = json.loads(open(sys.argv[1]).read())
spark = cluster_session("kafkalog-remote-read")
COLS = "partition, offset, CAST(key AS STRING) AS key, CAST(value AS STRING) AS value, timestamp"


def rows(df) -> list:
    return sorted([r.partition, r.offset, r.key, r.value, str(r.timestamp)] for r in df.selectExpr(*COLS.split(", "))
                  .collect())


def batch(options: dict, **extra) -> list:
    return rows(spark.read.format("kafkalog").options(**options, **extra).load())


def stream(options: dict, checkpoint: str, fail_at: int | None = None, **extra) -> list:
    """One run of an AvailableNow query: [batch id, its rows] of each micro-batch it completed.
    ``fail_at``: the batch id whose sink raises (fault injection: the query dies with that batch
    planned in its offset log but not committed; a restart replays it)."""
    got: list = []

    def sink(df, batch_id):
        if batch_id == fail_at:
            raise RuntimeError("injected failure")
        got.append([batch_id, rows(df)])

    q = (spark.readStream.format("kafkalog").options(**options, **extra).load()
         .writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination()
    except Exception as e:               # the injected failure only
        if "injected failure" not in str(e):
            raise
    return got


start_ts, end_ts = spec["timestamps"]
out: dict = {"driver": [os.getpid(), os.getcwd()],
             "places": spark.sparkContext.parallelize(range(64), 8).map(lambda _: (os.getpid(), os.getcwd()))
             .distinct().collect()}
names = {f"{name}/{side}": options for name, sides in spec["sources"].items() for side, options in sides.items()}
for name, options in names.items():
    out[name] = {
        "batch": batch(options),
        "committed": batch(options, isolationLevel="read_committed"),
        "time_travel": batch(options, startingTimestamp=str(start_ts), endingOffsetsByTimestamp=json.dumps(
            {spec["topic"]: {str(p): end_ts for p in range(spec["partitions"])}})),
        "offsets": batch(options, startingOffsets=json.dumps({spec["topic"]: {"0": 7, "1": -2}}),
                         endingOffsets=json.dumps({spec["topic"]: {"0": 900, "1": -1}})),
    }
# streaming: maxOffsetsPerTrigger, a restart from the checkpoint, and the same checkpoint moving
# between the store and the local directory (same offsets, same topic ids: no reset)
limit = {"maxOffsetsPerTrigger": str(spec["max_per_trigger"]), "startingOffsets": "earliest"}
for name, sides in spec["sources"].items():
    cp = f"{spec['checkpoints']}/{name}"
    first = stream(sides["remote"], cp, fail_at=2, **limit)     # batches 0, 1; dies running 2
    moved = stream(sides["local"], cp, fail_at=4, **limit)      # 2 replayed, 3 from the local directory
    rest = stream(sides["remote"], cp, **limit)                 # back to the store, to the end
    out[f"{name}/remote"]["stream"] = [first, moved, rest]
    out[f"{name}/local"]["stream"] = [stream(sides["local"], f"{cp}-local", **limit)]
print(json.dumps(out))
spark.stop()

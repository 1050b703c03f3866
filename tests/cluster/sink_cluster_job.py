"""Driver script for tests/cluster/test_sink_cluster.py: the ``kafkalog`` sink on
``local-cluster`` with its staging in SeaweedFS. argv[1] is a JSON document:

* ``store``: the sink's ``rsm.config.*`` options; ``bucket``, ``prefix``: where in the store;
* ``input``: the data directory of the input topic ``in`` (read by the streaming queries);
* ``work``: a local folder for outputs and checkpoints;
* ``steps``: what to run, in order:
  - ``stream``: the streaming ETL ``in`` -> ``out`` (``maxOffsetsPerTrigger``, AvailableNow),
    staging in the store, checkpoint local; with ``crash`` = ``<point>@<batch>`` the commit
    SIGKILLs this driver process and then itself at that point (``kafkalog.test.crashAt`` and
    ``kafkalog.test.crashPid``): the script never gets past it;
  - ``reference``: the same query into ``ref``, staging in a local folder (the default, under
    its checkpoint);
  - ``batch``: ``df.write`` of ``rows`` deterministic rows into the topic ``tiered`` with its
    staging in the store and ``remotePath`` in the store (small segments, local retention);
  - ``read``: ``out`` and ``ref`` read back with ``read_committed``.

Prints one JSON line: what the steps returned.
"""

import json
import os
import sys

from cluster_session import cluster_session

cfg = json.loads(sys.argv[1])
work = cfg["work"]
store_uri = f"s3://{cfg['bucket']}/{cfg['prefix']}"
spark = cluster_session("kafkalog-sink-cluster-test")
out: dict = {"driver_pid": os.getpid()}


def etl(target: str, chk: str, **options):
    df = (spark.readStream.format("kafkalog").option("path", cfg["input"]).option("subscribe", "in")
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "60").load()
          .selectExpr("key", "value"))
    w = (df.writeStream.format("kafkalog").option("path", f"{work}/{target}").option("topic", target)
         .option("numPartitions", "3").option("checkpointLocation", chk).trigger(availableNow=True))
    for k, v in options.items():
        w = w.option(k, v)
    q = w.start()
    q.awaitTermination()
    return q.lastProgress["batchId"] if q.lastProgress else None


def read(target: str) -> list:
    rows = (spark.read.format("kafkalog").option("path", f"{work}/{target}").option("subscribe", target)
            .option("isolationLevel", "read_committed").load()
            .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v").collect())
    return sorted(([r.k, r.v] for r in rows), key=lambda r: (r[0] is not None, r[0] or "", r[1]))


for step in cfg["steps"]:
    if step == "stream":
        options = {"stagingLocation": f"{store_uri}/staging", **cfg["store"]}
        if cfg.get("crash"):
            options.update({"kafkalog.test.crashAt": cfg["crash"], "kafkalog.test.crashPid": str(os.getpid())})
        out["stream_last_batch"] = etl("out", f"{work}/chk-out", **options)
    elif step == "reference":
        out["reference_last_batch"] = etl("ref", f"{work}/chk-ref")
    elif step == "batch":
        n = cfg["rows"]
        df = spark.range(0, n, 1, 4).selectExpr("CAST(id AS STRING) AS key",
                                                "CONCAT('row-', CAST(id AS STRING), REPEAT('x', 40)) AS value")
        (df.write.format("kafkalog").option("path", f"{work}/tiered-data").option("topic", "tiered")
         .option("numPartitions", "2").option("segment.bytes", "16384").option("batch.size", "4096")
         .option("stagingLocation", f"{store_uri}/batch-staging")
         .option("remotePath", f"{store_uri}/remote").option("remote.storage.enable", "true")
         .option("local.retention.bytes", "1").options(**cfg["store"]).mode("append").save())
        out["batch_rows"] = n
    elif step == "read":
        out["out"] = read("out")
        out["ref"] = read("ref")
print(json.dumps(out))
spark.stop()

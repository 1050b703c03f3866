"""Driver script: where the executors' tasks run (process, working directory) and a kafkalog batch
read of the local topic folder given as argv[1]; prints one JSON line."""

import json
import os
import sys

from cluster_session import cluster_session

spark = cluster_session()
sc = spark.sparkContext
places = (sc.parallelize(range(64), 8)
          .map(lambda _: (os.getpid(), os.getcwd()))
          .distinct().collect())
rows = (spark.read.format("kafkalog").option("path", sys.argv[1]).option("subscribe", "t").load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value").collect())
print(json.dumps({"driver_pid": os.getpid(), "driver_cwd": os.getcwd(), "places": places,
                  "rows": sorted([r.partition, r.offset, r.value] for r in rows)}))
spark.stop()

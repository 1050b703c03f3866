"""The garbage collector in the Python workers Spark reuses (storage_core.common.settle_reused_worker):
PySpark's daemon runs a full ``gc.collect()`` after every task of a reused worker, over every
object alive; kafkalog's packages freeze what they loaded, once it is loaded, so that those
collections walk only what came after it. Only where Spark says it reuses the worker
(``SPARK_REUSE_WORKER``); anywhere else nothing changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql.functions import udf

from storage_core.common import FREEZE_THRESHOLD, SPARK_REUSE_WORKER

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json
import kafka_log_source, kafka_log_sink
from storage_core.common import settle_reused_worker
frozen_at_import = gc.get_freeze_count()
again = settle_reused_worker()
import numpy as np, pyarrow as pa
from storage_core.format import decode_run, encode_batches
table = pa.table({"key": pa.array([b"k"] * 10), "value": pa.array([b"v"] * 10)})
decode_run(encode_batches(table, base_offset=0))          # loads the kernels
junk = [[i] for i in range(3 * %d)]                      # objects of a task, still alive
after_task = settle_reused_worker()
print(json.dumps([frozen_at_import, again, after_task, gc.get_freeze_count(), len(gc.get_objects(generation=2))]))
""" % FREEZE_THRESHOLD


def probe(reuse: bool) -> list:
    env = {k: v for k, v in os.environ.items() if k != SPARK_REUSE_WORKER}
    if reuse:
        env[SPARK_REUSE_WORKER] = "1"
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_a_reused_worker_freezes_what_it_loaded_and_no_other_process_does():
    frozen_at_import, again, after_task, frozen, unfrozen_old = probe(reuse=True)
    # importing the packages froze pyspark, numpy, pyarrow, numba and kafkalog's own modules
    assert frozen_at_import > FREEZE_THRESHOLD
    assert again is False                            # nothing new since: no second freeze
    # the task's kernels and its live objects went over the threshold: frozen in turn
    assert after_task is True and frozen > frozen_at_import + 3 * FREEZE_THRESHOLD
    assert unfrozen_old < FREEZE_THRESHOLD
    assert probe(reuse=False)[:4] == [0, False, False, 0]


def test_sparks_python_workers_are_reused_and_freeze_on_import(spark):
    """Spark's own workers carry ``SPARK_REUSE_WORKER`` (its default ``spark.python.worker.reuse``),
    and a worker that imported kafkalog has the modules frozen."""
    @udf("string")
    def state(_):
        import gc
        import os

        import kafka_log_source  # noqa: F401  (what unpickling a read task imports)
        return json.dumps([os.environ.get("SPARK_REUSE_WORKER"), gc.get_freeze_count()])

    got = [json.loads(r[0]) for r in spark.range(2).repartition(2).select(state("id")).collect()]
    assert got and all(reuse and frozen > FREEZE_THRESHOLD for reuse, frozen in got), got

"""What every layer shares: Java's integer bounds (Kafka's fields are Java ``int`` and ``long``)
and the wall clock in milliseconds (Kafka's ``Time.SYSTEM.milliseconds()``), and the
garbage collector's settling in reused Spark workers. Imports nothing of the project."""

from __future__ import annotations

import gc
import os
import time

INT_MIN = -(2**31)                  # Integer.MIN_VALUE
INT_MAX = 2**31 - 1                 # Integer.MAX_VALUE
LONG_MIN = -(2**63)                 # Long.MIN_VALUE
LONG_MAX = 2**63 - 1                # Long.MAX_VALUE


def wall_ms() -> int:
    """Milliseconds since the epoch, as Kafka's ``Time.SYSTEM.milliseconds()``."""
    return int(time.time() * 1000)


# set by Spark's PythonWorkerFactory in the environment of the Python workers it reuses
SPARK_REUSE_WORKER = "SPARK_REUSE_WORKER"
FREEZE_THRESHOLD = 20_000           # unfrozen objects in the oldest generation


def settle_reused_worker(threshold: int = FREEZE_THRESHOLD) -> bool:
    """In a Python worker that Spark reuses across tasks (``SPARK_REUSE_WORKER`` set), once more
    than ``threshold`` objects of the oldest generation are not frozen: a full collection, then
    ``gc.freeze()`` of what survived it. True if it froze; elsewhere it does nothing.

    PySpark's daemon runs a full ``gc.collect()`` after every task of a reused worker
    (pyspark/daemon.py), which walks every object alive. What kafkalog loads (numpy, pyarrow and
    the pandas it imports, numba and the kernels loaded from its cache) makes that ~160k objects
    with pyspark's own, ~150 ms of CPU per task here against ~35 ms for pyspark's alone, for
    objects that live as long as the process. Frozen right after a collection, only objects
    alive are frozen, and each later collection walks only what came after them. The cost:
    a frozen object that later becomes part of a reference cycle is not reclaimed."""
    if not os.environ.get(SPARK_REUSE_WORKER):
        return False
    if len(gc.get_objects(generation=2)) <= threshold:
        return False
    gc.collect()
    gc.freeze()
    return True

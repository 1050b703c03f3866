"""bench/spark_workers.py's baseline: PySpark's daemon (``pyspark.daemon``) whose forked workers
drop ``SPARK_REUSE_WORKER`` from their environment before their first task (the daemon read it at
its start and reuses them all the same), so that kafkalog freezes nothing in them and PySpark's
collection after each task walks every object."""

import os

import pyspark.daemon

_worker = pyspark.daemon.worker


def _worker_without_freeze(*args, **kwargs):
    os.environ.pop("SPARK_REUSE_WORKER", None)
    return _worker(*args, **kwargs)


pyspark.daemon.worker = _worker_without_freeze

if __name__ == "__main__":
    pyspark.daemon.manager()

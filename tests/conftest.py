"""One local SparkSession (``local[2]``) for every test of the run that asks for ``spark``
(tests/spark, tests/interop), with ``kafkalog`` registered. Python workers are pointed at this
interpreter (``PYSPARK_PYTHON``), or they would start ``python3`` from PATH without the
project's packages."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kafka_log_source

    session = (SparkSession.builder.master("local[2]").appName("kafkalog-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.python.filterPushdown.enabled", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    kafka_log_source.register(session)
    yield session
    session.stop()

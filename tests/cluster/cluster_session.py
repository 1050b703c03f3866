"""The SparkSession of a cluster driver script (tests/cluster/conftest.py starts the scripts)."""

from __future__ import annotations

import os
import sys

from spark_jvm import SHORT_LIVED_JVM


def cluster_session(app: str = "kafkalog-cluster-test"):
    from pyspark.sql import SparkSession

    import kafka_log_source

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(os.environ["KAFKALOG_SPARK_MASTER"]).appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.executor.memory", "768m")
             .config("spark.driver.extraJavaOptions", SHORT_LIVED_JVM)
             .config("spark.executor.extraJavaOptions", SHORT_LIVED_JVM)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafka_log_source.register(spark)
    return spark

"""The Spark data source ``kafkalog``: Spark's Kafka source, read from Kafka partition
directories on disk instead of a broker.

    import kafka_log_source
    kafka_log_source.register(spark)
    df = (spark.readStream.format("kafkalog").option("path", "/data/kafkalog")
          .option("subscribe", "orders").load())
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from storage_core import __version__
from storage_core.common import settle_reused_worker

from .datasource import KafkaLogDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["KafkaLogDataSource", "__version__", "register"]


# a Spark worker imports this package when it unpickles its first call into the data source:
# the modules loaded, frozen once, are left out of the full collection after each of its tasks
settle_reused_worker()


def register(spark: SparkSession) -> None:
    """Make ``format("kafkalog")`` available in ``spark`` (a session-scoped registration)."""
    spark.dataSource.register(KafkaLogDataSource)

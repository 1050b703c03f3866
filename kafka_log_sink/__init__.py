"""The Spark sink of ``kafkalog``: DataFrames appended into Kafka partition directories through
the storage engine's segment writer, exactly once per streaming micro-batch (a Kafka transaction
per batch, see ``commit``). Handed out by ``kafka_log_source.KafkaLogDataSource``."""

from storage_core import __version__
from storage_core.common import settle_reused_worker

from .sink import KafkaLogBatchWriter, KafkaLogStreamWriter, batch_writer, stream_writer

__all__ = ["KafkaLogBatchWriter", "KafkaLogStreamWriter", "__version__", "batch_writer", "stream_writer"]

# see kafka_log_source/__init__.py: what a worker loads with this package, out of the collection
# PySpark's daemon runs after each task
settle_reused_worker()

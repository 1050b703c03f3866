"""kafkalog's storage engine: Kafka's log format and storage, with no Spark imports."""

__version__ = "0.1.0"

"""The broker settings Kafka's ``LogManager`` reads from ``KafkaConfig`` (``log.*`` and
``num.recovery.threads.per.data.dir``), as one dataclass."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LogManagerConfig:
    """The broker settings the LogManager reads (``KafkaConfig``).

    ``flush_check_interval_ms`` (``log.flush.scheduler.interval.ms``) defaults to 1 s where Kafka's
    default is ``Long.MAX_VALUE``: a broker relies on replication and leaves flushing to the OS,
    kafkalog has no replicas, so a topic's ``flush.ms`` should take effect on an idle log too.
    The check itself costs one comparison per log."""

    num_recovery_threads_per_data_dir: int = 1            # num.recovery.threads.per.data.dir
    retention_check_interval_ms: int = 300000             # log.retention.check.interval.ms
    flush_check_interval_ms: int = 1000                   # log.flush.scheduler.interval.ms
    flush_recovery_offset_checkpoint_interval_ms: int = 60000   # log.flush.offset.checkpoint.interval.ms
    flush_start_offset_checkpoint_interval_ms: int = 60000      # log.flush.start.offset.checkpoint.interval.ms
    producer_id_expiration_check_interval_ms: int = 600000      # producer.id.expiration.check.interval.ms
    initial_task_delay_ms: int = 30000                    # log.initial.task.delay.ms

    def __post_init__(self) -> None:
        if self.num_recovery_threads_per_data_dir < 1:
            raise ValueError("num.recovery.threads.per.data.dir must be at least 1")
        for name in ("retention_check_interval_ms", "flush_check_interval_ms",
                     "flush_recovery_offset_checkpoint_interval_ms",
                     "flush_start_offset_checkpoint_interval_ms",
                     "producer_id_expiration_check_interval_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.initial_task_delay_ms < 0:
            raise ValueError("initial_task_delay_ms must be >= 0")

"""What a broker runs around the logs: LogManager, topic configs, the scheduler, metrics."""

from .compaction import CompactionRound
from .config_repository import (ConfigRepository, CorruptTopicConfigError, TOPIC_CONFIG_FILE)
from .log_manager import (CLEANER_TASK, DELETE_LOGS_TASK, FLUSH_TASK, LOCK_FILE,
                          LOG_START_OFFSET_TASK, LogManager, LogManagerConfig,
                          PRODUCER_EXPIRATION_TASK, RECOVERY_POINT_TASK, RETENTION_TASK)
from .metrics import LogManagerSnapshot, ManagerMetrics
from .scheduler import (KafkaScheduler)

__all__ = [
    "CLEANER_TASK",
    "CompactionRound",
    "ConfigRepository",
    "CorruptTopicConfigError",
    "DELETE_LOGS_TASK",
    "FLUSH_TASK",
    "KafkaScheduler",
    "LOCK_FILE",
    "LOG_START_OFFSET_TASK",
    "LogManager",
    "LogManagerConfig",
    "LogManagerSnapshot",
    "ManagerMetrics",
    "PRODUCER_EXPIRATION_TASK",
    "RECOVERY_POINT_TASK",
    "RETENTION_TASK",
    "TOPIC_CONFIG_FILE",
]

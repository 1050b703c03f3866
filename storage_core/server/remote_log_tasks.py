"""The ``LogManager``'s side of tiered storage (KIP-405): with ``remote.log.storage.system.enable``
its ``RemoteLogManager`` is created at start-up (Kafka's ``BrokerServer`` creates it beside the
``LogManager``) and its ``RLMCopyTask`` and ``RLMExpirationTask`` run on the manager's scheduler
every ``remote.log.manager.task.interval.ms``, over the manager's logs.

The metadata manager keeps ``__remote_log_metadata`` in the first data directory and is that
topic's writer (Kafka's RLMM writes it through its own producer): the ``LogManager`` loaded its
partitions like any others, and hands them over here (closed, taken out of its logs) before the
metadata manager opens them, and the topic's ``retention.ms`` (-1 by default) is recorded as its
override, as Kafka creates the topic.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..errors import KafkaLogError
from ..log import Log
from ..remote import REMOTE_LOG_METADATA_TOPIC_NAME, RemoteLogManager, RemoteLogManagerConfig

logger = logging.getLogger(__name__)


def start_remote_log_manager(mgr: Any) -> RemoteLogManager | None:
    """The data directory's ``RemoteLogManager``, its tasks scheduled; None without tiering.
    ``mgr`` is the ``LogManager`` starting up (not imported here: it imports this module)."""
    config = mgr.remote_log_manager_config
    if config is None or not config.remote_log_storage_system_enable:
        return None
    with mgr._lock:
        metadata_logs = [tp for tp in mgr._logs if tp.topic == REMOTE_LOG_METADATA_TOPIC_NAME]
        for tp in metadata_logs:
            mgr._logs.pop(tp).close()
    rlm = RemoteLogManager.from_config(config, mgr.log_dirs[0], clock=mgr.clock)
    # Kafka creates the topic with its retention (-1: kept for ever); as a topic override it also
    # holds for a LogManager without tiering (kafkalog retention) that opens the directory
    retention = getattr(getattr(rlm.rlmm, "config", None), "retention_ms", None)
    if retention is not None and mgr.topic_config(REMOTE_LOG_METADATA_TOPIC_NAME).retention_ms != retention:
        mgr.config_repository.alter_topic_config(REMOTE_LOG_METADATA_TOPIC_NAME, {"retention.ms": str(retention)})
    rlm.schedule(mgr.scheduler, lambda: list(mgr.logs.values()))
    logger.info("Remote log manager started (%s every %d ms)", rlm.rsm, config.remote_log_manager_task_interval_ms)
    return rlm


def maybe_update_remote_log_components(rlm: RemoteLogManager | None, logs: Sequence[Log],
                                       was_remote_log_enabled: Sequence[bool]) -> None:
    """``TopicConfigHandler.maybeUpdateRemoteLogComponents`` after a topic's configuration changed:
    a log whose ``remote.storage.enable`` turned false with ``remote.log.delete.on.disable`` loses
    its remote data (``RemoteLogManager.stopPartitions`` with ``deleteRemoteLog``; its log start
    offset is already the local one here). ``remote.log.copy.disable`` needs nothing: the copy
    task reads it at every pass and stops copying, expiry goes on. A failure is logged, as
    Kafka's ``stopPartitions`` logs it, and the other partitions go on."""
    if rlm is None:
        return
    for log, was in zip(logs, was_remote_log_enabled):
        c = log.config
        if was and not c.remote_storage_enable and c.remote_log_delete_on_disable:
            try:
                rlm.delete_remote_log_partition(log)
            except (OSError, KafkaLogError):
                logger.error("Could not delete the remote data of %s", log.dir, exc_info=True)


__all__ = ["RemoteLogManager", "RemoteLogManagerConfig", "maybe_update_remote_log_components",
           "start_remote_log_manager"]

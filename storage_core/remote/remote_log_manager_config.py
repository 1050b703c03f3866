"""Kafka's ``RemoteLogManagerConfig``: the broker settings of tiered storage (KIP-405), with
Kafka's names and defaults, and the plugins they configure.

``remote.log.storage.system.enable`` (default false) switches tiering on for the data
directory; ``remote.log.manager.task.interval.ms`` (30000) is the period of the copy and
expiration tasks; the plugins get the properties under ``remote.log.storage.manager.impl.prefix``
(``rsm.config.``) and ``remote.log.metadata.manager.impl.prefix`` (``rlmm.config.``), prefix
stripped, plus ``broker.id``/``node.id`` (and ``log.dir`` for the metadata manager), as
``RemoteLogManager.configAndWrapRsmPlugin``/``configAndWrapRlmmPlugin`` pass them.

Plugins are Python classes here, not Java ones: ``remote.log.storage.manager.class.name`` may be
unset, ``PyArrowRemoteStorageManager`` or Kafka's ``LocalTieredStorage`` (whose object layout
``PyArrowRemoteStorageManager`` keeps), all meaning ``PyArrowRemoteStorageManager``;
``remote.log.metadata.manager.class.name`` is Kafka's ``TopicBasedRemoteLogMetadataManager``
(its default), the only one there is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidConfigError
from .remote_log_metadata_manager import (DEFAULT_REMOTE_LOG_METADATA_MANAGER_IMPL_PREFIX,
                                          REMOTE_LOG_METADATA_MANAGER_IMPL_PREFIX_PROP,
                                          TopicBasedRemoteLogMetadataManager)
from .storage_manager import (DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX,
                              REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX_PROP, PyArrowRemoteStorageManager)

logger = logging.getLogger(__name__)

REMOTE_LOG_STORAGE_SYSTEM_ENABLE_PROP = "remote.log.storage.system.enable"
REMOTE_LOG_MANAGER_TASK_INTERVAL_MS_PROP = "remote.log.manager.task.interval.ms"
REMOTE_STORAGE_MANAGER_CLASS_NAME_PROP = "remote.log.storage.manager.class.name"
REMOTE_LOG_METADATA_MANAGER_CLASS_NAME_PROP = "remote.log.metadata.manager.class.name"
REMOTE_LOG_METADATA_CUSTOM_METADATA_MAX_BYTES_PROP = "remote.log.metadata.custom.metadata.max.bytes"
DEFAULT_REMOTE_LOG_MANAGER_TASK_INTERVAL_MS = 30000
DEFAULT_REMOTE_LOG_METADATA_CUSTOM_METADATA_MAX_BYTES = 128
DEFAULT_REMOTE_LOG_METADATA_MANAGER_CLASS_NAME = \
    "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"
_RSM_CLASS_NAMES = frozenset({"PyArrowRemoteStorageManager", "storage_core.remote.PyArrowRemoteStorageManager",
                              "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"})
_RLMM_CLASS_NAMES = frozenset({DEFAULT_REMOTE_LOG_METADATA_MANAGER_CLASS_NAME, "TopicBasedRemoteLogMetadataManager",
                               "storage_core.remote.TopicBasedRemoteLogMetadataManager"})


def _bool(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {key}: expected true or false")
    return text == "true"


def _int(key: str, raw: object, low: int) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {key}: expected an integer") from None
    if value < low:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {key}: must be at least {low}")
    return value


@dataclass(frozen=True)
class RemoteLogManagerConfig:
    """``RemoteLogManagerConfig``: build with ``from_properties`` (broker properties, Kafka's names)."""

    remote_log_storage_system_enable: bool = False
    remote_log_manager_task_interval_ms: int = DEFAULT_REMOTE_LOG_MANAGER_TASK_INTERVAL_MS
    remote_log_storage_manager_class_name: str | None = None
    remote_log_storage_manager_impl_prefix: str = DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX
    remote_log_metadata_manager_class_name: str = DEFAULT_REMOTE_LOG_METADATA_MANAGER_CLASS_NAME
    remote_log_metadata_manager_impl_prefix: str = DEFAULT_REMOTE_LOG_METADATA_MANAGER_IMPL_PREFIX
    remote_log_metadata_custom_metadata_max_bytes: int = DEFAULT_REMOTE_LOG_METADATA_CUSTOM_METADATA_MAX_BYTES
    broker_id: int = 0
    # every broker property, for the plugins' prefixed settings (secrets inside are never logged)
    properties: Mapping[str, object] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.remote_log_manager_task_interval_ms < 1:
            raise InvalidConfigError(f"Invalid value {self.remote_log_manager_task_interval_ms} for configuration "
                                     f"{REMOTE_LOG_MANAGER_TASK_INTERVAL_MS_PROP}: must be at least 1")
        name = self.remote_log_storage_manager_class_name
        if name is not None and name not in _RSM_CLASS_NAMES:
            raise InvalidConfigError(f"Invalid value {name!r} for configuration "
                                     f"{REMOTE_STORAGE_MANAGER_CLASS_NAME_PROP}: kafkalog's remote storage manager "
                                     f"is one of {', '.join(sorted(_RSM_CLASS_NAMES))}")
        if self.remote_log_metadata_manager_class_name not in _RLMM_CLASS_NAMES:
            raise InvalidConfigError(f"Invalid value {self.remote_log_metadata_manager_class_name!r} for configuration "
                                     f"{REMOTE_LOG_METADATA_MANAGER_CLASS_NAME_PROP}: kafkalog's remote log metadata "
                                     f"manager is {DEFAULT_REMOTE_LOG_METADATA_MANAGER_CLASS_NAME}")

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> "RemoteLogManagerConfig":
        """From broker properties (Kafka's dotted names); ``node.id`` (else ``broker.id``) is the
        broker id written into the metadata events."""
        p = dict(properties)
        kwargs: dict[str, Any] = {"properties": p}
        if REMOTE_LOG_STORAGE_SYSTEM_ENABLE_PROP in p:
            kwargs["remote_log_storage_system_enable"] = _bool(REMOTE_LOG_STORAGE_SYSTEM_ENABLE_PROP,
                                                               p[REMOTE_LOG_STORAGE_SYSTEM_ENABLE_PROP])
        if REMOTE_LOG_MANAGER_TASK_INTERVAL_MS_PROP in p:
            kwargs["remote_log_manager_task_interval_ms"] = _int(REMOTE_LOG_MANAGER_TASK_INTERVAL_MS_PROP,
                                                                 p[REMOTE_LOG_MANAGER_TASK_INTERVAL_MS_PROP], 1)
        if REMOTE_LOG_METADATA_CUSTOM_METADATA_MAX_BYTES_PROP in p:
            key = REMOTE_LOG_METADATA_CUSTOM_METADATA_MAX_BYTES_PROP
            kwargs["remote_log_metadata_custom_metadata_max_bytes"] = _int(key, p[key], 0)
        for key, name in ((REMOTE_STORAGE_MANAGER_CLASS_NAME_PROP, "remote_log_storage_manager_class_name"),
                          (REMOTE_LOG_METADATA_MANAGER_CLASS_NAME_PROP, "remote_log_metadata_manager_class_name"),
                          (REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX_PROP, "remote_log_storage_manager_impl_prefix"),
                          (REMOTE_LOG_METADATA_MANAGER_IMPL_PREFIX_PROP, "remote_log_metadata_manager_impl_prefix")):
            if p.get(key):
                kwargs[name] = str(p[key]).strip()
        for key in ("node.id", "broker.id"):
            if key in p:
                kwargs["broker_id"] = _int(key, p[key], -1)
                break
        return cls(**kwargs)

    def _prefixed(self, prefix: str) -> dict[str, object]:
        configs = {k[len(prefix):]: v for k, v in self.properties.items() if k.startswith(prefix)}
        configs["broker.id"] = configs["node.id"] = self.broker_id
        return configs

    def rsm_configs(self) -> dict[str, object]:
        """What ``configAndWrapRsmPlugin`` passes the storage manager."""
        return self._prefixed(self.remote_log_storage_manager_impl_prefix)

    def rlmm_configs(self, log_dir: str | Path) -> dict[str, object]:
        """What ``configAndWrapRlmmPlugin`` passes the metadata manager (``log.dir``: the first
        data directory)."""
        configs = self._prefixed(self.remote_log_metadata_manager_impl_prefix)
        # put after the prefixed ones, as Kafka's RemoteLogManager.configureRLMM does: a
        # ``rlmm.config.log.dir`` made `kafkalog tier` write a metadata topic and checkpoints
        # wherever it pointed (relative to the working directory), outside the data directory
        prefixed = configs.get("log.dir")
        if prefixed is not None and str(prefixed) != str(log_dir):
            logger.warning("Ignoring %slog.dir=%s: the %s topic is in the data directory %s",
                           self.remote_log_metadata_manager_impl_prefix, prefixed,
                           "__remote_log_metadata", log_dir)
        configs["log.dir"] = str(log_dir)
        return configs

    def create_remote_storage_manager(self) -> PyArrowRemoteStorageManager:
        return PyArrowRemoteStorageManager(self.rsm_configs())

    def create_remote_log_metadata_manager(self, log_dir: str | Path) -> TopicBasedRemoteLogMetadataManager:
        return TopicBasedRemoteLogMetadataManager(self.rlmm_configs(log_dir))

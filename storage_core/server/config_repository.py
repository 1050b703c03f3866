"""ConfigRepository: per-topic configuration overrides, kept in the data directory.

A broker keeps topic overrides in its metadata (KRaft's ``ConfigRepository``, ZooKeeper's
``/config/topics``) and builds each partition's ``LogConfig`` as defaults + overrides
(``LogConfig.fromProps(defaults, overrides)``). kafkalog has no metadata quorum, so the overrides
live in one JSON file in the root of every data directory::

    kafkalog-topic-configs.json
    {"version": 1, "topics": {"orders": {"cleanup.policy": "compact", "segment.bytes": "1048576"}}}

A file, not a directory: a broker (and ``LogManager``) takes every directory in a data dir for a
partition. Values are kept as Kafka's strings, under Kafka's dotted names; every change is
validated by ``LogConfig.from_properties`` before it is written, so the file never holds a
configuration that would not load. Writes are atomic (``checkpoint.atomic_write``) and, like
the offset checkpoints, serialised across processes by the data directory's lock
(``checkpoint.data_dir_lock``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..checkpoint import CorruptCheckpointError, atomic_write, data_dir_lock, read_small_file, validate_topic_name
from ..config import LogConfig, validate_turning_off_remote_storage_with_delete
from ..errors import InvalidConfigError, KafkaLogError

logger = logging.getLogger(__name__)

TOPIC_CONFIG_FILE = "kafkalog-topic-configs.json"
TOPIC_CONFIG_VERSION = 1
# An override is a known Kafka name (at most ~45 characters) and a short value; even every
# topic config of ten thousand topics stays far below 64 MiB. A file that long is not one
# kafkalog wrote, and is refused before being parsed (its JSON objects would take ~10x in memory).
TOPIC_CONFIG_MAX_BYTES = 64 << 20


class CorruptTopicConfigError(KafkaLogError):
    """The topic configuration file cannot be read back (not JSON, wrong shape, newer version)."""


def parse_topic_configs(text: str, *, source: Path | None = None) -> dict[str, dict[str, str]]:
    where = f" ({source})" if source is not None else ""
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError as e:
        raise CorruptTopicConfigError(f"Topic configuration file is not JSON: {e}{where}") from e
    except RecursionError:
        # nesting deeper than the interpreter's stack: no configuration is shaped like that
        raise CorruptTopicConfigError(f"Topic configuration file is nested too deeply to be a "
                                      f"configuration{where}") from None
    if not isinstance(doc, dict):
        raise CorruptTopicConfigError(f"Topic configuration file must hold a JSON object{where}")
    version = doc.get("version", TOPIC_CONFIG_VERSION)
    if type(version) is not int or version != TOPIC_CONFIG_VERSION:     # not true, not 1.0: both == 1
        raise CorruptTopicConfigError(f"Unsupported topic configuration file version {version!r}, "
                                      f"expected {TOPIC_CONFIG_VERSION}{where}")
    topics = doc.get("topics", {})
    if not isinstance(topics, dict) or not all(
            isinstance(props, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())
            for props in topics.values()):
        raise CorruptTopicConfigError(f"'topics' must map topic names to {{name: string value}}{where}")
    return {topic: dict(props) for topic, props in topics.items()}


def format_topic_configs(topics: Mapping[str, Mapping[str, str]]) -> str:
    body = {t: dict(sorted(p.items())) for t, p in sorted(topics.items()) if p}
    return json.dumps({"version": TOPIC_CONFIG_VERSION, "topics": body}, indent=2) + "\n"


class ConfigRepository:
    """The overrides of every topic, read from and written to ``TOPIC_CONFIG_FILE`` in each of
    ``data_dirs`` (all hold the same content; on read the first dir that has the file wins).

    ``defaults`` is the broker-wide ``LogConfig`` the overrides apply to."""

    def __init__(self, data_dirs: Iterable[str | os.PathLike[str]], defaults: LogConfig | None = None) -> None:
        self.data_dirs = [Path(d) for d in data_dirs]
        if not self.data_dirs:
            raise ValueError("ConfigRepository needs at least one data directory")
        self.defaults = defaults or LogConfig()

    def _paths(self) -> list[Path]:
        return [d / TOPIC_CONFIG_FILE for d in self.data_dirs]

    def read_all(self) -> dict[str, dict[str, str]]:
        """Every topic's overrides (Kafka's dotted names -> string values)."""
        for path in self._paths():
            try:
                # a regular file only (a FIFO would block the read), bounded
                text = read_small_file(path, TOPIC_CONFIG_MAX_BYTES).decode("utf-8")
            except FileNotFoundError:
                continue
            except UnicodeDecodeError as e:
                raise CorruptTopicConfigError(f"Topic configuration file cannot be read: {e} ({path})") from e
            except CorruptCheckpointError as e:          # too long: names the file and position
                raise CorruptTopicConfigError(f"Topic configuration file cannot be read: {e}") from e
            return parse_topic_configs(text, source=path)
        return {}

    def topic_overrides(self, topic: str) -> dict[str, str]:
        return dict(self.read_all().get(topic, {}))

    def topic_config(self, topic: str, overrides: Mapping[str, Mapping[str, str]] | None = None) -> LogConfig:
        """defaults + the topic's overrides (``LogConfig.fromProps(defaults, overrides)``)."""
        props = (self.read_all() if overrides is None else overrides).get(topic, {})
        try:
            return LogConfig.from_properties(props, base=self.defaults)
        except InvalidConfigError as e:
            raise InvalidConfigError(f"{e} (override of topic {topic!r} in {TOPIC_CONFIG_FILE})") from e

    def alter_topic_config(self, topic: str, set_props: Mapping[str, object] | None = None,
                           delete: Iterable[str] = ()) -> LogConfig:
        """Set and/or delete overrides of ``topic`` (Kafka's incrementalAlterConfigs SET and
        DELETE), validated against the whole resulting configuration before anything is written.
        Unknown names are refused naming the key. Returns the topic's new ``LogConfig``."""
        validate_topic_name(topic)
        set_props = dict(set_props or {})
        delete = list(delete)
        known = set(LogConfig().to_properties())
        for key in [*set_props, *delete]:
            if key not in known:
                raise InvalidConfigError(f"Unknown configuration {key!r}; known: {', '.join(sorted(known))}")
        first = self.data_dirs[0]
        with data_dir_lock(first):
            topics = self.read_all()
            props = dict(topics.get(topic, {}))
            for key in delete:
                props.pop(key, None)
            props.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in set_props.items()})
            config = LogConfig.from_properties(props, base=self.defaults)   # refuses bad values
            was = LogConfig.from_properties(topics.get(topic, {}), base=self.defaults).remote_storage_enable
            validate_turning_off_remote_storage_with_delete(was, config)
            # keep the values as the config normalised them ("1e3" is refused, " 10" becomes "10")
            normalised = config.to_properties()
            props = {k: normalised[k] for k in props}
            if props:
                topics[topic] = props
            else:
                topics.pop(topic, None)
            data = format_topic_configs(topics).encode("utf-8")
            for path in self._paths():
                atomic_write(path, data)
        logger.info("Updated configuration of topic %s: %s", topic, props or "defaults")
        return config

    def delete_topic(self, topic: str) -> None:
        """Forget every override of ``topic`` (when the topic itself goes)."""
        with data_dir_lock(self.data_dirs[0]):
            topics = self.read_all()
            if topics.pop(topic, None) is None:
                return
            data = format_topic_configs(topics).encode("utf-8")
            for path in self._paths():
                atomic_write(path, data)

    def __repr__(self) -> str:
        return f"ConfigRepository({[str(d) for d in self.data_dirs]})"

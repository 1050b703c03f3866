"""Config values bounded and typed as Kafka's ConfigDef does (issue 16, finding 9, config part),
and topic-config files whose every parse error is a KafkaLogError naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage_core.config import INT_MAX, LONG_MAX, LogConfig
from storage_core.server import TOPIC_CONFIG_FILE, ConfigRepository, CorruptTopicConfigError
from storage_core.errors import InvalidConfigError, KafkaLogError


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"segment_bytes": "abc"}, "segment.bytes"),
    ({"segment_ms": 1.5}, "segment.ms"),
    ({"preallocate": 1}, "preallocate"),
    ({"segment_bytes": True}, "segment.bytes"),
    ({"cleanup_policy": 3}, "cleanup.policy"),
    ({"min_cleanable_dirty_ratio": "0.5"}, "min.cleanable.dirty.ratio"),
    ({"retention_ms": 99999999999999999999999}, "retention.ms"),
    ({"retention_bytes": LONG_MAX + 1}, "retention.bytes"),
    ({"retention_bytes": -(2**63) - 1}, "retention.bytes"),
    ({"segment_index_bytes": 1 << 40}, "segment.index.bytes"),       # Kafka: INT, atLeast(4)
    ({"segment_index_bytes": 3}, "segment.index.bytes"),
    ({"index_interval_bytes": INT_MAX + 1}, "index.interval.bytes"),
    ({"max_message_bytes": INT_MAX + 1}, "max.message.bytes"),
    ({"producer_id_expiration_ms": 0}, "producer.id.expiration.ms"),
    ({"min_cleanable_dirty_ratio": float("nan")}, "min.cleanable.dirty.ratio"),
])
def test_bad_values_are_refused_naming_key_and_value(kwargs: dict, key: str) -> None:
    with pytest.raises(InvalidConfigError) as e:
        LogConfig(**kwargs)
    assert key in str(e.value) and repr(next(iter(kwargs.values()))) in str(e.value)


def test_bounds_are_inclusive_and_properties_are_checked_alike() -> None:
    c = LogConfig(segment_index_bytes=INT_MAX, retention_ms=LONG_MAX, retention_bytes=-(2**63),
                  min_cleanable_dirty_ratio=1)
    assert c.segment_index_bytes == INT_MAX
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        LogConfig.from_properties({"retention.ms": "99999999999999999999999"})
    with pytest.raises(InvalidConfigError, match="segment.index.bytes"):
        LogConfig.from_properties({"segment.index.bytes": str(1 << 40)})
    # Kafka's ConfigDef parses with Long.parseLong / Double.parseDouble: no digit separators
    for key, value in (("retention.ms", "1_000"), ("segment.bytes", "1_048_576"),
                       ("min.cleanable.dirty.ratio", "0.5_0")):
        with pytest.raises(InvalidConfigError, match=f"Invalid value '{value}' for configuration {key}"):
            LogConfig.from_properties({key: value})
    assert LogConfig.from_properties({"retention.ms": " 1000 "}).retention_ms == 1000


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,                       # RecursionError in json before
    '{"version": 1, "topics": ' + "{" * 100_000 + "}" * 100_000 + "}",
    "\udcff",                                            # not UTF-8 on disk
    '{"version": 1, "topics": {"t": {"segment.bytes": 5}}}',
    "{not json",
    '{"version": 2}',
    '{"version": true}',                                 # == 1 in Python: taken before
    '{"version": 1.0}',
])
def test_topic_config_file_errors_name_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / TOPIC_CONFIG_FILE
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(CorruptTopicConfigError) as e:
        ConfigRepository([tmp_path]).topic_config("t")
    assert isinstance(e.value, KafkaLogError) and str(path) in str(e.value)


def test_topic_override_out_of_range_names_key_and_file(tmp_path: Path) -> None:
    (tmp_path / TOPIC_CONFIG_FILE).write_text(
        '{"version": 1, "topics": {"t": {"retention.ms": "99999999999999999999999"}}}')
    with pytest.raises(InvalidConfigError) as e:
        ConfigRepository([tmp_path]).topic_config("t")
    assert "retention.ms" in str(e.value) and TOPIC_CONFIG_FILE in str(e.value)

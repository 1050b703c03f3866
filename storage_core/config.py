"""LogConfig: a partition's configuration, with Kafka's topic property names and defaults
(Kafka's ``LogConfig`` and ``TopicConfig``).

Python code uses the snake_case fields; ``from_properties`` / ``to_properties`` speak Kafka's
dotted names (``segment.bytes``), which is also how per-topic overrides are stored on disk.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

from .common import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN  # noqa: F401  (re-exported)
from .errors import InvalidConfigError


# the fields Kafka's LogConfig/TopicConfig define as ConfigDef.Type.INT (the other ints are LONG);
# producer.id.expiration.ms is the broker's INT of the same name
_INT_FIELDS = frozenset({"segment_bytes", "segment_index_bytes", "index_interval_bytes",
                         "max_message_bytes", "producer_id_expiration_ms"})
_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {"int": int, "float": (int, float), "bool": bool,
                                                    "str": str}
_TYPE_NAMES = {"int": "an integer", "float": "a number", "bool": "a boolean", "str": "a string"}

FSYNC_MODES = ("always", "policy")


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 604800000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    message_timestamp_type: str = "CreateTime"
    # KIP-937: how far a CreateTime record's timestamp may lie before / after the broker's now
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    preallocate: bool = False
    file_delete_delay_ms: int = 60000
    compression_type: str = "producer"
    producer_id_expiration_ms: int = 86400000
    # kafkalog's own: "always" fsyncs every append (the recovery point follows every append);
    # "policy" flushes by flush.messages / flush.ms, as a broker does (by default: never, the
    # OS writes back, and close() or an explicit flush() makes it durable).
    fsync: str = "policy"
    # tiered storage (KIP-405, Kafka's RemoteLogConfig): -2 for local.retention.* means "as
    # retention.*"; retention.* bound both tiers together
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, value: Any, rule: str) -> None:
            if not ok:
                raise InvalidConfigError(f"Invalid value {value!r} for configuration {name}: {rule}")

        # ConfigDef types first: every value of its field's type, INT fields within Java's int,
        # LONG fields within its long (a value no broker could hold is refused, naming the key)
        for f in fields(self):
            value, key = getattr(self, f.name), f.name.replace("_", ".")
            kind = _FIELD_TYPES[str(f.type)]        # the annotation's text (PEP 563)
            ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
            need(ok, key, value, f"expected {_TYPE_NAMES[str(f.type)]}")
            if kind is int:
                low, high = (INT_MIN, INT_MAX) if f.name in _INT_FIELDS else (LONG_MIN, LONG_MAX)
                need(low <= value <= high, key, value,
                     f"must fit {'an int' if f.name in _INT_FIELDS else 'a long'} ([{low}, {high}])")

        need(self.segment_bytes >= 14, "segment.bytes", self.segment_bytes, "must be at least 14")
        need(self.segment_bytes <= INT_MAX, "segment.bytes", self.segment_bytes, "must fit an int")
        need(self.segment_ms >= 1, "segment.ms", self.segment_ms, "must be at least 1")
        need(self.segment_jitter_ms >= 0, "segment.jitter.ms", self.segment_jitter_ms, "must be >= 0")
        need(self.segment_index_bytes >= 4, "segment.index.bytes", self.segment_index_bytes,
             "must be at least 4")
        need(self.index_interval_bytes >= 0, "index.interval.bytes", self.index_interval_bytes,
             "must be >= 0")
        need(self.flush_messages >= 1, "flush.messages", self.flush_messages, "must be at least 1")
        need(self.flush_ms >= 0, "flush.ms", self.flush_ms, "must be >= 0")
        need(self.retention_ms >= -1, "retention.ms", self.retention_ms, "must be >= -1")
        policies = {p.strip() for p in self.cleanup_policy.split(",") if p.strip()}
        need(bool(policies) and policies <= {"delete", "compact"}, "cleanup.policy",
             self.cleanup_policy, "must be a list of delete and compact")
        need(self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms", self.min_compaction_lag_ms,
             "must be >= 0")
        need(self.max_compaction_lag_ms >= 1, "max.compaction.lag.ms", self.max_compaction_lag_ms,
             "must be at least 1")
        # LogConfig.validateValues
        need(self.min_compaction_lag_ms <= self.max_compaction_lag_ms, "min.compaction.lag.ms",
             self.min_compaction_lag_ms,
             f"conflict: must not be greater than max.compaction.lag.ms {self.max_compaction_lag_ms}")
        need(self.delete_retention_ms >= 0, "delete.retention.ms", self.delete_retention_ms,
             "must be >= 0")
        need(self.file_delete_delay_ms >= 0, "file.delete.delay.ms", self.file_delete_delay_ms,
             "must be >= 0")
        need(0 <= self.min_cleanable_dirty_ratio <= 1, "min.cleanable.dirty.ratio",
             self.min_cleanable_dirty_ratio, "must be between 0 and 1")
        need(self.message_timestamp_type in ("CreateTime", "LogAppendTime"),
             "message.timestamp.type", self.message_timestamp_type,
             "must be CreateTime or LogAppendTime")
        for name in ("before", "after"):
            value = getattr(self, f"message_timestamp_{name}_max_ms")
            need(value >= 0, f"message.timestamp.{name}.max.ms", value, "must be >= 0")
        need(self.max_message_bytes >= 0, "max.message.bytes", self.max_message_bytes, "must be >= 0")
        need(self.compression_type in ("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd"),
             "compression.type", self.compression_type,
             "must be producer, uncompressed, gzip, snappy, lz4 or zstd")
        need(self.producer_id_expiration_ms >= 1, "producer.id.expiration.ms", self.producer_id_expiration_ms,
             "must be at least 1")
        need(self.fsync in FSYNC_MODES, "fsync", self.fsync, f"must be one of {', '.join(FSYNC_MODES)}")
        need(self.local_retention_ms >= -2, "local.retention.ms", self.local_retention_ms, "must be >= -2")
        need(self.local_retention_bytes >= -2, "local.retention.bytes", self.local_retention_bytes, "must be >= -2")
        if self.remote_storage_enable:
            self._validate_remote_storage(need)

    def _validate_remote_storage(self, need: Any) -> None:
        """``LogConfig.validateTopicLogConfigValues`` for a topic with ``remote.storage.enable``:
        ``validateRemoteStorageRequiresDeleteCleanupPolicy``, ``validateRemoteStorageRetentionSize``
        / ``...Time`` and ``validateRetentionConfigsWhenRemoteCopyDisabled``."""
        need(self.cleanup_policy.strip() == "delete", "cleanup.policy", self.cleanup_policy,
             "Remote log storage only supports topics with cleanup.policy=delete")
        for unit, total in (("bytes", self.retention_bytes), ("ms", self.retention_ms)):
            local = getattr(self, f"local_retention_{unit}")
            if total != -1 and local != -2:
                need(local != -1, f"local.retention.{unit}", local,
                     f"Value must not be -1 as retention.{unit} value is set as {total}.")
                need(local <= total, f"local.retention.{unit}", local,
                     f"Value must not be more than retention.{unit} property value: {total}")
            if self.remote_log_copy_disable:
                need(local in (-2, total), f"local.retention.{unit}", local,
                     f"When `remote.log.copy.disable` is set to true, the `local.retention.{unit}` and "
                     f"`retention.{unit}` must be set to the identical value because there will be no more "
                     f"logs copied to the remote storage.")

    @property
    def effective_local_retention_ms(self) -> int:
        """``LogConfig.localRetentionMs``: ``local.retention.ms``, or ``retention.ms`` for -2."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """``LogConfig.localRetentionBytes``: ``local.retention.bytes``, or ``retention.bytes`` for -2."""
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def max_index_size(self) -> int:
        return self.segment_index_bytes

    def with_changes(self, **changes: Any) -> "LogConfig":
        return replace(self, **changes)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], base: "LogConfig | None" = None) -> "LogConfig":
        """Kafka's dotted names (``segment.bytes``) to a config; unknown names are refused with
        the list of known ones, values are converted and validated."""
        base = base or cls()
        known = {f.name.replace("_", "."): f for f in fields(cls)}
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            f = known.get(key)
            if f is None:
                raise InvalidConfigError(
                    f"Unknown configuration {key!r}; known: {', '.join(sorted(known))}")
            changes[f.name] = _convert(key, raw, type(getattr(base, f.name)))
        return replace(base, **changes)

    def to_properties(self, *, only_changed: bool = False) -> dict[str, str]:
        default = LogConfig()
        out = {}
        for name, value in asdict(self).items():
            if only_changed and getattr(default, name) == value:
                continue
            out[name.replace("_", ".")] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


def validate_turning_off_remote_storage_with_delete(was_remote_log_enabled: bool, new: LogConfig) -> None:
    """``LogConfig.validateTurningOffRemoteStorageWithDelete``: a topic's ``remote.storage.enable``
    goes from true to false only with ``remote.log.delete.on.disable=true`` (its remote data is
    then deleted); Kafka's message names both ways out."""
    if was_remote_log_enabled and not new.remote_storage_enable and not new.remote_log_delete_on_disable:
        raise InvalidConfigError(
            "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote "
            "data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If "
            "you want to disable remote storage and delete all remote data, please set "
            "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")


def _convert(key: str, raw: Any, kind: type) -> Any:
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError(text)
            return text == "true"
        if kind in (int, float) and "_" in str(raw):
            raise ValueError(raw)       # Python reads 1_000 as 1000; Kafka's Long.parseLong does not
        if kind is int:
            return int(str(raw).strip())
        if kind is float:
            return float(str(raw).strip())
        return str(raw).strip()
    except ValueError:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {key}: "
                                 f"expected {kind.__name__}") from None


@dataclass(frozen=True)
class CleanerConfig:
    """The broker-wide log cleaner settings (Kafka's ``CleanerConfig``, ``log.cleaner.*``).

    ``dedupe_buffer_size`` bounds the offset maps of all cleaner threads together (24 bytes a
    key), as ``log.cleaner.dedupe.buffer.size`` does in Kafka."""

    num_threads: int = 1
    dedupe_buffer_size: int = 134217728
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 524288
    max_message_size: int = 1048588
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15000
    enable_cleaner: bool = True

    def __post_init__(self) -> None:
        if self.num_threads < 1:
            raise InvalidConfigError(f"Invalid value {self.num_threads} for configuration "
                                     f"log.cleaner.threads: must be at least 1")
        # KafkaConfig: the dedupe buffer must exceed 1 MiB per cleaner thread
        if self.dedupe_buffer_size / self.num_threads <= 1024 * 1024:
            raise InvalidConfigError(
                f"Invalid value {self.dedupe_buffer_size} for configuration "
                f"log.cleaner.dedupe.buffer.size: log.cleaner.dedupe.buffer.size must be greater "
                f"than 1MB per cleaner thread")
        if not 0 < self.dedupe_buffer_load_factor <= 1:
            raise InvalidConfigError(f"Invalid value {self.dedupe_buffer_load_factor} for "
                                     f"configuration log.cleaner.io.buffer.load.factor: must be in (0, 1]")
        if self.io_buffer_size < 1:
            raise InvalidConfigError(f"Invalid value {self.io_buffer_size} for configuration "
                                     f"log.cleaner.io.buffer.size: must be positive")
        if self.backoff_ms < 0:
            raise InvalidConfigError(f"Invalid value {self.backoff_ms} for configuration "
                                     f"log.cleaner.backoff.ms: must be >= 0")

    @property
    def map_memory_per_thread(self) -> int:
        return self.dedupe_buffer_size // self.num_threads

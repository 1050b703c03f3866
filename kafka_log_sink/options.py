"""The sink's options and its checks of the input columns, as Spark's Kafka sink names them
(``KafkaWriter.validateQuery``), plus the Kafka topic configurations a broker operator would
set (``segment.bytes``, ``compression.type`` ...), which shape the partitions it creates.

Locations (``stagingLocation``, ``checkpointLocation``, ``remotePath``) may be a local folder, a
``file:`` URI, or any URI ``pyarrow.fs`` opens (``s3://``, ``s3a://``, ``gs://``, ``hdfs://``, ...),
the store's settings under ``rsm.config.`` as the engine's ``PyArrowRemoteStorageManager`` takes
them (``storage_core.remote.store_configs``); ``path`` is the topic's local tier on the driver's
machine. Secrets are kept out of ``repr`` and of every message (the store's display name)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping
from urllib.parse import unquote, urlsplit

from pyspark.sql.types import (ArrayType, BinaryType, DataType, DoubleType, IntegerType,
                               StringType, StructType, TimestampType)

from storage_core.checkpoint import INT64_RANGE, java_int, validate_topic_name
from storage_core.common import INT_MAX
from storage_core.config import LONG_MAX, LogConfig
from storage_core.errors import InvalidConfigError, InvalidTopicError
from storage_core.remote import open_store, store_configs

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
MIN_BATCH_BYTES = 61 + 7           # a batch header and the smallest record
# Kafka topic configurations the sink passes to the partitions it creates
TOPIC_CONFIGS = ("segment.bytes", "segment.ms", "segment.index.bytes", "index.interval.bytes",
                 "max.message.bytes", "flush.messages", "flush.ms", "message.timestamp.type",
                 "cleanup.policy", "retention.ms", "retention.bytes", "preallocate",
                 "remote.storage.enable", "local.retention.ms", "local.retention.bytes",
                 "remote.log.copy.disable")


@dataclass(frozen=True)
class SinkOptions:
    path: Path
    topic: str | None                   # the option: overrides a topic column
    compression: str = "none"
    batch_size: int = 1 << 20           # bytes of one record batch, before compression
    num_partitions: int = 1             # partitions of a topic created by the sink
    fsync: str = "commit"               # "commit": every commit durable; "policy": flush.* only
    staging: Path | None = None
    checkpoint: Path | None = None
    log_config: LogConfig = field(default_factory=LogConfig)
    # a staged file at least this big becomes a segment of its own (renamed in, not copied)
    staged_segment_min_bytes: int = LogConfig().segment_bytes // 32
    # fault injection for the crash tests: the commit SIGKILLs its own process at this point
    # ("<point>" or "<point>@<batch id>"), and the process ``crash_pid`` too when given
    crash_at: str | None = None
    crash_pid: int | None = None
    # a store location (URI) instead of a local folder: staging, the checkpoint (Spark's)
    staging_uri: str | None = None
    checkpoint_uri: str | None = None
    # the tiered topic's remote storage (``remotePath``): rolled segments go there after commits
    remote_path: str | None = None
    # the store's settings (``rsm.config.*``, prefix stripped): secrets, never shown
    store: Mapping[str, str] = field(default_factory=dict, repr=False)


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = {k.lower(): v for k, v in options.items()}
    raw_path = opts.get("path", "").strip()
    if not raw_path:
        raise InvalidConfigError("Option 'path' must be specified: the data directory the "
                                 "topic-partition directories are written into")
    store = {k: str(v) for k, v in store_configs(opts).items()}
    local_path, path_uri = _location(raw_path, "path", store)
    if local_path is None:
        raise InvalidConfigError(f"Option 'path': {path_uri} is not a folder on the driver's machine: the sink "
                                 f"writes a topic's local tier there (a local folder or a file: URI) and "
                                 f"moves rolled segments to the store named by the option 'remotePath'")
    path = local_path
    if path.exists() and not path.is_dir():
        raise InvalidConfigError(f"Option 'path': {path} is not a directory")
    topic = opts.get("topic")
    if topic is not None:
        topic = topic.strip()
        check_topic(topic)
    compression = opts.get("compression", opts.get("compression.type", "none")).strip().lower()
    if compression == "uncompressed":
        compression = "none"
    if compression not in COMPRESSIONS:
        raise InvalidConfigError(f"Invalid value {compression!r} for option 'compression': "
                                 f"must be one of {', '.join(COMPRESSIONS)}")
    props = {k: opts[k].strip() for k in TOPIC_CONFIGS if k in opts}
    config = LogConfig.from_properties(props) if props else LogConfig()
    batch_size = _int(opts, "batch.size", 1 << 20)
    if batch_size <= 0:
        raise InvalidConfigError("Option 'batch.size' must be positive")
    # a batch smaller than one record holds one record (Kafka's producer does the same), and a
    # batch never exceeds max.message.bytes
    batch_size = max(batch_size, MIN_BATCH_BYTES)
    if batch_size > config.max_message_bytes:
        batch_size = max(MIN_BATCH_BYTES, config.max_message_bytes)
    num_partitions = _int(opts, "numPartitions", 1)
    if num_partitions <= 0:
        raise InvalidConfigError("Option 'numPartitions' must be positive")
    if num_partitions > INT_MAX:
        # a partition is an int32 (Kafka's TopicPartition, CreateTopicsRequest's NumPartitions):
        # refused here, not at the first commit after the tasks have staged their rows
        raise InvalidConfigError(f"Invalid value {opts['numpartitions']!r} for option 'numPartitions': "
                                 f"at most {INT_MAX}")
    fsync = opts.get("fsync", "commit").strip().lower()
    if fsync not in ("commit", "policy"):
        raise InvalidConfigError(f"Invalid value {fsync!r} for option 'fsync': must be commit "
                                 f"(every committed micro-batch durable) or policy (flush.messages / "
                                 f"flush.ms)")
    if fsync == "policy" and "flush.messages" not in props and "flush.ms" not in props:
        config = config.with_changes(flush_messages=LONG_MAX)
    checkpoint, checkpoint_uri = _location(opts.get("checkpointlocation"), "checkpointLocation", store)
    staging, staging_uri = _location(opts.get("staginglocation"), "stagingLocation", store)
    remote_path = opts.get("remotepath", "").strip() or None
    if remote_path is not None:
        remote_local, remote_uri = _location(remote_path, "remotePath", store)
        remote_path = str(remote_local) if remote_local is not None else remote_uri
        if not config.remote_storage_enable:
            raise InvalidConfigError("Option 'remotePath' tiers the topics written with remote.storage.enable=true: "
                                     "set the option 'remote.storage.enable' to true (and local.retention.ms / "
                                     "local.retention.bytes for what stays on the driver's disk)")
    elif config.remote_storage_enable:
        # Kafka refuses the topic config when the broker has no remote storage system
        raise InvalidConfigError("Option 'remote.storage.enable' is true but no option 'remotePath' names the "
                                 "store the topic's rolled segments go to")
    crash_pid = _int(opts, "kafkalog.test.crashPid", 0) or None     # never 0: kill(0) is the group
    # Big staged files are renamed into the log as segments instead of copied; small ones are
    # copied, so a stream of small micro-batches does not leave a segment per task behind.
    segment_min = _int(opts, "stagedSegmentMinBytes", max(config.segment_bytes // 32, 1))
    if segment_min <= 0:
        raise InvalidConfigError("Option 'stagedSegmentMinBytes' must be positive")
    return SinkOptions(
        path=path, topic=topic, compression=compression, batch_size=batch_size,
        num_partitions=num_partitions, fsync=fsync,
        staging=staging, checkpoint=checkpoint,
        log_config=config, staged_segment_min_bytes=segment_min,
        crash_at=opts.get("kafkalog.test.crashat"), crash_pid=crash_pid,
        staging_uri=staging_uri, checkpoint_uri=checkpoint_uri, remote_path=remote_path, store=store)


def _location(raw: str | None, option: str, store: Mapping[str, str]) -> tuple[Path | None, str | None]:
    """(local folder, None) for a plain path or a ``file:`` URI; (None, URI) for a store URI, checked
    now (``open_store`` with the ``rsm.config.*`` settings) so a bad one fails at the query's start
    naming the option; (None, None) when not given."""
    raw = (raw or "").strip()
    if not raw:
        return None, None
    parts = urlsplit(raw)
    local = None
    if not parts.scheme or len(parts.scheme) == 1:           # a path (or a Windows drive)
        local = raw
    elif parts.scheme == "file":
        local = unquote(parts.path)
    if local is not None:
        if "\0" in local:
            # no file system takes it; resolve() would raise a bare ValueError (embedded null byte)
            raise InvalidConfigError(f"Option '{option}': {raw!r} is not a usable path: it holds a NUL byte")
        return Path(local).expanduser().resolve(), None
    uri = raw.rstrip("/")
    try:
        open_store(dict(store, **{"storage.uri": uri}))
    except InvalidConfigError as e:
        raise InvalidConfigError(f"Option '{option}': {e}") from None
    return None, uri


def default_staging(opts: SinkOptions) -> Path:
    """Where executors leave encoded batches for the driver when staging is a local folder:
    beside the query's checkpoint (one query, one place), never inside the data directory (a
    broker refuses foreign directories there). With staging in a store (``staging_store_uri``)
    it is the driver's own folder for the copies its commit fetches."""
    if opts.staging is not None:
        return opts.staging
    if opts.checkpoint is not None:
        return opts.checkpoint / "kafkalog-sink" / "staging"
    return Path(tempfile.gettempdir()) / f"kafkalog-staging-{os.getuid()}"


def staging_store_uri(opts: SinkOptions) -> str | None:
    """The store URI tasks stage into, or None for local staging: ``stagingLocation`` when it is a
    store URI, else (no ``stagingLocation``) ``<checkpointLocation>/kafkalog-sink/staging`` when the
    checkpoint is one; Spark requires the checkpoint to be shared, so it is reached from every
    machine."""
    if opts.staging_uri is not None:
        return opts.staging_uri
    if opts.staging is None and opts.checkpoint_uri is not None:
        return f"{opts.checkpoint_uri}/kafkalog-sink/staging"
    return None


def check_topic(topic: str) -> None:
    """Kafka's topic name rules (legal characters, length, not ``.``/``..``): a name that could
    leave ``path`` is refused before any directory is made."""
    try:
        validate_topic_name(topic)
    except InvalidTopicError as e:
        raise InvalidTopicError(f"Invalid topic {topic!r}: {e}") from None


def _int(opts: dict[str, str], name: str, default: int) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        return java_int(raw.strip(), INT64_RANGE)     # Long.parseLong: int() would take 1_000
    except ValueError:
        raise InvalidConfigError(f"Invalid value {raw!r} for option '{name}': expected a whole "
                                 f"number") from None


# ------------------------------------------------------------------ input columns

HEADERS_KEY_VALUE = ("key", "value")


def check_columns(schema: StructType, topic_option: str | None) -> None:
    """``KafkaWriter.validateQuery``: ``value`` required (string or binary), ``key`` string or
    binary, ``topic`` string unless the option is set, ``partition`` int, ``headers``
    array<struct<key string, value binary>>, ``timestamp`` timestamp (or double); other columns
    are ignored. Raised when the query starts, before any record is written."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "topic" not in fields and topic_option is None:
        raise InvalidConfigError("topic option required when no 'topic' attribute is present. "
                                 "Use the topic option for setting a topic.")
    if "topic" in fields and topic_option is None:
        _need(fields["topic"], (StringType,), "topic", "string")
    if "value" not in fields:
        raise InvalidConfigError("Required attribute 'value' not found")
    _need(fields["value"], (StringType, BinaryType), "value", "string or binary")
    if "key" in fields:
        _need(fields["key"], (StringType, BinaryType), "key", "string or binary")
    if "partition" in fields:
        _need(fields["partition"], (IntegerType,), "partition", "int")
    if "timestamp" in fields:
        _need(fields["timestamp"], (TimestampType, DoubleType), "timestamp", "timestamp or double")
    if "headers" in fields:
        t = fields["headers"]
        ok = (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
              and [f.name for f in t.elementType.fields] == list(HEADERS_KEY_VALUE)
              and isinstance(t.elementType.fields[0].dataType, StringType)
              and isinstance(t.elementType.fields[1].dataType, BinaryType))
        if not ok:
            raise InvalidConfigError(f"headers attribute unsupported type {t.simpleString()}. "
                                     f"headers must be a(n) array<struct<key:string,value:binary>>")


def _need(t: DataType, kinds: tuple, name: str, allowed: str) -> None:
    if not isinstance(t, kinds):
        raise InvalidConfigError(f"{name} attribute unsupported type {t.simpleString()}. "
                                 f"{name} must be a(n) {allowed}")

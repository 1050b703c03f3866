"""The source's options: the names, meanings, JSON formats and checks of Spark's Kafka source
(``KafkaSourceProvider``), with ``path`` (a data directory of ``topic-partition`` folders) where
Kafka has ``kafka.bootstrap.servers``.

Spark hands a Python source its options as a case-insensitive dict of strings; everything is
parsed and checked here, once, so that a bad option fails at ``load()`` with a message naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Union
from urllib.parse import urlsplit

from storage_core.checkpoint import INT64_RANGE, java_int
from storage_core.common import LONG_MAX, LONG_MIN
from storage_core.errors import InvalidConfigError
from storage_core.log import LATEST_TIERED_TIMESTAMP
from storage_core.remote import open_store, store_configs

from .offsets import (EARLIEST, LATEST, SpecificOffsets, TopicPartition, parse_partition_offsets,
                      parse_partition_timestamps, parse_partitions)

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
MAX_REMOTE_READ_BYTES = 1 << 30       # remoteReadBytes: bounds a task's receive buffers
STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")


# ------------------------------------------------------------------ subscription strategies

@dataclass(frozen=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        # Spark's admin-based offset reader matches with find(), a substring match is enough
        return re.search(self.pattern, topic) is not None


Strategy = Union[Assign, Subscribe, SubscribePattern]


# ------------------------------------------------------------------ offset range limits

@dataclass(frozen=True)
class Earliest:
    pass


@dataclass(frozen=True)
class Latest:
    pass


@dataclass(frozen=True)
class ByOffsets:
    offsets: SpecificOffsets


@dataclass(frozen=True)
class ByTimestamps:
    """Per-partition timestamps (``startingOffsetsByTimestamp``)."""
    timestamps: dict[TopicPartition, int]


@dataclass(frozen=True)
class ByGlobalTimestamp:
    """One timestamp for every assigned partition (``startingTimestamp``)."""
    timestamp: int


OffsetLimit = Union[Earliest, Latest, ByOffsets, ByTimestamps, ByGlobalTimestamp]


@dataclass(frozen=True)
class SourceOptions:
    path: Path
    strategy: Strategy
    starting: OffsetLimit
    ending: OffsetLimit
    starting_by_timestamp_strategy: str = "error"        # or "latest"
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    isolation_level: str = "read_uncommitted"
    max_bytes_per_fetch: int = 4 << 20
    # one ranged read of a remote segment (a task holds two: the one decoded, the next arriving)
    remote_read_bytes: int = 32 << 20
    warnings: tuple[str, ...] = field(default=(), compare=False)
    # the object store (issue 20): its settings when `path` is a store URI (remote_only) or
    # `remotePath` gives the store of a topic's tiered segments; None for a local topic
    store: StoreSettings | None = None
    remote_only: bool = False


@dataclass(frozen=True)
class StoreSettings:
    """The storage manager's settings (``storage.uri``, ``s3.*`` from ``rsm.config.*``),
    credentials included: carried to the tasks, never shown (``repr`` hides them, and Spark
    prints input partitions in some errors). ``name``: the store for messages (no credentials)."""

    items: tuple[tuple[str, str], ...] = field(repr=False)
    name: str = ""

    def configs(self) -> dict[str, str]:
        return dict(self.items)

    def __repr__(self) -> str:
        return f"StoreSettings({self.name}, settings hidden)"


# ------------------------------------------------------------------ parsing

def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Parse and check the options of a streaming (``readStream``) or batch (``read``) query,
    in Spark's order: streaming- and batch-only options first, then the subscription, then the
    location, then the numbers."""
    opts = {k.lower(): v for k, v in options.items()}
    warnings: list[str] = []
    if streaming:
        if "endingoffsets" in opts:
            raise InvalidConfigError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts:
            raise InvalidConfigError("ending timestamp not valid in streaming queries")
    strategy = _strategy(opts)
    path = _path(opts)
    store = _store(opts)
    min_partitions = _positive(opts, "minPartitions")
    max_records = _positive(opts, "maxRecordsPerPartition")
    max_per_trigger = min_per_trigger = None
    delay = DEFAULT_MAX_TRIGGER_DELAY_MS
    if streaming:
        max_per_trigger = _long(opts, "maxOffsetsPerTrigger")
        min_per_trigger = _long(opts, "minOffsetsPerTrigger")
        delay = _time_ms(opts.get("maxtriggerdelay"), "maxTriggerDelay")
        if max_per_trigger is not None and max_per_trigger <= 0:
            raise InvalidConfigError(f"maxOffsetsPerTrigger must be positive, got {max_per_trigger}")
        if min_per_trigger is not None and min_per_trigger <= 0:
            raise InvalidConfigError(f"minOffsetsPerTrigger must be positive, got {min_per_trigger}")
        _check_trigger_limits(min_per_trigger, max_per_trigger)
    else:
        # validateBatchOptions: logged and otherwise ignored, whatever the value, except that
        # its validateGeneralOptions compares the two limits when both are given
        if "minoffsetspertrigger" in opts and "maxoffsetspertrigger" in opts:
            _check_trigger_limits(_long(opts, "minOffsetsPerTrigger"), _long(opts, "maxOffsetsPerTrigger"))
        for key in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if key.lower() in opts:
                warnings.append(f"{key} option ignored in batch queries")
    starting = _limit(opts, "starting", default=Latest() if streaming else Earliest())
    # a stream never reads endingTimestamp (Spark's validateStreamOptions refuses only
    # endingOffsets and endingOffsetsByTimestamp, and its stream takes no ending limit)
    ending = Latest() if streaming else _limit(opts, "ending", default=Latest())
    if not streaming:
        _check_batch_limits(starting, ending)
    by_ts = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if by_ts not in ("error", "latest"):
        raise InvalidConfigError(
            f"Invalid value {opts['startingoffsetsbytimestampstrategy']!r} for option "
            f"'startingOffsetsByTimestampStrategy': must be 'error' or 'latest'")
    isolation = opts.get("isolationlevel", opts.get("kafka.isolation.level", "read_uncommitted"))
    if isolation.strip().lower() not in ISOLATION_LEVELS:
        raise InvalidConfigError(f"Invalid value {isolation!r} for option 'isolationLevel': "
                                 f"must be read_uncommitted or read_committed")
    max_bytes = _positive(opts, "maxBytesPerFetch") or SourceOptions.max_bytes_per_fetch
    read_bytes = _positive(opts, "remoteReadBytes") or SourceOptions.remote_read_bytes
    if read_bytes > MAX_REMOTE_READ_BYTES:
        raise InvalidConfigError(f"remoteReadBytes must be at most {MAX_REMOTE_READ_BYTES} (1 GiB): a task holds "
                                 f"two buffers of that size, got {read_bytes}")
    return SourceOptions(
        path=path, strategy=strategy, starting=starting, ending=ending,
        starting_by_timestamp_strategy=by_ts,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        max_offsets_per_trigger=max_per_trigger, min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay, min_partitions=min_partitions,
        max_records_per_partition=max_records,
        include_headers=_bool(opts, "includeHeaders", False),
        isolation_level=isolation.strip().lower(), max_bytes_per_fetch=max_bytes, remote_read_bytes=read_bytes,
        warnings=tuple(warnings), store=store, remote_only=store is not None and _is_store_uri(opts["path"]))


def check_at_load(options: Mapping[str, str]) -> None:
    """What ``load()`` can check before it knows whether the query is a stream or a batch
    (Spark's provider checks at load): the subscription and the location. Skipped when an
    ending option is present, because for a stream "ending offset not valid in streaming
    queries" must come first, and only the reader knows which kind of query it is."""
    opts = {k.lower(): v for k, v in options.items()}
    if "endingoffsets" in opts or "endingoffsetsbytimestamp" in opts:
        return
    _strategy(opts)
    _path(opts)
    _store(opts)


def _strategy(opts: dict[str, str]) -> Strategy:
    given = [k for k in STRATEGY_KEYS if k in opts]
    if not given:
        raise InvalidConfigError(
            "One of the following options must be specified for Kafka source: subscribe, "
            "subscribePattern, assign. See the docs for more details.")
    if len(given) > 1:
        raise InvalidConfigError(
            "Only one of the following options can be specified for Kafka source: subscribe, "
            "subscribePattern, assign. See the docs for more details.")
    key = given[0]
    value = opts[key]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise InvalidConfigError(f"No topicpartitions to assign as specified value for option "
                                     f"'assign' is '{value}'")
        return Assign(tuple(parse_partitions(value)))
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise InvalidConfigError(f"No topics to subscribe to as specified value for option "
                                     f"'subscribe' is '{value}'")
        return Subscribe(topics)
    if not value.strip():
        raise InvalidConfigError(f"Pattern to subscribe is empty as specified value for option "
                                 f"'subscribePattern' is '{value}'")
    try:
        re.compile(value.strip())
    except re.error as e:
        raise InvalidConfigError(f"Invalid value {value!r} for option 'subscribePattern': {e}") from None
    return SubscribePattern(value.strip())


def _is_store_uri(raw: str) -> bool:
    """A URI ``pyarrow.fs`` opens (``s3://``, ``gs://``...) rather than a local directory
    (a plain path or ``file://``; a one-letter scheme is a Windows drive)."""
    scheme = urlsplit(raw.strip()).scheme
    return len(scheme) > 1 and scheme.lower() != "file"


def _store(opts: dict[str, str]) -> StoreSettings | None:
    """The store's settings: ``path`` when it is a store URI (a remote-only topic), else
    ``remotePath`` (the tiered segments of a topic whose local tier is ``path``), with the
    ``rsm.config.*`` options (the storage manager's keys). Checked here, so a bad setting fails
    at load naming its option; messages never show a credential."""
    path, remote = opts.get("path", "").strip(), opts.get("remotepath")
    settings = [k for k in opts if k.startswith("rsm.config.")]
    if _is_store_uri(path):
        if remote is not None:
            raise InvalidConfigError("Option 'remotePath' is for a topic with a local tier: 'path' already "
                                     "names a store, so the topic is read from the store alone")
        uri, option = path, "path"
    elif remote is not None:
        uri, option = remote.strip(), "remotePath"
        if not uri:
            raise InvalidConfigError("Option 'remotePath' is empty: expected the store root of the topic's "
                                     "tiered segments (s3://bucket/prefix, a folder, any URI pyarrow.fs opens)")
    else:
        if settings:
            raise InvalidConfigError(f"Option(s) {', '.join(sorted(settings))} given, but neither 'path' nor "
                                     f"'remotePath' names an object store")
        return None
    configs = store_configs(opts, uri)
    for key in ("storage.uri", "dir"):
        if f"rsm.config.{key}" in opts:
            raise InvalidConfigError(f"Option 'rsm.config.{key}' is not taken: the store is the option "
                                     f"{option!r}")
    configs["storage.uri"] = uri
    try:
        _, _, name = open_store(configs)
    except InvalidConfigError as e:
        raise InvalidConfigError(f"Option {option!r} or the rsm.config.* options: {e}") from None
    return StoreSettings(tuple(sorted((str(k), str(v)) for k, v in configs.items())), name)


def _path(opts: dict[str, str]) -> Path:
    raw = opts.get("path", "").strip()
    if not raw:
        raise InvalidConfigError(
            "Option 'path' must be specified: the data directory holding the topic-partition "
            "directories (kafkalog's counterpart of kafka.bootstrap.servers), or an object store "
            "URI (s3://bucket/prefix) holding a tiered topic")
    if _is_store_uri(raw):
        return Path(_redacted_label(raw))          # a label only: the store is opened through `store`
    if raw.lower().startswith("file://"):
        raw = urlsplit(raw).path
    path = Path(raw).expanduser()
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise InvalidConfigError(f"Option 'path': {path} {what}")
    return path.resolve()


def _redacted_label(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.hostname or ''}{parts.path}"


def _limit(opts: dict[str, str], which: str, default: OffsetLimit) -> OffsetLimit:
    """``startingTimestamp`` beats ``startingOffsetsByTimestamp``, which beats
    ``startingOffsets`` (``KafkaSourceProvider.getKafkaOffsetRangeLimit``); likewise ending."""
    ts = opts.get(f"{which}timestamp")
    if ts is not None:
        value = _parse_long(ts)
        if value is None:
            raise InvalidConfigError(f"Expected a single long value, got {ts}")
        if value < LATEST_TIERED_TIMESTAMP:
            raise InvalidConfigError(_bad_timestamp(f"{which}Timestamp", value, ts.strip()))
        return ByGlobalTimestamp(value)
    by_ts = opts.get(f"{which}offsetsbytimestamp")
    if by_ts is not None:
        stamps = parse_partition_timestamps(by_ts)
        below = sorted((tp, t) for tp, t in stamps.items() if t < LATEST_TIERED_TIMESTAMP)
        if below:
            (t, p), value = below[0]
            raise InvalidConfigError(_bad_timestamp(f"{which}OffsetsByTimestamp", value, by_ts, f"{t}-{p}"))
        return ByTimestamps(stamps)
    raw = opts.get(f"{which}offsets")
    if raw is None:
        return default
    word = raw.strip().lower()
    if word == "earliest":
        return Earliest()
    if word == "latest":
        return Latest()
    offsets = parse_partition_offsets(raw)
    below = sorted((tp, o) for tp, o in offsets.partitions.items() if o < EARLIEST)
    if below:
        # -2 and -1 are Spark's earliest / latest; any other negative is no offset (a consumer's
        # seek refuses it: KafkaConsumer.seek, "seek offset must not be a negative number"). Taken
        # as an offset, -3 planned a range [-3, ...) that failOnDataLoss=false quietly read from
        # the log start, and an ending -7 planned no range at all.
        (t, p), off = below[0]
        raise InvalidConfigError(
            f"Invalid value for option '{which}Offsets': offset {off} for {t}-{p} is neither -2 "
            f"(earliest), -1 (latest) nor an offset (0 or more), got {raw}")
    return ByOffsets(offsets)


def _bad_timestamp(option: str, value: int, raw: str, tp: str | None = None) -> str:
    """A timestamp below -5. Spark hands every timestamp to ``OffsetSpec.forTimestamp`` and the
    broker takes the negative ones as ListOffsets' special timestamps, -1 to -5; for any other
    it answers UNSUPPORTED_VERSION (``ReplicaManager.isListOffsetsTimestampUnsupported``, Kafka
    3.9+; -6 needs ListOffsets v11, which the kafka-clients Spark ships do not send), so Spark's
    query fails with ``UnsupportedVersionException``."""
    where = f" for {tp}" if tp is not None else ""
    return (f"Invalid value for option '{option}': timestamp {value}{where} is neither a time "
            f"(epoch ms, 0 or more) nor one of Kafka's special timestamps -1 (latest), -2 (earliest), "
            f"-3 (the record with the largest timestamp), -4 (earliest local), -5 (latest tiered); "
            f"a broker refuses it (UNSUPPORTED_VERSION), got {raw}")


def _check_batch_limits(starting: OffsetLimit, ending: OffsetLimit) -> None:
    """``validateBatchOptions`` and ``checkOffsetLimitValidity``."""
    if isinstance(starting, Latest):
        raise InvalidConfigError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(starting, ByOffsets):
        for (t, p), off in starting.offsets.partitions.items():
            if off == LATEST:
                raise InvalidConfigError(
                    f"startingOffsets for {t}-{p} can't be latest for batch queries on Kafka")
        for t, off in starting.offsets.topics.items():
            if off == LATEST:
                raise InvalidConfigError(
                    f"startingOffsets for {t} can't be latest for batch queries on Kafka")
    if isinstance(ending, Earliest):
        raise InvalidConfigError("ending offset can't be earliest for batch queries on Kafka")
    if isinstance(ending, ByOffsets):
        for (t, p), off in ending.offsets.partitions.items():
            if off == EARLIEST:
                raise InvalidConfigError(
                    f"ending offset for {t}-{p} can't be earliest for batch queries on Kafka")
        for t, off in ending.offsets.topics.items():
            if off == EARLIEST:
                raise InvalidConfigError(
                    f"ending offset for {t} can't be earliest for batch queries on Kafka")
    pairs = None
    if isinstance(starting, ByOffsets) and isinstance(ending, ByOffsets):
        pairs = (starting.offsets.partitions, ending.offsets.partitions)
    elif isinstance(starting, ByTimestamps) and isinstance(ending, ByTimestamps):
        pairs = (starting.timestamps, ending.timestamps)
    if pairs is None:
        return
    start, end = pairs
    if set(start) != set(end):
        raise InvalidConfigError(
            "The specified start offset and end offset should have the same topic-partitions. "
            f"Topic-partitions for start offset: {_tps(start)}, topic-partitions for end "
            f"offset: {_tps(end)}")
    for (t, p), s in start.items():
        e = end[(t, p)]
        if s >= 0 and e >= 0 and s > e:
            raise InvalidConfigError(
                f"The specified start {'offset' if isinstance(starting, ByOffsets) else 'timestamp'} "
                f"{s} is greater than the end {'offset' if isinstance(ending, ByOffsets) else 'timestamp'} "
                f"{e} for topic {t} partition {p}.")


def _tps(m: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(m)) + "]"


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(f"Invalid value {raw!r} for option '{name}': must be true or false")
    return text == "true"


def _parse_long(raw: str) -> int | None:
    """``raw.trim.toLong`` as Spark reads a long option (``java.lang.Long.parseLong``, the
    project's ``java_int``): an optional sign and digits, within a long; None otherwise. Python's
    ``int`` alone would also take ``1_000`` and numbers beyond a long
    (``endingTimestamp=9223372036854775808`` read as "no end")."""
    try:
        return java_int(raw.strip(), INT64_RANGE)
    except ValueError:
        return None


def _long(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    value = _parse_long(raw)
    if value is None:
        raise InvalidConfigError(f"Invalid value {raw!r} for option '{name}': expected a whole "
                                 f"number within a long (For input string: \"{raw}\")")
    return value


def _check_trigger_limits(min_per_trigger: int | None, max_per_trigger: int | None) -> None:
    """``validateGeneralOptions``, streams and batches alike."""
    if min_per_trigger is not None and max_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise InvalidConfigError(
            f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
            f"maxOffsetsPerTrigger({max_per_trigger}).")


def _positive(opts: dict[str, str], name: str) -> int | None:
    value = _long(opts, name)
    if value is not None and value <= 0:
        raise InvalidConfigError(f"{name} must be positive")
    return value


# JavaUtils.timeSuffixes, each in microseconds
_TIME_UNITS_US = {"us": 1, "ms": 1000, "s": 10**6, "m": 60 * 10**6, "min": 60 * 10**6,
                  "h": 3600 * 10**6, "d": 86_400 * 10**6}
_TIME_STRING = re.compile(r"(-?[0-9]+)([a-z]+)?")
_TIME_HELP = ("Time must be specified as seconds (s), milliseconds (ms), microseconds (us), minutes "
              "(m or min), hour (h), or day (d). E.g. 50s, 100ms, or 250us.")


def _time_ms(raw: str | None, name: str) -> int:
    """Spark's ``Utils.timeStringAsMs`` (``JavaUtils.timeStringAs``): ``15m``, ``30s``,
    ``100ms``, ``250us``; a bare number is ms; lower-cased and trimmed, no space before the
    unit, no fraction. The number must be a long (``Long.parseLong``), and the conversion
    saturates as ``TimeUnit.convert`` does (``1000000000000d`` is ``Long.MAX_VALUE`` ms;
    ``us`` truncates toward zero). Anything else fails naming the option, with Spark's words."""
    if raw is None:
        return DEFAULT_MAX_TRIGGER_DELAY_MS
    text = raw.lower().strip()
    m = _TIME_STRING.fullmatch(text)
    if not m:
        detail = f"Failed to parse time string: {raw}"
    else:
        number, suffix = _parse_long(m.group(1)), m.group(2)
        if number is None:
            detail = f'For input string: "{m.group(1)}"'
        elif suffix is not None and suffix not in _TIME_UNITS_US:
            detail = f'Invalid suffix: "{suffix}"'
        else:
            us = number * _TIME_UNITS_US[suffix or "ms"]
            ms = abs(us) // 1000 * (1 if us >= 0 else -1)        # truncated toward zero ...
            return max(LONG_MIN, min(LONG_MAX, ms))              # ... and saturated
    raise InvalidConfigError(f"Invalid value {raw!r} for option '{name}': {_TIME_HELP} {detail}")

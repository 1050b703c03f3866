"""Offsets as Spark's Kafka connector sees them: the JSON option formats, the source offset that
Spark checkpoints, the planning of offset ranges into input partitions and the per-trigger rate
limits.

Pure functions, no Spark and no storage engine. Each one mirrors a piece of apache/spark
``connector/kafka-0-10-sql`` (``JsonUtils``, ``KafkaOffsetRangeLimit``, ``KafkaSourceOffset``,
``KafkaOffsetRangeCalculator``, ``KafkaOffsetReaderAdmin.getOffsetRangesFromUnresolvedOffsets``
and ``KafkaMicroBatchStream.rateLimit`` / ``delayBatch``); the docstrings name which.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from storage_core.common import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN
from storage_core.errors import InvalidConfigError

TopicPartition = tuple[str, int]

# KafkaOffsetRangeLimit.EARLIEST / LATEST: the sentinels Spark accepts in offset JSON.
EARLIEST = -2
LATEST = -1

# JSON object keys become partitions the way Scala's ``"..".toInt`` (Integer.parseInt) reads them.
_PARTITION_KEY = re.compile(r"[+-]?[0-9]+")

_ASSIGN_EXAMPLE = 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got '
_OFFSETS_EXAMPLE = 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got '
_TIMESTAMPS_EXAMPLE = ('Expected e.g. {"topicA": {"0": 123456789, "1": 123456789}, '
                       '"topicB": {"0": 123456789, "1": 123456789}}, got ')


# ------------------------------------------------------------------ JSON parsing helpers

class _Malformed(Exception):
    """Internal: the JSON does not have the expected shape (turned into the caller's message)."""


class _JsonObject(list):
    """A JSON object kept as its ``(key, value)`` pairs, duplicates included, so that a repeated
    topic can be detected (Python's ``json`` would silently keep the last one)."""


def _load(text: str) -> Any:
    """Parse ``text`` as Jackson does: surrounding whitespace is fine, NaN/Infinity are not."""
    def no_constants(name: str) -> Any:
        raise _Malformed(name)
    try:
        return json.loads(text, object_pairs_hook=_JsonObject, parse_constant=no_constants)
    except (ValueError, TypeError, RecursionError) as e:
        raise _Malformed(str(e)) from None


def _long(value: Any) -> int:
    # bool is an int in Python; Jackson would not read true as a Long
    if isinstance(value, bool) or not isinstance(value, int) or not LONG_MIN <= value <= LONG_MAX:
        raise _Malformed(value)
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not INT_MIN <= value <= INT_MAX:
        raise _Malformed(value)
    return value


def _partition_key(key: Any) -> int:
    if isinstance(key, str) and _PARTITION_KEY.fullmatch(key):
        return _int(int(key))
    raise _Malformed(key)


def _partition_values(topic: str, obj: Any) -> dict[TopicPartition, int]:
    """``{"0": 23, "1": -1}`` read as json4s' ``Map[Int, Long]`` (a repeated partition keeps
    the last value, as a Scala Map built from the pairs does)."""
    if not isinstance(obj, _JsonObject):
        raise _Malformed(obj)
    return {(topic, _partition_key(k)): _long(v) for k, v in obj}


def _topic_map(text: str, skip: str | None = None) -> dict[TopicPartition, int]:
    """``JsonUtils.partitionOffsets`` / ``partitionTimestamps``: ``Map[String, Map[Int, Long]]``
    (``skip``: a key that is not a topic)."""
    root = _load(text)
    if not isinstance(root, _JsonObject):
        raise _Malformed(root)
    out: dict[TopicPartition, int] = {}
    for topic, parts in root:
        if topic != skip:
            out.update(_partition_values(topic, parts))
    return out


# ------------------------------------------------------------------ option formats

def parse_partitions(text: str) -> list[TopicPartition]:
    """The ``assign`` option (``JsonUtils.partitions``): ``{"topicA":[0,1],"topicB":[4,6]}`` ->
    ``[("topicA", 0), ("topicA", 1), ("topicB", 4), ("topicB", 6)]``, in document order."""
    try:
        root = _load(text)
        if not isinstance(root, _JsonObject):
            raise _Malformed(root)
        out: list[TopicPartition] = []
        for topic, parts in dict(root).items():      # a repeated topic: the last list wins
            if isinstance(parts, _JsonObject) or not isinstance(parts, list):
                raise _Malformed(parts)
            out.extend((topic, _int(p)) for p in parts)
        return out
    except _Malformed:
        raise InvalidConfigError(_ASSIGN_EXAMPLE + text) from None


@dataclass(frozen=True)
class SpecificOffsets:
    """``SpecificOffsetRangeLimit``: per-partition offsets plus (newer Spark) topic-level
    ``"earliest"``/``"latest"`` bindings, which expand to the partitions found when resolving."""

    partitions: dict[TopicPartition, int]   # -2 earliest / -1 latest allowed
    topics: dict[str, int]                  # EARLIEST or LATEST

    def resolve(self, assigned: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """``SpecificOffsetRangeLimit.resolve``: the offset of every partition. Without
        topic-level values the partition offsets are returned as they are (``assigned`` is not
        even looked at); otherwise every assigned partition of such a topic gets the topic's
        value, and a topic-level value whose topic has no assigned partition fails with
        ``KAFKA_TOPIC_OFFSET_DOES_NOT_MATCH_ASSIGNED``."""
        if not self.topics:
            return dict(self.partitions)
        assigned = list(assigned)
        expanded = {tp: self.topics[tp[0]] for tp in assigned if tp[0] in self.topics}
        unmatched = sorted(set(self.topics) - {t for t, _ in expanded})
        if unmatched:
            assigned_topics = sorted({t for t, _ in assigned})
            raise InvalidConfigError(
                "[KAFKA_TOPIC_OFFSET_DOES_NOT_MATCH_ASSIGNED] Topics given a topic-level offset "
                "have no assigned partitions: "
                f"Set({', '.join(unmatched)}). Assigned topics: Set({', '.join(assigned_topics)})")
        expanded.update(self.partitions)
        return expanded


def parse_partition_offsets(text: str) -> SpecificOffsets:
    """``startingOffsets`` / ``endingOffsets`` JSON (``JsonUtils.specificOffsets``):
    ``{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}``, topic-level ``{"topicA":"earliest",
    "topicB":"LATEST"}`` (case-insensitive) and both forms mixed across topics."""
    try:
        root = _load(text)
        if not isinstance(root, _JsonObject):
            raise _Malformed(root)
        partitions: dict[TopicPartition, int] = {}
        topics: dict[str, int] = {}
        seen: dict[str, int] = {}
        for topic, value in root:
            seen[topic] = seen.get(topic, 0) + 1
            if isinstance(value, str):
                word = value.lower()
                if word not in ("earliest", "latest"):
                    raise _Malformed(value)
                topics[topic] = EARLIEST if word == "earliest" else LATEST
            else:
                partitions.update(_partition_values(topic, value))
    except _Malformed:
        raise InvalidConfigError(_OFFSETS_EXAMPLE + text) from None
    both = sorted(set(topics) & {t for t, _ in partitions})
    if both:
        # Spark's text, line breaks included (its stripMargin'ed message)
        raise InvalidConfigError(
            f"Topic(s) {', '.join(both)} are given both a topic-level offset\n"
            f"and per-partition offsets, only one of the two forms is allowed per topic,\n"
            f"got {text}")
    repeated = sorted(t for t, n in seen.items() if n > 1)
    if repeated:
        # Spark would merge or overwrite these silently; a repeated key is almost surely a typo.
        raise InvalidConfigError(
            f"Topic(s) {', '.join(repeated)} are given more than once, got {text}")
    return SpecificOffsets(partitions=partitions, topics=topics)


def parse_partition_timestamps(text: str) -> dict[TopicPartition, int]:
    """``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (``JsonUtils.
    partitionTimestamps``): ``{"topicA": {"0": 1000}}`` with epoch-millisecond values."""
    try:
        root = _load(text)
        timestamps = _topic_map(text)
    except _Malformed:
        raise InvalidConfigError(_TIMESTAMPS_EXAMPLE + text) from None
    topics = [topic for topic, _ in root]
    repeated = sorted({t for t in topics if topics.count(t) > 1})
    if repeated:
        # as parse_partition_offsets: Spark would merge or overwrite these silently
        raise InvalidConfigError(f"Topic(s) {', '.join(repeated)} are given more than once, got {text}")
    return timestamps


# ------------------------------------------------------------------ the source offset

# The topic ids (KIP-516) each partition had when its offset was taken ride along in the source
# offset under this key, so a topic deleted and recreated is recognised across restarts too (a
# Python source checkpoints nothing but its offset JSON). "$" is not allowed in a topic name
# (``Topic.validate``), so the key never shadows a topic; without ids it is left out and the
# JSON is exactly Spark's ``KafkaSourceOffset``.
TOPIC_IDS_KEY = "$topicIds"


def offsets_to_json(offsets: Mapping[TopicPartition, int],
                    topic_ids: Mapping[TopicPartition, str] | None = None) -> dict[str, Any]:
    """``KafkaSourceOffset.json`` as a JSON-ready dict: ``{"topic": {"0": next_offset}}``.
    Topics sorted by name, partitions in numeric order (``JsonUtils.partitionOffsets`` sorts
    "for more determinism"): Spark compares offsets by their JSON text. ``topic_ids`` (the
    string form, per partition of ``offsets``) add ``{"$topicIds": {"topic": "<id>"}}``, or
    ``{"topic": {"0": "<id>", ...}}`` for a topic whose partitions do not all share one id."""
    out: dict[str, Any] = {}
    for (topic, partition) in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    ids: dict[str, Any] = {}
    given = topic_ids or {}
    for topic, parts in (out.items() if given else ()):
        known = {p: given[(topic, int(p))] for p in parts if (topic, int(p)) in given}
        if not known:
            continue
        distinct = set(known.values())
        ids[topic] = (distinct.pop() if len(distinct) == 1 and len(known) == len(parts)
                      else known)
    if ids:
        out[TOPIC_IDS_KEY] = ids
    return out


def topic_ids_from_json(obj: Mapping[str, Any] | str) -> dict[TopicPartition, str]:
    """The per-partition topic ids of a source offset (``{}`` for one written without them)."""
    if isinstance(obj, str):
        text = obj
        try:
            obj = json.loads(text)
        except ValueError:
            raise InvalidConfigError(_OFFSETS_EXAMPLE + text) from None
    if not isinstance(obj, Mapping):
        return {}
    ids = obj.get(TOPIC_IDS_KEY)
    if ids is None:
        return {}
    out: dict[TopicPartition, str] = {}
    try:
        for topic, value in ids.items():
            if isinstance(value, str):
                for p in obj.get(topic, {}):
                    out[(topic, _partition_key(p))] = value
            elif isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
                out.update({(topic, _partition_key(p)): v for p, v in value.items()})
            else:
                raise _Malformed(value)
    except (_Malformed, AttributeError):
        raise InvalidConfigError(f"Malformed {TOPIC_IDS_KEY} in source offset {_dump(obj)}: expected "
                                 f'e.g. {{"topicA": "<topic id>"}}') from None
    return out


def offsets_from_json(obj: Mapping[str, Any] | str) -> dict[TopicPartition, int]:
    """A checkpointed source offset back to ``{(topic, partition): offset}``
    (``KafkaSourceOffset(SerializedOffset)``). Takes the dict or its JSON text, including the
    plain JSON text Spark 2.1.0 wrote (a trailing newline is fine)."""
    if isinstance(obj, str):
        text = obj
        try:
            return _topic_map(text, skip=TOPIC_IDS_KEY)
        except _Malformed:
            raise InvalidConfigError(_OFFSETS_EXAMPLE + text) from None
    try:
        out: dict[TopicPartition, int] = {}
        for topic, parts in obj.items():
            if topic == TOPIC_IDS_KEY:
                continue
            if not isinstance(topic, str) or not isinstance(parts, Mapping):
                raise _Malformed(parts)
            for key, value in parts.items():
                partition = _int(key) if isinstance(key, int) else _partition_key(key)
                out[(topic, partition)] = _long(value)
        return out
    except (_Malformed, AttributeError):
        raise InvalidConfigError(_OFFSETS_EXAMPLE + _dump(obj)) from None


def _dump(obj: Any) -> str:
    try:
        return json.dumps(obj)
    except (TypeError, ValueError):
        return repr(obj)


# ------------------------------------------------------------------ splitting into input partitions

@dataclass(frozen=True)
class OffsetRange:
    """``KafkaOffsetRange``: ``[start, end)`` of one topic-partition (``start`` may be EARLIEST
    and ``end`` LATEST while unresolved)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        """``end - start``: an estimate of the records (compaction, control records and
        aborted data make it larger than what is read); meaningless with sentinels."""
        return self.end - self.start


def _is_sentinel(offset: int) -> bool:
    return offset in (EARLIEST, LATEST)


def split_ranges(ranges: list[OffsetRange], *, min_partitions: int | None = None,
                 max_records_per_partition: int | None = None,
                 bounds: Mapping[TopicPartition, tuple[int, int]] | None = None
                 ) -> list[OffsetRange]:
    """The input partitions of a batch.

    Resolved ranges (no EARLIEST/LATEST anywhere) go through ``KafkaOffsetRangeCalculator.
    getRanges`` exactly, as Spark's micro-batch planning does: empty and negative ranges are
    dropped (SPARK-30656); without options one piece per range; with ``max_records_per_partition``
    each range is cut into ``ceil(size / max)`` near-equal pieces (SPARK-49259), and if
    ``min_partitions`` is then still above the piece count the pieces are divided again
    proportionally to their size, pieces that would get one part being set aside first
    (SPARK-36576); integer division, the last piece of a range taking the remainder, so no offset
    is ever dropped (SPARK-28489). Output order: Spark's, i.e. the input order with each range's
    pieces in offset order.

    If any range holds a sentinel, this is ``KafkaOffsetReaderAdmin.
    getOffsetRangesFromUnresolvedOffsets`` instead (Spark's batch planning, with late binding):
    when no splitting is called for (``min_partitions`` not above the number of ranges and no
    range ``size`` above ``max_records_per_partition``, sizes taken on the offsets ``bounds``
    gives, where Spark takes the raw sentinels) the ranges come back unchanged, empty ones
    included. Otherwise the sentinels are
    resolved with ``bounds`` (``{tp: (earliest, latest)}``), the resolved ranges split as above,
    and per partition a single piece is given back as the original unresolved range, while the
    first of several pieces keeps the original start and the last the original end (e.g. [-2, 1),
    [1, 2), [2, -1)). Output order: input order, pieces of a partition together (Spark's comes
    from a hash map and is unspecified)."""
    if min_partitions is not None and min_partitions <= 0:
        raise InvalidConfigError("minPartitions must be positive")
    if max_records_per_partition is not None and max_records_per_partition <= 0:
        raise InvalidConfigError("maxRecordsPerPartition must be positive")
    if any(_is_sentinel(r.start) or _is_sentinel(r.end) for r in ranges):
        return _split_unresolved(list(ranges), min_partitions, max_records_per_partition, bounds)
    return _get_ranges(list(ranges), min_partitions, max_records_per_partition)


def _get_ranges(ranges: list[OffsetRange], min_partitions: int | None,
                max_records: int | None) -> list[OffsetRange]:
    """``KafkaOffsetRangeCalculator.getRanges``."""
    offset_ranges = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(offset_ranges) >= min_partitions) and max_records is None:
        return offset_ranges
    if max_records is not None:
        # SPARK-49259: cut by maxRecordsPerPartition first ...
        divided = [piece for r in offset_ranges
                   for piece in _divide(r, -(-r.size // max_records))]
        divided = [p for p in divided if p.size > 0]
    else:
        divided = offset_ranges
    if min_partitions is None or min_partitions <= len(divided):
        return divided
    # ... then, if still fewer pieces than minPartitions, split proportionally to size.
    total = sum(r.size for r in divided)
    # SPARK-36576: ranges that would get a single part are left whole and kept out of the
    # proportional math for the others. Spark keys them by topic-partition, so after a
    # maxRecordsPerPartition cut every piece of such a partition stays whole; kept as is.
    unsplit = [r for r in divided if _part_count(r.size, total, min_partitions) == 1]
    unsplit_tps = {r.topic_partition for r in unsplit}
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in divided:
        parts = 1 if r.topic_partition in unsplit_tps else _part_count(r.size, split_total,
                                                                       split_min)
        out.extend(_divide(r, parts))
    return [r for r in out if r.size > 0]


def _part_count(size: int, total: int, min_parts: int) -> int:
    """``getPartCount``: ``max(Math.round(size.toDouble / total * minParts), 1)``; Java's
    Math.round rounds halves up (Python's round() would round them to even)."""
    x = float(size) / float(total) * min_parts
    r = math.floor(x)
    if x - r >= 0.5:
        r += 1
    return max(r, 1)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``getDividedPartition``: ``parts`` pieces by integer division, the last one taking the
    remainder."""
    remaining = r.size
    start = r.start
    out = []
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.end)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def _split_unresolved(ranges: list[OffsetRange], min_partitions: int | None,
                      max_records: int | None,
                      bounds: Mapping[TopicPartition, tuple[int, int]] | None
                      ) -> list[OffsetRange]:
    """``getOffsetRangesFromUnresolvedOffsets`` after the offsets were fetched."""
    limit = LONG_MAX if max_records is None else max_records

    def size(r: OffsetRange) -> int:
        # Spark measures unresolved ranges on the raw sentinels (earliest..latest counts as 1),
        # so maxRecordsPerPartition alone never splits a default batch read there; kafkalog
        # measures them on the offsets as they are now, which is what the option is for
        if bounds is not None and r.topic_partition in bounds:
            lo, hi = bounds[r.topic_partition]
            return ((hi if r.end == LATEST else r.end) - (lo if r.start == EARLIEST else r.start))
        return r.size

    should_divvy = ((min_partitions is not None and min_partitions > len(ranges))
                    or any(size(r) > limit for r in ranges))
    if not should_divvy:
        return ranges
    originals: dict[TopicPartition, OffsetRange] = {}
    for r in ranges:
        if r.topic_partition in originals:
            raise ValueError(f"more than one range for {r.topic}-{r.partition}")
        originals[r.topic_partition] = r

    def resolved(tp: TopicPartition, offset: int) -> int:
        if not _is_sentinel(offset):
            return offset
        if bounds is None or tp not in bounds:
            raise ValueError(f"cannot split {tp[0]}-{tp[1]}: offset {offset} needs its "
                             f"(earliest, latest) in bounds")
        earliest, latest = bounds[tp]
        return earliest if offset == EARLIEST else latest

    concrete = [replace(r, start=resolved(r.topic_partition, r.start),
                        end=resolved(r.topic_partition, r.end)) for r in ranges]
    pieces: dict[TopicPartition, list[OffsetRange]] = {}
    for p in _get_ranges(concrete, min_partitions, max_records):
        pieces.setdefault(p.topic_partition, []).append(p)
    out: list[OffsetRange] = []
    for tp, split in pieces.items():
        original = originals[tp]
        if len(split) == 1:
            out.append(original)
        else:
            # late binding: the outer ends keep the sentinels, resolved when the task reads
            out.append(replace(split[0], start=original.start))
            out.extend(split[1:-1])
            out.append(replace(split[-1], end=original.end))
    return out


# ------------------------------------------------------------------ rate limits

def rate_limit(limit: int, start: Mapping[TopicPartition, int],
               latest: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """``KafkaMicroBatchStream.rateLimit``: the end offsets of a batch capped by
    ``maxOffsetsPerTrigger``, shared across partitions in proportion to their backlog
    ``latest - start``. A share below 1 is rounded up (small partitions are not starved, so a
    batch may exceed the limit slightly), others rounded down; no end goes past ``latest`` and
    ``limit = Long.MAX_VALUE`` does not overflow (SPARK-26718).

    Every partition of ``latest`` gets an end. Spark takes ``from`` offsets for every partition
    of ``latest`` (new partitions from their earliest offset), so pass them all in ``start``; a
    partition missing from ``start`` is treated as Spark treats one whose begin is unknown: no
    share, end = latest. Partitions without backlog (or behind ``start``) also end at latest."""
    sizes: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp)
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        begin = start[tp]
        prorate = limit * (size / total)               # Long * Double, as in Scala
        whole = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        whole = min(whole, LONG_MAX)                  # Double.toLong saturates
        off = LONG_MAX if whole > LONG_MAX - begin else begin + whole
        out[tp] = min(end, off)
    return out


def offsets_behind(start: Mapping[TopicPartition, int],
                   latest: Mapping[TopicPartition, int]) -> int:
    """New offsets available, for ``minOffsetsPerTrigger`` (``KafkaMicroBatchStream.
    delayBatch``): the sum over ``latest``'s partitions of ``latest - start``, a partition
    missing from ``start`` counting from 0."""
    return sum(end - start.get(tp, 0) for tp, end in latest.items())

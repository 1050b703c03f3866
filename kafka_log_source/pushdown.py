"""Filter pushdown for batch reads (``.option("filterPushdown", "true")`` together with
``spark.sql.python.filterPushdown.enabled=true``; Spark refuses a reader that implements
``pushFilters`` while that setting is off, so the plain reader does not).

Predicates on ``topic``, ``partition``, ``offset`` and ``timestamp`` narrow what is read:
``topic``/``partition`` pick partition directories, ``offset`` bounds cut each range, and a
lower bound on ``timestamp`` starts each range at the first offset whose timestamp reaches it,
found through Kafka's time index (``offsetsForTimes``), so ``WHERE timestamp >= t0`` reads only
the segments and byte ranges from there on. An upper bound on ``timestamp`` cannot cut a range
(record timestamps need not increase along a log), so Spark keeps evaluating every filter: the
rows are exactly those of a full scan filtered by Spark.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Iterable, List

from pyspark.sql.datasource import (EqualTo, Filter, GreaterThan, GreaterThanOrEqual, In,
                                    LessThan, LessThanOrEqual, StringStartsWith)

from . import catalog
from .batch_reader import KafkaLogBatchReader
from .offset_reader import Resolver
from .offsets import EARLIEST, LATEST, TopicPartition


def _ms(value: object) -> int | None:
    """A pushed timestamp (tz-aware datetime) as epoch ms, rounded so no matching row is lost."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        micros = (value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)
        return micros // 1000            # floor: a record at ms m holds every micro of that ms
    return None


class KafkaLogPushdownReader(KafkaLogBatchReader):
    topics: set[str] | None = None
    partitions_: set[int] | None = None
    min_offset: int | None = None
    max_offset: int | None = None        # exclusive
    min_timestamp: int | None = None     # ms, inclusive
    topic_prefix: str | None = None

    def pushFilters(self, filters: List[Filter]) -> Iterable[Filter]:
        for f in filters:
            self._note(f)
        return filters                   # Spark still applies all of them (see module doc)

    def _note(self, f: Filter) -> None:
        attribute = getattr(f, "attribute", None)     # Not(...) has none: nothing to narrow
        col = attribute[0] if attribute is not None and len(attribute) == 1 else None
        if col == "topic":
            if isinstance(f, EqualTo):
                self._keep_topics({f.value})
            elif isinstance(f, In):
                self._keep_topics(set(f.value))
            elif isinstance(f, StringStartsWith):
                self.topic_prefix = f.value
        elif col == "partition":
            if isinstance(f, EqualTo):
                self._keep_partitions({f.value})
            elif isinstance(f, In):
                self._keep_partitions(set(f.value))
        elif col == "offset" and isinstance(v := getattr(f, "value", None), int):
            if isinstance(f, EqualTo):
                self._bound_offsets(v, v + 1)
            elif isinstance(f, GreaterThan):
                self._bound_offsets(v + 1, None)
            elif isinstance(f, GreaterThanOrEqual):
                self._bound_offsets(v, None)
            elif isinstance(f, LessThan):
                self._bound_offsets(None, v)
            elif isinstance(f, LessThanOrEqual):
                self._bound_offsets(None, v + 1)
        elif col == "timestamp" and isinstance(f, (GreaterThan, GreaterThanOrEqual, EqualTo)):
            ms = _ms(f.value)
            if ms is not None and ms > 0:     # before 1970 holds for every record: no bound
                self.min_timestamp = ms if self.min_timestamp is None else max(self.min_timestamp, ms)

    def _keep_topics(self, topics: set) -> None:
        self.topics = topics if self.topics is None else self.topics & topics

    def _keep_partitions(self, parts: set) -> None:
        self.partitions_ = parts if self.partitions_ is None else self.partitions_ & parts

    def _bound_offsets(self, lo: int | None, hi: int | None) -> None:
        if lo is not None:
            self.min_offset = lo if self.min_offset is None else max(self.min_offset, lo)
        if hi is not None:
            self.max_offset = hi if self.max_offset is None else min(self.max_offset, hi)

    def pushed_min_timestamp(self) -> int | None:
        return self.min_timestamp

    def narrow_partitions(self, dirs: dict[TopicPartition, Path]) -> dict[TopicPartition, Path]:
        prefix = self.topic_prefix
        return {tp: p for tp, p in dirs.items()
                if (self.topics is None or tp[0] in self.topics)
                and (self.partitions_ is None or tp[1] in self.partitions_)
                and (prefix is None or tp[0].startswith(prefix))}

    def narrow_range(self, tp: TopicPartition, start: int, end: int, path: Path,
                     info: catalog.PartitionInfo) -> tuple[int, int]:
        if self.min_offset is None and self.max_offset is None and self.min_timestamp is None:
            return start, end                 # nothing pushed: keep the late binding
        # bounds to compare with: earliest / latest as they are now
        start = info.earliest if start == EARLIEST else start
        end = info.latest if end == LATEST else end
        if self.min_offset is not None:
            start = max(start, self.min_offset)
        if self.max_offset is not None:
            end = min(end, self.max_offset)
        if self.min_timestamp is not None and start < end:
            found = Resolver(self.opts, self.tier).offset_for_timestamp(tp, path, info, self.min_timestamp)
            start = end if found is None else max(start, found)
        return start, max(start, end)

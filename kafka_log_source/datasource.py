"""The ``kafkalog`` data source: Spark's Kafka source over a data directory of Kafka partition
directories, for streaming (micro-batches with admission control, ``Trigger.AvailableNow``) and
batch reads (offset and timestamp ranges, optional filter pushdown).

Driver side only: offsets are resolved by ``offset_reader.Resolver`` (``KafkaOffsetReaderAdmin``'s
role), each offset range becomes an input partition (``KafkaOffsetRangeCalculator``), and tasks
read them in ``reader.read_partition``. Batch reads are ``batch_reader.KafkaLogBatchReader``
(``pushdown.KafkaLogPushdownReader`` with ``filterPushdown``); this module holds the source and
its streaming reader (Spark's ``KafkaMicroBatchStream``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader,
                                    DataSourceStreamArrowWriter, DataSourceStreamReader,
                                    InputPartition)
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              ReadMinRows, SupportsTriggerAvailableNow)
from pyspark.sql.types import StructType

from storage_core.common import wall_ms
from storage_core.errors import InvalidConfigError

from . import catalog
from .batch_reader import KafkaLogBatchReader
from .offset_reader import Resolver, open_tier, tp_set
from .offsets import (LATEST, OffsetRange, TopicPartition, offsets_behind, offsets_from_json,
                      offsets_to_json, rate_limit, topic_ids_from_json)
from .options import Latest, SourceOptions, check_at_load, parse_source_options
from .pushdown import KafkaLogPushdownReader
from .reader import DATA_LOSS_HINT, DataLossError, KafkaLogInputPartition, spark_schema
from .remote_tier import read_any_partition
from .tail import DataDirView

logger = logging.getLogger(__name__)


class KafkaLogDataSource(DataSource):
    """``spark.readStream.format("kafkalog")`` / ``spark.read.format("kafkalog")``.

    Options are those of Spark's Kafka source (``subscribe``, ``assign``, ``subscribePattern``,
    ``startingOffsets``, ``endingOffsets``, the timestamp forms, ``failOnDataLoss``,
    ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay``, ``minPartitions``,
    ``maxRecordsPerPartition``, ``includeHeaders``), plus ``path`` (the data directory, or an
    object store URI holding a tiered topic: ``remote_tier``), ``remotePath`` (the store of a
    topic whose local tier is ``path``), the store's ``rsm.config.*`` settings,
    ``isolationLevel`` (also ``kafka.isolation.level``), ``maxBytesPerFetch`` and
    ``filterPushdown`` (batch reads; needs ``spark.sql.python.filterPushdown.enabled``)."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> StructType:
        # Spark calls this at load(): bad subscriptions and paths fail there, as with format("kafka")
        check_at_load(self.options)
        return spark_schema(_include_headers(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema, self.options)
        opts = parse_source_options(self.options, streaming=False)
        for w in opts.warnings:
            logger.warning(w)
        pushdown = str(self.options.get("filterPushdown", "false")).strip().lower()
        if pushdown not in ("true", "false"):
            raise InvalidConfigError(f"Invalid value {pushdown!r} for option 'filterPushdown': "
                                     f"must be true or false")
        return KafkaLogPushdownReader(opts) if pushdown == "true" else KafkaLogBatchReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        from kafka_log_sink import batch_writer
        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        # complete mode (overwrite) is accepted as append, as Spark's Kafka sink does
        from kafka_log_sink import stream_writer
        return stream_writer(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema, self.options)
        return KafkaLogStreamReader(parse_source_options(self.options, streaming=True))


def _include_headers(options: Mapping[str, str]) -> bool:
    raw = str(options.get("includeHeaders", "false")).strip().lower()
    if raw not in ("true", "false"):
        raise InvalidConfigError(f"Invalid value {raw!r} for option 'includeHeaders': must be "
                                 f"true or false")
    return raw == "true"


def _check_schema(schema: StructType, options: Mapping[str, str]) -> None:
    if schema.simpleString() != spark_schema(_include_headers(options)).simpleString():
        raise InvalidConfigError("Kafka source has a fixed schema and cannot be set with a custom "
                                 f"one (got {schema.simpleString()})")


def _ids(infos: dict[TopicPartition, catalog.PartitionInfo]) -> dict[TopicPartition, str]:
    return {tp: info.topic_id for tp, info in infos.items() if info.topic_id is not None}


def _recreated(seen: Mapping[TopicPartition, str | None],
               infos: dict[TopicPartition, catalog.PartitionInfo],
               among: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
    """The partitions of ``among`` that had a topic id (``seen``) and now have another one: their
    topic was deleted and recreated. -> {tp: the id now}. A partition without an id now is
    not counted (a directory being created shows none until its writer records it; one
    rewritten by a writer without ids is followed by its offsets alone, keeping the last id)."""
    out: dict[TopicPartition, str] = {}
    for tp in among:
        now = infos[tp].topic_id if tp in infos else None
        if now is not None and seen.get(tp) is not None and now != seen[tp]:
            out[tp] = now
    return out


def _recreated_message(changed: dict[TopicPartition, str], seen: Mapping[TopicPartition, str | None],
                       infos: dict[TopicPartition, catalog.PartitionInfo]) -> str:
    by_topic: dict[tuple[str, str | None, str], list[int]] = {}
    for (topic, partition), now in sorted(changed.items()):
        by_topic.setdefault((topic, seen[(topic, partition)], now), []).append(partition)
    return " ".join(
        f"Topic {topic} was deleted and recreated: partitions {parts} had topic id {old}, "
        f"now topic id {new}." for (topic, old, new), parts in by_topic.items())


# ------------------------------------------------------------------ streaming reads

class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over offsets ``{"topic": {"partition": next offset}}`` (Spark's
    ``KafkaSourceOffset`` JSON, keys in a stable order), with Kafka's admission control:
    ``maxOffsetsPerTrigger`` split in proportion to each partition's backlog,
    ``minOffsetsPerTrigger`` / ``maxTriggerDelay`` checked here (Python sources get no composite
    limit), ``Trigger.AvailableNow`` bounded by the offsets seen when it starts.

    Each offset also records the topic id (``partition.metadata``) of every partition that has
    one (``"$topicIds"``, see offsets.py), so a topic deleted and recreated between two
    micro-batches, even while the query was stopped, is told from the same topic: it is data
    loss (``failOnDataLoss=true`` fails the query naming the topic and both ids), or, with
    ``failOnDataLoss=false``, a warning and the new topic read from its earliest offset.
    Partitions without an id are followed by their offsets alone, as Spark's Kafka source does."""

    def __init__(self, opts: SourceOptions, clock: Callable[[], int] | None = None) -> None:
        self.opts = opts
        self._clock = clock
        self._initial: dict | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._available_now: dict[TopicPartition, int] | None = None
        self._available_now_ids: dict[TopicPartition, str | None] = {}
        self._last_trigger_ms = 0        # Spark's lastTriggerMillis
        self._missing: str | None = None     # the topics last found missing, warned about once
        self.tier = open_tier(opts)      # the object store of a tiered or remote-only topic

    def _now(self) -> int:
        return self._clock() if self._clock is not None else wall_ms()

    def _partitions_now(self) -> tuple[dict[TopicPartition, Path],
                                         dict[TopicPartition, catalog.PartitionInfo]]:
        """The partitions that exist now and their offsets, from the incremental view (see
        tail.py: a trigger costs a few stats, not a reopening of every log). A remote-only topic's
        come from the store's metadata (its offsets end after the highest offset copied); a
        tiered one's local offsets are extended down to its remote segments."""
        if self.tier is not None and self.tier.remote_only:
            found = self.tier.assigned(self.opts.strategy)
            return found, {tp: self.tier.info(tp, None) for tp in found}
        view = self.__dict__.get("_view")
        if view is None:
            view = self._view = DataDirView(self.opts.path, self.opts.strategy,
                                            self.opts.isolation_level == "read_committed")
        infos = Resolver(self.opts, self.tier).with_tier(view.infos())
        dirs = {tp: p for tp, p in view.partitions().items() if tp in infos}
        return dirs, infos

    def initialOffset(self) -> dict:
        """The start of a new query. ``latest`` stays the sentinel -1 here (Spark's late
        binding): the first batch starts each such partition at its own end offset, so a batch
        0 replayed after a crash (Spark asks a Python source for its initial offset again, and
        a Python source has no checkpoint of its own to keep the first answer in) plans the
        very same range instead of a newer "latest"."""
        if self._initial is None:       # Spark calls it more than once: resolve once
            dirs, infos = self._partitions_now()
            Resolver(self.opts, self.tier).check_topics(dirs)
            limit = self.opts.starting
            if isinstance(limit, Latest):
                resolved = {tp: LATEST for tp in dirs}
            else:
                resolved = Resolver(self.opts, self.tier).resolve(limit, dirs, infos, starting=True,
                                                       streaming=True, keep_latest=True)
            self._initial = offsets_to_json(resolved, _ids(infos))
        return self._initial

    def _warn_missing(self, infos: Mapping[TopicPartition, catalog.PartitionInfo]) -> None:
        """A topic the query names that is gone (deleted while the query ran or was stopped) is
        warned about once, and again whenever the set of missing topics changes: the query
        waits for it (a topic created again is told apart by its topic id) where Spark's Kafka
        source fails the trigger (``UnknownTopicOrPartitionException``); without the warning a
        restarted query on a deleted topic would sit idle and say nothing."""
        missing = Resolver(self.opts, self.tier).missing_topics({topic for topic, _ in infos})
        if missing != self._missing:
            self._missing = missing
            if missing is not None:
                logger.warning("%s; the query reads nothing of them until they exist again (Spark's Kafka "
                               "source would fail the query: UnknownTopicOrPartitionException)", missing)

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.opts
        if o.max_offsets_per_trigger is not None:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.min_offsets_per_trigger is not None:
            return ReadMinRows(o.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        infos = self._partitions_now()[1]
        self._available_now = {tp: info.latest for tp, info in infos.items()}
        self._available_now_ids = {tp: info.topic_id for tp, info in infos.items()}

    def _fetch_latest(self) -> dict[TopicPartition, int]:
        return {tp: info.latest for tp, info in self._partitions_now()[1].items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        infos = self._partitions_now()[1]
        now = {tp: info.latest for tp, info in infos.items()}
        if self._available_now is not None:
            self._check_available_now(self._available_now, now, infos)
            latest = dict(self._available_now)
        else:
            latest = now
        seen_ids = topic_ids_from_json(start)
        # a partition that had an id and is now an empty directory without one is being created
        # again (a writer records the id before the first segment): it waits for the next
        # trigger instead of counting as a partition whose offsets went back to 0
        latest = {tp: off for tp, off in latest.items()
                  if not (seen_ids.get(tp) is not None and tp in infos
                          and infos[tp].topic_id is None and not infos[tp].segments)}
        self._latest = latest
        self._warn_missing(infos)
        if not latest:
            # nothing subscribed exists (yet): no batch; Spark's delayBatch still runs (and
            # restarts its clock once the delay has passed)
            if not isinstance(limit, ReadAllAvailable) and self.opts.min_offsets_per_trigger is not None:
                self._delay_batch({}, {})
            return start
        recreated = _recreated(seen_ids, infos, latest)
        if recreated:
            self._data_loss(_recreated_message(recreated, seen_ids, infos),
                            "The new topic is read from its earliest offset")
        # a "latest" start (-1) binds to the end offset now; partitions new since ``start``
        # take part from their earliest offset, and so do those of a recreated topic
        begin = {tp: (latest.get(tp, LATEST) if off == LATEST else off)
                 for tp, off in begin.items()}
        begin.update({tp: infos[tp].earliest for tp in recreated})
        earliest = self._earliest_of_new(begin, latest)
        frm = {tp: begin.get(tp, earliest.get(tp, 0)) for tp in latest}
        if isinstance(limit, ReadAllAvailable):
            end = latest
        else:
            o = self.opts
            if o.min_offsets_per_trigger is not None and self._delay_batch(frm, latest):
                return start
            end = latest
            if o.max_offsets_per_trigger is not None:
                end = rate_limit(o.max_offsets_per_trigger, frm, latest)
        merged = {tp: off for tp, off in begin.items() if off != LATEST}   # gone: kept
        merged.update(end)
        # the ids the end offsets belong to: as found now, or as last seen where none is found
        ids = {tp: seen_ids[tp] for tp in merged if tp in seen_ids}
        ids.update(_ids(infos))
        return offsets_to_json(merged, ids)

    def _check_available_now(self, snap: dict[TopicPartition, int], now: dict[TopicPartition, int],
                             infos: dict[TopicPartition, catalog.PartitionInfo]) -> None:
        """``KafkaMicroBatchStream``'s checks under AvailableNow, failing whatever
        failOnDataLoss says: the partitions of the snapshot must still exist and still reach
        the snapshot's offsets (``snap``), and (kafkalog) still be the same topic (topic id)."""
        changed = _recreated(self._available_now_ids, infos, self._available_now_ids)
        if changed:
            raise DataLossError(
                "Some of partitions in Kafka topic(s) have been recreated during running query "
                "with Trigger.AvailableNow. Make sure the topic(s) are not deleted or recreated "
                "during the query. "
                + _recreated_message(changed, self._available_now_ids, infos))
        if not set(snap) <= set(now):
            raise DataLossError(
                "Some of partitions in Kafka topic(s) have been lost during running query with "
                "Trigger.AvailableNow. Make sure the topic(s) are not deleted during the query. "
                f"topic-partitions for latest offset: {tp_set(now)}, topic-partitions for end "
                f"offset: {tp_set(snap)}")
        if any(now[tp] < off for tp, off in snap.items()):
            raise DataLossError(
                "Some of partitions in Kafka topic(s) report available offset which is less than "
                "end offset during running query with Trigger.AvailableNow. Make sure the "
                f"topic(s) are not deleted or recreated during the query. latest offset: "
                f"{json.dumps(offsets_to_json(now))}, end offset: "
                f"{json.dumps(offsets_to_json(snap))}")

    def _earliest_of_new(self, begin: Mapping[TopicPartition, int],
                         latest: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        if all(tp in begin for tp in latest):
            return {}
        infos = self._partitions_now()[1]
        return {tp: infos[tp].earliest for tp in latest if tp not in begin and tp in infos}

    def _delay_batch(self, frm: Mapping[TopicPartition, int],
                     latest: Mapping[TopicPartition, int]) -> bool:
        """``KafkaMicroBatchStream.delayBatch``: skip this trigger while fewer than
        ``minOffsetsPerTrigger`` offsets are new and ``maxTriggerDelay`` has not passed since
        the last trigger that was not skipped. As Spark's ``lastTriggerMillis``, the clock
        restarts at every trigger not skipped, whether or not it then finds offsets to read (a
        stream started at latest on a quiet topic: its first trigger), and starts at 0: the
        first trigger is not skipped, unless the delay is longer than the time since 1970
        (``maxTriggerDelay=1000000000000d``, ``Long.MAX_VALUE`` ms)."""
        now = self._now()
        min_offsets = self.opts.min_offsets_per_trigger
        if now - self._last_trigger_ms < self.opts.max_trigger_delay_ms and \
                min_offsets is not None and offsets_behind(frm, latest) < min_offsets:
            return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        start_ids, end_ids = topic_ids_from_json(start), topic_ids_from_json(end)
        res = Resolver(self.opts, self.tier)
        existing, all_infos = self._partitions_now()
        dirs = {tp: existing[tp] for tp in until if tp in existing}
        gone = sorted(tp for tp in until if tp not in existing)
        if gone:
            self._data_loss(f"Partitions {tp_set(gone)} have been deleted.")
        infos = {tp: all_infos[tp] for tp in dirs}
        # recreated since this batch was planned: the range planned is not on disk any more;
        # the next batch finds the new topic (its id differs from this end's) and starts over
        replaced = _recreated(end_ids, infos, dirs)
        if replaced:
            self._data_loss(_recreated_message(replaced, end_ids, infos),
                            "This batch skips it; the next one reads the new topic from its "
                            "earliest offset")
        ranges = []
        for tp in dirs:
            info = infos[tp]
            if tp in replaced:
                continue
            if tp in begin and end_ids.get(tp) not in (None, start_ids.get(tp, end_ids.get(tp))):
                s = info.earliest           # recreated before this batch (latestOffset said so)
            elif tp in begin and begin[tp] == LATEST:
                s = until[tp]               # a "latest" start: this batch begins at its end
            elif tp in begin:
                s = begin[tp]
            else:
                s = info.earliest
                if s != 0:
                    self._data_loss(f"Added partition {tp[0]}-{tp[1]} starts from {s} instead of 0.")
            e = until[tp]
            if e < s:
                self._data_loss(f"Partition {tp[0]}-{tp[1]} offset was changed from {s} to {e}. "
                                f"This could either be a user error that the start offset is set "
                                f"too high and this is the first batch, or the kafka "
                                f"topic-partition is broken, and some data may have been missed.")
                continue
            ranges.append(OffsetRange(tp[0], tp[1], s, e))
        # tasks check the topic id before reading: a topic recreated after this planning does
        # not hand them another topic's records for these offsets (batch reads, planned once
        # and re-run over whatever the directory holds then, do not check)
        return [replace(part, topic_id=infos[(part.topic, part.partition)].topic_id)
                for part in res.input_partitions(ranges, infos, dirs)]

    def _data_loss(self, message: str, instead: str = "Ignored") -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(message + DATA_LOSS_HINT)
        logger.warning("%s %s (failOnDataLoss=false).", message, instead)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaLogInputPartition):
            return iter(())                 # Spark's placeholder when there is nothing to read
        return read_any_partition(partition)

    def commit(self, end: dict) -> None:
        pass                            # Spark's Kafka source commits nothing either

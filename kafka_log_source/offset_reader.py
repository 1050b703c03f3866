"""Offset resolution on the driver (Spark's ``KafkaOffsetReaderAdmin``): option limits
(earliest, latest, specific offsets, timestamps) turned into offsets of the partitions that exist
now, and offset ranges into input partitions (``KafkaOffsetRangeCalculator``). Used by the batch
and the streaming readers alike."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from storage_core.errors import InvalidConfigError
from storage_core.log import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP,
                              LATEST_TIMESTAMP, MAX_TIMESTAMP)

from . import catalog
from .offsets import EARLIEST, LATEST, OffsetRange, TopicPartition, split_ranges
from .options import (Assign, ByGlobalTimestamp, ByOffsets, ByTimestamps, Earliest, Latest, OffsetLimit,
                      SourceOptions, Subscribe)
from .reader import KafkaLogInputPartition

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .remote_tier import RemoteTier


def open_tier(opts: SourceOptions) -> RemoteTier | None:
    """The store of a tiered or remote-only topic (``path`` a store URI, or ``remotePath``)."""
    if opts.store is None:
        return None
    from .remote_tier import RemoteTier
    return RemoteTier(opts.store, remote_only=opts.remote_only)


def tp_set(tps: Iterable[TopicPartition]) -> str:
    """Partitions as Spark's Kafka source prints a set of them in its errors."""
    return "Set(" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + ")"


class Resolver:
    """Turns option limits into offsets for the partitions that exist now."""

    def __init__(self, opts: SourceOptions, tier: RemoteTier | None = None) -> None:
        self.opts = opts
        self.tier = tier

    def partitions(self) -> dict[TopicPartition, Path]:
        if self.tier is not None and self.tier.remote_only:
            return self.tier.assigned(self.opts.strategy)
        return catalog.assigned(self.opts.strategy, self.opts.path)

    def check_topics(self, found: Mapping[TopicPartition, Path]) -> None:
        """Where a query begins (a batch's planning, a new stream's initial offsets; ``found``: the
        partitions assigned, as ``partitions`` lists them): every topic
        ``subscribe`` or ``assign`` names must exist, whatever failOnDataLoss says. Spark's
        ``ConsumerStrategy.retrieveAllPartitions`` asks ``Admin.describeTopics`` for them, which
        fails for an unknown topic (``UnknownTopicOrPartitionException``), batch and stream
        alike. A listed partition of an existing topic that does not exist is skipped
        (``AssignStrategy`` keeps the partitions that exist), and a pattern may match nothing."""
        strategy = self.opts.strategy
        if not isinstance(strategy, (Assign, Subscribe)):
            return
        if self.tier is not None and self.tier.remote_only:
            present = self.tier.topics()
        else:
            present = {t for t, _ in catalog.partition_dirs(self.opts.path)}
        missing = self.missing_topics(present)
        if missing:
            raise InvalidConfigError(
                f"{missing} (Spark's Kafka source fails too, whatever failOnDataLoss says: "
                f"UnknownTopicOrPartitionException)")
        where = self.where()
        if isinstance(strategy, Assign):
            skipped = sorted(tp for tp in set(strategy.partitions) if tp not in found)
            if skipped:
                logger.info("Option 'assign': partitions %s do not exist in %s and are not read (Spark's "
                            "AssignStrategy skips them likewise)", tp_set(skipped), where)

    def where(self) -> str:
        """Where the topics are looked for, as messages name it."""
        if self.tier is not None and self.tier.remote_only:
            return f"the store {self.tier.name}"
        return str(self.opts.path)

    def missing_topics(self, present: Iterable[str]) -> str | None:
        """The message naming the topics ``subscribe`` or ``assign`` names that are not among
        ``present``; None when all are (or the strategy is a pattern, which may match nothing)."""
        strategy = self.opts.strategy
        if not isinstance(strategy, (Assign, Subscribe)):
            return None
        named = strategy.topics if isinstance(strategy, Subscribe) else [t for t, _ in strategy.partitions]
        missing = sorted(set(named) - set(present))
        if not missing:
            return None
        option = "subscribe" if isinstance(strategy, Subscribe) else "assign"
        return f"Option '{option}' names topic(s) that do not exist in {self.where()}: {', '.join(missing)}"

    def info(self, dirs: dict[TopicPartition, Path],
             timestamps: Mapping[TopicPartition, Iterable[int]] | None = None
             ) -> dict[TopicPartition, catalog.PartitionInfo]:
        """Each partition's offsets; with ``timestamps``, the local log's offsets for them as
        well, from the same open (``offset_for_timestamp`` then answers without another)."""
        if self.tier is not None and self.tier.remote_only:
            return {tp: self.tier.info(tp, None) for tp in dirs}
        asked = timestamps or {}
        infos = {tp: catalog.partition_info(p, self.opts.isolation_level, asked.get(tp, ()))
                 for tp, p in dirs.items()}
        return self.with_tier(infos)

    @staticmethod
    def timestamps_asked(limits: Iterable[OffsetLimit], dirs: Iterable[TopicPartition],
                         also: int | None = None) -> dict[TopicPartition, set[int]]:
        """The timestamps ``limits`` (and ``also``, for every partition) will look up in the
        local log of each partition of ``dirs``, for ``info`` to answer at its open (of the
        special timestamps only -3, the one a log's segments answer; see ``special_offset``)."""
        asked: dict[TopicPartition, set[int]] = {tp: set() if also is None else {also} for tp in dirs}
        for limit in limits:
            if isinstance(limit, ByGlobalTimestamp):
                for wanted in asked.values():
                    wanted.add(limit.timestamp)
            elif isinstance(limit, ByTimestamps):
                for tp, ts in limit.timestamps.items():
                    if tp in asked:
                        asked[tp].add(ts)
        return {tp: lookups for tp, wanted in asked.items()
                if (lookups := {ts for ts in wanted if ts >= 0 or ts == MAX_TIMESTAMP})}

    def with_tier(self, infos: dict[TopicPartition, catalog.PartitionInfo]
                  ) -> dict[TopicPartition, catalog.PartitionInfo]:
        """Local partitions' offsets extended down to their remote segments (``remotePath``)."""
        if self.tier is None:
            return infos
        tier = self.tier
        return {tp: tier.info(tp, info) for tp, info in infos.items()}

    def offset_for_timestamp(self, tp: TopicPartition, path: Path, info: catalog.PartitionInfo,
                             timestamp: int) -> int | None:
        """``offsetsForTimes`` over both tiers: the remote segments below the local tier first.
        A negative timestamp is one of ListOffsets' special ones (``special_offset``)."""
        if timestamp < 0:
            return self.special_offset(tp, path, info, timestamp)
        if self.tier is not None and info.tiered_below is not None:
            found = self.tier.offset_for_timestamp(tp, timestamp, info.tiered_below)
            if found is not None or self.tier.remote_only:
                return found
        if timestamp in info.timestamp_offsets:
            return info.timestamp_offsets[timestamp]
        return catalog.offset_for_timestamp(path, timestamp)

    def special_offset(self, tp: TopicPartition, path: Path, info: catalog.PartitionInfo,
                       timestamp: int) -> int | None:
        """What a broker answers ListOffsets for a special timestamp, which is what Spark's
        ``OffsetSpec.forTimestamp`` sends for a negative one (``UnifiedLog.fetchOffsetByTimestamp``,
        ``Partition.fetchOffsetForTimestamp``): -1 the last fetchable offset (the end, or the last
        stable offset under read_committed), -2 the log start offset (over both tiers), -4 the
        local log start offset (the log start without a remote tier), -5 the highest offset in
        remote storage (None, no match, without one: Kafka's offset -1), -3 the offset of the
        record with the largest timestamp in the local log's segments (a remote-only topic's:
        its remote segments'); None for an empty log. Options refuse any other negative value."""
        if timestamp == LATEST_TIMESTAMP:
            return info.latest
        if timestamp == EARLIEST_TIMESTAMP:
            return info.earliest
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            return info.earliest if info.tiered_below is None else info.tiered_below
        if timestamp == LATEST_TIERED_TIMESTAMP:
            if self.tier is None:
                return None
            return max((md.end_offset for md in self.tier.segments(tp)), default=None)
        if timestamp != MAX_TIMESTAMP:
            raise InvalidConfigError(f"Invalid timestamp {timestamp} for {tp[0]}-{tp[1]}: not one of "
                                     f"ListOffsets' special timestamps -1 to -5")
        if self.tier is not None and self.tier.remote_only:
            segments = self.tier.segments(tp)
            top = max((md.max_timestamp_ms for md in segments), default=-1)
            return None if top < 0 else self.tier.offset_for_timestamp(tp, top, info.latest)
        if timestamp in info.timestamp_offsets:
            return info.timestamp_offsets[timestamp]
        return catalog.offset_for_timestamp(path, timestamp)

    def resolve(self, limit: OffsetLimit, dirs: dict[TopicPartition, Path],
                infos: dict[TopicPartition, catalog.PartitionInfo], *, starting: bool,
                streaming: bool = False, keep_latest: bool = False) -> dict[TopicPartition, int]:
        """Concrete offsets for every partition of ``dirs`` (``KafkaOffsetReaderAdmin``'s
        fetchEarliest/Latest/Specific/Timestamp-based offsets); ``keep_latest`` leaves -1
        (latest) unresolved."""
        if isinstance(limit, Earliest):
            return {tp: infos[tp].earliest for tp in dirs}
        if isinstance(limit, Latest):
            return {tp: infos[tp].latest for tp in dirs}
        if isinstance(limit, ByOffsets):
            wanted = limit.offsets.resolve(list(dirs))
            if set(wanted) != set(dirs) and streaming:
                raise InvalidConfigError(
                    "If startingOffsets contains specific offsets, you must specify all "
                    "TopicPartitions.\nUse -1 for latest, -2 for earliest, if you don't care.\n"
                    f"Specified: {tp_set(wanted)} Assigned: {tp_set(dirs)}")
            if set(wanted) != set(dirs):
                which = "start" if starting else "end"
                raise InvalidConfigError(
                    f"Partitions specified for Kafka {which} offsets don't match what are "
                    f"assigned. Maybe topic partitions are created or deleted while the query is "
                    f"running. Use -1 for latest, -2 for earliest. Specified: "
                    f"{tp_set(wanted)} Assigned: {tp_set(dirs)}")
            return {tp: (infos[tp].earliest if off == EARLIEST else
                         off if off == LATEST and keep_latest else
                         infos[tp].latest if off == LATEST else off)
                    for tp, off in sorted(wanted.items())}
        if isinstance(limit, ByTimestamps):
            if set(limit.timestamps) != set(dirs):
                which = "start" if starting else "end"
                raise InvalidConfigError(
                    f"Partitions specified for Kafka timestamp based {which} offsets don't match "
                    f"what are assigned. Maybe topic partitions are created or deleted while the "
                    f"query is running, or you didn't specify all the partitions. Specified: "
                    f"{tp_set(limit.timestamps)} Assigned: {tp_set(dirs)}")
            stamps = limit.timestamps
        else:
            assert isinstance(limit, ByGlobalTimestamp)
            stamps = {tp: limit.timestamp for tp in dirs}
        out = {}
        for tp in dirs:
            ts = stamps[tp]
            found = self.offset_for_timestamp(tp, dirs[tp], infos[tp], ts)
            if found is not None and found >= infos[tp].latest and \
                    ts not in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                # a lookup that lands at or past the last fetchable offset (read_committed: the
                # last stable offset) answers no offset (ReplicaManager.fetchOffset), as a miss
                found = None
            if found is not None:
                out[tp] = found
            elif not starting or self.opts.starting_by_timestamp_strategy == "latest":
                out[tp] = infos[tp].latest
            else:
                raise InvalidConfigError(
                    f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and "
                    f"timestamp {stamps[tp]}.")
        return out

    def input_partitions(self, ranges: list[OffsetRange],
                         infos: dict[TopicPartition, catalog.PartitionInfo],
                         dirs: dict[TopicPartition, Path]) -> list[KafkaLogInputPartition]:
        o = self.opts
        bounds = {tp: (info.earliest, info.latest) for tp, info in infos.items()}
        kept = [r for r in ranges if r.start < 0 or r.end < 0 or r.end > r.start]
        pieces = split_ranges(kept, min_partitions=o.min_partitions,
                              max_records_per_partition=o.max_records_per_partition,
                              bounds=bounds)
        out = []
        for r in pieces:
            tp = (r.topic, r.partition)
            info = infos[tp]
            late = r.start < 0 or r.end < 0           # resolved by the task (late binding)
            cut = info.tiered_below
            if cut is not None and late:
                # a tiered range is resolved here: a task's late binding sees only the local tier
                r = replace(r, start=info.earliest if r.start == EARLIEST else r.start,
                            end=info.latest if r.end == LATEST else r.end)
                late = False
            part = KafkaLogInputPartition(
                topic=r.topic, partition=r.partition, path=str(dirs[tp]), start=r.start,
                end=r.end, segments=() if late or cut is not None else
                catalog.segments_for(info, max(r.start, info.earliest), r.end),
                earliest=info.earliest, isolation=o.isolation_level,
                include_headers=o.include_headers, fail_on_data_loss=o.fail_on_data_loss,
                max_bytes=o.max_bytes_per_fetch, topic_id=info.topic_id)
            if cut is None or self.tier is None:
                out.append(replace(part, topic_id=None))
                continue
            local = None if self.tier.remote_only else dirs[tp]
            if r.start < cut or local is None:
                # remote-only: the whole range, so that offsets the store no longer reaches (its
                # metadata went back) are data loss in the task, not dropped here
                piece = replace(r, end=r.end if local is None else min(r.end, cut))
                out.extend(self.tier.input_partitions(part, piece, local, o.isolation_level == "read_committed",
                                                         o.remote_read_bytes))
            if r.end > cut and local is not None:
                start = max(r.start, cut)
                out.append(replace(part, start=start, earliest=cut, topic_id=None,
                                   segments=catalog.segments_for(info, start, r.end)))
        return out

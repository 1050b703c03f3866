"""Offset resolution on the driver (Spark's ``KafkaOffsetReaderAdmin``): option limits
(earliest, latest, specific offsets, timestamps) turned into offsets of the partitions that exist
now, and offset ranges into input partitions (``KafkaOffsetRangeCalculator``). Used by the batch
and the streaming readers alike."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from storage_core.errors import InvalidConfigError

from . import catalog
from .offsets import EARLIEST, LATEST, OffsetRange, TopicPartition, split_ranges
from .options import (ByGlobalTimestamp, ByOffsets, ByTimestamps, Earliest, Latest, OffsetLimit,
                      SourceOptions)
from .reader import KafkaLogInputPartition

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
        """The timestamps ``limits`` (and ``also``, for every partition) will look up in each
        partition of ``dirs``, for ``info`` to answer at its open."""
        asked: dict[TopicPartition, set[int]] = {tp: set() if also is None else {also} for tp in dirs}
        for limit in limits:
            if isinstance(limit, ByGlobalTimestamp):
                for wanted in asked.values():
                    wanted.add(limit.timestamp)
            elif isinstance(limit, ByTimestamps):
                for tp, ts in limit.timestamps.items():
                    if tp in asked:
                        asked[tp].add(ts)
        return {tp: wanted for tp, wanted in asked.items() if wanted}

    def with_tier(self, infos: dict[TopicPartition, catalog.PartitionInfo]
                  ) -> dict[TopicPartition, catalog.PartitionInfo]:
        """Local partitions' offsets extended down to their remote segments (``remotePath``)."""
        if self.tier is None:
            return infos
        tier = self.tier
        return {tp: tier.info(tp, info) for tp, info in infos.items()}

    def offset_for_timestamp(self, tp: TopicPartition, path: Path, info: catalog.PartitionInfo,
                             timestamp: int) -> int | None:
        """``offsetsForTimes`` over both tiers: the remote segments below the local tier first."""
        if self.tier is not None and info.tiered_below is not None:
            found = self.tier.offset_for_timestamp(tp, timestamp, info.tiered_below)
            if found is not None or self.tier.remote_only:
                return found
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
            found = self.offset_for_timestamp(tp, dirs[tp], infos[tp], stamps[tp])
            if found is not None:
                # a timestamp found past the last stable offset is not visible yet
                out[tp] = min(found, infos[tp].latest)
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

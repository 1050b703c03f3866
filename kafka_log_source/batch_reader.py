"""Batch reads, ``spark.read.format("kafkalog")`` (Spark's ``KafkaRelation``/``KafkaBatch``):
offset ranges planned on the driver, read by tasks in ``reader.read_partition``. Filter pushdown
(``pushdown.KafkaLogPushdownReader``) narrows the plan through the two hooks defined here."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from storage_core.errors import KafkaLogError

from . import catalog
from .offset_reader import Resolver, open_tier
from .offsets import EARLIEST, LATEST, OffsetRange, TopicPartition
from .options import ByOffsets, Earliest, Latest, OffsetLimit, SourceOptions
from .reader import KafkaLogInputPartition
from .remote_tier import read_any_partition


class KafkaLogBatchReader(DataSourceReader):
    """``spark.read.format("kafkalog")``: ``[starting, ending)`` resolved when the query runs
    (so re-running a DataFrame sees data appended since, as Spark's Kafka relation does)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.tier = open_tier(opts)       # the object store of a tiered or remote-only topic

    def plan(self) -> list[OffsetRange]:
        """Per partition ``[start, end)``. Spark plans a Python source's DataFrame once and
        runs it again for every action, so, as Spark's Kafka relation does, ``earliest`` and
        ``latest`` stay the sentinels -2 / -1 in the plan and tasks resolve them when they
        read (a re-run sees records appended, or deleted by retention, since). Timestamps and
        specific offsets are resolved here; the partitions are those assigned now, narrowed
        by pushed filters after the offset options were checked against all of them."""
        res = Resolver(self.opts, self.tier)
        dirs = res.partitions()
        res.check_topics(dirs)
        # the timestamps the limits and a pushed filter look up, answered at the one open of
        # each partition that its offsets need anyway
        infos = res.info(dirs, res.timestamps_asked((self.opts.starting, self.opts.ending), dirs,
                                                    self.pushed_min_timestamp()))
        starts = self._limit_offsets(res, self.opts.starting, dirs, infos, starting=True)
        ends = self._limit_offsets(res, self.opts.ending, dirs, infos, starting=False)
        dirs = self.narrow_partitions(dirs)
        ranges = []
        for tp in dirs:
            s, e = starts[tp], ends[tp]
            if s >= 0 and e >= 0 and s > e:
                raise KafkaLogError(
                    f"The resolved start offset {s} is greater than the resolved end offset {e} "
                    f"for topic {tp[0]} partition {tp[1]}.")
            s, e = self.narrow_range(tp, s, e, dirs[tp], infos[tp])
            ranges.append(OffsetRange(tp[0], tp[1], s, e))
        self._plan = (ranges, infos, dirs)
        return ranges

    def _limit_offsets(self, res: Resolver, limit: OffsetLimit, dirs: dict[TopicPartition, Path],
                       infos: dict[TopicPartition, catalog.PartitionInfo], *,
                       starting: bool) -> dict[TopicPartition, int]:
        if isinstance(limit, Earliest):
            return {tp: EARLIEST for tp in dirs}
        if isinstance(limit, Latest):
            return {tp: LATEST for tp in dirs}
        if isinstance(limit, ByOffsets):
            offs = res.resolve(limit, dirs, infos, starting=starting, keep_latest=True)
            explicit = limit.offsets.resolve(list(dirs))
            return {tp: EARLIEST if explicit.get(tp) == EARLIEST else off
                    for tp, off in offs.items()}
        return res.resolve(limit, dirs, infos, starting=starting)

    # hooks for filter pushdown (see pushdown.py)
    def pushed_min_timestamp(self) -> int | None:
        """The timestamp ``narrow_range`` looks up in every partition, if any."""
        return None

    def narrow_partitions(self, dirs: dict[TopicPartition, Path]) -> dict[TopicPartition, Path]:
        return dirs

    def narrow_range(self, tp: TopicPartition, start: int, end: int, path: Path,
                     info: catalog.PartitionInfo) -> tuple[int, int]:
        return start, end

    def partitions(self) -> Sequence[InputPartition]:
        ranges = self.plan()
        _, infos, dirs = self._plan
        return Resolver(self.opts, self.tier).input_partitions(ranges, infos, dirs)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaLogInputPartition):
            return iter(())                 # Spark's placeholder when there is nothing to read
        return read_any_partition(partition)

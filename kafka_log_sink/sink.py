"""The Spark writers ``kafkalog`` hands out: ``df.writeStream.format("kafkalog")`` (exactly once
per micro-batch) and ``df.write.format("kafkalog")`` (append, all or nothing)."""

from __future__ import annotations

import uuid
from typing import Iterator, List, Mapping, Optional

import pyarrow as pa
from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)
from pyspark.sql.types import StructType

from storage_core.errors import InvalidConfigError

from .commit import SinkCoordinator, load_producer
from .options import SinkOptions, check_columns, parse_sink_options
from .tiering import SinkTiering
from .writer import ProducerIdentity, SinkCommitMessage, StagedRun, stage_all


def _runs_and_producer(messages: List[Optional[WriterCommitMessage]]
                       ) -> tuple[list[StagedRun], ProducerIdentity | None]:
    runs: list[StagedRun] = []
    producer: ProducerIdentity | None = None
    for m in messages:
        if isinstance(m, SinkCommitMessage):
            runs.extend(m.runs)
            producer = producer or m.producer
    return runs, producer


def _tier(opts: SinkOptions, tiering: SinkTiering | None, coordinator: SinkCoordinator,
          runs: list[StagedRun]) -> None:
    """With ``remotePath``: the tiering pass over the partitions just committed (never fails the
    commit: see ``tiering``)."""
    if tiering is not None:
        tiering.after_commit({(r.topic, r.partition) for r in runs}, lambda tp: coordinator.open_partition(tp))


class KafkaLogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions, producer: ProducerIdentity) -> None:
        self.opts = opts
        self.producer = producer
        # the tasks' staging folder, this writer's own: a commit deletes it whole
        # (``StagingStore.delete_write_folders``), never another query's sharing the location
        self.write_id = f"stream-{uuid.uuid4().hex}"
        # made on the driver by the first commit: partitions a failed pass left, from commit to commit
        self._tiering: SinkTiering | None = None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_tiering"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._tiering = None

    def tiering(self) -> SinkTiering | None:
        if self._tiering is None and self.opts.remote_path is not None:
            self._tiering = SinkTiering(self.opts)
        return self._tiering

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return stage_all(self.opts, self.producer, self.write_id, None, iterator)

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        runs, producer = _runs_and_producer(messages)
        coordinator = SinkCoordinator(self.opts)
        coordinator.commit(runs, batchId, producer or self.producer)
        coordinator.sweep_staging()
        _tier(self.opts, self.tiering(), coordinator, runs)

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        SinkCoordinator(self.opts).abort(_runs_and_producer(messages)[0])


class KafkaLogBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions, producer: ProducerIdentity) -> None:
        self.opts = opts
        self.producer = producer
        self.write_id = f"write-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return stage_all(self.opts, self.producer, self.write_id, None, iterator)

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        runs, producer = _runs_and_producer(messages)
        coordinator = SinkCoordinator(self.opts)
        coordinator.commit(runs, 0, producer or self.producer)
        if self.opts.remote_path is not None:
            _tier(self.opts, SinkTiering(self.opts), coordinator, runs)

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        SinkCoordinator(self.opts).abort(_runs_and_producer(messages)[0])


def stream_writer(options: Mapping[str, str], schema: StructType) -> KafkaLogStreamWriter:
    opts = parse_sink_options(options)
    check_columns(schema, opts.topic)
    return KafkaLogStreamWriter(opts, load_producer(opts))


def batch_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> KafkaLogBatchWriter:
    if overwrite:
        raise InvalidConfigError("kafkalog cannot be written in the \"Overwrite\" mode: a Kafka "
                                 "log is append-only (use mode(\"append\"))")
    opts = parse_sink_options({k: v for k, v in options.items() if k.lower() != "checkpointlocation"})
    check_columns(schema, opts.topic)
    return KafkaLogBatchWriter(opts, load_producer(opts))

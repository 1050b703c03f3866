"""Executor side of the sink: Arrow rows to Kafka record batches, staged for the driver.

Each task turns its rows into record batches with the columnar codec (partition choice,
compression, CRC-32C), already carrying the query's producer id and epoch and the transactional
flag; the driver only numbers them (base offset and base sequence) when it commits
(``commit.SinkCoordinator``). Nothing reaches a partition log from here. Staged files go to a
local folder (``staging_file``) or, with a store URI as staging location, to the store
(``staging_store``): the commit message names them either way.
"""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import WriterCommitMessage

from storage_core.common import settle_reused_worker
from storage_core.errors import InvalidConfigError, RecordTooLargeError
from storage_core.format import encode_batches
from storage_core.format.columnar import HEADER_TYPE
from storage_core.format.kernels import group_rows
from storage_core.format.log_input_stream import scan_batches
from storage_core.log import topic_partition_dir

from .options import SinkOptions, check_topic, default_staging, staging_store_uri
from .partitioner import partitions_for_keys
from .record_accumulator import FLUSH_BYTES, TASK_LIMIT_BYTES, PartitionRecords
from .staging_file import StagingFile
from .staging_store import StagingStore, StoreStagingFile

MAX_DIRECT_FILES = 8        # a task's files that may go to the disk directly: 2 x 4 MiB of
                            # buffers each; the task's other partitions are staged buffered


@dataclass(frozen=True)
class ProducerIdentity:
    """The producer id and epoch every batch of a query is written with (Kafka's idempotent,
    transactional producer); stable across restarts for a streaming query."""

    producer_id: int
    epoch: int = 0


@dataclass(frozen=True)
class StagedRun:
    """Encoded batches for one partition, in a staging file."""

    topic: str
    partition: int
    path: str
    records: int
    size: int
    # its CRCs checked as it was written (a file its task sent to the disk directly, or the
    # commit's copy of one in the staging store): the commit reads only its headers back
    crcs_checked: bool = False
    in_store: bool = False          # ``path`` is an object in the staging store, not a local file


@dataclass(frozen=True)
class SinkCommitMessage(WriterCommitMessage):
    runs: tuple[StagedRun, ...] = ()
    rows: int = 0
    producer: ProducerIdentity | None = None


def topic_partition_count(root: Path, topic: str, default: int) -> int:
    """Partitions of ``topic`` under ``root`` (one more than the highest directory number), or
    ``default`` for a topic that does not exist yet."""
    highest = -1
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return default
    for name in names:
        # live directories named as Kafka names them (str.isdigit took "t-²", which int() refuses)
        named = topic_partition_dir(name)
        if named is not None and named.is_live and named.topic_partition.topic == topic:
            highest = max(highest, named.topic_partition.partition)
    return highest + 1 if highest >= 0 else default


class BatchStager:
    """Encodes one task's rows and appends them to one staging file per partition."""

    def __init__(self, opts: SinkOptions, producer: ProducerIdentity, write_id: str,
                 batch_id: int | None) -> None:
        self.opts = opts
        self.producer = producer
        task = (write_id, f"batch-{batch_id if batch_id is not None else 0}", uuid.uuid4().hex)
        store_uri = staging_store_uri(opts)
        self.store = StagingStore(store_uri, opts.store) if store_uri is not None else None
        self.dir = default_staging(opts).joinpath(*task)
        self.store_dir = self.store.path(*task) if self.store is not None else ""
        self._files: dict[tuple[str, int], tuple[StagingFile | StoreStagingFile, int]] = {}
        # records gathered per partition until they fill batches (record_accumulator)
        self._pending: dict[tuple[str, int], PartitionRecords] = {}
        self._pending_capacity = 0          # bytes of their buffers
        self._flush_bytes = max(FLUSH_BYTES, opts.batch_size)
        # fsync per commit: the commit needs the bytes on disk, so big files go there directly
        # (staging_file), written by one thread of the task's while it encodes
        self._writer = (ThreadPoolExecutor(1, thread_name_prefix="kafkalog-staging")
                        if opts.fsync == "commit" and self.store is None else None)
        self._partition_counts: dict[str, int] = {}
        self._sticky: dict[str, int] = {}
        self.rows = 0

    def stage(self, batch: pa.RecordBatch) -> None:
        table = pa.Table.from_batches([batch])
        n = table.num_rows
        if n == 0:
            return
        self.rows += n
        if self.opts.topic is not None:
            groups = [(self.opts.topic, table)]
        else:
            topics = table.column("topic")
            if topics.null_count:
                raise InvalidConfigError(
                    "[KAFKA_NULL_TOPIC_IN_DATA] The Kafka message data sent to the producer "
                    "contains a null topic. Use the `topic` option for setting a default topic.")
            groups = []
            for t in pc.unique(topics).to_pylist():
                groups.append((t, table.filter(pc.equal(topics, t))))
        for topic, rows in groups:
            check_topic(topic)
            self._stage_topic(topic, rows)

    def _partitions(self, topic: str, rows: pa.Table) -> np.ndarray:
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._partition_counts[topic] = topic_partition_count(
                self.opts.path, topic, self.opts.num_partitions)
        if "partition" in rows.column_names:
            col = rows.column("partition").combine_chunks()
            if col.null_count:
                given = np.asarray(col.fill_null(-1), dtype=np.int64)
                bad = np.flatnonzero((given >= count) | (given < -1)
                                     | ((given == -1) & ~np.asarray(col.is_null())))
            else:                           # the usual case: the values viewed, two reductions
                given = col.to_numpy().astype(np.int64)
                bad = (np.flatnonzero((given >= count) | (given < 0))
                       if given.size and (given.min() < 0 or given.max() >= count) else given[:0])
            if bad.size:
                raise InvalidConfigError(
                    f"Partition {int(given[bad[0]])} of topic {topic} does not exist: the topic "
                    f"has {count} partitions (0..{count - 1})")
            parts = given
            unset = parts < 0
            if unset.any() and "key" in rows.column_names:
                hashed = partitions_for_keys(rows.column("key").combine_chunks(), count)
                parts = np.where(unset, hashed, parts)
                unset = parts < 0
        elif "key" in rows.column_names:        # the usual case: every partition from its key
            parts = partitions_for_keys(rows.column("key").combine_chunks(), count)
            unset = parts < 0
        else:
            parts = np.full(rows.num_rows, -1, np.int64)
            unset = parts < 0
        if unset.any():
            # no partition, no key: sticky to one partition for this batch, then the next
            nxt = self._sticky.get(topic)
            if nxt is None:
                nxt = int.from_bytes(os.urandom(2), "big") % count
            parts[unset] = nxt
            self._sticky[topic] = (nxt + 1) % count
        return parts

    def _stage_topic(self, topic: str, rows: pa.Table) -> None:
        parts = self._partitions(topic, rows)
        rows = _record_columns(rows)
        if parts[0] == parts[-1] and (parts == parts[0]).all():
            self._write(topic, int(parts[0]), rows)      # one partition: no reordering copy
            return
        # the rows grouped by partition, in order within each (a counting sort)
        count = self._partition_counts[topic]
        order, starts = np.empty(len(parts), np.int64), np.zeros(count + 1, np.int64)
        bad = group_rows(parts, count, order, starts)
        if bad >= 0:                # _partitions keeps them in range: a bug, not the data
            raise AssertionError(f"row {bad}: partition {int(parts[bad])} outside 0..{count - 1}")
        for p in np.flatnonzero(starts[1:] > starts[:-1]).tolist():
            # each partition's rows encoded straight from the batch, in order, not copied out
            self._write(topic, p, rows, order[starts[p]:starts[p + 1]])

    def _write(self, topic: str, partition: int, rows: pa.Table,
               picked: np.ndarray | None = None) -> None:
        """Stage ``rows`` (of ``picked`` only) for ``partition``: a share smaller than a
        batch is gathered with the partition's earlier ones until they fill batches
        (``record_accumulator``), a bigger one is encoded straight from the Spark batch."""
        key = (topic, partition)
        pending = self._pending.get(key)
        count = rows.num_rows if picked is None else len(picked)
        share = rows.nbytes * count // rows.num_rows
        if "headers" in rows.column_names or share >= self.opts.batch_size:
            if pending is not None and pending.rows:
                self._encode_pending(key)        # the partition's earlier records first
            self._encode(key, rows, picked)
            return
        if pending is None:
            pending = self._pending[key] = PartitionRecords(tuple(rows.column_names))
        before = pending.capacity
        pending.append(rows, picked)
        self._pending_capacity += pending.capacity - before
        if self._pending_capacity > TASK_LIMIT_BYTES:
            for k in list(self._pending):
                self._encode_pending(k)
            self._pending.clear()               # the buffers freed, not kept for reuse
            self._pending_capacity = 0
        elif pending.nbytes >= self._flush_bytes:
            self._encode_pending(key)

    def _encode_pending(self, key: tuple[str, int]) -> None:
        pending = self._pending[key]
        if pending.rows:
            self._encode(key, pending.drain())

    def _encode(self, key: tuple[str, int], rows: pa.Table, picked: np.ndarray | None = None) -> None:
        topic, partition = key
        staged, records = self._files.get(key, (None, 0))
        if staged is None:
            if self.store is not None:
                staged = self.store.open(f"{self.store_dir}/{topic}-{partition}.batches")
            else:
                self.dir.mkdir(parents=True, exist_ok=True)
                direct = self._writer is not None and len(self._files) < MAX_DIRECT_FILES
                staged = StagingFile(self.dir / f"{topic}-{partition}.batches",
                                     self._writer if direct else None)
            self._files[key] = (staged, 0)
        # batches laid out straight in the staging buffer where there is one (not copied)
        raw = encode_batches(rows, rows=picked, compression=self.opts.compression,
                             max_batch_bytes=self.opts.batch_size,
                             producer_id=self.producer.producer_id,
                             producer_epoch=self.producer.epoch, base_sequence=0,
                             transactional=True,
                             into=staged.reserve if staged.may_go_direct else None)
        limit = self.opts.log_config.max_message_bytes
        # a file that may go direct is not read back by the commit: its CRCs are checked here,
        # on the bytes handed to it
        scan = scan_batches(raw, verify=staged.may_go_direct, source=str(staged.path))
        too_big = np.flatnonzero(scan.size > limit)
        if too_big.size:
            i = int(too_big[0])
            raise RecordTooLargeError(
                f"A record batch for {topic}-{partition} is {int(scan.size[i])} bytes, larger than "
                f"max.message.bytes {limit} (a single record too large for the topic); nothing "
                f"of this micro-batch was written")
        staged.write(raw)
        count = rows.num_rows if picked is None else len(picked)
        self._files[key] = (staged, records + count)

    def close(self) -> None:
        """Close the staged files (``finish`` does; a failed task's are closed too)."""
        self._pending.clear()
        for staged, _ in self._files.values():
            staged.close()
        if self._writer is not None:
            self._writer.shutdown()

    def finish(self) -> SinkCommitMessage:
        for key in list(self._pending):
            self._encode_pending(key)
        files = [staged for staged, _ in self._files.values()]
        if self.store is not None and len(files) > 1:
            # each close completes an upload (a small file's whole PUT): side by side, not in turn
            with ThreadPoolExecutor(min(len(files), 8), thread_name_prefix="kafkalog-upload") as pool:
                for f in [pool.submit(staged.finish) for staged in files]:
                    f.result()
        else:
            for staged in files:
                staged.finish()
        self.close()
        # Staged files are not fsynced: they matter only until the driver's commit has
        # appended them to the logs (made durable there; a direct file is on disk already).
        # A crash before that leaves the transaction "ongoing", which the restart aborts, and
        # Spark runs the batch's tasks again into fresh staging; a torn staged file is never
        # read after a crash.
        runs = [StagedRun(topic, partition, str(staged.path), records, staged.size,
                          staged.written_direct, self.store is not None)
                for (topic, partition), (staged, records) in sorted(self._files.items())]
        return SinkCommitMessage(tuple(runs), self.rows, self.producer)


def _record_columns(rows: pa.Table) -> pa.Table:
    """The columns the codec takes, in its types: binary key/value, ms timestamps, headers."""
    cols, names = [], []
    for name in ("key", "value"):
        if name in rows.column_names:
            cols.append(_binary(rows.column(name), pa.binary()))
            names.append(name)
    if "timestamp" in rows.column_names:
        cols.append(_millis(rows.column("timestamp")))
        names.append("timestamp")
    if "headers" in rows.column_names:
        cols.append(rows.column("headers").cast(pa.list_(HEADER_TYPE)))
        names.append("headers")
    return pa.table(cols, names=names)


def _binary(col: pa.Array | pa.ChunkedArray,
            binary_type: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """A string or binary column as ``binary_type``; a string's UTF-8 bytes are viewed, not
    copied."""
    if col.type == binary_type:
        return col
    if pa.types.is_string(col.type) and binary_type == pa.binary():
        if isinstance(col, pa.ChunkedArray):
            return pa.chunked_array([c.view(binary_type) for c in col.chunks], binary_type)
        return col.view(binary_type)
    return col.cast(binary_type)


def _millis(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Record timestamps in ms as Spark's Kafka sink takes them: a timestamp's microseconds
    floor-divided by 1000 (``DateTimeUtils.toMillis``); a double is seconds, cast as Spark
    casts (microseconds truncated toward zero), then the same."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_floating(col.type):
        micros = pc.cast(pc.trunc(pc.multiply(col, 1_000_000.0)), pa.int64())
    else:
        micros = col.cast(pa.timestamp("us", tz=col.type.tz)).cast(pa.int64())
    valid = np.asarray(micros.is_valid())
    values = np.floor_divide(np.asarray(micros.fill_null(0), dtype=np.int64), 1000)
    return pa.array(values, pa.int64(), mask=~valid)


def stage_all(opts: SinkOptions, producer: ProducerIdentity, write_id: str,
              batch_id: int | None, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    stager = BatchStager(opts, producer, write_id, batch_id)
    try:
        for batch in batches:
            stager.stage(batch)
        return stager.finish()
    finally:
        stager.close()
        settle_reused_worker()          # the kernels the task loaded, with the rest

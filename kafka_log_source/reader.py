"""Executor side: one input partition = one offset range of one Kafka partition, read straight
from its segment files and yielded as Arrow record batches in the exact schema Spark expects.

Everything a task needs travels in the ``KafkaLogInputPartition`` (Spark runs ``read`` in another
process, on a reader that never saw the driver's state). A task opens, through the partition's
``LogView``, only the segments its range touches and seeks in each through its offset index;
``read_committed`` goes through the partition's ``Log`` (read-only), which knows the last stable
offset and the aborted transactions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from storage_core.common import LONG_MAX
from storage_core.errors import CorruptRecordError, KafkaLogError
from storage_core.format import decode_run
from storage_core.format.batch_header import LOG_OVERHEAD, BatchField, read_field
from storage_core.format.columnar import DecodedRun
from storage_core.format.log_input_stream import max_batch_read_size
from storage_core.log import LogSegment, LogView, bases_in_range

from .catalog import PartitionInfo, info_of, open_partition, partition_info, segments_for
from .offsets import EARLIEST, LATEST

logger = logging.getLogger(__name__)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))


def spark_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (``KafkaRecordToRowConverter.kafkaSchema``), every field
    nullable, plus ``headers`` with ``includeHeaders``."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark checks the first yielded batch against (``to_arrow_schema``)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema(include_headers), timezone="UTC")


class DataLossError(KafkaLogError):
    """Offsets a query needs are no longer on disk (retention, truncation, a recreated topic),
    raised with ``failOnDataLoss=true`` (Spark's KAFKA_DATA_LOSS conditions)."""


DATA_LOSS_HINT = (" Some data may have been lost because they are not available in Kafka any "
                  "more; either the data was aged out by Kafka or the topic may have been deleted "
                  "before all the data in the topic was processed. If you don't want your "
                  "streaming query to fail on such cases, set the source option failOnDataLoss "
                  "to false.")


@dataclass(frozen=True)
class KafkaLogInputPartition(InputPartition):
    """``[start, end)`` of ``topic``-``partition`` at ``path``; ``segments`` are the base offsets
    of the segment files the range touches, found by the driver (so a task opens nothing
    else)."""

    topic: str
    partition: int
    path: str
    start: int
    end: int
    segments: tuple[int, ...]
    earliest: int = 0             # the log start offset when the range was planned
    isolation: str = "read_uncommitted"
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_bytes: int = 4 << 20
    topic_id: str | None = None   # the partition's topic id when planned (partition.metadata)


def read_partition(p: KafkaLogInputPartition) -> Iterator[pa.RecordBatch]:
    schema = arrow_schema(p.include_headers)
    for table in _tables(p):
        if table.num_rows:
            yield from to_spark_batches(table, p.topic, p.partition, schema, p.include_headers)


def _resolve(p: KafkaLogInputPartition, info: PartitionInfo | None = None) -> KafkaLogInputPartition:
    """Bind ``earliest`` (-2) and ``latest`` (-1) to the partition as it is now (``info``,
    read from the partition's open log, else from an open of its own)."""
    if info is None:
        info = partition_info(Path(p.path), p.isolation)
    start = info.earliest if p.start == EARLIEST else p.start
    end = info.latest if p.end == LATEST else p.end
    if start > end:
        raise KafkaLogError(
            f"The resolved start offset {start} is greater than the resolved end offset {end} "
            f"for topic {p.topic} partition {p.partition}.")
    return replace(p, start=start, end=end, earliest=info.earliest,
                   segments=segments_for(info, max(start, info.earliest), end))


def _recreated_since_planning(p: KafkaLogInputPartition) -> bool:
    """The directory holds another topic than the one planned (the topic was deleted and
    recreated since): the planned range is gone; fail, or skip it with a warning."""
    if p.topic_id is None:
        return False
    from storage_core.checkpoint import PartitionMetadataFile, topic_id_to_str

    try:
        now = topic_id_to_str(PartitionMetadataFile(Path(p.path)).read())
    except (OSError, KafkaLogError):
        return False                     # gone or unreadable: the offsets tell
    if now == p.topic_id:
        return False
    _data_lost(p, p.start, p.end, f"the topic was deleted and recreated: topic id {p.topic_id} "
                                  f"when planned, {now} now")
    return True


def _tables(p: KafkaLogInputPartition) -> Iterator[pa.Table]:
    if p.isolation == "read_committed":
        yield from _committed_tables(p)
        return
    if p.start < 0 or p.end < 0:
        p = _resolve(p)
    if p.start >= p.end or _recreated_since_planning(p):
        return
    offset, view = p.start, LogView(p.path)
    # the log start now: a planned DataFrame may run again after retention or deleteRecords
    earliest = max(p.earliest, view.log_start_offset())
    if offset < earliest:
        offset = _data_lost(p, offset, min(earliest, p.end), "the log starts after it")
    planned = list(p.segments)
    i, replanned = 0, 0
    while i < len(planned):
        base = planned[i]
        try:
            seg = view.open_segment(base)          # positioned reads, never a map: SIGBUS-safe
        except FileNotFoundError:
            current = view.segments_holding(offset) if replanned < 3 else None
            if current is not None:
                # the cleaner replaced it (offsets never change, segments may be merged): read
                # on from the segment that holds the offset now
                replanned += 1
                planned[i:] = bases_in_range(current, offset, p.end) or [current[-1]]
                continue
            # deleted by retention since planning: the rest of the range starts later
            nxt = planned[i + 1] if i + 1 < len(planned) else p.end
            offset = _data_lost(p, offset, min(nxt, p.end), "its segment was deleted")
            i += 1
            continue
        i += 1
        try:
            found = seg.translate_offset(offset)         # the offset index, then a short scan
            position = found.position if found is not None else seg.size
            while offset < p.end and position < seg.size:
                # read on from where the last read stopped: one positioned read of about
                # max_bytes, decoded without copying (a partial last batch is read again next)
                first = max(p.max_bytes, found.size if found is not None else 0)
                data = seg.read_bytes(position, first)
                run = _decode(seg, data, position, p.max_bytes)
                if run.batches == 0:
                    if len(data) < first:
                        break                            # a batch still being written
                    data = seg.read_bytes(position, _batch_size(data))
                    run = _decode(seg, data, position, p.max_bytes)
                    if run.batches == 0:
                        break
                found = None
                position += run.next_position
                yield _visible(run.table, offset, p.end)
                offset = max(offset, run.next_offset)
        finally:
            seg.close(final_entries=False)
        if offset >= p.end:
            return
    if offset < p.end:
        _data_lost(p, offset, p.end, "the log ends before it")


def _committed_tables(p: KafkaLogInputPartition) -> Iterator[pa.Table]:
    with open_partition(Path(p.path)) as log:
        if p.start < 0 or p.end < 0:
            p = _resolve(p, info_of(log, p.isolation))   # bound at this open: not a second one
        if p.start >= p.end or _recreated_since_planning(p):
            return
        offset = p.start
        if offset < log.log_start_offset:
            offset = _data_lost(p, offset, min(log.log_start_offset, p.end),
                                "the log starts after it")
        end = min(p.end, log.log_end_offset)
        while offset < end:
            r = log.fetch(offset, max_bytes=p.max_bytes, max_offset=end,
                           isolation="read_committed")
            if r.next_offset <= offset:
                break                                     # the last stable offset stops here
            yield r.table
            offset = r.next_offset
        if p.end > log.log_end_offset:
            _data_lost(p, log.log_end_offset, p.end, "the log ends before it")


def _decode(seg: LogSegment, data: bytes, position: int, max_bytes: int) -> DecodedRun:
    """The batches of ``data`` (read at ``position`` of ``seg``), decoded up to the batch whose
    records reach ``max_bytes`` (a decompression bomb's table stays bounded; the next read
    starts after it). A size claim above the readers' limit is refused before anything is
    read for it; errors name the segment file and the byte position in it."""
    try:
        return decode_run(data, max_decoded=max_bytes, check_order=True,
                          max_batch_size=max_batch_read_size(seg.config.max_message_bytes))
    except CorruptRecordError as e:
        raise e.located(source=str(seg.log_path), base_position=position) from e.__cause__


def _batch_size(data: bytes) -> int:
    """The size of the batch at the start of ``data`` (its length field + the log overhead)."""
    return int(read_field(data, [0], BatchField.LENGTH)[0]) + LOG_OVERHEAD


def _visible(table: pa.Table, start: int, end: int) -> pa.Table:
    """The rows of ``[start, end)`` (a batch may begin below ``start``), control records out.
    Offsets increase along a log, so the range is one zero-copy slice; only control records
    (rare: transaction markers) need a filter."""
    offsets = table.column("offset").to_numpy()
    lo, hi = np.searchsorted(offsets, [start, end], "left").tolist()
    table = table.slice(lo, hi - lo)
    control = table.column("isControl")
    if control.null_count == 0 and pc.any(control).as_py():
        table = table.filter(pc.invert(control))
    return table


def _data_lost(p: KafkaLogInputPartition, start: int, end: int, why: str) -> int:
    """Offsets ``[start, end)`` are gone: fail (``failOnDataLoss``) or warn and go on at ``end``."""
    message = (f"Could not read records in offset [{start}, {end}) for topic partition "
               f"{p.topic}-{p.partition} ({why}; directory {p.path}).")
    if p.fail_on_data_loss:
        raise DataLossError(message + DATA_LOSS_HINT)
    logger.warning("%s Skipping them (failOnDataLoss=false).", message)
    return end


def to_spark_batches(table: pa.Table, topic: str, partition: int, schema: pa.Schema,
                     include_headers: bool) -> Iterator[pa.RecordBatch]:
    """Storage rows (``storage_core.format.SCHEMA``) to Spark's Kafka columns, column-wise."""
    n = table.num_rows
    ms = table.column("timestamp").cast(pa.int64())
    try:
        micros = pc.multiply_checked(ms, 1000)
    except pa.ArrowInvalid:
        bad = next(v for v in ms.to_pylist() if v is not None and abs(v) > LONG_MAX // 1000)
        raise KafkaLogError(
            f"Malformed record timestamp {bad} in topic {topic} partition {partition}: too large "
            f"to convert from milliseconds to microseconds (KAFKA_MALFORMED_RECORD_TIMESTAMP)") \
            from None
    columns = [
        table.column("key"), table.column("value"),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        table.column("offset"),
        micros.cast(pa.timestamp("us", tz="UTC")),
        table.column("timestampType"),
    ]
    if include_headers:
        headers = table.column("headers")
        empty = pc.equal(pc.list_value_length(headers), 0)
        # a record without headers reads null, not an empty list (KafkaRecordToRowConverter)
        columns.append(pc.if_else(empty, pa.scalar(None, headers.type), headers)
                       .cast(schema.field("headers").type))
    out = pa.Table.from_arrays(columns, schema=schema)
    yield from out.to_batches()

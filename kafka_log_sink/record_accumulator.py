"""Kafka's ``RecordAccumulator`` for the sink's tasks: a partition's records gathered across
Spark's Arrow batches until they fill record batches of ``batch.size``.

Spark hands a task its rows 10,000 at a time (``spark.sql.execution.arrow.maxRecordsPerBatch``).
Split over a topic's partitions, each partition's share of one Spark batch is small: with a
``partition`` column over 4 partitions, 2,500 records of ~290 KB, where ``batch.size`` allows
1 MiB. Encoded as it came, every share would be a record batch of its own, and every batch costs
the task a call into the encoder and the commit a header to read back from the disk, number and
write back (``staged_append``). A producer fills its batches per partition
(``RecordAccumulator.append``), and so does the sink: the records' bytes are gathered once, by a
compiled copy, into the partition's buffers (``BinaryBuilder``), and encoded from there when
they fill a few batches. A share of at least ``batch.size`` is encoded straight from the Spark
batch, as before; rows with headers are not gathered (the encoder takes them from the batch).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from storage_core.format.columnar import BinaryBuilder

FLUSH_BYTES = 3 << 20       # a partition's gathered bytes encoded at once: three batches of
                            # batch.size's default (1 MiB) and a rest, within one 4 MiB direct
                            # staging chunk (staging_file), so they are laid out in place there
TASK_LIMIT_BYTES = 64 << 20  # the buffers of all of a task's partitions: past it, all are encoded
                             # and the buffers freed (a task's memory stays bounded whatever the
                             # partition count)
COLUMNS = ("key", "value", "timestamp")


class PartitionRecords:
    """One partition's gathered records: key and value bytes, timestamps (ms, null = none)."""

    def __init__(self, columns: tuple[str, ...]) -> None:
        self.columns = columns
        self.rows = 0
        self._key = BinaryBuilder() if "key" in columns else None
        self._value = BinaryBuilder()
        self._ts: list[pa.Array] = []

    @property
    def nbytes(self) -> int:
        return self._value.nbytes + (self._key.nbytes if self._key is not None else 0)

    @property
    def capacity(self) -> int:
        """Bytes of the buffers kept (reused from one drain to the next)."""
        return self._value.capacity + (self._key.capacity if self._key is not None else 0)

    def append(self, rows: pa.Table, picked: np.ndarray | None) -> None:
        """Gather ``rows`` (of ``picked`` only, in that order, when given): the columns of
        ``_record_columns``, key, value and timestamp."""
        if self._key is not None:
            self._key.extend(rows.column("key"), picked)
        self._value.extend(rows.column("value"), picked)
        if "timestamp" in self.columns:
            ts = rows.column("timestamp")
            self._ts.append(ts.take(pa.array(picked)) if picked is not None else ts)
        self.rows += rows.num_rows if picked is None else len(picked)

    def drain(self) -> pa.Table:
        """The gathered records as a table for the encoder (valid until the next ``append``);
        empty after."""
        cols = {}
        if self._key is not None:
            cols["key"] = self._key.finish()
        cols["value"] = self._value.finish()
        if self._ts:
            cols["timestamp"] = pa.chunked_array([c for t in self._ts for c in
                                                  (t.chunks if isinstance(t, pa.ChunkedArray) else [t])],
                                                 pa.int64())
            self._ts = []
        self.rows = 0
        return pa.table(cols)

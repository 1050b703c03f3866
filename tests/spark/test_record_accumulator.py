"""The tasks' record accumulator (``kafka_log_sink.record_accumulator``): a partition's shares
of many Spark batches are encoded together, into batches of ``batch.size`` as one producer
would fill them, in the order the rows came, nulls and timestamps as given. No Spark needed."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kafka_log_sink import writer
from kafka_log_sink.options import parse_sink_options
from kafka_log_sink.writer import ProducerIdentity, stage_all
from storage_core.format import decode_run, encode_batches
from storage_core.format.log_input_stream import scan_batches

PRODUCER = ProducerIdentity(77, 3)


def rows_table(n: int, partitions: int) -> pa.Table:
    """Rows whose partition cycles row by row (every Spark batch writes to every partition),
    with null keys, null values (tombstones) and explicit timestamps."""
    ids = np.arange(n)
    keys = pa.array([None if i % 7 == 0 else b"key-%d" % i for i in ids], pa.binary())
    values = pa.array([None if i % 11 == 0 else (b"v%d-" % i) * (1 + i % 40) for i in ids],
                      pa.binary())
    return pa.table({"key": keys, "value": values,
                     "timestamp": pa.array(10**12 + ids * 3, pa.int64()).cast(pa.timestamp("ms")),
                     "partition": pa.array(ids % partitions, pa.int32())})


def staged(tmp_path, table: pa.Table, batch_rows: int, **options) -> dict[int, bytes]:
    opts = parse_sink_options({"path": str(tmp_path / "data"), "topic": "t", "numPartitions": "4",
                               "stagingLocation": str(tmp_path / "staging"), **options})
    message = stage_all(opts, PRODUCER, "w", 0, iter(table.to_batches(batch_rows)))
    assert message.rows == table.num_rows
    out = {}
    for run in message.runs:
        out[run.partition] = open(run.path, "rb").read()
        assert run.records == int(scan_batches(out[run.partition]).records_count.sum())
    return out


def partition_rows(table: pa.Table, p: int) -> pa.Table:
    return table.filter(pa.compute.equal(table.column("partition"), p)).drop_columns(["partition"])


def test_shares_of_many_spark_batches_make_the_batches_one_encode_of_the_partitions_rows(tmp_path):
    """240 Spark batches of 250 rows over 4 partitions (2 MB a partition, under the flush
    size): each partition's file is exactly what encoding all its rows at once gives (batches
    filled to batch.size), not a batch per share."""
    table = rows_table(60_000, 4)
    files = staged(tmp_path, table, 250, **{"batch.size": "65536"})
    assert sorted(files) == [0, 1, 2, 3]
    for p, raw in files.items():
        mine = partition_rows(table, p)
        expected = bytes(encode_batches(mine, max_batch_bytes=65536, producer_id=77,
                                        producer_epoch=3, base_sequence=0, transactional=True))
        assert raw == expected, p
        scan = scan_batches(raw)
        assert len(scan) < 240 // 4            # far fewer batches than shares (240)
        assert (scan.size[:-1] > 65536 * 0.9).all()


@pytest.mark.parametrize("limit", ["flush", "task"])
def test_records_encoded_in_several_pieces_keep_their_order_and_fields(tmp_path, monkeypatch, limit):
    """A partition's gathered records encoded each time they pass the flush size (or when the
    task's gathered bytes pass its limit): every row is in its partition's file once, in the
    order it came, key, value, nulls and timestamp as given; zstd as well as none."""
    monkeypatch.setattr(writer, "FLUSH_BYTES" if limit == "flush" else "TASK_LIMIT_BYTES", 40_000)
    table = rows_table(30_000, 4)
    for compression in ("none", "zstd"):
        files = staged(tmp_path / compression, table, 200, compression=compression,
                       **{"batch.size": "16384"})
        for p, raw in files.items():
            scan = scan_batches(raw, verify=True)
            assert len(scan) > 5                # several encodes
            got = decode_run(raw).table
            mine = partition_rows(table, p)
            assert got.column("key").to_pylist() == mine.column("key").to_pylist()
            assert got.column("value").to_pylist() == mine.column("value").to_pylist()
            assert (got.column("timestamp").cast(pa.int64()).to_pylist()
                    == mine.column("timestamp").cast(pa.int64()).to_pylist())


def test_a_share_of_a_batch_or_more_is_encoded_straight_after_the_partitions_earlier_rows(tmp_path):
    """Small shares gathered, then a whole Spark batch for one partition (bigger than
    batch.size, encoded from the batch): the partition's rows stay in order."""
    small = rows_table(2_000, 4)
    big = rows_table(3_000, 1).drop_columns(["partition"])
    big = big.append_column("partition", pa.array(np.zeros(3_000), pa.int32()))
    table = pa.concat_tables([small, big, small])
    opts = parse_sink_options({"path": str(tmp_path / "data"), "topic": "t", "numPartitions": "4",
                               "stagingLocation": str(tmp_path / "staging"), "batch.size": "20000"})
    batches = [*small.to_batches(500), *big.to_batches(), *small.to_batches(500)]
    message = stage_all(opts, PRODUCER, "w", 0, iter(batches))
    run = next(r for r in message.runs if r.partition == 0)
    got = decode_run(open(run.path, "rb").read()).table
    assert got.column("value").to_pylist() == partition_rows(table, 0).column("value").to_pylist()

"""The driver's reading of staged files (``commit._staged_chunks``): whole batches in pieces of
a bounded size, big batches whole, damage refused with the file named. No Spark needed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from kafka_log_sink.commit import _staged_chunks, number_sequences
from storage_core.errors import CorruptRecordError, KafkaLogError
from storage_core.format import decode_run, encode_batches
from storage_core.format.log_input_stream import scan_batches


def staged(tmp_path: Path, values: list[bytes], batch_bytes: int) -> tuple[Path, bytes]:
    raw = bytes(encode_batches(pa.table({"value": pa.array(values, pa.binary())}),
                               max_batch_bytes=batch_bytes))
    path = tmp_path / "t-0.batches"
    path.write_bytes(raw)
    return path, raw


def test_chunks_are_whole_batches_of_bounded_size_and_cover_the_file(tmp_path):
    path, raw = staged(tmp_path, [b"v%05d" % i * 10 for i in range(5000)], 1024)
    chunks = list(_staged_chunks(path, len(raw), chunk=4096))
    assert b"".join(chunks) == raw
    assert len(chunks) > 10
    for c in chunks:
        assert len(c) <= 4096
        assert scan_batches(c).end == len(c)          # nothing cut inside a batch


def test_a_batch_larger_than_the_chunk_comes_whole_and_the_next_chunks_shrink_back(tmp_path):
    big = [b"x" * 50_000]
    small = [b"s%04d" % i for i in range(2000)]
    raw = b"".join(bytes(encode_batches(pa.table({"value": pa.array(v, pa.binary())}),
                                        max_batch_bytes=1024)) for v in (small, big, small))
    path = tmp_path / "t-0.batches"
    path.write_bytes(raw)
    chunks = list(_staged_chunks(path, len(raw), chunk=4096))
    assert b"".join(chunks) == raw
    assert max(len(c) for c in chunks) > 50_000
    assert sum(1 for c in chunks if len(c) > 4096) == 1


def test_numbered_chunks_decode_with_consecutive_sequences(tmp_path):
    path, raw = staged(tmp_path, [b"v%d" % i for i in range(3000)], 512)
    seq, firsts, counts = 7, [], []
    for c in _staged_chunks(path, len(raw), chunk=2048):
        seq = number_sequences(c, seq)
        scan = scan_batches(c, verify=True)                          # CRCs recomputed
        firsts.extend(scan.column("base_sequence").tolist())
        counts.extend(scan.records_count.tolist())
        assert decode_run(c).table.num_rows == sum(scan.records_count.tolist())
    assert firsts[0] == 7 and seq == 7 + 3000
    assert all(b == a + n for a, b, n in zip(firsts, firsts[1:], counts))


def test_a_torn_staged_file_is_refused_naming_it(tmp_path):
    path, raw = staged(tmp_path, [b"v%d" % i for i in range(1000)], 512)
    path.write_bytes(raw[:-10])
    with pytest.raises(KafkaLogError, match="t-0.batches.*not a whole batch"):
        list(_staged_chunks(path, len(raw), chunk=2048))


def test_a_damaged_staged_file_fails_its_crc_before_numbering(tmp_path):
    path, raw = staged(tmp_path, [b"v%d" % i for i in range(1000)], 512)
    damaged = bytearray(raw)
    damaged[len(raw) // 2] ^= 0xFF
    path.write_bytes(damaged)
    with pytest.raises(CorruptRecordError, match="t-0.batches"):
        list(_staged_chunks(path, len(raw), chunk=2048))

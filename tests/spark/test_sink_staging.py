"""The driver's reading of staged files (``commit._staged_chunks``): whole batches in pieces of
a bounded size, big batches whole, damage refused with the file named. No Spark needed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from fifo_guard import promptly

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


# ---------------------------------------------------------------- the commit's staged append


def test_crc_after_field_change_matches_a_full_recomputation():
    import os
    import struct

    import numpy as np

    from storage_core.format.crc_patch import crc_after_field_change
    from storage_core.format.record_batch import crc32c

    crcs, olds, news, after, expected = [], [], [], [], []
    for length in (0, 1, 3, 4, 5, 100, 4096, 1 << 20):
        msg = bytearray(os.urandom(length + 20))
        old = struct.unpack_from(">i", msg, 9)[0]
        new = (old * 7 + 12345) % 2**31
        crcs.append(crc32c(msg))
        struct.pack_into(">i", msg, 9, new)
        olds.append(old)
        news.append(new)
        after.append(len(msg) - 13)
        expected.append(crc32c(msg))
    got = crc_after_field_change(np.array(crcs), np.array(olds), np.array(news), np.array(after))
    assert got.tolist() == expected


def _stage_and_commit(tmp_path: Path, name: str, fast: bool, monkeypatch, **options) -> Path:
    from kafka_log_sink import commit
    from kafka_log_sink.options import parse_sink_options
    from kafka_log_sink.staged_append import can_append_staged
    from kafka_log_sink.writer import ProducerIdentity, stage_all

    monkeypatch.setattr(commit, "can_append_staged",
                        can_append_staged if fast else (lambda config: False))
    rows = 20_000
    table = pa.table({"key": pa.array([b"k%d" % i for i in range(rows)]),
                      "value": pa.array([b"v" * (i % 300) for i in range(rows)]),
                      "timestamp": pa.array(list(range(10**12, 10**12 + rows)), pa.int64())
                      .cast(pa.timestamp("ms"))})
    root = tmp_path / name
    opts = parse_sink_options({"path": str(root), "topic": "t", "numPartitions": "2",
                               "stagingLocation": str(tmp_path / f"staging-{name}"),
                               "checkpointLocation": str(tmp_path / f"chk-{name}"), **options})
    producer = ProducerIdentity(4242, 1)
    for batch_id in range(3):
        messages = [stage_all(opts, producer, "w", batch_id,
                              iter(table.slice(i * rows // 2, rows // 2).to_batches(3000)))
                    for i in range(2)]
        commit.SinkCoordinator(opts).commit([r for m in messages for r in m.runs], batch_id,
                                            producer)
    return root


def _data_batches(path: Path) -> bytes:
    raw = path.read_bytes()
    scan = scan_batches(raw)
    return b"".join(raw[p:p + s] for p, s, a in zip(scan.position.tolist(), scan.size.tolist(),
                                                     scan.column("attributes").tolist())
                    if not a & 0x20)


@pytest.mark.parametrize("options", [{}, {"segment.bytes": "300000", "batch.size": "50000",
                                      "index.interval.bytes": "999"}],
                         ids=["one-segment", "rolling"])
def test_staged_append_writes_what_the_validated_path_writes(tmp_path, monkeypatch, options):
    """The commit's kernel-copy append (headers numbered in the staged file, CRCs patched)
    against ``Log.append_raw`` of the same staged bytes: the same data batches byte for byte,
    the same segments and offset indexes; the storage engine's verification passes."""
    from storage_core.tools.cli import main as cli_main

    fast = _stage_and_commit(tmp_path, "fast", True, monkeypatch, **options)
    slow = _stage_and_commit(tmp_path, "slow", False, monkeypatch, **options)
    fast_files = sorted(p.relative_to(fast) for p in fast.rglob("*") if p.is_file())
    assert fast_files == sorted(p.relative_to(slow) for p in slow.rglob("*") if p.is_file())
    logs = [p for p in fast_files if p.suffix == ".log"]
    assert len(logs) > (6 if options else 1)
    for rel in logs:
        assert _data_batches(fast / rel) == _data_batches(slow / rel), rel
    for rel in (p for p in fast_files if p.suffix == ".index"):
        assert (fast / rel).read_bytes() == (slow / rel).read_bytes(), rel
    assert cli_main(["verify", str(fast)]) == 0
    decoded = pa.concat_tables(decode_run(_data_batches(fast / rel)).table for rel in logs)
    assert decoded.num_rows == 3 * 20_000


def test_a_staged_file_changed_after_its_task_is_refused_before_anything_is_appended(
        tmp_path, monkeypatch):
    from kafka_log_sink.commit import SinkCoordinator
    from kafka_log_sink.options import parse_sink_options
    from kafka_log_sink.writer import ProducerIdentity, stage_all
    from storage_core.log import Log

    opts = parse_sink_options({"path": str(tmp_path / "out"), "topic": "t",
                               "stagingLocation": str(tmp_path / "staging")})
    producer = ProducerIdentity(99)
    table = pa.table({"value": pa.array([b"v%d" % i for i in range(5000)])})
    for damage in ("flip", "truncate"):
        message = stage_all(opts, producer, "w", 0, iter(table.to_batches(1000)))
        (run,) = message.runs
        raw = bytearray(Path(run.path).read_bytes())
        if damage == "flip":
            raw[len(raw) // 2] ^= 0x01
        else:
            raw = raw[:-7]
        Path(run.path).write_bytes(raw)
        with pytest.raises(KafkaLogError, match=r"t-0\.batches"):
            SinkCoordinator(opts).commit([run], 0, producer)
        with Log.open(tmp_path / "out" / "t-0") as log:
            # nothing appended: no record, no marker, no producer state for the refused producer
            assert (log.log_end_offset, log.size) == (0, 0), damage
            assert 99 not in log.producer_state.active_producers, damage
            assert log.last_stable_offset == 0


def test_a_copy_that_fails_half_way_leaves_the_segment_as_it_was(tmp_path, monkeypatch):
    """``LogSegment.append_from_file``: a kernel copy that fails (disk full, I/O error) after
    some bytes is undone, so the segment never holds a partial batch behind its size."""
    import os

    from storage_core.log import segment as segment_module
    from storage_core.config import LogConfig
    from storage_core.log import LogSegment

    raw = bytes(encode_batches(pa.table({"value": pa.array([b"v%d" % i for i in range(3000)])}),
                               max_batch_bytes=2048))
    src = tmp_path / "staged"
    src.write_bytes(raw)
    scan = scan_batches(raw)
    # the shallow offset of the max timestamp: the last offset of the first batch holding it
    shallow = int(scan.last_offset[int(scan.max_timestamp.argmax())])
    seg = LogSegment.open(tmp_path, 0, LogConfig())

    def failing_copy(src_fd, src_pos, dst_fd, dst_pos, n):
        os.pwrite(dst_fd, raw[:n // 2], dst_pos)
        raise OSError(28, "No space left on device")

    # fault injection: the kernel-side copy segment.py calls (storage_core.log.files.copy_all)
    monkeypatch.setattr(segment_module, "copy_all", failing_copy)
    fd = os.open(src, os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            seg.append_from_file(fd, 0, len(raw), int(scan.last_offset[-1]),
                                 int(scan.max_timestamp.max()), shallow, scan)
        assert seg.size == 0 and os.path.getsize(seg.log_path) == 0
        monkeypatch.undo()
        seg.append_from_file(fd, 0, len(raw), int(scan.last_offset[-1]),
                             int(scan.max_timestamp.max()), shallow, scan)
        assert seg.log_path.read_bytes() == raw and seg.offset_index.entries > 0
    finally:
        os.close(fd)
        seg.close()


def test_staged_files_renamed_in_as_segments_hold_what_the_validated_path_writes(
        tmp_path, monkeypatch):
    """``stagedSegmentMinBytes=1``: every staged file becomes a segment of its own
    (``Log.append_segment_file``, renamed, not copied): per partition the same data batches
    byte for byte as ``Log.append_raw`` of the same staged bytes, in as many more segments as
    there were staged files, the staged files gone, and the storage engine's verification
    (every offset- and time-index entry checked against the log) passes."""
    from storage_core.tools.cli import main as cli_main

    fast = _stage_and_commit(tmp_path, "renamed", True, monkeypatch,
                             stagedSegmentMinBytes="1", **{"index.interval.bytes": "999"})
    slow = _stage_and_commit(tmp_path, "slow", False, monkeypatch,
                             **{"index.interval.bytes": "999"})
    for part in ("t-0", "t-1"):
        fast_logs = sorted((fast / part).glob("*.log"))
        slow_logs = sorted((slow / part).glob("*.log"))
        # 3 commits of 2 tasks (the markers, stamped now, roll by time after records of 2001)
        assert sum(1 for p in fast_logs if _data_batches(p)) == 3 * 2
        assert sum(1 for p in slow_logs if _data_batches(p)) < 3 * 2
        assert (b"".join(_data_batches(p) for p in fast_logs)
                == b"".join(_data_batches(p) for p in slow_logs))
    assert not list((tmp_path / "staging-renamed").rglob("*.batches"))
    assert cli_main(["verify", str(fast)]) == 0


@pytest.mark.parametrize("segment_min", ["1", "1000000000"], ids=["renamed-in", "copied"])
def test_a_damaged_later_staged_file_fails_the_partition_before_its_first_is_appended(
        tmp_path, segment_min):
    """Two tasks' staged files for one partition, the second damaged: the commit refuses it
    naming the file, and the partition holds nothing of the batch, not even the first task's
    intact file (every file is checked before the first is appended); the first file is still
    where its task left it (not renamed into the log)."""
    from kafka_log_sink.commit import SinkCoordinator
    from kafka_log_sink.options import parse_sink_options
    from kafka_log_sink.writer import ProducerIdentity, stage_all
    from storage_core.log import Log

    opts = parse_sink_options({"path": str(tmp_path / "out"), "topic": "t",
                               "stagingLocation": str(tmp_path / "staging"),
                               "stagedSegmentMinBytes": segment_min})
    producer = ProducerIdentity(98)
    table = pa.table({"value": pa.array([b"v%d" % i for i in range(5000)])})
    (good,), (bad,) = (stage_all(opts, producer, "w", 0, iter(table.to_batches(1000))).runs
                       for _ in range(2))
    raw = bytearray(Path(bad.path).read_bytes())
    raw[len(raw) // 3] ^= 0x10
    Path(bad.path).write_bytes(raw)
    with pytest.raises(KafkaLogError, match=r"t-0\.batches"):
        SinkCoordinator(opts).commit([good, bad], 0, producer)
    with Log.open(tmp_path / "out" / "t-0") as log:
        assert log.log_end_offset == 0
    assert Path(good.path).exists()


def sink_state_file(tmp_path: Path, name: str, doc: bytes):
    """Sink options with a checkpoint location, and its state file ``name`` holding ``doc``."""
    from kafka_log_sink.options import parse_sink_options

    opts = parse_sink_options({"path": str(tmp_path / "out"), "topic": "t",
                               "checkpointLocation": str(tmp_path / "chk")})
    path = tmp_path / "chk" / "kafkalog-sink" / name
    path.parent.mkdir(parents=True)
    path.write_bytes(doc)
    return opts, path


GOOD_TXN = {"batch_id": 3, "state": "complete", "partitions": [["t", 0]], "producer_id": 5, "epoch": 1}


@pytest.mark.parametrize("doc", [
    b"[]", b"null", b"{}", b"[" * 100_000,
    json.dumps({**GOOD_TXN, "batch_id": "x"}).encode(),
    json.dumps({**GOOD_TXN, "batch_id": 3.7}).encode(),
    json.dumps({**GOOD_TXN, "epoch": float("inf")}).encode(),
    json.dumps({**GOOD_TXN, "partitions": [["t"]]}).encode(),
    json.dumps({**GOOD_TXN, "partitions": None}).encode(),
    json.dumps({**GOOD_TXN, "state": "weird"}).encode(),
    json.dumps({**GOOD_TXN, "producer_id": -5}).encode(),
], ids=["list", "null", "no-keys", "deep", "str-int", "float", "inf", "short-pair", "null-partitions",
        "unknown-state", "negative-producer"])
def test_a_damaged_transaction_log_is_refused_naming_it(tmp_path, doc):
    """Found by fuzzing: a ``txn.json`` that is valid JSON of another shape escaped as
    ``KeyError``/``TypeError``/``ValueError``/``OverflowError`` (``RecursionError`` when nested
    deep), and an unknown state was taken for "nothing in flight". Now the commit refuses it
    with a ``KafkaLogError`` naming the file, and leaves the file as it was."""
    from kafka_log_sink.commit import SinkCoordinator
    from kafka_log_sink.writer import ProducerIdentity

    opts, txn = sink_state_file(tmp_path, "txn.json", doc)
    with pytest.raises(KafkaLogError, match=r"txn\.json"):
        SinkCoordinator(opts).commit([], 4, ProducerIdentity(5, 1))
    assert txn.read_bytes() == doc


@pytest.mark.parametrize("doc", [b"[" * 100_000, b'{"producer_id": Infinity}', b'{"producer_id": 1.5}',
                                 b'{"producer_id": true}', b'{"producer_id": -7}',
                                 b'{"producer_id": 7, "epoch": 40000}', b"[]"],
                         ids=["deep", "inf", "float", "bool", "negative", "epoch-not-a-short", "list"])
def test_a_damaged_producer_identity_is_refused_naming_it(tmp_path, doc):
    """Found by fuzzing: ``producer.json`` nested deep or holding ``Infinity`` escaped as
    ``RecursionError``/``OverflowError``; a float, a bool or a negative id was taken (``int()``),
    so the query would have written batches under another producer id than its own."""
    from kafka_log_sink.commit import load_producer

    opts, ident = sink_state_file(tmp_path, "producer.json", doc)
    with pytest.raises(KafkaLogError, match=r"producer\.json"):
        load_producer(opts)
    assert ident.read_bytes() == doc


@pytest.mark.parametrize("name", ["producer.json", "txn.json"])
def test_a_huge_sink_state_file_is_refused_by_its_size_unread(tmp_path, name):
    """A state file longer than its format can be (a sparse file of 256 MiB: a directory the
    sink did not write) is refused naming it and the position where it passed its bound, before
    being read whole or parsed; and left as it was."""
    from kafka_log_sink.commit import SinkCoordinator, load_producer
    from kafka_log_sink.staging_store import STATE_FILE_MAX_BYTES
    from kafka_log_sink.writer import ProducerIdentity

    opts, path = sink_state_file(tmp_path, name, b'{"producer_id": 5}')
    os.truncate(path, 256 << 20)
    with pytest.raises(KafkaLogError, match=f"{path}, position {STATE_FILE_MAX_BYTES[name]}"):
        if name == "producer.json":
            load_producer(opts)
        else:
            SinkCoordinator(opts).commit([], 4, ProducerIdentity(5, 1))
    assert path.stat().st_size == 256 << 20


def test_a_state_file_in_a_store_is_read_to_its_bound_only(tmp_path):
    """The sink's state in a store (here pyarrow's local file system behind a URI): an object
    longer than its bound is refused naming it and the position, one byte past it read."""
    from kafka_log_sink.staging_store import StagingStore

    store = StagingStore(f"file://{tmp_path}/stage", {})
    path = store.path("state", "txn.json")
    store.write(path, b"x" * 10)
    assert store.read(path, 10) == b"x" * 10 and store.read(path) == b"x" * 10
    with pytest.raises(KafkaLogError, match=f"longer than 9 bytes, .*{path} in .*, position 9"):
        store.read(path, 9)
    assert store.read(store.path("state", "none.json"), 9) is None


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_sink_state_file_that_is_no_regular_file_is_refused_promptly(tmp_path, kind):
    """A FIFO at ``txn.json`` was opened by ``read_bytes`` and blocked the commit forever;
    a directory gave ``IsADirectoryError``. Both are refused naming the path."""
    from kafka_log_sink.commit import SinkCoordinator
    from kafka_log_sink.writer import ProducerIdentity
    from storage_core.errors import UnsafeFileError

    opts, path = sink_state_file(tmp_path, "txn.json", b"")
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(UnsafeFileError) as raised:
        promptly(lambda: SinkCoordinator(opts).commit([], 4, ProducerIdentity(5, 1)), path,
                 what="the commit over a FIFO at txn.json")
    assert f"{path} is a {'FIFO' if kind == 'fifo' else 'directory'}, not a regular file" in str(raised.value)

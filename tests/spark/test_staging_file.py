"""The sink tasks' staged files (``kafka_log_sink.staging_file``): every byte in order, big
files sent to the disk directly (``O_DIRECT``) under fsync per commit, small ones through the
page cache, and a failed write failing the task."""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kafka_log_sink import staging_file
from kafka_log_sink.staging_file import ALIGN, StagingFile

CHUNK = 2 * ALIGN


def _direct_supported(directory: Path) -> bool:
    probe = directory / "o_direct_probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600))
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


def _pieces(seed: int, total: int) -> list[bytes]:
    rnd = random.Random(seed)
    out, size = [], 0
    while size < total:
        n = rnd.choice([0, 1, 7, ALIGN - 1, ALIGN, ALIGN + 1, CHUNK - 3, CHUNK, 3 * CHUNK + 5,
                        rnd.randrange(1, 5 * CHUNK)])
        out.append(rnd.randbytes(n))
        size += n
    return out


@pytest.mark.parametrize("direct", [True, False], ids=["may-go-direct", "buffered"])
@pytest.mark.parametrize("seed", range(4))
def test_a_staged_file_holds_every_byte_in_order(tmp_path, direct, seed):
    """Pieces of every awkward size (empty, one byte, around the alignment and the chunk,
    several chunks at once), unaligned in total: the file is their concatenation, and a file
    that may go direct went to the disk directly where the file system has ``O_DIRECT``."""
    pieces = _pieces(seed, 9 * CHUNK + 123)
    with ThreadPoolExecutor(1) as writer:
        staged = StagingFile(tmp_path / "t-0.batches", writer if direct else None, chunk=CHUNK)
        assert staged.may_go_direct is direct
        for p in pieces:
            staged.write(p)
        staged.finish()
    expected = b"".join(pieces)
    assert staged.size == len(expected)
    assert (tmp_path / "t-0.batches").read_bytes() == expected
    assert staged.written_direct is (direct and _direct_supported(tmp_path))


@pytest.mark.parametrize("seed", range(3))
def test_bytes_laid_out_in_a_reserved_buffer_are_appended_in_place(tmp_path, seed):
    """``reserve(n)`` lends the encoder the buffer's next n bytes (making room by handing the
    full part to the disk); ``write`` of that very array appends it without a copy, any other
    array is copied; a reservation not written is dropped. The file is every written piece
    in order, whichever way each came."""
    rnd = random.Random(seed)
    expected = []
    with ThreadPoolExecutor(1) as writer:
        staged = StagingFile(tmp_path / "t-0.batches", writer, chunk=4 * CHUNK)
        assert staged.reserve(4 * CHUNK) is None             # never more than fits a chunk
        for _ in range(60):
            n = rnd.randrange(1, 3 * CHUNK)
            piece = rnd.randbytes(n)
            how = rnd.choice(["reserved", "copied", "abandoned"])
            if how == "copied":
                staged.write(piece)
                expected.append(piece)
                continue
            view = staged.reserve(n)
            assert view is not None and len(view) == n
            view[:] = np.frombuffer(piece, np.uint8)
            if how == "reserved":
                staged.write(view)
                expected.append(piece)
            del view
        staged.finish()
    assert (tmp_path / "t-0.batches").read_bytes() == b"".join(expected)
    assert staged.size == sum(map(len, expected))


def test_a_buffered_file_lends_no_buffer(tmp_path):
    staged = StagingFile(tmp_path / "t-0.batches", None, chunk=CHUNK)
    assert staged.reserve(10) is None
    staged.close()


def test_a_small_file_stays_in_the_page_cache(tmp_path):
    """A file that never reaches a chunk is written when the task finishes, buffered: the
    commit copies it onto the active segment from the page cache."""
    with ThreadPoolExecutor(1) as writer:
        staged = StagingFile(tmp_path / "t-0.batches", writer, chunk=CHUNK)
        staged.write(b"x" * (CHUNK - 1))
        assert not (tmp_path / "t-0.batches").exists()      # still in memory
        staged.finish()
    assert not staged.written_direct
    assert (tmp_path / "t-0.batches").read_bytes() == b"x" * (CHUNK - 1)


@pytest.mark.parametrize("direct", [True, False], ids=["may-go-direct", "buffered"])
def test_a_failed_write_fails_the_task(tmp_path, monkeypatch, direct):
    """A write refused by the disk (here the second one: ENOSPC) is raised to the task, by
    ``write`` or at the latest by ``finish``; never swallowed by the writer thread."""
    calls = []
    real = os.pwrite

    def pwrite(fd, data, offset):
        calls.append(len(data))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(staging_file.os, "pwrite", pwrite)
    with ThreadPoolExecutor(1) as writer:
        staged = StagingFile(tmp_path / "t-0.batches", writer if direct else None, chunk=CHUNK)
        with pytest.raises(OSError, match="No space left"):
            for _ in range(8):
                staged.write(b"y" * CHUNK)
            staged.finish()
        staged.close()
    assert len(calls) >= 2


def test_a_chunk_must_be_aligned(tmp_path):
    with pytest.raises(ValueError, match="multiple of 4096"):
        StagingFile(tmp_path / "f", None, chunk=ALIGN + 1)


@pytest.mark.parametrize("chunk", [CHUNK, 16 * CHUNK], ids=["chunk-8k", "chunk-128k"])
def test_direct_staged_files_are_appended_like_buffered_ones(tmp_path, monkeypatch, chunk):
    """A task's big staged files under fsync per commit go to the disk directly
    (``written_direct``; their CRCs checked by the task, the commit reading only their
    headers): the commit appends exactly what it appends from buffered staging, the data
    batches byte for byte, and the storage engine's verification passes."""
    from kafka_log_sink.commit import SinkCoordinator
    from kafka_log_sink.options import parse_sink_options
    from kafka_log_sink.writer import ProducerIdentity, stage_all
    from storage_core.cli import main as cli_main
    from storage_core.format.log_input_stream import scan_batches

    rows = 30_000
    table = pa.table({"key": pa.array([b"k%d" % i for i in range(rows)]),
                      "value": pa.array([b"v" * (i % 200) for i in range(rows)]),
                      "timestamp": pa.array(list(range(10**12, 10**12 + rows)), pa.int64())
                      .cast(pa.timestamp("ms"))})
    producer = ProducerIdentity(5150, 2)

    def write(name: str, chunk: int, **options) -> tuple[Path, list]:
        monkeypatch.setattr(staging_file, "DIRECT_CHUNK", chunk)
        opts = parse_sink_options({"path": str(tmp_path / name), "topic": "t",
                                   "numPartitions": "3", "batch.size": "20000",
                                   "stagingLocation": str(tmp_path / f"staging-{name}"),
                                   "checkpointLocation": str(tmp_path / f"chk-{name}"),
                                   "index.interval.bytes": "999", **options})
        flags = []
        for batch_id in range(2):
            runs = [r for i in range(2) for r in stage_all(
                opts, producer, "w", batch_id,
                iter(table.slice(i * rows // 2, rows // 2).to_batches(2500))).runs]
            flags += [r.written_direct for r in runs]
            SinkCoordinator(opts).commit(runs, batch_id, producer)
        return tmp_path / name, flags

    # a chunk smaller than most encoder outputs (CHUNK) has them copied into the buffer;
    # a bigger one has them laid out in it by the encoder (StagingFile.reserve)
    direct, direct_flags = write("direct", chunk, stagedSegmentMinBytes="1")
    buffered, buffered_flags = write("buffered", 1 << 30, stagedSegmentMinBytes="1")
    copied, _ = write("copied", chunk)               # direct files copied onto the segment
    assert direct_flags and all(f is _direct_supported(tmp_path) for f in direct_flags)
    assert not any(buffered_flags)

    def data(root: Path, part: str) -> bytes:
        out = []
        for p in sorted((root / part).glob("*.log")):
            raw = p.read_bytes()
            scan = scan_batches(raw, verify=True)
            out += [raw[a:a + n] for a, n, attrs in zip(
                scan.position.tolist(), scan.size.tolist(), scan.column("attributes").tolist())
                if not attrs & 0x20]
        return b"".join(out)

    for part in ("t-0", "t-1", "t-2"):
        assert data(direct, part) == data(buffered, part) == data(copied, part)
        assert data(direct, part)
    for root in (direct, buffered, copied):
        assert cli_main(["verify", str(root)]) == 0

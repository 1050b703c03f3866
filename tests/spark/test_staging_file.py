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


def test_direct_writes_refused_by_the_file_system_fall_back_to_buffered(tmp_path, monkeypatch,
                                                                       caplog):
    """A file system that opens with ``O_DIRECT`` but refuses the writes (EINVAL: it wants a
    larger alignment): the refused chunk and the rest of the file go through the page cache,
    with a warning naming the file, and the file is complete."""
    import fcntl

    if not _direct_supported(tmp_path):
        pytest.skip("this file system has no O_DIRECT: nothing to refuse")
    real = os.pwrite
    refused = []

    def pwrite(fd, data, offset):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            refused.append(offset)
            raise OSError(22, "Invalid argument")
        return real(fd, data, offset)

    monkeypatch.setattr(staging_file.os, "pwrite", pwrite)
    pieces = _pieces(11, 6 * CHUNK + 99)
    with ThreadPoolExecutor(1) as writer:
        staged = StagingFile(tmp_path / "t-0.batches", writer, chunk=CHUNK)
        for p in pieces:
            staged.write(p)
        staged.finish()
    assert refused == [0]
    assert (tmp_path / "t-0.batches").read_bytes() == b"".join(pieces)
    assert "t-0.batches through the page cache" in caplog.text


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
    from storage_core.tools.cli import main as cli_main
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
            flags += [r.crcs_checked for r in runs]
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


# ====================================================================== SIGKILL trials

JOB = Path(__file__).resolve().parent / "direct_stage_job.py"
JOB_BATCHES, JOB_ROWS = 8, 6000


def _run_job(out: Path, chk: Path, kill_after: float | None = None) -> str:
    """Run the job; with ``kill_after``, SIGKILL it that many seconds after it starts (if it
    is still running). Returns what it printed when it ran to its end, else ""."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, str(JOB), str(out), str(chk), str(JOB_BATCHES),
                             str(JOB_ROWS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    if kill_after is not None:
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return ""
    started = time.monotonic()
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"job failed after {time.monotonic() - started:.1f} s:\n{stderr}"
    return stdout


def _committed_values(out: Path) -> list[str]:
    from storage_core.log import Log

    got = []
    for d in sorted(out.glob("out-*")):
        with Log.open(d, read_only=True) as log:
            offset = log.log_start_offset
            while True:
                r = log.fetch(offset, isolation="read_committed")
                got += [v[:v.index(b".")].decode() for v in r.table.column("value").to_pylist()]
                if r.next_offset == offset:
                    break
                offset = r.next_offset
    return got


@pytest.fixture(scope="module")
def job_seconds(tmp_path_factory) -> float:
    """How long the job takes uninterrupted here (the kills are drawn within it), from a run
    that is itself checked: every row once, big files staged directly."""
    import time

    root = tmp_path_factory.mktemp("direct-job")
    started = time.monotonic()
    printed = _run_job(root / "out", root / "chk")
    seconds = time.monotonic() - started
    direct = int(printed.split("direct ")[1].split()[0])
    assert (direct > 0) is _direct_supported(root)
    expected = {f"b{b}-t{t}-{i}" for b in range(JOB_BATCHES) for t in range(2)
                for i in range(JOB_ROWS)}
    got = _committed_values(root / "out")
    assert len(got) == len(expected) and set(got) == expected
    return seconds


@pytest.mark.parametrize("trial", range(4))
def test_a_job_killed_while_staging_directly_or_committing_writes_every_row_once(
        tmp_path, job_seconds, trial):
    """The sink's write path (``KafkaLogStreamWriter``: tasks staging big files with
    ``O_DIRECT`` from their writer thread, the driver's commit) in a process SIGKILLed at a
    random moment, twice, then run to its end as a restarted query runs (the interrupted
    batch again, then the rest): a ``read_committed`` reader sees every row exactly once."""
    rnd = random.Random(20261125 + trial)
    out, chk = tmp_path / "out", tmp_path / "chk"
    for _ in range(2):
        _run_job(out, chk, kill_after=rnd.uniform(0.3, 1.0) * job_seconds)
    _run_job(out, chk)
    expected = {f"b{b}-t{t}-{i}" for b in range(JOB_BATCHES) for t in range(2)
                for i in range(JOB_ROWS)}
    got = _committed_values(out)
    assert len(got) == len(expected), f"{len(got) - len(expected)} rows more than written"
    assert set(got) == expected

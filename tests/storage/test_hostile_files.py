"""Hostile files in a partition directory (issue 16, findings 2, 3, 5, 6 and the file/position
part of 9), and the acceptance rule on memory: open, read, verify, dump and recover of any of
them run in a child process whose peak RSS stays under 700 MB and which ends with success or a
clear error (a ``KafkaLogError`` naming the file), never a crash, a traceback or a hang.

Every file is real: sparse files made with ``truncate``, a real FIFO (``mkfifo``), real
symbolic links. The children are real processes, their peak memory the kernel's ``ru_maxrss``
from ``wait4``; a child still running after its timeout is killed and the test fails (the
timeout only guards the suite against a hang, it is no assertion about speed).
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pyarrow as pa
import pytest
from child_process import run_measured

from storage_core.config import LogConfig
from storage_core.errors import CorruptRecordError, RecordTooLargeError, UnsafeFileError
from storage_core.format import encode_batches
from storage_core.log import Log

ROOT = Path(__file__).resolve().parents[2]
SEG = "00000000000000000000"
MEMORY_LIMIT = 700 << 20
HUGE_CLAIM = 0x7FFF0000            # ~2 GiB: past 0x7ffff000, a single read() returns less


# ----------------------------------------------------------------------------- building

def write_partition(d: Path, batches: int = 3, records: int = 10) -> None:
    """A small clean partition: ``batches`` batches of ``records`` records."""
    with Log.open(d) as log:
        for i in range(batches):
            log.append(pa.table({"value": [b"v%d-%d" % (i, j) for j in range(records)]}))


def huge_claim_partition(root: Path) -> tuple[Path, int]:
    """Three valid batches, then a header claiming ~2 GiB, the file extended (sparse) to hold
    it; the recovery point checkpoint removed (an unclean stop). Returns (dir, valid bytes)."""
    d = root / "huge-0"
    write_partition(d)
    log_file = d / f"{SEG}.log"
    valid = log_file.stat().st_size
    header = struct.pack(">qiibI", 30, HUGE_CLAIM, 0, 2, 0) + bytes(44)
    with open(log_file, "r+b") as f:
        f.seek(valid)
        f.write(header)
        f.truncate(valid + 12 + HUGE_CLAIM)
    (root / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    return d, valid


def zstd_bomb_partition(root: Path) -> Path:
    """Four zstd batches of 20 records of 5 MiB of zeros: a few kilobytes on disk each, 100 MiB
    of records each once decompressed (under the per-batch cap), 400 MiB in all."""
    d = root / "bomb-0"
    one = encode_batches(pa.table({"value": [bytes(5 << 20)] * 20}), compression="zstd",
                         max_batch_bytes=256 << 20)
    with Log.open(d) as log:
        for _ in range(4):
            log.append_raw(bytes(one))
    return d


def dense_batch_partition(root: Path) -> Path:
    """One zstd batch of two million empty records: 1.6 MB on disk, 14 MB decompressed (under
    the per-batch cap), but every record costs tens of bytes decoded (hundreds as a tool's
    Record object): more records than the cap allows a batch to decode to."""
    d = root / "dense-0"
    batch = encode_batches(pa.table({"value": pa.array([b""] * 2_000_000, pa.binary())}),
                           compression="zstd", max_batch_bytes=1 << 30)
    with Log.open(d, LogConfig(max_message_bytes=8 << 20)) as log:   # a writer that allowed it
        log.append_raw(bytes(batch))
    return d


def sparse_index_partition(root: Path) -> Path:
    d = root / "sparse-0"
    write_partition(d)
    os.truncate(d / f"{SEG}.index", 2 << 30)
    return d


def fifo_partition(root: Path) -> Path:
    d = root / "fifo-0"
    d.mkdir()
    os.mkfifo(d / f"{SEG}.log")
    return d


def symlink_partition(root: Path) -> tuple[Path, Path, bytes]:
    """A partition whose only segment is a link to a file outside the data directory."""
    outside = root.parent / f"{root.name}-outside"
    outside.mkdir()
    target = outside / "precious.bin"
    data = b"precious bytes that are no Kafka batch " * 100
    target.write_bytes(data)
    d = root / "link-0"
    d.mkdir()
    (d / f"{SEG}.log").symlink_to(target)
    return d, target, data


# ----------------------------------------------------------------------------- children

CHILD = r"""
import sys
from storage_core.errors import KafkaLogError
from storage_core.log import Log
op, d = sys.argv[1], sys.argv[2]
try:
    if op == "open":
        with Log.open(d) as log:
            print("leo", log.log_end_offset)
    elif op == "open_ro":
        with Log.open(d, read_only=True) as log:
            print("leo", log.log_end_offset)
    elif op == "read":
        with Log.open(d, read_only=True) as log:
            t = log.read(log.log_start_offset, max_bytes=64 << 10)
            print("rows", t.num_rows, "nbytes", t.nbytes)
except KafkaLogError as e:
    print(f"KafkaLogError: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(3)
"""


def library(op: str, d: Path, tmp: Path):
    return run_measured(["-c", CHILD, op, str(d)], tmp)


def cli(tmp: Path, *args: str):
    return run_measured(["-m", "storage_core.tools", *args], tmp)


def assert_clean_exit(result, *, named: str | None = None) -> None:
    """Success or a clear error: no traceback, no signal, the file named if it failed."""
    rc, out, err, rss = result
    assert rc >= 0, f"killed by signal {-rc}: {err[-2000:]}"
    assert "Traceback" not in err, err[-4000:]
    assert rss < MEMORY_LIMIT, f"peak RSS {rss >> 20} MiB"
    if rc != 0 and named is not None:
        assert named in out + err, (out[-2000:], err[-2000:])


# ----------------------------------------------------------------------------- finding 2: symlinks

def test_writable_open_and_recover_refuse_a_symlinked_segment_and_leave_its_target(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    d, target, data = symlink_partition(root)
    link = d / f"{SEG}.log"
    with pytest.raises(UnsafeFileError, match=str(link)):
        Log.open(d)
    assert target.read_bytes() == data
    rc, out, err, _ = cli(tmp_path, "recover", str(d))
    assert rc == 1 and "FAILED" in out and str(link) in out and "symbolic link" in out, out + err
    assert target.read_bytes() == data
    assert sorted(p.name for p in d.iterdir()) == [f"{SEG}.log"]     # nothing created beside it
    assert link.is_symlink()


def test_verify_reports_a_symlinked_segment(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    d, target, _ = symlink_partition(root)
    rc, out, _, _ = cli(tmp_path, "verify", str(root))
    assert rc == 1, out
    assert f"CORRUPT {d / (SEG + '.log')} is a symbolic link (to {target})" in out, out
    assert "0 of 1 files valid" in out, out


def test_symlinked_index_is_refused_by_a_writer_and_its_target_untouched(tmp_path):
    d = tmp_path / "t-0"
    write_partition(d)
    outside = tmp_path / "outside.index"
    shutil.move(d / f"{SEG}.index", outside)
    before = outside.read_bytes()
    (d / f"{SEG}.index").symlink_to(outside)
    with pytest.raises(UnsafeFileError, match=f"{SEG}.index"):
        Log.open(d)
    assert outside.read_bytes() == before


def test_symlinked_partition_directory_is_refused_by_a_writer_and_read_by_a_reader(tmp_path):
    real = tmp_path / "elsewhere" / "t-0"
    write_partition(real)
    names = sorted(p.name for p in real.iterdir())
    root = tmp_path / "data"
    root.mkdir()
    (root / "t-0").symlink_to(real, target_is_directory=True)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        Log.open(root / "t-0")
    assert sorted(p.name for p in real.iterdir()) == names       # no index, no snapshot made
    with Log.open(root / "t-0", read_only=True) as log:           # a reader never writes
        assert log.read(0).num_rows == 30
    rc, out, _, _ = cli(tmp_path, "verify", str(root))
    assert rc == 1 and f"CORRUPT {root / 't-0'} is a symbolic link" in out, out


def test_reader_reads_through_a_symlinked_segment_without_writing(tmp_path):
    d = tmp_path / "t-0"
    write_partition(d)
    outside = tmp_path / "outside.log"
    shutil.move(d / f"{SEG}.log", outside)
    before = outside.read_bytes()
    (d / f"{SEG}.log").symlink_to(outside)
    with Log.open(d, read_only=True) as log:
        assert log.read(0).num_rows == 30
    assert outside.read_bytes() == before


# ----------------------------------------------------------------------------- finding 6: non-regular files

def test_fifo_named_like_a_segment_is_refused_not_opened(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    d = fifo_partition(root)
    fifo = d / f"{SEG}.log"
    for op in ("open_ro", "open", "read"):
        rc, _, err, _ = library(op, d, tmp_path)
        assert rc == 3 and "UnsafeFileError" in err and f"{fifo} is a FIFO" in err, (op, err)
    for args in (("dump", "--files", str(fifo)), ("describe", str(root)), ("recover", str(d))):
        rc, out, err, _ = cli(tmp_path, *args)
        assert rc != 0 and f"{fifo} is a FIFO" in out + err, (args, out, err)
        assert "Traceback" not in err, err


def test_files_not_named_by_an_offset_are_no_segments(tmp_path):
    """``str.isdigit`` takes "²" (which ``int`` then refuses: a bare ValueError out of every
    open) and "٤" (which ``int`` reads as 4: a segment at offset 44 whose file does not exist);
    a writable open also parsed any ``*.log``/``*.index``/``*.cleaned``/``*.swap`` name
    ("notes.log": ValueError). Only 20 ASCII digits name a segment, as for a read-only open;
    other files are left alone."""
    d = tmp_path / "t-0"
    with Log.open(d) as log:
        log.append(pa.table({"value": [b"x"] * 3}))
    strangers = [d / "0000000000000000000\u00b2.log", d / ("000000000000000000" + "\u0664" * 2 + ".log"),
                 d / "notes.log", d / "notes.index", d / "notes.cleaned", d / "notes.swap"]
    for p in strangers:
        p.write_bytes(b"not a segment")
    with Log.open(d, read_only=True) as log:
        assert log.log_end_offset == 3 and [s.base_offset for s in log.segments] == [0]
    with Log.open(d) as log:
        assert log.log_end_offset == 3 and [s.base_offset for s in log.segments] == [0]
    assert sorted(p.name for p in d.glob("*.log")) == sorted(["00000000000000000000.log"]
                                                             + [p.name for p in strangers if p.suffix == ".log"])
    assert all(p.read_bytes() == b"not a segment" for p in strangers)


def test_a_strangers_deleted_file_is_left_alone_by_a_writable_open(tmp_path):
    """Only kafkalog's (and Kafka's) own ``<offset>.<kind>.deleted`` files are removed at open
    (Kafka's ``removeTempFilesAndCollectSwapFiles`` removes any ``*.deleted``): a user's
    ``notes.deleted`` file, or a folder so named, is not a segment file and is left as it is."""
    d = tmp_path / "t-0"
    with Log.open(d) as log:
        log.append(pa.table({"value": [b"x"] * 3}))
    ours = d / "00000000000000000007.log.deleted"
    ours.write_bytes(b"")
    (d / "notes.deleted").write_bytes(b"mine")
    (d / "old.deleted").mkdir()
    with Log.open(d) as log:
        assert log.log_end_offset == 3
    assert not ours.exists()
    assert (d / "notes.deleted").read_bytes() == b"mine" and (d / "old.deleted").is_dir()


def test_verify_reports_fifos_and_directories_named_like_kafka_files(tmp_path):
    root = tmp_path / "data"
    d = root / "t-0"
    write_partition(d)
    os.mkfifo(d / "00000000000000000100.log")
    (d / "00000000000000000200.index").mkdir()
    rc, out, _, _ = cli(tmp_path, "verify", str(root))
    assert rc == 1, out
    assert f"CORRUPT {d / '00000000000000000100.log'} is a FIFO, not a regular file" in out, out
    assert f"CORRUPT {d / '00000000000000000200.index'} is a directory, not a regular file" in out
    assert "of 0 files valid" not in out


# ----------------------------------------------------------------------------- finding 3: one header, gigabytes

def test_huge_claimed_batch_is_corruption_found_before_allocating(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    d, valid = huge_claim_partition(root)
    log_file = d / f"{SEG}.log"
    # a reader: a clear error naming the file and the position of the claim
    rc, _, err, rss = library("open_ro", d, tmp_path)
    assert rc == 3 and str(log_file) in err and f"position {valid}" in err, err
    assert rss < MEMORY_LIMIT
    # verify and dump: the same, in their words
    rc, out, _, rss = cli(tmp_path, "verify", str(d))
    assert rc == 1 and f"position {valid}" in out and "exceeds" in out, out
    assert rss < MEMORY_LIMIT
    rc, out, err, rss = cli(tmp_path, "dump", "--files", str(log_file))
    assert rc == 1 and f"position {valid}" in err, err
    assert rss < MEMORY_LIMIT
    # recovery: truncated at the claim, every valid batch before it kept
    rc, out, err, rss = cli(tmp_path, "recover", str(d))
    assert rc == 0 and "truncated" in out, out + err
    assert rss < MEMORY_LIMIT
    assert log_file.stat().st_size == valid
    with Log.open(d, read_only=True) as log:
        assert log.log_end_offset == 30
        assert log.read(0).column("value").to_pylist()[-1] == b"v2-9"


def test_claim_under_the_limit_but_past_the_file_end_is_a_partial_tail(tmp_path):
    """Only a claim above the limit is refused on sight: a batch being written (its bytes not
    all there yet) is still the end of the data, as in FileLogInputStream."""
    d = tmp_path / "t-0"
    write_partition(d)
    log_file = d / f"{SEG}.log"
    valid = log_file.stat().st_size
    with open(log_file, "ab") as f:
        f.write(struct.pack(">qiib", 30, 1000, 0, 2) + bytes(40))
    with Log.open(d, read_only=True) as log:
        assert log.log_end_offset == 30
    (d.parent / "recovery-point-offset-checkpoint").unlink()
    with Log.open(d) as log:                   # recovery drops the partial tail, nothing more
        assert log.log_end_offset == 30
    assert log_file.stat().st_size == valid


# ----------------------------------------------------------------------------- finding 5: bounded decode

def test_read_of_zstd_bomb_stops_after_the_batch_that_crosses_max_bytes(tmp_path):
    d = zstd_bomb_partition(tmp_path)
    assert sum(p.stat().st_size for p in d.glob("*.log")) < 200 << 10
    with Log.open(d, read_only=True) as log:
        r = log.fetch(0, max_bytes=64 << 10)
        assert r.table.num_rows == 20 and r.next_offset == 20      # one batch, not four
        assert r.table.nbytes < 120 << 20
        # a consumer loop still reads everything, a batch a step
        offset, rows = 0, 0
        while offset < log.log_end_offset:
            r = log.fetch(offset, max_bytes=64 << 10)
            rows += r.table.num_rows
            offset = r.next_offset
        assert rows == 80


def test_batch_of_millions_of_tiny_records_is_refused_before_decompressing(tmp_path):
    d = dense_batch_partition(tmp_path)
    log_file = d / f"{SEG}.log"
    with Log.open(d, read_only=True) as log:
        with pytest.raises(RecordTooLargeError, match="claims 2000000 records") as e:
            log.read(0, max_bytes=64 << 10)
    assert e.value.source == str(log_file) and e.value.position == 0
    rc, out, _, rss = cli(tmp_path, "verify", str(log_file))
    assert rc == 1 and "claims 2000000 records" in out and str(log_file) in out, out
    assert rss < MEMORY_LIMIT


def test_decoded_bound_keeps_small_uncompressed_reads_whole(tmp_path):
    d = tmp_path / "t-0"
    write_partition(d, batches=5, records=100)
    with Log.open(d, read_only=True) as log:
        assert log.fetch(0, max_bytes=1 << 20).table.num_rows == 500
        r = log.fetch(0, max_bytes=10)                       # at least one batch
        assert r.table.num_rows == 100 and r.next_offset == 100


# ----------------------------------------------------------------------------- finding 9: errors name file and position

def test_read_error_names_the_segment_file_and_its_byte_position(tmp_path):
    d = tmp_path / "t-0"
    config = LogConfig(segment_bytes=2000)
    with Log.open(d, config) as log:
        for i in range(12):
            log.append(pa.table({"value": [b"x" * 50 + b"%d" % i] * 5}))
        seg = log.segments[1]
        path, base = seg.log_path, seg.base_offset
    raw = bytearray(path.read_bytes())
    second = 12 + struct.unpack_from(">i", raw, 8)[0]       # the segment's second batch
    raw[second + 70] ^= 0xFF                                # a record byte: the CRC fails
    path.write_bytes(raw)
    with Log.open(d, config, read_only=True) as log:
        with pytest.raises(CorruptRecordError) as e:
            log.read(base + 5, max_bytes=1 << 20)
    assert e.value.source == str(path) and e.value.position == second, str(e.value)
    assert str(path) in str(e.value) and f"position {second}" in str(e.value)


# ----------------------------------------------------------------------------- acceptance: memory

def _hostile(kind: str, root: Path) -> tuple[Path, Path]:
    """(partition dir, the hostile file in it)."""
    if kind == "huge_claim":
        d, _ = huge_claim_partition(root)
        return d, d / f"{SEG}.log"
    if kind == "zstd_bomb":
        d = zstd_bomb_partition(root)
        return d, d / f"{SEG}.log"
    if kind == "dense_batch":
        d = dense_batch_partition(root)
        return d, d / f"{SEG}.log"
    if kind == "sparse_index":
        d = sparse_index_partition(root)
        return d, d / f"{SEG}.index"
    if kind == "fifo":
        d = fifo_partition(root)
        return d, d / f"{SEG}.log"
    d, _, _ = symlink_partition(root)
    return d, d / f"{SEG}.log"


OPS = ["open", "open_ro", "read", "verify", "dump", "recover"]
CASES = [(kind, op) for kind in ("huge_claim", "zstd_bomb", "dense_batch", "sparse_index", "fifo", "symlink")
         for op in OPS]


@pytest.mark.parametrize("kind,op", CASES)
def test_peak_memory_of_every_operation_on_every_hostile_file(tmp_path, kind, op):
    root = tmp_path / "data"
    root.mkdir()
    d, hostile = _hostile(kind, root)
    if op in ("open", "open_ro", "read"):
        result = library(op, d, tmp_path)
    elif op == "verify":
        result = cli(tmp_path, "verify", str(d))
    elif op == "dump":
        result = cli(tmp_path, "dump", "--deep-iteration", "--files", str(hostile))
    else:
        result = cli(tmp_path, "recover", str(d))
    print(f"{kind} {op}: exit {result[0]}, peak RSS {result[3] >> 20} MiB")
    assert_clean_exit(result, named=str(hostile) if kind != "zstd_bomb" else None)


def test_fifo_or_symlink_as_a_data_dir_checkpoint_is_refused(tmp_path):
    """The root's checkpoints are read and written by every partition's open: a FIFO there is
    refused (it would block the read), a link refused by a writer (read through by a reader)."""
    root = tmp_path / "data"
    d = root / "t-0"
    write_partition(d)
    cp = root / "recovery-point-offset-checkpoint"
    outside = tmp_path / "outside-checkpoint"
    shutil.move(cp, outside)
    before = outside.read_bytes()
    cp.symlink_to(outside)
    with pytest.raises(UnsafeFileError, match=f"{cp} is a symbolic link"):
        Log.open(d)
    with Log.open(d, read_only=True) as log:
        assert log.log_end_offset == 30
    assert outside.read_bytes() == before
    cp.unlink()
    os.mkfifo(cp)
    rc, _, err, _ = library("open_ro", d, tmp_path)
    assert rc == 3 and f"{cp} is a FIFO" in err, err

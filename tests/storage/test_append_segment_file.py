"""``Log.append_segment_file``: a whole file of numbered batches renamed into a log as a segment
of its own (the Spark sink's big staged files), next to ``append_from_file``, which copies the
same batches onto the active segment. Real files, real renames, no mocks."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from storage_core.tools.cli import main as cli_main
from storage_core.config import LogConfig
from storage_core.errors import InvalidConfigError, InvalidOffsetError
from storage_core.format import encode_batches
from storage_core.format.log_input_stream import scan_batches
from storage_core.log import Log
from storage_core.producer import OutOfOrderSequenceError

PID, EPOCH = 777, 0


def numbered_file(path: Path, first_offset: int, rows: int, *, first_value: int = 0,
                  transactional: bool = False, batch_bytes: int = 4096,
                  first_sequence: int = 0) -> Path:
    """A file of v2 batches numbered from ``first_offset`` (what the sink's commit leaves in a
    staged file before it appends it)."""
    values = [b"value-%06d" % (first_value + i) * 3 for i in range(rows)]
    table = pa.table({"key": pa.array([b"k%d" % (i % 50) for i in range(rows)]),
                      "value": pa.array(values),
                      "timestamp": pa.array(np.arange(rows, dtype=np.int64) + 1_700_000_000_000)
                      .cast(pa.timestamp("ms"))})
    raw = encode_batches(table, base_offset=first_offset, max_batch_bytes=batch_bytes,
                         producer_id=PID if transactional else -1,
                         producer_epoch=EPOCH if transactional else -1,
                         base_sequence=first_sequence if transactional else -1,
                         transactional=transactional)
    path.write_bytes(raw)
    return path


def values(log: Log, isolation: str = "read_uncommitted") -> list[bytes]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.fetch(offset, isolation=isolation)
        out.extend(fetched.table.column("value").to_pylist())
        if fetched.next_offset <= offset:
            break
        offset = fetched.next_offset
    return out


def test_the_file_becomes_the_segment_and_reads_back(tmp_path):
    """Into a log that already has records: the log rolls at its end offset, the file is the
    new segment's .log byte for byte (renamed, gone from where it was), the records read back
    after the earlier ones, and the log passes verification after a reopen."""
    d = tmp_path / "t-0"
    with Log.open(d, LogConfig()) as log:
        log.append(pa.table({"value": pa.array([b"before-%d" % i for i in range(100)])}))
        src = numbered_file(tmp_path / "staged", log.log_end_offset, 2000)
        raw = src.read_bytes()
        info = log.append_segment_file(src, scan_batches(raw))
        assert (info.first_offset, info.last_offset, info.num_records) == (100, 2099, 2000)
        assert not src.exists()
        assert [s.base_offset for s in log.segments] == [0, 100]
        assert (d / f"{100:020d}.log").read_bytes() == raw
        assert log.log_end_offset == 2100
        got = values(log)
    assert got[:100] == [b"before-%d" % i for i in range(100)]
    assert got[100:] == [b"value-%06d" % i * 3 for i in range(2000)]
    with Log.open(d, LogConfig()) as log:
        assert log.log_end_offset == 2100 and values(log) == got
    assert cli_main(["verify", str(d)]) == 0


def test_indexes_are_those_of_a_copy_into_a_fresh_segment(tmp_path):
    """The offset and time indexes of a renamed-in segment are byte for byte those of the same
    batches copied by ``append_from_file`` into a segment rolled at the same offset."""
    config = LogConfig(index_interval_bytes=1000)
    logs = {}
    for how in ("renamed", "copied"):
        d = tmp_path / how / "t-0"
        with Log.open(d, config) as log:
            log.append(pa.table({"value": pa.array([b"x" * 50] * 30)}))
            src = numbered_file(tmp_path / f"staged-{how}", 30, 5000, batch_bytes=1500)
            scan = scan_batches(src.read_bytes())
            if how == "renamed":
                log.append_segment_file(src, scan)
            else:
                log.roll()
                fd = os.open(src, os.O_RDONLY)
                try:
                    log.append_from_file(fd, scan)
                finally:
                    os.close(fd)
        logs[how] = d
    names = sorted(p.name for p in logs["copied"].iterdir())
    assert names == sorted(p.name for p in logs["renamed"].iterdir())
    for name in names:
        # segment 0's records were stamped "now" by append: each log's own
        if name.startswith(f"{30:020d}") and name.endswith((".log", ".index", ".timeindex")):
            assert (logs["renamed"] / name).read_bytes() == (logs["copied"] / name).read_bytes(), name
    assert os.path.getsize(logs["renamed"] / f"{30:020d}.index") > 8 * 10


def test_an_empty_active_segment_is_replaced_not_left_behind(tmp_path):
    """A new log (one empty segment at 0): the file takes segment 0's place, no empty segment
    stays; a second file then rolls a segment of its own."""
    d = tmp_path / "t-0"
    with Log.open(d, LogConfig()) as log:
        log.append_segment_file(*_numbered(tmp_path / "a", 0, 300))
        assert [s.base_offset for s in log.segments] == [0]
        log.append_segment_file(*_numbered(tmp_path / "b", 300, 300, first_value=300))
        assert [s.base_offset for s in log.segments] == [0, 300]
        assert values(log) == [b"value-%06d" % i * 3 for i in range(600)]


def _numbered(path: Path, first: int, rows: int, **kw) -> tuple[Path, object]:
    src = numbered_file(path, first, rows, **kw)
    return src, scan_batches(src.read_bytes())


def test_a_transaction_spanning_renamed_segments_is_hidden_until_its_marker(tmp_path):
    """Transactional batches of one producer in two renamed-in segments: one open transaction
    from the first one's offset (read_committed sees nothing), then the COMMIT marker makes
    all of it visible; sequences continue across the files as the producer state checks."""
    d = tmp_path / "t-0"
    with Log.open(d, LogConfig()) as log:
        log.append_segment_file(*_numbered(tmp_path / "a", 0, 400, transactional=True))
        log.append_segment_file(*_numbered(tmp_path / "b", 400, 400, first_value=400,
                                            transactional=True, first_sequence=400))
        assert log.last_stable_offset == 0
        assert values(log, "read_committed") == []
        assert len(values(log)) == 800
        log.append_end_txn_marker(PID, EPOCH, "COMMIT", 0)
        assert log.last_stable_offset == log.log_end_offset == 801
        assert values(log, "read_committed") == [b"value-%06d" % i * 3 for i in range(800)]
        # a file whose sequences do not follow the producer's last one is refused, unchanged
        src, scan = _numbered(tmp_path / "c", 801, 10, transactional=True, first_sequence=5)
        with pytest.raises(OutOfOrderSequenceError, match="5 .incoming seq. number., 799"):
            log.append_segment_file(src, scan)
        assert src.exists() and log.log_end_offset == 801


def test_refusals_change_nothing(tmp_path):
    """Numbered from another offset than the log end, larger than segment.bytes, or on another
    file system: refused (``can_take_segment_file`` says so first), the file where it was, the
    log as it was."""
    d = tmp_path / "t-0"
    with Log.open(d, LogConfig(segment_bytes=64 * 1024)) as log:
        log.append(pa.table({"value": pa.array([b"v"] * 10)}))
        wrong, scan = _numbered(tmp_path / "wrong", 3, 100)
        assert log.can_take_segment_file(wrong, scan)       # the offset is append's check
        with pytest.raises(InvalidOffsetError, match="numbered from 3.*ends at 10"):
            log.append_segment_file(wrong, scan)
        big, scan = _numbered(tmp_path / "big", 10, 5000)
        assert scan.end > 64 * 1024 and not log.can_take_segment_file(big, scan)
        with pytest.raises(InvalidConfigError, match="cannot become a segment"):
            log.append_segment_file(big, scan)
        shm = Path("/dev/shm")
        if shm.is_dir() and os.stat(shm).st_dev != os.stat(d).st_dev:
            elsewhere, scan = _numbered(shm / f"kafkalog-test-{os.getpid()}", 10, 100)
            try:
                assert not log.can_take_segment_file(elsewhere, scan)
                with pytest.raises(InvalidConfigError, match="another file system"):
                    log.append_segment_file(elsewhere, scan)
                assert elsewhere.exists()
            finally:
                elsewhere.unlink(missing_ok=True)
        assert wrong.exists() and big.exists()
        assert log.log_end_offset == 10 and [s.base_offset for s in log.segments] == [0]
        assert values(log) == [b"v"] * 10

"""Readers (``Log.open(read_only=True)``, other processes) beside a writer that rolls, closes,
truncates, deletes by retention and compacts (issue 16, findings 1 and 7, and its concurrency
soak). The processes are ``reader_writer_runner.py``; its doc says what a reader checks.

test_cleaner_readers.py covers readers during compaction and retention alone, with the writer
in the test's process; here the writer is a process of its own and also truncates.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from child_process import run_measured

from storage_core.config import LogConfig
from storage_core.index import OffsetIndex, TimeIndex
from storage_core.log import Log

RUNNER = Path(__file__).resolve().with_name("reader_writer_runner.py")
SLOW = os.environ.get("KAFKALOG_SLOW") == "1"
ROUNDS = 6000 if SLOW else 800
READERS = 2


def _run(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(RUNNER), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize(("seed", "file_delete_delay_ms"), [(1, 0), (2, 20)])
def test_concurrency_soak_readers_beside_a_writer_that_truncates(tmp_path: Path, seed: int,
                                                                 file_delete_delay_ms: int) -> None:
    """A writer process appends, rolls, truncates (new generation after each), deletes by
    retention and compacts for a bounded number of rounds while two reader processes read
    forward and look up offsets by time through every index. No reader dies (a SIGBUS would be
    returncode -7), none returns an offset twice or out of order, a value not written at its
    offset, or a record removed by a truncation it had seen or that preceded its view.
    ``file_delete_delay_ms`` 0: deleted and replaced segments removed at once; 20 (ms of the
    writer's clock, one a round): renamed ``.deleted`` and removed later."""
    writer = _run(["write", str(tmp_path), str(ROUNDS), str(seed), str(file_delete_delay_ms)])
    readers = [_run(["read", str(tmp_path)]) for _ in range(READERS)]
    w_out, w_err = writer.communicate(timeout=600)
    results = [r.communicate(timeout=600) for r in readers]
    assert writer.returncode == 0, w_err[-4000:]
    counts = dict(kv.split("=") for kv in w_out.split())
    # the churn really happened
    for what in ("rolls", "truncations", "retention", "cleans"):
        assert int(counts[what]) > 10, w_out
    for r, (out, err) in zip(readers, results):
        assert r.returncode != -signal.SIGBUS, f"reader died of SIGBUS:\n{err[-4000:]}"
        assert r.returncode == 0, f"reader failed ({r.returncode}):\n{err[-4000:]}"
        _, seen, opens, lookups = out.split()
        assert int(seen) > 1000 and int(opens) > 10 and int(lookups) > 100, out


def _child(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})


READER_KEEPS_VIEW = r"""
import sys, time
from pathlib import Path
from storage_core.log import Log
part = Path(sys.argv[1])
stop = Path(sys.argv[2])
n = 0
while not stop.exists() or n < 20:
    with Log.open(part, read_only=True) as log:
        for _ in range(30):           # the same view, while the writer trims its index files
            for seg in log.segments:
                seg.offset_index.lookup(seg.base_offset + 10**6)
                seg.time_index.lookup(2**62)
                seg.offset_index.entries_array()
            log.offsets_for_times(0)
            if log.log_end_offset > log.log_start_offset:
                log.read(log.log_start_offset)
    n += 1
print("ok", n)
"""

WRITER_ROLLS = r"""
import sys
from pathlib import Path
import pyarrow as pa
from storage_core.config import LogConfig
from storage_core.log import Log
part, rounds, stop = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
config = LogConfig(segment_bytes=16 << 10, segment_index_bytes=64 << 10, index_interval_bytes=256)
log = Log.open(part, config)
for i in range(rounds):
    log.append(pa.table({"value": [b"x" * 50] * 20}))
    if i % 7 == 0:
        log.roll()                                    # trims the preallocated indexes
    if i % 5 == 0 and log.log_end_offset > 400:
        log.truncate_to(log.log_end_offset - 150)     # drops entries, re-preallocates
    if i % 11 == 0:
        log.close()                                   # trims the active segment's indexes
        log = Log.open(part, config)
log.close()
stop.touch()
"""


def test_reader_process_survives_index_trims_of_a_writer_process(tmp_path: Path) -> None:
    """Finding 1: a reader process keeps read-only views open (lookups through both indexes of
    every segment, entries_array, offsets_for_times, reads) while a writer process rolls, closes
    and truncates, each of which trims or re-preallocates index files under it. Mapped indexes
    died here with SIGBUS (and a raw struct.error after truncate_to); the reader exits 0."""
    part, stop = tmp_path / "t-0", tmp_path / "stop"
    Log.open(part).close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER_ROLLS, str(part), "1500", str(stop)],
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    reader = _child(READER_KEEPS_VIEW, str(part), str(stop))
    _, w_err = writer.communicate(timeout=300)
    assert writer.returncode == 0, w_err[-4000:]
    assert reader.returncode != -signal.SIGBUS, "reader died of SIGBUS"
    assert reader.returncode == 0, reader.stderr[-4000:]


def test_truncate_to_zeroes_the_dropped_index_entries(tmp_path: Path) -> None:
    """A writer's truncate_to zeroes the bytes of the entries it drops (Kafka leaves them): a
    reader counting every slot of the re-preallocated file reads (base, 0) there, never an
    entry pointing into the batches appended after the truncation."""
    config = LogConfig(index_interval_bytes=1)
    with Log.open(tmp_path / "t-0", config) as log:
        for _ in range(10):
            log.append(pa.table({"value": [b"v" * 100] * 3}))
        seg = log.active_segment
        before = seg.offset_index.entries
        log.truncate_to(12)
        kept = seg.offset_index.entries
        assert 0 < kept < before
        data = seg.offset_index.path.read_bytes()
        assert len(data) == config.segment_index_bytes - config.segment_index_bytes % 8
        assert data[kept * 8:] == bytes(len(data) - kept * 8)
        tdata = seg.time_index.path.read_bytes()
        assert tdata[seg.time_index.entries * 12:] == bytes(len(tdata) - seg.time_index.entries * 12)
        with OffsetIndex(seg.offset_index.path, seg.base_offset, writable=False) as ro:
            assert ro.lookup(29).position <= seg.offset_index.lookup(29).position


OPEN_OVERSIZED = r"""
import sys
from pathlib import Path
from storage_core.config import LogConfig
from storage_core.log import Log
part, mode = Path(sys.argv[1]), sys.argv[2]
with Log.open(part, LogConfig(segment_bytes=4 << 10, index_interval_bytes=100), read_only=mode == "ro") as log:
    rows = sum(log.read(o, max_bytes=1).num_rows > 0 for o in range(log.log_start_offset, log.log_end_offset))
    entries = log.segments[0].offset_index.entries
    tentries = log.segments[0].time_index.entries
print(rows, entries, tentries)
"""


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_oversized_index_is_ignored_by_readers_and_rebuilt_by_writers(tmp_path: Path, suffix: str) -> None:
    """Finding 7: a segment's index grown to a 2 GiB sparse file (more than segment.index.bytes
    allows). A read-only open ignores it (0 entries, the segment is scanned) and reads every
    offset; a writable open empties it and recovers the segment, which rebuilds it to its real
    size with entries. Neither maps or loads it: the child's max RSS stays far below 700 MB."""
    part = tmp_path / "t-0"
    config = LogConfig(segment_bytes=4 << 10, index_interval_bytes=100)
    with Log.open(part, config) as log:
        for _ in range(30):
            log.append(pa.table({"value": [b"x" * 300] * 3}))
    first = sorted(part.glob("*" + suffix))[0]
    good_size = first.stat().st_size
    assert good_size > 0
    os.truncate(first, 2**31)
    rc, out, err, peak = run_measured(["-c", OPEN_OVERSIZED, str(part), "ro"], tmp_path)
    assert rc == 0, err[-4000:]
    rows, entries, tentries = map(int, out.split())
    assert rows == 90
    assert (entries if suffix == ".index" else tentries) == 0
    assert "more than segment.index.bytes" in err and first.name in err
    assert peak < 700 << 20
    assert first.stat().st_size == 2**31            # a reader changes nothing

    rc, out, err, peak = run_measured(["-c", OPEN_OVERSIZED, str(part), "rw"], tmp_path)
    assert rc == 0, err[-4000:]
    rows, entries, tentries = map(int, out.split())
    assert rows == 90 and entries > 0 and tentries > 0 and peak < 700 << 20
    assert first.stat().st_size == good_size        # rebuilt by the recovery, trimmed on close
    kind = OffsetIndex if suffix == ".index" else TimeIndex
    with kind(first, int(first.name[:20]), writable=False) as idx:
        idx.sanity_check()
        assert idx.entries == good_size // idx.ENTRY_SIZE


def test_verify_and_dump_report_an_oversized_index_without_loading_it(tmp_path: Path) -> None:
    """Finding 7: ``verify`` and ``dump`` of a partition whose indexes are 2 GiB sparse files
    report each as oversized, naming it, and exit 1, in well under 700 MB of RSS (they took
    5.6 and 6.1 GB)."""
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.append(pa.table({"value": [b"x"] * 5}))
    index, tindex = part / "00000000000000000000.index", part / "00000000000000000000.timeindex"
    os.truncate(index, 2**31)
    os.truncate(tindex, 2**31 + 4)
    for args in (["verify", str(tmp_path)], ["dump", "--files", str(index)], ["dump", "--files", str(tindex)]):
        rc, out, err, peak = run_measured(["-m", "storage_core.tools", *args], tmp_path)
        assert rc == 1, (args, out, err)
        assert peak < 700 << 20, (args, peak)
        text = out + err
        for f in ([index, tindex] if args[0] == "verify" else [Path(args[-1])]):
            assert f"{f} is oversized: {f.stat().st_size} bytes" in text, text


@pytest.mark.parametrize("kind", [OffsetIndex, TimeIndex])
def test_read_only_index_follows_a_file_trimmed_after_its_open(tmp_path: Path, kind) -> None:
    """A read-only index opened on a preallocated file (every slot counted) keeps answering when
    the writer trims the file under it (roll), then truncates and trims again: each lookup is an
    entry the file still holds at or below the target, the entry count shrinks to the file's, and
    nothing maps the file (a mapped reader died of SIGBUS here)."""
    path = tmp_path / ("00000000000000000100" + (".index" if kind is OffsetIndex else ".timeindex"))
    writer = kind(path, 100, max_index_size=64 << 10)
    add = writer.append if kind is OffsetIndex else writer.maybe_append
    for i in range(2000):
        add(*((100 + 2 * i, 10 * i) if kind is OffsetIndex else (1000 + 2 * i, 100 + 2 * i)))
    field = "relative_offset" if kind is OffsetIndex else "timestamp"
    key = (lambda e: e.offset) if kind is OffsetIndex else (lambda e: e.timestamp)
    first = 100 if kind is OffsetIndex else 1000
    with kind(path, 100, writable=False) as reader:
        assert reader.entries == writer.max_entries > 2000
        writer.trim_to_valid_size()                       # roll: the zero slots go
        for target in (first + 3999, first + 1001, first):
            assert key(reader.lookup(target)) == target - (target - first) % 2
        assert reader.entries == 2000
        writer.truncate_to(100 + 1000)                    # entries 0..499 stay
        writer.trim_to_valid_size()
        got = reader.lookup(first + 3000)
        assert key(got) == first + 998
        assert reader.entries == 500 and len(reader.entries_array()) == 500
        assert reader.entries_array()[field][-1] == (998 if kind is OffsetIndex else first + 998)
    writer.close()


def test_indexes_of_a_larger_configured_size_are_used_by_readers_and_verify(tmp_path: Path, caplog) -> None:
    """The bound is the topic's configuration: a writer with segment.index.bytes of 20 MiB keeps
    its active segment's indexes preallocated to that. A reader opened with the defaults (as the
    Spark source opens partitions) still uses them, since it cannot know the topic's setting and
    reads them by positioned reads; ``verify`` takes the bound from the topic's override in
    kafkalog-topic-configs.json, and without the override reports them oversized."""
    from storage_core.server import ConfigRepository

    big = 20 << 20
    part = tmp_path / "t-0"
    with Log.open(part, LogConfig(segment_index_bytes=big, index_interval_bytes=1)) as log:
        for _ in range(10):
            log.append(pa.table({"value": [b"x" * 100] * 3}))
        index = log.active_segment.offset_index.path
        assert index.stat().st_size == big
        with caplog.at_level("WARNING"), Log.open(part, read_only=True) as reader:
            assert reader.segments[-1].offset_index.entries == big // 8
            assert reader.read(17, max_bytes=1).column("offset")[0].as_py() == 17
        assert "more than segment.index.bytes" not in caplog.text
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

        def verify() -> str:
            got = subprocess.run([sys.executable, "-m", "storage_core.tools", "verify", str(tmp_path)],
                                 capture_output=True, text=True, timeout=300, env=env)
            return got.stdout + got.stderr

        assert f"{index} is oversized" in verify()
        ConfigRepository([tmp_path]).alter_topic_config("t", {"segment.index.bytes": big})
        assert "oversized" not in verify()

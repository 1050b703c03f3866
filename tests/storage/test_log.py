"""LogSegment and Log on real files: appends, reads, rolls, lookups, truncation, recovery,
the writer lock, and broker-written directories from ../shared/fixtures."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from storage_core.config import LogConfig
from storage_core.errors import (InvalidConfigError, InvalidOffsetError, InvalidTopicError,
                                 OffsetOutOfRangeError, RecordTooLargeError)
from storage_core.format import decode_batches, encode_batches
from storage_core.log import Log, close_logs

from fixture_paths import PINTEREST, needs_fixture, require_fixture

needs_fixtures = needs_fixture(PINTEREST)


def table(n: int, start: int = 0, ts0: int = 1_700_000_000_000, value_size: int = 20) -> pa.Table:
    return pa.table({
        "key": [b"k%d" % i for i in range(start, start + n)],
        "value": [(b"v%d-" % i).ljust(value_size, b".") for i in range(start, start + n)],
        "timestamp": pa.array(ts0 + np.arange(start, start + n) * 10, pa.int64()),
    })


@pytest.fixture
def part(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"


def test_append_then_read_round_trip(part: Path) -> None:
    with Log.open(part) as log:
        info = log.append(table(100))
        assert (info.first_offset, info.last_offset, info.num_records) == (0, 99, 100)
        info2 = log.append(table(50, start=100))
        assert (info2.first_offset, info2.last_offset) == (100, 149)
        assert log.log_end_offset == 150
        got = log.read(0, max_bytes=1 << 20)
        assert got.column("offset").to_pylist() == list(range(150))
        assert got.column("key").to_pylist()[120] == b"k120"
        # a read starting inside a batch returns only offsets from there
        mid = log.read(42)
        assert mid.column("offset").to_pylist()[0] == 42


def test_reopen_keeps_everything_and_writes_checkpoints(part: Path) -> None:
    with Log.open(part) as log:
        log.append(table(10))
    root = part.parent
    assert (root / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 10\n"
    with Log.open(part) as log:
        assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (0, 10, 10)
        log.append(table(5, start=10))
        assert log.read(0).num_rows == 15


def test_close_logs_writes_each_directorys_checkpoints_after_every_logs_flush(tmp_path: Path) -> None:
    """``close_logs``: what closing each log writes (recovery points, moved log starts, producer
    snapshots), the data directory's checkpoint files untouched while the logs flush and written
    after, with every log's entry (the entries of logs not closed kept), every writer lock
    released."""
    root = tmp_path / "data"
    with Log.open(root / "other-0") as other:
        other.append(table(3))
    cfg = LogConfig(segment_bytes=4096)
    logs = [Log.open(root / f"orders-{p}", cfg) for p in range(3)]
    for i, log in enumerate(logs):
        for b in range(10 * (i + 1)):
            log.append(table(10, start=10 * b))
    assert logs[2].delete_records_before(150) == 150
    files = [root / "recovery-point-offset-checkpoint", root / "log-start-offset-checkpoint"]
    before = [f.read_text() for f in files]
    seen = []

    def each(fn, items):
        for x in items:
            fn(x)
            seen.append([f.read_text() for f in files])

    close_logs(logs, each)
    assert seen == [before] * 3                 # no checkpoint written per log
    assert sorted(files[0].read_text().splitlines()[2:]) == ["orders 0 100", "orders 1 200", "orders 2 300",
                                                             "other 0 3"]
    assert files[1].read_text().splitlines()[2:] == ["orders 2 150"]
    for p, end in enumerate((100, 200, 300)):
        assert (root / f"orders-{p}" / f"{end:020d}.snapshot").exists()
        with Log.open(root / f"orders-{p}", cfg) as log:        # the lock is free; nothing to recover
            assert (log.log_end_offset, log.recovery_point) == (end, end)
            assert log.log_start_offset == (150 if p == 2 else 0)


def test_files_are_named_and_sized_as_kafka_does(part: Path) -> None:
    cfg = LogConfig(segment_bytes=2048, index_interval_bytes=256)
    with Log.open(part, cfg) as log:
        for i in range(20):
            log.append(table(5, start=5 * i))
        assert len(log.segments) > 2
        active = log.active_segment
        # the active segment's indexes are preallocated while open ...
        assert active.offset_index.path.stat().st_size == 10485760
        assert active.time_index.path.stat().st_size == 10485756
    names = sorted(p.name for p in part.iterdir())
    assert names[0] == "00000000000000000000.index"
    assert all(n[:20].isdigit() for n in names)
    # ... and trimmed on close, as are rolled segments' indexes
    for p in part.glob("*.index"):
        assert p.stat().st_size % 8 == 0 and p.stat().st_size < 10485760


def test_first_append_of_a_segment_is_never_indexed(part: Path) -> None:
    """[LogSegmentTest] index entry when bytes since the last entry > index.interval.bytes,
    checked before counting the append: the first append of a segment is never indexed."""
    cfg = LogConfig(index_interval_bytes=0)
    with Log.open(part, cfg) as log:
        log.append(table(3))
        assert log.active_segment.offset_index.entries == 0
        log.append(table(3, start=3))
        idx = log.active_segment.offset_index
        assert idx.entries == 1
        first_batch_size = log.active_segment.size - len(encode_batches(table(3, start=3), base_offset=3, now_ms=0))
        assert idx.entry(0).offset == 5 and idx.entry(0).position == first_batch_size


def test_roll_by_segment_bytes_and_lookup_across_segments(part: Path) -> None:
    cfg = LogConfig(segment_bytes=4096, index_interval_bytes=512)
    with Log.open(part, cfg) as log:
        for i in range(60):
            log.append(table(10, start=10 * i))
        segs = log.segments
        assert len(segs) > 5
        assert all(s.size <= 4096 for s in segs)
        assert [s.base_offset for s in segs] == sorted(s.base_offset for s in segs)
        for target in (0, 1, 333, 599):
            got = log.read(target, max_bytes=1)
            assert got.column("offset").to_pylist()[0] == target


def test_offsets_for_times(part: Path) -> None:
    """ListOffsets by timestamp: the first offset whose timestamp is >= the target."""
    cfg = LogConfig(segment_bytes=4096, index_interval_bytes=100)
    ts0 = 1_700_000_000_000
    with Log.open(part, cfg) as log:
        for i in range(30):
            log.append(table(10, start=10 * i, ts0=ts0))
        assert log.offsets_for_times(ts0) == 0
        assert log.offsets_for_times(ts0 - 5) == 0
        assert log.offsets_for_times(ts0 + 10 * 123) == 123
        assert log.offsets_for_times(ts0 + 10 * 123 + 1) == 124
        assert log.offsets_for_times(ts0 + 10 * 299) == 299
        assert log.offsets_for_times(ts0 + 10 * 300) is None


def test_truncate_to(part: Path) -> None:
    cfg = LogConfig(segment_bytes=4096)
    with Log.open(part, cfg) as log:
        for i in range(30):
            log.append(table(10, start=10 * i))
        log.truncate_to(137)
        # truncation is by batch: the batch holding 137 goes
        assert log.log_end_offset == 130
        assert log.read(0, max_bytes=1 << 20).column("offset").to_pylist()[-1] == 129
        log.append(table(5, start=130))
        assert log.log_end_offset == 135


def test_delete_records_before(part: Path) -> None:
    cfg = LogConfig(segment_bytes=4096)
    with Log.open(part, cfg) as log:
        for i in range(30):
            log.append(table(10, start=10 * i))
        before = len(log.segments)
        assert log.delete_records_before(200) == 200
        assert log.log_start_offset == 200
        assert len(log.segments) < before
        with pytest.raises(OffsetOutOfRangeError, match="out of range"):
            log.read(100)
        assert log.read(200).column("offset").to_pylist()[0] == 200
    assert "orders 0 200" in (part.parent / "log-start-offset-checkpoint").read_text()
    with Log.open(part, cfg) as log:
        assert log.log_start_offset == 200


def test_torn_tail_is_truncated_on_recovery(part: Path) -> None:
    """An unclean shutdown leaves a partial batch: recovery truncates it, keeps the rest."""
    with Log.open(part) as log:
        log.append(table(10))
        log.append(table(10, start=10))
    seg = part / "00000000000000000000.log"
    good = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(bytes(encode_batches(table(10, start=20), base_offset=20))[:-7])
    (part.parent / "recovery-point-offset-checkpoint").unlink()     # as after a crash
    with Log.open(part) as log:
        assert log.log_end_offset == 20
        assert seg.stat().st_size == good


def test_corrupt_batch_truncates_there_and_drops_later_segments(part: Path) -> None:
    cfg = LogConfig(segment_bytes=2048)
    with Log.open(part, cfg) as log:
        for i in range(20):
            log.append(table(5, start=5 * i))
        n_segments = len(log.segments)
        second = log.segments[1]
    raw = bytearray(second.log_path.read_bytes())
    raw[100] ^= 0x55
    second.log_path.write_bytes(raw)
    (part.parent / "recovery-point-offset-checkpoint").unlink()
    with Log.open(part, cfg) as log:
        assert len(log.segments) == 2 < n_segments
        end = log.log_end_offset
        assert second.base_offset <= end < 100
        got = log.read(0, max_bytes=1 << 20)
        assert got.column("offset").to_pylist() == list(range(got.num_rows))


def test_missing_indexes_are_rebuilt(part: Path) -> None:
    cfg = LogConfig(segment_bytes=4096, index_interval_bytes=200)
    with Log.open(part, cfg) as log:
        for i in range(40):
            log.append(table(10, start=10 * i))
    for p in list(part.glob("*.index")) + list(part.glob("*.timeindex")):
        p.unlink()
    with Log.open(part, cfg) as log:
        assert all(s.offset_index.entries > 0 for s in log.segments[:-1])
        assert log.read(345).column("offset").to_pylist()[0] == 345


def test_append_validation(part: Path) -> None:
    cfg = LogConfig(max_message_bytes=500)
    with Log.open(part, cfg) as log:
        with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
            log.append_raw(encode_batches(table(50)))
        raw = bytearray(encode_batches(table(3)))
        raw[70] ^= 1
        with pytest.raises(Exception, match="crc"):
            log.append_raw(raw)
        assert log.log_end_offset == 0            # nothing written
        log.append_raw(encode_batches(table(3), base_offset=0), assign_offsets=False)
        with pytest.raises(InvalidOffsetError, match="below the expected offset"):
            log.append_raw(encode_batches(table(3), base_offset=1), assign_offsets=False)


def test_bad_names_and_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidTopicError):
        Log.open(tmp_path / "bad topic-0")
    with pytest.raises((InvalidTopicError, ValueError)):
        Log.open(tmp_path / "no_partition_number")
    assert not any(tmp_path.iterdir())
    with pytest.raises(InvalidConfigError, match="segment.bytes"):
        LogConfig(segment_bytes=3)
    with pytest.raises(InvalidConfigError, match="Unknown configuration 'segment.byte'"):
        LogConfig.from_properties({"segment.byte": "10"})


def test_second_writer_is_refused_readers_are_welcome(part: Path) -> None:
    with Log.open(part) as log:
        log.append(table(10))
        log.flush()
        script = textwrap.dedent(f"""
            import sys
            from storage_core.log import Log, close_logs
            from storage_core.errors import LogLockedError
            try:
                Log.open({str(part)!r})
            except LogLockedError as e:
                print("locked:", e)
            with Log.open({str(part)!r}, read_only=True) as r:
                print("read", r.read(0).num_rows)
        """)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "locked:" in out.stdout and "already open for writing" in out.stdout
        assert "read 10" in out.stdout
    # after close the lock is free again
    with Log.open(part):
        pass


# ------------------------------------------------------------------- broker-written directories

def copy_partition(src: Path, dest: Path, *, drop_indexes: bool = False) -> Path:
    dest.mkdir(parents=True)
    for p in src.iterdir():
        if p.suffix in (".log", ".index", ".timeindex", ".snapshot") or p.name in (
                "leader-epoch-checkpoint", "partition.metadata"):
            if drop_indexes and p.suffix in (".index", ".timeindex"):
                continue
            shutil.copy(p, dest / p.name)
    return dest


@needs_fixtures
@pytest.mark.parametrize("src", ["ts-common/src/test/resources/log-files/timeindex_test",
                                 "ts-segment-uploader/src/test/resources/log_segments/test_topic_a-0"])
def test_rebuilt_indexes_match_the_brokers(src: str, tmp_path: Path) -> None:
    """With their index files deleted, the indexes kafkalog rebuilds equal the broker's."""
    source = PINTEREST / src
    require_fixture(source)
    part = copy_partition(source, tmp_path / "topic-0", drop_indexes=True)
    with Log.open(part) as log:
        n = log.log_end_offset
        assert n > 0
    for p in sorted(source.glob("*.index")):
        if (source / p.name.replace(".index", ".log")).exists():
            assert (part / p.name).read_bytes() == p.read_bytes(), p.name
    for p in sorted(source.glob("*.timeindex")):
        if (source / p.name.replace(".timeindex", ".log")).exists():
            ours = np.frombuffer((part / p.name).read_bytes(), ">i8,>i4")
            theirs = np.frombuffer(p.read_bytes(), ">i8,>i4")
            theirs = theirs[: len(ours)] if len(theirs) >= len(ours) else theirs
            assert ours.tolist() == theirs.tolist(), p.name


@needs_fixtures
def test_broker_directory_reads_and_looks_up(tmp_path: Path) -> None:
    source = PINTEREST / "ts-common/src/test/resources/log-files/timeindex_test"
    part = copy_partition(source, tmp_path / "topic-0")
    with Log.open(part) as log:
        assert (log.log_start_offset, log.log_end_offset) == (0, 30565)
        for off in (0, 1, 7777, 15000, 30564):
            got = log.read(off, max_bytes=1)
            assert got.column("offset").to_pylist()[0] == off
            assert got.column("key").to_pylist()[0] == str(off).encode()
        ts = decode_batches((part / "00000000000000000000.log").read_bytes())
        t = ts.column("timestamp").cast(pa.int64()).to_pylist()
        assert log.offsets_for_times(t[100]) == 100
        assert log.offsets_for_times(t[0] - 1) == 0

"""The small state files (offset and leader-epoch checkpoints, ``partition.metadata``, the
clean-shutdown marker, the topic configuration, producer snapshots) are read bounded, and only
when they are regular files: whatever a user's directory or a failing disk puts at their path.

Every file is real: sparse files made with ``truncate`` (hundreds of megabytes that take no disk
and no time to make), real FIFOs (``mkfifo``), real directories. Reads that could block run in a
thread with a timeout, so a regression fails instead of hanging the suite; memory is Python's
own accounting (``tracemalloc``), its peak well below the file's size.
"""

from __future__ import annotations

import io
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from child_process import run_measured
from fifo_guard import promptly
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_core.checkpoint import (CLEAN_SHUTDOWN_FILE, LEADER_EPOCH_CHECKPOINT, MAX_LINE_BYTES,
                                     PARTITION_METADATA_FILE, RECOVERY_POINT_CHECKPOINT,
                                     CleanShutdownFile, CorruptCheckpointError, LeaderEpochCache,
                                     LeaderEpochCheckpointFile, OffsetCheckpointFile,
                                     PartitionMetadataFile, read_java_lines, read_small_file)
from storage_core.checkpoint.checkpoint_file import java_lines
from storage_core.errors import UnsafeFileError
from storage_core.producer import read_snapshot
from storage_core.server import ConfigRepository, CorruptTopicConfigError
from storage_core.server.config_repository import TOPIC_CONFIG_FILE, TOPIC_CONFIG_MAX_BYTES

HUGE = 256 << 20                # a sparse file: no disk, but the size a whole read would allocate
PEAK_LIMIT = 1 << 20            # what a bounded read may allocate, far below HUGE

# reader name -> (file name in the directory, the read)
READERS: dict[str, tuple[str, Callable[[Path], Any]]] = {
    "offset-checkpoint": (RECOVERY_POINT_CHECKPOINT,
                          lambda d: OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).read()),
    "leader-epoch-checkpoint": (LEADER_EPOCH_CHECKPOINT, lambda d: LeaderEpochCheckpointFile.in_dir(d).read()),
    "leader-epoch-cache": (LEADER_EPOCH_CHECKPOINT, lambda d: LeaderEpochCache(d / LEADER_EPOCH_CHECKPOINT)),
    "partition-metadata": (PARTITION_METADATA_FILE, lambda d: PartitionMetadataFile(d).read_metadata()),
    "topic-configs": (TOPIC_CONFIG_FILE, lambda d: ConfigRepository([d]).read_all()),
}
LINE_READERS = [name for name in READERS if name != "topic-configs"]


def peak_of(read: Callable[[], Any]) -> tuple[Any, int]:
    """(what ``read()`` returned or raised, the peak of what it allocated)."""
    tracemalloc.start()
    try:
        try:
            result: Any = read()
        except Exception as e:          # noqa: BLE001 - returned for the test to check
            result = e
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def sparse(path: Path, head: bytes = b"", size: int = HUGE) -> Path:
    path.write_bytes(head)
    os.truncate(path, size)
    return path


# ----------------------------------------------------------------------------- huge files

@pytest.mark.parametrize("reader", LINE_READERS)
def test_a_huge_file_without_newlines_is_refused_at_its_first_line_without_reading_it(tmp_path, reader):
    name, read = READERS[reader]
    path = sparse(tmp_path / name)
    error, peak = peak_of(lambda: read(tmp_path))
    assert isinstance(error, CorruptCheckpointError), error
    assert error.source == str(path) and error.line == 1 and error.position == MAX_LINE_BYTES
    assert f"{path}, line 1, position {MAX_LINE_BYTES}" in str(error)
    assert "Line longer than 1024 bytes" in str(error)
    assert peak < PEAK_LIMIT, f"{peak} bytes allocated for a {HUGE}-byte file"


def test_a_giant_line_after_valid_lines_is_named_by_its_line_and_position(tmp_path):
    path = sparse(tmp_path / RECOVERY_POINT_CHECKPOINT, b"0\n1\n")
    with pytest.raises(CorruptCheckpointError) as info:
        OffsetCheckpointFile(path).read()
    assert info.value.line == 3 and info.value.position == 4 + MAX_LINE_BYTES
    assert "it starts at byte 4" in str(info.value)


def test_a_line_of_the_longest_valid_entry_is_read(tmp_path):
    """The bound is no tighter than the format: a 249-character topic, the extreme int and long."""
    topic = "t" * 249
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_text(f"0\n1\n{topic} -2147483648 -9223372036854775808\n")
    assert OffsetCheckpointFile(path).read() == {(topic, -2**31): -2**63}


def test_a_huge_topic_configuration_is_refused_by_its_size_without_reading_it(tmp_path):
    path = sparse(tmp_path / TOPIC_CONFIG_FILE, b'{"version": 1, "topics": {}}')
    error, peak = peak_of(lambda: ConfigRepository([tmp_path]).read_all())
    assert isinstance(error, CorruptTopicConfigError), error
    assert f"{path}, position {TOPIC_CONFIG_MAX_BYTES}" in str(error)
    assert peak < PEAK_LIMIT


def test_read_small_file_bounds_what_it_reads(tmp_path):
    path = tmp_path / "state"
    path.write_bytes(b"x" * 100)
    assert read_small_file(path, 100) == b"x" * 100
    with pytest.raises(CorruptCheckpointError, match=f"longer than 99 bytes, .*{path}, position 99"):
        read_small_file(path, 99)


def test_a_huge_clean_shutdown_marker_holds_no_epoch_and_is_not_read(tmp_path):
    """Kafka tolerates any content in the marker (only its presence matters): a huge one still
    says "clean", without an epoch, and is not read."""
    sparse(tmp_path / CLEAN_SHUTDOWN_FILE, b'{"version":0,"brokerEpoch":5}')
    marker = CleanShutdownFile(tmp_path)
    epoch, peak = peak_of(marker.read)
    assert epoch is None and marker.exists() and peak < PEAK_LIMIT


# ----------------------------------------------------------------------------- entry counts

@pytest.mark.parametrize("reader", ["offset-checkpoint", "leader-epoch-checkpoint"])
def test_a_checkpoint_stops_at_the_first_entry_beyond_its_count(tmp_path, reader):
    """Kafka's reader reads every line before comparing with the count; here the read stops at
    the first line too many: the giant tail after it is never reached (it would fail as a line
    too long), and nothing past it is held."""
    name, read = READERS[reader]
    entries = b"t 0 1\nt 1 2\nt 2 3\n" if reader == "offset-checkpoint" else b"0 0\n1 5\n2 9\n"
    path = sparse(tmp_path / name, b"0\n1\n" + entries)
    error, peak = peak_of(lambda: read(tmp_path))
    assert isinstance(error, CorruptCheckpointError), error
    assert "Expected 1 entries in checkpoint file, but found 2 or more (stopped reading at line 4)" \
        in str(error)
    assert error.line == 2 and error.source == str(path)
    assert peak < PEAK_LIMIT


def test_a_count_claiming_billions_of_entries_allocates_nothing_for_them(tmp_path):
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_bytes(b"0\n2147483647\nt 0 1\n")
    error, peak = peak_of(lambda: OffsetCheckpointFile(path).read())
    assert isinstance(error, CorruptCheckpointError)
    assert "Expected 2147483647 entries in checkpoint file, but found 1" in str(error)
    assert peak < PEAK_LIMIT


# ----------------------------------------------------------------------------- not regular files

@pytest.mark.parametrize("reader", list(READERS))
def test_a_fifo_is_refused_promptly_not_waited_on(tmp_path, reader):
    name, read = READERS[reader]
    fifo = tmp_path / name
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFileError, match=f"{fifo} is a FIFO, not a regular file"):
        promptly(lambda: read(tmp_path), fifo)


@pytest.mark.parametrize("reader", list(READERS))
def test_a_directory_is_refused_naming_it(tmp_path, reader):
    name, read = READERS[reader]
    (tmp_path / name).mkdir()
    with pytest.raises(UnsafeFileError, match=f"{tmp_path / name} is a directory, not a regular file"):
        read(tmp_path)


def test_a_fifo_or_directory_as_clean_shutdown_marker_holds_no_epoch(tmp_path):
    fifo = tmp_path / CLEAN_SHUTDOWN_FILE
    os.mkfifo(fifo)
    assert promptly(CleanShutdownFile(tmp_path).read, fifo) is None
    fifo.unlink()
    fifo.mkdir()
    assert CleanShutdownFile(tmp_path).read() is None


def test_a_fifo_named_like_a_producer_snapshot_is_refused_promptly(tmp_path):
    fifo = tmp_path / "00000000000000000000.snapshot"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFileError, match="is a FIFO"):
        promptly(lambda: read_snapshot(fifo), fifo)


def test_a_character_device_is_refused(tmp_path):
    """A link to /dev/zero (endless, never a newline): refused by its kind, before any read."""
    link = tmp_path / RECOVERY_POINT_CHECKPOINT
    link.symlink_to("/dev/zero")
    with pytest.raises(UnsafeFileError, match="is a character device"):
        promptly(lambda: OffsetCheckpointFile(link).read())


# ----------------------------------------------------------------------------- the line reader

def test_invalid_utf8_is_named_by_its_byte_and_line(tmp_path):
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_bytes(b"0\n1\nf\xffo 0 1\n")
    with pytest.raises(CorruptCheckpointError, match="Invalid UTF-8 at byte 5") as info:
        OffsetCheckpointFile(path).read()
    assert info.value.line == 3 and info.value.position == 5


@given(st.text(alphabet="ab\r\n\u00e9", max_size=40), st.integers(1, 9))
@settings(max_examples=300, deadline=None)
def test_the_line_reader_splits_as_java_whatever_the_read_size(text, chunk):
    """``read_java_lines`` over a stream read ``chunk`` bytes at a time (a \\r\\n or a UTF-8
    character cut between two reads) gives the lines ``BufferedReader.readLine`` gives."""
    got = [line for _, line in read_java_lines(io.BytesIO(text.encode()), "mem", chunk=chunk)]
    assert got == java_lines(text)


# ----------------------------------------------------------------------------- the tools

def test_verify_reports_a_huge_checkpoint_by_line_and_position_in_bounded_memory(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    path = sparse(root / RECOVERY_POINT_CHECKPOINT, b"0\n1\n")
    rc, out, err, rss = run_measured(["-m", "storage_core.tools", "verify", str(path)], tmp_path)
    assert rc == 1 and "Traceback" not in err, err
    assert f"line 3, position {4 + MAX_LINE_BYTES}: Line longer than 1024 bytes" in out, out
    assert rss < HUGE, f"peak RSS {rss >> 20} MiB for a {HUGE >> 20} MiB file"


def test_a_link_to_a_device_is_refused_without_opening_the_device(tmp_path, monkeypatch):
    """A state or data file that is a link to a device (followed by read-only opens): opening
    some devices acts (a watchdog starts its countdown), so ``open_data_file`` refuses it from a
    ``stat`` before any ``open``. Fault injection: ``os.open`` is wrapped to record its paths."""
    from storage_core.data_files import open_data_file

    link = tmp_path / "recovery-point-offset-checkpoint"
    link.symlink_to("/dev/null")
    opened: list[str] = []
    real_open = os.open

    def recording_open(path, *args, **kwargs):
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)
    with pytest.raises(UnsafeFileError) as e:
        open_data_file(link, os.O_RDONLY, follow_symlinks=True)
    assert str(link) in str(e.value) and "character device" in str(e.value), e.value
    assert opened == []
    with pytest.raises(UnsafeFileError):
        OffsetCheckpointFile(link).read()
    assert opened == []

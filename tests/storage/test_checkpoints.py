"""Checkpoint and metadata text files (kafka_format.md §1.2, §12; kafka_test_checklist.md §8).

Each test names the Kafka test it mirrors. Beyond Kafka's tests: the byte-exact examples of
kafka_format.md §12, Java-exact parsing corners (line breaks, whitespace splitting, number
syntax), crash safety of every write, hypothesis round trips and fuzzing, and the real broker
files under ``shared/fixtures/pinterest-tiered-storage``.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_core.checkpoint import (
    CLEAN_SHUTDOWN_FILE, CLEANER_OFFSET_CHECKPOINT, LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT, PARTITION_METADATA_FILE, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, CheckpointFile,
    CleanShutdownFile, CorruptCheckpointError, EntryFormatter, EpochEntry,
    InconsistentTopicIdError, LazyOffsetCheckpoints, LeaderEpochCache, LeaderEpochCheckpointFile,
    OffsetCheckpointFile, PartitionMetadata, PartitionMetadataFile, TopicPartition,
    format_clean_shutdown, format_leader_epoch_checkpoint, format_offset_checkpoint,
    format_partition_metadata, log_delete_dir_name, log_future_dir_name, log_stray_dir_name,
    parse_checkpoint, parse_clean_shutdown, parse_leader_epoch_checkpoint,
    parse_offset_checkpoint, parse_partition_metadata, parse_topic_partition_dir,
    topic_id_from_str, topic_id_to_str, topic_partition_dir_name, validate_topic_name)
from storage_core.errors import InvalidTopicError, KafkaLogError
from storage_core.format import iter_batches

from fixture_paths import PINTEREST, needs_fixture

needs_fixtures = needs_fixture(PINTEREST)

INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1


# --- §12.2 offset checkpoints -----------------------------------------------------------------

def test_offset_checkpoint_persist_overwrite_reload(tmp_path):
    """OffsetCheckpointFileWithFailureHandlerTest.shouldPersistAndOverwriteAndReloadFile:
    {foo-1: 5, bar-2: 10} round-trips; a second write (empty) fully replaces the content."""
    checkpoint = OffsetCheckpointFile(tmp_path / "checkpoint")
    offsets = {("foo", 1): 5, ("bar", 2): 10}
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    checkpoint.write({})
    assert checkpoint.read() == {}
    assert OffsetCheckpointFile(tmp_path / "checkpoint").read() == {}
    assert (tmp_path / "checkpoint").read_bytes() == b"0\n0\n"


def test_offset_checkpoint_multiple_lines(tmp_path):
    """OffsetCheckpointFileWithFailureHandlerTest.shouldHandleMultipleLines: 10 entries across
    topics and partitions round-trip exactly."""
    checkpoint = OffsetCheckpointFile(tmp_path / "checkpoint")
    offsets = {("foo", 1): 5, ("bar", 6): 10, ("foo", 2): 5, ("bar", 7): 10, ("foo", 3): 5,
               ("bar", 8): 10, ("foo", 4): 5, ("bar", 9): 10, ("foo", 5): 5, ("bar", 10): 10}
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    assert len((tmp_path / "checkpoint").read_text().splitlines()) == 12


def test_offset_checkpoint_empty_file(tmp_path):
    """OffsetCheckpointFileWithFailureHandlerTest.shouldReturnEmptyMapForEmptyFile: a zero-length
    file reads as empty; writing an empty map then reading gives empty. (A missing file reads
    as empty too: Kafka creates it empty before reading.)"""
    path = tmp_path / "checkpoint"
    assert OffsetCheckpointFile(path).read() == {}
    path.write_bytes(b"")
    assert OffsetCheckpointFile(path).read() == {}
    OffsetCheckpointFile(path).write({})
    assert OffsetCheckpointFile(path).read() == {}


def test_offset_checkpoint_unknown_version(tmp_path):
    """OffsetCheckpointFileWithFailureHandlerTest.shouldThrowIfVersionIsNotRecognised: version
    current+1 fails (Kafka: KafkaStorageException); the error names the file and line 1."""
    path = tmp_path / "checkpoint"
    path.write_text("1\n1\nfoo 1 5\n")
    with pytest.raises(CorruptCheckpointError, match="Unrecognised version: 1") as info:
        OffsetCheckpointFile(path).read()
    assert info.value.source == str(path) and info.value.line == 1
    assert str(path) in str(info.value) and "line 1" in str(info.value)
    assert isinstance(info.value, KafkaLogError)


def test_lazy_offset_checkpoints(tmp_path, monkeypatch):
    """OffsetCheckpointFileWithFailureHandlerTest.testLazyOffsetCheckpoint: each dir's file is
    read at most once and answers per partition (1000, 2000, None for unknown)."""
    dir0, dir1 = tmp_path / "d0", tmp_path / "d1"
    dir0.mkdir(), dir1.mkdir()
    file0 = OffsetCheckpointFile(dir0 / REPLICATION_OFFSET_CHECKPOINT)
    file1 = OffsetCheckpointFile(dir1 / REPLICATION_OFFSET_CHECKPOINT)
    file0.write({("foo", 0): 1000})
    file1.write({("foo", 1): 2000})
    reads = []
    original = OffsetCheckpointFile.read

    def counting_read(self):
        reads.append(self.path)
        return original(self)

    monkeypatch.setattr(OffsetCheckpointFile, "read", counting_read)
    lazy = LazyOffsetCheckpoints({str(dir0): file0, str(dir1): file1})
    assert reads == []
    assert lazy.fetch(str(dir0), ("foo", 0)) == 1000
    assert lazy.fetch(str(dir1), ("foo", 1)) == 2000
    assert lazy.fetch(str(dir0), ("foo", 1)) is None
    assert lazy.fetch(str(dir0), TopicPartition("foo", 0)) == 1000
    assert sorted(reads) == sorted([file0.path, file1.path])


def test_lazy_offset_checkpoints_unknown_log_dir(tmp_path):
    """OffsetCheckpointFileWithFailureHandlerTest.testLazyOffsetCheckpointFileInvalidLogDir:
    asking about a log dir without a checkpoint is a programming error (IllegalArgumentException)."""
    lazy = LazyOffsetCheckpoints({str(tmp_path): OffsetCheckpointFile(tmp_path / "c")})
    with pytest.raises(ValueError, match="No checkpoint file for log dir /nope"):
        lazy.fetch("/nope", ("foo", 0))


def test_write_if_dir_exists_after_rename(tmp_path):
    """OffsetCheckpointFileWithFailureHandlerTest.testWriteIfDirExistsShouldNotThrowWhenDirNotExists:
    the partition dir renamed away (deletion) makes writeIfDirExists a silent no-op."""
    part = tmp_path / "foo-0"
    part.mkdir()
    epochs = LeaderEpochCheckpointFile.in_dir(part)
    offsets = OffsetCheckpointFile(part / "some-checkpoint")
    part.rename(tmp_path / "foo-0.0123456789abcdef0123456789abcdef-delete")
    assert epochs.write_if_dir_exists([EpochEntry(0, 0)]) is False
    assert offsets.write_if_dir_exists({("foo", 0): 1}) is False
    assert not part.exists()
    with pytest.raises(FileNotFoundError):     # the plain write does fail
        epochs.write([EpochEntry(0, 0)])
    assert not part.exists()


def test_offset_checkpoint_byte_exact_example():
    """kafka_format.md §12.2: ``0\\n2\\nfoo 0 1234\\nfoo 1 99\\n``, both directions."""
    text = "0\n2\nfoo 0 1234\nfoo 1 99\n"
    assert format_offset_checkpoint({("foo", 0): 1234, ("foo", 1): 99}) == text
    assert parse_offset_checkpoint(text) == {("foo", 0): 1234, ("foo", 1): 99}
    assert list(parse_offset_checkpoint(text)) == [TopicPartition("foo", 0),
                                                   TopicPartition("foo", 1)]


def test_offset_checkpoint_file_names_and_byte_exact_file(tmp_path):
    """kafka_format.md §1.1: the four offset checkpoints share the format; names as Kafka's."""
    assert RECOVERY_POINT_CHECKPOINT == "recovery-point-offset-checkpoint"
    assert LOG_START_OFFSET_CHECKPOINT == "log-start-offset-checkpoint"
    assert REPLICATION_OFFSET_CHECKPOINT == "replication-offset-checkpoint"
    assert CLEANER_OFFSET_CHECKPOINT == "cleaner-offset-checkpoint"
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                 REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT):
        OffsetCheckpointFile(tmp_path / name).write({("foo", 0): 1234, ("foo", 1): 99})
        assert (tmp_path / name).read_bytes() == b"0\n2\nfoo 0 1234\nfoo 1 99\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
         REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT])


@pytest.mark.parametrize("text, expected", [
    ("0\n", {}),                                   # missing count line -> empty
    ("0", {}),
    ("0\r\n1\r\nfoo 0 5\r\n", {("foo", 0): 5}),     # readLine ends lines at \r\n ...
    ("0\r1\rfoo 0 5", {("foo", 0): 5}),             # ... and at a lone \r; last line unterminated
    ("0\n1\nfoo\t0   5 \n", {("foo", 0): 5}),       # \s+ split, trailing whitespace dropped
    ("0\n2\nfoo 0 5\nfoo 0 7\n", {("foo", 0): 7}),  # a repeated partition keeps the last offset
    ("+0\n1\nfoo +3 -1\n", {("foo", 3): -1}),       # Integer.parseInt takes a sign
    (f"0\n1\nfoo {INT32_MAX} {INT64_MAX}\n", {("foo", INT32_MAX): INT64_MAX}),
])
def test_offset_checkpoint_java_reader_corners(text, expected):
    """CheckpointFile.CheckpointReadBuffer + OffsetCheckpointFile.Formatter as Java runs them."""
    assert parse_offset_checkpoint(text) == expected


@pytest.mark.parametrize("text, line, message", [
    ("x\n", 1, "Malformed line"),
    ("0\nx\n", 2, "Malformed line"),
    (" 0\n0\n", 1, "Malformed line"),               # Integer.parseInt refuses spaces
    ("0\n 0\n", 2, "Malformed line"),
    ("0\n1_0\n", 2, "Malformed line"),              # ... and underscores (Python's int would not)
    ("0\n\u0661\n", 2, "Malformed line"),           # ... and (here) non-ASCII digits
    ("0\n2\nfoo 0 1\n", 2, "Expected 2 entries in checkpoint file, but found 1"),
    ("0\n1\nfoo 0 1\nbar 0 2\n", 2, "Expected 1 entries in checkpoint file, but found 2"),
    ("0\n-1\n", 2, "Expected -1 entries"),
    ("0\n1\nfoo 0\n", 3, "Malformed line"),          # two tokens
    ("0\n1\nfoo 0 1 2\n", 3, "Malformed line"),      # four tokens
    ("0\n1\n foo 0 1\n", 3, "Malformed line"),       # leading whitespace: a leading empty token
    ("0\n1\n\n", 3, "Malformed line"),               # an empty line is one (empty) token
    ("0\n2\nfoo 0 1\n\n", 4, "Malformed line"),      # trailing blank line
    ("0\n1\nfoo x 1\n", 3, "Malformed line"),
    ("0\n1\nfoo 2147483648 1\n", 3, "out of range"),  # partition must be an int32
    ("0\n1\nfoo 0 9223372036854775808\n", 3, "out of range"),
    ("2147483648\n", 1, "Malformed line"),
])
def test_offset_checkpoint_malformed_names_file_and_line(tmp_path, text, line, message):
    """Kafka's reader rules (§12.1): every violation is an error naming the file and line."""
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(text.encode())
    with pytest.raises(CorruptCheckpointError, match=message) as info:
        OffsetCheckpointFile(path).read()
    assert info.value.line == line and info.value.source == str(path)
    assert f"line {line}" in str(info.value) and str(path) in str(info.value)


def test_checkpoint_invalid_utf8_names_line(tmp_path):
    """Kafka reads checkpoints with a strict UTF-8 decoder (MalformedInputException)."""
    path = tmp_path / "checkpoint"
    path.write_bytes(b"0\n1\nf\xffo 0 1\n")
    with pytest.raises(CorruptCheckpointError, match="Invalid UTF-8") as info:
        OffsetCheckpointFile(path).read()
    assert info.value.line == 3


def test_offset_checkpoint_write_refuses_unwritable_entries(tmp_path):
    """Only what Kafka's TopicPartition can hold is written, so every written line reads back."""
    checkpoint = OffsetCheckpointFile(tmp_path / "c")
    with pytest.raises(InvalidTopicError):
        checkpoint.write({("a topic", 0): 1})
    with pytest.raises(ValueError, match="partition"):
        checkpoint.write({("foo", 2**31): 1})
    with pytest.raises(ValueError, match="offset"):
        checkpoint.write({("foo", 0): 2**63})
    assert not (tmp_path / "c").exists()


def test_generic_checkpoint_file(tmp_path):
    """server-common CheckpointFile with a custom EntryFormatter: version checked, entries kept."""
    formatter = EntryFormatter(format=lambda s: s.upper(),
                               parse=lambda line: line.lower() if line.isalpha() else None)
    checkpoint = CheckpointFile(tmp_path / "words", 7, formatter)
    checkpoint.write(["alpha", "beta"])
    assert (tmp_path / "words").read_text() == "7\n2\nALPHA\nBETA\n"
    assert checkpoint.read() == ["alpha", "beta"]
    assert CheckpointFile(tmp_path / "words", 6, formatter).path == tmp_path / "words"
    with pytest.raises(CorruptCheckpointError, match="expected version: 6"):
        CheckpointFile(tmp_path / "words", 6, formatter).read()
    with pytest.raises(ValueError, match="line break"):
        CheckpointFile(tmp_path / "x", 0, EntryFormatter(str, str)).write(["a\nb"])
    with pytest.raises(CorruptCheckpointError, match="Malformed"):
        parse_checkpoint("7\n1\n123\n", 7, formatter.parse, source="words")


# --- crash safety -----------------------------------------------------------------------------

def test_write_is_tmp_fsync_rename_fsync_dir(tmp_path, monkeypatch):
    """CheckpointFile.write + Utils.atomicMoveWithFallback: <file>.tmp written and fsynced,
    renamed over the file, then the directory fsynced; nothing left behind."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        events.append(("fsync", kind))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", Path(src).name, Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").write({("foo", 0): 1})
    assert events == [("fsync", "file"),
                      ("replace", "recovery-point-offset-checkpoint.tmp",
                       "recovery-point-offset-checkpoint"),
                      ("fsync", "dir")]
    assert [p.name for p in tmp_path.iterdir()] == ["recovery-point-offset-checkpoint"]


@pytest.mark.parametrize("fail_at", ["write", "fsync", "replace"])
def test_crash_during_write_keeps_old_file(tmp_path, monkeypatch, fail_at):
    """A write that dies before the rename leaves the old checkpoint intact (and readable)."""
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    checkpoint = LeaderEpochCheckpointFile(path)
    checkpoint.write([EpochEntry(0, 0)])
    old = path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError(errno.EIO, f"simulated crash in {fail_at}")

    if fail_at == "write":
        real_open = open

        def torn_open(file, mode="r", *args, **kwargs):
            f = real_open(file, mode, *args, **kwargs)
            if str(file).endswith(".tmp"):
                f.write(b"0\n3\n1 1")                # torn temp file
                f.close()
                raise OSError(errno.ENOSPC, "simulated crash in write")
            return f
        monkeypatch.setattr("builtins.open", torn_open)
    else:
        monkeypatch.setattr(os, fail_at, boom)
    with pytest.raises(OSError):
        checkpoint.write([EpochEntry(0, 0), EpochEntry(3, 1500)])
    monkeypatch.undo()
    assert path.read_bytes() == old
    assert checkpoint.read() == [EpochEntry(0, 0)]
    assert not (tmp_path / (LEADER_EPOCH_CHECKPOINT + ".tmp")).exists()


def test_leftover_tmp_from_crash_is_ignored_then_replaced(tmp_path):
    """A crash (kill -9) after writing <file>.tmp leaves it behind: reading still sees the real
    file, and the next write replaces the stray temp file."""
    path = tmp_path / REPLICATION_OFFSET_CHECKPOINT
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({("foo", 0): 10})
    (tmp_path / (path.name + ".tmp")).write_bytes(b"0\n5\ngarbage that never got rena")
    assert checkpoint.read() == {("foo", 0): 10}
    checkpoint.write({("foo", 0): 11})
    assert checkpoint.read() == {("foo", 0): 11}
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    # the file is at all times either the old content or the new, never a mix
    assert path.read_bytes() == b"0\n1\nfoo 0 11\n"


def test_leftover_tmp_with_no_real_file(tmp_path):
    """A crash during the very first write: only a .tmp exists; the checkpoint reads as empty
    (as if never written), exactly what Kafka would read from its freshly created empty file."""
    (tmp_path / "leader-epoch-checkpoint.tmp").write_bytes(b"0\n1\n")
    assert LeaderEpochCheckpointFile.in_dir(tmp_path).read() == []
    assert LeaderEpochCache(LeaderEpochCheckpointFile.in_dir(tmp_path)).entries == []


# --- §12.3 leader-epoch checkpoint and LeaderEpochFileCache -----------------------------------

def test_leader_epoch_checkpoint_persist_overwrite_reload(tmp_path):
    """LeaderEpochCheckpointFileWithFailureHandlerTest.shouldPersistAndOverwriteAndReloadFile /
    shouldRetainValuesEvenIfCheckpointIsRecreated: [(0,1),(1,2),(2,3)] round-trips, a later
    write [(3,4),(4,5)] replaces it, and a new instance on the same file reads it."""
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    checkpoint = LeaderEpochCheckpointFile(path)
    first = [EpochEntry(0, 1), EpochEntry(1, 2), EpochEntry(2, 3)]
    checkpoint.write(first)
    assert checkpoint.read() == first
    second = [EpochEntry(3, 4), EpochEntry(4, 5)]
    checkpoint.write(second)
    assert checkpoint.read() == second
    assert LeaderEpochCheckpointFile(path).read() == second


def test_leader_epoch_checkpoint_byte_exact_example(tmp_path):
    """kafka_format.md §12.3: ``0\\n2\\n0 0\\n3 1500\\n``."""
    text = "0\n2\n0 0\n3 1500\n"
    entries = [EpochEntry(0, 0), EpochEntry(3, 1500)]
    assert format_leader_epoch_checkpoint(entries) == text
    assert parse_leader_epoch_checkpoint(text) == entries
    LeaderEpochCheckpointFile.in_dir(tmp_path).write(entries)
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == text.encode()


@pytest.mark.parametrize("text, line", [
    ("1\n0\n", 1), ("0\n1\n0\n", 3), ("0\n1\n0 0 0\n", 3), ("0\n1\n2147483648 0\n", 3),
    ("0\n2\n0 0\n", 2),
])
def test_leader_epoch_checkpoint_malformed(tmp_path, text, line):
    """LeaderEpochCheckpointFile.Formatter: exactly two tokens, epoch int32, offset int64."""
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError) as info:
        LeaderEpochCheckpointFile(path).read()
    assert info.value.line == line and str(path) in str(info.value)


@pytest.fixture
def cache(tmp_path) -> LeaderEpochCache:
    return LeaderEpochCache(LeaderEpochCheckpointFile(tmp_path / LEADER_EPOCH_CHECKPOINT))


def _on_disk(cache: LeaderEpochCache) -> list[EpochEntry]:
    return LeaderEpochCheckpointFile(cache.checkpoint.path).read()


def test_assign_same_epoch_later_offset_is_ignored(cache):
    """LeaderEpochFileCacheTest.shouldNotOverwriteOffsetForALeaderEpochOnceItHasBeenAssigned /
    shouldNotUpdateEpochAndStartOffsetIfItDidNotChange: (2,6) then (2,10) keeps (2,6)."""
    assert cache.assign(2, 6) is True
    assert cache.assign(2, 10) is False
    assert cache.assign(2, 6) is False
    assert cache.entries == [EpochEntry(2, 6)] == _on_disk(cache)


def test_assign_new_epoch_same_offset_replaces(cache):
    """LeaderEpochFileCacheTest.shouldEnforceMonotonicallyIncreasingStartOffsets:
    (2,9) then (3,9) -> [(3,9)]."""
    cache.assign(2, 9)
    cache.assign(3, 9)
    assert cache.entries == [EpochEntry(3, 9)] == _on_disk(cache)


def test_assign_new_epoch_lower_offset_removes_conflicts(cache):
    """LeaderEpochFileCacheTest.shouldEnforceOffsetsIncreaseMonotonically:
    (2,6) then (3,5) -> [(3,5)]."""
    cache.assign(2, 6)
    cache.assign(3, 5)
    assert cache.entries == [EpochEntry(3, 5)] == _on_disk(cache)


def test_assign_older_epoch_higher_offset_truncates_later_epochs(cache):
    """LeaderEpochFileCacheTest.shouldEnforceMonotonicallyIncreasingEpochs: (1,5),(2,6) then
    (1,7) -> [(1,7)]; end offset of 1 is the LEO, of 2 undefined."""
    cache.assign(1, 5)
    cache.assign(2, 6)
    cache.assign(1, 7)
    assert cache.entries == [EpochEntry(1, 7)] == _on_disk(cache)
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_assign_same_epoch_earlier_offset_moves_it_down(cache):
    """LeaderEpochFileCacheTest.shouldTruncateIfMatchingEpochButEarlierStartingOffset."""
    for epoch, offset in [(5, 11), (6, 12), (7, 13), (7, 12)]:
        cache.assign(epoch, offset)
    assert cache.entries == [EpochEntry(5, 11), EpochEntry(7, 12)]
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)


def test_assign_refuses_negative_epoch_or_offset(cache):
    """LeaderEpochFileCache.assign: IllegalArgumentException for a negative epoch or offset
    (the log skips batches without a leader epoch, -1, before calling it)."""
    with pytest.raises(ValueError, match="invalid partition leader epoch entry"):
        cache.assign(-1, 0)
    with pytest.raises(ValueError, match="invalid partition leader epoch entry"):
        cache.assign(0, -1)
    assert cache.entries == [] and not cache.checkpoint.path.exists()


def test_epoch_cache_persists_between_instances(tmp_path):
    """LeaderEpochFileCacheTest.shouldPersistEpochsBetweenInstances: a new cache over the same
    checkpoint file sees [(2,6)]."""
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    LeaderEpochCache(LeaderEpochCheckpointFile(path)).assign(2, 6)
    assert LeaderEpochCache(LeaderEpochCheckpointFile(path)).entries == [EpochEntry(2, 6)]
    assert LeaderEpochCache(path).entries == [EpochEntry(2, 6)]


def test_epoch_cache_load_repairs_non_monotonic_file_and_refuses_negative(tmp_path):
    """LeaderEpochFileCache's constructor replays the file through assign(): conflicting
    entries are dropped as on assignment; a negative entry is an error naming the file."""
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text("0\n3\n1 5\n2 6\n1 7\n")
    assert LeaderEpochCache(path).entries == [EpochEntry(1, 7)]
    path.write_text("0\n1\n-1 0\n")
    with pytest.raises(CorruptCheckpointError, match="invalid partition leader epoch") as info:
        LeaderEpochCache(path)
    assert info.value.source == str(path)


def _cache_2_6_3_8_4_11(cache: LeaderEpochCache) -> LeaderEpochCache:
    for epoch, offset in [(2, 6), (3, 8), (4, 11)]:
        cache.assign(epoch, offset)
    return cache


@pytest.mark.parametrize("end_offset, expected", [
    (8, [(2, 6)]),              # shouldDropEntriesOnEpochBoundaryWhenRemovingLatestEntries
    (9, [(2, 6), (3, 8)]),      # shouldDropEntriesBetweenEpochBoundaryWhenRemovingNewest
    (-1, [(2, 6), (3, 8), (4, 11)]),  # shouldNotResetEpochHistoryTailIfUndefinedPassed
    (12, [(2, 6), (3, 8), (4, 11)]),
    (6, []),
])
def test_truncate_from_end(cache, end_offset, expected):
    """LeaderEpochFileCacheTest truncateFromEnd cases: entries starting at or after x go."""
    _cache_2_6_3_8_4_11(cache).truncate_from_end(end_offset)
    assert cache.entries == [EpochEntry(*e) for e in expected] == _on_disk(cache)


@pytest.mark.parametrize("start_offset, expected", [
    (8, [(3, 8), (4, 11)]),     # shouldPreserveResetOffsetOnClearEarliestIfOneExists
    (9, [(3, 9), (4, 11)]),     # shouldUpdateOffsetBetweenEpochBoundariesOnClearEarliest
    (1, [(2, 6), (3, 8), (4, 11)]),   # shouldNotClearAnythingIfOffsetTooEarly
    (6, [(2, 6), (3, 8), (4, 11)]),   # shouldNotClearAnythingIfOffsetIsFirstOffset
    (11, [(4, 11)]),            # shouldRetainLatestEpochOnClearAllEarliest
    (15, [(4, 15)]),            # shouldRetainLatestEpochOnClearAllEarliestAndUpdateItsOffset
    (-1, [(2, 6), (3, 8), (4, 11)]),  # shouldNotResetEpochHistoryHeadIfUndefinedPassed
])
def test_truncate_from_start(cache, start_offset, expected):
    """LeaderEpochFileCacheTest truncateFromStart cases: entries wholly below x go, the entry
    containing x now starts at x."""
    _cache_2_6_3_8_4_11(cache).truncate_from_start(start_offset)
    assert cache.entries == [EpochEntry(*e) for e in expected] == _on_disk(cache)


def test_truncate_from_start_between_first_two_epochs(cache):
    """LeaderEpochFileCacheTest.shouldUpdateOffsetBetweenFirstTwoEpochBoundariesOnClearEarliest:
    ((0,0),(1,7),(2,10)) truncateFromStart(5) -> [(0,5),(1,7),(2,10)]."""
    for epoch, offset in [(0, 0), (1, 7), (2, 10)]:
        cache.assign(epoch, offset)
    removed = cache.truncate_from_start(5)
    assert removed == [EpochEntry(0, 0)]
    assert cache.entries == [EpochEntry(0, 5), EpochEntry(1, 7), EpochEntry(2, 10)]


def test_truncations_written_through(cache):
    """LeaderEpochFileCacheTest.shouldWriteCheckpointOnTruncation: after truncateFromEnd(11) and
    truncateFromStart(8) the file holds [(3,8)]."""
    _cache_2_6_3_8_4_11(cache)
    cache.truncate_from_end(11)
    cache.truncate_from_start(8)
    assert _on_disk(cache) == [EpochEntry(3, 8)]
    assert cache.checkpoint.path.read_bytes() == b"0\n1\n3 8\n"


def test_clear_and_flush_and_empty_cache_truncation(cache):
    """LeaderEpochFileCacheTest.shouldClearAllEntries / shouldClearEarliestOnEmptyCache /
    shouldClearLatestOnEmptyCache: clearAndFlush empties the file; truncating an empty cache is
    a no-op."""
    _cache_2_6_3_8_4_11(cache).clear_and_flush()
    assert cache.entries == [] == _on_disk(cache)
    assert cache.checkpoint.path.read_bytes() == b"0\n0\n"
    assert cache.truncate_from_start(7) == [] and cache.truncate_from_end(7) == []
    assert cache.latest_entry is None and cache.earliest_entry is None and len(cache) == 0


def test_clear_without_flush_keeps_file(cache):
    """LeaderEpochFileCache.clear forgets entries in memory only."""
    cache.assign(1, 0)
    cache.clear()
    assert cache.entries == [] and _on_disk(cache) == [EpochEntry(1, 0)]


def test_epoch_for_offset(cache):
    """LeaderEpochFileCacheTest.shouldFetchEpochForGivenOffset: ((0,10),(1,20),(5,30)):
    25->1, 20->1, 30->5, 50->5, and nothing below the first entry (5)."""
    for epoch, offset in [(0, 10), (1, 20), (5, 30)]:
        cache.assign(epoch, offset)
    assert [cache.epoch_for_offset(o) for o in (25, 20, 30, 50, 5, 10)] == [1, 1, 5, 5, None, 0]


def test_latest_previous_next_epoch_entry(cache):
    """LeaderEpochFileCacheTest.shouldFetchLatestEpochOfEmptyCache / testPreviousEpoch /
    testFindPreviousEpoch / testFindPreviousEntry / testFindNextEpoch / testGetEpochEntry."""
    assert cache.latest_epoch is None
    assert cache.previous_epoch() is None and cache.previous_epoch(2) is None
    cache.assign(2, 10)
    assert cache.previous_epoch() is None and cache.previous_entry(2) is None
    cache.assign(4, 15)
    assert cache.previous_epoch() == 2 == cache.previous_epoch(4)
    assert cache.previous_entry(4) == EpochEntry(2, 10)
    cache.assign(10, 20)
    assert cache.previous_epoch() == 4 == cache.previous_epoch(10)
    cache.truncate_from_end(18)
    assert cache.latest_epoch == 4 and cache.previous_epoch() == 2
    assert cache.previous_entry(cache.latest_epoch) == EpochEntry(2, 10)

    cache.clear_and_flush()
    for epoch, offset in [(0, 0), (1, 100), (2, 200)]:
        cache.assign(epoch, offset)
    assert [cache.next_epoch(e) for e in (-1, 0, 1, 2, 100)] == [0, 1, 2, None, None]
    cache.clear_and_flush()
    for epoch, offset in [(2, 100), (3, 500), (5, 1000)]:
        cache.assign(epoch, offset)
    assert cache.epoch_entry(2) == EpochEntry(2, 100)
    assert cache.epoch_entry(3) == EpochEntry(3, 500)
    assert cache.epoch_entry(5) == EpochEntry(5, 1000)
    assert cache.epoch_entry(4) is None
    assert cache.earliest_entry == EpochEntry(2, 100) and cache.latest_entry == EpochEntry(5, 1000)


def test_end_offset_for(cache):
    """LeaderEpochFileCacheTest end-offset cases: shouldReturnUnsupportedIfNoEpochRecorded,
    shouldReturnUndefinedOffsetIfUndefinedEpochRequested, shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch,
    shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested,
    shouldReturnInvalidOffsetIfEpochIsRequestedWhichIsNotCurrentlyTracked,
    shouldIncreaseAndTrackEpochsAsFollowerReceivesManyMessages."""
    undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(0, 0) == undefined
    assert cache.end_offset_for(UNDEFINED_EPOCH, 73) == undefined
    for epoch, offset in [(0, 10), (2, 13), (4, 17)]:
        cache.assign(epoch, offset)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 0) == undefined
    assert cache.end_offset_for(1, 0) == (0, 13)
    assert cache.end_offset_for(2, 0) == (2, 17)
    assert cache.end_offset_for(3, 0) == (2, 17)
    assert cache.end_offset_for(4, 99) == (4, 99)
    assert cache.end_offset_for(5, 99) == undefined
    cache.clear_and_flush()
    for epoch, offset in [(5, 11), (6, 12), (7, 13)]:
        cache.assign(epoch, offset)
    assert cache.end_offset_for(4, 0) == (4, 11)
    cache.clear_and_flush()
    for epoch, offset in [(0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (1, 5), (2, 6), (2, 7)]:
        cache.assign(epoch, offset)
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(1, 3), EpochEntry(2, 6)]
    assert cache.end_offset_for(2, 9) == (2, 9)
    assert cache.end_offset_for(0, 9) == (0, 3)
    assert cache.end_offset_for(1, 9) == (1, 6)


def test_cache_assign_fails_when_dir_gone_but_truncation_is_silent(tmp_path):
    """assign writes through (a lost directory is an error, Kafka's KafkaStorageException);
    truncations use writeIfDirExists (the dir may be renamed for deletion meanwhile)."""
    part = tmp_path / "foo-0"
    part.mkdir()
    cache = LeaderEpochCache(LeaderEpochCheckpointFile.in_dir(part))
    cache.assign(1, 0)
    cache.assign(2, 10)
    part.rename(tmp_path / "gone")
    assert cache.truncate_from_end(10) == [EpochEntry(2, 10)]
    with pytest.raises(FileNotFoundError):
        cache.assign(3, 20)


# --- §12.4 clean-shutdown marker --------------------------------------------------------------

def test_clean_shutdown_basic(tmp_path):
    """CleanShutdownFileHandlerTest.testCleanShutdownFileBasic: write(10) -> exists -> read 10 ->
    delete -> not exists -> read empty. Bytes: Kafka 3.7+ JSON, no newline."""
    marker = CleanShutdownFile(tmp_path)
    assert marker.path == tmp_path / CLEAN_SHUTDOWN_FILE == tmp_path / ".kafka_cleanshutdown"
    marker.write(10)
    assert marker.exists()
    assert marker.path.read_bytes() == b'{"version":0,"brokerEpoch":10}'
    assert marker.read() == 10
    marker.delete()
    assert not marker.exists()
    assert marker.read() is None
    marker.delete()                                   # deleteIfExists


def test_clean_shutdown_default_epoch_and_version(tmp_path):
    """CleanShutdownFileHandlerTest.testCleanShutdownFileNonExist / kafka_format.md §12.4:
    the default write is ``{"version":0,"brokerEpoch":-1}``."""
    marker = CleanShutdownFile(tmp_path)
    marker.write()
    assert marker.path.read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    assert marker.read() == -1
    marker.write(7, version=1)
    assert marker.path.read_bytes() == b'{"version":1,"brokerEpoch":7}'
    assert format_clean_shutdown() == '{"version":0,"brokerEpoch":-1}'


def test_clean_shutdown_unknown_fields_ignored(tmp_path):
    """CleanShutdownFileHandlerTest.testCleanShutdownFileCanParseWithUnknownFields."""
    marker = CleanShutdownFile(tmp_path)
    marker.path.write_text('{"version":0,"brokerEpoch":10,"unknownField":123}')
    assert marker.read() == 10


@pytest.mark.parametrize("content, expected", [
    (b"", None),                                       # Kafka <= 3.6: an empty marker
    (b'{"brokerEpoch":5}', 5),                         # version defaults to 0
    (b'  {"version":0,"brokerEpoch":5}\n', 5),
    (b'{"version":0,"brokerEpoch":5} trailing', 5),   # Jackson stops after the object
    (b'{"version":0}', None),                          # no epoch: Kafka's NPE -> empty
    (b'{"version":0,"brokerEpoch":null}', None),
    (b'{"version":0,"brokerEpoch":"x"}', None),
    (b'{"version":0,"brokerEpoch":true}', None),
    (b'{"version":0,"brokerEpoch":9223372036854775808}', None),
    (b"[1]", None), (b"garbage", None), (b"\xff\xfe", None),
])
def test_clean_shutdown_read_forms(tmp_path, content, expected):
    """kafka_format.md §12.4: both the empty (<= 3.6) and JSON (3.7+) markers are accepted;
    only presence matters for recovery, so an unreadable epoch is just "none"."""
    marker = CleanShutdownFile(tmp_path)
    marker.path.write_bytes(content)
    assert marker.exists()
    assert marker.read() == expected
    if content[:1] != b"\xff":
        assert parse_clean_shutdown(content.decode()) == expected


def test_clean_shutdown_write_fsyncs_file_and_dir(tmp_path, monkeypatch):
    """The marker is the last thing written at shutdown; it must be durable."""
    kinds = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (kinds.append(
        "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"), real_fsync(fd)))
    CleanShutdownFile(tmp_path).write(3)
    assert kinds == ["file", "dir"]


# --- §12.5 partition.metadata and topic ids ---------------------------------------------------

def test_partition_metadata_exactly_two_lines(tmp_path):
    """PartitionMetadataFileTest.testMaybeFlushWithTopicIdPresent: exactly "version: 0" and
    "topic_id: <uuid>", no trailing newline (kafka_format.md §12.5)."""
    topic_id = uuid.uuid4()
    metadata = PartitionMetadataFile(tmp_path)
    metadata.record(topic_id)
    assert metadata.maybe_flush() is True
    data = (tmp_path / PARTITION_METADATA_FILE).read_bytes()
    assert data == f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}".encode()
    assert not data.endswith(b"\n")
    assert data.decode().splitlines() == ["version: 0", f"topic_id: {topic_id_to_str(topic_id)}"]


def test_partition_metadata_nothing_recorded_writes_nothing(tmp_path):
    """PartitionMetadataFileTest.testMaybeFlushWithNoTopicIdPresent: 0 bytes (no file)."""
    metadata = PartitionMetadataFile(tmp_path)
    assert metadata.maybe_flush() is False
    assert not metadata.exists() and list(tmp_path.iterdir()) == []


def test_partition_metadata_record_different_topic_id(tmp_path):
    """PartitionMetadataFileTest.testSetRecordWithDifferentTopicId /
    testSetRecordWithSameTopicId: a different id than the recorded one is refused
    (InconsistentTopicIdException); the same id (even re-parsed from its string) is fine."""
    metadata = PartitionMetadataFile(tmp_path)
    topic_id = uuid.uuid4()
    metadata.record(topic_id)
    with pytest.raises(InconsistentTopicIdError, match="already recorded"):
        metadata.record(uuid.uuid4())
    metadata.record(topic_id)
    metadata.record(topic_id_from_str(topic_id_to_str(topic_id)))
    assert isinstance(InconsistentTopicIdError("x"), KafkaLogError)


def test_partition_metadata_read(tmp_path):
    """PartitionMetadataFileTest.testRead: read() gives version 0 and the id."""
    topic_id = uuid.uuid4()
    metadata = PartitionMetadataFile(tmp_path)
    metadata.write(topic_id)
    assert metadata.read() == topic_id
    assert metadata.read_metadata() == PartitionMetadata(0, topic_id)


def test_partition_metadata_reopen_and_directory_rename(tmp_path):
    """UnifiedLogTest.testLogRecoversTopicId / testTopicIdTransfersAfterDirectoryRename (the file
    part): a new instance reads the id back, and the file moves with a renamed directory."""
    part = tmp_path / "foo-0"
    part.mkdir()
    topic_id = uuid.uuid4()
    PartitionMetadataFile(part).write(topic_id)
    assert PartitionMetadataFile(part).read() == topic_id
    moved = part.rename(tmp_path / log_future_dir_name("foo", 0))
    assert PartitionMetadataFile(moved).read() == topic_id


def test_partition_metadata_malformed_file(tmp_path):
    """PartitionMetadataFileTest.testReadMalformedFileThrowsKafkaStorageExceptionAndMarksLogDirOffline:
    "version: 0\\n" alone fails, naming the file and the missing line 2."""
    (tmp_path / PARTITION_METADATA_FILE).write_text("version: 0\n")
    with pytest.raises(CorruptCheckpointError, match="Malformed line") as info:
        PartitionMetadataFile(tmp_path).read()
    assert info.value.line == 2 and str(tmp_path / PARTITION_METADATA_FILE) in str(info.value)


ID = "p59PN4qkR8y176nhuDDPPA"


@pytest.mark.parametrize("text, version", [
    (f"version: 0\ntopic_id: {ID}", 0),
    (f"version: 0\ntopic_id: {ID}\n", 0),             # a trailing newline is harmless to read
    (f"version: 0\r\ntopic_id: {ID}\r\n", 0),
    (f"version:\t 0\ntopic_id:  {ID}\nextra: ignored\n", 0),
    (f"version: 3\ntopic_id: {ID}", 3),               # newer versions read (downgrade)
    (f"version: 0\ntopic_id: {ID}==", 0),             # Base64 padding is optional
])
def test_partition_metadata_reader_accepts(text, version):
    """PartitionMetadataReadBuffer.read: each line splits once on ":\\s+"; version >= 0."""
    assert parse_partition_metadata(text) == PartitionMetadata(version, topic_id_from_str(ID))


@pytest.mark.parametrize("text, line, message", [
    ("", 1, "Malformed line"),
    (f"version 0\ntopic_id: {ID}", 1, "Malformed line"),
    (f"version:0\ntopic_id: {ID}", 1, "Malformed line"),      # ":\s+" needs whitespace
    (f"Version: 0\ntopic_id: {ID}", 1, "Malformed line"),
    (f"version: x\ntopic_id: {ID}", 1, "Malformed line"),
    (f"version: 0 \ntopic_id: {ID}", 1, "Malformed line"),
    (f"version: -1\ntopic_id: {ID}", 1, "Unrecognized version"),
    ("version: 0\n", 2, "Malformed line"),
    (f"version: 0\ntopicid: {ID}", 2, "Malformed line"),
    (f"version: 0\ntopic_id: {ID} ", 2, "Malformed line"),
    ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2, "all zeros"),
    ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAA", 2, "15 bytes"),
    ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAAAAA", 2, "too long"),
    (f"version: 0\ntopic_id: {ID[:-1]}+", 2, "URL-safe"),    # '+' is not URL-safe base64
])
def test_partition_metadata_reader_refuses(text, line, message):
    """PartitionMetadataReadBuffer.read refusals: wrong keys, bad version, bad or zero Uuid."""
    with pytest.raises(CorruptCheckpointError, match=message) as info:
        parse_partition_metadata(text, source="p/partition.metadata")
    assert info.value.line == line and "p/partition.metadata" in str(info.value)


def test_topic_id_string_form():
    """Uuid.toString / fromString: URL-safe base64 of the 16 big-endian bytes, no padding."""
    assert topic_id_to_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"      # Uuid.ZERO_UUID
    assert topic_id_to_str(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"      # METADATA_TOPIC_ID
    assert topic_id_to_str(uuid.UUID(int=2**128 - 1)) == "_____________________w"
    assert topic_id_from_str("_____________________w") == uuid.UUID(int=2**128 - 1)
    assert topic_id_from_str(ID) == uuid.UUID("a79f4f37-8aa4-47cc-b5ef-a9e1b830cf3c")
    for bad in ["", "AAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAA=", "AAAA AAAAAAAAAAAAAAAAA",
                "AAAAAAAAAAAAAAAAAAAA/w", "A" * 25]:
        with pytest.raises(ValueError):
            topic_id_from_str(bad)
    with pytest.raises(ValueError, match="reserved"):
        format_partition_metadata(uuid.UUID(int=0))
    with pytest.raises(ValueError, match="reserved"):
        PartitionMetadataFile(".").record(uuid.UUID(int=0))


@given(st.builds(uuid.UUID, int=st.integers(1, 2**128 - 1)))
def test_topic_id_round_trip(topic_id):
    """Property: every non-zero id survives toString/fromString and the metadata file format."""
    text = topic_id_to_str(topic_id)
    assert len(text) == 22 and re.fullmatch(r"[A-Za-z0-9_-]{22}", text)
    assert topic_id_from_str(text) == topic_id
    assert parse_partition_metadata(format_partition_metadata(topic_id)).topic_id == topic_id


# --- §1.2 topic names and partition directory names -------------------------------------------

def test_parse_topic_partition_name():
    """LocalLogTest.testParseTopicPartitionName: "test_topic-143" -> (test_topic, 143)."""
    assert parse_topic_partition_dir("test_topic-143") == ("test_topic", 143)
    assert parse_topic_partition_dir(Path("/data/kafka-logs/test_topic-143")) == \
        TopicPartition("test_topic", 143)
    assert str(TopicPartition("foo", 3)) == "foo-3"


def test_parse_topic_partition_name_with_period_for_deleted_topic():
    """LocalLogTest.testParseTopicPartitionNameWithPeriodForDeletedTopic (KAFKA-5232): a topic
    with '.' and '-' marked for deletion parses back."""
    assert parse_topic_partition_dir(log_delete_dir_name("foo.bar-testtopic", 42)) == \
        ("foo.bar-testtopic", 42)
    assert parse_topic_partition_dir(log_future_dir_name("foo.bar-testtopic", 42)) == \
        ("foo.bar-testtopic", 42)
    assert parse_topic_partition_dir(log_stray_dir_name("foo.bar-testtopic", 42)) == \
        ("foo.bar-testtopic", 42)
    uid = "0123456789abcdef0123456789abcdef"
    assert parse_topic_partition_dir(f"my.topic-7.{uid}-future") == ("my.topic", 7)
    assert parse_topic_partition_dir(f"my-topic-7.{uid}-stray") == ("my-topic", 7)


@pytest.mark.parametrize("name", [
    "",                                     # testParseTopicPartitionNameForEmptyName
    None,                                   # testParseTopicPartitionNameForNull
    "test_topic1999",                       # testParseTopicPartitionNameForMissingSeparator
    "test_topic1999.-delete",
    "-1999",                                # testParseTopicPartitionNameForMissingTopic
    "-1999.0123456789abcdef0123456789abcdef-delete",
    "test_topic-",                          # testParseTopicPartitionNameForMissingPartition
    "test_topic-.-delete",
    "test_topic-1999a",                     # testParseTopicPartitionNameForInvalidPartition
    "test_topic1999a.-delete",
    "non_kafka_dir",                        # testParseTopicPartitionNameForExistingInvalidDir
    "non_kafka_dir-delete",
    "topic-2147483648",                     # not an int32
    "topic-1 .abc-future",                  # \S+ refuses whitespace
    "topic-1.-stray",
])
def test_parse_topic_partition_name_refused(name):
    """LocalLogTest.testParseTopicPartitionNameFor*: each fails (Kafka's KafkaException)."""
    with pytest.raises(InvalidTopicError):
        parse_topic_partition_dir(name)


def test_parse_topic_partition_name_java_corners():
    """LocalLog parses the partition with Integer.parseInt (sign, leading zeros) and does not
    validate the topic of an existing directory."""
    assert parse_topic_partition_dir("t-007") == ("t", 7)
    assert parse_topic_partition_dir("t-+5") == ("t", 5)
    assert parse_topic_partition_dir("t--5") == ("t-", 5)
    assert parse_topic_partition_dir("we!rd-0") == ("we!rd", 0)


def test_log_delete_dir_name():
    """LocalLogTest.testLogDeleteDirName: "foo-3.<32 hex>-delete"; a 249-char topic is cut so
    the name is exactly 255 chars ("n" + 212 "o")."""
    name1 = log_delete_dir_name("foo", 3)
    assert re.fullmatch(r"foo-3\.[0-9a-z]{32}-delete", name1) and len(name1) <= 255
    name2 = log_delete_dir_name("n" + "o" * 248, 5)
    assert len(name2) == 255
    assert re.fullmatch(r"no{212}-5\.[0-9a-z]{32}-delete", name2)
    assert parse_topic_partition_dir(name2) == ("n" + "o" * 212, 5)
    assert len(log_stray_dir_name("n" + "o" * 248, 5)) == 255
    assert len(log_future_dir_name("n" + "o" * 248, 5)) == 249 + 42   # not capped
    assert log_delete_dir_name("foo", 3, unique_id="ab" * 16) == f"foo-3.{'ab' * 16}-delete"


def test_topic_partition_dir_name():
    """LocalLog.logDirName for a valid topic and partition >= 0."""
    assert topic_partition_dir_name("orders", 0) == "orders-0"
    assert topic_partition_dir_name("a.b_c-d", 2147483647) == "a.b_c-d-2147483647"
    for partition in (-1, 2**31, True, "1"):
        with pytest.raises(InvalidTopicError, match="Partition"):
            topic_partition_dir_name("orders", partition)
    with pytest.raises(InvalidTopicError):
        topic_partition_dir_name("../etc", 0)


@pytest.mark.parametrize("name, message", [
    ("", "can't be empty"),
    (".", 'cannot be "." or ".."'),
    ("..", 'cannot be "." or ".."'),
    ("a" * 250, "can't be longer than 249 characters"),
    ("foo bar", "ASCII alphanumerics"),
    ("foo/bar", "ASCII alphanumerics"),
    ("../x", "ASCII alphanumerics"),
    ("tōpic", "ASCII alphanumerics"),
    ("foo\n", "ASCII alphanumerics"),
    ("foo:bar", "ASCII alphanumerics"),
])
def test_validate_topic_name_refuses(name, message):
    """Topic.validate (TopicTest.shouldThrowOnInvalidTopicNames): InvalidTopicException."""
    with pytest.raises(InvalidTopicError, match=re.escape(message)):
        validate_topic_name(name)


def test_validate_topic_name_accepts():
    """Topic.validate (TopicTest.shouldAcceptValidTopicNames)."""
    for name in ["valid", "TOPIC", "nAmEs", "ar6", "VaL1d", "_0-9_.", "...", "a" * 249,
                 "__consumer_offsets", "-"]:
        validate_topic_name(name)


# --- properties -------------------------------------------------------------------------------

topics = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True).filter(lambda t: t not in (".", ".."))
int32s = st.integers(-2**31, 2**31 - 1)
int64s = st.integers(-2**63, 2**63 - 1)


@given(st.dictionaries(st.tuples(topics, int32s), int64s, max_size=20))
def test_offset_checkpoint_round_trip(offsets):
    """Property: parse(format(m)) == m, and the text is what Kafka's writer produces."""
    text = format_offset_checkpoint(offsets)
    assert parse_offset_checkpoint(text) == offsets
    expected = [str(len(offsets))] + [f"{t} {p} {o}" for (t, p), o in offsets.items()]
    assert text == "0\n" + "".join(line + "\n" for line in expected)


@given(st.lists(st.builds(EpochEntry, int32s, int64s), max_size=20))
def test_leader_epoch_checkpoint_round_trip(entries):
    """Property: parse(format(entries)) == entries, in order."""
    assert parse_leader_epoch_checkpoint(format_leader_epoch_checkpoint(entries)) == entries


@given(st.text(alphabet="0123456789 -+\t\r\nfoab_.", max_size=60))
@settings(max_examples=300)
def test_checkpoint_reader_fuzz(text):
    """Property: any text parses or raises CorruptCheckpointError, nothing else."""
    try:
        parse_offset_checkpoint(text)
    except CorruptCheckpointError:
        pass
    try:
        parse_leader_epoch_checkpoint(text)
    except CorruptCheckpointError:
        pass
    try:
        parse_partition_metadata(text)
    except CorruptCheckpointError:
        pass


@given(st.lists(st.tuples(st.sampled_from(["assign", "end", "start"]),
                          st.integers(0, 12), st.integers(-1, 40)), max_size=25))
@settings(max_examples=60, deadline=None)
def test_epoch_cache_model(tmp_path_factory, ops):
    """Property: after any mix of assign/truncations the cache is strictly increasing in epoch
    and start offset, equals what Kafka's TreeMap algorithm gives, and is what the file holds."""
    path = tmp_path_factory.mktemp("epochs") / LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache(path)
    model: dict[int, int] = {}     # Kafka's TreeMap<epoch, startOffset>, transcribed literally
    for op, epoch, offset in ops:
        if op == "assign":
            if offset < 0:
                continue
            cache.assign(epoch, offset)
            latest = max(model.items()) if model else None
            if latest is None or epoch != latest[0] or offset < latest[1]:
                for e in sorted(model, reverse=True):
                    if e >= epoch or model[e] >= offset:
                        del model[e]
                    else:
                        break
                model[epoch] = offset
        elif op == "end":
            cache.truncate_from_end(offset)
            if offset >= 0 and model and model[max(model)] >= offset:
                for e in sorted(model, reverse=True):
                    if model[e] >= offset:
                        del model[e]
                    else:
                        break
        else:
            cache.truncate_from_start(offset)
            removed = []
            for e in sorted(model):
                if model[e] <= offset:
                    removed.append(e)
                    del model[e]
                else:
                    break
            if removed:
                model[removed[-1]] = offset
        expected = [EpochEntry(e, o) for e, o in sorted(model.items())]
        assert cache.entries == expected
    entries = cache.entries
    assert all(a.epoch < b.epoch and a.start_offset < b.start_offset
               for a, b in zip(entries, entries[1:]))
    if path.exists():
        assert LeaderEpochCheckpointFile(path).read() == entries


# --- real broker files ------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _batches(partition_dir: Path) -> tuple:
    """(base offset, partition leader epoch) of every batch in the directory's .log files."""
    out = []
    for log in sorted(partition_dir.glob("*.log")):
        for batch in iter_batches(log.read_bytes()):
            out.append((batch.header.base_offset, batch.header.partition_leader_epoch))
    return tuple(out)


def _fixture_files(name: str) -> list[Path]:
    return sorted(PINTEREST.rglob(name))


@needs_fixtures
def test_fixture_leader_epoch_checkpoints():
    """Every real ``leader-epoch-checkpoint``: decodes, re-encodes byte-identically, loads into a
    cache, and gives every batch of the segments beside it the leader epoch stamped in it."""
    files = _fixture_files(LEADER_EPOCH_CHECKPOINT)
    assert len(files) == 6
    for path in files:
        data = path.read_bytes()
        entries = LeaderEpochCheckpointFile(path).read()
        assert entries, path
        assert format_leader_epoch_checkpoint(entries).encode() == data, path
        cache = LeaderEpochCache(LeaderEpochCheckpointFile(path))
        assert cache.entries == entries
        batches = _batches(path.parent)
        for base_offset, epoch in batches:
            assert cache.epoch_for_offset(base_offset) == epoch, (path, base_offset)
        assert path.read_bytes() == data          # loading never rewrites the file


@needs_fixtures
def test_fixture_partition_metadata():
    """The real ``partition.metadata``: decodes, the id is valid and non-zero, and re-encodes to
    the same bytes (no trailing newline)."""
    files = _fixture_files(PARTITION_METADATA_FILE)
    assert len(files) == 1
    for path in files:
        data = path.read_bytes()
        metadata = PartitionMetadataFile(path.parent).read_metadata()
        assert metadata.version == 0 and metadata.topic_id.int != 0
        assert format_partition_metadata(metadata.topic_id).encode() == data
        assert data == b"version: 0\ntopic_id: p59PN4qkR8y176nhuDDPPA"


@needs_fixtures
def test_fixture_partition_dir_names():
    """Every real partition directory (one holding segments) parses as topic-partition."""
    dirs = sorted({p.parent for p in PINTEREST.rglob("*.log")})
    parsed = {d.name: parse_topic_partition_dir(d) for d in dirs if "-" in d.name}
    assert parsed["test_topic_a-2"] == ("test_topic_a", 2)
    assert parsed["test_topic_b-0"] == ("test_topic_b", 0)
    for name, (topic, partition) in parsed.items():
        assert topic_partition_dir_name(topic, partition) == name

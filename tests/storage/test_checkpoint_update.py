"""``update_offset_checkpoint``: the one locked read-modify-write of a data directory's offset
checkpoint (the cleaner manager, the LogManager and ``Log`` all write through it), and
``data_dir_lock``, the lock it takes. Real files, real processes, real ``flock``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from storage_core.checkpoint import (CLEANER_OFFSET_CHECKPOINT, CorruptCheckpointError, OffsetCheckpointFile,
                                     TopicPartition, data_dir_lock, update_offset_checkpoint)

REPO = Path(__file__).resolve().parents[2]


def test_update_reads_applies_and_writes(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    cp.write({("a", 0): 5, ("b", 1): 7})
    seen = []

    def update(entries: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        seen.append(dict(entries))
        entries[TopicPartition("a", 0)] = 9
        entries.pop(TopicPartition("b", 1))
        return entries

    assert update_offset_checkpoint(tmp_path, CLEANER_OFFSET_CHECKPOINT, update) is True
    assert seen == [{TopicPartition("a", 0): 5, TopicPartition("b", 1): 7}]
    assert cp.read() == {TopicPartition("a", 0): 9}
    assert not (tmp_path / (CLEANER_OFFSET_CHECKPOINT + ".tmp")).exists()


def test_missing_file_is_no_entries(tmp_path: Path) -> None:
    got = []
    assert update_offset_checkpoint(tmp_path, "x-checkpoint",
                                    lambda e: got.append(dict(e)) or {TopicPartition("t", 3): 1})
    assert got == [{}]
    assert OffsetCheckpointFile(tmp_path / "x-checkpoint").read() == {TopicPartition("t", 3): 1}


def test_none_leaves_the_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT
    OffsetCheckpointFile(path).write({("a", 0): 5})
    before = path.stat()
    assert update_offset_checkpoint(tmp_path, CLEANER_OFFSET_CHECKPOINT, lambda e: None) is False
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_invalid_topic_entries_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT
    path.write_text("0\n2\n../evil 0 4\ngood 0 6\n")
    got = []
    update_offset_checkpoint(tmp_path, CLEANER_OFFSET_CHECKPOINT, lambda e: got.append(dict(e)) or e)
    assert got == [{TopicPartition("good", 0): 6}]
    assert path.read_text() == "0\n1\ngood 0 6\n"


def test_unreadable_file_raises_unless_reset(tmp_path: Path) -> None:
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT
    path.write_text("0\n2\nbroken\n")
    with pytest.raises(CorruptCheckpointError, match="line 3"):
        update_offset_checkpoint(tmp_path, CLEANER_OFFSET_CHECKPOINT, lambda e: e)
    assert path.read_text() == "0\n2\nbroken\n"            # nothing written
    got = []
    assert update_offset_checkpoint(tmp_path, CLEANER_OFFSET_CHECKPOINT,
                                    lambda e: got.append(dict(e)) or {TopicPartition("t", 0): 2},
                                    reset_unreadable=True)
    assert got == [{}]
    assert path.read_text() == "0\n1\nt 0 2\n"


def test_update_holds_the_data_dir_lock(tmp_path: Path) -> None:
    """While ``update`` runs, another taker of ``data_dir_lock`` waits (flock locks per open
    file, so a second thread of this process is refused as another process would be)."""
    entered, release = threading.Event(), threading.Event()
    order = []

    def slow(entries: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        entered.set()
        release.wait(10)
        order.append("update")
        return entries

    writer = threading.Thread(target=update_offset_checkpoint, args=(tmp_path, "c", slow))
    writer.start()
    assert entered.wait(10)

    def other() -> None:
        with data_dir_lock(tmp_path):
            order.append("other")

    taker = threading.Thread(target=other)
    taker.start()
    taker.join(0.3)
    assert taker.is_alive(), "data_dir_lock was taken while an update held it"
    release.set()
    writer.join(10)
    taker.join(10)
    assert order == ["update", "other"]


_WORKER = textwrap.dedent("""
    import sys
    from storage_core.checkpoint import TopicPartition, update_offset_checkpoint
    data_dir, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(n):
        def update(entries, i=i):
            entries[TopicPartition(topic, i)] = i
            return entries
        update_offset_checkpoint(data_dir, "shared-checkpoint", update, sync=False)
""")


def test_concurrent_processes_lose_no_entries(tmp_path: Path) -> None:
    """Four processes each add 40 entries of their own topic to one file: with the lock around
    each read-modify-write, none is lost."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    topics = [f"t{k}" for k in range(4)]
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp_path), t, "40"], env=env)
             for t in topics]
    assert [p.wait(120) for p in procs] == [0, 0, 0, 0]
    got = OffsetCheckpointFile(tmp_path / "shared-checkpoint").read()
    assert got == {TopicPartition(t, i): i for t in topics for i in range(40)}

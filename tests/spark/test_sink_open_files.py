"""The sink's driver commit under a low open-file limit (real processes, ``setrlimit`` before
exec, no Spark: ``many_partitions_job.py`` calls the streaming writer Spark calls). A commit
holds each partition it writes open from its append to its marker, four files a segment or
so: the driver raises its soft limit to the hard one (as the JVM does), and beyond what the
hard limit allows closes partitions after their appends and reopens them for their markers."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from storage_core.log import Log

JOB = Path(__file__).with_name("many_partitions_job.py")
PARTITIONS, BATCHES, ROWS = 96, 3, 5


def run_job(tmp_path: Path, soft: int, hard: int) -> str:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    done = subprocess.run([sys.executable, str(JOB), str(tmp_path / "out"), str(tmp_path / "chk"),
                           str(PARTITIONS), str(BATCHES), str(ROWS)],
                          preexec_fn=limit, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.splitlines()[-1] == "done"
    return done.stdout


def assert_every_row_once(out: Path) -> None:
    """Every partition holds each micro-batch's rows of both tasks once, all committed (no
    transaction left open: the last stable offset is the log's end)."""
    dirs = sorted(out.glob("out-*"), key=lambda d: int(d.name.rsplit("-", 1)[1]))
    assert len(dirs) == PARTITIONS
    for p, d in enumerate(dirs):
        with Log.open(d, read_only=True) as log:
            assert log.last_stable_offset == log.log_end_offset, d
            values, offset = [], log.log_start_offset
            while offset < log.log_end_offset:
                r = log.fetch(offset, isolation="read_committed", max_bytes=1 << 20)
                values += r.table.column("value").to_pylist()
                offset = r.next_offset
        want = sorted(b"b%d-t%d-%d" % (b, t, i) for b in range(BATCHES) for t in range(2)
                      for i in range(p, ROWS * PARTITIONS, PARTITIONS))
        assert sorted(values) == want, d


@pytest.mark.skipif(sys.platform != "linux", reason="open file limits set with setrlimit, counted in /proc")
def test_commit_to_more_partitions_than_the_hard_limit_holds_open(tmp_path):
    """256 files at most (soft and hard): 96 partitions cannot all stay open through a commit
    (the topic's creation included), some can; every row still lands once, every transaction
    committed, and the hard limit is left alone."""
    out = run_job(tmp_path, 256, 256)
    assert "nofile 256 256" in out
    assert_every_row_once(tmp_path / "out")


@pytest.mark.skipif(sys.platform != "linux", reason="open file limits set with setrlimit, counted in /proc")
def test_commit_raises_the_soft_open_file_limit_to_the_hard_one(tmp_path):
    """A soft limit of 128 under a hard one of 4096: the driver raises its soft limit (as the
    JVM does at start) and holds every partition open."""
    out = run_job(tmp_path, 128, 4096)
    assert "nofile 4096 4096" in out
    assert_every_row_once(tmp_path / "out")

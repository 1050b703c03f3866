"""Crash during cleaning, with real processes (kafka_test_checklist.md §7
LogCleanerTest.testRecoveryAfterCrash, end to end; kafka_format.md §15.3 step 4 and §14).

A compacted log with many duplicate keys (and some tombstones) is prepared once. For each trial a
copy is cleaned by ``cleaner_crash_runner.py clean`` in its own process, which is SIGKILLed:
either just before its K-th file rename (``KAFKALOG_CRASH_AT_RENAME``: the deterministic points
between ".cleaned written", ".cleaned" -> ".swap", old segment -> ".deleted", ".swap" stripped,
cleaner checkpoint replaced) or after a random delay. The directory is then reopened with
``Log.open`` (which discards ``.cleaned`` files, completes ``.swap`` files and removes
``.deleted`` ones) and must read as

    before[:X] cleaned + before[X:] untouched, for X a boundary between cleaned groups

i.e. exactly as before cleaning (X = 0), exactly as after (X = end), or cleaned up to a
group that was swapped in whole: the cleaner swaps group by group, as Kafka's does, and never
shows a group half cleaned. Always: the latest value of every key is the same, offsets
increase strictly, no record is lost that the clean keeps, none appears twice, every value is the
one written at its offset. Finally the cleaner runs again on the recovered directory and must
reach exactly the fully cleaned log.

By default a handful of trials (a few deterministic kill points, a few random kills); with
``KAFKALOG_SLOW=1`` dozens of each.
"""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage_core.log import Log

RUNNER = Path(__file__).resolve().with_name("cleaner_crash_runner.py")
_spec = importlib.util.spec_from_file_location("kafkalog_cleaner_crash_runner", RUNNER)
ccr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ccr)

SLOW = os.environ.get("KAFKALOG_SLOW") == "1"
NOW_MS = ccr.TS0 + 10_000_000          # the cleaning clock: fixed, so every clean is the same
SEED = 4242

Record = tuple[int, bytes, bytes | None]     # (offset, key, value)


def read_all(part: Path) -> list[Record]:
    out: list[Record] = []
    with Log.open(part, ccr.crash_config(), read_only=True) as log:
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            got = log.fetch(offset, max_bytes=1 << 20)
            t = got.table
            out += list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(),
                            t.column("value").to_pylist()))
            offset = got.next_offset
    return out


def latest(recs: list[Record]) -> dict[bytes, bytes | None]:
    return {k: v for _, k, v in recs}


class Reference:
    """The prepared log, its records before and after a full clean, and the group boundaries."""

    def __init__(self, root: Path) -> None:
        self.pristine = root / "pristine"
        self.pristine.mkdir()
        ccr.prepare(self.pristine, SEED)
        part = self.pristine / ccr.CRASH_TOPIC_DIR
        self.before = read_all(part)
        with Log.open(part, ccr.crash_config(), read_only=True) as log:
            bases = [s.base_offset for s in log.segments]
            self.end = log.log_end_offset
        cleaned = root / "reference-cleaned"
        shutil.copytree(self.pristine, cleaned)
        ccr.clean(cleaned, NOW_MS)
        self.after = read_all(cleaned / ccr.CRASH_TOPIC_DIR)
        self.cuts = sorted(set(bases) | {self.end})
        assert latest(self.after) == latest(self.before)
        assert len(self.after) < len(self.before) / 3, "the prepared log should have many duplicates"

    def state_of(self, recs: list[Record]) -> int | None:
        """The cut X with ``recs == after[<X] + before[>=X]``, or None."""
        for x in self.cuts:
            if recs == [r for r in self.after if r[0] < x] + [r for r in self.before if r[0] >= x]:
                return x
        return None


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    return Reference(tmp_path_factory.mktemp("cleaner-crash"))


def run_cleaner(directory: Path, *, kill_at: int | None = None, kill_after_s: float | None = None
                ) -> tuple[int, str, str]:
    env = dict(os.environ)
    if kill_at is not None:
        env[ccr.KILL_ENV] = str(kill_at)
    proc = subprocess.Popen([sys.executable, str(RUNNER), "clean", str(directory), str(NOW_MS)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if kill_after_s is not None:
        try:
            proc.wait(kill_after_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def calibration(reference: Reference, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, float]:
    """An uninterrupted clean in a process: how many renames it makes and how long it takes."""
    d = tmp_path_factory.mktemp("calibrate")
    shutil.copytree(reference.pristine, d, dirs_exist_ok=True)
    started = time.monotonic()
    code, out, err = run_cleaner(d)
    took = time.monotonic() - started
    assert code == 0, err[-3000:]
    renames = int(out.split()[-1])
    assert renames > 10
    assert read_all(d / ccr.CRASH_TOPIC_DIR) == reference.after
    return renames, took


def check_recovered(reference: Reference, directory: Path, what: str) -> int:
    """Reopen after the kill, check the state, clean again to the end; returns the cut."""
    part = directory / ccr.CRASH_TOPIC_DIR
    with Log.open(part, ccr.crash_config(), clock=lambda: NOW_MS):
        pass                                  # recovery: .cleaned dropped, .swap completed
    leftovers = [p.name for p in part.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    assert not leftovers, f"{what}: temporary files left after recovery: {leftovers}"
    recs = read_all(part)
    offsets = [o for o, _, _ in recs]
    assert offsets == sorted(set(offsets)), f"{what}: offsets not strictly increasing"
    for o, k, v in recs:
        bad = ccr.check_value(k, v, o)
        assert bad is None, f"{what}: {bad}"
    assert latest(recs) == latest(reference.before), f"{what}: the latest value of some key changed"
    cut = reference.state_of(recs)
    assert cut is not None, (f"{what}: the log is neither before, after, nor cleaned up to a group "
                             f"boundary ({len(recs)} records; before {len(reference.before)}, "
                             f"after {len(reference.after)})")
    # the cleaner picks up from there and reaches the fully cleaned log
    ccr.clean(directory, NOW_MS)
    assert read_all(part) == reference.after, f"{what}: cleaning again did not reach the cleaned log"
    return cut


def deterministic_points(renames: int) -> list[int]:
    rng = random.Random(7)
    if SLOW:
        points = set(range(1, 16)) | {renames - i for i in range(4)} | {rng.randint(1, renames) for _ in range(30)}
    else:
        # the first group's states: before ".cleaned" -> ".swap" (1), with some files ".swap"
        # and some ".cleaned" (2), all ".swap" and the old segment going ".deleted" (4), before
        # ".swap" is stripped (8); and the last rename (the cleaner checkpoint)
        points = {1, 2, 4, 8, renames}
    return sorted(p for p in points if 1 <= p <= renames)


def test_kill_at_every_kind_of_rename(reference: Reference, calibration, tmp_path: Path) -> None:
    """[LogCleanerTest.testRecoveryAfterCrash, with real processes] SIGKILL just before the
    K-th rename of the clean: leftover ".cleaned" files (the clean is discarded), ".swap" files
    (the swap is completed), ".deleted" files; the log reads before, after or cleaned up to a
    whole group, and a new clean finishes the job."""
    renames, _ = calibration
    cuts = []
    for k in deterministic_points(renames):
        d = tmp_path / f"kill-at-{k}"
        shutil.copytree(reference.pristine, d)
        code, out, err = run_cleaner(d, kill_at=k)
        assert code == -9, f"kill at rename {k}: exit {code}\n{out}\n{err[-3000:]}"
        cuts.append(check_recovered(reference, d, f"kill at rename {k}"))
    assert cuts[0] in (0, reference.cuts[0]), "killed before the first swap: nothing may be cleaned"


def test_kill_at_random_moments(reference: Reference, calibration, tmp_path: Path) -> None:
    """SIGKILL after a random delay (from start-up to past the end of the clean)."""
    _, took = calibration
    rng = random.Random(11)
    trials = 30 if SLOW else 3
    states = []
    for i in range(trials):
        d = tmp_path / f"random-{i}"
        shutil.copytree(reference.pristine, d)
        delay = rng.uniform(0.3 * took, 1.1 * took)
        code, out, err = run_cleaner(d, kill_after_s=delay)
        assert code in (0, -9), f"trial {i}: exit {code}\n{err[-3000:]}"
        states.append(check_recovered(reference, d, f"random kill {i} after {delay:.2f}s"))

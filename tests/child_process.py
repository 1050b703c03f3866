"""Run a Python child process and measure its own peak memory (tests that bound what an
operation on a hostile file may cost). ``tests/`` is on ``sys.path`` through pytest's
``pythonpath`` option in pyproject.toml.

The child is started by a small launcher that forks it: a child started straight from the test
process (``subprocess`` uses vfork) would inherit the test process's RSS high-water mark, which
Linux keeps across exec, so ``ru_maxrss`` would be the test's, not the operation's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

LAUNCHER = r"""
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def run_measured(args: list[str], tmp: Path, timeout: float = 300) -> tuple[int, str, str, int]:
    """Run ``python args`` with this checkout's packages; returns (exit status, negative for a
    signal; stdout; stderr; the child's peak RSS in bytes). A child alive after ``timeout`` is
    killed and the test fails."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out, err, usage = tmp / "child.out", tmp / "child.err", tmp / "child.usage"
    usage.unlink(missing_ok=True)
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(usage), *args], stdout=fo,
                                stderr=fe, env=env, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"{args} still running after {timeout} s: it hangs")
    rc, maxrss_kib = map(int, usage.read_text().split())
    return rc, out.read_text(errors="replace"), err.read_text(errors="replace"), maxrss_kib * 1024

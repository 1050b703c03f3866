"""The SeaweedFS fixture leaves no server behind: a test process killed with SIGKILL takes its
``weed mini`` with it (``PR_SET_PDEATHSIG``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SEAWEEDFS = Path(__file__).resolve().parents[1] / "seaweedfs.py"


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"      # a zombie is dead too
    except FileNotFoundError:
        return True


def test_weed_dies_with_a_killed_test_process(tmp_path, _seaweedfs_server):
    binary = _seaweedfs_server.binary          # the session's server proved the binary is there
    script = textwrap.dedent(f"""
        import importlib.util, sys, time
        spec = importlib.util.spec_from_file_location("seaweedfs", {str(SEAWEEDFS)!r})
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        server = mod.SeaweedFS({str(tmp_path)!r}, {binary!r}).start()
        print(server.proc.pid, flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.strip().isdigit(), f"the child did not start SeaweedFS: {line!r}"
        weed = int(line)
        assert not _gone(weed)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    deadline = time.monotonic() + 30                 # a bound on the wait, not an assertion on time
    while not _gone(weed) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not _gone(weed):
        os.kill(weed, signal.SIGKILL)
        pytest.fail(f"weed mini (pid {weed}) outlived the test process that started it")

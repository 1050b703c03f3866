"""Calls that must not wait on a FIFO, run so that a regression fails its test instead of
hanging the suite: the call runs in a thread; if it is still running after the timeout, the
FIFO is opened for writing without blocking (which ends an open or read blocked on it) and
the test fails."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

TIMEOUT = 30.0


def promptly(call: Callable[[], T], fifo: str | os.PathLike[str] | None = None, *,
             timeout: float = TIMEOUT, what: str = "the call") -> T:
    """``call()`` in a thread: its result, or its exception re-raised in the caller. Still
    running after ``timeout`` seconds: ``fifo`` (if given) is unblocked and the test fails."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as e:      # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        if fifo is not None:
            try:                        # nothing reading it (another kind of hang): no wait here
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
            thread.join(5)
        pytest.fail(f"{what} did not return within {timeout:.0f} s (blocked on {Path(fifo) if fifo else '?'})")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]

"""examples/compaction.py keeps working: run as a user runs it, it compacts a keyed topic and
shows the latest value per key surviving; its own checks (order, one record per key, latest
values, tombstones gone after delete.retention.ms) are assertions inside ``run``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_compaction_example_runs(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "compaction.py"), "--dir", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].endswith("cleanup.policy=compact")
    assert "users-0: cleaned offsets [0, 1020): " in out.stdout
    assert "180 live keys at their latest version, 20 tombstones kept for delete.retention.ms" in out.stdout
    assert "0 tombstones left" in out.stdout
    assert lines[-1].startswith("done: ") and "% smaller) in 4 cleaning rounds" in lines[-1]
    assert (tmp_path / "d" / "cleaner-offset-checkpoint").exists()


def test_compaction_example_figures(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import compaction
    finally:
        sys.path.remove(str(ROOT / "examples"))
    got = compaction.run(tmp_path, quiet=True)
    assert got["records_before"] == 2 * 1020
    assert got["records_after"] == 2 * 180 and got["tombstones_left"] == 0
    assert got["bytes_after"] < got["bytes_before"] / 4

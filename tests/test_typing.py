"""The type check: mypy (pinned in pyproject.toml) over storage_core, kafka_log_source and
kafka_log_sink, with the configuration in ``[tool.mypy]`` (which says why its level is what it is).
``python -m mypy`` from the repository root runs the same check.

mypy runs in a subprocess from the repository root, so it reads this checkout's files (``files``
in the configuration) whatever copy of the packages is installed; its incremental cache lives in
.pytest_cache/ (git-ignored), so a re-run checks only what changed. The test fails with mypy's
report, a count of errors per file first."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["storage_core", "kafka_log_source", "kafka_log_sink"]


def test_mypy_configuration_checks_the_three_packages_without_blanket_ignores():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["files"] == PACKAGES
    for flag in ("check_untyped_defs", "disallow_incomplete_defs", "strict_equality",
                 "warn_unused_ignores", "warn_redundant_casts"):
        assert config[flag] is True, flag
    assert "ignore_errors" not in config and "ignore_missing_imports" not in config
    for override in config.get("overrides", []):
        assert "ignore_errors" not in override, override
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        assert not any(m.split(".")[0] in PACKAGES for m in modules), override


def test_mypy_is_clean():
    run = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".pytest_cache" / "mypy"),
                          "--no-error-summary", "--show-error-codes"],
                         capture_output=True, text=True, cwd=ROOT, timeout=900)
    report = run.stdout + run.stderr
    per_file = Counter(m[1] for m in re.finditer(r"^([\w/]+\.py):\d+: error:", report, re.M))
    counts = "\n".join(f"  {n:4d}  {f}" for f, n in sorted(per_file.items(), key=lambda kv: (-kv[1], kv[0])))
    assert run.returncode == 0, (f"mypy: {sum(per_file.values())} errors in {len(per_file)} files\n"
                                 f"{counts}\n{report[-20000:]}")

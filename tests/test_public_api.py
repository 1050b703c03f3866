"""The engine's public names import from the package, as the README shows them
(``from storage_core import Log, LogConfig, LogManager``), and resolve lazily: a bare
``import storage_core`` (every ``kafkalog`` command starts with one) loads none of the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import storage_core
from storage_core import KafkaLogError, Log, LogConfig, LogManager, LogManagerConfig

REPO = Path(__file__).resolve().parents[1]


def test_the_package_names_are_the_module_classes():
    from storage_core import config, errors, log, server

    assert (Log, LogConfig, LogManager, LogManagerConfig, KafkaLogError) == (
        log.Log, config.LogConfig, server.LogManager, server.LogManagerConfig, errors.KafkaLogError)
    assert set(storage_core.__all__) <= set(dir(storage_core))
    with pytest.raises(AttributeError, match="no attribute 'Logg'"):
        storage_core.Logg                                            # noqa: B018


def test_the_package_names_work_end_to_end(tmp_path):
    """The README's two snippets, through the package names: a log appended and read, then the
    same data directory under a LogManager."""
    with Log.open(tmp_path / "orders-0", LogConfig(segment_bytes=1024)) as log:
        log.append(pa.table({"key": [b"k1", b"k2"], "value": [b"hello", b"world"]}))
        assert log.read(0).column("value").to_pylist() == [b"hello", b"world"]
    with LogManager.open(tmp_path) as mgr:
        assert [str(tp) for tp in mgr.logs] == ["orders-0"]
        assert mgr.get_log(("orders", 0)).log_end_offset == 2


def test_import_storage_core_loads_no_engine_module():
    code = ("import sys, storage_core\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('storage_core.'))\n"
            "print(loaded)\n"
            "from storage_core import Log\n"
            "assert 'storage_core.log' in sys.modules\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"

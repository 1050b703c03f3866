"""What we ship: the sdist and wheel build offline from this checkout, the wheel installs into a
fresh virtual environment and works there (imports from the installed copy, console script,
``py.typed``), versions agree, the code is ruff-clean, and the versions we state as supported
are the ones this test run exercises."""

from __future__ import annotations

import email
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("storage_core", "kafka_log_source", "kafka_log_sink")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    src = tmp_path_factory.mktemp("src") / "kafkalog"
    # build from the files git tracks (plus the new ones of this checkout), not from build/,
    # .venv/ or demo-data/ lying around
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "demo-data", "__pycache__",
        ".pytest_cache", ".ruff_cache", ".hypothesis", ".interop"))
    run = subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--no-isolation",
                          "--outdir", str(out), str(src)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


def _one(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def test_wheel_holds_the_three_packages_typed_and_no_tests(dist):
    names = zipfile.ZipFile(_one(dist, "kafkalog-*.whl")).namelist()
    for pkg in PACKAGES:
        assert f"{pkg}/__init__.py" in names
        assert f"{pkg}/py.typed" in names, f"{pkg} is not marked typed"
    assert not [n for n in names if n.startswith(("tests/", "bench/", "examples/"))]
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    msg = email.message_from_bytes(zipfile.ZipFile(_one(dist, "kafkalog-*.whl")).read(meta))
    import storage_core
    assert msg["Version"] == storage_core.__version__
    assert msg["Requires-Python"] == ">=3.11"
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "kafkalog = storage_core.tools.cli:main" in zipfile.ZipFile(
        _one(dist, "kafkalog-*.whl")).read(entry).decode()


def test_sdist_holds_the_sources_and_the_project_files(dist):
    with tarfile.open(_one(dist, "kafkalog-*.tar.gz")) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for f in ("pyproject.toml", "README.md", "storage_core/log/log.py",
              "kafka_log_source/datasource.py", "kafka_log_sink/commit.py",
              "storage_core/format/_kernels.py", "kafka_log_source/py.typed"):
        assert f in names, f


def test_the_wheel_installs_into_a_fresh_venv_and_runs_from_there(dist, tmp_path):
    """Installed without this checkout on the path: the packages import from the new venv's
    site-packages, the ``kafkalog`` console script runs, and a segment written there decodes.
    (Third-party dependencies come from this run's venv through a path file, so the test needs
    no network; kafkalog itself comes only from the wheel.)"""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    run = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                          str(_one(dist, "kafkalog-*.whl"))], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps = sysconfig.get_paths()["purelib"]          # this run's venv: pyarrow, numpy, numba...
    Path(site, "zz_test_deps.pth").write_text(deps + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    code = ("import storage_core, kafka_log_source, kafka_log_sink, pathlib, pyarrow as pa\n"
            "from storage_core.log import Log\n"
            "for m in (storage_core, kafka_log_source, kafka_log_sink):\n"
            "    assert pathlib.Path(m.__file__).is_relative_to(pathlib.Path(%r)), m.__file__\n"
            "    assert (pathlib.Path(m.__file__).parent / 'py.typed').exists()\n"
            "with Log.open(pathlib.Path(%r) / 't-0') as log:\n"
            "    log.append(pa.table({'value': [b'a', b'b']}))\n"
            "    assert log.read(0).num_rows == 2\n"
            "print(storage_core.__version__)\n") % (site, str(tmp_path))
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    import storage_core
    assert out.stdout.strip() == storage_core.__version__
    cli = subprocess.run([str(env_dir / "bin" / "kafkalog"), "describe", str(tmp_path / "t-0")],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert "t-0" in cli.stdout


def test_versions_agree():
    import kafka_log_sink
    import kafka_log_source
    import storage_core
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert storage_core.__version__ == kafka_log_source.__version__ == kafka_log_sink.__version__
    assert storage_core.__version__ == meta == importlib.metadata.version("kafkalog")
    assert f"## {meta}" in (ROOT / "CHANGELOG.md").read_text()


def test_code_is_ruff_clean():
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stdout[-5000:]


def test_supported_versions_are_the_ones_this_run_exercises():
    """README's statement (Python, PySpark, Java) against what this test run uses: what we say
    is supported is what the suite just ran on."""
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"Supported versions: Python (\d+)\.(\d+)\+, PySpark (\d+)\.x, Java (\d+)\+",
                  readme)
    assert m, "README states no supported versions"
    py_min, spark_major, java_min = (int(m[1]), int(m[2])), int(m[3]), int(m[4])
    assert sys.version_info[:2] >= py_min
    import pyspark
    assert int(pyspark.__version__.split(".")[0]) == spark_major
    req = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert req["requires-python"] == f">={py_min[0]}.{py_min[1]}"
    assert f"pyspark>={spark_major}.0" in req["dependencies"]
    out = subprocess.run(["java", "-version"], capture_output=True, text=True)
    java = int(re.search(r'version "(\d+)', out.stderr)[1])
    assert java >= java_min

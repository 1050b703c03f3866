"""The real-broker interop suite: a single-node KRaft broker from the official ``apache/kafka``
image, run by testcontainers. Without a reachable Docker engine every test here is skipped
before any fixture starts (no Spark, no container), with the reason; nothing else in tests/
depends on this directory.

Environment:
- ``KAFKALOG_INTEROP_IMAGE``: the broker image (default ``apache/kafka:3.9.0``);
- ``KAFKALOG_INTEROP_HOST``: the host name the broker is reached at (default: the host of
  ``DOCKER_HOST`` for a tcp:// engine, else ``localhost``).

The broker's port 9092 is bound to a free host port chosen before the start, so the advertised
listener is right from the first start and stays right across the stop/start cycles the tests
put the broker through (a container keeps its port bindings when restarted).
"""

from __future__ import annotations

import io
import os
import socket
import sys
import tarfile
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

IMAGE = os.environ.get("KAFKALOG_INTEROP_IMAGE", "apache/kafka:3.9.0")
LOG_DIR = "/tmp/kraft-combined-logs"          # log.dirs inside the container
CLUSTER_ID = "5L6g3nShT-eMCtK--X86sw"         # any 16-byte base64 id; the image formats with it
STARTED = "Kafka Server started"              # KafkaRaftServer's line once the broker serves


def docker_unavailable() -> str | None:
    """Why the suite cannot run here, or None when it can."""
    hint = "the real-broker interop suite needs Docker"
    try:
        import docker
        from testcontainers.core.container import DockerContainer  # noqa: F401
    except ImportError as e:
        return f"testcontainers / the docker SDK are not installed ({e}); pip install -e '.[test]'; {hint}"
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:                      # DockerException, connection errors, timeouts
        return f"Docker engine not reachable: {e}; {hint}"
    return None


SKIP_REASON = docker_unavailable()


def _docker_host_name() -> str:
    if os.environ.get("KAFKALOG_INTEROP_HOST"):
        return os.environ["KAFKALOG_INTEROP_HOST"]
    url = urlparse(os.environ.get("DOCKER_HOST", ""))
    return url.hostname if url.scheme in ("tcp", "http", "https") and url.hostname else "localhost"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class Broker:
    """One single-node KRaft broker (broker + controller in one process)."""

    def __init__(self, image: str = IMAGE) -> None:
        from testcontainers.core.container import DockerContainer

        self.host, self.port = _docker_host_name(), _free_port()
        env = {
            "CLUSTER_ID": CLUSTER_ID,
            "KAFKA_NODE_ID": "1",
            "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": "PLAINTEXT://:9092,CONTROLLER://:9093",
            "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{self.host}:{self.port}",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
            "KAFKA_LOG_DIRS": LOG_DIR,
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
            "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
            "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
            "KAFKA_NUM_PARTITIONS": "1",
        }
        self.container = DockerContainer(image).with_bind_ports(9092, self.port).with_envs(**env)
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def _docker(self):
        return self.container.get_wrapped_container()

    def start(self) -> "Broker":
        self.container.start()
        self._wait_started()
        return self

    def restart(self) -> None:
        """Start the stopped (or killed) container again: same files, same port."""
        self._docker().start()
        self._wait_started()

    def _wait_started(self, timeout: float = 180) -> None:
        self.starts += 1
        deadline = time.monotonic() + timeout
        while True:
            logs = self._docker().logs().decode(errors="replace")
            if logs.count(STARTED) >= self.starts:
                break
            self._docker().reload()
            if self._docker().status == "exited" or time.monotonic() > deadline:
                raise RuntimeError(f"the broker did not start ({self._docker().status}):\n{logs[-4000:]}")
            time.sleep(0.5)
        from kafka import KafkaAdminClient
        while True:                                # the listener answers
            try:
                KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000).close()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM: Kafka's controlled shutdown flushes, trims the indexes,
        writes snapshots, checkpoints and ``.kafka_cleanshutdown``)."""
        self._docker().stop(timeout=60)

    def kill(self) -> None:
        """SIGKILL: no clean-shutdown marker, so the next start recovers every log as after a crash."""
        self._docker().kill()
        self._docker().wait(timeout=60)

    def ls(self, path: str = LOG_DIR) -> list[str]:
        out = self._docker().exec_run(["ls", "-a", path])
        return out.output.decode().split() if out.exit_code == 0 else []

    def copy_out(self, dest: Path, path: str = LOG_DIR) -> Path:
        """Copy ``path`` out of the container (running or stopped) into ``dest``; returns the copy."""
        stream, _ = self._docker().get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            if sys.version_info >= (3, 12) or hasattr(tarfile, "data_filter"):
                tar.extractall(dest, filter="data")
            else:                                                           # pragma: no cover
                tar.extractall(dest)
        return Path(dest) / Path(path).name

    def put_files(self, partition: str, files: list[Path]) -> None:
        """Write ``files`` into the partition directory ``partition`` of the log dir (the
        container may be stopped), owned as the broker's own files are."""
        stream, _ = self._docker().get_archive(f"{LOG_DIR}/{partition}")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            owner = next(m for m in tar.getmembers() if m.isdir())
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for f in files:
                info = tar.gettarinfo(str(f), arcname=f"{partition}/{f.name}")
                info.uid, info.gid, info.uname, info.gname = owner.uid, owner.gid, owner.uname, owner.gname
                info.mode = 0o644
                with open(f, "rb") as fh:
                    tar.addfile(info, fh)
        if not self._docker().put_archive(LOG_DIR, buf.getvalue()):
            raise OSError(f"could not write into {LOG_DIR}/{partition}")

    def remove(self) -> None:
        self.container.stop()                  # testcontainers: remove the container and its volumes


@pytest.fixture(scope="session", autouse=True)
def _docker_engine():
    """First of every fixture of this directory: skip the test when Docker is missing."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)


@pytest.fixture
def broker():
    b = Broker()
    try:
        b.start()
        yield b
    finally:
        b.remove()

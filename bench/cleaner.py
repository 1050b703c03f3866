"""Log cleaner benchmark: compaction throughput and memory on logs with many duplicate keys,
against a baseline doing the same I/O without deciding anything, in the same run, the two
sides alternating.

* data: ``--gib`` (one or more sizes, each measured in turn, smallest first) of 1 MiB runs of
  16 KiB batches of ``--value-bytes`` records, keys drawn from ``--keys`` distinct keys (so each
  key has many duplicates), written with ``Log.append_raw`` of a few pre-encoded runs, segments
  of ``--segment-mib``, the active segment rolled at the end so everything is cleanable. The
  log is written once into ``--dir``/pristine; every clean works on a fresh copy of it
  (copied outside the timing, then ``os.sync()``, so no side pays for another's writeback).
* clean: ``LogCleaner.clean_once`` (the cleaner thread's round: pick the log, build the offset
  map over the dirty section, recopy every segment group into ``.cleaned`` files, fsync, swap
  them in, delete the old segments, checkpoint) with ``CleanerConfig(dedupe_buffer_size=
  --map-mib)``. Throughput is log bytes cleaned (the cleaner's ``bytes_read``) per second of
  the whole round.
* baseline (the same I/O, no decisions): every ``.log`` file of the same dirty log read
  sequentially in 1 MiB pieces; for each segment the cleaner wrote, a file of exactly that
  segment's size written from the pieces of the input segments it replaced (each piece
  contributing its share, so writes follow reads as the cleaner's do) and fsynced. The cleaner
  reads the dirty section twice (map build, then recopy; Kafka's algorithm) and also writes the
  new segments' indexes: that is part of its cost, not of the baseline's.
* checks (outside the timing): every clean's output is read back: its record count is the
  cleaner's ``messages_written`` and exactly the newest record of every key (offsets and keys
  compared with the expectation computed from the generated keys); every baseline file's size
  is checked.
* memory: the process's resident set sampled every 5 ms in a thread during each round; its
  growth over the resident set before the cleaner existed (the largest over the rounds) is
  compared with the configured map size plus the cleaner's I/O buffers (``2 *
  max_message_size``: read and write buffers).

Goal (issue 3): clean throughput >= 0.30 of the baseline's, memory growth within map + I/O
buffers. Disk needed: about twice the largest ``--gib`` (pristine + working copy).

    .venv/bin/python bench/cleaner.py [--gib 0.3 2] [--repeat 3] [--keys 500000] [--value-bytes 500]
                                      [--map-mib 64] [--segment-mib 512] [--dir /tmp/kafkalog-cleaner-bench]
                                      [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import os
import platform
import pstats
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage_core.checkpoint import TopicPartition    # noqa: E402
from storage_core.cleaner import LogCleaner    # noqa: E402
from storage_core.config import CleanerConfig, LogConfig   # noqa: E402
from storage_core.format import decode_batches, encode_batches  # noqa: E402
from storage_core.format._md5 import md5_spans         # noqa: E402
from storage_core.log import Log                       # noqa: E402

MiB = 1 << 20
BATCH_BYTES = 16 << 10
TS0 = 1_700_000_000_000
PAGE = os.sysconf("SC_PAGE_SIZE")
N_RUNS = 64


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class RssSampler:
    """Peak resident set while running, sampled every ``interval`` seconds."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            self._stop.wait(self.interval)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def runs(keys: int, value_bytes: int, seed: int = 1) -> tuple[list[bytearray], list[np.ndarray]]:
    """``N_RUNS`` pre-encoded 1 MiB runs of 16 KiB batches, keys uniform in ``[0, keys)``; and
    each run's key ids in record order."""
    rng = np.random.default_rng(seed)
    per_run = max(1, MiB // (value_bytes + 30))
    out, ids = [], []
    for _ in range(N_RUNS):
        k = rng.integers(0, keys, per_run)
        vals = [rng.bytes(value_bytes) for _ in range(per_run)]
        table = pa.table({"key": pa.array([b"key-%d" % x for x in k], pa.binary()),
                          "value": pa.array(vals, pa.binary()),
                          "timestamp": pa.array(np.full(per_run, TS0), pa.int64())})
        out.append(bytearray(encode_batches(table, max_batch_bytes=BATCH_BYTES)))
        ids.append(k)
    return out, ids


def log_config(segment_mib: int) -> LogConfig:
    return LogConfig(segment_bytes=segment_mib * MiB, cleanup_policy="compact",
                     min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0,
                     max_message_bytes=1 << 20)


@dataclass
class Expected:
    """The newest record of every key in the generated log: what a full clean keeps."""
    offsets: np.ndarray      # sorted offsets of the newest record of each key
    key_ids: np.ndarray      # the key id at each of those offsets
    records: int             # records in the dirty log


def generate(part: Path, gib: float, keys: int, value_bytes: int, segment_mib: int) -> tuple[int, Expected]:
    pre, ids = runs(keys, value_bytes)
    target = int(gib * (1 << 30))
    written = 0
    appended = []
    started = time.perf_counter()
    with Log.open(part, log_config(segment_mib), clock=lambda: TS0) as log:
        i = 0
        while written < target:
            info = log.append_raw(pre[i % len(pre)])
            written += info.valid_bytes
            appended.append(i % len(pre))
            i += 1
        log.roll()
        end = log.log_end_offset
    took = time.perf_counter() - started
    key_ids = np.concatenate([ids[j] for j in appended])
    assert len(key_ids) == end, f"generated {end} records, expected {len(key_ids)}"
    # newest occurrence of each key: first occurrence in the reversed sequence
    _, first_rev = np.unique(key_ids[::-1], return_index=True)
    newest = np.sort(len(key_ids) - 1 - first_rev)
    print(f"generated {written / MiB:.0f} MiB, {end:,} records ({len(newest):,} distinct keys) in {took:.1f} s "
          f"({written / MiB / took:.0f} MB/s)", flush=True)
    return written, Expected(newest, key_ids[newest], end)


def restore(pristine: Path, work: Path) -> None:
    """A fresh copy of the dirty log (kernel-side copies), its writeback done before a clock starts."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    os.sync()


def verify_clean(part: Path, stats, expected: Expected) -> None:
    """Read the cleaned log back: exactly the newest record of every key."""
    offsets, keys = [], []
    for path in sorted(part.glob("*.log")):
        table = decode_batches(path.read_bytes(), source=str(path))
        offsets.append(table.column("offset").to_numpy())
        keys.extend(table.column("key").to_pylist())
    got = np.concatenate(offsets) if offsets else np.empty(0, np.int64)
    assert len(got) == stats.messages_written, \
        f"cleaned log holds {len(got)} records, the cleaner reports {stats.messages_written} written"
    assert len(got) == len(expected.offsets), \
        f"cleaned log holds {len(got)} records, {len(expected.offsets)} keys were written"
    assert np.array_equal(got, expected.offsets), "cleaned log's offsets are not the newest of each key"
    assert keys == [b"key-%d" % k for k in expected.key_ids], "cleaned log's keys differ from the expected"


def segment_plan(cleaned: Path, dirty: Path) -> list[tuple[list[Path], int]]:
    """For each segment of the cleaned log: the dirty log's ``.log`` files it replaced and its size."""
    outs = sorted(cleaned.glob("*.log"))
    ins = sorted(dirty.glob("*.log"))
    bases = [int(p.stem) for p in outs] + [2**63]
    plan = []
    for j, out in enumerate(outs):
        group = [p for p in ins if bases[j] <= int(p.stem) < bases[j + 1]]
        plan.append((group, out.stat().st_size))
    return plan


def baseline(plan: list[tuple[list[Path], int]], out_dir: Path) -> tuple[int, int, float]:
    """Read every input segment sequentially in 1 MiB pieces; write each output's bytes (its
    share of each piece read) and fsync it. Returns (bytes read, bytes written, seconds)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    read = written = 0
    started = time.perf_counter()
    for j, (group, size) in enumerate(plan):
        total_in = sum(p.stat().st_size for p in group)
        seen = taken = 0
        fd = os.open(out_dir / f"out-{j}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for src in group:
                with open(src, "rb", buffering=0) as fin:
                    while chunk := fin.read(MiB):
                        seen += len(chunk)
                        share = size * seen // total_in - taken      # cumulative: exactly `size` in all
                        view = memoryview(chunk)[:share]
                        while view:
                            view = view[os.write(fd, view):]
                        taken += share
                        read += len(chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
        written += taken
    took = time.perf_counter() - started
    for j, (_, size) in enumerate(plan):
        got = (out_dir / f"out-{j}.log").stat().st_size
        assert got == size, f"baseline output {j}: {got} bytes written, {size} expected"
    shutil.rmtree(out_dir)
    return read, written, took


def clean(root: Path, part: Path, args, profiler: cProfile.Profile | None = None):
    """One timed ``clean_once`` round on ``part``; returns (stats, seconds, RSS growth)."""
    config = CleanerConfig(dedupe_buffer_size=args.map_mib * MiB)
    log = Log.open(part, log_config(args.segment_mib))
    try:
        tp = TopicPartition(log.topic, log.partition)
        rss_before = rss_bytes()
        with RssSampler() as sampler:
            cleaner = LogCleaner(config, [root], {tp: log})
            started = time.perf_counter()
            if profiler:
                profiler.enable()
            stats = cleaner.clean_once()
            if profiler:
                profiler.disable()
            took = time.perf_counter() - started
        assert stats is not None, "nothing was cleaned"
        return stats, took, sampler.peak - rss_before, config
    finally:
        log.close()


def md5_costs(n: int = 200_000) -> str:
    """ns per short key: the compiled MD5 over a whole chunk of keys, against hashlib from Python."""
    keys = [b"key-%d" % i for i in range(n)]
    data = np.frombuffer(b"".join(keys), np.uint8)
    lengths = np.array([len(k) for k in keys], np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    out = np.empty((n, 2), np.uint64)
    md5_spans(data[:16], starts[:1], lengths[:1], out[:1])          # compiled/loaded before timing
    best_c = best_h = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        md5_spans(data, starts, lengths, out)
        best_c = min(best_c, time.perf_counter() - t)
        t = time.perf_counter()
        for k in keys:
            hashlib.md5(k).digest()
        best_h = min(best_h, time.perf_counter() - t)
    assert out[7].byteswap().tobytes() == hashlib.md5(keys[7]).digest(), "md5_spans differs from hashlib"
    return (f"MD5 of {n:,} short keys (5-11 bytes, one block), best of 5: compiled md5_spans "
            f"{best_c / n * 1e9:.0f} ns a key, hashlib.md5(key).digest() from Python {best_h / n * 1e9:.0f} ns a key")


def warm_up(args) -> None:
    """One untimed clean of a small log first: the compiled kernels are loaded (or compiled,
    on a first run from a fresh checkout) before any clock starts."""
    root = Path(args.dir) / "warm-up"
    shutil.rmtree(root, ignore_errors=True)
    part = root / "bench-0"
    pre, _ = runs(args.keys, args.value_bytes)
    with Log.open(part, log_config(args.segment_mib), clock=lambda: TS0) as log:
        for raw in pre[:8]:
            log.append_raw(raw)
        log.roll()
    t = time.perf_counter()
    clean(root, part, args)
    print(f"warm-up clean of 8 MiB (kernels loaded): {time.perf_counter() - t:.2f} s", flush=True)
    shutil.rmtree(root, ignore_errors=True)


def bench_size(args, gib: float) -> dict:
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    pristine, work = root / "pristine", root / "work"
    free = shutil.disk_usage(root.parent if root.parent.exists() else "/").free
    need = int(2.1 * gib * (1 << 30))
    if free < need:
        sys.exit(f"{gib} GiB needs ~{need / 2**30:.1f} GiB free under {root.parent}, {free / 2**30:.1f} GiB free: "
                 f"use a smaller --gib")
    pristine.mkdir(parents=True)
    print(f"\n== {gib} GiB: {args.keys} keys, {args.value_bytes}-byte values, map {args.map_mib} MiB, segments "
          f"{args.segment_mib} MiB; {args.repeat} rounds, the sides alternating", flush=True)
    size, expected = generate(pristine / "bench-0", gib, args.keys, args.value_bytes, args.segment_mib)
    os.sync()           # the generated data on disk first: neither side pays for its writeback
    cleans, bases, growths = [], [], []
    stats = config = None
    plan = None
    for r in range(args.repeat):
        order = ("clean", "baseline") if r % 2 == 0 else ("baseline", "clean")
        if plan is None:
            order = ("clean", "baseline")           # the baseline's sizes come from a clean
        for side in order:
            if side == "clean":
                restore(pristine, work)
                stats, took, growth, config = clean(work, work / "bench-0", args)
                verify_clean(work / "bench-0", stats, expected)
                plan = plan or segment_plan(work / "bench-0", pristine / "bench-0")
                cleans.append(took)
                growths.append(growth)
                print(f"  round {r + 1} clean    {stats.bytes_read / MiB:6.0f} MiB read in {took:6.2f} s = "
                      f"{stats.bytes_read / MiB / took:5.0f} MB/s (map built in "
                      f"{(stats.map_complete_ms - stats.start_ms) / 1000:.2f} s), RSS growth {growth / MiB:.1f} MiB",
                      flush=True)
            else:
                os.sync()
                read, written, took = baseline(plan, root / "baseline-out")
                assert read == size, f"baseline read {read} bytes of a {size}-byte log"
                bases.append(took)
                print(f"  round {r + 1} baseline {read / MiB:6.0f} MiB read in {took:6.2f} s = "
                      f"{read / MiB / took:5.0f} MB/s ({written / MiB:.1f} MiB written and fsynced)", flush=True)
    if args.profile:
        restore(pristine, work)
        profiler = cProfile.Profile()
        _, took, _, _ = clean(work, work / "bench-0", args, profiler)
        s = io.StringIO()
        print(f"  --profile: one more clean under cProfile, {took:.2f} s")
        pstats.Stats(profiler, stream=s).sort_stats("tottime").print_stats(25)
        pstats.Stats(profiler, stream=s).sort_stats("cumulative").print_stats(30)
        print(s.getvalue())
    shutil.rmtree(root, ignore_errors=True)
    bound = config.dedupe_buffer_size + 2 * config.max_message_size
    best_c, best_b = min(cleans), min(bases)
    return {"gib": gib, "mib": size / MiB, "clean_s": best_c, "base_s": best_b, "ratio": best_b / best_c,
            "ratios": [b / c for c, b in zip(cleans, bases)], "map_s": (stats.map_complete_ms - stats.start_ms) / 1000,
            "written_mib": stats.bytes_written / MiB, "records": (stats.messages_read, stats.messages_written),
            "growth": max(growths), "bound": bound}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, nargs="+", default=[0.3, 2.0], help="log sizes, each measured in turn")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of (clean, baseline), the order alternating")
    ap.add_argument("--keys", type=int, default=500_000)
    ap.add_argument("--value-bytes", type=int, default=500)
    ap.add_argument("--map-mib", type=int, default=64)
    ap.add_argument("--segment-mib", type=int, default=512)
    ap.add_argument("--dir", default="/tmp/kafkalog-cleaner-bench")
    ap.add_argument("--profile", action="store_true",
                    help="after the timed rounds, one more clean under cProfile, and MD5 costs per key")
    args = ap.parse_args(argv)
    print("command: " + " ".join([os.path.relpath(sys.executable)] + sys.argv))
    print(f"Python {platform.python_version()}, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    if args.profile:
        print(md5_costs(), flush=True)
    warm_up(args)
    results = [bench_size(args, gib) for gib in sorted(args.gib)]
    print(f"\nbest of {args.repeat} each side; ratio = baseline time / clean time (same bytes read and written)")
    print(f"{'log':>9} {'clean':>18} {'baseline':>18} {'ratio':>6} {'(per round)':>18} {'kept':>9} "
          f"{'memory growth / bound':>22}  goal >= 0.30")
    for r in results:
        ok = r["ratio"] >= 0.30 and r["growth"] <= r["bound"]
        print(f"{r['mib']:>5.0f} MiB {r['mib'] / r['clean_s']:>6.0f} MB/s {r['clean_s']:>5.2f} s "
              f"{r['mib'] / r['base_s']:>6.0f} MB/s {r['base_s']:>5.2f} s {r['ratio']:>6.2f} "
              f"{' '.join(f'{x:.2f}' for x in r['ratios']):>18} {r['written_mib']:>5.1f} MiB "
              f"{r['growth'] / MiB:>9.1f} / {r['bound'] / MiB:.1f} MiB  {'met' if ok else 'MISSED'}")
        print(f"{'':>9} map built in {r['map_s']:.2f} s (last round); "
              f"{r['records'][0]:,} -> {r['records'][1]:,} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())

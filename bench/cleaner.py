"""Log cleaner benchmark: compaction throughput and memory on a multi-GiB log with many
duplicate keys, against a plain sequential copy of the same bytes in the same run.

* data: ``--gib`` of 1 MiB runs of 16 KiB batches of ``--value-bytes`` records, keys drawn from
  ``--keys`` distinct keys (so each key has many duplicates), written with ``Log.append_raw`` of
  a few pre-encoded runs (generation costs little more than the writes), segments of
  ``--segment-mib``, the active segment rolled at the end so everything is cleanable.
* baseline: every ``.log`` file read sequentially in 1 MiB pieces and written to a new file in
  the same directory, then fsynced (what the cleaner does with what it keeps, without deciding
  anything), and removed.
* clean: ``LogCleaner.clean_once`` (the cleaner thread's round: pick the log, build the offset
  map over the dirty section, recopy every segment group into ``.cleaned`` files, swap them in,
  checkpoint) with ``CleanerConfig(dedupe_buffer_size=--map-mib)``. Throughput is log bytes
  cleaned (the cleaner's ``bytes_read``) per second of the whole round.
* memory: the process's resident set sampled every 5 ms in a thread during the round; its
  growth over the resident set before the cleaner existed is compared with the configured map
  size plus the cleaner's I/O buffers (``2 * max_message_size``: read and write buffers).

Goal: clean throughput >= 0.30 of the copy's, memory growth within map + I/O buffers.

    .venv/bin/python bench/cleaner.py [--gib 2] [--keys 500000] [--value-bytes 500]
                                      [--map-mib 64] [--segment-mib 512] [--dir /tmp/kafkalog-cleaner-bench]
                                      [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage_core.checkpoints import TopicPartition    # noqa: E402
from storage_core.cleaner_manager import LogCleaner    # noqa: E402
from storage_core.config import CleanerConfig, LogConfig   # noqa: E402
from storage_core.format import encode_batches         # noqa: E402
from storage_core.log import Log                       # noqa: E402

MiB = 1 << 20
BATCH_BYTES = 16 << 10
TS0 = 1_700_000_000_000
PAGE = os.sysconf("SC_PAGE_SIZE")


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


def runs(n_runs: int, keys: int, value_bytes: int, seed: int = 1) -> list[bytearray]:
    """``n_runs`` pre-encoded 1 MiB runs of 16 KiB batches, keys uniform in ``[0, keys)``."""
    rng = np.random.default_rng(seed)
    per_run = max(1, MiB // (value_bytes + 30))
    out = []
    for _ in range(n_runs):
        k = rng.integers(0, keys, per_run)
        vals = [rng.bytes(value_bytes) for _ in range(per_run)]
        table = pa.table({"key": pa.array([b"key-%d" % x for x in k], pa.binary()),
                          "value": pa.array(vals, pa.binary()),
                          "timestamp": pa.array(np.full(per_run, TS0), pa.int64())})
        out.append(bytearray(encode_batches(table, max_batch_bytes=BATCH_BYTES)))
    return out


def log_config(segment_mib: int) -> LogConfig:
    return LogConfig(segment_bytes=segment_mib * MiB, cleanup_policy="compact",
                     min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0,
                     max_message_bytes=1 << 20)


def generate(part: Path, gib: float, keys: int, value_bytes: int, segment_mib: int) -> int:
    pre = runs(64, keys, value_bytes)
    target = int(gib * (1 << 30))
    written = 0
    started = time.perf_counter()
    with Log.open(part, log_config(segment_mib), clock=lambda: TS0) as log:
        i = 0
        while written < target:
            info = log.append_raw(pre[i % len(pre)])
            written += info.valid_bytes
            i += 1
        log.roll()
    took = time.perf_counter() - started
    print(f"generated {written / MiB:.0f} MiB in {took:.1f} s ({written / MiB / took:.0f} MB/s)", flush=True)
    return written


def copy_baseline(part: Path) -> tuple[int, float]:
    """Sequential read + write + fsync of every ``.log`` file; returns (bytes, seconds)."""
    total = 0
    started = time.perf_counter()
    for src in sorted(part.glob("*.log")):
        dst = src.with_name(src.name + ".copy")
        with open(src, "rb", buffering=0) as fin, open(dst, "wb", buffering=0) as fout:
            while True:
                chunk = fin.read(MiB)
                if not chunk:
                    break
                fout.write(chunk)
                total += len(chunk)
            os.fsync(fout.fileno())
    took = time.perf_counter() - started
    for dst in part.glob("*.log.copy"):
        dst.unlink()
    return total, took


def read_baseline(part: Path) -> tuple[int, float]:
    """Sequential 1 MiB reads of every ``.log`` file (context: the page-cache read ceiling)."""
    total = 0
    started = time.perf_counter()
    for src in sorted(part.glob("*.log")):
        with open(src, "rb", buffering=0) as fin:
            while chunk := fin.read(MiB):
                total += len(chunk)
    return total, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--keys", type=int, default=500_000)
    ap.add_argument("--value-bytes", type=int, default=500)
    ap.add_argument("--map-mib", type=int, default=64)
    ap.add_argument("--segment-mib", type=int, default=512)
    ap.add_argument("--dir", default="/tmp/kafkalog-cleaner-bench")
    ap.add_argument("--profile", action="store_true", help="cProfile the clean (slower)")
    ap.add_argument("--keep", action="store_true", help="keep the directory afterwards")
    args = ap.parse_args(argv)

    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    part = root / "bench-0"
    print(f"Python {platform.python_version()}, {os.cpu_count()} cores; {args.gib} GiB, {args.keys} keys, "
          f"{args.value_bytes}-byte values, map {args.map_mib} MiB, segments {args.segment_mib} MiB", flush=True)
    generate(part, args.gib, args.keys, args.value_bytes, args.segment_mib)

    os.sync()           # the generated data on disk first: neither side pays for its writeback
    copied, copy_s = copy_baseline(part)
    copy_mbs = copied / MiB / copy_s
    print(f"copy baseline: {copied / MiB:.0f} MiB in {copy_s:.2f} s = {copy_mbs:.0f} MB/s", flush=True)
    read_total, read_s = read_baseline(part)
    print(f"(context) plain sequential read: {read_total / MiB / read_s:.0f} MB/s", flush=True)

    os.sync()
    config = CleanerConfig(dedupe_buffer_size=args.map_mib * MiB)
    io_buffers = 2 * config.max_message_size
    log = Log.open(part, log_config(args.segment_mib))
    tp = TopicPartition(log.topic, log.partition)
    rss_before = rss_bytes()
    profiler = cProfile.Profile() if args.profile else None
    with RssSampler() as sampler:
        cleaner = LogCleaner(config, [root], {tp: log})
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        stats = cleaner.clean_once()
        if profiler:
            profiler.disable()
        clean_s = time.perf_counter() - started
    assert stats is not None, "nothing was cleaned"
    clean_mbs = stats.bytes_read / MiB / clean_s
    growth = sampler.peak - rss_before
    bound = config.dedupe_buffer_size + io_buffers
    print(f"clean: {stats.bytes_read / MiB:.0f} MiB read, {stats.bytes_written / MiB:.0f} MiB written, "
          f"{stats.messages_read} -> {stats.messages_written} records in {clean_s:.2f} s = {clean_mbs:.0f} MB/s "
          f"(offset map built in {(stats.map_complete_ms - stats.start_ms) / 1000:.2f} s, "
          f"buffer utilization {100 * stats.buffer_utilization:.1f} %)", flush=True)
    print(f"ratio clean / copy: {clean_mbs / copy_mbs:.2f} (goal >= 0.30)")
    print(f"memory: RSS before {rss_before / MiB:.0f} MiB, peak {sampler.peak / MiB:.0f} MiB, growth "
          f"{growth / MiB:.1f} MiB; configured map {config.dedupe_buffer_size / MiB:.0f} MiB + io buffers "
          f"{io_buffers / MiB:.1f} MiB = {bound / MiB:.1f} MiB -> "
          f"{'within the bound' if growth <= bound else f'{(growth - bound) / MiB:.1f} MiB over the bound'}")
    log.close()
    if profiler:
        s = io.StringIO()
        pstats.Stats(profiler, stream=s).sort_stats("tottime").print_stats(25)
        pstats.Stats(profiler, stream=s).sort_stats("cumulative").print_stats(30)
        print(s.getvalue())
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

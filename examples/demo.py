"""kafkalog demo: Kafka topic directories written and read without a broker.

Until the Spark layers land, the demo shows the storage engine end to end: a generated event
stream is appended to a three-partition topic (Kafka segment, index and checkpoint files, zstd
batches), one hour of it is found again through Kafka's time index, the data directory is
described and verified, and a segment is printed as Kafka's own dump tool would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage_core.config import LogConfig
from storage_core.log import Log

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("KAFKALOG_DEMO_DIR", ROOT / "demo-data"))
PARTITIONS = 3


def events(n: int, start_ms: int) -> pa.Table:
    rng = np.random.default_rng(7)
    users = rng.integers(0, 1000, n)
    amounts = rng.integers(1, 50_000, n)
    ts = start_ms + np.sort(rng.integers(0, 3_600_000, n))
    return pa.table({
        "key": pa.array([f"user-{u}".encode() for u in users], pa.binary()),
        "value": pa.array([f'{{"user":{u},"amount_cents":{a}}}'.encode()
                           for u, a in zip(users, amounts)], pa.binary()),
        "timestamp": pa.array(ts, pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([[{"key": "source", "value": b"demo"}]] * n,
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        "user": pa.array(users),
    })


def kafkalog(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "storage_core.cli", *args], capture_output=True,
                          text=True, check=True).stdout


def main() -> int:
    n, t0 = 300_000, 1_700_000_000_000
    table = events(n, t0)
    shutil.rmtree(DATA, ignore_errors=True)
    config = LogConfig(segment_bytes=512 << 10, compression_type="zstd")
    print(f"kafkalog demo: {n:,} order events over one hour, topic 'orders', {PARTITIONS} partitions\n")

    start = time.perf_counter()
    part_of = table.column("user").to_numpy() % PARTITIONS        # keyed by user
    for p in range(PARTITIONS):
        rows = table.filter(pa.array(part_of == p)).drop_columns(["user"])
        with Log.open(DATA / f"orders-{p}", config) as log:
            for chunk in rows.to_batches(max_chunksize=20_000):   # as micro-batches arrive
                log.append(pa.Table.from_batches([chunk]))
            print(f"  orders-{p}: offsets {log.log_start_offset}..{log.log_end_offset - 1} "
                  f"in {len(log.segments)} segments")
    print(f"  appended in {time.perf_counter() - start:.1f} s -> {DATA}\n")

    lo, hi = t0 + 600_000, t0 + 660_000
    print("Time travel: 00:10-00:11, found through each partition's .timeindex")
    found = 0
    for p in range(PARTITIONS):
        with Log.open(DATA / f"orders-{p}", read_only=True) as log:
            first = log.offsets_for_times(lo)
            end = log.offsets_for_times(hi) or log.log_end_offset
            got = log.read(first, max_bytes=4 << 20, max_offset=end)
            ts = got.column("timestamp").cast(pa.int64())
            assert pc.min(ts).as_py() >= lo and pc.max(ts).as_py() < hi
            found += got.num_rows
            print(f"  orders-{p}: offsets {first}..{end - 1}, {got.num_rows:,} records")
    print(f"  {found:,} records in the window\n")

    print("kafkalog describe (the topic directory, as a broker would see it):")
    print("\n".join(kafkalog("describe", str(DATA)).splitlines()[:12]))
    print("\nkafkalog verify: " + kafkalog("verify", str(DATA)).splitlines()[-1])
    seg = sorted((DATA / "orders-0").glob("*.log"))[0]
    print("\nThe first batch of orders-0, as Kafka's kafka-dump-log.sh prints it:")
    print("\n".join(kafkalog("dump", "--files", str(seg), "--deep-iteration").splitlines()[:4]))
    print(f"\nTry: {Path(sys.executable).parent / 'kafkalog'} dump --files {seg} --print-data-log | head")
    return 0


if __name__ == "__main__":
    sys.exit(main())

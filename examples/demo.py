"""kafkalog demo: Kafka's record format, written and read without a broker.

Until the storage engine and the Spark layers land, the demo shows the format layer end to end:
it encodes a generated event stream into a Kafka segment file with each codec, reads it back
column-wise into Arrow, checks it against an independent view (the batch-by-batch walk) and
prints the file as Kafka's own dump tool would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage_core.format import decode_batches, encode_batches, iter_batches

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("KAFKALOG_DEMO_DIR", ROOT / "demo-data"))


def events(n: int, start_ms: int) -> pa.Table:
    rng = np.random.default_rng(7)
    users = rng.integers(0, 1000, n)
    amounts = rng.integers(1, 50_000, n)
    ts = start_ms + np.sort(rng.integers(0, 3_600_000, n))
    values = [f'{{"user":{u},"amount_cents":{a}}}'.encode() for u, a in zip(users, amounts)]
    return pa.table({
        "key": pa.array([f"user-{u}".encode() for u in users], pa.binary()),
        "value": pa.array(values, pa.binary()),
        "timestamp": pa.array(ts, pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([[{"key": "source", "value": b"demo"}]] * n,
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    })


def main() -> int:
    n = 200_000
    t0 = 1_700_000_000_000
    table = events(n, t0)
    print(f"kafkalog demo: {n:,} generated order events, one hour of event time\n")
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        part = DATA / f"orders-{codec}-0"
        part.mkdir(parents=True, exist_ok=True)
        seg = part / "00000000000000000000.log"
        start = time.perf_counter()
        raw = encode_batches(table, compression=codec, max_batch_bytes=256 * 1024)
        seg.write_bytes(raw)
        enc_s = time.perf_counter() - start
        start = time.perf_counter()
        back = decode_batches(seg.read_bytes(), source=str(seg))
        dec_s = time.perf_counter() - start
        batches = sum(1 for _ in iter_batches(raw))
        assert back.num_rows == n and back.column("value").equals(table.column("value"))
        print(f"  {codec:>6}: {len(raw) / 1e6:6.2f} MB in {batches:3d} batches  "
              f"encode {n / enc_s / 1e6:4.1f} M rec/s  decode {n / dec_s / 1e6:4.1f} M rec/s  -> {seg}")

    seg = DATA / "orders-zstd-0" / "00000000000000000000.log"
    table = decode_batches(seg.read_bytes())
    lo = pa.scalar(t0 + 600_000, pa.timestamp("ms", tz="UTC"))
    hi = pa.scalar(t0 + 660_000, pa.timestamp("ms", tz="UTC"))
    window = table.filter(pc.and_(pc.greater_equal(table["timestamp"], lo), pc.less(table["timestamp"], hi)))
    print(f"\nTime window 00:10-00:11 of the zstd topic: {window.num_rows:,} records, offsets "
          f"{pc.min(window['offset']).as_py()}..{pc.max(window['offset']).as_py()}")
    print("\nThe first batch, as Kafka's kafka-dump-log.sh would print it:")
    out = subprocess.run([sys.executable, "-m", "storage_core.cli", "dump", "--files", str(seg),
                          "--deep-iteration"], capture_output=True, text=True, check=True).stdout
    print("\n".join(out.splitlines()[:5]))
    print(f"\nVerify every file:   {Path(sys.executable).parent / 'kafkalog'} verify {DATA}")
    print(f"Dump with payloads:  kafkalog dump --files {seg} --print-data-log")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Record codec benchmark: kafkalog's columnar codec against aiokafka's C codec, same batches,
same process.

Decode: kafkalog decodes the whole buffer into one Arrow table; aiokafka iterates every record
of every batch and touches its key and value, each record dropped after use (a consumer loop).
"decode" checks every batch's CRC on both sides (kafkalog's default; aiokafka's consumer does it
with its default check_crcs=True, as Kafka's check.crcs); "decode-nocrc" checks it on neither
(kafkalog's verify_crc=False, aiokafka's bare iteration). Encode: kafkalog encodes an Arrow
table; aiokafka's builder appends the same records into batches of the same size. Timings
alternate between the two sides and keep the best of R runs each. Prints records/s, MB/s (of
uncompressed key+value bytes) and the ratio kafkalog/aiokafka.

    .venv/bin/python bench/record_codec.py [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import pyarrow as pa
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from storage_core.format import decode_batches, encode_batches, iter_batches
from storage_core.format.compression import CompressionType

BATCH_BYTES = 1 << 20
TS0 = 1_700_000_000_000


def make_table(n: int, value_size: int) -> pa.Table:
    rng = np.random.default_rng(1)
    # values: half random, half repetitive, so compression has something to do
    half = value_size // 2
    vals = [os.urandom(half) + b"x" * (value_size - half) for _ in range(n)]
    keys = [b"key-%d" % i for i in rng.integers(0, 1_000_000, n)]
    ts = TS0 + np.arange(n, dtype=np.int64)
    return pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(vals, pa.binary()),
                     "timestamp": pa.array(ts, pa.timestamp("ms", tz="UTC"))})


def best_pair(ours, theirs, repeat: int) -> tuple[float, float]:
    """Best time of each, the two runs alternating so machine noise hits both alike."""
    a, b = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        ours()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        theirs()
        b.append(time.perf_counter() - t)
    return min(a), min(b)


def aiokafka_encode(keys, vals, ts, codec: int) -> list[bytes]:
    out = []
    i, n = 0, len(keys)
    while i < n:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                      batch_size=BATCH_BYTES)
        while i < n and b.append(i, timestamp=ts[i], key=keys[i], value=vals[i], headers=[]) is not None:
            i += 1
        out.append(bytes(b.build()))
    return out


def aiokafka_decode(batches: list[bytes], check_crcs: bool = True) -> int:
    """What aiokafka's consumer does per fetched batch: with check_crcs (its default, as Kafka's
    check.crcs) validate the CRC, then iterate records, touching each key and value."""
    n = 0
    for raw in batches:
        batch = DefaultRecordBatch(raw)
        if check_crcs and not batch.validate_crc():
            raise ValueError("bad CRC")
        for rec in batch:
            _ = rec.key, rec.value             # touch both, as a consumer would
            n += 1
    return n


def split(raw) -> list[bytes]:
    return [bytes(raw[b.position:b.position + b.size]) for b in iter_batches(raw)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus; "
          f"{args.records:,} records per run, best of {args.repeat}; batches of {BATCH_BYTES} bytes")
    print(f"{'case':<16}{'op':<14}{'kafkalog rec/s':>16}{'MB/s':>8}{'aiokafka rec/s':>16}{'MB/s':>8}{'ratio':>8}")
    for value_size in (100, 1024):
        n = args.records if value_size == 100 else args.records // 4
        table = make_table(n, value_size)
        keys = table.column("key").to_pylist()
        vals = table.column("value").to_pylist()
        ts = table.column("timestamp").cast(pa.int64()).to_pylist()
        mb = (sum(map(len, keys)) + sum(map(len, vals))) / 1e6
        for codec in ("none", "lz4", "zstd"):
            cid = int(CompressionType.from_name(codec))
            ours_raw = encode_batches(table, compression=codec, max_batch_bytes=BATCH_BYTES)
            theirs = aiokafka_encode(keys, vals, ts, cid)
            # same input to both decoders: each decodes the batches the other side wrote too
            assert decode_batches(b"".join(theirs)).num_rows == n
            assert aiokafka_decode(split(ours_raw)) == n
            ours_batches = split(ours_raw)
            dec_ours, dec_theirs = best_pair(lambda: decode_batches(ours_raw),
                                             lambda: aiokafka_decode(ours_batches), args.repeat)
            raw_ours, raw_theirs = best_pair(lambda: decode_batches(ours_raw, verify_crc=False),
                                             lambda: aiokafka_decode(ours_batches, False), args.repeat)
            enc_ours, enc_theirs = best_pair(
                lambda: encode_batches(table, compression=codec, max_batch_bytes=BATCH_BYTES),
                lambda: aiokafka_encode(keys, vals, ts, cid), args.repeat)
            case = f"{value_size}B {codec}"
            for op, o, t in (("decode", dec_ours, dec_theirs), ("decode-nocrc", raw_ours, raw_theirs),
                             ("encode", enc_ours, enc_theirs)):
                print(f"{case:<16}{op:<14}{n / o:>16,.0f}{mb / o:>8.0f}{n / t:>16,.0f}{mb / t:>8.0f}"
                      f"{t / o:>8.2f}")


if __name__ == "__main__":
    main()

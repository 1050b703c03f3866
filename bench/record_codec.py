"""Record codec benchmark: kafkalog's columnar codec against aiokafka's codec, same batches,
same process, every codec at the same compression level on both sides.

Decode: kafkalog decodes the whole buffer into one Arrow table; aiokafka iterates every record
of every batch and touches its key and value, each record dropped after use (a consumer loop).
"decode" checks every batch's CRC on both sides (kafkalog's default; aiokafka's consumer does it
with its default check_crcs=True, as Kafka's check.crcs); "decode-nocrc" checks it on neither
(kafkalog's verify_crc=False, aiokafka's bare iteration). Encode: kafkalog encodes an Arrow
table; aiokafka's builder appends the same records into batches of the same size. Timings
alternate between the two sides and keep the best of R runs each. Prints records/s, MB/s (of
uncompressed key+value bytes) and the ratio kafkalog/aiokafka.

Levels: aiokafka's own defaults differ from Kafka's (its lz4_encode uses cramjam at level 9,
which in liblz4's frame API is LZ4HC level 9, where Kafka's Lz4BlockOutputStream uses lz4-java's
fastCompressor at the default level 9 and HC only at other levels; its gzip_encode defaults to
zlib level 9, Kafka's GzipCompression to Deflater.DEFAULT_COMPRESSION = 6). This script hands
aiokafka's builder the same compressor and level as kafkalog uses (``--gzip-level``,
``--lz4-level``, ``--zstd-level``, Kafka's defaults unless given) by replacing the module-level
codec functions its builder calls; ``--aiokafka-default-levels`` leaves aiokafka's own.
Compressed sizes of both sides are printed so the equal work can be seen.

Every timed encode's output (the last run of each side) is decoded once outside the timing and
checked against the input: record count and a digest of keys, values and timestamps.

    .venv/bin/python bench/record_codec.py [--records N] [--repeat R] [--codecs none,gzip,lz4,zstd]
                                           [--lz4-level 9] [--gzip-level 6] [--zstd-level 3]
                                           [--aiokafka-default-levels] [--profile]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiokafka                                                        # noqa: E402
import aiokafka.codec as aiokafka_codec                                # noqa: E402
import aiokafka.record.default_records as aiokafka_records             # noqa: E402
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402

from storage_core.format import _kernels, decode_batches, encode_batches, iter_batches  # noqa: E402
from storage_core.format.compression import CompressionType           # noqa: E402

BATCH_BYTES = 1 << 20
TS0 = 1_700_000_000_000
KAFKA_LZ4_DEFAULT_LEVEL = 9      # Lz4Compression.DEFAULT_LEVEL: lz4-java's fastCompressor
KAFKA_GZIP_DEFAULT_LEVEL = 6     # Deflater.DEFAULT_COMPRESSION (-1) is zlib's level 6
KAFKA_ZSTD_DEFAULT_LEVEL = 3     # ZstdCompression.DEFAULT_LEVEL


def make_table(n: int, value_size: int) -> pa.Table:
    rng = np.random.default_rng(1)
    # values: half random, half repetitive, so compression has something to do
    half = value_size // 2
    vals = [os.urandom(half) + b"x" * (value_size - half) for _ in range(n)]
    keys = [b"key-%d" % i for i in rng.integers(0, 1_000_000, n)]
    ts = TS0 + np.arange(n, dtype=np.int64)
    return pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(vals, pa.binary()),
                     "timestamp": pa.array(ts, pa.timestamp("ms", tz="UTC"))})


def digest(keys, values, timestamps) -> str:
    """Digest of the records' keys, values (lengths and bytes) and timestamps, in order."""
    h = hashlib.blake2b(digest_size=16)
    for col in (keys, values):
        arr = pa.chunked_array([col]) if isinstance(col, pa.Array) else col
        arr = arr.combine_chunks().cast(pa.large_binary())
        assert arr.null_count == 0, "the benchmark's records have no null keys or values"
        offs = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + len(arr) + 1]
        h.update(np.diff(offs).tobytes())
        h.update(memoryview(arr.buffers()[2])[offs[0]:offs[-1]])
    ts = timestamps.cast(pa.int64()) if isinstance(timestamps, (pa.Array, pa.ChunkedArray)) else timestamps
    h.update(np.asarray(ts, np.int64).tobytes())
    return h.hexdigest()


def table_digest(table: pa.Table) -> str:
    return digest(table.column("key"), table.column("value"), table.column("timestamp"))


def best_pair(ours, theirs, repeat: int):
    """Best time of each and each side's last result, the two runs alternating so machine
    noise hits both alike."""
    a, b = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        ours_out = ours()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        theirs_out = theirs()
        b.append(time.perf_counter() - t)
    return min(a), min(b), ours_out, theirs_out


def set_aiokafka_levels(gzip_level: int, lz4_level: int, zstd_level: int) -> str:
    """Make aiokafka's builder compress as kafkalog does at these levels. Its builder calls the
    module-level ``gzip_encode`` / ``lz4_encode`` / ``zstd_encode`` (aiokafka.codec's, imported
    by name into the C and the Python record modules) with no level; replacing those names is
    the only way to choose one. For lz4 at Kafka's default level, kafkalog (as Kafka) uses the
    fast compressor (LZ4_compress_default); liblz4's frame API gives it for levels below 3, so
    aiokafka gets cramjam level 0. Any other level is HC at that level on both sides."""
    cramjam_lz4 = 0 if lz4_level == KAFKA_LZ4_DEFAULT_LEVEL else lz4_level
    funcs = {
        "gzip_encode": lambda payload: aiokafka_codec.gzip_encode(payload, compresslevel=gzip_level),
        "lz4_encode": lambda payload: aiokafka_codec.lz4_encode(payload, level=cramjam_lz4),
        "zstd_encode": lambda payload: aiokafka_codec.zstd_encode(payload, level=zstd_level),
    }
    modules = [aiokafka_records, sys.modules.get("aiokafka.record._crecords.default_records")]
    for mod in filter(None, modules):
        for name, fn in funcs.items():
            assert hasattr(mod, name), f"{mod.__name__} has no {name}: aiokafka changed, adapt the benchmark"
            setattr(mod, name, fn)
    lz4_mode = "fast compressor (LZ4_compress_default)" if cramjam_lz4 < 3 else f"LZ4HC level {min(lz4_level, 12)}"
    return (f"levels on both sides: gzip {gzip_level}, lz4 {lz4_level} = {lz4_mode}, zstd {zstd_level} "
            f"(aiokafka's encode functions replaced to take these levels)")


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


def aiokafka_records_digest(batches: list[bytes]) -> tuple[int, str]:
    keys, vals, ts = [], [], []
    for raw in batches:
        batch = DefaultRecordBatch(raw)
        assert batch.validate_crc(), "bad CRC"
        for rec in batch:
            keys.append(rec.key)
            vals.append(rec.value)
            ts.append(rec.timestamp)
    return len(keys), digest(pa.array(keys, pa.binary()), pa.array(vals, pa.binary()), np.array(ts, np.int64))


def split(raw) -> list[bytes]:
    return [bytes(raw[b.position:b.position + b.size]) for b in iter_batches(raw)]


def check_encoded(label: str, raw, n: int, want: str) -> None:
    """Decode an encoded buffer once (outside the timing) and check count and content."""
    table = decode_batches(raw)
    assert table.num_rows == n, f"{label}: {table.num_rows} records decoded, {n} encoded"
    assert table_digest(table) == want, f"{label}: decoded records differ from the input"


def profile_kernels(table: pa.Table, label: str) -> None:
    """Time spent in the compiled record walks, per record: the kernels wrapped by timers for
    one decode and one encode of ``table`` (uncompressed), after a warm-up."""
    n = table.num_rows
    raw = encode_batches(table, max_batch_bytes=BATCH_BYTES)
    decode_batches(raw)
    spent: dict[str, float] = {}
    originals = {name: getattr(_kernels, name) for name in ("parse_records", "layout_records", "write_records")}

    def timed(name, fn):
        def wrapper(*args):
            t = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
        return wrapper

    for name, fn in originals.items():
        setattr(_kernels, name, timed(name, fn))
    try:
        dec, enc = [], []
        runs = 5
        for _ in range(runs):
            spent.clear()
            t = time.perf_counter()
            decode_batches(raw)
            dec.append((time.perf_counter() - t, spent.get("parse_records", 0.0)))
            spent.clear()
            t = time.perf_counter()
            encode_batches(table, max_batch_bytes=BATCH_BYTES)
            enc.append((time.perf_counter() - t, spent.get("layout_records", 0.0) + spent.get("write_records", 0.0)))
    finally:
        for name, fn in originals.items():
            setattr(_kernels, name, fn)
    (best_dec, dec_kernel), (best_enc, enc_kernel) = min(dec), min(enc)
    print(f"profile {label}: {n:,} records, best of {runs} runs (the kernels timed within the same run)")
    print(f"  decode {best_dec / n * 1e9:6.0f} ns a record in all (best run), of which parse_records "
          f"(the record walk, copying keys and values) {dec_kernel / n * 1e9:.0f} ns")
    print(f"  encode {best_enc / n * 1e9:6.0f} ns a record in all (best run), of which layout_records + "
          f"write_records (the record walks) {enc_kernel / n * 1e9:.0f} ns")
    size = len(raw)
    t = time.perf_counter()
    zeroed = bytearray(size)
    took = time.perf_counter() - t
    del zeroed
    t = time.perf_counter()
    empty = np.empty(size, np.uint8)
    took_empty = time.perf_counter() - t
    del empty
    print(f"  bytearray({size:,}) (zero-filled) {took * 1e3:.1f} ms; np.empty of the same size "
          f"{took_empty * 1e3:.2f} ms (the encoder allocates without zero-fill)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000, help="records of 100 bytes (a quarter of it at 1 KiB)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--codecs", default="none,gzip,lz4,zstd")
    ap.add_argument("--gzip-level", type=int, default=KAFKA_GZIP_DEFAULT_LEVEL)
    ap.add_argument("--lz4-level", type=int, default=KAFKA_LZ4_DEFAULT_LEVEL)
    ap.add_argument("--zstd-level", type=int, default=KAFKA_ZSTD_DEFAULT_LEVEL)
    ap.add_argument("--aiokafka-default-levels", action="store_true",
                    help="leave aiokafka's own levels (gzip 9, lz4 = LZ4HC 9, zstd 3): not like with like")
    ap.add_argument("--profile", action="store_true",
                    help="also time the compiled record walks per record (the ns figures in BENCHMARKS.md)")
    args = ap.parse_args()
    codecs = args.codecs.split(",")
    print("command: " + " ".join([os.path.relpath(sys.executable)] + sys.argv))
    c_impl = "_crecords" in DefaultRecordBatchBuilder.__module__
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus; "
          f"{args.records:,} records per run, best of {args.repeat}; batches of {BATCH_BYTES} bytes")
    print(f"aiokafka {aiokafka.__version__}: {'C extension' if c_impl else 'pure Python'} record codec "
          f"({DefaultRecordBatchBuilder.__module__})")
    levels = {"none": None, "gzip": args.gzip_level, "lz4": args.lz4_level, "zstd": args.zstd_level}
    if args.aiokafka_default_levels:
        print("levels: kafkalog gzip %d, lz4 %d, zstd %d; aiokafka its own defaults (gzip 9, lz4 cramjam "
              "level 9 = LZ4HC 9, zstd 3): NOT the same work" % (args.gzip_level, args.lz4_level, args.zstd_level))
    else:
        print(set_aiokafka_levels(args.gzip_level, args.lz4_level, args.zstd_level))
    if args.profile:
        for value_size, n in ((100, args.records), (1024, args.records // 4)):
            profile_kernels(make_table(n, value_size), f"{value_size}B none")
    print(f"{'case':<16}{'op':<14}{'kafkalog rec/s':>16}{'MB/s':>8}{'aiokafka rec/s':>16}{'MB/s':>8}{'ratio':>8}"
          f"  compressed bytes kafkalog / aiokafka")
    for value_size in (100, 1024):
        n = args.records if value_size == 100 else args.records // 4
        table = make_table(n, value_size)
        want = table_digest(table)
        keys = table.column("key").to_pylist()
        vals = table.column("value").to_pylist()
        ts = table.column("timestamp").cast(pa.int64()).to_pylist()
        mb = (sum(map(len, keys)) + sum(map(len, vals))) / 1e6
        for codec in codecs:
            cid = int(CompressionType.from_name(codec))
            level = levels[codec]
            ours_raw = encode_batches(table, compression=codec, max_batch_bytes=BATCH_BYTES,
                                      compression_level=level)
            theirs = aiokafka_encode(keys, vals, ts, cid)
            # same input to both decoders: each decodes the batches the other side wrote too
            check_encoded(f"{codec}: aiokafka's batches decoded by kafkalog", b"".join(theirs), n, want)
            assert aiokafka_records_digest(split(ours_raw)) == (n, want), \
                f"{codec}: kafkalog's batches decoded by aiokafka differ from the input"
            ours_batches = split(ours_raw)
            dec_ours, dec_theirs, t_ours, n_theirs = best_pair(
                lambda: decode_batches(ours_raw), lambda: aiokafka_decode(ours_batches), args.repeat)
            assert t_ours.num_rows == n and n_theirs == n, f"{codec} decode: {t_ours.num_rows}, {n_theirs} != {n}"
            raw_ours, raw_theirs, t_ours, n_theirs = best_pair(
                lambda: decode_batches(ours_raw, verify_crc=False),
                lambda: aiokafka_decode(ours_batches, False), args.repeat)
            assert t_ours.num_rows == n and n_theirs == n, f"{codec} decode-nocrc: {t_ours.num_rows}, {n_theirs} != {n}"
            enc_ours, enc_theirs, out_ours, out_theirs = best_pair(
                lambda: encode_batches(table, compression=codec, max_batch_bytes=BATCH_BYTES,
                                       compression_level=level),
                lambda: aiokafka_encode(keys, vals, ts, cid), args.repeat)
            # the timed encodes' own output, read back once outside the timing
            check_encoded(f"{codec} encode (kafkalog)", out_ours, n, want)
            check_encoded(f"{codec} encode (aiokafka)", b"".join(out_theirs), n, want)
            sizes = f"  {len(out_ours):,} / {sum(map(len, out_theirs)):,}"
            case = f"{value_size}B {codec}"
            for op, o, t in (("decode", dec_ours, dec_theirs), ("decode-nocrc", raw_ours, raw_theirs),
                             ("encode", enc_ours, enc_theirs)):
                print(f"{case:<16}{op:<14}{n / o:>16,.0f}{mb / o:>8.0f}{n / t:>16,.0f}{mb / t:>8.0f}"
                      f"{t / o:>8.2f}{sizes if op == 'encode' else ''}", flush=True)


if __name__ == "__main__":
    main()

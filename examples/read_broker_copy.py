"""kafkalog over a copy of a real Kafka broker's log directory: no broker, no export step.

By default this copies the broker-written sample that ships with the repository
(``examples/data/broker-logs``: partition ``test_topic_a-1``, 36 segments, 10,019 records, from
Pinterest's tiered-storage test fixtures; provenance and licence in ``examples/data/PROVENANCE.md``)
into a temporary directory and reads it there. Point ``--path`` at your own copy of a broker's
``log.dirs`` entry (or a backup of one) to read that instead:
kafkalog only reads it, the files are never changed. Internal topics (``__consumer_offsets``,
``__cluster_metadata``) are left out unless named with ``--topic``.

1. describe: partitions, segments, offsets and time ranges, from the files (``kafkalog describe``);
2. verify: every CRC, index and checkpoint (``kafkalog verify``);
3. Spark: records per partition, headers, one key across partitions, and a time-travel read.

    .venv/bin/python examples/read_broker_copy.py [--path /copy/of/kafka-logs] [--topic T]

``run(spark, workdir, path=None, topics=None)`` is what the tests call, with their own SparkSession.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)      # workers must see this venv

# a real broker's partition directory, shipped with the repository (examples/data/PROVENANCE.md)
BROKER_SET = Path(__file__).resolve().parent / "data" / "broker-logs"


def make_spark(app: str):
    """A small local SparkSession with the ``kafkalog`` format registered."""
    from pyspark.sql import SparkSession

    import kafka_log_source

    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafka_log_source.register(spark)
    return spark


def kafkalog_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage_core.tools", *args], capture_output=True, text=True)


def when(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def copy_fixture(workdir: Path) -> Path:
    """The shipped broker sample, copied: the repository's files are never opened for writing."""
    if not BROKER_SET.is_dir():
        raise SystemExit(f"no broker sample at {BROKER_SET}; pass --path with a copy of a broker's log dir")
    data = Path(workdir) / "broker-copy"
    data.mkdir(parents=True, exist_ok=True)
    for d in sorted(BROKER_SET.iterdir()):
        if d.is_dir():
            shutil.copytree(d, data / d.name)
    return data


def run(spark, workdir: Path, path: str | os.PathLike | None = None,
        topics: list[str] | None = None) -> dict:
    from pyspark.sql import functions as F

    import kafka_log_source

    kafka_log_source.register(spark)
    data = Path(path) if path is not None else copy_fixture(Path(workdir))
    source = "your copy" if path is not None else f"a copy of {BROKER_SET}"
    print(f"Reading {data} ({source})")

    # --- 1. describe: facts from the files alone
    described = kafkalog_cli("describe", "--json", str(data))
    if described.returncode != 0:
        raise SystemExit(f"kafkalog describe failed: {described.stderr.strip()}")
    parts = json.loads(described.stdout)["partitions"]
    if not parts:
        raise SystemExit(f"no topic-partition directories (like orders-0/) under {data}")
    all_topics = sorted({p["topic"] for p in parts})
    chosen = topics or [t for t in all_topics if not t.startswith("__")]
    if not chosen:
        raise SystemExit(f"only internal topics under {data} ({', '.join(all_topics)}); name one with --topic")
    print(f"1. describe: {len(parts)} partitions of {len(all_topics)} topics ({', '.join(all_topics)})")
    facts = {}
    for p in parts:
        segs = p["segments"]
        first_ts = min((s["first_indexed_timestamp"] for s in segs
                        if s.get("first_indexed_timestamp") is not None), default=None)
        max_ts = max((s["max_timestamp"] for s in segs if s.get("max_timestamp") is not None), default=None)
        size = sum(s["size"] for s in segs)
        facts[p["partition"]] = {"segments": len(segs), "log_start": p["log_start_offset"],
                                 "log_end": p["log_end_offset"], "bytes": size}
        print(f"   {p['partition']:<24} offsets {p['log_start_offset']:>8,}..{p['log_end_offset']:<8,} "
              f"{len(segs):>4} segments {size:>11,} bytes  time {when(first_ts)} .. {when(max_ts)}")

    # --- 2. verify
    verified = kafkalog_cli("verify", str(data))
    summary = (verified.stdout.strip().splitlines() or ["?"])[-1]
    print(f"2. verify: {summary} (exit status {verified.returncode})")

    # --- 3. Spark over the files
    def load(**options):
        r = (spark.read.format("kafkalog").option("path", str(data))
             .option("subscribe", ",".join(chosen)))
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    df = load(includeHeaders="true")
    stats = (df.groupBy("topic", "partition")
             .agg(F.count("*").alias("records"), F.min("offset").alias("first"), F.max("offset").alias("last"),
                  F.min("timestamp").alias("t0"), F.max("timestamp").alias("t1"))
             .orderBy("topic", "partition").collect())
    print(f"3. Spark, format('kafkalog'), subscribe={','.join(chosen)}:")
    for r in stats:
        print(f"   {r.topic}-{r.partition}: {r.records:,} records, offsets {r.first}..{r.last}, "
              f"{when(int(r.t0.timestamp() * 1000))} .. {when(int(r.t1.timestamp() * 1000))}")
    header_keys = [r.k for r in df.select(F.explode("headers.key").alias("k")).distinct().orderBy("k")
                   .limit(10).collect()]
    print(f"   header keys: {', '.join(header_keys) if header_keys else '(no headers)'}")
    sample = df.where(F.col("key").isNotNull()).orderBy(F.desc("offset")).limit(1).collect()
    key_hits = 0
    if sample:
        key = bytes(sample[0].key)
        hits = df.where(F.col("key") == F.lit(key)).select("topic", "partition", "offset", "value").collect()
        key_hits = len(hits)
        shown = ", ".join(f"{h.topic}-{h.partition}@{h.offset}" for h in hits[:5])
        print(f"   key {key[:40]!r}: {key_hits} record(s) at {shown}")
    # time travel: each partition from the middle of its own time range on (Spark's JSON, epoch
    # ms), planned through the partitions' .timeindex files; a partition the time is past starts
    # at its end (startingOffsetsByTimestampStrategy=latest) instead of failing the query
    middles = {r: int((r.t0.timestamp() + (r.t1.timestamp() - r.t0.timestamp()) / 2) * 1000) for r in stats}
    by_ts: dict[str, dict[str, int]] = {}
    for r, ms in middles.items():
        by_ts.setdefault(r.topic, {})[str(r.partition)] = ms
    recent = load(startingOffsetsByTimestamp=json.dumps(by_ts),
                  startingOffsetsByTimestampStrategy="latest").count()
    cond = None
    for r, ms in middles.items():
        c = ((F.col("topic") == r.topic) & (F.col("partition") == r.partition)
             & (F.col("timestamp") >= F.timestamp_millis(F.lit(ms))))
        cond = c if cond is None else cond | c
    # Kafka's offsetsForTimes starts at the first record at or after the time: with timestamps
    # rising per partition, that is the filter's result
    scan = df.where(cond).count()
    print(f"   from the middle of each partition's time range on (startingOffsetsByTimestamp, "
          f"through the .timeindex files): {recent:,} records; a filtered full scan finds "
          f"{'the same' if recent == scan else f'{scan:,} (differs!)'}")
    total = sum(r.records for r in stats)
    return {"path": str(data), "topics": chosen, "partitions": facts, "verify_exit": verified.returncode,
            "records": total, "per_partition": {f"{r.topic}-{r.partition}": r.records for r in stats},
            "header_keys": header_keys, "key_hits": key_hits, "time_travel": recent, "time_travel_scan": scan}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", help="a copy of a broker's log directory (default: a copy of examples/data/broker-logs)")
    ap.add_argument("--topic", action="append", help="topic to read (repeat; default: every non-internal topic)")
    ap.add_argument("--workdir", type=Path, help="where to copy the sample (default: a new temporary directory)")
    args = ap.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kafkalog-broker-copy-"))
    if args.path is None and (workdir / "broker-copy").exists():
        raise SystemExit(f"{workdir}/broker-copy exists already: pick an empty --workdir")
    spark = make_spark("kafkalog-read-broker-copy")
    try:
        result = run(spark, workdir, path=args.path, topics=args.topic)
    finally:
        spark.stop()
    ok = result["verify_exit"] == 0 and result["time_travel"] == result["time_travel_scan"]
    kl = Path(sys.executable).parent / "kafkalog"
    first = sorted(Path(result["path"]).glob(f"{result['topics'][0]}-*/*.log"))[0]
    print(f"\n{'OK' if ok else 'PROBLEMS (see above)'}: the data read is in {result['path']}")
    print("Try next:")
    print(f"  {kl} dump --files {first} --print-data-log | head     # as kafka-dump-log.sh prints it")
    print(f"  {kl} describe {result['path']}")
    print("  .venv/bin/python examples/read_broker_copy.py --path /copy/of/your/kafka-logs")
    if args.path is None:
        print(f"  rm -rf {workdir}     # when done")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""kafkalog against Apache Kafka itself (issue 18, Build 6), in one script and one SparkSession: a real
single-node Kafka broker (the interop suite's ``LocalBroker``, from the jars ``ci/interop/resolve.sh``
fetches from Maven Central, run with Kafka's own server JVM flags: G1, full JIT, 1 GiB heap) and Spark's
own Kafka connector (spark-sql-kafka-0-10) on the same machine.

* write: the same cached DataFrame (``--rows`` rows, a string key and a 100-byte binary value, over
  ``--partitions`` tasks) written by Spark's Kafka sink (``format("kafka")``, the connector's producer
  defaults: acks=all, idempotent, no compression) into a fresh ``--partitions``-partition topic of the
  broker, and by the ``kafkalog`` sink (compression none) into a fresh directory. Best of ``--repeat``,
  alternating; goal kafkalog >= 1.5x.
* read: ``SELECT count(*), sum(length(value))`` (bench/spark_read.py's query) over the topic the Kafka
  sink wrote last: through Spark's Kafka source from the broker (earliest to latest) and through
  ``format("kafkalog")`` from the broker's log directory (read in place while the broker serves it).
  Best of ``--repeat``, alternating; goal kafkalog >= 2x. Both sides' count and byte sum are checked.
* compact: one dirty log (``--clean-gib`` of 1 MiB runs of 16 KiB batches, ``--keys`` distinct keys,
  500-byte values: bench/cleaner.py's generator), copied (a) into a compacted topic of the broker
  (created through the broker, the broker stopped, the partition's files replaced by the copy, the
  broker started: its cleaner cleans the whole dirty section and logs its ``CleanerStats``, whose
  "MB of log processed ... (N MB/sec)" is Kafka's throughput) and (b) into a kafkalog data dir
  cleaned by ``kafkalog compact --json`` (throughput: the round's bytes read over the round's wall
  time, which also covers the swap and is therefore a little longer than Kafka's stats interval).
  Both cleaners get the same offset-map memory (``--map-mib``). Alternating, ``--repeat`` rounds;
  best of each. Goal kafkalog >= 1x. The cleaned kafkalog log is checked (exactly the newest record
  of every key).

The machine is shared: every ratio compares the two sides measured in the same run, alternating.
Each Kafka clean runs in a freshly started broker JVM (the files are replaced while it is stopped),
so its JIT warms up during the clean; kafkalog's compiled kernels are cached on disk after the first
run (the first ``kafkalog compact`` after an install compiles them, about 10 s).

    .venv/bin/python bench/vs_kafka.py [--rows 20000000] [--partitions 2] [--repeat 2] [--clean-gib 2]
                                       [--keys 200000] [--map-mib 64] [--driver-memory 6g]
                                       [--dir /tmp/kafkalog-vs-kafka] [--only spark|compact]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

VALUE = 100
PARTITION_FILES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
CLEANED = re.compile(r"cleaned log (\S+) \(dirty section = \[(\d+), (\d+)\]\)\s+([\d,.]+) MB of log processed "
                     r"in ([\d,.]+) seconds \(([\d,.]+) MB/sec\)")
END_SIZE = re.compile(r"End size: [\d,.]+ MB \(([\d,]+) messages\)")


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


interop = load("interop_conftest", ROOT / "tests" / "interop" / "conftest.py")
cleaner_bench = load("bench_cleaner", ROOT / "bench" / "cleaner.py")


class BenchBroker(interop.LocalBroker):
    """The interop suite's broker with Kafka's own server JVM flags (kafka-server-start.sh: G1, 1 GiB
    heap, full JIT; the suite's C1-only serial-GC JVM starts faster but runs slower) and the cleaner's
    offset map of ``map_mib``."""

    def __init__(self, workdir: Path, map_mib: int) -> None:
        self.map_mib = map_mib
        super().__init__(workdir)

    def _write_properties(self) -> None:
        super()._write_properties()
        text = self.properties.read_text().replace("log.cleaner.dedupe.buffer.size=16777216\n",
                                                   f"log.cleaner.dedupe.buffer.size={self.map_mib << 20}\n")
        self.properties.write_text(text)

    def _java(self, main: str, *args: str, log4j: str, heap: str) -> list[str]:
        if main != "kafka.Kafka":
            return super()._java(main, *args, log4j=log4j, heap=heap)
        return ["java", "-Xms1g", "-Xmx1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
                "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={self.workdir / log4j}",
                f"-Dkafka.logs.dir={self.workdir}", "-cp", f"{self.jars}/*", main, *args]


def create_topic(broker, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                      topic_configs=configs or {})])
    finally:
        admin.close()
    deadline = time.monotonic() + 60
    wanted = [broker.log_dir / f"{name}-{p}" / "partition.metadata" for p in range(partitions)]
    while not all(w.exists() for w in wanted):
        assert time.monotonic() < deadline, f"topic {name} was not created\n{broker.log_tail()}"
        time.sleep(0.2)


def best_ratio(times: dict[str, list[float]], ours: str, theirs: str) -> float:
    return min(times[theirs]) / min(times[ours])


def bench_write_read(spark, broker, args, root: Path) -> dict[str, float]:
    import pyspark.sql.functions as F

    def rows(n: int):
        df = (spark.range(0, n, 1, args.partitions)
              .select(F.concat(F.lit("key-"), F.col("id").cast("string")).alias("key"),
                      F.expr("unhex(concat(sha2(cast(id as string), 256), repeat('78', 68)))").alias("value"))
              .cache())
        assert df.count() == n
        return df

    # round 0 warms the JVMs, the Python workers and the broker on a tenth of the rows, untimed
    frames = [rows(args.rows // 10), rows(args.rows)]
    topics: list[str] = []

    def kafka_sink(df) -> None:
        (df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", topics[-1]).save())

    def kafkalog_sink(df) -> None:
        (df.write.format("kafkalog").option("path", str(root / "kafkalog")).option("topic", "bench")
         .option("numPartitions", str(args.partitions)).option("compression", "none").mode("append").save())

    # Outside the clocks: a fresh topic for the Kafka sink (through the broker), a fresh dir for kafkalog's.
    def prepare(side: str) -> None:
        if side == "kafka sink":
            topics.append(f"bench_w{len(topics)}")
            create_topic(broker, topics[-1], args.partitions)
        else:
            shutil.rmtree(root / "kafkalog", ignore_errors=True)

    writes = {"kafka sink": kafka_sink, "kafkalog sink": kafkalog_sink}
    times: dict[str, list[float]] = {k: [] for k in writes}
    for round_ in range(args.repeat + 1):
        for side, run in writes.items():
            prepare(side)
            t = time.perf_counter()
            run(frames[min(round_, 1)])
            took = time.perf_counter() - t
            if round_:
                times[side].append(took)
            print(f"  write round {round_} {side}: {took:.2f} s", flush=True)

    topic = topics[-1]
    query = "SELECT count(*) AS n, sum(length(value)) AS bytes FROM src"
    reads = {
        "kafka source": lambda: spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic).option("startingOffsets", "earliest").option("endingOffsets", "latest").load(),
        "kafkalog source": lambda: spark.read.format("kafkalog").option("path", str(broker.log_dir))
        .option("subscribe", topic).load(),
    }
    times.update({side: [] for side in reads})
    for round_ in range(args.repeat + 1):
        for side, df_of in reads.items():
            df_of().createOrReplaceTempView("src")
            t = time.perf_counter()
            row = spark.sql(query).collect()[0]
            took = time.perf_counter() - t
            assert row.n == args.rows, f"{side}: count(*) {row.n}, {args.rows} rows written"
            assert row.bytes == args.rows * VALUE, f"{side}: sum(length(value)) {row.bytes}"
            if round_:
                times[side].append(took)
            print(f"  read round {round_} {side}: {took:.2f} s", flush=True)
    for df in frames:
        df.unpersist()
    size = sum(f.stat().st_size for f in broker.log_dir.glob(f"{topic}-*/*.log"))
    print(f"write: {args.rows:,} rows (string key, {VALUE}-byte value), {args.partitions} tasks/partitions; "
          f"read: the topic the Kafka sink wrote ({size / (1 << 30):.2f} GiB of segments); {query}; "
          f"best of {args.repeat}")
    for side, t in times.items():
        print(f"  {side:16s} {args.rows / min(t):>12,.0f} rows/s  ({min(t):.2f} s; rounds "
              f"{', '.join(f'{x:.2f}' for x in t)})")
    return {"read": best_ratio(times, "kafkalog source", "kafka source"),
            "write": best_ratio(times, "kafkalog sink", "kafka sink")}


def bench_compact(broker, args, root: Path) -> float:
    pristine = root / "pristine" / "dirty-0"
    shutil.rmtree(pristine.parent, ignore_errors=True)
    _, expected = cleaner_bench.generate(pristine, args.clean_gib, args.keys, 500, 256)
    files = sorted(f for f in pristine.iterdir() if f.suffix in PARTITION_FILES)
    dirty = sum(f.stat().st_size for f in files if f.suffix == ".log")
    mb = {"kafka cleaner": [], "kafkalog compact": []}
    topic_configs = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "retention.ms": "-1",
                     "segment.bytes": str(256 << 20), "file.delete.delay.ms": "0"}
    for round_ in range(args.repeat):
        # Kafka: a new compacted topic, its partition's files replaced by the dirty log, the broker
        # restarted cleanly (files trusted as they are); its cleaner thread logs its CleanerStats.
        topic = f"bench_c{round_}"
        create_topic(broker, topic, 1, topic_configs)
        broker.stop()
        part = broker.log_dir / f"{topic}-0"
        for f in part.iterdir():
            if f.suffix in PARTITION_FILES:
                f.unlink()
        for f in files:
            shutil.copyfile(f, part / f.name)
        os.sync()
        broker.start()
        deadline = time.monotonic() + 1800
        while not (m := next((m for m in CLEANED.finditer(broker.log_text()) if m.group(1) == f"{topic}-0"),
                             None)):
            assert broker.running and time.monotonic() < deadline, broker.log_tail()
            time.sleep(0.5)
        mb["kafka cleaner"].append(float(m.group(6).replace(",", "")))
        kept = int(END_SIZE.search(broker.log_text(), m.end()).group(1).replace(",", ""))
        assert kept == len(expected.offsets), f"Kafka's cleaner kept {kept} records, {len(expected.offsets)} keys"
        print(f"  compact round {round_} kafka cleaner: {m.group(4)} MB in {m.group(5)} s ({m.group(6)} MB/s), "
              f"dirty section [{m.group(2)}, {m.group(3)})", flush=True)

        # kafkalog: the same files in a data dir of their own, `kafkalog compact`
        data = root / "kafkalog-compact"
        shutil.rmtree(data, ignore_errors=True)
        cleaner_bench.restore(pristine, data / "dirty-0")
        cli = [sys.executable, "-m", "storage_core.tools"]
        subprocess.run([*cli, "config", str(data), "--topic", "dirty", "--set", "cleanup.policy=compact",
                        "--set", "min.cleanable.dirty.ratio=0.01", "--set", "retention.ms=-1"],
                       check=True, capture_output=True)
        done = subprocess.run([*cli, "compact", str(data), "--json", "--purge",
                               "--dedupe-buffer-size", str(args.map_mib << 20)],
                              capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        rounds = json.loads(done.stdout)["rounds"]
        read, secs = sum(r["bytes_read"] for r in rounds), sum(r["seconds"] for r in rounds)
        mb["kafkalog compact"].append(read / (1 << 20) / secs)
        print(f"  compact round {round_} kafkalog compact: {read / (1 << 20):.1f} MB in {secs:.2f} s "
              f"({read / (1 << 20) / secs:.1f} MB/s), {len(rounds)} cleaner round(s)", flush=True)
        written = SimpleNamespace(messages_written=sum(r["messages_written"] for r in rounds))
        cleaner_bench.verify_clean(data / "dirty-0", written, expected)      # outside the timing
    print(f"compact: {dirty / (1 << 20):.0f} MiB dirty log, {args.keys:,} keys, 500-byte values, offset map "
          f"{args.map_mib} MiB on both sides; best of {args.repeat}")
    for side, v in mb.items():
        print(f"  {side:16s} {max(v):>8.1f} MB/s  (rounds {', '.join(f'{x:.1f}' for x in v)})")
    return max(mb["kafkalog compact"]) / max(mb["kafka cleaner"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--clean-gib", type=float, default=2.0)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--map-mib", type=int, default=64)
    ap.add_argument("--dir", default="/tmp/kafkalog-vs-kafka")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--only", choices=("spark", "compact"))
    args = ap.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}", flush=True)
    if not (interop.KAFKA_JARS / ".complete").exists() or not (interop.SPARK_KAFKA_JARS / ".complete").exists():
        sys.exit("run ci/interop/resolve.sh first (Kafka's and Spark's Kafka connector jars from Maven Central)")
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(root / "kafka", ignore_errors=True)
    (root / "kafka").mkdir()
    broker = BenchBroker(root / "kafka", args.map_mib)
    ratios = {}
    started = time.perf_counter()
    try:
        broker.start()
        print(f"Kafka {interop.KAFKA_VERSION} broker on {broker.bootstrap}, Spark Kafka connector "
              f"{interop.SPARK_KAFKA_VERSION}", flush=True)
        if args.only in (None, "spark"):
            from pyspark.sql import SparkSession

            import kafka_log_source

            jars = sorted(str(p) for p in interop.SPARK_KAFKA_JARS.glob("*.jar"))
            spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                     .config("spark.jars", ",".join(jars)).config("spark.driver.host", "127.0.0.1")
                     .config("spark.driver.bindAddress", "127.0.0.1")
                     .config("spark.ui.showConsoleProgress", "false")
                     .config("spark.driver.memory", args.driver_memory)      # the cached DataFrame in memory
                     .config("spark.sql.shuffle.partitions", "2").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            kafka_log_source.register(spark)
            ratios.update(bench_write_read(spark, broker, args, root))
            spark.stop()
        if args.only in (None, "compact"):
            ratios["compact"] = bench_compact(broker, args, root)
    finally:
        broker.stop()
    goals = {"read": 2.0, "write": 1.5, "compact": 1.0}
    for name, r in ratios.items():
        print(f"  {name:8s} kafkalog / Kafka: {r:.2f}   (goal >= {goals[name]:.1f}: "
              f"{'met' if r >= goals[name] else 'missed'})")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

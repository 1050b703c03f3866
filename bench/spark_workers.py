"""Spark's Python workers, with and without kafkalog's freeze of what they loaded
(``storage_core.common.settle_reused_worker``; docs/architecture.md, "Spark's Python workers and
the garbage collector").

The same work on each side, in a new local SparkSession (``local[2]``) per round: ``--reads``
times a batch count of a 2-partition topic (1,000 records of 50 bytes) and a time-travel read of
it, then a streaming copy of it into a kafkalog topic (``--max-offsets`` per trigger, 300 by
default: four micro-batches), after a warm-up round that is not counted. The sides differ in one thing:

* frozen: Spark's own daemon (``pyspark.daemon``), kafkalog freezing what its workers loaded;
* unfrozen: Spark's daemon again (``spark.python.daemon.module``, bench/_unfrozen_daemon.py),
  its workers without ``SPARK_REUSE_WORKER`` in their environment (reused all the same): kafkalog
  freezes nothing and PySpark's collection after each task walks every object.

Per side: the CPU seconds of Spark's Python workers (every process whose command line is
``python -m`` one of the two daemon modules, which the daemons' forked workers keep, or
``-m pyspark.sql.streaming.python_streaming_source_runner``, read from ``/proc`` every 20 ms: the
daemons reap their children, so their CPU never reaches a parent's) and the wall time of the
queries; sides alternating, the median of ``--repeat`` rounds, and the ratio frozen / unfrozen.
Checks: each count is the 1,000 records written, the copy holds them all.

    .venv/bin/python bench/spark_workers.py [--repeat 3] [--reads 20] [--max-offsets 300]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Spark's Python workers import this checkout's packages (and the baseline's daemon module) too
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "bench"),
                                                        os.environ.get("PYTHONPATH")) if p)

import pyarrow as pa  # noqa: E402

from storage_core.log import Log  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")
DAEMONS = {"frozen": "pyspark.daemon", "unfrozen": "_unfrozen_daemon"}


class WorkerCpu:
    """CPU seconds of Spark's Python workers, polled from ``/proc`` while it runs: the last CPU
    time seen of each process (keyed by pid and start time, so a reused pid counts anew), picked by
    its command line (``/proc``'s stat alone, as bench/spark_read.py's ``proc_stats`` reads it, does
    not tell a daemon's worker from another Python process)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> WorkerCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.is_set():
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    with open(f"/proc/{d}/cmdline", "rb") as f:
                        argv = f.read().split(b"\0")
                    if len(argv) < 3 or argv[1] != b"-m" or argv[2].decode() not in (
                            *DAEMONS.values(), "pyspark.sql.streaming.python_streaming_source_runner"):
                        continue
                    with open(f"/proc/{d}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except (OSError, IndexError, UnicodeDecodeError):
                    continue
                self.seen[(d, fields[19])] = (int(fields[11]) + int(fields[12])) / HZ
            self._stop.wait(0.02)

    @property
    def seconds(self) -> float:
        return sum(self.seen.values())


def make_topic(root: Path) -> None:
    for p in range(2):
        with Log.open(root / f"t-{p}") as log:
            for _ in range(5):
                log.append(pa.table({"key": pa.array([b"k%d" % i for i in range(100)]),
                                     "value": pa.array([b"v" * 50] * 100)}))


def one_round(side: str, root: Path, reads: int, max_offsets: int) -> tuple[float, float]:
    """Worker CPU seconds and query wall seconds of one round of ``side``."""
    from pyspark.sql import SparkSession

    import kafka_log_source

    out = root / f"out-{side}-{time.monotonic_ns()}"
    with WorkerCpu() as cpu:
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.python.daemon.module", DAEMONS[side]).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        kafka_log_source.register(spark)
        t0 = time.perf_counter()
        src = spark.read.format("kafkalog").option("path", str(root / "in")).option("subscribe", "t")
        for _ in range(reads):
            assert src.load().count() == 1000
            assert len(src.option("startingTimestamp", "0").load().collect()) == 1000
        q = (spark.readStream.format("kafkalog").option("path", str(root / "in")).option("subscribe", "t")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(max_offsets)).load()
             .selectExpr("key", "value").writeStream.format("kafkalog").option("path", str(out / "data"))
             .option("topic", "o").option("checkpointLocation", str(out / "chk"))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        wall = time.perf_counter() - t0
        copied = spark.read.format("kafkalog").option("path", str(out / "data")).option("subscribe", "o").load()
        assert copied.count() == 1000, "the streaming copy lost records"
        spark.stop()
        time.sleep(0.5)                     # the workers' last CPU, before they go
    return cpu.seconds, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reads", type=int, default=20)
    ap.add_argument("--max-offsets", type=int, default=300)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kafkalog-workers-bench-"))
    try:
        make_topic(root / "in")
        got: dict[str, list[tuple[float, float]]] = {s: [] for s in DAEMONS}
        one_round("frozen", root, 1, args.max_offsets)   # warm-up, not counted: the first session pays more
        for r in range(args.repeat):
            for side in (DAEMONS if r % 2 == 0 else list(DAEMONS)[::-1]):
                got[side].append(one_round(side, root, args.reads, args.max_offsets))
                cpu, wall = got[side][-1]
                print(f"round {r + 1} {side:9s} workers' CPU {cpu:6.2f} s, queries {wall:6.2f} s", flush=True)
        med = {s: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for s, v in got.items()}
        for side, (cpu, wall) in med.items():
            print(f"{side:9s} median: workers' CPU {cpu:6.2f} s, queries {wall:6.2f} s")
        print(f"frozen / unfrozen: workers' CPU {med['frozen'][0] / med['unfrozen'][0]:.2f}, "
              f"queries' wall {med['frozen'][1] / med['unfrozen'][1]:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

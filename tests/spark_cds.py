"""A class-data sharing archive (JDK CDS, JEP 350's dynamic archive) of the classes a Spark JVM of
the tests loads, so that each of the suite's Spark JVMs maps them instead of loading, parsing and
verifying them again from pyspark's jars: a SparkSession's start, two small queries and its stop
took 17-22 CPU s without it and 10-14 with it here (Java 17, C1 only), and the suite starts
dozens of Spark JVMs (the shared sessions, the sink trials' jobs, the cluster drivers and
executors, the demo's and benchmarks' smoke tests).

``make test`` builds it before the suite (``python tests/spark_cds.py``: one Spark job through
``kafkalog``, batch and streaming, in a JVM started with ``-XX:ArchiveClassesAtExit``), into
``.spark-cds/`` (git-ignored), named by what it was built from: this ``java`` and pyspark's jars
(names, sizes, modification times), which the JVM also checks when it maps the archive. Without
it (``pytest`` run directly, or the build failed) the JVMs load their classes as usual.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / ".spark-cds"
# A JVM that cannot use the archive (another classpath, jars changed since) runs without it and
# says so on stdout; that warning is silenced, the JVM's other messages are not.
QUIET = "-Xlog:cds=off,cds+dynamic=off"


def _key() -> str | None:
    java = shutil.which("java")
    try:
        import pyspark
    except ImportError:
        return None
    if java is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    digest = hashlib.sha256()
    java_path = Path(java).resolve()
    java_stat = java_path.stat()
    digest.update(f"{java_path} {java_stat.st_size} {java_stat.st_mtime_ns}\n".encode())
    for jar in sorted(jars.iterdir()):
        st = jar.stat()
        digest.update(f"{jar.resolve()} {st.st_size} {st.st_mtime_ns}\n".encode())
    return f"spark-{pyspark.__version__}-{digest.hexdigest()[:16]}"


def archive() -> Path | None:
    """The archive for this ``java`` and this pyspark, if it has been built."""
    key = _key()
    path = None if key is None else FOLDER / f"{key}.jsa"
    return path if path is not None and path.is_file() else None


def java_options() -> str:
    """JVM options that map the archive, or ``""`` without one."""
    path = archive()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path else ""


TRAINING = r"""
import os, sys
from pathlib import Path
os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import kafka_log_source

out, jvm_options = Path(sys.argv[1]), sys.argv[2]
spark = (SparkSession.builder.master("local[2]").appName("kafkalog-cds")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.driver.extraJavaOptions", jvm_options).getOrCreate())
kafka_log_source.register(spark)
df = spark.range(3000).selectExpr("cast(id % 7 as string) as key", "cast(id as string) as value")
df.write.format("kafkalog").option("path", str(out)).option("topic", "t") \
    .option("numPartitions", 2).mode("append").save()
spark.read.format("kafkalog").option("path", str(out)).option("subscribe", "t").load() \
    .groupBy("partition").count().collect()
q = (spark.readStream.format("kafkalog").option("path", str(out)).option("subscribe", "t")
     .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 1000).load()
     .selectExpr("key", "value").writeStream.format("kafkalog").option("path", str(out))
     .option("topic", "u").option("checkpointLocation", str(out / "chk"))
     .trigger(availableNow=True).start())
q.awaitTermination()
assert q.exception() is None, q.exception()
proc = spark.sparkContext._gateway.proc      # the JVM: it dumps the archive as it exits
spark.stop()
proc.stdin.close()                           # PythonGatewayServer exits at the end of its stdin
sys.exit(proc.wait(timeout=600))
"""


def build() -> Path:
    """Builds the archive if it is missing; returns its path."""
    from spark_jvm import JIT_AND_GC

    if (path := archive()) is not None:
        return path
    key = _key()
    if key is None:
        raise SystemExit("spark_cds: no java on PATH or no pyspark: nothing to build")
    FOLDER.mkdir(exist_ok=True)
    target = FOLDER / f"{key}.jsa"
    partial = FOLDER / f"{key}.jsa.{os.getpid()}.partial"
    with tempfile.TemporaryDirectory(prefix="kafkalog-cds-") as work:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
        done = subprocess.run(
            [sys.executable, "-c", TRAINING, str(Path(work) / "topics"),
             f"{JIT_AND_GC} -XX:ArchiveClassesAtExit={partial}"],
            env=env, cwd=work, capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise SystemExit(f"spark_cds: the training job exited {done.returncode}, no archive:\n"
                         f"{done.stderr[-4000:]}")
    os.replace(partial, target)
    for old in FOLDER.glob("*.jsa"):
        if old != target:
            old.unlink(missing_ok=True)
    return target


if __name__ == "__main__":                  # tests/ is sys.path[0]: spark_jvm imports
    print(f"spark_cds: {build().relative_to(REPO)}")

"""Java options of the tests' own Spark JVMs: the suite's ``local[2]`` session (conftest.py), the
sink trials' jobs (spark/sink_job.py) and the cluster drivers and their executors
(cluster/cluster_session.py).

C1 only and the serial collector: these JVMs run small queries for seconds to minutes, where C2's
compilations and the parallel collector's threads cost more CPU than they earn, and the suite is
CPU-bound on two cores; and the class-data sharing archive of spark_cds.py when ``make test``
has built it. The examples' tests run on the shared session. ``make demo`` and the
benchmarks keep the JVM's defaults, as users run them; their smoke tests (tests/cli/test_cli.py,
tests/test_bench.py), which check what they do and not how fast, start them with these options
through ``JDK_JAVA_OPTIONS``, which the ``java`` launcher reads (spark-submit's JVM included)."""

from __future__ import annotations

from pathlib import Path

from spark_cds import java_options

# C1 and the serial collector alone: what the CDS archive is built with (spark_cds.py).
JIT_AND_GC = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SHORT_LIVED_JVM = f"{JIT_AND_GC} {java_options()}".strip()


def short_lived_jvm_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a process that starts its own Spark JVM without a hook for its options:
    ``JDK_JAVA_OPTIONS`` carries them (the JVM notes on stderr that it picked them up)."""
    return {**env, "JDK_JAVA_OPTIONS": SHORT_LIVED_JVM}

# PythonWorkerFactory.createSimpleWorker (Spark 4.3) gives a new Python worker 10 s, a constant,
# to connect back; a streaming query's Python source runner starts that way, a new interpreter
# at each query start. Several Spark drivers starting at once on two cores can exceed it: the
# query then fails with this message before or between batches. The tests start such a query
# again on its checkpoint, as an operator would, RESTART_PAUSE seconds later (three immediate
# restarts, 11-15 s apart, all failed once while a local cluster ran on the other worker: the
# load lasts minutes), at most START_ATTEMPTS times in all; any other failure stays a failure.
CONNECT_BACK = "Python worker failed to connect back"
START_ATTEMPTS = 5
RESTART_PAUSE = 20.0


def link_spark_home(home: Path) -> Path:
    """Makes ``home`` a SPARK_HOME of links to pyspark's own (``jars``, ``bin``, ...) without
    ``python/lib``'s zips, and returns it.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on every Python
    worker's path (PythonUtils.sparkPythonPath). Modules imported from a zip are compiled at each
    import, since zipimport neither reads nor writes ``__pycache__``: a worker started alone (a
    data source's planning runners, a streaming query's source runner, a new interpreter each)
    then spends 1.2-1.3 s more CPU importing pyspark (1.6-1.9 s against 0.6 s here). Without the
    zips, workers import pyspark and py4j from this interpreter's site-packages, compiled once.
    ``work``, where a standalone worker puts its executors' directories, is left for Spark to
    create inside ``home``."""
    import pyspark

    package = Path(pyspark.__file__).parent
    home.mkdir(parents=True, exist_ok=True)
    for entry in package.iterdir():
        if entry.name not in ("work", "python"):
            (home / entry.name).symlink_to(entry)
    (home / "python" / "lib").mkdir(parents=True)
    (home / "python" / "pyspark").symlink_to(package / "python" / "pyspark")
    return home

"""Exactly once with real processes: the ``kafkalog`` sink under SIGKILL.

A streaming ETL copies the topic ``in`` (3 partitions, 594 records with unique values; the key
is the value, every fifth key null so the sticky null-key partitioner takes part) to the topic
``out`` (``numPartitions`` 3) with ``Trigger.AvailableNow``. A query is killed, then restarted
from its checkpoint until it completes; then

* a ``read_committed`` batch read of ``out`` returns every input value exactly once (multiset
  equality: nothing missing, nothing twice), each with its own key;
* a ``read_uncommitted`` read returns at least as much (aborted records may be there, each a
  copy of an input record, never fewer);
* no partition of ``out`` keeps an open transaction of the query's producer, the sink's
  transaction log (``<checkpoint>/kafkalog-sink/txn.json``) says ``complete`` for the last
  batch, Spark's offset and commit logs agree;
* ``python -m storage_core.tools verify OUT`` exits 0.

1. Deterministic crash points (``test_commit_killed_at``), in the test session: the sink option
   ``kafkalog.test.crashAt=<point>`` makes the driver-side commit SIGKILL its own process (Spark's
   ``python_streaming_sink_runner`` worker) at ``point``; observed: the JVM reads EOF from the
   worker, the query fails at once with ``StreamingQueryException`` "Python worker exited
   unexpectedly (crashed)" (no retry), ``offsets/0`` is written and ``commits/0`` is not. The test
   checks what the kill left (txn.json state, which partitions hold an open transaction, the
   records appended and those a read_committed fetch sees, read with the storage library without
   recovering anything) and that the restart without the option aborts an ``ongoing`` batch (its
   records stay in the log, hidden from ``read_committed``) or completes a ``prepare_commit``
   one, and never appends a completed batch again when Spark replays it.
   ``test_restart_killed_while_finishing_the_interrupted_commit``: the restart is killed in turn
   while it writes the ABORT / COMMIT markers of the interrupted transaction, a third run ends
   exactly once. ``test_kill_while_creating_the_topic_keeps_num_partitions``: a kill between
   the partition directories of a new topic still ends with numPartitions partitions (created
   highest first).

2. Random SIGKILL of the whole job (``test_random_sigkill_of_the_whole_job``): ``sink_job.py``
   runs the ETL in its own process with its own SparkSession (``local[2]``, 60 offsets per
   trigger: 10 micro-batches of 20 records of each input partition, the last 18). It is started
   in a new session (``start_new_session=True``) and killed with ``os.killpg(SIGKILL)``, then
   every process left in that session (the PySpark daemons put themselves in their own process
   groups, so the group kill alone misses them, and an orphaned commit worker could go on
   writing) is SIGKILLed by pid before the job runs again to completion. Kill moments are
   seeded (``KAFKALOG_SINK_SEED``, default 20261124) and anchored on the job's own progress,
   measured live from its checkpoint, because a JVM start costs 8-60 s here depending on the
   machine's load and a fixed delay would mostly hit the start-up:

   * ``cycle`` trials pick a micro-batch k >= 1 and kill at a uniformly random moment of one
     batch period (the live interval between ``offsets/k-1`` and ``offsets/k``, or the median
     period seen so far when k-1 is the run's first batch, which also starts the Python
     workers) after batch k was planned: planning, encoding and staging on the executors, the
     driver's commit and Spark's commit log are hit in proportion to their share of a batch;
   * ``commit`` trials pick a micro-batch k and kill at a uniformly random moment of one commit
     duration (measured from the job's previous commits, ``ongoing`` to ``complete`` in
     txn.json, polled every 2 ms) after txn.json says ``ongoing`` for k: the appends, between
     partitions, prepare_commit and between the markers.

   What each kill hit is read back from the disk (Spark's offset/commit logs, txn.json, the open
   transactions left in the ``out`` partitions) and printed (``-s`` or ``-rP`` shows it). In the
   slow mode some trials kill 2 or 3 successive runs before the final one (a restart killed while
   it finishes the interrupted transaction or in its next batches), and the summary test checks
   that the trials hit the executors' write phase and the driver's commit.

Number of trials: ``KAFKALOG_SINK_TRIALS`` (default 3: every trial costs two JVM starts), run
``KAFKALOG_SINK_PARALLEL`` (default 2: more drivers starting at once beside the crash-point
tests' own Spark session can leave a Python worker of Spark's more than its fixed 10 s to connect
back) at a time. Dozens, as tests/storage/test_crash.py does its long variants, with ``KAFKALOG_SLOW=1``
(30 trials, ``KAFKALOG_SINK_TRIALS`` still overrides the count)::

    KAFKALOG_SLOW=1 .venv/bin/python -m pytest tests/spark/test_sink_exactly_once.py -rP
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException

from storage_core.format.log_input_stream import iter_batches
from storage_core.log import Log
from spark_jvm import CONNECT_BACK, RESTART_PAUSE, START_ATTEMPTS

REPO = Path(__file__).resolve().parents[2]
JOB = Path(__file__).resolve().with_name("sink_job.py")
SLOW = os.environ.get("KAFKALOG_SLOW") == "1"
slow = pytest.mark.skipif(not SLOW, reason="extended crash trials: set KAFKALOG_SLOW=1")
TRIALS = int(os.environ.get("KAFKALOG_SINK_TRIALS", "30" if SLOW else "3"))
SEED = int(os.environ.get("KAFKALOG_SINK_SEED", "20261124"))
PARALLEL = int(os.environ.get("KAFKALOG_SINK_PARALLEL", "2"))

IN_PARTITIONS = 3
PER_PARTITION = 198          # maxOffsetsPerTrigger 200: 3 batches of 66 per partition
OUT_PARTITIONS = 3
QUERY_TIMEOUT = 300          # seconds; a healthy query takes 2-10 s, much more under load
JOB_TIMEOUT = 900            # one sink_job.py run; a JVM start alone took 60 s under load here
JOB_MAX_OFFSETS = 60         # 20 records of each input partition per micro-batch
JOB_BATCHES = -(-PER_PARTITION // (JOB_MAX_OFFSETS // IN_PARTITIONS))       # 10

CRASH_POINTS = ["ongoing", "between_partitions", "appended", "prepare_commit",
                "between_markers", "complete"]


# ====================================================================== input

@dataclass(frozen=True)
class Source:
    root: Path
    rows: tuple[tuple[str | None, str], ...]     # (key, value) of every input record

    @property
    def values(self) -> Counter:
        return Counter(v for _, v in self.rows)

    def values_below(self, ends: dict[str, int]) -> set[str]:
        """Values of the records of ``in`` below the end offsets ``{"0": n, ...}``."""
        return {value_of(int(p), i) for p, end in ends.items() for i in range(end)}


def value_of(partition: int, i: int) -> str:
    return f"in{partition}-{i:03d}"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Source:
    """The input topic ``in``: 3 partitions of 198 records (read-only for every query)."""
    root = tmp_path_factory.mktemp("sink-source")
    rows = []
    for p in range(IN_PARTITIONS):
        values = [value_of(p, i) for i in range(PER_PARTITION)]
        keys = [None if i % 5 == 4 else v for i, v in enumerate(values)]
        with Log.open(root / f"in-{p}") as log:
            # several appends, so the input has several batches per partition
            for s in range(0, PER_PARTITION, 50):
                log.append(pa.table({
                    "key": pa.array([None if k is None else k.encode() for k in keys[s:s + 50]],
                                    pa.binary()),
                    "value": pa.array([v.encode() for v in values[s:s + 50]], pa.binary())}))
        rows += zip(keys, values)
    return Source(root, tuple(rows))


# ====================================================================== reading back

def read_out(spark, out: Path) -> dict[str, list[tuple[str | None, str]]]:
    """(key, value) of every record of ``out`` that batch reads return, by isolation level
    (both reads in one Spark job)."""
    levels = ("read_committed", "read_uncommitted")
    got: dict[str, list] = {level: [] for level in levels}
    if not out.exists():
        return got
    dfs = [spark.read.format("kafkalog").option("path", str(out)).option("subscribe", "out")
           .option("isolationLevel", level).load()
           .selectExpr(f"'{level}' as level", "cast(key as string)", "cast(value as string)")
           for level in levels]
    for r in dfs[0].unionAll(dfs[1]).collect():
        got[r[0]].append((r[1], r[2]))
    return got


def log_values(out: Path, isolation: str) -> Counter:
    """Values in ``out`` as the storage library's own fetch loop reads them (read-only: the
    state a kill left is inspected without recovering it)."""
    got: Counter = Counter()
    for d in sorted(out.glob("out-*")):
        with Log.open(d, read_only=True) as log:
            offset = log.log_start_offset
            while True:
                r = log.fetch(offset, isolation=isolation)
                got.update(v.decode() for v in r.table.column("value").to_pylist())
                if r.next_offset == offset:
                    break
                offset = r.next_offset
    return got


def txn_state(chk: Path) -> dict | None:
    p = chk / "kafkalog-sink" / "txn.json"
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        return None


def producer_id(chk: Path) -> int:
    return int(json.loads((chk / "kafkalog-sink" / "producer.json").read_text())["producer_id"])


def batch_ids(d: Path) -> set[int]:
    try:
        return {int(n) for n in os.listdir(d) if n.isdigit()}
    except FileNotFoundError:
        return set()


def spark_log(chk: Path) -> tuple[set[int], set[int]]:
    """Batch ids in Spark's offset log and commit log."""
    return batch_ids(chk / "offsets"), batch_ids(chk / "commits")


def planned_ends(chk: Path, batch: int) -> dict[str, int]:
    """End offsets of ``in`` of a planned batch (the last line of ``offsets/<batch>``)."""
    return json.loads((chk / "offsets" / str(batch)).read_text().splitlines()[-1])["in"]


@dataclass
class PartitionScan:
    data_records: int = 0       # records of data batches (committed, aborted or open)
    open_txn: bool = False      # the producer has a transaction without its marker here
    segments: int = 0           # .log files holding data batches


def scan_out(out: Path, pid: int) -> dict[int, PartitionScan]:
    """Reads the ``out`` partitions' .log files without the library's Log (nothing is
    recovered or written): per partition, the data records and whether ``pid`` has a
    transaction without its end marker. A partial batch at the end (a kill mid-write) ends the
    walk, as for Kafka's FileLogInputStream."""
    result = {}
    if not out.exists():
        return result
    for d in sorted(out.iterdir()):
        if not d.is_dir() or not d.name.startswith("out-"):
            continue
        scan = PartitionScan()
        for seg in sorted(d.glob("*.log")):
            had_data = False
            for b in iter_batches(seg.read_bytes()):
                h = b.header
                if h.is_control:
                    if h.producer_id == pid:
                        scan.open_txn = False
                    continue
                had_data = True
                scan.data_records += h.records_count
                if h.is_transactional and h.producer_id == pid:
                    scan.open_txn = True
            scan.segments += had_data
        result[int(d.name[len("out-"):])] = scan
    return result


def start_verify(out: Path) -> subprocess.Popen:
    """``python -m storage_core.tools verify OUT``, started (it runs beside the Spark reads)."""
    return subprocess.Popen([sys.executable, "-m", "storage_core.tools", "verify", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def assert_exactly_once(spark, source: Source, out: Path, chk: Path) -> tuple[Counter, Counter]:
    """The acceptance checks after the query completed; returns the committed and the extra
    (aborted) values."""
    verify = start_verify(out)
    try:
        reads = read_out(spark, out)
    finally:
        verify_output, _ = verify.communicate(timeout=300)
    committed, uncommitted = reads["read_committed"], reads["read_uncommitted"]
    got = Counter(v for _, v in committed)
    missing = source.values - got
    twice = {v: n for v, n in got.items() if n > 1}
    foreign = set(got) - set(source.values)
    assert not missing and not twice and not foreign, (
        f"read_committed is not exactly the input: {sum(missing.values())} missing "
        f"(e.g. {sorted(missing)[:5]}), {len(twice)} values more than once "
        f"(e.g. {sorted(twice.items())[:5]}), {len(foreign)} not in the input "
        f"(e.g. {sorted(foreign)[:5]}); txn.json: {txn_state(chk)}")
    keys = {v: k for k, v in source.rows}
    assert all(k == keys[v] for k, v in committed), "a record lost its key"
    all_values = Counter(v for _, v in uncommitted)
    assert not got - all_values, \
        f"read_uncommitted returns fewer records than read_committed: {got - all_values}"
    extra = all_values - got
    assert set(extra) <= set(source.values), f"aborted records that are no input: {extra}"
    assert all(k == keys[v] for k, v in uncommitted)

    pid = producer_id(chk)
    open_parts = [p for p, s in scan_out(out, pid).items() if s.open_txn]
    assert not open_parts, f"partitions {open_parts} keep an open transaction of the query"
    offsets, commits = spark_log(chk)
    assert offsets == commits == set(range(len(offsets))), (offsets, commits)
    st = txn_state(chk)
    assert st is not None and st["state"] == "complete" and st["batch_id"] == max(commits), st
    assert verify.returncode == 0, \
        f"storage_core.tools verify {out} exited {verify.returncode}:\n{verify_output[-3000:]}"
    return got, extra


# ====================================================================== 1. crash points

def start_query(spark, source: Source, out: Path, chk: Path, crash_at: str | None = None,
                segment_min: int | None = None):
    w = (spark.readStream.format("kafkalog").option("path", str(source.root))
         .option("subscribe", "in").option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "200").load()
         .selectExpr("key", "value")
         .writeStream.format("kafkalog").option("path", str(out)).option("topic", "out")
         .option("numPartitions", str(OUT_PARTITIONS)).option("checkpointLocation", str(chk))
         .trigger(availableNow=True))
    if crash_at is not None:
        w = w.option("kafkalog.test.crashAt", crash_at)
    if segment_min is not None:
        w = w.option("stagedSegmentMinBytes", str(segment_min))
    return w.start()


def run_killed(spark, source: Source, out: Path, chk: Path, point: str,
               segment_min: int | None = None) -> None:
    """A run with ``kafkalog.test.crashAt=point``: the commit's process dies, the query fails.
    A run that failed on Spark's own start-up timeout (spark_jvm.CONNECT_BACK) before the kill
    is started again on its checkpoint: batch 0 cannot have been committed (its commit kills)."""
    for attempt in range(1, START_ATTEMPTS + 1):
        q = start_query(spark, source, out, chk, crash_at=point, segment_min=segment_min)
        try:
            with pytest.raises(StreamingQueryException) as failure:
                finished = q.awaitTermination(QUERY_TIMEOUT)
                pytest.fail(f"the query was not killed at {point} (awaitTermination: {finished})")
        finally:
            q.stop()
        if CONNECT_BACK not in str(failure.value) or attempt == START_ATTEMPTS:
            break
        time.sleep(RESTART_PAUSE)
    assert "Python worker exited unexpectedly" in str(failure.value), str(failure.value)[:2000]


def run_to_end(spark, source: Source, out: Path, chk: Path,
               segment_min: int | None = None) -> None:
    """The restart, without the fault, to the end (started again on its checkpoint after Spark's
    own start-up timeout, spark_jvm.CONNECT_BACK, as an operator would; the exactly-once checks
    after it hold whatever the number of restarts)."""
    for attempt in range(1, START_ATTEMPTS + 1):
        q = start_query(spark, source, out, chk, segment_min=segment_min)
        try:
            ended = q.awaitTermination(QUERY_TIMEOUT)
        except StreamingQueryException as e:
            if CONNECT_BACK not in str(e) or attempt == START_ATTEMPTS:
                raise
            time.sleep(RESTART_PAUSE)
            continue
        finally:
            q.stop()
        assert ended, "the restarted query did not end"
        break
    assert q.exception() is None


# point -> (txn.json state left, partitions left with an open transaction, batch 0 appended)
LEFT_BY_CRASH = {
    "ongoing": ("ongoing", [], False),
    "between_partitions": ("ongoing", [0], None),      # partition 0 only: some of batch 0
    "appended": ("ongoing", [0, 1, 2], True),
    "prepare_commit": ("prepare_commit", [0, 1, 2], True),
    "between_markers": ("prepare_commit", [1, 2], True),
    "complete": ("complete", [], True),
}


# the points where a staged file renamed in as a segment (stagedSegmentMinBytes=1) leaves
# something different on disk from a copied one: part of the batch, all of it before the markers
RENAMED_IN = ["between_partitions", "appended", "between_markers"]


@pytest.mark.parametrize("point,segment_min",
                         [(p, None) for p in CRASH_POINTS] + [(p, 1) for p in RENAMED_IN],
                         ids=[*CRASH_POINTS, *(f"{p}-renamed-in" for p in RENAMED_IN)])
def test_commit_killed_at(spark, source, tmp_path, point, segment_min):
    """The commit of micro-batch 0 kills its process at ``point`` (observed: the query fails,
    ``offsets/0`` written, ``commits/0`` not); the kill leaves the state ``point`` names; the
    restart on the same checkpoint, without the option, completes the query exactly once: an
    ``ongoing`` batch is aborted (its appended records stay, hidden from read_committed) and
    written again, a ``prepare_commit`` one is committed without appending it twice, a
    ``complete`` one is not appended again when Spark replays batch 0. ``-renamed-in``: the
    staged files become segments of their own (``Log.append_segment_file``) instead of being
    copied, before the kill and after it."""
    out, chk = tmp_path / "out", tmp_path / "chk"
    run_killed(spark, source, out, chk, point, segment_min)

    assert spark_log(chk) == ({0}, set())
    batch0 = source.values_below(planned_ends(chk, 0))
    assert len(batch0) == 3 * 66                       # maxOffsetsPerTrigger 200 over 3
    state, open_parts, appended_all = LEFT_BY_CRASH[point]
    st = txn_state(chk)
    assert (st["batch_id"], st["state"]) == (0, state), st
    assert st["partitions"] == [["out", p] for p in range(OUT_PARTITIONS)], st
    scan = scan_out(out, producer_id(chk))
    assert sorted(scan) == list(range(OUT_PARTITIONS))   # the topic was created whole
    assert [p for p, s in scan.items() if s.open_txn] == open_parts, (point, scan)
    appended = log_values(out, "read_uncommitted")
    assert set(appended) <= batch0 and max(appended.values(), default=1) == 1
    if appended_all is True:
        assert set(appended) == batch0
    elif appended_all is False:
        assert not appended
    else:                                            # between partitions: partition 0's share
        assert sum(appended.values()) == scan[0].data_records > 0
        assert scan[1].data_records == scan[2].data_records == 0
    committed_now = log_values(out, "read_committed")
    if point == "complete":
        assert set(committed_now) == batch0
    elif point == "between_markers":                 # only partition 0 has its COMMIT marker
        assert sum(committed_now.values()) == scan[0].data_records > 0
    else:
        assert not committed_now

    if segment_min is not None:                      # batch 0's staged files became segments
        assert all(s.segments > 1 for p, s in scan.items() if s.data_records), scan
    run_to_end(spark, source, out, chk, segment_min)
    _, extra = assert_exactly_once(spark, source, out, chk)
    # an aborted batch 0 left exactly its appended records, a committed one nothing
    assert extra == (appended if state == "ongoing" else Counter()), (point, extra)
    assert len(spark_log(chk)[1]) == 3                 # 66+66+66 per partition


@pytest.mark.parametrize("first", [
    "between_partitions",
    # leaves what test_commit_killed_at[between_markers] leaves (the same _finish dies at the
    # same place, called by the recovery instead of the commit): slow mode only
    pytest.param("prepare_commit", marks=slow)])
def test_restart_killed_while_finishing_the_interrupted_commit(spark, source, tmp_path, first):
    """Killed at ``first``, then the restart is killed in turn between the markers it writes
    to finish that transaction (ABORT for an ``ongoing`` one, COMMIT for a ``prepare_commit``
    one: ``between_markers`` is also a point of the recovery); a third run completes the query
    exactly once. After ``between_partitions`` this is a state no single kill leaves: txn.json
    still ``ongoing``, partition 0 aborted, partitions 1 and 2 without any record of the batch."""
    out, chk = tmp_path / "out", tmp_path / "chk"
    run_killed(spark, source, out, chk, first)
    before = txn_state(chk)
    run_killed(spark, source, out, chk, "between_markers")
    assert txn_state(chk) == before                  # the recovery died before recording
    scan = scan_out(out, producer_id(chk))
    opened = [p for p, s in scan.items() if s.open_txn]
    # partition 0 got its marker; partitions 1 and 2 still open if they had records
    if first == "between_partitions":
        assert opened == [] and scan[1].data_records == scan[2].data_records == 0, scan
    else:
        assert opened == [1, 2], scan
    run_to_end(spark, source, out, chk)
    _, extra = assert_exactly_once(spark, source, out, chk)
    assert (sum(extra.values()) > 0) == (first == "between_partitions"), extra


# the sink's own topic creation in a process that dies when the first partition directory is
# made (Log.open returned and closed it), as a commit killed inside _create_topics would
DIE_IN_CREATE_TOPICS = """
import os, signal, sys
from storage_core.log import Log
from kafka_log_sink.commit import SinkCoordinator
from kafka_log_sink.options import parse_sink_options
real_open = Log.open.__func__
def open_then_die(cls, *args, **kwargs):
    real_open(cls, *args, **kwargs).close()
    os.kill(os.getpid(), signal.SIGKILL)
Log.open = classmethod(open_then_die)
opts = parse_sink_options({"path": sys.argv[1], "topic": "out", "numPartitions": "3",
                           "checkpointLocation": sys.argv[2]})
SinkCoordinator(opts)._create_topics({"out"})
"""


def test_kill_while_creating_the_topic_keeps_num_partitions(spark, source, tmp_path):
    """``SinkCoordinator._create_topics`` makes the ``numPartitions`` directories of a new
    topic one by one in the first commit, before txn.json is written. Killed after the first
    one (the real method, in a process that SIGKILLs itself once the first directory exists),
    it must leave the full partition count visible: ``out-2`` (the highest first: a topic's
    partition count is its highest directory + 1), not ``out-0``, which would make every later
    batch hash keys over one partition for good (seen before commit 53704e6: all records in
    out-0). The query then creates out-0 and out-1, Kafka's 3 partitions, exactly once."""
    out, chk = tmp_path / "out", tmp_path / "chk"
    r = subprocess.run([sys.executable, "-c", DIE_IN_CREATE_TOPICS, str(out), str(chk)],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr[-3000:]
    assert sorted(d.name for d in out.glob("out-*")) == ["out-2"]
    run_to_end(spark, source, out, chk)
    assert_exactly_once(spark, source, out, chk)
    assert sorted(d.name for d in out.glob("out-*")) == ["out-0", "out-1", "out-2"]
    assert all(scan.data_records > 0 for scan in scan_out(out, producer_id(chk)).values())


# ====================================================================== 2. whole-job SIGKILL

def session_pids(sid: int) -> list[int]:
    """Live (non-zombie) processes of the session ``sid``."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            pids.append(int(name))
    return pids


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the job's process group, then every process left in its session, by pid, until
    none is alive (the PySpark daemons run in their own process groups)."""
    if proc.returncode is not None:
        return                          # swept and reaped already
    sid = proc.pid
    try:
        os.killpg(sid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 30
    while pids := session_pids(sid):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert time.monotonic() < deadline, f"processes {pids} of the job survive SIGKILL"
        time.sleep(0.01)
    proc.wait(timeout=30)


@dataclass
class Job:
    """One run of sink_job.py, with a watcher of its checkpoint (2 ms polls): when each
    ``offsets/<n>`` appeared and each change of txn.json, from the job's start (what was
    there before is ``pre``)."""

    proc: subprocess.Popen
    chk: Path
    err: Path
    t0: float = field(default_factory=time.monotonic)
    stdout: list[tuple[float, str]] = field(default_factory=list)
    offsets_seen: dict[int, float] = field(default_factory=dict)
    offsets_pre: set[int] = field(default_factory=set)
    txn_changes: list[tuple[float, int, str]] = field(default_factory=list)
    _last_txn: str | None = None

    @classmethod
    def start(cls, source: Source, out: Path, chk: Path, err: Path,
              segment_min: int | None = None) -> "Job":
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        extra = [] if segment_min is None else [str(segment_min)]
        with open(err, "ab") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(JOB), str(source.root), str(out), str(chk),
                 str(JOB_MAX_OFFSETS), *extra],
                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
                start_new_session=True)
        job = cls(proc, chk, err)
        job.offsets_pre = batch_ids(chk / "offsets")
        job._last_txn = job._txn_raw()
        threading.Thread(target=job._read_stdout, daemon=True).start()
        return job

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self.stdout.append((time.monotonic(), line.strip()))

    def _txn_raw(self) -> str | None:
        try:
            return (self.chk / "kafkalog-sink" / "txn.json").read_text()
        except FileNotFoundError:
            return None

    def poll(self) -> None:
        now = time.monotonic()
        for n in batch_ids(self.chk / "offsets") - self.offsets_seen.keys() - self.offsets_pre:
            self.offsets_seen[n] = now
        raw = self._txn_raw()
        if raw is not None and raw != self._last_txn:
            self._last_txn = raw
            try:
                st = json.loads(raw)
            except ValueError:
                return
            self.txn_changes.append((now, st["batch_id"], st["state"]))

    def running(self) -> bool:
        """Not exited; an exited job is left unreaped (WNOWAIT) until ``kill_session`` has
        swept its session, so its pid, the session id, cannot be reused meanwhile."""
        if self.proc.returncode is not None:
            return False
        return os.waitid(os.P_PID, self.proc.pid,
                         os.WEXITED | os.WNOHANG | os.WNOWAIT) is None

    def timings(self) -> str:
        """The job's own ``ready``/``done`` lines (seconds since its start)."""
        return ", ".join(line for _, line in self.stdout) or "no output"

    def wait_until(self, pred, timeout: float = JOB_TIMEOUT) -> bool:
        """Poll until ``pred()`` holds (True) or the job exited (False)."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if pred():
                return True
            if not self.running():
                return False
            assert time.monotonic() < deadline, f"the job made no progress in {timeout}s"
            time.sleep(0.002)

    def committing(self, batch: int) -> bool:
        return any(b == batch and s == "ongoing" for _, b, s in self.txn_changes)

    def commit_durations(self) -> list[float]:
        """``ongoing`` to ``complete`` of each commit this run made (as polled)."""
        begun, out = {}, []
        for t, b, s in self.txn_changes:
            if s == "ongoing":
                begun[b] = t
            elif s == "complete" and b in begun:
                out.append(t - begun.pop(b))
        return out

    def batch_periods(self) -> list[float]:
        """Intervals between consecutive ``offsets/<n>`` appearances (batch 0 -> 1 left out:
        the first batch starts the Python workers)."""
        seen = self.offsets_seen
        return [seen[n] - seen[n - 1] for n in seen if n - 1 in seen and n - 1 > min(seen)]

    def finish(self) -> None:
        """Watch the job to its own end (measures); it must succeed. Nothing of it may linger
        afterwards (a PySpark daemon outliving its JVM)."""
        self.wait_until(lambda: False)
        kill_session(self.proc)
        time.sleep(0.05)                # the last stdout line
        lines = [line for _, line in self.stdout]
        assert self.proc.returncode == 0 and any(line.startswith("done") for line in lines), (
            f"sink_job.py exited {self.proc.returncode}, stdout {lines}, stderr:\n"
            f"{self.err.read_text(errors='replace')[-4000:]}")


# what every run so far measured: the estimates for a run that has not measured its own yet
COMMIT_DURATIONS: list[float] = [0.2]
BATCH_PERIODS: list[float] = [1.0]
HITS: list[dict] = []


def phase_after_kill(job: Job, chk: Path, out: Path) -> str:
    """Where the job was when it died, read back from the disk."""
    offsets, commits = spark_log(chk)
    if not offsets:
        return "start-up (no batch planned)"
    p = max(offsets)
    if p in commits:
        return "between batches (planning)"
    st = txn_state(chk)
    if st is None or st["batch_id"] < p:
        return "executors: read, encode, stage (batch planned, no commit yet)"
    if not job.txn_changes:
        return "restart: replaying the interrupted batch, before its commit"
    if st["batch_id"] > p:
        return f"unexpected: txn.json batch {st['batch_id']} beyond Spark's offsets {p}"
    n = len(st["partitions"])
    opened = sum(s.open_txn for s in scan_out(out, int(st["producer_id"])).values())
    if st["state"] == "aborted":
        return "commit: after aborting an interrupted transaction"
    if st["state"] == "ongoing":
        if opened == 0:
            return "commit: ongoing, nothing appended yet"
        return "commit: between partitions" if opened < n else "commit: all appended"
    if st["state"] == "prepare_commit":
        if opened == n:
            return "commit: prepare_commit, no marker yet"
        return "commit: between markers" if opened else "commit: markers written"
    return "commit complete, Spark's commit log not written"


def kill_run(job: Job, rng: random.Random, mode: str, first: int) -> dict:
    """Kill ``job`` at a random moment chosen by ``mode``, at batch ``first`` (the first batch
    this run plans or replays) or later; returns what was hit."""
    k = first + rng.randrange(0, max(1, JOB_BATCHES - first))
    u = rng.random()
    if mode == "cycle":
        k = max(k, first + 1)               # planned anew by this run
        if not job.wait_until(lambda: k in job.offsets_seen):
            return {"mode": mode, "batch": k, "phase": "finished before the kill"}
        if k - 1 in job.offsets_seen and k - 1 > min(job.offsets_seen):
            period = job.offsets_seen[k] - job.offsets_seen[k - 1]
        else:       # the run's first batch also starts the Python workers: not a period
            period = statistics.median(BATCH_PERIODS)
        delay = u * period
    else:
        if not job.wait_until(lambda: job.committing(k)):
            return {"mode": mode, "batch": k, "phase": "finished before the kill"}
        own = job.commit_durations()
        delay = u * statistics.median(own or COMMIT_DURATIONS)
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline:
        job.poll()
        time.sleep(0.001)
    finished = not job.running()
    at = time.monotonic() - job.t0
    kill_session(job.proc)
    record_measures(job)
    return {"mode": mode, "batch": k, "delay": round(delay, 4), "at": round(at, 2),
            "phase": "finished before the kill" if finished else None}


def record_measures(job: Job) -> None:
    COMMIT_DURATIONS.extend(job.commit_durations())
    BATCH_PERIODS.extend(job.batch_periods())


@dataclass
class Trial:
    out: Path
    chk: Path
    hits: list[dict]
    runs: list[str]             # timings of every run of sink_job.py


def run_trial(source: Source, root: Path, trial: int) -> Trial:
    """Kill runs of sink_job.py on one checkpoint (1, in the slow mode 1-3), then a run to
    its end."""
    rng = random.Random(SEED * 1000 + trial)
    root.mkdir(parents=True)
    out, chk, err = root / "out", root / "chk", root / "job.stderr"
    kills = rng.choice([1, 1, 2, 3]) if SLOW else 1
    # odd trials: every staged file renamed into the logs as a segment (Log.append_segment_file),
    # even ones: copied onto the active segment; the same for every run of the trial's query
    segment_min = 1 if trial % 2 else None
    result = Trial(out, chk, [], [])
    for g in range(kills):
        first = len(spark_log(chk)[1])          # batches already committed by Spark
        if first >= JOB_BATCHES:
            break                               # a kill came too late: nothing left to do
        job = Job.start(source, out, chk, err, segment_min)
        try:
            hit = kill_run(job, rng, "cycle" if (trial + g) % 2 == 0 else "commit", first)
        finally:
            kill_session(job.proc)
        if hit["phase"] is None:
            hit["phase"] = phase_after_kill(job, chk, out)
        else:                                   # it ended by itself: it must have succeeded
            assert job.proc.returncode == 0, (
                f"sink_job.py exited {job.proc.returncode}, stderr:\n"
                f"{err.read_text(errors='replace')[-4000:]}")
        hit["txn"] = (lambda s: s and (s["batch_id"], s["state"]))(txn_state(chk))
        hit["run"] = g
        result.hits.append(hit)
        result.runs.append(f"killed at {hit['at']}s ({job.timings()})" if "at" in hit
                           else f"not killed ({job.timings()})")
    job = Job.start(source, out, chk, err, segment_min)
    try:
        job.finish()
    finally:
        kill_session(job.proc)
    record_measures(job)
    result.runs.append(f"to the end: {job.timings()}")
    return result


TRIAL_FUTURES: dict[int, Future] = {}


@pytest.fixture(scope="module", autouse=True)
def random_trials_in_background(request, source, tmp_path_factory):
    """Starts every random trial selected for this run, ``PARALLEL`` at a time, in threads,
    as soon as the module starts: they overlap the crash-point tests (a trial is two JVM starts
    or more, mostly class loading and Python worker start-up). Each trial test takes its own
    trial's outcome; the module waits for all of them at its end."""
    wanted = sorted(item.callspec.params["trial"] for item in request.session.items
                    if item.module is request.module and item.originalname ==
                    "test_random_sigkill_of_the_whole_job")
    if not wanted:
        yield
        return
    root = tmp_path_factory.mktemp("sink-trials")
    pool = ThreadPoolExecutor(PARALLEL)
    for t in wanted:
        TRIAL_FUTURES[t] = pool.submit(run_trial, source, root / f"trial-{t}", t)
    try:
        yield
    finally:
        pool.shutdown(wait=True)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_random_sigkill_of_the_whole_job(spark, source, trial):
    result = TRIAL_FUTURES[trial].result()
    for hit, timing in zip(result.hits, result.runs):
        print(f"trial {trial} run {hit['run']}: {hit['phase']} ({hit['mode']} batch "
              f"{hit['batch']}, delay {hit.get('delay')}s, txn.json {hit['txn']}); {timing}")
    print(f"trial {trial} {result.runs[-1]}")
    HITS.extend(result.hits)
    got, extra = assert_exactly_once(spark, source, result.out, result.chk)
    print(f"trial {trial}: exactly once, {sum(got.values())} committed, "
          f"{sum(extra.values())} aborted records in the log")


@slow
def test_random_kills_hit_the_write_and_the_commit():
    """Coverage of the random trials (slow mode, after them): at least one kill while the
    executors encoded a batch and at least one inside the driver's commit."""
    phases = Counter(h["phase"] for h in HITS)
    print("phases hit:", dict(phases))
    assert len(HITS) >= TRIALS
    assert any(p.startswith("executors") for p in phases), phases
    assert any(p.startswith("commit:") for p in phases), phases

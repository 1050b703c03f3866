"""A streaming Spark query reading a partition while a writer process appends, rolls, truncates,
deletes by retention and compacts it (issue 16's concurrency soak, the Spark side; the storage
side is tests/storage/test_readers_beside_writer.py, whose writer process this test reuses)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[1] / "storage" / "reader_writer_runner.py"
_spec = importlib.util.spec_from_file_location("kafkalog_reader_writer_runner_s", RUNNER)
rwr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rwr)

ROUNDS = 1500
QUERY_TIMEOUT = 600


def test_streaming_query_beside_a_writer_that_truncates_compacts_and_deletes(spark, tmp_path: Path) -> None:
    """The query (failOnDataLoss=false: retention and truncation remove offsets it has not read)
    runs micro-batches every 200 ms while the writer works, then reads what is left. It never
    fails; no record (offset and value) comes twice; every value is the one written at its
    offset; and along the stream (batch by batch, offsets in order) the generations never go
    back: once the query has returned a record written after a truncation it never returns one
    that the truncation removed."""
    root, chk = tmp_path / "data", tmp_path / "chk"
    rwr.Log.open(root / rwr.TOPIC_DIR, rwr.config()).close()     # the topic exists, empty
    batches: dict[int, list[tuple[int, bytes]]] = {}

    def sink(df, batch_id: int) -> None:
        batches[batch_id] = sorted((r[0], bytes(r[1])) for r in df.select("offset", "value").collect())

    q = (spark.readStream.format("kafkalog").option("path", str(root)).option("subscribe", "soak")
         .option("startingOffsets", "earliest").option("failOnDataLoss", "false").load()
         .writeStream.foreachBatch(sink).option("checkpointLocation", str(chk))
         .trigger(processingTime="200 milliseconds").start())
    deadline = time.monotonic() + QUERY_TIMEOUT
    while q.lastProgress is None:                     # the query runs before the writer starts
        assert q.exception() is None and time.monotonic() < deadline, q.exception()
        time.sleep(0.05)
    writer = subprocess.Popen([sys.executable, str(RUNNER), "write", str(root), str(ROUNDS), "3", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = writer.communicate(timeout=QUERY_TIMEOUT)
        assert writer.returncode == 0, err[-4000:]
        q.processAllAvailable()
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    assert int(dict(kv.split("=") for kv in out.split())["truncations"]) > 5, out
    seen: set[tuple[int, bytes]] = set()
    max_generation = 0
    rows = 0
    generations: set[int] = set()
    for batch_id in sorted(batches):
        offsets = [o for o, _ in batches[batch_id]]
        assert len(set(offsets)) == len(offsets), f"batch {batch_id} holds an offset twice"
        for offset, value in batches[batch_id]:
            generation, at, _key = (int(x) for x in value.split(b":"))
            assert at == offset, f"offset {offset} holds the value written at {at}"
            assert (offset, value) not in seen, f"record {offset} {value!r} read twice"
            assert generation >= max_generation, (
                f"batch {batch_id}: offset {offset} of generation {generation} after one of "
                f"{max_generation}: a record removed by a truncation")
            seen.add((offset, value))
            max_generation = generation
            generations.add(generation)
            rows += 1
    # not vacuous: the query read while the writer ran, records written both before and after
    # a truncation (what the order check bites on); how many it caught depends on the machine's
    # load (467 under a full suite on two cores), so no count of rows is asked for
    assert len(batches) > 3 and len(generations) >= 2, (len(batches), rows, sorted(generations))

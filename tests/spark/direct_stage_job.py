"""The sink's write path without Spark, in its own process, for the SIGKILL trials of
tests/spark/test_staging_file.py: micro-batches 0..BATCHES-1, each staged by two "tasks" in
turn (``stage_all``, big files sent to the disk directly: the direct chunk is made 64 KiB so a
few hundred KB per partition go direct) and committed by the driver's ``SinkCoordinator``
into topic ``out`` (3 partitions) under OUT, checkpointed in CHK.

Restarted after a kill, it does what a restarted Spark query does: it runs the last batch it
had started again (same batch id, new staging), then the rest. Batch b's rows are valued
``b<b>-t<task>-<i>``. Prints ``direct <n>`` (staged files that went direct) and ``done``.

    python direct_stage_job.py OUT CHK BATCHES ROWS_PER_TASK
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    out, chk, batches, rows = Path(argv[1]), Path(argv[2]), int(argv[3]), int(argv[4])
    sys.path.insert(0, str(REPO))
    import pyarrow as pa

    from kafka_log_sink import staging_file
    from kafka_log_sink.commit import load_producer
    from kafka_log_sink.options import parse_sink_options
    from kafka_log_sink.sink import KafkaLogStreamWriter

    staging_file.DIRECT_CHUNK = 64 << 10
    opts = parse_sink_options({"path": str(out), "topic": "out", "numPartitions": "3",
                               "checkpointLocation": str(chk), "batch.size": "16384",
                               "stagedSegmentMinBytes": "100000"})
    writer = KafkaLogStreamWriter(opts, load_producer(opts))     # what Spark is handed
    try:
        first = json.loads((chk / "kafkalog-sink" / "txn.json").read_text())["batch_id"]
    except FileNotFoundError:
        first = 0
    direct = 0
    for b in range(first, batches):
        messages = []
        for task in range(2):
            values = [f"b{b}-t{task}-{i}".encode() + b"." * 90 for i in range(rows)]
            table = pa.table({"key": pa.array([b"k%d" % (i % 97) for i in range(rows)]),
                              "value": pa.array(values)})
            messages.append(writer.write(iter(table.to_batches(2000))))
        direct += sum(r.crcs_checked for m in messages for r in m.runs)
        writer.commit(messages, b)
    print(f"direct {direct}", flush=True)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

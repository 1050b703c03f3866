"""The sink's driver commit without Spark, in its own process under a low open-file limit, for
tests/spark/test_sink_open_files.py: BATCHES micro-batches of two "tasks", each writing ROWS rows
to every one of PARTITIONS partitions of topic ``out`` under OUT (a ``partition`` column),
committed by the driver's ``SinkCoordinator``. The limit is set by the test (``setrlimit`` before
exec). Prints ``nofile <soft> <hard>`` after the commits and ``done``.

    python many_partitions_job.py OUT CHK PARTITIONS BATCHES ROWS
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    out, chk, partitions, batches, rows = Path(argv[1]), Path(argv[2]), int(argv[3]), int(argv[4]), int(argv[5])
    sys.path.insert(0, str(REPO))
    import numpy as np
    import pyarrow as pa

    from kafka_log_sink.commit import load_producer
    from kafka_log_sink.options import parse_sink_options
    from kafka_log_sink.sink import KafkaLogStreamWriter

    opts = parse_sink_options({"path": str(out), "topic": "out", "numPartitions": str(partitions),
                               "checkpointLocation": str(chk)})
    writer = KafkaLogStreamWriter(opts, load_producer(opts))     # what Spark is handed
    for b in range(batches):
        messages = []
        for task in range(2):
            n = rows * partitions
            table = pa.table({"key": pa.array([b"k%d" % i for i in range(n)]),
                              "value": pa.array([b"b%d-t%d-%d" % (b, task, i) for i in range(n)]),
                              "partition": pa.array((np.arange(n) % partitions).astype(np.int32))})
            messages.append(writer.write(iter(table.to_batches(10_000))))
        writer.commit(messages, b)
    print("nofile %d %d" % resource.getrlimit(resource.RLIMIT_NOFILE), flush=True)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

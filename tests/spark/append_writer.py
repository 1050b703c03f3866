"""A writer in its own process, for tests/spark/test_source_streaming.py: opens one partition
directory for writing (taking its writer lock), appends ROUNDS appends of PER_ROUND records
valued ``PREFIX<n>`` (n counting from 0) with PAUSE seconds between them, prints ``appended``
and keeps the log open, lock held, until a line (or EOF) arrives on stdin.

    python append_writer.py PARTITION_DIR ROUNDS PER_ROUND PAUSE PREFIX
"""

from __future__ import annotations

import sys
import time

import pyarrow as pa

from storage_core.log import Log


def main(argv: list[str]) -> int:
    path, rounds, per_round, pause, prefix = (argv[1], int(argv[2]), int(argv[3]),
                                              float(argv[4]), argv[5])
    with Log.open(path) as log:
        print(f"locked {log.log_end_offset}", flush=True)
        n = 0
        for _ in range(rounds):
            time.sleep(pause)
            log.append(pa.table({"value": pa.array(
                [f"{prefix}{n + i}".encode() for i in range(per_round)], pa.binary())}))
            n += per_round
        print(f"appended {log.log_end_offset}", flush=True)
        sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

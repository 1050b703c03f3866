"""Child process of the tiering crash tests: appends to a tiered partition and runs the
RemoteLogManager's copy and expiry passes again and again, until it is killed (SIGKILL).

    python tier_runner.py <json: {"dir": ..., "rsm": {...}, "mode": "copy" | "delete", "seed": n}>

``copy``: append a few batches (rolling small segments), then a copy pass, in a loop.
``delete``: as ``copy``, plus an expiry pass with ``retention.bytes`` that keeps deleting the
oldest remote segments. Prints ``pass <n>`` after each pass (the parent waits for the first).

Fault injection, so that a random kill often lands inside a deletion (a local delete takes
microseconds): in ``delete`` mode the store pauses ``SLOW_DELETE_S`` before and after deleting a
segment's objects, as a slow object store would."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pyarrow as pa

from storage_core.config import LogConfig
from storage_core.log import Log
from storage_core.remote import PyArrowRemoteStorageManager, RemoteLogManager, TopicBasedRemoteLogMetadataManager

RECORDS_PER_BATCH = 5
VALUE = b"v" * 60
SLOW_DELETE_S = 0.03


class SlowDeleteStorageManager(PyArrowRemoteStorageManager):
    def delete_log_segment_data(self, metadata) -> None:  # type: ignore[no-untyped-def]
        time.sleep(SLOW_DELETE_S)
        super().delete_log_segment_data(metadata)
        time.sleep(SLOW_DELETE_S)


def tier_config(mode: str) -> LogConfig:
    # segments of ~4 batches; delete mode: both tiers bounded to ~3 segments, so that expiry
    # deletes from the first passes on
    return LogConfig(segment_bytes=2000, remote_storage_enable=True, retention_ms=-1,
                     retention_bytes=6000 if mode == "delete" else -1,
                     local_retention_bytes=2000 if mode == "delete" else 4000, fsync="always")


def open_all(spec: dict, *, runner: bool = False) -> tuple[Log, RemoteLogManager]:
    root = Path(spec["dir"])
    log = Log.open(root / "data" / "tiered-0", tier_config(spec["mode"]))
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(root / "data"),
                                               "remote.log.metadata.topic.num.partitions": "2"})
    rsm_class = SlowDeleteStorageManager if runner and spec["mode"] == "delete" else PyArrowRemoteStorageManager
    return log, RemoteLogManager(rsm_class(spec["rsm"]), rlmm)


def append_batches(log: Log, n: int) -> None:
    for _ in range(n):
        start = log.log_end_offset
        values = [VALUE + str(start + i).encode() for i in range(RECORDS_PER_BATCH)]
        log.append(pa.table({"value": pa.array(values, pa.binary())}))


def main() -> None:
    spec = json.loads(sys.argv[1])
    log, rlm = open_all(spec, runner=True)
    n = 0
    while True:
        append_batches(log, 3)
        rlm.copy_log_segments_to_remote(log)
        if spec["mode"] == "delete":
            rlm.cleanup_expired_remote_log_segments(log)
        log.delete_old_segments()
        n += 1
        print("pass", n, flush=True)


if __name__ == "__main__":
    main()

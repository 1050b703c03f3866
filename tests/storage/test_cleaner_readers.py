"""Readers during retention and compaction (kafka_format.md §15; the reader side of
``Log.replace_segments`` and of retention's ``.deleted`` renames).

A writer thread appends to a ``compact,delete`` partition with small segments while a
``LogCleaner`` runs its background thread on it: compaction swaps cleaned segments in and
renames the old ones ``.deleted``, and the same thread's retention (``retention.bytes``)
deletes the oldest segments and moves the log start offset. Reader processes
(``cleaner_crash_runner.py read``) re-open the directory read-only over and over and fetch from
where they were to the log end offset. They must never fail, never see an offset twice or out of
order, and read only values that are the record written at that offset; they skip forward only
where the log start offset moved past them (compacted-away offsets are simply absent).

A few seconds by default; longer with ``KAFKALOG_SLOW=1``.
"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from storage_core.checkpoint import TopicPartition
from storage_core.cleaner import LogCleaner
from storage_core.config import CleanerConfig, LogConfig
from storage_core.log import Log

RUNNER = Path(__file__).resolve().with_name("cleaner_crash_runner.py")
_spec = importlib.util.spec_from_file_location("kafkalog_cleaner_crash_runner_r", RUNNER)
ccr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ccr)

SLOW = os.environ.get("KAFKALOG_SLOW") == "1"
SECONDS = 25.0 if SLOW else 6.0
READERS = 2


@pytest.mark.parametrize("file_delete_delay_ms", [0, 200])
def test_readers_never_fail_during_retention_and_compaction(tmp_path: Path, file_delete_delay_ms: int) -> None:
    """Readers in other processes while a writer appends, retention deletes and the cleaner
    compacts (``file.delete.delay.ms`` 0: files removed at once; 200: renamed, removed later)."""
    config = LogConfig(segment_bytes=8 << 10, segment_index_bytes=4 << 10, index_interval_bytes=1024,
                       cleanup_policy="compact,delete", retention_bytes=32 << 10, retention_ms=-1,
                       min_cleanable_dirty_ratio=0.2, file_delete_delay_ms=file_delete_delay_ms)
    part = tmp_path / ccr.CHURN_TOPIC_DIR
    log = Log.open(part, config)
    tp = TopicPartition(log.topic, log.partition)
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=2 << 20, backoff_ms=5), [tmp_path], {tp: log})
    readers = [subprocess.Popen([sys.executable, str(RUNNER), "read", str(tmp_path), str(SECONDS)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(READERS)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        rng = random.Random(5)
        try:
            while not stop.is_set():
                first = log.log_end_offset
                n = rng.randint(1, 20)
                keys = [rng.randrange(400) for _ in range(n)]
                offsets = list(range(first, first + n))
                dead = [o for o in offsets if rng.random() < 0.02]
                info = log.append(ccr.records(keys, offsets, dead), compression=rng.choice(["none", "lz4"]))
                assert info.first_offset == first
                time.sleep(0.0005)
        except BaseException as e:          # noqa: BLE001 - reported by the test
            errors.append(e)

    writer = threading.Thread(target=write, name="writer")
    writer.start()
    cleaner.start()
    try:
        results = [r.communicate(timeout=SECONDS + 120) for r in readers]
    finally:
        stop.set()
        writer.join(30)
        cleaner.shutdown()
    try:
        assert not errors, f"writer failed: {errors[0]!r}"
        for r, (out, err) in zip(readers, results):
            assert r.returncode == 0, f"reader failed:\n{err[-4000:]}"
            _, seen, opens = out.split()
            assert int(seen) > 0 and int(opens) > 1, out
        # the churn really happened: segments compacted and deleted under the readers
        assert cleaner.cleaner_manager.all_cleaner_checkpoints().get(tp, 0) > 0, "nothing was compacted"
        assert log.log_start_offset > 0, "retention deleted nothing"
        assert cleaner.dead_thread_count == 0
        assert cleaner.uncleanable_partitions_count(tmp_path) == 0
    finally:
        log.close()

"""Topics for the read tests of issue 20, built with the engine: the same records written to a
plain local data directory (the reference every remote query is compared with) and to a tiered
partition (``Log`` + ``RemoteLogManager`` copying rolled segments to a store, local retention
deleting what was copied), optionally made remote-only by deleting its local directory entirely.

Each partition holds ``batches`` batches of ``per_batch`` records with timestamps
``T0 + offset`` (time travel has something to find), and, with ``txn=True``, a transaction of
5 records that is aborted and one that is committed in its first segments (read_committed over
a remote ``.txnindex``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa

from storage_core.config import LogConfig
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.log import Log
from storage_core.remote import PyArrowRemoteStorageManager, RemoteLogManager, TopicBasedRemoteLogMetadataManager

T0 = 1_700_000_000_000
PID = 7001


def _append(log: Log, n: int) -> None:
    start = log.log_end_offset
    log.append(pa.table({
        "key": pa.array([f"k{(start + i) % 7}".encode() for i in range(n)], pa.binary()),
        "value": pa.array([f"v{start + i}".encode() * 4 for i in range(n)], pa.binary()),
        "timestamp": pa.array([T0 + start + i for i in range(n)], pa.int64())}))


def _txn(log: Log, n: int, seq: int, end: str) -> None:
    start = log.log_end_offset
    records = [RecordInput(f"t{start + i}".encode(), None, T0 + start + i) for i in range(n)]
    log.append_raw(build_batch(records, producer_id=PID, producer_epoch=0, base_sequence=seq, transactional=True))
    log.append_end_txn_marker(PID, 0, end, 0, T0 + log.log_end_offset)


def write(log: Log, batches: int, per_batch: int, txn: bool) -> None:
    for i in range(batches):
        if txn and i == 1:
            _txn(log, 5, 0, "ABORT")
        if txn and i == 2:
            _txn(log, 5, 5, "COMMIT")
        _append(log, per_batch)


def build(root: Path, topic: str, partitions: int, batches: int, per_batch: int, store: dict[str, str], *,
          segment_bytes: int = 4096, txn: bool = False, remote_only: bool = False,
          tail_batches: int = 0) -> dict[str, object]:
    """``root/local`` (plain) and ``root/tiered`` (tiered to ``store``: the storage manager's
    settings), then ``tail_batches`` more batches appended to both (the local tier of the tiered
    one; copied too when ``remote_only``, whose local directory then goes). Returns the
    per-partition local log start and remote segment counts."""
    config = LogConfig(segment_bytes=segment_bytes)
    tiered_config = LogConfig(segment_bytes=segment_bytes, remote_storage_enable=True, local_retention_bytes=1)
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(root / "rlmm"),
                                               "remote.log.metadata.topic.num.partitions": "2"})
    rlm = RemoteLogManager(PyArrowRemoteStorageManager(store), rlmm)
    out: dict[str, object] = {}
    try:
        for p in range(partitions):
            with Log.open(root / "local" / f"{topic}-{p}", config) as log:
                write(log, batches, per_batch, txn)
                write(log, tail_batches, per_batch, False)
            with Log.open(root / "tiered" / f"{topic}-{p}", tiered_config) as log:
                write(log, batches, per_batch, txn)
                log.roll()
                rlm.copy_log_segments_to_remote(log)
                log.delete_old_segments()
                log.delete_expired_files(now_ms=1 << 62)
                write(log, tail_batches, per_batch, False)
                if remote_only:                    # everything goes to the store
                    log.roll()
                    rlm.copy_log_segments_to_remote(log)
                out[f"{topic}-{p}"] = {"local_start": log.log_start_offset, "end": log.log_end_offset,
                                       "remote_segments": len(rlm.remote_log_segments(log))}
                # the local copy shares the topic id, so checkpoints move between the two
                with Log.open(root / "local" / f"{topic}-{p}", config) as plain:
                    assert log.topic_id is not None
                    if plain.topic_id is None:
                        plain.assign_topic_id(log.topic_id)
    finally:
        rlm.close()
    if remote_only:
        shutil.rmtree(root / "tiered")
        shutil.rmtree(root / "rlmm")
    return out

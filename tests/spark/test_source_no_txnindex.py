"""``isolationLevel=read_committed`` on a partition whose ``.txnindex`` files are gone (a copy
restored from its ``.log`` files; issue 16, finding 8): the source must not return the records
of aborted transactions as if committed. The reader takes the aborts from the transaction
markers, as recovery rebuilds the index."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

from storage_core.config import LogConfig
from storage_core.format.control import ControlRecordType
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.log import Log


def _txn_batch(pid: int, seq: int, tag: str) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([RecordInput(f"{tag}-{i}".encode(), None, now) for i in range(2)],
                       producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


def test_read_committed_without_txnindex(spark, tmp_path: Path) -> None:
    root = tmp_path / "data"
    with Log.open(root / "tx-0", LogConfig(segment_bytes=500)) as log:
        log.append(pa.table({"value": [b"plain-0"]}))
        log.append_raw(_txn_batch(1, 0, "aborted"))
        log.append_raw(_txn_batch(2, 0, "committed"))
        log.roll()
        log.append_raw(_txn_batch(1, 2, "aborted-more"))
        log.append_end_txn_marker(2, 0, ControlRecordType.COMMIT, 0)
        log.roll()
        log.append(pa.table({"value": [b"plain-1"]}))
        log.append_end_txn_marker(1, 0, ControlRecordType.ABORT, 0)
    txnindex = list((root / "tx-0").glob("*.txnindex"))
    assert txnindex and any(p.stat().st_size for p in txnindex)
    for p in txnindex:
        p.unlink()
    df = (spark.read.format("kafkalog").option("path", str(root)).option("subscribe", "tx")
          .option("isolationLevel", "read_committed").load())
    values = sorted(bytes(r.value) for r in df.select("value").collect())
    assert values == [b"committed-0", b"committed-1", b"plain-0", b"plain-1"]
    assert not list((root / "tx-0").glob("*.txnindex"))

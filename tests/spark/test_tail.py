"""The driver's incremental view of a data directory (kafka_log_source/tail.py) agrees with a
fresh read-only open of every partition after every kind of change a writer makes: appends,
rolls, truncations, deleted segments, a moved log start, open and decided transactions, new
partitions. It backs the streaming source's latestOffset, which an idle query calls many times
a second [spark_kafka_test_checklist §5: "new partitions ... discovered"; §6: "latest offset
stops at the LSO"]."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from kafka_log_source import catalog
from kafka_log_source.options import Subscribe
from kafka_log_source.tail import DataDirView
from storage_core.config import LogConfig
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.log import Log

CFG = LogConfig(segment_bytes=250)


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"value": [b"v%06d" % i for i in range(start, start + n)]})


def txn(pid: int, seq: int, n: int = 2) -> bytes:
    return build_batch([RecordInput(b"t%d" % i, None, 1_700_000_000_000) for i in range(n)],
                       producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


def assert_agrees(view: DataDirView, root: Path, isolation: str) -> None:
    got = view.infos()
    want = {tp: catalog.partition_info(p, isolation)
            for tp, p in catalog.assigned(Subscribe(("t",)), root).items()}
    assert got == want


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_view_follows_every_change(tmp_path: Path, isolation: str) -> None:
    root = tmp_path
    view = DataDirView(root, Subscribe(("t",)), isolation == "read_committed")
    assert view.infos() == {}
    with Log.open(root / "t-0", CFG) as log:
        log.append(rows(3))
        assert_agrees(view, root, isolation)                    # a new partition
        log.append(rows(2, 3))
        assert_agrees(view, root, isolation)                    # an append, same segment
        for i in range(6):
            log.append(rows(4, 5 + 4 * i))                      # rolls
            assert_agrees(view, root, isolation)
        assert len(log.segments) > 3
        log.append_raw(txn(7, 0))                               # an open transaction
        assert_agrees(view, root, isolation)
        log.append(rows(2, 100))
        assert_agrees(view, root, isolation)                    # LSO stays at the txn start
        log.append_end_txn_marker(7, 0, "COMMIT", 0)
        assert_agrees(view, root, isolation)                    # decided: LSO = LEO
        log.truncate_to(log.log_end_offset - 3)
        assert_agrees(view, root, isolation)                    # a truncation
        log.delete_records_before(log.segments[2].base_offset + 1)
        assert_agrees(view, root, isolation)                    # deleted segments, moved start
    with Log.open(root / "t-1", CFG) as log:
        log.append(rows(1))
    assert_agrees(view, root, isolation)
    with Log.open(root / "t-0", CFG) as log:                    # a restarted writer
        log.append(rows(1, 500))
    assert_agrees(view, root, isolation)
    big = LogConfig(segment_bytes=64 << 20)
    with Log.open(root / "t-0", big) as log:                    # a segment larger than one scan
        for _ in range(12):
            log.append(pa.table({"value": [b"x" * 1000] * 1000}))
        log.roll()
        log.append(rows(1))
    assert_agrees(view, root, isolation)


def test_a_fifo_in_the_active_segments_place_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A FIFO put where the active segment was (a stranger's file, a hostile directory): the
    view's next look raises UnsafeFileError naming it. A plain open of a FIFO for reading
    waits for a writer, which would hang the driver's latestOffset for good."""
    import os

    from fifo_guard import promptly
    from storage_core.errors import UnsafeFileError

    view = DataDirView(tmp_path, Subscribe(("t",)), False)
    with Log.open(tmp_path / "t-0", CFG) as log:
        log.append(rows(3))
    assert view.infos()
    active = tmp_path / "t-0" / "00000000000000000000.log"
    active.unlink()
    os.mkfifo(active)
    with pytest.raises(UnsafeFileError) as raised:
        promptly(view.infos, active, what="the view's look at a FIFO")
    assert str(active) in str(raised.value) and "FIFO" in str(raised.value)

"""Producer state wired into the Log: idempotence, transactions, the last stable offset,
read_committed and the ``.txnindex``, through the real Log on real files.

Mirrors Kafka's ``UnifiedLogTest`` (testDuplicateAppends, testOldProducerEpoch,
testNonSequentialAppend, testAbortedTransactionSpanningMultipleSegments,
testFirstUnstableOffsetWithTransactionalData, testLastStableOffsetDoesNotExceedLogStartOffset,
testReadCommittedWithConcurrentHighWatermarkUpdates, testTransactionIndexUpdated,
testRecoverTransactionIndex, testFullTransactionIndexRecovery), ``LogSegmentTest``
(testRecoverTransactionIndex, testCollectAbortedTransactions) and the consumer's
``FetcherTest.testReadCommittedAbortMarkerWithNoData`` / ``CompletedFetch`` filtering rule.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_core.checkpoint import RECOVERY_POINT_CHECKPOINT
from storage_core.config import LogConfig
from storage_core.errors import CorruptRecordError
from storage_core.format import ControlRecordType, EndTransactionMarker, end_transaction_marker_batch
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.index import AbortedTxn
from storage_core.log import Log
from storage_core.producer import InvalidProducerEpochError, OutOfOrderSequenceError

SMALL = LogConfig.from_properties({"segment.bytes": "700", "index.interval.bytes": "100"})


def batch(pid: int, seq: int, n: int, *, epoch: int = 0, transactional: bool = False,
          tag: str = "v") -> bytes:
    # recent timestamps: a producer idle for producer.id.expiration.ms (by its last batch's
    # timestamp) is dropped when the state is reloaded
    now = int(time.time() * 1000)
    return build_batch([RecordInput(f"{tag}-{pid}-{seq + i}".encode(), None, now + i)
                        for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=transactional)


def committed_values(log: Log) -> list[bytes]:
    t = log.read(log.log_start_offset, max_bytes=1 << 30, isolation="read_committed")
    return t.column("value").to_pylist()


def txn_entries(log: Log) -> list[AbortedTxn]:
    return [t for seg in log.segments for t in seg.txn_index.all_aborted_txns()]


def txnindex_bytes(part: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(part.glob("*.txnindex"))}


class Model:
    """What read_committed, the LSO and the txn index must show (HW == LEO: every marker is
    replicated as soon as it is written)."""

    def __init__(self) -> None:
        self.leo = 0
        self.records: list[tuple[int, bytes, object]] = []     # (offset, value, txn key or None)
        self.open: dict[int, tuple[int, int]] = {}              # pid -> (first offset, txn key)
        self.outcome: dict[int, str] = {}                       # txn key -> commit/abort
        self.aborted: list[AbortedTxn] = []
        self.seq: dict[int, int] = {}
        self.next_key = 0

    def lso(self) -> int:
        return min((first for first, _ in self.open.values()), default=self.leo)

    def data(self, pid: int | None, values: list[bytes]) -> None:
        if pid is None:
            key = None
        else:
            if pid not in self.open:
                self.open[pid] = (self.leo, self.next_key)
                self.next_key += 1
            key = self.open[pid][1]
        for v in values:
            self.records.append((self.leo, v, key))
            self.leo += 1

    def marker(self, pid: int, commit: bool) -> None:
        offset = self.leo
        self.leo += 1
        if pid not in self.open:
            return                                  # an empty transaction: nothing indexed
        first, key = self.open.pop(pid)
        self.outcome[key] = "commit" if commit else "abort"
        if not commit:
            others = [f for p, (f, _) in self.open.items() if p != pid]
            self.aborted.append(AbortedTxn(pid, first, offset, min(others, default=offset + 1)))

    def committed(self) -> list[bytes]:
        lso = self.lso()
        return [v for o, v, k in self.records
                if o < lso and (k is None or self.outcome.get(k) == "commit")]


ops = st.lists(st.one_of(
    st.tuples(st.just("data"), st.sampled_from([1, 2, 3]), st.integers(1, 4)),
    st.tuples(st.just("plain"), st.just(0), st.integers(1, 3)),
    st.tuples(st.sampled_from(["commit", "abort"]), st.sampled_from([1, 2, 3]), st.just(0)),
), min_size=1, max_size=40)


def apply(log: Log, model: Model, op: tuple[str, int, int]) -> None:
    kind, pid, n = op
    if kind == "plain":
        values = [f"plain-{model.leo + i}".encode() for i in range(n)]
        info = log.append_raw(build_batch([RecordInput(v, None, 5) for v in values]))
        assert info.first_offset == model.leo
        model.data(None, values)
    elif kind == "data":
        seq = model.seq.get(pid, 0)
        raw = batch(pid, seq, n, transactional=True)
        info = log.append_raw(raw)
        assert (info.first_offset, info.last_offset) == (model.leo, model.leo + n - 1)
        model.seq[pid] = seq + n
        model.data(pid, [f"v-{pid}-{seq + i}".encode() for i in range(n)])
    else:
        ctype = ControlRecordType.COMMIT if kind == "commit" else ControlRecordType.ABORT
        info = log.append_end_txn_marker(pid, 0, ctype, coordinator_epoch=3)
        assert info.first_offset == info.last_offset == model.leo
        model.marker(pid, kind == "commit")


def check(log: Log, model: Model) -> None:
    assert log.log_end_offset == model.leo
    assert log.last_stable_offset == model.lso()
    assert committed_values(log) == model.committed()
    assert txn_entries(log) == model.aborted


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops)
def test_interleaved_transactions_match_the_model(tmp_path_factory, ops) -> None:
    """UnifiedLogTest.testTransactionIndexUpdated / testAbortedTransactionSpanningMultipleSegments
    / testFirstUnstableOffsetWithTransactionalData: interleaved transactional producers (and
    non-transactional records) with commits, aborts and empty-transaction markers; small
    segments so transactions span rolls. read_committed returns exactly the committed records
    below the LSO, the LSO is the first offset of the earliest open transaction, and the
    .txnindex entries (lastStableOffset included) are the model's. The state (and the txn
    indexes, byte for byte) survives a clean close/reopen and a crash-like reopen (recovery-point
    checkpoint and snapshots gone, txn indexes deleted: LogSegmentTest.testRecoverTransactionIndex,
    UnifiedLogTest.testFullTransactionIndexRecovery)."""
    root = tmp_path_factory.mktemp("data")
    part = root / "txn-0"
    model = Model()
    with Log.open(part, SMALL) as log:
        for op in ops:
            apply(log, model, op)
        check(log, model)
        # reads starting mid-log filter the same way
        for start in range(0, model.leo, 5):
            t = log.read(start, max_bytes=1 << 30, isolation="read_committed")
            lso = model.lso()
            assert t.column("value").to_pylist() == [
                v for o, v, k in model.records if start <= o < lso and
                (k is None or model.outcome.get(k) == "commit")]
    before = txnindex_bytes(part)
    with Log.open(part, SMALL) as log:
        check(log, model)
        assert txnindex_bytes(part) == before
        # and appends continue from the reloaded state
        apply(log, model, ("data", 1, 2))
        apply(log, model, ("abort", 1, 0))
        check(log, model)
    before = txnindex_bytes(part)
    (root / RECOVERY_POINT_CHECKPOINT).unlink()
    for p in list(part.glob("*.snapshot")) + list(part.glob("*.txnindex")):
        p.unlink()
    with Log.open(part, SMALL) as log:
        check(log, model)
    assert txnindex_bytes(part) == before
    with Log.open(part, SMALL, read_only=True) as reader:
        check(reader, model)


def test_open_transaction_holds_the_lso_and_a_read_only_reader_agrees(tmp_path: Path) -> None:
    """UnifiedLogTest.testLastStableOffsetWithMixedProducerData: an open transaction holds the
    LSO at its first offset while others commit after it; the commit releases it."""
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.append_raw(batch(1, 0, 2, transactional=True))          # 0, 1 (open)
        log.append_raw(batch(2, 0, 2, transactional=True))          # 2, 3
        log.append_end_txn_marker(2, 0, "COMMIT", 0)                 # 4
        assert log.last_stable_offset == 0
        assert committed_values(log) == []
        assert log.read(0, isolation="read_uncommitted").num_rows == 4
    with Log.open(part, read_only=True) as reader:
        assert reader.last_stable_offset == 0
    with Log.open(part) as log:
        assert log.last_stable_offset == 0
        log.append_end_txn_marker(1, 0, ControlRecordType.COMMIT, 0)  # 5
        assert log.last_stable_offset == log.log_end_offset == 6
        assert committed_values(log) == [b"v-1-0", b"v-1-1", b"v-2-0", b"v-2-1"]
        assert txn_entries(log) == []
    # loaded again (a reader, a restarted writer): the decided transactions no longer hold the
    # LSO (with no replicas every marker is below the high watermark = the log end offset)
    with Log.open(part, read_only=True) as reader:
        assert reader.last_stable_offset == reader.log_end_offset == 6
    with Log.open(part) as log:
        assert log.last_stable_offset == 6


def test_idempotent_retry_is_deduplicated(tmp_path: Path) -> None:
    """UnifiedLogTest.testDuplicateAppends: a retry of one of the producer's last five batches
    returns the original offsets and writes nothing, also after a close/reopen (the state comes
    back from the snapshot)."""
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.append_raw(build_batch([RecordInput(b"x")]))               # offset 0, no producer
        first = log.append_raw(batch(7, 0, 3))                         # 1..3
        second = log.append_raw(batch(7, 3, 2))                        # 4..5
        size = log.active_segment.size
        again = log.append_raw(batch(7, 0, 3))
        assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (1, 3)
        assert log.log_end_offset == 6 and log.active_segment.size == size
    with Log.open(part) as log:
        again = log.append_raw(batch(7, 3, 2))
        assert (again.first_offset, again.last_offset) == (second.first_offset, second.last_offset)
        assert log.log_end_offset == 6 and log.active_segment.size == size
        assert log.read(0).column("value").to_pylist() == [
            b"x", b"v-7-0", b"v-7-1", b"v-7-2", b"v-7-3", b"v-7-4"]


def test_out_of_order_sequence_and_fenced_epoch_write_nothing(tmp_path: Path) -> None:
    """UnifiedLogTest.testNonSequentialAppend / testOldProducerEpoch: a gap in the sequence and
    an older epoch are refused before anything is written; a client cannot append a control
    batch (only the coordinator's marker path can)."""
    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.append_raw(batch(9, 0, 2))
        size, leo = log.active_segment.size, log.log_end_offset
        with pytest.raises(OutOfOrderSequenceError):
            log.append_raw(batch(9, 5, 1))
        assert (log.active_segment.size, log.log_end_offset) == (size, leo)
        log.append_raw(batch(9, 0, 1, epoch=1))                       # a new epoch starts at 0
        size, leo = log.active_segment.size, log.log_end_offset
        with pytest.raises(InvalidProducerEpochError):
            log.append_raw(batch(9, 2, 1, epoch=0))
        with pytest.raises(InvalidProducerEpochError):
            log.append_end_txn_marker(9, 0, "ABORT", 0)
        marker = end_transaction_marker_batch(EndTransactionMarker(ControlRecordType.ABORT, 0),
                                              offset=0, timestamp=1, producer_id=9,
                                              producer_epoch=1)
        with pytest.raises(CorruptRecordError):
            log.append_raw(marker)
        assert (log.active_segment.size, log.log_end_offset) == (size, leo)


def test_truncation_and_log_start_keep_the_producer_state_consistent(tmp_path: Path) -> None:
    """UnifiedLogTest.testTruncateToEmptySegment-style: truncating below a marker reopens the
    transaction (the LSO goes back to its first offset) and drops its txn-index entry;
    advancing the log start offset past everything bounds the LSO below by it
    (testLastStableOffsetDoesNotExceedLogStartOffset)."""
    part = tmp_path / "t-0"
    with Log.open(part, SMALL) as log:
        for i in range(6):
            log.append_raw(batch(1, 2 * i, 2, transactional=True))
        abort = log.append_end_txn_marker(1, 0, "ABORT", 0).first_offset   # 12
        assert txn_entries(log) == [AbortedTxn(1, 0, 12, 13)]
        assert log.last_stable_offset == 13 and committed_values(log) == []
        log.truncate_to(abort)
        assert txn_entries(log) == [] and log.last_stable_offset == 0
        log.append_end_txn_marker(1, 0, "COMMIT", 0)
        assert log.last_stable_offset == 13 and len(committed_values(log)) == 12
        log.append_raw(batch(2, 0, 1, transactional=True))          # 13, open
        assert log.last_stable_offset == 13
        log.delete_records_before(13)
        assert log.last_stable_offset == 13
        assert log.read(13, isolation="read_committed").num_rows == 0
    with Log.open(part, SMALL) as log:
        assert log.last_stable_offset == 13
        log.append_end_txn_marker(2, 0, "COMMIT", 0)
        assert log.last_stable_offset == 15
        assert log.read(13, isolation="read_committed").column("value").to_pylist() == [b"v-2-0"]


def test_unclean_exit_rebuilds_producer_state_and_txn_index(tmp_path: Path) -> None:
    """UnifiedLogTest.testRecoverTransactionIndex / ProducerStateManagerTest-style recovery: a
    writer process that dies without closing (no close snapshot, preallocated indexes, no
    checkpoints); the reopened log recovers the segments, rebuilds the .txnindex and the
    producer state (open transaction, sequences) from the log."""
    import subprocess
    import sys
    import textwrap

    part = tmp_path / "t-0"
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from storage_core.config import LogConfig
        from storage_core.log import Log
        from tests.storage.test_transactions import SMALL, batch
        log = Log.open({str(part)!r}, SMALL)
        for i in range(4):
            log.append_raw(batch(1, 2 * i, 2, transactional=True))
            log.append_raw(batch(2, 2 * i, 2, transactional=True))
        log.append_end_txn_marker(1, 0, "ABORT", 0)
        log.append_raw(batch(3, 0, 1, transactional=True))
        log.append_end_txn_marker(2, 0, "COMMIT", 0)
        log.flush()
        os._exit(0)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / RECOVERY_POINT_CHECKPOINT).exists()
    with Log.open(part, SMALL) as log:
        assert log.log_end_offset == 19
        assert txn_entries(log) == [AbortedTxn(1, 0, 16, 2)]
        assert log.last_stable_offset == 17                         # producer 3's open txn
        assert committed_values(log) == [f"v-2-{i}".encode() for i in range(8)]
        with pytest.raises(OutOfOrderSequenceError):                # sequences came back
            log.append_raw(batch(2, 3, 1, transactional=True))
        log.append_end_txn_marker(3, 0, "ABORT", 0)
        assert log.last_stable_offset == 20
        assert txn_entries(log)[-1] == AbortedTxn(3, 17, 19, 20)

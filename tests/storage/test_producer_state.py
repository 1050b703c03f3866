"""Producer state: sequences, epochs, transactions, LSO, snapshots and rebuilding
(storage_core/producer_state.py; kafka_test_checklist.md §5, kafka_format.md §10 and §13).

Every §5 line that is producer-state logic has a test here named after the Kafka test(s) it
mirrors (``ProducerStateManagerTest`` unless marked ``UnifiedLogTest``; the UnifiedLog lines are
driven through the append path the Log will use: ``analyze_append`` / ``finish_append`` over
real batch bytes). The pure snapshot-file-format lines (file naming bytes, field round trip,
refusing corrupt files) are in test_producer_snapshot.py.

Left for the Log integration (need a full Log: segments, roll, retention, reopen, reads; the
producer-state half of several is tested here under the test named in brackets):

* UnifiedLogTest.testActiveProducers - the same state through the Log's API [test_active_producers_reporting]
* UnifiedLogTest.testTruncateBelowFirstUnstableOffset / testTruncateFullyAndStart - Log.truncate_to(0) / truncate_fully_and_start_at(2, log start 1) clear the unstable offset; LEO 2
* UnifiedLogTest.testProducerIdMapOffsetUpdatedForNonIdempotentData - snapshot at 1 via Log.append [test_map_end_offset_moves_for_non_idempotent_data]
* UnifiedLogTest.testRebuildProducerIdMapWithCompactedData / testRebuildProducerStateWithEmptyCompactedBatch - through Log.truncate_to [test_rebuild_from_compacted_batches]
* UnifiedLogTest.testProducerIdMapTruncateTo / testProducerIdMapTruncateToWithNoSnapshots - Log.truncate_to wiring [test_truncate_to_moves_snapshots_and_map_end_offset, test_truncate_to_with_no_snapshots_rebuilds_from_log]
* UnifiedLogTest.testRetentionDeletesProducerStateSnapshots / testLogStartOffsetMovementDeletesSnapshots / testDeleteSnapshotsOnIncrementLogStartOffset / testProducerIdExpirationOnSegmentDeletion - segment deletion marks snapshots .deleted, entries kept, log start 3
* UnifiedLogTest.testCompactionDeletesProducerStateSnapshots - snapshots follow the cleaned segments
* UnifiedLogTest.testProducerIdMapTruncateFullyAndStartAt - one segment, no snapshots, end offset 29 [test_truncate_fully_and_start_at]
* UnifiedLogTest.testTakeSnapshotOnRollAndDeleteSnapshotOnRecoveryPointCheckpoint / testProducerSnapshotAfterSegmentRollOnAppend - snapshot at each new segment base, old ones kept across flushes
* UnifiedLogTest.testRebuildTransactionalState - a real unclean reopen [test_rebuild_transactional_state]
* UnifiedLogTest.testDuplicateAppends - Log.append answering with the original offsets [test_duplicate_appends]
* UnifiedLogTest.testMultipleProducerIdsPerMemoryRecord - a follower append keeps every batch's baseOffset and baseSequence
* UnifiedLogTest.testTransactionIndexUpdated - entries in each segment's .txnindex, positions in multi-segment logs [test_transaction_index_updated]
* UnifiedLogTest.testReadCommittedWithConcurrentHighWatermarkUpdates - read_committed reads never see open transactions
* UnifiedLogTest.testLastStableOffsetDoesNotExceedLogStartOffsetAfterSegmentDeletion - with real segment deletion [test_lso_bounded_by_log_start_offset]
* UnifiedLogTest.testAppendToTransactionIndexFailure - the log going offline, the unclean reopen [test_append_to_transaction_index_failure]
* UnifiedLogTest.testAbortedTransactionSpanningMultipleSegments - read_committed fetch of aborted txns across segments

Two UnifiedLog lines run through a real Log here, at the end of the file:
UnifiedLogTest.testPeriodicProducerIdExpiration (the LogManager's scheduled expiration task) and
UnifiedLogTest.testRecoveryPointNotIncrementedOnProducerStateSnapshotFlushFailure.
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_core.errors import CorruptRecordError, KafkaLogError, UnsafeFileError
from storage_core.format import ControlRecordType, EndTransactionMarker, RecordInput
from storage_core.format.control import end_transaction_marker_batch
from storage_core.format.log_input_stream import LogInputStream, iter_batches
from storage_core.format.record_batch import (INT32_MAX, NO_SEQUENCE, BatchHeader, build_batch,
                                              compute_crc, write_empty_header)
from storage_core.index import AbortedTxn, TransactionIndex
from storage_core.producer import (ProducerSnapshotEntry, list_snapshots, read_snapshot,
                                            snapshot_path)
from storage_core.producer import (
    LATE_TRANSACTION_BUFFER_MS, NUM_BATCHES_TO_RETAIN, BatchMetadata, CompletedTxn,
    InvalidProducerEpochError, InvalidTxnStateError, LogOffsetMetadata,
    OutOfOrderSequenceError, ProducerAppendInfo, ProducerStateEntry, ProducerStateError,
    ProducerStateManager, TransactionCoordinatorFencedError, TxnMetadata, read_txn_marker)

NOW = 1_700_000_000_000          # MockTime-like wall clock
PID = 1
EPOCH = 0
MAX_TXN_TIMEOUT_MS = 5 * 60 * 1000
LATE_TXN_TIMEOUT_MS = MAX_TXN_TIMEOUT_MS + LATE_TRANSACTION_BUFFER_MS
EXPIRATION_MS = 86_400_000
COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT


@pytest.fixture
def psm(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, max_transaction_timeout_ms=MAX_TXN_TIMEOUT_MS)


def reopened(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, max_transaction_timeout_ms=MAX_TXN_TIMEOUT_MS)


# ---- ProducerStateManagerTest's helpers ----------------------------------------------------

def append_entry(psm: ProducerStateManager, pid: int, epoch: int, seq: int, offset: int,
                 ts: int = NOW, origin: str = "client", txn: bool = False) -> None:
    info = psm.prepare_update(pid, origin)
    info.append_data_batch(epoch, seq, seq, ts, LogOffsetMetadata(offset), offset, txn)
    psm.update(info)
    psm.update_map_end_offset(offset + 1)


def append_client(psm, pid, epoch, seq, offset, ts=NOW, txn=False) -> None:
    append_entry(psm, pid, epoch, seq, offset, ts, "client", txn)


def append_replication(psm, epoch, seq, offset, ts=NOW) -> None:
    append_entry(psm, PID, epoch, seq, offset, ts, "replication", False)


def append_marker(psm, pid, epoch, control_type, offset, coordinator_epoch=0,
                  ts=NOW) -> CompletedTxn | None:
    info = psm.prepare_update(pid, "coordinator")
    completed = info.append_end_txn_marker(EndTransactionMarker(control_type, coordinator_epoch),
                                           epoch, offset, ts)
    psm.update(info)
    if completed is not None:
        psm.complete_txn(completed)
    psm.update_map_end_offset(offset + 1)
    return completed


def entry(psm: ProducerStateManager, pid: int = PID) -> ProducerStateEntry:
    found = psm.last_entry(pid)
    assert found is not None, f"producer {pid} should have an entry"
    return found


def subdir(parent: Path, name: str) -> Path:
    path = parent / name
    path.mkdir()
    return path


def snapshot_offsets(directory: Path) -> set[int]:
    return {offset for offset, _ in list_snapshots(directory)}


# ---- a minimal leader/follower driver over real batch bytes --------------------------------

def txn_batch(pid: int, epoch: int, seq: int, n: int, offset: int, ts: int = NOW) -> bytes:
    return build_batch([RecordInput(b"v%d" % i, None, ts) for i in range(n)], base_offset=offset,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=True)


def idempotent_batch(pid: int, epoch: int, seq: int, n: int, offset: int, ts: int = NOW) -> bytes:
    return build_batch([RecordInput(b"v%d" % i, None, ts) for i in range(n)], base_offset=offset,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def plain_batch(n: int, offset: int, ts: int = NOW) -> bytes:
    return build_batch([RecordInput(b"p%d" % i, None, ts) for i in range(n)], base_offset=offset)


def marker_batch(pid: int, epoch: int, control_type, offset: int, coordinator_epoch: int = 0,
                 ts: int = NOW) -> bytes:
    return end_transaction_marker_batch(EndTransactionMarker(control_type, coordinator_epoch),
                                        offset=offset, timestamp=ts, producer_id=pid,
                                        producer_epoch=epoch)


@dataclass
class Partition:
    """What the Log will do per append (the module docstring's append path), on one segment
    held in memory: analyze, write, finish, then HW := LEO unless told otherwise."""

    psm: ProducerStateManager
    log: bytearray = field(default_factory=bytearray)
    aborted: list[AbortedTxn] = field(default_factory=list)
    hw: int = 0
    auto_hw: bool = True

    @property
    def leo(self) -> int:
        infos = list(iter_batches(self.log))
        return infos[-1].next_offset if infos else 0

    def append(self, batches: bytes, origin: str = "client", *, transaction_version: int = 0,
               on_aborted_txn=None):
        buf = bytearray(batches)
        infos = list(LogInputStream(buf))
        pending = self.psm.analyze_append(((buf, b) for b in infos), origin,
                                          segment_base_offset=0, start_position=len(self.log),
                                          transaction_version=transaction_version)
        if pending.duplicate is not None:
            return pending.duplicate.first_offset, pending.duplicate.last_offset
        self.log += buf
        self.psm.finish_append(pending, infos[-1].next_offset,
                               on_aborted_txn=on_aborted_txn or self.aborted.append)
        if self.auto_hw:
            self.update_hw(self.leo)
        return infos[0].base_offset, infos[-1].last_offset

    def update_hw(self, hw: int) -> None:
        self.hw = hw
        self.psm.on_high_watermark_updated(hw)

    def txn(self, pid: int, epoch: int = EPOCH):
        """LogTestUtils.appendTransactionalAsLeader: appends n records with running sequences."""
        seq = [0]

        def append(n: int):
            out = self.append(txn_batch(pid, epoch, seq[0], n, self.leo))
            seq[0] += n
            return out
        return append

    def plain(self, n: int):
        return self.append(plain_batch(n, self.leo))

    def marker(self, pid: int, epoch: int, control_type, coordinator_epoch: int = 0,
               transaction_version: int = 0):
        return self.append(marker_batch(pid, epoch, control_type, self.leo, coordinator_epoch),
                           "coordinator", transaction_version=transaction_version)

    def batches(self):
        return [(self.log, b) for b in iter_batches(self.log)]


def position_of(log: bytes, offset: int) -> int:
    return next(b.position for b in iter_batches(log) if b.last_offset >= offset)


# ============================================================ sequences and epochs (client)

def test_basic_id_mapping(psm):
    """testBasicIdMapping"""
    append_client(psm, PID, EPOCH, 0, 0)
    append_client(psm, PID, EPOCH, 1, 1)
    # a duplicate is detected by the Log before validation; appended, it is out of order
    with pytest.raises(OutOfOrderSequenceError, match=r"producer 1 .*: 1 \(incoming seq\. number\), 1 "):
        append_client(psm, PID, EPOCH, 1, 1)
    with pytest.raises(OutOfOrderSequenceError, match="5 .incoming seq. number"):
        append_client(psm, PID, EPOCH, 5, 2)
    append_client(psm, PID, EPOCH + 1, 0, 3)          # a new epoch starts at 0
    with pytest.raises(InvalidProducerEpochError, match="is 0, which is < the last seen epoch 1"):
        append_client(psm, PID, EPOCH, 0, 4)


def test_errors_are_kafka_log_errors(psm):
    with pytest.raises(KafkaLogError) as caught:
        append_client(psm, PID, EPOCH, 7, 0)
        append_client(psm, PID, EPOCH, 9, 1)
    assert isinstance(caught.value, ProducerStateError)
    assert (caught.value.producer_id, caught.value.offset) == (PID, 1)
    assert psm.partition_dir.name in str(caught.value)


def test_append_txn_marker_with_no_producer_state(psm):
    """testAppendTxnMarkerWithNoProducerState"""
    append_marker(psm, PID, 2, COMMIT, 27)
    first = entry(psm)
    assert (first.producer_epoch, first.producer_id, first.last_seq) == (2, PID, NO_SEQUENCE)
    with pytest.raises(InvalidProducerEpochError):           # fencing survives the marker
        append_client(psm, PID, 0, 0, 4)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(psm, PID, 2, 17, 4)
    append_client(psm, PID, 2, 0, 4, ts=NOW + 39)
    assert (entry(psm).producer_epoch, entry(psm).last_seq) == (2, 0)


def test_producer_sequence_wrap_around(psm):
    """testProducerSequenceWrapAround"""
    append_replication(psm, 15, INT32_MAX, 735)
    append_client(psm, PID, 15, 0, 735 + 500)
    e = entry(psm)
    assert (e.producer_epoch, e.first_seq, e.last_seq) == (15, INT32_MAX, 0)


def test_producer_sequence_invalid_wrap_around(psm):
    """testProducerSequenceInvalidWrapAround"""
    append_replication(psm, 15, INT32_MAX, 735)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(psm, PID, 15, 1, 735 + 500)


def test_producer_sequence_with_wrap_around_batch_record(psm):
    """testProducerSequenceWithWrapAroundBatchRecord"""
    info = psm.prepare_update(PID, "replication")
    info.append_data_batch(15, INT32_MAX - 10, 9, NOW, LogOffsetMetadata(2000), 2020, False)
    assert psm.last_entry(PID) is None
    psm.update(info)
    e = entry(psm)
    assert (e.first_seq, e.last_seq, e.first_data_offset, e.last_data_offset) == \
        (INT32_MAX - 10, 9, 2000, 2020)


def test_no_validation_on_first_entry_when_loading_log(psm):
    """testNoValidationOnFirstEntryWhenLoadingLog"""
    append_replication(psm, 5, 16, 735)
    e = entry(psm)
    assert (e.producer_epoch, e.first_seq, e.last_seq, e.first_data_offset, e.last_data_offset) \
        == (5, 16, 16, 735, 735)


def test_accept_append_with_sequence_gaps_on_replica(psm):
    """testAcceptAppendWithSequenceGapsOnReplica"""
    append_client(psm, PID, EPOCH, 0, 0, ts=0)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(psm, PID, EPOCH, 3, 1, ts=1)
    assert psm.active_producers[PID].last_seq == 0
    append_replication(psm, EPOCH, 3, 1, ts=1)
    assert psm.active_producers[PID].last_seq == 3


def test_control_record_bumps_producer_epoch(psm):
    """testControlRecordBumpsProducerEpoch"""
    append_client(psm, PID, EPOCH, 0, 0)
    append_marker(psm, PID, 1, ABORT, 1)
    e = entry(psm)
    assert (e.producer_epoch, e.current_txn_first_offset, e.first_seq, e.last_seq) == \
        (1, None, NO_SEQUENCE, NO_SEQUENCE)
    append_client(psm, PID, 1, 0, 2)
    assert entry(psm).first_seq == 0


def test_out_of_sequence_after_control_record_epoch_bump(psm):
    """testOutOfSequenceAfterControlRecordEpochBump"""
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    append_client(psm, PID, EPOCH, 1, 1, txn=True)
    append_marker(psm, PID, 1, ABORT, 1)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(psm, PID, 1, 2, 2, txn=True)
    with pytest.raises(OutOfOrderSequenceError, match="Invalid sequence number for new epoch"):
        append_client(psm, PID, 2, 2, 2, txn=True)
    append_client(psm, PID, 1, 0, 0, txn=True)
    assert (entry(psm).producer_epoch, entry(psm).last_seq) == (1, 0)


def test_reject_non_zero_sequence_for_direct_epoch_bump(psm):
    """testRejectNonZeroSequenceForDirectEpochBump"""
    for seq in range(3):
        append_client(psm, PID, EPOCH, seq, seq)
    info = psm.prepare_update(PID, "client")
    with pytest.raises(OutOfOrderSequenceError) as caught:
        info.append_data_batch(1, 5, 5, NOW, LogOffsetMetadata(3), 3, False)
    for part in ("Invalid sequence number for new epoch", "1 (request epoch)", "5 (seq. number)",
                 "0 (current producer epoch)"):
        assert part in str(caught.value)
    psm.prepare_update(PID, "client").append_data_batch(1, 0, 0, NOW, LogOffsetMetadata(3), 3, False)


def test_producer_state_after_fencing_abort_marker(psm):
    """testProducerStateAfterFencingAbortMarker"""
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    append_marker(psm, PID, EPOCH + 1, ABORT, 1)
    e = entry(psm)
    assert (e.current_txn_first_offset, e.last_data_offset, e.first_data_offset) == (None, -1, -1)
    psm.remove_expired_producers(NOW)                 # the fencing epoch must be preserved
    assert entry(psm).producer_epoch == EPOCH + 1


def test_prepare_update_does_not_mutate(psm):
    """testPrepareUpdateDoesNotMutate"""
    info = psm.prepare_update(PID, "client")
    info.append_data_batch(EPOCH, 0, 5, NOW, LogOffsetMetadata(15), 20, False)
    assert psm.last_entry(PID) is None
    psm.update(info)
    nxt = psm.prepare_update(PID, "client")
    nxt.append_data_batch(EPOCH, 6, 10, NOW, LogOffsetMetadata(26), 30, False)
    e = entry(psm)
    assert (e.first_seq, e.last_seq, e.last_data_offset) == (0, 5, 20)
    psm.update(nxt)
    e = entry(psm)
    assert (e.first_seq, e.last_seq, e.last_data_offset) == (0, 10, 30)


def test_update_producer_transaction_state(psm):
    """updateProducerTransactionState"""
    append_client(psm, PID, EPOCH, 0, 9)
    info = psm.prepare_update(PID, "client")
    info.append_data_batch(EPOCH, 1, 5, NOW, LogOffsetMetadata(16), 20, True)

    def check(e, last_seq, last_offset, txn_first):
        assert (e.producer_epoch, e.first_seq, e.last_seq, e.first_data_offset,
                e.last_data_offset, e.current_txn_first_offset) == \
            (EPOCH, 1, last_seq, 16, last_offset, txn_first)
        assert [(t.producer_id, t.first_offset.message_offset, t.last_offset)
                for t in info.started_transactions] == [(PID, 16, None)]

    check(info.to_entry(), 5, 20, 16)
    info.append_data_batch(EPOCH, 6, 10, NOW, LogOffsetMetadata(26), 30, True)
    check(info.to_entry(), 10, 30, 16)
    completed = info.append_end_txn_marker(EndTransactionMarker(COMMIT, 15), EPOCH, 40, NOW)
    assert completed == CompletedTxn(PID, 16, 40, False)
    check(info.to_entry(), 10, 30, None)     # the marker leaves the cached batches alone


def test_non_transactional_append_with_ongoing_transaction(psm):
    """testNonTransactionalAppendWithOngoingTransaction"""
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    with pytest.raises(InvalidTxnStateError, match="Expected transactional write from producer 1"):
        append_client(psm, PID, EPOCH, 1, 1, txn=False)


def test_old_epoch_for_control_record(psm):
    """testOldEpochForControlRecord"""
    assert psm.first_undecided_offset() is None
    append_client(psm, PID, 5, 0, 99, txn=True)
    with pytest.raises(InvalidProducerEpochError, match="is 3, which is < the last seen epoch 5"):
        append_marker(psm, PID, 3, COMMIT, 100)


def test_coordinator_fencing(psm):
    """testCoordinatorFencing"""
    append_client(psm, PID, 5, 0, 99, txn=True)
    append_marker(psm, PID, 5, COMMIT, 100, coordinator_epoch=1)
    assert entry(psm).coordinator_epoch == 1
    append_marker(psm, PID, 5, COMMIT, 101, coordinator_epoch=1)     # same epoch: allowed
    append_marker(psm, PID, 5, COMMIT, 102, coordinator_epoch=2)     # bumped: allowed
    with pytest.raises(TransactionCoordinatorFencedError, match=r"1 \(zombie\), 2 \(current\)"):
        append_marker(psm, PID, 5, COMMIT, 103, coordinator_epoch=1)


def test_coordinator_fenced_after_reload(psm, tmp_path):
    """testCoordinatorFencedAfterReload"""
    append_client(psm, PID, EPOCH, 0, 99, txn=True)
    append_marker(psm, PID, EPOCH, COMMIT, 100, coordinator_epoch=1)
    psm.take_snapshot()
    recovered = reopened(tmp_path)
    recovered.truncate_and_reload(0, 101, NOW)
    assert entry(recovered).coordinator_epoch == 1
    with pytest.raises(TransactionCoordinatorFencedError):
        append_marker(recovered, PID, EPOCH, COMMIT, 101, coordinator_epoch=0)


def test_sequence_not_validated_for_coordinator_origin(psm):
    """testSequenceNotValidatedForGroupMetadataTopic"""
    append_entry(psm, PID, EPOCH, NO_SEQUENCE, 99, origin="coordinator", txn=True)
    append_entry(psm, PID, EPOCH, NO_SEQUENCE, 100, origin="coordinator", txn=True)
    with pytest.raises(InvalidProducerEpochError):               # epochs still are
        append_entry(psm, PID, EPOCH - 1, NO_SEQUENCE, 101, origin="coordinator", txn=True)


def test_replication_logs_instead_of_fencing(psm):
    """ProducerAppendInfo: replication origin never raises (the leader validated)."""
    append_client(psm, PID, 5, 0, 0, txn=True)
    append_marker(psm, PID, 5, COMMIT, 1, coordinator_epoch=3)
    append_entry(psm, PID, 4, 9, 2, origin="replication", txn=True)
    info = psm.prepare_update(PID, "replication")
    assert info.append_end_txn_marker(EndTransactionMarker(ABORT, 1), 2, 3, NOW) == \
        CompletedTxn(PID, 2, 3, True)
    psm.update(info)
    assert entry(psm).coordinator_epoch == 1 and entry(psm).producer_epoch == 2


# ================================================================ transaction version 2 markers

@pytest.mark.parametrize("tv", [1, 2])
def test_end_txn_with_fenced_producer_epoch(tmp_path, tv):
    """UnifiedLogTest.testEndTxnWithFencedProducerEpoch / testTV2MarkerWithBumpedEpochSucceeds"""
    p = Partition(ProducerStateManager(tmp_path))
    p.txn(PID, 5)(1)
    with pytest.raises(InvalidProducerEpochError):
        p.marker(PID, 4, ABORT, 1, transaction_version=tv)
    if tv >= 2:
        with pytest.raises(InvalidProducerEpochError, match=r"<= the last seen epoch 5 \(TV2\)"):
            p.marker(PID, 5, ABORT, 1, transaction_version=tv)
        p.marker(PID, 6, COMMIT, 1, transaction_version=tv)
        assert entry(p.psm).producer_epoch == 6
        # KAFKA-19999: a retried TV2 marker for a completed transaction is written again
        p.marker(PID, 6, COMMIT, 1, transaction_version=tv)
    else:
        p.marker(PID, 5, ABORT, 1, transaction_version=tv)


def test_replication_accepts_tv2_marker_as_tv0(tmp_path):
    """UnifiedLogTest.testReplicationWithTVUnknownAllowed"""
    p = Partition(ProducerStateManager(tmp_path))
    p.append(txn_batch(PID, 5, 0, 1, 0), "replication")
    p.append(marker_batch(PID, 6, COMMIT, 1, coordinator_epoch=1), "replication")
    assert (entry(p.psm).producer_epoch, entry(p.psm).coordinator_epoch, p.leo) == (6, 1, 2)


# ============================================================== first unstable offset / LSO

def test_txn_first_offset_metadata_cached(psm):
    """testTxnFirstOffsetMetadataCached"""
    info = ProducerAppendInfo(PID, ProducerStateEntry.empty(PID), "client")
    meta = LogOffsetMetadata(992342, 990000, 234224)
    info.append_data_batch(EPOCH, 0, 0, NOW, meta, 992342, True)
    psm.update(info)
    assert psm.first_unstable_offset_metadata() == meta
    assert not meta.message_offset_only and LogOffsetMetadata(5).message_offset_only


def test_first_unstable_offset(psm):
    """testFirstUnstableOffset"""
    assert psm.first_undecided_offset() is None
    append_client(psm, PID, 5, 0, 99, txn=True)
    assert (psm.first_undecided_offset(), psm.first_unstable_offset()) == (99, 99)
    append_client(psm, 2, 5, 0, 105, txn=True)
    assert (psm.first_undecided_offset(), psm.first_unstable_offset()) == (99, 99)
    append_marker(psm, PID, 5, COMMIT, 109)
    assert (psm.first_undecided_offset(), psm.first_unstable_offset()) == (105, 99)
    psm.on_high_watermark_updated(100)
    assert psm.first_unstable_offset() == 99
    psm.on_high_watermark_updated(110)
    assert psm.first_unstable_offset() == 105
    append_marker(psm, 2, 5, ABORT, 112)
    assert (psm.first_undecided_offset(), psm.first_unstable_offset()) == (None, 105)
    psm.on_high_watermark_updated(113)
    assert psm.first_unstable_offset() is None


def test_last_stable_offset_completed_txn(psm):
    """testLastStableOffsetCompletedTxn"""
    base = 990000

    def begin(pid, start):
        info = ProducerAppendInfo(pid, ProducerStateEntry.empty(pid), "client")
        info.append_data_batch(EPOCH, 0, 0, NOW, LogOffsetMetadata(start, base, 50 * (start - base)),
                               start, True)
        psm.update(info)

    start1, start2, start3 = 992342, 992342 + 25, 992342 + 57
    begin(1, start1), begin(2, start2), begin(3, start3)
    last1 = start3 + 15
    txn1 = CompletedTxn(1, start1, last1, False)
    assert psm.last_stable_offset(txn1) == start2
    psm.complete_txn(txn1)
    psm.on_high_watermark_updated(last1 + 1)
    assert psm.first_unstable_offset() == start2
    last3 = last1 + 20
    txn3 = CompletedTxn(3, start3, last3, False)
    assert psm.last_stable_offset(txn3) == start2
    psm.complete_txn(txn3)
    psm.on_high_watermark_updated(last3 + 1)
    assert psm.first_unstable_offset() == start2
    last2 = last3 + 78
    txn2 = CompletedTxn(2, start2, last2, False)
    assert psm.last_stable_offset(txn2) == last2 + 1
    psm.complete_txn(txn2)
    psm.on_high_watermark_updated(last2 + 1)
    assert psm.first_unstable_offset() is None
    with pytest.raises(ValueError, match="which was not started"):
        psm.complete_txn(txn2)


def test_skip_empty_transactions(psm):
    """testSkipEmptyTransactions"""
    seq = [0]

    def data(start, end, info):
        count = end - start
        info.append_data_batch(EPOCH, seq[0], seq[0] + count, NOW, LogOffsetMetadata(start), end, True)
        seq[0] += count + 1

    def end_txn(control_type, offset, info):
        return info.append_end_txn_marker(EndTransactionMarker(control_type, 27), EPOCH, offset, NOW)

    first = psm.prepare_update(PID, "client")
    data(16, 20, first)
    assert [t.first_offset for t in first.started_transactions] == [LogOffsetMetadata(16)]
    psm.update(first)
    psm.on_high_watermark_updated(21)
    assert psm.first_unstable_offset_metadata() == LogOffsetMetadata(16)

    second = psm.prepare_update(PID, "client")
    first_completed = end_txn(COMMIT, 21, second)
    assert first_completed == CompletedTxn(PID, 16, 21, False)
    assert end_txn(COMMIT, 22, second) is None
    assert end_txn(ABORT, 23, second) is None
    data(24, 27, second)
    second_completed = end_txn(ABORT, 28, second)
    assert second_completed == CompletedTxn(PID, 24, 28, True)
    assert end_txn(ABORT, 29, second) is None
    data(30, 31, second)
    assert [t.first_offset.message_offset for t in second.started_transactions] == [24, 30]
    psm.update(second)
    psm.complete_txn(first_completed)
    psm.complete_txn(second_completed)
    psm.on_high_watermark_updated(32)
    assert psm.first_unstable_offset_metadata() == LogOffsetMetadata(30)


def test_append_empty_control_batch(psm):
    """testAppendEmptyControlBatch: a control batch the cleaner emptied opens nothing."""
    pid = 23423
    raw = write_empty_header(base_offset=15, last_offset=15, max_timestamp=NOW, producer_id=pid,
                             producer_epoch=EPOCH, transactional=True, control=True)
    info = next(iter_batches(raw))
    assert read_txn_marker(raw, info) is None
    append_info = psm.prepare_update(pid, "client")
    assert append_info.append(info.header) is None
    psm.update(append_info)
    psm.update_map_end_offset(16)
    assert entry(psm, pid).current_txn_first_offset is None
    assert psm.first_unstable_offset() is None


def test_first_unstable_offset_with_transactional_data(tmp_path):
    """UnifiedLogTest.testFirstUnstableOffsetNoTransactionalData / testFirstUnstableOffsetWithTransactionalData"""
    p = Partition(ProducerStateManager(tmp_path), auto_hw=False)
    p.plain(3)
    p.append(idempotent_batch(7, 0, 0, 2, p.leo))
    assert p.psm.first_unstable_offset() is None
    first, _ = p.append(txn_batch(137, 5, 0, 3, p.leo))
    assert p.psm.first_unstable_offset() == first == 5
    p.append(txn_batch(137, 5, 3, 1, p.leo))
    assert p.psm.first_unstable_offset() == first
    _, commit = p.marker(137, 5, COMMIT)
    assert p.psm.first_unstable_offset() == first          # until the HW passes the marker
    p.update_hw(commit + 1)
    assert p.psm.first_unstable_offset() is None


def test_last_stable_offset_with_mixed_producer_data(tmp_path):
    """UnifiedLogTest.testLastStableOffsetWithMixedProducerData"""
    p = Partition(ProducerStateManager(tmp_path), auto_hw=False)
    first1, _ = p.append(txn_batch(137, 5, 0, 3, 0))
    assert p.psm.first_unstable_offset() == first1
    p.plain(3)
    first2, _ = p.append(txn_batch(983, 5, 0, 2, p.leo))
    assert p.psm.first_unstable_offset() == first1
    assert p.psm.log_last_stable_offset(p.leo) == first1
    _, abort = p.marker(137, 5, ABORT)
    p.update_hw(abort + 1)
    assert p.psm.first_unstable_offset() == first2
    assert p.psm.log_last_stable_offset(p.hw) == first2
    _, commit = p.marker(983, 5, COMMIT)
    p.update_hw(commit + 1)
    assert p.psm.first_unstable_offset() is None
    assert p.psm.log_last_stable_offset(p.hw) == p.hw == p.leo


def test_lso_bounded_by_log_start_offset(tmp_path):
    """UnifiedLogTest.testLastStableOffsetDoesNotExceedLogStartOffsetMidSegment"""
    p = Partition(ProducerStateManager(tmp_path))
    append = p.txn(PID)
    append(5)
    p.plain(3)
    append(5)
    assert p.psm.first_unstable_offset() == 0
    p.psm.on_log_start_offset_incremented(5)
    assert p.psm.first_unstable_offset(log_start_offset=5) == 5
    assert p.psm.log_last_stable_offset(p.hw, log_start_offset=5) == 5
    assert p.psm.log_last_stable_offset(3, log_start_offset=5) == 3      # HW below it


def test_transaction_index_updated(tmp_path):
    """UnifiedLogTest.testTransactionIndexUpdated (leader appends, cached segment positions)"""
    p = Partition(ProducerStateManager(tmp_path), auto_hw=False)
    pid1, pid2, pid3, pid4 = p.txn(1), p.txn(2), p.txn(3), p.txn(4)
    pid1(5); p.plain(3); pid2(2); pid1(4); pid3(3); p.plain(2); pid1(10)   # noqa: E702
    p.marker(1, EPOCH, ABORT)
    pid2(6); pid4(3); p.plain(10); pid3(9)                                 # noqa: E702
    p.marker(3, EPOCH, COMMIT)
    pid4(8); pid2(7)                                                       # noqa: E702
    p.marker(2, EPOCH, ABORT)
    p.plain(10); pid4(4)                                                   # noqa: E702
    p.marker(4, EPOCH, COMMIT)
    assert p.aborted == [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]
    for hw, expected in ((30, 8), (75, 36)):
        p.update_hw(hw)
        meta = p.psm.first_unstable_offset_metadata()
        assert meta == LogOffsetMetadata(expected, 0, position_of(p.log, expected))
    p.update_hw(p.leo)
    assert p.psm.first_unstable_offset() is None


def transaction_index_batches() -> bytes:
    """UnifiedLogTest.testTransactionIndexUpdatedThroughReplication's record set."""
    out, seqs = bytearray(), {1: 0, 2: 0, 3: 0, 4: 0}

    def txn(pid, offset, n):
        out.extend(txn_batch(pid, EPOCH, seqs[pid], n, offset))
        seqs[pid] += n

    txn(1, 0, 5); out += plain_batch(3, 5); txn(2, 8, 2); txn(1, 10, 4); txn(3, 14, 3)  # noqa: E702
    out += plain_batch(2, 17); txn(1, 19, 10); out += marker_batch(1, EPOCH, ABORT, 29)  # noqa: E702
    txn(2, 30, 6); txn(4, 36, 3); out += plain_batch(10, 39); txn(3, 49, 9)             # noqa: E702
    out += marker_batch(3, EPOCH, COMMIT, 58); txn(4, 59, 8); txn(2, 67, 7)             # noqa: E702
    out += marker_batch(2, EPOCH, ABORT, 74); out += plain_batch(10, 75); txn(4, 85, 4)  # noqa: E702
    out += marker_batch(4, EPOCH, COMMIT, 89)
    return bytes(out)


def test_transaction_index_updated_through_replication(tmp_path):
    """UnifiedLogTest.testTransactionIndexUpdatedThroughReplication"""
    p = Partition(ProducerStateManager(tmp_path), auto_hw=False)
    p.append(transaction_index_batches(), "replication")
    assert p.aborted == [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]
    p.update_hw(30)
    assert p.psm.first_unstable_offset_metadata() == LogOffsetMetadata(8, 0, position_of(p.log, 8))
    p.update_hw(75)
    assert p.psm.first_unstable_offset() == 36
    p.update_hw(p.leo)
    assert p.psm.first_unstable_offset() is None


def test_full_transaction_index_recovery(tmp_path):
    """UnifiedLogTest.testFullTransactionIndexRecovery (producer-state half): replaying the log
    batch by batch (LogSegment.recover's on_batch) rebuilds the same txn-index entries."""
    log = transaction_index_batches()
    psm = ProducerStateManager(tmp_path)
    rebuilt: list[AbortedTxn] = []
    for b in iter_batches(log):
        psm.load_batch(log, b, on_aborted_txn=rebuilt.append)
    assert rebuilt == [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]
    assert psm.map_end_offset == 90
    assert psm.first_undecided_offset() is None


def test_aborted_txn_entry_only_for_aborts(psm):
    """kafka_format.md §10: COMMITs write nothing; the LSO is the earliest other open txn."""
    append_client(psm, 1, EPOCH, 0, 3, txn=True)
    append_client(psm, 2, EPOCH, 0, 5, txn=True)
    assert psm.aborted_txn_entry(CompletedTxn(1, 3, 9, False)) is None
    assert psm.aborted_txn_entry(CompletedTxn(1, 3, 9, True)) == AbortedTxn(1, 3, 9, 5)
    assert psm.aborted_txn_entry(CompletedTxn(2, 5, 9, True)) == AbortedTxn(2, 5, 9, 3)


def test_append_to_transaction_index_failure(tmp_path):
    """UnifiedLogTest.testAppendToTransactionIndexFailure (producer-state half): the txn-index
    write fails (a real failure: the index path is a directory, which the index refuses to open
    as its file), so the transaction stays open and the LSO does not move; replaying the log
    rebuilds the one aborted entry."""
    part = tmp_path / "p"
    part.mkdir()
    p = Partition(ProducerStateManager(part))
    p.txn(PID)(10)
    (tmp_path / "broken.txnindex").mkdir()
    broken = TransactionIndex(tmp_path / "broken.txnindex", 0)
    marker = marker_batch(PID, EPOCH, ABORT, 10, coordinator_epoch=1)
    with pytest.raises(UnsafeFileError, match="broken.txnindex is a directory"):
        p.append(marker, "coordinator", on_aborted_txn=broken.append)
    assert p.leo == 11                      # the marker is in the log
    p.update_hw(12)
    assert p.psm.log_last_stable_offset(12) == 0
    assert p.psm.first_unstable_offset() == 0

    recovered = ProducerStateManager(tmp_path / "p")
    index = TransactionIndex(tmp_path / "recovered.txnindex", 0)
    for b in iter_batches(p.log):
        recovered.load_batch(p.log, b, on_aborted_txn=index.append)
    assert index.all_aborted_txns() == [AbortedTxn(PID, 0, 10, 11)]
    recovered.on_high_watermark_updated(12)
    assert recovered.first_unstable_offset() is None
    index.close()


# ============================================================== duplicates (the Log's check)

def test_duplicate_appends(tmp_path):
    """UnifiedLogTest.testDuplicateAppends"""
    p = Partition(ProducerStateManager(tmp_path))
    pid, seq = 1, 0
    for _ in range(6):
        p.append(idempotent_batch(pid, EPOCH, seq, 1, p.leo))
        seq += 1
    multi = p.append(idempotent_batch(pid, EPOCH, seq, 3, p.leo))
    assert multi[1] - multi[0] + 1 == 3
    leo = p.leo
    assert p.append(idempotent_batch(pid, EPOCH, seq, 3, leo)) == multi    # retry of the tail
    assert p.leo == leo
    seq += 3
    with pytest.raises(OutOfOrderSequenceError):                            # partial overlap
        p.append(idempotent_batch(pid, EPOCH, seq - 2, 2, leo))
    assert p.append(idempotent_batch(pid, EPOCH, 2, 1, leo)) == (2, 2)     # oldest retained
    assert len(entry(p.psm).batch_metadata) == NUM_BATCHES_TO_RETAIN
    with pytest.raises(OutOfOrderSequenceError):                            # no longer retained
        p.append(idempotent_batch(pid, EPOCH, 1, 1, leo))
    orig = p.append(idempotent_batch(pid, EPOCH, seq, 1, leo))
    assert p.append(idempotent_batch(pid, EPOCH, seq, 1, p.leo)) == orig
    # another epoch's identical sequence range is not a duplicate
    h = BatchHeader.parse(idempotent_batch(pid, EPOCH + 1, seq, 1, 0))
    assert entry(p.psm).find_duplicate_batch(h) is None
    assert p.psm.find_duplicate_batch(BatchHeader.parse(idempotent_batch(pid, EPOCH, seq, 1, 0))) \
        == BatchMetadata(seq, orig[1], 0, NOW)


def test_duplicate_append_to_follower(tmp_path):
    """UnifiedLogTest.testDuplicateAppendToFollower / testMultipleProducersWithDuplicatesInSingleAppend"""
    p = Partition(ProducerStateManager(tmp_path))
    p.append(idempotent_batch(PID, EPOCH, 0, 2, 0), "replication")
    p.append(idempotent_batch(PID, EPOCH, 0, 2, 2), "replication")
    assert p.leo == 4
    q = Partition(ProducerStateManager(subdir(tmp_path, "q")))
    batches = b"".join(idempotent_batch(pid, EPOCH, seq, 1, offset)
                       for offset, (pid, seq) in enumerate([(1, 0), (2, 0), (1, 1), (2, 1), (1, 1)]))
    q.append(batches, "replication")
    assert q.leo == 5
    producers = q.psm.active_producers.values()
    assert [(e.producer_id, e.last_seq, e.last_data_offset) for e in producers] == \
        [(1, 1, 4), (2, 1, 3)]


def test_non_sequential_append_and_old_epoch(tmp_path):
    """UnifiedLogTest.testNonSequentialAppend / testOldProducerEpoch"""
    p = Partition(ProducerStateManager(tmp_path))
    p.append(idempotent_batch(PID, EPOCH, 0, 1, 0))
    with pytest.raises(OutOfOrderSequenceError):
        p.append(idempotent_batch(PID, EPOCH, 2, 1, 1))
    p.append(idempotent_batch(2, 1, 0, 1, 1))
    with pytest.raises(InvalidProducerEpochError):
        p.append(idempotent_batch(2, 0, 0, 1, 2))
    assert p.leo == 2


def test_active_producers_reporting(tmp_path):
    """UnifiedLogTest.testActiveProducers (the producer-state half)"""
    p = Partition(ProducerStateManager(tmp_path))
    p.append(txn_batch(15, 0, 0, 5, 0))
    e = p.psm.active_producers[15]
    assert (e.producer_epoch, e.last_seq, e.current_txn_first_offset, e.coordinator_epoch) == \
        (0, 4, 0, -1)
    p.marker(15, 0, COMMIT, coordinator_epoch=15)
    e = p.psm.active_producers[15]
    assert (e.producer_epoch, e.last_seq, e.current_txn_first_offset, e.coordinator_epoch) == \
        (0, 4, None, 15)
    with pytest.raises(TypeError):
        p.psm.active_producers[16] = e          # a read-only view


def test_zombie_coordinator_fenced(tmp_path):
    """UnifiedLogTest.testZombieCoordinatorFenced / testZombieCoordinatorFencedEmptyTransaction"""
    p = Partition(ProducerStateManager(tmp_path))
    append = p.txn(PID)
    append(10)
    p.marker(PID, EPOCH, ABORT, coordinator_epoch=1)
    append(5)
    p.marker(PID, EPOCH, COMMIT, coordinator_epoch=2)
    with pytest.raises(TransactionCoordinatorFencedError):
        p.marker(PID, EPOCH, ABORT, coordinator_epoch=1)

    (tmp_path / "q").mkdir()
    q = Partition(ProducerStateManager(tmp_path / "q"))
    q.append(txn_batch(PID, EPOCH, 0, 10, 0) + marker_batch(PID, EPOCH, COMMIT, 10, 1), "replication")
    q.marker(PID, EPOCH, ABORT, coordinator_epoch=2)      # empty transactions
    q.marker(PID, EPOCH, ABORT, coordinator_epoch=2)
    with pytest.raises(TransactionCoordinatorFencedError):
        q.marker(PID, EPOCH, ABORT, coordinator_epoch=1)
    assert q.aborted == []


def test_map_end_offset_moves_for_non_idempotent_data(tmp_path):
    """UnifiedLogTest.testProducerIdMapOffsetUpdatedForNonIdempotentData (producer-state half)"""
    p = Partition(ProducerStateManager(tmp_path))
    p.plain(1)
    assert p.psm.map_end_offset == 1 and not p.psm.active_producers
    assert p.psm.take_snapshot() == snapshot_path(tmp_path, 1)
    assert p.psm.latest_snapshot_offset == 1


def test_finish_append_refuses_a_duplicate(psm):
    from storage_core.producer import PendingAppend
    with pytest.raises(ValueError):
        psm.finish_append(PendingAppend(duplicate=BatchMetadata(0, 0, 0, 0)), 1)


# ============================================================================== expiration

def test_pid_expiration_timeout(psm):
    """testPidExpirationTimeout"""
    append_client(psm, PID, 5, 0, 1, ts=NOW)
    psm.remove_expired_producers(NOW + EXPIRATION_MS + 1)
    append_client(psm, PID, 5, 1, 2, ts=NOW + EXPIRATION_MS + 1)   # any sequence accepted
    assert len(psm.active_producers) == 1
    assert next(iter(psm.active_producers.values())).last_seq == 1
    assert psm.map_end_offset == 3


def test_expiration_boundary(psm):
    append_client(psm, PID, 5, 0, 1, ts=NOW)
    psm.remove_expired_producers(NOW + EXPIRATION_MS - 1)
    assert psm.producer_id_count == 1
    psm.remove_expired_producers(NOW + EXPIRATION_MS)              # idle >= expiration
    assert psm.producer_id_count == 0


def test_producers_with_ongoing_transactions_dont_expire(psm):
    """testProducersWithOngoingTransactionsDontExpire"""
    append_client(psm, PID, 5, 0, 99, txn=True)
    assert psm.first_undecided_offset() == 99
    psm.remove_expired_producers(NOW + EXPIRATION_MS + 1)
    assert psm.last_entry(PID) is not None and psm.first_undecided_offset() == 99
    psm.remove_expired_producers(NOW + EXPIRATION_MS + 1)
    assert psm.last_entry(PID) is not None


def test_has_late_transaction(psm):
    """testHasLateTransaction"""
    t = NOW
    append_client(psm, 39, 2, 0, 100, ts=t, txn=True)
    assert not psm.has_late_transaction(t)
    t += 500
    append_client(psm, 57, 9, 0, 150, ts=t, txn=True)
    assert not psm.has_late_transaction(t)
    t += LATE_TXN_TIMEOUT_MS - 500 + 1
    assert psm.has_late_transaction(t)          # only the first is late
    t += 500
    assert psm.has_late_transaction(t)          # both are
    append_marker(psm, 39, 2, COMMIT, 200, ts=t)
    assert psm.has_late_transaction(t)
    append_marker(psm, 57, 9, COMMIT, 250, ts=t)
    assert not psm.has_late_transaction(t)


def test_has_late_transaction_initialized_after_reload(psm, tmp_path):
    """testHasLateTransactionInitializedAfterReload"""
    append_client(psm, 39, 2, 0, 100, ts=NOW, txn=True)
    append_client(psm, 57, 9, 0, 150, ts=NOW + 500, txn=True)
    psm.take_snapshot()
    t = NOW + LATE_TXN_TIMEOUT_MS + 1
    assert psm.has_late_transaction(t)
    recovered = reopened(tmp_path)
    recovered.truncate_and_reload(0, psm.map_end_offset, t)
    assert recovered.has_late_transaction(t)


def test_has_late_transaction_updated_after_truncation(psm):
    """testHasLateTransactionUpdatedAfterPartialTruncation / AfterFullTruncation"""
    append_client(psm, 39, 2, 0, 100, ts=NOW, txn=True)
    t = NOW + LATE_TXN_TIMEOUT_MS + 1
    assert psm.has_late_transaction(t)
    psm.truncate_and_reload(0, 80, t)
    assert not psm.has_late_transaction(t)
    append_client(psm, 39, 2, 0, 100, ts=NOW, txn=True)
    assert psm.has_late_transaction(t)
    psm.truncate_fully_and_start_at(150)
    assert not psm.has_late_transaction(t)


# =============================================================================== snapshots

def test_take_snapshot(psm, tmp_path):
    """testTakeSnapshot / testSkipSnapshotIfOffsetUnchanged"""
    append_client(psm, PID, EPOCH, 0, 0)
    append_client(psm, PID, EPOCH, 1, 1)
    assert psm.take_snapshot() == tmp_path / "00000000000000000002.snapshot"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000002.snapshot"]
    assert psm.take_snapshot() is None                 # nothing changed
    assert snapshot_offsets(tmp_path) == {2}
    assert read_snapshot(tmp_path / "00000000000000000002.snapshot") == [
        ProducerSnapshotEntry(PID, EPOCH, 1, 1, 0, NOW, -1, -1)]


def test_fetch_snapshot_empty_snapshot(psm):
    """testFetchSnapshotEmptySnapShot"""
    assert psm.fetch_snapshot(1) is None
    append_client(psm, PID, EPOCH, 0, 0)
    psm.take_snapshot(sync=False)
    assert psm.fetch_snapshot(1) == snapshot_path(psm.partition_dir, 1)


def test_read_write_snapshot_entries():
    """testReadWriteSnapshot (entry <-> snapshot entry; the bytes: test_producer_snapshot.py)"""
    with_batch = ProducerStateEntry(1, 2, 3, -1, 100, [BatchMetadata(1, 2, 3, -1)])
    without = ProducerStateEntry(11, 12, 13, 123456, None)
    for e in (with_batch, without):
        back = ProducerStateEntry.from_snapshot_entry(e.to_snapshot_entry())
        assert back == e
    assert with_batch.to_snapshot_entry() == ProducerSnapshotEntry(1, 2, 1, 2, 3, -1, 3, 100)
    assert without.to_snapshot_entry() == ProducerSnapshotEntry(11, 12, -1, -1, 0, 123456, 13, -1)


def test_recover_from_snapshot_unfinished_transaction(psm, tmp_path):
    """testRecoverFromSnapshotUnfinishedTransaction"""
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    append_client(psm, PID, EPOCH, 1, 1, txn=True)
    psm.take_snapshot()
    recovered = reopened(tmp_path)
    recovered.truncate_and_reload(0, 3, NOW)
    e = entry(recovered)           # only the last batch is persisted
    assert (e.first_data_offset, e.first_seq, e.last_data_offset, e.last_seq,
            e.current_txn_first_offset) == (1, 1, 1, 1, 0)
    assert recovered.first_undecided_offset() == 0
    append_client(recovered, PID, EPOCH, 2, 2, txn=True)


def test_recover_from_snapshot_finished_transaction(psm, tmp_path):
    """testRecoverFromSnapshotFinishedTransaction"""
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    append_client(psm, PID, EPOCH, 1, 1, txn=True)
    append_marker(psm, PID, EPOCH, ABORT, 2)
    psm.take_snapshot()
    recovered = reopened(tmp_path)
    recovered.truncate_and_reload(0, 3, NOW)
    e = entry(recovered)
    assert (e.first_data_offset, e.first_seq, e.last_data_offset, e.last_seq,
            e.current_txn_first_offset) == (1, 1, 1, 1, None)


def test_recover_from_snapshot_empty_transaction(psm, tmp_path):
    """testRecoverFromSnapshotEmptyTransaction"""
    append_marker(psm, PID, EPOCH, ABORT, 0, ts=NOW - 7)
    psm.take_snapshot()
    recovered = reopened(tmp_path)
    recovered.truncate_and_reload(0, 1, NOW)
    e = entry(recovered)
    assert (e.last_timestamp, e.current_txn_first_offset) == (NOW - 7, None)


def test_remove_expired_pids_on_reload(psm, tmp_path):
    """testRemoveExpiredPidsOnReload"""
    append_client(psm, PID, EPOCH, 0, 0, ts=0)
    append_client(psm, PID, EPOCH, 1, 1, ts=1)
    psm.take_snapshot()
    recovered = reopened(tmp_path)
    recovered.truncate_and_reload(0, 1, 70000)
    append_client(recovered, PID, EPOCH, 2, 2, ts=70001)
    assert len(recovered.active_producers) == 1
    assert entry(recovered).last_seq == 2
    assert recovered.map_end_offset == 3


def test_expired_producers_dropped_when_loading_snapshot(psm, tmp_path):
    """loadFromSnapshot drops producers idle >= producer.id.expiration.ms (not open txns)."""
    append_client(psm, 1, EPOCH, 0, 0, ts=0)
    append_client(psm, 2, EPOCH, 0, 1, ts=0, txn=True)
    append_client(psm, 3, EPOCH, 0, 2, ts=EXPIRATION_MS)
    psm.take_snapshot()
    recovered = reopened(tmp_path)
    recovered.truncate_and_reload(0, 3, EXPIRATION_MS + 1)
    assert sorted(recovered.active_producers) == [2, 3]


def test_accept_append_without_producer_state_on_replica(psm, tmp_path):
    """testAcceptAppendWithoutProducerStateOnReplica"""
    append_client(psm, PID, EPOCH, 0, 0, ts=0)
    append_client(psm, PID, EPOCH, 1, 1, ts=1)
    psm.take_snapshot()
    recovered = reopened(tmp_path)
    recovered.truncate_and_reload(0, 1, 70000)
    assert PID not in recovered.active_producers
    append_replication(recovered, EPOCH, 2, 2, ts=70001)
    e = recovered.active_producers[PID]
    assert (e.producer_epoch, e.first_seq, e.last_seq) == (EPOCH, 2, 2)


def test_truncate_and_reload_removes_out_of_range_snapshots(psm):
    """testTruncateAndReloadRemovesOutOfRangeSnapshots"""
    for seq in range(5):
        append_client(psm, PID, EPOCH, seq, seq)
        psm.take_snapshot()
    psm.truncate_and_reload(1, 3, NOW)
    assert (psm.oldest_snapshot_offset, psm.latest_snapshot_offset) == (2, 3)
    assert snapshot_offsets(psm.partition_dir) == {2, 3}
    assert entry(psm).last_seq == 2 and psm.map_end_offset == 3


def test_reload_snapshots(psm, tmp_path):
    """testReloadSnapshots (truncateFullyAndReloadSnapshots rescans the directory)"""
    append_client(psm, PID, EPOCH, 1, 1)
    append_client(psm, PID, EPOCH, 2, 2)
    psm.take_snapshot()
    saved = {p: p.read_bytes() for p in tmp_path.iterdir()}
    append_client(psm, PID, EPOCH, 3, 3)
    append_client(psm, PID, EPOCH, 4, 4)
    psm.take_snapshot()
    assert snapshot_offsets(tmp_path) == {3, 5}
    psm.truncate_and_reload(3, 5, NOW)
    assert snapshot_offsets(tmp_path) == {5}
    for p, data in saved.items():
        p.write_bytes(data)
    # truncateFully deletes every known snapshot (5) first, then the rescan finds the copy of 3
    psm.truncate_fully_and_reload_snapshots()
    assert psm.latest_snapshot_offset == 3 and snapshot_offsets(tmp_path) == {3}
    assert not psm.active_producers and psm.map_end_offset == 0
    psm.truncate_and_reload(0, 4, NOW)
    assert entry(psm).last_seq == 2 and psm.map_end_offset == 3


def test_first_unstable_offset_after_truncation(psm):
    """testFirstUnstableOffsetAfterTruncation"""
    append_client(psm, PID, EPOCH, 0, 99, txn=True)
    assert psm.first_unstable_offset() == 99
    psm.take_snapshot()
    append_marker(psm, PID, EPOCH, COMMIT, 105)
    psm.on_high_watermark_updated(106)
    assert psm.first_unstable_offset() is None
    psm.take_snapshot()
    append_client(psm, PID, EPOCH, 1, 106)
    psm.truncate_and_reload(0, 106, NOW)
    assert psm.first_unstable_offset() is None
    psm.truncate_and_reload(0, 100, NOW)
    assert psm.first_unstable_offset() == 99


def test_load_from_snapshot_retains_non_expired_producers(psm):
    """testLoadFromSnapshotRetainsNonExpiredProducers"""
    append_client(psm, 1, EPOCH, 0, 0)
    append_client(psm, 2, EPOCH, 0, 1)
    psm.take_snapshot()
    assert len(psm.active_producers) == 2
    psm.truncate_and_reload(1, 2, NOW)
    assert len(psm.active_producers) == 2
    assert (entry(psm, 1).last_seq, entry(psm, 1).last_data_offset) == (0, 0)
    assert (entry(psm, 2).last_seq, entry(psm, 2).last_data_offset) == (0, 1)


def test_delete_snapshots_before(psm, tmp_path):
    """testDeleteSnapshotsBefore"""
    append_client(psm, PID, EPOCH, 0, 0)
    append_client(psm, PID, EPOCH, 1, 1)
    psm.take_snapshot()
    append_client(psm, PID, EPOCH, 2, 2)
    psm.take_snapshot()
    assert snapshot_offsets(tmp_path) == {2, 3}
    psm.delete_snapshots_before(3)
    assert snapshot_offsets(tmp_path) == {3} and len(list(tmp_path.iterdir())) == 1
    psm.delete_snapshots_before(4)
    assert list(tmp_path.iterdir()) == [] and psm.latest_snapshot_offset is None


def test_truncate_fully_and_start_at(psm, tmp_path):
    """testTruncateFullyAndStartAt"""
    append_client(psm, PID, EPOCH, 0, 0)
    append_client(psm, PID, EPOCH, 1, 1)
    psm.take_snapshot()
    append_client(psm, PID, EPOCH, 2, 2, txn=True)
    psm.take_snapshot()
    assert snapshot_offsets(tmp_path) == {2, 3}
    psm.truncate_fully_and_start_at(0)
    assert list(tmp_path.iterdir()) == []
    assert not psm.active_producers and psm.first_unstable_offset() is None
    assert psm.is_empty() and psm.map_end_offset == 0
    append_client(psm, PID, EPOCH, 0, 0)
    psm.take_snapshot()
    assert snapshot_offsets(tmp_path) == {1}
    psm.truncate_fully_and_start_at(29)           # testProducerIdMapTruncateFullyAndStartAt
    assert psm.map_end_offset == 29 and psm.latest_snapshot_offset is None
    assert psm.take_snapshot() == snapshot_path(tmp_path, 29)


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_load_from_corrupt_snapshot_file(psm, tmp_path, damage):
    """testLoadFromEmptySnapshotFile / testLoadFromTruncatedSnapshotFile / testLoadFromCorruptSnapshotFile"""
    append_client(psm, PID, EPOCH, 0, 0)
    psm.take_snapshot()
    append_client(psm, PID, EPOCH, 1, 1)
    psm.take_snapshot()
    assert psm.latest_snapshot_offset == 2
    latest = snapshot_path(tmp_path, 2)
    with open(latest, "r+b") as f:
        if damage == "empty":
            f.truncate(0)
        elif damage == "truncated":
            f.truncate(os.path.getsize(latest) // 2)
        else:
            f.write(bytes(37))
    recovered = reopened(tmp_path)
    recovered.truncate_and_reload(0, 20, NOW)
    assert not latest.exists()
    assert recovered.active_producers[PID].last_data_offset == 0
    assert recovered.map_end_offset == 1


def test_snapshot_vanishing_before_load_falls_back(psm, tmp_path):
    append_client(psm, PID, EPOCH, 0, 0)
    psm.take_snapshot()
    append_client(psm, PID, EPOCH, 1, 1)
    psm.take_snapshot()
    recovered = reopened(tmp_path)
    snapshot_path(tmp_path, 2).unlink()
    recovered.truncate_and_reload(0, 20, NOW)
    assert recovered.map_end_offset == 1 and recovered.snapshot_offsets == [1]


def _touch_snapshots(directory: Path, *offsets: int) -> None:
    for offset in offsets:
        snapshot_path(directory, offset).touch()


def test_remove_stray_snapshots_keep_clean_shutdown_snapshot(psm, tmp_path):
    """testRemoveStraySnapshotsKeepCleanShutdownSnapshot"""
    _touch_snapshots(tmp_path, 5, 2, 42)
    psm.remove_stray_snapshots([5])
    assert (psm.latest_snapshot_offset, psm.oldest_snapshot_offset) == (42, 5)
    assert sorted(snapshot_offsets(tmp_path)) == [5, 42]


def test_remove_all_stray_snapshots(psm, tmp_path):
    """testRemoveAllStraySnapshots"""
    _touch_snapshots(tmp_path, 5, 2, 42)
    psm.remove_stray_snapshots([42])
    assert sorted(snapshot_offsets(tmp_path)) == [42] and psm.snapshot_offsets == [42]


def test_remove_stray_snapshots_without_segments(psm, tmp_path):
    _touch_snapshots(tmp_path, 2, 5, 42)
    psm.remove_stray_snapshots([])
    assert psm.snapshot_offsets == [42] and snapshot_offsets(tmp_path) == {42}


def test_remove_and_mark_snapshot_for_deletion(tmp_path):
    """testRemoveAndMarkSnapshotForDeletion"""
    _touch_snapshots(tmp_path, 5)
    manager = reopened(tmp_path)
    assert manager.latest_snapshot_offset == 5
    marked = manager.remove_and_mark_snapshot_for_deletion(5)
    assert marked is not None and marked.name.endswith(".snapshot.deleted") and marked.exists()
    assert manager.latest_snapshot_offset is None
    assert manager.remove_and_mark_snapshot_for_deletion(5) is None


def test_remove_and_mark_snapshot_for_deletion_already_deleted(tmp_path):
    """testRemoveAndMarkSnapshotForDeletionAlreadyDeleted"""
    _touch_snapshots(tmp_path, 5)
    manager = reopened(tmp_path)
    snapshot_path(tmp_path, 5).unlink()
    assert manager.remove_and_mark_snapshot_for_deletion(5) is None
    assert manager.latest_snapshot_offset is None


def test_update_parent_dir(psm, tmp_path):
    append_client(psm, PID, EPOCH, 0, 0)
    psm.take_snapshot()
    renamed = tmp_path.parent / (tmp_path.name + "-delete")
    tmp_path.rename(renamed)
    psm.update_parent_dir(renamed)
    assert psm.fetch_snapshot(1) == snapshot_path(renamed, 1)
    psm.delete_snapshots_before(2)
    assert list(renamed.iterdir()) == []


def test_on_log_start_offset_incremented(psm):
    """onLogStartOffsetIncremented: completed txns below the new start are forgotten and the
    map end offset never lags the log start offset."""
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    append_marker(psm, PID, EPOCH, COMMIT, 1)
    assert psm.first_unstable_offset() == 0 and not psm.is_empty()
    psm.on_log_start_offset_incremented(2)
    assert psm.first_unstable_offset() is None
    psm.on_log_start_offset_incremented(10)
    assert psm.map_end_offset == 10
    assert psm.take_snapshot() is None        # last snapshot offset := log start offset


# =========================================================================== rebuilding

def segments_of(*runs: bytes) -> dict[int, bytes]:
    return {next(iter_batches(run)).base_offset: run for run in runs}


def reader(segments: dict[int, bytes]):
    def read_segment(base: int, start: int):
        return [(segments[base], b) for b in iter_batches(segments[base])]
    return read_segment


def test_truncate_to_moves_snapshots_and_map_end_offset(tmp_path):
    """UnifiedLogTest.testProducerIdMapTruncateTo (the manager half of Log.truncate_to)"""
    psm = ProducerStateManager(tmp_path)
    p = Partition(psm)
    p.plain(1)
    p.plain(1)
    psm.take_snapshot()
    p.plain(1)
    psm.take_snapshot()
    for target, latest in ((2, 2), (1, 1), (0, None)):
        log = bytes(p.log[:position_of(p.log, target)] if target < p.leo else p.log)
        segs = segments_of(log) if log else {}
        psm.rebuild_producer_state(log_start_offset=0, last_offset=target, now_ms=NOW,
                                   segment_base_offsets=list(segs), read_segment=reader(segs))
        assert (psm.latest_snapshot_offset, psm.map_end_offset) == (latest, target)


def test_truncate_to_with_no_snapshots_rebuilds_from_log(tmp_path):
    """UnifiedLogTest.testProducerIdMapTruncateToWithNoSnapshots"""
    psm = ProducerStateManager(tmp_path)
    p = Partition(psm)
    p.append(idempotent_batch(PID, EPOCH, 0, 1, 0))
    p.append(idempotent_batch(PID, EPOCH, 1, 1, 1))
    segs = segments_of(bytes(p.log))
    psm.rebuild_producer_state(log_start_offset=0, last_offset=1, now_ms=NOW,
                               segment_base_offsets=[0], read_segment=reader(segs))
    assert len(psm.active_producers) == 1 and entry(psm).last_seq == 0
    assert psm.latest_snapshot_offset == 1 and psm.map_end_offset == 1


def test_rebuild_producer_state_replays_segments_and_snapshots(tmp_path):
    """rebuildProducerState: reload the latest snapshot <= LEO, replay later segments,
    snapshot at the last two segment bases and at LEO."""
    seg0 = txn_batch(1, EPOCH, 0, 3, 0) + idempotent_batch(2, EPOCH, 0, 2, 3)
    seg5 = marker_batch(1, EPOCH, ABORT, 5) + txn_batch(3, EPOCH, 0, 2, 6)
    seg8 = idempotent_batch(2, EPOCH, 2, 1, 8) + plain_batch(2, 9)
    segs = segments_of(seg0, seg5, seg8)
    psm = ProducerStateManager(tmp_path)
    psm.update_map_end_offset(3)            # not empty before: forces a replay
    psm.load_producer_entry(ProducerStateEntry(99))
    psm.rebuild_producer_state(log_start_offset=0, last_offset=11, now_ms=NOW,
                               segment_base_offsets=[0, 5, 8], read_segment=reader(segs))
    assert psm.snapshot_offsets == [5, 8, 11]
    assert psm.first_undecided_offset() == 6 and psm.map_end_offset == 11
    assert (entry(psm, 1).current_txn_first_offset, entry(psm, 2).last_seq) == (None, 2)
    # the snapshot at 5 holds the state before segment 5: txn of producer 1 open
    at5 = read_snapshot(snapshot_path(tmp_path, 5))
    assert {e.producer_id: e.current_txn_first_offset for e in at5} == {1: 0, 2: -1}

    # a manager reopened after a crash resumes from the snapshot at 8: replays segment 8 only
    snapshot_path(tmp_path, 11).unlink()          # as if the process died before closing
    again = reopened(tmp_path)
    replayed: list[int] = []

    def read_segment(base, start):
        replayed.append(base)
        return reader(segs)(base, start)

    again.rebuild_producer_state(log_start_offset=0, last_offset=11, now_ms=NOW,
                                 segment_base_offsets=[0, 5, 8], read_segment=read_segment)
    assert replayed == [8]
    assert again.snapshot_entries() == psm.snapshot_entries()
    assert again.first_undecided_offset() == 6


def test_rebuild_after_clean_shutdown_without_snapshots(tmp_path):
    """rebuildProducerState's upgrade path: no snapshot + clean shutdown -> empty snapshots at
    the last two segment bases and the log end offset, no scan."""
    psm = ProducerStateManager(tmp_path)

    def never(base, start):
        raise AssertionError("no scan expected")

    psm.rebuild_producer_state(log_start_offset=0, last_offset=30, now_ms=NOW,
                               segment_base_offsets=[0, 10, 20], read_segment=never,
                               reload_from_clean_shutdown=True)
    assert psm.snapshot_offsets == [10, 20, 30] and psm.map_end_offset == 30


def test_rebuild_from_compacted_batches(tmp_path):
    """UnifiedLogTest.testRebuildProducerIdMapWithCompactedData / testUpdateProducerIdMapWithCompactedData /
    testRebuildProducerStateWithEmptyCompactedBatch: sequences come from the batch header."""
    # 4 records (seq 0..3) of which the cleaner kept offsets 23 and 25: lastOffsetDelta stays 3
    raw = bytearray(build_batch([RecordInput(b"a", None, NOW), RecordInput(b"c", None, NOW)],
                                base_offset=23, producer_id=PID, producer_epoch=EPOCH,
                                base_sequence=0, offset_deltas=[0, 2]))
    struct.pack_into(">i", raw, 23, 3)
    struct.pack_into(">I", raw, 17, compute_crc(raw, 0, len(raw)))
    compacted = bytes(raw) + plain_batch(2, 27)
    psm = ProducerStateManager(tmp_path)
    psm.rebuild([(compacted, b) for b in iter_batches(compacted, verify=True)], 0, 27)
    assert entry(psm).last_seq == 3 and psm.map_end_offset == 27

    follower = Partition(ProducerStateManager(subdir(tmp_path, "f")))
    follower.append(compacted, "replication")
    assert entry(follower.psm).last_seq == 3

    empty = write_empty_header(base_offset=23, last_offset=24, max_timestamp=NOW, producer_id=PID,
                               producer_epoch=EPOCH, base_sequence=0)
    psm2 = ProducerStateManager(tmp_path / "f")
    psm2.rebuild([(empty, b) for b in iter_batches(empty)], 0, 25)
    assert entry(psm2).last_seq == 1


def test_rebuild_transactional_state(tmp_path):
    """UnifiedLogTest.testRebuildTransactionalState (the replay half)"""
    p = Partition(ProducerStateManager(tmp_path))
    p.append(txn_batch(137, 5, 0, 3, 0))
    _, abort = p.marker(137, 5, ABORT)
    assert p.psm.first_unstable_offset() is None
    fresh = ProducerStateManager(subdir(tmp_path, "r"))
    fresh.rebuild(p.batches(), 0, p.leo)
    fresh.on_high_watermark_updated(abort + 1)
    assert fresh.first_unstable_offset() is None and fresh.map_end_offset == 4


def test_rebuild_range_filters_batches(tmp_path):
    log = idempotent_batch(PID, EPOCH, 0, 2, 0) + idempotent_batch(PID, EPOCH, 2, 2, 2) + \
        idempotent_batch(PID, EPOCH, 4, 2, 4)
    psm = ProducerStateManager(tmp_path)
    psm.rebuild([(log, b) for b in iter_batches(log)], 2, 4)
    e = entry(psm)
    assert (e.first_seq, e.last_seq, len(e.batch_metadata)) == (2, 3, 1)


def test_read_txn_marker(tmp_path):
    raw = marker_batch(PID, EPOCH, ABORT, 7, coordinator_epoch=4, ts=NOW - 3)
    info = next(iter_batches(raw))
    assert read_txn_marker(raw, info) == (EndTransactionMarker(ABORT, 4), NOW - 3)
    data = txn_batch(PID, EPOCH, 0, 1, 0)
    with pytest.raises(ValueError):
        read_txn_marker(data, next(iter_batches(data)))
    key = ControlRecordType.LEADER_CHANGE.record_key()
    leader_change = build_batch([RecordInput(b"\x00\x00", key, NOW)], producer_id=PID,
                                producer_epoch=EPOCH, control=True, transactional=True)
    with pytest.raises(CorruptRecordError, match="not an end transaction marker"):
        read_txn_marker(leader_change, next(iter_batches(leader_change)))


def test_append_needs_marker_for_a_control_batch(psm):
    raw = marker_batch(PID, EPOCH, COMMIT, 0)
    with pytest.raises(ValueError, match="needs its decoded end-transaction marker"):
        psm.prepare_update(PID).append(BatchHeader.parse(raw))
    with pytest.raises(ValueError):
        psm.prepare_update(PID + 1).append(BatchHeader.parse(raw))


def test_entry_retains_five_batches():
    e = ProducerStateEntry(PID)
    for i in range(7):
        e.add_batch(EPOCH, i, i, 0, NOW)
    assert [b.last_seq for b in e.batch_metadata] == [2, 3, 4, 5, 6]
    assert e.batch_with_sequence_range(2, 2) == BatchMetadata(2, 2, 0, NOW)
    assert e.batch_with_sequence_range(1, 1) is None
    e.add_batch(EPOCH + 1, 0, 7, 0, NOW)            # a new epoch forgets the old batches
    assert [b.last_seq for b in e.batch_metadata] == [0]
    assert e.copy() == e and e.copy() is not e


def test_txn_metadata_and_ongoing_view(psm):
    append_client(psm, 2, EPOCH, 0, 7, txn=True)
    append_client(psm, 1, EPOCH, 0, 3, txn=True)       # out of offset order on purpose
    view = psm.ongoing_txns
    assert list(view) == [3, 7]
    assert view[3] == TxnMetadata(1, LogOffsetMetadata(3))
    view.clear()
    assert psm.first_undecided_offset() == 3          # a copy


# ======================================================================= hypothesis model

TXN_PIDS = (11, 12, 13)
IDEMPOTENT_PID = 20

_data = st.tuples(st.just("data"), st.sampled_from(TXN_PIDS), st.integers(1, 4))
_end = st.tuples(st.sampled_from(["commit", "abort"]), st.sampled_from(TXN_PIDS))
actions = st.lists(st.one_of(
    _data, _data, _data, _end, _end,                       # weighted: mostly transactions
    st.tuples(st.sampled_from(["fence", "bad_seq", "stale_epoch", "zombie", "plain_in_txn"]),
              st.sampled_from(TXN_PIDS)),
    st.tuples(st.sampled_from(["plain", "idempotent"]), st.integers(1, 3)),
    st.tuples(st.just("hw"), st.integers(0, 100)),
    st.tuples(st.sampled_from(["coordinator_bump", "reload"])),
), min_size=10, max_size=60)


@dataclass
class ModelProducer:
    epoch: int = 0
    next_seq: int = 0
    txn_first: int | None = None
    coordinator_epoch: int = -1
    has_state: bool = False


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions)
def test_model_interleaved_transactions(tmp_path, steps):
    """Random interleavings of transactional producers (data, COMMIT, ABORT, fencing ABORTs with
    a bumped epoch, zombie coordinators, invalid sequences and epochs), plain and idempotent
    data, high-watermark moves and snapshot reloads: the first undecided / unstable offsets,
    the LSO, every producer's epoch and open transaction, and the aborted-txn entries match a
    plain Python model; replaying the written log rebuilds the same state and entries."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        directory = Path(d)
        p = Partition(ProducerStateManager(directory), auto_hw=False)
        model = {pid: ModelProducer() for pid in TXN_PIDS}
        idem_seq = 0
        coordinator = 0
        unreplicated: list[tuple[int, int]] = []     # (first offset, marker offset)
        expected_aborted: list[AbortedTxn] = []

        def unchanged(call, error):
            before, leo = p.psm.snapshot_entries(), p.leo
            with pytest.raises(error):
                call()
            assert p.psm.snapshot_entries() == before and p.leo == leo

        def end_txn(pid, control_type, epoch):
            m, leo = model[pid], p.leo
            p.append(marker_batch(pid, epoch, control_type, leo, coordinator), "coordinator")
            if m.txn_first is not None:
                if control_type is ABORT:
                    others = [o.txn_first for q, o in model.items()
                              if q != pid and o.txn_first is not None]
                    expected_aborted.append(AbortedTxn(pid, m.txn_first, leo,
                                                       min(others) if others else leo + 1))
                unreplicated.append((m.txn_first, leo))
            m.txn_first, m.coordinator_epoch, m.has_state = None, coordinator, True

        for step in steps:
            kind = step[0]
            if kind == "data":
                _, pid, n = step
                m, leo = model[pid], p.leo
                p.append(txn_batch(pid, m.epoch, m.next_seq, n, leo))
                m.next_seq += n
                m.has_state = True
                if m.txn_first is None:
                    m.txn_first = leo
            elif kind in ("commit", "abort"):
                pid = step[1]
                end_txn(pid, COMMIT if kind == "commit" else ABORT, model[pid].epoch)
            elif kind == "fence":
                pid = step[1]
                end_txn(pid, ABORT, model[pid].epoch + 1)
                model[pid].epoch += 1
                model[pid].next_seq = 0
            elif kind == "bad_seq" and model[step[1]].has_state:
                m = model[step[1]]
                unchanged(lambda: p.append(txn_batch(step[1], m.epoch, m.next_seq + 1, 1, p.leo)),
                          OutOfOrderSequenceError)
            elif kind == "stale_epoch" and model[step[1]].epoch > 0:
                m = model[step[1]]
                unchanged(lambda: p.append(txn_batch(step[1], m.epoch - 1, 0, 1, p.leo)),
                          InvalidProducerEpochError)
            elif kind == "zombie" and model[step[1]].coordinator_epoch > 0:
                m = model[step[1]]
                unchanged(lambda: p.append(marker_batch(step[1], m.epoch, ABORT, p.leo,
                                                        m.coordinator_epoch - 1), "coordinator"),
                          TransactionCoordinatorFencedError)
            elif kind == "plain_in_txn" and model[step[1]].txn_first is not None:
                m = model[step[1]]
                unchanged(lambda: p.append(idempotent_batch(step[1], m.epoch, m.next_seq, 1, p.leo)),
                          InvalidTxnStateError)
            elif kind == "plain":
                p.plain(step[1])
            elif kind == "idempotent":
                p.append(idempotent_batch(IDEMPOTENT_PID, 0, idem_seq, step[1], p.leo))
                idem_seq += step[1]
            elif kind == "hw":
                p.update_hw(p.hw + (p.leo - p.hw) * step[1] // 100)
                unreplicated = [(f, last) for f, last in unreplicated if last >= p.hw]
            elif kind == "coordinator_bump":
                coordinator += 1
            elif kind == "reload":
                p.psm.take_snapshot()
                p.psm = ProducerStateManager(directory)
                p.psm.truncate_and_reload(0, p.leo, NOW)
                unreplicated = []            # Kafka assumes LEO <= HW when reloading

            undecided = [m.txn_first for m in model.values() if m.txn_first is not None]
            unstable = undecided + [f for f, _ in unreplicated]
            assert p.psm.first_undecided_offset() == (min(undecided) if undecided else None)
            assert p.psm.first_unstable_offset() == (min(unstable) if unstable else None)
            lso = min(unstable) if unstable and min(unstable) < p.hw else p.hw
            assert p.psm.log_last_stable_offset(p.hw) == lso
            assert p.aborted == expected_aborted
            assert p.psm.map_end_offset == p.leo
            for pid, m in model.items():
                e = p.psm.last_entry(pid)
                assert (e is not None) == m.has_state
                if e is not None:
                    assert (e.producer_epoch, e.current_txn_first_offset) == (m.epoch, m.txn_first)

        # recovery replay (LogSegment.recover) and the loader's rebuild give the same state
        replayed: list[AbortedTxn] = []
        recovered = ProducerStateManager(subdir(directory, "recovered"))
        for buf, b in p.batches():
            recovered.load_batch(buf, b, on_aborted_txn=replayed.append)
        assert replayed == expected_aborted
        rebuilt = ProducerStateManager(directory / "recovered")
        rebuilt.rebuild(p.batches(), 0, p.leo)
        for other in (recovered, rebuilt):
            assert other.first_undecided_offset() == p.psm.first_undecided_offset()
            assert sorted(other.snapshot_entries(), key=lambda e: e.producer_id) == \
                sorted(p.psm.snapshot_entries(), key=lambda e: e.producer_id)
            assert other.map_end_offset == p.leo


# ============================================================================== through the Log

def test_periodic_producer_id_expiration(tmp_path):
    """UnifiedLogTest.testPeriodicProducerIdExpiration: the LogManager's scheduled
    ``PeriodicProducerExpirationCheck`` (every 100 ms here) forgets a producer once it has been
    idle for ``producer.id.expiration.ms`` (200 ms), and not before. Driven by an injected clock
    and ``run_due_tasks``, no sleeping."""
    from storage_core import LogConfig, LogManager, LogManagerConfig
    from storage_core.config import CleanerConfig
    from storage_core.server import PRODUCER_EXPIRATION_TASK

    now = [NOW]
    with LogManager.open([tmp_path], clock=lambda: now[0],
                         config=LogManagerConfig(producer_id_expiration_check_interval_ms=100),
                         default_config=LogConfig(producer_id_expiration_ms=200),
                         cleaner_config=CleanerConfig(enable_cleaner=False)) as mgr:
        log = mgr.get_or_create_log(("t", 0))
        log.append_raw(build_batch([RecordInput(b"foo", timestamp=now[0])], producer_id=23,
                                   producer_epoch=0, base_sequence=0))
        assert set(log.producer_state.active_producers) == {23}
        now[0] += 100
        assert PRODUCER_EXPIRATION_TASK in mgr.run_due_tasks(now[0])
        assert set(log.producer_state.active_producers) == {23}        # idle 100 ms < 200 ms
        now[0] += 100
        assert PRODUCER_EXPIRATION_TASK in mgr.run_due_tasks(now[0])
        assert set(log.producer_state.active_producers) == set()       # idle 200 ms: expired
        # a new append from the forgotten producer starts afresh at any sequence
        log.append_raw(build_batch([RecordInput(b"bar", timestamp=now[0])], producer_id=23,
                                   producer_epoch=0, base_sequence=7))
        assert log.producer_state.active_producers[23].last_seq == 7


def test_recovery_point_not_incremented_on_producer_state_snapshot_flush_failure(tmp_path, monkeypatch):
    """UnifiedLogTest.testRecoveryPointNotIncrementedOnProducerStateSnapshotFlushFailure. Fault
    injection: ``os.fsync`` fails with EIO for the producer snapshot files (other fsyncs go
    through), as a failing disk would. The roll that takes the snapshot raises and the recovery
    point stays 0; once the disk behaves, a flush fsyncs the snapshot it could not and moves the
    recovery point, which a reopen reads back."""
    import errno

    from storage_core import Log

    real_fsync, failed = os.fsync, []

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".snapshot"):
            failed.append(fd)
            raise OSError(errno.EIO, "injected: snapshot fsync failed")
        real_fsync(fd)

    part = tmp_path / "t-0"
    with Log.open(part) as log:
        log.append_raw(build_batch([RecordInput(b"a")], producer_id=PID, producer_epoch=0, base_sequence=0))
        monkeypatch.setattr(os, "fsync", fsync)
        with pytest.raises(OSError, match="injected"):
            log.roll(1)
        assert failed and log.recovery_point == 0
        monkeypatch.setattr(os, "fsync", real_fsync)
        log.flush()
        assert log.recovery_point == 1
    with Log.open(part) as log:
        assert log.recovery_point == 1 and log.log_end_offset == 1

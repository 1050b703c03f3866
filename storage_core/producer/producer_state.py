"""Producer state: idempotence, transactions and the last stable offset of one partition.

Mirrors Kafka's ``org.apache.kafka.storage.internals.log`` classes ``ProducerStateManager``,
``ProducerStateEntry``, ``ProducerAppendInfo``, ``BatchMetadata``, ``TxnMetadata``,
``CompletedTxn`` and ``LogOffsetMetadata`` (kafka_format.md §10 and §13). The snapshot file
format itself lives in :mod:`storage_core.producer_snapshot`; this module decides what goes in
it, when it is written, which snapshots are kept and how state is rebuilt from the log.

What the manager tracks, per producer id: the producer epoch, the last (at most five) batches'
sequence ranges and offsets (duplicate detection and sequence checks), the coordinator epoch of
the last transaction marker, the last timestamp (expiration) and the first offset of the open
transaction, if any. Across producers: the open transactions by first offset (the first
*undecided* offset), the completed transactions whose marker is not yet below the high
watermark (the first *unstable* offset), the map end offset (the exclusive offset up to which
the state reflects the log) and the snapshot files of the partition directory.

Not thread-safe: every call must be made under the Log's lock, as Kafka does.

How Log should call this
========================

Construction: ``self.producer_state = ProducerStateManager(self.dir,
producer_id_expiration_ms=..., max_transaction_timeout_ms=...)`` (scans existing snapshots).

Append path (``UnifiedLog.append``), after offsets are assigned (baseOffsets patched) and the
segment to write to is chosen (after a roll), before writing the bytes::

    pending = psm.analyze_append(
        ((buf, b) for b in LogInputStream(buf)),      # the (patched) batches being appended
        origin,                                       # "client" (producer), "coordinator"
                                                      # (markers), "replication" (follower/copy)
        segment_base_offset=seg.base_offset, start_position=seg.size)
    if pending.duplicate is not None:                 # client retry of one of the last 5 batches
        return the duplicate's offsets (pending.duplicate.first_offset / .last_offset),
        writing nothing                               # (Kafka: LogAppendInfo of the original)
    seg.append(...)                                   # OutOfOrderSequenceError etc. raised above
    psm.finish_append(pending, next_offset=last_offset + 1,
                      on_aborted_txn=seg.update_txn_index)
    psm.on_high_watermark_updated(self.high_watermark)   # HW == LEO here: after every append

``finish_append`` updates the producers, writes one AbortedTxn per ABORT of a non-empty
transaction through ``on_aborted_txn`` *before* completing it (if the txn-index write raises,
the transaction stays open and the LSO does not move, as in Kafka), and advances the map end
offset even for non-idempotent data. Marker path: the coordinator appends
``end_transaction_marker_batch(...)`` bytes with origin ``"coordinator"`` through the same two
calls (``transaction_version=2`` for KIP-890 markers: the marker epoch must then be bumped).
``Log.last_stable_offset`` becomes ``psm.log_last_stable_offset(self.high_watermark,
log_start_offset=self.log_start_offset)``; a read_committed read stops there and asks the
segments' txn indexes for aborted transactions (kafka_format.md §10).

Load / recovery path (``LogLoader``):

* after the segments are loaded: ``psm.remove_stray_snapshots([s.base_offset for s in segs])``;
* recovering a segment (``LogLoader.recoverSegment``): a *fresh* manager for the same dir,
  ``tmp.rebuild_producer_state(log_start_offset=..., last_offset=seg.base_offset, ...)``, then
  ``seg.recover(on_batch=lambda buf, b: tmp.load_batch(buf, b,
  on_aborted_txn=seg.update_txn_index))`` (recover resets the txn index first, so it is
  rebuilt), then ``tmp.take_snapshot()``;
* at the end of loading (and after ``truncate_to``): ``psm.rebuild_producer_state(
  log_start_offset=lso, last_offset=leo, now_ms=clock(), segment_base_offsets=bases,
  read_segment=lambda base, start: ((chunk, b) for b, chunk, _ in seg_at(base)._walk(pos)),
  reload_from_clean_shutdown=<clean-shutdown marker present>)`` where ``pos`` may be 0 or the
  offset index's position for ``start`` (``_walk`` reads a megabyte at a time and yields
  batches relative to their chunk, as ``recover``'s ``on_batch`` sees them; batches below
  ``start`` or from ``last_offset`` on are skipped by the manager). It reloads the latest
  snapshot <= LEO (dropping out-of-range, corrupt and expired state), replays the log from
  there with origin replication, and snapshots at the last two segment bases and at LEO;
* ``truncate_fully_and_start_at(offset)`` when the whole log is replaced
  (``truncateFullyAndStartAt``).

Snapshots on roll and close: ``roll``: ``psm.update_map_end_offset(new_base)`` then
``path = psm.take_snapshot(sync=False)``, fsyncing ``path`` with the old segment's flush (a
failure there must not advance the recovery point); ``close``: ``psm.take_snapshot()`` (at
LEO, after the last append). After writing the recovery-point checkpoint:
``psm.delete_snapshots_before(min(base of the segment below the recovery point (else the
recovery point), base of the segment below the active one (else the active one's)))``
(``deleteSnapshotsAfterRecoveryPointCheckpoint``). Segment deletion (retention, delete-records,
compaction): ``psm.remove_and_mark_snapshot_for_deletion(seg.base_offset)`` per deleted segment
and ``psm.on_log_start_offset_incremented(new_start)``; producer entries are kept. Every
``producer.id.expiration.check.interval.ms`` (10 min): ``psm.remove_expired_producers(now)``.
"""

from __future__ import annotations

import enum
import logging
import os
from bisect import bisect_left, bisect_right, insort
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar

from ..errors import CorruptRecordError, CorruptSnapshotError, KafkaLogError
from ..format.control import ControlRecordType, EndTransactionMarker
from ..format.log_input_stream import BatchInfo, batch_records
from ..format.record_batch import (INT32_MAX, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
                                  NO_TIMESTAMP, BatchHeader, decrement_sequence)
from ..index import AbortedTxn
from .producer_snapshot import (ProducerSnapshotEntry, list_snapshots, read_snapshot,
                                snapshot_path, write_snapshot)

logger = logging.getLogger(__name__)

__all__ = [
    "NUM_BATCHES_TO_RETAIN", "LATE_TRANSACTION_BUFFER_MS", "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "DEFAULT_MAX_TRANSACTION_TIMEOUT_MS", "AppendOrigin", "ProducerStateError",
    "OutOfOrderSequenceError", "InvalidProducerEpochError", "InvalidTxnStateError",
    "TransactionCoordinatorFencedError", "LogOffsetMetadata", "BatchMetadata", "CompletedTxn",
    "TxnMetadata", "ProducerStateEntry", "ProducerAppendInfo", "PendingAppend",
    "ProducerStateManager", "read_txn_marker",
]

NUM_BATCHES_TO_RETAIN = 5                     # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000    # ProducerStateManager.LATE_TRANSACTION_BUFFER_MS
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000   # producer.id.expiration.ms
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000     # transaction.max.timeout.ms
UNKNOWN_OFFSET = -1                           # LogOffsetMetadata.UNKNOWN_OFFSET
UNKNOWN_FILE_POSITION = -1                    # LogOffsetMetadata.UNKNOWN_FILE_POSITION
DELETED_SUFFIX = ".deleted"                   # LogFileUtils.DELETED_FILE_SUFFIX

Buffer = bytes | bytearray | memoryview


class AppendOrigin(enum.StrEnum):
    """``AppendOrigin``: how much validation an append gets. ``client``: producers, full
    epoch + sequence validation and duplicate detection. ``coordinator``: transaction markers
    and group-coordinator writes, epoch validation only (no sequences). ``replication``:
    followers, log loading and recovery, no validation (the leader did it)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


# ------------------------------------------------------------------------------------ errors

class ProducerStateError(KafkaLogError):
    """A batch refused by producer-state validation; names the producer and the offset."""

    def __init__(self, message: str, *, producer_id: int, offset: int | None = None) -> None:
        super().__init__(message)
        self.producer_id = producer_id
        self.offset = offset


class OutOfOrderSequenceError(ProducerStateError):
    """``OutOfOrderSequenceException``: a sequence that does not continue the producer's last
    one, or a new epoch that does not start at sequence 0."""


class InvalidProducerEpochError(ProducerStateError):
    """``InvalidProducerEpochException``: a batch or marker from an older (fenced) epoch."""


class InvalidTxnStateError(ProducerStateError):
    """``InvalidTxnStateException``: a non-transactional batch inside an open transaction."""


class TransactionCoordinatorFencedError(ProducerStateError):
    """``TransactionCoordinatorFencedException``: a marker from a zombie coordinator (its
    coordinator epoch is below the last one seen for the producer)."""


# ------------------------------------------------------------------------------- value types

@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """``LogOffsetMetadata``: an offset and, when known, the base offset of its segment and its
    byte position in that segment (-1 when unknown: "message offset only")."""

    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = UNKNOWN_FILE_POSITION

    @property
    def message_offset_only(self) -> bool:
        return (self.segment_base_offset == UNKNOWN_OFFSET
                and self.relative_position_in_segment == UNKNOWN_FILE_POSITION)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """``BatchMetadata``: one retained batch of a producer (sequence range and offsets)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        """``DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta)``: wraps below 0."""
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """``CompletedTxn``: a transaction closed by the marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class TxnMetadata:
    """``TxnMetadata``: an open (``last_offset is None``) or completed-but-unreplicated
    transaction, keyed in the manager by ``first_offset.message_offset``."""

    producer_id: int
    first_offset: LogOffsetMetadata
    last_offset: int | None = None


# ------------------------------------------------------------------------ ProducerStateEntry

def _retained() -> deque[BatchMetadata]:
    return deque(maxlen=NUM_BATCHES_TO_RETAIN)


@dataclass(slots=True)
class ProducerStateEntry:
    """``ProducerStateEntry``: the state of one producer id.

    ``batch_metadata`` holds at most :data:`NUM_BATCHES_TO_RETAIN` batches, lowest sequence
    first; a full deque drops its head when a batch is added (``addBatchMetadata``)."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = field(default_factory=_retained)

    def __post_init__(self) -> None:
        if not isinstance(self.batch_metadata, deque) or \
                self.batch_metadata.maxlen != NUM_BATCHES_TO_RETAIN:
            self.batch_metadata = deque(self.batch_metadata, maxlen=NUM_BATCHES_TO_RETAIN)

    @classmethod
    def empty(cls, producer_id: int) -> ProducerStateEntry:
        """``ProducerStateEntry.empty``: no epoch, no coordinator epoch, no timestamp."""
        return cls(producer_id)

    # ---- Kafka's accessors
    @property
    def is_empty(self) -> bool:
        """No retained batch (``isEmpty``); the entry may still carry an epoch (a marker)."""
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset(self) -> int:
        """Offset of the last record of the last retained batch, -1 if none
        (``lastDataOffset``)."""
        return self.last_data_offset

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    # ---- mutation (ProducerStateEntry.addBatch / update / maybeUpdateProducerEpoch)
    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the retained batches (their sequences belong to the old one)."""
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def update(self, next_entry: ProducerStateEntry) -> None:
        """``update(ProducerStateEntry)``: fold an append's result into this entry."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        self.batch_metadata.extend(next_entry.batch_metadata)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def end_transaction(self, producer_epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        """``update(short, int, long)``: the effect of a COMMIT/ABORT marker. The transaction is
        closed; a bumped epoch forgets the retained batches."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    def with_producer_id(self, producer_id: int) -> ProducerStateEntry:
        """``withProducerIdAndBatchMetadata(producerId, empty)``: a copy with no retained batch,
        the starting point of a ``ProducerAppendInfo``."""
        return ProducerStateEntry(producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset)

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset,
                                  deque(self.batch_metadata, maxlen=NUM_BATCHES_TO_RETAIN))

    # ---- duplicates
    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """``findDuplicateBatch``: the retained batch with exactly ``header``'s sequence range,
        from the same epoch, or None. The Log calls it for client appends *before* validating
        (a hit means "already written": answer with the original offsets)."""
        if header.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(header.base_sequence, header.last_sequence)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batch_metadata:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    # ---- snapshot conversion (ProducerStateManager.writeSnapshot / readSnapshot)
    def to_snapshot_entry(self) -> ProducerSnapshotEntry:
        """Only the last retained batch is persisted, as in Kafka."""
        return ProducerSnapshotEntry(
            self.producer_id, self.producer_epoch, self.last_seq, self.last_data_offset,
            self.last_offset_delta, self.last_timestamp, self.coordinator_epoch,
            -1 if self.current_txn_first_offset is None else self.current_txn_first_offset)

    @classmethod
    def from_snapshot_entry(cls, e: ProducerSnapshotEntry) -> ProducerStateEntry:
        entry = cls(e.producer_id, e.producer_epoch, e.coordinator_epoch, e.timestamp,
                    e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None)
        if e.last_offset >= 0:
            entry.batch_metadata.append(
                BatchMetadata(e.last_sequence, e.last_offset, e.offset_delta, e.timestamp))
        return entry


# ------------------------------------------------------------------------ ProducerAppendInfo

def _in_sequence(last_seq: int, next_seq: int) -> bool:
    """``ProducerAppendInfo.inSequence``: +1, or 0 after Int.MAX (wraparound)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppendInfo:
    """``ProducerAppendInfo``: validates the batches one producer appends in one request (or
    one replayed run) against its state before the append, and accumulates the resulting entry
    and the transactions it starts. Nothing in the manager changes until
    :meth:`ProducerStateManager.update` is called with it."""

    def __init__(self, producer_id: int, current_entry: ProducerStateEntry,
                 origin: AppendOrigin | str, *, partition: str = "") -> None:
        self.producer_id = producer_id
        self.origin = AppendOrigin(origin)
        self.partition = partition
        self._current = current_entry
        self._updated = current_entry.with_producer_id(producer_id)
        self._transactions: list[TxnMetadata] = []

    # ---- validation (checkProducerEpoch / checkSequence / checkCoordinatorEpoch)
    def _check_producer_epoch(self, producer_epoch: int, offset: int,
                              transaction_version: int | None) -> None:
        """``checkProducerEpoch``. ``transaction_version`` is None for data batches (Kafka's
        TV_UNKNOWN) and for markers 0/1 (legacy: the marker epoch may equal the current one) or
        2 (KIP-890: it must be higher)."""
        current = self._updated.producer_epoch
        strict = transaction_version is not None and transaction_version >= 2
        if producer_epoch < current or (strict and producer_epoch == current):
            txn_open = self._updated.current_txn_first_offset is not None
            if strict and producer_epoch == current and not txn_open:
                # KAFKA-19999: a retried TV2 marker for an already completed transaction
                logger.info("Idempotent transaction marker retry detected for producer %d epoch %d "
                         "in %s; allowing the duplicate marker", self.producer_id,
                         producer_epoch, self.partition)
                return
            message = (f"Epoch of producer {self.producer_id} at offset {offset} in "
                       f"{self.partition} is {producer_epoch}, which is "
                       f"{'<=' if strict else '<'} the last seen epoch {current}"
                       + ("" if transaction_version is None else f" (TV{transaction_version})"))
            if self.origin is AppendOrigin.REPLICATION:
                logger.warning(message)
            else:
                raise InvalidProducerEpochError(message, producer_id=self.producer_id,
                                                offset=offset)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self._updated, self._current
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in partition {self.partition}: {producer_epoch} (request "
                    f"epoch), {first_seq} (seq. number), {updated.producer_epoch} (current "
                    f"producer epoch)", producer_id=self.producer_id, offset=offset)
            return
        if not updated.is_empty:
            last_seq = updated.last_seq
        elif producer_epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # no current epoch (all of the producer's records deleted by retention or
        # DeleteRecords): any sequence is accepted
        if not (current.producer_epoch == NO_PRODUCER_EPOCH or _in_sequence(last_seq, first_seq)):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in partition {self.partition}: {first_seq} (incoming seq. number), "
                f"{last_seq} (current end sequence number)",
                producer_id=self.producer_id, offset=offset)

    def _check_coordinator_epoch(self, marker: EndTransactionMarker, offset: int) -> None:
        if self._updated.coordinator_epoch > marker.coordinator_epoch:
            message = (f"Invalid coordinator epoch for producerId {self.producer_id} at offset "
                       f"{offset} in partition {self.partition}: {marker.coordinator_epoch} "
                       f"(zombie), {self._updated.coordinator_epoch} (current)")
            if self.origin is AppendOrigin.REPLICATION:
                logger.info(message)
            else:
                raise TransactionCoordinatorFencedError(message, producer_id=self.producer_id,
                                                        offset=offset)

    # ---- appends
    def append(self, header: BatchHeader, *, marker: EndTransactionMarker | None = None,
               marker_timestamp: int | None = None,
               first_offset_metadata: LogOffsetMetadata | None = None,
               base_offset: int | None = None,
               transaction_version: int = 0) -> CompletedTxn | None:
        """``ProducerAppendInfo.append(RecordBatch, ...)`` for one v2 batch of this producer.

        ``header.base_offset`` must be the batch's absolute offset (``base_offset`` overrides
        it, e.g. before the Log patches the bytes). A control batch needs its decoded ``marker``
        (see :func:`read_txn_marker`) and the marker record's timestamp (default: the batch's
        max timestamp, which is the record's for a one-record batch); a control batch with no
        records (left by the cleaner) changes nothing. Returns the transaction a COMMIT/ABORT
        marker completes, if it was non-empty."""
        if header.producer_id != self.producer_id:
            raise ValueError(f"batch of producer {header.producer_id} given to the append info "
                             f"of producer {self.producer_id}")
        first = header.base_offset if base_offset is None else base_offset
        last = first + header.last_offset_delta
        if header.is_control:
            if marker is None:
                if header.records_count == 0:
                    # the whole transaction was cleaned from the log: nothing to do
                    return None
                raise ValueError(f"the control batch at offset {first} needs its decoded "
                                 "end-transaction marker")
            timestamp = header.max_timestamp if marker_timestamp is None else marker_timestamp
            return self.append_end_txn_marker(marker, header.producer_epoch, first, timestamp,
                                              transaction_version=transaction_version)
        if first_offset_metadata is None:
            first_offset_metadata = LogOffsetMetadata(first)
        elif first_offset_metadata.message_offset != first:
            raise ValueError(f"first offset metadata {first_offset_metadata} does not describe the "
                             f"batch at offset {first}")
        self.append_data_batch(header.producer_epoch, header.base_sequence, header.last_sequence,
                               header.max_timestamp, first_offset_metadata, last,
                               header.is_transactional)
        return None

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, last_timestamp: int,
                          first_offset: LogOffsetMetadata | int, last_offset: int,
                          is_transactional: bool) -> None:
        """``appendDataBatch``: validate (epoch always unless replicating, sequence for client
        appends only), record the batch and open a transaction on its first batch."""
        if isinstance(first_offset, int):
            first_offset = LogOffsetMetadata(first_offset)
        offset = first_offset.message_offset
        self._check_producer_epoch(epoch, offset, None)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, offset)
        self._updated.add_batch(epoch, last_seq, last_offset, last_offset - offset, last_timestamp)
        txn_first = self._updated.current_txn_first_offset
        if txn_first is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{offset} in partition {self.partition}: its transaction from offset "
                f"{txn_first} is still open", producer_id=self.producer_id, offset=offset)
        if txn_first is None and is_transactional:
            self._updated.current_txn_first_offset = offset
            self._transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(self, marker: EndTransactionMarker, producer_epoch: int,
                              offset: int, timestamp: int, *,
                              transaction_version: int = 0) -> CompletedTxn | None:
        """``appendEndTxnMarker``: fence on producer epoch (``transaction_version`` 0/1: the
        marker epoch may equal the current one; 2: it must be higher, except an idempotent
        retry after the transaction completed) and coordinator epoch, then close the open
        transaction. Markers of empty transactions complete nothing."""
        # followers validate as TV0: the leader already applied the stricter rule
        tv = 0 if self.origin is AppendOrigin.REPLICATION else transaction_version
        self._check_producer_epoch(producer_epoch, offset, tv)
        self._check_coordinator_epoch(marker, offset)
        txn_first = self._updated.current_txn_first_offset
        completed = None
        if txn_first is not None:
            completed = CompletedTxn(self.producer_id, txn_first, offset,
                                     marker.control_type is ControlRecordType.ABORT)
        self._updated.end_transaction(producer_epoch, marker.coordinator_epoch, timestamp)
        return completed

    def to_entry(self) -> ProducerStateEntry:
        """The producer's entry as it would be after this append (``toEntry``)."""
        return self._updated

    @property
    def started_transactions(self) -> list[TxnMetadata]:
        return list(self._transactions)

    def __repr__(self) -> str:
        u = self._updated
        return (f"ProducerAppendInfo(producer_id={self.producer_id}, "
                f"producer_epoch={u.producer_epoch}, first_sequence={u.first_seq}, "
                f"last_sequence={u.last_seq}, current_txn_first_offset="
                f"{u.current_txn_first_offset}, coordinator_epoch={u.coordinator_epoch}, "
                f"last_timestamp={u.last_timestamp}, started_transactions={self._transactions})")


@dataclass(slots=True)
class PendingAppend:
    """What :meth:`ProducerStateManager.analyze_append` found (``analyzeAndValidateProducerState``):
    one append info per producer, the transactions the markers complete, and the duplicate batch
    if the append is a client retry (then nothing else is filled in and nothing is written)."""

    producers: dict[int, ProducerAppendInfo] = field(default_factory=dict)
    completed_txns: list[CompletedTxn] = field(default_factory=list)
    duplicate: BatchMetadata | None = None


def read_txn_marker(buf: Buffer, info: BatchInfo) -> tuple[EndTransactionMarker, int] | None:
    """The end-transaction marker of the control batch ``info`` in ``buf`` and the marker
    record's timestamp, or None for a control batch without records (cleaned). Raises
    ``CorruptRecordError`` for a control batch that is not a COMMIT/ABORT marker."""
    h = info.header
    if h is None or not h.is_control:
        raise ValueError(f"the batch at position {info.position} is not a v2 control batch")
    if h.records_count == 0:
        return None
    records = batch_records(buf, info)
    if not records:
        return None
    rec = records[0]
    try:
        marker = EndTransactionMarker.deserialize(rec.key, rec.value)
    except ValueError as e:
        raise CorruptRecordError(f"Control batch of producer {h.producer_id} is not an end "
                                 f"transaction marker: {e}", position=info.position,
                                 offset=h.base_offset) from e
    return marker, rec.timestamp


# ----------------------------------------------------------------------------- sorted maps

V = TypeVar("V")


class _OffsetMap(Generic[V]):
    """A small sorted map keyed by offset (Kafka's ``TreeMap`` / ``ConcurrentSkipListMap``)."""

    __slots__ = ("_keys", "_values")

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._values: dict[int, V] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: int) -> bool:
        return key in self._values

    def get(self, key: int) -> V | None:
        return self._values.get(key)

    def put(self, key: int, value: V) -> None:
        if key not in self._values:
            insort(self._keys, key)
        self._values[key] = value

    def pop(self, key: int) -> V | None:
        value = self._values.pop(key, None)
        if value is not None:
            del self._keys[bisect_left(self._keys, key)]
        return value

    def first(self) -> tuple[int, V] | None:
        return (self._keys[0], self._values[self._keys[0]]) if self._keys else None

    def last(self) -> tuple[int, V] | None:
        return (self._keys[-1], self._values[self._keys[-1]]) if self._keys else None

    def keys(self) -> list[int]:
        return list(self._keys)

    def items(self) -> list[tuple[int, V]]:
        return [(k, self._values[k]) for k in self._keys]

    def values(self) -> Iterator[V]:
        return (self._values[k] for k in self._keys)

    def clear(self) -> None:
        self._keys.clear()
        self._values.clear()


# ---------------------------------------------------------------------- ProducerStateManager

class ProducerStateManager:
    """``ProducerStateManager`` of one partition directory (see the module docstring for how
    the Log drives it)."""

    def __init__(self, partition_dir: str | os.PathLike[str], *,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS) -> None:
        self._dir = Path(partition_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: _OffsetMap[TxnMetadata] = _OffsetMap()        # ongoingTxns
        self._unreplicated: _OffsetMap[TxnMetadata] = _OffsetMap()   # unreplicatedTxns
        self._oldest_txn_last_timestamp = -1
        self._last_map_offset = 0
        self._last_snap_offset = 0
        self._snapshots = self._load_snapshots()

    # ---- identity
    @property
    def partition_dir(self) -> Path:
        return self._dir

    def update_parent_dir(self, partition_dir: str | os.PathLike[str]) -> None:
        """``updateParentDir``: the partition directory was renamed (e.g. ``-delete``)."""
        self._dir = Path(partition_dir)
        renamed: _OffsetMap[Path] = _OffsetMap()
        for offset, _ in self._snapshots.items():
            renamed.put(offset, snapshot_path(self._dir, offset))
        self._snapshots = renamed

    # ---- producers
    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """A read-only live view of the producers by id (``activeProducers``)."""
        return MappingProxyType(self._producers)

    @property
    def producer_id_count(self) -> int:
        return len(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def is_empty(self) -> bool:
        return not self._producers and not len(self._unreplicated)

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """The retained batch a client batch duplicates, if any (the Log's duplicate check)."""
        entry = self._producers.get(header.producer_id)
        return None if entry is None else entry.find_duplicate_batch(header)

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        """``loadProducerEntry``: install an entry (from a snapshot), with its open txn."""
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self._ongoing.put(entry.current_txn_first_offset,
                              TxnMetadata(entry.producer_id,
                                          LogOffsetMetadata(entry.current_txn_first_offset)))

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int) -> None:
        """Drop producers idle for ``producer.id.expiration.ms`` with no open transaction."""
        for pid in [p for p, e in self._producers.items() if self._is_expired(now_ms, e)]:
            del self._producers[pid]

    # ---- appends
    def prepare_update(self, producer_id: int,
                       origin: AppendOrigin | str = AppendOrigin.CLIENT) -> ProducerAppendInfo:
        current = self._producers.get(producer_id)
        if current is None:
            current = ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(producer_id, current, origin, partition=self._dir.name)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Apply a validated append (``update``)."""
        pid = append_info.producer_id
        if pid == NO_PRODUCER_ID:
            raise ValueError(f"Invalid producer id {pid} passed to update for partition "
                             f"{self._dir.name}")
        updated = append_info.to_entry()
        current = self._producers.get(pid)
        if current is not None:
            current.update(updated)
        else:
            self._producers[pid] = updated.copy()
        for txn in append_info.started_transactions:
            self._ongoing.put(txn.first_offset.message_offset, txn)
        self._update_oldest_txn_timestamp()

    def update_map_end_offset(self, last_offset: int) -> None:
        """Set the map end offset: the state now reflects the log below ``last_offset``."""
        self._last_map_offset = last_offset

    @property
    def map_end_offset(self) -> int:
        return self._last_map_offset

    def analyze_append(self, batches: Iterable[tuple[Buffer, BatchInfo]],
                       origin: AppendOrigin | str = AppendOrigin.CLIENT, *,
                       segment_base_offset: int = UNKNOWN_OFFSET,
                       start_position: int = UNKNOWN_FILE_POSITION,
                       transaction_version: int = 0) -> PendingAppend:
        """``UnifiedLog.analyzeAndValidateProducerState`` for the batches of one append, with
        their offsets already assigned. ``(buf, info)`` pairs as ``LogInputStream`` yields them;
        ``start_position`` is where ``buf``'s position 0 will land in the segment whose base
        offset is ``segment_base_offset`` (both optional: the first unstable offset then has
        no segment position). Raises the validation errors; mutates nothing."""
        origin = AppendOrigin(origin)
        pending = PendingAppend()
        for buf, info in batches:
            h = info.header
            if h is None or h.producer_id == NO_PRODUCER_ID:
                continue
            if origin is AppendOrigin.CLIENT:
                entry = self._producers.get(h.producer_id)
                duplicate = None if entry is None else entry.find_duplicate_batch(h)
                if duplicate is not None:
                    return PendingAppend(duplicate=duplicate)
            first_meta = None
            if h.is_transactional and segment_base_offset >= 0 and start_position >= 0:
                first_meta = LogOffsetMetadata(h.base_offset, segment_base_offset,
                                               start_position + info.position)
            append_info = pending.producers.get(h.producer_id)
            if append_info is None:
                append_info = pending.producers[h.producer_id] = self.prepare_update(
                    h.producer_id, origin)
            completed = self._append_batch(append_info, buf, info, first_meta,
                                           transaction_version)
            if completed is not None:
                pending.completed_txns.append(completed)
        return pending

    def finish_append(self, pending: PendingAppend, next_offset: int, *,
                      on_aborted_txn: Callable[[AbortedTxn], None] | None = None
                      ) -> list[AbortedTxn]:
        """The producer-state half of ``UnifiedLog.append`` once the bytes are written:
        update the producers, write each aborted transaction through ``on_aborted_txn`` (the
        segment's txn index) and complete the transactions, then set the map end offset to
        ``next_offset`` (the new log end offset), even for non-idempotent data."""
        if pending.duplicate is not None:
            raise ValueError("a duplicate append writes nothing and changes no producer state")
        for append_info in pending.producers.values():
            self.update(append_info)
        aborted = self.complete_txns(pending.completed_txns, on_aborted_txn=on_aborted_txn)
        self.update_map_end_offset(next_offset)
        return aborted

    @staticmethod
    def _append_batch(append_info: ProducerAppendInfo, buf: Buffer, info: BatchInfo,
                      first_meta: LogOffsetMetadata | None,
                      transaction_version: int = 0) -> CompletedTxn | None:
        h = info.header
        assert h is not None
        if h.is_control:
            found = read_txn_marker(buf, info)
            if found is None:
                return append_info.append(h)
            marker, timestamp = found
            return append_info.append(h, marker=marker, marker_timestamp=timestamp,
                                      transaction_version=transaction_version)
        return append_info.append(h, first_offset_metadata=first_meta)

    # ---- transactions
    def complete_txns(self, completed_txns: Iterable[CompletedTxn], *,
                      on_aborted_txn: Callable[[AbortedTxn], None] | None = None
                      ) -> list[AbortedTxn]:
        """For each completed transaction in order: hand the aborted ones' txn-index entry to
        ``on_aborted_txn``, then ``complete_txn``. If the callback raises, that transaction and
        the following ones stay open (the LSO cannot pass them), as in Kafka."""
        aborted = []
        for txn in completed_txns:
            entry = self.aborted_txn_entry(txn)
            if entry is not None:
                if on_aborted_txn is not None:
                    on_aborted_txn(entry)
                aborted.append(entry)
            self.complete_txn(txn)
        return aborted

    def aborted_txn_entry(self, completed_txn: CompletedTxn) -> AbortedTxn | None:
        """The ``.txnindex`` entry of an ABORT (``LogSegment.updateTxnIndex``); None for a
        COMMIT. Compute it before :meth:`complete_txn`."""
        if not completed_txn.is_aborted:
            return None
        return AbortedTxn(completed_txn.producer_id, completed_txn.first_offset,
                          completed_txn.last_offset, self.last_stable_offset(completed_txn))

    def last_stable_offset(self, completed_txn: CompletedTxn) -> int:
        """``lastStableOffset(CompletedTxn)`` (kafka_format.md §10): the first offset of the
        earliest open transaction of another producer, else the marker offset + 1."""
        for txn in self._ongoing.values():
            if txn.producer_id != completed_txn.producer_id:
                return txn.first_offset.message_offset
        return completed_txn.last_offset + 1

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        """Close the transaction; it stays unstable until the HW passes its marker."""
        txn = self._ongoing.pop(completed_txn.first_offset)
        if txn is None:
            raise ValueError(f"Attempted to complete transaction {completed_txn} on partition "
                             f"{self._dir.name} which was not started")
        txn.last_offset = completed_txn.last_offset
        self._unreplicated.put(completed_txn.first_offset, txn)
        self._update_oldest_txn_timestamp()

    @property
    def ongoing_txns(self) -> dict[int, TxnMetadata]:
        """The open transactions by first offset, lowest first (a copy)."""
        return dict(self._ongoing.items())

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below the high watermark."""
        self._remove_unreplicated_txns(high_watermark)

    def _remove_unreplicated_txns(self, offset: int) -> None:
        for first, txn in self._unreplicated.items():
            if txn.last_offset is not None and txn.last_offset < offset:
                self._unreplicated.pop(first)

    def first_unstable_offset_metadata(self) -> LogOffsetMetadata | None:
        """``firstUnstableOffset``: the first offset of the earliest transaction that is open or
        whose marker is not yet below the high watermark."""
        unreplicated = self._unreplicated.first()
        undecided = self._ongoing.first()
        if unreplicated is None:
            return None if undecided is None else undecided[1].first_offset
        if undecided is None:
            return unreplicated[1].first_offset
        if undecided[1].first_offset.message_offset < unreplicated[1].first_offset.message_offset:
            return undecided[1].first_offset
        return unreplicated[1].first_offset

    def first_unstable_offset(self, *, log_start_offset: int = 0) -> int | None:
        """The first unstable offset as a number; the Log passes its log start offset, below
        which it never reports one (``UnifiedLog.maybeIncrementFirstUnstableOffset``)."""
        meta = self.first_unstable_offset_metadata()
        return None if meta is None else max(meta.message_offset, log_start_offset)

    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest open transaction (ignores replication)."""
        first = self._ongoing.first()
        return None if first is None else first[1].first_offset.message_offset

    def log_last_stable_offset(self, high_watermark: int, *, log_start_offset: int = 0) -> int:
        """``UnifiedLog.lastStableOffset``: the first unstable offset (bounded below by the log
        start offset) if it is below the high watermark, else the high watermark."""
        fuo = self.first_unstable_offset(log_start_offset=log_start_offset)
        return fuo if fuo is not None and fuo < high_watermark else high_watermark

    def has_late_transaction(self, now_ms: int) -> bool:
        """``hasLateTransaction``: the oldest open transaction's producer has been silent for
        longer than ``transaction.max.timeout.ms`` + 5 minutes."""
        ts = self._oldest_txn_last_timestamp
        return ts > 0 and now_ms - ts > self.max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS

    def _update_oldest_txn_timestamp(self) -> None:
        first = self._ongoing.first()
        if first is None:
            self._oldest_txn_last_timestamp = -1
        else:
            entry = self._producers.get(first[1].producer_id)
            self._oldest_txn_last_timestamp = entry.last_timestamp if entry is not None else -1

    # ---- snapshots
    def _load_snapshots(self) -> _OffsetMap[Path]:
        found: _OffsetMap[Path] = _OffsetMap()
        for offset, path in list_snapshots(self._dir):
            found.put(offset, path)
        return found

    @property
    def latest_snapshot_offset(self) -> int | None:
        last = self._snapshots.last()
        return None if last is None else last[0]

    @property
    def oldest_snapshot_offset(self) -> int | None:
        first = self._snapshots.first()
        return None if first is None else first[0]

    @property
    def snapshot_offsets(self) -> list[int]:
        return self._snapshots.keys()

    def fetch_snapshot(self, offset: int) -> Path | None:
        """The snapshot file at exactly ``offset``, if the manager knows one."""
        return self._snapshots.get(offset)

    def snapshot_entries(self) -> list[ProducerSnapshotEntry]:
        """What :meth:`take_snapshot` would write, in producer insertion order."""
        return [e.to_snapshot_entry() for e in self._producers.values()]

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write ``<map end offset>.snapshot`` unless the map end offset is not above the last
        snapshot's; returns the path written (``sync=False``: the caller fsyncs it later, as
        Kafka's roll does)."""
        if self._last_map_offset <= self._last_snap_offset:
            return None
        path = write_snapshot(self._dir, self._last_map_offset, self.snapshot_entries(), sync=sync)
        logger.info("Wrote producer snapshot at offset %d with %d producer ids in %s",
                 self._last_map_offset, len(self._producers), self._dir)
        self._snapshots.put(self._last_map_offset, path)
        self._last_snap_offset = self._last_map_offset
        return path

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset)
        if path is not None:
            path.unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete the snapshot files below ``offset`` (exclusive)."""
        for snap in self._snapshots.keys():
            if snap >= offset:
                break
            self._remove_and_delete_snapshot(snap)

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Forget the snapshot at ``offset`` and rename it ``.deleted`` (async deletion);
        returns the new path, or None if there was none or it was already gone."""
        path = self._snapshots.pop(offset)
        if path is None:
            return None
        target = path.with_name(path.name + DELETED_SUFFIX)
        try:
            path.rename(target)
        except FileNotFoundError:
            logger.info("Failed to rename producer state snapshot %s with deletion suffix because it "
                     "was already deleted", path)
            return None
        return target

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """``removeStraySnapshots``: delete the snapshots that match no segment base offset,
        except the largest stray one if it is above every segment base (the snapshot a clean
        shutdown writes at the log end offset)."""
        bases = set(segment_base_offsets)
        max_base = max(bases) if bases else None
        snapshots = self._load_snapshots()
        latest_stray: int | None = None
        for offset in snapshots.keys():
            if offset in bases:
                continue
            if latest_stray is not None:
                stray = snapshots.pop(latest_stray)
                if stray is not None:
                    stray.unlink(missing_ok=True)
            latest_stray = offset
        if latest_stray is not None and max_base is not None and latest_stray < max_base:
            stray = snapshots.pop(latest_stray)
            if stray is not None:
                stray.unlink(missing_ok=True)
        self._snapshots = snapshots

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while True:
            latest = self._snapshots.last()
            if latest is None:
                self._last_snap_offset = self._last_map_offset = log_start_offset
                return
            offset, path = latest
            try:
                logger.info("Loading producer state from snapshot file '%s'", path)
                entries = read_snapshot(path)
            except (CorruptSnapshotError, FileNotFoundError) as e:
                logger.warning("Failed to load producer snapshot from '%s': %s", path, e)
                self._remove_and_delete_snapshot(offset)
                continue
            for e in entries:
                entry = ProducerStateEntry.from_snapshot_entry(e)
                if not self._is_expired(now_ms, entry):
                    self.load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = offset
            self._update_oldest_txn_timestamp()
            return

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int,
                            now_ms: int) -> None:
        """``truncateAndReload``: delete the snapshots at or below the log start offset and
        above the log end offset; unless the map already ends at the log end offset, forget
        all state and load the latest remaining snapshot (a corrupt one is deleted and the
        previous one tried), dropping expired producers. Assumes LEO <= high watermark, so
        completed transactions are forgotten too."""
        for offset in self._snapshots.keys():
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_and_delete_snapshot(offset)
        if log_end_offset != self._last_map_offset:
            self._producers.clear()
            self._ongoing.clear()
            self._unreplicated.clear()
            self._update_oldest_txn_timestamp()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Forget completed transactions below the new log start offset and move the map end
        offset up to it if needed."""
        self._remove_unreplicated_txns(log_start_offset)
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset
        self._last_snap_offset = log_start_offset if latest is None else latest

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything and delete every snapshot; the map starts at ``offset``."""
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for snap in self._snapshots.keys():
            self._remove_and_delete_snapshot(snap)
        self._last_snap_offset = 0
        self._last_map_offset = offset
        self._update_oldest_txn_timestamp()

    def truncate_fully_and_reload_snapshots(self) -> None:
        """``truncateFullyAndReloadSnapshots``: forget everything, then rescan the directory's
        snapshot files (state itself is loaded by the next :meth:`truncate_and_reload`)."""
        logger.info("Reloading the producer state snapshots of %s", self._dir)
        self.truncate_fully_and_start_at(0)
        self._snapshots = self._load_snapshots()

    # ---- rebuilding from the log
    def load_batch(self, buf: Buffer, info: BatchInfo, *,
                   on_aborted_txn: Callable[[AbortedTxn], None] | None = None
                   ) -> CompletedTxn | None:
        """``LogSegment.updateProducerState``: apply one batch read back from the log (origin
        replication, no validation) and move the map end offset past it. Usable as (part of)
        ``LogSegment.recover``'s ``on_batch``; ``on_aborted_txn`` rebuilds the txn index."""
        h = info.header
        completed = None
        if h is not None and h.producer_id != NO_PRODUCER_ID:
            append_info = self.prepare_update(h.producer_id, AppendOrigin.REPLICATION)
            completed = self._append_batch(append_info, buf, info, None)
            self.update(append_info)
            if completed is not None:
                self.complete_txns([completed], on_aborted_txn=on_aborted_txn)
        self.update_map_end_offset(info.last_offset + 1)
        return completed

    def _load_producers_from_records(self, batches: Iterable[tuple[Buffer, BatchInfo]],
                                     from_offset: int, to_offset: int) -> None:
        """``UnifiedLog.loadProducersFromRecords`` over the batches whose last offset is in
        ``[from_offset, to_offset)``: origin replication, one append info per producer, then
        every completed transaction completed (the txn index is already on disk)."""
        loaded: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for buf, info in batches:
            if info.last_offset < from_offset:
                continue
            if info.last_offset >= to_offset:
                break
            h = info.header
            if h is None or h.producer_id == NO_PRODUCER_ID:
                continue
            append_info = loaded.get(h.producer_id)
            if append_info is None:
                append_info = loaded[h.producer_id] = self.prepare_update(
                    h.producer_id, AppendOrigin.REPLICATION)
            txn = self._append_batch(append_info, buf, info, None)
            if txn is not None:
                completed.append(txn)
        for append_info in loaded.values():
            self.update(append_info)
        for txn in completed:
            self.complete_txn(txn)

    def rebuild(self, batches: Iterable[tuple[Buffer, BatchInfo]], from_offset: int,
                to_offset: int) -> None:
        """Replay the log's batches whose last offset is in ``[from_offset, to_offset)`` into
        the current state (typically loaded from the latest snapshot, ``from_offset`` being the
        map end offset) and set the map end offset to ``to_offset``."""
        self._load_producers_from_records(batches, from_offset, to_offset)
        self.update_map_end_offset(to_offset)

    def rebuild_producer_state(self, *, log_start_offset: int, last_offset: int, now_ms: int,
                               segment_base_offsets: Sequence[int],
                               read_segment: Callable[[int, int],
                                                      Iterable[tuple[Buffer, BatchInfo]]],
                               reload_from_clean_shutdown: bool = False) -> None:
        """``UnifiedLog.rebuildProducerState``: make the state reflect the log up to
        ``last_offset`` (exclusive).

        With no snapshot at all after a clean shutdown, empty snapshots are written at the last
        two segment bases and ``last_offset`` instead of scanning. Otherwise the state is
        reloaded from the latest snapshot <= ``last_offset`` and every segment from the map end
        offset on is replayed; ``read_segment(base_offset, start_offset)`` yields that segment's
        ``(buf, info)`` batches from (at least) the one holding ``start_offset``. Snapshots are
        taken at the last two segment bases passed and at ``last_offset``."""
        bases = sorted(segment_base_offsets)
        to_snapshot = [bases[-2]] if len(bases) > 1 else []
        to_snapshot += [bases[-1], last_offset] if bases else [last_offset]
        if self.latest_snapshot_offset is None and reload_from_clean_shutdown:
            for offset in to_snapshot:
                self.update_map_end_offset(offset)
                self.take_snapshot()
            return
        was_empty = self.is_empty() and self._last_map_offset >= last_offset
        self.truncate_and_reload(log_start_offset, last_offset, now_ms)
        if last_offset > self._last_map_offset and not was_empty:
            for base in self._segments_in_range(bases, self._last_map_offset, last_offset):
                start = max(base, self._last_map_offset, log_start_offset)
                self.update_map_end_offset(start)
                if base in to_snapshot:
                    self.take_snapshot()
                self._load_producers_from_records(read_segment(base, start), start, last_offset)
        self.update_map_end_offset(last_offset)
        self.take_snapshot()

    @staticmethod
    def _segments_in_range(bases: list[int], start: int, end: int) -> list[int]:
        """``LogSegments.values(from, to)``: the segments holding offsets in [start, end)."""
        if start == end:
            return []
        floor = bisect_right(bases, start) - 1          # greatest base <= start
        return [b for b in bases[max(floor, 0):] if b < end]

    def __repr__(self) -> str:
        return (f"ProducerStateManager({self._dir}, producers={len(self._producers)}, "
                f"map_end_offset={self._last_map_offset}, "
                f"ongoing_txns={self._ongoing.keys()}, snapshots={self._snapshots.keys()})")

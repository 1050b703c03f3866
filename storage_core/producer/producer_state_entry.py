"""One producer's state and the values around it: Kafka's ``ProducerStateEntry``,
``BatchMetadata``, ``TxnMetadata``, ``CompletedTxn`` and ``LogOffsetMetadata``
(``org.apache.kafka.storage.internals.log``), each a dataclass as Kafka's are value classes."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..format.record_batch import (NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, BatchHeader,
                                  decrement_sequence)
from .producer_snapshot import ProducerSnapshotEntry

__all__ = ["NUM_BATCHES_TO_RETAIN", "UNKNOWN_OFFSET", "UNKNOWN_FILE_POSITION", "LogOffsetMetadata",
           "BatchMetadata", "CompletedTxn", "TxnMetadata", "ProducerStateEntry"]

NUM_BATCHES_TO_RETAIN = 5                     # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
UNKNOWN_OFFSET = -1                           # LogOffsetMetadata.UNKNOWN_OFFSET
UNKNOWN_FILE_POSITION = -1                    # LogOffsetMetadata.UNKNOWN_FILE_POSITION


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

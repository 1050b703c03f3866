"""Validating one producer's batches before they are appended: Kafka's ``ProducerAppendInfo``
and ``AppendOrigin``, the errors it raises (``OutOfOrderSequenceException`` and the others of
``org.apache.kafka.common.errors``), what ``ProducerStateManager.analyze_append`` returns
(``PendingAppend``) and the end-transaction marker of a control batch (``read_txn_marker``)."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

from ..common import INT_MAX
from ..errors import CorruptRecordError, KafkaLogError
from ..format.control import ControlRecordType, EndTransactionMarker
from ..format.log_input_stream import BatchInfo, batch_records
from ..format.record_batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from .producer_state_entry import (BatchMetadata, CompletedTxn, LogOffsetMetadata,
                                   ProducerStateEntry, TxnMetadata)

logger = logging.getLogger(__name__)

__all__ = ["AppendOrigin", "ProducerStateError", "OutOfOrderSequenceError",
           "InvalidProducerEpochError", "InvalidTxnStateError",
           "TransactionCoordinatorFencedError", "ProducerAppendInfo", "PendingAppend",
           "read_txn_marker", "Buffer"]

Buffer = bytes | bytearray | memoryview


class AppendOrigin(enum.StrEnum):
    """``AppendOrigin``: how much validation an append gets. ``client``: producers, full
    epoch + sequence validation and duplicate detection. ``coordinator``: transaction markers
    and group-coordinator writes, epoch validation only (no sequences). ``replication``:
    followers, log loading and recovery, no validation (the leader did it)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


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


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    """``ProducerAppendInfo.inSequence``: +1, or 0 after Int.MAX (wraparound)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


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

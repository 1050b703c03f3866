"""Kafka's ``CleanedTransactionMetadata``: the transactions the cleaner walks through while it
maps or copies a log, deciding when transaction markers can go."""

from __future__ import annotations

import heapq
from typing import Sequence

from ..format.control import ControlRecordType
from ..index import AbortedTxn, TransactionIndex


class _AbortedTransactionMetadata:
    __slots__ = ("aborted_txn", "last_observed_batch_offset")

    def __init__(self, aborted_txn: AbortedTxn) -> None:
        self.aborted_txn = aborted_txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """``CleanedTransactionMetadata``: the transactions the cleaner walks through, deciding
    when markers can go and re-appending retained aborted transactions to the new segment's
    txn index."""

    def __init__(self) -> None:
        self.ongoing_committed_txns: set[int] = set()
        self.ongoing_aborted_txns: dict[int, _AbortedTransactionMetadata] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []     # min-heap by first offset
        self._seq = 0
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: Sequence[AbortedTxn]) -> None:
        for t in txns:
            heapq.heappush(self._aborted, (t.first_offset, self._seq, t))
            self._seq += 1

    def _consume_aborted_txns_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            txn = heapq.heappop(self._aborted)[2]
            self.ongoing_aborted_txns.setdefault(txn.producer_id, _AbortedTransactionMetadata(txn))

    def on_control_batch_read(self, producer_id: int, last_offset: int,
                              control_type: ControlRecordType | None) -> bool:
        """True if the control batch can be discarded. ``control_type`` is None for a control
        batch without records (already cleaned: discardable)."""
        self._consume_aborted_txns_up_to(last_offset)
        if control_type is None:
            return True
        if control_type is ControlRecordType.ABORT:
            meta = self.ongoing_aborted_txns.pop(producer_id, None)
            # keep the marker until every batch of its transaction is gone
            if meta is not None and meta.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta.aborted_txn)
                return False
            return True
        if control_type is ControlRecordType.COMMIT:
            # discardable if no batch of its transaction was seen in this pass
            if producer_id in self.ongoing_committed_txns:
                self.ongoing_committed_txns.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, producer_id: int, last_offset: int, transactional: bool) -> bool:
        """True if the data batch belongs to an aborted transaction (discardable)."""
        self._consume_aborted_txns_up_to(last_offset)
        if not transactional:
            return False
        meta = self.ongoing_aborted_txns.get(producer_id)
        if meta is not None:
            meta.last_observed_batch_offset = last_offset
            return True
        self.ongoing_committed_txns.add(producer_id)
        return False

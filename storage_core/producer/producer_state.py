"""Producer state of one partition: idempotence, transactions and the last stable offset
(Kafka's ``ProducerStateManager``). The values it keeps are in ``producer_state_entry``
(``ProducerStateEntry``, ``BatchMetadata``, ``TxnMetadata``, ``CompletedTxn``,
``LogOffsetMetadata``), the per-append validation in ``producer_append_info``
(``ProducerAppendInfo``), the snapshot file format in ``producer_snapshot``; this module decides
what goes in a snapshot, when one is written, which are kept and how state is rebuilt from the
log. It re-exports the names of the first two, so imports from it keep working.

What the manager tracks, per producer id: the epoch, the last (at most five) batches' sequence
ranges and offsets (duplicate detection and sequence checks), the coordinator epoch of the last
transaction marker, the last timestamp (expiration) and the first offset of the open
transaction, if any. Across producers: the open transactions by first offset (the first
*undecided* offset), the completed transactions whose marker is not yet below the high
watermark (the first *unstable* offset), the map end offset (the exclusive offset up to which
the state reflects the log) and the snapshot files of the partition directory.

Not thread-safe: ``Log`` makes every call under its lock, as Kafka's ``UnifiedLog`` does. How
``Log`` (``storage_core.log``) uses it:

* Construction: one manager per ``Log`` with ``producer.id.expiration.ms`` from its config
  (the transaction timeout stays ``transaction.max.timeout.ms``'s default).
* Append (``UnifiedLog.analyzeAndValidateProducerState``): after offsets are assigned and the
  segment chosen (after a roll), ``analyze_append`` gets the batches that carry a producer id,
  as ``(buf, info)`` pairs (``buf`` may be None where only headers are known: staged and
  renamed-in files), with the segment's base offset and the position the batches start at
  (a transaction's first offset metadata). A duplicate (a client retry of one of the last
  five batches) is answered with the original's offsets by ``append_raw`` and refused by the
  file appends, nothing written. After
  the write, ``finish_append(pending, next_offset, on_aborted_txn=segment.update_txn_index)``
  (an ABORT's ``AbortedTxn`` is indexed before the transaction completes: if that raises, the
  LSO does not move); an append without producer ids only calls ``update_map_end_offset``.
  Then ``on_high_watermark_updated(log end offset)``: without replicas the high watermark is
  the log end offset. Transaction markers (``Log.append_end_txn_marker``) take the same path
  with origin ``coordinator``.
* ``Log.last_stable_offset`` is ``log_last_stable_offset(high watermark, log_start_offset=...)``;
  a read_committed read stops there and takes aborted transactions from the segments'
  transaction indexes.
* Load (``LogLoader``): each segment recovered gets a fresh manager rebuilt up to its base
  (``rebuild_producer_state``), fed every batch the recovery keeps through ``load_batch`` (which
  rebuilds the segment's transaction index) and snapshotted at its end. Then
  ``remove_stray_snapshots(segment bases)`` and ``rebuild_producer_state`` up to the log end
  offset, reading segments through the log's offset index; ``Log`` never passes
  ``reload_from_clean_shutdown`` (its clean close always snapshots the log end offset, so a
  missing snapshot means the state must come from the log). A log whose end is below its
  checkpointed start is replaced whole: ``truncate_fully_and_start_at``.
* A read-only ``Log`` (the Spark source) loads state only when first asked for it: the latest
  readable snapshot in range through ``load_producer_entry`` (deleting nothing), then ``rebuild``
  from it to the log end offset in memory.
* Truncation (``truncate_to``): ``truncate_fully_and_start_at`` when nothing is left, then the
  same rebuild as a load. Roll: ``update_map_end_offset(new base)`` and
  ``take_snapshot(sync=False)``, the snapshot fsynced with the rolled segment's flush. Close:
  ``take_snapshot()`` at the log end offset. After the recovery-point checkpoint:
  ``delete_snapshots_before`` (``deleteSnapshotsAfterRecoveryPointCheckpoint``).
* Segment deletion (retention, delete-records, compaction): per segment
  ``remove_and_mark_snapshot_for_deletion(base)``, whose ``.deleted`` file ``Log`` deletes with
  the segment's; a new log start offset: ``on_log_start_offset_incremented``. Producer expiry:
  ``remove_expired_producers(now)`` from ``Log.remove_expired_producers``. The cleaner reads
  ``active_producers`` (``UnifiedLog.lastRecordsOfActiveProducers``) to keep each live
  producer's last batch.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right, insort
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar

from ..errors import CorruptSnapshotError
from ..format.log_input_stream import BatchInfo
from ..format.record_batch import NO_PRODUCER_ID, BatchHeader
from ..index import AbortedTxn
from .producer_append_info import (AppendOrigin, Buffer, InvalidProducerEpochError,
                                   InvalidTxnStateError, OutOfOrderSequenceError, PendingAppend,
                                   ProducerAppendInfo, ProducerStateError,
                                   TransactionCoordinatorFencedError, read_txn_marker)
from .producer_snapshot import (ProducerSnapshotEntry, list_snapshots, read_snapshot,
                                snapshot_path, write_snapshot)
from .producer_state_entry import (NUM_BATCHES_TO_RETAIN, UNKNOWN_FILE_POSITION, UNKNOWN_OFFSET,
                                   BatchMetadata, CompletedTxn, LogOffsetMetadata,
                                   ProducerStateEntry, TxnMetadata)

logger = logging.getLogger(__name__)

__all__ = [
    "NUM_BATCHES_TO_RETAIN", "LATE_TRANSACTION_BUFFER_MS", "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "DEFAULT_MAX_TRANSACTION_TIMEOUT_MS", "AppendOrigin", "ProducerStateError",
    "OutOfOrderSequenceError", "InvalidProducerEpochError", "InvalidTxnStateError",
    "TransactionCoordinatorFencedError", "LogOffsetMetadata", "BatchMetadata", "CompletedTxn",
    "TxnMetadata", "ProducerStateEntry", "ProducerAppendInfo", "PendingAppend",
    "ProducerStateManager", "read_txn_marker", "UNKNOWN_OFFSET", "UNKNOWN_FILE_POSITION",
]

LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000    # ProducerStateManager.LATE_TRANSACTION_BUFFER_MS
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000   # producer.id.expiration.ms
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000     # transaction.max.timeout.ms
DELETED_SUFFIX = ".deleted"                   # LogFileUtils.DELETED_FILE_SUFFIX


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
    """``ProducerStateManager`` of one partition directory (the module docstring says how
    ``Log`` drives it)."""

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
        """``ProducerStateManager.lastStableOffset(CompletedTxn)``: the first offset of the
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
            for snapshot_entry in entries:
                entry = ProducerStateEntry.from_snapshot_entry(snapshot_entry)
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
        ``(buf, info)`` batches from (at least) the one holding ``start_offset`` (only a control
        batch's bytes are read, for its marker: ``buf`` may be empty for the others). Snapshots are
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

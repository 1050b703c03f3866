"""Retention (Kafka's ``UnifiedLog.deleteOldSegments``): the segments below the log start
offset, over ``retention.bytes`` or older than ``retention.ms`` leave the log, oldest first,
through ``LocalLog``'s asynchronous delete. ``Log`` calls ``delete_old_segments`` under its lock
with its ``LocalLog`` and two steps of its own (a roll, and ``UnifiedLog.deleteSegments``).

Tiered storage (KIP-405): for a log with ``remote.storage.enable`` (and copying on), size and time
retention use ``local.retention.*`` and a segment goes only once it is in remote storage (its
last offset <= the highest offset in remote storage, which the ``RemoteLogManager`` sets on the
log; -1 until it has: nothing is remote yet), as ``UnifiedLog.isSegmentEligibleForDeletion``
decides.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator

from .local_log import LocalLog
from .segment import LogSegment

logger = logging.getLogger(__name__)

# ``LocalLog.deletableSegments``' predicate: (segment, the next segment or None) -> delete it?
SegmentPredicate = Callable[[LogSegment, LogSegment | None], bool]


def delete_old_segments(local: LocalLog, log_start_offset: int, now_ms: int | None = None, *,
                        high_watermark: int, roll: Callable[[], LogSegment],
                        delete: Callable[[list[LogSegment], str], None],
                        highest_remote_offset: int = -1) -> int:
    """``UnifiedLog.deleteOldSegments``: with ``cleanup.policy`` containing ``delete``, the
    segments below the log start offset, then those over ``retention.bytes``, then those
    older than ``retention.ms`` (each judged by its largest timestamp, else its file's
    mtime); otherwise (compact only) just those below the log start offset. Oldest first,
    stopping at the first segment that must stay, never one reaching past ``high_watermark``.
    ``roll`` starts a new active segment at the log end offset (a log always keeps one);
    ``delete(segments, reason)`` is ``UnifiedLog.deleteSegments`` (their files renamed
    ``.deleted`` now and removed after ``file.delete.delay.ms``, their producer snapshots,
    the log start offset moved to the first segment left). ``highest_remote_offset`` counts
    only for a tiered log (``remote.storage.enable`` and copying on). Returns how many segments
    went."""
    now = local.clock() if now_ms is None else now_ms
    local.metrics.retention_runs += 1
    deleted = 0
    c = local.config
    remote = highest_remote_offset if c.remote_storage_enable and not c.remote_log_copy_disable else None
    for predicate, reason in _breaches(local, log_start_offset, now, remote):
        deleted += _delete_old_segments(local, high_watermark, roll, delete, predicate, reason)
    local.delete_expired_files(now)
    return deleted


def _tiered(remote: int | None, nxt: LogSegment | None) -> bool:
    """Not tiered, or wholly in remote storage (``UnifiedLog.isSegmentEligibleForDeletion``)."""
    return remote is None or (nxt is not None and nxt.base_offset - 1 <= remote)


def _breaches(local: LocalLog, log_start_offset: int, now: int, remote: int | None
              ) -> Iterator[tuple[SegmentPredicate, str]]:
    """The predicates of ``deleteLogStartOffsetBreachedSegments``, then (``delete`` policy)
    ``deleteRetentionSizeBreachedSegments`` and ``deleteRetentionMsBreachedSegments``, each
    made when the deletions of the one before are done (the size is the log's size then). A
    tiered log (``remote`` not None) is held to ``local.retention.*`` and keeps what is not
    remote yet."""
    yield (lambda seg, nxt: nxt is not None and nxt.base_offset <= log_start_offset), "log start offset breach"
    if not local.config.delete:
        return
    retention = local.config.retention_bytes if remote is None else local.config.effective_local_retention_bytes
    size = local.segments.size_in_bytes
    if retention >= 0 and size >= retention:
        diff = size - retention

        def over(seg: LogSegment, nxt: LogSegment | None) -> bool:
            nonlocal diff
            if diff - seg.size >= 0 and _tiered(remote, nxt):
                diff -= seg.size
                return True
            return False

        yield over, f"retention size {retention} breach"
    retention_ms = local.config.retention_ms if remote is None else local.config.effective_local_retention_ms
    if retention_ms >= 0:
        yield ((lambda seg, nxt: now - seg.largest_timestamp > retention_ms and _tiered(remote, nxt)),
               f"retention time {retention_ms}ms breach")


def _delete_old_segments(local: LocalLog, high_watermark: int, roll: Callable[[], LogSegment],
                         delete: Callable[[list[LogSegment], str], None], predicate: SegmentPredicate,
                         reason: str) -> int:
    """``UnifiedLog.deleteOldSegments(predicate, reason)``."""
    deletable = local.deletable_segments(predicate, high_watermark, local.log_end_offset)
    if not deletable:
        return 0
    doomed = deletable
    if len(local.segments) == len(deletable):
        # a log always has a segment: deleting them all rolls a new one first, at the LEO
        new = roll()
        if deletable[-1].base_offset == new.base_offset:
            logger.warning("Empty active segment at %d of %s was kept (%s)", new.base_offset,
                           local.dir.name, reason)
            doomed = deletable[:-1]
    logger.info("Deleting %d segment(s) of %s (%s): %s", len(doomed), local.dir.name, reason,
                ", ".join(str(s.base_offset) for s in doomed))
    delete(doomed, reason)
    return len(deletable)

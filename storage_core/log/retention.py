"""Retention (Kafka's ``UnifiedLog.deleteOldSegments``): the segments below the log start
offset, over ``retention.bytes`` or older than ``retention.ms`` leave the log, oldest first,
through ``LocalLog``'s asynchronous delete. Functions of the ``Log`` they prune, called under
its lock.

Tiered storage (KIP-405): for a log with ``remote.storage.enable`` (and copying on), size and time
retention use ``local.retention.*`` and a segment goes only once it is in remote storage (its
last offset <= ``highest_offset_in_remote_storage``, which the ``RemoteLogManager`` sets on the
log; unset: -1, nothing is remote yet), as ``UnifiedLog.isSegmentEligibleForDeletion`` decides.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .segment import LogSegment

if TYPE_CHECKING:
    from .log import Log

logger = logging.getLogger(__name__)


def delete_old_segments(log: Log, now_ms: int | None = None) -> int:
    """``UnifiedLog.deleteOldSegments``: with ``cleanup.policy`` containing ``delete``, the
    segments below the log start offset, then those over ``retention.bytes``, then those
    older than ``retention.ms`` (each judged by its largest timestamp, else its file's
    mtime); otherwise (compact only) just those below the log start offset. Oldest first,
    stopping at the first segment that must stay. Returns how many segments went; their
    files are renamed ``.deleted`` now and removed after ``file.delete.delay.ms``."""
    log._check_writable()
    now = log.clock() if now_ms is None else now_ms
    with log._lock:
        log.metrics.retention_runs += 1
        deleted = _delete_log_start_offset_breached(log)
        if log.config.delete:
            c = log.config
            tiered = c.remote_storage_enable and not c.remote_log_copy_disable
            remote = getattr(log, "highest_offset_in_remote_storage", -1) if tiered else None
            deleted += _delete_retention_size_breached(log, remote)
            deleted += _delete_retention_ms_breached(log, now, remote)
        log.delete_expired_files(now)
        return deleted


def _delete_log_start_offset_breached(log: Log) -> int:
    start = log.log_start_offset
    return _delete_old_segments(log, lambda seg, nxt: nxt is not None and nxt.base_offset <= start,
                                     "log start offset breach")


def _tiered(remote: int | None, nxt: LogSegment | None) -> bool:
    """Not tiered, or wholly in remote storage (``UnifiedLog.isSegmentEligibleForDeletion``)."""
    return remote is None or (nxt is not None and nxt.base_offset - 1 <= remote)


def _delete_retention_size_breached(log: Log, remote: int | None = None) -> int:
    retention = log.config.retention_bytes if remote is None else log.config.effective_local_retention_bytes
    size = log.size
    if retention < 0 or size < retention:
        return 0
    diff = size - retention

    def over(seg: LogSegment, nxt: LogSegment | None) -> bool:
        nonlocal diff
        if diff - seg.size >= 0 and _tiered(remote, nxt):
            diff -= seg.size
            return True
        return False

    return _delete_old_segments(log, over, f"retention size {retention} breach")


def _delete_retention_ms_breached(log: Log, now: int, remote: int | None = None) -> int:
    retention = log.config.retention_ms if remote is None else log.config.effective_local_retention_ms
    if retention < 0:
        return 0
    return _delete_old_segments(log, lambda seg, nxt: now - seg.largest_timestamp > retention and _tiered(remote, nxt),
                                     f"retention time {retention}ms breach")


def _delete_old_segments(log: Log, predicate, reason: str) -> int:
    """``UnifiedLog.deleteOldSegments(predicate, reason)`` and ``deleteSegments``."""
    deletable = log.deletable_segments(predicate)
    if not deletable:
        return 0
    doomed = deletable
    if len(log._segments) == len(deletable):
        # a log always has a segment: deleting them all rolls a new one first, at the LEO
        new = log.roll()
        if deletable[-1].base_offset == new.base_offset:
            logger.warning("Empty active segment at %d of %s was kept (%s)", new.base_offset,
                        log.dir.name, reason)
            doomed = deletable[:-1]
    logger.info("Deleting %d segment(s) of %s (%s): %s", len(doomed), log.dir.name, reason,
             ", ".join(str(s.base_offset) for s in doomed))
    log._remove_and_delete_segments(doomed, reason)
    log._maybe_increment_log_start_offset(log._segments.first_segment.base_offset)
    return len(deletable)

"""LocalLog: a partition's segments on local disk, its log end offset, and what changes them as
files (Kafka's ``LocalLog``): roll, flush, reads of raw batches across segments, truncation
(which sets the log end offset, as ``LocalLog.truncateTo`` does), the asynchronous delete of
segments (renamed ``.deleted``, removed after ``file.delete.delay.ms``), and the crash-safe
replacement (``.cleaned`` -> ``.swap`` -> live) of segments by the cleaner's output or by the
pieces of a split. A reader's re-listed view keeps its previous segments open here
(``retire_segments``).

It knows nothing of producers, epochs, the log start offset or the recovery point: ``Log``
(Kafka's ``UnifiedLog``) keeps those, and ``Log``, ``LogLoader`` and ``LogAppender`` call in
here under the log's lock; nothing here locks.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import Callable

from ..common import INT_MAX
from ..config import LogConfig
from ..errors import CorruptRecordError, KafkaLogError, LogLockedError, OffsetOverflowError
from ..format.batch_header import HEADER_SIZE_UP_TO_MAGIC, BatchField, read_field
from ..index import AbortedTxn
from .files import CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, filename_prefix, segment_paths
from .log_metrics import LogMetrics
from .segment import AT_START, LogSegment
from .segments import LogSegments

logger = logging.getLogger(__name__)


class LocalLog:
    """The segments of the partition directory ``dir`` (``segments``, a ``LogSegments``), the
    log end offset (``log_end_offset``, the next offset an append takes), the directory's
    descriptor (``dir_fd``: the writer's lock, fsynced after renames) and the segments and
    files waiting for their delayed delete."""

    def __init__(self, directory: Path, config: LogConfig, *, clock: Callable[[], int],
                 metrics: LogMetrics) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        self.metrics = metrics
        self.segments = LogSegments()
        self.log_end_offset = 0     # the next offset to assign (LocalLog.logEndOffset)
        self.unflushed_files: list[Path] = []     # written without a sync (producer snapshots)
        self.retired: list[LogSegment] = []       # a reader's previous view (retire_segments)
        self.dir_fd = -1
        self.dir_dirty = True       # a file was created, renamed or removed since the last fsync
        # segments renamed .deleted, physically removed once file.delete.delay.ms has passed
        # (LocalLog.deleteSegmentFiles' scheduled "delete-file"): (due ms, segment or file)
        self.pending_deletes: list[tuple[int, LogSegment | Path]] = []

    @property
    def active_segment(self) -> LogSegment:
        seg = self.segments.last_segment
        assert seg is not None, "a loaded log always has a segment"
        return seg

    @property
    def first_segment(self) -> LogSegment:
        seg = self.segments.first_segment
        assert seg is not None, "a loaded log always has a segment"
        return seg

    def lock_dir(self) -> None:
        """Take the writer's lock: ``flock`` on the directory itself (no extra file for a broker
        to trip over, released by the kernel if the process dies)."""
        self.dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            fcntl.flock(self.dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.dir_fd)
            self.dir_fd = -1
            raise LogLockedError(f"{self.dir} is already open for writing by another process "
                                 f"(open it with read_only=True to read while it writes)") from None

    def retire_segments(self) -> None:
        """A reader re-lists its view: the segments leave the map and are kept open until the
        next re-list or the close (another thread may still be reading from them); the view
        before them is closed now."""
        for seg in self.retired:
            seg.close(final_entries=False)
        self.retired = self.segments.clear()

    def release(self) -> None:
        """Close every segment (and a reader's retired ones), then release the writer's lock
        whatever happened."""
        try:
            for seg in self.retired:
                seg.close(final_entries=False)
            self.close_segments()
        finally:
            if self.dir_fd >= 0:
                os.close(self.dir_fd)
                self.dir_fd = -1

    def fsync_dir(self) -> None:
        os.fsync(self.dir_fd)
        self.dir_dirty = False

    # ---------------------------------------------------------------------------- roll, flush

    def roll(self, new_base: int) -> LogSegment | None:
        """``LocalLog.roll``: a new active segment at ``new_base``, stale files of that name
        deleted first; None (nothing rolled) when the active segment is empty and at that base."""
        self.dir_dirty = True
        active = self.active_segment
        if active.base_offset == new_base and active.size == 0:
            return None
        for p in segment_paths(self.dir, new_base).values():
            if p.exists():
                logger.warning("Deleting %s before rolling to it", p)
                p.unlink()
        active.on_become_inactive_segment()
        seg = LogSegment.open(self.dir, new_base, self.config)
        self.segments.add(seg)
        return seg

    def flush(self, from_offset: int, upto: int, *, data_only: bool) -> None:
        """``LocalLog.flush``: fsync the segments from the one holding ``from_offset`` whose
        base is below ``upto`` (and the active one), then ``unflushed_files`` (snapshots written
        without a sync), then the directory if anything in it changed or ``data_only`` is off.
        ``data_only`` (the flush policy's flush between appends): the active segment's index
        entries are not fsynced (see ``LogSegment.flush``)."""
        active = self.active_segment
        for seg in self.segments.from_floor(from_offset):
            if seg.base_offset < upto or seg is active:
                seg.flush(data_only=data_only and seg is active)
        for path in self.unflushed_files:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue                # deleted since (truncation, retention)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.unflushed_files.clear()
        if self.dir_dirty or not data_only:
            self.fsync_dir()

    # ---------------------------------------------------------------------------- read

    @staticmethod
    def read_parts(segments: list[LogSegment], offset: int, max_bytes: int,
                   min_one_message: bool = True) -> list[tuple[LogSegment, int, bytes | memoryview]]:
        """Whole batches from the one holding ``offset``, as ``(segment, file position, bytes)``
        per segment read, at most ``max_bytes`` of them (one larger first batch is let through
        with ``min_one_message``); ``segments`` start with the one holding ``offset``."""
        parts: list[tuple[LogSegment, int, bytes | memoryview]] = []
        budget = max_bytes
        for seg in segments:
            got = seg.read(offset, budget, min_one_message=min_one_message and not parts)
            if got is None:
                continue
            position, data = got
            parts.append((seg, position, data))
            budget -= len(data)
            if budget <= 0 or position + len(data) < seg.size:
                break                       # out of budget inside this segment: no skipping
        return parts

    @staticmethod
    def collect_aborted_txns(segments: list[LogSegment], fetch_offset: int,
                             upper_bound: int) -> list[AbortedTxn]:
        """``LocalLog.collectAbortedTransactions``: from the first of ``segments`` (the one
        holding ``fetch_offset``) on, until an index says the search is complete (an ABORT
        marker may lie in any later segment)."""
        if upper_bound <= fetch_offset:
            return []
        found: list[AbortedTxn] = []
        for seg in segments:
            txns, complete = seg.txn_index.collect_aborted_txns(fetch_offset, upper_bound)
            found.extend(txns)
            if complete:
                break
        return found

    # ---------------------------------------------------------------------------- truncation

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """``LocalLog.truncateFullyAndStartAt``: every segment deleted, an empty one at ``offset``,
        which becomes the log end offset."""
        self.dir_dirty = True
        for seg in self.segments.clear():
            seg.delete()
        self.segments.add(LogSegment.open(self.dir, offset, self.config))
        self.log_end_offset = offset

    def truncate_to(self, offset: int) -> None:
        """``LocalLog.truncateTo`` for an ``offset`` inside the log: the segments above the one
        holding it deleted, that one cut at the batch holding it, and the log end offset set."""
        self.dir_dirty = True
        seg = self.segments.floor_or_first(offset)
        assert seg is not None, "a loaded log always has a segment"
        for later in self.segments.remove_from(seg.base_offset + 1):
            later.delete()
        found = seg.translate_offset(offset)
        # the first bytes (up to the magic) of the batch the cut removes, empty if none
        head = seg.read_bytes(found.position, HEADER_SIZE_UP_TO_MAGIC) if found is not None else b""
        seg.truncate_to(offset)
        if len(head) < HEADER_SIZE_UP_TO_MAGIC or int(read_field(head, AT_START, BatchField.MAGIC)[0]) < 2:
            self.log_end_offset = self.active_segment.read_next_offset()
        else:
            # updateLogEndOffset(targetOffset), where the batch holding the target went whole
            # (the log ends at that batch's base), so on a compacted log whose offsets below
            # the target were cleaned away the end is the target, not the emptied segment's base
            self.log_end_offset = min(offset, int(read_field(head, AT_START, BatchField.BASE_OFFSET)[0]))

    # ---------------------------------------------------------------------------- delete

    def deletable_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool],
                           high_watermark: int, log_end_offset: int) -> list[LogSegment]:
        """``LocalLog.deletableSegments`` with ``UnifiedLog``'s guard: from the oldest segment,
        while ``predicate(segment, next segment)`` holds and the segment lies wholly below
        ``high_watermark``; an empty last segment never qualifies."""
        out: list[LogSegment] = []
        segs = self.segments.values()
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else log_end_offset
            # the high watermark guard first: the log start offset never passes it
            if not (high_watermark >= upper and predicate(seg, nxt)) or (nxt is None and seg.size == 0):
                break
            out.append(seg)
        return out

    def remove_and_delete_segments(self, segments: list[LogSegment]) -> None:
        """``LocalLog.removeAndDeleteSegments(asyncDelete = true)``."""
        for seg in segments:
            self.segments.remove(seg.base_offset)
        self.delete_segment_files(segments)

    def delete_segment_files(self, segments: list[LogSegment]) -> None:
        """``LocalLog.deleteSegmentFiles(asyncDelete = true)``: every file renamed ``.deleted``
        at once (a restart removes such files), removed for good after
        ``file.delete.delay.ms``. The segment stays open until then, so a read that already
        holds it (this process) or its files (any process) finishes undisturbed."""
        self.dir_dirty = True
        for seg in segments:
            if not seg.log_path.name.endswith(DELETED_SUFFIX):
                seg.change_file_suffixes("", DELETED_SUFFIX)
            self.schedule_delete(seg)

    def schedule_delete(self, what: LogSegment | Path) -> None:
        self.pending_deletes.append((self.clock() + self.config.file_delete_delay_ms, what))
        if self.config.file_delete_delay_ms == 0:
            self.delete_expired_files(self.clock())

    def delete_expired_files(self, now: int) -> int:
        """Remove the ``.deleted`` files whose ``file.delete.delay.ms`` has passed (the
        scheduled "delete-file" task). Returns how many segments and files were removed."""
        due = [w for t, w in self.pending_deletes if t <= now]
        self.pending_deletes = [(t, w) for t, w in self.pending_deletes if t > now]
        for what in due:
            if isinstance(what, LogSegment):
                logger.info("Deleting segment files of %s", what.log_path)
                what.delete()
            else:
                what.unlink(missing_ok=True)
        return len(due)

    def close_pending(self, *, delete: bool = False) -> None:
        """Close (or delete at once) the segments waiting for their delayed delete; a restart
        removes the ``.deleted`` files left."""
        for _, what in self.pending_deletes:
            if isinstance(what, LogSegment):
                what.delete() if delete else what.close(final_entries=False)
        self.pending_deletes.clear()

    # ---------------------------------------------------------------------------- replace, split

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]
                         ) -> list[LogSegment]:
        """``LocalLog.replaceSegments``: the new segments' ``.cleaned`` files renamed ``.swap``
        (from then on a restart completes the swap: ``LogLoader``), the directory fsynced, the
        old segments (those still in the log) removed and renamed ``.deleted``, then the
        ``.swap`` suffix dropped. Returns the old segments replaced."""
        self.dir_dirty = True
        new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
        old_sorted = sorted((s for s in old_segments if s in self.segments), key=lambda s: s.base_offset)
        if any(s is self.segments.last_segment for s in old_sorted):
            raise ValueError(f"The active segment of {self.dir.name} cannot be replaced")
        for seg in reversed(new_sorted):
            seg.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        os.fsync(self.dir_fd)         # the swaps are durable before any old file goes
        for seg in old_sorted:
            self.segments.remove(seg.base_offset)
        for seg in new_sorted:
            self.segments.add(seg)
        self.delete_segment_files(old_sorted)
        for seg in new_sorted:
            seg.change_file_suffixes(SWAP_SUFFIX, "")
        self.fsync_dir()
        return old_sorted

    def split_segment(self, seg: LogSegment) -> list[LogSegment]:
        """``split_segment_files`` of a segment of the live log, each piece recovered (indexed
        from its batches), rolled past unless ``seg`` was the active segment, flushed and put
        in the segment map in place of ``seg``."""
        if seg not in self.segments:
            raise ValueError(f"{seg.log_path} is not a segment of {self.dir.name}")
        active = seg is self.segments.last_segment
        self.segments.remove(seg.base_offset)
        pieces = self.split_segment_files(seg)
        for piece in pieces:
            piece.recover()
            if not active:
                piece.on_become_inactive_segment()
            piece.flush()
            self.segments.add(piece)
        return pieces

    def split_segment_files(self, seg: LogSegment) -> list[LogSegment]:
        """The files of ``UnifiedLog.splitOverflowedSegment``: copy the batches of ``seg`` into
        new segments, each starting a new one where the next batch's last offset would not fit
        32-bit relative offsets, and swap them in as the cleaner does: ``.cleaned`` files
        written and fsynced, renamed to ``.swap`` from the highest base down (a crash in
        between leaves only pieces that the next load deletes, KAFKA-6264), the old segment
        deleted, the swaps renamed into place. The caller puts the pieces in the segment map
        and rebuilds their indexes."""
        groups: list[list[int]] = []             # [base, start position, end position]
        try:
            for b in seg.batches():
                if not groups or b.last_offset - groups[-1][0] > INT_MAX:
                    # the first piece keeps the segment's base when its first batch fits it,
                    # else (Kafka's degenerate split) starts at that batch
                    fits = not groups and b.last_offset - seg.base_offset <= INT_MAX
                    base = seg.base_offset if fits else b.base_offset
                    if b.last_offset - base > INT_MAX:
                        raise OffsetOverflowError(
                            f"Batch at position {b.position} of {seg.log_path} spans offsets "
                            f"{b.base_offset}..{b.last_offset}, more than one segment can hold")
                    groups.append([base, b.position, b.position + b.size])
                else:
                    groups[-1][2] = b.position + b.size
        except CorruptRecordError:
            pass        # the tail goes with the last piece, whose recovery truncates it
        groups[-1][2] = seg.size
        paths = []
        for base, start, stop in groups:
            path = self.dir / f"{filename_prefix(base)}{LOG_SUFFIX}{CLEANED_SUFFIX}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                seg.copy_bytes_to(fd, start, stop)
                os.fsync(fd)
            finally:
                os.close(fd)
            paths.append(path)
        os.fsync(self.dir_fd)
        swaps = []
        for path in reversed(paths):
            swap = path.with_name(path.name[:-len(CLEANED_SUFFIX)] + SWAP_SUFFIX)
            path.rename(swap)
            swaps.append(swap)
        os.fsync(self.dir_fd)
        seg.delete()
        for swap in reversed(swaps):
            swap.rename(swap.with_name(swap.name[:-len(SWAP_SUFFIX)]))
        self.fsync_dir()
        self.dir_dirty = True
        logger.info("Split %s into %d segments at %s", seg.log_path, len(groups),
                    ", ".join(str(g[0]) for g in groups))
        return [LogSegment.open(self.dir, base, self.config, preallocate=False)
                for base, _, _ in groups]

    def close_segments(self) -> None:
        for seg in self.segments:
            try:
                seg.close()
            except (OSError, KafkaLogError, ValueError) as e:
                logger.warning("Closing %s: %s", seg.log_path, e)

"""The driver's incremental view of a data directory, for streaming triggers.

An idle query asks for the latest offsets many times a second, and a data directory can hold
hundreds of partitions of many segments each: reopening every log per trigger would cost seconds.
So each partition is opened once (read-only) and then followed the way a tailing reader follows
a file: a directory whose modification time is unchanged has the same segments, so only the
active segment's new bytes are read, and only their batch headers (the compiled header walk)
move the log end offset and, for ``read_committed``, the open transactions and hence the last
stable offset (``storage_core.log.OngoingTransactions``). A roll, retention, a truncation or a
restarted writer changes the directory (or shrinks the file) and makes that one partition load
again. A directory that is not the same one
any more (another inode: the topic was deleted and recreated) is always loaded afresh, and its
topic id (``partition.metadata``) is read again whenever the directory changes.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from storage_core.checkpoint import (LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile,
                                      PartitionMetadataFile, topic_id_to_str)
from storage_core.data_files import open_data_file
from storage_core.errors import KafkaLogError
from storage_core.format.log_input_stream import scan_batches
from storage_core.log import (LOG_SUFFIX, LogView, OngoingTransactions, log_start_offset,
                              offset_from_filename, segment_paths)

from .catalog import PartitionInfo, assigned, open_partition, topic_id_str
from .offsets import TopicPartition
from .options import Strategy

logger = logging.getLogger(__name__)

_SCAN_LIMIT = 8 << 20      # new bytes walked in one read; a larger new segment asks its index


class PartitionTail:
    """One partition directory, followed from trigger to trigger."""

    def __init__(self, path: Path, committed: bool) -> None:
        self.path = path
        self.view = LogView(path)
        self.committed = committed
        self._dir_mtime: int | None = None
        self._dir_ino: int | None = None
        self._topic_id: str | None = None
        self._bases: tuple[int, ...] = ()
        self._first_base = 0
        self._leo = 0
        self._active: Path | None = None
        self._scanned = 0                          # bytes of the active segment walked so far
        self._txns = OngoingTransactions()

    def info(self, log_start_checkpoint: int) -> PartitionInfo | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        mtime = st.st_mtime_ns
        if st.st_ino != self._dir_ino:
            self._reload()                 # first look, or a recreated directory
            self._dir_ino, self._dir_mtime = st.st_ino, mtime
        elif mtime != self._dir_mtime:
            if not self._follow_roll():
                self._reload()
            else:
                previous = self._topic_id
                self._read_topic_id()
                if self._topic_id != previous:
                    self._reload()         # recreated where the old inode number was reused
            self._dir_mtime = mtime        # taken first: a change while reading reloads again
        elif not self._catch_up():
            self._reload()
        earliest = log_start_offset(log_start_checkpoint, self._first_base)
        latest = self._txns.last_stable_offset(self._leo) if self.committed else self._leo
        return PartitionInfo(earliest, latest, self._bases, self._topic_id)

    def _read_topic_id(self) -> None:
        meta = PartitionMetadataFile(self.path)
        try:
            self._topic_id = topic_id_to_str(meta.read()) if meta.exists() else None
        except FileNotFoundError:
            self._topic_id = None
        except KafkaLogError as e:         # damaged: read on without the id, as Log does
            logger.warning("Reading %s without its topic id: %s", self.path, e)
            self._topic_id = None

    def _reload(self) -> None:
        with open_partition(self.path) as log:
            self._topic_id = topic_id_str(log)
            segments = log.segments
            self._bases = tuple(s.base_offset for s in segments)
            self._first_base = self._bases[0] if self._bases else log.log_start_offset
            self._leo = log.log_end_offset
            self._active = segments[-1].log_path if segments else None
            self._scanned = segments[-1].size if segments else 0
            self._txns = OngoingTransactions()
            if self.committed:
                self._txns = OngoingTransactions({txn.producer_id: first for first, txn
                                                  in log.producer_state.ongoing_txns.items()})

    def _follow_roll(self) -> bool:
        """The directory changed: if it only gained segments after the known ones (a roll), walk
        on into them instead of reloading the whole log; False for any other change."""
        if self._active is None:
            return False
        try:
            bases = tuple(self.view.segment_base_offsets())
        except (FileNotFoundError, ValueError):
            return False
        known = len(self._bases)
        if bases[:known] != self._bases or len(bases) == known:
            return bases == self._bases and self._catch_up()
        if not self._catch_up():                   # the rest of the old active segment
            return False
        for base in bases[known:]:
            self._bases += (base,)
            self._active = segment_paths(self.path, base)[LOG_SUFFIX]
            self._scanned = 0
            if self.committed or base == bases[-1]:
                if not self._catch_up(whole_file=not self.committed):
                    return False
        return True

    def _catch_up(self, whole_file: bool = False) -> bool:
        """Walk the active segment's new complete batches; False when the file shrank or went
        away (a truncation, a deletion): the caller reloads."""
        if self._active is None:
            return False
        try:
            # a FIFO or device put in the segment's place is refused, not waited on forever
            fd = open_data_file(self._active, os.O_RDONLY, follow_symlinks=True)
        except FileNotFoundError:
            return False
        try:
            size = os.fstat(fd).st_size
            if size < self._scanned:
                return False
            if size == self._scanned:
                return True
            if whole_file and self._scanned == 0 and size > _SCAN_LIMIT:
                # a whole new segment and only its end offset wanted: its index says it
                os.close(fd)
                fd = -1
                return self._end_from_index(self._active)
            data = os.pread(fd, size - self._scanned, self._scanned)
        finally:
            if fd >= 0:
                os.close(fd)
        try:
            scan = scan_batches(data, source=str(self._active))
        except KafkaLogError as e:
            logger.warning("Re-reading %s: %s", self.path, e)
            return False
        if scan.legacy_at_end:
            return False
        if len(scan):
            self._leo = int(scan.last_offset[-1]) + 1
            if self.committed:
                self._txns.follow(scan)
        self._scanned += scan.end
        return True

    def _end_from_index(self, active: Path) -> bool:
        with self.view.segment(offset_from_filename(active.name)) as seg:
            self._leo = max(self._leo, seg.read_next_offset())
            self._scanned = seg.size
        return True


class DataDirView:
    """The partitions a subscription covers, each followed by a ``PartitionTail``; the
    directory listing and the log-start-offset checkpoint are re-read only when they change."""

    def __init__(self, root: Path, strategy: Strategy, committed: bool) -> None:
        self.root = root
        self.strategy = strategy
        self.committed = committed
        self._root_mtime: int | None = None
        self._dirs: dict[TopicPartition, Path] = {}
        self._tails: dict[TopicPartition, PartitionTail] = {}
        self._cp_mtime: int | None = None
        self._log_starts: dict[TopicPartition, int] = {}

    def partitions(self) -> dict[TopicPartition, Path]:
        mtime = os.stat(self.root).st_mtime_ns
        if mtime != self._root_mtime:
            self._dirs = assigned(self.strategy, self.root)
            self._root_mtime = mtime
        return self._dirs

    def infos(self) -> dict[TopicPartition, PartitionInfo]:
        dirs = self.partitions()
        starts = self._log_start_offsets()
        out = {}
        for tp, path in dirs.items():
            tail = self._tails.get(tp)
            if tail is None or tail.path != path:
                tail = self._tails[tp] = PartitionTail(path, self.committed)
            got = tail.info(starts.get(tp, 0))
            if got is not None:
                out[tp] = got
        for tp in list(self._tails):
            if tp not in dirs:
                del self._tails[tp]
        return out

    def _log_start_offsets(self) -> dict[TopicPartition, int]:
        path = self.root / LOG_START_OFFSET_CHECKPOINT
        try:
            mtime = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            self._cp_mtime, self._log_starts = None, {}
            return {}
        if mtime != self._cp_mtime:
            try:
                self._log_starts = dict(OffsetCheckpointFile(path).read().items())
            except (OSError, KafkaLogError) as e:
                logger.warning("Ignoring unreadable %s: %s", path, e)
                self._log_starts = {}
            self._cp_mtime = mtime
        return self._log_starts

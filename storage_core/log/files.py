"""The files of a partition directory (Kafka's ``LogFileUtils``): their suffixes and names, the
base offsets a listing holds, the check a partition's open makes of them, and the positioned
writes and kernel-side copies segments are written with.

``storage_core.data_files`` opens one file safely and names files by offset (``filename_prefix``,
``offset_from_filename``: the producer snapshots below this package need them too); this module
knows which names in a partition directory (and its data directory) are kafkalog's, so that a
symlink or FIFO among them is refused before anything is opened (docs/operations.md, "Symlinks
and non-regular files").
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from ..data_files import file_problem, filename_prefix, offset_from_filename
from ..errors import CorruptRecordError, KafkaLogError, UnsafeFileError
from ..format.buffers import ByteBuffer
from ..checkpoint import (CLEANER_OFFSET_CHECKPOINT, DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, LEADER_EPOCH_CHECKPOINT,
                          LOG_START_OFFSET_CHECKPOINT, PARTITION_METADATA_FILE, RECOVERY_POINT_CHECKPOINT,
                          REPLICATION_OFFSET_CHECKPOINT, STRAY_DIR_SUFFIX, TopicPartition,
                          parse_topic_partition_dir)

# LogFileUtils' suffixes, and the suffixes an interrupted clean, swap or delete adds to them
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
DATA_FILE_SUFFIXES = SEGMENT_FILE_SUFFIXES + (SNAPSHOT_SUFFIX,)
STATE_SUFFIXES = ("", DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
PARTITION_FILES = (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE)
# every data file's ending, with any in-progress suffix: one ``str.endswith`` per name
_DATA_FILE_ENDINGS = tuple(kind + state for kind in DATA_FILE_SUFFIXES for state in STATE_SUFFIXES)
# the checkpoints of a data directory's root, which a partition's open reads and writes
DATA_DIR_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                        REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)


_PREFIX_LENGTH = len(filename_prefix(0))


def is_offset_named(name: str) -> bool:
    """The name starts with a 20-digit offset (``filename_prefix``): a segment, index or snapshot
    file in any state, not a checkpoint or a stranger's file."""
    n = _PREFIX_LENGTH
    # ASCII digits: str.isdigit also takes "²", which int() then refuses with a bare ValueError
    return len(name) > n and name[:n].isascii() and name[:n].isdigit() and name[n] == "."


def is_segment_file(name: str) -> bool:
    """``LogFileUtils.isLogFile``: a live segment's ``.log`` (no in-progress suffix)."""
    return name.endswith(LOG_SUFFIX) and is_offset_named(name)


def segment_base_offsets(names: Iterable[str]) -> list[int]:
    """The base offsets of the live segments among a directory listing's ``names``, sorted."""
    return sorted(offset_from_filename(n) for n in names if is_segment_file(n))


def list_segment_base_offsets(directory: str | os.PathLike[str]) -> list[int]:
    """``segment_base_offsets`` of ``directory`` as it is now."""
    return segment_base_offsets(os.listdir(directory))


def segment_paths(directory: Path, base_offset: int, suffix: str = "") -> dict[str, Path]:
    """The ``.log`` and index files of the segment at ``base_offset``, with ``suffix`` added."""
    prefix = filename_prefix(base_offset)
    return {kind: directory / f"{prefix}{kind}{suffix}" for kind in SEGMENT_FILE_SUFFIXES}


def is_data_file_name(name: str) -> bool:
    """Named like a file of a partition directory (with any in-progress suffix)."""
    return name in PARTITION_FILES or name.endswith(_DATA_FILE_ENDINGS)


def check_partition_dir(directory: str | os.PathLike[str], *, writer: bool = True) -> None:
    """Before anything in ``directory`` is opened: nothing in it named like a partition file,
    and no checkpoint of its data directory (the parent), may be anything but a regular file (a
    FIFO would block the open of a reader forever). For a ``writer`` neither may the directory
    itself nor any such file be a symbolic link; a reader may read through links to regular
    files, as it never writes. Raises ``UnsafeFileError`` naming the first such path."""
    directory = Path(directory)
    if writer and os.path.islink(directory):
        raise UnsafeFileError(f"{directory} is a symbolic link (to {os.readlink(directory)}): "
                              f"kafkalog does not write through a symlinked partition directory")
    with os.scandir(directory) as found:
        # the directory entry's type costs no system call: only odd entries get an lstat
        paths = sorted(e.path for e in found if is_data_file_name(e.name)
                       and (e.is_symlink() or not e.is_file(follow_symlinks=False)))
    # the root's few checkpoints by name: a listing of the root would cost a pass over every
    # partition for each partition opened
    paths += [os.path.join(directory.parent, name) for name in DATA_DIR_CHECKPOINTS]
    for path in paths:
        problem = file_problem(path)
        if problem is None:
            continue
        if not writer and os.path.islink(path):
            if os.path.isfile(path):
                continue                    # a reader may read through a link to a regular file
            problem = f"{path} is a symbolic link to something other than a regular file"
        raise UnsafeFileError(problem)


# ---------------------------------------------------------------------------- partition directories

@dataclass(frozen=True, slots=True)
class TopicPartitionDir:
    """A data directory entry named as Kafka names a partition directory: its topic-partition
    and its suffix, ``""`` for a live partition, else ``-future`` (a replica being moved in),
    ``-delete`` (a deleted partition awaiting removal) or ``-stray`` (one KRaft no longer knows)."""

    topic_partition: TopicPartition
    suffix: str

    @property
    def is_live(self) -> bool:
        return self.suffix == ""


def topic_partition_dir(name: str) -> TopicPartitionDir | None:
    """What the entry ``name`` of a data directory is by its name, as ``LocalLog.
    parseTopicPartitionName`` reads it (the topic itself is not validated, as in Kafka); None for a
    name Kafka refuses (``remote-log-index-cache``, ``notes``, ``t-x``). The one reading of these
    names for the LogManager, the tools, the source and the sink."""
    try:
        tp = parse_topic_partition_dir(name)
    except KafkaLogError:
        return None
    return TopicPartitionDir(tp, next((s for s in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
                                       if name.endswith(s)), ""))


# ---------------------------------------------------------------------------- positioned writes

_COPY_CHUNK = 8 << 20


def write_all(fd: int, data: ByteBuffer, position: int) -> None:
    """Write all of ``data`` (bytes-like) at ``position`` of ``fd``, however many positioned
    writes the kernel takes."""
    # an ndarray's buffer is its .data (numpy's stubs give ndarray no __buffer__ before 3.12)
    view = (data.data if isinstance(data, np.ndarray) else memoryview(data)).cast("B")
    while view:
        n = os.pwrite(fd, view, position)
        position += n
        view = view[n:]


_NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.EBADF}


def copy_all(src_fd: int, src_position: int, dst_fd: int, dst_position: int, n: int) -> None:
    """Copy ``n`` bytes between files in the kernel (``copy_file_range``: no trip through
    user memory), falling back to positioned reads and writes where it is refused (another
    file system on older kernels, no support)."""
    done = 0
    copy = getattr(os, "copy_file_range", None)
    while done < n and copy is not None:
        try:
            k = copy(src_fd, dst_fd, n - done, src_position + done, dst_position + done)
        except OSError as e:
            if e.errno not in _NO_KERNEL_COPY:
                raise
            break
        if k == 0:
            raise CorruptRecordError(f"Source file ended after {done} of {n} bytes to copy",
                                     position=src_position + done)
        done += k
    while done < n:
        chunk = os.pread(src_fd, min(_COPY_CHUNK, n - done), src_position + done)
        if not chunk:
            raise CorruptRecordError(f"Source file ended after {done} of {n} bytes to copy",
                                     position=src_position + done)
        write_all(dst_fd, chunk, dst_position + done)
        done += len(chunk)

"""The files of a data directory that kafkalog treats as its own, and the one way they are opened.

Only regular files are segments, indexes, snapshots or checkpoints. A writer never follows a
symbolic link (a link would let recovery truncate or fill a file outside the data directory),
and nothing opens a FIFO or a device for reading (the open would block forever or have side
effects): every open goes through ``open_data_file``, which opens with ``O_NOFOLLOW`` (writers)
and ``O_NONBLOCK`` and checks the opened descriptor with ``fstat``, so a file swapped for a link
or a FIFO between a check and the open is still refused. docs/operations.md, "Symlinks and
non-regular files", states the rule.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .checkpoints import (CLEANER_OFFSET_CHECKPOINT, LEADER_EPOCH_CHECKPOINT,
                          LOG_START_OFFSET_CHECKPOINT, PARTITION_METADATA_FILE,
                          RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)
from .errors import UnsafeFileError

# LogFileUtils' suffixes, and the suffixes an interrupted clean, swap or delete adds to them
DATA_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
STATE_SUFFIXES = ("", ".deleted", ".cleaned", ".swap")
PARTITION_FILES = (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE)
# the checkpoints of a data directory's root, which a partition's open reads and writes
DATA_DIR_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                        REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def is_data_file_name(name: str) -> bool:
    """Named like a file of a partition directory (with any in-progress suffix)."""
    return name in PARTITION_FILES or any(
        name.endswith(kind + state) for kind in DATA_FILE_SUFFIXES for state in STATE_SUFFIXES)


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` (not followed if a link) cannot be one of kafkalog's files, or None if it is
    a regular file. What ``verify`` reports and a writable open refuses."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return (f"{path} is a symbolic link (to {target}): kafkalog does not follow symlinks in "
                f"a partition directory")
    return f"{path} is {kind_of(st.st_mode)}, not a regular file"


def open_data_file(path: str | os.PathLike[str], flags: int, mode: int = 0o666, *,
                   follow_symlinks: bool = False) -> int:
    """``os.open`` of a partition file that only ever yields a regular file's descriptor:
    ``O_NONBLOCK`` so a FIFO cannot block the open, ``O_NOFOLLOW`` unless ``follow_symlinks``
    (read-only opens, which never write through the link), then ``fstat`` of what was opened.
    Raises ``UnsafeFileError`` naming ``path`` otherwise."""
    flags |= os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, mode)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow_symlinks:
            raise UnsafeFileError(file_problem(path) or f"{path} is a symbolic link") from None
        if e.errno in (errno.EISDIR, errno.ENXIO):     # a directory (for writing), a socket
            raise UnsafeFileError(file_problem(path) or f"{path} is not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafeFileError(f"{path} is {kind_of(st.st_mode)}, not a regular file")
    return fd


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

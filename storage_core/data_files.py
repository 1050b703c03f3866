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
from typing import BinaryIO

from .errors import UnsafeFileError

_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def filename_prefix(offset: int) -> str:
    """``LogFileUtils.filenamePrefixFromOffset``: the offset in 20 digits, zero padded, which
    names every segment, index and snapshot file of a partition."""
    return f"{offset:020d}"


def offset_from_filename(name: str) -> int:
    """``LogFileUtils.offsetFromFileName``: the offset a partition file's name starts with."""
    return int(name[:name.index(".")])


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
    return open_data_file_stat(path, flags, mode, follow_symlinks=follow_symlinks)[0]


def open_data_file_stat(path: str | os.PathLike[str], flags: int, mode: int = 0o666, *,
                        follow_symlinks: bool = False) -> tuple[int, os.stat_result]:
    """``open_data_file``, with the ``fstat`` of what was opened (its size and times without a
    second call)."""
    flags |= os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW)
    # a device is refused before it is opened: opening some has effects of its own (a watchdog
    # starts counting, a tape rewinds); the fstat below still catches a swap in between
    try:
        before = os.stat(path, follow_symlinks=follow_symlinks)
    except OSError:
        before = None                   # created by this open (O_CREAT), or the open's own error
    if before is not None and not (stat.S_ISREG(before.st_mode) or stat.S_ISLNK(before.st_mode)):
        raise UnsafeFileError(f"{path} is {kind_of(before.st_mode)}, not a regular file")
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
    return fd, st


def open_regular_file(path: str | os.PathLike[str]) -> BinaryIO:
    """A buffered read-only file object of the regular file at ``path`` (a link to one is
    followed: a read never writes through it), for the small state files (checkpoints,
    ``partition.metadata``, producer snapshots, the sink's state) that are read rather than
    mapped. A FIFO, a directory or a device at ``path`` is refused by ``open_data_file``'s
    ``O_NONBLOCK`` open and ``fstat`` (``UnsafeFileError`` naming it) instead of blocking the
    read forever or failing later with a confusing error; a missing file raises
    ``FileNotFoundError`` as ``open`` does."""
    fd = open_data_file(path, os.O_RDONLY, follow_symlinks=True)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise

"""The files of a partition directory: their names, and the check a partition's open makes of them.

``storage_core.data_files`` opens one file safely; this module knows which names in a partition
directory (and its data directory) are kafkalog's, so that a symlink or FIFO among them is refused
before anything is opened (docs/operations.md, "Symlinks and non-regular files").
"""

from __future__ import annotations

import os
from pathlib import Path

from ..data_files import file_problem
from ..errors import UnsafeFileError
from ..checkpoint import (CLEANER_OFFSET_CHECKPOINT, LEADER_EPOCH_CHECKPOINT,
                          LOG_START_OFFSET_CHECKPOINT, PARTITION_METADATA_FILE,
                          RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)

# LogFileUtils' suffixes, and the suffixes an interrupted clean, swap or delete adds to them
DATA_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
STATE_SUFFIXES = ("", ".deleted", ".cleaned", ".swap")
PARTITION_FILES = (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE)
# the checkpoints of a data directory's root, which a partition's open reads and writes
DATA_DIR_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                        REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)


def is_data_file_name(name: str) -> bool:
    """Named like a file of a partition directory (with any in-progress suffix)."""
    return name in PARTITION_FILES or any(
        name.endswith(kind + state) for kind in DATA_FILE_SUFFIXES for state in STATE_SUFFIXES)


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

"""Crash-safe replacement of a small file, as Kafka's ``CheckpointFile.write`` does it:
``<file>.tmp`` is written, flushed and fsynced, atomically renamed over the file, then the
directory is fsynced (``Utils.atomicMoveWithFallback(..., needFlushParentDir=true)``). A crash
leaves either the old file or the new one, plus at worst a stray ``.tmp`` that readers never
look at."""

from __future__ import annotations

import contextlib
import os
from os import PathLike
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(directory: str | PathLike[str]) -> None:
    """``Utils.flushDir``: make creates and renames in ``directory`` durable. Kafka skips this
    on Windows, where a directory cannot be opened for fsync."""
    if os.name == "nt":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | PathLike[str], data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` as ``CheckpointFile.write`` does: write ``<path>.tmp``,
    flush, fsync, ``os.replace`` (atomic on POSIX), fsync the directory. Readers see the old
    content or the new, never a mix. The temp file is removed if this call fails; one left by
    a crash is simply overwritten by the next write."""
    path = Path(path)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if sync:
        fsync_dir(path.parent)


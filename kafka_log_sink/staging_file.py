"""A task's staged batches for one partition: the file the driver's commit numbers and appends.

Two ways to write it. Buffered (``os.pwrite`` through the page cache) for small files, which the
commit copies onto the active segment, and when the topic's fsync policy is Kafka's own flush
settings. Direct for big files under fsync per commit: the commit must have their bytes on
disk before it returns, and they become segments as they are (``Log.append_segment_file``), so
the task sends them to the disk itself, ``O_DIRECT`` in aligned chunks, by a writer thread
while it encodes the next rows. No page-cache page is allocated, filled, then written back
and fsynced later by the driver (what filling fresh page-cache pages costs varies by host:
``BENCHMARKS.md``).

A file starts in memory; it goes direct when it reaches one chunk. A file that never does is
written buffered when the task finishes, so a streaming micro-batch's small files stay in the
page cache for the commit's copy. The unaligned tail of a direct file is written buffered
(``O_DIRECT`` cleared on the descriptor); file systems without ``O_DIRECT`` (tmpfs), or that
refuse its writes, get buffered files. The bytes of a direct file had their CRCs checked by the
task as it staged them (``written_direct``), so the commit reads only their batch headers back.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import mmap
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from storage_core.format.buffers import ByteBuffer
from storage_core.log import write_all

logger = logging.getLogger(__name__)

ALIGN = 4096                    # O_DIRECT's offset, length and address alignment (any block size)
DIRECT_CHUNK = 4 << 20          # bytes per direct write: the disk streams, the buffers stay small


class StagingFile:
    """Appends bytes to ``path`` in order. ``writer``: the task's one writer thread, if this
    file may go direct (else every append is a buffered write). Not thread-safe: one task."""

    def __init__(self, path: Path, writer: ThreadPoolExecutor | None = None,
                 chunk: int | None = None) -> None:
        chunk = DIRECT_CHUNK if chunk is None else chunk
        if chunk <= 0 or chunk % ALIGN:
            raise ValueError(f"chunk {chunk} must be a positive multiple of {ALIGN}")
        self.path = path
        self.size = 0                       # bytes appended
        self._writer = writer
        self._chunk = chunk
        self._fd = -1
        self._direct = False
        self._written = 0                   # bytes handed to the file (direct: aligned)
        self._bufs: list[mmap.mmap] = []    # direct candidates: two page-aligned buffers
        self._fill = 0                      # bytes in the current buffer
        self._pending: Future | None = None
        self._reserved: tuple[int, int] | None = None   # (address, size) lent by reserve()
        if writer is None:
            self._open(direct=False)
        else:
            # anonymous maps are page-aligned, and pages never filled are never backed
            self._bufs = [mmap.mmap(-1, chunk) for _ in range(2)]

    @property
    def may_go_direct(self) -> bool:
        """Whether the bytes written next may go to the disk directly."""
        return bool(self._bufs)

    @property
    def written_direct(self) -> bool:
        """Whether the file's bytes went to the disk directly (not through the page cache)."""
        return self._direct

    def _open(self, direct: bool) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        if direct:
            try:
                self._fd = os.open(self.path, flags | os.O_DIRECT, 0o666)
                self._direct = True
                return
            except OSError as e:             # EINVAL: no O_DIRECT on this file system
                logger.debug("Staging %s without O_DIRECT: %s", self.path, e)
        self._fd = os.open(self.path, flags, 0o666)

    def reserve(self, n: int) -> np.ndarray | None:
        """The buffer's next ``n`` bytes, for the encoder to lay batches out in place (they
        are not copied here after); ``write`` of exactly that array appends them. None when
        this file does not buffer, or ``n`` does not fit one chunk."""
        self._reserved = None
        if not self._bufs or n > self._chunk - ALIGN:
            return None
        if self._fill + n > self._chunk:    # make room as reaching a chunk would
            self._hand_over()
            if not self._bufs:
                return None
        view = np.frombuffer(self._bufs[0], np.uint8)[self._fill:self._fill + n]
        self._reserved = (view.ctypes.data, n)
        return view

    def _hand_over(self) -> None:
        """The buffer is full enough: its aligned part goes to the disk directly, or, where
        there is no ``O_DIRECT``, all of it buffered, and buffered from now on."""
        if self._fd < 0:
            self._open(direct=True)
        if self._direct:
            self._flush_aligned()
        else:
            self._drain_buffered()

    def write(self, data: ByteBuffer) -> None:
        src = np.frombuffer(data, np.uint8)
        self.size += len(src)
        reserved, self._reserved = self._reserved, None
        if reserved is not None and reserved == (src.ctypes.data, len(src)):
            self._fill += len(src)          # laid out in place by the encoder
            if self._fill >= self._chunk:
                self._hand_over()
            return
        if not self._bufs:                  # buffered
            self._append_buffered(src)
            return
        at = 0
        while at < len(src):
            buf = np.frombuffer(self._bufs[0], np.uint8)
            n = min(len(src) - at, len(buf) - self._fill)
            buf[self._fill:self._fill + n] = src[at:at + n]
            del buf
            self._fill += n
            at += n
            if self._fill >= self._chunk:
                self._hand_over()
                if not self._bufs:          # no O_DIRECT here: buffered from now on
                    self._append_buffered(src[at:])
                    return

    def _flush_aligned(self) -> None:
        """Hand the aligned part of the current buffer to the writer thread; its unaligned
        rest starts the other buffer."""
        n = self._fill - self._fill % ALIGN
        self._wait()
        full, spare = self._bufs
        rest = self._fill - n
        if rest:
            spare[:rest] = full[n:self._fill]
        assert self._writer is not None     # a file goes direct only with the writer thread
        self._pending = self._writer.submit(self._pwrite_direct, memoryview(full)[:n],
                                            self._written)
        self._written += n
        self._bufs = [spare, full]
        self._fill = rest

    def _append_buffered(self, data: ByteBuffer) -> None:
        write_all(self._fd, data, self._written)
        self._written += len(data)

    def _write_fill(self) -> None:
        """The current buffer's bytes written buffered (the file's end: no alignment needed)."""
        self._append_buffered(memoryview(self._bufs[0])[:self._fill])
        self._fill = 0

    def _drain_buffered(self) -> None:
        self._wait()
        self._write_fill()
        self._release_buffers()

    def _release_buffers(self) -> None:
        for b in self._bufs:
            try:
                b.close()
            except BufferError:             # a failing task's traceback still holds a view
                pass                        # of it: the map goes with the view
        self._bufs = []

    def _pwrite_direct(self, view: memoryview, offset: int) -> None:
        try:
            write_all(self._fd, view, offset)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            # a file system that takes O_DIRECT at open but not these writes (alignment it
            # wants larger than 4 KiB): the same bytes buffered, and the rest of the file too
            logger.warning("Staging %s through the page cache: direct write refused (%s)",
                        self.path, e)
            self._clear_direct()
            write_all(self._fd, view, offset)

    def _clear_direct(self) -> None:
        fcntl.fcntl(self._fd, fcntl.F_SETFL, fcntl.fcntl(self._fd, fcntl.F_GETFL) & ~os.O_DIRECT)

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()                # a failed write fails the task here

    def finish(self) -> None:
        """Write what is left and close the file: every byte appended is in it."""
        if self._bufs:
            if self._fd < 0:                 # never reached a chunk: a small, buffered file
                self._open(direct=False)
            if self._direct:
                if self._fill >= ALIGN:
                    self._flush_aligned()
                self._wait()
                if self._fill:              # the unaligned tail, through the page cache
                    self._clear_direct()
                    self._write_fill()
            else:
                self._drain_buffered()
        self.close()

    def close(self) -> None:
        """Close without finishing (a failed task's file: its content no longer matters)."""
        try:
            self._wait()
        except Exception:                   # the task is failing already: its error is the one
            pass
        finally:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._release_buffers()

"""The byte buffers the format layer reads and writes in place (Kafka's ``ByteBuffer`` role):
bytes-like objects with a length and indexing, as files are read (``mmap``) and batches built
(``bytearray``, ``memoryview``, numpy ``uint8`` arrays)."""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING, cast

import numpy as np

if TYPE_CHECKING:
    from typing_extensions import Buffer     # collections.abc.Buffer from Python 3.12

ByteBuffer = bytes | bytearray | memoryview | mmap.mmap | np.ndarray


if TYPE_CHECKING:
    def as_buffer(buf: ByteBuffer) -> Buffer:
        """``buf`` as the buffer protocol (``struct``, ``memoryview``, ``crc32c`` and ``zlib`` take
        it). Every ``ByteBuffer`` exports a buffer at run time; typeshed and numpy declare
        ``__buffer__`` on ``mmap`` and ``ndarray`` only for Python 3.12 and later, and the project
        checks as 3.11."""
        return cast("Buffer", buf)
else:
    def as_buffer(buf: ByteBuffer) -> ByteBuffer:
        # the identity: the format layer calls it per batch, so it costs one call and no more
        return buf


__all__ = ["ByteBuffer", "as_buffer"]

"""The byte buffers the format layer reads and writes in place (Kafka's ``ByteBuffer`` role):
bytes-like objects with a length and indexing, as files are read (``mmap``) and batches built
(``bytearray``, ``memoryview``, numpy ``uint8`` arrays)."""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING, cast

import numpy as np
import pyarrow as pa

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


def binary_spans(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(data, offsets)`` of a binary or string column (large or not), its own buffers viewed,
    not copied: value ``i`` is ``data[offsets[i]:offsets[i + 1]]`` (``offsets``: int32 or int64,
    ``len(col) + 1`` entries from the column's own offset; a null's span is empty)."""
    wide = pa.types.is_large_binary(col.type) or pa.types.is_large_string(col.type)
    _, offs_buf, data_buf = col.buffers()[:3]
    offsets = np.frombuffer(offs_buf, np.int64 if wide else np.int32, len(col) + 1,
                            col.offset * (8 if wide else 4))
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None and data_buf.size else np.zeros(1, np.uint8)
    return data, offsets

"""The byte buffers the format layer reads and writes in place (Kafka's ``ByteBuffer`` role):
bytes-like objects with a length and indexing, as files are read (``mmap``) and batches built
(``bytearray``, ``memoryview``, numpy ``uint8`` arrays)."""

from __future__ import annotations

import mmap

import numpy as np

ByteBuffer = bytes | bytearray | memoryview | mmap.mmap | np.ndarray

__all__ = ["ByteBuffer"]

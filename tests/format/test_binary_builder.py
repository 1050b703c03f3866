"""``BinaryBuilder``: rows of binary and string columns gathered into one reused buffer."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from storage_core.format.columnar import BinaryBuilder


def test_extends_with_picked_rows_nulls_and_strings_then_starts_again():
    b = BinaryBuilder()
    binary = pa.array([b"a", None, b"", b"dddd", b"ee"], pa.binary())
    strings = pa.chunked_array([pa.array(["x", None]), pa.array(["yyy"])])
    b.extend(binary, np.array([3, 1, 0]))
    b.extend(strings)
    b.extend(pa.array([b"big" * 1000], pa.large_binary()))      # grows the buffer
    first = b.finish()
    assert first.type == pa.large_binary()
    assert first.to_pylist() == [b"dddd", None, b"a", b"x", None, b"yyy", b"big" * 1000]
    assert first.null_count == 2 and b.nbytes == 0 and b.capacity >= 3000   # kept for reuse
    b.extend(binary.slice(2))                                     # an offset array
    assert b.finish().to_pylist() == [b"", b"dddd", b"ee"]
    assert b.finish().to_pylist() == []

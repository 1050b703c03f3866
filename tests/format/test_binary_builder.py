"""``BinaryBuilder``: rows of binary and string columns gathered into one reused buffer."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@given(st.lists(st.lists(st.binary(max_size=40), min_size=1, max_size=30), min_size=1, max_size=6),
       st.sampled_from(["binary", "large_binary", "string"]), st.integers(0, 3), st.randoms())
@settings(max_examples=150, deadline=None)
def test_picked_rows_of_columns_without_nulls_are_gathered_in_order(columns, kind, cut, rnd):
    """Picked rows of null-free columns take the compiled one-call path (``gather_rows``), with
    int32 or int64 offsets, columns sliced (an offset), the buffer grown as the values come:
    what comes out is those values, in the picked order, across extends."""
    b = BinaryBuilder()
    expected: list[bytes] = []
    for values in columns:
        if kind == "string":
            values = [v.hex().encode() for v in values]
            col = pa.array([v.decode() for v in values], pa.string())
        else:
            col = pa.array(values, getattr(pa, kind)())
        at = min(cut, len(values) - 1)
        col, values = col.slice(at), values[at:]
        picked = np.array([rnd.randrange(len(values)) for _ in range(rnd.randrange(1, 2 * len(values) + 1))])
        b.extend(col, picked)
        expected += [values[i] for i in picked]
    assert b.nbytes == sum(map(len, expected))
    got = b.finish()
    assert got.null_count == 0 and got.to_pylist() == expected


def test_a_picked_row_outside_the_column_is_an_index_error():
    """As numpy's indexing would say: the compiled gather checks every picked row, so a wrong
    index never reads past the column (the kernel is compiled without bounds checks)."""
    b = BinaryBuilder()
    col = pa.array([b"a", b"bb", b"ccc", b"dddd"], pa.binary()).slice(1, 2)
    for bad in ([0, 2], [-1], [5]):
        with pytest.raises(IndexError):
            b.extend(col, np.array(bad))
    b.extend(col, np.array([1, 0]))
    assert b.finish().to_pylist() == [b"ccc", b"bb"]

"""``kernels.group_rows``: the stable counting sort a sink task groups each Spark batch's rows by
partition with."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_core.format.kernels import group_rows


@given(st.integers(1, 40).flatmap(lambda count: st.tuples(
    st.just(count), st.lists(st.integers(0, count - 1), max_size=300))))
@settings(max_examples=200, deadline=None)
def test_rows_grouped_by_key_in_row_order(case):
    """Every row once, grouped by key in key order, in row order within a key (numpy's stable
    argsort), and each key's rows at ``order[starts[k]:starts[k + 1]]``."""
    count, keys = case
    keys = np.array(keys, np.int64)
    order, starts = np.empty(len(keys), np.int64), np.zeros(count + 1, np.int64)
    assert group_rows(keys, count, order, starts) == -1
    assert order.tolist() == np.argsort(keys, kind="stable").tolist()
    for k in range(count):
        assert order[starts[k]:starts[k + 1]].tolist() == np.flatnonzero(keys == k).tolist()
    assert starts[-1] == len(keys)


def test_a_key_out_of_range_is_named_and_nothing_grouped():
    """A key below 0 or at ``count`` or above: its row is returned and nothing is written past
    the arrays (the kernel is compiled without bounds checks)."""
    for bad in (-1, 3, 1 << 40):
        keys = np.array([0, 2, 1, bad, 0], np.int64)
        order, starts = np.zeros(5, np.int64), np.zeros(4, np.int64)
        assert group_rows(keys, 3, order, starts) == 3
        assert starts.tolist() == [0, 0, 0, 0]

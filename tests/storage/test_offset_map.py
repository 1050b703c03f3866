"""The cleaner's offset map (``storage_core.offset_map.SkimpyOffsetMap``) against Kafka's
``OffsetMapTest`` and its probing rule."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_core.offset_map import SkimpyOffsetMap, _position, key_hashes


def key(i: int) -> bytes:
    return str(i).encode()


@pytest.mark.parametrize("items", [10, 100, 1000, 5000])
def test_basic_validation(items):
    """OffsetMapTest.testBasicValidation: every key put is found with its offset (a map of
    items * 48 bytes, half full, as Kafka's test sizes it)."""
    m = SkimpyOffsetMap(items * 48)
    for i in range(items):
        m.put(key(i), i)
    for i in range(items):
        assert m.get(key(i)) == i
    assert m.size == items


def test_slots_follow_memory_at_24_bytes_each():
    """OffsetMapTest: 4096 bytes hold 170 slots (MD5 16 bytes + offset 8)."""
    assert SkimpyOffsetMap(4096).slots == 170
    with pytest.raises(ValueError, match="holds no entry"):
        SkimpyOffsetMap(23)


def test_clear():
    """OffsetMapTest.testClear: after clear() every key reads -1, size and latest offset reset."""
    m = SkimpyOffsetMap(4000)
    for i in range(10):
        m.put(key(i), i)
    for i in range(10):
        assert m.get(key(i)) == i
    m.clear()
    assert [m.get(key(i)) for i in range(10)] == [-1] * 10
    assert m.size == 0 and m.latest_offset == -1


def test_get_when_full():
    """OffsetMapTest.testGetWhenFull: a full map still answers -1 for a key never put, and a
    put of one more key is refused."""
    m = SkimpyOffsetMap(4096)
    for i in range(m.slots):
        m.put(key(i), i)
    assert m.utilization == 1.0
    assert m.get(key(m.slots)) == -1
    assert m.get(key(0)) == 0 and m.get(key(m.slots - 1)) == m.slots - 1
    m.put(key(5), 500)                         # an existing key still takes a new offset
    assert m.get(key(5)) == 500
    with pytest.raises(ValueError, match="full offset map"):
        m.put(key(m.slots + 1), 1)


def test_latest_offset_and_update():
    """OffsetMapTest.testLatestOffset / testUpdateLatestOffset."""
    m = SkimpyOffsetMap(4096)
    for i in range(10):
        m.put(key(i), i * 10)
    assert m.latest_offset == 90
    m.update_latest_offset(40)
    assert m.latest_offset == 40


def test_utilization():
    """OffsetMapTest.testUtilization: size / slots after each put of a new key."""
    m = SkimpyOffsetMap(4096)
    for i in range(m.slots // 2):
        m.put(key(i), i)
        assert m.utilization == pytest.approx((i + 1) / m.slots)
    m.put(key(0), 99)                          # not a new entry
    assert m.size == m.slots // 2


def java_position(digest: bytes, attempt: int, slots: int) -> int:
    """SkimpyOffsetMap.positionOf, transcribed with Java int semantics."""
    at = min(attempt, 12)
    probe = int.from_bytes(digest[at:at + 4], "big", signed=True) + max(0, attempt - 12)
    probe = (probe + 2**31) % 2**32 - 2**31
    return (0 if probe == -2**31 else abs(probe)) % slots


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.integers(0, 400), st.integers(1, 10**6))
def test_probe_positions_are_kafkas(k, attempt, slots):
    digest = hashlib.md5(k).digest()
    hi, lo = key_hashes([k])[0]
    assert _position(hi, lo, attempt, slots) == java_position(digest, attempt, slots)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=6), st.integers(0, 2**62)), max_size=150))
def test_bulk_puts_equal_a_dict_of_latest_offsets(items):
    """put_many over a whole batch equals putting one key at a time, and a dict's last writer."""
    m = SkimpyOffsetMap(24 * 200)
    keys = [k for k, _ in items]
    offsets = np.array([o for _, o in items], np.int64)
    m.put_many(key_hashes(keys), offsets)
    expected = {}
    for k, o in items:
        expected[k] = o
    assert m.size == len(expected)
    got = m.get_many(key_hashes(list(expected))) if expected else np.empty(0, np.int64)
    assert got.tolist() == list(expected.values())
    assert m.get(b"never-put-key-xyz") == -1

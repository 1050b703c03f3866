"""The cleaner's offset map (``storage_core.offset_map.SkimpyOffsetMap``) against Kafka's
``OffsetMapTest`` and its probing rule."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_core.cleaner.offset_map import SkimpyOffsetMap, _position, key_hashes, span_hashes


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


# ---------------------------------------------------------------- the compiled MD5 (format/_md5)

def hashlib_halves(keys: list[bytes]) -> np.ndarray:
    """What the map keys by: hashlib's digest as two big-endian uint64."""
    digests = b"".join(hashlib.md5(k).digest() for k in keys)
    return np.frombuffer(digests, ">u8").astype(np.uint64).reshape(-1, 2)


# around MD5's padding boundaries: 55 bytes still fit the 0x80 and the length in one block, 56
# do not; 64 is one full block; 119/120 the same edge one block later
EDGE_LENGTHS = [0, 1, 54, 55, 56, 57, 63, 64, 65, 119, 120, 121, 127, 128, 129, 1000, 4096 + 7]


@pytest.mark.parametrize("n", EDGE_LENGTHS)
def test_md5_equals_hashlib_at_padding_boundaries(n):
    k = bytes((i * 131 + 7) % 256 for i in range(n))
    assert (key_hashes([k]) == hashlib_halves([k])).all()
    junk = b"\xff" * 13           # a span that does not start at the buffer's start
    got = span_hashes(junk + k + junk, np.array([len(junk)]), np.array([n]))
    assert (got == hashlib_halves([k])).all()


def _length_near_a_block_edge():
    return st.one_of(st.integers(0, 200), st.sampled_from(EDGE_LENGTHS),
                     st.builds(lambda b, d: max(0, 64 * b + d), st.integers(0, 4), st.integers(-9, 9)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_length_near_a_block_edge(), st.integers(0, 2**32), st.integers(0, 17)),
                max_size=40),
       st.randoms(use_true_random=False))
def test_md5_spans_equal_hashlib(spans, rnd):
    """span_hashes over keys scattered in one buffer (random bytes, random gaps between them,
    spans in any order) equals hashlib.md5 of each key."""
    buf = bytearray(rnd.randbytes(rnd.randrange(0, 9)))
    keys, starts = [], []
    for n, seed, gap in spans:
        k = np.random.default_rng(seed).bytes(n)
        keys.append(k)
        starts.append(len(buf))
        buf += k + rnd.randbytes(gap)
    order = list(range(len(keys)))
    rnd.shuffle(order)
    got = span_hashes(bytes(buf), np.array([starts[i] for i in order], np.int64),
                      np.array([len(keys[i]) for i in order], np.int64))
    assert got.shape == (len(keys), 2) and got.dtype == np.uint64
    assert (got == hashlib_halves([keys[i] for i in order]).reshape(-1, 2)).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=30))
def test_key_hashes_equal_hashlib(keys):
    assert (key_hashes(keys) == hashlib_halves(keys).reshape(-1, 2)).all()


@pytest.mark.parametrize("start, length", [(-1, 2), (0, 11), (10, 1), (3, -1)])
def test_span_outside_the_buffer_is_refused(start, length):
    with pytest.raises(ValueError):
        span_hashes(b"0123456789", np.array([0, start]), np.array([1, length]))

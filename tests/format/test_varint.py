"""Kafka's variable-length integers (storage_core.format.varint) against ByteUtilsTest's vectors.

Each test names, in brackets, the Apache Kafka test (clients/src/test/.../utils/ByteUtilsTest)
whose behaviour it pins; the byte vectors are the ones listed in
../shared/kafka_test_checklist.md section 1. Every vector is checked in both directions (value ->
bytes and bytes -> value), for the size functions, and for the numpy forms the columnar codec uses.

Not applicable here
-------------------
- [ByteUtilsTest.testReadUnsignedIntLEFromArray] (unsigned 32-bit little-endian read/write):
  kafkalog has no general ByteUtils; the only little-endian integers of the format are the LZ4
  frame's block sizes, which belong to the compression module (tests/format/test_compression.py).
  The big-endian half (testReadUnsignedInt) is covered in tests/format/test_record_format.py
  through the uint32 CRC fields of v2 batches and legacy messages.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_core.errors import CorruptRecordError
from storage_core.format.varint import (decode_unsigned_varint, decode_varint,
                                        decode_varlong,
                                        encode_unsigned_varint, encode_unsigned_varint32,
                                        encode_varint, encode_varlong, size_of_unsigned_varint,
                                        size_of_varint, size_of_varlong, varint_sizes,
                                        write_varints, zigzag_array)

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

# [ByteUtilsTest.testUnsignedVarintSerde]: Java int -> bytes (negatives are 5 bytes)
UNSIGNED_VARINT32 = [
    (0, "00"), (1, "01"), (63, "3F"), (64, "40"), (8191, "FF 3F"), (8192, "80 40"),
    (1048575, "FF FF 3F"), (1048576, "80 80 40"), (INT_MAX, "FF FF FF FF 07"),
    (INT_MIN, "80 80 80 80 08"), (-1, "FF FF FF FF 0F"), (-64, "C0 FF FF FF 0F"),
]

# [ByteUtilsTest.testVarintSerde]: zig-zag int
VARINT = [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7E"), (-64, "7F"), (64, "80 01"), (-65, "81 01"),
    (8191, "FE 7F"), (-8192, "FF 7F"), (8192, "80 80 01"), (INT_MAX, "FE FF FF FF 0F"),
    (INT_MIN, "FF FF FF FF 0F"),
]

# [ByteUtilsTest.testVarlongSerde]: zig-zag long; the small values share the varint prefixes
VARLONG = [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7E"), (-64, "7F"), (64, "80 01"), (-65, "81 01"),
    (8191, "FE 7F"), (-8192, "FF 7F"), (8192, "80 80 01"),
    (INT_MAX, "FE FF FF FF 0F"), (INT_MIN, "FF FF FF FF 0F"),
    (2**34 - 1, "FE FF FF FF 7F"), (2**34, "80 80 80 80 80 01"),
    (LONG_MAX, "FE FF FF FF FF FF FF FF FF 01"), (LONG_MIN, "FF FF FF FF FF FF FF FF FF 01"),
]


def hx(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def as_int32(u: int) -> int:
    """The Java int an unsigned 32-bit pattern stands for."""
    return u - 2**32 if u >= 2**31 else u


# ------------------------------------------------------------------------- scalar vectors

@pytest.mark.parametrize("value,expected", UNSIGNED_VARINT32)
def test_unsigned_varint32_vectors(value, expected):
    """[ByteUtilsTest.testUnsignedVarintSerde] writeUnsignedVarint(int) gives Kafka's exact bytes
    (a negative int is its two's complement, always 5 bytes) and reads back to the same int."""
    raw = hx(expected)
    assert encode_unsigned_varint32(value) == raw
    if value < 0:
        assert len(raw) == 5
    # pad on both sides: decoding starts at pos and reports where the varint ends
    buf = b"\xAA" + raw + b"\x55"
    got, nxt = decode_unsigned_varint(buf, 1, max_bytes=5)
    assert as_int32(got) == value
    assert nxt == 1 + len(raw)
    assert size_of_unsigned_varint(value & 0xFFFFFFFF) == len(raw)


@pytest.mark.parametrize("value,expected", VARINT)
def test_varint_vectors(value, expected):
    """[ByteUtilsTest.testVarintSerde] zig-zag varint bytes both ways and sizeOfVarint."""
    raw = hx(expected)
    assert encode_varint(value) == raw
    assert decode_varint(raw + b"\x00\x00", 0) == (value, len(raw))
    assert size_of_varint(value) == len(raw)


@pytest.mark.parametrize("value,expected", VARLONG)
def test_varlong_vectors(value, expected):
    """[ByteUtilsTest.testVarlongSerde] zig-zag varlong bytes both ways (Long.MAX/MIN are 10
    bytes) and sizeOfVarlong."""
    raw = hx(expected)
    assert encode_varlong(value) == raw
    assert decode_varlong(b"\x01" + raw, 1) == (value, 1 + len(raw))
    assert size_of_varlong(value) == len(raw)


def test_varlong_extremes_are_ten_bytes():
    """[ByteUtilsTest.testVarlongSerde] Long.MAX and Long.MIN take the full 10 bytes."""
    assert len(encode_varlong(LONG_MAX)) == 10
    assert len(encode_varlong(LONG_MIN)) == 10
    assert len(encode_varint(INT_MIN)) == 5


# ------------------------------------------------------------------------- invalid encodings

def test_varint_with_sixth_byte_is_rejected():
    """[ByteUtilsTest.testInvalidVarint] FF FF FF FF FF 01: the 5th byte still has its
    continuation bit, so a 6th would be needed -> error (Java: IllegalArgumentException)."""
    bad = hx("FF FF FF FF FF 01")
    with pytest.raises(CorruptRecordError):
        decode_varint(bad, 0)
    with pytest.raises(CorruptRecordError):
        decode_unsigned_varint(bad, 0, max_bytes=5)
    # the longest legal int varint (5 bytes, last byte without continuation) still decodes
    assert decode_varint(hx("FF FF FF FF 0F"), 0) == (INT_MIN, 5)


def test_fifth_byte_bits_above_32_are_dropped():
    """[ByteUtilsTest.testVarintSerde] Java's readVarint shifts the 5th byte left by 28 into an
    int, so only its low 4 bits count: FF FF FF FF 7F reads like FF FF FF FF 0F (Int.MIN), and
    82 80 80 80 70 like 02 (1), in the scalar decoder and the compiled one decode uses."""
    from storage_core.format._kernels import _varint

    for raw, expected in ((hx("FF FF FF FF 7F"), INT_MIN), (hx("82 80 80 80 70"), 1)):
        assert decode_varint(raw, 0) == (expected, 5)
        assert _varint(np.frombuffer(raw, np.uint8), 0, len(raw), 5) == (expected, 5)


@pytest.mark.parametrize("vectors,width", [(VARINT, 5), (VARLONG, 10)])
def test_compiled_varint_agrees_with_the_vectors(vectors, width):
    """[ByteUtilsTest.testVarintSerde/testVarlongSerde/testInvalidVarint] the compiled walk
    reads every vector like the scalar decoder, and refuses a varint one byte too long."""
    from storage_core.format._kernels import _varint

    for value, enc in vectors:
        raw = np.frombuffer(hx(enc), np.uint8)
        assert _varint(raw, 0, len(raw), width) == (value, len(raw))
    overlong = np.frombuffer(b"\xff" * width + b"\x01", np.uint8)
    assert _varint(overlong, 0, len(overlong), width)[1] == -1
    truncated = np.frombuffer(b"\xff\xff", np.uint8)
    assert _varint(truncated, 0, 2, width)[1] == -1


def test_varlong_with_eleventh_byte_is_rejected():
    """[ByteUtilsTest.testInvalidVarlong] FF x10 01 needs an 11th byte -> error."""
    bad = hx("FF" * 10 + "01")
    with pytest.raises(CorruptRecordError):
        decode_varlong(bad, 0)
    # ten bytes ending without continuation is the longest legal varlong
    assert decode_varlong(hx("FF" * 9 + "01"), 0) == (LONG_MIN, 10)


@pytest.mark.parametrize("decode", [decode_varint, decode_varlong])
def test_truncated_varint_is_an_error_not_an_index_error(decode):
    """A varint cut by the end of the buffer (or by ``limit``) is corruption, not IndexError."""
    with pytest.raises(CorruptRecordError):
        decode(hx("80 80"), 0)
    with pytest.raises(CorruptRecordError):
        decode(hx("80 80 01"), 0, limit=2)      # the terminating byte lies past the limit
    assert decode(hx("80 80 01"), 0, limit=3) == (8192, 3)
    with pytest.raises(CorruptRecordError):
        decode(b"", 0)


def test_encoders_refuse_values_outside_their_width():
    """A varint holds an int, a varlong a long: anything wider is refused, not truncated."""
    for bad in (INT_MAX + 1, INT_MIN - 1):
        with pytest.raises(ValueError):
            encode_varint(bad)
    for bad in (LONG_MAX + 1, LONG_MIN - 1):
        with pytest.raises(ValueError):
            encode_varlong(bad)
    with pytest.raises(ValueError):
        encode_unsigned_varint(-1)


# ------------------------------------------------------------------------- sizes

SIZE_POINTS = sorted({0, 1} | {v for k in range(1, 10) for v in (2**(7 * k) - 1, 2**(7 * k))})


@pytest.mark.parametrize("u", SIZE_POINTS)
def test_size_of_unsigned_varint_matches_encoding(u):
    """[ByteUtilsTest.testSizeOfUnsignedVarint] the computed size equals the encoded length at
    every 7-bit boundary, including 0."""
    assert size_of_unsigned_varint(u) == len(encode_unsigned_varint(u))


@pytest.mark.parametrize("n", sorted({0} | {s * v for v in SIZE_POINTS if v <= LONG_MAX
                                            for s in (1, -1)} | {LONG_MAX, LONG_MIN}))
def test_size_of_varlong_matches_encoding(n):
    """[ByteUtilsTest.testSizeOfVarlong] sizeOfVarlong equals the encoded length, including 0
    and the extremes."""
    assert size_of_varlong(n) == len(encode_varlong(n))


@settings(max_examples=300, deadline=None)
@given(st.integers(INT_MIN, INT_MAX))
def test_varint_round_trip_and_size_any_int(n):
    """[ByteUtilsTest.testVarintSerde/testSizeOfUnsignedVarint] round trip and size for any int;
    the unsigned form of a negative int is always 5 bytes."""
    raw = encode_varint(n)
    assert decode_varint(raw, 0) == (n, len(raw))
    assert size_of_varint(n) == len(raw)
    u32 = encode_unsigned_varint32(n)
    assert as_int32(decode_unsigned_varint(u32, 0, max_bytes=5)[0]) == n
    if n < 0:
        assert len(u32) == 5


@settings(max_examples=300, deadline=None)
@given(st.integers(LONG_MIN, LONG_MAX))
def test_varlong_round_trip_and_size_any_long(n):
    """[ByteUtilsTest.testVarlongSerde/testSizeOfVarlong] round trip and size for any long."""
    raw = encode_varlong(n)
    assert decode_varlong(raw, 0) == (n, len(raw))
    assert size_of_varlong(n) == len(raw)


# ------------------------------------------------------------------------- numpy forms

def _concat(vectors):
    blob = b"".join(hx(e) for _, e in vectors)
    pos, at = [], 0
    for _, e in vectors:
        pos.append(at)
        at += len(hx(e))
    return np.frombuffer(blob, np.uint8), np.array(pos, np.int64)


@pytest.mark.parametrize("vectors,bits", [(VARINT, 32), (VARLONG, 64)])
def test_array_encoder_writes_the_vector_bytes(vectors, bits):
    """[ByteUtilsTest.testVarintSerde/testVarlongSerde/testSizeOfVarlong] zigzag_array +
    varint_sizes + write_varints (the encoder's path) produce exactly the vector bytes."""
    values = np.array([v for v, _ in vectors], np.int64)
    zz = zigzag_array(values, bits)
    sizes = varint_sizes(zz)
    assert sizes.tolist() == [len(hx(e)) for _, e in vectors]
    at = np.zeros(len(vectors), np.int64)
    np.cumsum(sizes[:-1], out=at[1:])
    out = np.zeros(int(sizes.sum()), np.uint8)
    write_varints(out, at, zz, sizes)
    assert out.tobytes() == b"".join(hx(e) for _, e in vectors)

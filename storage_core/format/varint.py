"""Kafka's variable-length integers (``ByteUtils``): unsigned LEB128 and zig-zag varint/varlong.

Scalar functions serve headers, tools and tests; the array functions encode a whole column of
varints at once with numpy for the columnar encoder (decoding is in ``_kernels``).
"""

from __future__ import annotations

import numpy as np

from ..common import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN
from ..errors import CorruptRecordError
from .buffers import ByteBuffer


def zigzag_encode(n: int, bits: int = 64) -> int:
    return ((n << 1) ^ (n >> (bits - 1))) & ((1 << bits) - 1)


def zigzag_decode(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def encode_unsigned_varint(u: int) -> bytes:
    if u < 0:
        raise ValueError(f"unsigned varint cannot hold {u}")
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_unsigned_varint32(n: int) -> bytes:
    """Java's ``writeUnsignedVarint(int)``: a negative int is its two's complement, 5 bytes."""
    return encode_unsigned_varint(n & 0xFFFFFFFF)


def encode_varint(n: int) -> bytes:
    """Zig-zag varint of a 32-bit int."""
    if not INT_MIN <= n <= INT_MAX:
        raise ValueError(f"varint out of int32 range: {n}")
    return encode_unsigned_varint(zigzag_encode(n, 32))


def encode_varlong(n: int) -> bytes:
    """Zig-zag varlong of a 64-bit int."""
    if not LONG_MIN <= n <= LONG_MAX:
        raise ValueError(f"varlong out of int64 range: {n}")
    return encode_unsigned_varint(zigzag_encode(n, 64))


def size_of_unsigned_varint(u: int) -> int:
    return max(1, (u.bit_length() + 6) // 7)


def size_of_varint(n: int) -> int:
    return size_of_unsigned_varint(zigzag_encode(n, 32))


def size_of_varlong(n: int) -> int:
    return size_of_unsigned_varint(zigzag_encode(n, 64))


def decode_unsigned_varint(buf: ByteBuffer, pos: int = 0, *, max_bytes: int = 5,
                           limit: int | None = None) -> tuple[int, int]:
    """Return ``(value, next_position)``. Raises CorruptRecordError past ``max_bytes`` (5 for
    an int, 10 for a long, as Java's ``readVarint``/``readVarlong``) or past ``limit``."""
    end = len(buf) if limit is None else limit
    value = 0
    shift = 0
    for i in range(max_bytes):
        p = pos + i
        if p >= end:
            raise CorruptRecordError("varint runs past the end of its buffer", position=pos)
        b = buf[p]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, p + 1
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes", position=pos)


def decode_varint(buf: ByteBuffer, pos: int = 0, *, limit: int | None = None) -> tuple[int, int]:
    u, nxt = decode_unsigned_varint(buf, pos, max_bytes=5, limit=limit)
    u &= 0xFFFFFFFF  # Java keeps the low 32 bits of a 5-byte varint
    return zigzag_decode(u), nxt


def decode_varlong(buf: ByteBuffer, pos: int = 0, *, limit: int | None = None) -> tuple[int, int]:
    u, nxt = decode_unsigned_varint(buf, pos, max_bytes=10, limit=limit)
    u &= 0xFFFFFFFFFFFFFFFF
    v = zigzag_decode(u)
    return v, nxt


# ---------------------------------------------------------------------------------------------
# Columnar forms

_THRESHOLDS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)


def varint_sizes(zz: np.ndarray) -> np.ndarray:
    """Encoded size of each already zig-zagged value (uint64 array)."""
    if zz.shape[0] and zz.max() < 0x80:
        return np.ones(zz.shape[0], np.int64)
    return np.searchsorted(_THRESHOLDS, zz, side="right").astype(np.int64) + 1


def zigzag_array(values: np.ndarray, bits: int = 64) -> np.ndarray:
    v = values.astype(np.int64)
    if bits == 32:
        return (((v << 1) ^ (v >> 31)) & 0xFFFFFFFF).astype(np.uint64)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def write_varints(out: np.ndarray, at: np.ndarray, zz: np.ndarray, sizes: np.ndarray) -> None:
    """Scatter the LEB128 bytes of each zig-zagged value ``zz[i]`` into ``out`` at ``at[i]``."""
    rest = zz.copy()
    for k in range(int(sizes.max()) if sizes.size else 0):
        live = sizes > k
        if not live.all():
            sel = np.flatnonzero(live)
            r, a, s = rest[sel], at[sel], sizes[sel]
        else:
            sel, r, a, s = None, rest, at, sizes
        byte = (r & np.uint64(0x7F)) | np.where(s > k + 1, np.uint64(0x80), np.uint64(0))
        out[a + k] = byte.astype(np.uint8)
        if sel is None:
            rest = r >> np.uint64(7)
        else:
            rest[sel] = r >> np.uint64(7)

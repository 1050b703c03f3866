"""Changing a field inside a record batch's CRC without reading the batch again.

CRC-32C is linear over GF(2): for two messages of the same length that differ by ``D`` (their
XOR), ``crc(M') = crc(M) ^ raw(D)``, where ``raw`` is the CRC with a zero register and no final
XOR. ``D`` is zero except for the changed field, so ``raw(D)`` is the field's XOR shifted past
the bytes that follow it: a multiplication by ``x^(8 * bytes after)`` modulo the polynomial
(zlib's ``crc32_combine``). A 4-byte field of a batch of any size is re-CRC'd in a few dozen
operations, for whole arrays of batches at once, where recomputing the CRC would read the
batch's every byte. It is what lets a writer renumber staged batches (their base sequence is
inside the CRC) without pulling their payload through memory again.
"""

from __future__ import annotations

import numpy as np

_POLY = np.uint64(0x82F63B78)          # CRC-32C (Castagnoli), reflected
_X0 = 1 << 31                          # the polynomial 1 in the reflected representation


def _mul(a: np.ndarray | int, b: np.ndarray) -> np.ndarray:
    """``a * b mod P`` elementwise, both reflected 32-bit polynomials (zlib's ``multmodp``)."""
    a = np.asarray(a, np.uint64)
    b = np.array(b, np.uint64)
    p = np.zeros(np.broadcast(a, b).shape, np.uint64)
    one = np.uint64(1)
    for k in range(32):
        m = np.uint64(1 << (31 - k))
        p ^= np.where((a & m) != 0, b, np.uint64(0))
        b = (b >> one) ^ (_POLY * (b & one))
    return p


def _powers() -> list[int]:
    """``x^(2^k) mod P`` for k = 0..31."""
    out = [1 << 30]                    # x^1
    for _ in range(31):
        out.append(int(_mul(out[-1], np.array([out[-1]], np.uint64))[0]))
    return out


_X2N = _powers()


def _product_tables() -> np.ndarray:
    """``[k, i, v]``: ``x^(2^k) * (v << 8 i) mod P`` for every byte ``v`` of every byte position
    ``i`` of a reflected 32-bit polynomial: the product is linear in its second factor over GF(2),
    so a multiplication by ``x^(2^k)`` is four lookups XORed, not a 32-step loop."""
    shifted = (np.arange(256, dtype=np.uint64)[None, :] << (8 * np.arange(4, dtype=np.uint64))[:, None]).ravel()
    return np.stack([_mul(a, shifted).reshape(4, 256) for a in _X2N])


_X2N_TABLES = _product_tables()


def _mul_x2n(k: int, b: np.ndarray) -> np.ndarray:
    """``x^(2^k) * b mod P`` elementwise, through ``_X2N_TABLES``."""
    t = _X2N_TABLES[k & 31]
    return t[0][b & 0xFF] ^ t[1][(b >> 8) & 0xFF] ^ t[2][(b >> 16) & 0xFF] ^ t[3][(b >> 24) & 0xFF]


def _x8n(n: np.ndarray) -> np.ndarray:
    """``x^(8 n) mod P`` elementwise (zlib's ``x2nmodp(n, 3)``)."""
    n = np.array(n, np.uint64)
    p = np.full(n.shape, _X0, np.uint64)
    k = 3
    one = np.uint64(1)
    while n.any():
        sel = (n & one) != 0
        if sel.any():
            p = np.where(sel, _mul_x2n(k, p), p)
        n >>= one
        k += 1
    return p


def crc_after_field_change(crc: np.ndarray, old: np.ndarray, new: np.ndarray,
                           bytes_after: np.ndarray) -> np.ndarray:
    """The CRC-32C of messages whose 4-byte big-endian field went from ``old`` to ``new``
    (any integers, taken modulo 2^32), given each message's CRC ``crc`` and the number of
    message bytes after the field. Elementwise over arrays; returns uint32."""
    diff = (np.asarray(old, np.int64) ^ np.asarray(new, np.int64)) & 0xFFFFFFFF
    # the field's bytes as the CRC reads them: first byte lowest (reflected CRC)
    le = diff.astype(">u4").view("<u4").astype(np.uint64)
    # raw(field || 0^after) = x^(8 * (after + 4)) * field: the field's own 4 bytes shift too
    delta = _mul(_x8n(np.asarray(bytes_after, np.int64) + 4), le)
    return ((np.asarray(crc, np.uint64) ^ delta) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


__all__ = ["crc_after_field_change"]

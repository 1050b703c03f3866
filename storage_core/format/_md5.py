"""MD5 of many byte spans of one buffer, compiled: the log cleaner's key hash.

Kafka's SkimpyOffsetMap keys its slots by the MD5 of each record key, and the cleaner hashes
every key twice (building the map, then filtering each segment against it). A
hashlib.md5(key).digest() call per key from Python is almost all call overhead, and made MD5
a large part of a clean (BENCHMARKS.md). This is RFC 1321 written out for numba
(nogil, like the other kernels in ``format/``), over every data[starts[i]:starts[i] +
lengths[i]] in one call. Its digests are hashlib's byte for byte (tests compare the two across
the 56- and 64-byte padding boundaries), so the map and the cleaned output do not change.

Arithmetic is on int64 holding 32-bit words, masked after every add: numba would promote a
uint64 mixed with an int literal to float64, and uint32 arithmetic to int64 anyway.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_njit = nb.njit(cache=True, nogil=True, boundscheck=False)

_M = 0xFFFFFFFF


@_njit
def _rotl(v, s):
    return ((v << s) | (v >> (32 - s))) & _M


@_njit
def _ff(a, b, c, d, x, s, t):
    return (b + _rotl((a + ((b & c) | (~b & d)) + x + t) & _M, s)) & _M


@_njit
def _gg(a, b, c, d, x, s, t):
    return (b + _rotl((a + ((b & d) | (c & ~d)) + x + t) & _M, s)) & _M


@_njit
def _hh(a, b, c, d, x, s, t):
    return (b + _rotl((a + (b ^ c ^ d) + x + t) & _M, s)) & _M


@_njit
def _ii(a, b, c, d, x, s, t):
    return (b + _rotl((a + (c ^ (b | (~d & _M))) + x + t) & _M, s)) & _M


@_njit
def _word(buf, p):
    """The little-endian 32-bit word at ``buf[p:p + 4]``."""
    return (np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16)
            | (np.int64(buf[p + 3]) << 24))


@_njit
def _block(a0, b0, c0, d0, buf, p):
    """One MD5 compression of the 64-byte block at ``buf[p:]``: the new state."""
    x0, x1, x2, x3 = _word(buf, p), _word(buf, p + 4), _word(buf, p + 8), _word(buf, p + 12)
    x4, x5, x6, x7 = _word(buf, p + 16), _word(buf, p + 20), _word(buf, p + 24), _word(buf, p + 28)
    x8, x9, x10, x11 = _word(buf, p + 32), _word(buf, p + 36), _word(buf, p + 40), _word(buf, p + 44)
    x12, x13, x14, x15 = _word(buf, p + 48), _word(buf, p + 52), _word(buf, p + 56), _word(buf, p + 60)
    a, b, c, d = a0, b0, c0, d0
    a = _ff(a, b, c, d, x0, 7, 0xd76aa478)
    d = _ff(d, a, b, c, x1, 12, 0xe8c7b756)
    c = _ff(c, d, a, b, x2, 17, 0x242070db)
    b = _ff(b, c, d, a, x3, 22, 0xc1bdceee)
    a = _ff(a, b, c, d, x4, 7, 0xf57c0faf)
    d = _ff(d, a, b, c, x5, 12, 0x4787c62a)
    c = _ff(c, d, a, b, x6, 17, 0xa8304613)
    b = _ff(b, c, d, a, x7, 22, 0xfd469501)
    a = _ff(a, b, c, d, x8, 7, 0x698098d8)
    d = _ff(d, a, b, c, x9, 12, 0x8b44f7af)
    c = _ff(c, d, a, b, x10, 17, 0xffff5bb1)
    b = _ff(b, c, d, a, x11, 22, 0x895cd7be)
    a = _ff(a, b, c, d, x12, 7, 0x6b901122)
    d = _ff(d, a, b, c, x13, 12, 0xfd987193)
    c = _ff(c, d, a, b, x14, 17, 0xa679438e)
    b = _ff(b, c, d, a, x15, 22, 0x49b40821)
    a = _gg(a, b, c, d, x1, 5, 0xf61e2562)
    d = _gg(d, a, b, c, x6, 9, 0xc040b340)
    c = _gg(c, d, a, b, x11, 14, 0x265e5a51)
    b = _gg(b, c, d, a, x0, 20, 0xe9b6c7aa)
    a = _gg(a, b, c, d, x5, 5, 0xd62f105d)
    d = _gg(d, a, b, c, x10, 9, 0x02441453)
    c = _gg(c, d, a, b, x15, 14, 0xd8a1e681)
    b = _gg(b, c, d, a, x4, 20, 0xe7d3fbc8)
    a = _gg(a, b, c, d, x9, 5, 0x21e1cde6)
    d = _gg(d, a, b, c, x14, 9, 0xc33707d6)
    c = _gg(c, d, a, b, x3, 14, 0xf4d50d87)
    b = _gg(b, c, d, a, x8, 20, 0x455a14ed)
    a = _gg(a, b, c, d, x13, 5, 0xa9e3e905)
    d = _gg(d, a, b, c, x2, 9, 0xfcefa3f8)
    c = _gg(c, d, a, b, x7, 14, 0x676f02d9)
    b = _gg(b, c, d, a, x12, 20, 0x8d2a4c8a)
    a = _hh(a, b, c, d, x5, 4, 0xfffa3942)
    d = _hh(d, a, b, c, x8, 11, 0x8771f681)
    c = _hh(c, d, a, b, x11, 16, 0x6d9d6122)
    b = _hh(b, c, d, a, x14, 23, 0xfde5380c)
    a = _hh(a, b, c, d, x1, 4, 0xa4beea44)
    d = _hh(d, a, b, c, x4, 11, 0x4bdecfa9)
    c = _hh(c, d, a, b, x7, 16, 0xf6bb4b60)
    b = _hh(b, c, d, a, x10, 23, 0xbebfbc70)
    a = _hh(a, b, c, d, x13, 4, 0x289b7ec6)
    d = _hh(d, a, b, c, x0, 11, 0xeaa127fa)
    c = _hh(c, d, a, b, x3, 16, 0xd4ef3085)
    b = _hh(b, c, d, a, x6, 23, 0x04881d05)
    a = _hh(a, b, c, d, x9, 4, 0xd9d4d039)
    d = _hh(d, a, b, c, x12, 11, 0xe6db99e5)
    c = _hh(c, d, a, b, x15, 16, 0x1fa27cf8)
    b = _hh(b, c, d, a, x2, 23, 0xc4ac5665)
    a = _ii(a, b, c, d, x0, 6, 0xf4292244)
    d = _ii(d, a, b, c, x7, 10, 0x432aff97)
    c = _ii(c, d, a, b, x14, 15, 0xab9423a7)
    b = _ii(b, c, d, a, x5, 21, 0xfc93a039)
    a = _ii(a, b, c, d, x12, 6, 0x655b59c3)
    d = _ii(d, a, b, c, x3, 10, 0x8f0ccc92)
    c = _ii(c, d, a, b, x10, 15, 0xffeff47d)
    b = _ii(b, c, d, a, x1, 21, 0x85845dd1)
    a = _ii(a, b, c, d, x8, 6, 0x6fa87e4f)
    d = _ii(d, a, b, c, x15, 10, 0xfe2ce6e0)
    c = _ii(c, d, a, b, x6, 15, 0xa3014314)
    b = _ii(b, c, d, a, x13, 21, 0x4e0811a1)
    a = _ii(a, b, c, d, x4, 6, 0xf7537e82)
    d = _ii(d, a, b, c, x11, 10, 0xbd3af235)
    c = _ii(c, d, a, b, x2, 15, 0x2ad7d2bb)
    b = _ii(b, c, d, a, x9, 21, 0xeb86d391)
    return (a0 + a) & _M, (b0 + b) & _M, (c0 + c) & _M, (d0 + d) & _M


@_njit
def _bswap(v):
    return ((v & 0xFF) << 24) | ((v & 0xFF00) << 8) | ((v >> 8) & 0xFF00) | ((v >> 24) & 0xFF)


@_njit
def md5_spans(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> None:
    """``out[i]`` = MD5 of ``data[starts[i]:starts[i] + lengths[i]]`` as two uint64, the
    digest's big-endian halves. The caller has checked that every span lies within ``data``."""
    tail = np.zeros(128, np.uint8)         # the last partial block, padding and bit length
    for i in range(starts.shape[0]):
        p = starts[i]
        n = lengths[i]
        a, b, c, d = np.int64(0x67452301), np.int64(0xEFCDAB89), np.int64(0x98BADCFE), np.int64(0x10325476)
        full = p + (n & ~np.int64(63))
        while p < full:
            a, b, c, d = _block(a, b, c, d, data, p)
            p += 64
        rem = n & 63
        for j in range(rem):
            tail[j] = data[p + j]
        tail[rem] = 0x80
        # 0x80 and the 8-byte length need 9 bytes after the data: a second block past 55
        size = 64 if rem < 56 else 128
        for j in range(rem + 1, size - 8):
            tail[j] = 0
        bits = n * 8
        for j in range(8):
            tail[size - 8 + j] = (bits >> (8 * j)) & 0xFF
        a, b, c, d = _block(a, b, c, d, tail, 0)
        if size == 128:
            a, b, c, d = _block(a, b, c, d, tail, 64)
        out[i, 0] = (np.uint64(_bswap(a)) << np.uint64(32)) | np.uint64(_bswap(b))
        out[i, 1] = (np.uint64(_bswap(c)) << np.uint64(32)) | np.uint64(_bswap(d))

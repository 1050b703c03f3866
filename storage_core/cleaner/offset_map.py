"""Kafka's ``SkimpyOffsetMap``: the log cleaner's map of each key to its latest offset.

The cleaner remembers keys by their MD5 hash only (16 bytes, plus an 8-byte offset: 24 bytes a
slot, so ``log.cleaner.dedupe.buffer.size`` bounds the map exactly), resolves collisions by
probing, and never deletes. Probing follows Kafka's ``positionOf`` to the bit: the i-th probe
reads the big-endian int at byte ``min(i, 12)`` of the hash, plus ``max(0, i - 12)`` once the
hash is used up (linear probing from there), modulo the slot count. A slot whose hash and offset
are all zeros is empty, as in Kafka.

Here the slots are a numpy ``(slots, 3)`` uint64 array (hash high, hash low, offset), and the
cleaner's bulk operations (``put_many``/``get_many`` over whole segments' keys) are compiled
loops; ``put``/``get`` of one key are the same loops over one entry. Keys are hashed in bulk too
(``span_hashes``: every key span of a decoded buffer in one compiled MD5 call, ``format.kernels.md5_spans``),
digest for digest what Kafka's ``MessageDigest.getInstance("MD5")`` gives.
"""

from __future__ import annotations

from typing import Iterable

import numba as nb
import numpy as np

from ..common import INT_MIN
from ..format.kernels import md5_spans

HASH_SIZE = 16                       # MD5
BYTES_PER_ENTRY = HASH_SIZE + 8      # SkimpyOffsetMap.bytesPerEntry

_njit = nb.njit(cache=True, nogil=True, boundscheck=False)


def span_hashes(data: bytes | bytearray | memoryview | np.ndarray, starts: np.ndarray,
                lengths: np.ndarray) -> np.ndarray:
    """MD5 of each key ``data[starts[i]:starts[i] + lengths[i]]`` as ``(n, 2)`` uint64 (the
    digest's two big-endian halves), ``data`` any buffer. Spans outside ``data`` are refused
    here: the compiled loop does not check its indexes."""
    arr = np.frombuffer(data, np.uint8)
    starts = np.ascontiguousarray(starts, np.int64)
    lengths = np.ascontiguousarray(lengths, np.int64)
    if starts.shape != lengths.shape or starts.ndim != 1:
        raise ValueError(f"starts {starts.shape} and lengths {lengths.shape} differ")
    out = np.empty((starts.shape[0], 2), np.uint64)
    if starts.shape[0]:
        if starts.min() < 0 or lengths.min() < 0 or int((starts + lengths).max()) > arr.shape[0]:
            raise ValueError(f"a key span lies outside the {arr.shape[0]}-byte buffer")
        md5_spans(arr, starts, lengths, out)
    return out


def key_hashes(keys: Iterable[bytes]) -> np.ndarray:
    """MD5 of each key as ``(n, 2)`` uint64 (the digest's two big-endian halves)."""
    keys = [bytes(k) for k in keys]
    lengths = np.fromiter((len(k) for k in keys), np.int64, len(keys))
    return span_hashes(b"".join(keys), np.cumsum(lengths) - lengths, lengths)


@_njit
def _position(hi, lo, attempt, slots):
    """``positionOf``: the slot of the ``attempt``-th probe for the hash ``hi:lo``."""
    at = min(attempt, HASH_SIZE - 4)
    # the big-endian int32 at byte ``at`` of the 16-byte hash
    if at <= 4:
        word = (hi >> np.uint64(8 * (4 - at))) & np.uint64(0xFFFFFFFF)
    elif at < 8:
        word = ((hi << np.uint64(8 * (at - 4))) | (lo >> np.uint64(8 * (12 - at)))) \
            & np.uint64(0xFFFFFFFF)
    else:
        word = (lo >> np.uint64(8 * (12 - at))) & np.uint64(0xFFFFFFFF)
    probe = np.int64(word)
    if probe >= 2**31:
        probe -= 2**32                                   # Java int
    probe += max(0, attempt - HASH_SIZE + 4)
    probe = ((probe + 2**31) % 2**32) - 2**31             # int arithmetic wraps
    if probe == INT_MIN:
        probe = np.int64(0)                              # Utils.abs(Integer.MIN_VALUE)
    return abs(probe) % slots


@_njit
def _put_many(table, hashes, offsets):
    """Put every (hash, offset) in order; returns the number of new entries. The caller has
    made sure the new keys fit (a full map would probe forever)."""
    slots = table.shape[0]
    added = 0
    for i in range(hashes.shape[0]):
        hi = hashes[i, 0]
        lo = hashes[i, 1]
        attempt = 0
        while True:
            pos = _position(hi, lo, attempt, slots)
            if table[pos, 0] == 0 and table[pos, 1] == 0 and table[pos, 2] == 0:
                break
            if table[pos, 0] == hi and table[pos, 1] == lo:
                table[pos, 2] = np.uint64(offsets[i])
                pos = -1
                break
            attempt += 1
        if pos >= 0:
            table[pos, 0] = hi
            table[pos, 1] = lo
            table[pos, 2] = np.uint64(offsets[i])
            added += 1
    return added


@_njit
def _get_many(table, hashes, out):
    slots = table.shape[0]
    max_attempts = slots + HASH_SIZE - 4
    for i in range(hashes.shape[0]):
        hi = hashes[i, 0]
        lo = hashes[i, 1]
        out[i] = -1
        attempt = 0
        while attempt < max_attempts:
            pos = _position(hi, lo, attempt, slots)
            if table[pos, 0] == 0 and table[pos, 1] == 0 and table[pos, 2] == 0:
                break
            if table[pos, 0] == hi and table[pos, 1] == lo:
                out[i] = np.int64(table[pos, 2])
                break
            attempt += 1


class SkimpyOffsetMap:
    """Key -> latest offset within ``memory`` bytes (24 per slot), Kafka's cleaner map."""

    def __init__(self, memory: int) -> None:
        self.slots = memory // BYTES_PER_ENTRY
        if self.slots < 1:
            raise ValueError(f"An offset map of {memory} bytes holds no entry "
                             f"({BYTES_PER_ENTRY} bytes each)")
        self._table = np.zeros((self.slots, 3), np.uint64)
        self.size = 0                        # entries put (Kafka: not all may remain)
        self._latest = -1

    # ------------------------------------------------------------------ one key (Kafka's API)

    def put(self, key: bytes, offset: int) -> None:
        self.put_many(key_hashes([key]), np.array([offset], np.int64))

    def get(self, key: bytes) -> int:
        return int(self.get_many(key_hashes([key]))[0])

    # ------------------------------------------------------------------ whole segments

    def put_many(self, hashes: np.ndarray, offsets: np.ndarray) -> None:
        """Put each ``(hash, offset)`` in order (a later put of a key overwrites its offset).
        Refused before anything is written if the new keys could overflow the map, as Kafka's
        ``put`` refuses a new entry into a full map."""
        n = hashes.shape[0]
        if n == 0:
            return
        if self.size + n > self.slots:
            # exact check: how many of these are new keys?
            known = self.get_many(hashes) >= 0
            fresh = np.unique(hashes[~known], axis=0).shape[0]
            if self.size + fresh > self.slots:
                raise ValueError(f"Attempted to add a new entry to a full offset map, entries: "
                                 f"{self.size}, slots: {self.slots}")
        self.size += int(_put_many(self._table, np.ascontiguousarray(hashes, np.uint64),
                                   np.ascontiguousarray(offsets, np.int64)))
        self._latest = int(offsets[-1])

    def get_many(self, hashes: np.ndarray) -> np.ndarray:
        """The offset of each hash's key, -1 where absent."""
        out = np.empty(hashes.shape[0], np.int64)
        _get_many(self._table, np.ascontiguousarray(hashes, np.uint64), out)
        return out

    # ------------------------------------------------------------------ bookkeeping

    def clear(self) -> None:
        # a map nothing was put into is still all zeros (size counts every slot ever filled):
        # zeroing a fresh map's 64 MiB only faults in pages the clean may never touch
        if self.size:
            self._table[:] = 0
        self.size = 0
        self._latest = -1

    @property
    def latest_offset(self) -> int:
        """The last offset put into the map (``latestOffset``)."""
        return self._latest

    def update_latest_offset(self, offset: int) -> None:
        self._latest = offset

    @property
    def utilization(self) -> float:
        return self.size / self.slots

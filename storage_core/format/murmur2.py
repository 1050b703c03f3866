"""Kafka's ``Utils.murmur2`` (seed ``0x9747b28c``), the hash of the default partitioner
(``BuiltInPartitioner.partitionForKey``) and of ``RemoteLogMetadataTopicPartitioner``: over a
whole Arrow binary column in one compiled loop, or over one byte string.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import pyarrow as pa

from .buffers import binary_spans

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


@nb.njit(cache=True, nogil=True)
def _murmur2_many(data: np.ndarray, offsets: np.ndarray, out: np.ndarray, num_partitions: int = 0,
                  valid: np.ndarray | None = None) -> None:
    """Every key's hash (``offsets``: the column's own, int32 or int64), or with
    ``num_partitions`` its partition, ``toPositive(hash) % num_partitions``, and -1 where
    ``valid`` is false. One body for both: the hash as a function of its own, called per key,
    ran at less than half the speed under numba, inlined or not."""
    for i in range(out.shape[0]):
        if valid is not None and not valid[i]:
            out[i] = -1
            continue
        start, end = offsets[i], offsets[i + 1]
        length = end - start
        # int64 arithmetic masked to 32 bits: values stay below 2**32 and _M below 2**31, so
        # every product fits in 63 bits and the low 32 bits are Java's int arithmetic
        h = (0x9747B28C ^ length) & _MASK
        for j in range(length // 4):
            p = start + 4 * j
            k = np.int64(data[p]) | (np.int64(data[p + 1]) << 8) | \
                (np.int64(data[p + 2]) << 16) | (np.int64(data[p + 3]) << 24)
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = (h * _M) & _MASK
            h ^= k
        tail = start + (length & ~3)
        rest = length % 4
        if rest == 3:
            h ^= np.int64(data[tail + 2]) << 16
        if rest >= 2:
            h ^= np.int64(data[tail + 1]) << 8
        if rest >= 1:
            h ^= np.int64(data[tail])
            h = (h * _M) & _MASK
        h ^= h >> 13
        h = (h * _M) & _MASK
        h ^= h >> 15
        out[i] = (h & 0x7FFFFFFF) % num_partitions if num_partitions > 0 else h


def murmur2(keys: pa.Array) -> np.ndarray:
    """Kafka's ``Utils.murmur2`` of every key of a binary or string column, as Java ints (int32)."""
    out = np.empty(len(keys), np.int64)
    if len(keys):
        _murmur2_many(*binary_spans(_as_bytes(keys)), out)
    return out.astype(np.uint32).view(np.int32)


def partitions(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Kafka's default partitioner over a binary or string column: ``toPositive(murmur2(key))
    % num_partitions`` for every key (``BuiltInPartitioner.partitionForKey``), -1 for a null
    key (int64), in one pass over the column's own offsets."""
    out = np.empty(len(keys), np.int64)
    if len(keys):
        valid = np.asarray(keys.is_valid()) if keys.null_count else None
        _murmur2_many(*binary_spans(_as_bytes(keys)), out, num_partitions, valid)
    return out


def _as_bytes(keys: pa.Array) -> pa.Array:
    """Binary and string columns as they are (their bytes are the key), anything else cast."""
    t = keys.type
    if (pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_binary(t)
            or pa.types.is_large_string(t)):
        return keys
    return keys.cast(pa.binary())


def murmur2_bytes(data: bytes) -> int:
    """``Utils.murmur2`` of one byte string, as a Java int."""
    return int(murmur2(pa.array([data], pa.binary()))[0])

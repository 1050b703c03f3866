"""Kafka's default partitioner, byte for byte: a keyed record goes to
``toPositive(murmur2(key)) % numPartitions`` (``BuiltInPartitioner.partitionForKey`` /
``Utils.murmur2``), so a key lands in the partition a Java producer would choose; records without
a key stick to one partition per incoming batch, moving on round-robin (the sticky partitioner's
behaviour at batch granularity).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from storage_core.format.murmur2 import partitions


def partitions_for_keys(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """``toPositive(murmur2(key)) % numPartitions`` for every key (nulls get -1)."""
    return partitions(keys, num_partitions)

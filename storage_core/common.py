"""What every layer shares: Java's integer bounds (Kafka's fields are Java ``int`` and ``long``)
and the wall clock in milliseconds (Kafka's ``Time.SYSTEM.milliseconds()``). Imports nothing."""

from __future__ import annotations

import time

INT_MIN = -(2**31)                  # Integer.MIN_VALUE
INT_MAX = 2**31 - 1                 # Integer.MAX_VALUE
LONG_MIN = -(2**63)                 # Long.MIN_VALUE
LONG_MAX = 2**63 - 1                # Long.MAX_VALUE


def wall_ms() -> int:
    """Milliseconds since the epoch, as Kafka's ``Time.SYSTEM.milliseconds()``."""
    return int(time.time() * 1000)

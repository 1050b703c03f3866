"""Kafka's ``Throttler`` (``kafka.utils.Throttler``, ``storage/internals/utils/Throttler``): keeps
a stream of work at or below a desired rate by sleeping.

The log cleaner's threads share one, at ``log.cleaner.io.max.bytes.per.second``: the ``Cleaner``
reports the bytes it read and wrote (``maybe_throttle(n)``) and sleeps when the rate over the
last check interval ran above the desired one, long enough to bring it back down.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

logger = logging.getLogger(__name__)


class Throttler:
    """``Throttler(desiredRatePerSec, checkIntervalMs, throttleDown=true)``: ``maybe_throttle``
    counts what was observed; once a check interval has passed, if the observed rate is above
    ``desired_rate_per_sec`` it sleeps ``observed / desired - elapsed``. An infinite desired
    rate (the default of ``log.cleaner.io.max.bytes.per.second``) never sleeps."""

    def __init__(self, desired_rate_per_sec: float, check_interval_ms: int = 100, *,
                 nanoseconds: Callable[[], int] = time.monotonic_ns,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.desired_rate_per_sec = float(desired_rate_per_sec)
        self.check_interval_ns = check_interval_ms * 1_000_000
        self._nanoseconds = nanoseconds
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start_ns = nanoseconds()
        self._observed_so_far = 0.0
        self.total_observed = 0.0           # Kafka's meter (cleaner-io bytes)
        self.total_slept_ms = 0

    def update_desired_rate_per_sec(self, rate: float) -> None:
        self.desired_rate_per_sec = float(rate)

    def maybe_throttle(self, observed: float) -> None:
        desired = self.desired_rate_per_sec
        with self._lock:
            self.total_observed += observed
            self._observed_so_far += observed
            now = self._nanoseconds()
            elapsed_ns = now - self._period_start_ns
            if elapsed_ns > self.check_interval_ns and self._observed_so_far > 0:
                rate = self._observed_so_far * 1e9 / elapsed_ns
                if rate > desired:
                    # the time to sleep for the whole period to come out at the desired rate
                    sleep_ms = round(self._observed_so_far / (desired / 1000) - elapsed_ns // 1_000_000)
                    if sleep_ms > 0:
                        logger.debug("Natural rate is %f per second but desired rate is %f, sleeping for "
                                  "%d ms to compensate.", rate, desired, sleep_ms)
                        self.total_slept_ms += sleep_ms
                        self._sleep(sleep_ms / 1000)
                self._period_start_ns = self._nanoseconds()
                self._observed_so_far = 0.0


__all__ = ["Throttler"]

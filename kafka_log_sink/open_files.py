"""The open files a driver's commit may use. A commit holds every partition it writes to open from
its append to its marker (opening a log twice costs more than the marker), and an open log holds
its segments' files: the ``.log``, ``.index`` and ``.timeindex`` of each (``.txnindex`` once it
has one) and its directory's lock. Kafka's brokers run with a raised open-file limit, and the JVM
raises its soft limit to the hard one as it starts (HotSpot's ``-XX:+MaxFDLimit``); the driver's
Python process does the same here, then holds open only what the limit allows and closes the rest
after their appends, to reopen them for their markers."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from threading import Lock

logger = logging.getLogger(__name__)

# files beyond the held logs' own: the logs being appended right now, staged files and their
# copies, the store's sockets, checkpoints being written
RESERVE = 128


def raise_open_file_limit(wanted: int) -> int:
    """The soft ``RLIMIT_NOFILE`` raised to at least ``wanted`` where the hard limit allows (to
    the hard limit, as the JVM does); returns the soft limit now (``wanted`` where the platform
    has no such limit)."""
    try:
        import resource
    except ImportError:                     # not POSIX: no limit to raise here
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return wanted if soft == resource.RLIM_INFINITY else soft
    # no hard limit (macOS says so, then refuses more than OPEN_MAX): what is wanted, else the hard limit
    new = wanted if hard == resource.RLIM_INFINITY else max(soft, hard)
    if new != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        except (ValueError, OSError) as e:
            logger.warning("Could not raise the open file limit from %d to %d: %s", soft, new, e)
            return soft
        logger.info("Raised the open file limit from %d to %d (hard limit %s)", soft, new, hard)
    return new


def open_file_count() -> int | None:
    """Files this process has open now (Linux ``/proc``, BSD and macOS ``/dev/fd``), None where
    neither tells."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return None


def log_open_files(segments: int) -> int:
    """What an open log of ``segments`` segments holds: three files a segment, a transaction
    index where there is one (counted for each), the directory's lock."""
    return 4 * segments + 1


@dataclass
class OpenLogBudget:
    """How many open files the logs a commit holds open may take (thread-safe: the commit's
    appends run side by side). ``take(n)`` is True when a log of ``n`` files stays open within
    it, and counts it; False: the caller closes the log after its append."""

    files: int
    held: int = 0
    _lock: Lock = field(default_factory=Lock, repr=False)

    @classmethod
    def for_commit(cls, partitions: int) -> "OpenLogBudget":
        """A budget for a commit of ``partitions`` partitions: the limit raised toward what
        holding them all open needs (a guess of two segments each), less the files open now
        and ``RESERVE``."""
        in_use = open_file_count()
        in_use = 64 if in_use is None else in_use
        limit = raise_open_file_limit(in_use + RESERVE + partitions * log_open_files(2))
        return cls(max(0, limit - in_use - RESERVE))

    def take(self, n: int) -> bool:
        with self._lock:
            if self.held + n > self.files:
                return False
            self.held += n
            return True

"""Processes for the cleaner crash and concurrency tests (tests/storage/test_cleaner_crash.py,
tests/storage/test_cleaner_readers.py).

    python tests/storage/cleaner_crash_runner.py clean DIR NOW_MS      # clean DIR/compacted-0, to be killed
    python tests/storage/cleaner_crash_runner.py read DIR SECONDS      # a reader of DIR/churn-0

``clean`` opens the compacted log (``crash_config``) and runs ``LogCleaner.clean_once`` with the
clock fixed at ``NOW_MS`` until nothing is left to clean, then prints ``done <renames>`` (how many
file renames the clean made) and exits. With ``KAFKALOG_CRASH_AT_RENAME=K`` in the environment
it SIGKILLs itself just before the K-th rename (``os.rename``/``os.replace``) of the clean: the
deterministic kill points between ".cleaned written", ".swap renamed", old segment ".deleted",
".swap" stripped and the cleaner checkpoint replaced. Without it, the test kills it at random
moments.

``read`` re-opens the partition read-only again and again and fetches from where it was to the
log end offset while a writer appends, retention deletes segments and the cleaner compacts
them; it exits 0 after ``SECONDS`` with ``ok <records> <opens>`` on stdout, or 1 with what went
wrong on stderr: an offset seen twice or out of order, a value that is not the record written
at its offset, a failure to open or read, a skip forward not explained by the log start offset.

Every value names its own offset and key (``value_of``), so anything read can be checked.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2]))       # the repository root, for storage_core

import numpy as np          # noqa: E402
import pyarrow as pa        # noqa: E402

from storage_core.checkpoint import TopicPartition   # noqa: E402
from storage_core.cleaner import LogCleaner   # noqa: E402
from storage_core.config import CleanerConfig, LogConfig   # noqa: E402
from storage_core.log import Log            # noqa: E402

CRASH_TOPIC_DIR = "compacted-0"
CHURN_TOPIC_DIR = "churn-0"
TS0 = 1_700_000_000_000
KILL_ENV = "KAFKALOG_CRASH_AT_RENAME"


def value_of(key: int, offset: int) -> bytes:
    """The value written at ``offset`` for ``key``: names both, padded by a hash-derived length."""
    digest = hashlib.sha256(b"%d/%d" % (key, offset)).hexdigest()[:16]
    return b"%d|%d|%s|" % (key, offset, digest.encode()) + b"." * (int(digest[:2], 16) % 40)


def check_value(key: bytes | None, value: bytes | None, offset: int) -> str | None:
    """None if (key, value) is what was written at ``offset`` (or a tombstone), else why not."""
    if key is None:
        return f"offset {offset}: no key"
    if value is None:
        return None
    want = value_of(int(key), offset)
    return None if value == want else f"offset {offset}: value {value[:40]!r} is not {want[:40]!r}"


def crash_config() -> LogConfig:
    """The compacted log of the crash test: small segments, so a clean swaps many groups."""
    return LogConfig(segment_bytes=6 << 10, segment_index_bytes=4 << 10, index_interval_bytes=512,
                     cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                     delete_retention_ms=10_000_000, file_delete_delay_ms=60_000)


def cleaner_config() -> CleanerConfig:
    return CleanerConfig(dedupe_buffer_size=2 << 20, backoff_ms=10)


def records(keys, offsets, tombstones=()) -> pa.Table:
    dead = set(tombstones)
    return pa.table({
        "key": pa.array([b"%d" % k for k in keys], pa.binary()),
        "value": pa.array([None if o in dead else value_of(k, o) for k, o in zip(keys, offsets)], pa.binary()),
        "timestamp": pa.array(TS0 + np.asarray(offsets, dtype=np.int64), pa.int64()),
    })


def prepare(directory: Path, seed: int, n: int = 4000, key_space: int = 150) -> None:
    """A compacted log with many duplicate keys (and a few tombstones) in ``directory``."""
    rng = random.Random(seed)
    with Log.open(directory / CRASH_TOPIC_DIR, crash_config(), clock=lambda: TS0) as log:
        while log.log_end_offset < n:
            first = log.log_end_offset
            count = rng.randint(1, 12)
            keys = [rng.randrange(key_space) for _ in range(count)]
            offsets = list(range(first, first + count))
            dead = [o for o in offsets if rng.random() < 0.02]
            log.append(records(keys, offsets, dead), compression=rng.choice(["none", "none", "lz4", "zstd"]))
        log.roll()


def clean(directory: Path, now_ms: int) -> int:
    """Clean the compacted log until nothing is left to clean; returns the renames made."""
    kill_at = int(os.environ.get(KILL_ENV, "0"))
    log = Log.open(directory / CRASH_TOPIC_DIR, crash_config(), clock=lambda: now_ms)
    tp = TopicPartition(log.topic, log.partition)
    cleaner = LogCleaner(cleaner_config(), [directory], {tp: log}, clock=lambda: now_ms)
    renames = [0]
    real_rename, real_replace = os.rename, os.replace

    inside = os.path.abspath(directory) + os.sep

    def counted(real):
        def rename(src, *args, **kwargs):
            # only the log's files: numba writes its kernel cache by os.replace too, when the
            # kernels were compiled afresh in this process (a cold or stale cache)
            if os.path.abspath(src).startswith(inside):
                renames[0] += 1
                if renames[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
            return real(src, *args, **kwargs)
        return rename

    os.rename, os.replace = counted(real_rename), counted(real_replace)
    try:
        while cleaner.clean_once(now_ms) is not None:
            pass
    finally:
        os.rename, os.replace = real_rename, real_replace
    log.close()
    return renames[0]


# ------------------------------------------------------------------------------ readers

def read(directory: Path, seconds: float) -> int:
    """Re-open and read ``directory/churn-0`` until ``seconds`` pass; see the module doc."""
    part = directory / CHURN_TOPIC_DIR
    deadline = time.monotonic() + seconds
    position = 0              # the next offset this reader has not seen
    last_seen = -1
    seen = opens = 0
    while time.monotonic() < deadline:
        try:
            log = Log.open(part, LogConfig(), read_only=True)
        except FileNotFoundError:
            if not part.exists():
                time.sleep(0.01)      # the writer has not created it yet
                continue
            raise
        opens += 1
        try:
            if position < log.log_start_offset:
                position = log.log_start_offset    # retention moved the start: skip forward
            end = log.log_end_offset
            while position < end:
                got = log.fetch(position, max_bytes=64 << 10)
                t = got.table
                offsets = t.column("offset").to_pylist()
                for k, v, o in zip(t.column("key").to_pylist(), t.column("value").to_pylist(), offsets):
                    if o <= last_seen:
                        raise AssertionError(f"offset {o} after {last_seen}: seen twice or out of order")
                    if o < position:
                        raise AssertionError(f"offset {o} below the fetch position {position}")
                    bad = check_value(k, v, o)
                    if bad:
                        raise AssertionError(bad)
                    last_seen = o
                    seen += 1
                if got.next_offset <= position:
                    raise AssertionError(f"fetch at {position} did not advance (next {got.next_offset})")
                position = got.next_offset
        finally:
            log.close()
    print(f"ok {seen} {opens}", flush=True)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "clean":
        renames = clean(Path(argv[2]), int(argv[3]))
        print(f"done {renames}", flush=True)
        return 0
    if len(argv) == 4 and argv[1] == "read":
        try:
            return read(Path(argv[2]), float(argv[3]))
        except BaseException as e:         # noqa: BLE001 - the test reads the reason
            import traceback
            traceback.print_exc()
            print(f"reader failed: {e!r}", file=sys.stderr, flush=True)
            return 1
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))

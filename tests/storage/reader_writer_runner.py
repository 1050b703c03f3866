"""Processes for tests/storage/test_readers_beside_writer.py: a writer that appends, rolls,
truncates (``truncate_to``), deletes by retention and compacts one partition, and readers that
open it ``read_only=True`` beside it.

Every record's value is ``b"<generation>:<offset>:<key>"``. The writer starts at generation 0 and
moves to the next one at every truncation, after which it appends only records of the new
generation; once a truncation is done it appends ``<generation> <offset>`` (the new generation
and the truncation offset) to ``truncations`` in the data directory, fsynced. So in the log as it
is at any moment the generations never decrease along the offsets, and a record of generation g
at offset o was removed by a truncation when a line ``G T`` with ``G > g`` and ``T <= o`` exists.

    python reader_writer_runner.py write DATA_DIR ROUNDS SEED FILE_DELETE_DELAY_MS
    python reader_writer_runner.py read DATA_DIR

The writer creates ``done`` in DATA_DIR when it has finished its rounds; a reader reads until it
has seen ``done`` and then read to the end once more, then prints ``ok <records> <opens>
<lookups>``. A reader asserts, for everything it returns over its whole life: offsets strictly
increase (never twice, never out of order), each value is the one written at its offset, the
generations never decrease, and no record is one that a truncation listed in ``truncations``
before the reader opened its view had removed. It also looks up offsets by timestamp and
translates offsets through the indexes of every segment of each view, while the writer trims,
truncates and deletes those files (the SIGBUS of issue 16, finding 1).
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from storage_core.checkpoint import TopicPartition  # noqa: E402
from storage_core.cleaner import LogCleaner  # noqa: E402
from storage_core.config import CleanerConfig, LogConfig  # noqa: E402
from storage_core.errors import OffsetOutOfRangeError  # noqa: E402
from storage_core.log import Log  # noqa: E402

TOPIC_DIR = "soak-0"
TS0 = 1_700_000_000_000
KEYS = 500


def config(file_delete_delay_ms: int = 0) -> LogConfig:
    """Small segments and indexes (rolls every few appends, preallocated indexes trimmed on each
    roll), compaction and retention by size; ``file_delete_delay_ms`` 0 removes deleted and
    replaced segments at once, above 0 renames them ``.deleted`` first."""
    return LogConfig(segment_bytes=2 << 10, segment_index_bytes=1 << 10, index_interval_bytes=256,
                     cleanup_policy="compact,delete", retention_bytes=6 << 10, retention_ms=-1,
                     min_cleanable_dirty_ratio=0.0, delete_retention_ms=10_000_000,
                     file_delete_delay_ms=file_delete_delay_ms)


def value_of(generation: int, offset: int, key: int) -> bytes:
    return b"%d:%d:%d" % (generation, offset, key)


def write(directory: Path, rounds: int, seed: int, file_delete_delay_ms: int) -> int:
    rng = random.Random(seed)
    clock = [TS0]                  # advances 1 ms a round: .deleted files come due
    log = Log.open(directory / TOPIC_DIR, config(file_delete_delay_ms), clock=lambda: clock[0])
    tp = TopicPartition(log.topic, log.partition)
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=2 << 20, backoff_ms=5), [directory], {tp: log},
                         clock=lambda: TS0)
    truncations = open(directory / "truncations", "a")
    generation = 0
    counts = dict.fromkeys(("appends", "rolls", "truncations", "retention", "cleans"), 0)
    for _ in range(rounds):
        clock[0] += 1
        log.delete_expired_files(clock[0])
        n = rng.randint(1, 15)
        first = log.log_end_offset
        keys = [rng.randrange(KEYS) for _ in range(n)]
        offsets = range(first, first + n)
        log.append(pa.table({
            "key": pa.array([b"%d" % k for k in keys], pa.binary()),
            "value": pa.array([value_of(generation, o, k) for o, k in zip(offsets, keys)], pa.binary()),
            "timestamp": pa.array(TS0 + np.asarray(offsets, dtype=np.int64), pa.int64()),
        }), compression=rng.choice(["none", "lz4"]))
        counts["appends"] += 1
        action = rng.random()
        if action < 0.08:
            log.roll()
            counts["rolls"] += 1
        elif action < 0.16 and log.log_end_offset - log.log_start_offset > 20:
            target = rng.randint(max(log.log_start_offset + 1, log.log_end_offset - 60), log.log_end_offset - 1)
            # Kafka pauses the cleaner around a truncation (LogCleanerManager.abortAndPauseCleaning)
            cleaner.cleaner_manager.abort_and_pause_cleaning(tp)
            try:
                log.truncate_to(target)
            finally:
                cleaner.cleaner_manager.resume_cleaning([tp])
            generation += 1
            truncations.write(f"{generation} {target}\n")
            truncations.flush()
            os.fsync(truncations.fileno())
            counts["truncations"] += 1
        elif action < 0.22:
            counts["retention"] += log.delete_old_segments(TS0)
        elif action < 0.30:
            while cleaner.clean_once(TS0) is not None:
                counts["cleans"] += 1
        time.sleep(0.0005)
    log.close()
    (directory / "done").touch()
    print(" ".join(f"{k}={v}" for k, v in counts.items()), flush=True)
    return 0


def _truncations(directory: Path) -> list[tuple[int, int]]:
    try:
        text = (directory / "truncations").read_text()
    except FileNotFoundError:
        return []
    # a line is whole once the writer's fsync returned; a torn last line is a later truncation
    return [(int(g), int(t)) for g, t in (line.split() for line in text.splitlines(keepends=True)
                                          if line.endswith("\n"))]


def read(directory: Path) -> int:
    part = directory / TOPIC_DIR
    position = 0               # the next offset this reader has not seen
    last_offset = -1
    max_generation = 0
    seen = opens = lookups = 0
    finishing = False
    while True:
        done = (directory / "done").exists()
        known = _truncations(directory)      # every truncation finished before this view opens
        try:
            log = Log.open(part, config(), read_only=True)
        except FileNotFoundError:
            time.sleep(0.01)                 # the writer has not created it yet
            continue
        opens += 1
        try:
            if position < log.log_start_offset:
                position = log.log_start_offset     # retention moved the start: skip forward
            end = log.log_end_offset
            while position < log.log_end_offset:        # a fetch may re-list the view
                try:
                    got = log.fetch(position, max_bytes=4 << 10)
                except OffsetOutOfRangeError:
                    break                   # retention or a truncation passed us: open again
                t = got.table
                for o, v in zip(t.column("offset").to_pylist(), t.column("value").to_pylist()):
                    if o <= last_offset:
                        raise AssertionError(f"offset {o} after {last_offset}: seen twice or out of order")
                    generation, at, _key = (int(x) for x in v.split(b":"))
                    if at != o:
                        raise AssertionError(f"offset {o} holds the value written at {at}: {v!r}")
                    if generation < max_generation:
                        raise AssertionError(f"offset {o} is of generation {generation} after one of "
                                             f"{max_generation}: a record removed by a truncation")
                    for g, target in known:
                        if g > generation and target <= o:
                            raise AssertionError(f"offset {o} of generation {generation}: truncated away "
                                                 f"(generation {g} from {target}) before this view opened")
                    max_generation, last_offset = generation, o
                    seen += 1
                if got.next_offset <= position:
                    if position >= log.log_end_offset:
                        break               # the fetch re-listed a view that ends here now
                    raise AssertionError(f"fetch at {position} did not advance (next {got.next_offset}; "
                                         f"view {log.log_start_offset}-{log.log_end_offset})")
                position = got.next_offset
            # lookups through every index of this view, while the writer changes the files
            for _ in range(3):
                for seg in log.segments:
                    seg.offset_index.lookup(seg.base_offset + random.randrange(200))
                    seg.time_index.lookup(TS0 + seg.base_offset + random.randrange(200))
                    lookups += 2
                log.offsets_for_times(TS0 + random.randrange(max(1, end + 10)))
                lookups += 1
        finally:
            log.close()
        if finishing:
            break
        finishing = done
    print(f"ok {seen} {opens} {lookups}", flush=True)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 6 and argv[1] == "write":
        return write(Path(argv[2]), int(argv[3]), int(argv[4]), int(argv[5]))
    if len(argv) == 3 and argv[1] == "read":
        try:
            return read(Path(argv[2]))
        except BaseException as e:          # noqa: BLE001 - the test reads the reason
            import traceback
            traceback.print_exc()
            print(f"reader failed: {e!r}", file=sys.stderr, flush=True)
            return 1
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))

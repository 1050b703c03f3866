"""kafkalog compaction: a keyed topic whose keys are updated and deleted, compacted by the log
cleaner as a Kafka broker would compact it, no broker and no Spark.

    .venv/bin/python examples/compaction.py                 # data in a new temporary directory
    .venv/bin/python examples/compaction.py --dir /tmp/cmp  # ... or where you say

What it shows:
1. a LogManager over a data directory, and the topic made compacted with the same call
   ``kafkalog config DIR --topic users --set cleanup.policy=compact`` makes;
2. keyed records appended in rounds: every key updated several times, some deleted with a
   tombstone (a record with a key and no value);
3. the cleaner run by hand (what ``kafkalog compact DIR`` does): per round the partition, the dirty
   range and the sizes; then the log read back: offsets unchanged, one record per live key, the
   latest value of each, the deleted keys' tombstones still there (they stay
   ``delete.retention.ms`` so that readers learn of the delete);
4. a second pass after ``delete.retention.ms``: the tombstones are gone too.

``run(workdir)`` returns the figures; tests call it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))    # run from a source checkout

from storage_core.checkpoint import TopicPartition  # noqa: E402
from storage_core.config import LogConfig  # noqa: E402
from storage_core.server import LogManager  # noqa: E402

TOPIC = "users"
PARTITIONS = 2
KEYS = 200                   # per partition
ROUNDS = 5                   # updates of every key
DELETED = range(0, KEYS, 10)     # every tenth key gets a tombstone at the end
T0 = 1_700_000_000_000           # the records' time, and the clock the cleaner is run with
DELETE_RETENTION_MS = 60_000
UPDATED_LATER = 50


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def _write(mgr: LogManager) -> None:
    for p in range(PARTITIONS):
        log = mgr.get_or_create_log(TopicPartition(TOPIC, p))
        for r in range(ROUNDS):
            keys = [f"user-{p}-{k:03d}".encode() for k in range(KEYS)]
            values = [f'{{"user": {k}, "version": {r}}}'.encode() for k in range(KEYS)]
            log.append(pa.table({"key": keys, "value": values,
                                 "timestamp": pa.array([T0 + r] * KEYS, pa.int64())}))
            log.roll()               # the cleaner never touches the active segment: close each round
        tombstones = [f"user-{p}-{k:03d}".encode() for k in DELETED]
        log.append(pa.table({"key": tombstones, "value": pa.array([None] * len(tombstones), pa.binary()),
                             "timestamp": pa.array([T0 + ROUNDS] * len(tombstones), pa.int64())}))
        log.roll()


def _read_all(mgr: LogManager, p: int) -> pa.Table:
    log = mgr.get_log(TopicPartition(TOPIC, p))
    parts, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        t = log.read(offset, max_bytes=1 << 20)
        if t.num_rows == 0:
            break
        parts.append(t)
        offset = t.column("offset")[-1].as_py() + 1
    return pa.concat_tables(parts)


def run(workdir: Path, *, quiet: bool = False) -> dict:
    say = (lambda *a: None) if quiet else print
    workdir = Path(workdir)
    now = [T0]
    # small segments and offset map, a short delete.retention.ms; the clock is ours so the
    # example is repeatable (a real manager reads the wall clock)
    with LogManager.open([workdir], default_config=LogConfig(segment_bytes=64 * 1024),
                         clock=lambda: now[0]) as mgr:
        mgr.alter_topic_config(TOPIC, {"cleanup.policy": "compact",
                                       "delete.retention.ms": DELETE_RETENTION_MS,
                                       "min.cleanable.dirty.ratio": "0.1"})
        say(f"topic {TOPIC!r} in {workdir}: cleanup.policy={mgr.topic_config(TOPIC).cleanup_policy}")
        _write(mgr)
        before = {p: mgr.get_log(TopicPartition(TOPIC, p)).size for p in range(PARTITIONS)}
        records_before = {p: _read_all(mgr, p).num_rows for p in range(PARTITIONS)}
        for p in range(PARTITIONS):
            say(f"  {TOPIC}-{p}: {records_before[p]} records ({KEYS} keys x {ROUNDS} versions + "
                f"{len(DELETED)} tombstones), {_kib(before[p])}")

        say("compacting (kafkalog compact does the same):")

        def progress(r) -> None:
            say(f"  {r.topic_partition}: cleaned offsets [{r.first_dirty_offset}, {r.end_offset}): "
                f"{_kib(r.size_before)} -> {_kib(r.size_after)}, {r.records_removed} records removed")

        rounds = mgr.compact(progress=progress)

        expected = {}
        for p in range(PARTITIONS):
            for k in range(KEYS):
                key = f"user-{p}-{k:03d}".encode()
                expected[key] = None if k in DELETED else f'{{"user": {k}, "version": {ROUNDS - 1}}}'.encode()
        after, survivors = {}, {}
        for p in range(PARTITIONS):
            table = _read_all(mgr, p)
            offsets = table.column("offset").to_pylist()
            assert offsets == sorted(offsets), "order holds"
            latest = dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))
            assert len(latest) == table.num_rows, "one record per key"
            for key, value in latest.items():
                assert expected[key] == value, f"{key!r}: latest value kept"
            after[p] = mgr.get_log(TopicPartition(TOPIC, p)).size
            survivors[p] = table.num_rows
            live = sum(1 for v in latest.values() if v is not None)
            say(f"  {TOPIC}-{p} now: {table.num_rows} records ({live} live keys at their latest version, "
                f"{table.num_rows - live} tombstones kept for delete.retention.ms), "
                f"{_kib(before[p])} -> {_kib(after[p])}, offsets {offsets[0]}..{offsets[-1]} unchanged")
        sample = f"user-0-{KEYS - 1:03d}".encode()
        say(f"  e.g. {sample.decode()} = {expected[sample].decode()}")

        # the first clean stamped a delete horizon (now + delete.retention.ms) on the batches
        # that kept tombstones; a clean after it drops them. A clean happens when enough of the
        # log is dirty again: update some users
        now[0] += DELETE_RETENTION_MS + 1
        updated = [k for k in range(KEYS - UPDATED_LATER, KEYS) if k not in DELETED]
        for p in range(PARTITIONS):
            log = mgr.get_log(TopicPartition(TOPIC, p))
            log.append(pa.table({"key": [f"user-{p}-{k:03d}".encode() for k in updated],
                                 "value": [f'{{"user": {k}, "version": {ROUNDS}}}'.encode() for k in updated]}))
            log.roll()
            for k in updated:
                expected[f"user-{p}-{k:03d}".encode()] = f'{{"user": {k}, "version": {ROUNDS}}}'.encode()
        say(f"{DELETE_RETENTION_MS} ms later (delete.retention.ms), {len(updated)} users updated again:")
        rounds += mgr.compact(progress=progress)
        tombstones_left = 0
        for p in range(PARTITIONS):
            table = _read_all(mgr, p)
            latest = dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))
            assert len(latest) == table.num_rows
            assert latest == {k: v for k, v in expected.items() if v is not None and k.startswith(b"user-%d-" % p)}
            tombstones_left += table.column("value").null_count
            survivors[p] = table.num_rows
            say(f"  {TOPIC}-{p}: {table.num_rows} records, one per live user, "
                f"{table.column('value').null_count} tombstones left")
        total_before, total_after = sum(before.values()), sum(mgr.get_log(TopicPartition(TOPIC, p)).size
                                                              for p in range(PARTITIONS))
        say(f"done: {_kib(total_before)} -> {_kib(total_after)} "
            f"({100 * (1 - total_after / total_before):.0f}% smaller) in {len(rounds)} cleaning rounds")
    return {"rounds": len(rounds), "bytes_before": total_before, "bytes_after": total_after,
            "records_before": sum(records_before.values()), "records_after": sum(survivors.values()),
            "tombstones_left": tombstones_left}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="data directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        if any(args.dir.iterdir()):
            parser.error(f"{args.dir} is not empty")
        run(args.dir)
    else:
        with tempfile.TemporaryDirectory(prefix="kafkalog-compaction-") as tmp:
            run(Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())

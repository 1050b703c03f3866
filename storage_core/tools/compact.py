"""``kafkalog compact DIR [--topic T ...] [--now MS] [--dedupe-buffer-size N] [--force] [--purge]
[--json]``: the log cleaner, run by hand over every partition of the compacted topics until
none is cleanable by Kafka's rules (``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``;
with ``--force`` any dirty byte is cleaned), one line per cleaning round, then a summary: bytes
before and after, records removed, time. Exit 1 if a partition could not be cleaned.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from ..config import CleanerConfig
from .data_dirs import data_dir, open_manager, purge, report_load_errors, scoped_logs
from .output import Output, human_bytes

if TYPE_CHECKING:                  # the engine is imported when the command runs (cheap --help)
    from ..server import CompactionRound


def _round_line(r: CompactionRound) -> str:
    """One cleaning round (a ``LogManager.compact`` result) as a line."""
    s = r.stats
    return (f"{r.topic_partition}: cleaned offsets [{r.first_dirty_offset}, {r.end_offset}): "
            f"{human_bytes(r.size_before)} -> {human_bytes(r.size_after)}, "
            f"{s.messages_read - s.messages_written} of {s.messages_read} records removed "
            f"in {r.seconds:.2f} s")


def run(args: argparse.Namespace, out: Output) -> int:
    """Compact the partitions of the compacted topics (of ``--topic``): a line per round as it
    ends, then the totals."""
    root = data_dir(args.dir)
    cleaner_config = CleanerConfig(dedupe_buffer_size=args.dedupe_buffer_size)
    started = time.perf_counter()
    with open_manager(root, args.now, cleaner_config=cleaner_config) as mgr:
        failed = report_load_errors(out, mgr, args.topic)
        scoped = [(tp, log) for tp, log in scoped_logs(mgr, args.topic) if log.config.compact]
        if args.force:
            for _, log in scoped:     # in memory only: the topic's configuration is untouched
                mgr.apply_config(log, log.config.with_changes(min_cleanable_dirty_ratio=0.0))
        before = {tp: log.size for tp, log in scoped}
        if not scoped:
            which = f" of topic {', '.join(args.topic)}" if args.topic else ""
            out.text(f"no compacted partitions{which} in {root} (cleanup.policy=compact); nothing to do")
        topics = sorted({tp.topic for tp, _ in scoped})
        rounds = (mgr.compact(mgr.clock(), topics=topics,
                              progress=lambda r: out.text(_round_line(r), flush=True))
                  if scoped else [])
        uncleanable = mgr.uncleanable_partitions()
        for tp in sorted(uncleanable):
            out.text(f"{tp}: FAILED: marked uncleanable after an error (details above)")
        failed += len(uncleanable)
        after = {tp: log.size for tp, log in scoped}
        purged = purge(mgr) if args.purge else 0
        pending = sum(log.pending_deletes for _, log in scoped)
    elapsed = time.perf_counter() - started
    size_before, size_after = sum(before.values()), sum(after.values())
    totals = {"partitions": len(scoped), "rounds": len(rounds),
              "partitions_cleaned": len({r.topic_partition for r in rounds}),
              "bytes_before": size_before, "bytes_after": size_after,
              "records_removed": sum(r.records_removed for r in rounds), "seconds": elapsed,
              "failed": failed, "files_purged": purged, "pending_deletes": pending}
    parts = [{"topic": tp.topic, "partition": tp.partition, "bytes_before": before[tp],
              "bytes_after": after[tp], "uncleanable": tp in uncleanable} for tp, _ in scoped]
    out.document({"dir": str(root), "rounds": [r.as_dict() for r in rounds], "partitions": parts,
                  "totals": totals})
    if scoped:
        saved = 100 * (1 - size_after / size_before) if size_before else 0.0
        out.text(f"compacted {totals['partitions_cleaned']} of {len(scoped)} partitions in {len(rounds)} "
                 f"rounds: {human_bytes(size_before)} -> {human_bytes(size_after)} ({saved:.1f}% smaller), "
                 f"{totals['records_removed']} records removed in {elapsed:.2f} s"
                 + (f", {failed} failed" if failed else ""))
        if pending:
            out.text(f"{pending} replaced segment files renamed .deleted stay until file.delete.delay.ms "
                     f"has passed and the partition is opened again (or run with --purge)")
    return 1 if failed else 0

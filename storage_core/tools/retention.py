"""``kafkalog retention DIR [--topic T ...] [--now MS] [--purge] [--json]``: the broker's
retention task, run now. The data directory is opened with a ``LogManager`` and retention is
applied to every partition by its topic's configuration (Kafka's defaults, e.g. ``retention.ms``
of 7 days, plus the overrides ``kafkalog config`` keeps): ``UnifiedLog.deleteOldSegments`` by
log start offset, and with ``cleanup.policy`` containing ``delete`` by ``retention.bytes`` and
``retention.ms`` (judged at ``--now``). Deleted segments are renamed ``.deleted`` as Kafka does;
``--purge`` removes those files before exiting. Exit 1 if a partition failed.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..config import CleanerConfig
from .data_dirs import data_dir, open_manager, purge, report_load_errors, scoped_logs
from .output import Output, human_bytes


def run(args: argparse.Namespace, out: Output) -> int:
    """Apply retention to every partition (of ``--topic``), one line per partition, then the
    totals."""
    root = data_dir(args.dir)
    with open_manager(root, args.now, cleaner_config=CleanerConfig(enable_cleaner=False)) as mgr:
        now = mgr.clock()
        failed = report_load_errors(out, mgr, args.topic)
        scoped = scoped_logs(mgr, args.topic)
        rows: list[dict[str, Any]] = []
        for i, (tp, log) in enumerate(scoped, 1):
            out.progress(i, len(scoped), tp)
            segments_before = log.num_segments
            results = mgr.cleanup_logs(now, partitions=[tp], include_compacted=True)
            r = results[0] if results else None
            c = log.config
            row: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition, "cleanup_policy": c.cleanup_policy,
                   "retention_ms": c.retention_ms, "retention_bytes": c.retention_bytes,
                   "segments_before": segments_before, "segments_deleted": r.segments_deleted if r else 0,
                   "bytes_deleted": r.bytes_deleted if r else 0,
                   "log_start_offset_before": r.log_start_offset_before if r else log.log_start_offset,
                   "log_start_offset": log.log_start_offset, "log_end_offset": log.log_end_offset,
                   "error": r.error if r else None}
            rows.append(row)
            policy = (f"cleanup.policy={c.cleanup_policy}, retention.ms={c.retention_ms}, "
                      f"retention.bytes={c.retention_bytes}")
            if row["error"]:
                out.text(f"{tp}: FAILED: {row['error']}")
            elif row["segments_deleted"]:
                out.text(f"{tp}: deleted {row['segments_deleted']} of {segments_before} segments "
                         f"({human_bytes(row['bytes_deleted'])}), log start offset "
                         f"{row['log_start_offset_before']} -> {row['log_start_offset']} ({policy})")
            else:
                out.text(f"{tp}: nothing to delete, {segments_before} segments, log start offset "
                         f"{log.log_start_offset} ({policy})")
        purged = purge(mgr) if args.purge else 0
        pending = sum(log.pending_deletes for _, log in scoped)
    failed += sum(1 for r in rows if r["error"])
    touched = sum(1 for r in rows if r["segments_deleted"])
    totals = {"partitions": len(rows), "partitions_changed": touched,
              "segments_deleted": sum(r["segments_deleted"] for r in rows),
              "bytes_deleted": sum(r["bytes_deleted"] for r in rows), "failed": failed,
              "files_purged": purged, "pending_deletes": pending}
    out.document({"dir": str(root), "now": now, "partitions": rows, "totals": totals})
    out.text(f"retention: {totals['segments_deleted']} segments ({human_bytes(totals['bytes_deleted'])}) "
             f"deleted from {touched} of {len(rows)} partitions" + (f", {failed} failed" if failed else ""))
    if pending:
        out.text(f"{pending} segment files renamed .deleted stay until file.delete.delay.ms has passed "
                 f"and the partition is opened again (or run with --purge)")
    return 1 if failed else 0

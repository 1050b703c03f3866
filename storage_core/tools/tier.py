"""``kafkalog tier DIR [--config FILE] [--property KEY=VALUE ...] [--topic T ...] [--now MS] [--json]``:
one pass of Kafka's ``RemoteLogManager`` tasks over a data directory: the ``RLMCopyTask`` copies
every tiered partition's rolled segments below its last stable offset to remote storage, then the
``RLMExpirationTask`` deletes the remote segments ``retention.ms``/``retention.bytes`` expire
(judged at ``--now``), and local retention runs (``local.retention.*``: only segments already in
remote storage leave the local log). Broker settings come as Kafka's: a properties file (``--config``, e.g. a
``server.properties``) and ``--property`` overrides, with the plugins' settings under
``rsm.config.`` and ``rlmm.config.``; ``remote.log.storage.system.enable`` is implied. Topics
are tiered by their ``remote.storage.enable`` (``kafkalog config --set``). Progress goes to
stderr, one line per segment; exit 1 if a partition failed.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..config import CleanerConfig
from ..remote import REMOTE_LOG_METADATA_TOPIC_NAME, RemoteLogManagerConfig, RemoteLogSegmentMetadata
from ..remote.remote_log_manager_config import REMOTE_LOG_STORAGE_SYSTEM_ENABLE_PROP
from .data_dirs import data_dir, open_manager, report_load_errors, scoped_logs
from .output import Output, UsageError, human_bytes
from .remote_tier import broker_properties


def _properties(args: argparse.Namespace) -> dict[str, str]:
    """The broker properties of ``--config`` and ``--property``; remote storage enabled."""
    props = broker_properties(args)
    props.setdefault(REMOTE_LOG_STORAGE_SYSTEM_ENABLE_PROP, "true")
    return props


def run(args: argparse.Namespace, out: Output) -> int:
    root = data_dir(args.dir)
    config = RemoteLogManagerConfig.from_properties(_properties(args))
    if not config.remote_log_storage_system_enable:
        raise UsageError(f"{REMOTE_LOG_STORAGE_SYSTEM_ENABLE_PROP}=false: nothing to tier")
    with open_manager(root, args.now, cleaner_config=CleanerConfig(enable_cleaner=False),
                      remote_log_manager_config=config) as mgr:
        rlm = mgr.remote_log_manager
        assert rlm is not None
        now = mgr.clock()
        failed = report_load_errors(out, mgr, args.topic)
        scoped = [(tp, log) for tp, log in scoped_logs(mgr, args.topic) if tp.topic != REMOTE_LOG_METADATA_TOPIC_NAME]
        rows: list[dict[str, Any]] = []
        for i, (tp, log) in enumerate(scoped, 1):
            out.progress(i, len(scoped), tp)

            def progress(event: str, _log: object, md: RemoteLogSegmentMetadata, i: int = i, tp: object = tp) -> None:
                if event in ("copied", "deleting"):
                    out.progress(i, len(scoped), f"{tp}: {event} offsets {md.start_offset}-{md.end_offset} "
                                                 f"({human_bytes(md.segment_size_in_bytes)})")

            for r in rlm.run_once([log], now, progress=progress):
                row = r.as_dict()
                local = [] if r.error else mgr.cleanup_logs(now, partitions=[tp])
                row["local_segments_deleted"] = sum(x.segments_deleted for x in local)
                row["local_bytes_deleted"] = sum(x.bytes_deleted for x in local)
                row["local_log_start_offset"] = log.log_start_offset
                if any(x.error for x in local):
                    row["error"] = r.error = "; ".join(x.error for x in local if x.error)
                rows.append(row)
                if r.error:
                    out.text(f"{tp}: FAILED: {r.error}")
                else:
                    out.text(f"{tp}: copied {r.segments_copied} segments ({human_bytes(r.bytes_copied)}), deleted "
                             f"{r.remote_segments_deleted} remote segments ({human_bytes(r.remote_bytes_deleted)})"
                             + (f", cleaned {r.orphans_deleted} unfinished" if r.orphans_deleted else "")
                             + f", highest offset in remote storage {r.highest_offset_in_remote_storage}, deleted "
                             f"{row['local_segments_deleted']} local segments "
                             f"({human_bytes(row['local_bytes_deleted'])}), local log start offset "
                             f"{log.log_start_offset}")
        store = str(rlm.rsm)
    failed += sum(1 for r in rows if r["error"])
    totals = {"partitions": len(rows), "segments_copied": sum(r["segments_copied"] for r in rows),
              "bytes_copied": sum(r["bytes_copied"] for r in rows),
              "remote_segments_deleted": sum(r["remote_segments_deleted"] for r in rows),
              "remote_bytes_deleted": sum(r["remote_bytes_deleted"] for r in rows),
              "orphans_deleted": sum(r["orphans_deleted"] for r in rows),
              "local_segments_deleted": sum(r["local_segments_deleted"] for r in rows), "failed": failed}
    out.document({"dir": str(root), "now": now, "store": store, "partitions": rows, "totals": totals})
    out.text(f"tier: {totals['segments_copied']} segments ({human_bytes(totals['bytes_copied'])}) copied to {store}, "
             f"{totals['remote_segments_deleted']} remote and {totals['local_segments_deleted']} local segments "
             f"deleted, {len(rows)} tiered partitions"
             + (f", {failed} failed" if failed else ""))
    return 1 if failed else 0

"""``kafkalog describe DIR [--json]``: a data directory (``topic-partition`` folders) or one
partition folder, opened read-only: per partition the segments (base offset, size, first/last
offset, index entries, max timestamp and first indexed timestamp from the time index, which
index files exist), log start/end offsets, the checkpoint values, leader epochs and topic id;
totals at the end. A data directory holding a ``__remote_log_metadata`` topic (kafkalog's or a
broker's) also shows each tiered partition's remote segments, folded read-only from that topic
(state, offsets, size, max timestamp, leader epochs, whether the transaction index is empty, the
object name in ``LocalTieredStorage``'s layout). Exit 1 if a partition could not be read.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from ..checkpoint import (CLEANER_OFFSET_CHECKPOINT, LEADER_EPOCH_CHECKPOINT,
                          LOG_START_OFFSET_CHECKPOINT, PARTITION_METADATA_FILE,
                          RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                          LeaderEpochCheckpointFile, OffsetCheckpointFile, PartitionMetadataFile,
                          parse_topic_partition_dir, topic_id_from_str, topic_id_to_str)
from ..config import LogConfig
from ..errors import KafkaLogError
from ..log import Log, LogSegment, filename_prefix
from ..remote import (REMOTE_LOG_METADATA_TOPIC_NAME, RemoteLogSegmentFileType, TopicBasedRemoteLogMetadataManager,
                      TopicIdPartition, partition_dir_name, segment_file_name)
from .data_dirs import partition_dirs
from .files import OFFSET_CHECKPOINTS, segment_bases, time_entries, valid_prefix
from .output import Output, optional

# checkpoint name -> (its offsets by (topic, partition), why it could not be read)
Checkpoints = dict[str, tuple[dict[Any, int], str | None]]


def _read_offset_checkpoint(path: Path) -> tuple[dict[Any, int], str | None]:
    if not path.exists():
        return {}, None
    try:
        return OffsetCheckpointFile(path).read(), None
    except (OSError, KafkaLogError) as e:
        return {}, str(e)


def _segment_info(seg: LogSegment) -> dict[str, Any]:
    """One segment, cheaply: the first batch header, the indexes' entries, and the scan from
    the last offset-index entry that ``read_next_offset`` does."""
    base = seg.base_offset
    first = next(iter(seg.batches(0)), None)
    next_offset = seg.read_next_offset()
    offsets = seg.offset_index.entries_array()["relative_offset"].tolist()
    n_index = valid_prefix(offsets)
    times = time_entries(seg.time_index)
    n_time = len(times)
    paths = {kind: seg.log_path.with_name(filename_prefix(base) + kind)
             for kind in (".index", ".timeindex", ".txnindex", ".snapshot")}
    return {
        "base_offset": base,
        "size": seg.size,
        "first_offset": None if first is None else first.base_offset,
        "last_offset": None if first is None else next_offset - 1,
        "next_offset": next_offset,
        "index_entries": n_index,
        "last_indexed_offset": base + offsets[n_index - 1] if n_index else None,
        "time_index_entries": n_time,
        "first_indexed_timestamp": times[0][0] if n_time else None,
        "max_timestamp": times[-1][0] if n_time else None,
        "max_timestamp_offset": base + times[-1][1] if n_time else None,
        "has_index": paths[".index"].exists(),
        "has_timeindex": paths[".timeindex"].exists(),
        "has_txnindex": paths[".txnindex"].exists(),
        "has_snapshot": paths[".snapshot"].exists(),
    }


def _describe_partition(d: Path, checkpoints: Checkpoints) -> dict[str, Any]:
    """One partition folder as the JSON document shows it (``error`` if it cannot be read)."""
    info: dict[str, Any] = {"partition": d.name, "dir": str(d), "topic": None, "partition_id": None}
    key = None
    try:
        tp = parse_topic_partition_dir(d.name)
        info["topic"], info["partition_id"] = tp.topic, tp.partition
        key = (tp.topic, tp.partition)
    except KafkaLogError:
        pass
    cps = {}
    for name, (offsets, error) in checkpoints.items():
        cps[name] = offsets.get(key) if key is not None else None
        if error:
            info.setdefault("checkpoint_errors", {})[name] = error
    info["checkpoints"] = cps
    try:
        # the file readers, not read_text: bounded line by line, FIFOs refused
        info["leader_epochs"] = [[e.epoch, e.start_offset] for e in
                                 LeaderEpochCheckpointFile.in_dir(d).read()] \
            if (d / LEADER_EPOCH_CHECKPOINT).exists() else None
    except (OSError, ValueError, KafkaLogError) as e:
        info["leader_epochs"] = None
        info.setdefault("checkpoint_errors", {})[LEADER_EPOCH_CHECKPOINT] = str(e)
    try:
        meta = d / PARTITION_METADATA_FILE
        info["topic_id"] = (topic_id_to_str(PartitionMetadataFile(d).read())
                            if meta.exists() else None)
    except (OSError, ValueError, KafkaLogError) as e:
        info["topic_id"] = None
        info.setdefault("checkpoint_errors", {})[PARTITION_METADATA_FILE] = str(e)
    info["producer_snapshots"] = sorted(int(f.name.split(".")[0]) for f in d.iterdir()
                                        if re.fullmatch(r"[0-9]+\.snapshot", f.name))
    segments = []
    try:
        if key is not None:
            with Log.open(d, read_only=True) as log:
                for seg in log.segments:
                    segments.append(_segment_info(seg))
                info["log_start_offset"] = log.log_start_offset
                info["log_end_offset"] = log.log_end_offset
        else:
            # not a topic-partition name (a copied folder): the segments alone, read-only
            config = LogConfig()
            bases = segment_bases(d)
            for base in bases:
                seg = LogSegment(d, base, config, writable=False, preallocate=False)
                try:
                    segments.append(_segment_info(seg))
                finally:
                    seg.close()
            info["log_start_offset"] = bases[0] if bases else 0
            info["log_end_offset"] = segments[-1]["next_offset"] if segments else 0
    except (OSError, KafkaLogError) as e:
        info["error"] = str(e)
    info["segments"] = segments
    info["size"] = sum(s["size"] for s in segments)
    return info


def _remote_segments(d: Path, info: dict[str, Any], rlmm: TopicBasedRemoteLogMetadataManager) -> None:
    """The partition's remote segments (every state, by start offset) from the metadata topic."""
    if info.get("topic_id") is None or info.get("topic") is None:
        return
    # the topic id _describe_partition read from partition.metadata: not read a second time
    tip = TopicIdPartition(topic_id_from_str(info["topic_id"]), parse_topic_partition_dir(d.name))
    try:
        mds = sorted(rlmm.list_remote_log_segments(tip), key=lambda m: (m.start_offset, m.event_timestamp_ms))
    except (OSError, KafkaLogError) as e:
        info["remote_error"] = str(e)
        return
    info["remote_segments"] = [{
        "segment_id": topic_id_to_str(m.remote_log_segment_id.id), "state": m.state.name,
        "start_offset": m.start_offset, "end_offset": m.end_offset, "size": m.segment_size_in_bytes,
        "max_timestamp": m.max_timestamp_ms, "leader_epochs": [list(e) for e in m.segment_leader_epochs],
        "txn_idx_empty": m.txn_idx_empty,
        "object": f"{partition_dir_name(tip)}/{segment_file_name(m, RemoteLogSegmentFileType.SEGMENT)}",
    } for m in mds]


def _write_remote(part: dict[str, Any], out: Output) -> None:
    if part.get("remote_error"):
        out.text(f"  unreadable remote log metadata: {part['remote_error']}")
    remote = part.get("remote_segments")
    if not remote:
        return
    out.text(f"  remote segments {len(remote)}  size {sum(r['size'] for r in remote)} bytes")
    for r in remote:
        out.text(f"    {r['start_offset']}-{r['end_offset']}  {r['state']}  {r['size']} bytes  max timestamp "
                 f"{r['max_timestamp']}  epochs " + " ".join(f"{e}@{o}" for e, o in r["leader_epochs"])
                 + f"  txn index {'empty' if r['txn_idx_empty'] else 'present'}  {r['object']}")


def _write_text(result: dict[str, Any], out: Output) -> None:
    """The document as text: per partition a heading, offsets, checkpoints and a table of its
    segments; the totals last."""
    cols = ("base offset", "size", "first offset", "last offset", "index", "timeindex",
            "first indexed ts", "max timestamp", "files")
    for part in result["partitions"]:
        out.text(f"{part['partition']}  ({part['dir']})")
        if part.get("error"):
            out.text(f"  ERROR: {part['error']}")
        cp = part["checkpoints"]
        out.text(f"  log start offset {optional(part.get('log_start_offset'))}  log end offset "
                  f"{optional(part.get('log_end_offset'))}  segments {len(part['segments'])}  size "
                  f"{part['size']} bytes")
        out.text(f"  checkpoints: recovery point {optional(cp.get(RECOVERY_POINT_CHECKPOINT))}  "
                  f"log start {optional(cp.get(LOG_START_OFFSET_CHECKPOINT))}  high watermark "
                  f"{optional(cp.get(REPLICATION_OFFSET_CHECKPOINT))}  cleaner "
                  f"{optional(cp.get(CLEANER_OFFSET_CHECKPOINT))}")
        epochs = part["leader_epochs"]
        out.text("  leader epochs: "
                  + ("-" if epochs is None else
                     " ".join(f"{e}@{o}" for e, o in epochs) or "(none)")
                  + f"  topic id {optional(part['topic_id'])}  producer snapshots "
                  + (" ".join(map(str, part["producer_snapshots"])) or "-"))
        for name, error in part.get("checkpoint_errors", {}).items():
            out.text(f"  unreadable {name}: {error}")
        rows = []
        for s in part["segments"]:
            files = ",".join(k for k, flag in (("index", s["has_index"]),
                                               ("timeindex", s["has_timeindex"]),
                                               ("txnindex", s["has_txnindex"]),
                                               ("snapshot", s["has_snapshot"])) if flag)
            rows.append((str(s["base_offset"]), str(s["size"]), optional(s["first_offset"]),
                         optional(s["last_offset"]), str(s["index_entries"]),
                         str(s["time_index_entries"]), optional(s["first_indexed_timestamp"]),
                         optional(s["max_timestamp"]), files or "-"))
        if rows:
            widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
            out.text("  " + "  ".join(c.rjust(w) for c, w in zip(cols, widths)))
            for r in rows:
                out.text("  " + "  ".join(v.rjust(w) for v, w in zip(r, widths)))
        _write_remote(part, out)
        out.text("")
    t = result["totals"]
    out.text(f"TOTAL  partitions {t['partitions']}  segments {t['segments']}  size "
              f"{t['size']} bytes  offsets {t['offsets']}"
              + (f"  errors {t['errors']}" if t["errors"] else ""))


def run(args: argparse.Namespace, out: Output) -> int:
    """Describe every partition under ``args.dir``, read-only, with progress on stderr."""
    root = Path(args.dir)
    if not root.exists():
        raise FileNotFoundError(f"No such file or directory: {args.dir}")
    dirs = partition_dirs(root)
    checkpoints_by_parent: dict[Path, Checkpoints] = {}
    rlmms: dict[Path, TopicBasedRemoteLogMetadataManager | None] = {}
    partitions = []
    for i, d in enumerate(dirs, 1):
        out.progress(i, len(dirs), d.name)
        parent = d.parent
        if parent not in checkpoints_by_parent:
            checkpoints_by_parent[parent] = {name: _read_offset_checkpoint(parent / name)
                                             for name in OFFSET_CHECKPOINTS}
        info = _describe_partition(d, checkpoints_by_parent[parent])
        if parent not in rlmms:
            rlmms[parent] = TopicBasedRemoteLogMetadataManager({"log.dir": str(parent)}, read_only=True) \
                if any(parent.glob(f"{REMOTE_LOG_METADATA_TOPIC_NAME}-*")) else None
        rlmm = rlmms[parent]
        if rlmm is not None:
            _remote_segments(d, info, rlmm)
        partitions.append(info)
    for rlmm in rlmms.values():
        if rlmm is not None:
            rlmm.close()
    totals = {
        "partitions": len(partitions),
        "segments": sum(len(p["segments"]) for p in partitions),
        "size": sum(p["size"] for p in partitions),
        "offsets": sum(max(0, p.get("log_end_offset", 0) - p.get("log_start_offset", 0))
                       for p in partitions if "error" not in p),
        "errors": sum(1 for p in partitions if "error" in p),
    }
    result = {"dir": str(root), "partitions": partitions, "totals": totals}
    out.document(result)
    _write_text(result, out)
    return 1 if totals["errors"] else 0

"""``kafkalog recover DIR [--full]``: Kafka's log recovery, run now. Every partition is opened
writable with ``Log.open``, which validates everything after the recovery point and truncates
an invalid tail (``--full`` first drops the partition from ``recovery-point-offset-checkpoint``
so every segment is validated); then what changed is reported per partition and in total.
Exit 1 if a partition could not be recovered.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..checkpoint import (DELETE_DIR_SUFFIX, RECOVERY_POINT_CHECKPOINT, STRAY_DIR_SUFFIX,
                          OffsetCheckpointFile, TopicPartition, parse_topic_partition_dir,
                          without_invalid_topics)
from ..errors import KafkaLogError
from ..log import Log
from .data_dirs import check_data_dir, partition_dirs
from .output import Output


def _files(d: Path) -> dict[str, int]:
    return {f.name: f.stat().st_size for f in d.iterdir() if f.is_file()}


def _log_end_offset(d: Path) -> int | None:
    """The partition's log end offset as a read-only open finds it (None if unreadable)."""
    try:
        with Log.open(d, read_only=True) as log:
            return log.log_end_offset
    except (OSError, KafkaLogError):
        return None                             # unreadable as it is: recovery will tell


def _forget_recovery_point(d: Path, tp: TopicPartition) -> None:
    """``--full``: drop the partition's entry from the data directory's recovery-point
    checkpoint, so that the open validates every segment."""
    cp = OffsetCheckpointFile(d.parent / RECOVERY_POINT_CHECKPOINT)
    if cp.path.exists():
        try:
            offsets: dict[tuple[str, int], int] = {
                key: value for key, value in without_invalid_topics(cp.read(), cp.path).items()}
        except KafkaLogError:
            return                               # unreadable: Log.open treats it as empty
        if offsets.pop(tp, None) is not None:
            cp.write(offsets)


def _changes(before: dict[str, int], after: dict[str, int]) -> tuple[list[str], int | None]:
    """What recovery did to the partition's files, and the bytes of ``.log`` it removed (None
    if no ``.log`` lost bytes)."""
    notes = []
    removed: int | None = None
    for name, size in sorted(before.items()):
        is_log = name.endswith(".log")
        if name not in after:
            notes.append(f"deleted {name}")
            if is_log:
                removed = (removed or 0) + size
        elif is_log and after[name] < size:
            notes.append(f"truncated {name} from {size} to {after[name]} bytes")
            removed = (removed or 0) + size - after[name]
    for name in sorted(set(after) - set(before)):
        notes.append(f"created {name}")
    return notes, removed


def run(args: argparse.Namespace, out: Output) -> int:
    """Recover every partition under ``args.dir``, with progress on stderr."""
    root = Path(args.dir)
    if not root.exists():
        raise FileNotFoundError(f"No such file or directory: {args.dir}")
    dirs = partition_dirs(root)
    if dirs != [root]:
        check_data_dir(root)                    # a data directory, not a folder of strangers
    failed = changed = 0
    bytes_truncated = 0
    for i, d in enumerate(dirs, 1):
        out.progress(i, len(dirs), d.name)
        try:
            tp = parse_topic_partition_dir(d.name)
        except KafkaLogError as e:
            out.text(f"{d.name}: FAILED: {e}")
            failed += 1
            continue
        if d.name.endswith((DELETE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
            out.text(f"{d.name}: skipped: marked for deletion (a broker deletes it, never loads it)")
            continue
        before = _files(d)
        leo_before = _log_end_offset(d)
        try:
            if args.full:
                _forget_recovery_point(d, tp)
            with Log.open(d) as log:
                leo_after = log.log_end_offset
                start_after = log.log_start_offset
        except (OSError, KafkaLogError) as e:
            out.text(f"{d.name}: FAILED: {e}")
            failed += 1
            continue
        notes, removed = _changes(before, _files(d))
        if leo_before is not None and leo_before != leo_after:
            notes.insert(0, f"log end offset {leo_before} -> {leo_after}")
        truncated = removed is not None
        changed += truncated
        bytes_truncated += removed or 0
        status = "truncated" if truncated else "ok"
        out.text(f"{d.name}: {status}: log start offset {start_after}, log end offset {leo_after}"
                 + ("" if not notes else "; " + "; ".join(notes)))
    out.text(f"{len(dirs) - failed} of {len(dirs)} partitions recovered, {changed} truncated "
             f"({bytes_truncated} bytes removed)" + (f", {failed} failed" if failed else ""))
    return 1 if failed else 0

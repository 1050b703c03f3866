"""The directories the commands are given: a data directory (``topic-partition`` folders, as a
broker's ``log.dirs`` entry) or one partition folder; and the ``LogManager`` the commands that
change a data directory (``retention``, ``compact``) open over it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..checkpoint import (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX, TopicPartition,
                          parse_topic_partition_dir)
from ..common import LONG_MAX, wall_ms
from ..errors import KafkaLogError
from .files import has_segments
from .output import Output, UsageError

if TYPE_CHECKING:
    from ..log import Log
    from ..server import LogManager


def is_topic_partition_name(name: str) -> bool:
    """Named ``topic-partition`` as Kafka names a partition directory (any suffix included)."""
    try:
        parse_topic_partition_dir(name)
        return True
    except KafkaLogError:
        return False


def is_live_partition_name(name: str) -> bool:
    """A partition directory a broker loads: not one marked for deletion, stray or future."""
    return is_topic_partition_name(name) and not name.endswith(
        (DELETE_DIR_SUFFIX, STRAY_DIR_SUFFIX, FUTURE_DIR_SUFFIX))


def _partition_key(d: Path) -> tuple[int, str, int, str]:
    try:
        tp = parse_topic_partition_dir(d.name)
        return (0, tp.topic, tp.partition, d.name)
    except KafkaLogError:
        return (1, d.name, 0, d.name)


def partition_dirs(root: Path) -> list[Path]:
    """``root`` itself if it is a partition folder, else its partition sub-folders (named
    ``topic-partition``, or holding segments), by topic and partition."""
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory")
    if has_segments(root):
        return [root]
    parts = [d for d in root.iterdir() if d.is_dir()
             and (is_topic_partition_name(d.name) or has_segments(d))]
    if not parts and is_topic_partition_name(root.name):
        return [root]                         # an empty partition folder
    return sorted(parts, key=_partition_key)


def data_dir(arg: str) -> Path:
    """The data directory a command that opens a ``LogManager`` is given (not a partition)."""
    root = Path(arg)
    if not root.exists():
        raise FileNotFoundError(f"No such file or directory: {arg}")
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory")
    if has_segments(root):
        raise UsageError(f"{root} is a partition directory: give its data directory "
                         f"({root.parent}) and --topic")
    return root


def open_manager(root: Path, now: int | None, **kwargs: Any) -> "LogManager":
    """A ``LogManager`` over ``root`` whose clock stands at ``now`` (epoch ms) when given."""
    from ..server import LogManager

    clock: Callable[[], int] = (lambda: now) if now is not None else wall_ms
    return LogManager.open([root], clock=clock, **kwargs)


def scoped_logs(mgr: "LogManager", topics: list[str] | None) -> list[tuple[TopicPartition, "Log"]]:
    """The manager's logs of ``topics`` (all without), by topic and partition."""
    return sorted(((tp, log) for tp, log in mgr.logs.items() if not topics or tp.topic in topics),
                  key=lambda e: (e[0].topic, e[0].partition))


def report_load_errors(out: Output, mgr: "LogManager", topics: list[str] | None) -> int:
    """``<partition>: FAILED: <error>`` for each partition of ``topics`` the manager could not
    load; how many failed (with ``--json``, where nothing is printed: every partition that
    failed to load, whatever its topic)."""
    if out.json:
        return len(mgr.load_errors)
    failed = 0
    for path, error in sorted(mgr.load_errors.items()):
        try:
            topic: str | None = parse_topic_partition_dir(path.name).topic
        except KafkaLogError:
            topic = None
        if not topics or topic in topics:
            out.text(f"{path.name}: FAILED: {error}")
            failed += 1
    return failed


def purge(mgr: "LogManager") -> int:
    """Remove every pending ``.deleted`` file at once (``--purge``); how many were removed."""
    return mgr.delete_expired_files(LONG_MAX)

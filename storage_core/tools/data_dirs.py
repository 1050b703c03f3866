"""The directories the commands are given: a data directory (``topic-partition`` folders, as a
broker's ``log.dirs`` entry) or one partition folder; and the ``LogManager`` the commands that
change a data directory (``retention``, ``compact``) open over it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..checkpoint import (CLEAN_SHUTDOWN_FILE, CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                          RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, TopicPartition,
                          parse_topic_partition_dir)
from ..common import LONG_MAX, wall_ms
from ..errors import KafkaLogError
from ..log import topic_partition_dir
from .files import has_segments
from .output import Output, UsageError

if TYPE_CHECKING:
    from ..log import Log
    from ..server import LogManager


def is_topic_partition_name(name: str) -> bool:
    """Named ``topic-partition`` as Kafka names a partition directory (any suffix included)."""
    return topic_partition_dir(name) is not None


def is_live_partition_name(name: str) -> bool:
    """A partition directory a broker loads: not one marked for deletion, stray or future."""
    named = topic_partition_dir(name)
    return named is not None and named.is_live


def _partition_key(d: Path) -> tuple[int, str, int, str]:
    named = topic_partition_dir(d.name)
    if named is None:
        return (1, d.name, 0, d.name)
    return (0, named.topic_partition.topic, named.topic_partition.partition, d.name)


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
    check_data_dir(root)
    return root


def data_dir_marks() -> tuple[str, ...]:
    """The files at the top of a data directory that a broker or kafkalog writes there: the
    ``LogManager``'s checkpoints and lock, the clean-shutdown marker, KRaft's
    ``meta.properties`` (``kafka-storage format``) and kafkalog's topic overrides."""
    from ..server import LOCK_FILE, TOPIC_CONFIG_FILE

    return (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
            CLEANER_OFFSET_CHECKPOINT, CLEAN_SHUTDOWN_FILE, LOCK_FILE, "meta.properties", TOPIC_CONFIG_FILE)


def check_data_dir(root: Path) -> None:
    """Refuse a directory that is not empty yet holds nothing of a data directory: none of
    ``data_dir_marks()`` and no ``topic-partition`` folder with a segment (``/etc``, a home
    directory, a typo one level too high). The commands that write (``recover``, ``retention``,
    ``compact``, ``tier``, ``config``) would otherwise put a lock and checkpoints there and
    create segments in any folder named like a partition (``dbus-1``: topic ``dbus``, partition
    1). A broker does not start on such a directory either: KRaft requires the
    ``meta.properties`` that ``kafka-storage format`` writes, and ``LogManager.loadLogs`` fails
    a log directory holding a folder not named ``topic-partition``."""
    entries = list(root.iterdir())
    if not entries:
        return                                  # a new, empty data directory
    marks = data_dir_marks()
    if any(e.name in marks for e in entries):
        return
    if any(e.is_dir() and is_topic_partition_name(e.name) and has_segments(e) for e in entries):
        return
    raise UsageError(f"{root} does not look like a Kafka data directory: it holds none of a data "
                     f"directory's files ({', '.join(marks)}) and no topic-partition folder with a "
                     f"segment; nothing was written (give the data directory itself, a broker's "
                     f"log.dirs entry)")


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

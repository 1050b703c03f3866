"""The data directories of a ``LogManager``: their locking, the loading of their logs at start-up
and their closing at shutdown, and the writing of their checkpoints (Kafka's
``LogManager.lockLogDirs``, ``loadLogs``, ``loadLog``, ``checkpointRecoveryOffsetsInDir`` and
``checkpointLogStartOffsetsInDir``).

Per data dir: the ``.lock`` file is locked (one manager per dir); the ``.kafka_cleanshutdown``
marker is read and deleted (a crash while loading makes the next start unclean, KAFKA-10471);
then every ``topic-partition`` directory is opened on a pool of
``num.recovery.threads.per.data.dir`` threads, with ``had_clean_shutdown`` telling ``Log.open``
whether recovery can be skipped. ``-delete`` directories are handed back for deletion, ``-stray``
ones are kept aside untouched, ``-future`` ones are loaded as future logs; anything else that is
not a partition is ignored with a warning (a broker would refuse to start), KRaft's
``__cluster_metadata-0`` and the ``remote-log-index-cache`` silently, as Kafka ignores them.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..checkpoint import (DELETE_DIR_SUFFIX, STRAY_DIR_SUFFIX, CleanShutdownFile, TopicPartition,
                          parse_topic_partition_dir, update_offset_checkpoint)
from ..config import LogConfig
from ..errors import KafkaLogError, LogLockedError
from ..log import Log, topic_partition_dir
from ..remote import REMOTE_INDEX_CACHE_DIR_NAME
from .config_repository import ConfigRepository

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"                  # LogManager.LockFileName
CLUSTER_METADATA_TOPIC = "__cluster_metadata"     # KafkaRaftServer.MetadataTopic


@dataclass
class DataDir:
    """Per data dir state of one manager run."""

    path: Path
    lock_fd: int = -1
    had_clean_shutdown: bool = False
    clean_marker_mtime_ns: int = 0
    loaded_all: bool = False
    load_errors: dict[str, str] = field(default_factory=dict)
    stray_dirs: list[Path] = field(default_factory=list)

    def lock(self) -> None:
        """``LogManager.lockLogDirs`` for this dir: ``.lock`` + ``FileLock``, not blocking."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogLockedError(
                f"Failed to acquire lock on file {LOCK_FILE} in {self.path}. A Kafka instance in another "
                f"process or thread is using this directory.") from None
        self.lock_fd = fd

    def unlock(self) -> None:
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1

    def take_clean_shutdown_marker(self) -> None:
        """Remember whether the dir was shut down cleanly, then delete the marker: a crash while
        loading must make the next start unclean (KAFKA-10471)."""
        marker = CleanShutdownFile(self.path)
        if marker.exists():
            self.clean_marker_mtime_ns = marker.path.stat().st_mtime_ns
            marker.delete()
            self.had_clean_shutdown = True

    def partition_dirs(self) -> tuple[list[Path], list[Path]]:
        """``(directories to load, -delete directories to delete)``; ``-stray`` directories are
        kept in ``stray_dirs``. As ``LogManager.loadLogs`` lists a log dir: files are not looked
        at, and neither are the tiered-storage index cache and KRaft's own metadata log
        (``__cluster_metadata-0``: no retention, cleaning or tiering of kafkalog's may touch it).
        Any other directory whose name is not a topic-partition's is ignored with a warning
        (where a broker refuses to start)."""
        load, delete = [], []
        for entry in sorted(self.path.iterdir()):
            if not entry.is_dir() or entry.name == REMOTE_INDEX_CACHE_DIR_NAME:
                continue
            named = topic_partition_dir(entry.name)
            if named is None:
                logger.warning("Ignoring %s: not a topic-partition directory", entry)
                continue
            if named.topic_partition.topic == CLUSTER_METADATA_TOPIC:
                logger.info("Leaving %s alone: the KRaft metadata log is the controller's", entry)
                continue
            if named.suffix == STRAY_DIR_SUFFIX:
                # KRaft keeps stray logs until its metadata says they can go; kafkalog has no
                # metadata, so they stay untouched for an operator to look at
                logger.warning("Found stray log: %s (left untouched)", entry)
                self.stray_dirs.append(entry)
                continue
            if named.suffix == DELETE_DIR_SUFFIX:
                logger.info("Scheduling deletion of %s, marked for deletion", entry)
                delete.append(entry)
                continue
            load.append(entry)
        return load, delete


def open_log(path: Path, config: LogConfig, *, clock: Callable[[], int], had_clean_shutdown: bool,
             create: bool, topic_id: uuid.UUID | None = None) -> Log:
    return Log.open(path, config, create=create, clock=clock, had_clean_shutdown=had_clean_shutdown,
                    topic_id=topic_id)


def newest_mtime_ns(directory: Path) -> int:
    """The newest modification time of the files directly in ``directory``."""
    newest = 0
    with os.scandir(directory) as it:
        for entry in it:
            try:
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime_ns)
            except FileNotFoundError:
                continue
    return newest


def load_log(d: DataDir, path: Path, config: LogConfig, clock: Callable[[], int]) -> Log:
    """``LogManager.loadLog``: open the partition in ``path``, recovering it unless its data dir
    was shut down cleanly and nothing in it changed since."""
    clean = d.had_clean_shutdown
    if clean:
        # the marker vouches for what the manager closed; a file written after it (another
        # process appending with the manager down) would be trusted blindly by a clean load
        newest = newest_mtime_ns(path)
        if newest > d.clean_marker_mtime_ns:
            logger.warning("%s was modified after the clean shutdown marker was written: recovering it", path)
            clean = False
    return open_log(path, config, clock=clock, had_clean_shutdown=clean, create=False)


def load_data_dir(d: DataDir, candidates: list[Path], *, threads: int, repository: ConfigRepository,
                  overrides: Mapping[str, Mapping[str, str]], clock: Callable[[], int],
                  register: Callable[[TopicPartition, Path, Log], None]) -> None:
    """Load ``candidates`` (partition directories of ``d``) on a pool of ``threads``; each loaded
    log is handed to ``register`` (which refuses a duplicate by raising ``KafkaLogError``, after
    closing the log). A partition that fails to load stays unloaded, its error recorded in
    ``d.load_errors``; ``d.loaded_all`` says whether all loaded."""
    def load_one(path: Path) -> None:
        tp = parse_topic_partition_dir(path.name)
        started = time.perf_counter()
        log = load_log(d, path, repository.topic_config(tp.topic, overrides), clock)
        register(tp, path, log)
        logger.info("Completed load of %s with %d segments, log-start-offset %d and log-end-offset %d in %d ms",
                    log.dir.name, len(log.segments), log.log_start_offset, log.log_end_offset,
                    (time.perf_counter() - started) * 1000)

    with ThreadPoolExecutor(threads, thread_name_prefix=f"log-recovery-{d.path.name}") as pool:
        futures = [(p, pool.submit(load_one, p)) for p in candidates]
        errors = 0
        for p, fut in futures:
            try:
                fut.result()
            except (OSError, KafkaLogError) as e:
                # Kafka takes the whole dir offline on an IOException; here the partition
                # stays unloaded (and the dir gets no clean marker), the others go on
                errors += 1
                d.load_errors[p.name] = str(e)
                logger.error("Error while loading log %s: %s", p, e)
    d.loaded_all = errors == 0


def close_logs(d: DataDir, logs: list[Log], threads: int) -> bool:
    """Flush and close ``logs`` (of data dir ``d``) on a pool of ``threads``; True if any failed."""
    failed = False

    def close_one(log: Log) -> None:
        log.flush()             # the latest possible recovery point
        log.close()

    with ThreadPoolExecutor(threads, thread_name_prefix=f"log-closing-{d.path.name}") as pool:
        futures = {pool.submit(close_one, log): log for log in logs}
        for fut, log in futures.items():
            try:
                fut.result()
            except Exception:
                failed = True
                logger.warning("There was an error closing %s during LogManager shutdown", log.dir, exc_info=True)
    return failed


def recovery_points(logs: Mapping[TopicPartition, Log]) -> dict[TopicPartition, int]:
    return {tp: log.recovery_point for tp, log in logs.items()}


def moved_log_start_offsets(logs: Mapping[TopicPartition, Log]) -> dict[TopicPartition, int]:
    """The log start offsets of the logs whose start moved past their first segment: the only
    ones ``log-start-offset-checkpoint`` lists (``checkpointLogStartOffsetsInDir``)."""
    return {tp: log.log_start_offset for tp, log in logs.items()
            if log.segments and log.log_start_offset > log.segments[0].base_offset}


def write_dir_checkpoint(data_dir: Path, name: str, offsets: dict[TopicPartition, int],
                         managed: set[TopicPartition]) -> None:
    """Rewrite the dir's checkpoint ``name`` with ``offsets``: all of a manager's logs at once, as
    Kafka writes it. Entries of partitions the manager does not manage (``managed``) whose
    directory exists (another process's, or one that failed to load) are kept; entries of gone
    partitions drop out. An unreadable file is rewritten from ``offsets``. Take ``managed``
    before calling: no manager lock may be taken under the data dir's lock."""
    def update(existing: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        kept = {tp: value for tp, value in existing.items()
                if tp not in offsets and tp not in managed and (data_dir / str(tp)).is_dir()}
        return {**offsets, **kept}

    update_offset_checkpoint(data_dir, name, update, reset_unreadable=True)

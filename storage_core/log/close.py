"""Closing many partition logs of a data directory at once (a commit's partitions, say): each
``Log.close`` writes its entries into the directory's recovery-point and log-start-offset
checkpoints, a read and rewrite of the whole file each time; Kafka's LogManager checkpoints all
of a directory's logs in one write (``checkpointLogRecoveryOffsetsInDir``), and so does this."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .loader import write_partitions_checkpoints
from .log import Log


def close_logs(logs: list[Log], each: Callable[[Callable[[Log], None], list[Log]], None] | None = None) -> None:
    """``Log.close`` for every log of ``logs`` (open for writing, this process their only user), with
    each data directory's recovery-point and log-start checkpoints written once for all its logs,
    as Kafka's LogManager checkpoints a directory, not once per log: each write reads and rewrites
    the whole file under the directory's lock, so closing n logs of a directory one by one costs
    n rewrites of n entries. The entries are written while every log still holds its writer lock.
    ``each(fn, logs)`` runs the per-log flushes (a pool's map, say); by default one after the
    other. Every log is released whatever fails; the first failure is raised."""
    live = [log for log in logs if not log._closed]
    try:
        writers = [log for log in live if not log.read_only]

        def flush(log: Log) -> None:
            with log._lock:
                log.flush()
                log.producer_state.take_snapshot()      # at the LEO

        if each is not None:
            each(flush, writers)
        else:
            for log in writers:
                flush(log)
        by_dir: dict[Path, list[Log]] = {}
        for log in writers:
            by_dir.setdefault(log.dir.parent, []).append(log)
        for data_dir, group in by_dir.items():
            write_partitions_checkpoints(data_dir, [(log.dir, log.recovery_point, log.log_start_offset,
                                                     log.segments[0].base_offset) for log in group])
        for log in writers:
            log.delete_snapshots_after_recovery_point_checkpoint()
            log.delete_expired_files()
    finally:
        failed: BaseException | None = None
        for log in live:
            try:
                with log._lock:
                    log._release()
            except BaseException as e:          # the others are released all the same
                failed = failed or e
        if failed is not None:
            raise failed

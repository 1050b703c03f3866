"""Metrics as a plain Python API, built from a ``LogManagerSnapshot`` (``LogManager.snapshot()``):
its logs' counters (``LogMetrics``, kept by each ``Log``), its data directories, tasks and
cleaner, read by the CLI. No registry, no reporter: values are dataclasses a caller can print,
compare or export.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..checkpoint import TopicPartition
from ..log import Log, LogMetrics
from .scheduler import ScheduledTask

if TYPE_CHECKING:      # the cleaner is imported when a manager first compacts (compiled kernels)
    from ..cleaner import LogCleaner
    from .compaction import CompactionRound


@dataclass(frozen=True)
class LogManagerSnapshot:
    """What a ``LogManager`` holds at one moment (``LogManager.snapshot()``): its data dirs and
    logs, the ``LogCleaner`` if one was created, and the totals of its retention and hand-run
    cleaning. Containers are copies; the logs and the cleaner are the live objects."""

    log_dirs: list[Path]
    logs: dict[TopicPartition, Log]             # the current logs
    future_logs: dict[TopicPartition, Log]
    opened_at: dict[Path, float]                # log dir -> time.monotonic() when the manager opened it
    had_clean_shutdown: dict[Path, bool]        # per data dir
    load_errors: dict[Path, str]                # partition dirs that failed to load, with the reason
    logs_to_be_deleted: list[Path]              # ``-delete`` directories waiting for file.delete.delay.ms
    stray_dirs: list[Path]
    tasks: list[ScheduledTask]
    retention_segments_deleted: int             # by ``cleanup_logs``
    retention_bytes_deleted: int
    cleaner: LogCleaner | None
    compaction_rounds: list[CompactionRound]    # by ``compact``
    uncleanable_partitions: set[TopicPartition]

    @property
    def all_logs(self) -> list[Log]:
        """Current and future logs."""
        return [*self.logs.values(), *self.future_logs.values()]


# --- LogManager aggregation (per partition, per data directory) -------------------------------
# Kafka publishes these as JMX gauges and meters (``Log.Size``, ``Log.NumLogSegments``,
# ``Log.LogStartOffset``/``LogEndOffset``, ``LogFlushStats.LogFlushRateAndTimeMs``, the cleaner's
# ``max-buffer-utilization-percent``, ``cleaner-recopy-percent``, ...). Here a snapshot is a tree of
# dataclasses built on demand by ``LogManager.metrics()``; rates are means over the time since the
# log was opened (Kafka's ``Meter.meanRate``), in events per second of real time.


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def _mean_ms(total_ns: int, count: int) -> float:
    return total_ns / count / 1e6 if count else 0.0


@dataclass
class PartitionMetrics:
    """One partition's gauges and counters."""

    topic: str
    partition: int
    dir: str
    size: int
    num_segments: int
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    uptime_s: float
    appends: int
    appended_records: int
    appended_bytes: int
    append_rate: float                  # appends per second
    append_records_rate: float
    append_bytes_rate: float
    append_time_ms_mean: float
    flushes: int
    flush_rate: float
    flush_time_ms_mean: float
    flush_time_ms_total: float
    retention_runs: int
    segments_deleted: int
    bytes_deleted: int
    segments_replaced: int
    pending_deletes: int                # segments/snapshots renamed .deleted, not yet removed
    cleaner: dict[str, object] | None = None     # the LogCleaner's figures for this partition

    @classmethod
    def of(cls, log: Log, uptime_s: float, cleaner: dict[str, object] | None = None) -> "PartitionMetrics":
        m: LogMetrics = log.metrics
        segments = log.segments
        return cls(
            topic=log.topic, partition=log.partition, dir=str(log.dir),
            size=log.size, num_segments=len(segments),
            log_start_offset=log.log_start_offset, log_end_offset=log.log_end_offset,
            recovery_point=log.recovery_point, uptime_s=uptime_s,
            appends=m.appends, appended_records=m.appended_records, appended_bytes=m.appended_bytes,
            append_rate=_rate(m.appends, uptime_s), append_records_rate=_rate(m.appended_records, uptime_s),
            append_bytes_rate=_rate(m.appended_bytes, uptime_s),
            append_time_ms_mean=_mean_ms(m.append_time_ns, m.appends),
            flushes=m.flushes, flush_rate=_rate(m.flushes, uptime_s),
            flush_time_ms_mean=_mean_ms(m.flush_time_ns, m.flushes), flush_time_ms_total=m.flush_time_ns / 1e6,
            retention_runs=m.retention_runs, segments_deleted=m.segments_deleted, bytes_deleted=m.bytes_deleted,
            segments_replaced=m.segments_replaced, pending_deletes=log.pending_deletes,
            cleaner=cleaner)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class DataDirMetrics:
    """The sums over one data directory, plus its state (Kafka's per log-dir gauges)."""

    path: str
    partitions: int
    size: int
    num_segments: int
    appends: int
    appended_records: int
    appended_bytes: int
    append_rate: float
    append_bytes_rate: float
    flushes: int
    flush_rate: float
    flush_time_ms_total: float
    segments_deleted: int
    bytes_deleted: int
    segments_replaced: int
    had_clean_shutdown: bool
    load_errors: int                    # partitions that failed to load (Kafka: dir offline)
    logs_to_be_deleted: int             # ``-delete`` directories waiting for file.delete.delay.ms
    stray_dirs: int

    @classmethod
    def of(cls, path: str, parts: list[PartitionMetrics], *, had_clean_shutdown: bool, load_errors: int,
           logs_to_be_deleted: int, stray_dirs: int) -> "DataDirMetrics":
        def total(name: str) -> Any:
            return sum(getattr(p, name) for p in parts)

        return cls(path=path, partitions=len(parts), size=total("size"), num_segments=total("num_segments"),
                   appends=total("appends"), appended_records=total("appended_records"),
                   appended_bytes=total("appended_bytes"), append_rate=total("append_rate"),
                   append_bytes_rate=total("append_bytes_rate"), flushes=total("flushes"),
                   flush_rate=total("flush_rate"), flush_time_ms_total=total("flush_time_ms_total"),
                   segments_deleted=total("segments_deleted"), bytes_deleted=total("bytes_deleted"),
                   segments_replaced=total("segments_replaced"), had_clean_shutdown=had_clean_shutdown,
                   load_errors=load_errors, logs_to_be_deleted=logs_to_be_deleted, stray_dirs=stray_dirs)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class TaskMetrics:
    """One scheduler task: how often it ran, failed, and the time it took."""

    name: str
    runs: int
    failures: int
    total_time_ms: float
    next_run_ms: int
    last_run_ms: int | None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class ManagerMetrics:
    """Everything ``LogManager.metrics()`` reports: per data dir, per partition, the scheduler's
    tasks, the retention totals of ``cleanup_logs`` and the cleaner's figures (whatever the
    ``LogCleaner`` reports, as a dict; ``None`` without a cleaner)."""

    dirs: list[DataDirMetrics]
    partitions: list[PartitionMetrics]
    tasks: list[TaskMetrics]
    retention_segments_deleted: int
    retention_bytes_deleted: int
    cleaner: dict[str, object] | None = None

    def partition(self, topic: str, partition: int) -> PartitionMetrics | None:
        return next((p for p in self.partitions if p.topic == topic and p.partition == partition), None)

    def dir(self, path: object) -> DataDirMetrics | None:
        return next((d for d in self.dirs if d.path == str(path)), None)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def collect(cls, snap: LogManagerSnapshot) -> "ManagerMetrics":
        """The figures of a ``LogManager`` snapshot; rates over the time since each log was opened."""
        now = time.monotonic()
        cleaner_all = _cleaner_figures(snap.cleaner)
        per_tp: dict[str, dict[str, object]] = {}
        if snap.cleaner is not None:
            cm = snap.cleaner.cleaner_manager
            checkpoints = cm.all_cleaner_checkpoints()
            for tp, log in snap.logs.items():
                if log.config.compact:
                    state = cm.cleaning_state(tp)
                    per_tp[str(tp)] = {"first_dirty_offset": checkpoints.get(tp),
                                       "uncleanable": tp in snap.uncleanable_partitions,
                                       "state": None if state is None else type(state).__name__}
            history = snap.compaction_rounds
            cleaner_all = dict(cleaner_all or {})
            cleaner_all["manual_rounds"] = len(history)
            cleaner_all["manual_bytes_read"] = sum(r.stats.bytes_read for r in history)
            cleaner_all["manual_bytes_written"] = sum(r.stats.bytes_written for r in history)
            cleaner_all["manual_records_removed"] = sum(r.records_removed for r in history)
        parts_by_dir: dict[str, list[PartitionMetrics]] = {str(d): [] for d in snap.log_dirs}
        partitions = []
        for log in sorted(snap.all_logs, key=lambda log: (log.topic, log.partition, str(log.dir))):
            uptime = now - snap.opened_at.get(log.dir, now)
            pm = PartitionMetrics.of(log, uptime, per_tp.get(f"{log.topic}-{log.partition}"))
            partitions.append(pm)
            parts_by_dir.setdefault(str(log.dir.parent), []).append(pm)
        to_delete = [str(p.parent) for p in snap.logs_to_be_deleted]
        errors = [str(p.parent) for p in snap.load_errors]
        strays = [str(p.parent) for p in snap.stray_dirs]
        dirs = [DataDirMetrics.of(path, parts, had_clean_shutdown=snap.had_clean_shutdown.get(Path(path), False),
                                  load_errors=errors.count(path), logs_to_be_deleted=to_delete.count(path),
                                  stray_dirs=strays.count(path))
                for path, parts in parts_by_dir.items()]
        tasks = [TaskMetrics(t.name, t.runs, t.failures, t.total_time_ms, t.next_run_ms, t.last_run_ms)
                 for t in sorted(snap.tasks, key=lambda t: t.name)]
        return cls(dirs=dirs, partitions=partitions, tasks=tasks,
                   retention_segments_deleted=snap.retention_segments_deleted,
                   retention_bytes_deleted=snap.retention_bytes_deleted, cleaner=cleaner_all)


def _cleaner_figures(cleaner: LogCleaner | None) -> dict[str, object] | None:
    """The LogCleaner's gauges (``LogCleaner.metrics``) as a plain dict; ``None`` without one."""
    return None if cleaner is None else dict(cleaner.metrics())

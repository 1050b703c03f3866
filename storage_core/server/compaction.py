"""Cleaning rounds run by hand: ``LogManager.compact`` drives ``LogCleaner.clean_once`` on the
calling thread (the CLI, tests, a scheduler with its own clock) instead of the cleaner's threads,
and reports each round (``CompactionRound``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..checkpoint import TopicPartition

if TYPE_CHECKING:      # imported when a manager first compacts: the cleaner loads compiled kernels
    from ..cleaner import CleanerStats, LogCleaner, LogCleanerManager
    from ..log import Log


@dataclass(frozen=True)
class CompactionRound:
    """One cleaning round of ``compact``: which partition, the dirty range cleaned
    (``[first_dirty_offset, end_offset)``), its size before and after, and the cleaner's stats."""

    topic_partition: TopicPartition | None
    first_dirty_offset: int | None
    end_offset: int | None
    size_before: int
    size_after: int
    stats: CleanerStats
    seconds: float

    @property
    def records_removed(self) -> int:
        return self.stats.messages_read - self.stats.messages_written

    def as_dict(self) -> dict[str, Any]:
        tp = self.topic_partition
        s = self.stats
        return {"topic": None if tp is None else tp.topic, "partition": None if tp is None else tp.partition,
                "first_dirty_offset": self.first_dirty_offset, "end_offset": self.end_offset,
                "size_before": self.size_before, "size_after": self.size_after,
                "bytes_read": s.bytes_read, "bytes_written": s.bytes_written,
                "messages_read": s.messages_read, "messages_written": s.messages_written,
                "records_removed": self.records_removed, "invalid_messages_read": s.invalid_messages_read,
                "buffer_utilization": s.buffer_utilization, "seconds": self.seconds}


def uncleanable_partitions(cm: LogCleanerManager) -> set[tuple[str, TopicPartition]]:
    """``(data dir, partition)`` of every partition the cleaner set aside after an error."""
    return {(str(d), tp) for d in cm.log_dirs for tp in cm.uncleanable_partitions(d)}


def compact_by_hand(cleaner: LogCleaner, current_logs: Callable[[], Mapping[TopicPartition, Log]],
                    now_ms: int | None = None,
                    *, topics: Iterable[str] | None = None, max_rounds: int = 10000,
                    progress: Callable[[CompactionRound], None] | None = None) -> list[CompactionRound]:
    """Cleaning rounds until no log is cleanable (see ``LogManager.compact``); ``current_logs``
    returns the manager's current logs. ``progress`` is called after each round. Returns every round."""
    cm = cleaner.cleaner_manager
    wanted = None if topics is None else set(topics)
    paused: list[TopicPartition] = []
    if wanted is not None:
        for key, log in current_logs().items():
            if log.config.compact and key.topic not in wanted:
                cleaner.abort_and_pause_cleaning(key)
                paused.append(key)
    rounds: list[CompactionRound] = []
    try:
        for _ in range(max_rounds):
            compacted = {tp: log for tp, log in current_logs().items() if log.config.compact}
            sizes = {tp: log.size for tp, log in compacted.items()}
            checkpoints = cm.all_cleaner_checkpoints()
            uncleanable = uncleanable_partitions(cm)
            started = time.perf_counter()
            stats = cleaner.clean_once(now_ms)
            if stats is None:
                if uncleanable_partitions(cm) - uncleanable:
                    continue          # one failed and was set aside: the others may still need it
                break
            after = cm.all_cleaner_checkpoints()
            moved = [tp for tp in compacted if after.get(tp) != checkpoints.get(tp)]
            # the cleaned log's checkpoint moved; a forced reset may move others' too
            moved.sort(key=lambda tp: compacted[tp].size == sizes[tp])
            tp: TopicPartition | None = moved[0] if moved else None
            r = CompactionRound(
                topic_partition=tp,
                first_dirty_offset=None if tp is None else checkpoints.get(tp, compacted[tp].log_start_offset),
                end_offset=None if tp is None else after.get(tp),
                size_before=0 if tp is None else sizes[tp], size_after=0 if tp is None else compacted[tp].size,
                stats=stats, seconds=time.perf_counter() - started)
            rounds.append(r)
            if progress is not None:
                progress(r)
    finally:
        if paused:
            cleaner.resume_cleaning(paused)
    return rounds


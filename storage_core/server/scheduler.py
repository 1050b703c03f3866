"""KafkaScheduler: named one-shot and periodic background tasks (Kafka's ``KafkaScheduler`` and,
for tests, its ``MockScheduler``, in one class).

The ``LogManager`` schedules its housekeeping here: ``kafka-log-retention``, ``kafka-log-flusher``,
``kafka-recovery-point-checkpoint``, ``kafka-log-start-offset-checkpoint``, ``kafka-delete-logs``,
the producer-id expiration check and, when the cleaner runs by hand, ``kafka-log-cleaner``.

Two ways to drive it:

* ``start()`` runs a daemon thread that executes each task when it is due by the scheduler's
  clock, until ``shutdown()`` (which waits for a running task to finish, as Kafka's
  ``KafkaScheduler.shutdown`` awaits termination);
* ``run_due(now_ms)`` runs, on the caller's thread, every task due at ``now_ms``: tests and the CLI
  advance an injected clock and call it, no sleeping (``MockScheduler.tick``).

A task that raises is logged and, if periodic, stays scheduled: one failing partition must not
stop retention or checkpoints for the others (Kafka wraps every task the same way).
A periodic task that fell several periods behind runs once and is rescheduled on its period grid
after ``now``; Kafka's mock would replay every missed period, which for flush, retention and
checkpoints only repeats the same work.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..common import wall_ms

logger = logging.getLogger(__name__)

Clock = Callable[[], int]


@dataclass(eq=False)
class ScheduledTask:
    """One task: ``period_ms <= 0`` means run once. ``runs``, ``failures`` and ``total_time_ms``
    are kept for metrics and tests; ``last_error`` is the last exception the task raised."""

    name: str
    fn: Callable[[], object]
    period_ms: int
    next_run_ms: int
    runs: int = 0
    failures: int = 0
    total_time_ms: float = 0.0
    last_run_ms: int | None = None
    last_error: BaseException | None = None
    cancelled: bool = False
    _seq: int = field(default=0, repr=False)

    @property
    def periodic(self) -> bool:
        return self.period_ms > 0

    def cancel(self) -> None:
        self.cancelled = True


class KafkaScheduler:
    """Runs tasks by name at ``delay_ms`` after scheduling and then every ``period_ms``.

    ``clock`` gives the current time in ms; the background thread and ``run_due()`` without an
    argument read it. Thread safe: tasks may be scheduled from any thread, also from a task."""

    def __init__(self, *, clock: Clock = wall_ms, thread_name: str = "kafka-scheduler") -> None:
        self.clock = clock
        self.thread_name = thread_name
        self._heap: list[tuple[int, int, ScheduledTask]] = []
        self._tasks: dict[str, ScheduledTask] = {}
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._run_lock = threading.Lock()      # one task at a time, thread or run_due
        self._thread: threading.Thread | None = None
        self._stopping = False

    # ------------------------------------------------------------------------------ scheduling

    def schedule(self, name: str, fn: Callable[[], object], *, delay_ms: int = 0,
                 period_ms: int = -1) -> ScheduledTask:
        """Schedule ``fn`` as ``name`` (a name already scheduled is replaced)."""
        with self._cond:
            old = self._tasks.get(name)
            if old is not None:
                old.cancel()
            task = ScheduledTask(name, fn, period_ms, self.clock() + max(0, delay_ms),
                                 _seq=next(self._seq))
            self._tasks[name] = task
            heapq.heappush(self._heap, (task.next_run_ms, task._seq, task))
            self._cond.notify_all()
        logger.debug("Scheduling task %s with initial delay %d ms and period %d ms", name, delay_ms, period_ms)
        return task

    def schedule_once(self, name: str, fn: Callable[[], object], *, delay_ms: int = 0) -> ScheduledTask:
        return self.schedule(name, fn, delay_ms=delay_ms, period_ms=-1)

    def cancel(self, name: str) -> bool:
        with self._cond:
            task = self._tasks.pop(name, None)
            if task is None:
                return False
            task.cancel()
            return True

    def task(self, name: str) -> ScheduledTask | None:
        with self._cond:
            return self._tasks.get(name)

    @property
    def tasks(self) -> dict[str, ScheduledTask]:
        with self._cond:
            return dict(self._tasks)

    def next_due_ms(self) -> int | None:
        with self._cond:
            self._drop_cancelled()
            return self._heap[0][0] if self._heap else None

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)

    # ------------------------------------------------------------------------------ running

    def _pop_due(self, now_ms: int, ran: set[int]) -> ScheduledTask | None:
        with self._cond:
            self._drop_cancelled()
            if not self._heap or self._heap[0][0] > now_ms or self._heap[0][2]._seq in ran:
                return None
            _, _, task = heapq.heappop(self._heap)
            return task

    def _execute(self, task: ScheduledTask, now_ms: int) -> None:
        started = time.perf_counter()
        try:
            logger.debug("Beginning execution of scheduled task '%s'", task.name)
            task.fn()
        except Exception as e:      # a task's failure is its own; the scheduler goes on
            task.failures += 1
            task.last_error = e
            logger.error("Uncaught exception in scheduled task '%s'", task.name, exc_info=True)
        finally:
            task.runs += 1
            task.last_run_ms = now_ms
            task.total_time_ms += (time.perf_counter() - started) * 1000
        with self._cond:
            if task.cancelled:
                return
            if task.periodic:
                behind = max(0, now_ms - task.next_run_ms)
                task.next_run_ms += task.period_ms * (behind // task.period_ms + 1)
                task._seq = next(self._seq)
                heapq.heappush(self._heap, (task.next_run_ms, task._seq, task))
            elif self._tasks.get(task.name) is task:
                del self._tasks[task.name]

    def run_due(self, now_ms: int | None = None) -> list[str]:
        """Run, on this thread, every task due at ``now_ms`` (default: the clock), earliest first,
        each at most once. Returns the names of the tasks run, in order."""
        now = self.clock() if now_ms is None else now_ms
        done: list[str] = []
        ran: set[int] = set()
        with self._run_lock:
            while (task := self._pop_due(now, ran)) is not None:
                self._execute(task, now)
                ran.add(task._seq)       # a zero-period reschedule cannot loop forever
                done.append(task.name)
        return done

    def start(self) -> None:
        """Run due tasks on a daemon thread until ``shutdown()``."""
        with self._cond:
            if self._thread is not None:
                raise RuntimeError("The scheduler has already been started")
            self._stopping = False
            self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
            self._thread.start()
        logger.debug("Initialized task scheduler %s", self.thread_name)

    @property
    def is_started(self) -> bool:
        return self._thread is not None

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                self._drop_cancelled()
                now = self.clock()
                wait_ms = None if not self._heap else self._heap[0][0] - now
                if wait_ms is None or wait_ms > 0:
                    # capped, so that an injected clock that jumps ahead is noticed
                    self._cond.wait(timeout=1.0 if wait_ms is None else min(wait_ms / 1000, 1.0))
                    continue
            self.run_due()

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Stop the thread after the task it is running (if any); pending tasks are dropped from
        the thread but stay scheduled, so ``run_due()`` can still run them."""
        with self._cond:
            thread, self._thread = self._thread, None
            self._stopping = True
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        logger.debug("Shut down task scheduler %s", self.thread_name)

    def __enter__(self) -> "KafkaScheduler":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"KafkaScheduler({sorted(self._tasks)}, started={self.is_started})"

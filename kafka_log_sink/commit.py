"""Driver side of the sink: exactly-once commits with Kafka's own tools, a transactional
producer per query and a small transaction log beside the query's checkpoint.

A micro-batch is one Kafka transaction of the query's producer (a stable producer id, kept in
``<checkpoint>/kafkalog-sink/producer.json``). ``commit(batch_id)`` plays the transaction
coordinator (``TransactionCoordinator``) over the partition logs:

1. record ``{batch, "ongoing", partitions}`` in ``txn.json`` (atomic replace, fsynced);
2. append every staged batch to its partition, numbered by the log (base offset) and by the
   producer's sequence in that partition (base sequence, its CRC updated), made durable
   (``staged_append``: the bytes are copied by the kernel, the driver touches headers only);
   staged files in a store (``staging_store``) are first fetched to the driver's own folder,
   several partitions ahead of the appends;
3. record ``"prepare_commit"``: from here the batch is committed whatever happens;
4. append a COMMIT marker to every partition; record ``"complete"``.

A restart finds the record of an interrupted commit and finishes it as Kafka's coordinator
would: an ``ongoing`` transaction is aborted (ABORT markers: its records stay in the log but a
``read_committed`` reader never sees them), a ``prepare_commit`` one is committed on the
partitions still missing their marker. A batch id at or below the last complete one is not
appended again (Spark replays the last batch after a restart). A ``read_committed`` reader
therefore sees every micro-batch exactly once and never a part of one. The transaction log and
the producer identity live in a store folder when ``checkpointLocation`` is a store URI
(``SinkState``), each replaced whole.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

import numpy as np

from storage_core.checkpoint import FUTURE_DIR_SUFFIX, atomic_write, read_small_file
from storage_core.common import INT_MAX, LONG_MAX
from storage_core.errors import InvalidTopicError, KafkaLogError, LogLockedError
from storage_core.format.log_input_stream import scan_batches
from storage_core.format.batch_header import LOG_OVERHEAD, BatchField, patch_field, read_field
from storage_core.format.record_batch import base_sequences, compute_crc, increment_sequence
from storage_core.log import Log, close_logs, topic_partition_dir

from .open_files import OpenLogBudget, log_open_files
from .options import SinkOptions, default_staging, staging_store_uri
from .staged_append import append_staged, can_append_staged
from .staging_store import STATE_FILE_MAX_BYTES, StagingStore
from .writer import ProducerIdentity, StagedRun

logger = logging.getLogger(__name__)

T = TypeVar("T")

STATE_DIR = "kafkalog-sink"
LOCK_WAIT_S = 60.0
STORE_SWEEP_INTERVAL_S = 60.0
FETCH_THREADS = 8                   # staged objects fetched at once, partitions ahead of their appends
_LAST_STORE_SWEEP: dict[str, float] = {}       # staging store root -> when this process last swept it


_PRODUCER_ID_RANGE = (0, LONG_MAX)           # what load_producer makes: getrandbits(62)
_EPOCH_RANGE = (0, (1 << 15) - 1)            # a producer epoch is a Java short, never negative


def _json_int(where: str, key: str, value: object, bounds: tuple[int, int]) -> int:
    """``value`` of ``key`` in the sink's file ``where`` as an int within ``bounds``; not a bool
    and not a float (which ``int()`` would truncate, or fail on as ``OverflowError``)."""
    if type(value) is not int or not bounds[0] <= value <= bounds[1]:
        raise KafkaLogError(f"Unreadable sink file {where}: {key} is {str(value)[:40]}, not an integer "
                            f"from {bounds[0]} to {bounds[1]}")
    return value


def load_producer(opts: SinkOptions) -> ProducerIdentity:
    """The query's producer identity, created on its first start (a random 62-bit id: two
    queries never share one) and read back on every restart."""
    state = SinkState.of(opts)
    if state is None:
        return ProducerIdentity(random.getrandbits(62))
    raw = state.read("producer.json")
    if raw is not None:
        where = state.show('producer.json')
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as e:       # RecursionError: "[[[[..." nested too deep
            raise KafkaLogError(f"Unreadable sink producer identity {where}: {e}") from None
        if not isinstance(data, dict) or "producer_id" not in data:
            raise KafkaLogError(f"Unreadable sink producer identity {where}: not a JSON object with a "
                                f"'producer_id' key: {str(data)[:40]}")
        return ProducerIdentity(_json_int(where, "producer_id", data["producer_id"], _PRODUCER_ID_RANGE),
                                _json_int(where, "epoch", data.get("epoch", 0), _EPOCH_RANGE))
    ident = ProducerIdentity(random.getrandbits(62))
    state.write("producer.json", json.dumps({"producer_id": ident.producer_id, "epoch": ident.epoch}).encode())
    return ident


@dataclass(frozen=True)
class SinkState:
    """The sink's files beside the query's checkpoint (``kafkalog-sink/``): a local folder
    (replaced atomically and fsynced, ``atomic_write``), or a folder in a store when
    ``checkpointLocation`` is a store URI (each object replaced whole)."""

    local: Path | None
    store: StagingStore | None = None
    folder: str = ""

    @classmethod
    def of(cls, opts: SinkOptions) -> "SinkState | None":
        if opts.checkpoint is not None:
            return cls(opts.checkpoint / STATE_DIR)
        if opts.checkpoint_uri is not None:
            store = StagingStore(opts.checkpoint_uri, opts.store)
            return cls(None, store, store.path(STATE_DIR))
        return None

    def show(self, name: str) -> str:
        if self.store is not None:
            return f"{self.folder}/{name} in {self.store.name}"
        return str(self.local / name if self.local is not None else name)

    def read(self, name: str) -> bytes | None:
        if self.store is not None:
            return self.store.read(f"{self.folder}/{name}", STATE_FILE_MAX_BYTES[name])
        assert self.local is not None
        try:   # bounded, a regular file only (a FIFO would block): UnsafeFileError otherwise
            return read_small_file(self.local / name, STATE_FILE_MAX_BYTES[name])
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes) -> None:
        if self.store is not None:
            self.store.write(f"{self.folder}/{name}", data)
            return
        assert self.local is not None
        self.local.mkdir(parents=True, exist_ok=True)
        atomic_write(self.local / name, data)


@dataclass
class TxnState:
    batch_id: int
    state: str                          # ongoing | prepare_commit | complete | aborted
    partitions: list[tuple[str, int]]
    producer: ProducerIdentity


_TXN_STATES = ("ongoing", "prepare_commit", "complete", "aborted")


def _txn_state(data: object, where: str) -> TxnState:
    """``txn.json``'s document as a ``TxnState``; any other shape (valid JSON written by
    something else, or edited) is refused naming the file and the key rather than escaping
    as a ``KeyError``/``TypeError``, and an unknown state fails loudly instead of being taken
    for "nothing in flight" (which would skip the recovery of a batch left half-committed)."""
    def bad(what: str) -> KafkaLogError:
        return KafkaLogError(f"Unreadable sink transaction log {where}: {what}")

    if not isinstance(data, dict):
        raise bad(f"not a JSON object: {str(data)[:40]}")
    missing = [k for k in ("batch_id", "state", "partitions", "producer_id", "epoch") if k not in data]
    if missing:
        raise bad(f"no {missing[0]!r} key")
    if data["state"] not in _TXN_STATES:
        raise bad(f"unknown state {data['state']!r} (known: {', '.join(_TXN_STATES)})")
    parts = data["partitions"]
    if not isinstance(parts, list) or not all(
            isinstance(tp, list) and len(tp) == 2 and isinstance(tp[0], str) for tp in parts):
        raise bad(f"partitions is not a list of [topic, partition] pairs: {str(parts)[:80]}")
    return TxnState(_json_int(where, "batch_id", data["batch_id"], (0, LONG_MAX)), data["state"],
                    [(t, _json_int(where, "partition", p, (0, INT_MAX))) for t, p in parts],
                    ProducerIdentity(_json_int(where, "producer_id", data["producer_id"], _PRODUCER_ID_RANGE),
                                     _json_int(where, "epoch", data["epoch"], _EPOCH_RANGE)))


class SinkCoordinator:
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.state = SinkState.of(opts)
        self.state_path = opts.checkpoint / STATE_DIR / "txn.json" if opts.checkpoint is not None else None
        self._memory_state: TxnState | None = None
        uri = staging_store_uri(opts)
        self.store = StagingStore(uri, opts.store) if uri is not None else None
        self._batch_id = -1
        self._budget = OpenLogBudget.for_commit(0)      # each commit sizes its own

    # ---------------------------------------------------------------- the transaction log

    def _read_state(self) -> TxnState | None:
        if self.state is None:
            return self._memory_state
        raw = self.state.read("txn.json")
        if raw is None:
            return None
        where = self.state.show('txn.json')
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as e:      # RecursionError: "[[[[..." nested too deep
            raise KafkaLogError(f"Unreadable sink transaction log {where}: {e}") from None
        return _txn_state(data, where)

    def _write_state(self, st: TxnState) -> None:
        if self.state is None:
            self._memory_state = st
            return
        self.state.write("txn.json", json.dumps(
            {"batch_id": st.batch_id, "state": st.state,
             "partitions": [[t, p] for t, p in st.partitions],
             "producer_id": st.producer.producer_id, "epoch": st.producer.epoch}).encode())

    # ---------------------------------------------------------------- commit / abort

    def commit(self, runs: Iterable[StagedRun], batch_id: int, producer: ProducerIdentity) -> None:
        """Append the staged ``runs`` of ``batch_id`` as one transaction of ``producer`` (the
        identity the executors encoded them with)."""
        runs = list(runs)
        self._batch_id = batch_id
        st = self._read_state()
        if st is not None and st.state in ("ongoing", "prepare_commit"):
            self._finish(st)
            st = self._read_state()
        if st is not None and st.state == "complete" and st.batch_id >= batch_id:
            logger.info("Batch %d is already in the logs (last complete %d): not appended again",
                     batch_id, st.batch_id)
            self.discard(runs)
            return
        by_partition: dict[tuple[str, int], list[StagedRun]] = {}
        for r in runs:
            by_partition.setdefault((r.topic, r.partition), []).append(r)
        partitions = sorted(by_partition)
        self._budget = OpenLogBudget.for_commit(len(partitions))
        self._create_topics({t for t, _ in partitions})
        self._write_state(TxnState(batch_id, "ongoing", partitions, producer))
        self._crash_point("ongoing")
        # each partition's log stays open from its append to its marker: opening and closing
        # a log (checkpoints, producer snapshot, fsyncs) costs more than the marker; those the
        # open file limit has no room for are closed after their appends (``_hold_or_close``)
        logs: dict[tuple[str, int], Log] = {}
        try:
            self._append_all(partitions, by_partition, producer, logs)
        except BaseException:
            # a failed append may have left its log object behind its file: the abort
            # reopens every log, which recovers what is on disk first
            self._close_all(logs, quiet=True)
            self._finish(TxnState(batch_id, "ongoing", partitions, producer))
            raise
        try:
            self._crash_point("appended")
            self._write_state(TxnState(batch_id, "prepare_commit", partitions, producer))
            self._crash_point("prepare_commit")
            self._finish(TxnState(batch_id, "prepare_commit", partitions, producer), logs)
        finally:
            self._close_all(logs)
        self._crash_point("complete")
        self.discard(runs)

    def _side_by_side(self, fn: Callable[[T], object], items: list[T]) -> None:
        """``fn(item)`` for every item, on threads when there are several (partitions are
        separate logs; copies, CRCs and fsyncs release the GIL, and the executors are idle
        while the driver commits). The first failure is raised once all have stopped."""
        workers = min(len(items), os.cpu_count() or 1, 8)
        if workers <= 1:
            for item in items:
                fn(item)
            return
        with ThreadPoolExecutor(workers, thread_name_prefix="kafkalog-commit") as pool:
            futures = [pool.submit(fn, item) for item in items]
        for f in futures:
            f.result()

    def _append_all(self, partitions: list[tuple[str, int]],
                    by_partition: dict[tuple[str, int], list[StagedRun]],
                    producer: ProducerIdentity, logs: dict[tuple[str, int], Log]) -> None:
        """Every partition's staged runs appended, the partitions side by side; the caller
        aborts the transaction on every partition if one fails."""
        if self.opts.crash_at is not None:
            # the crash tests need one partition appended and the next not yet begun
            for i, tp in enumerate(partitions):
                if i:
                    self._crash_point("between_partitions")
                self._append_fetched(tp, by_partition[tp], producer, logs)
            return
        # Partitions side by side: a partition's numbering (compiled, no GIL), its renames and
        # its fsync overlap another's. Small staged files are copied into the active segment,
        # which copies in parallel do not speed up on 2 cores, but they are small.
        if not any(r.in_store for rs in by_partition.values() for r in rs):
            self._side_by_side(lambda tp: self._append_fetched(tp, by_partition[tp], producer, logs), partitions)
            return
        # Staged objects fetched ahead, in the order the partitions are appended, more GETs in
        # flight than partitions appended at once: a store answers many requests side by side,
        # and a partition's append waits only for its own objects. The driver's disk holds the
        # micro-batch's bytes once, as with local staging.
        pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="kafkalog-fetch")
        writer = self._fetch_writer(FETCH_THREADS)
        ahead = {tp: self._fetch(by_partition[tp], pool, writer) for tp in partitions}
        try:
            self._side_by_side(lambda tp: self._append_fetched(tp, by_partition[tp], producer, logs, ahead[tp]),
                               partitions)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            for tp, fetched in ahead.items():   # fetched but never appended
                try:
                    self._remove_fetched(by_partition[tp], fetched())
                except BaseException:
                    pass                        # its own failure: its folder is gone already
            raise
        finally:
            if writer is not None:
                writer.shutdown()
        pool.shutdown()

    def _append_fetched(self, tp: tuple[str, int], runs: list[StagedRun], producer: ProducerIdentity,
                        logs: dict[tuple[str, int], Log],
                        fetched: Callable[[], list[StagedRun]] | None = None) -> None:
        """A partition's staged runs appended (those in the staging store fetched to local
        files first, or waited for from ``fetched``), made durable, then its local staged files
        removed (its objects in the store go with their task folders once the batch is
        committed, ``discard``)."""
        local = (fetched or self._fetch(runs))()
        try:
            self._append(tp, local, producer, logs)
            self._made_durable(logs[tp], local)
        finally:
            self._remove_fetched(runs, local)   # the fetched copies, whatever happened
        self._hold_or_close(tp, logs)

    def _hold_or_close(self, tp: tuple[str, int], logs: dict[tuple[str, int], Log]) -> None:
        """Keep a partition's log open for its marker where the open file limit has room for it,
        else close it now (its append is durable; ``_finish`` reopens it for the marker)."""
        log = logs[tp]
        if not self._budget.take(log_open_files(len(log.segments))):
            del logs[tp]
            log.close()

    @staticmethod
    def _remove_fetched(runs: list[StagedRun], local: list[StagedRun]) -> None:
        staged = {r.path for r in runs}
        for run in local:
            if run.path not in staged:
                _unlink_staged(Path(run.path))

    def _fetch(self, runs: list[StagedRun], pool: ThreadPoolExecutor | None = None,
               writer: ThreadPoolExecutor | None = None) -> Callable[[], list[StagedRun]]:
        """Start fetching the runs of ``runs`` in the staging store to the driver's own staging
        folder (``default_staging``, beside a local checkpoint: on the data's file system where
        it can be, so big files are renamed into the log), named by their commit messages (no
        listing of the store), on ``pool`` and, under fsync per commit, sending big files to the
        disk directly on ``writer`` (else pools of their own); returns the wait for them, which
        gives ``runs`` with local paths, or raises the first failure with the folder removed."""
        if not any(r.in_store for r in runs):
            return lambda: runs
        assert self.store is not None, "staged runs in a store but no staging store configured"
        folder = default_staging(self.opts) / "fetched" / f"batch-{self._batch_id}" / uuid.uuid4().hex
        folder.mkdir(parents=True, exist_ok=True)
        store = self.store
        fetched = [replace(run, path=str(folder / f"{i}-{run.path.rsplit('/', 1)[-1]}"), in_store=False)
                   if run.in_store else run for i, run in enumerate(runs)]
        todo = [(i, run, local) for i, (run, local) in enumerate(zip(runs, fetched)) if run.in_store]
        own = pool is None
        if own:
            # the objects side by side: a store serves several requests at once
            pool = ThreadPoolExecutor(min(len(todo), 4), thread_name_prefix="kafkalog-fetch")
            writer = self._fetch_writer(min(len(todo), 4))
        assert pool is not None
        futures = [(i, pool.submit(store.fetch, run.path, run.size, Path(local.path), writer))
                   for i, run, local in todo]

        def wait() -> list[StagedRun]:
            try:
                for i, f in futures:
                    # a fetched file's CRCs were checked as it arrived: the commit reads its headers
                    fetched[i] = replace(fetched[i], crcs_checked=f.result())
            except BaseException:
                for _, f in futures:
                    f.cancel()
                wait_all([f for _, f in futures])
                shutil.rmtree(folder, ignore_errors=True)
                raise
            finally:
                if own:
                    pool.shutdown(wait=False)
                    if writer is not None:
                        writer.shutdown(wait=False)
            return fetched
        return wait

    def _fetch_writer(self, threads: int) -> ThreadPoolExecutor | None:
        """Threads sending fetched files to the disk directly, under fsync per commit (the
        commit needs their bytes on disk anyway, ``staging_file``), else none: buffered."""
        if self.opts.fsync != "commit":
            return None
        return ThreadPoolExecutor(threads, thread_name_prefix="kafkalog-fetch-write")

    def _made_durable(self, log: Log, runs: list[StagedRun]) -> None:
        """Flush a partition appended to, then remove its staged files."""
        self._flush(log)
        for run in runs:
            # appended and durable per the fsync policy: a retried commit re-runs the tasks,
            # so the staged copy is of no further use (and unlinking frees page cache early)
            _unlink_staged(Path(run.path))

    def _close_all(self, logs: dict[tuple[str, int], Log], *, quiet: bool = False) -> None:
        opened = list(logs.values())
        logs.clear()
        if not quiet:
            # the data directory's checkpoints written once for every partition, not once each
            close_logs(opened, self._side_by_side)
            return
        for log in opened:
            try:
                log.close()
            except Exception as e:          # the abort that follows reopens and recovers it
                logger.warning("Closing %s after a failed append: %s", log.dir, e)

    def _crash_point(self, where: str) -> None:
        """Fault injection for the crash tests (option ``kafkalog.test.crashAt``, ``<point>`` or
        ``<point>@<batch id>``): die here as a power cut or ``kill -9`` would, leaving whatever is
        on disk; with ``kafkalog.test.crashPid`` that process (the driver) is killed first."""
        point, _, batch = (self.opts.crash_at or "").partition("@")
        if point == where and (not batch or int(batch) == self._batch_id):
            if self.opts.crash_pid is not None:
                os.kill(self.opts.crash_pid, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)

    def abort(self, runs: Iterable[StagedRun]) -> None:
        self.discard(runs)

    def discard(self, runs: Iterable[StagedRun]) -> None:
        """Remove staged files: in a store the write's folder, whole; local files one by one,
        then their task, batch and write directories once empty."""
        runs = list(runs)
        if self.store is not None:
            self.store.delete_write_folders([r.path for r in runs if r.in_store])
        folders = set()
        for r in runs:
            if r.in_store:
                continue
            p = Path(r.path)
            p.unlink(missing_ok=True)
            folders.add(p.parent)
        root = default_staging(self.opts)
        for d in folders:                   # <write>/batch-<id>/<attempt>, below the staging root only
            while root in d.parents:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass                    # removed with its last file (``_unlink_staged``)
                except OSError:
                    break                   # not empty: another attempt's or another batch's
                d = d.parent

    def sweep_staging(self, older_than_s: float = 600.0) -> None:
        """Staging directories left by failed task attempts, older than ``older_than_s``; in a
        staging store, the objects that old (listed under the staging folder, which holds
        nothing but what no commit has taken yet)."""
        if self.store is not None:
            # a listing per commit would be a request per micro-batch: once a minute is enough
            now = time.monotonic()
            if now - _LAST_STORE_SWEEP.get(self.store.root, -1e9) >= STORE_SWEEP_INTERVAL_S:
                _LAST_STORE_SWEEP[self.store.root] = now
                self.store.sweep(older_than_s)
        root = default_staging(self.opts)
        now = time.time()
        for d in root.glob("*/*/*"):
            try:
                if d.is_dir() and now - d.stat().st_mtime > older_than_s:
                    shutil.rmtree(d, ignore_errors=True)
            except FileNotFoundError:
                pass

    # ---------------------------------------------------------------- the coordinator's work

    def _finish(self, st: TxnState, logs: dict[tuple[str, int], Log] | None = None) -> None:
        """Complete an interrupted transaction: abort an ``ongoing`` one, commit a
        ``prepare_commit`` one, on every partition where it is still open (through ``logs``
        where the commit holds them open, else opening each)."""
        commit = st.state == "prepare_commit"
        pid, epoch = st.producer.producer_id, st.producer.epoch
        logs = logs or {}

        def end_txn(log: Log) -> None:
            open_txn = any(t.producer_id == pid for t in log.producer_state.ongoing_txns.values())
            if open_txn:
                log.append_end_txn_marker(pid, epoch, "COMMIT" if commit else "ABORT", 0)
                self._flush(log)

        def finish_partition(tp: tuple[str, int]) -> None:
            if tp in logs:
                end_txn(logs[tp])
                return
            path = self._dir(tp)
            if path.exists():
                with self._open(path) as log:
                    end_txn(log)

        if logs and self.opts.crash_at is None:
            self._side_by_side(finish_partition, st.partitions)
        else:
            for i, tp in enumerate(st.partitions):
                if i:
                    self._crash_point("between_markers")
                finish_partition(tp)
        self._write_state(TxnState(st.batch_id, "complete" if commit else "aborted",
                                   st.partitions, st.producer))
        if not commit:
            logger.warning("Aborted the interrupted transaction of batch %d on %d partitions",
                        st.batch_id, len(st.partitions))

    def _append(self, tp: tuple[str, int], runs: list[StagedRun],
                producer: ProducerIdentity, logs: dict[tuple[str, int], Log]) -> None:
        log = logs[tp] = self._open(self._dir(tp))
        entry = log.producer_state.last_entry(producer.producer_id)
        seq = (increment_sequence(entry.last_seq, 1)
               if entry is not None and entry.last_seq >= 0 else 0)
        if can_append_staged(log.config):
            append_staged(log, runs, producer, seq, self.opts.staged_segment_min_bytes)
            return
        for run in runs:
            for chunk in _staged_chunks(Path(run.path), run.size,
                                        min(STAGED_CHUNK, log.config.segment_bytes)):
                seq = number_sequences(chunk, seq)
                log.append_raw(chunk, owned=True)

    def _flush(self, log: Log) -> None:
        if self.opts.fsync == "commit":
            log.flush()

    def _create_topics(self, topics: set[str]) -> None:
        """A topic seen for the first time gets all its ``numPartitions`` directories, the
        highest first: a topic's partition count is its highest directory + 1, so a kill half
        way leaves the full count visible and a later commit fills in the missing ones.
        Every partition of a new topic gets the same new random topic id (KIP-516) in its
        ``partition.metadata``, so readers can tell a recreated topic from the old one; missing
        partitions filled in later get the id of the existing ones."""
        from storage_core.checkpoint import PartitionMetadataFile, random_topic_id

        from .writer import topic_partition_count

        _check_collisions(self.opts.path, {t for t in topics if not topic_partition_count(self.opts.path, t, 0)})
        for topic in sorted(topics):
            existing = topic_partition_count(self.opts.path, topic, 0)
            if not existing:
                self._record_topic_config(topic)
            count = existing or self.opts.num_partitions
            topic_id = None if existing else random_topic_id()
            created: list[Log] = []
            # as many new partitions open at once as the open file limit holds, closed together
            group = max(1, self._budget.files // log_open_files(1))
            try:
                for p in reversed(range(count)):
                    path = self._dir((topic, p))
                    if not path.exists():
                        if topic_id is None:
                            # the highest directory is created first: it holds the topic's id
                            # (None for a topic written before topic ids, which keeps having none)
                            meta = PartitionMetadataFile(self._dir((topic, count - 1)))
                            topic_id = meta.read() if meta.exists() else None
                        if len(created) == group:
                            close_logs(created, self._side_by_side)
                            created = []
                        created.append(self._open(path, topic_id))
            finally:
                # closed together: the data directory's checkpoints written once, not per partition
                close_logs(created, self._side_by_side)

    def _record_topic_config(self, topic: str) -> None:
        """A topic the sink creates keeps the topic configuration it was created with (the
        options ``cleanup.policy``, ``retention.ms``, ``segment.bytes``, ...) as its overrides in
        the data directory (``kafkalog-topic-configs.json``), as ``kafka-topics.sh --create
        --config`` records them: ``kafkalog retention`` / ``compact`` and a LogManager then
        apply them. Written before the first directory, so a kill in between loses nothing;
        a topic that already has overrides keeps them."""
        from storage_core.server import ConfigRepository

        from .options import TOPIC_CONFIGS

        props = {k: v for k, v in self.opts.log_config.to_properties(only_changed=True).items()
                 if k in TOPIC_CONFIGS}
        if not props:
            return
        self.opts.path.mkdir(parents=True, exist_ok=True)     # the first write to a new path
        repo = ConfigRepository([self.opts.path])
        if not repo.topic_overrides(topic):
            repo.alter_topic_config(topic, props)

    def open_partition(self, tp: tuple[str, int]) -> Log:
        """A partition's log, opened for writing as the commit opens it (its lock waited for)."""
        return self._open(self._dir(tp))

    def _dir(self, tp: tuple[str, int]) -> Path:
        return self.opts.path / f"{tp[0]}-{tp[1]}"

    def _open(self, path: Path, topic_id: uuid.UUID | None = None) -> Log:
        """The partition's writer lock, waited for (another query's commit may hold it)."""
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                return Log.open(path, self.opts.log_config, topic_id=topic_id)
            except LogLockedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def _unlink_staged(path: Path) -> None:
    """Remove a staged file (or its fetched copy) and its folder once that is empty."""
    path.unlink(missing_ok=True)
    try:
        path.parent.rmdir()
    except OSError:
        pass


def number_sequences(buf: bytearray, first_sequence: int) -> int:
    """Give the batches in ``buf`` consecutive base sequences from ``first_sequence`` (each
    batch takes as many as it has records), recomputing their CRCs; returns the next
    sequence. The base sequence is inside the CRC, unlike the base offset."""
    scan = scan_batches(buf)
    counts = scan.records_count
    positions = scan.position
    patch_field(buf, positions, BatchField.BASE_SEQUENCE, base_sequences(first_sequence, counts))
    crcs = [compute_crc(buf, p, s) for p, s in zip(positions.tolist(), scan.size.tolist())]
    patch_field(buf, positions, BatchField.CRC, np.array(crcs, np.uint32))
    return increment_sequence(first_sequence, int(counts.sum()))


STAGED_CHUNK = 8 << 20


def _staged_chunks(path: Path, size: int, chunk: int = STAGED_CHUNK) -> Iterator[bytearray]:
    """The whole batches of a staged file, about ``chunk`` bytes at a time (a batch larger
    than that on its own), each a fresh writable buffer the log may patch in place.

    Appending a run in pieces of a few megabytes instead of as one buffer keeps every buffer
    (the read, the validator's per-record arrays) small enough for the allocator to reuse:
    fresh memory costs a page fault per 4 KiB, which at hundreds of megabytes a commit
    costs more than the appends themselves."""
    buf = bytearray(chunk)
    have = done = 0
    limit = chunk                       # bytes to hold before cutting: more for a big batch
    with open(path, "rb", buffering=0) as f:
        while True:
            with memoryview(buf) as mv:
                n = f.readinto(mv[have:limit])
            have += n
            # CRCs checked before numbering rewrites them: a damaged staged file fails here
            end = scan_batches(buf, 0, have, verify=True, source=str(path)).end if have else 0
            if end:
                yield buf[:end]
                done += end
                buf[:have - end] = buf[end:have]
                have -= end
                limit = chunk
            elif n == 0:
                if have or done != size:
                    raise KafkaLogError(
                        f"Staged file {path} ends with {have} bytes that are not a whole batch "
                        f"after {done} of {size} bytes: staging was changed or truncated")
                return
            elif have >= LOG_OVERHEAD:
                # a batch larger than the chunk: read all of it, then cut as usual
                need = int(read_field(buf, np.zeros(1, np.int64), BatchField.LENGTH)[0]) + LOG_OVERHEAD
                if need <= have:
                    raise KafkaLogError(f"Staged file {path} holds a corrupt batch at "
                                        f"position {done}")
                if need > len(buf):
                    buf.extend(bytes(need - len(buf)))
                limit = need


def _check_collisions(root: Path, new: set[str]) -> None:
    """Kafka refuses to create a topic whose name differs from an existing one's only by ``.``
    against ``_`` (``Topic.hasCollision``; the controller's "Topic 'a_b' collides with existing
    topic: a.b"): the two would share their metric names. Checked before any directory is made,
    against the data directory's topics (live or being moved in: a ``-delete`` or ``-stray``
    directory's topic is gone from the cluster) and the other new ones."""
    if not new:
        return
    named = [topic_partition_dir(name) for name in (os.listdir(root) if root.is_dir() else ())]
    existing = {d.topic_partition.topic for d in named if d is not None and d.suffix in ("", FUTURE_DIR_SUFFIX)}
    unified: dict[str, str] = {t.replace(".", "_"): t for t in sorted(existing - new)}
    for topic in sorted(new):
        other = unified.setdefault(topic.replace(".", "_"), topic)
        if other != topic:
            raise InvalidTopicError(f"Topic '{topic}' collides with existing topic: {other} (Kafka's rule: "
                                    f"topic names that differ only by '.' and '_' collide)")


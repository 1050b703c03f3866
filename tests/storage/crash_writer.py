"""A writer to be killed: appends batches of checksummable records to a ``Log`` and acknowledges
each append once ``append`` / ``append_raw`` has returned. Used by tests/storage/test_crash.py.

    python tests/storage/crash_writer.py DIR MODE SEED    # one writer; acks on stdout
    python tests/storage/crash_writer.py --serve          # fork server (see ``serve``)

``DIR`` is a data directory; the partition is ``DIR/crash-0`` (the recovery-point and log-start
checkpoints go in ``DIR``). ``MODE`` is the ``fsync`` setting: ``always`` (every acknowledged
append is durable) or ``policy`` (the OS writes back; ``close``/``flush`` make it durable).
``SEED`` chooses the configuration (small segments, small index interval, small indexes so that
rolls of every kind happen), batch sizes, codecs, and when the log is flushed or closed and
reopened (which writes the checkpoints). The writer appends until killed; if it reaches its byte
budget first it stops appending and waits to be killed.

The content of every record is a function of its offset alone (``expected_record``), so a
reader can check any record it gets, whichever writer generation wrote it.

Acknowledgements: one line ``"<last offset>\\n"`` per append, written with a single ``write(2)``
to fd 1 after the append returned (so a record is acknowledged only once it is in the log, and
with ``fsync=always`` only once it is durable). A line ``"open <log end offset>\\n"`` is written
each time the log has been (re)opened.

Fork server: starting a Python with pyarrow/numba costs ~1-2 s, too much for hundreds of
trials. ``--serve`` imports and warms everything once, then reads commands on stdin:

    run DIR MODE SEED   -> "pid N"       fork a writer (acks appended to DIR/acks)
    wait PID            -> "exit PID S"  reap it; S = -signal or the exit code

Each writer is still a real process killed with a real SIGKILL.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2]))       # the repository root, for storage_core

import numpy as np          # noqa: E402
import pyarrow as pa        # noqa: E402

from storage_core.config import LogConfig   # noqa: E402
from storage_core.format import encode_batches   # noqa: E402
from storage_core.log import Log            # noqa: E402

TOPIC_DIR = "crash-0"
TS0 = 1_700_000_000_000
CODECS = ("none", "none", "lz4", "zstd", "gzip", "snappy")
BUDGET_BYTES = 24 << 20
# 96 bytes: 12 offset-index and 8 time-index slots, so segments also roll because an index is
# full (and recovery, which indexes per batch, must stop at a full index)
INDEX_BYTES = (96, 1024, 64 << 10, 10 << 20)


# ------------------------------------------------------------------------------ content

def expected_record(offset: int) -> tuple[bytes, bytes, int]:
    """(key, value, timestamp ms) of the record at ``offset``: the value carries the offset and
    a SHA-256 of it, padded by a length derived from that hash (0..299 bytes)."""
    digest = hashlib.sha256(b"kafkalog-crash-%d" % offset).hexdigest()
    pad = int(digest[:4], 16) % 300
    value = f"{offset}:{digest}:".encode() + b"." * pad
    return b"k%d" % offset, value, TS0 + offset


def records_table(first: int, n: int) -> pa.Table:
    keys, values, ts = [], [], []
    for o in range(first, first + n):
        k, v, t = expected_record(o)
        keys.append(k)
        values.append(v)
        ts.append(t)
    return pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                     "timestamp": pa.array(np.array(ts, dtype=np.int64), pa.int64())})


def trial_config(mode: str, seed: int) -> LogConfig:
    """The configuration of trial ``seed``: the writer and the checker must agree on it."""
    rng = random.Random(f"config-{seed}")
    return LogConfig(
        fsync=mode,
        preallocate=rng.random() < 0.25,
        segment_bytes=rng.choice([16 << 10, 32 << 10, 64 << 10, 256 << 10]),
        index_interval_bytes=rng.choice([0, 1, 100, 512, 4096]),
        segment_index_bytes=rng.choice(INDEX_BYTES),
    )


# ------------------------------------------------------------------------------ writer

def write(directory: str | os.PathLike[str], mode: str, seed: int, ack_fd: int = 1) -> None:
    """Append until killed (or until the byte budget is spent, then sleep)."""
    rng = random.Random(f"writer-{seed}-{os.getpid()}")
    config = trial_config(mode, seed)
    part = Path(directory) / TOPIC_DIR
    log = Log.open(part, config)
    os.write(ack_fd, b"open %d\n" % log.log_end_offset)
    written = 0
    # a batch must fit in a segment: at most ~ 20 records of < 400 bytes with small segments
    max_records = max(1, min(60, config.segment_bytes // 800))
    while written < BUDGET_BYTES:
        n = rng.randint(1, max_records)
        first = log.log_end_offset
        table = records_table(first, n)
        codec = rng.choice(CODECS)
        how = rng.random()
        if how < 0.5:
            info = log.append(table, compression=codec, max_batch_bytes=1 << 20)
        else:
            # a pre-encoded run of several batches, offsets assigned by the log
            raw = encode_batches(table, compression=codec, base_offset=0,
                                 max_batch_bytes=rng.choice([300, 1000, 1 << 20]))
            info = log.append_raw(raw)
        if info.first_offset != first or info.last_offset != first + n - 1:
            os.write(2, f"unexpected offsets {info} for {first}+{n}\n".encode())
            os._exit(3)
        written += info.valid_bytes
        os.write(ack_fd, b"%d\n" % info.last_offset)
        r = rng.random()
        if r < 0.01:
            log.close()                      # writes both checkpoints
            log = Log.open(part, config)
            os.write(ack_fd, b"open %d\n" % log.log_end_offset)
        elif r < 0.03:
            log.flush()
        elif r < 0.04:
            log.roll()
    while True:                              # wait for the kill
        time.sleep(1)


# ------------------------------------------------------------------------------ fork server

def _warm_up() -> None:
    """Compile the numba kernels and load every codec before forking."""
    with tempfile.TemporaryDirectory() as d:
        with Log.open(Path(d) / "warm-0", LogConfig(fsync="always", segment_bytes=4096)) as log:
            for _i, codec in enumerate(CODECS):
                log.append(records_table(log.log_end_offset, 3), compression=codec)
                log.append_raw(encode_batches(records_table(0, 4), compression=codec,
                                              max_batch_bytes=300))
            log.read(0)
        with Log.open(Path(d) / "warm-0") as log:
            log.read(0)


def serve() -> None:
    _warm_up()
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "run":
            directory, mode, seed = parts[1], parts[2], int(parts[3])
            pid = os.fork()
            if pid == 0:                                  # the writer
                code = 0
                try:
                    null = os.open(os.devnull, os.O_RDONLY)
                    os.dup2(null, 0)
                    ack = os.open(os.path.join(directory, "acks"),
                                  os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                    write(directory, mode, seed, ack_fd=ack)
                except BaseException as e:              # noqa: BLE001 - report and die
                    os.write(2, f"writer {directory} failed: {e!r}\n".encode())
                    code = 2
                os._exit(code)
            out.write(f"pid {pid}\n")
        elif parts[0] == "wait":
            pid = int(parts[1])
            _, status = os.waitpid(pid, 0)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            out.write(f"exit {pid} {code}\n")
        else:
            out.write(f"error unknown command {line!r}\n")
        out.flush()


def main(argv: list[str]) -> int:
    if argv[1:] == ["--serve"]:
        serve()
        return 0
    if len(argv) != 4 or argv[2] not in ("always", "policy"):
        print(__doc__, file=sys.stderr)
        return 64
    Path(argv[1]).mkdir(parents=True, exist_ok=True)
    write(argv[1], argv[2], int(argv[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

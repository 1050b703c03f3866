"""The acceptance property of issue 16's one definition of "valid" (docs/operations.md, "What
valid means"): random damage to a real partition directory written by the engine - bit flips,
truncations and zero-fills of segment files, swapped batches, batches whose offsets go
backwards, header fields changed with the CRC recomputed (codec, counts, lastOffsetDelta), bad
checkpoints - and then, on the damaged copy:

(a) whatever ``kafkalog recover --full`` changes (a ``.log`` truncated or deleted, the log start
    or end offset moved), ``kafkalog verify`` reported beforehand;
(b) whatever verify reports, recovery repairs (verify is clean afterwards) or refuses with a
    clear ``KafkaLogError`` (exit 1, the partition named with the reason);
(c) the batches before the first damaged one are never deleted: every record of the original
    below that batch's base offset is read back unchanged after recovery.

Bounded: a few dozen examples over a directory of a few kilobytes (seconds, not minutes).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from storage_core.checkpoint import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from storage_core.tools.cli import main
from storage_core.config import LogConfig
from storage_core.errors import KafkaLogError
from storage_core.format import encode_batches
from storage_core.format.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, crc32c
from storage_core.log import Log

TS0 = 1_700_000_000_000
PART = "orders-0"


@dataclass
class Pristine:
    root: Path
    segments: list[Path]                   # the .log files, in offset order (relative to root)
    batches: dict[str, list[tuple[int, int, int, int]]]   # name -> (position, size, base, last)
    log_start: int
    log_end: int
    values: dict[int, bytes] = field(repr=False)           # offset -> value, every record


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = main(list(args))
    return rc, out.getvalue()


def walk(data: bytes) -> list[tuple[int, int, int, int]]:
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, length + 12, base, base + struct.unpack_from(">i", data, pos + 23)[0]))
        pos += length + 12
    return out


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    root = tmp_path_factory.mktemp("validity") / "data"
    rng = np.random.default_rng(16)
    with Log.open(root / PART, LogConfig(segment_bytes=1200, index_interval_bytes=200)) as log:
        for i in range(30):
            n = int(rng.integers(1, 6))
            first = log.log_end_offset
            table = pa.table({
                "key": [b"k%d" % (o % 5) for o in range(first, first + n)],
                "value": [b"value-%d-" % o * int(rng.integers(1, 6)) for o in range(first, first + n)],
                "timestamp": pa.array(TS0 + 10 * np.arange(first, first + n), pa.int64()),
            })
            codec = ("none", "zstd", "gzip", "lz4")[i % 4]
            if i % 3:
                log.append(table, compression=codec)
            else:
                log.append_raw(encode_batches(table, compression=codec, max_batch_bytes=150),
                               leader_epoch=i // 8)
        log.delete_records_before(2)          # a log-start-offset-checkpoint entry
        start, end = log.log_start_offset, log.log_end_offset
    segs = sorted((root / PART).glob("*.log"))
    assert len(segs) >= 4
    values = {}
    with Log.open(root / PART, read_only=True) as log:
        t = log.read(start, max_bytes=1 << 30)
        values = dict(zip(t.column("offset").to_pylist(), t.column("value").to_pylist()))
    assert sorted(values) == list(range(start, end))
    rc, out = cli("verify", str(root))
    assert rc == 0, out                                  # the engine's own files are valid
    return Pristine(root, [p.relative_to(root) for p in segs],
                    {p.name: walk(p.read_bytes()) for p in segs}, start, end, values)


# ------------------------------------------------------------------------------ damage

def damage(p: Pristine, root: Path, draw) -> int | None:
    """Apply one random damage to the copy at ``root``; returns the base offset of the first
    damaged batch (None when the damage is to a checkpoint)."""
    kind = draw(st.sampled_from(["flip", "flip", "truncate", "zero", "swap", "backwards",
                                 "crafted", "checkpoint"]))
    if kind == "checkpoint":
        which = draw(st.sampled_from(["start past end", "start garbage", "recovery garbage",
                                      "invalid topic"]))
        if which == "start past end":
            (root / LOG_START_OFFSET_CHECKPOINT).write_text(
                f"0\n1\norders 0 {p.log_end + draw(st.integers(1, 1000))}\n")
        elif which == "start garbage":
            (root / LOG_START_OFFSET_CHECKPOINT).write_text("0\n1\norders zero 5\n")
        elif which == "recovery garbage":
            (root / RECOVERY_POINT_CHECKPOINT).write_text("7\n")
        else:
            (root / LOG_START_OFFSET_CHECKPOINT).write_text(
                f"0\n2\n../x 0 5\norders 0 {p.log_start}\n")
        return None
    rel = draw(st.sampled_from(p.segments))
    path = root / rel
    batches = p.batches[rel.name]
    data = bytearray(path.read_bytes())

    def batch_at(position: int) -> int:
        return next(b[2] for b in batches if b[0] <= position < b[0] + b[1])

    if kind == "flip":
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= draw(st.integers(1, 255))
        first = batch_at(at)        # a flip of the leader epoch goes unseen and loses nothing
    elif kind == "truncate":
        size = draw(st.integers(0, len(data) - 1))
        del data[size:]
        first = batch_at(size)
    elif kind == "zero":
        at = draw(st.integers(0, len(data) - 1))
        n = draw(st.integers(1, 64))
        data[at:at + n] = bytes(len(data[at:at + n]))
        first = batch_at(at)
    elif kind == "crafted":                     # a field changed and the CRC made to match
        pos, size, first, _ = draw(st.sampled_from(batches))
        field_at, value = draw(st.sampled_from([(21, 0x07), (57, 0), (57, 2**31 - 1), (23, -1),
                                                (57, -1)]))
        if field_at == 21:
            struct.pack_into(">h", data, pos + 21, struct.unpack_from(">h", data, pos + 21)[0] | value)
        else:
            struct.pack_into(">i", data, pos + field_at, value)
        struct.pack_into(">I", data, pos + CRC_OFFSET,
                         crc32c(memoryview(data)[pos + ATTRIBUTES_OFFSET:pos + size]))
    else:
        if len(batches) < 2:
            return damage(p, root, draw)
        i = draw(st.integers(1, len(batches) - 1))
        (pa_, sa, ba, _), (pb, sb, bb, _) = batches[i - 1], batches[i]
        if kind == "swap":                      # batches i-1 and i change places
            data[pa_:pb + sb] = data[pb:pb + sb] + data[pa_:pa_ + sa]
            first = ba
        else:                                   # batch i claims the offsets of batch i-1
            struct.pack_into(">q", data, pb, ba)
            first = bb
    path.write_bytes(bytes(data))
    return first


def log_files(part: Path) -> dict[str, int]:
    return {f.name: f.stat().st_size for f in part.iterdir() if f.name.endswith(".log")}


def offsets_of(part: Path) -> tuple[int, int] | None:
    try:
        with Log.open(part, read_only=True) as log:
            return log.log_start_offset, log.log_end_offset
    except KafkaLogError:
        return None


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_verify_and_recovery_agree_on_random_damage(pristine: Pristine, data) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        shutil.copytree(pristine.root, root)
        part = root / PART
        first_bad = damage(pristine, root, data.draw)

        rc_before, report = cli("verify", str(root))
        files_before, offsets_before = log_files(part), offsets_of(part)
        rc_recover, recovered = cli("recover", "--full", str(root))
        files_after, offsets_after = log_files(part), offsets_of(part)

        changed = files_before != files_after or offsets_before != offsets_after
        event(f"verify {'reported' if rc_before else 'clean'}, recovery "
              f"{'refused' if rc_recover else 'changed' if changed else 'kept'} the log")
        # (a) what recovery changed, verify reported
        if changed:
            assert rc_before == 1, (f"recovery changed {files_before} {offsets_before} -> "
                                    f"{files_after} {offsets_after}, verify said:\n{report}")
        # (b) what verify reported, recovery repaired or refused clearly
        if rc_recover != 0:
            assert f"{PART}: FAILED: " in recovered, recovered
        elif rc_before == 1:
            rc_after, after = cli("verify", str(root))
            assert rc_after == 0, f"verify before:\n{report}\nrecover:\n{recovered}\nafter:\n{after}"
        # (c) the batches before the first damaged one are all there, unchanged
        if rc_recover == 0 and first_bad is not None:
            keep = range(pristine.log_start, max(pristine.log_start, first_bad))
            with Log.open(part, read_only=True) as log:
                assert log.log_start_offset == pristine.log_start
                assert log.log_end_offset >= keep.stop, (log.log_end_offset, keep, recovered)
                if len(keep):
                    t = log.read(keep.start, max_bytes=1 << 30, max_offset=keep.stop)
                    got = dict(zip(t.column("offset").to_pylist(), t.column("value").to_pylist()))
                    assert got == {o: pristine.values[o] for o in keep}

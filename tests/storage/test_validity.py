"""One definition of a valid batch, segment and checkpoint (issue 16, findings 4, 8 and 9;
docs/operations.md "What valid means"), held by ``kafkalog verify``, recovery (``Log.open`` after
an unclean stop, ``kafkalog recover``) and read-only opens alike.

Each case damages a real partition directory written by the engine (a batch rewritten with a
recomputed CRC where the damage is inside it, as a buggy or hostile writer would leave it), then
checks all three: verify reports it with the file and position, recovery truncates exactly
there and keeps every valid batch before it (verify is clean afterwards), and a read-only open
never serves what recovery would remove.
"""

from __future__ import annotations

import contextlib
import io
import logging
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.checkpoint import (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                                      OffsetCheckpointFile)
from storage_core.tools.cli import main
from storage_core.config import LogConfig
from storage_core.errors import CorruptRecordError
from storage_core.format.control import ControlRecordType
from storage_core.format.record_batch import (ATTRIBUTES_OFFSET, CRC_OFFSET, RecordInput,
                                              build_batch, crc32c)
from storage_core.log import Log
from storage_core.server import LogManager


@dataclass
class Run:
    returncode: int
    stdout: str


def cli(*args: str) -> Run:
    """The ``kafkalog`` command, run in this process (its output captured)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = main(list(args))
    return Run(rc, out.getvalue())


def batch_positions(data: bytes) -> list[int]:
    pos, out = 0, []
    while pos + 12 <= len(data):
        out.append(pos)
        pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
    return out


def recrc(data: bytearray, pos: int) -> None:
    size = struct.unpack_from(">i", data, pos + 8)[0] + 12
    struct.pack_into(">I", data, pos + CRC_OFFSET,
                     crc32c(memoryview(data)[pos + ATTRIBUTES_OFFSET:pos + size]))


def four_batches(tmp_path: Path) -> tuple[Path, Path, list[int]]:
    """A partition of one segment holding four 2-record batches (offsets 0..7)."""
    part = tmp_path / "data" / "orders-0"
    with Log.open(part) as log:
        for i in range(4):
            log.append(pa.table({"value": [b"a%d" % i, b"b%d" % i]}))
    seg = part / "00000000000000000000.log"
    return part, seg, batch_positions(seg.read_bytes())


# what each damage does to the second batch (at position p); all but the offset changes keep a
# valid CRC, so only the format rules can find them
DAMAGES = {
    "unknown codec id": lambda d, p: (struct.pack_into(">h", d, p + 21, 7), recrc(d, p)),
    "record count 0": lambda d, p: (struct.pack_into(">i", d, p + 57, 0), recrc(d, p)),
    "record count 2^31-1": lambda d, p: (struct.pack_into(">i", d, p + 57, 2**31 - 1), recrc(d, p)),
    "negative lastOffsetDelta": lambda d, p: (struct.pack_into(">i", d, p + 23, -1), recrc(d, p)),
    "offsets going backwards": lambda d, p: struct.pack_into(">q", d, p, 0),
    "base offset near 2^63": lambda d, p: struct.pack_into(">q", d, p, 2**63 - 2),
    # the second record (9 bytes in: length, attributes, timestamp delta, offset delta) gets
    # the first one's offset delta 0
    "record offset deltas not increasing": lambda d, p: (d.__setitem__(p + 61 + 9 + 3, 0),
                                                         recrc(d, p)),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_verify_recovery_and_readers_agree(tmp_path: Path, damage: str) -> None:
    part, seg, pos = four_batches(tmp_path)
    data = bytearray(seg.read_bytes())
    DAMAGES[damage](data, pos[1])
    seg.write_bytes(bytes(data))
    root = part.parent

    # verify: the batch at pos[1], named with the file and its position
    before = cli("verify", str(root))
    assert before.returncode == 1, before.stdout
    assert f"{seg}" in before.stdout and f"position {pos[1]}" in before.stdout, before.stdout

    # a read-only open never serves a record of the damaged batch: it raises, naming the
    # position, when a read reaches it
    with Log.open(part, read_only=True) as log:
        first = log.read(0, max_bytes=1)
        assert first.column("offset").to_pylist() == [0, 1]
        with pytest.raises(CorruptRecordError, match=f"position {pos[1]}"):
            log.read(0, max_bytes=1 << 20)

    # recovery truncates exactly there and keeps the valid first batch
    rec = cli("recover", "--full", str(root))
    assert rec.returncode == 0, rec.stdout
    assert seg.stat().st_size == pos[1]
    with Log.open(part, read_only=True) as log:
        assert log.log_end_offset == 2
        assert log.read(0).column("value").to_pylist() == [b"a0", b"b0"]
    after = cli("verify", str(root))
    assert after.returncode == 0, after.stdout


def test_unclean_open_keeps_the_valid_batches_before_backwards_offsets(tmp_path: Path) -> None:
    """Log.open after an unclean stop (no recovery-point checkpoint) applies the same rule as
    ``kafkalog recover``: the first batch is valid, the second goes backwards."""
    part, seg, pos = four_batches(tmp_path)
    data = bytearray(seg.read_bytes())
    struct.pack_into(">q", data, pos[2], 1)          # batch 3 overlaps batch 2
    seg.write_bytes(bytes(data))
    (part.parent / RECOVERY_POINT_CHECKPOINT).unlink()
    with Log.open(part) as log:
        assert log.log_end_offset == 4
        assert log.read(0).column("value").to_pylist() == [b"a0", b"b0", b"a1", b"b1"]
    assert seg.stat().st_size == pos[2]


def test_codec_error_of_a_read_names_the_file_and_position(tmp_path: Path) -> None:
    part, seg, pos = four_batches(tmp_path)
    data = bytearray(seg.read_bytes())
    DAMAGES["unknown codec id"](data, pos[3])
    seg.write_bytes(bytes(data))
    with Log.open(part, read_only=True) as log:
        with pytest.raises(CorruptRecordError) as e:
            log.read(6)
    assert "Unknown compression type id 7" in str(e.value) and e.value.position is not None
    assert e.value.source is not None


def test_log_start_checkpoint_past_the_log_end(tmp_path: Path) -> None:
    """Kafka's LogLoader deletes every segment when the log end offset is below the
    checkpointed log start offset; verify says so beforehand, a read-only open shows the log
    that recovery leaves (empty at the checkpoint), and afterwards verify is clean."""
    part, seg, _ = four_batches(tmp_path)
    root = part.parent
    OffsetCheckpointFile(root / LOG_START_OFFSET_CHECKPOINT).write({("orders", 0): 100})
    before = cli("verify", str(root))
    assert before.returncode == 1
    assert "log start offset 100 is past the log end offset 8 of orders-0" in before.stdout
    with Log.open(part, read_only=True) as log:
        assert (log.log_start_offset, log.log_end_offset) == (100, 100)
        assert log.read(100).num_rows == 0
    with Log.open(part) as log:
        assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert not seg.exists()
    after = cli("verify", str(root))
    assert after.returncode == 0, after.stdout


def test_checkpoint_entry_naming_an_invalid_topic(tmp_path: Path, caplog) -> None:
    """``../x`` in a checkpoint: verify reports it; Log and LogManager ignore it with one
    warning, never build a path from it, and drop it when they rewrite the file."""
    part, _, _ = four_batches(tmp_path)
    root = part.parent
    for name in (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT):
        (root / name).write_text("0\n2\n../x 0 5\norders 0 8\n" if name == RECOVERY_POINT_CHECKPOINT
                                 else "0\n1\n../x 0 5\n")
    before = cli("verify", str(root))
    assert before.returncode == 1
    assert f"{root / LOG_START_OFFSET_CHECKPOINT}: entry '../x' 0" in before.stdout, before.stdout
    caplog.set_level(logging.WARNING)
    with LogManager.open(root) as mgr:
        assert mgr.get_log(("orders", 0)).log_end_offset == 8
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records]
    warned = [r.getMessage() for r in caplog.records if "../x" in r.getMessage()]
    assert warned and all("Ignoring 1 entries" in m for m in warned), warned
    assert not (tmp_path / "x-0").exists()
    for name in (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT):
        assert "../x" not in (root / name).read_text()
    assert cli("verify", str(root)).returncode == 0


def test_offset_overflow_split_is_reported_by_verify(tmp_path: Path) -> None:
    """Ordered offsets more than 2^31-1 past the segment's base: recovery splits the segment
    (LogLoader), so verify reports it first."""
    part, seg, pos = four_batches(tmp_path)
    data = bytearray(seg.read_bytes())
    struct.pack_into(">q", data, pos[3], 2**32)
    seg.write_bytes(bytes(data))
    before = cli("verify", str(part.parent))
    assert before.returncode == 1 and "recovery splits the segment" in before.stdout
    assert cli("recover", "--full", str(part.parent)).returncode == 0
    assert sorted(p.name for p in part.glob("*.log")) == [
        "00000000000000000000.log", f"{2**32:020d}.log"]
    assert cli("verify", str(part.parent)).returncode == 0


# ------------------------------------------------------------------ finding 8: read_committed

def txn_partition(part: Path) -> list[bytes]:
    """Committed and aborted transactions of two producers across several segments, the ABORT
    of one transaction in a later segment than its records; returns the committed values."""
    now = int(time.time() * 1000)
    config = LogConfig(segment_bytes=600)

    def data(pid: int, seq: int, tag: str) -> bytes:
        return build_batch([RecordInput(f"{tag}-{i}".encode(), None, now) for i in range(2)],
                           producer_id=pid, producer_epoch=0, base_sequence=seq,
                           transactional=True)

    committed = []
    with Log.open(part, config) as log:
        log.append(pa.table({"value": [b"plain-0"]}))
        committed.append(b"plain-0")
        log.append_raw(data(1, 0, "p1-aborted"))
        log.append_raw(data(2, 0, "p2-committed"))
        log.append_raw(data(1, 2, "p1-aborted-more"))
        log.append(pa.table({"value": [b"plain-1"]}))
        log.roll()
        log.append_raw(data(2, 2, "p2-committed-more"))
        log.append_end_txn_marker(2, 0, ControlRecordType.COMMIT, 0)
        log.roll()
        log.append(pa.table({"value": [b"plain-2"]}))
        log.append_end_txn_marker(1, 0, ControlRecordType.ABORT, 0)
        log.append_raw(data(1, 4, "p1-committed"))
        log.append_end_txn_marker(1, 0, ControlRecordType.COMMIT, 0)
        log.append(pa.table({"value": [b"plain-3"]}))
        assert len(log.segments) >= 3
        committed = [v for v in log.read(0, max_bytes=1 << 20, isolation="read_committed")
                     .column("value").to_pylist()]
    assert all(b"aborted" not in v for v in committed) and b"p1-committed-0" in committed
    assert any(p.stat().st_size for p in part.glob("*.txnindex"))
    return committed


def test_read_committed_without_txnindex_files(tmp_path: Path) -> None:
    part = tmp_path / "data" / "orders-0"
    committed = txn_partition(part)
    for p in part.glob("*.txnindex"):
        p.unlink()
    with Log.open(part, read_only=True) as log:
        whole = log.read(0, max_bytes=1 << 20, isolation="read_committed")
        assert whole.column("value").to_pylist() == committed
        # fetch by fetch, small: transactions span fetches, their markers lie further on
        got, offset = [], 0
        while offset < log.last_stable_offset:
            r = log.fetch(offset, max_bytes=1, isolation="read_committed")
            got.extend(r.table.column("value").to_pylist())
            offset = r.next_offset
        assert got == committed
    assert not list(part.glob("*.txnindex")), "a reader wrote an index"

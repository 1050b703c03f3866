"""Corrupted files (kafka_test_checklist.md §6, kafka_format.md §11.2/§14): byte flips,
truncations and zero-fills of every kind of file in a partition directory, then an unclean
``Log.open`` (the recovery-point checkpoint removed, unless it is the file corrupted).

Two directories: one written by kafkalog (small segments, several codecs, leader epochs, a moved
log start offset, plus a producer snapshot, a transaction index and partition.metadata written
through the library's own writers), and a copy of a broker-written fixture
(``timeindex_test``: 4 segments, producer snapshots, leader-epoch-checkpoint, partition.metadata).

After each corruption ``Log.open`` must either

* recover, and then return only correct data: the bytes ``read_raw`` returns from the log start
  equal the original bytes of the same batches (the leader-epoch field, outside the CRC and not
  part of any record, excepted), they end at a batch boundary of the original, and decoded records
  equal the original ones; a damaged ``.log`` loses exactly the batches from the first damaged
  one on (``LogSegment.recover``'s rule); a damaged index, snapshot or metadata file loses
  nothing; appending after the recovery works; or
* raise a ``KafkaLogError`` whose message names the corrupted file (and, for a ``.log``, the
  position) - never another exception type, never wrong data.

The readers of each auxiliary file (index sanity checks, snapshot, checkpoint and metadata
readers) are held to the same rule on the corrupted file. Cases are seeded and bounded
(a few hundred, well under a minute).
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from storage_core.checkpoint import (LeaderEpochCheckpointFile, OffsetCheckpointFile,
                                      PartitionMetadataFile)
from storage_core.config import LogConfig
from storage_core.errors import KafkaLogError
from storage_core.format import decode_batches, encode_batches
from storage_core.index import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex
from storage_core.log import Log
from storage_core.producer import ProducerSnapshotEntry, read_snapshot, write_snapshot

from fixture_paths import FIXTURES, require_fixture
BROKER_DIR = (FIXTURES / "pinterest-tiered-storage" / "ts-common" / "src" / "test" / "resources"
              / "log-files" / "timeindex_test")

RP = "recovery-point-offset-checkpoint"
LSO = "log-start-offset-checkpoint"
KINDS = ("log", "index", "timeindex", "txnindex", "snapshot", RP, LSO, "leader-epoch-checkpoint",
         "partition.metadata")
DAMAGES = ("flip", "truncate", "zero")
TS0 = 1_700_000_000_000


# ------------------------------------------------------------------------------ the originals

@dataclass
class Original:
    """A pristine data directory and what it holds."""

    root: Path                    # the data dir: <root>/<topic>-0 and the checkpoints
    part_name: str
    config: LogConfig
    log_start: int
    log_end: int
    table: pa.Table = field(repr=False)    # every record from the first segment's base offset
    batches: list = field(repr=False)      # (segment base, position in segment, size, base, last)
    data: bytes = field(repr=False)        # the .log files concatenated, in order
    global_pos: dict = field(repr=False)   # (segment base, position) -> position in ``data``

    def files(self, kind: str) -> list[Path]:
        part = self.root / self.part_name
        if kind in (RP, LSO):
            return [self.root / kind] if (self.root / kind).exists() else []
        if kind in ("leader-epoch-checkpoint", "partition.metadata"):
            return [part / kind] if (part / kind).exists() else []
        return sorted(part.glob(f"*.{kind}"))


def scan(data: bytes) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of the v2 batches of a pristine .log."""
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        assert data[pos + 16] == 2
        out.append((pos, length + 12, base, base + struct.unpack_from(">i", data, pos + 23)[0]))
        pos += length + 12
    assert pos == len(data)
    return out


def describe(root: Path, part_name: str, config: LogConfig) -> Original:
    part = root / part_name
    batches, chunks, global_pos, at = [], [], {}, 0
    for p in sorted(part.glob("*.log")):
        seg = int(p.name[:20])
        data = p.read_bytes()
        for pos, size, base, last in scan(data):
            batches.append((seg, pos, size, base, last))
            global_pos[(seg, pos)] = at + pos
        chunks.append(data)
        at += len(data)
    # every record, from the first segment (below a moved log start too): open a copy without
    # its log-start checkpoint
    tmp = root.parent / (root.name + "-read")
    shutil.copytree(root, tmp)
    (tmp / LSO).unlink(missing_ok=True)
    with Log.open(tmp / part_name, config, read_only=True) as log:
        table = log.read(log.log_start_offset, max_bytes=1 << 30)
    shutil.rmtree(tmp)
    with Log.open(part, config, read_only=True) as log:
        start, end = log.log_start_offset, log.log_end_offset
    assert table.column("offset").to_pylist() == list(range(batches[0][3], end))
    return Original(root, part_name, config, start, end, table, batches, b"".join(chunks),
                    global_pos)


@pytest.fixture(scope="module")
def kafkalog_dir(tmp_path_factory: pytest.TempPathFactory) -> Original:
    root = tmp_path_factory.mktemp("kafkalog") / "data"
    part = root / "orders-0"
    config = LogConfig(segment_bytes=8 << 10, index_interval_bytes=256)
    rng = random.Random(7)
    with Log.open(part, config) as log:
        for i in range(90):
            n = rng.randint(1, 30)
            first = log.log_end_offset
            table = pa.table({
                "key": pa.array([b"key-%d" % (o % 13) for o in range(first, first + n)]),
                "value": pa.array([(b"value-%d-" % o) * rng.randint(1, 12)
                                   for o in range(first, first + n)]),
                "timestamp": pa.array(TS0 + 10 * np.arange(first, first + n), pa.int64()),
                "headers": pa.array([[{"key": "h", "value": b"%d" % o}] if o % 3 == 0 else []
                                     for o in range(first, first + n)],
                                    pa.list_(pa.struct([("key", pa.string()),
                                                        ("value", pa.binary())]))),
            })
            codec = ("none", "gzip", "lz4", "zstd", "snappy")[i % 5]
            if i % 2:
                log.append(table, compression=codec)
            else:
                log.append_raw(encode_batches(table, compression=codec, max_batch_bytes=700),
                               leader_epoch=i // 30)
        assert len(log.segments) >= 6
        bases = [s.base_offset for s in log.segments]
        log.delete_records_before(bases[1] + 3)     # a log-start-offset-checkpoint entry
        # files kafkalog's Log does not write yet, written by the library's writers
        TransactionIndex(part / f"{bases[2]:020d}.txnindex", bases[2]).append(
            AbortedTxn(producer_id=7, first_offset=bases[2], last_offset=bases[2] + 5,
                       last_stable_offset=bases[2]))
        for b in bases[-2:]:
            write_snapshot(part, b, [ProducerSnapshotEntry(7, 0, 4, b - 1, 0, TS0, -1, -1)])
        PartitionMetadataFile(part).write(uuid.UUID("a79f4f37-8aa4-47cb-b5ef-ba7e1b833c3c"))
    assert (part / "leader-epoch-checkpoint").exists()
    return describe(root, "orders-0", config)


@pytest.fixture(scope="module")
def broker_dir(tmp_path_factory: pytest.TempPathFactory) -> Original:
    require_fixture(BROKER_DIR)
    root = tmp_path_factory.mktemp("broker") / "data"
    root.mkdir()
    shutil.copytree(BROKER_DIR, root / "topic-0")
    for p in (root / "topic-0").iterdir():
        p.chmod(0o644)
    return describe(root, "topic-0", LogConfig())


# ------------------------------------------------------------------------------ corruption

def corrupt(path: Path, damage: str, rng: random.Random, avoid: frozenset[int] = frozenset()
            ) -> tuple[str, set[int] | int]:
    """Damage ``path``; returns a description and the changed byte positions (for a
    truncation: the new size). Bytes in ``avoid`` are never changed."""
    data = bytearray(path.read_bytes())
    n = len(data)
    if damage == "truncate":
        size = rng.randrange(n) if n else 0
        os.truncate(path, size)
        return f"truncated {n} -> {size}", size
    if n == 0:
        return "empty file left as is", set()
    changed = set()
    if damage == "flip":
        for _ in range(rng.choice([1, 1, 2, 3])):
            at = rng.randrange(n)
            while at in avoid:
                at = rng.randrange(n)
            data[at] ^= rng.randrange(1, 256)
            changed.add(at)
        how = f"bytes flipped at {sorted(changed)}"
    else:
        while True:
            at = rng.randrange(n)
            length = min(n - at, rng.choice([1, 4, 16, 64, 4096]))
            if not any(data[i] and i in avoid for i in range(at, at + length)):
                break
        for i in range(at, at + length):
            if data[i]:
                changed.add(i)
            data[i] = 0
        how = f"zeroed [{at}, {at + length})"
    path.write_bytes(bytes(data))
    return how, changed


def expected_end(orig: Original, seg_base: int, changed: set[int] | int) -> int:
    """The log end offset LogSegment.recover must reach after ``changed`` hit segment
    ``seg_base``: the base offset of the first damaged batch (its leader-epoch field excepted,
    which no check covers), or the original end if none was."""
    for seg, pos, size, base, _last in orig.batches:
        if seg != seg_base:
            continue
        if isinstance(changed, int):
            if pos + size > changed:
                return base
        elif any(pos <= c < pos + size and not pos + 12 <= c < pos + 16 for c in changed):
            return base
    return orig.log_end


def check_reader(kind: str, path: Path, base: int) -> None:
    """The dedicated reader of an auxiliary file returns or raises a KafkaLogError naming it."""
    try:
        if kind == "index":
            with OffsetIndex(path, base, writable=False) as idx:
                idx.sanity_check()
                idx.lookup(base + 10)
        elif kind == "timeindex":
            with TimeIndex(path, base, writable=False) as idx:
                idx.sanity_check()
                idx.lookup(TS0)
        elif kind == "txnindex":
            with TransactionIndex(path, base) as idx:
                idx.sanity_check()
                idx.all_aborted_txns()
        elif kind == "snapshot":
            read_snapshot(path)
        elif kind in (RP, LSO):
            OffsetCheckpointFile(path).read()
        elif kind == "leader-epoch-checkpoint":
            LeaderEpochCheckpointFile(path).read()
        elif kind == "partition.metadata":
            PartitionMetadataFile(path.parent).read()
    except KafkaLogError as e:
        assert path.name in str(e), f"the error does not name {path.name}: {e!r}"


def check_open(orig: Original, root: Path, kind: str, path: Path, changed) -> str:
    """Unclean open of the corrupted copy; returns what happened ("recovered ..." / "refused
    ..."), raising AssertionError on any broken rule."""
    part = root / orig.part_name
    try:
        log = Log.open(part, orig.config)
    except KafkaLogError as e:
        assert path.name in str(e), f"{type(e).__name__} does not name {path.name}: {e}"
        if kind == "log":
            assert "position" in str(e), f"{type(e).__name__} gives no position: {e}"
        return f"refused: {type(e).__name__}"
    with log:
        start, end = log.log_start_offset, log.log_end_offset
        first_base = orig.batches[0][3]
        if kind == "log":
            want = expected_end(orig, int(path.name[:20]), changed)
            assert end == max(want, start), f"log end {end}, expected {want} (start {start})"
        elif kind != LSO:
            assert end == orig.log_end, f"log end {end} != {orig.log_end}: data lost"
        if kind == LSO:
            assert first_base <= start
            assert end == orig.log_end or (start > orig.log_end and end == start)
        else:
            assert start == orig.log_start, f"log start {start} != {orig.log_start}"
        if end > start:
            raw = log.read_raw(start, max_bytes=1 << 30)
            # the same bytes as the original batches from the one holding ``start``
            i = next(i for i, b in enumerate(orig.batches) if b[3] <= start <= b[4]
                     or b[3] > start)
            at = orig.global_pos[orig.batches[i][:2]]
            expect = bytearray(orig.data[at:at + len(raw)])
            got = bytearray(raw)
            pos, ends = 0, set()
            for _seg, _p, size, _base, last in orig.batches[i:]:
                if pos >= len(raw):
                    break
                got[pos + 12:pos + 16] = expect[pos + 12:pos + 16]      # leader epoch
                pos += size
                ends.add((pos, last))
            assert got == expect, "read_raw returned bytes that differ from the original"
            assert (len(raw), end - 1) in ends, \
                f"read_raw ends at {len(raw)}, not at the batch ending with offset {end - 1}"
            # equal bytes are equal records; decoding all 30k records of the broker directory
            # for every case would cost more than everything else, so only small logs
            if len(raw) <= 1 << 20:
                table = decode_batches(raw)
                table = table.filter(pc.greater_equal(table.column("offset"), start))
                want_rows = orig.table.slice(start - first_base, end - start)
                assert table.equals(want_rows.select(table.column_names)), "decoded records differ"
            # lookups through the recovered indexes
            rng = random.Random(end)
            for target in {start, end - 1, rng.randrange(start, end)}:
                t = log.read(target, max_bytes=1)
                assert t.column("offset")[0].as_py() == target
                want_row = orig.table.slice(target - first_base, 1)
                assert t.slice(0, 1).equals(want_row.select(t.column_names)), \
                    f"record {target} differs"
        info = log.append(pa.table({"value": [b"after-recovery"]}))
        assert info.first_offset == end
    with Log.open(part, orig.config) as log:
        assert log.log_end_offset == end + 1
        assert log.read(end).column("value").to_pylist() == [b"after-recovery"]
    return f"recovered: start {start} end {end} of {orig.log_start}..{orig.log_end}"


def run_cases(orig: Original, tmp_path: Path, kind: str, damage: str, cases: int) -> list[str]:
    files = orig.files(kind)
    if not files:
        pytest.skip(f"no {kind} file in this directory")
    rng = random.Random(f"{orig.part_name}-{kind}-{damage}")
    outcomes, failures = [], []
    for case in range(cases):
        src = rng.choice(files)
        root = tmp_path / f"case{case}"
        shutil.copytree(orig.root, root)
        path = root / src.relative_to(orig.root)
        avoid = frozenset()
        if kind == "log":
            # a batch's baseOffset is outside its CRC: recovery detects a change by the offsets
            # of the batch after it (the first whose offsets go backwards), so the end is not
            # the rule of expected_end; the test_base_offset_* tests cover it
            seg = int(path.name[:20])
            avoid = frozenset(p + i for sb, p, _s, _b, _l in orig.batches if sb == seg
                              for i in range(8))
        how, changed = corrupt(path, damage, rng, avoid)
        if kind != RP:
            (root / RP).unlink(missing_ok=True)
        base = int(path.name[:20]) if path.name[:20].isdigit() else 0
        try:
            check_reader(kind, path, base)
            outcomes.append(check_open(orig, root, kind, path, changed))
        except Exception as e:                                  # noqa: BLE001 - collected
            failures.append(f"{path.name} {how}: {type(e).__name__}: {str(e)[:400]}")
        shutil.rmtree(root)
    assert not failures, f"{len(failures)}/{cases} cases failed:\n" + "\n".join(failures)
    refused = [o for o in outcomes if o.startswith("refused")]
    shorter = [o for o in outcomes if o.startswith("recovered") and
               not o.endswith(f"end {orig.log_end} of {orig.log_start}..{orig.log_end}")]
    print(f"{orig.part_name} {kind} {damage}: {cases} cases, {len(refused)} refused "
          f"{sorted(set(refused))}, {len(shorter)} recovered shorter")
    return outcomes


# ------------------------------------------------------------------------------ the tests

def cases_for(kind: str, big: bool) -> int:
    """Cases per (kind, damage). The broker directory is 4 MiB of 136-byte batches: each case
    costs ~1 s (a full recovery and a full read), so fewer there."""
    if big:
        return {"log": 3}.get(kind, 1)
    return 16 if kind == "log" else 6


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("kind", KINDS)
def test_corrupted_kafkalog_directory(kafkalog_dir: Original, tmp_path: Path, kind: str,
                                      damage: str) -> None:
    run_cases(kafkalog_dir, tmp_path, kind, damage, cases_for(kind, big=False))


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("kind", [k for k in KINDS if k not in (RP, LSO, "txnindex")])
def test_corrupted_broker_directory(broker_dir: Original, tmp_path: Path, kind: str,
                                    damage: str) -> None:
    run_cases(broker_dir, tmp_path, kind, damage, cases_for(kind, big=True))


# ------------------------------------------------------------------------------ found by the cases
# Library bugs the cases above found (fixed in a0fedf9), pinned down deterministically.

def test_unreadable_recovery_point_keeps_log_start(tmp_path: Path) -> None:
    """Log._load used to read both offset checkpoints in one try block: an unreadable
    recovery-point file reset the log start offset too, and records deleted by
    delete_records_before were served again."""
    part = tmp_path / "orders-0"
    with Log.open(part, LogConfig(segment_bytes=1024)) as log:
        for i in range(20):
            log.append(pa.table({"value": [b"v%d-" % i * 20]}))
        assert len(log.segments) > 2
        start = log.segments[1].base_offset + 1
        log.delete_records_before(start)
    (tmp_path / RP).write_text("0\n1\norders 0 x\n")
    with Log.open(part, LogConfig(segment_bytes=1024)) as log:
        assert log.log_start_offset == start
        assert log.read(log.log_start_offset).column("offset")[0].as_py() == start


def test_base_offset_corruption_is_detected(tmp_path: Path) -> None:
    """A batch's baseOffset is outside its CRC: changed from 4 to 5, recovery used to accept it
    and reads gave offsets [0, 1, 2, 3, 5, 6, 6, 7, ...]. A gap is valid (compaction leaves
    them), so the batch now at 5..6 stays and the next one, whose offsets 6..7 go backwards,
    is the first invalid batch: recovery truncates there and keeps every batch before it
    (docs/operations.md "What valid means"); no offset is served twice."""
    part = tmp_path / "orders-0"
    with Log.open(part) as log:
        for i in range(6):
            log.append(pa.table({"value": [b"a%d" % (2 * i), b"b%d" % (2 * i + 1)]}))
    (tmp_path / RP).unlink()
    seg = part / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    pos = 0
    for _ in range(2):
        pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
    assert struct.unpack_from(">q", data, pos)[0] == 4
    struct.pack_into(">q", data, pos, 5)
    seg.write_bytes(bytes(data))
    try:
        log = Log.open(part)
    except KafkaLogError as e:
        assert seg.name in str(e) and f"position {pos}" in str(e)
        return
    with log:
        offsets = log.read(0, max_bytes=1 << 30).column("offset").to_pylist()
        assert offsets == [0, 1, 2, 3, 5, 6], offsets
        assert log.log_end_offset == 7
    assert seg.stat().st_size == pos + struct.unpack_from(">i", data, pos + 8)[0] + 12


def test_negative_index_position_is_rebuilt(tmp_path: Path) -> None:
    """A negative position in the last .index entry (a torn write) used to reach os.pread:
    Log.open raised OSError(22) instead of rebuilding the index."""
    part = tmp_path / "orders-0"
    with Log.open(part, LogConfig(index_interval_bytes=0)) as log:
        for i in range(3):
            log.append(pa.table({"value": [b"a%d" % (2 * i), b"b%d" % (2 * i + 1)]}))
    (tmp_path / RP).unlink()
    index = part / "00000000000000000000.index"
    assert index.stat().st_size == 16
    with open(index, "r+b") as f:
        f.seek(8)
        f.write(struct.pack(">ii", 5, -256))
    with Log.open(part) as log:
        assert log.log_end_offset == 6
        assert log.read(0).column("offset").to_pylist() == list(range(6))
        assert log.read(5, max_bytes=1).column("offset")[0].as_py() == 5


@pytest.mark.parametrize("read_only", [True, False])
def test_negative_index_position_below_the_recovery_point_is_walked_from_the_start(
        tmp_path: Path, read_only: bool) -> None:
    """Found by fuzzing: a negative position in the .index of a rolled segment of a cleanly
    closed log (not recovered, so not rebuilt) reached os.pread from the segment's other walks
    (its next offset, largest timestamp, time lookups): ``kafkalog describe`` said only
    ``[Errno 22] Invalid argument``. They now start at 0, as ``translate_offset`` already did
    (Kafka's ``translateOffset``: ``max(position, startingFilePosition)``)."""
    part = tmp_path / "orders-0"
    with Log.open(part, LogConfig(index_interval_bytes=0)) as log:
        for i in range(3):
            log.append(pa.table({"value": [b"a%d" % (2 * i), b"b%d" % (2 * i + 1)]},
                                ).append_column("timestamp", pa.array([1000 + 2 * i, 1001 + 2 * i], pa.int64())))
        log.roll()
    with open(part / "00000000000000000000.index", "r+b") as f:
        f.seek(8)
        f.write(struct.pack(">ii", 3, -1))                 # entry 1: offset 3 at position -1
    with Log.open(part, read_only=read_only) as log:
        seg = log.segments[0]
        assert seg.read_next_offset() == 6
        assert seg.max_timestamp_so_far.timestamp == 1005
        assert log.fetch_offset_by_timestamp(1004).offset == 4
        assert log.read(0).column("offset").to_pylist() == list(range(6))


def test_base_offset_jump_in_last_batch_of_a_segment(tmp_path: Path) -> None:
    part = tmp_path / "orders-0"
    with Log.open(part) as log:
        for i in range(6):
            if i == 3:
                log.roll()
            log.append(pa.table({"value": [b"a%d" % (2 * i), b"b%d" % (2 * i + 1)]}))
    assert [int(p.name[:20]) for p in sorted(part.glob("*.log"))] == [0, 6]
    (tmp_path / RP).unlink()
    seg = part / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    last = scan(bytes(data))[-1][0]
    assert struct.unpack_from(">q", data, last)[0] == 4
    struct.pack_into(">q", data, last, 104)
    seg.write_bytes(bytes(data))
    try:
        log = Log.open(part)
    except KafkaLogError as e:
        assert seg.name in str(e) and f"position {last}" in str(e)
        return
    with log:
        end = log.log_end_offset
        offsets = log.read(0, max_bytes=1 << 30).column("offset").to_pylist()
        assert offsets == list(range(end)), offsets
        for o in range(end):
            assert log.read(o, max_bytes=1).column("offset")[0].as_py() == o
        assert end == 4

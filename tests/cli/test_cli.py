"""The ``kafkalog`` command, run as a real subprocess on real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.format import encode_batches
from storage_core.format.control import (ControlRecordType, EndTransactionMarker,
                                         end_transaction_marker_batch)

from fixture_paths import FIXTURES, needs_fixture
from spark_jvm import short_lived_jvm_env


def kafkalog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage_core.tools", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    part = tmp_path / "orders-0"
    part.mkdir()
    raw = encode_batches(pa.table({"key": [b"k0", None], "value": [b"v0", b"v1"],
                                   "timestamp": pa.array([1000, 2000], pa.int64())}),
                         producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    raw = bytes(raw) + end_transaction_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 3),
                                        offset=2, timestamp=3000, producer_id=7, producer_epoch=0)
    seg = part / "00000000000000000000.log"
    seg.write_bytes(raw + b"\x00" * 5)       # a torn tail, as after a crash
    return seg


def test_dump_prints_batches_and_records_like_dump_log_segments(segment: Path) -> None:
    """[DumpLogSegments] the batch line, the record lines with payloads, control markers and the
    trailing-bytes report use Kafka's wording."""
    out = kafkalog("dump", "--files", str(segment), "--print-data-log")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"Dumping {segment}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 "
                               "producerId: 7 producerEpoch: 0 partitionLeaderEpoch: -1 "
                               "isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty "
                               "position: 0 CreateTime: 2000 size: ")
    assert lines[2].endswith("magic: 2 compresscodec: none crc: " + lines[2].split("crc: ")[1].split()[0]
                             + " isvalid: true")
    assert lines[3] == ("| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: 0 headerKeys: [] "
                        "key: k0 payload: v0")
    assert lines[4] == "| offset: 1 CreateTime: 2000 keySize: -1 valueSize: 2 sequence: 1 headerKeys: [] payload: v1"
    assert "isControl: true" in lines[5]
    assert lines[6].endswith("endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert lines[7] == f"Found 5 invalid bytes at the end of {segment.name}"


def test_verify_exit_codes(segment: Path, tmp_path: Path) -> None:
    # a torn tail is what recovery truncates, so verify reports it (docs/operations.md "What
    # valid means"), with its position
    torn = kafkalog("verify", str(segment.parent))
    assert torn.returncode == 1, torn.stdout + torn.stderr
    end = segment.stat().st_size - 5
    assert (f"position {end}: 5 bytes after the last whole batch (recovery truncates them)"
            in torn.stdout), torn.stdout
    segment.write_bytes(segment.read_bytes()[:end])
    ok = kafkalog("verify", str(segment.parent))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "2 batches, 3 records" in ok.stdout
    corrupt = tmp_path / "bad-0"
    corrupt.mkdir()
    raw = bytearray(segment.read_bytes())
    raw[70] ^= 0xFF                                  # inside the first batch's records
    (corrupt / "00000000000000000000.log").write_bytes(raw)
    bad = kafkalog("verify", str(corrupt))
    assert bad.returncode == 1
    assert "CORRUPT" in bad.stdout and "position 0" in bad.stdout and "crc" in bad.stdout


@needs_fixture(FIXTURES / "kafka-go")
def test_dump_of_a_real_legacy_fixture() -> None:
    """A magic-1 gzip wrapper written by a real broker: v0/v1 batch line and record lines ending in
    the record's crc (Kafka 4.3+'s Java DumpLogSegments; the Scala tool before it printed a stray '}')."""
    seg = FIXTURES / "kafka-go" / "derived" / "v1c-v1c.recordset.log"
    out = kafkalog("dump", "--files", str(seg), "--deep-iteration")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].startswith("offset: 1 position: 0 CreateTime: ")
    assert "magic: 1 compresscodec: gzip" in lines[1]
    assert lines[2].startswith("| offset: 0 CreateTime: ")
    assert lines[2].endswith("keySize: 5 valueSize: 33 isValid: true crc: 1874811498"), lines[2]


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    out = kafkalog("verify", str(tmp_path / "nope.log"))
    assert out.returncode == 2
    assert "nope.log" in out.stderr


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    """`make demo` runs examples/demo.py (a real Spark pipeline); it must keep working: the
    streaming write commits micro-batches, the read-back aggregates them, the time-travel
    query agrees with a full scan, and the directory verifies."""
    demo = Path(__file__).resolve().parents[2] / "examples" / "demo.py"
    env = {"KAFKALOG_DEMO_DIR": str(tmp_path), "KAFKALOG_DEMO_SECONDS": "4",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    out = subprocess.run([sys.executable, str(demo)], capture_output=True, text=True, timeout=400,
                         env=short_lived_jvm_env(env))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "micro-batches committed" in out.stdout
    assert "finds the same" in out.stdout
    assert "files valid" in out.stdout and "orders-2" in out.stdout

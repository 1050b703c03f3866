"""``kafkalog dump`` / ``describe`` / ``verify`` / ``recover``, run as real subprocesses.

``dump`` must print what Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``) prints. Every line of
kafka_test_checklist.md section 9 is covered here, each test naming the Kafka test it mirrors:

* batch lines carry the batch's real fields (plain, gzip, idempotent, transactional and COMMIT
  marker batches, leader epochs 0/3/5/7), record lines never repeat batch fields, control
  records end with ``endTxnMarker: COMMIT coordinatorEpoch: 100``, every token is
  ``name: value`` -> ``test_batch_and_record_metadata_output``
  [DumpLogSegmentsTest.testBatchAndRecordMetadataOutput];
* ``--print-data-log`` implies deep iteration, keys/payloads appended, ``--deep-iteration``
  alone prints no key/payload, no flag prints no record line -> ``test_print_data_log``
  [testPrintDataLog];
* ``Log starting offset: <base>`` -> ``test_batch_and_record_metadata_output`` and the fixture
  tests [testDumpMetadataRecords];
* ``--max-bytes`` -> ``test_max_bytes_prints_only_the_batches_that_fit``
  [testPrintDataLogPartialBatches];
* an un-trimmed offset / time index of a live log verifies clean, dumping stops at the zero
  entries -> ``test_untrimmed_indexes_of_a_live_log`` [testDumpIndexMismatches,
  testDumpTimeIndexErrors];
* an empty ``.index`` prints exactly ``<path> is empty.`` -> ``test_empty_index_and_sanity_check``
  [testDumpEmptyIndex].

Not applicable: "a record the value parser cannot decode is reported inline as 'Unknown record
type N at offset O, skipping.' ... a tombstone prints '<DELETE>'" [testOffsetsMessageParser,
testShareGroupStateMessageParser]: those lines come from the ``--offsets-decoder`` and
``--share-group-state-decoder`` renderers of ``__consumer_offsets`` / ``__share_group_state``
records (and ``--key-decoder-class`` / ``--value-decoder-class`` load Java classes); kafkalog
does not implement these decoders: keys and values are printed as Kafka's default
``StringDecoder`` does. The decoder half of the ``--print-data-log`` line is therefore covered
for ``--print-data-log`` only.

Beyond the checklist: Kafka's stderr reports (index mismatches, time-index mismatch / out of
order / not found, non-consecutive offsets, trailing invalid bytes, unknown files, corrupt
snapshots), a batch whose CRC is bad dumped with its records, ``.txnindex`` and ``.snapshot``
lines, ``--skip-record-metadata``, ``--json``; dumps
of real broker files from the shared fixtures with their exact lines; ``describe`` on a copy of a
real partition and on a kafkalog-written data dir (nothing modified); ``verify`` naming the file
and position of a corruption injected in each kind of file; ``recover`` truncating a torn tail
and ``--full``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.checkpoint import OffsetCheckpointFile, PartitionMetadataFile
from storage_core.config import LogConfig
from storage_core.format import encode_batches
from storage_core.format.control import (ControlRecordType, EndTransactionMarker,
                                         end_transaction_marker_batch)
from storage_core.format.log_input_stream import LogInputStream, batch_records
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.index import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex
from storage_core.log import Log
from storage_core.producer import ProducerSnapshotEntry, write_snapshot

from fixture_paths import PINTEREST, needs_fixture

TIMEINDEX_TEST = PINTEREST / "ts-common/src/test/resources/log-files/timeindex_test"
TS_CONSUMER = PINTEREST / "ts-consumer/src/test/resources/log-files/test_topic_a-0"
UPLOADER = PINTEREST / "ts-segment-uploader/src/test/resources/log_segments/test_topic_a-0"
needs_fixtures = needs_fixture(PINTEREST)
SEG = "00000000000000000000"
NOW = 1_700_000_000_000


def kafkalog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage_core.tools", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def kafkalog_all(*runs: tuple) -> list[subprocess.CompletedProcess]:
    """Independent (read-only) runs at the same time: most of a run is interpreter start-up."""
    procs = [subprocess.Popen([sys.executable, "-m", "storage_core.tools", *map(str, args)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args in runs]
    done = []
    for _args, proc in zip(runs, procs):
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def fields(line: str) -> dict[str, str]:
    """DumpLogSegmentsTest.parseMetadataFields: the line must be ``name: value`` pairs."""
    tokens = line.lstrip("|").split()
    assert len(tokens) % 2 == 0, line
    out = {}
    for name, value in zip(tokens[::2], tokens[1::2]):
        assert name.endswith(":"), f"non-field token {name!r} in {line!r}"
        out[name[:-1]] = value
    return out


def table(values, keys=None, timestamps=None) -> pa.Table:
    cols = {"value": pa.array(values, pa.binary())}
    if keys is not None:
        cols["key"] = pa.array(keys, pa.binary())
    if timestamps is not None:
        cols["timestamp"] = pa.array(timestamps, pa.int64())
    return pa.table(cols)


def tree_state(root: Path) -> dict[str, tuple[int, str]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------ logs to dump

@pytest.fixture(scope="module")
def meta_log(tmp_path_factory) -> Path:
    """The batches of testBatchAndRecordMetadataOutput, appended through kafkalog's Log, plus a
    batch whose key is not UTF-8 (for --json)."""
    part = tmp_path_factory.mktemp("meta") / "meta-0"
    with Log.open(part, LogConfig.from_properties({"index.interval.bytes": "128"})) as log:
        log.append_raw(encode_batches(table([b"a", b"b"], timestamps=[NOW, NOW + 1])), leader_epoch=0)
        log.append_raw(encode_batches(table([b"1", b"d"], keys=[b"c", None], timestamps=[NOW + 2, NOW + 3]),
                                      compression="gzip"), leader_epoch=3)
        log.append_raw(encode_batches(table([None, b"f", b"g"], keys=[b"e", None, None],
                                            timestamps=[NOW + 4, NOW + 5, NOW + 6])), leader_epoch=3)
        log.append_raw(encode_batches(table([b"h"], timestamps=[NOW + 7]), producer_id=29342342,
                                      producer_epoch=15, base_sequence=234123), leader_epoch=3)
        log.append_raw(encode_batches(table([b"i", b"j"], timestamps=[NOW + 8, NOW + 9]),
                                      compression="gzip", producer_id=98323, producer_epoch=99,
                                      base_sequence=266, transactional=True), leader_epoch=5)
        marker = end_transaction_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 100),
                                              offset=log.log_end_offset, timestamp=NOW + 10,
                                              producer_id=98323, producer_epoch=99)
        log.append_raw(marker, assign_offsets=False, leader_epoch=7)
        log.append_raw(encode_batches(table([b"ok"], keys=[b"\xff\xfe"], timestamps=[NOW + 11])),
                       leader_epoch=7)
    return part / f"{SEG}.log"


@pytest.fixture(scope="module")
def data_log(tmp_path_factory):
    """addSimpleRecords of DumpLogSegmentsTest (keys+values, keys only, values only, neither;
    index.interval.bytes=128), flushed but left open, so the indexes are not trimmed and end
    with zero entries, as in Kafka's test."""
    part = tmp_path_factory.mktemp("data") / "data-0"
    config = LogConfig.from_properties({"index.interval.bytes": "128", "segment.index.bytes": "4096"})
    log = Log.open(part, config)
    batches = [
        ([f"message value {i}".encode() for i in range(0, 10)],
         [f"message key {i}".encode() for i in range(0, 10)], [NOW + i * 2 for i in range(0, 10)]),
        ([None] * 20, [f"message key {i}".encode() for i in range(10, 30)],
         [NOW + i * 3 for i in range(10, 30)]),
        ([f"message value {i}".encode() for i in range(30, 50)], None,
         [NOW + i * 5 for i in range(30, 50)]),
        ([None] * 10, None, [NOW + i * 7 for i in range(50, 60)]),
    ]
    for values, keys, ts in batches:
        log.append_raw(encode_batches(table(values, keys=keys, timestamps=ts)), leader_epoch=0)
    log.flush()
    yield log, batches
    log.close()


def shallow(path: Path):
    raw = path.read_bytes()
    return raw, list(LogInputStream(raw))


# ------------------------------------------------------------------------------ dump: checklist

def test_batch_and_record_metadata_output(meta_log: Path) -> None:
    """[DumpLogSegmentsTest.testBatchAndRecordMetadataOutput] every field of every batch and record
    line equals the batch's (plain, gzip, idempotent, transactional, COMMIT marker; leader epochs
    0, 3, 5, 7), record lines carry no batch field, the marker prints its coordinator epoch, every
    token is "name: value". [testDumpMetadataRecords] "Log starting offset: 0"."""
    out = kafkalog("dump", "--deep-iteration", "--files", meta_log)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == [f"Dumping {meta_log}", "Log starting offset: 0"]
    raw, infos = shallow(meta_log)
    it = iter(lines[2:])
    epochs, codecs = [], []
    position = 0
    for b in infos:
        h = b.header
        line = next(it)
        f = fields(line)
        assert f["baseOffset"] == str(h.base_offset) and f["lastOffset"] == str(h.last_offset)
        assert f["count"] == str(h.records_count)
        assert f["baseSequence"] == str(h.base_sequence)
        assert f["lastSequence"] == str(h.last_sequence)
        assert f["producerId"] == str(h.producer_id) and f["producerEpoch"] == str(h.producer_epoch)
        assert f["isTransactional"] == str(h.is_transactional).lower()
        assert f["isControl"] == str(h.is_control).lower()
        assert f["deleteHorizonMs"] == "OptionalLong.empty"
        assert f["position"] == str(position) and f["size"] == str(b.size)
        assert f["CreateTime"] == str(h.max_timestamp)
        assert f["magic"] == "2" and f["crc"] == str(h.crc) and f["isvalid"] == "true"
        assert list(f)[-7:] == ["position", "CreateTime", "size", "magic", "compresscodec", "crc",
                                "isvalid"]
        epochs.append(int(f["partitionLeaderEpoch"]))
        codecs.append(f["compresscodec"])
        position += b.size
        for r in batch_records(raw, b):
            rline = next(it)
            assert rline.startswith(f"| offset: {r.offset} CreateTime: {r.timestamp} ")
            rf = fields(rline)
            assert rf["keySize"] == str(-1 if r.key is None else len(r.key))
            assert rf["valueSize"] == str(-1 if r.value is None else len(r.value))
            assert rf["sequence"] == str(r.sequence) and rf["headerKeys"] == "[]"
            assert not {"baseOffset", "lastOffset", "partitionLeaderEpoch", "producerId",
                        "producerEpoch", "baseSequence", "isTransactional", "isControl",
                        "compresscodec"} & set(rf)
            if h.is_control:
                assert rline.endswith(" endTxnMarker: COMMIT coordinatorEpoch: 100")
    assert next(it, None) is None
    assert epochs == [0, 3, 3, 3, 5, 7, 7]
    assert codecs == ["none", "gzip", "none", "none", "gzip", "none", "none"]
    # the idempotent and transactional batches, in full
    assert lines[12].startswith("baseOffset: 7 lastOffset: 7 count: 1 baseSequence: 234123 "
                                "lastSequence: 234123 producerId: 29342342 producerEpoch: 15 "
                                "partitionLeaderEpoch: 3 isTransactional: false isControl: false ")
    assert lines[14].startswith("baseOffset: 8 lastOffset: 9 count: 2 baseSequence: 266 "
                                "lastSequence: 267 producerId: 98323 producerEpoch: 99 "
                                "partitionLeaderEpoch: 5 isTransactional: true isControl: false ")


def test_print_data_log(data_log) -> None:
    """[DumpLogSegmentsTest.testPrintDataLog] --print-data-log (with or without --deep-iteration)
    prints every record ending "headerKeys: []" + " key: ..." / " payload: ..." when present, the
    last lines of output being the batch and record lines in log order; --deep-iteration alone
    prints record lines without key/payload; no flag prints no record line."""
    log, batches = data_log
    path = log.dir / f"{SEG}.log"
    total = sum(len(v) for v, _, _ in batches) + len(batches)

    def check(out: subprocess.CompletedProcess, with_data: bool) -> None:
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()[-total:]
        offset, i = 0, 0
        for values, keys, _ in batches:
            assert lines[i].startswith(f"baseOffset: {offset} lastOffset: "), lines[i]
            i += 1
            for n in range(len(values)):
                line = lines[i]
                assert line.startswith(f"| offset: {offset} "), line
                suffix = "headerKeys: []"
                if with_data:
                    if keys is not None:
                        suffix += f" key: message key {offset}"
                    if values[n] is not None:
                        suffix += f" payload: message value {offset}"
                assert line.endswith(suffix), line
                offset += 1
                i += 1

    data, data_deep, deep, plain = kafkalog_all(
        ("dump", "--print-data-log", "--files", path),
        ("dump", "--print-data-log", "--deep-iteration", "--files", path),
        ("dump", "--deep-iteration", "--files", path),
        ("dump", "--files", path))
    check(data, True)
    check(data_deep, True)
    check(deep, False)
    assert plain.returncode == 0
    assert not any(line.startswith("|") for line in plain.stdout.splitlines())
    assert "payload:" not in plain.stdout and plain.stdout.count("baseOffset:") == len(batches)


def test_a_batch_whose_crc_is_bad_is_dumped_with_its_records(meta_log: Path, tmp_path: Path) -> None:
    """[DumpLogSegments, RecordBatch iteration without ensureValid] a v2 batch whose stored CRC
    does not hold is printed ``isvalid: false`` with its records (plain and gzip), the batches
    around it as they were: the dump is how a damaged batch is looked at."""
    path = tmp_path / f"{SEG}.log"
    shutil.copy(meta_log, path)
    raw, infos = shallow(path)
    before = kafkalog("dump", "--print-data-log", "--files", path)
    assert before.returncode == 0, before.stderr
    data = bytearray(raw)
    crc_at = 8 + 4 + 4 + 1                               # baseOffset, length, leader epoch, magic
    for info in infos[:2]:                              # the plain batch and the gzip one
        data[info.position + crc_at] ^= 0xFF
    path.write_bytes(data)
    after = kafkalog("dump", "--print-data-log", "--files", path)
    assert after.returncode == 0, after.stderr
    old, new = before.stdout.splitlines(), after.stdout.splitlines()
    assert len(old) == len(new)
    changed = [(a, b) for a, b in zip(old, new) if a != b]
    assert len(changed) == 2                            # the two batch lines, nothing else
    for (a, b), info in zip(changed, infos[:2]):
        assert a.endswith("isvalid: true") and b.endswith("isvalid: false"), b
        assert fields(b)["crc"] == str(info.v2_header.crc ^ (0xFF << 24))
        assert fields(b)["baseOffset"] == str(info.v2_header.base_offset)
    records = [line for line in new if line.startswith("| offset: ")]
    assert [r.rsplit(" payload: ", 1)[-1] for r in records[:4]] == ["a", "b", "1", "d"]


def test_max_bytes_prints_only_the_batches_that_fit(data_log) -> None:
    """[DumpLogSegmentsTest.testPrintDataLogPartialBatches] --max-bytes = the sizes of the first 2
    of 4 batches prints exactly those 2 (and no "invalid bytes" line: the rest is not invalid)."""
    log, _ = data_log
    path = log.dir / f"{SEG}.log"
    _, infos = shallow(path)
    assert len(infos) == 4
    out = kafkalog("dump", "--max-bytes", infos[0].size + infos[1].size, "--files", path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("baseOffset:") == 2
    assert "invalid bytes" not in out.stdout


def test_untrimmed_indexes_of_a_live_log(data_log) -> None:
    """[DumpLogSegmentsTest.testDumpIndexMismatches, testDumpTimeIndexErrors] the offset and time
    indexes of a flushed, still open log (preallocated: zero entries after the real ones) report
    no mismatch, out-of-order timestamp or missing offset, and dumping stops at the first zero
    entry."""
    log, _ = data_log
    idx, tidx = log.dir / f"{SEG}.index", log.dir / f"{SEG}.timeindex"
    assert idx.stat().st_size == 4096, "the index should still be preallocated"
    seg = log.active_segment
    n_index, n_time = seg.offset_index.entries, seg.time_index.entries
    assert 0 < n_index < 512 and 0 < n_time < 341
    verify_only, listed = kafkalog_all(("dump", "--verify-index-only", "--files", f"{idx},{tidx}"),
                                       ("dump", "--files", f"{idx},{tidx}"))
    assert verify_only.returncode == 0 and verify_only.stderr == ""
    assert verify_only.stdout.splitlines() == [f"Dumping {idx}", f"Dumping {tidx}"]
    assert listed.returncode == 0 and listed.stderr == ""
    lines = listed.stdout.splitlines()
    expected_index = [f"offset: {seg.offset_index.entry(i).offset} position: "
                      f"{seg.offset_index.entry(i).position}" for i in range(n_index)]
    expected_time = [f"timestamp: {seg.time_index.entry(i).timestamp} offset: "
                     f"{seg.time_index.entry(i).offset}" for i in range(n_time)]
    assert lines == [f"Dumping {idx}", *expected_index, f"Dumping {tidx}", *expected_time]


def test_empty_index_and_sanity_check(data_log, meta_log: Path, tmp_path: Path) -> None:
    """[DumpLogSegmentsTest.testDumpEmptyIndex] a 0-byte .index prints exactly "<path> is
    empty." (before any sanity check); --index-sanity-check prints "<path> passed sanity check."
    for the trimmed indexes of a closed log, and fails the preallocated time index of a live
    log whose zero tail ends below its first timestamp, as Kafka's TimeIndex.sanityCheck does."""
    log, _ = data_log
    part = tmp_path / "empty-0"
    part.mkdir()
    shutil.copy(log.dir / f"{SEG}.log", part / f"{SEG}.log")
    empty = part / f"{SEG}.index"
    empty.write_bytes(b"")
    idx, tidx = meta_log.with_suffix(".index"), meta_log.with_suffix(".timeindex")
    assert OffsetIndex(idx, 0, writable=False).entries > 0
    live = log.dir / f"{SEG}.timeindex"
    alone, out = kafkalog_all(("dump", "--files", empty),
                              ("dump", "--index-sanity-check", "--files",
                               f"{empty},{idx},{tidx},{live}"))
    assert alone.returncode == 0 and alone.stdout == f"Dumping {empty}\n{empty} is empty.\n"
    assert out.returncode == 1
    assert out.stdout.splitlines() == [f"Dumping {empty}", f"{empty} is empty.",
                                       f"Dumping {idx}", f"{idx} passed sanity check.",
                                       f"Dumping {tidx}", f"{tidx} passed sanity check.",
                                       f"Dumping {live}"]
    assert out.stderr.startswith(f"kafkalog: Corrupt time index found, time index file ({live}) "
                                 f"has non-zero size but the last timestamp is 0 which is less "
                                 f"than the first timestamp ")


# ------------------------------------------------------------------------------ dump: reports

def test_reports_txnindex_snapshot_and_unknown_files(tmp_path: Path) -> None:
    """DumpLogSegments' end-of-run reports on stderr, worded as Kafka words them (index
    mismatches and non-consecutive offsets newest first, as Kafka prepends them to a List), the
    trailing-bytes line, .txnindex and .snapshot lines (OptionalLong, trailing space when the
    producer has no batch), a corrupt snapshot's message, a KRaft .checkpoint snapshot (dumped as
    a log, with its control records rendered) and unknown files."""
    part = tmp_path / "reports-0"
    with Log.open(part, LogConfig.from_properties({"index.interval.bytes": "0"})) as log:
        for base in (0, 5, 10, 12):
            raw = encode_batches(table([b"x", b"y"], timestamps=[100 + base, 101 + base]),
                                 base_offset=base)
            log.append_raw(raw, assign_offsets=False)
    log_path, idx, tidx = (part / f"{SEG}{s}" for s in (".log", ".index", ".timeindex"))
    raw, infos = shallow(log_path)
    positions = [b.position for b in infos]
    with OffsetIndex(idx, 0, writable=False) as index:
        assert index.entries_array().tolist() == list(zip((6, 11, 13), positions[1:]))
    # the index: entries 1 and 2 swap positions
    ib = bytearray(idx.read_bytes())
    struct.pack_into(">ii", ib, 8, 11, positions[3])
    struct.pack_into(">ii", ib, 16, 13, positions[2])
    idx.write_bytes(ib)
    # the time index (106,6) (111,11) (113,13): wrong timestamp; an offset inside a batch; a
    # timestamp below the previous one
    tidx.write_bytes(struct.pack(">qi", 999, 6) + struct.pack(">qi", 111, 10)
                     + struct.pack(">qi", 50, 13))
    with open(log_path, "ab") as f:
        # a torn write: part of a batch header, its magic byte garbage (Kafka's FileLogInputStream
        # sees the batch run past the end before it looks at the magic)
        f.write(raw[:16] + b"\x63" + raw[17:20])
    txn = TransactionIndex(part / f"{SEG}.txnindex", 0)
    txn.append(AbortedTxn(producer_id=7, first_offset=0, last_offset=5, last_stable_offset=3))
    txn.append(AbortedTxn(producer_id=8, first_offset=6, last_offset=11, last_stable_offset=6))
    txn.close()
    snap = write_snapshot(part, 14, [
        ProducerSnapshotEntry(producer_id=7, producer_epoch=2, last_sequence=5, last_offset=13,
                              offset_delta=1, timestamp=113, coordinator_epoch=3,
                              current_txn_first_offset=12),
        ProducerSnapshotEntry(producer_id=8, producer_epoch=0)])
    bad_snap = part / "00000000000000000020.snapshot"
    data = bytearray(snap.read_bytes())
    data[3] ^= 0xFF
    bad_snap.write_bytes(data)
    # a KRaft snapshot (.checkpoint, dumped as a log): header, leader change, KRaft version
    kraft = part / "00000000000000000010-0000000001.checkpoint"
    kraft.write_bytes(build_batch(
        [RecordInput(struct.pack(">hqB", 0, 123, 0), ControlRecordType.SNAPSHOT_HEADER.record_key(), 5),
         RecordInput(struct.pack(">hiB", 0, 7, 0), ControlRecordType.LEADER_CHANGE.record_key(), 6),
         RecordInput(struct.pack(">hhB", 0, 1, 0), ControlRecordType.KRAFT_VERSION.record_key(), 6)],
        control=True))
    notes = part / "notes.txt"
    notes.write_text("hi")
    epochs = part / "leader-epoch-checkpoint"
    files = [log_path, idx, tidx, part / f"{SEG}.txnindex", snap, bad_snap, kraft, notes, epochs]
    out, js = kafkalog_all(("dump", "--deep-iteration", "--files", ",".join(map(str, files))),
                           ("dump", "--json", "--deep-iteration", "--files",
                            ",".join(map(str, files))))
    assert out.returncode == 0, out.stderr
    stdout = out.stdout.splitlines()
    assert f"Found 20 invalid bytes at the end of {SEG}.log" in stdout
    assert [line for line in stdout if line.startswith("offset:")] == [
        f"offset: 6 position: {positions[1]}", f"offset: 11 position: {positions[3]}",
        f"offset: 13 position: {positions[2]}"]
    assert "timestamp: 999 offset: 6" in stdout and "timestamp: 50 offset: 13" in stdout
    txn_at = stdout.index(f"Dumping {part / f'{SEG}.txnindex'}")
    assert stdout[txn_at + 1:txn_at + 3] == [
        "version: 0 producerId: 7 firstOffset: 0 lastOffset: 5 lastStableOffset: 3",
        "version: 0 producerId: 8 firstOffset: 6 lastOffset: 11 lastStableOffset: 6"]
    snap_at = stdout.index(f"Dumping {snap}")
    assert stdout[snap_at + 1:snap_at + 4] == [
        "producerId: 7 producerEpoch: 2 coordinatorEpoch: 3 currentTxnFirstOffset: OptionalLong[12] "
        "lastTimestamp: 113 firstSequence: 4 lastSequence: 5 lastOffset: 13 offsetDelta: 1 "
        "timestamp: 113",
        "producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: -1 ",
        f"Dumping {bad_snap}"]
    kraft_at = stdout.index(f"Dumping {kraft}")
    assert stdout[kraft_at + 1] == "Snapshot end offset: 10, epoch: 1"
    assert [line.split("headerKeys: [] ")[1] for line in stdout[kraft_at + 3:kraft_at + 6]] == [
        'SnapshotHeader {"version":0,"lastContainedLogTimestamp":123}',
        "controlType: LEADER_CHANGE(2)", 'KRaftVersion {"version":0,"kRaftVersion":1}']
    # --json: the same reports as objects on stdout (stderr keeps Kafka's text)
    assert js.returncode == 0 and js.stderr == out.stderr
    reports = [o for o in map(json.loads, js.stdout.splitlines())
               if o["type"] in ("indexMismatch", "timestampMismatch", "outOfOrderTimestamp",
                                "offsetNotFound", "nonConsecutiveOffsets", "ignored", "error")]
    assert [tuple(o.values())[1:] for o in reports] == [
        (str(bad_snap), "Snapshot is corrupt (CRC is no longer valid). Stored crc: "
         f"{struct.unpack_from('>I', data, 2)[0]}. Computed crc: "
         f"{struct.unpack_from('>I', snap.read_bytes(), 2)[0]}"),
        (str(notes),), (str(epochs),),
        (str(idx), 13, 11), (str(idx), 11, 13), (str(tidx), 999, 106), (str(tidx), 50, 113),
        (str(tidx), 50, 111), (str(tidx), 10, 11), (str(log_path), 6, 10), (str(log_path), 1, 5)]
    stored = struct.unpack_from(">I", data, 2)[0]
    assert out.stderr.splitlines() == [
        f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: "
        f"{struct.unpack_from('>I', snap.read_bytes(), 2)[0]}",
        f"Ignoring unknown file {notes}",
        f"Ignoring unknown file {epochs}",
        f"Mismatches in :{idx}",
        "  Index offset: 13, log offset: 11",
        "  Index offset: 11, log offset: 13",
        f"Found timestamp mismatch in :{tidx}",
        "  Index timestamp: 999, log timestamp: 106",
        "  Index timestamp: 50, log timestamp: 113",
        f"Found out of order timestamp in :{tidx}",
        "  Index timestamp: 50, Previously indexed timestamp: 111",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 10, found log offset: 11",
        f"Non-consecutive offsets in {log_path}",
        "  6 is followed by 10",
        "  1 is followed by 5",
    ]


def test_skip_record_metadata(meta_log: Path) -> None:
    """--skip-record-metadata: Kafka prints "| " before the first content field, so a record without
    a key is "| payload: v" and a control record an empty line (the Java DumpLogSegments of Kafka
    4.3+, ``printRecordContents``; the Scala tool before it printed " payload: v", checked against
    Kafka 4.4.0 in tests/interop)."""
    out = kafkalog("dump", "--print-data-log", "--skip-record-metadata", "--files", meta_log)
    assert out.returncode == 0, out.stderr
    records = [line for line in out.stdout.splitlines()
               if not line.startswith(("Dumping", "Log starting", "baseOffset"))]
    assert records[:9] == ["| payload: a", "| payload: b", "| key: c payload: 1", "| payload: d",
                           "| key: e", "| payload: f", "| payload: g", "| payload: h", "| payload: i"]
    assert records[10] == ""                                     # the COMMIT marker


def test_json_has_the_fields_of_the_text_lines(meta_log: Path) -> None:
    """--json: one object per batch and per record, the same fields and values as the text
    lines; keys and values as UTF-8 strings, base64 when they are not UTF-8."""
    text, js = kafkalog_all(("dump", "--print-data-log", "--files", meta_log),
                            ("dump", "--print-data-log", "--json", "--files", meta_log))
    assert text.returncode == js.returncode == 0, js.stderr
    objs = [json.loads(line) for line in js.stdout.splitlines()]
    lines = text.stdout.splitlines()
    assert len(objs) == len(lines)
    assert objs[0] == {"type": "dumping", "file": str(meta_log)}
    assert objs[1] == {"type": "logStartingOffset", "file": str(meta_log), "offset": 0}

    def as_text(v) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    for line, obj in zip(lines[2:], objs[2:]):
        if obj["type"] == "batch":
            f = fields(line)
            assert f.pop(obj["timestampType"]) == str(obj["maxTimestamp"])
            horizon = obj["deleteHorizonMs"]
            assert f.pop("deleteHorizonMs") == ("OptionalLong.empty" if horizon is None
                                                else f"OptionalLong[{horizon}]")
            assert f == {k: as_text(v) for k, v in obj.items()
                         if k not in ("type", "file", "timestampType", "maxTimestamp",
                                      "deleteHorizonMs")}
        else:
            assert obj["type"] == "record"
            assert line.startswith(f"| offset: {obj['offset']} {obj['timestampType']}: "
                                   f"{obj['timestamp']} keySize: {obj['keySize']} valueSize: "
                                   f"{obj['valueSize']} sequence: {obj['sequence']} headerKeys: []")
            if obj.get("keyEncoding") == "utf-8":
                assert f" key: {obj['key']}" in line
            if "payload" in obj:
                assert line.endswith(f" payload: {obj['payload']}")
    control = next(o for o in objs if o["type"] == "record" and "endTxnMarker" in o)
    assert (control["endTxnMarker"], control["coordinatorEpoch"]) == ("COMMIT", 100)
    binary = objs[-1]
    assert binary["keyEncoding"] == "base64" and base64.b64decode(binary["key"]) == b"\xff\xfe"
    assert (binary["payload"], binary["payloadEncoding"]) == ("ok", "utf-8")
    assert lines[-1].endswith("key: \ufffd\ufffd payload: ok")


# ------------------------------------------------------------------------------ dump: real broker files

@needs_fixtures
def test_dump_real_broker_segment_index_timeindex_snapshot() -> None:
    """A rolled segment written by a real broker (timeindex_test, base 7729): exact batch, index,
    time index and producer snapshot lines, and no mismatch (the broker's indexes agree)."""
    files = [TIMEINDEX_TEST / f"00000000000000007729{s}"
             for s in (".log", ".index", ".timeindex", ".snapshot")]
    out = kafkalog("dump", "--files", ",".join(map(str, files)))
    assert out.returncode == 0 and out.stderr == "", out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == [
        f"Dumping {files[0]}", "Log starting offset: 7729",
        "baseOffset: 7729 lastOffset: 7729 count: 1 baseSequence: 7729 lastSequence: 7729 "
        "producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false "
        "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: "
        "1753819153918 size: 136 magic: 2 compresscodec: none crc: 1822114008 isvalid: true"]
    _, infos = shallow(files[0])
    at = {line: i for i, line in enumerate(lines) if line.startswith("Dumping")}
    batch_lines = lines[2:at[f"Dumping {files[1]}"]]
    assert len(batch_lines) == len(infos) and all(line.endswith("isvalid: true") for line in batch_lines)
    index_lines = lines[at[f"Dumping {files[1]}"] + 1:at[f"Dumping {files[2]}"]]
    with OffsetIndex(files[1], 7729, writable=False) as index:
        assert index.entries == 252
        assert index_lines == [f"offset: {7729 + r} position: {p}"
                               for r, p in index.entries_array().tolist()]
    assert index_lines[0] == "offset: 7760 position: 4216"
    time_lines = lines[at[f"Dumping {files[2]}"] + 1:at[f"Dumping {files[3]}"]]
    with TimeIndex(files[2], 7729, writable=False) as tindex:
        assert time_lines == [f"timestamp: {t} offset: {7729 + r}"
                              for t, r in tindex.entries_array().tolist()]
    assert all(line.startswith("timestamp: 17538191") for line in time_lines)
    assert lines[at[f"Dumping {files[3]}"] + 1:] == [
        "producerId: 0 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1753819153914 firstSequence: 7728 lastSequence: 7728 "
        "lastOffset: 7728 offsetDelta: 0 timestamp: 1753819153914"]


@needs_fixtures
def test_dump_real_broker_records_and_record_offset_time_index() -> None:
    """Real broker records with headers (ts-consumer), an empty .index of a non-empty segment, and
    that broker's time index, whose entries name the record with the largest timestamp inside a
    batch rather than the batch's last offset: DumpLogSegments reports them as not found, and so
    do we, in its words."""
    log, tidx = TS_CONSUMER / f"{SEG}.log", TS_CONSUMER / f"{SEG}.timeindex"
    empty = TS_CONSUMER / "00000000000000000362.index"
    out = kafkalog("dump", "--print-data-log", "--files", f"{log},{tidx},{empty}")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[2].startswith("baseOffset: 0 lastOffset: 36 count: 37 baseSequence: -1 "
                               "lastSequence: -1 producerId: -1 producerEpoch: -1 "
                               "partitionLeaderEpoch: 0 ")
    assert lines[3] == ("| offset: 0 CreateTime: 1700691401835 keySize: 1 valueSize: 5 sequence: -1 "
                        "headerKeys: [header1,header2] key: 0 payload: val-0")
    assert lines[-3:] == ["timestamp: 1700691401848 offset: 303", f"Dumping {empty}",
                          f"{empty} is empty."]
    assert out.stderr.splitlines() == ["The following indexed offsets are not found in the log.",
                                       "Indexed offset: 66, found log offset: 70",
                                       "Indexed offset: 303, found log offset: 361"]


# ------------------------------------------------------------------------------ describe

@pytest.fixture(scope="module")
def kafkalog_data_dir(tmp_path_factory) -> Path:
    """Two partitions written by kafkalog, each rolled once (segment.bytes 2000), with leader
    epochs, a topic id and the data-dir checkpoints Log.close writes."""
    root = tmp_path_factory.mktemp("datadir")
    config = LogConfig.from_properties({"segment.bytes": "2000", "index.interval.bytes": "128"})
    for p in (0, 1):
        with Log.open(root / f"orders-{p}", config) as log:
            for i in range(20):
                log.append_raw(encode_batches(table([f"value-{i}".encode() * 10],
                                                    keys=[f"k{i}".encode()],
                                                    timestamps=[1000 + i])),
                               leader_epoch=0 if i < 10 else 2)
        PartitionMetadataFile(root / f"orders-{p}").write(uuid.UUID(int=p + 1))
    return root


def test_describe_a_kafkalog_data_dir(kafkalog_data_dir: Path) -> None:
    """describe DIR --json on a kafkalog-written data dir: segments, offsets, checkpoints, leader
    epochs, topic ids and totals, opened read-only (nothing changes)."""
    before = tree_state(kafkalog_data_dir)
    out = kafkalog("describe", "--json", kafkalog_data_dir)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == ["[1/2] orders-0", "[2/2] orders-1"]
    result = json.loads(out.stdout)
    assert [p["partition"] for p in result["partitions"]] == ["orders-0", "orders-1"]
    for p, part in enumerate(result["partitions"]):
        assert (part["topic"], part["partition_id"]) == ("orders", p)
        assert (part["log_start_offset"], part["log_end_offset"]) == (0, 20)
        assert part["checkpoints"]["recovery-point-offset-checkpoint"] == 20
        assert part["leader_epochs"] == [[0, 0], [2, 10]]
        assert part["topic_id"] == base64.urlsafe_b64encode(uuid.UUID(int=p + 1).bytes).rstrip(b"=").decode()
        segs = part["segments"]
        assert [s["base_offset"] for s in segs] == [0, 13]
        assert [(s["first_offset"], s["last_offset"]) for s in segs] == [(0, 12), (13, 19)]
        assert [s["size"] for s in segs] == [(kafkalog_data_dir / f"orders-{p}" / f"{s['base_offset']:020d}.log")
                                             .stat().st_size for s in segs]
        assert segs[-1]["max_timestamp"] == 1019 and segs[-1]["max_timestamp_offset"] == 19
        assert all(s["has_index"] and s["has_timeindex"] and not s["has_txnindex"] for s in segs)
        assert part["size"] == sum(s["size"] for s in segs)
    assert result["totals"] == {"partitions": 2, "segments": 4,
                                "size": sum(p["size"] for p in result["partitions"]),
                                "offsets": 40, "errors": 0}
    assert tree_state(kafkalog_data_dir) == before


@needs_fixtures
def test_describe_and_verify_a_copy_of_a_real_partition(tmp_path: Path) -> None:
    """describe on a copy of a real broker partition (31 segments, single-record batches, a
    0-byte Pinterest .wm file) as a partition folder (--json) and inside a data dir (table);
    nothing is modified; verify finds every file valid."""
    data = tmp_path / "data"
    part = data / "test_topic_a-0"
    shutil.copytree(UPLOADER, part)
    for p in part.iterdir():
        p.chmod(0o644)
    OffsetCheckpointFile(data / "recovery-point-offset-checkpoint").write({("test_topic_a", 0): 9100})
    before = tree_state(data)
    out, table_out, verify = kafkalog_all(("describe", "--json", part), ("describe", data),
                                          ("verify", data))
    assert out.returncode == 0, out.stderr
    (desc,) = json.loads(out.stdout)["partitions"]
    logs = sorted(part.glob("*.log"))
    assert len(desc["segments"]) == len(logs) == 31
    assert [s["base_offset"] for s in desc["segments"]] == [int(p.name[:20]) for p in logs]
    assert [s["size"] for s in desc["segments"]] == [p.stat().st_size for p in logs]
    assert desc["log_start_offset"] == 0 and desc["log_end_offset"] == 9100
    assert desc["checkpoints"]["recovery-point-offset-checkpoint"] == 9100
    assert desc["leader_epochs"] == [[0, 0]]
    first = desc["segments"][0]
    assert (first["first_offset"], first["last_offset"], first["index_entries"]) == (0, 293, 7)
    assert first["max_timestamp"] == max(t for t, _ in TimeIndex(part / f"{SEG}.timeindex", 0, writable=False)
                                         .entries_array().tolist())
    assert table_out.returncode == 0, table_out.stderr
    text = table_out.stdout.splitlines()
    assert text[0] == f"test_topic_a-0  ({part})"
    assert "log start offset 0  log end offset 9100  segments 31" in text[1]
    assert "recovery point 9100" in text[2]
    assert text[4].split() == ["base", "offset", "size", "first", "offset", "last", "offset",
                               "index", "timeindex", "first", "indexed", "ts", "max", "timestamp",
                               "files"]
    assert text[-1].startswith("TOTAL  partitions 1  segments 31  size ")
    assert text[-1].endswith("offsets 9100")
    assert verify.returncode == 0, verify.stdout
    known = [p for p in part.iterdir() if p.suffix in (".log", ".index", ".timeindex", ".snapshot")
             or p.name == "leader-epoch-checkpoint"]
    n = len(known) + 1                                  # + the recovery-point checkpoint
    assert verify.stdout.splitlines()[-1] == f"{n} of {n} files valid"
    assert "skipped" not in verify.stdout              # the .wm file is not even listed
    assert tree_state(data) == before


# ------------------------------------------------------------------------------ verify

def _checked_dir(tmp_path: Path) -> Path:
    """A data dir every file of which verify can check: two partitions, rolled segments, a
    .txnindex, a producer snapshot, leader epochs, topic ids and the data-dir checkpoints."""
    root = tmp_path / "data"
    config = LogConfig.from_properties({"segment.bytes": "2000", "index.interval.bytes": "128"})
    for p in (0, 1):
        part = root / f"orders-{p}"
        with Log.open(part, config) as log:
            for i in range(20):
                log.append_raw(encode_batches(table([f"value-{i}".encode() * 10],
                                                    keys=[f"k{i}".encode()],
                                                    timestamps=[1000 + i])), leader_epoch=1)
        assert (part / "00000000000000000013.log").exists()          # rolled there
        txn = TransactionIndex(part / "00000000000000000013.txnindex", 13)
        txn.append(AbortedTxn(producer_id=5, first_offset=13, last_offset=14, last_stable_offset=13))
        txn.append(AbortedTxn(producer_id=6, first_offset=15, last_offset=16, last_stable_offset=15))
        txn.close()
        write_snapshot(part, 13, [ProducerSnapshotEntry(producer_id=5, producer_epoch=0)])
        PartitionMetadataFile(part).write(uuid.UUID(int=7))
    return root


def test_verify_names_the_file_and_position_of_each_corruption(tmp_path: Path) -> None:
    """verify: exit 0 on a clean data dir; then one corruption per kind of file (.log batch CRC,
    .index entry pointing at another batch, .timeindex out of order, .txnindex version, .snapshot
    CRC, offset checkpoint line, leader-epoch-checkpoint version, partition.metadata), each
    reported with its file and byte position (or line), exit 1."""
    root = _checked_dir(tmp_path)
    clean = kafkalog("verify", root)
    assert clean.returncode == 0, clean.stdout
    # 24: the Log's own producer snapshots at the roll (13, overwritten above) and at close (20)
    assert clean.stdout.splitlines()[-1] == "24 of 24 files valid"
    p0, p1 = root / "orders-0", root / "orders-1"
    # .log: a byte of the third batch's records
    log0 = p0 / f"{SEG}.log"
    _, infos = shallow(log0)
    raw = bytearray(log0.read_bytes())
    raw[infos[2].position + 70] ^= 0xFF
    log0.write_bytes(raw)
    # .index: entry 1 points at the batch of entry 2
    idx = p1 / f"{SEG}.index"
    ib = bytearray(idx.read_bytes())
    ib[12:16] = ib[20:24]
    idx.write_bytes(ib)
    wrong = OffsetIndex(idx, 0, writable=False).entry(2)
    # .timeindex: entry 1 below entry 0
    tidx = p1 / "00000000000000000013.timeindex"
    tb = bytearray(tidx.read_bytes())
    struct.pack_into(">q", tb, 12, 5)
    tidx.write_bytes(tb)
    # .txnindex: the second entry's version byte
    txn = p1 / "00000000000000000013.txnindex"
    xb = bytearray(txn.read_bytes())
    xb[34] = 1
    txn.write_bytes(xb)
    # .snapshot: the CRC
    snap = p0 / "00000000000000000013.snapshot"
    sb = bytearray(snap.read_bytes())
    sb[2] ^= 0x01
    snap.write_bytes(sb)
    # checkpoints
    (root / "recovery-point-offset-checkpoint").write_text("0\n2\norders 0 20\norders one 20\n")
    (p0 / "leader-epoch-checkpoint").write_text("1\n1\n1 0\n")
    (p1 / "partition.metadata").write_text("version: 0\ntopic_ib: AAAAAAAAAAAAAAAAAAAABw")
    out = kafkalog("verify", root)
    assert out.returncode == 1, out.stdout + out.stderr
    corrupt = [line.split(" CORRUPT ", 1)[1] for line in out.stdout.splitlines() if " CORRUPT " in line]
    expected = [
        # the corruption itself, then what it breaks further on (a time-index entry of that batch)
        ("Record is corrupt (stored crc = ", f"({log0}, position {infos[2].position}, offset 2)"),
        (f"{p0 / f'{SEG}.timeindex'}: position 12 (entry 1): the batch of offset 2 cannot be read",
         f"(position {infos[2].position}, offset 2)"),
        (f"{snap}: position 2 (crc): Snapshot is corrupt (CRC is no longer valid). Stored crc: ", ""),
        (f"{p0 / 'leader-epoch-checkpoint'}: line 1: Unrecognised version: 1, expected version: 0", ""),
        (f"{idx}: position 8 (entry 1): Index offset: 2, log offset: {wrong.offset}",
         f"(the batch at position {wrong.position} of {SEG}.log)"),
        (f"{idx}: position 16 (entry 2): entry (offset {wrong.offset}, position {wrong.position}) "
         f"does not increase", ""),
        (f"{tidx}: position 12 (entry 1): Index timestamp: 5, Previously indexed timestamp: 1014 "
         f"(out of order)", ""),
        (f"{tidx}: position 12 (entry 1): Index timestamp: 5, log timestamp: 1015", ""),
        (f"{txn}: position 34 (entry 1): Unexpected aborted transaction version 1", ""),
        (f"{p1 / 'partition.metadata'}: line 2: Malformed line", "topic_ib"),
        (f"{root / 'recovery-point-offset-checkpoint'}: line 4: Malformed line in checkpoint file: "
         f"'orders one 20'", ""),
    ]
    for must, also in expected:
        assert any(line.startswith(must) and also in line for line in corrupt), (must, corrupt)
    assert len(corrupt) == len(expected), corrupt
    assert out.stdout.splitlines()[-1] == "15 of 24 files valid"        # 9 files with problems


def test_a_negative_index_position_is_reported_not_a_traceback(tmp_path: Path) -> None:
    """Found by fuzzing: an .index entry with a negative position made ``verify`` (checking the
    .timeindex beside it) and ``dump`` of that .timeindex start a batch walk there and end in a
    ``struct.error`` traceback (Kafka's DumpLogSegments ends in FileRecords.slice's
    IllegalArgumentException). The walk now starts at 0; the .index's own check reports it."""
    root = _checked_dir(tmp_path)
    idx = root / "orders-1" / f"{SEG}.index"
    ib = bytearray(idx.read_bytes())
    ib[4:8] = struct.pack(">i", -1)                   # entry 0's position
    idx.write_bytes(ib)
    out = kafkalog("verify", root / "orders-1")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    corrupt = [line.split(" CORRUPT ", 1)[1] for line in out.stdout.splitlines() if " CORRUPT " in line]
    assert len(corrupt) == 1 and corrupt[0].startswith(f"{idx}: position 0 (entry 0): "), corrupt
    assert "position -1" in corrupt[0]
    dump = kafkalog("dump", "--files", root / "orders-1" / f"{SEG}.timeindex")
    assert dump.returncode == 0 and "Traceback" not in dump.stderr, dump.stderr
    assert "timestamp: " in dump.stdout


def test_huge_txnindex_and_snapshot_are_read_in_bounded_memory(tmp_path: Path, capsys) -> None:
    """Found by fuzzing: ``dump`` and ``verify`` read a ``.txnindex`` or ``.snapshot`` whole, so a
    file extended (sparse) to gigabytes ended in MemoryError. A transaction index is now read a
    chunk of entries at a time (its entries and problems as before), and a snapshot whose size
    disagrees with its header is refused from the header alone."""
    import tracemalloc

    from storage_core.index import AbortedTxn
    from storage_core.producer import ProducerSnapshotEntry, write_snapshot
    from storage_core.tools.cli import main

    def peak_of(*argv: str) -> tuple[int, int, str, str]:
        capsys.readouterr()
        tracemalloc.start()
        try:
            code = main(list(argv))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        out, err = capsys.readouterr()
        return code, peak, out, err

    txn = tmp_path / f"{SEG}.txnindex"
    txn.write_bytes(AbortedTxn(7, 0, 5, 5).to_bytes() + AbortedTxn(8, 6, 9, 9).to_bytes())
    with open(txn, "r+b") as f:
        f.truncate(34 * (1 << 19) + 5)              # zero entries after them (17.8 MB), 5 bytes of tail
    code, peak, out, _ = peak_of("verify", str(txn))
    assert code == 1 and peak < 8 << 20, (code, peak)        # the file whole: 17.8 MB
    assert f"{txn}: position 68 (entry 2): last offset 0 is below the previous entry's 9" in out, out
    assert f"{txn}: position {34 << 19}: 5 trailing bytes" in out, out
    assert main(["dump", "--files", str(txn)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("version: ")]
    assert len(lines) == 1 << 19 and lines[1].startswith("version: 0 producerId: 8 firstOffset: 6")

    snap = write_snapshot(tmp_path, 7, [ProducerSnapshotEntry(1, 0), ProducerSnapshotEntry(2, 0)])
    os.truncate(snap, 3 << 30)
    code, peak, out, _ = peak_of("verify", str(snap))
    assert code == 1 and peak < 4 << 20, (code, peak)
    assert f"{snap}: position 6 (entry count): Snapshot length {3 << 30} does not match its 2 entries" in out
    code, peak, _, err = peak_of("dump", "--files", str(snap))
    assert code == 0 and peak < 4 << 20, (code, peak)
    assert f"Snapshot length {3 << 30} does not match its 2 entries" in err


# ------------------------------------------------------------------------------ recover

def _two_segment_partition(root: Path) -> Path:
    part = root / "orders-0"
    config = LogConfig.from_properties({"segment.bytes": "2000", "index.interval.bytes": "128"})
    with Log.open(part, config) as log:
        for i in range(20):
            log.append_raw(encode_batches(table([f"value-{i}".encode() * 10], keys=[f"k{i}".encode()],
                                                timestamps=[1000 + i])))
    assert sorted(p.name for p in part.glob("*.log")) == [f"{SEG}.log", "00000000000000000013.log"]
    return part


def test_recover_truncates_a_torn_tail(tmp_path: Path) -> None:
    """recover: the last batch of the active segment has a bad CRC and a torn half-batch follows
    it; Log.open (writable) truncates both; the report names the file, the sizes and the log end
    offsets; afterwards verify is clean."""
    part = _two_segment_partition(tmp_path / "data")
    active = part / "00000000000000000013.log"
    raw, infos = shallow(active)
    last = infos[-1]
    damaged = bytearray(raw)
    damaged[last.position + last.size - 3] ^= 0xFF
    active.write_bytes(bytes(damaged) + raw[:40])
    size = active.stat().st_size
    out = kafkalog("recover", part.parent)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        f"orders-0: truncated: log start offset 0, log end offset 19; log end offset 20 -> 19; "
        f"truncated 00000000000000000013.log from {size} to {last.position} bytes; "
        f"deleted 00000000000000000020.snapshot; created 00000000000000000019.snapshot",
        f"1 of 1 partitions recovered, 1 truncated ({size - last.position} bytes removed)"]
    assert active.stat().st_size == last.position
    assert "Found invalid batch" in out.stderr
    assert OffsetCheckpointFile(part.parent / "recovery-point-offset-checkpoint").read() == {("orders", 0): 19}
    assert kafkalog("verify", part.parent).returncode == 0


def test_recover_full_validates_below_the_recovery_point(tmp_path: Path) -> None:
    """A corrupt batch in a rolled segment, below the recovery point: recover leaves it (only
    what follows the recovery point is validated, as Kafka does); recover --full drops the
    partition's recovery point first, so the log is truncated there and the later segment
    deleted."""
    part = _two_segment_partition(tmp_path / "data")
    first = part / f"{SEG}.log"
    raw, infos = shallow(first)
    damaged = bytearray(raw)
    damaged[infos[5].position + 70] ^= 0xFF
    first.write_bytes(damaged)
    plain = kafkalog("recover", part.parent)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert plain.stdout.splitlines()[0] == "orders-0: ok: log start offset 0, log end offset 20"
    full = kafkalog("recover", "--full", part.parent)
    assert full.returncode == 0, full.stdout + full.stderr
    line = full.stdout.splitlines()[0]
    assert line.startswith("orders-0: truncated: log start offset 0, log end offset 5; "
                           "log end offset 20 -> 5; ")
    assert f"truncated {SEG}.log from {len(raw)} to {infos[5].position} bytes" in line
    assert "deleted 00000000000000000013.log" in line
    assert sorted(p.name for p in part.glob("*.log")) == [f"{SEG}.log"]
    assert OffsetCheckpointFile(part.parent / "recovery-point-offset-checkpoint").read() == {("orders", 0): 5}


def test_recover_truncates_a_zero_filled_tail(tmp_path: Path) -> None:
    """Kafka's LogSegment.recover catches the CorruptRecordException of a zero-filled tail (as a
    power loss leaves on many file systems) and truncates it."""
    part = _two_segment_partition(tmp_path / "data")
    active = part / "00000000000000000013.log"
    size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(b"\x00" * 40)
    out = kafkalog("recover", part.parent)
    assert out.returncode == 0, out.stdout
    assert f"truncated 00000000000000000013.log from {size + 40} to {size} bytes" in out.stdout


def test_time_index_check_reads_batches_as_the_record_iterator_does():
    """What ``verify`` and ``dump`` check a time-index entry against (the offsets of the batch's
    records and their largest timestamp) comes from the compiled record walk for v2 batches: it
    must agree with Kafka's record iteration (the Python per-record walk) on every batch of the
    fixtures (real broker data, every codec and magic there) and on batches built here: log
    append time, a control batch, compressed, null keys and headers, a negative timestamp."""
    from fixture_paths import FIXTURES, require_fixture
    from storage_core.format import LOG_APPEND_TIME
    from storage_core.format.legacy import build_compressed, build_message
    from storage_core.tools.files import batch_records as tool_records
    from storage_core.tools.files import max_record_timestamp, record_offsets_and_max_timestamp

    recs = [RecordInput(b"v%d" % i, None if i % 2 else b"k", NOW - 5 + (i * 7) % 11,
                        (("h", b"x"),) if i % 3 == 0 else ()) for i in range(9)]
    built = b"".join([
        build_batch(recs, base_offset=0),
        build_batch(recs, base_offset=9, compression=4),
        build_batch(recs, base_offset=18, timestamp_type=1, log_append_time=NOW + 99),
        build_batch([RecordInput(b"v", None, -7, ())], base_offset=27),
        end_transaction_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 0), offset=28,
                                     timestamp=NOW, producer_id=3, producer_epoch=0),
        build_message(29, b"v", b"k", magic=1, timestamp=NOW + 1),
        build_compressed([(b"k", b"a", NOW + 4), (None, b"b", NOW + 2)], magic=1, compression=1,
                         wrapper_offset=31),
    ])
    assert LOG_APPEND_TIME == 1
    buffers = [("built", built)] + [(str(p), p.read_bytes())
                                    for p in sorted(require_fixture(FIXTURES).rglob("*.log"))]
    checked = 0
    for name, buf in buffers:
        for i, b in enumerate(LogInputStream(buf, 0, len(buf))):
            if i == 50:
                break                   # every kind of batch, not every copy (the time it takes)
            want = tool_records(buf, b)
            offsets, max_ts = record_offsets_and_max_timestamp(buf, b)
            assert offsets.tolist() == [r.offset for r, _, _ in want], (name, b.position)
            assert max_ts == max_record_timestamp(want), (name, b.position)
            checked += 1
    assert checked > 20
    # the built ones: log append time stamps every record with the batch's time; -7 stays -7's max
    built_batches = list(LogInputStream(built, 0, len(built)))
    assert record_offsets_and_max_timestamp(built, built_batches[2])[1] == NOW + 99
    assert record_offsets_and_max_timestamp(built, built_batches[3])[1] == -1

"""Every real-world data set in ``shared/fixtures`` decodes to exactly what its provenance says.

The fixtures (see ``shared/fixtures/PROVENANCE.md``) are real broker output and client test
vectors: pinterest/tiered-storage segment directories (magic 2, with .index/.timeindex),
asayers/kafkalite 0.8-era logs with golden decoded output (magic 0, none/gzip/snappy),
kafka-rust FetchResponse message sets (magic 0), kafka-go FetchResponse record sets (mixed magic
1 + 2, gzip) and kafka-python byte vectors (magic 0/1/2 and a hand-made control batch).

What is checked, for every ``.log``/``.bin`` listed in ``MANIFEST.json`` (an independent checker's
summary):
* ``decode_batches`` reproduces the manifest's record count, first/last offset (in file order),
  min/max timestamp (ignoring the -1 "no timestamp" of magic 0, as the manifest does), null
  key/value counts, records with headers; the shallow walk (``LogInputStream``) reproduces the
  batch count, magic mix, codec mix, control/transactional/LogAppendTime batch counts and the
  trailing-byte count; a file whose CRC does not verify raises ``CorruptRecordError`` naming
  the position of the bad batch;
* exact contents against each source's own expectations (kafka-go and kafka-python manifests,
  kafka-rust ``fetch*.txt``, kafkalite golden files, pinterest key/value/header patterns);
* the deep scalar iterator ``iter_records`` agrees record for record with ``decode_batches``;
* decoding through ``bytes``, ``bytearray``, ``memoryview`` and ``mmap`` gives the same table;
  a file cut one byte short decodes to its complete batches and reports the torn one as partial;
* segment directories: base offsets from file names, contiguity across segments, and every
  ``.index``/``.timeindex`` entry (parsed here with numpy) obeys Kafka's rules
  (kafka_format.md §8, §9, §11) against the decoded log.
"""

from __future__ import annotations

import collections
import functools
import gc
import hashlib
import json
import mmap
import re
import struct
import zlib
from pathlib import Path

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from storage_core.errors import CorruptRecordError
from storage_core.format import (SCHEMA, LogInputStream, batch_records, decode_batches,
                                 decode_run, iter_batches, iter_records)
from storage_core.format.compression import CompressionType, decompress
from storage_core.format.control import ControlRecordType

from fixture_paths import FIXTURES, require_fixture

require_fixture(FIXTURES / "MANIFEST.json")         # the whole module reads the fixtures

MANIFEST: list[dict] = json.loads((FIXTURES / "MANIFEST.json").read_text())
BY_PATH = {e["path"]: e for e in MANIFEST}
VALID = [e["path"] for e in MANIFEST if e["crc_valid"]]
INVALID = [e["path"] for e in MANIFEST if not e["crc_valid"]]

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
PIN = "pinterest-tiered-storage"
TIMEINDEX_TEST = f"{PIN}/ts-common/src/test/resources/log-files/timeindex_test"
CONSUMER_DIR = f"{PIN}/ts-consumer/src/test/resources/log-files"
UPLOADER_DIR = f"{PIN}/ts-segment-uploader/src/test/resources/log_segments"
KAFKALITE = "kafkalite/tests/test-data"
KPY = "kafka-python/derived"
RUST = "kafka-rust"
CONTROL_BIN = f"{KPY}/control_batch_data_v2.bin"
RUST_BAD = (f"{RUST}/derived/"
            "fetch2.mytopic.nocompression.invalid_crc.kafka.0900.my-topic-0.messageset.log")
RUST_GOOD = f"{RUST}/derived/fetch2.mytopic.nocompression.kafka.0900.my-topic-0.messageset.log"

IDX_DTYPE = np.dtype([("rel", ">i4"), ("pos", ">i4")])     # .index: relative offset, position
TIX_DTYPE = np.dtype([("ts", ">i8"), ("rel", ">i4")])      # .timeindex: timestamp, relative offset


# ------------------------------------------------------------------------------- helpers

@functools.lru_cache(maxsize=None)
def data(rel: str) -> bytes:
    return (FIXTURES / rel).read_bytes()


@functools.lru_cache(maxsize=None)
def table(rel: str) -> pa.Table:
    return decode_batches(data(rel))


@functools.lru_cache(maxsize=None)
def shallow(rel: str, verify: bool = True) -> tuple:
    return tuple(LogInputStream(data(rel), verify=verify))


def ints(col) -> np.ndarray:
    """An int64 numpy view of an offset or timestamp column (timestamps as epoch ms)."""
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.int64())
    return col.to_numpy()


def header_pairs(hs) -> list[tuple[str, bytes | None]]:
    return [(h["key"], h["value"]) for h in hs]


def rel_id(rel: str) -> str:
    """A short test id: the fixture set plus the file name."""
    parts = rel.split("/")
    return f"{parts[0]}:{'/'.join(parts[-2:])}"


def batch_codec(info) -> str:
    return CODEC_NAMES[info.compression]


def batch_is_log_append_time(info) -> bool:
    if info.header is not None:
        return info.header.timestamp_type == 1
    return info.magic == 1 and info.entry.timestamp_type == 1


def stored_crc_matches(buf: bytes, pos: int, size: int) -> bool:
    """Independent of the library: v2 = CRC-32C over [21, end) stored at 17; v0/v1 = CRC-32
    (IEEE) over [16, end) stored at 12."""
    magic = buf[pos + 16]
    if magic == 2:
        return struct.unpack_from(">I", buf, pos + 17)[0] == crc32c.crc32c(buf[pos + 21:pos + size])
    return struct.unpack_from(">I", buf, pos + 12)[0] == zlib.crc32(buf[pos + 16:pos + size])


# ------------------------------------------------------------------------------- the manifest


def test_manifest_lists_every_log_and_bin_file_with_its_size_and_sha256():
    on_disk = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*")
                     if p.suffix in (".log", ".bin") and p.is_file())
    assert on_disk == sorted(BY_PATH)
    for e in MANIFEST:
        buf = data(e["path"])
        assert len(buf) == e["bytes"], e["path"]
        assert hashlib.sha256(buf).hexdigest() == e["sha256"], e["path"]
    # What PROVENANCE.md says the manifest shows: exactly two negative vectors.
    assert sorted(INVALID) == sorted([CONTROL_BIN, RUST_BAD])


@pytest.mark.parametrize("rel", VALID, ids=rel_id)
def test_decode_matches_manifest_summary(rel):
    e = BY_PATH[rel]
    buf = data(rel)
    run = decode_run(buf)
    t = run.table
    assert t.schema == SCHEMA
    offsets = ints(t["offset"])
    ts = ints(t["timestamp"])
    tst = t["timestampType"].to_numpy()

    assert t.num_rows == e["records"]
    # first/last offset are in FILE order (kafka-python's v2 vector ends at offset 0 again).
    assert int(offsets[0]) == e["first_offset"]
    assert int(offsets[-1]) == e["last_offset"]
    # The manifest ignores "no timestamp" (magic 0 -> None): those rows have type -1 and ts -1.
    real = tst != -1
    assert (ts[~real] == -1).all()
    assert (ts[real] >= 0).all()
    assert (int(ts[real].min()) if real.any() else None) == e["min_ts"]
    assert (int(ts[real].max()) if real.any() else None) == e["max_ts"]
    assert t["key"].null_count == e["null_keys"]
    assert t["value"].null_count == e["null_values"]
    with_headers = pc.sum(pc.greater(pc.list_value_length(t["headers"]), 0)).as_py() or 0
    assert with_headers == e["records_with_headers"]

    # The shallow walk: batch count, magic mix, codec mix, flags.
    infos = shallow(rel)
    assert len(infos) == e["batches"] == run.batches
    assert dict(collections.Counter(str(i.magic) for i in infos)) == e["magic"]
    assert dict(collections.Counter(batch_codec(i) for i in infos)) == e["codecs"]
    control = [i for i in infos if i.header is not None and i.header.is_control]
    assert len(control) == e["control_batches"]
    assert t["isControl"].to_numpy().sum() == sum(i.header.records_count for i in control)
    txn = [i for i in infos if i.header is not None and i.header.is_transactional]
    assert len(txn) == e["transactional_batches"]
    assert t["isTransactional"].to_numpy().sum() == sum(i.header.records_count for i in txn)
    assert sum(batch_is_log_append_time(i) for i in infos) == e["log_append_time_batches"]
    assert ((tst == 1).sum() > 0) == (e["log_append_time_batches"] > 0)
    # v1/v2 rows carry a timestamp type (0/1); magic-0 rows none (-1), hence min_ts None.
    if e["magic"] == {"0": e["batches"]}:
        assert (tst == -1).all() and e["min_ts"] is None
    elif "0" not in e["magic"]:
        assert (tst >= 0).all()

    # Trailing bytes: the walk consumed everything but the manifest's trailing count.
    assert run.next_position == len(buf) - e["trailing_bytes"]
    assert run.partial == (e["trailing_bytes"] > 0)
    assert sum(i.size for i in infos) == run.next_position
    positions = [i.position for i in infos]
    assert positions == sorted(positions) and positions[0] == 0
    assert all(stored_crc_matches(buf, i.position, i.size) for i in infos)


@pytest.mark.parametrize("rel", INVALID, ids=rel_id)
def test_crc_invalid_file_raises_corrupt_record_error_naming_the_position(rel):
    buf = data(rel)
    # the batch whose CRC fails, found by a non-verifying walk and an independent CRC check
    bad_positions = [info.position for info in LogInputStream(buf, verify=False)
                     if not stored_crc_matches(buf, info.position, info.size)]
    assert bad_positions, "manifest says the CRC is invalid but every batch verifies"
    with pytest.raises(CorruptRecordError) as ei:
        decode_batches(buf, source=rel)
    err = ei.value
    assert err.position == bad_positions[0]
    assert err.source == rel
    assert "crc" in err.reason.lower()
    assert f"position {bad_positions[0]}" in str(err)
    # positions are absolute in the buffer when decoding starts further in
    padded = b"\xee" * 9 + buf
    with pytest.raises(CorruptRecordError) as ei3:
        decode_batches(memoryview(padded), start=9, source=rel)
    assert ei3.value.position == 9 + bad_positions[0]
    # every other entry point that verifies refuses it too
    with pytest.raises(CorruptRecordError) as ei2:
        list(iter_records(buf))
    assert ei2.value.position == bad_positions[0]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf, verify=True))

    e = BY_PATH[rel]
    if e["batches"]:
        # The checker read past the bad CRC: without verification the counts are the manifest's.
        t = decode_batches(buf, verify_crc=False)
        infos = list(LogInputStream(buf, verify=False))
        assert t.num_rows == e["records"]
        assert len(infos) == e["batches"]
        assert dict(collections.Counter(str(i.magic) for i in infos)) == e["magic"]
        assert dict(collections.Counter(batch_codec(i) for i in infos)) == e["codecs"]
        assert sum(1 for i in infos if i.header is not None and i.header.is_control) == \
            e["control_batches"]
        assert int(ints(t["offset"])[0]) == e["first_offset"]
        assert int(ints(t["offset"])[-1]) == e["last_offset"]
        assert int(ints(t["timestamp"]).min()) == e["min_ts"]
        assert int(ints(t["timestamp"]).max()) == e["max_ts"]
        assert t["key"].null_count == e["null_keys"]
        assert t["value"].null_count == e["null_values"]
    else:
        # The checker stopped at the bad CRC (nothing counted, trailing unknown).
        assert e["records"] == 0 and e["trailing_bytes"] is None and e["first_offset"] is None


# ------------------------------------------------------------------------------- deep iterator


@pytest.mark.parametrize("rel", VALID, ids=rel_id)
def test_iter_records_agrees_with_decode_batches(rel):
    buf = data(rel)
    t = table(rel)
    pairs = list(iter_records(buf))
    assert len(pairs) == t.num_rows
    recs = [r for _, r in pairs]
    assert [r.offset for r in recs] == ints(t["offset"]).tolist()
    assert [r.timestamp for r in recs] == ints(t["timestamp"]).tolist()
    assert [r.timestamp_type for r in recs] == t["timestampType"].to_pylist()
    assert [r.key for r in recs] == t["key"].to_pylist()
    assert [r.value for r in recs] == t["value"].to_pylist()
    assert [[(h.key, h.value) for h in r.headers] for r in recs] == \
        [header_pairs(hs) for hs in t["headers"].to_pylist()]
    assert [info.header is not None and info.header.is_control for info, _ in pairs] == \
        t["isControl"].to_pylist()
    assert [info.header.producer_id if info.header is not None else -1 for info, _ in pairs] == \
        t["producerId"].to_pylist()

    # Per batch: the records lie inside the batch's offset range, the last one IS the batch's
    # last offset (no compaction here: a legacy wrapper's offset is its last inner offset), and a
    # CreateTime v2 batch's maxTimestamp is its largest record timestamp.
    by_batch: dict[int, list] = collections.defaultdict(list)
    infos = {}
    for info, r in pairs:
        by_batch[info.position].append(r)
        infos[info.position] = info
    assert list(infos.values()) == list(shallow(rel))
    for pos, rs in by_batch.items():
        info = infos[pos]
        offs = [r.offset for r in rs]
        assert offs == sorted(offs) and len(set(offs)) == len(offs)
        assert offs[-1] == info.last_offset
        if info.header is not None:
            assert info.header.records_count == len(rs)
            assert offs[0] == info.base_offset
            if info.header.timestamp_type == 0:
                assert max(r.timestamp for r in rs) == info.header.max_timestamp
        elif info.compression:
            assert info.entry.key is None
            if info.magic == 1 and info.entry.timestamp_type == 0:
                # v1 wrapper timestamp = max inner timestamp (CreateTime)
                assert max(r.timestamp for r in rs) == info.entry.timestamp
        else:
            assert len(rs) == 1 and offs[0] == info.entry.offset


# ------------------------------------------------------------------------------- buffer kinds


@pytest.mark.parametrize("rel", sorted(BY_PATH), ids=rel_id)
def test_bytes_bytearray_memoryview_and_mmap_decode_identically(rel):
    buf = data(rel)
    path = FIXTURES / rel
    if not BY_PATH[rel]["crc_valid"]:
        kinds = [buf, bytearray(buf), memoryview(buf)]
        reasons = []
        for b in kinds:
            with pytest.raises(CorruptRecordError) as ei:
                decode_batches(b)
            reasons.append((ei.value.reason, ei.value.position))
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            with pytest.raises(CorruptRecordError) as ei:
                decode_batches(mm)
            reasons.append((ei.value.reason, ei.value.position))
        assert len(set(reasons)) == 1
        ref = decode_batches(buf, verify_crc=False)
        assert decode_batches(memoryview(buf), verify_crc=False).equals(ref)
        return
    ref = table(rel)
    assert decode_batches(bytearray(buf)).equals(ref)
    assert decode_batches(memoryview(buf)).equals(ref)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    got = decode_batches(mm)
    assert got.equals(ref)
    try:
        mm.close()
    except BufferError:
        # the table still references the map (zero-copy): it must be released with the table
        del got
        gc.collect()
        mm.close()
    else:
        # the result owns its memory: still intact after the map is gone
        assert got.equals(ref)


@pytest.mark.parametrize("rel", VALID, ids=rel_id)
def test_a_torn_last_batch_is_left_out_as_partial(rel):
    """A file cut one byte short (a segment being appended to) decodes to every complete batch;
    the torn one is reported as partial, not as corruption (kafka_format.md §7 step 4)."""
    buf = data(rel)
    ref = table(rel)
    infos = shallow(rel)
    last = infos[-1]
    kept = ref.num_rows - len(batch_records(buf, last))
    run = decode_run(memoryview(buf)[:-1])
    assert run.partial and run.next_position == last.position
    assert run.batches == len(infos) - 1
    assert run.table.equals(ref.slice(0, kept))
    # and decoding the rest from the torn batch's position gives exactly the missing rows
    rest = decode_run(buf, start=last.position)
    assert not rest.partial and rest.next_position == len(buf)
    assert rest.table.equals(ref.slice(kept))


# ------------------------------------------------------------------------------- exact contents

KGO = json.loads((FIXTURES / "kafka-go/derived/manifest.json").read_text())
KGO_KEYS = dict(zip("abcdefgh", ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta",
                                 "theta"]))


@pytest.mark.parametrize("name", sorted(KGO))
def test_kafka_go_record_sets_have_the_expected_offsets_keys_and_values(name):
    exp = KGO[name]
    rel = f"kafka-go/derived/{name}.recordset.log"
    buf = data(rel)
    assert len(buf) == exp["recordset_bytes"]
    assert exp["ok"] and exp["expected"] == exp["decoded"]
    t = table(rel)
    assert ints(t["offset"]).tolist() == exp["offsets"]
    assert exp["high_watermark"] == exp["offsets"][-1] + 1
    letters = exp["expected"]
    assert t["key"].to_pylist() == [KGO_KEYS[c].encode() for c in letters]
    assert t["value"].to_pylist() == [
        json.dumps({"count": 0, "filler": c * 10}, separators=(",", ":")).encode()
        for c in letters]
    assert t["headers"].to_pylist() == [[]] * len(letters)
    assert (t["timestampType"].to_numpy() == 0).all()
    assert decode_run(buf).next_position == len(buf) - exp["trailing"]
    # the name spells the batch layout: v1/v2 = magic, c = gzip, b = several records
    tokens = name.split("-")
    infos = shallow(rel)
    # a "b" batch of magic 1 is several uncompressed messages = several shallow entries
    assert {int(tok[1]) for tok in tokens} == {i.magic for i in infos}
    assert any("c" in tok for tok in tokens) == any(i.compression == 1 for i in infos)


def test_kafka_go_record_sets_are_cut_from_the_fetch_response_captures():
    for name in KGO:
        raw = bytes.fromhex((FIXTURES / f"kafka-go/fixtures/{name}.hex").read_text())
        rs = data(f"kafka-go/derived/{name}.recordset.log")
        at = raw.find(rs)
        assert at >= 4, name
        # the RECORDS field is a length-prefixed byte array in FetchResponse v10
        assert struct.unpack_from(">i", raw, at - 4)[0] == len(rs), name
        assert raw.count(rs) == 1


KPY_MANIFEST = json.loads((FIXTURES / KPY / "manifest.json").read_text())


def _kpy_flags(info) -> str:
    if info.header is None:
        return ""
    return (("C" if info.header.is_control else "") + ("T" if info.header.is_transactional else "")
            + ("L" if info.header.timestamp_type == 1 else ""))


@pytest.mark.parametrize("name", sorted(KPY_MANIFEST))
def test_kafka_python_vectors_decode_to_their_manifest(name):
    exp = KPY_MANIFEST[name]
    rel = f"{KPY}/{exp['file']}"
    buf = data(rel)
    assert len(buf) == exp["bytes"]
    assert BY_PATH[rel]["crc_valid"] == exp["crc_valid"]
    infos = list(LogInputStream(buf, verify=False))
    assert [dict(pos=i.position, base=i.base_offset, last=i.last_offset, magic=i.magic,
                 codec=batch_codec(i), flags=_kpy_flags(i),
                 count=i.header.records_count if i.header is not None else 1)
            for i in infos] == exp["batches"]
    if exp["crc_valid"]:
        t = decode_batches(buf)
    else:
        with pytest.raises(CorruptRecordError):
            decode_batches(buf)
        t = decode_batches(buf, verify_crc=False)
    control = t["isControl"].to_pylist()
    got = []
    for row, is_control in zip(t.to_pylist(), control):
        ts = int(row["timestamp"].timestamp() * 1000)
        got.append(dict(
            offset=row["offset"],
            timestamp=None if row["timestampType"] == -1 else ts,
            # the manifest writes the (binary) control key as hex, data keys/values as text
            key=None if row["key"] is None else (row["key"].hex() if is_control
                                                 else row["key"].decode()),
            value=None if row["value"] is None else row["value"].decode(),
            headers=[[h["key"], h["value"].decode()] for h in row["headers"]]))
    assert got == exp["records"]
    assert decode_run(buf, verify_crc=False).next_position == len(buf) - exp["trailing"]


def test_kafka_python_v2_vector_restarting_at_offset_zero_decodes_as_is():
    """The 4th batch was captured separately and starts at offset 0 again: the decoder does
    not enforce monotonic offsets, it reports them."""
    rel = f"{KPY}/record_batch_data_v2.bin"
    t = table(rel)
    assert ints(t["offset"]).tolist() == [0, 1, 2, 3, 0]
    assert [i.base_offset for i in shallow(rel)] == [0, 1, 3, 0]
    assert t["value"].to_pylist() == [b"123", b"", b"", b"123", b"hdr"]
    assert t["key"].to_pylist() == [None] * 5
    assert [header_pairs(h) for h in t["headers"].to_pylist()] == \
        [[], [], [], [], [("hkey", b"hval")]]
    assert [r.offset for _, r in iter_records(data(rel))] == [0, 1, 2, 3, 0]


def test_kafka_python_control_batch_bad_crc_and_verify_crc_false():
    buf = data(CONTROL_BIN)
    with pytest.raises(CorruptRecordError) as ei:
        decode_batches(buf)
    assert ei.value.position == 0
    with pytest.raises(CorruptRecordError):
        list(iter_records(buf))
    (info,) = LogInputStream(buf, verify=False)
    assert info.header.attributes == 0x20
    assert info.header.is_control and not info.header.is_transactional

    t = decode_batches(buf, verify_crc=False)
    assert t.num_rows == 1
    row = t.to_pylist()[0]
    assert row["isControl"] is True
    assert row["isTransactional"] is False
    assert row["offset"] == 0
    assert int(row["timestamp"].timestamp() * 1000) == 9999999
    assert row["key"] == b"\x00\x00\x00\x00"                    # version 0, type 0
    assert ControlRecordType.parse(row["key"]) is ControlRecordType.ABORT
    assert row["value"] == b"opaque-control-message"
    assert row["headers"] == []


def _fetch_lines(name: str) -> list[bytes]:
    text = (FIXTURES / RUST / "test-data" / name).read_bytes()
    assert text.endswith(b"\n")
    return text[:-1].split(b"\n")


RUST_LOGS = sorted(p for p in BY_PATH if p.startswith(f"{RUST}/derived/"))


@pytest.mark.parametrize("rel", [p for p in RUST_LOGS if p != RUST_BAD], ids=rel_id)
def test_kafka_rust_values_are_the_lines_of_the_input_text(rel):
    name = rel.split("/")[-1]
    lines = _fetch_lines("fetch1.txt" if name.startswith("fetch1") else "fetch2.txt")
    t = table(rel)
    assert t["value"].to_pylist() == lines
    assert ints(t["offset"]).tolist() == list(range(len(lines)))
    assert t["key"].to_pylist() == [None] * len(lines)
    assert (t["timestampType"].to_numpy() == -1).all()
    assert (ints(t["timestamp"]) == -1).all()
    assert {i.magic for i in shallow(rel)} == {0}


def _fetch_v0_message_set(body: bytes) -> tuple[str, int, int, bytes]:
    """(topic, partition, high watermark, message set) of a one-partition FetchResponse v0 body
    (without its 4-byte size)."""
    _correlation, ntopics = struct.unpack_from(">ii", body, 0)
    assert ntopics == 1
    (tlen,) = struct.unpack_from(">h", body, 8)
    topic = body[10:10 + tlen].decode()
    p = 10 + tlen
    nparts, partition, error, hw, size = struct.unpack_from(">iihqi", body, p)
    assert nparts == 1 and error == 0
    p += 22
    assert p + size == len(body)
    return topic, partition, hw, body[p:p + size]


@pytest.mark.parametrize("rel", RUST_LOGS, ids=rel_id)
def test_kafka_rust_message_sets_are_cut_from_the_fetch_responses(rel):
    raw_name = rel.split("/")[-1].removesuffix(".my-topic-0.messageset.log")
    topic, partition, hw, ms = _fetch_v0_message_set(
        (FIXTURES / RUST / "test-data" / raw_name).read_bytes())
    assert (topic, partition) == ("my-topic", 0)
    assert ms == data(rel)
    assert hw == (42 if raw_name.startswith("fetch1") else 1)


def test_kafka_rust_invalid_crc_differs_only_in_the_crc_and_decodes_without_verification():
    bad, good = data(RUST_BAD), data(RUST_GOOD)
    assert len(bad) == len(good)
    assert [i for i in range(len(bad)) if bad[i] != good[i]] == [12, 13, 14, 15]  # the CRC field
    with pytest.raises(CorruptRecordError) as ei:
        decode_batches(bad)
    assert ei.value.position == 0 and ei.value.offset == 0
    assert decode_batches(bad, verify_crc=False).equals(table(RUST_GOOD))


def test_kafka_rust_xerial_chunked_snappy_stream_is_fetch1():
    raw = (FIXTURES / RUST / "test-data/fetch1.snappy.chunked.4k").read_bytes()
    text = (FIXTURES / RUST / "test-data/fetch1.txt").read_bytes()
    assert raw.startswith(b"\x82SNAPPY\x00")
    for magic in (0, 1, 2):
        assert decompress(CompressionType.SNAPPY, raw, magic=magic, max_size=1 << 20) == text


GOLDEN_LINE = re.compile(r"(\d+): (\".*\")")
KAFKALITE_TOPICS = ["hamlet-none-0", "hamlet-gzip-0", "hamlet-snappy-0", "numbers-0"]


def _golden(topic: str) -> tuple[list[int], list[bytes]]:
    offs, vals = [], []
    for line in (FIXTURES / KAFKALITE / "golden" / topic).read_text().splitlines():
        m = GOLDEN_LINE.fullmatch(line)
        assert m, line
        offs.append(int(m.group(1)))
        vals.append(json.loads(m.group(2)).encode())
    return offs, vals


@pytest.mark.parametrize("topic", KAFKALITE_TOPICS)
def test_kafkalite_logs_decode_to_the_golden_output(topic):
    rel = f"{KAFKALITE}/fs-data/{topic}/00000000000000000000.log"
    offs, vals = _golden(topic)
    t = table(rel)
    assert ints(t["offset"]).tolist() == offs
    assert t["value"].to_pylist() == vals
    assert t["key"].null_count == t.num_rows
    assert (ints(t["timestamp"]) == -1).all()
    infos = shallow(rel)
    codec = topic.split("-")[1] if topic.startswith("hamlet") else "none"
    assert {batch_codec(i) for i in infos} == {codec}
    if codec != "none":
        # 22 compressed wrappers of the same 5,382 values
        assert len(infos) == 22


def test_kafkalite_hamlet_is_the_same_text_in_every_codec():
    tables = [table(f"{KAFKALITE}/fs-data/{t}/00000000000000000000.log")
              for t in KAFKALITE_TOPICS[:3]]
    for t in tables[1:]:
        cols = ["offset", "key", "value"]
        assert t.select(cols).equals(tables[0].select(cols))


def test_kafkalite_numbers_values_follow_the_golden_pattern():
    """PROVENANCE says value = str(offset); the golden file (and the log) say so only for offsets
    0..691: offset 692 holds "0" and from 693 on value = str(offset - 1)."""
    t = table(f"{KAFKALITE}/fs-data/numbers-0/00000000000000000000.log")
    vals = t["value"].to_pylist()
    assert vals[:692] == [str(o).encode() for o in range(692)]
    assert vals[692] == b"0"
    assert vals[693:] == [str(o - 1).encode() for o in range(693, t.num_rows)]


def _pin_logs(prefix: str) -> list[str]:
    return sorted(p for p in BY_PATH if p.startswith(prefix) and p.endswith(".log"))


def _assert_header_rule(t: pa.Table, expected_first: list[tuple[str, bytes]]):
    """Every record carries the same headers as the first one, which are ``expected_first``."""
    hs = t["headers"].combine_chunks()
    first = header_pairs(hs[0].as_py())
    assert first == expected_first
    flat = pc.list_flatten(hs)
    assert pc.list_value_length(hs).to_numpy().tolist() == [len(first)] * t.num_rows
    n = t.num_rows
    assert flat.field("key").to_pylist() == [k for k, _ in first] * n
    assert flat.field("value").to_pylist() == [v for _, v in first] * n


def _assert_key_value_from_offset(t: pa.Table, value_prefix: bytes):
    offs = ints(t["offset"]).tolist()
    assert t["key"].to_pylist() == [str(o).encode() for o in offs]
    assert t["value"].to_pylist() == [value_prefix + str(o).encode() for o in offs]


@pytest.mark.parametrize("rel", _pin_logs(TIMEINDEX_TEST), ids=rel_id)
def test_pinterest_timeindex_test_contents(rel):
    t = table(rel)
    _assert_key_value_from_offset(t, b"kafkaVal-")
    _assert_header_rule(t, [("header1", b"kafkaHeader1-val"), ("header2", b"kafkaHeader2-val")])
    ts = ints(t["timestamp"])
    assert (np.diff(ts) >= 0).all()                                  # CreateTime, rising
    assert 1753819116820 <= ts.min() and ts.max() <= 1753819281929
    assert (t["timestampType"].to_numpy() == 0).all()
    infos = shallow(rel)
    assert all(i.header.records_count == 1 for i in infos)           # one record per batch
    assert set(t["producerId"].to_pylist()) == {0}                   # an idempotent producer


def test_pinterest_timeindex_test_totals():
    ts = np.concatenate([ints(table(r)["timestamp"]) for r in _pin_logs(TIMEINDEX_TEST)])
    offs = np.concatenate([ints(table(r)["offset"]) for r in _pin_logs(TIMEINDEX_TEST)])
    assert offs.tolist() == list(range(30565))
    assert (ts.min(), ts.max()) == (1753819116820, 1753819281929)


@pytest.mark.parametrize(
    "rel", _pin_logs(CONSUMER_DIR) + _pin_logs(f"{UPLOADER_DIR}/test_topic_b-0"), ids=rel_id)
def test_pinterest_val_offset_contents(rel):
    t = table(rel)
    _assert_key_value_from_offset(t, b"val-")
    _assert_header_rule(t, [("header1", b"header1-val"), ("header2", b"header2-val")])
    assert (t["timestampType"].to_numpy() == 0).all()


def test_pinterest_consumer_totals():
    rels = _pin_logs(CONSUMER_DIR)
    assert len(rels) == 113
    assert sum(table(r).num_rows for r in rels) == 31263
    # PROVENANCE says "up to 282 records/batch"; test_topic_a-0/00000000000000000000.log has a
    # 283-record batch (offsets 79..361; count field and lastOffsetDelta agree).
    biggest = max((i.header.records_count, r, i.base_offset) for r in rels for i in shallow(r))
    assert biggest == (283, f"{CONSUMER_DIR}/test_topic_a-0/00000000000000000000.log", 79)
    b = table(_pin_logs(f"{UPLOADER_DIR}/test_topic_b-0")[0])
    assert (b.num_rows, len(shallow(_pin_logs(f"{UPLOADER_DIR}/test_topic_b-0")[0]))) == (4369, 18)
    assert ints(b["offset"])[0] == 1613280


@pytest.mark.parametrize("rel", _pin_logs(f"{UPLOADER_DIR}/test_topic_a-0"), ids=rel_id)
def test_pinterest_uploader_contents(rel):
    """Not described by PROVENANCE: key = b"key<N>", value = b"value<N>" with the same N, a
    producer clock reading taken shortly before the record's CreateTime; no headers."""
    t = table(rel)
    keys, vals = t["key"].to_pylist(), t["value"].to_pylist()
    ns = []
    for k, v in zip(keys, vals):
        m = re.fullmatch(rb"key(\d+)", k)
        assert m, k
        assert v == b"value" + m.group(1)
        ns.append(int(m.group(1)))
    lag = ints(t["timestamp"]) - np.array(ns, np.int64)
    assert ((lag >= 0) & (lag < 1000)).all()
    assert t["headers"].to_pylist() == [[]] * t.num_rows
    assert all(i.header.records_count == 1 for i in shallow(rel))


def test_pinterest_uploader_totals():
    rels = _pin_logs(f"{UPLOADER_DIR}/test_topic_a-0")
    assert len(rels) == 31
    assert sum(table(r).num_rows for r in rels) == 9100


# ------------------------------------------------------------------------------- segment dirs

SEGMENT_DIRS = sorted({str(Path(p).parent) for p in BY_PATH
                       if re.fullmatch(r"\d{20}\.log", Path(p).name)})


def _segments(d: str) -> list[tuple[int, str]]:
    logs = sorted((FIXTURES / d).glob("*.log"))
    return [(int(p.stem), str(p.relative_to(FIXTURES))) for p in logs]


def test_segment_dirs_found():
    assert len(SEGMENT_DIRS) == 10
    assert sum(len(_segments(d)) for d in SEGMENT_DIRS) == 4 + 113 + 31 + 1 + 4


@pytest.mark.parametrize("d", SEGMENT_DIRS, ids=lambda d: "/".join(d.split("/")[-2:]))
def test_segment_files_start_at_their_base_offset_and_are_contiguous(d):
    segs = _segments(d)
    for name in (FIXTURES / d).iterdir():
        if name.suffix in (".log", ".index", ".timeindex", ".snapshot"):
            assert re.fullmatch(r"\d{20}", name.stem), name
    prev_last = None
    gaps = []
    for base, rel in segs:
        offs = ints(table(rel)["offset"])
        assert len(offs) > 0
        assert offs[0] == base, rel
        assert (np.diff(offs) > 0).all(), rel                        # strictly increasing
        assert (np.diff(offs) == 1).all(), rel                       # no gaps inside a segment
        if prev_last is not None:
            assert base > prev_last, rel
            if base != prev_last + 1:
                gaps.append((prev_last, base))
        prev_last = int(offs[-1])
    assert gaps == [], f"offset gaps between segments: {gaps}"


INDEXED = [(base, rel) for d in SEGMENT_DIRS for base, rel in _segments(d)
           if (FIXTURES / rel).with_suffix(".index").exists()]


def _read_index(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    assert len(raw) % 8 == 0, path
    return np.frombuffer(raw, IDX_DTYPE)


def _read_timeindex(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    assert len(raw) % 12 == 0, path
    return np.frombuffer(raw, TIX_DTYPE)


def _rebuilt_index(infos, interval: int) -> list[tuple[int, int]]:
    """LogSegment.recover's offset index (kafka_format.md §11.2), one batch per append."""
    out, valid, last = [], 0, 0
    for i in infos:
        if valid - last > interval:
            out.append((i.last_offset, valid))
            last = valid
        valid += i.size
    return out


@pytest.mark.parametrize("base,rel", INDEXED, ids=[rel_id(r) for _, r in INDEXED])
def test_offset_index_entries_point_at_batches_holding_their_offset(base, rel):
    e = BY_PATH[rel]
    idx = _read_index((FIXTURES / rel).with_suffix(".index"))
    assert len(idx) == e["index_entries"]
    assert e["index_mismatches"] == 0
    if len(idx) == 0:
        return
    infos = shallow(rel)
    at = {i.position: k for k, i in enumerate(infos)}
    rel_off = idx["rel"].astype(np.int64)
    pos = idx["pos"].astype(np.int64)
    assert (rel_off >= 0).all() and (rel_off <= 2**31 - 1).all()
    assert (np.diff(rel_off) > 0).all()           # offsets strictly increase (append rule)
    assert (np.diff(pos) > 0).all()
    assert (pos > 0).all()                        # the first append into a segment is never indexed
    last_offsets = [i.last_offset for i in infos]
    for r, p in zip(rel_off.tolist(), pos.tolist()):
        target = base + r
        assert p in at, f"{rel}: index entry ({target}, {p}) is not at a batch start"
        k = at[p]
        # §8: (O, P) = the append starting at P ends with offset O, so the batch at P starts at
        # or before O and some batch from P on ends exactly at O.
        assert infos[k].base_offset <= target
        assert target in last_offsets[k:]
        # and here (leader appends of one batch each) it is the batch at P itself
        assert infos[k].last_offset == target
    # lookup(O) then scanning forward finds the batch holding O at the entry's position
    for r, p in zip(rel_off.tolist(), pos.tolist()):
        k = next(k for k, i in enumerate(infos) if i.last_offset >= base + r)
        assert infos[k].position == p


def test_decoding_from_an_index_position_yields_the_log_suffix():
    """What a fetch does: look the offset up in the index, decode from that position."""
    for base, rel in _segments(TIMEINDEX_TEST):
        idx = _read_index((FIXTURES / rel).with_suffix(".index"))
        ref = table(rel)
        offs = ints(ref["offset"])
        for r, p in [tuple(idx[0]), tuple(idx[len(idx) // 2]), tuple(idx[-1])]:
            got = decode_batches(data(rel), start=int(p))
            k = int(np.searchsorted(offs, base + int(r)))
            assert got.equals(ref.slice(k)), (rel, r, p)


@pytest.mark.parametrize("d", [TIMEINDEX_TEST, f"{UPLOADER_DIR}/test_topic_a-0"],
                         ids=["timeindex_test", "uploader_a-0"])
def test_offset_index_is_what_index_interval_4096_produces(d):
    """PROVENANCE: index.interval.bytes = 4096 (timeindex_test); the uploader's partition matches
    the same rule: an entry whenever more than 4096 bytes were appended since the last one."""
    for base, rel in _segments(d):
        idx = _read_index((FIXTURES / rel).with_suffix(".index"))
        got = [(base + int(r), int(p)) for r, p in zip(idx["rel"], idx["pos"])]
        assert got == _rebuilt_index(shallow(rel), 4096), rel


def test_standalone_consumer_index_is_the_uploader_segment_index():
    standalone = (FIXTURES / PIN / "ts-consumer/src/test/resources/00000000000000000000.index")
    uploader = FIXTURES / UPLOADER_DIR / "test_topic_a-0/00000000000000000000.index"
    assert standalone.read_bytes() == uploader.read_bytes()


TIMEINDEXED = [(base, rel) for base, rel in INDEXED
               if (FIXTURES / rel).with_suffix(".timeindex").exists()]


@pytest.mark.parametrize("base,rel", TIMEINDEXED, ids=[rel_id(r) for _, r in TIMEINDEXED])
def test_time_index_entries_match_the_log(base, rel):
    """§9: entry (T, O): T is the largest timestamp in the segment up to O, carried by the
    record at O (Kafka <= 3.7 leader path) or by the batch whose last offset is O (3.8+);
    timestamps strictly increase; the roll/close entry is the segment's max timestamp."""
    e = BY_PATH[rel]
    tix = _read_timeindex((FIXTURES / rel).with_suffix(".timeindex"))
    assert len(tix) == e["timeindex_entries"]
    assert e["timeindex_monotonic"] is True
    assert len(tix) > 0
    t = table(rel)
    offs, ts = ints(t["offset"]), ints(t["timestamp"])
    tt = tix["ts"].astype(np.int64)
    to = base + tix["rel"].astype(np.int64)
    assert (np.diff(tt) > 0).all()
    assert (np.diff(to) >= 0).all()
    assert (to >= base).all() and (to <= offs[-1]).all()
    running_max = np.maximum.accumulate(ts)
    batch_max = {i.last_offset: i.max_timestamp for i in shallow(rel)}
    for t_ms, off in zip(tt.tolist(), to.tolist()):
        k = int(np.searchsorted(offs, off))
        assert offs[k] == off, f"{rel}: time index offset {off} is not in the log"
        assert running_max[k] == t_ms, \
            f"{rel}: ({t_ms}, {off}) but the max timestamp up to {off} is {running_max[k]}"
        assert ts[k] == t_ms or batch_max.get(off) == t_ms
    assert tt[-1] == ts.max()


def test_time_index_offset_kinds_per_data_set():
    """Which kind of offset the time index stores (§9 version note): timeindex_test and the
    uploader store the batch's last offset; ts-consumer stores record offsets (<= 3.7 leader)."""
    def kinds(prefix):
        out = collections.Counter()
        for base, rel in TIMEINDEXED:
            if not rel.startswith(prefix):
                continue
            lasts = {i.last_offset for i in shallow(rel)}
            tix = _read_timeindex((FIXTURES / rel).with_suffix(".timeindex"))
            for r in tix["rel"].tolist():
                out["batch_last" if base + r in lasts else "record"] += 1
        return set(out)
    assert kinds(TIMEINDEX_TEST) == {"batch_last"}
    assert kinds(f"{UPLOADER_DIR}/test_topic_a-0") == {"batch_last"}
    assert kinds(CONSUMER_DIR) == {"record"}


def test_consumer_segments_with_empty_index_have_a_single_batch():
    """Most ts-consumer .index files are 0 bytes: one batch per segment is one append, and the
    first append into a segment is never indexed (§11.1)."""
    empty = 0
    for _base, rel in INDEXED:
        if not rel.startswith(CONSUMER_DIR):
            continue
        idx = _read_index((FIXTURES / rel).with_suffix(".index"))
        if len(idx) == 0:
            empty += 1
            assert len(shallow(rel)) == 1
    assert empty == 110


def test_orphan_index_files_of_test_topic_b_are_consistent():
    """test_topic_b-0 lacks the two oldest .log files; their index files must still be
    well-formed and stay below the next segment's base offset and first timestamp."""
    d = FIXTURES / UPLOADER_DIR / "test_topic_b-0"
    bases = sorted(int(p.stem) for p in d.glob("*.index")) + [1613280]
    assert bases == [0, 822706, 1613280]
    first_ts_next = int(ints(table(f"{UPLOADER_DIR}/test_topic_b-0/00000000000001613280.log")
                             ["timestamp"]).min())
    prev_ts = -1
    for base, nxt in zip(bases, bases[1:]):
        idx = _read_index(d / f"{base:020d}.index")
        tix = _read_timeindex(d / f"{base:020d}.timeindex")
        assert len(idx) and len(tix)
        for rel_off in (idx["rel"].astype(np.int64), tix["rel"].astype(np.int64)):
            assert (rel_off >= 0).all() and (base + rel_off < nxt).all()
        assert (np.diff(idx["rel"].astype(np.int64)) > 0).all()
        assert (np.diff(idx["pos"].astype(np.int64)) > 0).all() and (idx["pos"] > 0).all()
        tt = tix["ts"].astype(np.int64)
        assert (np.diff(tt) > 0).all() and (np.diff(tix["rel"].astype(np.int64)) >= 0).all()
        assert tt[0] > prev_ts
        prev_ts = int(tt[-1])
    assert prev_ts <= first_ts_next
    assert not (d / "00000000000001613280.index").exists()

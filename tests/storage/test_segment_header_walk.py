"""A segment's shallow walk (``LogSegment.batches``) steps over v2 batches by their headers, as
Kafka's ``FileLogInputStream`` does, and finds what the full walk finds: the same batches, the
same end of data, the same error at the same position, on real files. And it reads a header, not
the batch, to step over a batch longer than its window: finding an offset in a segment of 1 MiB
batches (the sink writes them) no longer reads the segment whole."""

from __future__ import annotations

import os
import struct
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from storage_core.config import LogConfig
from storage_core.errors import KafkaLogError
from storage_core.format import encode_batches, legacy
from storage_core.format.log_input_stream import BatchInfo
from storage_core.log import segment as segment_module
from storage_core.log.segment import LogSegment

MiB = 1 << 20


def _batch(base: int, n: int, value_size: int) -> bytes:
    rng = np.random.default_rng(base)
    values = [rng.bytes(value_size) for _ in range(n)]
    return bytes(encode_batches(pa.table({"value": pa.array(values, pa.binary())}), base_offset=base,
                                max_batch_bytes=4 * MiB))


def _segment(directory: Path, pieces: list[bytes], config: LogConfig | None = None) -> LogSegment:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "00000000000000000000.log").write_bytes(b"".join(pieces))
    return LogSegment.open(directory, 0, config or LogConfig(), writable=False)


def _mixed() -> list[bytes]:
    """Small, window-sized and larger-than-a-megabyte batches, interleaved."""
    sizes = [(1, 10), (3, 100_000), (1, 1_500_000), (50, 100), (1, 70_000), (2, 900_000),
             (1, 10), (1, 2_200_000), (5, 10)]
    out, base = [], 0
    for n, size in sizes:
        out.append(_batch(base, n, size))
        base += n
    return out


def _starts(pieces: list[bytes]) -> list[int]:
    return [int(x) for x in np.cumsum([0] + [len(p) for p in pieces[:-1]])]


def _collect(it) -> tuple[list, tuple[type, str] | None]:
    got = []
    try:
        for b in it:
            got.append(b)
    except KafkaLogError as e:
        return got, (type(e), str(e))
    return got, None


def _full_walk(seg: LogSegment, start: int):
    """The walk ``batches`` did before it stepped by headers: whole batches read, a megabyte
    at a time (and ``batches(verify=True)``'s walk today)."""
    for b, _, base in seg._walk(start):
        yield replace(b, position=b.position + base)


def _key(b: BatchInfo) -> tuple:
    # a legacy entry's own position is relative to the chunk the walk had read: not compared
    return (b.position, b.size, b.magic, b.header, b.entry and replace(b.entry, position=0))


def _same_as_full_walk(seg: LogSegment, start: int) -> tuple[list, tuple[type, str] | None]:
    (fast, fast_error), (slow, slow_error) = _collect(seg.batches(start)), _collect(_full_walk(seg, start))
    assert [_key(b) for b in fast] == [_key(b) for b in slow] and fast_error == slow_error
    return fast, fast_error


def test_header_walk_finds_what_the_full_walk_finds(tmp_path: Path) -> None:
    pieces = _mixed()
    seg = _segment(tmp_path / "t-0", pieces)
    try:
        for start in _starts(pieces):
            got, error = _same_as_full_walk(seg, start)
            assert error is None
            assert [b.position for b in got] == [s for s in _starts(pieces) if s >= start]
        total = sum(len(p) for p in pieces)
        assert [seg.translate_offset(o).position for o in range(0, 64, 7)] == [
            next(b.position for b in _full_walk(seg, 0) if b.last_offset >= o) for o in range(0, 64, 7)]
        assert seg.translate_offset(10_000) is None and seg.size == total
    finally:
        seg.close()


@pytest.mark.parametrize("cut", [1, 17, 60, 61, 4096, 1_000_000])
def test_a_partial_last_batch_ends_both_walks_alike(tmp_path: Path, cut: int) -> None:
    pieces = _mixed()
    data = b"".join(pieces)
    last = len(data) - len(pieces[-2]) - len(pieces[-1])      # the 2.2 MB batch, then a small one
    seg = _segment(tmp_path / "t-0", [data[:last + min(cut, len(pieces[-2]) - 1)]])
    try:
        got, error = _same_as_full_walk(seg, 0)
        assert error is None and got[-1].position + got[-1].size == last
    finally:
        seg.close()


def _with_length(batch: bytes, length: int) -> bytes:
    return batch[:8] + struct.pack(">i", length) + batch[12:]


@pytest.mark.parametrize("how", ["length below the minimum", "length past the limit", "magic 7",
                                 "length below a v2 header"])
def test_a_bad_header_raises_the_same_error_after_the_same_batches(tmp_path: Path, how: str) -> None:
    pieces = _mixed()
    bad = pieces[5]                                   # a 1.8 MB batch, after a window's worth
    if how == "length below the minimum":
        bad = _with_length(bad, 3)
    elif how == "length past the limit":
        bad = _with_length(bad, 200 * MiB)
    elif how == "magic 7":
        bad = bad[:16] + b"\x07" + bad[17:]
    else:
        bad = _with_length(bad, 40)
    pieces[5] = bad
    seg = _segment(tmp_path / "t-0", pieces)
    try:
        for start in _starts(pieces)[:6]:
            got, error = _same_as_full_walk(seg, start)
            assert error is not None and str(_starts(pieces)[5]) in error[1]
            assert "00000000000000000000.log" in error[1]
            assert len(got) == 5 - _starts(pieces).index(start)
    finally:
        seg.close()


def test_legacy_entries_after_v2_batches_are_walked_alike(tmp_path: Path) -> None:
    pieces = _mixed()
    old = [legacy.build_message(64 + i, b"v" * (i * 40_000), magic=i % 2) for i in range(4)]
    seg = _segment(tmp_path / "t-0", pieces + old)
    try:
        for start in _starts(pieces + old):
            got, error = _same_as_full_walk(seg, start)
            assert error is None and got[-1].last_offset == 67
    finally:
        seg.close()


class _CountingOs(types.SimpleNamespace):
    """The segment module's ``os`` with its positioned reads counted (instrumentation: the
    reads themselves are the real ones)."""

    def __init__(self) -> None:
        super().__init__()
        self.read = 0

    def __getattr__(self, name: str):
        return getattr(os, name)

    def pread(self, fd: int, n: int, pos: int) -> bytes:
        data = os.pread(fd, n, pos)
        self.read += len(data)
        return data


def test_stepping_over_big_batches_reads_their_headers_only(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pieces = [_batch(i * 1000, 1000, 1000) for i in range(8)]      # eight batches of 1 MB
    seg = _segment(tmp_path / "t-0", pieces)
    counting = _CountingOs()
    monkeypatch.setattr(segment_module, "os", counting)
    try:
        found = list(seg.batches(0))
        assert [b.last_offset for b in found] == [i * 1000 + 999 for i in range(8)]
        assert counting.read <= 8 * (64 << 10), counting.read     # a window per batch at most
        counting.read = 0
        # the segment has no offset index here: the lookup walks from the start
        hit = seg.translate_offset(7_500)
        assert hit is not None and hit.position == _starts(pieces)[7]
        assert counting.read <= 9 * (64 << 10), counting.read     # and the lookup's first window
    finally:
        seg.close()


def _timed_pieces() -> list[bytes]:
    """Batches whose record timestamps go back and forth, one with log-append time, one zstd,
    one of 1 MiB, then magic 1 entries: what a time lookup must get right."""
    rng = np.random.default_rng(7)

    def batch(base: int, n: int, size: int, **kw) -> bytes:
        ts = pa.array(1_000_000 + rng.integers(-500, 500, n) + base * 10, pa.int64()).cast(pa.timestamp("ms"))
        table = pa.table({"value": pa.array([rng.bytes(size) for _ in range(n)], pa.binary()), "timestamp": ts})
        return bytes(encode_batches(table, base_offset=base, max_batch_bytes=4 * MiB, **kw))

    out = [batch(0, 40, 50), batch(40, 30, 50, compression="zstd"), batch(70, 1000, 1000),
           batch(1070, 20, 50, timestamp_type=1, log_append_time=1_011_000), batch(1090, 25, 50)]
    out += [legacy.build_message(1115 + i, b"v", magic=1, timestamp=1_011_500 + 7 * i) for i in range(5)]
    return out


def _records(pieces: list[bytes]) -> list[tuple[int, int]]:
    """Every record's ``(timestamp, offset)``, decoded by the plain scalar record walk."""
    from storage_core.format.log_input_stream import LogInputStream, batch_records

    data = b"".join(pieces)
    return [(r.timestamp, r.offset) for info in LogInputStream(data) for r in batch_records(data, info)]


def test_time_lookups_find_the_first_record_at_or_after(tmp_path: Path) -> None:
    pieces = _timed_pieces()
    seg = _segment(tmp_path / "t-0", pieces)
    records = _records(pieces)
    try:
        checked = 0
        for timestamp in range(999_000, 1_012_000, 97):
            for starting in (0, 45, 1071, 1116):
                want = next(((t, o) for t, o in records if t >= timestamp and o >= starting), None)
                got = seg.find_offset_by_timestamp(timestamp, starting)
                assert (None if got is None else (got.timestamp, got.offset)) == want, (timestamp, starting)
                checked += want is not None
        assert checked > 300
    finally:
        seg.close()


def test_a_corrupt_batch_found_by_a_time_lookup_is_named_with_its_file_position(tmp_path: Path) -> None:
    pieces = _timed_pieces()
    big = bytearray(pieces[2])
    big[500_000] ^= 0xFF                                   # a record byte: the CRC no longer matches
    pieces[2] = bytes(big)
    seg = _segment(tmp_path / "t-0", pieces)
    try:
        assert seg.find_offset_by_timestamp(0).offset == 0   # the batches before it are fine
        with pytest.raises(KafkaLogError) as e:
            seg.find_offset_by_timestamp(1_000_650, 70)
        assert "00000000000000000000.log" in str(e.value)
        assert f"position {_starts(pieces)[2]}" in str(e.value)
    finally:
        seg.close()


_POOL: list[bytes] = []


def _pool() -> list[bytes]:
    """Batches of every size class (a few bytes, a window's worth, past a megabyte) and legacy
    entries, made once: the shallow walks do not look at offsets' order."""
    if not _POOL:
        _POOL.extend([_batch(0, 1, 10), _batch(1, 3, 5_000), _batch(4, 1, 70_000),
                      _batch(5, 1, 1_200_000), _batch(6, 40, 30),
                      legacy.build_message(50, b"w" * 300, magic=0),
                      legacy.build_message(51, b"w" * 90_000, magic=1)])
    return _POOL


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(picks=st.lists(st.integers(0, 6), min_size=1, max_size=7),
       damage=st.one_of(st.none(),
                        st.tuples(st.just("byte"), st.integers(0, 6), st.integers(0, 79), st.integers(1, 255)),
                        st.tuples(st.just("length"), st.integers(0, 6), st.integers(-5, 3_000_000)),
                        st.tuples(st.just("cut"), st.floats(0.0, 1.0))),
       first=st.integers(0, 6))
def test_header_walk_agrees_with_the_full_walk_on_damaged_segments(picks, damage, first) -> None:
    """Any run of batches and entries, one damage (a byte of a header, a length field, the
    file cut short): both walks yield the same batches, then end or raise the same error."""
    import tempfile

    pieces = [_pool()[i] for i in picks]
    data = bytearray(b"".join(pieces))
    starts = _starts(pieces)
    if damage is not None and damage[0] == "byte":
        at = starts[damage[1] % len(pieces)] + damage[2]
        if at < len(data):
            data[at] ^= damage[3]
    elif damage is not None and damage[0] == "length":
        at = starts[damage[1] % len(pieces)]
        data[at + 8:at + 12] = struct.pack(">i", damage[2])
    elif damage is not None:
        data = data[:int(len(data) * damage[1])]
    with tempfile.TemporaryDirectory() as d:
        seg = _segment(Path(d) / "t-0", [bytes(data)])
        try:
            got, error = _same_as_full_walk(seg, starts[first % len(pieces)])
            event("raised" if error else f"ended after {min(len(got), 3)}+ batches")
        finally:
            seg.close()


def test_a_claim_past_the_readers_limit_is_refused_though_the_file_holds_it(tmp_path: Path) -> None:
    """A length field above the readers' limit (64 MiB at least) is corruption even where the
    file is long enough for it (a sparse file here): neither walk steps over it."""
    pieces = _mixed()
    claim = 65 << 20
    seg_dir = tmp_path / "t-0"
    seg = _segment(seg_dir, pieces + [_with_length(_batch(64, 1, 10), claim)])
    seg.close()
    os.truncate(seg_dir / "00000000000000000000.log", sum(map(len, pieces)) + claim + 12 + 4096)
    seg = LogSegment.open(seg_dir, 0, LogConfig(), writable=False)
    try:
        got, error = _same_as_full_walk(seg, _starts(pieces)[-1])
        assert len(got) == 1 and error is not None and "exceeds the largest allowable" in error[1], error
    finally:
        seg.close()

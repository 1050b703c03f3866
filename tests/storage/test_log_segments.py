"""LogSegments (the one sorted map of a log's segments), the partition-file rules of
storage_core.log.files, LogView and the Log's offset invariant, on real segment files."""

from __future__ import annotations

import pyarrow as pa
import pytest

from storage_core.config import LogConfig
from storage_core.errors import LogInvariantError
from storage_core.log import (Log, LogSegment, LogSegments, LogView, bases_in_range, filename_prefix,
                              is_segment_file, offset_from_filename, segment_base_offsets)


def _segments(tmp_path, bases):
    d = tmp_path / "t-0"
    d.mkdir()
    return [LogSegment.open(d, b, LogConfig()) for b in bases]


def test_log_segments_lookups_match_kafkas_log_segments(tmp_path):
    segs = _segments(tmp_path, [30, 0, 10])
    m = LogSegments(segs)
    try:
        assert m.base_offsets() == [0, 10, 30]
        assert [s.base_offset for s in m] == [0, 10, 30]
        assert m.floor_segment(9).base_offset == 0 and m.floor_segment(10).base_offset == 10
        assert m.lower_segment(10).base_offset == 0 and m.lower_segment(0) is None
        assert m.higher_segment(10).base_offset == 30 and m.higher_segment(30) is None
        assert [s.base_offset for s in m.higher_segments(5)] == [10, 30]
        # values(from, to): from the floor of `from` up to, excluding, the first base >= to
        assert [s.base_offset for s in m.values(12, 30)] == [10]
        assert [s.base_offset for s in m.values(12, 31)] == [10, 30]
        assert m.values(5, 5) == []
        with pytest.raises(ValueError, match="greater than limit offset"):
            m.values(6, 5)
        assert [s.base_offset for s in m.non_active_from(0)] == [0, 10]
        assert m.non_active_from(30) == []
        assert m.last_segment.base_offset == 30 and m.first_segment.base_offset == 0
        assert [s.base_offset for s in m.remove_from(10)] == [10, 30]
        assert m.base_offsets() == [0] and segs[0] not in m and segs[1] in m     # 30 went, 0 stays
    finally:
        for s in segs:
            s.close()


def test_bases_in_range_and_file_names():
    assert bases_in_range([0, 10, 30], 15, 40) == [10, 30]
    assert bases_in_range([0, 10, 30], -1, 10) == [0]          # below the first: the first
    assert filename_prefix(42) == "00000000000000000042"
    assert offset_from_filename("00000000000000000042.log.swap") == 42
    names = ["00000000000000000042.log", "00000000000000000007.log", "00000000000000000009.index",
             "00000000000000000050.log.deleted", "leader-epoch-checkpoint", "0000000000000000001x.log"]
    assert [n for n in names if is_segment_file(n)] == names[:2]
    assert segment_base_offsets(names) == [7, 42]


def test_view_of_a_live_log_and_the_invariant_check(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d, LogConfig(segment_bytes=1024)) as log:
        for _ in range(20):
            log.append(pa.table({"value": [b"x" * 100] * 3}))
        log.delete_records_before(9)
        view = LogView(d)
        assert view.segment_base_offsets() == [s.base_offset for s in log.segments]
        with view.segment(log.active_segment.base_offset) as seg:
            assert seg.read_next_offset() == log.log_end_offset
        # fault injection: a recovery point past the log end breaks the invariant
        log.recovery_point = log.log_end_offset + 1
        with pytest.raises(LogInvariantError, match=str(d)):
            log._check_invariant("a test")
        log.recovery_point = log.log_end_offset
    # the log start offset a reader sees is the checkpointed one, as Log's load finds it
    assert LogView(d).log_start_offset() == 9
    with Log.open(d, read_only=True) as reader:
        assert reader.log_start_offset == 9

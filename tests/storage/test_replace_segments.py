"""``Log.replace_segments`` (LocalLog.replaceSegments): the cleaner's output swapped in through
``.cleaned`` -> ``.swap`` files, the old segments deleted once through ``.deleted`` files; and
what a reader in another process, or a restarted writer, sees at every step of a swap."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.config import LogConfig
from storage_core.log import Log
from storage_core.log import CLEANED_SUFFIX, LogSegment


def _records(n: int, start: int) -> pa.Table:
    return pa.table({"key": [b"k%03d" % i for i in range(start, start + n)],
                     "value": [b"v%03d" % i for i in range(start, start + n)]})


def _log(path: Path, delay: int = 60_000) -> Log:
    log = Log.open(path, LogConfig(file_delete_delay_ms=delay))
    for i in range(4):                     # [0,5) [5,10) [10,15) and the active [15,20)
        log.append(_records(5, 5 * i))
        if i < 3:
            log.roll()
    return log


def _cleaned(log: Log, segs: list[LogSegment]) -> LogSegment:
    new = LogSegment.open(log.dir, segs[0].base_offset, log.config, file_suffix=CLEANED_SUFFIX,
                          preallocate=False)
    last = segs[-1].read_next_offset() - 1
    new.append(last, segs[-1].max_timestamp_so_far.timestamp, last,
               b"".join(s.read_bytes(0, s.size) for s in segs))
    new.on_become_inactive_segment()
    new.flush()
    return new


def _read_all(path: Path) -> list[int]:
    with Log.open(path, read_only=True) as r:
        out, offset = [], r.log_start_offset
        while offset < r.log_end_offset:
            got = r.fetch(offset, max_bytes=64)
            out += got.table.column("offset").to_pylist()
            offset = got.next_offset
        return out


def test_replace_swaps_in_and_deletes_the_old_segments_once(tmp_path: Path) -> None:
    """[LogCleanerTest.testCleanSegmentsWithConcurrentSegmentDeletion] Old segments are renamed
    ".deleted" exactly once, also when retention deleted one of them in the meantime."""
    log = _log(tmp_path / "t-0")
    try:
        old = log.segments[0:3]
        new = _cleaned(log, old)
        log.delete_records_before(5)                # retention takes [0, 5) first
        assert (log.dir / "00000000000000000000.log.deleted").exists()
        log.replace_segments([new], old)            # the swap skips what is already gone
        assert [s.base_offset for s in log.segments] == [0, 15]
        names = sorted(p.name for p in log.dir.iterdir())
        assert "00000000000000000000.log" in names and not any(n.endswith((".swap", ".cleaned")) for n in names)
        assert names.count("00000000000000000005.log.deleted") == 1
        assert log.pending_deletes >= 3
        assert log.read(5, max_bytes=1 << 20).column("offset").to_pylist() == list(range(5, 20))
        assert log.metrics.segments_replaced == 2
        with pytest.raises(ValueError, match="active segment"):
            log.replace_segments([_cleaned(log, [log.segments[-1]])], [log.segments[-1]])
    finally:
        log.close()
    with Log.open(tmp_path / "t-0") as log:          # reopened: the swapped-in segment stays
        assert [s.base_offset for s in log.segments] == [0, 15]
        assert log.read(5, max_bytes=1 << 20).column("offset").to_pylist() == list(range(5, 20))


@pytest.mark.parametrize("step", ["cleaned", "swap", "one-deleted", "all-deleted", "done"])
def test_every_step_of_a_swap_reads_each_offset_once(tmp_path: Path, step: str) -> None:
    """A reader opening the partition at any moment of a swap sees every offset exactly once:
    ``.swap`` files stand for the segments they replace (LogLoader's rule); a writer reopening
    there finishes or discards the swap as Kafka does [LogCleanerTest.testRecoveryAfterCrash]."""
    src = tmp_path / "src" / "t-0"
    log = _log(src)
    new = _cleaned(log, log.segments[0:3])
    log.close()
    new.close()
    part = tmp_path / "copy" / "t-0"
    shutil.copytree(src, part)
    d = part
    steps = ["cleaned", "swap", "one-deleted", "all-deleted", "done"]
    upto = steps.index(step)
    if upto >= 1:
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            p = d / f"00000000000000000000{suffix}.cleaned"
            if p.exists():
                p.rename(d / f"00000000000000000000{suffix}.swap")
    old = [0, 5, 10]
    for i, base in enumerate(old):
        if upto >= 3 or (upto == 2 and i == 0):
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                p = d / f"{base:020d}{suffix}"
                if p.exists():
                    p.rename(p.with_name(p.name + ".deleted"))
    if upto == 4:
        for p in list(d.iterdir()):
            if p.name.endswith(".swap"):
                p.rename(p.with_name(p.name[:-5]))
    assert _read_all(part) == list(range(20))
    with Log.open(part) as w:                        # a writer's load completes or discards it
        assert w.read(0, max_bytes=1 << 20).column("offset").to_pylist() == list(range(20))
        expected = [0, 5, 10, 15] if step == "cleaned" else [0, 15]
        assert [s.base_offset for s in w.segments] == expected
    assert not any(p.name.endswith((".swap", ".cleaned", ".deleted")) for p in d.iterdir())


def test_truncation_that_empties_a_cleaned_segment_keeps_the_target_as_end(tmp_path: Path) -> None:
    """[LocalLog.truncateTo sets the log end offset to the target] A cleaned segment may hold
    only its last offsets (everything below compacted away): truncating to the first of those
    leaves the log end offset at the target, not at the emptied segment's base."""
    log = _log(tmp_path / "t-0", delay=0)
    try:
        first = log.segments[0]
        # what a clean leaves when offsets 0..3 of the first segment were compacted away
        data = first.read_bytes(0, first.size)
        from storage_core.format.log_input_stream import scan_batches
        scan = scan_batches(data)
        keep = [i for i in range(len(scan)) if int(scan.last_offset[i]) >= 4]
        new = LogSegment.open(log.dir, 0, log.config, file_suffix=CLEANED_SUFFIX, preallocate=False)
        part = b"".join(data[int(scan.position[i]):int(scan.position[i]) + int(scan.size[i])] for i in keep)
        if int(scan.base_offset[keep[0]]) < 4:
            # one batch of five: rebuild as a batch holding only offset 4 (ends the segment)
            from storage_core.format.record_batch import RecordInput, build_batch
            part = build_batch([RecordInput(b"v004", b"k004", 0)], base_offset=4)
        new.append(4, 0, 4, part)
        new.on_become_inactive_segment()
        new.flush()
        log.replace_segments([new], [first])
        log.truncate_to(4)                               # empties the cleaned segment
        assert log.log_end_offset == 4
        assert log.append(_records(1, 100)).first_offset == 4
    finally:
        log.close()
    with Log.open(tmp_path / "t-0") as log:
        assert log.log_end_offset == 5

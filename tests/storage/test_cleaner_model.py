"""Model test of compaction: any history of keyed records and tombstones (several appends,
small segments, any codec), cleaned by ``Cleaner`` on a real Log, reads back as Kafka's rule
says: for every key the record at its latest offset, offsets unchanged and in order,
tombstones kept until ``delete.retention.ms`` after the clean that first saw them, and the
same after a reload."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_core.cleaner import Cleaner, LogToClean
from storage_core.config import LogConfig
from storage_core.format.record_batch import RecordInput, build_batch
from storage_core.log import Log

DAY = 86400000

records = st.lists(st.tuples(st.integers(0, 7), st.one_of(st.none(), st.binary(min_size=0, max_size=20))),
                   min_size=1, max_size=6)
appends = st.lists(st.tuples(records, st.sampled_from([0, 1, 3, 4]), st.booleans()), min_size=1, max_size=25)


def read_all(log: Log) -> list[tuple[int, bytes, bytes | None]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        r = log.fetch(offset, max_bytes=1 << 30)
        t = r.table
        out += list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(), t.column("value").to_pylist()))
        if r.next_offset <= offset:
            break
        offset = r.next_offset
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=appends, segment_bytes=st.sampled_from([200, 400, 1 << 20]))
def test_compaction_matches_model(tmp_path_factory, history, segment_bytes):
    """[LogCleanerParameterizedIntegrationTest.cleanerTest/LogCleanerTest.testCleaningWithDeletes/
    testCleanTombstone] the latest value of every key survives, offsets and order hold,
    tombstones vanish only after delete.retention.ms."""
    directory = tmp_path_factory.mktemp("model") / "model-0"
    config = LogConfig.from_properties({"cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
                                        "file.delete.delay.ms": "0"})
    log = Log.open(directory, config)
    written: list[tuple[int, bytes, bytes | None]] = []
    ts = int(time.time() * 1000)
    for recs, codec, roll in history:
        batch = build_batch([RecordInput(v, str(k).encode(), ts) for k, v in recs], compression=codec)
        info = log.append_raw(batch)
        written += [(info.first_offset + i, str(k).encode(), v) for i, (k, v) in enumerate(recs)]
        if roll:
            log.roll()
    log.roll()                                    # everything cleanable
    latest = {k: o for o, k, _ in written}
    kept = [(o, k, v) for o, k, v in written if latest[k] == o]
    live = [r for r in kept if r[2] is not None]
    assert read_all(log) == written
    cleaner = Cleaner(1 << 20)
    now = ts + 1000
    end, _ = cleaner.clean(LogToClean(log, 0, log.active_segment.base_offset), now_ms=now)
    assert end == log.log_end_offset
    assert read_all(log) == kept                  # tombstones stay on the first pass
    cleaner.clean(LogToClean(log, 0, log.active_segment.base_offset), now_ms=now + DAY - 1)
    assert read_all(log) == kept                  # and until their horizon
    cleaner.clean(LogToClean(log, 0, log.active_segment.base_offset), now_ms=now + DAY)
    assert read_all(log) == live
    assert log.log_end_offset == written[-1][0] + 1
    log.close()
    log = Log.open(directory, config)
    assert read_all(log) == live
    assert log.log_end_offset == written[-1][0] + 1
    log.close()

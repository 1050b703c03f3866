"""RemoteIndexCache against a real S3 server (SeaweedFS): remote segments' indexes cached under
``remote-log-index-cache/`` with Kafka's file names and the local indexes' bytes; once cached, a
random offset lookup on a remote segment costs at most two object requests (counted by a
counting adapter around the real RemoteStorageManager: instrumentation, not a mock); timestamp
lookups agree with the local log; the cache stays within its byte bound, evicting the least
recently used; entries left torn by a process killed with SIGKILL are ignored and fetched again;
the store going away fails a cold lookup naming the segment and the store, while cached
segments still answer."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from storage_core.checkpoint import EpochEntry, format_leader_epoch_checkpoint, topic_id_from_str, topic_id_to_str
from storage_core.config import LogConfig
from storage_core.errors import RemoteStorageError
from storage_core.format import RecordInput as Record, build_batch, decode_batches
from storage_core.log import Log, segment_paths
from storage_core.producer import snapshot_path
from storage_core.remote import (IndexType, LogSegmentData, PyArrowRemoteStorageManager, RemoteIndexCache,
                                 RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition,
                                 remote_index_file_prefix, serialize)

TOPIC_ID = topic_id_from_str("jF8s79t9SrG_PNqlwv7bAA")
TIP = TopicIdPartition(TOPIC_ID, ("tieredTopic", 0))
REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("index_cache_runner.py")
TS0 = 1700000000000
INDEX_INTERVAL = 512
READ_AHEAD = 16 * 1024          # well past the next index entry (batches here are < 1 KiB)


class CountingRemoteStorageManager:
    """Wraps a real RemoteStorageManager and counts the object requests it makes: each fetch
    opens the object (one request: pyarrow's S3 file asks for its size) and each read of the
    returned stream that returns bytes is one ranged GET."""

    def __init__(self, inner: PyArrowRemoteStorageManager) -> None:
        self.inner = inner
        self.requests = 0
        self.calls: list[str] = []

    def _counted(self, stream):
        outer = self

        class Counted:
            # RemoteInputStream issues one ranged read per call that returns bytes, none at the end
            def read(self, n=-1):
                data = stream.read(n)
                outer.requests += bool(data)
                return data

            def readall(self):
                data = stream.readall()
                outer.requests += bool(data)
                return data

            def readinto(self, b):
                n = stream.readinto(b)
                outer.requests += bool(n)
                return n

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                stream.close()

            def close(self):
                stream.close()

        return Counted()

    def fetch_index(self, metadata, index_type):
        self.requests += 1
        self.calls.append(f"index {index_type.name}")
        return self._counted(self.inner.fetch_index(metadata, index_type))

    def fetch_log_segment(self, metadata, start_position, end_position=None):
        self.requests += 1
        self.calls.append("segment")
        return self._counted(self.inner.fetch_log_segment(metadata, start_position, end_position))

    def copy_log_segment_data(self, metadata, data):
        return self.inner.copy_log_segment_data(metadata, data)

    def delete_log_segment_data(self, metadata):
        return self.inner.delete_log_segment_data(metadata)

    def close(self):
        self.inner.close()


@pytest.fixture(scope="module")
def local_log(tmp_path_factory):
    """Four rolled segments of a real log (index entries every 512 bytes), the second with an
    aborted transaction (so a .txnindex); returns (log dir, [(base, next base)])."""
    log_dir = tmp_path_factory.mktemp("index-cache") / "tieredTopic-0"
    snapshots = log_dir.parent / "snapshots"
    snapshots.mkdir()
    log = Log.open(log_dir, LogConfig(index_interval_bytes=INDEX_INTERVAL), topic_id=TOPIC_ID)
    rnd = random.Random(19)
    bounds = []
    try:
        ts, seq = TS0, 0
        for s in range(4):
            base = log.log_end_offset
            for i in range(250):
                # an idempotent producer's batches: every roll leaves a producer snapshot to upload
                records = [Record(value=os.urandom(rnd.randint(20, 200)), timestamp=ts + k) for k in range(3)]
                ts += 3
                log.append_raw(build_batch(records, producer_id=5, producer_epoch=0, base_sequence=seq))
                seq += 3
                if s == 1 and i == 100:
                    log.append_raw(build_batch([Record(value=b"aborted", timestamp=ts)], producer_id=77,
                                               producer_epoch=0, base_sequence=0, transactional=True))
                    log.append_end_txn_marker(77, 0, "ABORT", 0, timestamp=ts)
            next_base = log.roll().base_offset
            bounds.append((base, next_base))
            # the snapshot at the next base is what a copy uploads; the log keeps only the latest
            shutil.copy(snapshot_path(log_dir, next_base), snapshots / f"{next_base}.snapshot")
        log.flush()
    finally:
        log.close()
    return log_dir, bounds


def upload(local_log, configs: dict) -> tuple[PyArrowRemoteStorageManager, list[RemoteLogSegmentMetadata]]:
    log_dir, bounds = local_log
    rsm = PyArrowRemoteStorageManager(configs)
    mds = []
    for base, next_base in bounds:
        paths = segment_paths(log_dir, base)
        txn = paths[".txnindex"] if paths[".txnindex"].exists() and paths[".txnindex"].stat().st_size else None
        md = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TIP), base, next_base - 1, TS0, 1, TS0,
                                      paths[".log"].stat().st_size, {0: base}, txn_idx_empty=txn is None)
        rsm.copy_log_segment_data(md, LogSegmentData(paths[".log"], paths[".index"], paths[".timeindex"], txn,
                                                     log_dir.parent / "snapshots" / f"{next_base}.snapshot",
                                                     format_leader_epoch_checkpoint([EpochEntry(0, 0)]).encode()))
        mds.append(md)
    assert sum(not m.txn_idx_empty for m in mds) == 1
    return rsm, mds


@pytest.fixture
def remote(local_log, seaweedfs):
    configs = seaweedfs.storage_configs(f"ic-{uuid.uuid4().hex[:10]}")
    rsm, mds = upload(local_log, configs)
    return configs, rsm, mds


def read_at(rsm, md: RemoteLogSegmentMetadata, position: int) -> list[int]:
    """The offsets of the batches read from ``position`` (one ranged read)."""
    end = min(md.segment_size_in_bytes - 1, position + READ_AHEAD - 1)
    with rsm.fetch_log_segment(md, position, end) as stream:
        data = stream.read(end - position + 1)
    return decode_batches(data).column("offset").to_pylist()


def test_random_offset_lookup_costs_at_most_two_requests_once_the_indexes_are_cached(local_log, remote, tmp_path):
    _, rsm, mds = remote
    counting = CountingRemoteStorageManager(rsm)
    cache = RemoteIndexCache(counting, tmp_path)
    rnd = random.Random(405)
    # cold: the first lookup of a segment fetches its indexes (the transaction index only where
    # the metadata says it is not empty)
    for md in mds:
        before = counting.requests
        cache.lookup_offset(md, md.start_offset)
        fetched = [c for c in counting.calls[-3:] if c.startswith("index")]
        assert counting.requests - before == 2 * (2 + (not md.txn_idx_empty))
        assert {"index OFFSET", "index TIMESTAMP"} <= set(fetched)
    # warm: index lookups cost nothing; the read is one fetch and one ranged read
    for _ in range(60):
        md = rnd.choice(mds)
        target = rnd.randint(md.start_offset, md.end_offset)
        before = counting.requests
        position = cache.lookup_offset(md, target)
        assert counting.requests == before
        offsets = read_at(counting, md, position)
        assert counting.requests - before <= 2
        assert offsets[0] <= target <= offsets[-1] + 2       # the batch holding the target was read
        assert position == 0 or offsets[0] > md.start_offset
    # the positions are the local index's answers
    log_dir, _ = local_log
    with Log.open(log_dir, read_only=True) as log:
        for md in mds:
            seg = next(s for s in log.segments if s.base_offset == md.start_offset)
            for target in (md.start_offset, (md.start_offset + md.end_offset) // 2, md.end_offset):
                assert cache.lookup_offset(md, target) == seg.offset_index.lookup(target).position


def test_timestamp_lookup_finds_what_the_local_log_finds(local_log, remote, tmp_path):
    """From the position ``lookup_timestamp`` gives, the first record at or after the timestamp
    is the offset the local log's ``fetch_offset_by_timestamp`` answers."""
    _, rsm, mds = remote
    cache = RemoteIndexCache(rsm, tmp_path)
    log_dir, _ = local_log
    rnd = random.Random(7)
    checked = 0
    with Log.open(log_dir, read_only=True) as log:
        while checked < 30:
            md = rnd.choice(mds)
            ts = rnd.randint(TS0, TS0 + 4 * 250 * 3)
            expected = log.fetch_offset_by_timestamp(ts)
            if expected is None or not md.start_offset <= expected.offset <= md.end_offset:
                continue
            position = cache.lookup_timestamp(md, ts, md.start_offset)
            end = min(md.segment_size_in_bytes - 1, position + READ_AHEAD - 1)
            with rsm.fetch_log_segment(md, position, end) as stream:
                table = decode_batches(stream.read(end - position + 1))
            stamps = table.column("timestamp").cast("int64").to_pylist()
            offsets = table.column("offset").to_pylist()
            found = next(o for o, t in zip(offsets, stamps) if t >= ts)
            assert found == expected.offset, (ts, position)
            checked += 1


def test_cache_files_are_kafkas_names_and_the_local_indexes_bytes(local_log, remote, tmp_path):
    _, rsm, mds = remote
    cache = RemoteIndexCache(rsm, tmp_path)
    for md in mds:
        cache.get_index_entry(md)
    log_dir, _ = local_log
    cache_dir = tmp_path / "remote-log-index-cache"
    names = sorted(os.listdir(cache_dir))
    expected = sorted(f"{md.start_offset}_{uuid_str}{s}" for md in mds
                      for uuid_str in [remote_index_file_prefix(md).split("_", 1)[1]]
                      for s in (".index", ".timeindex", ".txnindex"))
    assert names == expected
    assert remote_index_file_prefix(mds[1]) == f"{mds[1].start_offset}_{remote_index_file_prefix(mds[1])[-22:]}"
    for md in mds:
        local = segment_paths(log_dir, md.start_offset)
        prefix = cache_dir / remote_index_file_prefix(md)
        assert Path(f"{prefix}.index").read_bytes() == local[".index"].read_bytes()
        assert Path(f"{prefix}.timeindex").read_bytes() == local[".timeindex"].read_bytes()
        txn = Path(f"{prefix}.txnindex").read_bytes()
        assert txn == (b"" if md.txn_idx_empty else local[".txnindex"].read_bytes())
    aborted = cache.get_index_entry(mds[1]).txn_index.all_aborted_txns()
    assert len(aborted) == 1 and aborted[0].producer_id == 77
    assert cache.size_bytes == sum(p.stat().st_size for p in cache_dir.iterdir())


def test_cache_is_bounded_in_bytes_and_evicts_the_least_recently_used(remote, tmp_path):
    _, rsm, mds = remote
    counting = CountingRemoteStorageManager(rsm)
    probe = RemoteIndexCache(rsm, tmp_path / "probe")
    sizes = [probe.get_index_entry(md).size_bytes for md in mds]
    bound = sizes[0] + sizes[1] + sizes[2] - 1                 # room for two entries, not three
    assert all(bound >= sizes[i] + sizes[j] for i in range(4) for j in range(4) if i != j)
    cache = RemoteIndexCache(counting, tmp_path, bound)
    ids = [md.remote_log_segment_id.id for md in mds]
    cache_dir = tmp_path / "remote-log-index-cache"

    def cached_prefixes() -> set[str]:
        return {name.split(".")[0] for name in os.listdir(cache_dir)}

    for md in mds[:3]:
        cache.lookup_offset(md, md.start_offset)
        assert cache.size_bytes <= bound
    assert ids[0] not in cache and ids[1] in cache and ids[2] in cache
    assert cached_prefixes() == {remote_index_file_prefix(m) for m in mds[1:3]}
    cache.lookup_offset(mds[1], mds[1].start_offset)           # mds[1] is now the most recent
    cache.lookup_offset(mds[3], mds[3].start_offset)
    assert ids[2] not in cache and {ids[1], ids[3]} <= set(cache._entries)
    assert cached_prefixes() == {remote_index_file_prefix(m) for m in (mds[1], mds[3])}
    assert cache.size_bytes == sum(p.stat().st_size for p in cache_dir.iterdir()) <= bound
    cache.close()
    # a restart loads the entries on disk without fetching them; a smaller bound evicts at once
    before = counting.requests
    again = RemoteIndexCache(counting, tmp_path, bound)
    assert len(again) == 2
    again.lookup_offset(mds[3], mds[3].end_offset)
    assert counting.requests == before
    again.resize_cache_size(sizes[3])
    assert len(again) == 1 and ids[3] in again and again.size_bytes <= sizes[3]
    assert cached_prefixes() == {remote_index_file_prefix(mds[3])}


def test_only_the_most_recently_used_entries_hold_files_open(remote, tmp_path):
    _, rsm, mds = remote
    cache = RemoteIndexCache(rsm, tmp_path, max_open_entries=1)

    def open_cache_files() -> int:
        count = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                count += os.readlink(f"/proc/self/fd/{fd}").startswith(str(cache.cache_dir))
            except FileNotFoundError:
                pass                                # the listing's own descriptor, closed since
        return count

    for md in mds:
        cache.lookup_offset(md, md.end_offset)
        assert open_cache_files() <= 3              # one entry: its offset, time (and txn) index
    assert len(cache) == len(mds)
    # a closed entry opens again on use
    assert cache.lookup_offset(mds[0], mds[0].end_offset) == cache.get_index_entry(mds[0]).lookup_offset(
        mds[0].end_offset).position
    cache.close()
    assert open_cache_files() == 0


def test_torn_entries_are_ignored_and_fetched_again(remote, tmp_path):
    """Fault injection first (what a kill or a crash can leave: a .tmp file, a set missing a
    file, a .deleted file, an index whose length is not whole entries), then real SIGKILLs of a
    process filling the cache."""
    configs, rsm, mds = remote
    cache = RemoteIndexCache(rsm, tmp_path)
    for md in mds:
        cache.get_index_entry(md)
    cache.close()
    cache_dir = tmp_path / "remote-log-index-cache"
    p0, p1, p2 = (cache_dir / remote_index_file_prefix(md) for md in mds[:3])
    Path(f"{p0}.index").rename(Path(f"{p0}.index.1a2b3c4d.tmp"))          # killed before the rename
    Path(f"{p1}.timeindex").rename(Path(f"{p1}.timeindex.deleted"))       # killed while evicting
    with open(f"{p2}.index", "ab") as f:
        f.write(b"\x00\x00\x00")                                           # not whole entries
    counting = CountingRemoteStorageManager(rsm)
    cache = RemoteIndexCache(counting, tmp_path)
    assert len(cache) == 1 and mds[3].remote_log_segment_id.id in cache
    assert not any(n.endswith((".tmp", ".deleted")) for n in os.listdir(cache_dir))
    for md in mds:
        cache.lookup_offset(md, md.end_offset)
    assert counting.calls.count("index OFFSET") == 3            # the three torn entries, fetched again
    log_sizes = {remote_index_file_prefix(md): md for md in mds}
    for prefix, md in log_sizes.items():
        with rsm.fetch_index(md, IndexType.OFFSET) as s:
            assert Path(f"{cache_dir / prefix}.index").read_bytes() == s.readall()
    cache.close()

    env = dict(os.environ, PYTHONPATH=str(REPO))
    spec = json.dumps({"configs": configs, "log_dir": str(tmp_path), "segments": [serialize(m).hex() for m in mds]})
    rnd = random.Random(3)
    for trial in range(3):
        proc = subprocess.Popen([sys.executable, str(RUNNER), spec], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, text=True)
        kill_after = rnd.randint(1, 12)
        try:
            for line in proc.stdout:
                if int(line.split()[1]) >= kill_after:
                    os.kill(proc.pid, signal.SIGKILL)
                    break
        finally:
            if proc.poll() is None and proc.returncode is None:
                proc.kill()
            proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()[-3000:]
        counting = CountingRemoteStorageManager(rsm)
        cache = RemoteIndexCache(counting, tmp_path)
        for md in mds:
            entry = cache.get_index_entry(md)
            for index_type, path in zip((IndexType.OFFSET, IndexType.TIMESTAMP), entry.paths):
                with rsm.fetch_index(md, index_type) as s:
                    assert path.read_bytes() == s.readall(), f"trial {trial}: {path.name} differs from the remote"
        assert not any(n.endswith(".tmp") for n in os.listdir(cache_dir))
        cache.close()


def test_store_going_away_fails_cold_lookups_naming_segment_and_store_but_cached_ones_answer(remote, seaweedfs,
                                                                                           tmp_path):
    _, rsm, mds = remote
    cache = RemoteIndexCache(rsm, tmp_path)
    warm = mds[0]
    expected = cache.lookup_offset(warm, warm.end_offset)
    seaweedfs.stop()
    try:
        assert cache.lookup_offset(warm, warm.end_offset) == expected
        with pytest.raises(RemoteStorageError) as info:
            cache.lookup_offset(mds[2], mds[2].start_offset)
        message = str(info.value)
        assert str(mds[2].start_offset) in message and "tieredTopic-0" in message and seaweedfs.bucket in message
        assert mds[2].remote_log_segment_id.id not in cache
        assert sorted(os.listdir(tmp_path / "remote-log-index-cache")) == sorted(
            remote_index_file_prefix(warm) + s for s in (".index", ".timeindex", ".txnindex"))
    finally:
        seaweedfs.start()
    assert cache.lookup_offset(mds[2], mds[2].start_offset) == 0


@pytest.mark.parametrize("offset", ["9223372036854775808", "99999999999999999999999", "-1", "+1", "01",
                                    "1\u0664", "\u00b2", "\u0664"])
def test_a_cache_file_whose_offset_is_not_kafkas_is_ignored_with_a_warning(local_log, tmp_path, caplog, offset):
    """``RemoteIndexCache.init`` reads the offset with ``Long.parseLong``: one beyond a Java long
    (or negative, signed, padded, or in other scripts' digits, which str.isdigit and int() took)
    is not a name the cache gives (``<start offset>_<segment id>``), so its files are a
    stranger's: ignored with a warning naming them, left in place, never loaded as an entry."""
    rsm, mds = upload(local_log, {"storage.uri": str(tmp_path / "store")})
    cache = RemoteIndexCache(rsm, tmp_path)
    entry = cache.get_index_entry(mds[0])
    cache.close()
    stranger = f"{offset}_{topic_id_to_str(uuid.UUID(int=42))}"
    for path in entry.paths:
        shutil.copy(path, path.with_name(stranger + path.name[path.name.index("."):]))
    caplog.set_level(logging.WARNING, "storage_core.remote")
    cache = RemoteIndexCache(rsm, tmp_path)
    try:
        assert len(cache) == 1 and mds[0].remote_log_segment_id.id in cache and uuid.UUID(int=42) not in cache
    finally:
        cache.close()
    for suffix in (".index", ".timeindex", ".txnindex"):
        assert (tmp_path / "remote-log-index-cache" / (stranger + suffix)).exists()
        assert any(stranger + suffix in r.getMessage() for r in caplog.records), caplog.text

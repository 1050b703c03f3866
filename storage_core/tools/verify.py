"""``kafkalog verify PATH...``: every file named like a Kafka file under the paths, checked.

Every ``.log`` batch (CRC, lengths, records), every offset-index entry (it must point at the
start of a batch whose last offset is the entry's offset, as DumpLogSegments
``--verify-index-only`` checks), every time-index entry (increasing, and found in the log with
the timestamp it claims; unlike DumpLogSegments an entry may name a record inside a batch, as
brokers before KIP-734's fix wrote the offset of the record with the largest timestamp),
transaction indexes, producer snapshots (version, length, CRC) and checkpoint /
``partition.metadata`` files. A segment's ``.log`` is held to the one definition of valid that
recovery applies (``LogSegment.valid_batches``). Each problem names the file and the byte
position (or line). With the remote storage given as for ``tier`` (``--config``/``--property``),
every object of each ``COPY_SEGMENT_FINISHED`` remote segment of the partitions under the paths
is fetched (``remote_tier``) and held to the same checks, plus its offsets against the
metadata's; problems name the object and byte position, a missing or truncated object is one.
``--json``: one document. Exit 0: all good; 1: problems found; 2: usage or I/O error.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..checkpoint import (CLEAN_SHUTDOWN_FILE, CLEAN_SHUTDOWN_MAX_BYTES, LEADER_EPOCH_CHECKPOINT,
                          LOG_START_OFFSET_CHECKPOINT, PARTITION_METADATA_FILE, CorruptCheckpointError,
                          LeaderEpochCheckpointFile, OffsetCheckpointFile, PartitionMetadataFile,
                          parse_clean_shutdown, read_small_file, topic_id_to_str, validate_topic_name)
from ..config import LogConfig
from ..data_files import file_problem
from ..errors import CorruptRecordError, KafkaLogError, OffsetOverflowError
from ..format import LogInputStream
from ..format import batch_records as shallow_batch_records
from ..index import OffsetIndex, TimeIndex
from ..log import LogSegment, filename_prefix, offset_from_filename
from ..producer import ENTRY_SIZE as SNAPSHOT_ENTRY_SIZE
from ..producer import HEADER_SIZE as SNAPSHOT_HEADER_SIZE
from ..producer import PRODUCER_SNAPSHOT_VERSION, decode_snapshot, read_snapshot_header
from ..remote import REMOTE_LOG_METADATA_TOPIC_NAME, RemoteLogSegmentFileType, RemoteLogSegmentMetadata
from .files import (MAX_BATCH, OFFSET_CHECKPOINTS, SEGMENT_NAME, TXN_ENTRY, IndexLookup,
                    base_offset_of, batch_at_or_after, first_batch, mapped,
                    offset_entries, oversized_index_problem, read_head, read_snapshot_file,
                    record_offsets_and_max_timestamp, segment_bases, sibling, time_entries, txn_index_entries)
from .data_dirs import is_topic_partition_name, partition_dirs
from .output import Output
from .remote_tier import SEGMENT_OBJECTS, RemoteTier


class Problems:
    """Problems found in one file: each with its position (byte or line) and reason; the first
    ``LIMIT`` are kept to print, all are counted."""

    LIMIT = 20

    def __init__(self, path: Path, name: str | None = None) -> None:
        self.path = path
        self.name = name or str(path)          # a remote object's name (a URI: not a Path)
        self.items: list[str] = []
        self.count = 0

    def add(self, where: str, reason: str) -> None:
        """A problem at ``where`` (``position P``, ``line N``, ``whole file``)."""
        self.count += 1
        if len(self.items) < self.LIMIT:
            self.items.append(f"{self.name}: {where}: {reason}")

    def add_located(self, message: str) -> None:
        """A problem whose message already names the file and position."""
        self.count += 1
        self.items.append(message)


def _verify_segment_log(path: Path, p: Problems) -> str:
    """A segment's ``.log`` held to the one definition of valid that recovery applies
    (``LogSegment.valid_batches``, docs/operations.md "What valid means"): the first invalid
    batch, or bytes after the last whole batch, are what recovery truncates, so they are
    reported with their position; offsets past 32-bit relative offsets are a split."""
    base = offset_from_filename(path.name)
    later = [b for b in segment_bases(path.parent) if b > base]
    seg = LogSegment.open(path.parent, base, LogConfig(), writable=False, preallocate=False)
    batches = records = end = 0
    try:
        for b, chunk, at in seg.valid_batches(next_base_offset=later[0] if later else None):
            batches += 1
            records += (b.header.records_count if b.header is not None
                        else len(shallow_batch_records(chunk, b)))
            end = at + b.position + b.size
    except CorruptRecordError as e:
        p.add_located(f"{e} (recovery truncates the log here)")
        return ""
    except OffsetOverflowError as e:
        p.add(f"position {end}", f"{e} (recovery splits the segment)")
        return ""
    finally:
        seg.close(final_entries=False)
    if end < seg.size:
        p.add(f"position {end}", f"{seg.size - end} bytes after the last whole batch (recovery "
                                 f"truncates them)")
        return ""
    return f"{batches} batches, {records} records"


def _verify_log(path: Path, p: Problems) -> str:
    """A ``.log`` that is not named as a segment: its batches, CRCs checked."""
    if SEGMENT_NAME.fullmatch(path.name):
        return _verify_segment_log(path, p)
    with mapped(path) as buf:
        stream = LogInputStream(buf, verify=True, source=str(path), max_batch_size=MAX_BATCH)
        batches = records = 0
        try:
            for b in stream:
                records += len(shallow_batch_records(buf, b))
                batches += 1
        except CorruptRecordError as e:
            p.add_located(str(e if e.source else e.located(source=str(path))))  # file, position
            return ""
        except KafkaLogError as e:                   # e.g. an unknown compression codec
            p.add(f"position {stream.position}", str(e))
            return ""
        tail = f", {stream.end - stream.position} trailing bytes" if stream.partial else ""
        return f"{batches} batches, {records} records{tail}"


def _segment_log(path: Path, p: Problems) -> tuple[int, Path] | None:
    """The base offset and ``.log`` of an index file's segment (None, reported, if missing)."""
    try:
        base = base_offset_of(path.name)
    except KafkaLogError as e:
        p.add("name", str(e))
        return None
    log_path = Path(sibling(path, ".log"))
    if not log_path.exists():
        p.add("whole file", f"no matching log file {log_path.name}")
        return None
    return base, log_path


def _index_segment(path: Path, p: Problems, entry_size: int) -> tuple[int, Path] | None:
    """``_segment_log`` of an index file that may be read (not oversized); else None, reported."""
    seg = _segment_log(path, p)
    if seg is None:
        return None
    oversized = oversized_index_problem(path, entry_size)
    if oversized is not None:
        p.add("whole file", oversized)
        return None
    return seg


def _verify_offset_index(path: Path, p: Problems) -> str:
    """Every entry must increase and point at the start of a batch whose last offset is the
    entry's offset (DumpLogSegments ``--verify-index-only``)."""
    seg = _index_segment(path, p, OffsetIndex.ENTRY_SIZE)
    if seg is None:
        return ""
    base, log_path = seg
    with OffsetIndex(path, base, writable=False) as index:
        try:
            index.sanity_check()
        except KafkaLogError as e:
            p.add(f"position {index.entries * OffsetIndex.ENTRY_SIZE}", str(e))
        entries = offset_entries(index)
    with mapped(log_path) as buf:
        prev_offset: int | None = None
        prev_pos = -1
        for i, (rel, position) in enumerate(entries):
            offset = base + rel
            where = f"position {i * OffsetIndex.ENTRY_SIZE} (entry {i})"
            if prev_offset is not None and (offset <= prev_offset or position <= prev_pos):
                p.add(where, f"entry (offset {offset}, position {position}) does not increase "
                             f"on the previous one (offset {prev_offset}, position {prev_pos})")
            prev_offset, prev_pos = offset, position
            if position >= len(buf):
                p.add(where, f"offset {offset} points at position {position}, past the end of "
                             f"{log_path.name} ({len(buf)} bytes)")
                continue
            found = first_batch(buf, position, len(buf))
            if found is None:
                p.add(where, f"offset {offset} points at position {position} of {log_path.name},"
                             f" where no complete batch starts")
            elif found.last_offset != offset:
                p.add(where, f"Index offset: {offset}, log offset: {found.last_offset} (the "
                             f"batch at position {position} of {log_path.name})")
    return f"{len(entries)} entries"


def _verify_time_index(path: Path, p: Problems) -> str:
    """Every entry must increase and name an offset found in the log whose batch has the
    entry's timestamp as its largest."""
    seg = _index_segment(path, p, TimeIndex.ENTRY_SIZE)
    if seg is None:
        return ""
    base, log_path = seg
    with (TimeIndex(path, base, writable=False) as tindex,
          OffsetIndex(sibling(path, ".index"), base, writable=False) as index):
        try:
            tindex.sanity_check()
        except KafkaLogError as e:
            p.add(f"position {tindex.entries * TimeIndex.ENTRY_SIZE}", str(e))
        entries = time_entries(tindex)
        lookup = IndexLookup(index, base)
    with mapped(log_path) as buf:
        prev_ts, prev_offset = -1, None
        for i, (ts, rel) in enumerate(entries):
            offset = base + rel
            where = f"position {i * TimeIndex.ENTRY_SIZE} (entry {i})"
            if prev_ts >= ts:
                p.add(where, f"Index timestamp: {ts}, Previously indexed timestamp: {prev_ts} "
                             f"(out of order)")
            if prev_offset is not None and offset < prev_offset:
                p.add(where, f"offset {offset} is below the previous entry's {prev_offset}")
            prev_ts, prev_offset = ts, offset
            try:
                start = lookup.position(offset)
                first = first_batch(buf, start, len(buf))
                if first is not None and first.base_offset > offset:
                    start = 0          # the offset index is wrong here (reported on its own)
                found = batch_at_or_after(buf, start, offset)
            except KafkaLogError as e:
                p.add(where, f"offset {offset} cannot be looked up: {e}")
                continue
            if found is None:
                p.add(where, f"Indexed offset: {offset}, found log offset: -1 (not found in "
                             f"{log_path.name})")
                continue
            try:
                offsets, max_ts = record_offsets_and_max_timestamp(buf, found)
            except (KafkaLogError, ValueError) as e:
                p.add(where, f"the batch of offset {offset} cannot be read: {e}")
                continue
            # DumpLogSegments wants the batch's last offset; brokers before KIP-734's fix wrote
            # the offset of the record with the largest timestamp, inside the batch: accepted
            if found.last_offset != offset and not (offsets == offset).any():
                p.add(where, f"Indexed offset: {offset}, found log offset: {found.last_offset} "
                             f"(not found in {log_path.name})")
                continue
            if max_ts != ts:
                p.add(where, f"Index timestamp: {ts}, log timestamp: {max_ts} (the batch at "
                             f"position {found.position} of {log_path.name})")
    return f"{len(entries)} entries"


def _verify_txn_index(path: Path, p: Problems) -> str:
    try:
        base = base_offset_of(path.name)
    except KafkaLogError as e:
        p.add("name", str(e))
        return ""
    length = path.stat().st_size
    size = TXN_ENTRY.size
    n = length // size
    prev_last = None
    for i, (pos, version, pid, first, last, _) in enumerate(txn_index_entries(path)):
        if version != 0:
            p.add(f"position {pos} (entry {i})", f"Unexpected aborted transaction version "
                                                 f"{version}, current version is 0")
            continue
        if last < base:
            p.add(f"position {pos} (entry {i})", f"last offset {last} of the aborted "
                                                 f"transaction of producer {pid} is below the "
                                                 f"segment's base offset {base}")
        if first > last:
            p.add(f"position {pos} (entry {i})", f"first offset {first} is above last offset "
                                                 f"{last}")
        if prev_last is not None and last < prev_last:
            p.add(f"position {pos} (entry {i})", f"last offset {last} is below the previous "
                                                 f"entry's {prev_last}")
        prev_last = last
    if length % size:
        p.add(f"position {n * size}", f"{length % size} trailing bytes, not a whole "
                                      f"{size}-byte entry")
    return f"{n} aborted transactions"


def _verify_snapshot(path: Path, p: Problems) -> str:
    try:
        entries = decode_snapshot(read_snapshot_file(path))     # unread if its size is wrong
    except KafkaLogError as e:
        # where the file goes wrong, checked in the order decode_snapshot checks
        head, size = read_head(path, SNAPSHOT_HEADER_SIZE)
        header = read_snapshot_header(head)
        if header is None or header.version != PRODUCER_SNAPSHOT_VERSION:
            where = "position 0"
        else:
            count = header.entry_count
            expected = SNAPSHOT_HEADER_SIZE + SNAPSHOT_ENTRY_SIZE * count
            if count < 0 or size != expected:
                where = "position 6 (entry count)"
            else:
                where = "position 2 (crc)"
        p.add(where, str(e))
        return ""
    return f"{len(entries)} producers"


def _verify_text(path: Path, p: Problems,
                 read: Callable[[Path], Any], describe: Callable[[Any], str]) -> str:
    """A text file read as its reader reads it (line by line, bounded: a file of gigabytes
    without a newline is refused at its first kilobyte, not read whole)."""
    try:
        return describe(read(path))
    except CorruptCheckpointError as e:
        where = [f"line {e.line}"] if e.line is not None else []
        where += [f"position {e.position}"] if e.position is not None else []
        p.add(", ".join(where) or "position 0", e.reason)
    return ""


def _read_epochs(path: Path) -> list[Any]:
    return LeaderEpochCheckpointFile(path).read()


def _read_clean_shutdown(path: Path) -> int | None:
    # the marker's content as Kafka reads it (garbage is no epoch), but verify names bytes that
    # are not UTF-8, and a marker longer than any Kafka writes
    data = read_small_file(path, CLEAN_SHUTDOWN_MAX_BYTES)
    try:
        return parse_clean_shutdown(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise CorruptCheckpointError("not UTF-8", source=path, position=e.start) from None


def _check_offset_entries(path: Path, offsets: dict, p: Problems) -> str:
    """The entries of an offset checkpoint as a load uses them: a topic name Kafka refuses
    (``Topic.validate``; ``../x`` would name a path outside the data dir) is ignored by every
    load, and a ``log-start-offset-checkpoint`` entry past its partition's log end offset makes
    the load delete every segment of it (LogLoader: "Deleting all segments because
    logEndOffset is smaller than logStartOffset"); both are reported."""
    for (topic, partition), offset in offsets.items():
        try:
            validate_topic_name(topic)
        except KafkaLogError as e:
            p.add(f"entry {topic!r} {partition}", f"{e} (the entry is ignored)")
            continue
        if path.name == LOG_START_OFFSET_CHECKPOINT:
            d = path.parent / f"{topic}-{partition}"
            bases = segment_bases(d) if d.is_dir() else []
            if not bases:
                continue
            seg = LogSegment.open(d, bases[-1], LogConfig(), writable=False, preallocate=False)
            try:
                end = seg.read_next_offset()
            except (KafkaLogError, ValueError, OSError):
                continue                # reported with the .log or index; recovery decides the end
            finally:
                seg.close(final_entries=False)
            if offset > end:
                p.add(f"entry {topic} {partition}",
                      f"log start offset {offset} is past the log end offset {end} of {d.name}: "
                      f"recovery deletes every segment of it and starts it empty at {offset}")
    return f"{len(offsets)} partitions"


def _verify_file(path: Path, p: Problems) -> str | None:
    """Check one file; None if kafkalog does not know the kind of file."""
    name = path.name
    if name.endswith(".log"):
        return _verify_log(path, p)
    if name.endswith(".index"):
        return _verify_offset_index(path, p)
    if name.endswith(".timeindex"):
        return _verify_time_index(path, p)
    if name.endswith(".txnindex"):
        return _verify_txn_index(path, p)
    if name.endswith(".snapshot"):
        return _verify_snapshot(path, p)
    if name in OFFSET_CHECKPOINTS:
        return _verify_text(path, p, lambda f: OffsetCheckpointFile(f).read(),
                            lambda d: _check_offset_entries(path, d, p))
    if name == LEADER_EPOCH_CHECKPOINT:
        return _verify_text(path, p, _read_epochs, lambda d: f"{len(d)} epochs")
    if name == PARTITION_METADATA_FILE:
        return _verify_text(path, p, lambda f: PartitionMetadataFile(f.parent).read_metadata(),
                            lambda m: f"topic id {topic_id_to_str(m.topic_id)}")
    if name == CLEAN_SHUTDOWN_FILE:
        return _verify_text(path, p, _read_clean_shutdown, lambda e: f"broker epoch {e}")
    return None


def _known(path: Path) -> bool:
    name = path.name
    return (name.endswith((".log", ".index", ".timeindex", ".txnindex", ".snapshot"))
            or name in OFFSET_CHECKPOINTS
            or name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE, CLEAN_SHUTDOWN_FILE))


def _listed(root: Path) -> list[Path]:
    """Every entry under ``root`` named like a Kafka file, whatever its kind (a FIFO, a link or a
    directory so named is reported, not skipped), and every symlinked partition directory;
    links are never entered."""
    found = []
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(d, name)
            if _known(path) or (name in dirs and path.is_symlink() and is_topic_partition_name(name)):
                found.append(path)
    return sorted(found)


def _files_to_check(paths: list[str]) -> list[Path]:
    """The files named, and those under the directories named (see ``_listed``)."""
    files: list[Path] = []
    for name in paths:
        p = Path(name)
        if not p.exists() and not p.is_symlink():
            raise FileNotFoundError(f"No such file or directory: {name}")
        if p.is_dir() and not p.is_symlink():
            files.extend(_listed(p))
        else:
            files.append(p)
    return files


def _check(path: Path) -> tuple[Problems, str | None]:
    """One file's problems and its summary (None: not a Kafka file). Raises ``OSError`` when
    the file cannot be read."""
    problems = Problems(path)
    try:
        unsafe = file_problem(path)     # what a writable open refuses: never read
        if unsafe is not None:
            problems.add_located(unsafe)
            return problems, ""
        return problems, _verify_file(path, problems)
    except KafkaLogError as e:           # anything the checks above did not place
        problems.add("whole file", str(e))
        return problems, ""


# the local check of each object of a remote segment, run on its fetched copy
_REMOTE_CHECKS: dict[RemoteLogSegmentFileType, Callable[[Path, Problems], str]] = {
    RemoteLogSegmentFileType.SEGMENT: _verify_segment_log,
    RemoteLogSegmentFileType.OFFSET_INDEX: _verify_offset_index,
    RemoteLogSegmentFileType.TIME_INDEX: _verify_time_index,
    RemoteLogSegmentFileType.TRANSACTION_INDEX: _verify_txn_index,
    RemoteLogSegmentFileType.PRODUCER_SNAPSHOT: _verify_snapshot,
    RemoteLogSegmentFileType.LEADER_EPOCH_CHECKPOINT:
        lambda path, p: _verify_text(path, p, _read_epochs, lambda d: f"{len(d)} epochs"),
}


def _check_remote_offsets(path: Path, md: RemoteLogSegmentMetadata, previous_end: int | None,
                          p: Problems) -> None:
    """The offsets of a remote segment's ``.log`` against its metadata: the first batch starts at
    the start offset (right after the previous remote segment's end), each batch follows the
    one before, the last ends at the end offset."""
    if previous_end is not None and md.start_offset != previous_end + 1:
        p.add("metadata", f"start offset {md.start_offset} does not follow the previous remote segment's end "
                          f"offset {previous_end}")
    expected = md.start_offset
    with mapped(path) as buf:
        size = len(buf)
        for b in LogInputStream(buf, 0, size, max_batch_size=MAX_BATCH):
            if b.base_offset != expected:
                p.add(f"position {b.position}", f"the batch starts at offset {b.base_offset}, where offset {expected} "
                                                f"was expected (metadata offsets {md.start_offset}-{md.end_offset})")
            expected = b.last_offset + 1
    if expected != md.end_offset + 1:
        p.add(f"position {size}", f"the last batch ends at offset {expected - 1}, not at the metadata's end offset "
                                      f"{md.end_offset}")


@dataclass
class Checked:
    """One file or remote object checked: its name, problems and summary (None: not a Kafka
    file), or the I/O error that kept it from being read."""

    name: str
    problems: Problems
    summary: str | None
    remote: bool = False
    io_error: str | None = None


def _remote_segment(tier: RemoteTier, md: RemoteLogSegmentMetadata, previous_end: int | None) -> list[Checked]:
    """Every object of a remote segment, fetched and held to the local checks; problems name the
    object (the fetched copy's name replaced by it) and the byte position."""
    results = []
    with tier.fetched(md) as fetched:
        names = {ft: tier.object_name(md, ft) for ft in _REMOTE_CHECKS}
        local = {str(fetched.folder / (filename_prefix(md.start_offset) + suffix)): names[ft]
                 for ft, suffix, _ in SEGMENT_OBJECTS}
        local.update({Path(path).name: name for path, name in list(local.items())})
        has_log = RemoteLogSegmentFileType.SEGMENT in fetched.paths
        for ft, check in _REMOTE_CHECKS.items():
            if not has_log and ft in (RemoteLogSegmentFileType.OFFSET_INDEX, RemoteLogSegmentFileType.TIME_INDEX):
                continue            # checked against the .log, whose absence is reported
            p = Problems(Path(names[ft]), names[ft])
            path = fetched.paths.get(ft)
            if ft in fetched.problems:
                position, why = fetched.problems[ft]
                p.add("whole object" if path is None else f"position {position}", why)
            elif path is None and not (ft is RemoteLogSegmentFileType.TRANSACTION_INDEX and md.txn_idx_empty):
                p.add("whole object", f"missing from {tier.store}, but the metadata says the segment has "
                                      f"aborted transactions")
            if path is None:
                if p.count:
                    results.append(Checked(names[ft], p, "", remote=True))
                continue
            try:
                summary = check(path, p)
                if ft is RemoteLogSegmentFileType.SEGMENT and not p.count:
                    _check_remote_offsets(path, md, previous_end, p)
            except KafkaLogError as e:
                p.add("whole object", str(e))
                summary = ""
            for i, item in enumerate(p.items):
                for temp, name in local.items():
                    item = item.replace(temp, name)
                p.items[i] = item
            results.append(Checked(names[ft], p, summary, remote=True))
    return results


def _remote_partitions(paths: list[str]) -> list[Path]:
    """The partition directories among and under the paths, whose remote segments are checked."""
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir() and not path.is_symlink():
            found += [d for d in partition_dirs(path) if is_topic_partition_name(d.name)
                      and (d / PARTITION_METADATA_FILE).exists()
                      and not d.name.startswith(f"{REMOTE_LOG_METADATA_TOPIC_NAME}-")]
    return sorted(set(found))


Remote = list[tuple[Path, "list[RemoteLogSegmentMetadata] | str"]]


def _plan(args: argparse.Namespace, tier: RemoteTier | None) -> tuple[list[Path], Remote, int]:
    """The local files under the paths, and (remote storage configured) the finished remote
    segments of each partition under them (or why they cannot be listed); how many steps."""
    files = _files_to_check(args.paths)
    remote: Remote = []
    for d in _remote_partitions(args.paths) if tier is not None else []:
        assert tier is not None
        try:
            remote.append((d, tier.segments(d)))
        except (OSError, KafkaLogError) as e:
            remote.append((d, f"its remote segments cannot be listed: {e}"))
    return files, remote, len(files) + sum(len(mds) if isinstance(mds, list) else 1 for _, mds in remote)


def _checks(files: list[Path], remote: Remote, total: int, tier: RemoteTier | None,
            out: Output) -> Iterator[tuple[int, Checked]]:
    """Each local file, then each object of each remote segment, checked; with the step."""
    i = 0
    for path in files:
        i += 1
        try:
            problems, summary = _check(path)
            yield i, Checked(str(path), problems, summary)
        except OSError as e:
            yield i, Checked(str(path), Problems(path), None, io_error=str(e.strerror or e))
    for d, mds in remote:
        if isinstance(mds, str):
            i += 1
            yield i, Checked(str(d), Problems(d), None, remote=True, io_error=mds)
            continue
        previous_end = None
        for md in mds:
            assert tier is not None
            i += 1
            out.progress(i, total, f"{d.name}: remote segment {md.start_offset}-{md.end_offset}")
            try:
                for c in _remote_segment(tier, md, previous_end):
                    yield i, c
            except (OSError, KafkaLogError) as e:        # the store did not answer
                name = tier.object_name(md, RemoteLogSegmentFileType.SEGMENT)
                yield i, Checked(name, Problems(Path(name), name), None, remote=True, io_error=str(e))
            previous_end = md.end_offset


def run(args: argparse.Namespace, out: Output) -> int:
    """Check every file, one line per file (a line per problem), then how many are valid; with
    remote storage configured (``--config``/``--property``) every object of each finished
    remote segment of the partitions under the paths too. ``--json``: one document."""
    tier = RemoteTier.from_args(args)
    rows: list[dict[str, Any]] = []
    bad = io_errors = skipped = 0
    try:
        files, remote, total = _plan(args, tier)
        for i, c in _checks(files, remote, total, tier, out):
            at = f"[{i}/{total}]"
            row: dict[str, Any] = {"file": c.name, "remote": c.remote}
            if c.io_error is not None:
                out.text(f"{at} ERROR {c.name}: {c.io_error}", flush=True)
                io_errors += 1
                row.update(status="error", error=c.io_error)
            elif c.summary is None:
                out.text(f"{at} skipped {c.name}: not a Kafka log file")
                skipped += 1
                row["status"] = "skipped"
            elif c.problems.count:
                bad += 1
                for item in c.problems.items:
                    out.text(f"{at} CORRUPT {item}")
                if c.problems.count > len(c.problems.items):
                    out.text(f"{at} CORRUPT {c.name}: ... and {c.problems.count - len(c.problems.items)} more "
                             f"problems")
                row.update(status="corrupt", problems=c.problems.items, problem_count=c.problems.count)
            else:
                out.text(f"{at} ok {c.name}: {c.summary}")
                row.update(status="ok", summary=c.summary)
            rows.append(row)
    finally:
        if tier is not None:
            tier.close()
    checked = len(rows) - skipped - io_errors
    out.text(f"{checked - bad} of {checked} files valid")
    out.document({"paths": args.paths, "store": tier.store if tier is not None else None, "files": rows,
                  "totals": {"checked": checked, "valid": checked - bad, "corrupt": bad, "io_errors": io_errors,
                             "skipped": skipped}})
    if io_errors:
        out.error(f"{io_errors} files could not be read")
        return 2
    return 1 if bad else 0

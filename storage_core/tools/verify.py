"""``kafkalog verify PATH...``: every file named like a Kafka file under the paths, checked.

Every ``.log`` batch (CRC, lengths, records), every offset-index entry (it must point at the
start of a batch whose last offset is the entry's offset, as DumpLogSegments
``--verify-index-only`` checks), every time-index entry (increasing, and found in the log with
the timestamp it claims; unlike DumpLogSegments an entry may name a record inside a batch, as
brokers before KIP-734's fix wrote the offset of the record with the largest timestamp),
transaction indexes, producer snapshots (version, length, CRC) and checkpoint /
``partition.metadata`` files. A segment's ``.log`` is held to the one definition of valid that
recovery applies (``LogSegment.valid_batches``). Each problem names the file and the byte
position (or line). Exit 0: all good; 1: problems found; 2: usage or I/O error.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Callable

from ..checkpoint import (CLEAN_SHUTDOWN_FILE, LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                          PARTITION_METADATA_FILE, CorruptCheckpointError, parse_clean_shutdown,
                          parse_leader_epoch_checkpoint, parse_offset_checkpoint,
                          parse_partition_metadata, topic_id_to_str,
                          validate_topic_name)
from ..config import LogConfig
from ..data_files import file_problem
from ..errors import CorruptRecordError, KafkaLogError, OffsetOverflowError
from ..format import LogInputStream
from ..format import batch_records as shallow_batch_records
from ..index import OffsetIndex, TimeIndex
from ..log import LogSegment, offset_from_filename
from ..producer import ENTRY_SIZE as SNAPSHOT_ENTRY_SIZE
from ..producer import HEADER_SIZE as SNAPSHOT_HEADER_SIZE
from ..producer import PRODUCER_SNAPSHOT_VERSION, decode_snapshot, read_snapshot_header
from .files import (MAX_BATCH, OFFSET_CHECKPOINTS, SEGMENT_NAME, TXN_ENTRY, IndexLookup,
                    aborted_txn_entries, base_offset_of, batch_at_or_after, batch_records, first_batch, mapped,
                    max_record_timestamp, offset_entries, oversized_index_problem, read_file,
                    segment_bases, sibling, time_entries)
from .data_dirs import is_topic_partition_name
from .output import Output


class Problems:
    """Problems found in one file: each with its position (byte or line) and reason; the first
    ``LIMIT`` are kept to print, all are counted."""

    LIMIT = 20

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[str] = []
        self.count = 0

    def add(self, where: str, reason: str) -> None:
        """A problem at ``where`` (``position P``, ``line N``, ``whole file``)."""
        self.count += 1
        if len(self.items) < self.LIMIT:
            self.items.append(f"{self.path}: {where}: {reason}")

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
                records = batch_records(buf, found)
            except (KafkaLogError, ValueError) as e:
                p.add(where, f"the batch of offset {offset} cannot be read: {e}")
                continue
            # DumpLogSegments wants the batch's last offset; brokers before KIP-734's fix wrote
            # the offset of the record with the largest timestamp, inside the batch: accepted
            if all(r.offset != offset for r, _, _ in records) and found.last_offset != offset:
                p.add(where, f"Indexed offset: {offset}, found log offset: {found.last_offset} "
                             f"(not found in {log_path.name})")
                continue
            max_ts = max_record_timestamp(records)
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
    data = read_file(path)
    size = TXN_ENTRY.size
    n = len(data) // size
    prev_last = None
    for i, (pos, version, pid, first, last, _) in enumerate(aborted_txn_entries(data)):
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
    if len(data) % size:
        p.add(f"position {n * size}", f"{len(data) % size} trailing bytes, not a whole "
                                      f"{size}-byte entry")
    return f"{n} aborted transactions"


def _verify_snapshot(path: Path, p: Problems) -> str:
    data = read_file(path)
    try:
        entries = decode_snapshot(data)
    except KafkaLogError as e:
        # where the file goes wrong, checked in the order decode_snapshot checks
        header = read_snapshot_header(data)
        if header is None or header.version != PRODUCER_SNAPSHOT_VERSION:
            where = "position 0"
        else:
            count = header.entry_count
            expected = SNAPSHOT_HEADER_SIZE + SNAPSHOT_ENTRY_SIZE * count
            if count < 0 or len(data) != expected:
                where = "position 6 (entry count)"
            else:
                where = "position 2 (crc)"
        p.add(where, str(e))
        return ""
    return f"{len(entries)} producers"


def _verify_text(path: Path, p: Problems,
                 parse: Callable[[str], Any], describe: Callable[[Any], str]) -> str:
    data = read_file(path)
    try:
        text = data.decode("utf-8")
        return describe(parse(text))
    except UnicodeDecodeError as e:
        p.add(f"position {e.start}", "not UTF-8")
    except CorruptCheckpointError as e:
        p.add(f"line {e.line}" if e.line is not None else "position 0", e.reason)
    return ""


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
        return _verify_text(path, p, lambda t: parse_offset_checkpoint(t),
                            lambda d: _check_offset_entries(path, d, p))
    if name == LEADER_EPOCH_CHECKPOINT:
        return _verify_text(path, p, lambda t: parse_leader_epoch_checkpoint(t),
                            lambda d: f"{len(d)} epochs")
    if name == PARTITION_METADATA_FILE:
        return _verify_text(path, p, lambda t: parse_partition_metadata(t),
                            lambda m: f"topic id {topic_id_to_str(m.topic_id)}")
    if name == CLEAN_SHUTDOWN_FILE:
        return _verify_text(path, p, parse_clean_shutdown, lambda e: f"broker epoch {e}")
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


def run(args: argparse.Namespace, out: Output) -> int:
    """Check every file, one line per file (a line per problem), then how many are valid."""
    files = _files_to_check(args.paths)
    bad = io_errors = skipped = 0
    total = len(files)
    for i, path in enumerate(files, 1):
        at = f"[{i}/{total}]"
        try:
            problems, summary = _check(path)
        except OSError as e:
            out.text(f"{at} ERROR {path}: {e.strerror or e}", flush=True)
            io_errors += 1
            continue
        if summary is None:
            out.text(f"{at} skipped {path}: not a Kafka log file")
            skipped += 1
        elif problems.count:
            bad += 1
            for item in problems.items:
                out.text(f"{at} CORRUPT {item}")
            if problems.count > len(problems.items):
                out.text(f"{at} CORRUPT {path}: ... and {problems.count - len(problems.items)} more "
                         f"problems")
        else:
            out.text(f"{at} ok {path}: {summary}")
    checked = total - skipped - io_errors
    out.text(f"{checked - bad} of {checked} files valid")
    if io_errors:
        out.error(f"{io_errors} files could not be read")
        return 2
    return 1 if bad else 0

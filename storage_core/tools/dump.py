"""``kafkalog dump``: what ``kafka-dump-log.sh`` (``kafka.tools.DumpLogSegments``) prints, line
for line, so the two outputs diff cleanly; with ``--json`` one JSON object per line instead.

The run (:func:`run`) hands each file to the dumper of its suffix (``.log`` and KRaft
``.checkpoint`` snapshots to :func:`dump_log`, ``.index``, ``.timeindex``, ``.snapshot``,
``.txnindex``); the lines of a batch and of a record are built by :func:`batch_line` and
:func:`record_line`, each as text and as a JSON object; the end-of-run reports Kafka prints on
stderr are collected in :class:`Reports`. Nothing is ever written: every file is opened
read-only. ``--partition DIR`` (not in Kafka's tool) dumps a partition's ``.log`` files and, with
the remote storage given as for ``tier``, first its remote segments below them, each fetched
(``remote_tier``) and dumped as a local ``.log``, named by its object.

Where ``dump`` differs from Kafka (all are cases where Kafka's tool dies with a stack trace or
does something a read-only tool should not):

* a corrupt batch or record (Kafka: exception, end of the run) is reported on stderr as
  ``kafkalog: <reason> (<file>, position P)``, the dump goes on with the next file, exit 1;
* a missing file (Kafka: ``NoSuchFileException``) is reported on stderr and the run goes on,
  exit 2; dumping a ``.timeindex`` whose ``.index`` is missing does not create the ``.index``
  (Kafka's ``OffsetIndex`` constructor does);
* an index entry whose position holds no complete batch (Kafka: ``NoSuchElementException``) is
  reported as a mismatch with log offset -1;
* a file name without a dot (``leader-epoch-checkpoint``; Kafka: ``StringIndexOutOfBounds``) is
  ``Ignoring unknown file``; a ``.log`` whose name is not a number prints no
  ``Log starting offset`` line (Kafka: ``NumberFormatException``);
* Kafka's maps of reports are hash maps (unspecified order across files); here files are
  reported in the order they were dumped, each file's entries in Kafka's order;
* a producer snapshot whose length is not 10 + 46 x count is refused (storage_core's reader),
  where Kafka ignores trailing bytes covered by a valid CRC; the stderr message is then ours;
* ``--max-message-size`` only bounds the batch an index entry points at, as in Kafka (the
  ``.log`` walk itself has no size limit);
* the ``--offsets-decoder`` / ``--transaction-log-decoder`` / ``--cluster-metadata-decoder`` /
  ``--remote-log-metadata-decoder`` / ``--share-group-state-decoder`` / ``--key-decoder-class``
  / ``--value-decoder-class`` renderers are not implemented: keys and values are printed as
  UTF-8 text (Kafka's default ``StringDecoder``).
"""

from __future__ import annotations

import argparse
import base64
import errno
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..common import INT_MAX
from ..errors import KafkaLogError, RemoteStorageError
from ..format import CREATE_TIME, LOG_APPEND_TIME, BatchInfo, CompressionType, LogInputStream, Record
from ..format.batch_header import RECORD_BATCH_OVERHEAD
from ..format.record_batch import compute_crc, decrement_sequence
from ..index import OffsetIndex, TimeIndex
from ..log import filename_prefix
from ..producer import decode_snapshot
from ..remote import RemoteLogSegmentFileType, RemoteLogSegmentMetadata
from .control_records import control_fields
from .files import (MAX_BATCH, IndexLookup, base_offset_of, batch_at_or_after,
                    batch_records, first_batch, legacy_crc_ok, mapped, offset_entries,
                    read_snapshot_file, record_offsets_and_max_timestamp, refuse_oversized_index,
                    segment_bases, sibling, time_entries, txn_index_entries)
from .output import Output, UsageError
from .remote_tier import RemoteTier

_TS_NAME = {-1: "NoTimestampType", CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}
# Snapshots.parse: <end offset, 20 digits>-<epoch, 10 digits>.checkpoint
_KRAFT_SNAPSHOT_NAME = re.compile(r"([0-9]{20})-([0-9]{10})")


# ------------------------------------------------------------------------------ arguments

def java_file(arg: str) -> str:
    """``new File(arg).toString``: repeated slashes collapsed, a trailing slash dropped."""
    out = re.sub("/+", "/", arg)
    return out[:-1] if len(out) > 1 and out.endswith("/") else out


def java_abs(path: str) -> str:
    """``File.getAbsolutePath``: the working directory prefixed, nothing resolved."""
    return path if path.startswith("/") else os.path.join(os.getcwd(), path)


def split_files(arg: str) -> list[str]:
    """Java's ``String.split(",")``: trailing empty strings are dropped."""
    parts = arg.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class DumpOptions:
    """The flags of one run, under DumpLogSegments' names."""

    print_data: bool
    deep: bool                              # --deep-iteration, implied by --print-data-log
    skip_metadata: bool
    index_sanity_check: bool
    verify_index_only: bool
    max_message_size: int
    max_bytes: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "DumpOptions":
        return cls(print_data=args.print_data_log,
                   deep=args.deep_iteration or args.print_data_log,
                   skip_metadata=args.skip_record_metadata,
                   index_sanity_check=args.index_sanity_check,
                   verify_index_only=args.verify_index_only,
                   max_message_size=args.max_message_size, max_bytes=args.max_bytes)


# ------------------------------------------------------------------------------ reports

Pairs = dict[str, list[tuple[int, int]]]


@dataclass
class Reports:
    """The reports DumpLogSegments prints after the last file, keyed by absolute path as Kafka
    keys them; files in the order they were dumped."""

    index_mismatches: Pairs = field(default_factory=dict)
    ts_mismatches: Pairs = field(default_factory=dict)
    ts_out_of_order: Pairs = field(default_factory=dict)
    ts_not_found: Pairs = field(default_factory=dict)
    non_consecutive: Pairs = field(default_factory=dict)

    @staticmethod
    def add(pairs: Pairs, path: str, first: int, second: int) -> None:
        pairs.setdefault(path, []).append((first, second))

    def write(self, out: Output) -> None:
        """Kafka's words on stderr; with ``--json`` each entry also as a JSON line on stdout."""
        for attr, heading, line, kind, keys, newest_first in _REPORT_FORMATS:
            for path, pairs in getattr(self, attr).items():
                out.error(heading.format(path=path))
                for first, second in (reversed(pairs) if newest_first else pairs):
                    out.error(line.format(first, second))
                    out.record(None, {"type": kind, "file": path, keys[0]: first, keys[1]: second})
        out.flush()


# per report: its attribute, Kafka's heading and entry line on stderr, the JSON type and keys,
# and whether Kafka prints the newest entry first (it prepends those to a List)
_REPORT_FORMATS = (
    ("index_mismatches", "Mismatches in :{path}", "  Index offset: {}, log offset: {}",
     "indexMismatch", ("indexOffset", "logOffset"), True),
    ("ts_mismatches", "Found timestamp mismatch in :{path}", "  Index timestamp: {}, log timestamp: {}",
     "timestampMismatch", ("indexTimestamp", "logTimestamp"), False),
    ("ts_out_of_order", "Found out of order timestamp in :{path}",
     "  Index timestamp: {}, Previously indexed timestamp: {}",
     "outOfOrderTimestamp", ("indexTimestamp", "previousIndexedTimestamp"), False),
    ("ts_not_found", "The following indexed offsets are not found in the log.",
     "Indexed offset: {}, found log offset: {}", "offsetNotFound", ("indexedOffset", "foundLogOffset"),
     False),
    ("non_consecutive", "Non-consecutive offsets in {path}", "  {} is followed by {}",
     "nonConsecutiveOffsets", ("offset", "followedBy"), True),
)


# ------------------------------------------------------------------------------ lines

def _bool(v: bool) -> str:
    return "true" if v else "false"


def _text(b: bytes) -> str:
    """Kafka's StringDecoder: UTF-8, malformed input replaced."""
    return b.decode("utf-8", errors="replace")


def _json_bytes(b: bytes) -> tuple[str, str]:
    """Bytes for JSON: UTF-8 text if they are valid UTF-8, else base64; and which it is."""
    try:
        return b.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(b).decode("ascii"), "base64"


def batch_line(buf: Any, b: BatchInfo, position: int, file: str) -> tuple[str, dict[str, Any]]:
    """The line DumpLogSegments prints for a batch (v2, or a v0/v1 shallow message), and the
    same fields as a JSON object."""
    obj: dict[str, Any] = {"type": "batch", "file": file}
    if b.header is not None:
        h = b.header
        valid = b.size >= RECORD_BATCH_OVERHEAD and compute_crc(buf, b.position, b.size) == h.crc
        horizon = h.base_timestamp if h.has_delete_horizon else None
        ts_type, max_ts, crc, codec = _TS_NAME[h.timestamp_type], h.max_timestamp, h.crc, h.compression
        head = (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} "
                f"count: {h.records_count} baseSequence: {h.base_sequence} "
                f"lastSequence: {h.last_sequence} producerId: {h.producer_id} "
                f"producerEpoch: {h.producer_epoch} "
                f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {_bool(h.is_transactional)} "
                f"isControl: {_bool(h.is_control)} deleteHorizonMs: "
                + ("OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"))
        obj.update(baseOffset=h.base_offset, lastOffset=h.last_offset,
                   count=h.records_count, baseSequence=h.base_sequence,
                   lastSequence=h.last_sequence, producerId=h.producer_id,
                   producerEpoch=h.producer_epoch,
                   partitionLeaderEpoch=h.partition_leader_epoch,
                   isTransactional=h.is_transactional, isControl=h.is_control,
                   deleteHorizonMs=horizon)
    else:
        e = b.entry
        assert e is not None                            # a v0/v1 message
        valid = legacy_crc_ok(buf, b.position, b.position + b.size, e.crc)
        ts_type, max_ts, crc, codec = _TS_NAME[e.timestamp_type], e.timestamp, e.crc, e.compression
        head = f"offset: {e.offset}"
        obj["offset"] = e.offset
    codec_name = CompressionType.from_id(codec).name_kafka
    obj.update(position=position, timestampType=ts_type, maxTimestamp=max_ts,
               size=b.size, magic=b.magic, compresscodec=codec_name, crc=crc,
               isvalid=valid)
    return (f"{head} position: {position} {ts_type}: {max_ts} size: {b.size} "
            f"magic: {b.magic} compresscodec: {codec_name} crc: {crc} "
            f"isvalid: {_bool(valid)}"), obj


def _timestamp_type(b: BatchInfo) -> int:
    if b.header is not None:
        return b.header.timestamp_type
    assert b.entry is not None                          # a v0/v1 message
    return b.entry.timestamp_type


def record_line(b: BatchInfo, r: Record, crc: int | None, crc_ok: bool | None, file: str,
                options: DumpOptions) -> tuple[str, dict[str, Any]]:
    """The ``| offset: ...`` line of a record under ``--deep-iteration`` (with its key and value
    under ``--print-data-log``), and the same fields as a JSON object."""
    control = b.header is not None and b.header.is_control
    ts_type = _TS_NAME[_timestamp_type(b)]
    key_size = -1 if r.key is None else len(r.key)
    value_size = -1 if r.value is None else len(r.value)
    obj: dict[str, Any] = {"type": "record", "file": file, "offset": r.offset}
    parts = []
    prefix = "| "
    if not options.skip_metadata:
        parts.append(f"{prefix}offset: {r.offset} {ts_type}: {r.timestamp} "
                     f"keySize: {key_size} valueSize: {value_size}")
        prefix = " "
        obj.update(timestampType=ts_type, timestamp=r.timestamp, keySize=key_size,
                   valueSize=value_size)
        if b.magic >= 2:
            parts.append(f" sequence: {r.sequence} headerKeys: "
                         f"[{','.join(h.key for h in r.headers)}]")
            obj.update(sequence=r.sequence, headerKeys=[h.key for h in r.headers])
        else:
            parts.append(f" isValid: {_bool(bool(crc_ok))} crc: {crc}")
            obj.update(isValid=crc_ok, crc=crc)
        if control:
            text, fields = control_fields(r)
            parts.append(text)
            obj.update(fields)
    if options.print_data and not control:
        if r.key is not None:
            parts.append(f"{prefix}key: {_text(r.key)}")
            prefix = " "
            obj["key"], obj["keyEncoding"] = _json_bytes(r.key)
        if r.value is not None:             # Java DumpLogSegments (4.3+): "| payload" with no key
            parts.append(f"{prefix}payload: {_text(r.value)}")
            obj["payload"], obj["payloadEncoding"] = _json_bytes(r.value)
    return "".join(parts), obj


# ------------------------------------------------------------------------------ the dumpers

@dataclass
class DumpRun:
    """One ``kafkalog dump`` run: its options, where its lines go, its reports, its status."""

    options: DumpOptions
    out: Output
    reports: Reports = field(default_factory=Reports)
    status: int = 0

    def fail(self, file: str, e: object, status: int = 1) -> None:
        """A file that could not be dumped: named on stderr (and as a JSON record); the run goes
        on with the next file and exits with ``status`` at least."""
        self.out.error(f"kafkalog: {e}" if str(file) in str(e) else f"kafkalog: {file}: {e}")
        self.out.record(None, {"type": "error", "file": file, "message": str(e)})
        self.status = max(self.status, status)


def _log_heading(run: DumpRun, file: str, start: int | None = None) -> None:
    """``Log starting offset`` of a segment (``start``, else from its name), or the end offset
    and epoch of a KRaft snapshot."""
    name = os.path.basename(file)
    if name.endswith(".log"):
        prefix = name.split(".")[0]
        if start is None and re.fullmatch(r"[0-9]+", prefix):
            start = int(prefix)
        if start is not None:
            run.out.record(f"Log starting offset: {start}",
                           {"type": "logStartingOffset", "file": file, "offset": start})
    elif name == "bootstrap.checkpoint":
        run.out.record("KRaft bootstrap snapshot", {"type": "kraftBootstrapSnapshot", "file": file})
    else:
        m = _KRAFT_SNAPSHOT_NAME.match(name)
        if m is None:
            raise KafkaLogError(f"{file} is not named <end offset (20 digits)>-<epoch "
                                f"(10 digits)>.checkpoint")
        offset, epoch = int(m[1]), int(m[2])
        run.out.record(f"Snapshot end offset: {offset}, epoch: {epoch}",
                       {"type": "snapshotEndOffset", "file": file, "offset": offset, "epoch": epoch})


def dump_log(run: DumpRun, file: str, name: str | None = None, start: int | None = None) -> None:
    """A ``.log`` segment or a KRaft ``.checkpoint`` snapshot: batch lines, record lines with
    deep iteration, and the invalid bytes after the last whole batch. A remote segment fetched
    to ``file`` is named ``name`` (its object) and starts at ``start`` (its metadata's)."""
    read, file = file, name or file
    _log_heading(run, file, start)
    options, out = run.options, run.out
    abs_path = java_abs(file) if name is None else name
    with mapped(read) as buf:
        end = min(len(buf), options.max_bytes)          # FileRecords.slice(0, maxBytes)
        valid = 0
        last_offset = -1
        for b in LogInputStream(buf, 0, end, source=file, max_batch_size=MAX_BATCH):
            out.record(*batch_line(buf, b, valid, file))
            if options.deep:
                for r, crc, crc_ok in batch_records(buf, b):
                    if last_offset != -1 and r.offset != last_offset + 1:
                        run.reports.add(run.reports.non_consecutive, abs_path, last_offset, r.offset)
                    last_offset = r.offset
                    out.record(*record_line(b, r, crc, crc_ok, file, options))
            valid += b.size
        trailing = end - valid
        if trailing > 0 and options.max_bytes == INT_MAX:
            out.record(f"Found {trailing} invalid bytes at the end of {os.path.basename(file)}",
                       {"type": "invalidBytes", "file": file, "bytes": trailing})


def _must_exist(path: str) -> None:
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def dump_index(run: DumpRun, file: str) -> None:
    """An offset index: its entries, each checked against the batch it points at."""
    options, out = run.options, run.out
    start = base_offset_of(os.path.basename(file))
    log_file = sibling(java_abs(file), ".log")
    _must_exist(log_file)                               # Kafka opens the log first
    _must_exist(file)
    refuse_oversized_index(file, OffsetIndex.ENTRY_SIZE)
    with OffsetIndex(file, start, writable=False) as index:
        if index.entries == 0:
            out.record(f"{file} is empty.", {"type": "indexEmpty", "file": file})
            return
        if options.index_sanity_check:
            index.sanity_check()
            out.record(f"{file} passed sanity check.", {"type": "sanityCheckPassed", "file": file})
            return
        entries = offset_entries(index)
    abs_path = java_abs(file)
    with mapped(log_file) as buf:
        for rel, position in entries:
            offset = start + rel
            found = first_batch(buf, position, position + options.max_message_size)
            log_offset = found.last_offset if found is not None else -1
            if log_offset != offset:
                run.reports.add(run.reports.index_mismatches, abs_path, offset, log_offset)
            if not options.verify_index_only:
                out.record(f"offset: {offset} position: {position}",
                           {"type": "indexEntry", "file": file, "offset": offset,
                            "position": position})


def dump_time_index(run: DumpRun, file: str) -> None:
    """A time index: its entries, each checked against the batch its offset names."""
    options, out, reports = run.options, run.out, run.reports
    start = base_offset_of(os.path.basename(file))
    abs_path = java_abs(file)
    _must_exist(file)
    refuse_oversized_index(file, TimeIndex.ENTRY_SIZE)
    with (mapped(sibling(abs_path, ".log")) as buf,
          OffsetIndex(sibling(abs_path, ".index"), start, writable=False) as index,
          TimeIndex(file, start, writable=False) as time_index):
        if options.index_sanity_check:
            time_index.sanity_check()
            out.record(f"{file} passed sanity check.", {"type": "sanityCheckPassed", "file": file})
            return
        lookup = IndexLookup(index, start)
        prev_ts = -1
        for ts, rel in time_entries(time_index):
            offset = start + rel
            found = batch_at_or_after(buf, lookup.position(offset), offset)
            if found is None:
                reports.add(reports.ts_not_found, abs_path, offset, -1)
            elif found.last_offset != offset:
                reports.add(reports.ts_not_found, abs_path, offset, found.last_offset)
            else:
                _, max_ts = record_offsets_and_max_timestamp(buf, found)
                if max_ts != ts:
                    reports.add(reports.ts_mismatches, abs_path, ts, max_ts)
                if prev_ts >= ts:
                    reports.add(reports.ts_out_of_order, abs_path, ts, prev_ts)
            if not options.verify_index_only:
                out.record(f"timestamp: {ts} offset: {offset}",
                           {"type": "timeIndexEntry", "file": file, "timestamp": ts,
                            "offset": offset})
            prev_ts = ts


def dump_producer_snapshot(run: DumpRun, file: str) -> None:
    """A producer snapshot: one line per producer (with its last batch when it has one)."""
    try:
        entries = decode_snapshot(read_snapshot_file(file))
    except KafkaLogError as e:
        run.out.error(str(e))                           # Kafka: System.err.println(getMessage)
        run.out.record(None, {"type": "error", "file": file, "message": str(e)})
        return
    for entry in entries:
        txn = entry.current_txn_first_offset
        txn_text = f"OptionalLong[{txn}]" if txn >= 0 else "OptionalLong.empty"
        line = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: {txn_text} "
                f"lastTimestamp: {entry.timestamp} ")
        obj: dict[str, Any] = {"type": "producerSnapshotEntry", "file": file,
                               "producerId": entry.producer_id, "producerEpoch": entry.producer_epoch,
                               "coordinatorEpoch": entry.coordinator_epoch,
                               "currentTxnFirstOffset": txn if txn >= 0 else None,
                               "lastTimestamp": entry.timestamp}
        if entry.last_offset >= 0:                      # Kafka keeps BatchMetadata then
            first_seq = decrement_sequence(entry.last_sequence, entry.offset_delta)
            line += (f"firstSequence: {first_seq} lastSequence: {entry.last_sequence} "
                     f"lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta} "
                     f"timestamp: {entry.timestamp}")
            obj.update(firstSequence=first_seq, lastSequence=entry.last_sequence,
                       lastOffset=entry.last_offset, offsetDelta=entry.offset_delta,
                       timestamp=entry.timestamp)
        run.out.record(line, obj)


def dump_txn_index(run: DumpRun, file: str) -> None:
    """A transaction index: one line per aborted transaction; a version above 0 is refused
    before anything is printed (Kafka's ``allAbortedTxns`` reads every entry first), in a
    first pass: the file is read a chunk at a time, never held whole."""
    for _, version, *_ in txn_index_entries(file):
        if version > 0:
            raise KafkaLogError(f"Unexpected aborted transaction version {version} in "
                                f"transaction index {java_abs(file)}, current version is 0")
    for _, version, pid, first, last, lso in txn_index_entries(file):
        run.out.record(f"version: {version} producerId: {pid} firstOffset: {first} "
                       f"lastOffset: {last} lastStableOffset: {lso}",
                       {"type": "abortedTxn", "file": file, "version": version, "producerId": pid,
                        "firstOffset": first, "lastOffset": last, "lastStableOffset": lso})


_DUMPERS: dict[str, Callable[[DumpRun, str], None]] = {
    ".log": dump_log, ".checkpoint": dump_log, ".index": dump_index,
    ".timeindex": dump_time_index, ".snapshot": dump_producer_snapshot,
    ".txnindex": dump_txn_index,
}


def dump_remote_segment(run: DumpRun, tier: RemoteTier, md: RemoteLogSegmentMetadata) -> None:
    """A remote segment's ``.log`` object, as a local ``.log`` is dumped (fetched in ranged
    reads to a temporary file); a missing or truncated object is an error naming it."""
    name = tier.object_name(md, RemoteLogSegmentFileType.SEGMENT)
    run.out.record(f"Dumping {name}", {"type": "dumping", "file": name, "remote": True, "store": tier.store,
                                       "startOffset": md.start_offset, "endOffset": md.end_offset})
    with tier.fetched(md, (RemoteLogSegmentFileType.SEGMENT,)) as fetched:
        problem = fetched.problems.get(RemoteLogSegmentFileType.SEGMENT)
        path = fetched.paths.get(RemoteLogSegmentFileType.SEGMENT)
        if path is not None:
            dump_log(run, str(path), name, md.start_offset)
        if problem is not None:
            run.fail(name, f"{name}: position {problem[0]}: {problem[1]}")


def dump_partition(run: DumpRun, directory: str, tier: RemoteTier | None) -> None:
    """A partition across both tiers: with remote storage configured, its finished remote
    segments below the first local segment (by start offset), then its local ``.log`` files."""
    d = Path(java_file(directory))
    if not d.is_dir():
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(d))
    bases = segment_bases(d)
    remote = [] if tier is None else [m for m in tier.segments(d) if not bases or m.start_offset < bases[0]]
    total = len(remote) + len(bases)
    for i, md in enumerate(remote, 1):
        assert tier is not None
        name = tier.object_name(md, RemoteLogSegmentFileType.SEGMENT)
        run.out.progress(i, total, f"{d.name}: remote segment {md.start_offset}-{md.end_offset}")
        try:
            dump_remote_segment(run, tier, md)
        except RemoteStorageError as e:          # the store did not answer: the rest is not read
            run.fail(name, e, status=2)
            return
        except (KafkaLogError, ValueError) as e:
            run.fail(name, e)
    for i, base in enumerate(bases, len(remote) + 1):
        file = str(d / (filename_prefix(base) + ".log"))
        run.out.progress(i, total, f"{d.name}: local segment {base}")
        run.out.record(f"Dumping {file}", {"type": "dumping", "file": file})
        _dump_file(run, file, dump_log)


def _dump_file(run: DumpRun, file: str, dumper: Callable[[DumpRun, str], None]) -> None:
    try:
        dumper(run, file)
    except BrokenPipeError:
        raise
    except OSError as e:
        run.fail(file, f"{e.strerror or e}: {e.filename or file}", status=2)
    except (KafkaLogError, ValueError) as e:
        run.fail(file, e)


def run(args: argparse.Namespace, out: Output) -> int:
    """``DumpLogSegments.main``: every file of ``--files`` in turn, then every partition of
    ``--partition`` (both tiers), then the reports. Exit 1 if a file was corrupt, 2 if one
    could not be read."""
    if not args.files and not args.partition:
        raise UsageError("dump needs --files or --partition")
    dump = DumpRun(DumpOptions.from_args(args), out)
    tier = RemoteTier.from_args(args)
    try:
        _run(dump, args, tier)
    finally:
        if tier is not None:
            tier.close()
    dump.reports.write(out)
    return dump.status


def _run(dump: DumpRun, args: argparse.Namespace, tier: RemoteTier | None) -> None:
    out = dump.out
    for directory in args.partition or []:
        try:
            dump_partition(dump, directory, tier)
        except OSError as e:
            dump.fail(directory, f"{e.strerror or e}: {e.filename or directory}", status=2)
        except KafkaLogError as e:
            dump.fail(directory, e)
    for arg in split_files(args.files) if args.files else []:
        file = java_file(arg)
        out.record(f"Dumping {file}", {"type": "dumping", "file": file})
        name = os.path.basename(file)
        dumper = _DUMPERS.get(name[name.rfind("."):] if "." in name else "")
        if dumper is None:
            out.error(f"Ignoring unknown file {file}")
            out.record(None, {"type": "ignored", "file": file})
            continue
        _dump_file(dump, file, dumper)

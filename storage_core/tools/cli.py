"""The ``kafkalog`` command: Kafka's log files without a broker.

``kafkalog dump --files a,b,... [--print-data-log] [--deep-iteration] [--skip-record-metadata]
[--index-sanity-check] [--verify-index-only] [--max-message-size N] [--max-bytes N] [--json]``
    Prints what ``kafka-dump-log.sh`` (``kafka.tools.DumpLogSegments``, trunk) prints, line for
    line, so the two outputs diff cleanly: ``.log`` (and KRaft ``.checkpoint`` snapshots, which
    Kafka dispatches to the same dumper), ``.index``, ``.timeindex``, ``.txnindex`` and
    ``.snapshot``; anything else is ``Ignoring unknown file <file>`` on stderr. The reports Kafka
    prints at the end go to stderr in Kafka's words (index mismatches, time-index errors,
    non-consecutive offsets). Nothing is ever written: every file is opened read-only.
    ``--json`` prints one JSON object per line instead (per batch, per record with deep
    iteration, per index/snapshot/transaction entry, and per report entry), with the fields of
    the text line; with ``--print-data-log`` keys and values are UTF-8 strings, or base64 when
    they are not valid UTF-8 (``keyEncoding`` / ``payloadEncoding`` say which).

``kafkalog describe DIR [--json]``
    A data dir (``topic-partition`` folders) or one partition folder, opened read-only: per
    partition the segments (base offset, size, first/last offset, index entries, max timestamp
    and first indexed timestamp from the time index, which index files exist), log start/end
    offsets, the checkpoint values, leader epochs and topic id; totals at the end.

``kafkalog verify PATH...``
    Every ``.log`` batch (CRC, lengths, records), every offset-index entry (it must point at the
    start of a batch whose last offset is the entry's offset, as DumpLogSegments
    ``--verify-index-only`` checks), every time-index entry (increasing, and found in the log
    with the timestamp it claims; unlike DumpLogSegments an entry may name a record inside a
    batch, as brokers before KIP-734's fix wrote the offset of the record with the largest
    timestamp), transaction indexes, producer snapshots (version, length, CRC) and checkpoint /
    ``partition.metadata`` files. Each problem names the file and the byte position (or line).
    Exit 0: all good; 1: problems found; 2: usage or I/O error.

``kafkalog recover DIR [--full]``
    Opens every partition writable with ``Log.open``, which validates everything after the
    recovery point and truncates an invalid tail (``--full`` first drops the partition from
    ``recovery-point-offset-checkpoint`` so every segment is validated), then reports what
    changed per partition and in total.

``kafkalog retention DIR [--topic T ...] [--now MS] [--purge] [--json]``
    Opens the data dir with a ``LogManager`` and applies retention to every partition by its
    topic's configuration (Kafka's defaults, e.g. ``retention.ms`` of 7 days, plus the overrides
    ``kafkalog config`` keeps): ``UnifiedLog.deleteOldSegments`` by log start offset, and with
    ``cleanup.policy`` containing ``delete`` by ``retention.bytes`` and ``retention.ms`` (judged at
    ``--now``). Prints per partition what was deleted and a summary. Deleted segments are renamed
    ``.deleted`` as Kafka does; ``--purge`` removes those files before exiting.

``kafkalog compact DIR [--topic T ...] [--now MS] [--dedupe-buffer-size N] [--force] [--purge] [--json]``
    Runs the log cleaner by hand over every partition of the compacted topics until none is
    cleanable by Kafka's rules (``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``; with
    ``--force`` any dirty byte is cleaned), one line per cleaning round, then a summary: bytes
    before and after, records removed, time. Exit 1 if a partition could not be cleaned.

``kafkalog config DIR --topic T [--set KEY=VALUE ...] [--delete KEY ...] [--list] [--json]``
    Shows or changes the topic's overrides kept in the data dir (``kafkalog-topic-configs.json``),
    under Kafka's names (``segment.bytes``, ``cleanup.policy``, ...), each change validated first;
    an unknown name or a bad value is refused naming the key (exit 2).

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
import bisect
import errno
import json
import logging
import mmap
import os
import re
import struct
import sys
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from ..checkpoint import (CLEAN_SHUTDOWN_FILE, CLEANER_OFFSET_CHECKPOINT, LEADER_EPOCH_CHECKPOINT,
                          LOG_START_OFFSET_CHECKPOINT, PARTITION_METADATA_FILE,
                          RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                          CorruptCheckpointError, OffsetCheckpointFile, parse_clean_shutdown,
                          parse_leader_epoch_checkpoint, parse_offset_checkpoint,
                          parse_partition_metadata, parse_topic_partition_dir, topic_id_to_str,
                          without_invalid_topics)
from ..data_files import file_problem, open_data_file
from ..errors import CorruptIndexError, CorruptRecordError, KafkaLogError
from ..format import legacy
from ..format.compression import CompressionType, decompress
from ..format.control import ControlRecordType, EndTransactionMarker
from ..format.log_input_stream import (BatchInfo, LogInputStream, batch_payload,
                                      default_max_decompressed, max_batch_read_size,
                                      max_records_per_batch, too_many_records)
from ..format.record_batch import (CREATE_TIME, LOG_APPEND_TIME, RECORD_BATCH_OVERHEAD, Record,
                                  compute_crc, decode_record, decrement_sequence)
from ..index import DEFAULT_MAX_INDEX_SIZE, OffsetIndex, TimeIndex
from ..index.abstract_index import index_oversized
from ..producer import ENTRY_SIZE as SNAPSHOT_ENTRY_SIZE
from ..producer import HEADER_SIZE as SNAPSHOT_HEADER_SIZE
from ..producer import PRODUCER_SNAPSHOT_VERSION, decode_snapshot

_TS_NAME = {-1: "NoTimestampType", CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}
INT_MAX = 2**31 - 1
_OFFSET_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                       REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)
_TXN_ENTRY = struct.Struct(">hqqqq")        # AbortedTxn: version, pid, first, last, lso (34 bytes)
_SEGMENT_NAME = re.compile(r"[0-9]{20}\.log")


# the tools read files without a topic config: Kafka's default limit, floored as any reader's is
_MAX_BATCH = max_batch_read_size()


class _UsageError(Exception):
    """A command line or I/O problem: exit status 2."""


# ============================================================================== shared helpers

@contextmanager
def _mapped(path: str | os.PathLike[str]) -> Iterator[memoryview | bytes]:
    """The file's bytes, mapped read-only (never written, never created; a FIFO or device
    refused by ``open_data_file``, never opened for reading)."""
    fd = open_data_file(path, os.O_RDONLY, follow_symlinks=True)
    try:
        if os.fstat(fd).st_size == 0:
            yield b""
            return
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:
            yield m
    finally:
        os.close(fd)


def _read_file(path: str | os.PathLike[str]) -> bytes:
    """The whole of a small file (txn index, snapshot, checkpoint), regular files only."""
    with _mapped(path) as buf:
        return bytes(buf)


def _java_file(arg: str) -> str:
    """``new File(arg).toString``: repeated slashes collapsed, a trailing slash dropped."""
    out = re.sub("/+", "/", arg)
    return out[:-1] if len(out) > 1 and out.endswith("/") else out


def _java_abs(path: str) -> str:
    """``File.getAbsolutePath``: the working directory prefixed, nothing resolved."""
    return path if path.startswith("/") else os.path.join(os.getcwd(), path)


def _split_files(arg: str) -> list[str]:
    """Java's ``String.split(",")``: trailing empty strings are dropped."""
    parts = arg.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _text(b: bytes) -> str:
    """Kafka's StringDecoder: UTF-8, malformed input replaced."""
    return b.decode("utf-8", errors="replace")


def _json_bytes(b: bytes) -> tuple[str, str]:
    try:
        return b.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(b).decode("ascii"), "base64"


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _codec_name(codec: int) -> str:
    return CompressionType.from_id(codec).name_kafka


def _base_offset_of(name: str) -> int:
    """``file.getName.split("\\\\.")(0).toLong``."""
    prefix = name.split(".")[0]
    if not re.fullmatch(r"[+-]?[0-9]+", prefix):
        raise KafkaLogError(f"{name} does not start with a base offset (For input string: "
                            f"\"{prefix}\")")
    return int(prefix)


def _first_batch(buf, pos: int, end: int) -> BatchInfo | None:
    """The complete batch starting at ``pos`` (None if there is none before ``end``)."""
    if pos < 0 or pos >= min(end, len(buf)):
        return None
    try:
        return LogInputStream(buf, pos, end, max_batch_size=_MAX_BATCH).next_batch()
    except CorruptRecordError:
        return None


def _records(buf, b: BatchInfo) -> list[tuple[Record, int | None, bool | None]]:
    """The records of a batch as Kafka's batch iterator yields them: the CRC is not checked (the
    batch line shows ``isvalid``). Legacy records come with their own (inner) crc and whether it
    holds; v2 records with ``None``."""
    limit = default_max_decompressed()
    if b.magic >= 2:
        h = b.header
        if h.records_count > max_records_per_batch(limit):
            raise too_many_records(h.records_count, limit, position=b.position, offset=h.base_offset)
        try:
            payload = batch_payload(buf, b, max_decompressed=limit)
        except CorruptRecordError as e:
            raise CorruptRecordError(f"compressed batch: {e.reason}", position=b.position,
                                     offset=h.base_offset) from e
        out = []
        pos = 0
        for i in range(h.records_count):
            if pos >= len(payload):
                raise CorruptRecordError(f"Got premature EOF after {i} of {h.records_count} "
                                         f"records", position=b.position, offset=h.base_offset)
            try:
                rec, pos = decode_record(payload, pos, h)
            except CorruptRecordError as e:
                raise CorruptRecordError(f"record {i}: {e.reason}", position=b.position,
                                         offset=h.base_offset) from e
            out.append((rec, None, None))
        if pos != len(payload):
            raise CorruptRecordError("Incorrect declared batch size, records still remaining in "
                                     "file", position=b.position, offset=h.base_offset)
        return out
    e = b.entry
    records = legacy.deep_records(e, max_decompressed=limit)
    if e.compression == 0:
        crcs = [(e.crc, zlib.crc32(memoryview(buf)[b.position + 16:b.position + b.size]) == e.crc)]
    else:
        inner = decompress(e.compression, e.value, magic=e.magic, max_size=limit)
        crcs, pos = [], 0
        while pos < len(inner):
            m = legacy.parse_entry(inner, pos, verify_crc=False)
            stop = pos + m.size_in_bytes
            crcs.append((m.crc, zlib.crc32(memoryview(inner)[pos + 16:stop]) == m.crc))
            pos = stop
    return [(r, crc, ok) for r, (crc, ok) in zip(records, crcs)]


def _max_record_timestamp(buf, b: BatchInfo) -> int:
    ts = -1
    for r, _, _ in _records(buf, b):
        ts = max(ts, r.timestamp)
    return ts


# ---------------------------------------------------------------- KRaft control records (JSON)

class _Reader:
    """Just enough of Kafka's flexible message format for the KRaft control records."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("message truncated")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def uint16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise ValueError("null string")
        return self.take(n).decode("utf-8")

    def uuid(self) -> str:
        return base64.urlsafe_b64encode(self.take(16)).rstrip(b"=").decode("ascii")

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def compact_array(self, item: Callable[[], Any]) -> list[Any]:
        n = self.uvarint() - 1
        if n < 0:
            raise ValueError("null array")
        return [item() for _ in range(n)]


def _kraft_control_json(ctype: ControlRecordType, value: bytes | None) -> str:
    """The ``*JsonConverter.write`` output (Jackson, compact) of a KRaft control record."""
    r = _Reader(value or b"")
    obj: dict[str, Any] = {"version": r.int16()}
    if ctype is ControlRecordType.SNAPSHOT_HEADER:
        obj["lastContainedLogTimestamp"] = r.int64()
    elif ctype is ControlRecordType.KRAFT_VERSION:
        obj["kRaftVersion"] = r.int16()
    elif ctype is ControlRecordType.KRAFT_VOTERS:
        def endpoint() -> dict[str, Any]:
            e = {"name": r.compact_string(), "host": r.compact_string(), "port": r.uint16()}
            r.tags()
            return e

        def voter() -> dict[str, Any]:
            v: dict[str, Any] = {"voterId": r.int32(), "voterDirectoryId": r.uuid(),
                                 "endpoints": r.compact_array(endpoint)}
            feature = {"minSupportedVersion": r.int16(), "maxSupportedVersion": r.int16()}
            r.tags()
            v["kRaftVersionFeature"] = feature
            r.tags()
            return v

        obj["voters"] = r.compact_array(voter)
    r.tags()
    return json.dumps(obj, separators=(",", ":"))


_KRAFT_LABEL = {ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
                ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
                ControlRecordType.KRAFT_VERSION: "KRaftVersion",
                ControlRecordType.KRAFT_VOTERS: "KRaftVoters"}


def _control_fields(r: Record) -> tuple[str, dict[str, Any]]:
    """What DumpLogSegments appends to a control record's line, and the same as JSON fields."""
    ctype = ControlRecordType.parse(r.key)          # checks the key's size and version
    type_id = struct.unpack_from(">h", r.key, 2)[0]
    if ctype in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        m = EndTransactionMarker.deserialize(r.key, r.value)
        return (f" endTxnMarker: {ctype.name} coordinatorEpoch: {m.coordinator_epoch}",
                {"endTxnMarker": ctype.name, "coordinatorEpoch": m.coordinator_epoch})
    if ctype in _KRAFT_LABEL:
        try:
            text = _kraft_control_json(ctype, r.value)
            return f" {_KRAFT_LABEL[ctype]} {text}", {_KRAFT_LABEL[ctype]: json.loads(text)}
        except (ValueError, UnicodeDecodeError):
            pass                                     # unreadable: shown by its type, as below
    return (f" controlType: {ctype.name}({type_id})",
            {"controlType": ctype.name, "controlTypeId": type_id})


# ============================================================================== dump

class _Dump:
    """One ``kafkalog dump`` run (``DumpLogSegments.main``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.json = args.json
        self.print_data = args.print_data_log
        self.deep = args.deep_iteration or args.print_data_log
        self.status = 0
        self.out = sys.stdout
        # the end-of-run reports, keyed by absolute path as Kafka keys them
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.ts_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.ts_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.ts_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, list[tuple[int, int]]] = {}

    # -- output ---------------------------------------------------------------------------------

    def emit(self, text: str, obj: dict[str, Any]) -> None:
        """One line of output: ``text``, or ``obj`` as JSON with --json."""
        if self.json:
            self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        else:
            self.out.write(text + "\n")

    def err(self, text: str) -> None:
        self.out.flush()
        print(text, file=sys.stderr, flush=True)

    def fail(self, file: str, e: object, status: int = 1) -> None:
        self.err(f"kafkalog: {e}" if str(file) in str(e) else f"kafkalog: {file}: {e}")
        if self.json:
            self.emit("", {"type": "error", "file": file, "message": str(e)})
        self.status = max(self.status, status)

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> int:
        for arg in _split_files(self.args.files):
            file = _java_file(arg)
            self.emit(f"Dumping {file}", {"type": "dumping", "file": file})
            name = os.path.basename(file)
            suffix = name[name.rfind("."):] if "." in name else ""
            try:
                if suffix in (".log", ".checkpoint"):
                    self.dump_log(file)
                elif suffix == ".index":
                    self.dump_index(file)
                elif suffix == ".timeindex":
                    self.dump_time_index(file)
                elif suffix == ".snapshot":
                    self.dump_producer_snapshot(file)
                elif suffix == ".txnindex":
                    self.dump_txn_index(file)
                else:
                    self.err(f"Ignoring unknown file {file}")
                    if self.json:
                        self.emit("", {"type": "ignored", "file": file})
            except BrokenPipeError:
                raise
            except OSError as e:
                self.fail(file, f"{e.strerror or e}: {e.filename or file}", status=2)
            except (KafkaLogError, ValueError) as e:
                self.fail(file, e)
        self.report()
        return self.status

    def report(self) -> None:
        """The stderr reports DumpLogSegments prints after the last file, in its words."""
        for path, pairs in self.index_mismatches.items():
            self.err(f"Mismatches in :{path}")
            for index_offset, log_offset in reversed(pairs):      # Kafka prepends to a List
                self.err(f"  Index offset: {index_offset}, log offset: {log_offset}")
                if self.json:
                    self.emit("", {"type": "indexMismatch", "file": path,
                                   "indexOffset": index_offset, "logOffset": log_offset})
        for path, pairs in self.ts_mismatches.items():
            self.err(f"Found timestamp mismatch in :{path}")
            for index_ts, log_ts in pairs:
                self.err(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}")
                if self.json:
                    self.emit("", {"type": "timestampMismatch", "file": path,
                                   "indexTimestamp": index_ts, "logTimestamp": log_ts})
        for path, pairs in self.ts_out_of_order.items():
            self.err(f"Found out of order timestamp in :{path}")
            for index_ts, prev_ts in pairs:
                self.err(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}")
                if self.json:
                    self.emit("", {"type": "outOfOrderTimestamp", "file": path,
                                   "indexTimestamp": index_ts, "previousIndexedTimestamp": prev_ts})
        for path, pairs in self.ts_not_found.items():
            self.err("The following indexed offsets are not found in the log.")
            for indexed, found in pairs:
                self.err(f"Indexed offset: {indexed}, found log offset: {found}")
                if self.json:
                    self.emit("", {"type": "offsetNotFound", "file": path,
                                   "indexedOffset": indexed, "foundLogOffset": found})
        for path, pairs in self.non_consecutive.items():
            self.err(f"Non-consecutive offsets in {path}")
            for first, second in reversed(pairs):                  # Kafka prepends to a List
                self.err(f"  {first} is followed by {second}")
                if self.json:
                    self.emit("", {"type": "nonConsecutiveOffsets", "file": path,
                                   "offset": first, "followedBy": second})
        self.out.flush()

    # -- .log / .checkpoint ---------------------------------------------------------------------

    def dump_log(self, file: str) -> None:
        name = os.path.basename(file)
        if name.endswith(".log"):
            prefix = name.split(".")[0]
            if prefix.isdigit():
                self.emit(f"Log starting offset: {int(prefix)}",
                          {"type": "logStartingOffset", "file": file, "offset": int(prefix)})
        elif name == "bootstrap.checkpoint":
            self.emit("KRaft bootstrap snapshot", {"type": "kraftBootstrapSnapshot", "file": file})
        else:
            # Snapshots.parse: <endOffset:020d>-<epoch:010d>.checkpoint
            if not (name[:20].isdigit() and name[20:21] == "-" and name[21:31].isdigit()):
                raise KafkaLogError(f"{file} is not named <end offset (20 digits)>-<epoch "
                                    f"(10 digits)>.checkpoint")
            offset, epoch = int(name[:20]), int(name[21:31])
            self.emit(f"Snapshot end offset: {offset}, epoch: {epoch}",
                      {"type": "snapshotEndOffset", "file": file, "offset": offset,
                       "epoch": epoch})
        max_bytes = self.args.max_bytes
        abs_path = _java_abs(file)
        with _mapped(file) as buf:
            end = min(len(buf), max_bytes)          # FileRecords.slice(0, maxBytes)
            valid = 0
            last_offset = -1
            for b in LogInputStream(buf, 0, end, source=file, max_batch_size=_MAX_BATCH):
                self.batch_line(buf, b, valid, file)
                if self.deep:
                    for r, crc, crc_ok in _records(buf, b):
                        if last_offset != -1 and r.offset != last_offset + 1:
                            self.non_consecutive.setdefault(abs_path, []).append(
                                (last_offset, r.offset))
                        last_offset = r.offset
                        self.record_line(b, r, crc, crc_ok, file)
                valid += b.size
            trailing = end - valid
            if trailing > 0 and max_bytes == INT_MAX:
                self.emit(f"Found {trailing} invalid bytes at the end of {name}",
                          {"type": "invalidBytes", "file": file, "bytes": trailing})

    def batch_line(self, buf, b: BatchInfo, position: int, file: str) -> None:
        if b.header is not None:
            h = b.header
            valid = b.size >= RECORD_BATCH_OVERHEAD and compute_crc(buf, b.position, b.size) == h.crc
            horizon = h.base_timestamp if h.has_delete_horizon else None
            ts_type, max_ts, crc, codec = _TS_NAME[h.timestamp_type], h.max_timestamp, h.crc, h.compression
        else:
            e = b.entry
            valid = zlib.crc32(memoryview(buf)[b.position + 16:b.position + b.size]) == e.crc
            ts_type, max_ts, crc, codec = _TS_NAME[e.timestamp_type], e.timestamp, e.crc, e.compression
        codec_name = _codec_name(codec)
        if self.json:
            obj: dict[str, Any] = {"type": "batch", "file": file}
            if b.header is not None:
                obj.update(baseOffset=h.base_offset, lastOffset=h.last_offset,
                           count=h.records_count, baseSequence=h.base_sequence,
                           lastSequence=h.last_sequence, producerId=h.producer_id,
                           producerEpoch=h.producer_epoch,
                           partitionLeaderEpoch=h.partition_leader_epoch,
                           isTransactional=h.is_transactional, isControl=h.is_control,
                           deleteHorizonMs=horizon)
            else:
                obj["offset"] = b.entry.offset
            obj.update(position=position, timestampType=ts_type, maxTimestamp=max_ts,
                       size=b.size, magic=b.magic, compresscodec=codec_name, crc=crc,
                       isvalid=valid)
            self.emit("", obj)
            return
        if b.header is not None:
            head = (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} "
                    f"count: {h.records_count} baseSequence: {h.base_sequence} "
                    f"lastSequence: {h.last_sequence} producerId: {h.producer_id} "
                    f"producerEpoch: {h.producer_epoch} "
                    f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                    f"isTransactional: {_bool(h.is_transactional)} "
                    f"isControl: {_bool(h.is_control)} deleteHorizonMs: "
                    + ("OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"))
        else:
            head = f"offset: {b.entry.offset}"
        self.out.write(f"{head} position: {position} {ts_type}: {max_ts} size: {b.size} "
                       f"magic: {b.magic} compresscodec: {codec_name} crc: {crc} "
                       f"isvalid: {_bool(valid)}\n")

    def record_line(self, b: BatchInfo, r: Record, crc: int | None, crc_ok: bool | None,
                    file: str) -> None:
        control = b.header is not None and b.header.is_control
        ts_type = _TS_NAME[b.header.timestamp_type if b.header is not None
                           else b.entry.timestamp_type]
        key_size = -1 if r.key is None else len(r.key)
        value_size = -1 if r.value is None else len(r.value)
        skip = self.args.skip_record_metadata
        if self.json:
            obj: dict[str, Any] = {"type": "record", "file": file, "offset": r.offset}
            if not skip:
                obj.update(timestampType=ts_type, timestamp=r.timestamp, keySize=key_size,
                           valueSize=value_size)
                if b.magic >= 2:
                    obj.update(sequence=r.sequence, headerKeys=[h.key for h in r.headers])
                else:
                    obj.update(isValid=crc_ok, crc=crc)
                if control:
                    obj.update(_control_fields(r)[1])
            if self.print_data and not control:
                if r.key is not None:
                    obj["key"], obj["keyEncoding"] = _json_bytes(r.key)
                if r.value is not None:
                    obj["payload"], obj["payloadEncoding"] = _json_bytes(r.value)
            self.emit("", obj)
            return
        parts = []
        prefix = "| "
        if not skip:
            parts.append(f"{prefix}offset: {r.offset} {ts_type}: {r.timestamp} "
                         f"keySize: {key_size} valueSize: {value_size}")
            prefix = " "
            if b.magic >= 2:
                parts.append(f" sequence: {r.sequence} headerKeys: "
                             f"[{','.join(h.key for h in r.headers)}]")
            else:
                parts.append(f" isValid: {_bool(bool(crc_ok))} crc: {crc}")
            if control:
                parts.append(_control_fields(r)[0])
        if self.print_data and not control:
            if r.key is not None:
                parts.append(f"{prefix}key: {_text(r.key)}")
                prefix = " "
            if r.value is not None:             # Java DumpLogSegments (4.3+): "| payload" with no key
                parts.append(f"{prefix}payload: {_text(r.value)}")
        parts.append("\n")
        self.out.write("".join(parts))

    # -- .index ---------------------------------------------------------------------------------

    def dump_index(self, file: str) -> None:
        name = os.path.basename(file)
        start = _base_offset_of(name)
        log_file = os.path.join(os.path.dirname(_java_abs(file)), name.split(".")[0] + ".log")
        if not os.path.exists(log_file):             # Kafka opens the log first
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), log_file)
        if not os.path.exists(file):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), file)
        _refuse_oversized_index(file, OffsetIndex.ENTRY_SIZE)
        with OffsetIndex(file, start, writable=False) as index:
            if index.entries == 0:
                self.emit(f"{file} is empty.", {"type": "indexEmpty", "file": file})
                return
            if self.args.index_sanity_check:
                index.sanity_check()
                self.emit(f"{file} passed sanity check.",
                          {"type": "sanityCheckPassed", "file": file})
                return
            entries = index.entries_array().tolist()
        abs_path = _java_abs(file)
        max_size = self.args.max_message_size
        with _mapped(log_file) as buf:
            for i, (rel, position) in enumerate(entries):
                offset = start + rel
                # a preallocated index left by a crash ends with zero entries: stop at the first
                if offset == start and i > 0:
                    return
                found = _first_batch(buf, position, position + max_size)
                log_offset = found.last_offset if found is not None else -1
                if log_offset != offset:
                    self.index_mismatches.setdefault(abs_path, []).append((offset, log_offset))
                if not self.args.verify_index_only:
                    self.emit(f"offset: {offset} position: {position}",
                              {"type": "indexEntry", "file": file, "offset": offset,
                               "position": position})

    # -- .timeindex -----------------------------------------------------------------------------

    def dump_time_index(self, file: str) -> None:
        name = os.path.basename(file)
        start = _base_offset_of(name)
        parent = os.path.dirname(_java_abs(file))
        log_file = os.path.join(parent, name.split(".")[0] + ".log")
        index_file = os.path.join(parent, name.split(".")[0] + ".index")
        abs_path = _java_abs(file)
        if not os.path.exists(file):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), file)
        _refuse_oversized_index(file, TimeIndex.ENTRY_SIZE)
        with (_mapped(log_file) as buf,
              OffsetIndex(index_file, start, writable=False) as index,
              TimeIndex(file, start, writable=False) as time_index):
            if self.args.index_sanity_check:
                time_index.sanity_check()
                self.emit(f"{file} passed sanity check.",
                          {"type": "sanityCheckPassed", "file": file})
                return
            lookup = _IndexLookup(index, start)
            prev_ts = -1
            for i, (ts, rel) in enumerate(time_index.entries_array().tolist()):
                offset = start + rel
                if offset == start and i > 0:
                    return
                found = None
                for b in LogInputStream(buf, lookup.position(offset), len(buf), max_batch_size=_MAX_BATCH):
                    if b.last_offset >= offset:
                        found = b
                        break
                if found is None:
                    self.ts_not_found.setdefault(abs_path, []).append((offset, -1))
                elif found.last_offset != offset:
                    self.ts_not_found.setdefault(abs_path, []).append((offset, found.last_offset))
                else:
                    max_ts = _max_record_timestamp(buf, found)
                    if max_ts != ts:
                        self.ts_mismatches.setdefault(abs_path, []).append((ts, max_ts))
                    if prev_ts >= ts:
                        self.ts_out_of_order.setdefault(abs_path, []).append((ts, prev_ts))
                if not self.args.verify_index_only:
                    self.emit(f"timestamp: {ts} offset: {offset}",
                              {"type": "timeIndexEntry", "file": file, "timestamp": ts,
                               "offset": offset})
                prev_ts = ts

    # -- .snapshot ------------------------------------------------------------------------------

    def dump_producer_snapshot(self, file: str) -> None:
        data = _read_file(file)
        try:
            entries = decode_snapshot(data)
        except KafkaLogError as e:
            self.err(str(e))                                 # Kafka: System.err.println(getMessage)
            if self.json:
                self.emit("", {"type": "error", "file": file, "message": str(e)})
            return
        for e in entries:
            txn = e.current_txn_first_offset
            txn_text = f"OptionalLong[{txn}]" if txn >= 0 else "OptionalLong.empty"
            line = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} "
                    f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: {txn_text} "
                    f"lastTimestamp: {e.timestamp} ")
            obj: dict[str, Any] = {"type": "producerSnapshotEntry", "file": file,
                                   "producerId": e.producer_id, "producerEpoch": e.producer_epoch,
                                   "coordinatorEpoch": e.coordinator_epoch,
                                   "currentTxnFirstOffset": txn if txn >= 0 else None,
                                   "lastTimestamp": e.timestamp}
            if e.last_offset >= 0:                           # Kafka keeps BatchMetadata then
                first_seq = decrement_sequence(e.last_sequence, e.offset_delta)
                line += (f"firstSequence: {first_seq} lastSequence: {e.last_sequence} "
                         f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} "
                         f"timestamp: {e.timestamp}")
                obj.update(firstSequence=first_seq, lastSequence=e.last_sequence,
                           lastOffset=e.last_offset, offsetDelta=e.offset_delta,
                           timestamp=e.timestamp)
            self.emit(line, obj)

    # -- .txnindex ------------------------------------------------------------------------------

    def dump_txn_index(self, file: str) -> None:
        data = _read_file(file)
        txns = []
        for pos in range(0, len(data) - len(data) % _TXN_ENTRY.size, _TXN_ENTRY.size):
            _, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, pos)
            version = struct.unpack_from(">b", data, pos)[0]     # AbortedTxn.version(): one byte
            if version > 0:
                raise KafkaLogError(f"Unexpected aborted transaction version {version} in "
                                    f"transaction index {_java_abs(file)}, current version is 0")
            txns.append((version, pid, first, last, lso))
        for version, pid, first, last, lso in txns:
            self.emit(f"version: {version} producerId: {pid} firstOffset: {first} "
                      f"lastOffset: {last} lastStableOffset: {lso}",
                      {"type": "abortedTxn", "file": file, "version": version, "producerId": pid,
                       "firstOffset": first, "lastOffset": last, "lastStableOffset": lso})


class _IndexLookup:
    """``OffsetIndex.lookup`` over the entries before any zero-filled tail."""

    def __init__(self, index: OffsetIndex, base: int) -> None:
        arr = index.entries_array()
        offsets = (arr["relative_offset"].astype("int64") + base).tolist()
        positions = arr["position"].tolist()
        n = next((i for i in range(1, len(offsets)) if offsets[i] == base), len(offsets))
        self.offsets, self.positions = offsets[:n], positions[:n]

    def position(self, offset: int) -> int:
        slot = bisect.bisect_right(self.offsets, offset) - 1
        return 0 if slot < 0 else self.positions[slot]


def cmd_dump(args: argparse.Namespace) -> int:
    return _Dump(args).run()


# ============================================================================== verify

class _Problems:
    """Problems found in one file: each with its position (byte or line) and reason."""

    LIMIT = 20

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[str] = []
        self.count = 0

    def add(self, where: str, reason: str) -> None:
        self.count += 1
        if len(self.items) < self.LIMIT:
            self.items.append(f"{self.path}: {where}: {reason}")


def _verify_segment_log(path: Path, p: _Problems) -> str:
    """A segment's ``.log`` held to the one definition of valid that recovery applies
    (``LogSegment.valid_batches``, docs/operations.md "What valid means"): the first invalid
    batch, or bytes after the last whole batch, are what recovery truncates, so they are
    reported with their position; offsets past 32-bit relative offsets are a split."""
    from ..config import LogConfig
    from ..errors import OffsetOverflowError
    from ..format.log_input_stream import batch_records
    from ..log import LogSegment

    base = int(path.name[:20])
    later = sorted(int(f.name[:20]) for f in path.parent.iterdir()
                   if _SEGMENT_NAME.fullmatch(f.name) and int(f.name[:20]) > base)
    seg = LogSegment.open(path.parent, base, LogConfig(), writable=False, preallocate=False)
    batches = records = end = 0
    try:
        for b, chunk, at in seg.valid_batches(next_base_offset=later[0] if later else None):
            batches += 1
            records += (b.header.records_count if b.header is not None
                        else len(batch_records(chunk, b)))
            end = at + b.position + b.size
    except CorruptRecordError as e:
        p.count += 1
        p.items.append(f"{e} (recovery truncates the log here)")
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


def _verify_log(path: Path, p: _Problems) -> str:
    from ..format.log_input_stream import batch_records

    if _SEGMENT_NAME.fullmatch(path.name):
        return _verify_segment_log(path, p)
    with _mapped(path) as buf:
        stream = LogInputStream(buf, verify=True, source=str(path), max_batch_size=_MAX_BATCH)
        batches = records = 0
        try:
            for b in stream:
                records += len(batch_records(buf, b))
                batches += 1
        except CorruptRecordError as e:
            p.count += 1
            p.items.append(str(e if e.source else e.located(source=str(path))))  # file, position
            return ""
        except KafkaLogError as e:                   # e.g. an unknown compression codec
            p.add(f"position {stream.position}", str(e))
            return ""
        tail = f", {stream.end - stream.position} trailing bytes" if stream.partial else ""
        return f"{batches} batches, {records} records{tail}"


def _segment_log(path: Path, p: _Problems) -> tuple[int, Path] | None:
    try:
        base = _base_offset_of(path.name)
    except KafkaLogError as e:
        p.add("name", str(e))
        return None
    log_path = path.with_name(path.name.split(".")[0] + ".log")
    if not log_path.exists():
        p.add("whole file", f"no matching log file {log_path.name}")
        return None
    return base, log_path


def _max_index_size_of(path: Path) -> int:
    """``segment.index.bytes`` of the topic of an index file: its override in the data
    directory's ``kafkalog-topic-configs.json``, else the default."""
    from ..server import ConfigRepository
    try:
        topic, _ = parse_topic_partition_dir(path.parent.name)
        return ConfigRepository([path.parent.parent]).topic_config(topic).segment_index_bytes
    except (KafkaLogError, OSError, ValueError):
        return DEFAULT_MAX_INDEX_SIZE


def _oversized_index_problem(path: Path, entry_size: int) -> str | None:
    """Why an index file is not read (longer than its topic's ``segment.index.bytes`` allows, so
    no writer made it; a writable open rebuilds it), or None. Such a file is never loaded."""
    size = path.stat().st_size
    limit = _max_index_size_of(path)
    if not index_oversized(size, limit, entry_size):
        return None
    return (f"{path} is oversized: {size} bytes, more than segment.index.bytes "
            f"({limit}) allows; not read (a writable open rebuilds it)")


def _refuse_oversized_index(file: str, entry_size: int) -> None:
    problem = _oversized_index_problem(Path(file), entry_size)
    if problem is not None:
        raise CorruptIndexError(problem)


def _verify_offset_index(path: Path, p: _Problems) -> str:
    seg = _segment_log(path, p)
    if seg is None:
        return ""
    oversized = _oversized_index_problem(path, OffsetIndex.ENTRY_SIZE)
    if oversized is not None:
        p.add("whole file", oversized)
        return ""
    base, log_path = seg
    with OffsetIndex(path, base, writable=False) as index:
        try:
            index.sanity_check()
        except KafkaLogError as e:
            p.add(f"position {index.entries * 8}", str(e))
        entries = index.entries_array().tolist()
    checked = 0
    with _mapped(log_path) as buf:
        prev_offset = prev_pos = None
        for i, (rel, position) in enumerate(entries):
            offset = base + rel
            if offset == base and i > 0:
                break                                       # zero-filled tail (DumpLogSegments)
            where = f"position {i * 8} (entry {i})"
            checked += 1
            if prev_offset is not None and (offset <= prev_offset or position <= prev_pos):
                p.add(where, f"entry (offset {offset}, position {position}) does not increase "
                             f"on the previous one (offset {prev_offset}, position {prev_pos})")
            prev_offset, prev_pos = offset, position
            if position >= len(buf):
                p.add(where, f"offset {offset} points at position {position}, past the end of "
                             f"{log_path.name} ({len(buf)} bytes)")
                continue
            found = _first_batch(buf, position, len(buf))
            if found is None:
                p.add(where, f"offset {offset} points at position {position} of {log_path.name},"
                             f" where no complete batch starts")
            elif found.last_offset != offset:
                p.add(where, f"Index offset: {offset}, log offset: {found.last_offset} (the "
                             f"batch at position {position} of {log_path.name})")
    return f"{checked} entries"


def _verify_time_index(path: Path, p: _Problems) -> str:
    seg = _segment_log(path, p)
    if seg is None:
        return ""
    oversized = _oversized_index_problem(path, TimeIndex.ENTRY_SIZE)
    if oversized is not None:
        p.add("whole file", oversized)
        return ""
    base, log_path = seg
    with (TimeIndex(path, base, writable=False) as tindex,
          OffsetIndex(path.with_name(path.name.split(".")[0] + ".index"), base,
                      writable=False) as index):
        try:
            tindex.sanity_check()
        except KafkaLogError as e:
            p.add(f"position {tindex.entries * 12}", str(e))
        entries = tindex.entries_array().tolist()
        lookup = _IndexLookup(index, base)
    checked = 0
    with _mapped(log_path) as buf:
        prev_ts, prev_offset = -1, None
        for i, (ts, rel) in enumerate(entries):
            offset = base + rel
            if offset == base and i > 0:
                break
            where = f"position {i * 12} (entry {i})"
            checked += 1
            if prev_ts >= ts:
                p.add(where, f"Index timestamp: {ts}, Previously indexed timestamp: {prev_ts} "
                             f"(out of order)")
            if prev_offset is not None and offset < prev_offset:
                p.add(where, f"offset {offset} is below the previous entry's {prev_offset}")
            prev_ts, prev_offset = ts, offset
            found = None
            try:
                start = lookup.position(offset)
                first = _first_batch(buf, start, len(buf))
                if first is not None and first.base_offset > offset:
                    start = 0          # the offset index is wrong here (reported on its own)
                for b in LogInputStream(buf, start, len(buf), max_batch_size=_MAX_BATCH):
                    if b.last_offset >= offset:
                        found = b
                        break
            except KafkaLogError as e:
                p.add(where, f"offset {offset} cannot be looked up: {e}")
                continue
            if found is None:
                p.add(where, f"Indexed offset: {offset}, found log offset: -1 (not found in "
                             f"{log_path.name})")
                continue
            try:
                records = _records(buf, found)
            except (KafkaLogError, ValueError) as e:
                p.add(where, f"the batch of offset {offset} cannot be read: {e}")
                continue
            # DumpLogSegments wants the batch's last offset; brokers before KIP-734's fix wrote
            # the offset of the record with the largest timestamp, inside the batch: accepted
            if all(r.offset != offset for r, _, _ in records) and found.last_offset != offset:
                p.add(where, f"Indexed offset: {offset}, found log offset: {found.last_offset} "
                             f"(not found in {log_path.name})")
                continue
            max_ts = max((r.timestamp for r, _, _ in records), default=-1)
            if max_ts != ts:
                p.add(where, f"Index timestamp: {ts}, log timestamp: {max_ts} (the batch at "
                             f"position {found.position} of {log_path.name})")
    return f"{checked} entries"


def _verify_txn_index(path: Path, p: _Problems) -> str:
    try:
        base = _base_offset_of(path.name)
    except KafkaLogError as e:
        p.add("name", str(e))
        return ""
    data = _read_file(path)
    size = _TXN_ENTRY.size
    n = len(data) // size
    prev_last = None
    for i in range(n):
        pos = i * size
        _, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, pos)
        version = struct.unpack_from(">b", data, pos)[0]
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


def _verify_snapshot(path: Path, p: _Problems) -> str:
    data = _read_file(path)
    try:
        entries = decode_snapshot(data)
    except KafkaLogError as e:
        # where the file goes wrong, checked in the order decode_snapshot checks
        if len(data) < SNAPSHOT_HEADER_SIZE or struct.unpack_from(">h", data)[0] != \
                PRODUCER_SNAPSHOT_VERSION:
            where = "position 0"
        else:
            count = struct.unpack_from(">i", data, 6)[0]
            expected = SNAPSHOT_HEADER_SIZE + SNAPSHOT_ENTRY_SIZE * count
            if count < 0 or len(data) != expected:
                where = "position 6 (entry count)"
            else:
                where = "position 2 (crc)"
        p.add(where, str(e))
        return ""
    return f"{len(entries)} producers"


def _verify_text(path: Path, p: _Problems,
                 parse: Callable[[str], Any], describe: Callable[[Any], str]) -> str:
    data = _read_file(path)
    try:
        text = data.decode("utf-8")
        return describe(parse(text))
    except UnicodeDecodeError as e:
        p.add(f"position {e.start}", "not UTF-8")
    except CorruptCheckpointError as e:
        p.add(f"line {e.line}" if e.line is not None else "position 0", e.reason)
    return ""


def _check_offset_entries(path: Path, offsets: dict, p: _Problems) -> str:
    """The entries of an offset checkpoint as a load uses them: a topic name Kafka refuses
    (``Topic.validate``; ``../x`` would name a path outside the data dir) is ignored by every
    load, and a ``log-start-offset-checkpoint`` entry past its partition's log end offset makes
    the load delete every segment of it (LogLoader: "Deleting all segments because
    logEndOffset is smaller than logStartOffset"); both are reported."""
    from ..checkpoint import validate_topic_name
    from ..config import LogConfig
    from ..log import LogSegment

    for (topic, partition), offset in offsets.items():
        try:
            validate_topic_name(topic)
        except KafkaLogError as e:
            p.add(f"entry {topic!r} {partition}", f"{e} (the entry is ignored)")
            continue
        if path.name == LOG_START_OFFSET_CHECKPOINT:
            d = path.parent / f"{topic}-{partition}"
            logs = sorted(f for f in d.iterdir() if _SEGMENT_NAME.fullmatch(f.name)) \
                if d.is_dir() else []
            if not logs:
                continue
            seg = LogSegment.open(d, int(logs[-1].name[:20]), LogConfig(), writable=False,
                                  preallocate=False)
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


def _verify_file(path: Path, p: _Problems) -> str | None:
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
    if name in _OFFSET_CHECKPOINTS:
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
            or name in _OFFSET_CHECKPOINTS
            or name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE, CLEAN_SHUTDOWN_FILE))


def _listed(root: Path) -> list[Path]:
    """Every entry under ``root`` named like a Kafka file, whatever its kind (a FIFO, a link or a
    directory so named is reported, not skipped), and every symlinked partition directory;
    links are never entered."""
    found = []
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(d, name)
            if _known(path) or (name in dirs and path.is_symlink() and _partition_name(name)):
                found.append(path)
    return sorted(found)


def _partition_name(name: str) -> bool:
    try:
        parse_topic_partition_dir(name)
        return True
    except KafkaLogError:
        return False


def cmd_verify(args: argparse.Namespace) -> int:
    files: list[Path] = []
    for name in args.paths:
        p = Path(name)
        if not p.exists() and not p.is_symlink():
            raise FileNotFoundError(f"No such file or directory: {name}")
        if p.is_dir() and not p.is_symlink():
            files.extend(_listed(p))
        else:
            files.append(p)
    bad = io_errors = skipped = 0
    total = len(files)
    for i, path in enumerate(files, 1):
        problems = _Problems(path)
        try:
            unsafe = file_problem(path)     # what a writable open refuses: never read
            if unsafe is not None:
                problems.count += 1
                problems.items.append(unsafe)
                summary = ""
            else:
                summary = _verify_file(path, problems)
        except KafkaLogError as e:           # anything the checks above did not place
            problems.add("whole file", str(e))
            summary = ""
        except OSError as e:
            print(f"[{i}/{total}] ERROR {path}: {e.strerror or e}", flush=True)
            io_errors += 1
            continue
        if summary is None:
            print(f"[{i}/{total}] skipped {path}: not a Kafka log file")
            skipped += 1
            continue
        if problems.count:
            bad += 1
            for item in problems.items:
                print(f"[{i}/{total}] CORRUPT {item}")
            if problems.count > len(problems.items):
                print(f"[{i}/{total}] CORRUPT {path}: ... and "
                      f"{problems.count - len(problems.items)} more problems")
        else:
            print(f"[{i}/{total}] ok {path}: {summary}")
    checked = total - skipped - io_errors
    print(f"{checked - bad} of {checked} files valid")
    if io_errors:
        print(f"{io_errors} files could not be read", file=sys.stderr)
        return 2
    return 1 if bad else 0


# ============================================================================== describe

def _partition_key(d: Path) -> tuple:
    try:
        tp = parse_topic_partition_dir(d.name)
        return (0, tp.topic, tp.partition, d.name)
    except KafkaLogError:
        return (1, d.name, 0, d.name)


def _has_segments(d: Path) -> bool:
    return any(_SEGMENT_NAME.fullmatch(f.name) for f in d.iterdir())


def _partition_dirs(root: Path) -> list[Path]:
    """``root`` itself if it is a partition folder, else its partition sub-folders."""
    if not root.is_dir():
        raise _UsageError(f"{root} is not a directory")
    if _has_segments(root):
        return [root]
    subdirs = [d for d in root.iterdir() if d.is_dir()]
    parts = []
    for d in subdirs:
        try:
            parse_topic_partition_dir(d.name)
            parts.append(d)
        except KafkaLogError:
            if _has_segments(d):
                parts.append(d)
    if not parts:
        try:
            parse_topic_partition_dir(root.name)
            return [root]                         # an empty partition folder
        except KafkaLogError:
            pass
    return sorted(parts, key=_partition_key)


def _read_offset_checkpoint(path: Path) -> tuple[dict, str | None]:
    if not path.exists():
        return {}, None
    try:
        return OffsetCheckpointFile(path).read(), None
    except (OSError, KafkaLogError) as e:
        return {}, str(e)


def _valid_prefix(rel_offsets: list[int]) -> int:
    """How many index entries come before a zero-filled tail (DumpLogSegments' stop rule)."""
    return next((i for i in range(1, len(rel_offsets)) if rel_offsets[i] == 0), len(rel_offsets))


def _segment_info(seg) -> dict[str, Any]:
    """One segment, cheaply: the first batch header, the indexes' entries, and the scan from
    the last offset-index entry that ``read_next_offset`` does."""
    base = seg.base_offset
    first = next(iter(seg.batches(0)), None)
    next_offset = seg.read_next_offset()
    offsets = seg.offset_index.entries_array()["relative_offset"].tolist()
    n_index = _valid_prefix(offsets)
    times = seg.time_index.entries_array()
    n_time = _valid_prefix(times["relative_offset"].tolist())
    paths = {kind: seg.log_path.with_name(f"{base:020d}{kind}")
             for kind in (".index", ".timeindex", ".txnindex", ".snapshot")}
    return {
        "base_offset": base,
        "size": seg.size,
        "first_offset": None if first is None else first.base_offset,
        "last_offset": None if first is None else next_offset - 1,
        "next_offset": next_offset,
        "index_entries": n_index,
        "last_indexed_offset": base + offsets[n_index - 1] if n_index else None,
        "time_index_entries": n_time,
        "first_indexed_timestamp": int(times["timestamp"][0]) if n_time else None,
        "max_timestamp": int(times["timestamp"][n_time - 1]) if n_time else None,
        "max_timestamp_offset": (base + int(times["relative_offset"][n_time - 1])
                                 if n_time else None),
        "has_index": paths[".index"].exists(),
        "has_timeindex": paths[".timeindex"].exists(),
        "has_txnindex": paths[".txnindex"].exists(),
        "has_snapshot": paths[".snapshot"].exists(),
    }


def _describe_partition(d: Path, checkpoints: dict[str, tuple[dict, str | None]]) -> dict[str, Any]:
    from ..config import LogConfig
    from ..log import Log
    from ..log import LogSegment

    info: dict[str, Any] = {"partition": d.name, "dir": str(d), "topic": None, "partition_id": None}
    key = None
    try:
        tp = parse_topic_partition_dir(d.name)
        info["topic"], info["partition_id"] = tp.topic, tp.partition
        key = (tp.topic, tp.partition)
    except KafkaLogError:
        pass
    cps = {}
    for name, (offsets, error) in checkpoints.items():
        cps[name] = offsets.get(key) if key is not None else None
        if error:
            info.setdefault("checkpoint_errors", {})[name] = error
    info["checkpoints"] = cps
    try:
        info["leader_epochs"] = [[e.epoch, e.start_offset] for e in
                                 parse_leader_epoch_checkpoint(
                                     (d / LEADER_EPOCH_CHECKPOINT).read_text("utf-8"))] \
            if (d / LEADER_EPOCH_CHECKPOINT).exists() else None
    except (OSError, ValueError, KafkaLogError) as e:
        info["leader_epochs"] = None
        info.setdefault("checkpoint_errors", {})[LEADER_EPOCH_CHECKPOINT] = str(e)
    try:
        meta = d / PARTITION_METADATA_FILE
        info["topic_id"] = (topic_id_to_str(parse_partition_metadata(meta.read_text("utf-8"))
                                            .topic_id) if meta.exists() else None)
    except (OSError, ValueError, KafkaLogError) as e:
        info["topic_id"] = None
        info.setdefault("checkpoint_errors", {})[PARTITION_METADATA_FILE] = str(e)
    info["producer_snapshots"] = sorted(int(f.name.split(".")[0]) for f in d.iterdir()
                                        if re.fullmatch(r"[0-9]+\.snapshot", f.name))
    segments = []
    try:
        if key is not None:
            with Log.open(d, read_only=True) as log:
                for seg in log.segments:
                    segments.append(_segment_info(seg))
                info["log_start_offset"] = log.log_start_offset
                info["log_end_offset"] = log.log_end_offset
        else:
            # not a topic-partition name (a copied folder): the segments alone, read-only
            config = LogConfig()
            bases = sorted(int(f.name[:20]) for f in d.iterdir() if _SEGMENT_NAME.fullmatch(f.name))
            for base in bases:
                seg = LogSegment(d, base, config, writable=False, preallocate=False)
                try:
                    segments.append(_segment_info(seg))
                finally:
                    seg.close()
            info["log_start_offset"] = bases[0] if bases else 0
            info["log_end_offset"] = segments[-1]["next_offset"] if segments else 0
    except (OSError, KafkaLogError) as e:
        info["error"] = str(e)
    info["segments"] = segments
    info["size"] = sum(s["size"] for s in segments)
    return info


def _fmt(v: Any) -> str:
    return "-" if v is None else str(v)


def _print_describe(result: dict[str, Any]) -> None:
    out = sys.stdout
    cols = ("base offset", "size", "first offset", "last offset", "index", "timeindex",
            "first indexed ts", "max timestamp", "files")
    for part in result["partitions"]:
        out.write(f"{part['partition']}  ({part['dir']})\n")
        if part.get("error"):
            out.write(f"  ERROR: {part['error']}\n")
        cp = part["checkpoints"]
        out.write(f"  log start offset {_fmt(part.get('log_start_offset'))}  log end offset "
                  f"{_fmt(part.get('log_end_offset'))}  segments {len(part['segments'])}  size "
                  f"{part['size']} bytes\n")
        out.write(f"  checkpoints: recovery point {_fmt(cp.get(RECOVERY_POINT_CHECKPOINT))}  "
                  f"log start {_fmt(cp.get(LOG_START_OFFSET_CHECKPOINT))}  high watermark "
                  f"{_fmt(cp.get(REPLICATION_OFFSET_CHECKPOINT))}  cleaner "
                  f"{_fmt(cp.get(CLEANER_OFFSET_CHECKPOINT))}\n")
        epochs = part["leader_epochs"]
        out.write("  leader epochs: "
                  + ("-" if epochs is None else
                     " ".join(f"{e}@{o}" for e, o in epochs) or "(none)")
                  + f"  topic id {_fmt(part['topic_id'])}  producer snapshots "
                  + (" ".join(map(str, part["producer_snapshots"])) or "-") + "\n")
        for name, error in part.get("checkpoint_errors", {}).items():
            out.write(f"  unreadable {name}: {error}\n")
        rows = []
        for s in part["segments"]:
            files = ",".join(k for k, flag in (("index", s["has_index"]),
                                               ("timeindex", s["has_timeindex"]),
                                               ("txnindex", s["has_txnindex"]),
                                               ("snapshot", s["has_snapshot"])) if flag)
            rows.append((str(s["base_offset"]), str(s["size"]), _fmt(s["first_offset"]),
                         _fmt(s["last_offset"]), str(s["index_entries"]),
                         str(s["time_index_entries"]), _fmt(s["first_indexed_timestamp"]),
                         _fmt(s["max_timestamp"]), files or "-"))
        if rows:
            widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
            out.write("  " + "  ".join(c.rjust(w) for c, w in zip(cols, widths)) + "\n")
            for r in rows:
                out.write("  " + "  ".join(v.rjust(w) for v, w in zip(r, widths)) + "\n")
        out.write("\n")
    t = result["totals"]
    out.write(f"TOTAL  partitions {t['partitions']}  segments {t['segments']}  size "
              f"{t['size']} bytes  offsets {t['offsets']}"
              + (f"  errors {t['errors']}" if t["errors"] else "") + "\n")


def cmd_describe(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    if not root.exists():
        raise FileNotFoundError(f"No such file or directory: {args.dir}")
    dirs = _partition_dirs(root)
    checkpoints_by_parent: dict[Path, dict[str, tuple[dict, str | None]]] = {}
    partitions = []
    for i, d in enumerate(dirs, 1):
        print(f"[{i}/{len(dirs)}] {d.name}", file=sys.stderr, flush=True)
        parent = d.parent
        if parent not in checkpoints_by_parent:
            checkpoints_by_parent[parent] = {name: _read_offset_checkpoint(parent / name)
                                             for name in _OFFSET_CHECKPOINTS}
        partitions.append(_describe_partition(d, checkpoints_by_parent[parent]))
    totals = {
        "partitions": len(partitions),
        "segments": sum(len(p["segments"]) for p in partitions),
        "size": sum(p["size"] for p in partitions),
        "offsets": sum(max(0, p.get("log_end_offset", 0) - p.get("log_start_offset", 0))
                       for p in partitions if "error" not in p),
        "errors": sum(1 for p in partitions if "error" in p),
    }
    result = {"dir": str(root), "partitions": partitions, "totals": totals}
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        _print_describe(result)
    return 1 if totals["errors"] else 0


# ============================================================================== recover

def _files(d: Path) -> dict[str, int]:
    return {f.name: f.stat().st_size for f in d.iterdir() if f.is_file()}


def cmd_recover(args: argparse.Namespace) -> int:
    from ..log import Log

    root = Path(args.dir)
    if not root.exists():
        raise FileNotFoundError(f"No such file or directory: {args.dir}")
    dirs = _partition_dirs(root)
    failed = changed = 0
    bytes_truncated = 0
    for i, d in enumerate(dirs, 1):
        print(f"[{i}/{len(dirs)}] {d.name}", file=sys.stderr, flush=True)
        try:
            tp = parse_topic_partition_dir(d.name)
        except KafkaLogError as e:
            print(f"{d.name}: FAILED: {e}")
            failed += 1
            continue
        if d.name.endswith(("-delete", "-stray")):
            print(f"{d.name}: skipped: marked for deletion (a broker deletes it, never loads it)")
            continue
        before = _files(d)
        try:
            with Log.open(d, read_only=True) as log:
                leo_before: int | None = log.log_end_offset
        except (OSError, KafkaLogError):
            leo_before = None                   # unreadable as it is: recovery will tell
        try:
            if args.full:
                cp = OffsetCheckpointFile(d.parent / RECOVERY_POINT_CHECKPOINT)
                if cp.path.exists():
                    try:
                        offsets = without_invalid_topics(cp.read(), cp.path)
                    except KafkaLogError:
                        offsets = None           # unreadable: Log.open treats it as empty
                    if offsets is not None and offsets.pop(tp, None) is not None:
                        cp.write(offsets)
            with Log.open(d) as log:
                leo_after = log.log_end_offset
                start_after = log.log_start_offset
        except (OSError, KafkaLogError) as e:
            print(f"{d.name}: FAILED: {e}")
            failed += 1
            continue
        after = _files(d)
        notes = []
        truncated = False
        for name, size in sorted(before.items()):
            is_log = name.endswith(".log")
            if name not in after:
                notes.append(f"deleted {name}")
                if is_log:
                    truncated = True
                    bytes_truncated += size
            elif is_log and after[name] < size:
                notes.append(f"truncated {name} from {size} to {after[name]} bytes")
                truncated = True
                bytes_truncated += size - after[name]
        for name in sorted(set(after) - set(before)):
            notes.append(f"created {name}")
        if leo_before is not None and leo_before != leo_after:
            notes.insert(0, f"log end offset {leo_before} -> {leo_after}")
        changed += truncated
        status = "truncated" if truncated else "ok"
        print(f"{d.name}: {status}: log start offset {start_after}, log end offset {leo_after}"
              + ("" if not notes else "; " + "; ".join(notes)))
    print(f"{len(dirs) - failed} of {len(dirs)} partitions recovered, {changed} truncated "
          f"({bytes_truncated} bytes removed)" + (f", {failed} failed" if failed else ""))
    return 1 if failed else 0


# ============================================================================== retention, compact, config

def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _data_dir(arg: str) -> Path:
    root = Path(arg)
    if not root.exists():
        raise FileNotFoundError(f"No such file or directory: {arg}")
    if not root.is_dir():
        raise _UsageError(f"{root} is not a directory")
    if _has_segments(root):
        raise _UsageError(f"{root} is a partition directory: give its data directory "
                          f"({root.parent}) and --topic")
    return root


def _clock(now: int | None) -> Callable[[], int]:
    import time

    return (lambda: now) if now is not None else (lambda: int(time.time() * 1000))


def _open_manager(root: Path, now: int | None, **kwargs: Any):
    from ..server import LogManager

    return LogManager.open([root], clock=_clock(now), **kwargs)


def _scoped(mgr, topics: list[str] | None) -> list:
    return sorted(((tp, log) for tp, log in mgr.logs.items() if not topics or tp.topic in topics),
                  key=lambda e: (e[0].topic, e[0].partition))


def _print_load_errors(mgr, topics: list[str] | None) -> int:
    failed = 0
    for path, error in sorted(mgr.load_errors.items()):
        try:
            topic = parse_topic_partition_dir(path.name).topic
        except KafkaLogError:
            topic = None
        if not topics or topic in topics:
            print(f"{path.name}: FAILED: {error}")
            failed += 1
    return failed


def _purge(mgr) -> int:
    """Remove every pending ``.deleted`` file at once (--purge)."""
    from ..config import LONG_MAX

    return mgr.delete_expired_files(LONG_MAX)


def cmd_retention(args: argparse.Namespace) -> int:
    from ..config import CleanerConfig

    root = _data_dir(args.dir)
    with _open_manager(root, args.now, cleaner_config=CleanerConfig(enable_cleaner=False)) as mgr:
        now = mgr.clock()
        failed = _print_load_errors(mgr, args.topic) if not args.json else len(mgr.load_errors)
        scoped = _scoped(mgr, args.topic)
        rows = []
        for i, (tp, log) in enumerate(scoped, 1):
            print(f"[{i}/{len(scoped)}] {tp}", file=sys.stderr, flush=True)
            segments_before = log.num_segments
            results = mgr.cleanup_logs(now, partitions=[tp], include_compacted=True)
            r = results[0] if results else None
            c = log.config
            row = {"topic": tp.topic, "partition": tp.partition, "cleanup_policy": c.cleanup_policy,
                   "retention_ms": c.retention_ms, "retention_bytes": c.retention_bytes,
                   "segments_before": segments_before, "segments_deleted": r.segments_deleted if r else 0,
                   "bytes_deleted": r.bytes_deleted if r else 0,
                   "log_start_offset_before": r.log_start_offset_before if r else log.log_start_offset,
                   "log_start_offset": log.log_start_offset, "log_end_offset": log.log_end_offset,
                   "error": r.error if r else None}
            rows.append(row)
            if args.json:
                continue
            policy = (f"cleanup.policy={c.cleanup_policy}, retention.ms={c.retention_ms}, "
                      f"retention.bytes={c.retention_bytes}")
            if row["error"]:
                print(f"{tp}: FAILED: {row['error']}")
            elif row["segments_deleted"]:
                print(f"{tp}: deleted {row['segments_deleted']} of {segments_before} segments "
                      f"({_human(row['bytes_deleted'])}), log start offset "
                      f"{row['log_start_offset_before']} -> {row['log_start_offset']} ({policy})")
            else:
                print(f"{tp}: nothing to delete, {segments_before} segments, log start offset "
                      f"{log.log_start_offset} ({policy})")
        purged = _purge(mgr) if args.purge else 0
        pending = sum(log.pending_deletes for _, log in scoped)
    failed += sum(1 for r in rows if r["error"])
    touched = sum(1 for r in rows if r["segments_deleted"])
    totals = {"partitions": len(rows), "partitions_changed": touched,
              "segments_deleted": sum(r["segments_deleted"] for r in rows),
              "bytes_deleted": sum(r["bytes_deleted"] for r in rows), "failed": failed,
              "files_purged": purged, "pending_deletes": pending}
    if args.json:
        sys.stdout.write(json.dumps({"dir": str(root), "now": now, "partitions": rows, "totals": totals}) + "\n")
    else:
        print(f"retention: {totals['segments_deleted']} segments ({_human(totals['bytes_deleted'])}) deleted "
              f"from {touched} of {len(rows)} partitions" + (f", {failed} failed" if failed else ""))
        if pending:
            print(f"{pending} segment files renamed .deleted stay until file.delete.delay.ms has passed "
                  f"and the partition is opened again (or run with --purge)")
    return 1 if failed else 0


def cmd_compact(args: argparse.Namespace) -> int:
    import time

    from ..config import CleanerConfig

    root = _data_dir(args.dir)
    cleaner_config = CleanerConfig(dedupe_buffer_size=args.dedupe_buffer_size)
    started = time.perf_counter()
    with _open_manager(root, args.now, cleaner_config=cleaner_config) as mgr:
        failed = _print_load_errors(mgr, args.topic) if not args.json else len(mgr.load_errors)
        scoped = [(tp, log) for tp, log in _scoped(mgr, args.topic) if log.config.compact]
        if args.force:
            for _, log in scoped:     # in memory only: the topic's configuration is untouched
                mgr._apply_config(log, log.config.with_changes(min_cleanable_dirty_ratio=0.0))
        before = {tp: log.size for tp, log in scoped}
        if not scoped and not args.json:
            which = f" of topic {', '.join(args.topic)}" if args.topic else ""
            print(f"no compacted partitions{which} in {root} (cleanup.policy=compact); nothing to do")

        def progress(r) -> None:
            if not args.json:
                s = r.stats
                print(f"{r.topic_partition}: cleaned offsets [{r.first_dirty_offset}, {r.end_offset}): "
                      f"{_human(r.size_before)} -> {_human(r.size_after)}, "
                      f"{s.messages_read - s.messages_written} of {s.messages_read} records removed "
                      f"in {r.seconds:.2f} s", flush=True)

        topics = sorted({tp.topic for tp, _ in scoped})
        rounds = mgr.compact(mgr.clock(), topics=topics, progress=progress) if scoped else []
        uncleanable = mgr.uncleanable_partitions()
        for tp in sorted(uncleanable):
            if not args.json:
                print(f"{tp}: FAILED: marked uncleanable after an error (details above)")
        failed += len(uncleanable)
        after = {tp: log.size for tp, log in scoped}
        purged = _purge(mgr) if args.purge else 0
        pending = sum(log.pending_deletes for _, log in scoped)
    elapsed = time.perf_counter() - started
    size_before, size_after = sum(before.values()), sum(after.values())
    totals = {"partitions": len(scoped), "rounds": len(rounds),
              "partitions_cleaned": len({r.topic_partition for r in rounds}),
              "bytes_before": size_before, "bytes_after": size_after,
              "records_removed": sum(r.records_removed for r in rounds), "seconds": elapsed,
              "failed": failed, "files_purged": purged, "pending_deletes": pending}
    if args.json:
        parts = [{"topic": tp.topic, "partition": tp.partition, "bytes_before": before[tp],
                  "bytes_after": after[tp], "uncleanable": tp in uncleanable} for tp, _ in scoped]
        sys.stdout.write(json.dumps({"dir": str(root), "rounds": [r.as_dict() for r in rounds],
                                     "partitions": parts, "totals": totals}) + "\n")
    elif scoped:
        saved = 100 * (1 - size_after / size_before) if size_before else 0.0
        print(f"compacted {totals['partitions_cleaned']} of {len(scoped)} partitions in {len(rounds)} rounds: "
              f"{_human(size_before)} -> {_human(size_after)} ({saved:.1f}% smaller), "
              f"{totals['records_removed']} records removed in {elapsed:.2f} s"
              + (f", {failed} failed" if failed else ""))
        if pending:
            print(f"{pending} replaced segment files renamed .deleted stay until file.delete.delay.ms has "
                  f"passed and the partition is opened again (or run with --purge)")
    return 1 if failed else 0


def _parse_assignments(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _UsageError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def cmd_config(args: argparse.Namespace) -> int:
    from ..checkpoint import validate_topic_name
    from ..config import LogConfig
    from ..server import TOPIC_CONFIG_FILE, ConfigRepository

    root = _data_dir(args.dir)
    validate_topic_name(args.topic)
    repo = ConfigRepository([root])
    updates = _parse_assignments(args.set or [])
    deletes = list(args.delete or [])
    changed = bool(updates or deletes)
    if changed:
        repo.alter_topic_config(args.topic, updates, deletes)
    overrides = repo.topic_overrides(args.topic)
    config = repo.topic_config(args.topic).to_properties()
    defaults = LogConfig().to_properties()
    has_partitions = any(d.is_dir() and d.name.startswith(args.topic + "-") and
                         parse_topic_partition_dir(d.name).topic == args.topic
                         for d in root.iterdir() if _is_partition_name(d.name))
    if args.json:
        sys.stdout.write(json.dumps({"dir": str(root), "topic": args.topic, "overrides": overrides,
                                     "config": config if args.list else None}) + "\n")
        return 0
    if changed:
        print(f"Completed updating config for topic {args.topic}.")
    if not has_partitions:
        print(f"note: {root} holds no partition of topic {args.topic!r} yet; the configuration applies "
              f"to partitions created later", file=sys.stderr)
    print(f"Configs for topic '{args.topic}' in {root / TOPIC_CONFIG_FILE}:")
    shown = config if args.list else {k: config[k] for k in overrides}
    if not shown:
        print("  (no overrides: every value is the default)")
    for key in sorted(shown):
        if key in overrides:
            print(f"  {key}={config[key]} (override; default {defaults[key]})")
        else:
            print(f"  {key}={config[key]} (default)")
    if changed:
        print("A LogManager that already has the topic's partitions open applies the change when it "
              "next loads them (or through LogManager.alter_topic_config).", file=sys.stderr)
    return 0


def _is_partition_name(name: str) -> bool:
    try:
        parse_topic_partition_dir(name)
    except KafkaLogError:
        return False
    return not name.endswith(("-delete", "-stray", "-future"))


# ============================================================================== main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkalog", description="Kafka log files without a broker")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="print log, index, snapshot files as kafka-dump-log.sh does")
    d.add_argument("--files", required=True, help="comma-separated files")
    d.add_argument("--print-data-log", action="store_true",
                   help="print keys and values (implies --deep-iteration)")
    d.add_argument("--deep-iteration", action="store_true", help="print every record")
    d.add_argument("--skip-record-metadata", action="store_true",
                   help="record lines without their metadata")
    d.add_argument("--index-sanity-check", action="store_true",
                   help="only run the index sanity check a broker runs at startup")
    d.add_argument("--verify-index-only", action="store_true",
                   help="check indexes against the log without printing their entries")
    d.add_argument("--max-message-size", type=int, default=5242880,
                   help="largest batch looked at by an index entry (default 5242880)")
    d.add_argument("--max-bytes", type=int, default=INT_MAX,
                   help="dump only the batches within the first N bytes of each log")
    d.add_argument("--json", action="store_true", help="one JSON object per line")
    d.set_defaults(func=cmd_dump)
    s = sub.add_parser("describe", help="segments, offsets and checkpoints of a data or partition dir")
    s.add_argument("dir")
    s.add_argument("--json", action="store_true", help="one JSON document")
    s.set_defaults(func=cmd_describe)
    v = sub.add_parser("verify", help="check every log, index, snapshot and checkpoint file")
    v.add_argument("paths", nargs="+", metavar="PATH")
    v.set_defaults(func=cmd_verify)
    r = sub.add_parser("recover", help="open every partition writable: validate, truncate a bad tail")
    r.add_argument("dir")
    r.add_argument("--full", action="store_true",
                   help="validate every segment, not only those after the recovery point")
    r.set_defaults(func=cmd_recover)
    t = sub.add_parser("retention", help="delete old segments of every partition per its retention config")
    t.add_argument("dir", help="data directory (topic-partition folders)")
    t.add_argument("--topic", action="append", help="only this topic (repeatable)")
    t.add_argument("--now", type=int, metavar="MS", help="the time to judge retention.ms against (epoch ms)")
    t.add_argument("--purge", action="store_true",
                   help="remove the .deleted files at once instead of after file.delete.delay.ms")
    t.add_argument("--json", action="store_true", help="one JSON document")
    t.set_defaults(func=cmd_retention)
    c = sub.add_parser("compact", help="compact every partition of the compacted topics (cleanup.policy=compact)")
    c.add_argument("dir", help="data directory (topic-partition folders)")
    c.add_argument("--topic", action="append", help="only this topic (repeatable)")
    c.add_argument("--now", type=int, metavar="MS",
                   help="the time for compaction lags and tombstone delete horizons (epoch ms)")
    c.add_argument("--dedupe-buffer-size", type=int, default=134217728, metavar="N",
                   help="offset map memory in bytes (log.cleaner.dedupe.buffer.size, default 134217728)")
    c.add_argument("--force", action="store_true",
                   help="clean any dirty bytes, ignoring min.cleanable.dirty.ratio for this run")
    c.add_argument("--purge", action="store_true",
                   help="remove the replaced segment files at once instead of after file.delete.delay.ms")
    c.add_argument("--json", action="store_true", help="one JSON document")
    c.set_defaults(func=cmd_compact)
    g = sub.add_parser("config", help="show or change a topic's configuration overrides")
    g.add_argument("dir", help="data directory")
    g.add_argument("--topic", required=True)
    g.add_argument("--set", action="append", metavar="KEY=VALUE", help="set an override (repeatable)")
    g.add_argument("--delete", action="append", metavar="KEY", help="remove an override (repeatable)")
    g.add_argument("--list", action="store_true", help="show every value, not only the overrides")
    g.add_argument("--json", action="store_true", help="one JSON document")
    g.set_defaults(func=cmd_config)
    args = parser.parse_args(argv)
    if args.command in ("describe", "recover", "retention", "compact", "config"):
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")
    try:
        sys.stdout.reconfigure(encoding="utf-8")
    except (AttributeError, ValueError):
        pass
    try:
        return args.func(args)
    except (_UsageError, FileNotFoundError, NotADirectoryError, PermissionError) as e:
        print(f"kafkalog: {e}", file=sys.stderr)
        return 2
    except KafkaLogError as e:
        print(f"kafkalog: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:            # `kafkalog dump ... | head` is normal use
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())     # no second error when stdout is flushed at exit
        return 0


if __name__ == "__main__":
    sys.exit(main())

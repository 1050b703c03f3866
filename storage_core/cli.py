"""The ``kafkalog`` command.

``dump`` prints ``.log`` files the way Kafka's ``kafka-dump-log.sh`` (DumpLogSegments) does, so
its output diffs cleanly against Kafka's; ``verify`` checks every batch (CRC, lengths, records)
and exits non-zero on the first corrupt one, naming the file and byte position.
"""

from __future__ import annotations

import argparse
import mmap
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import CorruptRecordError, KafkaLogError
from .format.compression import CompressionType
from .format.control import ControlRecordType, EndTransactionMarker
from .format.log_input_stream import BatchInfo, LogInputStream, batch_records
from .format.record_batch import CREATE_TIME, LOG_APPEND_TIME, compute_crc

_TS_NAME = {-1: "NoTimestampType", CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview | bytes]:
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            yield m


def _batch_line(buf, b: BatchInfo) -> str:
    if b.header is not None:
        h = b.header
        valid = compute_crc(buf, b.position, b.size) == h.crc
        horizon = (f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon
                   else "OptionalLong.empty")
        return (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
                f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {str(h.is_transactional).lower()} "
                f"isControl: {str(h.is_control).lower()} deleteHorizonMs: {horizon} "
                f"position: {b.position} {_TS_NAME[h.timestamp_type]}: {h.max_timestamp} "
                f"size: {b.size} magic: 2 compresscodec: {CompressionType(h.compression).name_kafka} "
                f"crc: {h.crc} isvalid: {str(valid).lower()}")
    e = b.entry
    import zlib
    valid = zlib.crc32(memoryview(buf)[b.position + 16:b.position + b.size]) == e.crc
    return (f"offset: {e.offset} position: {b.position} {_TS_NAME[e.timestamp_type]}: {e.timestamp} "
            f"size: {b.size} magic: {e.magic} compresscodec: {CompressionType(e.compression).name_kafka} "
            f"crc: {e.crc} isvalid: {str(valid).lower()}")


def _text(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def _record_line(b: BatchInfo, r, print_data: bool) -> str:
    ksize = -1 if r.key is None else len(r.key)
    vsize = -1 if r.value is None else len(r.value)
    line = (f"| offset: {r.offset} {_TS_NAME[r.timestamp_type]}: {r.timestamp} "
            f"keySize: {ksize} valueSize: {vsize}")
    if b.magic == 2:
        line += f" sequence: {r.sequence} headerKeys: [{','.join(h.key for h in r.headers)}]"
    else:
        line += f" isValid: true crc: {b.entry.crc}}}"
    if b.header is not None and b.header.is_control:
        ctype = ControlRecordType.parse(r.key)
        if ctype in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            m = EndTransactionMarker.deserialize(r.key, r.value)
            line += f" endTxnMarker: {ctype.name} coordinatorEpoch: {m.coordinator_epoch}"
        else:
            line += f" controlType: {ctype.name}({int(ctype)})"
    elif print_data:
        if r.key is not None:
            line += f" key: {_text(r.key)}"
        if r.value is not None:
            line += f" payload: {_text(r.value)}"
    return line


def cmd_dump(args: argparse.Namespace) -> int:
    status = 0
    deep = args.deep_iteration or args.print_data_log
    for name in args.files.split(","):
        path = Path(name)
        print(f"Dumping {name}")
        if path.suffix != ".log":
            print(f"Ignoring unknown file {name}", file=sys.stderr)
            continue
        prefix = path.name.split(".")[0]
        if prefix.isdigit():
            print(f"Log starting offset: {int(prefix)}")
        with _mapped(path) as buf:
            stream = LogInputStream(buf, max_batch_size=args.max_message_size, source=str(path))
            try:
                for b in stream:
                    print(_batch_line(buf, b))
                    if deep:
                        for r in batch_records(buf, b):
                            print(_record_line(b, r, args.print_data_log))
            except CorruptRecordError as e:
                print(f"kafkalog: {e}", file=sys.stderr)
                status = 1
                continue
            if stream.partial:
                print(f"Found {stream.end - stream.position} invalid bytes at the end of {path.name}")
    return status


def cmd_verify(args: argparse.Namespace) -> int:
    bad = 0
    files = []
    for name in args.paths:
        p = Path(name)
        files.extend(sorted(p.rglob("*.log")) if p.is_dir() else [p])
    for i, path in enumerate(files, 1):
        with _mapped(path) as buf:
            stream = LogInputStream(buf, verify=True, source=str(path))
            batches = records = 0
            try:
                for b in stream:
                    records += len(batch_records(buf, b))
                    batches += 1
            except CorruptRecordError as e:
                print(f"[{i}/{len(files)}] CORRUPT {e}")
                bad += 1
                continue
            tail = f", {stream.end - stream.position} trailing bytes" if stream.partial else ""
            print(f"[{i}/{len(files)}] ok {path}: {batches} batches, {records} records{tail}")
    print(f"{len(files) - bad} of {len(files)} files valid")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkalog", description="Kafka log files without a broker")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="print .log files as kafka-dump-log.sh does")
    d.add_argument("--files", required=True, help="comma-separated files")
    d.add_argument("--print-data-log", action="store_true")
    d.add_argument("--deep-iteration", action="store_true")
    d.add_argument("--max-message-size", type=int, default=5242880)
    d.set_defaults(func=cmd_dump)
    v = sub.add_parser("verify", help="check every batch of .log files or directories")
    v.add_argument("paths", nargs="+")
    v.set_defaults(func=cmd_verify)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KafkaLogError as e:
        print(f"kafkalog: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        print(f"kafkalog: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:            # `kafkalog dump ... | head` is normal use
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())

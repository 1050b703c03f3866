"""The ``kafkalog`` command: Kafka's log files without a broker.

This module holds the argument parser and the dispatch; each command lives in its own module
of ``storage_core.tools``, imported only when it runs (so ``kafkalog --help`` stays cheap), and
writes its results through the one output layer, ``storage_core.tools.output``:

==============  ===============================================================================
``dump``        ``kafka-dump-log.sh`` (``DumpLogSegments``) output, line for line; ``--json``;
                ``--partition``: a partition across both tiers
``describe``    segments, offsets and checkpoints of a data or partition directory
``verify``      every log, index, snapshot and checkpoint file checked (remote ones too), problems located
``recover``     every partition opened writable: validated, an invalid tail truncated
``retention``   the broker's retention task over a data directory (``LogManager``)
``compact``     the log cleaner by hand over the compacted topics (``LogManager``)
``config``      a topic's configuration overrides kept in the data directory
``tier``        one pass of the remote log manager: copy to remote storage, remote expiry
==============  ===============================================================================

Exit status: 0 done; 1 a file or partition was bad or failed; 2 usage or I/O error.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Any

from ..common import INT_MAX
from ..errors import KafkaLogError
from .output import Output, UsageError

# commands whose engine code logs: warnings go to stderr
_LOGGING_COMMANDS = ("describe", "recover", "retention", "compact", "config", "tier")


def _data_dir_command(sub: Any, name: str, help: str, *, now: str) -> argparse.ArgumentParser:
    """A command over a data directory through a ``LogManager``: DIR, --topic, --now."""
    p = sub.add_parser(name, help=help)
    p.add_argument("dir", help="data directory (topic-partition folders)")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--now", type=int, metavar="MS", help=now)
    p.set_defaults(command_module=name)
    return p


def _purge_and_json(p: argparse.ArgumentParser, purge: str) -> None:
    p.add_argument("--purge", action="store_true", help=purge)
    p.add_argument("--json", action="store_true", help="one JSON document")


def _store_arguments(p: argparse.ArgumentParser) -> None:
    """The remote storage as broker properties (``rsm.config.*``, ``rlmm.config.*``, ``remote.log.*``)."""
    p.add_argument("--config", metavar="FILE", help="broker properties (remote.log.*, rsm.config.*, rlmm.config.*)")
    p.add_argument("--property", action="append", metavar="KEY=VALUE", help="a broker property (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; ``command_module`` names the module that runs it."""
    parser = argparse.ArgumentParser(prog="kafkalog", description="Kafka log files without a broker")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="print log, index, snapshot files as kafka-dump-log.sh does")
    d.add_argument("--files", help="comma-separated files")
    d.add_argument("--partition", action="append", metavar="DIR",
                   help="a partition directory, both tiers: its remote segments (with --config/--property) "
                        "below the local ones, then its local segments (repeatable)")
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
    _store_arguments(d)
    d.set_defaults(command_module="dump")
    s = sub.add_parser("describe", help="segments, offsets and checkpoints of a data or partition dir")
    s.add_argument("dir")
    s.add_argument("--json", action="store_true", help="one JSON document")
    s.set_defaults(command_module="describe")
    v = sub.add_parser("verify", help="check every log, index, snapshot and checkpoint file")
    v.add_argument("paths", nargs="+", metavar="PATH")
    v.add_argument("--json", action="store_true", help="one JSON document")
    _store_arguments(v)
    v.set_defaults(command_module="verify")
    r = sub.add_parser("recover", help="open every partition writable: validate, truncate a bad tail")
    r.add_argument("dir")
    r.add_argument("--full", action="store_true",
                   help="validate every segment, not only those after the recovery point")
    r.set_defaults(command_module="recover")
    t = _data_dir_command(sub, "retention", "delete old segments of every partition per its retention config",
                          now="the time to judge retention.ms against (epoch ms)")
    _purge_and_json(t, "remove the .deleted files at once instead of after file.delete.delay.ms")
    c = _data_dir_command(sub, "compact", "compact every partition of the compacted topics (cleanup.policy=compact)",
                          now="the time for compaction lags and tombstone delete horizons (epoch ms)")
    c.add_argument("--dedupe-buffer-size", type=int, default=134217728, metavar="N",
                   help="offset map memory in bytes (log.cleaner.dedupe.buffer.size, default 134217728)")
    c.add_argument("--force", action="store_true",
                   help="clean any dirty bytes, ignoring min.cleanable.dirty.ratio for this run")
    _purge_and_json(c, "remove the replaced segment files at once instead of after file.delete.delay.ms")
    tr = _data_dir_command(sub, "tier", "copy rolled segments of tiered topics to remote storage, expire remote ones",
                           now="the time to judge retention.ms against (epoch ms)")
    _store_arguments(tr)
    tr.add_argument("--json", action="store_true", help="one JSON document")
    g = sub.add_parser("config", help="show or change a topic's configuration overrides")
    g.add_argument("dir", help="data directory")
    g.add_argument("--topic", required=True)
    g.add_argument("--set", action="append", metavar="KEY=VALUE", help="set an override (repeatable)")
    g.add_argument("--delete", action="append", metavar="KEY", help="remove an override (repeatable)")
    g.add_argument("--list", action="store_true", help="show every value, not only the overrides")
    g.add_argument("--json", action="store_true", help="one JSON document")
    g.set_defaults(command_module="config")
    return parser


def _check_directories(args: argparse.Namespace) -> None:
    """An empty directory argument (``kafkalog recover "$DATA_DIR"`` with the variable unset) is
    a usage error: as a path it is the working directory, which ``recover``, ``retention`` and
    ``compact`` would open as a data directory and write checkpoints into. Kafka refuses an empty
    ``log.dirs`` likewise (``KafkaConfig``: at least one log directory must be defined)."""
    for name, flag in (("dir", "DIR"), ("paths", "PATH"), ("partition", "--partition")):
        value = getattr(args, name, None)
        for item in ([] if value is None else value if isinstance(value, list) else [value]):
            if not item.strip():
                raise UsageError(f"{flag} is empty: give a directory (. for the working directory)")


def main(argv: list[str] | None = None) -> int:
    """Run ``kafkalog`` with ``argv`` (the process's arguments without); the exit status."""
    args = build_parser().parse_args(argv)
    if args.command in _LOGGING_COMMANDS:
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")
    try:
        sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        pass
    out = Output(json_mode=getattr(args, "json", False))
    try:
        _check_directories(args)
        command = importlib.import_module(f"{__package__}.{args.command_module}")
        return command.run(args, out)
    except (UsageError, FileNotFoundError, NotADirectoryError, PermissionError, KafkaLogError) as e:
        out.error(f"kafkalog: {e}")
        return 2
    except BrokenPipeError:            # `kafkalog dump ... | head` is normal use
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())     # no second error when stdout is flushed at exit
        return 0


if __name__ == "__main__":
    sys.exit(main())

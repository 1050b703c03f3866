"""``kafkalog config DIR --topic T [--set KEY=VALUE ...] [--delete KEY ...] [--list] [--json]``:
shows or changes a topic's overrides kept in the data directory
(``kafkalog-topic-configs.json``), under Kafka's names (``segment.bytes``, ``cleanup.policy``,
...), as ``kafka-configs.sh --alter --entity-type topics`` does for a broker; each change is
validated first, and an unknown name or a bad value is refused naming the key (exit 2).
"""

from __future__ import annotations

import argparse

from ..checkpoint import parse_topic_partition_dir, validate_topic_name
from ..config import LogConfig
from ..server import TOPIC_CONFIG_FILE, ConfigRepository
from .data_dirs import data_dir, is_live_partition_name
from .output import Output, UsageError


def parse_assignments(items: list[str]) -> dict[str, str]:
    """``--set key=value`` arguments as a dict (a missing ``=`` or key is a usage error)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def run(args: argparse.Namespace, out: Output) -> int:
    """Apply ``--set``/``--delete``, then show the overrides (every value with ``--list``)."""
    root = data_dir(args.dir)
    validate_topic_name(args.topic)
    repo = ConfigRepository([root])
    updates = parse_assignments(args.set or [])
    deletes = list(args.delete or [])
    changed = bool(updates or deletes)
    if changed:
        repo.alter_topic_config(args.topic, updates, deletes)
    overrides = repo.topic_overrides(args.topic)
    config = repo.topic_config(args.topic).to_properties()
    defaults = LogConfig().to_properties()
    has_partitions = any(d.is_dir() and d.name.startswith(args.topic + "-") and
                         parse_topic_partition_dir(d.name).topic == args.topic
                         for d in root.iterdir() if is_live_partition_name(d.name))
    out.document({"dir": str(root), "topic": args.topic, "overrides": overrides,
                  "config": config if args.list else None})
    if changed:
        out.text(f"Completed updating config for topic {args.topic}.")
    if not has_partitions:
        out.note(f"note: {root} holds no partition of topic {args.topic!r} yet; the configuration "
                 f"applies to partitions created later")
    out.text(f"Configs for topic '{args.topic}' in {root / TOPIC_CONFIG_FILE}:")
    shown = config if args.list else {k: config[k] for k in overrides}
    if not shown:
        out.text("  (no overrides: every value is the default)")
    for key in sorted(shown):
        if key in overrides:
            out.text(f"  {key}={config[key]} (override; default {defaults[key]})")
        else:
            out.text(f"  {key}={config[key]} (default)")
    if changed:
        out.note("A LogManager that already has the topic's partitions open applies the change when "
                 "it next loads them (or through LogManager.alter_topic_config).")
    return 0

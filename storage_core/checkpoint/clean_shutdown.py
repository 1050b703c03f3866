"""Kafka's ``CleanShutdownFileHandler``: the ``.kafka_cleanshutdown`` marker in a log-dir root
(KIP-966: Kafka 3.7+ writes the broker epoch in it as JSON; older brokers an empty file)."""

from __future__ import annotations

import json
import os
from os import PathLike
from pathlib import Path

from ..errors import KafkaLogError
from .atomic import fsync_dir
from .checkpoint_file import INT32_RANGE, INT64_RANGE, check_int, read_small_file

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"                     # in the log-dir root
CLEAN_SHUTDOWN_VERSION = 0           # CleanShutdownFileHandler.CURRENT_VERSION
# Kafka writes {"version":<int>,"brokerEpoch":<long>}, at most 58 bytes; 4 KiB leaves room for
# whitespace and the unknown fields of a newer version. A longer marker holds no epoch to read.
CLEAN_SHUTDOWN_MAX_BYTES = 4096


def format_clean_shutdown(broker_epoch: int = -1, version: int = CLEAN_SHUTDOWN_VERSION) -> str:
    """Jackson's output for ``Content(version, brokerEpoch)``: ``{"version":0,"brokerEpoch":-1}``,
    field order as declared, no spaces, no newline (Kafka 3.7+, KIP-966)."""
    check_int("version", version, INT32_RANGE)
    check_int("broker epoch", broker_epoch, INT64_RANGE)
    return json.dumps({"version": version, "brokerEpoch": broker_epoch}, separators=(",", ":"))


def parse_clean_shutdown(text: str) -> int | None:
    """The broker epoch, or ``None`` when there is none to read: the empty marker of Kafka <= 3.6,
    or anything Jackson would not map onto ``Content`` (Kafka logs it and returns empty).
    Unknown fields and trailing text after the object are ignored, as Jackson does."""
    try:
        content, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except ValueError:
        return None
    if not isinstance(content, dict):
        return None
    version, epoch = content.get("version", 0), content.get("brokerEpoch")
    if not (isinstance(version, int) and isinstance(epoch, int)) or isinstance(version, bool) \
            or isinstance(epoch, bool):
        return None
    if not INT32_RANGE[0] <= version <= INT32_RANGE[1] or not INT64_RANGE[0] <= epoch <= INT64_RANGE[1]:
        return None
    return epoch


class CleanShutdownFile:
    """``CleanShutdownFileHandler``: ``.kafka_cleanshutdown`` in a log-dir root. Only its
    presence matters for recovery; the broker epoch inside is informational."""

    def __init__(self, log_dir: str | PathLike[str]) -> None:
        self.path = Path(log_dir) / CLEAN_SHUTDOWN_FILE

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, broker_epoch: int = -1, *, version: int = CLEAN_SHUTDOWN_VERSION) -> None:
        # Kafka writes the marker in place (no temp file): it is written last at shutdown, after
        # every log and checkpoint is flushed, so even a torn marker truthfully says "clean" and
        # the reader tolerates its content. fsync the file, then the directory entry.
        data = format_clean_shutdown(broker_epoch, version).encode("utf-8")
        with open(self.path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(self.path.parent)

    def read(self) -> int | None:
        """The recorded broker epoch; ``None`` if the file is absent, empty (<= 3.6) or
        unreadable: not UTF-8 or JSON, longer than ``CLEAN_SHUTDOWN_MAX_BYTES`` (not read
        further), not a regular file (a FIFO is refused, not waited on)."""
        try:
            data = read_small_file(self.path, CLEAN_SHUTDOWN_MAX_BYTES)
        except (OSError, KafkaLogError):
            return None
        try:
            return parse_clean_shutdown(data.decode("utf-8"))
        except UnicodeDecodeError:
            return None

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"CleanShutdownFile({str(self.path)!r})"


"""The one output layer of the ``kafkalog`` commands: a command hands its results to an
:class:`Output` and never decides between text and JSON itself.

Two shapes of result, as pyiceberg's CLI separates its ``Output`` from its commands:

* a stream of records (``dump``): :meth:`Output.record` takes a record's text line and its JSON
  object; with ``--json`` the object is written as one JSON line, else the text line (a record
  that has no text form, such as a report entry Kafka prints only on stderr, passes ``None``);
* one document (``describe``, ``retention``, ``compact``, ``config``): :meth:`Output.text` writes
  the human lines as the work goes (nothing with ``--json``) and :meth:`Output.document` the
  whole result at the end (only with ``--json``).

Progress on long work (``[i/n] partition``), notes and errors go to stderr, so stdout holds only
the result. Streams are looked up on every write (``sys.stdout`` may be replaced, as pytest's
capture does).
"""

from __future__ import annotations

import json
import sys
from typing import Any


class UsageError(Exception):
    """A command line or I/O problem: exit status 2."""


class Output:
    """Text or JSON on stdout for one command run; progress, notes and errors on stderr."""

    def __init__(self, json_mode: bool = False) -> None:
        self.json = json_mode

    # -- stdout ---------------------------------------------------------------------------------

    def text(self, line: str, *, flush: bool = False) -> None:
        """One human-readable line on stdout; nothing with ``--json``."""
        if not self.json:
            sys.stdout.write(line + "\n")
            if flush:
                sys.stdout.flush()

    def record(self, text: str | None, obj: dict[str, Any]) -> None:
        """One record of a stream: ``obj`` as a JSON line with ``--json`` (non-ASCII kept as
        UTF-8), else ``text`` as a line (nothing when ``text`` is None)."""
        if self.json:
            sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        elif text is not None:
            sys.stdout.write(text + "\n")

    def document(self, doc: dict[str, Any]) -> None:
        """The whole result as one JSON document on one line; nothing without ``--json``."""
        if self.json:
            sys.stdout.write(json.dumps(doc) + "\n")

    def flush(self) -> None:
        sys.stdout.flush()

    # -- stderr ---------------------------------------------------------------------------------

    def error(self, line: str) -> None:
        """A line on stderr, after whatever stdout holds so far (so a terminal shows the two in
        the order they happened)."""
        sys.stdout.flush()
        print(line, file=sys.stderr, flush=True)

    def note(self, line: str) -> None:
        """A remark for a person on stderr; nothing with ``--json``."""
        if not self.json:
            print(line, file=sys.stderr)

    def progress(self, done: int, total: int, what: object) -> None:
        """``[done/total] what`` on stderr: where a run over many partitions is."""
        print(f"[{done}/{total}] {what}", file=sys.stderr, flush=True)


def human_bytes(n: float) -> str:
    """A byte count for people: ``512 B``, ``1.5 KiB``, ... up to GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def optional(v: Any) -> str:
    """A value of a text table: ``-`` for None."""
    return "-" if v is None else str(v)

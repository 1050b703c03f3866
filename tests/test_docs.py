"""Every source and sink option the documentation lists is exercised by some test (issue 7).

The option tables of README.md and docs/*.md (a table whose first header cell is ``option``)
are parsed; every option name in backticks in a row's first cell must appear in a test file
under tests/ as a quoted string (``"maxOffsetsPerTrigger"``) or as a keyword argument
(``maxOffsetsPerTrigger=``, how the Spark tests pass options to their helpers). This file is
left out of the search, so naming an option here proves nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def option_tables(text: str) -> list[list[str]]:
    """The first cells of the rows of every table whose header starts with ``| option |``."""
    tables, rows, inside = [], None, False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
        if cells is None:
            if rows:
                tables.append(rows)
            rows, inside = None, False
            continue
        if not inside:
            inside = True
            rows = [] if cells[0].lower() == "option" else None
            continue
        if rows is not None and not set(cells[0]) <= set("-: "):
            rows.append(cells[0])
    if rows:
        tables.append(rows)
    return tables


def documented_options() -> dict[str, str]:
    """option name -> the document that lists it."""
    found: dict[str, str] = {}
    for doc in DOCS:
        for table in option_tables(doc.read_text()):
            for cell in table:
                for name in re.findall(r"`([^`]+)`", cell):
                    found.setdefault(name, doc.name)
    return found


def test_tables_are_found():
    """The parser sees the tables (so an empty result cannot pass the check below)."""
    names = documented_options()
    for must in ("path", "subscribe", "assign", "startingOffsets", "maxOffsetsPerTrigger", "isolationLevel",
                 "numPartitions", "compression", "segment.bytes", "stagingLocation"):
        assert must in names, sorted(names)
    assert len(names) >= 35, sorted(names)


def _test_sources() -> str:
    me = Path(__file__).resolve()
    return "\n".join(p.read_text(errors="replace") for p in sorted((ROOT / "tests").rglob("*.py"))
                     if p.resolve() != me)


@pytest.mark.parametrize("name", sorted(documented_options()))
def test_documented_option_is_exercised_by_a_test(name):
    text = _test_sources()
    patterns = [f'"{name}"', f"'{name}'"]
    if name.isidentifier():
        patterns.append(f"{name}=")
    hit = any(p in text for p in patterns)
    assert hit, (f"option {name!r} ({documented_options()[name]}) appears in no test under tests/ "
                 f"(looked for {' or '.join(patterns)})")

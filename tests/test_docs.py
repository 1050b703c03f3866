"""Every source and sink option the documentation lists is exercised by some test (issue 7).

The option tables of README.md and docs/*.md (a table whose first header cell is ``option``)
are parsed; every option name in backticks in a row's first cell must be *passed* by some test
file under tests/, read with the ``ast`` module so that a docstring, comment or message naming
the option proves nothing. Passed means one of: ``.option("name", ...)``; a string key of a dict
literal (options dicts, ``.options(**{...})``, topic configs); a keyword argument ``name=`` (how
the Spark tests hand options to their helpers, and ``.options(name=...)``); for a dotted Kafka
config, its ``LogConfig`` field (``segment.index.bytes`` -> ``LogConfig(segment_index_bytes=...)``).
This file is left out of the search."""

from __future__ import annotations

import ast
import re
from functools import cache
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


def passed_options(tree: ast.AST) -> set[str]:
    """The option names a module passes in code (see the module docstring), never from a
    docstring or a string that merely mentions them."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "option" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                out.add(node.args[0].value)
            out.update(kw.arg for kw in node.keywords if kw.arg)
        elif isinstance(node, ast.Dict):
            out.update(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return out


@cache
def _passed_in_tests() -> dict[str, list[str]]:
    """option name -> the test files that pass it."""
    me = Path(__file__).resolve()
    found: dict[str, list[str]] = {}
    for p in sorted((ROOT / "tests").rglob("*.py")):
        if p.resolve() != me:
            for name in passed_options(ast.parse(p.read_text(), filename=str(p))):
                found.setdefault(name, []).append(str(p.relative_to(ROOT)))
    return found


def test_only_passing_counts():
    """A name in a docstring, a comment or a message is not a test of the option; a call is."""
    tree = ast.parse('''
def test_x(spark):
    """maxOffsetsPerTrigger is covered"""   # minPartitions too
    assert "failOnDataLoss" in str(x)
    spark.read.option("subscribe", "t").load(); helper(includeHeaders=True)
    parse_sink_options({"segment.bytes": 1}); LogConfig(segment_index_bytes=4096)
''')
    assert passed_options(tree) == {"subscribe", "includeHeaders", "segment.bytes", "segment_index_bytes"}


@pytest.mark.parametrize("name", sorted(documented_options()))
def test_documented_option_is_passed_by_a_test(name):
    passed = _passed_in_tests()
    names = [name] + ([name.replace(".", "_")] if "." in name else [])
    hit = [f for n in names for f in passed.get(n, [])]
    assert hit, (f"option {name!r} ({documented_options()[name]}) is passed by no test under tests/ "
                 f"(looked for .option({name!r}, ...), a dict key {name!r} or a keyword "
                 f"{' or '.join(n + '=' for n in names if n.isidentifier()) or '(none: not an identifier)'})")


def test_tiered_settings_are_in_the_option_reference():
    """Every tiered-storage setting the engine reads is in docs/options.md's option tables: the
    topic settings of ``LogConfig`` (``remote.*``, ``local.retention.*``), the broker settings of
    ``RemoteLogManagerConfig`` (its ``*_PROP`` names) and the metadata manager's."""
    from storage_core.config import LogConfig
    from storage_core.remote import remote_log_manager_config, remote_log_metadata_manager

    topic = {k for k in LogConfig().to_properties() if k.startswith(("remote.", "local.retention."))}
    assert topic >= {"remote.storage.enable", "local.retention.ms", "local.retention.bytes"}
    broker = {v for m in (remote_log_manager_config, remote_log_metadata_manager)
              for k, v in vars(m).items() if k.endswith("_PROP") and isinstance(v, str)}
    assert "remote.log.storage.system.enable" in broker
    in_reference = {name for table in option_tables((ROOT / "docs" / "options.md").read_text())
                    for cell in table for name in re.findall(r"`([^`]+)`", cell)}
    missing = sorted((topic | broker) - in_reference)
    assert not missing, f"tiered settings missing from docs/options.md: {missing}"

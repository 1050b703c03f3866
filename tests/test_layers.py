"""The package layering and the source rules of issue 17, checked over storage_core,
kafka_log_source and kafka_log_sink on every test run.

Imports (import-linter, pinned in pyproject.toml; its contracts are ``[tool.importlinter]`` there,
and ``lint-imports`` from the repository root prints the same report):

- ``layers``: inside storage_core, ``tools > server > cleaner > log > producer > checkpoint >
  index > format`` above the foundation ``errors``, ``config``, ``common``, ``data_files``; each
  imports only from those below it, and every folder or top-level module has a place;
- ``engine-alone``: storage_core imports neither pyspark nor the two Spark packages;
- ``private-modules``: a module whose name starts with ``_`` (``format._kernels``) is imported
  only inside its own package;
- ``acyclic``: no import cycle between sibling packages or modules at any depth;
- and, with grimp (import-linter's graph library), no cycle between any two modules at all:
  ``acyclic`` compares siblings, so a package's ``__init__`` importing a child that imports it
  back is only seen module by module.

Source rules, read with :mod:`ast` (each test lists every offence as ``file:line`` after a count
per file; each rule is also fed a known offence and a known non-offence, so a rule that cannot
fail shows up as a failing self-test):

- no private name (one leading underscore, not a dunder) imported from another package (a
  package's ``__init__`` and its modules are one package);
- from outside a layer package, a layer of storage_core is imported through its ``__init__``
  (its facade), so a module split inside a package does not reach its importers; ``format``'s
  modules are imported by name (pure functions over buffers, each module one part of the format);
- no module over 700 lines, unless its module docstring says why in a sentence that names the
  rule with the words "700 lines" (for example "Over 700 lines: Kafka's ProducerStateManager is
  one class too, and splitting it would split one lock's invariants."); storage_core/log/log.py
  (``Log``, the facade) has no such way out;
- a module logger is ``logger = logging.getLogger(__name__)``;
- Java's integer bounds are typed in only in storage_core/common.py (``INT_MAX``, ``LONG_MAX``...):
  elsewhere no ``2**31 - 1``, ``-(2**31)``, ``2**63 - 1``, ``-(2**63)`` (or the same with
  ``1 << 31``/``1 << 63``), and no decimal 2147483647 or 9223372036854775807 (a power alone, as in
  wrap-around arithmetic, and a hexadecimal mask are not bounds);
- no record-batch header byte offset outside storage_core/format (``batch_header.BatchField`` and
  ``HeaderColumn`` name them): no ``unpack_from``/``pack_into`` at a literal non-zero offset (or
  ``pos + <literal>``), no ``fields[:, <literal>]`` column of the header arrays, no ``*patch*``/
  ``_put`` call with a field offset literal (0, 8, 12 and the ones below), and no ``*_AT``/
  ``*OFFSET*`` constant set to a header offset (16, 17, 21, 23, 27, 35, 43, 51, 53, 57, 61);
- every public function and method (name without a leading underscore, or ``__init__``; in a
  module whose name does not start with ``_``, ``__init__.py`` included; not inside a private
  class or another function) annotates every parameter but ``self``/``cls``, and its return
  (``__init__`` excepted, as mypy allows).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from storage_core.common import INT_MAX, LONG_MAX

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("storage_core", "kafka_log_source", "kafka_log_sink")
MAX_LINES = 700
LONG_MODULE_MARK = "700 lines"
# the v2 record-batch header (Kafka's DefaultRecordBatch): offsets of every field after the first
# two, and the header size; 0, 8 and 12 are left out of the literal checks, too common elsewhere
HEADER_OFFSETS = frozenset({16, 17, 21, 23, 27, 35, 43, 51, 53, 57, 61})
PATCHED_FIELDS = HEADER_OFFSETS | {0, 8, 12}    # a patch call names a field: baseOffset and the epoch too
JAVA_POWERS = frozenset({31, 63})
JAVA_LITERALS = frozenset({INT_MAX, LONG_MAX})
COMMON = "storage_core/common.py"
FACADE_LAYERS = frozenset({"index", "checkpoint", "producer", "log", "cleaner", "server", "tools"})
LOG_FACADE = "storage_core/log/log.py"      # Log itself: under 700 lines, whatever its docstring says


# --- import-linter and grimp ------------------------------------------------------------------

def contract_ids() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return [c["id"] for c in config["contracts"]]


def test_contracts_are_the_ones_issue_17_asks_for():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    by_id = {c["id"]: c for c in config["contracts"]}
    assert set(by_id) == {"layers", "engine-alone", "private-modules", "acyclic"}
    assert by_id["layers"]["layers"] == [
        "tools", "server", "cleaner", "remote", "log", "producer", "checkpoint", "index", "format",
        "errors : config : common : data_files"]
    assert by_id["layers"]["containers"] == ["storage_core"] and by_id["layers"]["exhaustive"]
    assert set(by_id["engine-alone"]["forbidden_modules"]) == {"pyspark", "kafka_log_source",
                                                               "kafka_log_sink"}
    assert set(by_id["acyclic"]["ancestors"]) == set(PACKAGES)
    assert not any("ignore_imports" in c for c in config["contracts"]), "no contract has exceptions"


@pytest.mark.parametrize("contract", contract_ids())
def test_import_contract(contract: str):
    """One import-linter contract, run as ``lint-imports --contract <id>`` from the repository
    root (import-linter puts the working directory first on sys.path: this checkout is checked,
    not an installed copy). Fails with import-linter's report."""
    run = subprocess.run(
        [sys.executable, "-c",
         "import sys\nfrom importlinter.cli import lint_imports\n"
         "sys.exit(lint_imports(limit_to_contracts=(sys.argv[1],), no_cache=True, no_logo=True))",
         contract], capture_output=True, text=True, cwd=ROOT, timeout=300)
    report = run.stdout + run.stderr
    assert "Contracts: 1 kept, 0 broken." in report and run.returncode == 0, report[-8000:]


def _module_graph() -> dict[str, list[str]]:
    """Every module of the three packages and the modules of them it imports (grimp's graph of
    this checkout; type-checking and function-level imports count)."""
    code = ("import json, sys\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "import grimp\n"
            "g = grimp.build_graph(*sys.argv[2:], cache_dir=None)\n"
            "print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))\n")
    run = subprocess.run([sys.executable, "-c", code, str(ROOT), *PACKAGES], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """The cycles of ``graph``: its strongly connected components of two or more nodes, and the
    nodes that import themselves (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp.append(member)
                        if member == node:
                            break
                    if len(comp) > 1 or node in graph.get(node, ()):
                        found.append(sorted(comp))
    return sorted(found)


def test_strongly_connected_finds_cycles():
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e"], "f": ["d"]}
    assert strongly_connected(graph) == [["a", "b", "c"], ["e"]]
    assert strongly_connected({"a": ["b"], "b": []}) == []


def test_no_import_cycle_between_any_modules():
    graph = _module_graph()
    assert "storage_core.index.offset_index" in graph       # the graph is of this checkout's code
    cycles = strongly_connected(graph)
    report = []
    for comp in cycles:
        members = set(comp)
        edges = [f"    {m} -> {t}" for m in comp for t in graph[m] if t in members]
        report.append(f"cycle of {len(comp)} modules:\n" + "\n".join(edges))
    assert not cycles, "\n".join(report)


# --- the source rules ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    """One module of the three packages: its path relative to the repository root, its dotted
    name, whether it is a package's ``__init__``, its text and syntax tree."""

    rel: str
    name: str
    is_package: bool
    text: str
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package the module belongs to: itself for an ``__init__``, else its parent."""
        return self.name if self.is_package else self.name.rpartition(".")[0]

    @staticmethod
    def parse(rel: str, text: str) -> Source:
        parts = rel.removesuffix(".py").split("/")
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        return Source(rel, name, is_package, text, ast.parse(text, rel))


@cache
def sources() -> tuple[Source, ...]:
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            found.append(Source.parse(rel, path.read_text()))
    return tuple(found)


Offence = tuple[int, str]      # (line, what)
Rule = Callable[[Source], list[Offence]]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _resolve(src: Source, node: ast.ImportFrom) -> str:
    """The absolute module an ``from X import ...`` reads from."""
    if not node.level:
        return node.module or ""
    base = src.package.split(".")
    if node.level > 1:
        base = base[:-(node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _package_of(module: str) -> str:
    """The package of an absolute module name of the three packages: itself where it is a
    folder, else its parent."""
    return module if (ROOT / module.replace(".", "/")).is_dir() else module.rpartition(".")[0]


def private_imports(src: Source) -> list[Offence]:
    out = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(src, node)
            if target.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                if not _is_private(alias.name):
                    continue
                # `from pkg import _mod` names a module of pkg, whose package is pkg itself
                if _package_of(target) != src.package:
                    out.append((node.lineno, f"imports private {alias.name} from {target}"))
    return out


def facade_imports(src: Source) -> list[Offence]:
    """From outside a layer package, storage_core's layers are imported through their
    ``__init__``; ``format`` is the exception (its modules are pure functions over buffers, and
    importers name the module: ``storage_core.format.record_batch``)."""
    out = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.ImportFrom):
            targets = [_resolve(src, node)]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[0] != "storage_core" or len(parts) < 3 or parts[1] not in FACADE_LAYERS:
                continue
            if src.name.split(".")[:2] != parts[:2]:
                out.append((node.lineno, f"imports {target}, not the {'.'.join(parts[:2])} facade"))
    return out


def long_module(src: Source) -> list[Offence]:
    lines = len(src.text.splitlines())
    if lines <= MAX_LINES:
        return []
    doc = ast.get_docstring(src.tree) or ""
    if LONG_MODULE_MARK in doc and src.rel != LOG_FACADE:
        return []
    return [(1, f"{lines} lines, and the module docstring does not say why (\"{LONG_MODULE_MARK}\")")]


def _is_get_logger(call: ast.expr) -> bool:
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    named = (isinstance(f, ast.Attribute) and f.attr == "getLogger"
             and isinstance(f.value, ast.Name) and f.value.id == "logging") or \
        (isinstance(f, ast.Name) and f.id == "getLogger")
    return named and len(call.args) == 1 and isinstance(call.args[0], ast.Name) \
        and call.args[0].id == "__name__"


def logger_names(src: Source) -> list[Offence]:
    out = []
    for node in ast.walk(src.tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                and _is_get_logger(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [ast.unparse(t) for t in targets]
            if names != ["logger"]:
                out.append((node.lineno, f"module logger named {', '.join(names)} (not logger)"))
    return out


def _java_power(node: ast.expr) -> bool:
    """``2**31``, ``2**63``, ``1 << 31`` or ``1 << 63``."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.left, ast.Constant)
            and isinstance(node.right, ast.Constant) and node.right.value in JAVA_POWERS):
        return False
    return ((isinstance(node.op, ast.Pow) and node.left.value == 2)
            or (isinstance(node.op, ast.LShift) and node.left.value == 1))


def java_bounds(src: Source) -> list[Offence]:
    """A Java bound is ``power - 1`` or ``-power``, or the maximum written out in decimal; a
    power alone (wrap-around arithmetic, a random range) and hexadecimal masks are not bounds."""
    if src.rel == COMMON:
        return []
    out = []
    for node in ast.walk(src.tree):
        bound = ((isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _java_power(node.left)
                  and isinstance(node.right, ast.Constant) and node.right.value == 1)
                 or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
                     and _java_power(node.operand)))
        if not bound and isinstance(node, ast.Constant) and type(node.value) is int \
                and node.value in JAVA_LITERALS:
            bound = (ast.get_source_segment(src.text, node) or "").isdigit()
        if bound:
            out.append((getattr(node, "lineno", 0), f"{ast.get_source_segment(src.text, node)}: a Java bound "
                                                    f"typed in (storage_core.common has INT_MIN..LONG_MAX)"))
    return out


def _header_literal(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value in HEADER_OFFSETS


def _literal_offset(node: ast.expr) -> bool:
    """A literal non-zero offset, or ``x + <literal>``/``<literal> + x``."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int and node.value != 0
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return any(isinstance(side, ast.Constant) and type(side.value) is int and side.value != 0
                   for side in (node.left, node.right))
    return False


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def header_offsets(src: Source) -> list[Offence]:
    if src.rel.startswith("storage_core/format/"):
        return []
    out = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in ("unpack_from", "pack_into"):
                f = node.func
                on_module = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and f.value.id == "struct"
                at = 2 if on_module else 1      # struct.unpack_from(fmt, buf, offset); S.unpack_from(buf, offset)
                if len(node.args) > at and not any(isinstance(a, ast.Starred) for a in node.args[:at + 1]) \
                        and _literal_offset(node.args[at]):
                    out.append((node.lineno, f"{ast.unparse(node)[:80]}: a literal byte offset"))
            elif ("patch" in name.lower() or name == "_put") and any(
                    isinstance(a, ast.Constant) and type(a.value) is int and a.value in PATCHED_FIELDS
                    for a in node.args[1:]):
                out.append((node.lineno, f"{ast.unparse(node)[:80]}: a header offset literal"))
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) \
                and len(node.slice.elts) == 2 and isinstance(node.slice.elts[1], ast.Constant) \
                and type(node.slice.elts[1].value) is int:
            owner = node.value
            owner_name = owner.attr if isinstance(owner, ast.Attribute) else \
                owner.id if isinstance(owner, ast.Name) else ""
            if owner_name == "fields":
                out.append((node.lineno, f"{ast.unparse(node)}: a header column by number "
                                         f"(format.batch_header.HeaderColumn)"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and _header_literal(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and (t.id.endswith("_AT") or "OFFSET" in t.id):
                    out.append((node.lineno, f"{t.id} = {node.value.value}: a header offset constant"))
    return out


def _public_defs(body: list[ast.stmt], in_class: bool) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not node.name.startswith("_") or (in_class and node.name == "__init__"):
                yield node, in_class
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _public_defs(node.body, True)
        elif isinstance(node, (ast.If, ast.Try)):        # `if TYPE_CHECKING:`, version switches
            yield from _public_defs(node.body, in_class)
            yield from _public_defs(node.orelse, in_class)


def missing_annotations(src: Source) -> list[Offence]:
    stem = src.rel.rsplit("/", 1)[-1].removesuffix(".py")
    if _is_private(stem):
        return []
    out = []
    for fn, is_method in _public_defs(src.tree.body, False):
        decorators = {ast.unparse(d) for d in fn.decorator_list}
        args = [*fn.args.posonlyargs, *fn.args.args]
        if is_method and "staticmethod" not in decorators and args:
            args = args[1:]                                  # self / cls
        args += [*fn.args.kwonlyargs]
        args += [a for a in (fn.args.vararg, fn.args.kwarg) if a is not None]
        bare = [a.arg for a in args if a.annotation is None]
        if bare:
            out.append((fn.lineno, f"{fn.name}: parameters without annotation: {', '.join(bare)}"))
        if fn.returns is None and fn.name != "__init__":
            out.append((fn.lineno, f"{fn.name}: no return annotation"))
    return out


RULES: dict[str, Rule] = {
    "private_imports": private_imports,
    "facade_imports": facade_imports,
    "long_module": long_module,
    "logger_names": logger_names,
    "java_bounds": java_bounds,
    "header_offsets": header_offsets,
    "missing_annotations": missing_annotations,
}


def _report(rule: Rule) -> tuple[Counter[str], list[str]]:
    per_file: Counter[str] = Counter()
    lines = []
    for src in sources():
        for line, what in rule(src):
            per_file[src.rel] += 1
            lines.append(f"{src.rel}:{line}: {what}")
    return per_file, lines


@pytest.mark.parametrize("rule", sorted(RULES))
def test_source_rule(rule: str):
    per_file, lines = _report(RULES[rule])
    counts = "\n".join(f"  {n:4d}  {f}" for f, n in sorted(per_file.items(), key=lambda kv: (-kv[1], kv[0])))
    assert not lines, (f"{rule}: {len(lines)} offences in {len(per_file)} files\n{counts}\n"
                       + "\n".join(lines[:400]))


# Each rule against one offence and one near miss, parsed as the file given.
RULE_CASES = [
    ("private_imports", "storage_core/log/log.py", "from ..format._kernels import copy\n", 0),
    ("private_imports", "storage_core/log/log.py", "from ..format.record_batch import _parse\n", 1),
    ("private_imports", "storage_core/log/log.py", "from ..format import _kernels\n", 1),
    ("private_imports", "kafka_log_source/reader.py", "from storage_core.log.segment import _x\n", 1),
    ("private_imports", "storage_core/log/log.py", "from .segment import _x, __all__\n", 0),
    ("private_imports", "storage_core/log/__init__.py", "from .segment import _x\n", 0),
    ("private_imports", "storage_core/log/log.py", "from numpy import _x\n", 0),
    ("facade_imports", "storage_core/log/log.py", "from ..index.abstract_index import index_oversized\n", 1),
    ("facade_imports", "kafka_log_source/reader.py", "import storage_core.log.segment\n", 1),
    ("facade_imports", "kafka_log_source/reader.py", "from storage_core.log.view import LogView\n", 1),
    ("facade_imports", "storage_core/log/log.py",
     "from ..index import OffsetIndex\nfrom .segment import LogSegment\nfrom ..format.record_batch import X\n"
     "from ..errors import E\nfrom storage_core.log import Log\n", 0),
    ("long_module", "storage_core/x.py", '"""Short."""\n' + "x = 1\n" * 700, 1),
    ("long_module", "storage_core/x.py", '"""Over 700 lines: why."""\n' + "x = 1\n" * 700, 0),
    ("long_module", "storage_core/x.py", '"""Short."""\n' + "x = 1\n" * 699, 0),
    ("long_module", LOG_FACADE, '"""Over 700 lines: why."""\n' + "x = 1\n" * 700, 1),
    ("logger_names", "storage_core/x.py", "import logging\nlog = logging.getLogger(__name__)\n", 1),
    ("logger_names", "storage_core/x.py", "from logging import getLogger\n_log = getLogger(__name__)\n", 1),
    ("logger_names", "storage_core/x.py", "import logging\nlogger = logging.getLogger(__name__)\n", 0),
    ("logger_names", "storage_core/x.py", "import logging\npy4j = logging.getLogger('py4j')\n", 0),
    ("java_bounds", "storage_core/x.py", "M = 2**31 - 1\n", 1),
    ("java_bounds", "storage_core/x.py", "M = -(2 ** 63)\n", 1),
    ("java_bounds", "storage_core/x.py", "M = (1 << 63) - 1\n", 1),
    ("java_bounds", "storage_core/x.py", "M = 9223372036854775807\n", 1),
    ("java_bounds", "storage_core/x.py", "M = 2**32\nN = 2147483646\nF = 0x7FFFFFFF\nW = (x + 2**31) % 2**32\n", 0),
    ("java_bounds", "storage_core/x.py", "if -(1 << 31) <= x < 2147483647: pass\n", 2),
    ("java_bounds", COMMON, "INT_MAX = 2**31 - 1\n", 0),
    ("header_offsets", "storage_core/cleaner/x.py", "import struct\nstruct.unpack_from('>b', b, 16)\n", 1),
    ("header_offsets", "storage_core/cleaner/x.py", "S.unpack_from(b, pos + 35)\n", 1),
    ("header_offsets", "storage_core/cleaner/x.py", "S.pack_into(b, 0, 1)\nS.unpack_from(b, pos)\n", 0),
    ("header_offsets", "storage_core/log/x.py", "c = scan.fields[:, 9]\n", 1),
    ("header_offsets", "storage_core/log/x.py", "c = scan.fields[:, HeaderColumn.MAGIC]\n", 0),
    ("header_offsets", "storage_core/log/x.py", "_patch(buf, positions, 12, v)\n_put(b, p, 53, v)\n", 2),
    ("header_offsets", "kafka_log_sink/x.py", "BASE_SEQUENCE_OFFSET = 53\n_MAGIC_AT = 16\n", 2),
    ("header_offsets", "storage_core/format/x.py", "_MAGIC_AT = 16\nstruct.unpack_from('>b', b, 16)\n", 0),
    ("missing_annotations", "storage_core/x.py", "def f(a, b: int) -> int: ...\n", 1),
    ("missing_annotations", "storage_core/x.py", "def f(a: int, *rest, **kw: int): ...\n", 2),
    ("missing_annotations", "storage_core/x.py",
     "class C:\n    def __init__(self, a): ...\n    @staticmethod\n    def s(a: int): ...\n", 2),
    ("missing_annotations", "storage_core/x.py",
     "class C:\n    def __init__(self, a: int): ...\n    @classmethod\n    def m(cls) -> int: ...\n"
     "    def _p(self, a): ...\n    def __len__(self): ...\nclass _D:\n    def m(self, a): ...\n"
     "def g() -> None:\n    def inner(a): ...\n", 0),
    ("missing_annotations", "storage_core/_private.py", "def f(a): ...\n", 0),
    ("missing_annotations", "storage_core/x/__init__.py", "def f(a) -> None: ...\n", 1),
]


@pytest.mark.parametrize(("rule", "rel", "code", "offences"), RULE_CASES)
def test_rule_catches_what_it_names(rule: str, rel: str, code: str, offences: int):
    found = RULES[rule](Source.parse(rel, textwrap.dedent(code)))
    assert len(found) == offences, found


def test_sources_are_the_three_packages():
    names = {s.name for s in sources()}
    assert {"storage_core", "storage_core.log.log", "kafka_log_source.reader", "kafka_log_sink.commit",
            "storage_core.format._kernels"} <= names
    assert all(re.fullmatch(r"(storage_core|kafka_log_source|kafka_log_sink)(\.\w+)*", n) for n in names)

"""How the ``kafkalog`` command is built (issue 17): a module per command imported only when the
command runs, one output layer that alone writes to stdout and stderr, and only public names of
the engine used, through the package facades. Checked on the real modules: a fresh interpreter
for the imports, the ``ast`` of every module of ``storage_core/tools`` for the rest."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "storage_core" / "tools"
MODULES = sorted(TOOLS.glob("*.py"))
COMMANDS = ("dump", "describe", "verify", "recover", "retention", "compact", "config")
# where writing to stdout/stderr is allowed: the output layer, and main's last-resort handling
WRITERS = {"output.py", "cli.py", "__main__.py"}
NON_WRITERS = [p for p in MODULES if p.name not in WRITERS]


def test_modules_are_found() -> None:
    names = {p.stem for p in MODULES}
    assert {"cli", "output", *COMMANDS} <= names, names
    assert WRITERS <= {p.name for p in MODULES}      # the writers left out below exist


def test_help_imports_no_command_module_and_no_engine() -> None:
    """``kafkalog --help`` parses arguments only: no command module and none of the engine's
    packages (the log, the format's kernels, pyarrow, numpy) is imported."""
    code = ("import sys\n"
            "from storage_core.tools.cli import main\n"
            "try:\n"
            "    main(['--help'])\n"
            "except SystemExit as e:\n"
            "    assert e.code == 0, e.code\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith(('storage_core', 'numpy', "
            "'pyarrow', 'numba')))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=TOOLS.parents[1])               # this checkout's storage_core first
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.splitlines()[-1].split())
    assert "storage_core.tools.cli" in loaded and "storage_core.tools.output" in loaded
    heavy = {m for m in loaded if m.split(".")[0] in ("numpy", "pyarrow", "numba")
             or m.startswith(("storage_core.log", "storage_core.format", "storage_core.server"))
             or m in {f"storage_core.tools.{c}" for c in COMMANDS}}
    assert not heavy, sorted(heavy)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_runs_from_its_own_module(command: str) -> None:
    """The parser names, for each command, the module whose ``run`` carries it out."""
    from storage_core.tools.cli import build_parser

    argv = {"dump": ["--files", "x"], "verify": ["x"], "config": ["d", "--topic", "t"]}.get(command, ["d"])
    args = build_parser().parse_args([command, *argv])
    assert args.command_module == command
    module = __import__(f"storage_core.tools.{command}", fromlist=["run"])
    assert callable(module.run)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@pytest.mark.parametrize("path", NON_WRITERS, ids=lambda p: p.name)
def test_only_the_output_layer_writes(path: Path) -> None:
    """No ``print`` and no ``sys.stdout``/``sys.stderr`` in a command module (every module but
    the output layer and main's): every line goes through ``storage_core.tools.output.Output``."""
    bad = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            bad.append(f"line {node.lineno}: print")
        if (isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr")
                and isinstance(node.value, ast.Name) and node.value.id == "sys"):
            bad.append(f"line {node.lineno}: sys.{node.attr}")
    assert not bad, bad


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_private_engine_name_is_used(path: Path) -> None:
    """Imports from outside ``tools`` name no private module or name, and no private attribute
    of an engine object is read (``mgr._apply_config`` was)."""
    bad = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and (node.level >= 2 or (node.module or "").startswith("storage_core")):
            parts = (node.module or "").split(".")
            bad += [f"line {node.lineno}: {node.module}" for p in parts if p.startswith("_")]
            bad += [f"line {node.lineno}: {a.name}" for a in node.names if a.name.startswith("_")]
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            bad.append(f"line {node.lineno}: .{node.attr}")
    assert not bad, bad


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_modules_stay_small(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 700, path.name


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_public_functions_are_typed(path: Path) -> None:
    """Every public function and method has annotated parameters and a return annotation."""
    bad = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            args = [a for a in node.args.args + node.args.kwonlyargs if a.arg not in ("self", "cls")]
            if node.returns is None or any(a.annotation is None for a in args):
                bad.append(f"line {node.lineno}: {node.name}")
    assert not bad, bad

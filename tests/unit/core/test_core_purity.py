"""The core stays pure: no clock, randomness, I/O, threads, networking or Raft, checked on the source.

Everything that could differ between replicas must arrive inside a command; this test
parses every module under scheduler/core/ and refuses imports and calls that would
let it leak in. Python's hash() is refused too: it is salted per process.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE_DIR = Path(__file__).resolve().parents[3] / "scheduler" / "core"
CORE_PACKAGE = "scheduler.core"

FORBIDDEN_MODULES = frozenset(
    {
        "time",
        "datetime",
        "random",
        "secrets",
        "uuid",
        "os",
        "sys",
        "socket",
        "threading",
        "multiprocessing",
        "asyncio",
        "subprocess",
        "concurrent",
        "grpc",
        "pysyncobj",
        "logging",
        "importlib",
        "builtins",
    }
)
FORBIDDEN_CALLS = frozenset({"open", "print", "hash", "input", "__import__", "eval", "exec", "breakpoint"})


def _absolute(module: str | None, level: int, package: str) -> str:
    """Resolve a (possibly relative) `from ... import` target against the importing package."""
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)] if level - 1 < len(parts) else []
    return ".".join(base + ([module] if module else []))


def _import_problem(name: str) -> str | None:
    top = name.split(".")[0]
    if top in FORBIDDEN_MODULES:
        return f"imports {name}"
    if top == "scheduler" and name != CORE_PACKAGE and not name.startswith(CORE_PACKAGE + "."):
        return f"imports {name} from outside {CORE_PACKAGE}"
    return None


def purity_violations(source: str, package: str = CORE_PACKAGE, filename: str = "<source>") -> list[str]:
    """Every forbidden import or call in `source`, as 'file:line: what'."""
    tree = ast.parse(source, filename=filename)
    found: list[str] = []

    def report(node: ast.AST, message: str) -> None:
        found.append(f"{filename}:{getattr(node, 'lineno', 0)}: {message}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if problem := _import_problem(alias.name):
                    report(node, problem)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node.module, node.level, package)
            names = [target] if node.module else [f"{target}.{alias.name}" for alias in node.names]
            if target == "scheduler":  # from scheduler import x: x is the module
                names = [f"scheduler.{alias.name}" for alias in node.names]
            for name in names:
                if problem := _import_problem(name):
                    report(node, problem)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
                report(node, f"calls {func.id}()")
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "builtins":
                report(node, f"calls builtins.{func.attr}()")
    return found


def core_modules() -> list[Path]:
    return sorted(CORE_DIR.rglob("*.py"))


def test_core_modules_exist() -> None:
    names = {path.name for path in core_modules()}
    assert {"__init__.py", "apply.py", "codec.py", "commands.py", "state.py"} <= names


@pytest.mark.parametrize("path", core_modules(), ids=lambda path: path.name)
def test_core_module_is_pure(path: Path) -> None:
    relative = path.relative_to(CORE_DIR).with_suffix("")
    package = ".".join([CORE_PACKAGE, *relative.parts[:-1]])
    violations = purity_violations(
        path.read_text(), package=package, filename=str(path.relative_to(CORE_DIR.parents[1]))
    )
    assert violations == []


# -- the checker itself must catch what it is for ---------------------------------------

CLEAN = """
from __future__ import annotations
import bisect
import hashlib
from collections.abc import Callable
import msgspec
from scheduler.core import results as ev
from scheduler.core.model import Job
from . import state
from .commands import ClaimRuns
def f(x):
    return hashlib.sha256(x).hexdigest(), id(x), x.hash()
"""


def test_clean_source_passes() -> None:
    assert purity_violations(CLEAN) == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import time\n", "imports time"),
        ("import time as clock\n", "imports time"),
        ("import os.path\n", "imports os.path"),
        ("from datetime import datetime\n", "imports datetime"),
        ("from random import Random\n", "imports random"),
        ("import uuid\n", "imports uuid"),
        ("from concurrent.futures import Future\n", "imports concurrent.futures"),
        ("import logging\n", "imports logging"),
        ("from pysyncobj import SyncObj\n", "imports pysyncobj"),
        ("import grpc\n", "imports grpc"),
        ("def f():\n    import secrets\n", "imports secrets"),
        ("from scheduler.replication import RaftLog\n", "imports scheduler.replication from outside"),
        ("from scheduler import config\n", "imports scheduler.config from outside"),
        ("import scheduler.leader.trigger\n", "imports scheduler.leader.trigger from outside"),
        ("from .. import node\n", "imports scheduler.node from outside"),
        ("from ..planning import schedule\n", "imports scheduler.planning from outside"),
        ("open('x')\n", "calls open()"),
        ("print('debug')\n", "calls print()"),
        ("key = hash(('a', 1))\n", "calls hash()"),
        ("__import__('time')\n", "calls __import__()"),
        ("import builtins\nbuiltins.open('x')\n", "calls builtins.open()"),
    ],
)
def test_checker_catches(source: str, expected: str) -> None:
    violations = purity_violations(source)
    assert any(expected in violation for violation in violations), violations


def test_adding_import_time_to_a_real_core_module_fails() -> None:
    path = CORE_DIR / "apply.py"
    tainted = "import time\n" + path.read_text() + "\ndef _now():\n    return time.time()\n"
    assert purity_violations(path.read_text()) == []
    assert purity_violations(tainted, filename="apply.py") == ["apply.py:1: imports time"]

"""The planning package stays pure: no clock, randomness, threads or I/O of its own.

Replicas and a new leader must compute the same fires from the same inputs, so the code must
not be able to see anything but its arguments (and the tz database).
"""

from __future__ import annotations

import ast
from pathlib import Path

import scheduler.planning

PACKAGE_DIR = Path(scheduler.planning.__file__).parent
ALLOWED_IMPORTS = {
    "__future__",
    "bisect",
    "calendar",
    "dataclasses",
    "datetime",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "re",
    "typing",
    "zoneinfo",
    "collections",
}
# Of the project, only the vocabulary (a module of StrEnums, itself pure): DST rule names.
ALLOWED_PROJECT_MODULES = {"scheduler.core.vocabulary"}
# msgspec's UNSET marker, the default of a spec's optional ways to fire (a constant, no I/O).
ALLOWED_NAMES = {("msgspec", "UNSET")}
FORBIDDEN_ATTRIBUTES = {"now", "utcnow", "today", "time", "monotonic", "perf_counter", "urandom"}
FORBIDDEN_CALLS = {"open", "hash", "input", "print"}


def _modules():
    return sorted(PACKAGE_DIR.glob("*.py"))


def test_only_pure_standard_modules_are_imported():
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                if node.module in ALLOWED_PROJECT_MODULES:
                    continue
                if all((node.module, alias.name) in ALLOWED_NAMES for alias in node.names):
                    continue
                names = [node.module.split(".")[0]]
            else:
                continue
            assert set(names) <= ALLOWED_IMPORTS, f"{path.name} imports {names}"


def test_no_clock_reads_or_impure_calls():
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute):
                assert node.attr not in FORBIDDEN_ATTRIBUTES, f"{path.name}:{node.lineno} .{node.attr}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in FORBIDDEN_CALLS, f"{path.name}:{node.lineno} {node.func.id}()"

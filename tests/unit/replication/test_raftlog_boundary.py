"""Nothing outside scheduler/replication/ reaches into RaftLog's private attributes.

An apply listener is handed the state it reads. Code that took `raftlog._state` instead
depended on RaftLog's insides and on the caller knowing the lock was held.
"""

from __future__ import annotations

import ast
from pathlib import Path

import scheduler
from scheduler.replication import raftlog as raftlog_module

PACKAGE_DIR = Path(scheduler.__file__).parent
REPLICATION_DIR = PACKAGE_DIR / "replication"
HOLDER_NAMES = {"raftlog", "_raftlog"}  # what the code base calls a RaftLog it holds


def raftlog_privates() -> set[str]:
    """The `self._x` attributes RaftLog.__init__ sets."""
    tree = ast.parse(Path(raftlog_module.__file__).read_text())
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "RaftLog")
    init = next(node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    return {
        node.attr
        for node in ast.walk(init)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr.startswith("_")
    }


def violations(source: str, filename: str = "<source>") -> list[str]:
    private = raftlog_privates()
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not (isinstance(node, ast.Attribute) and node.attr in private):
            continue
        holder = node.value
        name = holder.id if isinstance(holder, ast.Name) else holder.attr if isinstance(holder, ast.Attribute) else ""
        if name in HOLDER_NAMES:
            found.append(f"{filename}:{node.lineno} .{node.attr}")
    return found


def test_the_checker_catches_a_listener_reading_the_state_behind_raftlogs_back() -> None:
    assert {"_state", "_lock", "_listeners", "_syncobj"} <= raftlog_privates()
    source = (
        "def on_apply(self, command, result):\n    return self._raftlog._state, raftlog._lock, node.raftlog._syncobj\n"
    )
    assert violations(source) == ["<source>:2 ._state", "<source>:2 ._lock", "<source>:2 ._syncobj"]
    assert violations("self._state = state\nself._raftlog.read()\n") == []


def test_no_module_outside_replication_reads_a_raftlog_private() -> None:
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if REPLICATION_DIR not in path.parents:
            found += violations(path.read_text(), str(path.relative_to(PACKAGE_DIR.parent)))
    assert found == []

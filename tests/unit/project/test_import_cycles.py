"""No import cycles in scheduler/ and worker/, read from the source.

A cycle works until someone imports its modules in another order, or moves a deferred import
to the top of a file; then it fails at import time, far from the change that caused it. Imports
inside functions count for the same reason: they are only deferred, not absent.

The graph: every `import` and `from ... import` anywhere in a module except under
`if TYPE_CHECKING:`; relative imports resolved; `from pkg import name` imports `pkg.name` when
that is a module and `pkg` otherwise; `pkg/__init__.py` is the module `pkg`. Python runs a
package's `__init__` before any child, but that alone is not an edge: a package re-exporting its
children is fine, a child importing its own package (which imports the child) is a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("scheduler", "worker")


def module_files(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Every module under `packages`, by dotted name; a package by its own name."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST):
    """Import statements at any depth, except the bodies of `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _base(name: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module
    package = name if is_package else name.rpartition(".")[0]
    parts = package.split(".")
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in _import_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    # `import a.b.c` as its deepest module of ours.
                    parts = alias.name.split(".")
                    found = next(
                        (".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in modules), None
                    )
                    if found:
                        targets.add(found)
                continue
            base = _base(name, path.name == "__init__.py", node)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    targets.add(f"{base}.{alias.name}")
                elif base in modules:
                    targets.add(base)
        targets.discard(name)
        graph[name] = targets
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles as paths a -> ... -> a, together naming every module on one (Tarjan's groups)."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []

    def visit(start: str) -> None:
        # Iterative: a deep import chain must not hit the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(set(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    cycles = []
    for group in groups:
        covered = set()
        for start in sorted(group):
            if start not in covered:
                cycles.append(_cycle_through(graph, group, start))
                covered.update(cycles[-1])
    return cycles


def _cycle_through(graph: dict[str, set[str]], group: set[str], start: str) -> list[str]:
    """The shortest cycle from `start` back to it within its group (breadth-first)."""
    previous = {start: None}
    queue = [start]
    for node in queue:
        for child in sorted(graph[node] & group):
            if child == start:
                path = [node]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if child not in previous:
                previous[child] = node
                queue.append(child)
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")


def test_no_import_cycles():
    cycles = find_cycles(import_graph(module_files(ROOT)))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def _write(root: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return import_graph(module_files(root, ("pkg",)))


def test_the_graph_reads_every_kind_of_import(tmp_path):
    graph = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import thing\n",
            "pkg/a.py": "from . import b\nfrom .sub import name\nimport pkg.sub.c\n",
            "pkg/b.py": "def later():\n    from pkg import sub\n",
            "pkg/sub/__init__.py": "from ..a import thing\n",
            "pkg/sub/c.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\n"
                "else:\n    import os\n    from pkg.sub import missing_name\n"
            ),
        },
    )
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b", "pkg.sub", "pkg.sub.c"},
        "pkg.b": {"pkg.sub"},
        "pkg.sub": {"pkg.a"},
        "pkg.sub.c": {"pkg.sub"},
    }
    assert find_cycles(graph) == [
        ["pkg.a", "pkg.sub", "pkg.a"],
        ["pkg.b", "pkg.sub", "pkg.a", "pkg.b"],
        ["pkg.sub.c", "pkg.sub", "pkg.a", "pkg.sub.c"],
    ]


def test_a_child_importing_its_own_package_is_a_cycle_a_package_re_exporting_is_not(tmp_path):
    graph = _write(tmp_path, {"pkg/__init__.py": "from .child import name\n", "pkg/child.py": "name = 1\n"})
    assert find_cycles(graph) == []
    graph = _write(tmp_path, {"pkg/child.py": "def late():\n    from pkg import name\n"})
    assert find_cycles(graph) == [["pkg", "pkg.child", "pkg"]]

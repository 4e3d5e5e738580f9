"""The README's package table names every package and root module, and nothing that is gone.

The table is how a newcomer finds their way in: a package added without a row, or a row left
behind by a move, makes it lie. Any backticked path in a row counts as named: a path with a `/`
is read from the repository root, a bare `name.py` inside the row's own packages (or beside the
row's module).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
HEADER = "| package | what lives there |"
# Backticked text that is a path: `scheduler.cli:main` or `raftcron.v1` are not.
PATH = re.compile(r"^[A-Za-z0-9_./-]+$")


def table_rows(text: str) -> list[tuple[str, str]]:
    """(first cell, rest of the row) for every row of the package table, header excluded."""
    lines = text.splitlines()
    start = lines.index(HEADER)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = line.strip().strip("|").split("|")
        rows.append((cells[0], "|".join(cells[1:])))
    return rows


def paths_in(cell: str) -> list[str]:
    tokens = re.findall(r"`([^`]+)`", cell)
    return [t for t in tokens if PATH.match(t) and ("/" in t or t.endswith(".py"))]


def named_paths(text: str) -> set[str]:
    """Every path the table names, relative to the repository root, without a trailing `/`."""
    named: set[str] = set()
    for first, rest in table_rows(text):
        heads = paths_in(first)
        bases = [h.rstrip("/") if h.endswith("/") else str(Path(h).parent) for h in heads]
        for path in heads + paths_in(rest):
            if "/" in path:
                named.add(path.rstrip("/"))
                continue
            candidates = [f"{base}/{path}" for base in bases]
            existing = [c for c in candidates if (ROOT / c).exists()]
            named.update(existing or candidates[:1] or [path])
    return named


def required_paths() -> set[str]:
    """Packages one level under scheduler/ and worker/, and the modules at the scheduler/ root."""
    required = {
        f"{top}/{d.name}"
        for top in ("scheduler", "worker")
        for d in (ROOT / top).iterdir()
        if d.is_dir() and (d / "__init__.py").is_file()
    }
    required |= {f"scheduler/{m.name}" for m in (ROOT / "scheduler").glob("*.py") if m.name != "__init__.py"}
    return required


def test_the_package_table_is_found_and_names_paths() -> None:
    named = named_paths(README.read_text(encoding="utf-8"))
    assert "scheduler/core" in named and "worker" in named, sorted(named)


def test_every_package_and_root_module_is_in_the_table() -> None:
    missing = sorted(required_paths() - named_paths(README.read_text(encoding="utf-8")))
    assert not missing, f"README.md's package table does not name: {', '.join(missing)}"


def test_every_path_in_the_table_exists() -> None:
    gone = sorted(p for p in named_paths(README.read_text(encoding="utf-8")) if not (ROOT / p).exists())
    assert not gone, f"README.md's package table names paths that do not exist: {', '.join(gone)}"

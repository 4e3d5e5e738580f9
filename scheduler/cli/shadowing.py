"""Is the `worker` that Python would import raftcron's SDK, or a user's file of the same name?

The SDK's package is called `worker`, and `python -m ...` puts the current directory first on
the import path: a `worker.py` (or a `worker/` package) there is imported instead, and fails
far from the cause (`'worker' is not a package`). This finds it without importing it, since
importing a user's worker.py would run it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# raftcron's own SDK sits beside this package in every install: site-packages or a source tree.
_OURS = Path(__file__).resolve().parent.parent.parent / "worker" / "__init__.py"


def _sentence(found: Path) -> str:
    package = found.name == "__init__.py"
    return (
        f"your {'package' if package else 'file'} {found.parent if package else found} shadows raftcron's worker "
        "package: rename it (Python imports it instead of raftcron's SDK)"
    )


def shadowing_in(directory: Path) -> str | None:
    """What in `directory` would shadow the SDK for a `python -m` started there (the processes
    `raftcron dev` starts inherit its directory); None if nothing."""
    for candidate in (Path(directory) / "worker.py", Path(directory) / "worker" / "__init__.py"):
        if candidate.is_file() and candidate.resolve() != _OURS:
            return _sentence(candidate)
    return None


def shadowing_worker(ours: Path = _OURS) -> str | None:
    """What shadows raftcron's worker package, as a sentence for the operator; None if nothing."""
    if not ours.is_file():
        return None  # an install laid out otherwise (a zip): nothing to compare with
    loaded = sys.modules.get("worker")
    if loaded is not None:
        origin = getattr(loaded, "__file__", None)
    else:
        try:
            spec = importlib.util.find_spec("worker")
        except (ImportError, ValueError):
            return None
        origin = spec.origin if spec is not None else None
    if not origin or Path(origin).resolve() == ours:
        return None
    return _sentence(Path(origin))

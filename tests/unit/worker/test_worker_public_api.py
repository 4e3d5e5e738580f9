"""The worker SDK's public surface: what users may import is pinned, so a change to it is deliberate."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import worker

WORKER_DIR = Path(worker.__file__).resolve().parent

PUBLIC_NAMES = [
    "CancelReason",
    "ClusterClient",
    "Credentials",
    "FinalFailure",
    "HandlerOutcome",
    "LeaseRefused",
    "Outcome",
    "OutcomeKind",
    "PlaintextTokenRefused",
    "RetryLater",
    "RunContext",
    "SHELL_TARGET",
    "ShellCommand",
    "ShellResult",
    "Worker",
    "make_context",
    "parse_cluster",
    "run_handler",
]

# The modules the README tells users to import, besides the package itself: the test helper,
# `raftcron worker`, and the generated gRPC contract.
PUBLIC_MODULES = {"testing", "cli", "api"}


def test_all_is_pinned() -> None:
    assert sorted(worker.__all__) == PUBLIC_NAMES


def test_every_public_name_is_importable_from_the_package() -> None:
    namespace: dict[str, object] = {}
    exec(f"from worker import {', '.join(PUBLIC_NAMES)}", namespace)
    assert all(namespace[name] is getattr(worker, name) for name in PUBLIC_NAMES)


def test_no_public_module_beyond_the_documented_ones() -> None:
    public = {
        path.stem if path.is_file() else path.name
        for path in WORKER_DIR.iterdir()
        if not path.name.startswith(("_", "."))
        and (path.suffix == ".py" or (path.is_dir() and (path / "__init__.py").is_file()))
    }
    assert public == PUBLIC_MODULES


def test_documented_modules_import() -> None:
    for name in sorted(PUBLIC_MODULES):
        importlib.import_module(f"worker.{name}")


def test_the_sdk_imports_only_its_own_dependencies() -> None:
    # `pip install raftcron` brings grpcio and protobuf only (the server's are the `server` extra),
    # so an import of scheduler code or of a server dependency would break an SDK-only install.
    allowed = set(sys.stdlib_module_names) | {"grpc", "google", "worker"}
    found = set()
    for path in WORKER_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {(alias.name.partition(".")[0], path.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add((node.module.partition(".")[0], path.name))
    assert sorted((name, where) for name, where in found if name not in allowed) == []

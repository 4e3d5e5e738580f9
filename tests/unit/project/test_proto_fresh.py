"""The committed gRPC code is exactly what scripts/gen_proto.sh generates from proto/."""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GEN = ROOT / "scripts" / "gen_proto.py"
PACKAGE_DIR = "worker/api/v1"
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
FIX = "the generated gRPC code is stale: run scripts/gen_proto.sh and commit the result"


def _generated(root: Path) -> dict[str, bytes]:
    package = root / PACKAGE_DIR
    if not package.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in sorted(package.iterdir()) if p.name.endswith(SUFFIXES)}


def _diff(name: str, committed: bytes, fresh: bytes, limit: int = 40) -> str:
    lines = list(
        difflib.unified_diff(
            committed.decode(errors="replace").splitlines(),
            fresh.decode(errors="replace").splitlines(),
            f"committed/{name}",
            f"regenerated/{name}",
            lineterm="",
        )
    )
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more lines)"]
    return "\n".join(lines)


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    # The same script and pinned tool as scripts/gen_proto.sh, written to a temporary root.
    proc = subprocess.run(
        [sys.executable, str(GEN), "--out", str(tmp_path)],
        cwd=tmp_path,  # the output must not depend on the working directory
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.fail(
            "regenerating the gRPC code failed (run scripts/gen_proto.sh):\n" + proc.stdout + proc.stderr,
            pytrace=False,
        )

    fresh = _generated(tmp_path)
    committed = _generated(ROOT)
    assert fresh, "the generator produced no file"

    problems = []
    for name in sorted(fresh.keys() - committed.keys()):
        problems.append(f"missing from {PACKAGE_DIR}: {name}")
    for name in sorted(committed.keys() - fresh.keys()):
        problems.append(f"extra in {PACKAGE_DIR} (no .proto generates it): {name}")
    for name in sorted(fresh.keys() & committed.keys()):
        if fresh[name] != committed[name]:
            diff = _diff(name, committed[name], fresh[name])
            problems.append(f"differs: {PACKAGE_DIR}/{name}\n{diff}")
    if problems:
        pytest.fail(FIX + "\n\n" + "\n".join(problems), pytrace=False)

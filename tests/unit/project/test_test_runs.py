"""scripts/test.sh runs the suite in several pytest runs (the pure tests on every core, then the
chaos and the loopback lanes side by side): a test folder named in none would never run in CI."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _folders_run_by_the_test_script() -> set[str]:
    script = (ROOT / "scripts" / "test.sh").read_text()
    runs = [line for line in script.splitlines() if "-m pytest" in line and "tests/" in line]
    assert len(runs) >= 2, f"expected the pytest runs of scripts/test.sh, found {runs}"
    return {match for line in runs for match in re.findall(r"\btests/([a-z0-9_]+)\b", line)}


def test_every_test_folder_is_run_by_the_test_script():
    folders = {path.name for path in (ROOT / "tests").iterdir() if path.is_dir() and any(path.rglob("test_*.py"))}
    assert folders == _folders_run_by_the_test_script()


def test_no_test_module_sits_at_the_top_of_tests():
    assert not list((ROOT / "tests").glob("test_*.py"))

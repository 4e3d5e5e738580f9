"""A user's worker.py (or worker/ package) shadowing raftcron's SDK is named, not run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.cli.shadowing import shadowing_worker

ROOT = Path(__file__).resolve().parents[3]


def run_in(directory: Path, *argv: str) -> subprocess.CompletedProcess:
    # Only the import path the installed package gives, as for a user: not this checkout's tests.
    return subprocess.run(
        [sys.executable, *argv], cwd=directory, capture_output=True, text=True, timeout=60, env=_env()
    )


def _env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return env | {"PYTHONPATH": str(ROOT)}  # after the current directory, as an install puts it


def test_nothing_shadows_the_sdk_here():
    assert shadowing_worker() is None


@pytest.mark.parametrize("layout", ["file", "package"])
def test_a_shadowing_worker_is_named_and_never_imported(tmp_path, layout):
    user_code = 'open("ran", "w").write("user code ran")\n'
    if layout == "file":
        (tmp_path / "worker.py").write_text(user_code)
        shown = tmp_path / "worker.py"
    else:
        (tmp_path / "worker").mkdir()
        (tmp_path / "worker" / "__init__.py").write_text(user_code)
        shown = tmp_path / "worker"
    done = run_in(tmp_path, "-m", "scheduler.cli", "--version")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"raftcron: your {layout} {shown} shadows raftcron's worker package: rename it "
        "(Python imports it instead of raftcron's SDK)"
    )
    assert not (tmp_path / "ran").exists()


def test_handlers_named_worker_in_a_directory_with_worker_py(tmp_path, monkeypatch, capsys):
    from worker import cli as worker_cli

    (tmp_path / "worker.py").write_text("HANDLERS = {}\n")
    monkeypatch.chdir(tmp_path)
    assert worker_cli.main(["--handlers", "worker:HANDLERS"]) == 2
    err = capsys.readouterr().err
    assert f"your file {tmp_path / 'worker.py'} shadows raftcron's worker package: rename it" in err


def test_dev_refuses_to_start_its_processes_beside_a_worker_py(tmp_path, monkeypatch, capsys):
    from scheduler import cli

    (tmp_path / "worker.py").write_text("raise SystemExit('never imported')\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["dev", "--data-dir", str(tmp_path / "dev")]) == 2
    assert f"raftcron dev: your file {tmp_path / 'worker.py'} shadows" in capsys.readouterr().err
    assert not (tmp_path / "dev").exists()

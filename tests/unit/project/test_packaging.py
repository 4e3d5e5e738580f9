"""An install without the `server` extra: the worker SDK works, the server's command says what it lacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# The import names of the `server` extra's distributions; None in sys.modules makes an import fail
# as if the distribution were not installed.
SERVER_MODULES = ("pysyncobj", "cryptography", "yaml", "prometheus_client", "grpc_health", "msgspec")


def _without_server(code: str) -> subprocess.CompletedProcess:
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in SERVER_MODULES)
    return subprocess.run(
        [sys.executable, "-c", f"import sys\n{blocked}{code}"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_the_raftcron_command_names_the_extra_in_one_line() -> None:
    proc = _without_server("from scheduler.cli import main\nmain(['--help'])")
    assert proc.returncode == 2  # a missing optional dependency is the operator's to fix
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "pip install 'raftcron[server]'" in proc.stderr


def test_the_sdk_and_the_worker_command_need_no_server_module() -> None:
    proc = _without_server("import worker, worker.cli, worker.testing\nworker.cli.main(['--help'])")
    assert proc.returncode == 0, proc.stderr
    assert "usage: raftcron worker" in proc.stdout

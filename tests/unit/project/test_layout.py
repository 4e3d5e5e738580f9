"""The scheduler/ root holds only the node process's own modules: whatever else a reader looks for
lives in a package named for what it is (cli, local, planning, security...)."""

from __future__ import annotations

from pathlib import Path

SCHEDULER = Path(__file__).resolve().parents[3] / "scheduler"
NODE_PROCESS = {"__init__.py", "node.py", "config.py", "logs.py", "allocator.py", "collector.py", "membership.py"}


def test_the_scheduler_root_holds_only_the_node_process_modules():
    extra = sorted(path.name for path in SCHEDULER.glob("*.py") if path.name not in NODE_PROCESS)
    assert not extra, f"modules at the root of scheduler/ that belong in one of its packages: {extra}"

"""The host side: start a scenario in a fresh private namespace and read its verdict
(used by the pytest scenarios and by `python -m tests.chaos.run` started on the host).

The scenario runs as PID 1 of new PID, mount and network namespaces (`unshare --net --pid
--mount --fork --kill-child --mount-proc`): nothing on the host connects to its addresses,
and when it ends (or is killed on timeout) every process it started dies with it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.chaos.netns import HOST_NETNS_ENV, netns_inode

ROOT = Path(__file__).resolve().parents[2]
UNSHARE = ["unshare", "--net", "--pid", "--mount", "--fork", "--kill-child", "--mount-proc"]


def chosen_seed() -> int:
    """CHAOS_SEED when set (to rerun a failure), else a fresh random seed."""
    return int(os.environ["CHAOS_SEED"]) if os.environ.get("CHAOS_SEED") else random.randrange(1 << 32)


def launch(scenario: str, seed: int, workdir: Path, timeout_s: float, extra: list[str] = (), stream=None) -> dict:
    """Run `scenario` in its own namespaces; its verdict (a failure verdict on crash or timeout)."""
    out = workdir / f"{scenario}-{seed}.json"
    command = [
        *UNSHARE,
        sys.executable,
        "-m",
        "tests.chaos.run",
        scenario,
        "--seed",
        str(seed),
        "--out",
        str(out),
        "--workdir",
        str(workdir),
        *extra,
    ]
    env = {**os.environ, HOST_NETNS_ENV: str(netns_inode()), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=stream, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # unshare dies; --kill-child takes the namespace down
        process.wait()
        return {
            "scenario": scenario,
            "seed": seed,
            "ok": False,
            "violations": [],
            "error": f"timed out after {timeout_s:.0f}s",
        }
    if not out.exists():
        return {
            "scenario": scenario,
            "seed": seed,
            "ok": False,
            "violations": [],
            "error": f"no verdict (exit status {process.returncode})",
        }
    return json.loads(out.read_text())


def passed(verdict: dict) -> bool:
    return not verdict.get("error") and not verdict.get("violations")


def describe(verdict: dict) -> str:
    lines = [
        f"chaos scenario {verdict['scenario']} seed {verdict['seed']}: "
        f"{'ok' if passed(verdict) else 'FAILED'}; rerun with CHAOS_SEED={verdict['seed']}"
    ]
    violations = verdict.get("violations", [])
    if len(violations) > 30:
        counts = Counter(v["check"] for v in violations)
        lines.append(f"  {len(violations)} violations: " + ", ".join(f"{c} {n}" for c, n in counts.most_common()))
    lines += [f"  {v['check']}: {v['message']}" for v in violations[:30]]
    if verdict.get("error"):
        lines.append(verdict["error"])
    for name, tail in (verdict.get("logs") or {}).items():
        lines.append(f"--- {name} (last lines) ---\n{tail}")
    return "\n".join(lines)

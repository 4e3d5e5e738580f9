"""The host side: start a scenario in a fresh private namespace and read its verdict.

    python -m tests.chaos.launch SCENARIO [--seed N]     one scenario
    python -m tests.chaos.launch soak --minutes 30       the long soak (not run in CI)

The scenario runs as PID 1 of new PID, mount and network namespaces (`unshare --net --pid
--mount --fork --kill-child --mount-proc`): nothing on the host connects to its addresses,
and when it ends (or is killed on timeout) every process it started dies with it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
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
    command = [*UNSHARE, sys.executable, "-m", "tests.chaos.run", scenario, "--seed", str(seed),
               "--out", str(out), "--workdir", str(workdir), *extra]
    env = {**os.environ, HOST_NETNS_ENV: str(netns_inode()), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=stream, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # unshare dies; --kill-child takes the namespace down
        process.wait()
        return {"scenario": scenario, "seed": seed, "ok": False, "violations": [],
                "error": f"timed out after {timeout_s:.0f}s"}
    if not out.exists():
        return {"scenario": scenario, "seed": seed, "ok": False, "violations": [],
                "error": f"no verdict (exit status {process.returncode})"}
    return json.loads(out.read_text())


def describe(verdict: dict) -> str:
    lines = [f"chaos scenario {verdict['scenario']} seed {verdict['seed']}: "
             f"{'ok' if verdict['ok'] else 'FAILED'}; rerun with CHAOS_SEED={verdict['seed']}"]
    lines += [f"  {v['check']}: {v['message']}" for v in verdict.get("violations", [])[:30]]
    if verdict.get("error"):
        lines.append(verdict["error"])
    for name, tail in (verdict.get("logs") or {}).items():
        lines.append(f"--- {name} (last lines) ---\n{tail}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.launch")
    parser.add_argument("scenario")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--minutes", type=float, default=None)
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args()
    seed = options.seed if options.seed is not None else random.randrange(1 << 32)
    extra = (["--minutes", str(options.minutes)] if options.minutes else []) + (["--keep"] if options.keep else [])
    timeout_s = 600 + 60 * (options.minutes or 0) * 2
    with tempfile.TemporaryDirectory(prefix="chaos-") as workdir:
        verdict = launch(options.scenario, seed, Path(workdir), timeout_s, extra, stream=None)
    print(describe(verdict))
    print(json.dumps(verdict.get("stats", {})))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""Run one chaos scenario and judge it with the history checker.

    python -m tests.chaos.run SCENARIO [--seed N]      e.g. pause_leader; as root
    python -m tests.chaos.run soak --minutes 30        the long soak (not run in CI)

Started on the host, it starts itself again as PID 1 of fresh net, PID and mount namespaces
(tests/chaos/launch.py) and prints the verdict. Inside, it refuses to run unless its network
namespace is private (see netns.py); it brings `lo` up,
starts the cluster on 127.0.0.2.., injects the scenario's faults, records the history,
runs the checker and writes {"ok", "violations", "seed", ...}. Everything it started dies
with it: it is PID 1 of its own PID namespace.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from tests.chaos import netns
from tests.chaos.checker import check
from tests.chaos.harness import Scene, say
from tests.chaos.scenarios import SCENARIOS

PROXY_VARIABLES = ("http_proxy", "https_proxy", "grpc_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def _node_log_tails(scene: Scene, lines: int = 40) -> dict[str, str]:
    tails = {}
    paths = [(m.node_id, m.log_path) for m in scene.cluster.lc.members]
    if scene.workers is not None:
        paths += [(w.worker_id, w.log_path) for w in scene.workers.procs.values()]
    for name, path in paths:
        if path.exists():
            tails[name] = "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return tails


def run(name: str, seed: int, workdir: Path, options: argparse.Namespace) -> dict:
    scenario = SCENARIOS[name]
    rng = random.Random(seed)
    verdict: dict = {"scenario": name, "seed": seed, "ok": False, "violations": [], "error": None}
    started = time.monotonic()
    scene = Scene(workdir, rng, nodes=scenario.nodes, **scenario.settings)
    try:
        history = scenario.run(scene, options)
        violations = check(history)
        verdict["violations"] = [{"check": v.check, "message": v.message} for v in violations]
        verdict["ok"] = not violations
        verdict["stats"] = {
            **scene.recorder.stats,
            "runs": len(next(iter(history.replicas.values()), [])),
            "grants": len(history.grants),
            "answers": len(history.answers),
            "sink_writes": len(history.sink),
            "acked_writes": len(history.acked),
            "due_slots": sum(len(slots) for slots in history.due.values()),
            "peak_rss_mib": {n: max(s[1] for s in v) // 1024 for n, v in history.resources.items() if v},
            "peak_journal_mib": {n: round(max(s[2] for s in v) / 2**20, 1) for n, v in history.resources.items() if v},
        }
    except Exception:  # the verdict carries the failure; cleanup still runs
        verdict["error"] = traceback.format_exc()
    finally:
        if not verdict["ok"]:
            verdict["logs"] = _node_log_tails(scene)
        scene.close()
    verdict["elapsed_s"] = round(time.monotonic() - started, 1)
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.run")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help="where to write the verdict (inside the namespace)")
    parser.add_argument("--workdir", type=Path, default=None, help="parent of the scenario's temporary directory")
    parser.add_argument("--minutes", type=float, default=5.0, help="soak only: how long to inject faults")
    parser.add_argument("--keep", action="store_true", help="keep node data and logs")
    options = parser.parse_args(argv)
    seed = options.seed = options.seed if options.seed is not None else random.randrange(1 << 32)
    if not os.environ.get(netns.HOST_NETNS_ENV):
        return _from_the_host(options, argv if argv is not None else sys.argv[1:])
    say(f"chaos scenario {options.scenario} seed {seed}")
    netns.loopback_up()  # raises unless this is a private namespace with only lo
    for variable in PROXY_VARIABLES:
        os.environ.pop(variable, None)
    workdir = Path(tempfile.mkdtemp(prefix=f"chaos-{options.scenario}-", dir=options.workdir))
    try:
        verdict = run(options.scenario, seed, workdir, options)
    finally:
        if not options.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    options.out.write_text(json.dumps(verdict, indent=1))
    say(
        f"verdict: {'ok' if verdict['ok'] else 'FAILED'} ({len(verdict['violations'])} violations) "
        f"seed {seed} in {verdict['elapsed_s']}s"
    )
    for violation in verdict["violations"][:20]:
        say(f"  {violation['check']}: {violation['message']}")
    if verdict["error"]:
        print(verdict["error"], file=sys.stderr)
    return 0 if verdict["ok"] else 1


def _from_the_host(options: argparse.Namespace, argv: list[str]) -> int:
    from tests.chaos.launch import describe, launch, passed

    extra = ["--minutes", str(options.minutes)] + (["--keep"] if options.keep else [])
    timeout_s = 600 + 120 * options.minutes
    with tempfile.TemporaryDirectory(prefix="chaos-", dir=options.workdir) as workdir:
        verdict = launch(options.scenario, options.seed, Path(workdir), timeout_s, extra)
    print(describe(verdict))
    print(json.dumps(verdict.get("stats", {})))
    return 0 if passed(verdict) else 1


if __name__ == "__main__":
    sys.exit(main())

"""(7) Clock skew: one node's wall clock 90 s off (ahead or behind, by seed) becomes leader,
then its clock steps a minute forward, then it is killed. The skew comes from a shim loaded
into that node only (tests/chaos/skew/sitecustomize.py); its monotonic clock is untouched."""

from __future__ import annotations

import time
from pathlib import Path

from tests.chaos.harness import Scene, say, setpriv
from tests.chaos.observe import finale
from tests.chaos.scenarios.load import start_load

SKEW_DIR = Path(__file__).resolve().parents[1] / "skew"
ROOT = Path(__file__).resolve().parents[3]


def _skewed_start(scene: Scene, node_id: str, clock_file: Path) -> None:
    cluster = scene.cluster
    cluster.lc.command_prefix = [
        "env",
        f"PYTHONPATH={SKEW_DIR}:{ROOT}",
        f"RAFTCRON_CHAOS_CLOCK_FILE={clock_file}",
        *setpriv(cluster.gid(node_id)),
    ]
    cluster.lc.start(node_id)


def _make_leader(scene: Scene, node_id: str, clock_file: Path) -> None:
    """Kill whoever else leads until `node_id` wins an election (a few tries)."""
    cluster = scene.cluster
    for _ in range(12):
        leader = cluster.wait_for_leader(30)
        if leader == node_id:
            return
        cluster.kill(leader)
        cluster.wait_for_leader(30, exclude=(leader,))
        cluster.start(leader)
        time.sleep(0.5)
    raise RuntimeError(f"{node_id} never became leader")


def clock_skew(scene: Scene, options):
    cluster, recorder, rng = scene.cluster, scene.recorder, scene.rng
    skewed = rng.choice(cluster.ids)
    skew_s = rng.choice((90, -90))
    clock_file = scene.workdir / f"{skewed}.clock"
    clock_file.write_text(str(skew_s))
    for node_id in cluster.ids:
        if node_id == skewed:
            _skewed_start(scene, node_id, clock_file)
        else:
            cluster.start(node_id)
    cluster.wait_for_leader(30)
    load = start_load(scene, herd=50, raw_jobs=10, raw_workers=2, triggers=100_000)
    _make_leader(scene, skewed, clock_file)
    say(f"{skewed}, clock {skew_s:+d}s, leads")
    time.sleep(4)
    clock_file.write_text(str(skew_s + 60))
    say(f"{skewed}'s clock stepped a minute forward")
    time.sleep(3)
    status = cluster.status(skewed)
    cluster.kill(skewed)
    successor = cluster.wait_for_leader(30, exclude=(skewed,))
    say(
        f"killed {skewed}; {successor} leads (replicated time was {status.replicated_time.ToSeconds() - time.time():+.0f}s "
        "from real time)"
    )
    time.sleep(4)
    _skewed_start(scene, skewed, clock_file)
    cluster.wait_caught_up(skewed)
    recorder.expect("the skewed node led", True, f"{skewed} {skew_s:+d}s")
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep)

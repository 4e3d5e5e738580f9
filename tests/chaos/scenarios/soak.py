"""The long soak (not in CI): `python -m tests.chaos.run soak --minutes 30`.

Every load at once (raw workers, SDK workers writing to the fenced sink, triggers) and a
random fault every few seconds, each undone before the next: kills, pauses, isolation,
bridges, lossy links, whole-cluster restarts, paused, cut and killed workers.
"""

from __future__ import annotations

import itertools
import signal
import time

from tests.chaos.harness import CHAOS_SETTINGS, Scene, say
from tests.chaos.jobs import apply_specs, every
from tests.chaos.observe import finale
from tests.chaos.scenarios.load import start_load

TTL_S = CHAOS_SETTINGS["lease_ttl_s"]


def _kill_leader(scene: Scene) -> None:
    leader = scene.cluster.wait_for_leader(30)
    scene.cluster.kill(leader)
    time.sleep(scene.rng.uniform(0.5, 3))
    scene.cluster.start(leader)


def _kill_follower(scene: Scene) -> None:
    leader = scene.cluster.wait_for_leader(30)
    victim = scene.rng.choice([n for n in scene.cluster.ids if n != leader])
    scene.cluster.kill(victim)
    time.sleep(scene.rng.uniform(0.5, 3))
    scene.cluster.start(victim)


def _pause_node(scene: Scene) -> None:
    victim = scene.rng.choice(scene.cluster.ids)
    scene.cluster.pause(victim)
    time.sleep(scene.rng.uniform(1, 5))
    scene.cluster.resume(victim)


def _isolate_node(scene: Scene) -> None:
    victim = scene.rng.choice(scene.cluster.ids)
    scene.firewall.isolate(victim, scene.cluster.ids)
    time.sleep(scene.rng.uniform(2, 6))
    scene.firewall.heal()


def _bridge(scene: Scene) -> None:
    a, b = scene.rng.sample(scene.cluster.ids, 2)
    scene.firewall.cut(a, b)
    time.sleep(scene.rng.uniform(2, 6))
    scene.firewall.heal()


def _lossy(scene: Scene) -> None:
    loss = scene.rng.uniform(0.1, 0.3)
    for x, y in itertools.combinations(scene.cluster.ids, 2):
        scene.firewall.cut(x, y, probability=loss)
    time.sleep(scene.rng.uniform(3, 8))
    scene.firewall.heal()


def _restart_all(scene: Scene) -> None:
    for node_id in scene.cluster.ids:
        scene.cluster.kill(node_id)
    time.sleep(scene.rng.uniform(0.2, 1))
    scene.cluster.start()


def _pause_worker(scene: Scene) -> None:
    worker_id = scene.rng.choice(sorted(scene.workers.procs))
    scene.workers.signal(worker_id, signal.SIGSTOP)
    time.sleep(2 * TTL_S)
    scene.workers.signal(worker_id, signal.SIGCONT)


def _cut_worker(scene: Scene) -> None:
    worker_id = scene.rng.choice(sorted(scene.workers.procs))
    for node_id in scene.cluster.ids:
        scene.firewall.cut(worker_id, node_id)
    time.sleep(2 * TTL_S)
    scene.firewall.heal()


def _kill_worker(scene: Scene) -> None:
    worker_id = scene.rng.choice(sorted(scene.workers.procs))
    scene.workers.procs[worker_id].process.kill()
    scene.workers.procs[worker_id].process.wait()
    time.sleep(scene.rng.uniform(0.5, 2))
    scene.workers.restart(worker_id)


FAULTS = [
    _kill_leader,
    _kill_follower,
    _pause_node,
    _isolate_node,
    _bridge,
    _lossy,
    _restart_all,
    _pause_worker,
    _cut_worker,
    _kill_worker,
]


def soak(scene: Scene, options):
    cluster, recorder = scene.cluster, scene.recorder
    workers = scene.with_workers()
    cluster.start()
    cluster.wait_for_leader()
    load = start_load(scene, herd=100, raw_jobs=10, raw_workers=2, triggers=10_000_000)
    sink_jobs = {f"sink-{i:02d}": 1 for i in range(10)}
    apply_specs(scene, [every(job_id, target="chaos.write") for job_id in sink_jobs])
    load.firing.update(sink_jobs)
    workers.start("w1", concurrency=8)
    workers.start("w2", concurrency=8)
    _ = scene.firewall  # set up before the first fault needs it
    stop = time.monotonic() + options.minutes * 60
    faults = 0
    while time.monotonic() < stop:
        time.sleep(scene.rng.uniform(2, 6))
        fault = scene.rng.choice(FAULTS)
        say(f"fault {faults + 1}: {fault.__name__.strip('_')}")
        fault(scene)
        faults += 1
        cluster.wait_for_leader(60)
    recorder.expect("faults injected", faults > 0, f"{faults} faults")
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep, sink_jobs=set(sink_jobs))

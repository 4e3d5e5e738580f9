"""Whole-cluster restarts: every node SIGKILLed at once, repeatedly, under client writes."""

from __future__ import annotations

import time

from tests.chaos.clients import ApplyWriter
from tests.chaos.harness import Scene, say
from tests.chaos.jobs import manual
from tests.chaos.observe import finale
from tests.chaos.scenarios.load import start_load


def restart_all(scene: Scene, options, rounds: int = 3):
    """(9) Kill and restart all nodes at once, repeatedly: acknowledged writes (ApplyJobs and
    TriggerJob with request ids, leases, completions) survive every restart."""
    cluster, recorder, rng = scene.cluster, scene.recorder, scene.rng
    cluster.start()
    cluster.wait_for_leader()
    load = start_load(scene, herd=50, raw_jobs=10, raw_workers=2, triggers=100_000)
    applier = ApplyWriter(
        cluster.addresses,
        recorder,
        f"w{options.seed}-",
        100_000,
        spec_for=lambda i: manual(f"written-{i:05d}"),
        threads=2,
        give_up_s=20,
    )
    scene.threads.append(applier)
    applier.start()
    acked = []
    for round_ in range(rounds):
        time.sleep(rng.uniform(1.5, 3.0))
        acked.append(applier.acked)
        for node_id in rng.sample(cluster.ids, len(cluster.ids)):
            cluster.kill(node_id)
        say(f"round {round_ + 1}: killed every node ({applier.acked} job writes acknowledged so far)")
        time.sleep(rng.uniform(0.2, 1.0))
        cluster.start()
        leader = cluster.wait_for_leader(timeout_s=30)
        say(f"restarted; leader {leader}")
    time.sleep(2)
    applier.stop()
    applier.join(timeout=30)
    recorder.expect(
        "writes acknowledged between restarts",
        acked[0] > 0 and applier.acked > acked[-1],
        f"acknowledged before each kill: {acked}, in all {applier.acked}",
    )
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep + applier.specs)
